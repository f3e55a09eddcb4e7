//! The put path (the offset swap): the receiver writes where its message goes (buffer,
//! offset, room) into the sender's slot and raises a signal with its call number; the sender
//! waits for it, checks that the message fits, puts it straight into the final place (or packs
//! it there through the mapping of a same-node PE) and raises the delivery signal, which
//! carries the count. The receiver's announcement of call `k + 1` is its word that call `k`'s
//! data was used, so one call costs one round trip of synchronisation and nothing is reset.

use std::sync::atomic::{Ordering, fence};

use bytemuck::Pod;

use super::channel::{COUNT_BITS, Channel, NO_BUFFER, REJECTED, STRIDE};
use super::job::{Job, direct_data, split_counted};
use super::message::{Incoming, Outgoing};
use super::partners::Lane;
use super::protocol::Protocol;
use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::SymArray;

/// The put transport: the announcements receivers write into this PE's slots.
pub(super) struct Put<'rt> {
    /// Slot `p * LANES + l`, written by receiver `p`: (buffer, offset, room), rewritten only
    /// when it changes, so that a sender's read of an unchanged announcement stays in its
    /// cache.
    announcements: SymArray<'rt, [u64; STRIDE]>,
    /// What this PE last announced per slot.
    announced: Vec<Option<[u64; 3]>>,
    /// The refusal of a message the started call could not send, reported by its finish.
    refused: Option<Error>,
}

/// Where one message of a call with packed messages goes.
struct Place<T> {
    /// The call number of its lane.
    call: u64,
    /// The receiving buffer, and the offset there.
    buffer: usize,
    offset: usize,
    /// The receiver's place, mapped into this process; `None`: a library put, or refused.
    mapped: Option<*mut T>,
    /// 0 when it fits, else how it was refused.
    refusal: u64,
}

impl<'rt, T: Pod> Protocol<'rt, T> for Put<'rt> {
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        if job.outgoing.len() == 1 && job.incoming.len() == 1 {
            return self.one_each_way(chan, job);
        }
        Protocol::start(self, chan, job)?;
        Protocol::finish(self, chan, job)
    }

    /// Announces every receive, waits for each receiver's announcement and puts its message
    /// as it comes: once every PE of a pair has started, the data is in the receiver's memory,
    /// and the receiver's finish only awaits the delivery signals.
    fn start(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<bool> {
        self.refused = None;
        if job.outgoing.iter().any(|o| matches!(o, Outgoing::Packed { .. })) {
            self.send_packed(chan, job)?;
            return Ok(true);
        }
        for (inc, lane) in job.incoming.iter().zip(job.in_lanes) {
            self.announce(chan, inc, lane)?;
        }
        let mut refused = None;
        let out_lanes = job.out_lanes;
        chan.await_each(
            out_lanes,
            false,
            |chan, lane| chan.sends[lane.local] + 1,
            |chan, i, lane| {
                if let Some(e) = self.put_message(chan, job, i, lane)? {
                    refused.get_or_insert(e);
                }
                Ok(())
            },
        )?;
        self.refused = refused;
        Ok(true)
    }

    /// Awaits every incoming message; a message this PE's start refused to send is reported
    /// here, after its own receives are in.
    fn finish(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        let mut refused = self.refused.take();
        await_delivered(chan, job, &mut refused)?;
        refused.map_or(Ok(()), Err)
    }

    fn post(&mut self, chan: &mut Channel<'rt>, incoming: &Incoming, lane: &Lane) -> Result<()> {
        self.announce_now(chan, incoming, lane)
    }

    fn symmetric_bytes(&self) -> usize {
        self.announcements.len() * std::mem::size_of::<[u64; STRIDE]>()
    }
}

impl<'rt> Put<'rt> {
    /// # Collective
    /// Allocates the announcement slots.
    pub(super) fn collective_new(chan: &Channel<'rt>) -> Result<Self> {
        let slots = chan.slots();
        let name = format!("{}: announcements", chan.name);
        Ok(Put {
            announcements: SymArray::collective_alloc(chan.rt, &name, slots)?,
            announced: vec![None; slots],
            refused: None,
        })
    }

