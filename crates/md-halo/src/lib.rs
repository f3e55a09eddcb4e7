//! Domain-decomposition halo exchange for molecular dynamics (coordinates out, forces back),
//! over `onesided` and over MPI two-sided with identical results.
#![deny(missing_docs)]
