//! The crate's error type.

/// What went wrong, with where and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {path}: {problem}")]
    Io {
        /// The file.
        path: String,
        /// The system's reason.
        problem: String,
    },

    /// An input file is malformed.
    #[error("{file} line {line}: {problem}")]
    Input {
        /// The file.
        file: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },

    /// A parameter that cannot work (cutoff, grid, replication), with what would.
    #[error("{0}")]
    Config(String),

    /// An atom moved too far between two repartitions.
    #[error(
        "atom {atom} moved from domain {from:?} to domain {to:?}, more than one domain in a \
         dimension between two repartitions; repartition more often (a smaller --nstlist)"
    )]
    MovedTooFar {
        /// Its global index.
        atom: usize,
        /// Its old domain.
        from: [usize; 3],
        /// Its new domain.
        to: [usize; 3],
    },

    /// The communication layer reported an error.
    #[error(transparent)]
    Comm(#[from] onesided::Error),

    /// A built-in verification found a difference.
    #[error("verification failed: {0}")]
    Verification(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