    /// One message each way, without the bookkeeping of many: the common case of a halo
    /// pulse, and the one whose latency matters most.
    #[inline]
    fn one_each_way<T: Pod>(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        let (inc, in_lane, out_lane) = (job.incoming[0], job.in_lanes[0], job.out_lanes[0]);
        self.announce(chan, &inc, &in_lane)?;
        chan.wait_lane(&out_lane, false, chan.sends[out_lane.local] + 1)?;
        let refused = self.put_message(chan, job, 0, &out_lane)?;
        let signal = chan.wait_lane(&in_lane, true, chan.recvs[in_lane.local] << COUNT_BITS)?;
        let count = chan.count_of(inc, &in_lane, signal)?;
        job.received[0] = count;
        job.consume_in_place(0, count);
        refused.map_or(Ok(()), Err)
    }

    /// Receiver side: tells the sender where this call's message goes, unless it was posted.
    #[inline]
    fn announce(&mut self, chan: &mut Channel<'rt>, inc: &Incoming, lane: &Lane) -> Result<()> {
        if chan.consume_posted(inc, lane)? {
            return Ok(());
        }
        self.announce_now(chan, inc, lane)
    }

    /// Receiver side: the announcement itself, rewritten only when it changed; the signal
    /// carries the call number.
    #[inline]
    fn announce_now(&mut self, chan: &mut Channel<'rt>, inc: &Incoming, lane: &Lane) -> Result<()> {
        let call = chan.next_call(lane.local, false)?;
        let announcement = [inc.buffer as u64, inc.offset as u64, inc.room as u64];
        if self.announced[lane.local] != Some(announcement) {
            let mut slot = [0u64; STRIDE];
            slot[..3].copy_from_slice(&announcement);
            self.announcements.put(lane.peer, lane.remote, &[slot])?;
            self.announced[lane.local] = Some(announcement);
            // Put-with-signal order: the announcement lands before the signal.
            chan.rt.fence();
        }
        chan.from_receivers.set(lane.peer, lane.remote * STRIDE, call)
    }

    /// The announcement in this PE's slot `slot` (buffer, offset, room).
    #[inline]
    fn announcement(&self, slot: usize) -> [u64; 3] {
        assert!(slot < self.announcements.len(), "announcement slot in range");
        // SAFETY: the slot is in bounds; its words are read by copy, after the acquire of the
        // announcement signal that published them; no reference into symmetric memory is made.
        unsafe { self.announcements.element_ptr(slot).cast::<[u64; 3]>().read() }
    }

    /// Sender side: where the receiver's announcement on `lane` (in for this call) places a
    /// message of `count` elements to `to` ([`place`]).
    #[inline]
    fn announced_place<T: Pod>(
        &self,
        chan: &Channel<'rt>,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        count: usize,
        lane: &Lane,
    ) -> std::result::Result<(usize, usize), (u64, Error)> {
        place(chan, buffers, to, count, self.announcement(lane.local))
    }

    /// Sender side, once the receiver's announcement of this call is in: checks that message
    /// `i` fits, puts (or packs) it straight into place and delivers. Returns the refusal
    /// when it did not fit (nothing was written, and the receiver learns of it too).
    #[inline]
    fn put_message<T: Pod>(
        &mut self,
        chan: &mut Channel<'rt>,
        job: &mut Job<'_, 'rt, T>,
        i: usize,
        lane: &Lane,
    ) -> Result<Option<Error>> {
        let call = chan.next_call(lane.local, true)?;
        let (to, count) = (job.outgoing[i].to(), job.outgoing[i].len());
        let (refusal, refused) = match self.announced_place(chan, job.buffers, to, count, lane) {
            Ok((index, offset)) => {
                let buffer = job.buffers[index];
                let mapped = buffer.mapped(to);
                match (&job.outgoing[i], mapped) {
                    (Outgoing::Packed { .. }, Some(base)) => {
                        // SAFETY: the receiver announced `offset..offset + room` of this buffer
                        // for this call and reads it only after the delivery signal below; no
                        // other PE writes it (announcements name one sender); the range is in
                        // bounds (checked) and mapped into this process. So this is the only
                        // access to it until the signal.
                        let dest =
                            unsafe { std::slice::from_raw_parts_mut(base.as_ptr().add(offset), count) };
                        (job.pack)(&mut [dest]);
                        fence(Ordering::Release);
                    }
                    (Outgoing::Packed { .. }, None) => {
                        job.stage_packed();
                        buffer.put(to, offset, job.data(i))?;
                    }
                    (direct, _) => {
                        let data = direct_data(job.buffers, direct).expect("a copy or an offer");
                        // SAFETY: announced_place checked `offset + count` against the buffer
                        // (the same length on every PE) and `to` is a partner, so a PE; `data`
                        // lives through the blocking put.
                        unsafe { buffer.put_unchecked(to, offset, data, false) };
                    }
                }
                if mapped.is_none() {
                    // Put-with-signal order off the mapping: the library put lands before the
                    // delivery signal (a store through the mapping is ordered by its own fence).
                    chan.rt.fence();
                }
                (0, None)
            }
            Err((refusal, e)) => (refusal, Some(e)),
        };
        chan.deliver(to, lane, call, count, refusal)?;
        Ok(refused)
    }

