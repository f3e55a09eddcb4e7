//! Domain-decomposition halo exchange for molecular dynamics: coordinates out to the
//! neighbouring domains every step, forces back, over `onesided` (the offset-swap send-receive)
//! or over MPI two-sided, chosen by one parameter ([`onesided::ExchangePath`]), with identical results.
//!
//! The crate knows no physics and no file format: an engine hands it the box, its atoms'
//! positions and global indices, the interaction range and the grid, and gets back the halo
//! coordinates every step and its home atoms' total forces.
//!
//! - [`PbcBox`]: the periodic box, rectangular or triclinic, as GROMACS defines it;
//! - [`DdGrid`]: the grid of domains, one per PE, in the box's fractional coordinates;
//! - [`HaloExchange`]: the plan, built at (re)partition, and [`move_x`](HaloExchange::move_x) /
//!   [`move_f`](HaloExchange::move_f) every step (or, for a kernel that writes its forces
//!   into the exchange's own array, [`coordinates_and_forces_mut`](HaloExchange::coordinates_and_forces_mut)
//!   and [`move_f_in_place`](HaloExchange::move_f_in_place), which sends the halo forces from
//!   where they were written); per-atom state of any plain-old-data type
//!   migrates with its atoms ([`AtomState`]), and any per-atom field travels along the plan
//!   ([`collective_spread`](HaloExchange::collective_spread));
//! - [`PeriodicImages`]: along dimensions of the grid with one domain, the periodic images
//!   are copied by the exchange (the default) or left to the force kernel, which adds a shift
//!   where it loads them, as GROMACS's does ([`HaloExchange::images`]);
//! - [`model`]: every domain's plan computed in one process without a runtime, for scale
//!   models.
//!
//! An engine's step, with velocities migrating at repartition:
//!
//! ```no_run
//! # fn forces(halo: &md_halo::HaloExchange<'_>) -> Vec<md_halo::RVec> { vec![[0.0; 3]; halo.local_count()] }
//! # fn main() -> md_halo::Result<()> {
//! use md_halo::{DdGrid, HaloExchange, PbcBox};
//! use onesided::{ExchangePath, Runtime};
//!
//! let rt = Runtime::init()?;
//! let pbc = PbcBox::rectangular([6.0, 6.0, 6.0])?;
//! let positions: Vec<[f32; 3]> = (0..1000).map(|i| [i as f32 * 0.006, 3.0, 3.0]).collect();
//! let grid = DdGrid::choose(rt.n_pes(), pbc, 1.0)?;
//! let mut halo = HaloExchange::collective_from_global(&rt, grid, ExchangePath::Put, &positions)?;
//! let mut velocities = vec![[0.1f32, 0.0, 0.0]; halo.home_count()];
//! for step in 0..100 {
//!     if step % 10 == 0 && step > 0 {
//!         halo.collective_repartition(&mut [&mut velocities])?;
//!     }
//!     halo.move_x()?;
//!     let mut f = forces(&halo); // home and halo atoms, pairs where halo.owns_pair(i, j)
//!     let _shift_forces = halo.move_f(&mut f)?;
//!     for ((x, v), f) in halo.home_coordinates_mut().iter_mut().zip(&mut velocities).zip(&f) {
//!         for d in 0..3 {
//!             v[d] += 0.002 * f[d];
//!             x[d] += 0.002 * v[d];
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod error;
mod grid;
mod halo;
pub mod model;
mod pbc;

pub use error::{Error, Result};
pub use grid::{DdGrid, MAX_PULSES};
pub use halo::{AtomState, HaloExchange, PairOwner, PeriodicImage, PeriodicImages, ShiftForces, Zone};
pub use pbc::{PbcBox, RVec};
