//! The buffered path, the 2013 first attempt, kept as the benchmarks' baseline: the sender
//! waits for the receiver's scratch slot to be consumed, puts into it and raises a "posted"
//! flag; the receiver copies from the scratch slot into the final place, resets "posted" and
//! sets the sender's "consumed". A copy and a flag handshake per message more than the put
//! path.

use bytemuck::Pod;

use super::{Exchange, Incoming, Outgoing, STRIDE, Transport, Work};
use crate::error::Result;
use crate::heap::SymArray;

/// The buffered transport.
pub(super) struct Buffered;

impl Transport for Buffered {
    fn exchange<'rt, T: Pod>(
        ex: &mut Exchange<'rt, T>,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
        received: &mut [usize],
        work: &mut Work,
    ) -> Result<()> {
        let slot = ex.reserved;
        // Sender: wait for the receiver's scratch slot to be free, reset the flag, post.
        ex.await_each(
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
        ex.await_each(
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
}
