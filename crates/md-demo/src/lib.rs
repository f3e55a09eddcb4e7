//! Demo physics for the workspace's examples, tests and benchmarks, kept apart from the
//! communication crates: what an MD engine would bring, reduced to what exercises them.
//!
//! - [`structure`]: a GROMACS `.gro` reader for any system and box, molecules, replication;
//! - [`types`]: charges and Lennard-Jones parameters for every atom name, from a documented
//!   built-in table or a types file;
//! - [`force`]: Lennard-Jones plus reaction field or the real-space part of Ewald summation
//!   on a domain's atoms, a plain cell-list loop, and the serial reference with energy and
//!   virial;
//! - [`cluster`]: the fast force kernel: a clustered Verlet pair list and a vectorised
//!   kernel, bit for bit the same for any number of threads;
//! - [`motion`]: deterministic displacements between steps, and the Verlet buffer they need;
//! - [`verify`]: the halo against a brute-force search, forces and virial against the serial
//!   computation, fingerprints to compare paths bit for bit.
#![deny(missing_docs)]

pub mod cluster;
mod error;
pub mod force;
pub mod motion;
pub mod structure;
pub mod types;
pub mod verify;

pub use error::{Error, Result};
pub use structure::{Atom, Structure};