    /// The sends of a call with packed messages: once every receiver has announced where its
    /// message goes, the packing function writes the messages to mapped receivers in place and
    /// the others into staging, which is then put with the copies and offers; then every
    /// message is delivered. A message refused for its size is kept for the finish.
    fn send_packed<T: Pod>(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        for (inc, lane) in job.incoming.iter().zip(job.in_lanes) {
            self.announce(chan, inc, lane)?;
        }
        // Every announcement first: the packing function writes all the messages at once.
        chan.await_each(job.out_lanes, false, |chan, lane| chan.sends[lane.local] + 1, |_, _, _| Ok(()))?;
        let (buffers, outgoing) = (job.buffers, job.outgoing);
        let mut refused = None;
        let mut places: Vec<Place<T>> = Vec::with_capacity(outgoing.len());
        for (o, lane) in outgoing.iter().zip(job.out_lanes) {
            let call = chan.next_call(lane.local, true)?;
            places.push(match self.announced_place(chan, buffers, o.to(), o.len(), lane) {
                Ok((buffer, offset)) => {
                    // SAFETY: announced_place checked offset + count against the buffer: the
                    // place lies within it.
                    let mapped =
                        buffers[buffer].mapped(o.to()).map(|base| unsafe { base.as_ptr().add(offset) });
                    Place { call, buffer, offset, mapped, refusal: 0 }
                }
                Err((refusal, e)) => {
                    refused.get_or_insert(e);
                    Place { call, buffer: 0, offset: 0, mapped: None, refusal }
                }
            });
        }
        // Packed messages not written in place are written into staging.
        let staged = |(o, place): (&Outgoing<'_, T>, &Place<T>)| match o {
            Outgoing::Packed { count, .. } if place.mapped.is_none() => *count,
            _ => 0,
        };
        let pack_buffer = &mut *job.pack_buffer;
        pack_buffer.clear();
        pack_buffer.resize(outgoing.iter().zip(&places).map(staged).sum(), T::zeroed());
        {
            let mut staged_slices =
                split_counted(pack_buffer, outgoing.iter().zip(&places).map(staged)).into_iter();
            let mut slices: Vec<&mut [T]> = Vec::with_capacity(outgoing.len());
            for (o, place) in outgoing.iter().zip(&places) {
                let slice = staged_slices.next().expect("one staged slice per message");
                let Outgoing::Packed { count, .. } = o else { continue };
                slices.push(match place.mapped {
                    // SAFETY: the receiver announced `offset..offset + room` of this buffer for
                    // this call and reads it only after the delivery signal below (it waits for
                    // that signal without a deadline of its own shorter than the exchange's,
                    // and announces the region again only in a later call, which needs this
                    // call's signal first); `fits` means count <= room, and the bounds check
                    // covered offset + count; no other PE writes the region (an announcement
                    // names one sender), and the receiver checked that its regions of one call
                    // do not overlap, so two messages to one PE get disjoint slices; the range
                    // is mapped into this process. So each slice is the only access to its
                    // memory until the signal, and the slices are disjoint.
                    Some(place) => unsafe { std::slice::from_raw_parts_mut(place, *count) },
                    None => slice,
                });
            }
            (job.pack)(&mut slices);
        }
        // What is not in place yet goes by puts (through the mapping or the library), then
        // every message is delivered.
        let mut at = 0;
        let mut outcome = Ok(());
        for (o, place) in outgoing.iter().zip(&places) {
            let data = match direct_data(buffers, o) {
                Some(data) => data,
                None if staged((o, place)) > 0 => {
                    at += o.len();
                    &job.pack_buffer[at - o.len()..at]
                }
                None => continue,
            };
            if place.refusal == 0 && outcome.is_ok() {
                outcome = buffers[place.buffer].put(o.to(), place.offset, data);
            }
        }
        // Put-with-signal order: the stores through the mapping and the library puts land
        // before the delivery signals.
        fence(Ordering::Release);
        if places.iter().any(|place| place.mapped.is_none() && place.refusal == 0) {
            chan.rt.fence();
        }
        // Every receiver is signalled even when a put failed (it cannot, after the bounds
        // check above), so that none is left waiting; the failure is this PE's error.
        for ((o, lane), place) in outgoing.iter().zip(job.out_lanes).zip(&places) {
            chan.deliver(o.to(), lane, place.call, o.len(), place.refusal)?;
        }
        outcome?;
        self.refused = refused;
        Ok(())
    }
}

