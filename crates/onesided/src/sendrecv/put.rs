//! The put path (the offset swap): the receiver writes where its message goes (buffer,
//! offset, room) into the sender's slot and raises a signal with its call number; the sender
//! waits for it, checks that the message fits, puts it straight into the final place (or packs
//! it there through the mapping of a same-node PE) and raises the delivery signal, which
//! carries the count. The receiver's announcement of call `k + 1` is its word that call `k`'s
//! data was used, so one call costs one round trip of synchronisation and nothing is reset.

use std::sync::atomic::{Ordering, fence};

use bytemuck::Pod;

use super::{
    COUNT_BITS, Exchange, Incoming, Lane, NO_BUFFER, Outgoing, Packed, Payload, REJECTED, STRIDE, Transport,
    Work, split_counted,
};
use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::SymArray;

/// The put transport.
pub(super) struct Put;

/// Where one message of [`Put::exchange_packed`] goes.
struct Place<T> {
    /// The call number of its lane.
    call: u64,
    /// The receiving buffer, and the offset there.
    buffer: usize,
    offset: usize,
    /// The receiver's place, mapped into this process; `None`: staging.
    mapped: Option<*mut T>,
    /// 0 when it fits, else how it was refused.
    refusal: u64,
}

impl Transport for Put {
    fn exchange<'rt, T: Pod>(
        ex: &mut Exchange<'rt, T>,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        for (inc, lane) in incoming.iter().zip(&work.in_lanes) {
            ex.announce(inc, lane)?;
        }
        let mut refused = None;
        ex.await_each(
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
        Put::await_delivered(ex, work, incoming, received, &mut refused)?;
        refused.map_or(Ok(()), Err)
    }
}

impl Put {
    /// Waits for every incoming message of a call, in whichever order they arrive, and notes
    /// its count in `received`; a refused message is noted in `refused` and does not stop the
    /// others from being received.
    fn await_delivered<T: Pod>(
        ex: &mut Exchange<'_, T>,
        work: &mut Work,
        incoming: &[Incoming],
        received: &mut [usize],
        refused: &mut Option<Error>,
    ) -> Result<()> {
        ex.await_each(
            work,
            true,
            |ex, lane| ex.recvs[lane.local] << COUNT_BITS,
            |ex, i, lane| {
                match ex.delivered_count(incoming[i], lane) {
                    Ok(count) => received[i] = count,
                    Err(e) => {
                        refused.get_or_insert(e);
                    }
                }
                Ok(())
            },
        )
    }

