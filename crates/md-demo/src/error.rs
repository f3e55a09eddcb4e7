//! The crate's error type.

/// What went wrong, with where and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot read {path}: {problem}")]
    Io {
        /// The file.
        path: String,
        /// The system's reason.
        problem: String,
    },

    /// An input file is malformed, or names something the demo cannot use.
    #[error("{file} line {line}: {problem}")]
    Input {
        /// The file.
        file: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it, and what to do.
        problem: String,
    },

    /// A parameter that cannot work (cutoff, replication, type table), with what would.
    #[error("{0}")]
    Config(String),

    /// The halo exchange reported an error.
    #[error(transparent)]
    Halo(#[from] md_halo::Error),

    /// The communication layer reported an error.
    #[error(transparent)]
    Comm(#[from] onesided::Error),

    /// A built-in verification found a difference.
    #[error("verification failed: {0}")]
    Verification(String),
}

impl Error {
    /// Whether every PE returns this error from the same call ([`onesided::ErrorScope::EveryPe`]:
    /// end normally, every PE alike) or possibly this PE alone
    /// ([`onesided::ErrorScope::ThisPe`]: end the job with [`onesided::Runtime::abort`]). The
    /// halo's and the communication layer's errors say which they are; the others are taken
    /// to be this PE's.
    pub fn scope(&self) -> onesided::ErrorScope {
        match self {
            Error::Halo(e) => e.scope(),
            Error::Comm(e) => e.scope(),
            _ => onesided::ErrorScope::ThisPe,
        }
    }
}

impl onesided::ScopedError for Error {
    fn scope(&self) -> onesided::ErrorScope {
        Error::scope(self)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
