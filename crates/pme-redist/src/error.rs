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

    /// The grid splits over more PME ranks along `axis` than its lines allow: some slab or
    /// pencil would be thinner than the interpolation order spreads a charge. An engine takes
    /// at most `most` ranks along that axis, pencils, or a finer spacing.
    #[error("{}", too_many_ranks(self))]
    TooManyRanks {
        /// `'x'` or `'y'`.
        axis: char,
        /// Grid lines along the axis.
        lines: usize,
        /// PME ranks along the axis.
        ranks: usize,
        /// Lines of the thinnest slab or pencil.
        thinnest: usize,
        /// The most PME ranks along the axis the grid allows.
        most: usize,
        /// The interpolation order, the fewest lines a slab or pencil may have.
        order: usize,
        /// Whether the grid is in pencils.
        pencils: bool,
    },

    /// A step's home atoms are not the ones the plan was made for (after a repartition):
    /// found on PE `pe` only. Call [`collective_plan`](crate::Redistribution::collective_plan)
    /// on every PE with its new home atoms.
    #[error(
        "PE {pe} redistributes {home} home atoms, but the plan is for {planned}; after a \
         repartition, every PE calls collective_plan with its new home atoms"
    )]
    PlanOutOfDate {
        /// The PE.
        pe: usize,
        /// Its home atoms in the step.
        home: usize,
        /// The home atoms of the plan.
        planned: usize,
    },

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

/// The message of [`Error::TooManyRanks`].
fn too_many_ranks(error: &Error) -> String {
    let Error::TooManyRanks { axis, lines, ranks, thinnest, most, order, pencils } = *error else {
        return String::new();
    };
    if axis == 'x' {
        let what = if pencils { "pencils" } else { "slabs" };
        format!(
            "{lines} x planes over {ranks} PME ranks along x leave {what} of {thinnest} planes, but \
             interpolation order {order} spreads each charge over {order}: the grid is too coarse for \
             the interpolation order on this many PME ranks; use at most {most} PME ranks along x, \
             pencils (PmeDecomposition::Auto, PmeGrid::new's, or Pencil), or a finer spacing"
        )
    } else {
        format!(
            "{lines} y lines over {ranks} PME ranks along y leave pencils {thinnest} lines wide, but \
             interpolation order {order} spreads each charge over {order}: use at most {most} PME \
             ranks along y or a finer spacing"
        )
    }
}

impl onesided::ScopedError for Error {
    fn scope(&self) -> ErrorScope {
        Error::scope(self)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
