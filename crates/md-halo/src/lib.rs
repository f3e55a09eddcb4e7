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
//! - the same step split so that the halo travels while the kernel computes:
//!   [`start_x`](HaloExchange::start_x) sends the coordinates and gives the home atoms
//!   ([`XInFlight`]), whose pairs the kernel computes meanwhile, and its finish gives the
//!   [`Step`]; [`Step::start_f`] sends the forces back and names the home atoms whose forces
//!   are complete ([`Settled`]), to integrate while the rest arrive ([`FInFlight`]). The same
//!   bits as `move_x` and `move_f`, which are the halves back to back;
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
//! of the last step with them, ready for the next half kick. The kernel runs in two passes
//! with the halo in flight: the home pairs while the coordinates travel, then the pairs with
//! a halo atom; the second half kick of each atom comes as soon as its force is complete.
//!
//! ```no_run
//! use md_halo::{DdGrid, ErrorScope, HaloExchange, PbcBox, RVec};
//! use onesided::Runtime;
//!
//! /// The engine's force kernel: the pairs `i`, `j` of local atoms where `owner.owns(i, j)`
//! /// and `j >= first` (added to what the home pass left).
//! fn forces(local: md_halo::Local<'_>, first: usize) {
//!     local.forces[first..].fill([0.0; 3]);
//! }
//!
//! /// The second half kick of `atoms`.
//! fn kick(v: &mut [RVec], f: &[RVec], atoms: &[u32], dt: f32, mass: f32) {
//!     for &i in atoms {
//!         (0..3).for_each(|d| v[i as usize][d] += 0.5 * dt * f[i as usize][d] / mass);
//!     }
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
//!     forces(view.local(), 0);
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
//!         let n_home = halo.home_count();
//!         let mut x = halo.start_x()?; // the coordinates travel during the home pass
//!         forces(x.home(), 0);
//!         let mut view = x.finish()?;
//!         forces(view.local(), n_home);
//!         let mut f = view.start_f()?; // the forces travel during the settled atoms' kick
//!         let settled = f.home();
//!         kick(&mut velocities, settled.forces, settled.atoms, dt, mass);
//!         let _shift_forces = f.finish()?; // for the virial
//!         let home = halo.home_mut();
//!         kick(&mut velocities, home.forces, home.returning, dt, mass);
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
pub use halo::{AtomState, FInFlight, HaloBuilder, HaloExchange, Home, Local, Settled, Step, XInFlight};
pub use onesided::ErrorScope;
pub use pbc::{PbcBox, RVec};
pub use real::Real;
pub use zone::{PairOwner, PeriodicImage, PeriodicImages, ShiftForces, Zone};
