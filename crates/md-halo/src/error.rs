//! The crate's error type.

/// What went wrong, with where and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that cannot work (box, range, grid, array lengths), with what would.
    #[error("{0}")]
    Config(String),

    /// An atom moved too far between two repartitions.
    #[error(
        "atom {atom} moved from domain {from:?} to domain {to:?}, more than one domain in a \
         dimension between two repartitions; repartition more often (fewer steps between \
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
    #[error("atom {atom} has a position that is not finite{}; check the input or the integration", pe.map(|p| format!(" on PE {p}")).unwrap_or_default())]
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

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
