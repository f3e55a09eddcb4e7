//! Send-receive between pairs of PEs: one operation, [`Exchange::call`], whose messages say
//! what differs, on five paths: one-sided offset swap (put), one-sided pull (get), the
//! buffered baseline of the 2013 SHMEM port of GROMACS, MPI two-sided as the reference, and
//! the offset swap over MPI-3 one-sided (a window on the symmetric heap).
//!
//! Every message a PE receives names its final place: a buffer out of a list of symmetric
//! arrays both sides pass (the coordinate array itself, received in place, or a scratch
//! buffer), an element offset, and the room there ([`Incoming`]). A message a PE sends is a
//! copy of a slice, elements that the call's packing function writes (straight into the
//! receiver's place where its memory is mapped), or a region of a symmetric array offered
//! where it lies ([`Outgoing`]). A call can also hand each incoming message to a function
//! where it lies instead of landing it ([`Call::consume`]).
//!
//! On the **put** path the receiver writes (buffer, offset, room) into the sender's
//! symmetric slot and raises a signal with its call number; the sender waits for it, checks
//! that its message fits, puts the data straight into the final place and raises a signal
//! with its own call number. The receiver's announcement of call `k + 1` is also its word
//! that call `k`'s data has been consumed, so one exchange costs at most one round trip of
//! synchronisation, with no flag resets and no barrier.
//!
//! On the **get** path the sender copies its message into its symmetric staging buffer (or
//! offers it where it lies) and pushes (offset, count) to the receiver with a signal; the
//! receiver gets the data into the final place, or reads it through the mapping of a
//! same-node sender, and signals that it is done, which the sender awaits before reusing
//! its staging buffer.
//!
//! The **buffered** path is the 2013 first attempt: the sender waits for a "consumed" flag,
//! puts into the receiver's scratch slot, raises a "posted" flag; the receiver copies from
//! scratch into the final place, resets "posted", and sets the sender's "consumed" flag. It
//! exists for the benchmarks, to show what the direct forms save.
//!
//! The **MPI** path uses `MPI_Sendrecv` for one message each way and `MPI_Isend`,
//! `MPI_Irecv` and waits for more, receiving straight into the same final places.
//!
//! The **MPI one-sided** path is the put path's protocol with every remote write an `MPI_Put`
//! or `MPI_Accumulate` into a window over the symmetric heap, flushed before the signal that
//! publishes it.
//!
//! All five give the same bytes in the same places, whatever kind of message each side
//! chose. Each transport is one file behind the `Protocol` trait (`put.rs`, `get.rs`,
//! `buffered.rs`, `mpi.rs`, `mpi_rma.rs`), holding its own state; `channel.rs` holds what they share (the
//! partners' slots and signals, call numbers, the delivery signal's encoding), `call.rs` the
//! call's builder and what the transports see of it, `validate.rs` the checks made before
//! anything moves.

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
mod validate;

pub use build::ExchangeBuilder;
pub use call::Call;
pub use exchange::Exchange;
pub use message::{Incoming, LANES, Offer, Outgoing};
