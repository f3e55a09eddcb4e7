//! PME redistribution for molecular dynamics: coordinates and charges from the particle PEs
//! to the PME ranks that own the slabs of the charge grid, and forces back to their owners in
//! their original order, over `onesided` (get-based, as the 2013 SHMEM port of GROMACS did it,
//! or put-based) and over MPI two-sided (`Sendrecv` pairs or `Alltoallv`), with identical
//! results. The PME ranks may be every PE or a subset of them.
//!
//! - [`PmeGrid`]: the charge grid of a rectangular or triclinic box (GROMACS's box vectors),
//!   its slabs over the PME ranks, and where an atom sits on it;
//! - [`Redistribution`]: the plan ([`collective_plan`](Redistribution::collective_plan), at
//!   every repartition) and the per-step [`redistribute`](Redistribution::redistribute) and
//!   [`return_forces`](Redistribution::return_forces) on a [`RedistPath`];
//! - [`SlabGrid`]: charge spreading with order-4 B-splines onto a PME rank's slab, the overlap
//!   exchange between slabs, the force gather; and their serial references;
//! - [`SlabFft`]: the distributed real-to-complex 3-D FFT of the grid, slabs along x in real
//!   space and along y in reciprocal space, its transposes on the library's all-to-all;
//! - [`Reciprocal`]: smooth PME's solve (B-spline moduli, influence function, energy), with
//!   [`ewald_coefficient`] from GROMACS's `ewald-rtol`;
//! - [`Pme`]: a whole mesh step (spread, FFT, solve, FFT, gather) timed per phase;
//! - [`reference`](mod@reference): the direct Ewald sum and serial PME it is checked against.
#![deny(missing_docs)]

mod error;
mod fft;
mod grid;
mod pme;
mod redist;
pub mod reference;
mod solve;
pub mod spline;
mod spread;

pub use error::{Error, Result};
pub use fft::{Complex32, SlabFft};
pub use grid::PmeGrid;
pub use pme::{MeshStep, Pme, PmeTimes};
pub use redist::{Particle, RedistPath, Redistribution};
pub use solve::{ONE_4PI_EPS0, Reciprocal, bspline_moduli, ewald_coefficient};
pub use spread::{SlabGrid, serial_gather, serial_spread};

/// A position, force or box vector: x, y and z, in nm (positions, box vectors) or
/// kJ mol⁻¹ nm⁻¹ (forces), single precision as GROMACS's `rvec`.
pub type RVec = [f32; 3];

/// Whether a loop over `len` items is worth handing to the thread pool: at least
/// `parallel_min` items, and more than one thread to share them.
fn parallel(len: usize, parallel_min: usize) -> bool {
    len >= parallel_min && rayon::current_num_threads() > 1
}
