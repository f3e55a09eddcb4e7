//! The get path (a pull): the sender copies its message into its symmetric staging buffer,
//! at the region of the receiver's lane, and raises the delivery signal with the count; the
//! receiver gets the data from there straight into its final place and signals back, which
//! the sender awaits before it reuses the staging buffer.

use bytemuck::Pod;

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

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// [`Exchange::sendrecv_consumed`] on the get path: the message is staged and offered as
    /// by [`Get::exchange`]; the receiver hands the offered message to `consume` in the
    /// sender's staging buffer through the mapping (or gets it into `scratch` first where
    /// there is none), then signals it taken.
    pub(super) fn sendrecv_get_consumed<R>(
        &mut self,
        scratch: &SymArray<'rt, T>,
        outgoing: Outgoing<'_, T>,
        inc: Incoming,
        consume: impl FnOnce(&[T]) -> R,
    ) -> Result<R> {
        self.validate(&[scratch], std::slice::from_ref(&outgoing), std::slice::from_ref(&inc), 1)?;
        let out_lane = self.partners.lane(outgoing.to, 0);
        let in_lane = self.partners.lane(inc.from, 0);
        if let Some(e) = self.posted_mismatch(&inc, &in_lane) {
            return Err(e);
        }
        self.consume_posted(&inc, &in_lane)?;
        self.settle()?;
        let staging = self.staging.as_ref().expect("validate checked the reservation").array();
        staging.write_local(out_lane.local * self.reserved, outgoing.data)?;
        let call = self.next_call(out_lane.local, true)?;
        self.deliver(outgoing.to, &out_lane, call, outgoing.data.len(), 0)?;
        self.pending_takers.push(out_lane);

        let call = self.next_call(in_lane.local, false)?;
        let timeout = self.rt.wait_timeout();
        let signal = self.from_senders.wait_ge_from(
            in_lane.local * STRIDE,
            call << COUNT_BITS,
            Some(inc.from),
            timeout,
        )?;
        let count = match self.count_of(inc, &in_lane, signal) {
            Ok(count) => count,
            Err(refused) => {
                // Released unread, as by the exchange: only the receiver learns of it.
                self.from_receivers.set(inc.from, in_lane.remote * STRIDE, call)?;
                return Err(refused);
            }
        };
        let staging = self.staging.as_ref().expect("validate checked the reservation").array();
        let offset = in_lane.remote * self.reserved;
        staging.check("get", inc.from, offset, count)?;
        let result = match staging.mapped(inc.from) {
            Some(base) => {
                // SAFETY: the range lies inside the sender's staging buffer (checked, the same
                // length everywhere), mapped into this process; its data was written before the
                // delivery signal this PE has seen (release store, acquire load), and the sender
                // writes this lane's region again only after this PE signals it taken, below,
                // so nothing changes it while the slice lives.
                let message =
                    unsafe { std::slice::from_raw_parts(base.as_ptr().add(offset).cast_const(), count) };
                consume(message)
            }
            None => {
                // SAFETY: the source range is checked on the sender's staging buffer; the
                // target, `count <= room` elements from 0, lies inside scratch (validate checked
                // the room); no reference to either is created.
                unsafe { staging.get_raw(inc.from, offset, scratch.element_ptr(0), count, false) };
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
