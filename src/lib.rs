//! Support shared by the workspace's multi-PE tests, benchmarks and examples: starting PEs
//! through `scripts/pe-run` ([`launch`]), the multi-PE test harness ([`pe_test`]) and
//! criterion across PEs ([`bench`](mod@bench)), the records it keeps for the report
//! ([`records`]), the benchmark report ([`report`]), the GROMACS comparison ([`yardstick`]) and
//! the examples' command lines ([`cli`]) and the ways they build a redistribution
//! ([`route`]).
#![deny(missing_docs)]

pub mod bench;
pub mod cli;
pub mod launch;
pub mod pe_test;
pub mod records;
pub mod report;
pub mod route;
pub mod yardstick;
