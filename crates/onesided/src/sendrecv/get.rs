//! The get path (a pull): the sender copies its message into its symmetric staging buffer,
//! at the region of the receiver's lane, or offers it where it lies in one of the call's
//! buffers, and raises the delivery signal with the count (and, for an offer, its place);
//! the receiver gets the data from there straight into its final place, or hands it to the
//! call's consuming function through the mapping of a same-node sender, and signals back,
//! which the sender awaits before it reuses the staging buffer or the offered region.

use bytemuck::Pod;

use super::channel::{COUNT_BITS, Channel, STRIDE};
use super::delivery::Source;
use super::job::Job;
use super::message::Outgoing;
use super::partners::Lane;
use super::protocol::Protocol;
use crate::error::{ExchangeProblem, Result};
use crate::heap::{GlobalMaxArray, SymArray};

/// The get transport: this PE's staging buffer, and who still reads from it.
pub(super) struct Get<'rt, T: Pod> {
    /// This PE's outgoing messages, one region per receiver and lane.
    staging: Option<GlobalMaxArray<'rt, T>>,
    /// Elements per message the staging buffer was reserved for.
    reserved: usize,
    /// The receivers of the previous call, whose gets must end before the staging buffer or
    /// an offered region is written again.
    pending_takers: Vec<Lane>,
}

impl<'rt, T: Pod> Get<'rt, T> {
    pub(super) fn new() -> Self {
        Get { staging: None, reserved: 0, pending_takers: Vec::new() }
    }

    /// The array and offset where a delivered message lies at its sender.
    fn source<'a>(
        &'a self,
        chan: &Channel<'rt>,
        buffers: &[&'a SymArray<'rt, T>],
        lane: &Lane,
        signal: u64,
    ) -> Result<(&'a SymArray<'rt, T>, usize)> {
        match chan.source_of(lane, signal)? {
            Source::Staged => match &self.staging {
                Some(staging) => Ok((staging.array(), lane.remote * self.reserved)),
                None => Err(chan.refuse(ExchangeProblem::NotReserved { largest: 0, reserved: 0 })),
            },
            Source::Offered { buffer, offset } => match buffers.get(buffer) {
                Some(array) => Ok((array, offset)),
                None => Err(chan.refuse(ExchangeProblem::NoSuchBuffer {
                    index: buffer,
                    count: buffers.len(),
                    from: lane.peer,
                })),
            },
        }
    }
}

impl<'rt, T: Pod> Protocol<'rt, T> for Get<'rt, T> {
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        Protocol::start(self, chan, job)?;
        Protocol::finish(self, chan, job)
    }

    /// Stages or offers every outgoing message and raises its delivery signal: from then on
    /// its receiver can take it, whatever this PE does.
    fn start(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<bool> {
        // The staging buffer and offered regions are reused: the previous call's receivers
        // must be done with them.
        self.settle(chan)?;
        job.stage_packed();
        for (i, (out, lane)) in job.outgoing.iter().zip(job.out_lanes).enumerate() {
            let call = chan.next_call(lane.local, true)?;
            match out {
                Outgoing::Offered(offer) => {
                    let place = (offer.buffer, offer.range.start);
                    chan.deliver_offered(out.to(), lane, call, out.len(), place)?;
                }
                _ => {
                    // Each receiver and lane has its own region of the staging buffer, at an
                    // offset the receiver knows: its slot on this PE times the reservation.
                    let staging = self.staging.as_ref().expect("validate checked the reservation");
                    staging.array().write_local(lane.local * self.reserved, job.data(i))?;
                    chan.deliver(out.to(), lane, call, out.len(), 0)?;
                }
            }
            self.pending_takers.push(*lane);
        }
        for (inc, lane) in job.incoming.iter().zip(job.in_lanes) {
            chan.consume_posted(inc, lane)?;
            chan.next_call(lane.local, false)?;
        }
        Ok(true)
    }

    /// Takes every incoming message as its delivery signal comes, and signals it taken.
    fn finish(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        let mut refused = None;
        let in_lanes = job.in_lanes;
        chan.await_each(
            in_lanes,
            true,
            |chan, lane| chan.recvs[lane.local] << COUNT_BITS,
            |chan, i, lane| {
                let inc = job.incoming[i];
                let call = chan.recvs[lane.local];
                let signal = chan.from_senders.value(lane.local * STRIDE)?;
                let found = chan
                    .count_of(inc, lane, signal)
                    .and_then(|count| Ok((count, self.source(chan, job.buffers, lane, signal)?)));
                match found {
                    // The receiver refuses the message and releases the sender's buffer; only
                    // the receiver learns of it on this path, since the sender never sees the
                    // room.
                    Err(e) => {
                        refused.get_or_insert(e);
                    }
                    Ok((count, (array, offset))) => {
                        array.check("get", inc.from, offset, count)?;
                        let mapped = if job.consume.is_some() { array.mapped(inc.from) } else { None };
                        match mapped {
                            Some(base) => {
                                // SAFETY: the range lies inside the sender's array (checked,
                                // the same length everywhere), mapped into this process; its
                                // data was written before the delivery signal this PE has seen
                                // (release store, acquire load), and the sender writes it again
                                // only after this PE signals it taken, below (for its staging
                                // buffer by settling first; for an offered region by the
                                // promise made with the offer), so nothing changes it while
                                // the slice lives.
                                let message = unsafe {
                                    std::slice::from_raw_parts(base.as_ptr().add(offset).cast_const(), count)
                                };
                                if let Some(consume) = job.consume.as_mut() {
                                    consume(i, message);
                                }
                            }
                            None => {
                                let target = job.buffers[inc.buffer];
                                // SAFETY: the source range is checked on the sender's array
                                // (same length everywhere); the target range lies inside this
                                // PE's buffer (validate checked offset + room, and count <=
                                // room); no reference to either is created.
                                unsafe {
                                    array.get_raw(
                                        inc.from,
                                        offset,
                                        target.element_ptr(inc.offset),
                                        count,
                                        false,
                                    )
                                };
                                job.consume_in_place(i, count);
                            }
                        }
                        job.received[i] = count;
                    }
                }
                chan.from_receivers.set(inc.from, lane.remote * STRIDE, call)
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    fn settle(&mut self, chan: &mut Channel<'rt>) -> Result<()> {
        for lane in std::mem::take(&mut self.pending_takers) {
            chan.wait_lane(&lane, false, chan.sends[lane.local])?;
        }
        Ok(())
    }

    fn collective_reserve(&mut self, chan: &mut Channel<'rt>, largest: usize) -> Result<()> {
        if largest <= self.reserved && self.staging.is_some() {
            return Ok(());
        }
        // Messages in flight from the previous call must be done before the buffer moves.
        self.settle(chan)?;
        chan.collective_restage(&mut self.staging, largest)?;
        self.reserved = largest;
        Ok(())
    }

    fn reserved(&self) -> Option<Option<usize>> {
        Some(self.staging.as_ref().map(|_| self.reserved))
    }

    fn symmetric_bytes(&self) -> usize {
        self.staging.as_ref().map_or(0, |s| s.capacity() * std::mem::size_of::<T>())
    }
}
