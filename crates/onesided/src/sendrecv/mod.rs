//! Send-receive between pairs of PEs, behind one interface with four paths: one-sided
//! offset swap (put), one-sided pull (get), the buffered baseline of the 2013 SHMEM port of
//! GROMACS, and MPI two-sided as the reference.
//!
//! Every exchange names, per message, the receiving side's final place: a buffer out of a
//! list of symmetric arrays both sides pass (the coordinate array itself, received in place,
//! or a scratch buffer), an element offset, and the room there. On the **put** path the
//! receiver writes that (buffer, offset, room) into the sender's symmetric slot and raises a
//! signal with its call number; the sender waits for it, checks that its message fits, puts
//! the data straight into the final place and raises a signal with its own call number. The
//! receiver's announcement of call `k + 1` is also its word that call `k`'s data has been
//! consumed, so one exchange costs at most one round trip of synchronisation, with no flag
//! resets and no barrier.
//!
//! On the **get** path the sender copies its message into its symmetric staging buffer and
//! pushes (offset, count) to the receiver with a signal; the receiver gets the data from the
//! sender's staging buffer straight into the final place and signals that it is done, which
//! the sender awaits before reusing its staging buffer.
//!
//! The **buffered** path is the 2013 first attempt: the sender waits for a "consumed" flag,
//! puts into the receiver's scratch slot, raises a "posted" flag; the receiver copies from
//! scratch into the final place, resets "posted", and sets the sender's "consumed" flag. It
//! exists for the benchmarks, to show what the direct forms save (a copy and a flag handshake
//! per message).
//!
//! The **MPI** path uses `MPI_Sendrecv` for one message each way and `MPI_Isend`,
//! `MPI_Irecv` and waits for more, receiving straight into the same final places.
//!
//! All four give the same bytes in the same places. Each transport is one file behind the
//! [`Transport`] trait (`put.rs`, `get.rs`, `buffered.rs`, `mpi.rs`); this file holds the
//! interface, `partners.rs` where each pair's slots sit, `validate.rs` the checks made before
//! anything moves.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use bytemuck::Pod;

use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::{GlobalMaxArray, GrowthPolicy, SymArray};
use crate::runtime::Runtime;
use crate::signal::SignalArray;

mod buffered;
mod delivery;
mod get;
mod mpi;
pub use mpi::collective_error_returning_world;
mod partners;
mod put;
mod validate;

use get::Source;
use mpi::MpiChannel;
use partners::Partners;

/// One transport's protocol for a whole exchange call, once the call has been validated and
/// its lanes assigned: each implementation reads top to bottom in its own file.
trait Transport {
    /// Sends every `outgoing` message and receives every `incoming` one (`received[i]` the
    /// count of message `i`), as [`Exchange::exchange`] describes.
    fn exchange<'rt, T: Pod>(
        ex: &mut Exchange<'rt, T>,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()>;
}

/// Which transport an [`Exchange`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExchangePath {
    /// One-sided offset swap: receivers announce where, senders put straight into place.
    Put,
    /// One-sided pull: senders publish in a symmetric staging buffer, receivers get.
    Get,
    /// One-sided through a symmetric scratch buffer with post/consumed flags (the 2013 first
    /// attempt), kept as a baseline.
    Buffered,
    /// MPI two-sided, the reference.
    Mpi,
}

impl ExchangePath {
    /// Every path, in the order reports list them.
    pub const ALL: [ExchangePath; 4] =
        [ExchangePath::Put, ExchangePath::Get, ExchangePath::Buffered, ExchangePath::Mpi];

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            ExchangePath::Put => "onesided-put",
            ExchangePath::Get => "onesided-get",
            ExchangePath::Buffered => "buffered",
            ExchangePath::Mpi => "mpi",
        }
    }

    /// Whether the path needs [`Exchange::collective_reserve`] before messages are sent.
    pub fn needs_reserve(self) -> bool {
        matches!(self, ExchangePath::Get | ExchangePath::Buffered)
    }
}

impl fmt::Display for ExchangePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExchangePath {
    type Err = Error;

