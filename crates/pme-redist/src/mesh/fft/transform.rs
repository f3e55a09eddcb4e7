//! The one public FFT type over the two decompositions' transforms.

use std::ops::Range;
use std::time::Duration;

use onesided::{AlltoallAlgorithm, Path, Runtime};

use super::blocks::Complex32;
use super::pencil::PencilFft;
use super::slab::SlabFft;
use crate::error::Result;
use crate::grid::PmeGrid;

/// The distributed 3-D FFT of a [`PmeGrid`] over its PME ranks, in slabs or pencils as the
/// grid is split ([`Pme`](crate::Pme) holds one; this is the FFT alone, for benchmarks and
/// for engines with a solver of their own).
///
/// A PME rank's real block is its x planes ([`PmeGrid::slab`]) by its y lines
/// ([`PmeGrid::lines`]: every line with slabs) by every z, z fastest. Its spectrum is
/// `[kz - kz_lo][y - y_lo][x]` over [`spectrum_z`](Self::spectrum_z) and
/// [`spectrum_lines`](Self::spectrum_lines), every x.
///
/// It owns the PE groups its transposes run in (the grid's PME ranks, or with pencils their
/// rows and columns), so it borrows only the runtime: an engine holds it, or the [`Pme`]
/// that holds it, beside its other state.
///
/// [`Pme`]: crate::Pme
pub struct MeshFft<'rt> {
    transform: Transform<'rt>,
}

/// The decomposition's FFT.
enum Transform<'rt> {
    Slab(Box<SlabFft<'rt>>),
    Pencil(Box<PencilFft<'rt>>),
}

impl<'rt> MeshFft<'rt> {
    /// The FFT of `grid` over its PME ranks; the transposes go over `path`, on `algorithm`
    /// where it is given (for benchmarks and tests of each) and otherwise on the one `path`
    /// picks ([`Path::Auto`]: the one measured fastest for the grid's blocks).
    ///
    /// # Collective
    /// Every PE of the job must call it with the same arguments (the all-to-alls' buffers are
    /// symmetric, and the PME ranks' groups are made here); PEs outside the grid's PME ranks
    /// hold nothing.
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when the path cannot serve the PME ranks (the shmem baseline needs an
    /// active set); [`Error::Comm`](crate::Error::Comm) when a group cannot be made or the symmetric heap cannot
    /// hold the transposes' buffers.
    pub fn collective_new(
        rt: &'rt Runtime,
        grid: &PmeGrid,
        path: Path,
        algorithm: Option<AlltoallAlgorithm>,
    ) -> Result<Self> {
        let transform = if grid.is_pencil() {
            Transform::Pencil(Box::new(PencilFft::collective_new(rt, grid, path, algorithm)?))
        } else {
            Transform::Slab(Box::new(SlabFft::collective_new(rt, grid, path, algorithm)?))
        };
        Ok(MeshFft { transform })
    }

    /// The transposes' all-to-all algorithm (with pencils, the row transposes'; for
    /// [`Path::Auto`], the one it took).
    pub fn algorithm(&self) -> AlltoallAlgorithm {
        match &self.transform {
            Transform::Slab(fft) => fft.algorithm(),
            Transform::Pencil(fft) => fft.algorithm(),
        }
    }

    /// The y lines of this rank's spectrum (empty on PEs that are not PME ranks).
    pub fn spectrum_lines(&self) -> Range<usize> {
        match &self.transform {
            Transform::Slab(fft) => fft.spectrum_lines(),
            Transform::Pencil(fft) => fft.spectrum_lines(),
        }
    }

    /// The complex z values of this rank's spectrum, of `Kz / 2 + 1` (every one with slabs):
    /// the others are the complex conjugates of these at the mirrored wave vector.
    pub fn spectrum_z(&self) -> Range<usize> {
        match &self.transform {
            Transform::Slab(fft) if fft.spectrum_lines().is_empty() => 0..0,
            Transform::Slab(fft) => 0..fft.complex_z(),
            Transform::Pencil(fft) => fft.spectrum_z(),
        }
    }

    /// This rank's spectrum after [`forward`](Self::forward), laid out as the type says.
    pub fn spectrum(&self) -> &[Complex32] {
        match &self.transform {
            Transform::Slab(fft) => fft.spectrum(),
            Transform::Pencil(fft) => fft.spectrum(),
        }
    }

    /// The spectrum, to change before [`backward`](Self::backward).
    pub fn spectrum_mut(&mut self) -> &mut [Complex32] {
        match &mut self.transform {
            Transform::Slab(fft) => fft.spectrum_mut(),
            Transform::Pencil(fft) => fft.spectrum_mut(),
        }
    }

    /// The time spent in the transposes' communication, both ways, since creation: with slabs
    /// the all-to-all call after packing (as GROMACS's `PME 3D-FFT Comm.` counts it), or,
    /// where the one-sided paths pack straight into the receivers' memory, the packing and
    /// signals; with pencils the whole transposes.
    pub fn transpose_time(&self) -> Duration {
        match &self.transform {
            Transform::Slab(fft) => fft.transpose_time(),
            Transform::Pencil(fft) => fft.transpose_time(),
        }
    }

    /// The time spent in the whole transposes, both ways, since creation, on every path:
    /// packing, communication and unpacking, what one path's transpose costs against
    /// another's.
    pub fn exchange_time(&self) -> Duration {
        match &self.transform {
            Transform::Slab(fft) => fft.exchange_time(),
            Transform::Pencil(fft) => fft.transpose_time(),
        }
    }

    /// Transforms this rank's real block into its part of the spectrum.
    ///
    /// # Collective
    /// Every PME rank must call it; other PEs must not.
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) on a PE that is not a PME rank or for a block of the wrong length;
    /// [`Error::Comm`](crate::Error::Comm) when a transpose fails.
    pub fn forward(&mut self, block: &[f32]) -> Result<()> {
        self.forward_voting(block, u64::MAX).map(drop)
    }

    /// [`forward`](Self::forward), with this rank's `ballot` in the PME ranks' vote that the
    /// transposes carry; the smallest ballot of every rank.
    pub(crate) fn forward_voting(&mut self, block: &[f32], ballot: u64) -> Result<u64> {
        match &mut self.transform {
            Transform::Slab(fft) => fft.forward_voting(block, ballot),
            Transform::Pencil(fft) => fft.forward_voting(block, ballot),
        }
    }

    /// Transforms this rank's spectrum back into its real block (in the layout
    /// [`forward`](Self::forward) takes), not normalised.
    ///
    /// # Collective
    /// As [`forward`](Self::forward).
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn backward(&mut self, block: &mut [f32]) -> Result<()> {
        match &mut self.transform {
            Transform::Slab(fft) => fft.backward(block),
            Transform::Pencil(fft) => fft.backward(block),
        }
    }
}

impl std::fmt::Debug for MeshFft<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.transform {
            Transform::Slab(fft) => fft.fmt(f),
            Transform::Pencil(fft) => fft.fmt(f),
        }
    }
}
