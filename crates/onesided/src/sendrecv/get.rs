//! The get path (a pull): the sender copies its message into its symmetric staging buffer,
//! at the region of the receiver's lane, and raises the delivery signal with the count; the
//! receiver gets the data from there straight into its final place and signals back, which
//! the sender awaits before it reuses the staging buffer.

use bytemuck::Pod;

use std::ops::Range;

use super::{COUNT_BITS, Exchange, Incoming, Outgoing, STRIDE, Transport, Work};
use crate::error::Result;
use crate::heap::SymArray;

/// The get transport.
pub(super) struct Get;

impl Transport for Get {
    fn exchange<'rt, T: Pod>(
        ex: &mut Exchange<'rt, T>,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        // The staging buffer is reused: the previous call's receivers must be done with it.
        ex.settle()?;
        for (out, lane) in outgoing.iter().zip(&work.out_lanes) {
            // Each receiver and lane has its own region of the staging buffer, at an offset
            // the receiver knows: its slot on this PE times the reservation.
            let staging = ex.staging.as_ref().expect("validate checked the reservation");
            staging.array().write_local(lane.local * ex.reserved, out.data)?;
            let call = ex.next_call(lane.local, true)?;
            ex.deliver(out.to, lane, call, out.data.len(), 0)?;
            ex.pending_takers.push(*lane);
        }
        for lane in &work.in_lanes {
            ex.next_call(lane.local, false)?;
        }
        let mut refused = None;
        ex.await_each(
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
}

/// Where a get-path message of one message each way lies at its sender.
pub(super) enum Source<'a, 'rt, T: Pod> {
    /// Copied into the sender's staging buffer, at the region of the receiver's lane.
    Staged(&'a [T]),
    /// Left where it is: `range` of a symmetric array every PE of the pair names.
    Offered(&'a SymArray<'rt, T>, Range<usize>),
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// [`Exchange::sendrecv_consumed`] and [`Exchange::sendrecv_offered`] on the get path: the
    /// message is staged (as by [`Get::exchange`]) or offered where it lies; the receiver hands
    /// the message to `consume` in the sender's memory through the mapping (or gets it into
    /// `scratch` first where there is none), then signals it taken.
    ///
    /// # Safety
    /// For an offered source, no PE writes its range until the receiver has taken it (the
    /// caller's promise, as [`Exchange::sendrecv_offered`] states it).
    pub(super) unsafe fn sendrecv_get_consumed<R>(
        &mut self,
        scratch: &SymArray<'rt, T>,
        (to, source): (usize, Source<'_, 'rt, T>),
        inc: Incoming,
        consume: impl FnOnce(&[T]) -> R,
    ) -> Result<R> {
        let me = self.rt.my_pe();
        match &source {
            Source::Staged(data) => {
                let outgoing = Outgoing { to, data };
                self.validate(&[scratch], std::slice::from_ref(&outgoing), std::slice::from_ref(&inc), 1)?;
            }
            Source::Offered(array, range) => {
                // No staging: the reservation is not needed.
                self.validate_one(&[scratch], to, &inc)?;
                array.check("offered message", me, range.start, range.len())?;
            }
        }
        let out_lane = self.partners.lane(to, 0);
        let in_lane = self.partners.lane(inc.from, 0);
        if let Some(e) = self.posted_mismatch(&inc, &in_lane) {
            return Err(e);
        }
        self.consume_posted(&inc, &in_lane)?;
        self.settle()?;
        let call = self.next_call(out_lane.local, true)?;
        let offered = match &source {
            Source::Staged(data) => {
                let staging = self.staging.as_ref().expect("validate checked the reservation").array();
                staging.write_local(out_lane.local * self.reserved, data)?;
                self.deliver(to, &out_lane, call, data.len(), 0)?;
                None
            }
            Source::Offered(array, range) => {
                self.deliver_offered(to, &out_lane, call, range.len(), range.start)?;
                Some(*array)
            }
        };
        self.pending_takers.push(out_lane);

        let call = self.next_call(in_lane.local, false)?;
        let timeout = self.rt.wait_timeout();
        let signal = self.from_senders.wait_ge_from(
            in_lane.local * STRIDE,
            call << COUNT_BITS,
            Some(inc.from),
            timeout,
        )?;
        let place = self
            .offered_at(&inc, &in_lane, signal, offered.is_some())
            .and_then(|at| Ok((at, self.count_of(inc, &in_lane, signal)?)));
        let (at, count) = match place {
            Ok(place) => place,
            Err(refused) => {
                // Released unread, as by the exchange: only the receiver learns of it.
                self.from_receivers.set(inc.from, in_lane.remote * STRIDE, call)?;
                return Err(refused);
            }
        };
        let (array, offset) = match (offered, at) {
            (Some(array), Some(at)) => (array, at),
            _ => (
                self.staging.as_ref().expect("validate checked the reservation").array(),
                in_lane.remote * self.reserved,
            ),
        };
        array.check("get", inc.from, offset, count)?;
        let result = match array.mapped(inc.from) {
            Some(base) => {
                // SAFETY: the range lies inside the sender's array (checked, the same length
                // everywhere), mapped into this process; its data was written before the
                // delivery signal this PE has seen (release store, acquire load), and the sender
                // writes it again only after this PE signals it taken, below (for its staging
                // buffer by settling first; for an offered range, by its caller's promise), so
                // nothing changes it while the slice lives.
                let message =
                    unsafe { std::slice::from_raw_parts(base.as_ptr().add(offset).cast_const(), count) };
                consume(message)
            }
            None => {
                // SAFETY: the source range is checked on the sender's array; the target,
                // `count <= room` elements from 0, lies inside scratch (validate checked the
                // room); no reference to either is created.
                unsafe { array.get_raw(inc.from, offset, scratch.element_ptr(0), count, false) };
                // SAFETY: the get has completed (blocking) and no other PE writes this PE's
                // scratch through this exchange; the next use needs `&mut self`.
                consume(unsafe { scratch.local_range(0..count) })
            }
        };
        self.from_receivers.set(inc.from, in_lane.remote * STRIDE, call)?;
        Ok(result)
    }

    /// Waits until the receivers of this PE's last get-path messages have taken them.
    pub(super) fn settle(&mut self) -> Result<()> {
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
}