    fn from_str(s: &str) -> Result<ExchangePath> {
        match s {
            "onesided-put" | "put" | "onesided" => Ok(ExchangePath::Put),
            "onesided-get" | "get" => Ok(ExchangePath::Get),
            "buffered" => Ok(ExchangePath::Buffered),
            "mpi" => Ok(ExchangePath::Mpi),
            other => Err(Error::InvalidArgument(format!(
                "unknown send-receive path {other:?}: expected onesided-put, onesided-get, \
                 buffered or mpi"
            ))),
        }
    }
}

/// A message this PE sends in an exchange.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a, T> {
    /// The receiving PE.
    pub to: usize,
    /// The elements.
    pub data: &'a [T],
}

/// A message this PE receives in an exchange, and where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// The sending PE.
    pub from: usize,
    /// Which of the exchange's buffers receives it.
    pub buffer: usize,
    /// The element offset in that buffer.
    pub offset: usize,
    /// How many elements fit there; a larger message is an error on both sides.
    pub room: usize,
}

/// A message this PE sends in [`Exchange::exchange_packed`], whose elements the call's `fill`
/// writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed {
    /// The receiving PE.
    pub to: usize,
    /// How many elements `fill` writes for it.
    pub count: usize,
}

/// What the checks before an exchange need of an outgoing message.
trait Message {
    fn to(&self) -> usize;
    fn len(&self) -> usize;
}

impl<T> Message for Outgoing<'_, T> {
    fn to(&self) -> usize {
        self.to
    }
    fn len(&self) -> usize {
        self.data.len()
    }
}

impl Message for Packed {
    fn to(&self) -> usize {
        self.to
    }
    fn len(&self) -> usize {
        self.count
    }
}

/// Marks a count as rejected: the message did not fit the announced room.
const REJECTED: u64 = 1 << 63;
/// Marks a count as rejected because the sender has no such buffer as the one announced (the
/// two PEs passed different buffer lists).
const NO_BUFFER: u64 = 1 << 62;

/// Marks a count slot as describing a message offered in place (the next word its offset in
/// the array offered), not staged.
const OFFERED: u64 = 0x4f46_4645_5245_4421;

/// Words per slot of the exchange's small symmetric arrays: one 64-byte cache line each, so
/// that partners writing different slots never share a line.
const STRIDE: usize = 8;

/// Bits of a delivery signal that carry the message's element count; the call number sits
/// above them, so delivery signals still grow with every call and are awaited with `>=`. A
/// count that does not fit (or a rejection) is marked [`COUNT_ELSEWHERE`] and written to the
/// sender's count slot first. Carrying the count in the signal saves the receiver a cache
/// miss per message.
const COUNT_BITS: u32 = 24;
/// The inline count that says "read the count slot".
const COUNT_ELSEWHERE: u64 = (1 << COUNT_BITS) - 1;
/// Call numbers must stay below this for the delivery encoding (about 10^12 calls).
const MAX_CALLS: u64 = 1 << (64 - COUNT_BITS);

/// Messages one PE may send to the same PE in one exchange: forward and backward of a
/// two-way exchange between two PEs that are each other's neighbour on both sides.
pub const LANES: usize = 2;

/// Where one message of an exchange meets its partner: the key of the pair and lane in this
/// PE's arrays, and in the partner's.
#[derive(Clone, Copy, Debug)]
struct Lane {
    /// The partner PE.
    peer: usize,
    /// `peer * LANES + lane`: this PE's slot and signal for the partner's side of it.
    local: usize,
    /// `me * LANES + lane`: the partner's slot and signal for this PE's side of it.
    remote: usize,
}

/// What a sender puts: its elements, or a function that writes them into the destination.
enum Payload<'a, T, F> {
    Data(&'a [T]),
    Pack { count: usize, fill: F },
}

impl<T, F> Payload<'_, T, F> {
    fn len(&self) -> usize {
        match self {
            Payload::Data(data) => data.len(),
            Payload::Pack { count, .. } => *count,
        }
    }
}

