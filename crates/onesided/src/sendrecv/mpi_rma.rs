//! The MPI one-sided path: the put path's offset swap over an MPI-3 window on the symmetric
//! heap ([`crate::mpi_window`]) instead of OpenSHMEM. The receiver writes where its message
//! goes (buffer, offset, room) into the sender's slot with `MPI_Put`, flushes it, and raises
//! the announcement signal (a put of the word, flushed); the sender, once it sees the signal,
//! checks that its message fits, puts it into the final place, flushes, and raises the
//! delivery signal, which carries the count. The signals and slots are the channel's own
//! symmetric words, so the bookkeeping (call numbers, counts, refusals) is the put path's;
//! only the writes go through MPI, and waits drive MPI's progress between polls.
//!
//! Every write is flushed before the signal that publishes it, and every signal before the
//! next write to the same PE: MPI does not order puts. The signals themselves are flushed only
//! then, at the next write to that PE, or when the exchange is dropped (every PE flushing, then
//! meeting in a barrier whose wait drives MPI): a flush waits for its target's progress, and
//! a target that has seen the signal is free to go on to waits that drive no MPI (OpenSHMEM's),
//! which with Sandia OpenSHMEM across nodes left the flushing PE waiting for good.

use bytemuck::Pod;

use super::channel::{COUNT_BITS, Channel, STRIDE};
use super::delivery::delivery;
use super::job::Job;
use super::message::Incoming;
use super::partners::Lane;
use super::protocol::Protocol;
use super::put::{place, take_delivered};
use crate::error::{Error, Result};
use crate::heap::SymArray;
use crate::mpi_window::HeapWindow;
use crate::poll::poll_until;

/// The MPI one-sided transport: the window, and the announcements receivers write into
/// this PE's slots.
pub(super) struct MpiRma<'rt> {
    window: &'rt HeapWindow,
    /// Slot `p * LANES + l`, written by receiver `p`: (buffer, offset, room), rewritten only
    /// when it changes.
    announcements: SymArray<'rt, [u64; STRIDE]>,
    /// What this PE last announced per slot.
    announced: Vec<Option<[u64; 3]>>,
    /// Which lanes a wait has served.
    served: Vec<bool>,
    /// Signals raised and not yet flushed, per PE.
    unflushed: Unflushed,
    /// The runtime, whose wait timeout and oversubscription the drop's barrier takes.
    rt: &'rt crate::Runtime,
}

/// Which signal of a call a PE raised last to another: the receiver's announcement, the
/// sender's delivery.
#[derive(Clone, Copy)]
enum Raised {
    Announcement = 0,
    Delivery = 1,
}

/// Per PE, the values of the last announcement and delivery signals raised to it, the
/// origins of their puts, and whether puts to it are yet to be flushed. The values live in a
/// boxed slice, which does not move while a put reads from it.
struct Unflushed {
    values: Box<[u64]>,
    pending: Vec<bool>,
}

impl Unflushed {
    fn new(n_pes: usize) -> Self {
        Unflushed { values: vec![0; 2 * n_pes].into_boxed_slice(), pending: vec![false; n_pes] }
    }

    /// Flushes the puts to `pe` if a signal to it is pending: before any write to it, which
    /// must not overtake the signal.
    fn settle(&mut self, window: &HeapWindow, pe: usize) -> Result<()> {
        if std::mem::take(&mut self.pending[pe]) {
            window.flush(pe)?;
        }
        Ok(())
    }

    /// Raises PE `pe`'s signal word at `local` to `value` (a signal of the kind `raised`),
    /// flushed at the next write to `pe` or at the drop.
    fn raise(
        &mut self,
        window: &HeapWindow,
        pe: usize,
        raised: Raised,
        local: usize,
        value: u64,
    ) -> Result<()> {
        self.settle(window, pe)?;
        let at = 2 * pe + raised as usize;
        self.values[at] = value;
        // SAFETY: `values[at]` is neither changed nor freed before the next flush to `pe`:
        // `settle` flushes before the next write of it, and the drop flushes every pending PE
        // (or, failing, leaks the values).
        unsafe { window.raise_unflushed(pe, local, &self.values[at])? };
        self.pending[pe] = true;
        Ok(())
    }
}

