//! The halo exchange: a plan built at (re)partition, and `move_x` / `move_f` every step.
//!
//! The plan is GROMACS's half-shell scheme in fractional coordinates, dimension by dimension
//! (`plan.rs`). Every transfer is an [`Exchange`](onesided::Exchange) on the chosen
//! [`Path`](onesided::Path): the one-sided offset swap or MPI two-sided; on the one-sided path
//! the forces go back as pulls instead, so that their owner adds them up where they lie in the
//! neighbour's memory. The plan (who sends which atoms to whom, and where they land) is built
//! once per partition; `move_x` then sends coordinates along it and `move_f` sends the forces
//! on halo atoms back the same way in reverse, where their owners add them up.
//!
//! `exchange.rs` holds the state, `build.rs` the construction, `plan.rs` the plan and the
//! per-atom fields along it, `step.rs` the step, `migrate.rs` repartition, `agree.rs` what the
//! PEs agree on before anything moves; what a kernel needs beside the coordinates is
//! [`crate::zone`]'s.

mod agree;
mod build;
mod exchange;
mod migrate;
mod overlap;
mod plan;
mod schedule;
mod step;

pub use build::HaloBuilder;
pub use exchange::HaloExchange;
pub use migrate::AtomState;
pub use overlap::{FInFlight, Settled, XInFlight};
pub use step::{Home, Local, Step};
