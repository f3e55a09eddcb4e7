//! md-halo's halo exchange from C ([`onesided_halo`]): built once from the whole system or
//! each PE's home atoms, then every step `onesided_halo_move_x` (the step's local view:
//! coordinates, forces, pair ownership), the host's force kernel, `onesided_halo_move_f`
//! (the halo forces summed back, the shift forces), and between steps the home atoms
//! (`onesided_halo_home_atoms`), a repartition that carries the host's per-atom state, and a spread
//! of per-atom values to the halo.
//!
//! The same step splits so that the kernel computes while the halo travels:
//! `onesided_halo_start_x` (the home atoms' view) and `onesided_halo_finish_x` (the step's
//! view), `onesided_halo_start_f` (the home atoms whose forces are final) and
//! `onesided_halo_finish_f`.
//!
//! Coordinates and forces are `float` or `double` triples (`onesided_halo_options.real`).
//! Between `move_x` (or `start_x`) and `move_f` (or `finish_f`) the halo is in a step: only
//! the step's calls, in order, are allowed, as in Rust, where the step borrows the exchange.

mod build;
mod migrate;
mod state;
mod step;
mod types;

pub use build::{
    onesided_halo_free, onesided_halo_from_global, onesided_halo_from_home, onesided_halo_options_default,
};
pub use migrate::{onesided_halo_repartition, onesided_halo_spread, onesided_halo_take_fields};
pub use step::{
    onesided_halo_finish_f, onesided_halo_finish_x, onesided_halo_home_atoms, onesided_halo_move_f,
    onesided_halo_move_x, onesided_halo_owns, onesided_halo_start_f, onesided_halo_start_x,
};
pub use types::*;