impl Drop for MpiRma<'_> {
    /// Every PE drops an exchange at the same point (its memory is freed collectively right
    /// after). The signals still unflushed are flushed here, and no PE leaves before every
    /// PE has: a flush waits for its target's progress, which the target drives in this
    /// barrier's wait, and not in the OpenSHMEM calls that free the exchange's memory.
    fn drop(&mut self) {
        let flushed =
            (0..self.unflushed.pending.len()).all(|pe| self.unflushed.settle(self.window, pe).is_ok());
        let met = self.window.barrier_progressing(self.rt.wait_timeout(), self.rt.oversubscribed()).is_ok();
        if !(flushed && met) {
            // A put may still read its origin: keep it for good.
            std::mem::forget(std::mem::take(&mut self.unflushed.values));
        }
    }
}

impl<'rt, T: Pod> Protocol<'rt, T> for MpiRma<'rt> {
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        for (inc, lane) in job.incoming.iter().zip(job.in_lanes) {
            if !chan.consume_posted(inc, lane)? {
                self.announce(chan, inc, lane)?;
            }
        }
        job.stage_packed();
        let mut refused = None;
        let (window, announcements, unflushed) = (self.window, &self.announcements, &mut self.unflushed);
        let out_lanes = job.out_lanes;
        await_each(
            window,
            chan,
            &mut self.served,
            out_lanes,
            false,
            |chan, lane| chan.sends[lane.local] + 1,
            |chan, i, lane| {
                if let Some(e) = send(window, announcements, unflushed, chan, job, i, lane)? {
                    refused.get_or_insert(e);
                }
                Ok(())
            },
        )?;
        let in_lanes = job.in_lanes;
        await_each(
            window,
            chan,
            &mut self.served,
            in_lanes,
            true,
            |chan, lane| chan.recvs[lane.local] << COUNT_BITS,
            |chan, i, lane| {
                take_delivered(chan, job, i, lane, &mut refused);
                Ok(())
            },
        )?;
        refused.map_or(Ok(()), Err)
    }

    fn post(&mut self, chan: &mut Channel<'rt>, incoming: &Incoming, lane: &Lane) -> Result<()> {
        self.announce(chan, incoming, lane)
    }

    fn symmetric_bytes(&self) -> usize {
        self.announcements.len() * std::mem::size_of::<[u64; STRIDE]>()
    }
}

impl<'rt> MpiRma<'rt> {
    /// # Collective
    /// Allocates the announcement slots, and creates the runtime's window over the heap if
    /// no exchange has yet.
    pub(super) fn collective_new(chan: &Channel<'rt>) -> Result<Self> {
        let slots = chan.slots();
        let name = format!("{}: announcements", chan.name);
        let announcements = SymArray::collective_alloc(chan.rt, &name, slots)?;
        Ok(MpiRma {
            window: chan.rt.collective_heap_window()?,
            announcements,
            announced: vec![None; slots],
            served: Vec::new(),
            unflushed: Unflushed::new(chan.rt.n_pes()),
            rt: chan.rt,
        })
    }

    /// Receiver side: tells the sender where this call's message goes (the slot only when it
    /// changed), then raises the announcement signal with the call number.
    fn announce(&mut self, chan: &mut Channel<'rt>, inc: &Incoming, lane: &Lane) -> Result<()> {
        let call = chan.next_call(lane.local, false)?;
        self.unflushed.settle(self.window, lane.peer)?;
        let announcement = [inc.buffer as u64, inc.offset as u64, inc.room as u64];
        if self.announced[lane.local] != Some(announcement) {
            let mut slot = [0u64; STRIDE];
            slot[..3].copy_from_slice(&announcement);
            let at = self.announcements.element_ptr(lane.remote) as usize;
            // SAFETY: slot `lane.remote` of the announcements (in bounds: the partner's slot
            // for this PE and lane) is read by the sender only after the signal raised below,
            // which follows the flush; `slot` lives through the flush.
            unsafe { self.window.put(lane.peer, at, bytemuck::bytes_of(&slot))? };
            self.window.flush(lane.peer)?;
            self.announced[lane.local] = Some(announcement);
        }
        let at = signal_address(chan, false, lane.remote);
        self.unflushed.raise(self.window, lane.peer, Raised::Announcement, at, call)
    }
}

/// This PE's address of signal `slot` from receivers (or from senders when `from_senders`):
/// the same word on every PE.
fn signal_address(chan: &Channel<'_>, from_senders: bool, slot: usize) -> usize {
    let signals = if from_senders { &chan.from_senders } else { &chan.from_receivers };
    assert!(slot * STRIDE < signals.len(), "signal slot in range");
    signals.as_ptr() as usize + slot * STRIDE * std::mem::size_of::<u64>()
}

