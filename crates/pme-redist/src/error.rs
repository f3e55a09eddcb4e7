//! The crate's error type.

use onesided::ErrorScope;

/// What went wrong, with where and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that cannot work (box, spacing, PME rank count, a call that does not fit the
    /// plan), with what would.
    #[error("{0}")]
    Config(String),

    /// A parameter that cannot work, found after the PEs compared what they passed: every PE
    /// returns this error from the same call.
    #[error("{0}")]
    CollectiveConfig(String),

    /// An atom left the slabs or pencils its plan expects: found on one PE, reported by every
    /// PE.
    #[error(
        "atom {atom} on PE {pe} moved too far for the redistribution plan (onto a PME slab or \
         pencil it could not reach from where it was when the plan was built, by the \
         displacement margin or one slab or pencil either way); rebuild the plan more often, \
         or allow a larger margin"
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

impl Error {
    /// Whether every PE returns this error from the same call
    /// ([`ErrorScope::EveryPe`]: end normally, every PE alike) or only this PE
    /// ([`ErrorScope::ThisPe`]: the others may wait for it; end the job with
    /// [`onesided::Runtime::abort`]).
    pub fn scope(&self) -> ErrorScope {
        match self {
            Error::CollectiveConfig(_) | Error::MovedTooFar { .. } => ErrorScope::EveryPe,
            Error::Comm(e) => e.scope(),
            _ => ErrorScope::ThisPe,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
