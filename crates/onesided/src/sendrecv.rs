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
//! All four give the same bytes in the same places.

use std::fmt;
use std::str::FromStr;

use std::sync::atomic::{Ordering, fence};

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::heap::{GlobalMaxArray, GrowthPolicy, SymArray};
use crate::mpi_path::{MpiChannel, MpiFailure};
use crate::runtime::Runtime;
use crate::signal::SignalArray;

/// Which transport an [`Exchange`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
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

impl Path {
    /// Every path, in the order reports list them.
    pub const ALL: [Path; 4] = [Path::Put, Path::Get, Path::Buffered, Path::Mpi];

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Path::Put => "onesided-put",
            Path::Get => "onesided-get",
            Path::Buffered => "buffered",
            Path::Mpi => "mpi",
        }
    }

    /// Whether the path needs [`Exchange::collective_reserve`] before messages are sent.
    pub fn needs_reserve(self) -> bool {
        matches!(self, Path::Get | Path::Buffered)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Path {
    type Err = Error;

    fn from_str(s: &str) -> Result<Path> {
        match s {
            "onesided-put" | "put" | "onesided" => Ok(Path::Put),
            "onesided-get" | "get" => Ok(Path::Get),
            "buffered" => Ok(Path::Buffered),
            "mpi" => Ok(Path::Mpi),
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

/// Marks a count as rejected: the message did not fit the announced room.
const REJECTED: u64 = 1 << 63;
/// Marks a count as rejected because the sender has no such buffer as the one announced (the
/// two PEs passed different buffer lists).
const NO_BUFFER: u64 = 1 << 62;

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

/// Two incoming messages whose regions share an element of the same buffer, if any.
fn overlapping(incoming: &[Incoming]) -> Option<(Incoming, Incoming)> {
    let meet = |a: &Incoming, b: &Incoming| {
        a.buffer == b.buffer
            && a.room > 0
            && b.room > 0
            && a.offset < b.offset + b.room
            && b.offset < a.offset + a.room
    };
    if incoming.len() <= 16 {
        // The common case (a few halo pulses): no allocation.
        for (i, a) in incoming.iter().enumerate() {
            if let Some(b) = incoming[i + 1..].iter().find(|b| meet(a, b)) {
                return Some((*a, *b));
            }
        }
        return None;
    }
    let mut sorted: Vec<Incoming> = incoming.iter().filter(|i| i.room > 0).copied().collect();
    sorted.sort_unstable_by_key(|i| (i.buffer, i.offset));
    sorted.windows(2).find(|w| meet(&w[0], &w[1])).map(|w| (w[0], w[1]))
}

/// The PEs an exchange talks to, and where each pair's slots sit: per partner, [`LANES`]
/// slots in this PE's arrays and as many in the partner's. An exchange built for every PE
/// keeps a partner's slots at the partner's number; one built for a few partners keeps them
/// at the partner's place in its sorted list, so that its arrays grow with the partners, not
/// with the PE count.
struct Partners {
    me: usize,
    /// The sorted partners with, for each, this PE's place in the partner's list; `None`:
    /// every PE, each at its own number.
    listed: Option<Vec<(usize, usize)>>,
    /// Partners per PE the arrays hold (the largest list over all PEs).
    capacity: usize,
}

impl Partners {
    /// This PE's place for `peer`, and the partner's place for this PE, or `None` when `peer`
    /// is not a partner.
    #[inline]
    fn places(&self, peer: usize) -> Option<(usize, usize)> {
        match &self.listed {
            None => Some((peer, self.me)),
            Some(list) => list.binary_search_by_key(&peer, |p| p.0).ok().map(|i| (i, list[i].1)),
        }
    }

    /// The lane `lane` of the pair with `peer` (a partner).
    #[inline]
    fn lane(&self, peer: usize, lane: usize) -> Lane {
        let (local, remote) = self.places(peer).expect("validated partner");
        Lane { peer, local: local * LANES + lane, remote: remote * LANES + lane }
    }

    /// Fills `lanes` for a list of partners: the `l`-th message to (or from) a PE takes lane
    /// `l`.
    fn assign(&self, lanes: &mut Vec<Lane>, peers: impl Iterator<Item = usize>) {
        lanes.clear();
        for peer in peers {
            let lane = lanes.iter().filter(|l| l.peer == peer).count();
            lanes.push(self.lane(peer, lane));
        }
    }
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

/// A send-receive channel for elements of type `T`, on one of the [`Path`]s.
///
/// Exchanges are pairwise: only the PEs that exchange messages take part, and they need not
/// arrive together. Per pair and direction, the `k`-th send of one PE meets the `k`-th
/// receive of the other; within one call, the `l`-th message one PE sends another meets the
/// `l`-th message the other receives from it (at most [`LANES`] per pair and call).
pub struct Exchange<'rt, T: Pod> {
    rt: &'rt Runtime,
    name: String,
    path: Path,
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
    pub fn collective_new(rt: &'rt Runtime, name: &str, path: Path) -> Result<Self> {
        let partners = Partners { me: rt.my_pe(), listed: None, capacity: rt.n_pes() };
        Self::collective_build(rt, name, path, partners)
    }

    /// Creates a channel on `path` between this PE and `partners` only (the PEs it will send
    /// to or receive from, in any order; repeats are ignored): its symmetric memory grows with
    /// the largest number of partners any PE names, not with the PE count. Partnership must
    /// be mutual: when PE `p` names `q`, `q` names `p`.
    ///
    /// # Collective
    /// Every PE must create it, with the same path, in the same order.
    ///
    /// # Errors
    /// On every PE: [`Error::InvalidArgument`] for a partner that is not a PE, or when some
    /// PE names a partner that does not name it back.
    pub fn collective_with_partners(
        rt: &'rt Runtime,
        name: &str,
        path: Path,
        partners: &[usize],
    ) -> Result<Self> {
        let me = rt.my_pe();
        let mut peers = partners.to_vec();
        peers.sort_unstable();
        peers.dedup();
        let stray = peers.iter().find(|&&p| p >= rt.n_pes()).map_or(0, |&p| p as u64 + 1);
        let mut agreed = [peers.len() as u64, stray.min(i64::MAX as u64)];
        rt.max_u64(&mut agreed)?;
        if agreed[1] > 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': partner {} is not a PE of this job of {} PEs",
                agreed[1] - 1,
                rt.n_pes()
            )));
        }
        let capacity = agreed[0] as usize;
        // Each PE publishes its list; each reads its partners' lists to find its place there.
        let table = SymArray::<u64>::collective_alloc(rt, &format!("{name}: partner lists"), capacity + 1)?;
        let mut mine = vec![u64::MAX; capacity + 1];
        mine[0] = peers.len() as u64;
        for (slot, &p) in mine[1..].iter_mut().zip(&peers) {
            *slot = p as u64;
        }
        table.write_local(0, &mine)?;
        rt.barrier();
        let mut listed = Vec::with_capacity(peers.len());
        let mut theirs = vec![0u64; capacity + 1];
        let mut one_sided = 0;
        for &p in &peers {
            table.get(p, 0, &mut theirs)?;
            let count = (theirs[0] as usize).min(capacity);
            match theirs[1..=count].iter().position(|&q| q == me as u64) {
                Some(place) => listed.push((p, place)),
                None => one_sided = one_sided.max((me as u64 + 1) << 24 | p as u64),
            }
        }
        // Everyone has read every list it needs before the table goes.
        let one_sided = rt.max_u64_one(one_sided)?;
        drop(table);
        if one_sided > 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': PE {} names PE {} as a partner, but PE {} does not name it back; \
                 partnership must be mutual",
                (one_sided >> 24) - 1,
                one_sided & 0xff_ffff,
                one_sided & 0xff_ffff
            )));
        }
        let partners = Partners { me, listed: Some(listed), capacity };
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

    fn collective_build(rt: &'rt Runtime, name: &str, path: Path, partners: Partners) -> Result<Self> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': elements of zero size carry nothing to exchange"
            )));
        }
        let slots = partners.capacity * LANES;
        let padded = slots * STRIDE;
        let from_receivers = SignalArray::collective_alloc(rt, &format!("{name}: from receivers"), padded)?;
        let from_senders = SignalArray::collective_alloc(rt, &format!("{name}: from senders"), padded)?;
        if path == Path::Buffered {
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
            mpi: if path == Path::Mpi { Some(MpiChannel::collective_new(rt)?) } else { None },
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
    pub fn path(&self) -> Path {
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
            Path::Get | Path::Buffered => self.partners.capacity * LANES,
            Path::Put | Path::Mpi => return Ok(()),
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

    /// Waits until the receivers of this PE's last get-path messages have taken them.
    fn settle(&mut self) -> Result<()> {
        for lane in std::mem::take(&mut self.pending_takers) {
            let timeout = self.rt.wait_timeout();
            self.from_receivers.wait_ge_from(
                lane.local * STRIDE,
                self.sends[lane.local],
                Some(lane.peer),
                timeout,
            )?;
        }
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
        self.validate(buffers, &[], incoming, incoming.len())?;
        let mut lanes = Vec::with_capacity(incoming.len());
        self.partners.assign(&mut lanes, incoming.iter().map(|i| i.from));
        for (inc, lane) in incoming.iter().zip(&lanes) {
            if self.posted[lane.local].is_some() {
                return Err(Error::InvalidArgument(format!(
                    "exchange '{}': a receive from PE {} is already posted; exchange before posting again",
                    self.name, inc.from
                )));
            }
        }
        for (inc, lane) in incoming.iter().zip(&lanes) {
            if self.path == Path::Put {
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
        if self.path == Path::Put {
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
        if self.path == Path::Put {
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

    /// Sends every `outgoing` message and receives every `incoming` one; `received[i]` is the
    /// number of elements that arrived for `incoming[i]`. Returns when every message this PE
    /// receives is in place and every message it sends may be overwritten at the source.
    ///
    /// # Errors
    /// - [`Error::MessageTooLarge`] when a message exceeds the room its receiver gave: on the
    ///   receiver, and on the put path also on the sender, which checks before writing
    ///   anything; the other messages of the call are still delivered;
    /// - [`Error::InvalidArgument`] for more than [`LANES`] messages between one pair of PEs
    ///   in one call, a buffer index out of range, or `received` of the wrong length;
    /// - [`Error::OutOfBounds`] when `offset + room` exceeds the receiving buffer;
    /// - [`Error::WaitTimeout`] when a partner does not take part.
    pub fn exchange(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
    ) -> Result<()> {
        self.validate(buffers, outgoing, incoming, received.len())?;
        let mut work = std::mem::take(&mut self.work);
        self.partners.assign(&mut work.out_lanes, outgoing.iter().map(|o| o.to));
        self.partners.assign(&mut work.in_lanes, incoming.iter().map(|i| i.from));
        // Every posted receive must match before any is consumed: a refused call leaves the
        // posted receives as they were.
        if let Some(e) =
            incoming.iter().zip(&work.in_lanes).find_map(|(inc, lane)| self.posted_mismatch(inc, lane))
        {
            self.work = work;
            return Err(e);
        }
        if self.path != Path::Put {
            // Only the put path announces; the others just take the posted receives.
            for (inc, lane) in incoming.iter().zip(&work.in_lanes) {
                self.consume_posted(inc, lane)?;
            }
        }
        let outcome = match self.path {
            Path::Put => self.exchange_put(buffers, outgoing, incoming, received, &mut work),
            Path::Get => self.exchange_get(buffers, outgoing, incoming, received, &mut work),
            Path::Buffered => self.exchange_buffered(buffers, outgoing, incoming, received, &mut work),
            Path::Mpi => self.exchange_mpi(buffers, outgoing, incoming, received, &mut work),
        };
        self.work = work;
        outcome
    }

    /// The checks of [`validate`](Self::validate) for one message each way.
    fn validate_one(&self, buffers: &[&SymArray<'rt, T>], to: usize, inc: &Incoming) -> Result<()> {
        self.rt.check_pe(to, || format!("exchange '{}': message to", self.name))?;
        self.rt.check_pe(inc.from, || format!("exchange '{}': message from", self.name))?;
        self.check_partner(to)?;
        self.check_partner(inc.from)?;
        match buffers.get(inc.buffer) {
            Some(buffer) => buffer.check("receive", self.rt.my_pe(), inc.offset, inc.room),
            None => Err(Error::InvalidArgument(format!(
                "exchange '{}': buffer {} of {} for the message from PE {}",
                self.name,
                inc.buffer,
                buffers.len(),
                inc.from
            ))),
        }
    }

    fn validate(
        &self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: usize,
    ) -> Result<()> {
        let invalid = |what: String| Err(Error::InvalidArgument(format!("exchange '{}': {what}", self.name)));
        if received != incoming.len() {
            return invalid(format!(
                "received has {received} entries for {} incoming messages",
                incoming.len()
            ));
        }
        for (i, out) in outgoing.iter().enumerate() {
            self.rt.check_pe(out.to, || format!("exchange '{}': message to", self.name))?;
            self.check_partner(out.to)?;
            if outgoing[..i].iter().filter(|o| o.to == out.to).count() >= LANES {
                return invalid(format!("more than {LANES} messages to PE {} in one call", out.to));
            }
        }
        for (i, inc) in incoming.iter().enumerate() {
            self.rt.check_pe(inc.from, || format!("exchange '{}': message from", self.name))?;
            self.check_partner(inc.from)?;
            if incoming[..i].iter().filter(|m| m.from == inc.from).count() >= LANES {
                return invalid(format!("more than {LANES} messages from PE {} in one call", inc.from));
            }
            let Some(buffer) = buffers.get(inc.buffer) else {
                return invalid(format!(
                    "buffer {} of {} for the message from PE {}",
                    inc.buffer,
                    buffers.len(),
                    inc.from
                ));
            };
            buffer.check("receive", self.rt.my_pe(), inc.offset, inc.room)?;
        }
        if let Some((a, b)) = overlapping(incoming) {
            return invalid(format!(
                "the messages from PE {} and PE {} would share elements of buffer {} (at {} room {}, \
                 at {} room {}); give each incoming message its own region",
                a.from, b.from, a.buffer, a.offset, a.room, b.offset, b.room
            ));
        }
        if self.path.needs_reserve() {
            let largest = outgoing.iter().map(|o| o.data.len()).max().unwrap_or(0);
            if largest > self.reserved
                || (self.staging.is_none() && !(outgoing.is_empty() && incoming.is_empty()))
            {
                return invalid(format!(
                    "a message of {largest} elements exceeds the {} reserved per message on the {} \
                     path; call collective_reserve with the largest message first",
                    self.reserved, self.path
                ));
            }
        }
        Ok(())
    }

    /// An error when `peer` is not one of the exchange's partners.
    fn check_partner(&self, peer: usize) -> Result<()> {
        if self.partners.places(peer).is_some() {
            return Ok(());
        }
        let named: Vec<usize> = self.partners.listed.iter().flatten().map(|p| p.0).collect();
        Err(Error::InvalidArgument(format!(
            "exchange '{}': PE {peer} is not a partner of PE {} (it named {named:?}); name every PE \
             it talks to at collective_with_partners",
            self.name, self.partners.me
        )))
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

    fn exchange_put(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        for (inc, lane) in incoming.iter().zip(&work.in_lanes) {
            self.announce(inc, lane)?;
        }
        let mut refused = None;
        self.await_each(
            work,
            false,
            |ex, lane| ex.sends[lane.local] + 1,
            |ex, i, lane| {
                let payload = Payload::<T, fn(&mut [T])>::Data(outgoing[i].data);
                if let Some(e) = ex.put_announced(buffers, outgoing[i].to, payload, lane)? {
                    refused.get_or_insert(e);
                }
                Ok(())
            },
        )?;
        self.await_each(
            work,
            true,
            |ex, lane| ex.recvs[lane.local] << COUNT_BITS,
            |ex, i, lane| {
                // A refused message does not stop the others from being received.
                match ex.delivered_count(incoming[i], lane) {
                    Ok(count) => received[i] = count,
                    Err(e) => {
                        refused.get_or_insert(e);
                    }
                }
                Ok(())
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    /// One message each way on the put path, without the bookkeeping of many: the common case
    /// of a halo pulse, and the one whose latency matters most.
    fn sendrecv_put<F: FnOnce(&mut [T])>(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        payload: Payload<'_, T, F>,
        inc: &Incoming,
    ) -> Result<usize> {
        let in_lane = self.partners.lane(inc.from, 0);
        let out_lane = self.partners.lane(to, 0);
        self.announce(inc, &in_lane)?;
        let timeout = self.rt.wait_timeout();
        let announced = self.sends[out_lane.local] + 1;
        self.from_receivers.wait_ge_from(out_lane.local * STRIDE, announced, Some(to), timeout)?;
        let refused = self.put_announced(buffers, to, payload, &out_lane)?;
        let delivered = self.recvs[in_lane.local] << COUNT_BITS;
        let from = Some(inc.from);
        let signal = self.from_senders.wait_ge_from(in_lane.local * STRIDE, delivered, from, timeout)?;
        let received = self.count_of(*inc, &in_lane, signal)?;
        refused.map_or(Ok(received), Err)
    }

    /// Put path, receiver side: tells the sender where this call's message goes. The
    /// announcement is rewritten only when it changed; the signal carries the call number.
    fn announce(&mut self, inc: &Incoming, lane: &Lane) -> Result<()> {
        if self.consume_posted(inc, lane)? {
            return Ok(());
        }
        let call = self.next_call(lane.local, false)?;
        let announcement = [inc.buffer as u64, inc.offset as u64, inc.room as u64];
        if self.announced[lane.local] != Some(announcement) {
            let mut slot = [0u64; STRIDE];
            slot[..3].copy_from_slice(&announcement);
            self.announcements.put(lane.peer, lane.remote, &[slot])?;
            self.announced[lane.local] = Some(announcement);
            // Put-with-signal order: the announcement lands before the signal.
            self.rt.fence();
        }
        self.from_receivers.set(lane.peer, lane.remote * STRIDE, call)
    }

    /// Whether a receive of this message was posted (and is now consumed); an error when a
    /// different receive was posted for its lane.
    fn consume_posted(&mut self, inc: &Incoming, lane: &Lane) -> Result<bool> {
        if let Some(e) = self.posted_mismatch(inc, lane) {
            return Err(e);
        }
        Ok(self.posted[lane.local].take().is_some())
    }

    /// The error when a receive different from `inc` was posted for its lane.
    fn posted_mismatch(&self, inc: &Incoming, lane: &Lane) -> Option<Error> {
        match self.posted[lane.local] {
            None => None,
            Some(posted) if posted == *inc => None,
            Some(posted) => Some(Error::InvalidArgument(format!(
                "exchange '{}': a receive from PE {} into buffer {} at {} (room {}) was posted, but \
                     this call receives into buffer {} at {} (room {}); a posted receive must be consumed \
                     as posted",
                self.name,
                inc.from,
                posted.buffer,
                posted.offset,
                posted.room,
                inc.buffer,
                inc.offset,
                inc.room
            ))),
        }
    }

    /// The announcement in this PE's slot `slot` (buffer, offset, room).
    fn announcement(&self, slot: usize) -> [u64; 3] {
        assert!(slot < self.announcements.len(), "announcement slot in range");
        // SAFETY: the slot is in bounds; its words are read by copy, after the acquire of the
        // announcement signal that published them; no reference into symmetric memory is made.
        unsafe { self.announcements.element_ptr(slot).cast::<[u64; 3]>().read() }
    }

    /// Put path, sender side, once the receiver's announcement of this call is in: checks
    /// that the message fits, puts it straight into place and delivers. Returns the refusal
    /// when it did not fit (nothing was written, and the receiver learns of it too).
    fn put_announced<F: FnOnce(&mut [T])>(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        payload: Payload<'_, T, F>,
        lane: &Lane,
    ) -> Result<Option<Error>> {
        let call = self.next_call(lane.local, true)?;
        let [buffer, offset, room] = self.announcement(lane.local);
        let count = payload.len();
        let index = buffer as usize;
        let buffer = buffers.get(index).copied();
        // The receiver checked `offset + room` against its copy of the buffer, and every copy
        // of a symmetric array has the same length: a failing check means different buffers.
        let placeable =
            buffer.is_some_and(|b| b.check("put", to, offset as usize, count.min(room as usize)).is_ok());
        let fits = placeable && count as u64 <= room;
        let refused = if fits {
            let (buffer, offset) = (buffer.expect("checked"), offset as usize);
            match payload {
                Payload::Data(data) => buffer.put(to, offset, data)?,
                Payload::Pack { count, fill } => match buffer.mapped(to) {
                    Some(base) => {
                        // SAFETY: the receiver announced `offset..offset + room` of this buffer
                        // for this call and reads it only after the delivery signal below; no
                        // other PE writes it (announcements name one sender); the range is in
                        // bounds (checked) and mapped into this process. So this is the only
                        // access to it until the signal.
                        let dest =
                            unsafe { std::slice::from_raw_parts_mut(base.as_ptr().add(offset), count) };
                        fill(dest);
                        fence(Ordering::Release);
                    }
                    None => {
                        let mut staging = std::mem::take(&mut self.pack_buffer);
                        staging.clear();
                        staging.resize(count, T::zeroed());
                        fill(&mut staging);
                        let outcome = buffer.put(to, offset, &staging);
                        self.pack_buffer = staging;
                        outcome?;
                    }
                },
            }
            if buffer.mapped(to).is_none() {
                // Put-with-signal order off the mapping: the library put lands before the
                // delivery signal (a store through the mapping is ordered by its own fence).
                self.rt.fence();
            }
            None
        } else if !placeable {
            Some(Error::InvalidArgument(format!(
                "exchange '{}': PE {to} announced buffer {index} (offset {offset}, room {room}) for the \
                 message from PE {}, which passed {} buffers that do not hold it; every PE must pass \
                 the same buffers in the same order",
                self.name,
                self.rt.my_pe(),
                buffers.len()
            )))
        } else {
            Some(self.too_large(self.rt.my_pe(), to, Some(count), room as usize))
        };
        let refusal = match (fits, placeable) {
            (true, _) => 0,
            (false, true) => REJECTED,
            (false, false) => REJECTED | NO_BUFFER,
        };
        self.deliver(to, lane, call, count, refusal)?;
        Ok(refused)
    }

    /// Advances the call number of a slot, as sender or receiver.
    fn next_call(&mut self, slot: usize, sending: bool) -> Result<u64> {
        let calls = if sending { &mut self.sends } else { &mut self.recvs };
        if calls[slot] + 1 >= MAX_CALLS {
            return Err(Error::InvalidArgument(format!(
                "exchange '{}' has used up its {MAX_CALLS} call numbers with one partner; create a new one",
                self.name
            )));
        }
        calls[slot] += 1;
        Ok(calls[slot])
    }

    /// Raises the delivery signal of call `call` to `to`, with the count inline when it fits,
    /// and in the count slot (before the signal) when it does not or the message was refused.
    /// `refusal` is 0, [`REJECTED`], or `REJECTED | NO_BUFFER`.
    fn deliver(&self, to: usize, lane: &Lane, call: u64, count: usize, refusal: u64) -> Result<()> {
        let count = count as u64;
        let inline = if refusal != 0 || count >= COUNT_ELSEWHERE {
            let mut slot = [0u64; STRIDE];
            slot[0] = count | refusal;
            self.counts.put(to, lane.remote, &[slot])?;
            self.rt.fence();
            COUNT_ELSEWHERE
        } else {
            count
        };
        self.from_senders.set(to, lane.remote * STRIDE, call << COUNT_BITS | inline)
    }

    /// The count of a delivered message, checked against the room.
    fn delivered_count(&self, inc: Incoming, lane: &Lane) -> Result<usize> {
        let signal = self.from_senders.value(lane.local * STRIDE)?;
        self.count_of(inc, lane, signal)
    }

    /// The count a delivery signal carries (or points to), checked against the room.
    fn count_of(&self, inc: Incoming, lane: &Lane, signal: u64) -> Result<usize> {
        let mut count = signal & COUNT_ELSEWHERE;
        if count == COUNT_ELSEWHERE {
            let mut slot = [[0u64; STRIDE]];
            self.counts.read_local(lane.local, &mut slot)?;
            count = slot[0][0];
        }
        let elements = (count & !(REJECTED | NO_BUFFER)) as usize;
        if count & NO_BUFFER != 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{}': PE {} has no place for its message to PE {} in buffer {} (offset {}, \
                 room {}): the two PEs passed different buffers; every PE must pass the same buffers \
                 in the same order",
                self.name,
                inc.from,
                self.rt.my_pe(),
                inc.buffer,
                inc.offset,
                inc.room
            )));
        }
        if count & REJECTED != 0 || elements > inc.room {
            return Err(self.too_large(inc.from, self.rt.my_pe(), Some(elements), inc.room));
        }
        Ok(elements)
    }

    fn exchange_get(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        // The staging buffer is reused: the previous call's receivers must be done with it.
        self.settle()?;
        for (out, lane) in outgoing.iter().zip(&work.out_lanes) {
            // Each receiver and lane has its own region of the staging buffer, at an offset
            // the receiver knows: its slot on this PE times the reservation.
            let staging = self.staging.as_ref().expect("validate checked the reservation");
            staging.array().write_local(lane.local * self.reserved, out.data)?;
            let call = self.next_call(lane.local, true)?;
            self.deliver(out.to, lane, call, out.data.len(), 0)?;
            self.pending_takers.push(*lane);
        }
        for lane in &work.in_lanes {
            self.next_call(lane.local, false)?;
        }
        let mut refused = None;
        self.await_each(
            work,
            true,
            |ex, lane| ex.recvs[lane.local] << COUNT_BITS,
            |ex, i, lane| {
                let inc = incoming[i];
                let call = ex.recvs[lane.local];
                match ex.delivered_count(inc, lane) {
                    Err(e) => {
                        // The receiver refuses the message and releases the sender's buffer; only
                        // the receiver learns of it on this path, since the sender never sees the
                        // room.
                        refused.get_or_insert(e);
                    }
                    Ok(count) => {
                        let staging = ex.staging.as_ref().expect("validate checked the reservation").array();
                        let offset = lane.remote * ex.reserved;
                        staging.check("get", inc.from, offset, count)?;
                        let target = buffers[inc.buffer];
                        // SAFETY: the source range is checked on the sender's staging buffer (same
                        // length everywhere); the target range lies inside this PE's buffer
                        // (validate checked offset + room, and count <= room); no reference to
                        // either is created.
                        unsafe {
                            staging.get_raw(inc.from, offset, target.element_ptr(inc.offset), count, false)
                        };
                        received[i] = count;
                    }
                }
                ex.from_receivers.set(inc.from, lane.remote * STRIDE, call)
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    fn exchange_buffered(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        let slot = self.reserved;
        // Sender: wait for the receiver's scratch slot to be free, reset the flag, post.
        self.await_each(
            work,
            false,
            |_, _| 1,
            |ex, i, lane| {
                let out = &outgoing[i];
                ex.from_receivers.store_local(lane.local * STRIDE, 0);
                let scratch = ex.staging.as_ref().expect("validate checked the reservation").array();
                scratch.put(out.to, lane.remote * slot, out.data)?;
                let mut count = [0u64; STRIDE];
                count[0] = out.data.len() as u64;
                ex.counts.put(out.to, lane.remote, &[count])?;
                ex.rt.fence();
                ex.from_senders.set(out.to, lane.remote * STRIDE, 1)
            },
        )?;
        // Receiver: wait for the post, copy from scratch to the final place, reset, release.
        let mut refused = None;
        self.await_each(
            work,
            true,
            |_, _| 1,
            |ex, i, lane| {
                let inc = incoming[i];
                ex.from_senders.store_local(lane.local * STRIDE, 0);
                let mut count = [[0u64; STRIDE]];
                ex.counts.read_local(lane.local, &mut count)?;
                let count = count[0][0] as usize;
                if count <= inc.room {
                    let scratch = ex.staging.as_ref().expect("validate checked the reservation");
                    buffers[inc.buffer].copy_local_from(
                        inc.offset,
                        scratch.array(),
                        lane.local * slot,
                        count,
                    )?;
                    received[i] = count;
                } else {
                    refused.get_or_insert(ex.too_large(inc.from, ex.rt.my_pe(), Some(count), inc.room));
                }
                // The scratch slot is free again, even when its message was refused.
                ex.from_receivers.set(inc.from, lane.remote * STRIDE, 1)
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    fn exchange_mpi(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        // The lane is the tag, so the forward and backward messages of a pair stay apart.
        work.out_tags.clear();
        work.out_tags.extend(work.out_lanes.iter().map(|l| (l.remote % LANES) as i32));
        work.in_tags.clear();
        work.in_tags.extend(work.in_lanes.iter().map(|l| (l.local % LANES) as i32));
        let channel = self.mpi.as_mut().expect("the MPI path has its communicator");
        let outcome = channel.exchange(buffers, outgoing, &work.out_tags, incoming, &work.in_tags, received);
        outcome.map_err(|failure| match failure {
            MpiFailure::Truncated { from, room } => self.too_large(from, self.rt.my_pe(), None, room),
            MpiFailure::Other(e) => e,
        })
    }
}
