//! Domain-decomposition halo exchange for molecular dynamics: coordinates out to the
//! neighbouring domains every step, forces back, over `onesided` (the offset-swap send-receive)
//! or over MPI two-sided, chosen by one parameter ([`onesided::Path`]), with identical results.
//!
//! - [`System`]: a GROMACS `.gro` reader and replication into larger boxes;
//! - [`DdGrid`]: the grid of domains, one per PE;
//! - [`HaloExchange`]: the plan, built at (re)partition, and [`move_x`](HaloExchange::move_x) /
//!   [`move_f`](HaloExchange::move_f) every step;
//! - [`force`]: a Lennard-Jones plus reaction-field force, so that forces mean something;
//! - [`verify`]: the halo against a brute-force search, forces against a serial computation,
//!   fingerprints to compare paths bit for bit;
//! - [`motion`]: deterministic displacements between steps.
#![deny(missing_docs)]

mod error;
pub mod force;
mod grid;
mod halo;
pub mod motion;
mod system;
pub mod verify;

pub use error::{Error, Result};
pub use grid::{DdGrid, MAX_PULSES};
pub use halo::{HaloExchange, parallel};
pub use system::{AtomKind, KINDS, KindId, RVec, System, kind, wrap};
