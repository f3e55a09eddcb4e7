//! The halo exchange: a plan built at (re)partition, and `move_x` / `move_f` every step.
//!
//! GROMACS's scheme with the half-shell convention, in fractional coordinates: dimension by
//! dimension (in [`DdGrid::exchange_order`]: split dimensions in x, y, z order, then those of
//! one domain, whose pulses only make periodic images), each domain receives from its
//! neighbour above the atoms within the halo range beyond its upper face, and sends to its
//! neighbour below the atoms within that range above its own lower face. Atoms received in
//! earlier dimensions are forwarded in later ones, which covers edges and corners; when the
//! range exceeds a domain's width, further pulses forward the atoms received in the previous
//! pulse, one domain further each time. An atom sent across the periodic boundary (from the
//! first domain of a dimension to the last) is shifted by that dimension's box vector on the
//! way. Received atoms land in place, behind the home atoms, in one symmetric coordinate
//! array.
//!
//! Every transfer is an [`Exchange`](onesided::Exchange) on the chosen
//! [`Path`](onesided::Path): the one-sided offset swap
//! or MPI two-sided; on the one-sided path the forces go back as pulls instead, so that their
//! owner adds them up where they lie in the neighbour's memory. The plan (who sends which
//! atoms to whom, and where they land) is built once per partition; `move_x` then sends
//! coordinates along it and `move_f` sends the forces on halo atoms back the same way in
//! reverse, where their owners add them up.
//!
//! `exchange.rs` holds the state, `build.rs` the construction, `plan.rs` the plan and the
//! per-atom fields along it, `step.rs` the step, `migrate.rs` repartition, `agree.rs` what the
//! PEs agree on before anything moves; what a kernel needs beside the coordinates is
//! [`crate::zone`]'s.

mod agree;
mod build;
mod exchange;
mod migrate;
mod plan;
mod step;

pub use build::HaloBuilder;
pub use exchange::HaloExchange;
pub use migrate::AtomState;
pub use step::{Home, Local, Step};
