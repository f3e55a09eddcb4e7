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