/// Sender side: where the announcement `[buffer, offset, room]` places a message of `count`
/// elements to `to`, as an index into `buffers` and an offset there, checked to fit; or the
/// refusal to deliver (`REJECTED`, with `NO_BUFFER` when the two PEs passed different buffer
/// lists) and its error.
#[inline]
pub(super) fn place<'rt, T: Pod>(
    chan: &Channel<'rt>,
    buffers: &[&SymArray<'rt, T>],
    to: usize,
    count: usize,
    [buffer, offset, room]: [u64; 3],
) -> std::result::Result<(usize, usize), (u64, Error)> {
    let index = buffer as usize;
    // The receiver checked `offset + room` against its copy of the buffer, and every copy of a
    // symmetric array has the same length: a place outside ours means different buffers.
    let placeable = buffers.get(index).is_some_and(|b| {
        (offset as usize).checked_add(count.min(room as usize)).is_some_and(|end| end <= b.len())
    });
    if placeable && count as u64 <= room {
        Ok((index, offset as usize))
    } else {
        Err(refusal(chan, to, count, [buffer, offset, room], placeable))
    }
}

/// Why a message to `to` of `count` elements cannot go where the receiver announced
/// (`[buffer, offset, room]`): the refusal the delivery carries (`REJECTED`, with `NO_BUFFER`
/// when the place is not in this PE's buffers, so the two PEs passed different lists) and
/// this PE's error.
#[cold]
fn refusal(
    chan: &Channel<'_>,
    to: usize,
    count: usize,
    [buffer, offset, room]: [u64; 3],
    placeable: bool,
) -> (u64, Error) {
    let me = chan.rt.my_pe();
    if placeable {
        (REJECTED, chan.too_large(me, to, Some(count), room as usize))
    } else {
        let problem = ExchangeProblem::BuffersDiffer { sender: me, receiver: to, buffer, offset, room };
        (REJECTED | NO_BUFFER, chan.refuse(problem))
    }
}

/// Waits for every incoming message of a call, in whichever order they arrive, notes its
/// count and hands it to the call's consuming function; a refused message is noted in
/// `refused` and does not stop the others from being received.
fn await_delivered<'rt, T: Pod>(
    chan: &mut Channel<'rt>,
    job: &mut Job<'_, 'rt, T>,
    refused: &mut Option<Error>,
) -> Result<()> {
    let in_lanes = job.in_lanes;
    chan.await_each(
        in_lanes,
        true,
        |chan, lane| chan.recvs[lane.local] << COUNT_BITS,
        |chan, i, lane| {
            take_delivered(chan, job, i, lane, refused);
            Ok(())
        },
    )
}

/// Incoming message `i` of a call, delivered on `lane`: notes its count and hands it to the
/// call's consuming function, or notes its refusal in `refused`.
pub(super) fn take_delivered<'rt, T: Pod>(
    chan: &Channel<'rt>,
    job: &mut Job<'_, 'rt, T>,
    i: usize,
    lane: &Lane,
    refused: &mut Option<Error>,
) {
    match chan.delivered_count(job.incoming[i], lane) {
        Ok(count) => {
            job.received[i] = count;
            job.consume_in_place(i, count);
        }
        Err(e) => {
            refused.get_or_insert(e);
        }
    }
}
