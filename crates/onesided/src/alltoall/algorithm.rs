//! The all-to-all's algorithms ([`AlltoallAlgorithm`]): what [`Path`] resolves to, and what a
//! benchmark pins.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::path::Path;

/// Which algorithm an [`Alltoall`](crate::Alltoall) runs: what its [`Path`] resolves to
/// ([`Path::OneSided`] the ordered one-sided, [`Path::Mpi`] `MPI_Alltoall`, [`Path::Auto`]
/// the fastest measured), or what a benchmark pins
/// ([`AlltoallBuilder::algorithm`](crate::AlltoallBuilder::algorithm)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlltoallAlgorithm {
    /// Kutzner et al.'s ordered phases, one-sided puts with signals, pairwise readiness.
    Ordered,
    /// Ordered over nodes, then over the members of a node; one-sided.
    NodeAware,
    /// The ordered phases as `MPI_Sendrecv`.
    OrderedMpi,
    /// `MPI_Alltoall`.
    Mpi,
    /// `shmem_alltoall64` / `shmem_alltoall32` on the group as an active set: a benchmark
    /// baseline, with the `baselines` feature.
    #[cfg(feature = "baselines")]
    Shmem,
}

impl AlltoallAlgorithm {
    /// Every algorithm, in the order reports list them.
    #[cfg(not(feature = "baselines"))]
    pub const ALL: [AlltoallAlgorithm; 4] = [
        AlltoallAlgorithm::Ordered,
        AlltoallAlgorithm::NodeAware,
        AlltoallAlgorithm::OrderedMpi,
        AlltoallAlgorithm::Mpi,
    ];

    /// Every algorithm, in the order reports list them.
    #[cfg(feature = "baselines")]
    pub const ALL: [AlltoallAlgorithm; 5] = [
        AlltoallAlgorithm::Ordered,
        AlltoallAlgorithm::NodeAware,
        AlltoallAlgorithm::OrderedMpi,
        AlltoallAlgorithm::Mpi,
        AlltoallAlgorithm::Shmem,
    ];

    /// The algorithm of `path`'s fixed choice (`None` for [`Path::Auto`], which measures).
    pub fn of(path: Path) -> Option<AlltoallAlgorithm> {
        match path {
            Path::OneSided => Some(AlltoallAlgorithm::Ordered),
            Path::Mpi => Some(AlltoallAlgorithm::Mpi),
            Path::Auto => None,
        }
    }

    /// Whether it runs on OpenSHMEM's puts with signals (and can write through the mapping).
    pub(super) fn one_sided(self) -> bool {
        matches!(self, AlltoallAlgorithm::Ordered | AlltoallAlgorithm::NodeAware)
    }

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            AlltoallAlgorithm::Ordered => "ordered-onesided",
            AlltoallAlgorithm::NodeAware => "node-aware-onesided",
            AlltoallAlgorithm::OrderedMpi => "ordered-mpi",
            AlltoallAlgorithm::Mpi => "mpi",
            #[cfg(feature = "baselines")]
            AlltoallAlgorithm::Shmem => "shmem",
        }
    }
}

impl fmt::Display for AlltoallAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AlltoallAlgorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<AlltoallAlgorithm> {
        AlltoallAlgorithm::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<&str> = AlltoallAlgorithm::ALL.iter().map(|p| p.name()).collect();
            Error::InvalidArgument(format!(
                "unknown all-to-all algorithm {s:?}: expected one of {}",
                names.join(", ")
            ))
        })
    }
}
