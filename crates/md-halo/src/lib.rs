//! Domain-decomposition halo exchange for molecular dynamics: coordinates out to the
//! neighbouring domains every step, forces back, over `onesided` (the offset-swap send-receive)
//! or over MPI two-sided, chosen once ([`onesided::Path`]), with identical results.
//!
//! The crate knows no physics and no file format: an engine hands it the box, its atoms'
//! positions and global indices, the interaction range and the grid, and gets back the halo
//! coordinates every step and its home atoms' total forces.
//!
//! - [`PbcBox`]: the periodic box, rectangular or triclinic, as GROMACS defines it;
//! - [`DdGrid`]: the grid of domains, one per PE, in the box's fractional coordinates, equal
//!   or with boundaries that follow the load ([`Dlb`], [`HaloBuilder::load_balancing`]);
//! - [`HaloExchange`]: the plan, built once ([`HaloExchange::builder`]) and at every
//!   repartition, and every step [`move_x`](HaloExchange::move_x), which returns the step's
//!   view ([`Step`]): the coordinates, the forces a kernel writes, pair ownership and the
//!   periodic images ([`Local`]), then [`Step::move_f`], which sends the halo forces back from
//!   where the kernel wrote them; per-atom state of any plain-old-data type migrates with its
//!   atoms ([`AtomState`]), and any per-atom field travels along the plan
//!   ([`collective_spread`](HaloExchange::collective_spread));
//! - [`Real`]: positions and forces in `f32` (the default) or `f64`
//!   ([`HaloBuilder::real`]), held and sent in the engine's own precision, with no copy;
//! - [`PeriodicImages`]: along dimensions of the grid with one domain, the periodic images
//!   are copied by the exchange (the default) or left to the force kernel, which adds a shift
//!   where it loads them, as GROMACS's does ([`Local::images`]);
//! - [`model`]: every domain's plan computed in one process without a runtime, for scale
//!   models.
//!
//! An engine's step (velocity Verlet, the loop of `examples/lj_engine.rs`, a whole NVE engine):
//! the halo's range is the cutoff plus a Verlet buffer ([`verlet_buffer`]), which the
//! exchange checks at every repartition; velocities migrate with their atoms, and the forces
//! of the last step with them, ready for the next half kick.
//!
//! ```no_run
//! use md_halo::{DdGrid, ErrorScope, HaloExchange, PbcBox, RVec};
//! use onesided::Runtime;
//!
//! /// The engine's force kernel: pairs `i`, `j` of local atoms where `owner.owns(i, j)`.
//! fn forces(local: md_halo::Local<'_>) {
//!     local.forces.fill([0.0; 3]);
//! }
//!
//! fn run(rt: &Runtime) -> md_halo::Result<()> {
//!     let (dt, mass, cutoff, nstlist) = (0.002, 39.948, 0.85, 10);
//!     let pbc = PbcBox::rectangular([6.0, 6.0, 6.0])?;
//!     let positions: Vec<RVec> = (0..1000).map(|i| [i as f32 * 0.006, 3.0, 3.0]).collect();
//!     let buffer = md_halo::verlet_buffer(94.0, mass as f64, nstlist as f64 * dt as f64);
//!     let grid = DdGrid::choose(rt.n_pes(), pbc, cutoff + buffer)?;
//!     let mut halo =
//!         HaloExchange::builder(rt, grid).verlet_buffer(buffer).collective_from_global(&positions)?;
//!     let mut velocities = vec![[0.1f32, 0.0, 0.0]; halo.home_count()];
//!     let mut view = halo.move_x()?; // the forces of the start, for the first half kick
//!     forces(view.local());
//!     view.move_f()?;
//!     for step in 1..=100 {
//!         let home = halo.home_mut(); // half a kick with the last forces, then a drift
//!         for ((x, v), f) in home.coordinates.iter_mut().zip(&mut velocities).zip(home.forces) {
//!             for d in 0..3 {
//!                 v[d] += 0.5 * dt * f[d] / mass;
//!                 x[d] += dt * v[d];
//!             }
//!         }
//!         if step % nstlist == 0 {
//!             halo.collective_repartition(&mut [&mut velocities])?;
//!         }
//!         let mut view = halo.move_x()?;
//!         forces(view.local());
//!         let _shift_forces = view.move_f()?; // for the virial
//!         let home = halo.home_mut(); // the second half kick
//!         for (v, f) in velocities.iter_mut().zip(home.forces) {
//!             (0..3).for_each(|d| v[d] += 0.5 * dt * f[d] / mass);
//!         }
//!     }
//!     Ok(())
//! }
//!
//! fn main() {
//!     let rt = Runtime::init().expect("the runtime starts");
//!     if let Err(e) = run(&rt) {
//!         eprintln!("PE {}: {e}", rt.my_pe());
//!         if e.scope() == ErrorScope::ThisPe {
//!             rt.abort(1); // the other PEs may be waiting for this one
//!         }
//!         drop(rt); // every PE saw it: end normally
//!         std::process::exit(1);
//!     }
//! }
//! ```
//!
//! The halo runs on [`Path::OneSided`](onesided::Path::OneSided) (the default: the
//! coordinates put, the forces pulled), [`Path::Mpi`](onesided::Path::Mpi) or
//! [`Path::Auto`](onesided::Path::Auto) (per link, measured).
#![deny(missing_docs)]

mod buffer;
mod dlb;
mod error;
mod grid;
mod halo;
pub mod model;
mod pbc;
mod real;
mod zone;

pub use buffer::{BOLTZMANN, SPEED_DEVIATIONS, verlet_buffer};
pub use dlb::{Dlb, LoadReport};
pub use error::{Error, Result};
pub use grid::{DdGrid, MAX_PULSES};
pub use halo::{AtomState, HaloBuilder, HaloExchange, Home, Local, Step};
pub use onesided::ErrorScope;
pub use pbc::{PbcBox, RVec};
pub use real::Real;
pub use zone::{PairOwner, PeriodicImage, PeriodicImages, ShiftForces, Zone};