/// `data` cut into consecutive slices of `counts` elements (which sum to at most its length).
fn split_counted<T>(data: &mut [T], counts: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut slices = Vec::with_capacity(counts.size_hint().0);
    let mut rest = data;
    for count in counts {
        let (slice, tail) = std::mem::take(&mut rest).split_at_mut(count);
        slices.push(slice);
        rest = tail;
    }
    slices
}

/// Per-call bookkeeping, kept between calls so that an exchange allocates nothing.
#[derive(Default)]
struct Work {
    out_lanes: Vec<Lane>,
    in_lanes: Vec<Lane>,
    /// Which messages `await_each` has served.
    served: Vec<bool>,
    /// (signal, awaited value) of the pending messages.
    waits: Vec<(usize, u64)>,
    /// MPI path: the tags of the messages.
    out_tags: Vec<i32>,
    in_tags: Vec<i32>,
}

/// A send-receive channel for elements of type `T`, on one of the [`ExchangePath`]s.
///
/// Exchanges are pairwise: only the PEs that exchange messages take part, and they need not
/// arrive together. Per pair and direction, the `k`-th send of one PE meets the `k`-th
/// receive of the other; within one call, the `l`-th message one PE sends another meets the
/// `l`-th message the other receives from it (at most [`LANES`] per pair and call).
pub struct Exchange<'rt, T: Pod> {
    rt: &'rt Runtime,
    name: String,
    path: ExchangePath,
    partners: Partners,
    /// The MPI path's private communicator.
    mpi: Option<MpiChannel>,
    /// Signal `(p * LANES + l) * STRIDE`, raised by receiver `p`: announced (put path),
    /// taken (get path), consumed (buffered path, a 0/1 flag).
    from_receivers: SignalArray<'rt>,
    /// Signal `(p * LANES + l) * STRIDE`, raised by sender `p`: delivered or offered, as
    /// `call << COUNT_BITS | count` (put and get paths); posted (buffered path, 0/1).
    from_senders: SignalArray<'rt>,
    /// Slot `p * LANES + l`, written by receiver `p` on the put path: (buffer, offset, room),
    /// rewritten only when it changes, so that a sender's read of an unchanged announcement
    /// stays in its cache.
    announcements: SymArray<'rt, [u64; STRIDE]>,
    /// What this PE last announced per slot.
    announced: Vec<Option<[u64; 3]>>,
    /// Receives announced ahead of their exchange by [`Exchange::post_receives`], per slot.
    posted: Vec<Option<Incoming>>,
    /// Slot `p * LANES + l`, written by sender `p`: a count that does not fit the signal.
    counts: SymArray<'rt, [u64; STRIDE]>,
    /// Get path: this PE's outgoing messages; buffered path: one scratch slot per sender and
    /// lane.
    staging: Option<GlobalMaxArray<'rt, T>>,
    /// Elements per message the staging buffer was reserved for.
    reserved: usize,
    /// Calls this PE has made sending to each PE and lane.
    sends: Vec<u64>,
    /// Calls this PE has made receiving from each PE and lane.
    recvs: Vec<u64>,
    /// Get path: the receivers of the previous call, whose gets must end before the staging
    /// buffer is overwritten.
    pending_takers: Vec<Lane>,
    work: Work,
    /// Where packed messages are written when they cannot go straight to their receiver.
    pack_buffer: Vec<T>,
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Creates a channel on `path` between any PEs: its slots and signals grow with the PE
    /// count (about 512 bytes of symmetric memory per PE). An exchange whose partners are
    /// known, as a halo pulse's are, should name them:
    /// [`collective_with_partners`](Self::collective_with_partners).
    ///
    /// # Collective
    /// Every PE must create it, with the same path, in the same order.
    pub fn collective_new(rt: &'rt Runtime, name: &str, path: ExchangePath) -> Result<Self> {
        let partners = Partners { me: rt.my_pe(), listed: None, capacity: rt.n_pes() };
        Self::collective_build(rt, name, path, partners)
    }

    /// For the tests of the MPI path's error handling: the `index`-th `MPI_Isend` from now on
    /// fails as if MPI had refused it (the call then cancels what it had posted and returns
    /// the error). No effect on the other paths.
    #[doc(hidden)]
    pub fn fail_mpi_isend(&mut self, index: usize) {
        if let Some(channel) = self.mpi.as_mut() {
            channel.fail_isend(index);
        }
    }

    /// Symmetric bytes this exchange holds on each PE (slots, signals, staging).
    pub fn symmetric_bytes(&self) -> usize {
        let arrays = self.from_receivers.len() * 8
            + self.from_senders.len() * 8
            + self.announcements.len() * std::mem::size_of::<[u64; STRIDE]>()
            + self.counts.len() * std::mem::size_of::<[u64; STRIDE]>();
        arrays + self.staging.as_ref().map_or(0, |s| s.capacity() * std::mem::size_of::<T>())
    }

    fn collective_build(
        rt: &'rt Runtime,
        name: &str,
        path: ExchangePath,
        partners: Partners,
    ) -> Result<Self> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': elements of zero size carry nothing to exchange"
            )));
        }
        let slots = partners.capacity * LANES;
        let padded = slots * STRIDE;
        let from_receivers = SignalArray::collective_alloc(rt, &format!("{name}: from receivers"), padded)?;
        let from_senders = SignalArray::collective_alloc(rt, &format!("{name}: from senders"), padded)?;
        if path == ExchangePath::Buffered {
            // Every scratch slot starts consumed, so the first message may be posted.
            for slot in 0..slots {
                from_receivers.store_local(slot * STRIDE, 1);
            }
            rt.barrier();
        }
        Ok(Exchange {
            rt,
            name: name.to_string(),
            path,
            partners,
            mpi: if path == ExchangePath::Mpi { Some(MpiChannel::collective_new(rt)?) } else { None },
            from_receivers,
            from_senders,
            announcements: SymArray::collective_alloc(rt, &format!("{name}: announcements"), slots)?,
            announced: vec![None; slots],
            posted: vec![None; slots],
            counts: SymArray::collective_alloc(rt, &format!("{name}: counts"), slots)?,
            staging: None,
            reserved: 0,
            sends: vec![0; slots],
            recvs: vec![0; slots],
            pending_takers: Vec::new(),
            work: Work::default(),
            pack_buffer: Vec::new(),
        })
    }

    /// The path.
    pub fn path(&self) -> ExchangePath {
        self.path
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime.
    pub fn runtime(&self) -> &'rt Runtime {
        self.rt
    }

    /// Makes room for messages of up to `max_message` elements each on the get and buffered
    /// paths (a symmetric buffer grown to the global maximum). The put and MPI paths need
    /// none; for them this only checks that every PE calls it.
    ///
    /// # Collective
    /// Every PE must call it, each with its own `max_message`.
    pub fn collective_reserve(&mut self, max_message: usize) -> Result<()> {
        let global = self.rt.max_u64_one(max_message as u64)? as usize;
        let slots = match self.path {
            // One message per receiver and lane shares this PE's staging buffer.
            ExchangePath::Get | ExchangePath::Buffered => self.partners.capacity * LANES,
            ExchangePath::Put | ExchangePath::Mpi => return Ok(()),
        };
        if global <= self.reserved && self.staging.is_some() {
            return Ok(());
        }
        let len = global.checked_mul(slots).ok_or_else(|| Error::SizeOverflow {
            array: format!("{}: staging", self.name),
            len: global,
            elem_size: std::mem::size_of::<T>(),
        })?;
        // Messages in flight from the previous call must be done before the buffer moves.
        self.settle()?;
        self.staging = None;
        let policy = GrowthPolicy { over_allocation: 1.0, freeze_after: None };
        let name = format!("{}: staging", self.name);
        self.staging = Some(GlobalMaxArray::collective_alloc(self.rt, &name, len, policy)?);
        self.reserved = global;
        Ok(())
    }

    /// Announces now where the next exchange's `incoming` messages go, so that their senders
    /// need not wait for it: the way to take the announcement off the critical path when the
    /// receive regions are known, and free, ahead of time (after the data of the previous
    /// exchange has been used). The next [`exchange`](Self::exchange) or
    /// [`sendrecv`](Self::sendrecv) must receive exactly these messages. Only the put path
    /// announces; the others accept posted receives and ignore them.
    ///
    /// From the moment of posting, the senders may write into the announced regions.
    pub fn post_receives(&mut self, buffers: &[&SymArray<'rt, T>], incoming: &[Incoming]) -> Result<()> {
        self.validate(buffers, &[] as &[Packed], incoming, incoming.len())?;
        let mut lanes = Vec::with_capacity(incoming.len());
        self.partners.assign(&mut lanes, incoming.iter().map(|i| i.from));
        for (inc, lane) in incoming.iter().zip(&lanes) {
            if self.posted[lane.local].is_some() {
                return Err(self.refuse(ExchangeProblem::AlreadyPosted { from: inc.from }));
            }
        }
        for (inc, lane) in incoming.iter().zip(&lanes) {
            if self.path == ExchangePath::Put {
                self.announce(inc, lane)?;
            }
            self.posted[lane.local] = Some(*inc);
        }
        Ok(())
    }

    /// Sends one message and receives one: the common case of a halo pulse.
    pub fn sendrecv(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: Outgoing<'_, T>,
        incoming: Incoming,
    ) -> Result<usize> {
        let mut received = [0];
        if self.path == ExchangePath::Put {
            self.validate_one(buffers, outgoing.to, &incoming)?;
            return self.sendrecv_put(
                buffers,
                outgoing.to,
                Payload::<T, fn(&mut [T])>::Data(outgoing.data),
                &incoming,
            );
        }
        self.exchange(buffers, &[outgoing], &[incoming], &mut received)?;
        Ok(received[0])
    }

    /// [`sendrecv`](Self::sendrecv) with the outgoing message written by `fill`, which gets
    /// exactly `count` elements to write, all of them. On the put path to a PE whose memory is
    /// mapped into this process (the same node), `fill` writes straight into the receiver's
    /// final place, so the message is packed where it is needed, with no buffer between;
    /// elsewhere it writes into a staging buffer that is then sent.
    pub fn sendrecv_packed(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        count: usize,
        fill: impl FnOnce(&mut [T]),
        incoming: Incoming,
    ) -> Result<usize> {
        if self.path == ExchangePath::Put {
            self.validate_one(buffers, to, &incoming)?;
            return self.sendrecv_put(buffers, to, Payload::Pack { count, fill }, &incoming);
        }
        let mut staging = std::mem::take(&mut self.pack_buffer);
        staging.clear();
        staging.resize(count, T::zeroed());
        fill(&mut staging);
        let outcome = self.sendrecv(buffers, Outgoing { to, data: &staging }, incoming);
        self.pack_buffer = staging;
        outcome
    }

    /// [`sendrecv`](Self::sendrecv) with the incoming message handed to `consume` where it
    /// lies, for a receiver that only combines it with data of its own (adds returned forces
    /// into its force array, say) and needs no copy of it. On the get path from a PE whose
    /// memory is mapped into this process (the same node), `consume` reads the message in the
    /// sender's staging buffer: the data crosses between the cores once, as `consume` reads
    /// it, and nothing is copied on the receiving side. Elsewhere, and on the other paths, the
    /// message lands in `scratch` from offset 0, as [`sendrecv`](Self::sendrecv) with
    /// `Incoming { from, buffer: 0, offset: 0, room }` would place it, and `consume` reads it
    /// there. The slice `consume` gets is the whole message (its length is the count
    /// received); it returns what `consume` returned.
    ///
    /// # Errors
    /// As [`sendrecv`](Self::sendrecv); on the get path, a message longer than `room` is
    /// refused by the receiver and `consume` is not called.
    pub fn sendrecv_consumed<R>(
        &mut self,
        scratch: &SymArray<'rt, T>,
        outgoing: Outgoing<'_, T>,
        from: usize,
        room: usize,
        consume: impl FnOnce(&[T]) -> R,
    ) -> Result<R> {
        let incoming = Incoming { from, buffer: 0, offset: 0, room };
        if self.path == ExchangePath::Get {
            // SAFETY: the source is staged, not offered.
            return unsafe {
                self.sendrecv_get_consumed(
                    scratch,
                    (outgoing.to, Source::Staged(outgoing.data)),
                    incoming,
                    consume,
                )
            };
        }
        let count = self.sendrecv(&[scratch], outgoing, incoming)?;
        // SAFETY: the exchange has completed: the message is in place and no PE writes this
        // PE's scratch again before this PE's next exchange on it, which needs `&mut self`.
        Ok(consume(unsafe { scratch.local_range(0..count) }))
    }

    /// [`sendrecv_consumed`](Self::sendrecv_consumed) with the outgoing message already in
    /// symmetric memory: elements `range` of this PE's `source`, which the receiver reads
    /// where they lie. On the get path the message is not copied at all on the sending side
    /// (no staging): the receiver reads it through the mapping of a same-node PE, or gets it
    /// into `scratch`; a producer that writes its output straight into `source` (a force
    /// kernel writing the forces on halo atoms, say) saves the copy into the staging buffer.
    /// The other paths send `source[range]` as [`sendrecv_consumed`](Self::sendrecv_consumed)
    /// sends its message. Both PEs of a pair must make this call, with the same `source`
    /// array (each offering its own range), in place of `sendrecv_consumed`; a PE that
    /// expected the other kind of message refuses it with [`ExchangeProblem::OfferMismatch`].
    ///
    /// On the get path the receiver may still be reading `source[range]` after this call
    /// returns: [`wait_taken`](Self::wait_taken) waits until it has taken it (the next call on
    /// this exchange waits too).
    ///
    /// # Safety
    /// No PE writes `source[range]` of this PE from the call until the receiver has taken the
    /// message: until [`wait_taken`](Self::wait_taken), or the next call on this exchange,
    /// has returned on this PE.
    ///
    /// # Errors
    /// As [`sendrecv_consumed`](Self::sendrecv_consumed); [`Error::OutOfBounds`] when `range`
    /// does not lie inside `source`; [`ExchangeProblem::OfferMismatch`] as above.
    ///
    /// [`ExchangeProblem::OfferMismatch`]: crate::ExchangeProblem::OfferMismatch
    /// [`Error::OutOfBounds`]: crate::Error::OutOfBounds
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sendrecv_offered<R>(
        &mut self,
        scratch: &SymArray<'rt, T>,
        (source, range): (&SymArray<'rt, T>, Range<usize>),
        to: usize,
        from: usize,
        room: usize,
        consume: impl FnOnce(&[T]) -> R,
    ) -> Result<R> {
        if self.path == ExchangePath::Get {
            let incoming = Incoming { from, buffer: 0, offset: 0, room };
            // SAFETY: the caller's promise is the one the get path needs of an offered source.
            return unsafe {
                self.sendrecv_get_consumed(scratch, (to, Source::Offered(source, range)), incoming, consume)
            };
        }
        source.check("offered message", self.rt.my_pe(), range.start, range.len())?;
        // SAFETY: no PE writes this range during the call (the caller's promise), and this
        // PE only reads it.
        let data = unsafe { source.local_range(range) };
        self.sendrecv_consumed(scratch, Outgoing { to, data }, from, room, consume)
    }

    /// Waits until the receivers of this PE's messages of the last call have taken them: after
    /// it, the ranges offered by [`sendrecv_offered`](Self::sendrecv_offered) may be written
    /// again. Returns at once on the paths other than the get path, whose calls return only
    /// once their messages may be overwritten at the source.
    ///
    /// # Errors
    /// [`Error::WaitTimeout`](crate::Error::WaitTimeout) when a receiver does not take its
    /// message.
    pub fn wait_taken(&mut self) -> Result<()> {
        self.settle()
    }

    /// Sends every `outgoing` message and receives every `incoming` one; `received[i]` is the
    /// number of elements that arrived for `incoming[i]`. Returns when every message this PE
    /// receives is in place and every message it sends may be overwritten at the source.
    ///
    /// # Errors
    /// - [`Error::MessageTooLarge`] when a message exceeds the room its receiver gave: on the
    ///   receiver, and on the put path also on the sender, which checks before writing
    ///   anything; the other messages of the call are still delivered;
    /// - [`Error::Exchange`] for more than [`LANES`] messages between one pair of PEs in one
    ///   call, a buffer index out of range, `received` of the wrong length, a PE that is not a
    ///   partner, overlapping receive regions, or buffer lists that differ between PEs;
    /// - [`Error::OutOfBounds`] when `offset + room` exceeds the receiving buffer;
    /// - [`Error::WaitTimeout`] when a partner does not take part.
    ///
    /// On the MPI path, Open MPI 4.1 under `MPI_THREAD_MULTIPLE` can leave `MPI_Waitall`
    /// spinning on a truncated receive among several, so a message larger than its room in a
    /// call of several messages may hang its receiver there (an Open MPI defect, reproduced
    /// without this library); one message each way is refused cleanly.
    pub fn exchange(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
    ) -> Result<()> {
        self.validate(buffers, outgoing, incoming, received.len())?;
        let mut work = self.begin(outgoing, incoming)?;
        if self.path != ExchangePath::Put {
            // Only the put path announces; the others just take the posted receives.
            for (inc, lane) in incoming.iter().zip(&work.in_lanes) {
                self.consume_posted(inc, lane)?;
            }
        }
        let outcome = match self.path {
            ExchangePath::Put => put::Put::exchange(self, buffers, outgoing, incoming, received, &mut work),
            ExchangePath::Get => get::Get::exchange(self, buffers, outgoing, incoming, received, &mut work),
            ExchangePath::Buffered => {
                buffered::Buffered::exchange(self, buffers, outgoing, incoming, received, &mut work)
            }
            ExchangePath::Mpi => mpi::Mpi::exchange(self, buffers, outgoing, incoming, received, &mut work),
        };
        self.work = work;
        outcome
    }

    /// [`exchange`](Self::exchange) with the outgoing messages written by `fill`, all in one
    /// call: `fill` gets one slice per message of `outgoing`, in that order, each `count`
    /// elements long, and must write every element. On the put path, a message to a PE whose
    /// memory is mapped into this process (the same node) gets the receiver's final place, so
    /// that data bound for several receivers (atoms sorted by the PE that owns them, say) is
    /// written once, where it is needed, in one pass over the source, with no buffer between;
    /// `fill` is called once every receiver has announced where its message goes. Every
    /// other message gets a staging slice that is then sent, as is every message on the other
    /// paths. A message its receiver has no room for gets a staging slice that is dropped.
    ///
    /// # Errors
    /// As [`exchange`](Self::exchange), and [`Error::SizeOverflow`] when the counts add up
    /// beyond `usize`. The checks run before `fill` is called.
    ///
    /// # Panics
    /// If `fill` panics on the put path, the receivers it was writing for are not signalled;
    /// the channel is not to be used again.
    pub fn exchange_packed(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Packed],
        fill: impl FnOnce(&mut [&mut [T]]),
        incoming: &[Incoming],
        received: &mut [usize],
    ) -> Result<()> {
        self.validate(buffers, outgoing, incoming, received.len())?;
        let total = outgoing.iter().try_fold(0usize, |sum, o| sum.checked_add(o.count)).ok_or_else(|| {
            Error::SizeOverflow {
                array: format!("{}: packed messages", self.name),
                len: usize::MAX,
                elem_size: std::mem::size_of::<T>(),
            }
        })?;
        if self.path != ExchangePath::Put {
            let mut staging = std::mem::take(&mut self.pack_buffer);
            staging.clear();
            staging.resize(total, T::zeroed());
            let mut slices = split_counted(&mut staging, outgoing.iter().map(|o| o.count));
            fill(&mut slices);
            let messages: Vec<Outgoing<'_, T>> =
                outgoing.iter().zip(&slices).map(|(o, data)| Outgoing { to: o.to, data }).collect();
            let outcome = self.exchange(buffers, &messages, incoming, received);
            drop(messages);
            drop(slices);
            self.pack_buffer = staging;
            return outcome;
        }
        let mut work = self.begin(outgoing, incoming)?;
        let outcome = put::Put::exchange_packed(self, buffers, outgoing, fill, incoming, received, &mut work);
        self.work = work;
        outcome
    }

    /// The start of every exchange call, once validated: the lanes of its messages, and the
    /// check that every posted receive matches before any is consumed (a refused call leaves
    /// the posted receives as they were).
    fn begin(&mut self, outgoing: &[impl Message], incoming: &[Incoming]) -> Result<Work> {
        let mut work = std::mem::take(&mut self.work);
        self.partners.assign(&mut work.out_lanes, outgoing.iter().map(|o| o.to()));
        self.partners.assign(&mut work.in_lanes, incoming.iter().map(|i| i.from));
        if let Some(e) =
            incoming.iter().zip(&work.in_lanes).find_map(|(inc, lane)| self.posted_mismatch(inc, lane))
        {
            self.work = work;
            return Err(e);
        }
        Ok(work)
    }

    /// The error for `problem` on this exchange.
    fn refuse(&self, problem: ExchangeProblem) -> Error {
        Error::Exchange { channel: self.name.clone(), problem }
    }

    fn too_large(&self, sender: usize, receiver: usize, count: Option<usize>, room: usize) -> Error {
        Error::MessageTooLarge { pe: sender, to: receiver, channel: self.name.clone(), count, room }
    }

    /// Waits, for each of `lanes` (the outgoing or the incoming ones), until its signal from
    /// the partner reaches `value`, in whichever order they come, and calls `reached` with
    /// its position. Whatever has already arrived is served first, without waiting; only when
    /// nothing is ready does it block, on all the pending signals at once.
    fn await_each(
        &mut self,
        work: &mut Work,
        incoming: bool,
        value: impl Fn(&Self, &Lane) -> u64,
        mut reached: impl FnMut(&mut Self, usize, &Lane) -> Result<()>,
    ) -> Result<()> {
        let lanes = if incoming { &work.in_lanes } else { &work.out_lanes };
        work.served.clear();
        work.served.resize(lanes.len(), false);
        let mut remaining = lanes.len();
        while remaining > 0 {
            let mut progressed = false;
            for (i, lane) in lanes.iter().enumerate() {
                let signals = if incoming { &self.from_senders } else { &self.from_receivers };
                if !work.served[i] && signals.reached(lane.local * STRIDE, value(self, lane)) {
                    work.served[i] = true;
                    remaining -= 1;
                    progressed = true;
                    reached(self, i, lane)?;
                }
            }
            if progressed || remaining == 0 {
                continue;
            }
            let signals = if incoming { &self.from_senders } else { &self.from_receivers };
            work.waits.clear();
            for (i, lane) in lanes.iter().enumerate() {
                if !work.served[i] {
                    work.waits.push((lane.local * STRIDE, value(self, lane)));
                }
            }
            if let [(index, awaited)] = work.waits[..] {
                let peer = lanes[work.served.iter().position(|s| !s).expect("one pending")].peer;
                signals.wait_ge_from(index, awaited, Some(peer), self.rt.wait_timeout())?;
            } else {
                signals.wait_any_ge(&work.waits)?;
            }
        }
        Ok(())
    }

    /// Advances the call number of a slot, as sender or receiver.
    fn next_call(&mut self, slot: usize, sending: bool) -> Result<u64> {
        let calls = if sending { &mut self.sends } else { &mut self.recvs };
        if calls[slot] + 1 >= MAX_CALLS {
            return Err(self.refuse(ExchangeProblem::CallsExhausted));
        }
        calls[slot] += 1;
        Ok(calls[slot])
    }
}