/// Sender side, once the receiver's announcement of this call is in: checks that message `i`
/// fits, puts it into place, flushes and delivers. Returns the refusal when it did not fit
/// (nothing was written, and the receiver learns of it too).
fn send<'rt, T: Pod>(
    window: &HeapWindow,
    announcements: &SymArray<'rt, [u64; STRIDE]>,
    unflushed: &mut Unflushed,
    chan: &mut Channel<'rt>,
    job: &Job<'_, 'rt, T>,
    i: usize,
    lane: &Lane,
) -> Result<Option<Error>> {
    let call = chan.next_call(lane.local, true)?;
    let (to, count) = (job.outgoing[i].to(), job.outgoing[i].len());
    unflushed.settle(window, to)?;
    assert!(lane.local < announcements.len(), "announcement slot in range");
    // SAFETY: the slot is in bounds; its words are read by copy after the signal that the
    // receiver raised once the put of them was flushed; no reference into it is made.
    let announcement = unsafe { announcements.element_ptr(lane.local).cast::<[u64; 3]>().read_volatile() };
    let (refusal, refused) = match place(chan, job.buffers, to, count, announcement) {
        Ok((index, offset)) => {
            if count > 0 {
                let data: &[u8] = bytemuck::cast_slice(job.data(i));
                let at = job.buffers[index].element_ptr(offset) as usize;
                // SAFETY: `place` checked `offset + count` against the buffer (the same length
                // on every PE); the receiver announced the region for this call and reads it
                // only after the delivery signal, raised below after the flush; `data` lives
                // through the flush.
                unsafe { window.put(to, at, data)? };
                window.flush(to)?;
            }
            (0, None)
        }
        Err((refusal, e)) => (refusal, Some(e)),
    };
    let (slot, signal) = delivery(call, count, refusal);
    if let Some(slot) = slot {
        let at = chan.counts.element_ptr(lane.remote) as usize;
        // SAFETY: the receiver's count slot for this PE and lane, read by it only after the
        // delivery signal raised below; `slot` lives through the flush.
        unsafe { window.put(to, at, bytemuck::bytes_of(&slot))? };
        window.flush(to)?;
    }
    unflushed.raise(window, to, Raised::Delivery, signal_address(chan, true, lane.remote), signal)?;
    Ok(refused)
}

/// Waits, for each of `lanes` (outgoing ones: the signals from their receivers; incoming
/// ones: from their senders), until its signal reaches `value`, in whichever order they come,
/// and calls `reached` with its position; MPI's progress runs between polls.
fn await_each<'rt>(
    window: &HeapWindow,
    chan: &mut Channel<'rt>,
    served: &mut Vec<bool>,
    lanes: &[Lane],
    incoming: bool,
    value: impl Fn(&Channel<'rt>, &Lane) -> u64,
    mut reached: impl FnMut(&mut Channel<'rt>, usize, &Lane) -> Result<()>,
) -> Result<()> {
    served.clear();
    served.resize(lanes.len(), false);
    let mut remaining = lanes.len();
    while remaining > 0 {
        let mut ready = None;
        let is_ready = |chan: &Channel<'rt>, served: &[bool]| {
            let signals = if incoming { &chan.from_senders } else { &chan.from_receivers };
            lanes
                .iter()
                .enumerate()
                .position(|(i, lane)| !served[i] && signals.reached(lane.local * STRIDE, value(chan, lane)))
        };
        let waited = poll_until(chan.rt.wait_timeout(), chan.rt.oversubscribed(), || {
            ready = is_ready(chan, served);
            if ready.is_none() {
                window.progress();
            }
            ready.is_some()
        });
        match (ready, waited) {
            (Some(i), _) => {
                served[i] = true;
                remaining -= 1;
                reached(chan, i, &lanes[i])?;
            }
            (None, Err(waited)) => {
                let i = served.iter().position(|s| !s).expect("a lane pending");
                let lane = &lanes[i];
                let signals = if incoming { &chan.from_senders } else { &chan.from_receivers };
                crate::watchdog::deadline_spent();
                return Err(Error::WaitTimeout {
                    pe: chan.rt.my_pe(),
                    what: format!("signal {} of '{}'", lane.local * STRIDE, signals.name()),
                    peer: Some(lane.peer),
                    awaited: value(chan, lane),
                    seen: signals.value(lane.local * STRIDE)?,
                    waited,
                });
            }
            (None, Ok(())) => unreachable!("a wait ends ready or timed out"),
        }
    }
    Ok(())
}
