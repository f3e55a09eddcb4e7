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

use bytemuck::{Pod, Zeroable};

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

/// Where a receiver wants its next message (put path), in the sender's slot for it.
#[derive(Clone, Copy, Debug, Zeroable, Pod)]
#[repr(C)]
struct Announcement {
    buffer: u64,
    offset: u64,
    room: u64,
}

/// What a sender offers a receiver (get path), in the receiver's slot for it.
#[derive(Clone, Copy, Debug, Zeroable, Pod)]
#[repr(C)]
struct Offer {
    offset: u64,
    count: u64,
}

/// Marks a count as rejected: the message did not fit the announced room.
const REJECTED: u64 = 1 << 63;

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

/// Lanes of a list of partners: the `l`-th message to (or from) a PE takes lane `l`.
fn lanes(me: usize, peers: impl Iterator<Item = usize>) -> Vec<Lane> {
    let mut lanes: Vec<Lane> = Vec::new();
    for peer in peers {
        let lane = lanes.iter().filter(|l| l.peer == peer).count();
        lanes.push(Lane {
            peer,
            local: peer * LANES + lane,
            remote: me * LANES + lane,
        });
    }
    lanes
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
    /// The MPI path's private communicator.
    mpi: Option<MpiChannel>,
    /// Slot `p * LANES + l`: written by receiver `p` (announcements, put path).
    announcements: SymArray<'rt, Announcement>,
    /// Slot `p * LANES + l`: written by sender `p` (offers, get path).
    offers: SymArray<'rt, Offer>,
    /// Slot `p * LANES + l`: written by sender `p` (counts, put and buffered paths).
    counts: SymArray<'rt, u64>,
    /// Signal `p * LANES + l`: raised by receiver `p` (announced, taken, consumed).
    from_receivers: SignalArray<'rt>,
    /// Signal `p * LANES + l`: raised by sender `p` (delivered, offered, posted).
    from_senders: SignalArray<'rt>,
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
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Creates a channel on `path`.
    ///
    /// # Collective
    /// Every PE must create it, with the same path, in the same order.
    pub fn collective_new(rt: &'rt Runtime, name: &str, path: Path) -> Result<Self> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': elements of zero size carry nothing to exchange"
            )));
        }
        let slots = rt.n_pes() * LANES;
        let from_receivers =
            SignalArray::collective_alloc(rt, &format!("{name}: from receivers"), slots)?;
        let from_senders =
            SignalArray::collective_alloc(rt, &format!("{name}: from senders"), slots)?;
        if path == Path::Buffered {
            // Every scratch slot starts consumed, so the first message may be posted.
            for slot in 0..slots {
                from_receivers.store_local(slot, 1);
            }
            rt.barrier();
        }
        Ok(Exchange {
            rt,
            name: name.to_string(),
            path,
            mpi: if path == Path::Mpi {
                Some(MpiChannel::collective_new(rt)?)
            } else {
                None
            },
            announcements: SymArray::collective_alloc(
                rt,
                &format!("{name}: announcements"),
                slots,
            )?,
            offers: SymArray::collective_alloc(rt, &format!("{name}: offers"), slots)?,
            counts: SymArray::collective_alloc(rt, &format!("{name}: counts"), slots)?,
            from_receivers,
            from_senders,
            staging: None,
            reserved: 0,
            sends: vec![0; slots],
            recvs: vec![0; slots],
            pending_takers: Vec::new(),
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
            Path::Get => self.rt.n_pes() * LANES,
            Path::Buffered => self.rt.n_pes() * LANES,
            Path::Put | Path::Mpi => return Ok(()),
        };
        if global <= self.reserved && self.staging.is_some() {
            return Ok(());
        }
        let len = global
            .checked_mul(slots)
            .ok_or_else(|| Error::SizeOverflow {
                array: format!("{}: staging", self.name),
                len: global,
                elem_size: std::mem::size_of::<T>(),
            })?;
        // Messages in flight from the previous call must be done before the buffer moves.
        self.settle()?;
        self.staging = None;
        let policy = GrowthPolicy {
            over_allocation: 1.0,
            freeze_after: None,
        };
        let name = format!("{}: staging", self.name);
        self.staging = Some(GlobalMaxArray::collective_alloc(
            self.rt, &name, len, policy,
        )?);
        self.reserved = global;
        Ok(())
    }

    /// Waits until the receivers of this PE's last get-path messages have taken them.
    fn settle(&mut self) -> Result<()> {
        for lane in std::mem::take(&mut self.pending_takers) {
            let timeout = self.rt.wait_timeout();
            self.from_receivers.wait_ge_from(
                lane.local,
                self.sends[lane.local],
                Some(lane.peer),
                timeout,
            )?;
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
        self.exchange(buffers, &[outgoing], &[incoming], &mut received)?;
        Ok(received[0])
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
        self.validate(buffers, outgoing, incoming, received)?;
        let me = self.rt.my_pe();
        let out_lanes = lanes(me, outgoing.iter().map(|o| o.to));
        let in_lanes = lanes(me, incoming.iter().map(|i| i.from));
        match self.path {
            Path::Put => {
                self.exchange_put(buffers, outgoing, &out_lanes, incoming, &in_lanes, received)
            }
            Path::Get => {
                self.exchange_get(buffers, outgoing, &out_lanes, incoming, &in_lanes, received)
            }
            Path::Buffered => {
                self.exchange_buffered(buffers, outgoing, &out_lanes, incoming, &in_lanes, received)
            }
            Path::Mpi => {
                self.exchange_mpi(buffers, outgoing, &out_lanes, incoming, &in_lanes, received)
            }
        }
    }

    fn validate(
        &self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &[usize],
    ) -> Result<()> {
        let invalid = |what: String| {
            Err(Error::InvalidArgument(format!(
                "exchange '{}': {what}",
                self.name
            )))
        };
        if received.len() != incoming.len() {
            return invalid(format!(
                "received has {} entries for {} incoming messages",
                received.len(),
                incoming.len()
            ));
        }
        for (i, out) in outgoing.iter().enumerate() {
            self.rt
                .check_pe(out.to, || format!("exchange '{}': message to", self.name))?;
            if outgoing[..i].iter().filter(|o| o.to == out.to).count() >= LANES {
                return invalid(format!(
                    "more than {LANES} messages to PE {} in one call",
                    out.to
                ));
            }
        }
        for (i, inc) in incoming.iter().enumerate() {
            self.rt.check_pe(inc.from, || {
                format!("exchange '{}': message from", self.name)
            })?;
            if incoming[..i].iter().filter(|m| m.from == inc.from).count() >= LANES {
                return invalid(format!(
                    "more than {LANES} messages from PE {} in one call",
                    inc.from
                ));
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

    fn too_large(
        &self,
        sender: usize,
        receiver: usize,
        count: Option<usize>,
        room: usize,
    ) -> Error {
        Error::MessageTooLarge {
            pe: sender,
            to: receiver,
            channel: self.name.clone(),
            count,
            room,
        }
    }

    /// Reads this PE's slot of a small symmetric array written by a partner.
    fn slot<S: Pod>(array: &SymArray<'_, S>, slot: usize) -> S {
        let mut value = [S::zeroed()];
        array
            .read_local(slot, &mut value)
            .expect("one slot per PE and lane");
        value[0]
    }

    /// Waits on `signals` for `(lane, value)` pairs in whichever order they are reached and
    /// calls `reached` for each.
    fn await_each(
        &mut self,
        from_senders: bool,
        lanes: &[Lane],
        value: impl Fn(&Self, &Lane) -> u64,
        mut reached: impl FnMut(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        let mut pending: Vec<usize> = (0..lanes.len()).collect();
        while !pending.is_empty() {
            let signals = if from_senders {
                &self.from_senders
            } else {
                &self.from_receivers
            };
            let waits: Vec<(usize, u64)> = pending
                .iter()
                .map(|&i| (lanes[i].local, value(self, &lanes[i])))
                .collect();
            let position = if let [(index, awaited)] = waits[..] {
                signals.wait_ge_from(
                    index,
                    awaited,
                    Some(lanes[pending[0]].peer),
                    self.rt.wait_timeout(),
                )?;
                0
            } else {
                signals.wait_any_ge(&waits)?
            };
            let i = pending.swap_remove(position);
            reached(self, i)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange_put(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        out_lanes: &[Lane],
        incoming: &[Incoming],
        in_lanes: &[Lane],
        received: &mut [usize],
    ) -> Result<()> {
        for (inc, lane) in incoming.iter().zip(in_lanes) {
            self.recvs[lane.local] += 1;
            let announcement = Announcement {
                buffer: inc.buffer as u64,
                offset: inc.offset as u64,
                room: inc.room as u64,
            };
            let call = self.recvs[lane.local];
            self.announcements.put_signal(
                lane.peer,
                lane.remote,
                &[announcement],
                &self.from_receivers,
                lane.remote,
                call,
            )?;
        }
        let me = self.rt.my_pe();
        let mut refused = None;
        self.await_each(
            false,
            out_lanes,
            |ex, lane| ex.sends[lane.local] + 1,
            |ex, i| {
                let (out, lane) = (&outgoing[i], out_lanes[i]);
                ex.sends[lane.local] += 1;
                let call = ex.sends[lane.local];
                let a: Announcement = Self::slot(&ex.announcements, lane.local);
                let buffer = buffers.get(a.buffer as usize).copied();
                let fits = out.data.len() as u64 <= a.room
                    && buffer.is_some_and(|b| {
                        b.check("put", out.to, a.offset as usize, out.data.len())
                            .is_ok()
                    });
                let count = if fits {
                    buffer
                        .expect("checked")
                        .put(out.to, a.offset as usize, out.data)?;
                    out.data.len() as u64
                } else {
                    refused.get_or_insert(ex.too_large(
                        me,
                        out.to,
                        Some(out.data.len()),
                        a.room as usize,
                    ));
                    out.data.len() as u64 | REJECTED
                };
                ex.counts.put_signal(
                    out.to,
                    lane.remote,
                    &[count],
                    &ex.from_senders,
                    lane.remote,
                    call,
                )
            },
        )?;
        self.await_each(
            true,
            in_lanes,
            |ex, lane| ex.recvs[lane.local],
            |ex, i| {
                let count: u64 = Self::slot(&ex.counts, in_lanes[i].local);
                // A refused message does not stop the others from being received.
                match ex.received_count(incoming[i], count) {
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

    /// A count as delivered by a sender, checked against the room.
    fn received_count(&self, inc: Incoming, count: u64) -> Result<usize> {
        let elements = (count & !REJECTED) as usize;
        if count & REJECTED != 0 || elements > inc.room {
            return Err(self.too_large(inc.from, self.rt.my_pe(), Some(elements), inc.room));
        }
        Ok(elements)
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange_get(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        out_lanes: &[Lane],
        incoming: &[Incoming],
        in_lanes: &[Lane],
        received: &mut [usize],
    ) -> Result<()> {
        // The staging buffer is reused: the previous call's receivers must be done with it.
        self.settle()?;
        for (out, lane) in outgoing.iter().zip(out_lanes) {
            // Each receiver and lane has its own region, so a slow receiver of one message
            // never sees the next call's data for another.
            let offset = lane.local * self.reserved;
            self.staging
                .as_ref()
                .expect("validate checked the reservation")
                .array()
                .write_local(offset, out.data)?;
            self.sends[lane.local] += 1;
            let offer = Offer {
                offset: offset as u64,
                count: out.data.len() as u64,
            };
            let call = self.sends[lane.local];
            self.offers.put_signal(
                out.to,
                lane.remote,
                &[offer],
                &self.from_senders,
                lane.remote,
                call,
            )?;
            self.pending_takers.push(*lane);
        }
        for lane in in_lanes {
            self.recvs[lane.local] += 1;
        }
        let mut refused = None;
        self.await_each(
            true,
            in_lanes,
            |ex, lane| ex.recvs[lane.local],
            |ex, i| {
                let (inc, lane) = (incoming[i], in_lanes[i]);
                let offer: Offer = Self::slot(&ex.offers, lane.local);
                let call = ex.recvs[lane.local];
                if offer.count as usize > inc.room {
                    // The receiver refuses the message and releases the sender's buffer; only the
                    // receiver learns of it on this path, since the sender never sees the room.
                    refused.get_or_insert(ex.too_large(
                        inc.from,
                        ex.rt.my_pe(),
                        Some(offer.count as usize),
                        inc.room,
                    ));
                    return ex.from_receivers.set(inc.from, lane.remote, call);
                }
                let staging = ex
                    .staging
                    .as_ref()
                    .expect("validate checked the reservation")
                    .array();
                staging.check("get", inc.from, offer.offset as usize, offer.count as usize)?;
                let target = buffers[inc.buffer];
                // SAFETY: the source range is checked on the sender's staging buffer (same length
                // everywhere); the target range lies inside this PE's buffer (validate checked
                // offset + room, and count <= room); no reference to either is created.
                unsafe {
                    staging.get_raw(
                        inc.from,
                        offer.offset as usize,
                        target.element_ptr(inc.offset),
                        offer.count as usize,
                        false,
                    )
                };
                received[i] = offer.count as usize;
                ex.from_receivers.set(inc.from, lane.remote, call)
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange_buffered(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        out_lanes: &[Lane],
        incoming: &[Incoming],
        in_lanes: &[Lane],
        received: &mut [usize],
    ) -> Result<()> {
        let slot = self.reserved;
        // Sender: wait for the receiver's scratch slot to be free, reset the flag, post.
        self.await_each(
            false,
            out_lanes,
            |_, _| 1,
            |ex, i| {
                let (out, lane) = (&outgoing[i], out_lanes[i]);
                ex.from_receivers.store_local(lane.local, 0);
                let scratch = ex
                    .staging
                    .as_ref()
                    .expect("validate checked the reservation")
                    .array();
                scratch.put(out.to, lane.remote * slot, out.data)?;
                ex.counts
                    .put_value(out.to, lane.remote, out.data.len() as u64)?;
                ex.rt.fence();
                ex.from_senders.set(out.to, lane.remote, 1)
            },
        )?;
        // Receiver: wait for the post, copy from scratch to the final place, reset, release.
        let mut refused = None;
        self.await_each(
            true,
            in_lanes,
            |_, _| 1,
            |ex, i| {
                let (inc, lane) = (incoming[i], in_lanes[i]);
                ex.from_senders.store_local(lane.local, 0);
                let count = ex.received_count(inc, Self::slot(&ex.counts, lane.local));
                if let Ok(count) = count {
                    let scratch = ex
                        .staging
                        .as_ref()
                        .expect("validate checked the reservation")
                        .array();
                    let mut message = vec![T::zeroed(); count];
                    scratch.read_local(lane.local * slot, &mut message)?;
                    buffers[inc.buffer].write_local(inc.offset, &message)?;
                    received[i] = count;
                }
                // The scratch slot is free again, even when its message was refused.
                ex.from_receivers.set(inc.from, lane.remote, 1)?;
                if let Err(e) = count {
                    refused.get_or_insert(e);
                }
                Ok(())
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange_mpi(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        out_lanes: &[Lane],
        incoming: &[Incoming],
        in_lanes: &[Lane],
        received: &mut [usize],
    ) -> Result<()> {
        let channel = self
            .mpi
            .as_ref()
            .expect("the MPI path has its communicator");
        // The lane is the tag, so the forward and backward messages of a pair stay apart.
        let out_tags: Vec<i32> = out_lanes
            .iter()
            .map(|l| (l.remote % LANES) as i32)
            .collect();
        let in_tags: Vec<i32> = in_lanes.iter().map(|l| (l.local % LANES) as i32).collect();
        channel
            .exchange(buffers, outgoing, &out_tags, incoming, &in_tags, received)
            .map_err(|failure| match failure {
                MpiFailure::Truncated { from, room } => {
                    self.too_large(from, self.rt.my_pe(), None, room)
                }
                MpiFailure::Other(e) => e,
            })
    }
}
