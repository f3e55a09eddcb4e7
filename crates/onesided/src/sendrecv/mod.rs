//! Send-receive between pairs of PEs ([`Exchange`]): one operation, a call whose messages say
//! what differs, on five transports that put the same bytes in the same places: the one-sided
//! offset swap (`put.rs`) and pull (`get.rs`), MPI two-sided (`mpi.rs`), the offset swap over
//! an MPI-3 window on the symmetric heap (`mpi_rma.rs`), and the buffered baseline of the 2013
//! SHMEM port of GROMACS (`buffered.rs`, with the `baselines` feature).
//!
//! Each transport is one file behind the `Protocol` trait (`protocol.rs`) and reads top to
//! bottom; it holds its own state (the offset swaps their announcement slots, the get and
//! buffered paths their staging, the MPI path its communicator) and is handed what every path
//! shares, the channel (`channel.rs`: the partners' slots and signals, the call numbers, the
//! receives posted ahead, the wait for several partners at once). `mixed.rs` runs a call whose
//! partners on this node and on other nodes take different transports.
//!
//! Around them: `message.rs` names the messages, `partners.rs` places each pair's slots,
//! `delivery.rs` encodes the delivery signal, `job.rs` is a call as the transports see it,
//! `validate.rs` the checks made before anything moves, `call.rs` the call's builder,
//! `split.rs` the call in two halves (started, then finished while the caller computed),
//! `exchange.rs` the exchange and its reservations, `calibrate.rs` the calibration of the
//! links, `build.rs` the builder that settles [`Path::Auto`](crate::Path::Auto).

#[cfg(feature = "baselines")]
mod buffered;
mod build;
mod calibrate;
mod call;
mod channel;
mod delivery;
mod exchange;
mod get;
mod job;
mod message;
mod mixed;
mod mpi;
mod mpi_rma;
mod partners;
mod protocol;
mod put;
mod split;
mod validate;

pub use build::ExchangeBuilder;
pub use call::Call;
pub use exchange::Exchange;
pub use message::{Incoming, LANES, Offer, Outgoing};
