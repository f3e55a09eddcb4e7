//! The crate's error type.

/// What went wrong, with where and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that cannot work (box, spacing, PME rank count, a call that does not fit the
    /// plan), with what would.
    #[error("{0}")]
    Config(String),

    /// An atom left the slabs its plan expects: found on one PE, reported by every PE.
    #[error(
        "atom {atom} on PE {pe} moved too far for the redistribution plan (more than one PME slab \
         from where it was when the plan was built); rebuild the plan more often"
    )]
    MovedTooFar {
        /// Its global index.
        atom: u32,
        /// The PE that holds it.
        pe: usize,
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
