//! Support shared by the workspace's multi-PE tests, benchmarks and examples: starting PEs
//! through `scripts/pe-run` ([`launch`]), the multi-PE test harness ([`pe_test`]) and
//! criterion across PEs ([`bench`]).
#![deny(missing_docs)]

pub mod bench;
pub mod launch;
pub mod pe_test;
pub mod report;
