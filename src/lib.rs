//! Support shared by the workspace's multi-PE tests, benchmarks and examples: starting PEs
//! through `scripts/pe-run` ([`launch`]) and the multi-PE test harness ([`pe_test`]).
#![deny(missing_docs)]

pub mod launch;
pub mod pe_test;