    /// [`Exchange::exchange_packed`] on the put path: once every receiver has announced where
    /// its message goes, `fill` writes the messages to mapped receivers in place and the
    /// others into staging, which is then put; then every message is delivered and every
    /// incoming one awaited.
    pub(super) fn exchange_packed<'rt, T: Pod>(
        ex: &mut Exchange<'rt, T>,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Packed],
        fill: impl FnOnce(&mut [&mut [T]]),
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        for (inc, lane) in incoming.iter().zip(&work.in_lanes) {
            ex.announce(inc, lane)?;
        }
        // Every announcement first: fill writes all the messages at once.
        ex.await_each(work, false, |ex, lane| ex.sends[lane.local] + 1, |_, _, _| Ok(()))?;
        let mut refused = None;
        let mut places: Vec<Place<T>> = Vec::with_capacity(outgoing.len());
        for (o, lane) in outgoing.iter().zip(&work.out_lanes) {
            let call = ex.next_call(lane.local, true)?;
            places.push(match ex.announced_place(buffers, o.to, o.count, lane) {
                Ok((buffer, offset)) => {
                    // SAFETY: announced_place checked offset + count against the buffer: the
                    // place lies within it.
                    let mapped =
                        buffers[buffer].mapped(o.to).map(|base| unsafe { base.as_ptr().add(offset) });
                    Place { call, buffer, offset, mapped, refusal: 0 }
                }
                Err((refusal, e)) => {
                    refused.get_or_insert(e);
                    Place { call, buffer: 0, offset: 0, mapped: None, refusal }
                }
            });
        }
        // Messages not written in place are written into staging.
        let staged = |(o, place): (&Packed, &Place<T>)| if place.mapped.is_none() { o.count } else { 0 };
        let mut staging = std::mem::take(&mut ex.pack_buffer);
        staging.clear();
        staging.resize(outgoing.iter().zip(&places).map(staged).sum(), T::zeroed());
        {
            let mut staged_slices =
                split_counted(&mut staging, outgoing.iter().zip(&places).map(staged)).into_iter();
            let mut slices: Vec<&mut [T]> = Vec::with_capacity(outgoing.len());
            for (o, place) in outgoing.iter().zip(&places) {
                let slice = staged_slices.next().expect("one staged slice per message");
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
                    Some(place) => unsafe { std::slice::from_raw_parts_mut(place, o.count) },
                    None => slice,
                });
            }
            fill(&mut slices);
        }
        // The staged messages that fit go by library puts, then every message is delivered.
        let mut at = 0;
        let mut outcome = Ok(());
        for (o, place) in outgoing.iter().zip(&places) {
            if place.mapped.is_none() {
                if place.refusal == 0 && outcome.is_ok() {
                    outcome = buffers[place.buffer].put(o.to, place.offset, &staging[at..at + o.count]);
                }
                at += o.count;
            }
        }
        ex.pack_buffer = staging;
        // Put-with-signal order: the stores through the mapping and the library puts land
        // before the delivery signals.
        fence(Ordering::Release);
        if places.iter().any(|place| place.mapped.is_none() && place.refusal == 0) {
            ex.rt.fence();
        }
        // Every receiver is signalled even when a put failed (it cannot, after the bounds
        // check above), so that none is left waiting; the failure is this PE's error.
        for ((o, lane), place) in outgoing.iter().zip(&work.out_lanes).zip(&places) {
            ex.deliver(o.to, lane, place.call, o.count, place.refusal)?;
        }
        outcome?;
        Put::await_delivered(ex, work, incoming, received, &mut refused)?;
        refused.map_or(Ok(()), Err)
    }
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// One message each way on the put path, without the bookkeeping of many: the common case
    /// of a halo pulse, and the one whose latency matters most.
    pub(super) fn sendrecv_put<F: FnOnce(&mut [T])>(
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
    pub(super) fn announce(&mut self, inc: &Incoming, lane: &Lane) -> Result<()> {
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

    /// The announcement in this PE's slot `slot` (buffer, offset, room).
    pub(super) fn announcement(&self, slot: usize) -> [u64; 3] {
        assert!(slot < self.announcements.len(), "announcement slot in range");
        // SAFETY: the slot is in bounds; its words are read by copy, after the acquire of the
        // announcement signal that published them; no reference into symmetric memory is made.
        unsafe { self.announcements.element_ptr(slot).cast::<[u64; 3]>().read() }
    }

    /// Put path, sender side: where the receiver's announcement on `lane` (in for this call)
    /// places a message of `count` elements to `to`, as an index into `buffers` and an
    /// offset there, checked to fit; or the refusal to deliver (`REJECTED`, with `NO_BUFFER`
    /// when the two PEs passed different buffer lists) and its error.
    fn announced_place(
        &self,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        count: usize,
        lane: &Lane,
    ) -> std::result::Result<(usize, usize), (u64, Error)> {
        let [buffer, offset, room] = self.announcement(lane.local);
        let index = buffer as usize;
        // The receiver checked `offset + room` against its copy of the buffer, and every copy
        // of a symmetric array has the same length: a failing check means different buffers.
        let placeable = buffers
            .get(index)
            .is_some_and(|b| b.check("put", to, offset as usize, count.min(room as usize)).is_ok());
        if !placeable {
            let problem = ExchangeProblem::BuffersDiffer {
                sender: self.rt.my_pe(),
                receiver: to,
                buffer,
                offset,
                room,
            };
            Err((REJECTED | NO_BUFFER, self.refuse(problem)))
        } else if count as u64 > room {
            Err((REJECTED, self.too_large(self.rt.my_pe(), to, Some(count), room as usize)))
        } else {
            Ok((index, offset as usize))
        }
    }

    /// Put path, sender side, once the receiver's announcement of this call is in: checks
    /// that the message fits, puts it straight into place and delivers. Returns the refusal
    /// when it did not fit (nothing was written, and the receiver learns of it too).
    pub(super) fn put_announced<F: FnOnce(&mut [T])>(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        payload: Payload<'_, T, F>,
        lane: &Lane,
    ) -> Result<Option<Error>> {
        let call = self.next_call(lane.local, true)?;
        let count = payload.len();
        let (refusal, refused) = match self.announced_place(buffers, to, count, lane) {
            Ok((index, offset)) => {
                let buffer = buffers[index];
                match payload {
                    Payload::Data(data) => buffer.put(to, offset, data)?,
                    Payload::Pack { count, fill } => match buffer.mapped(to) {
                        Some(base) => {
                            // SAFETY: the receiver announced `offset..offset + room` of this
                            // buffer for this call and reads it only after the delivery signal
                            // below; no other PE writes it (announcements name one sender); the
                            // range is in bounds (checked) and mapped into this process. So this
                            // is the only access to it until the signal.
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
                (0, None)
            }
            Err((refusal, e)) => (refusal, Some(e)),
        };
        self.deliver(to, lane, call, count, refusal)?;
        Ok(refused)
    }
}
