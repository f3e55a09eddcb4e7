//! Domain-decomposition halo exchange for molecular dynamics: coordinates out to the
//! neighbouring domains every step, forces back, over `onesided` (the offset-swap send-receive)
//! or over MPI two-sided, chosen once ([`onesided::ExchangePath`]), with identical results.
//!
//! The crate knows no physics and no file format: an engine hands it the box, its atoms'
//! positions and global indices, the interaction range and the grid, and gets back the halo
//! coordinates every step and its home atoms' total forces.
//!
//! - [`PbcBox`]: the periodic box, rectangular or triclinic, as GROMACS defines it;
//! - [`DdGrid`]: the grid of domains, one per PE, in the box's fractional coordinates;
//! - [`HaloExchange`]: the plan, built once ([`HaloExchange::builder`]) and at every
//!   repartition, and every step [`move_x`](HaloExchange::move_x), which returns the step's
//!   view ([`Step`]): the coordinates, the forces a kernel writes, pair ownership and the
//!   periodic images ([`Local`]), then [`Step::move_f`], which sends the halo forces back from
//!   where the kernel wrote them; per-atom state of any plain-old-data type migrates with its
//!   atoms ([`AtomState`]), and any per-atom field travels along the plan
//!   ([`collective_spread`](HaloExchange::collective_spread));
//! - [`PeriodicImages`]: along dimensions of the grid with one domain, the periodic images
//!   are copied by the exchange (the default) or left to the force kernel, which adds a shift
//!   where it loads them, as GROMACS's does ([`Local::images`]);
//! - [`model`]: every domain's plan computed in one process without a runtime, for scale
//!   models.
//!
//! An engine's step, with velocities migrating at repartition (the loop of
//! `examples/halo_step.rs`):
//!
//! ```no_run
//! use md_halo::{DdGrid, HaloExchange, PbcBox, RVec};
//! use onesided::Runtime;
//!
//! /// The engine's force kernel: pairs `i`, `j` of local atoms where `owner.owns(i, j)`.
//! fn forces(local: md_halo::Local<'_>) {
//!     local.forces.fill([0.0; 3]);
//! }
//!
//! fn main() -> md_halo::Result<()> {
//!     let rt = Runtime::init()?;
//!     let pbc = PbcBox::rectangular([6.0, 6.0, 6.0])?;
//!     let positions: Vec<RVec> = (0..1000).map(|i| [i as f32 * 0.006, 3.0, 3.0]).collect();
//!     let grid = DdGrid::choose(rt.n_pes(), pbc, 1.0)?;
//!     let mut halo = HaloExchange::builder(&rt, grid).collective_from_global(&positions)?;
//!     let mut velocities = vec![[0.1f32, 0.0, 0.0]; halo.home_count()];
//!     for step in 1..=100 {
//!         let mut view = halo.move_x()?;
//!         forces(view.local());
//!         let _shift_forces = view.move_f()?; // for the virial
//!         let home = halo.home_mut();
//!         for ((x, v), f) in home.coordinates.iter_mut().zip(&mut velocities).zip(home.forces) {
//!             for d in 0..3 {
//!                 v[d] += 0.002 * f[d];
//!                 x[d] += 0.002 * v[d];
//!             }
//!         }
//!         if step % 10 == 0 {
//!             halo.collective_repartition(&mut [&mut velocities])?;
//!         }
//!     }
//!     Ok(())
//! }
//! ```
#![deny(missing_docs)]

mod error;
mod grid;
mod halo;
pub mod model;
mod pbc;

pub use error::{Error, Result};
pub use grid::{DdGrid, MAX_PULSES};
pub use halo::{
    AtomState, HaloBuilder, HaloExchange, Home, Local, PairOwner, PeriodicImage, PeriodicImages, ShiftForces,
    Step, Zone,
};
pub use pbc::{PbcBox, RVec};
