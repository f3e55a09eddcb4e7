//! Smooth PME for molecular dynamics over `onesided` and MPI, in two parts:
//!
//! - **the redistribution**: coordinates and charges from the particle PEs to the PME ranks
//!   that own their part of the charge grid (slabs, or pencils in two dimensions), and
//!   forces back to their owners in their original order, between partners only (each
//!   particle PE talks to the PME ranks its atoms can reach before the next plan), one-sided
//!   or over MPI, with identical results; the PME ranks may be every PE or a subset, with a
//!   relay as GROMACS has it. [`Redistribution`]: built once ([`Redistribution::builder`], on
//!   a [`Path`](onesided::Path) or per-link [`Links`](onesided::Links)), planned at every
//!   repartition ([`collective_plan`](Redistribution::collective_plan)), and every step
//!   [`redistribute`](Redistribution::redistribute), which returns the step's view ([`Step`]):
//!   on a PME rank its atoms and the forces on them ([`Mesh`]), then
//!   [`Step::return_forces`], which brings every PE its home forces;
//! - **the mesh**: [`Pme`], a whole mesh step (spread with B-splines of the grid's order, 3 to 12, onto a rank's
//!   slab or pencil and the overlap exchange, [`SlabGrid`]; the distributed 3-D FFT,
//!   [`MeshFft`]; the solve, with [`ewald_coefficient`] from GROMACS's `ewald-rtol`, giving
//!   the energy and GROMACS's virial, [`PmeEnergy`]; the FFT back and the gather), timed per
//!   phase. It needs nothing of the redistribution but the
//!   [`Mesh`] a step hands it, whose vote on the step's error its transposes carry.
//!
//! Below both: [`PmeGrid`] (the charge grid of a rectangular or triclinic box, GROMACS's box
//! vectors, its slabs or pencils over the PME ranks, [`PmeGrid::builder`], and where an atom
//! sits on it) and [`model`] (the plans that need no runtime: which PME ranks an atom can
//! reach). [`reference`](mod@reference) holds the direct Ewald sum and serial PME the parallel
//! code is checked against.
//!
//! An engine's PME step, every PE a PME rank (the loop of `examples/pme_step.rs`):
//!
//! ```no_run
//! use onesided::{Path, Runtime};
//! use pme_redist::{Particle, Pme, PmeGrid, Redistribution, ewald_coefficient};
//!
//! fn main() -> pme_redist::Result<()> {
//!     let rt = Runtime::init()?;
//!     let pes: Vec<usize> = (0..rt.n_pes()).collect();
//!     let box_vectors = [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]];
//!     let grid = PmeGrid::new(box_vectors, 0.12, &pes)?;
//!     // This PE's home atoms (here PE 0 holds them all).
//!     let mut home: Vec<Particle> = if rt.my_pe() == 0 {
//!         (0..8u32).map(|g| Particle { x: [0.5 * g as f32, 1.0, 2.0], q: if g % 2 == 0 { 1.0 } else { -1.0 }, global: g }).collect()
//!     } else {
//!         Vec::new()
//!     };
//!     let beta = ewald_coefficient(0.9, 1e-5)?;
//!     let mut mesh = Pme::builder(&rt, &grid, beta).path(Path::OneSided).collective_build()?;
//!     let mut redist = Redistribution::builder(&rt, grid).collective_build(&home)?;
//!     let mut forces = vec![[0.0f32; 3]; home.len()];
//!     for step in 1..=10 {
//!         let mut delivered = redist.redistribute(&home)?;
//!         let share = mesh.collective_step(delivered.mesh())?; // spread, FFT, solve, gather
//!         delivered.return_forces(&mut forces)?; // this PE's reciprocal forces, home order
//!         let _energy = mesh.collective_energy(share)?.energy;
//!         for (p, f) in home.iter_mut().zip(&forces) {
//!             p.x[0] += 1e-4 * f[0];
//!         }
//!         if step % 5 == 0 {
//!             redist.collective_plan(&home)?;
//!         }
//!     }
//!     Ok(())
//! }
//! ```
#![deny(missing_docs)]

mod error;
mod grid;
mod mesh;
pub mod model;
mod particle;
mod redist;
pub mod reference;
pub mod spline;
mod threads;

pub use error::{Error, Result};
pub use grid::{PmeDecomposition, PmeGrid, PmeGridBuilder};
pub use mesh::{
    Complex32, MeshFft, ONE_4PI_EPS0, Pme, PmeBuilder, PmeEnergy, PmeTimes, SlabGrid, ewald_coefficient,
    ewald_self_energy,
};
pub use onesided::ErrorScope;
pub use particle::{Mesh, Particle, RVec};
#[cfg(feature = "baselines")]
pub use redist::RedistBaseline;
pub use redist::{GROWTH_FACTOR, RedistBuilder, Redistribution, Step};
