//! The buffered path, the 2013 first attempt, kept as the benchmarks' baseline: the sender
//! waits for the receiver's scratch slot to be consumed, puts into it and raises a "posted"
//! flag; the receiver copies from the scratch slot into the final place, resets "posted" and
//! sets the sender's "consumed". A copy and a flag handshake per message more than the put
//! path.

use bytemuck::Pod;

use super::channel::{Channel, STRIDE};
use super::job::Job;
use super::protocol::Protocol;
use crate::error::Result;
use crate::heap::GlobalMaxArray;

/// The buffered transport: one scratch slot per sender and lane.
pub(super) struct Buffered<'rt, T: Pod> {
    scratch: Option<GlobalMaxArray<'rt, T>>,
    /// Elements per slot.
    reserved: usize,
}

impl<'rt, T: Pod> Buffered<'rt, T> {
    /// Marks every scratch slot consumed, so that the first message may be posted.
    ///
    /// # Collective
    /// A barrier, after which no PE can see a slot unmarked.
    pub(super) fn collective_new(chan: &Channel<'rt>) -> Self {
        for slot in 0..chan.slots() {
            chan.from_receivers.store_local(slot * STRIDE, 1);
        }
        chan.rt.barrier();
        Buffered { scratch: None, reserved: 0 }
    }
}

impl<'rt, T: Pod> Protocol<'rt, T> for Buffered<'rt, T> {
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        let slot = self.reserved;
        let scratch = self.scratch.as_ref().expect("validate checked the reservation").array();
        for (inc, lane) in job.incoming.iter().zip(job.in_lanes) {
            chan.consume_posted(inc, lane)?;
        }
        job.stage_packed();
        // Sender: wait for the receiver's scratch slot to be free, reset the flag, post.
        chan.await_each(
            job.out_lanes,
            false,
            |_, _| 1,
            |chan, i, lane| {
                let (to, data) = (job.outgoing[i].to(), job.data(i));
                chan.from_receivers.store_local(lane.local * STRIDE, 0);
                scratch.put(to, lane.remote * slot, data)?;
                let mut count = [0u64; STRIDE];
                count[0] = data.len() as u64;
                chan.counts.put(to, lane.remote, &[count])?;
                chan.rt.fence();
                chan.from_senders.set(to, lane.remote * STRIDE, 1)
            },
        )?;
        // Receiver: wait for the post, copy from scratch to the final place, reset, release.
        let mut refused = None;
        let in_lanes = job.in_lanes;
        chan.await_each(
            in_lanes,
            true,
            |_, _| 1,
            |chan, i, lane| {
                let inc = job.incoming[i];
                chan.from_senders.store_local(lane.local * STRIDE, 0);
                let mut count = [[0u64; STRIDE]];
                chan.counts.read_local(lane.local, &mut count)?;
                let count = count[0][0] as usize;
                if count <= inc.room {
                    job.buffers[inc.buffer].copy_local_from(inc.offset, scratch, lane.local * slot, count)?;
                    job.received[i] = count;
                    job.consume_in_place(i, count);
                } else {
                    refused.get_or_insert(chan.too_large(inc.from, chan.rt.my_pe(), Some(count), inc.room));
                }
                // The scratch slot is free again, even when its message was refused.
                chan.from_receivers.set(inc.from, lane.remote * STRIDE, 1)
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    fn collective_reserve(&mut self, chan: &mut Channel<'rt>, largest: usize) -> Result<()> {
        if largest <= self.reserved && self.scratch.is_some() {
            return Ok(());
        }
        chan.collective_restage(&mut self.scratch, largest)?;
        self.reserved = largest;
        Ok(())
    }

    fn reserved(&self) -> Option<Option<usize>> {
        Some(self.scratch.as_ref().map(|_| self.reserved))
    }

    fn stages_offers(&self) -> bool {
        true
    }

    fn symmetric_bytes(&self) -> usize {
        self.scratch.as_ref().map_or(0, |s| s.capacity() * std::mem::size_of::<T>())
    }
}
