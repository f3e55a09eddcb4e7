//! The crate's error type.

use onesided::ErrorScope;

/// What went wrong, with where and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that cannot work (box, range, grid, array lengths), with what would, found
    /// by this PE alone.
    #[error("{0}")]
    Config(String),

    /// A parameter that cannot work, found after the PEs compared what they passed: every PE
    /// returns this error from the same call.
    #[error("{0}")]
    CollectiveConfig(String),

    /// An atom moved farther than half the Verlet buffer since the last repartition, so a
    /// pair may have come within the cutoff without being in the halo.
    #[error(
        "atom {atom} on PE {pe} moved {displacement:.4} nm since the last repartition, more than \
         half the Verlet buffer of {buffer:.4} nm: pairs within the cutoff may have been missed; \
         repartition more often or enlarge the buffer (md_halo::verlet_buffer)"
    )]
    BufferExceeded {
        /// Its global index.
        atom: usize,
        /// The PE that holds it.
        pe: usize,
        /// How far it moved, in nm.
        displacement: f32,
        /// The buffer, in nm.
        buffer: f32,
    },

    /// An atom moved too far between two repartitions.
    #[error(
        "atom {atom} moved from domain {from:?} to domain {to:?}, more domains in a dimension \
         between two repartitions than the halo allows (one, or with staggered rows one more \
         per earlier split dimension); repartition more often (fewer steps between \
         repartitions)"
    )]
    MovedTooFar {
        /// Its global index.
        atom: usize,
        /// Its old domain.
        from: [usize; 3],
        /// Its new domain.
        to: [usize; 3],
    },

    /// An atom handed to a PE lies outside that PE's domain.
    #[error(
        "atom {atom} was given to PE {pe} (domain {domain:?}) but lies in domain {belongs:?}; give \
         each PE the atoms of its own domain (DdGrid::pe_of_position)"
    )]
    NotHome {
        /// Its global index.
        atom: usize,
        /// The PE it was given to.
        pe: usize,
        /// That PE's domain.
        domain: [usize; 3],
        /// The domain it lies in.
        belongs: [usize; 3],
    },

    /// An atom's position is not finite (NaN or infinite): the simulation has blown up, or
    /// the input is corrupt.
    #[error(
        "atom {atom} has a position that is not finite{}; check the input or the integration",
        pe.map(|p| format!(" on PE {p}")).unwrap_or_default()
    )]
    NotFinite {
        /// Its global index.
        atom: usize,
        /// The PE that holds it, where one does.
        pe: Option<usize>,
    },

    /// The communication layer reported an error.
    #[error(transparent)]
    Comm(#[from] onesided::Error),

    /// A neighbour sent a different number of elements than this PE's plan expects: the PEs'
    /// plans disagree (they were built from different calls).
    #[error("{0}")]
    PlanMismatch(String),
}

impl Error {
    /// Whether every PE returns this error from the same call
    /// ([`ErrorScope::EveryPe`]: end normally, every PE alike) or only this PE
    /// ([`ErrorScope::ThisPe`]: its neighbours may wait for it; end the job with
    /// [`onesided::Runtime::abort`]).
    pub fn scope(&self) -> ErrorScope {
        match self {
            Error::CollectiveConfig(_)
            | Error::BufferExceeded { .. }
            | Error::MovedTooFar { .. }
            | Error::NotHome { .. }
            | Error::NotFinite { .. } => ErrorScope::EveryPe,
            Error::Comm(e) => e.scope(),
            _ => ErrorScope::ThisPe,
        }
    }
}

impl onesided::ScopedError for Error {
    fn scope(&self) -> ErrorScope {
        Error::scope(self)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
