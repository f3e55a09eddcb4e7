//! The all-to-all's builder: its path or a pinned algorithm, and its group (borrowed or
//! kept).

use std::marker::PhantomData;

use bytemuck::Pod;

use super::algorithm::AlltoallAlgorithm;
use super::state::{Alltoall, GroupRef};
use crate::error::Result;
use crate::group::PeGroup;
use crate::path::Path;

/// The choices an [`Alltoall`] is built with ([`Alltoall::builder`]).
#[derive(Clone, Debug)]
#[must_use = "a builder builds nothing until collective_build"]
pub struct AlltoallBuilder<T> {
    name: String,
    block: usize,
    path: Path,
    algorithm: Option<AlltoallAlgorithm>,
    elements: PhantomData<fn() -> T>,
}

impl<T: Pod> Alltoall<'_, '_, T> {
    /// Starts building an all-to-all named `name` of `block` elements per pair of members, on
    /// [`Path::OneSided`] unless the builder says otherwise.
    pub fn builder(name: &str, block: usize) -> AlltoallBuilder<T> {
        AlltoallBuilder {
            name: name.to_string(),
            block,
            path: Path::OneSided,
            algorithm: None,
            elements: PhantomData,
        }
    }
}

impl<T: Pod> AlltoallBuilder<T> {
    /// The path: [`Path::OneSided`] (the ordered one-sided algorithm, the default),
    /// [`Path::Mpi`] (`MPI_Alltoall`), or [`Path::Auto`]: the algorithm measured fastest for
    /// this group size and block on this job's nodes (each candidate makes a few calls when
    /// it is built, interleaved with the others' where their buffers fit together; the
    /// median call, each timed as its slowest member's, decides; the choice is cached like
    /// the exchanges' links, and [`Alltoall::algorithm`] says which it took), as cuDecomp
    /// chooses among its transpose back ends.
    pub fn path(self, path: Path) -> Self {
        AlltoallBuilder { path, algorithm: None, ..self }
    }

    /// One algorithm, whatever the path: for benchmarks and tests of each.
    pub fn algorithm(self, algorithm: AlltoallAlgorithm) -> Self {
        AlltoallBuilder { algorithm: Some(algorithm), ..self }
    }

    /// Builds the all-to-all on `group`.
    ///
    /// # Collective
    /// Every PE of the job (members or not) must call it with the same choices.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`](crate::Error::SizeOverflow) for buffers beyond the address
    /// space; on the shmem baseline, [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// when the group is not an active set or a block is not a whole number of 32-bit words;
    /// what a calibration's calls report.
    pub fn collective_build<'g, 'rt>(self, group: &'g PeGroup<'rt>) -> Result<Alltoall<'g, 'rt, T>> {
        self.collective_on(GroupRef::Borrowed(group))
    }

    /// [`collective_build`](Self::collective_build) on a group the all-to-all keeps (one of
    /// [`PeGroup::collective_split`]'s, say, made for it alone).
    ///
    /// # Collective
    /// As [`collective_build`](Self::collective_build): every PE calls it, each with its own
    /// part of the same split.
    ///
    /// # Errors
    /// As [`collective_build`](Self::collective_build).
    pub fn collective_build_owning<'g, 'rt>(self, group: PeGroup<'rt>) -> Result<Alltoall<'g, 'rt, T>> {
        self.collective_on(GroupRef::Owned(Box::new(group)))
    }

    fn collective_on<'g, 'rt>(self, group: GroupRef<'g, 'rt>) -> Result<Alltoall<'g, 'rt, T>> {
        let AlltoallBuilder { name, block, path, algorithm, .. } = self;
        let algorithm = match algorithm.or(AlltoallAlgorithm::of(path)) {
            Some(algorithm) => algorithm,
            None => Alltoall::<T>::collective_calibrate(&group, &name, block)?,
        };
        Alltoall::collective_with(group, &name, block, algorithm)
    }
}
