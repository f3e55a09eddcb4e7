//! The delivery signal of the put and get paths: the call number and the message's element
//! count in one word (`call << COUNT_BITS | count`), so that the receiver learns the count
//! with the signal it waits for; counts too large for it, refusals, and the place of a
//! message offered in place go in the count slot first.

use super::channel::{COUNT_BITS, COUNT_ELSEWHERE, Channel, NO_BUFFER, OFFERED, REJECTED, STRIDE};
use super::message::Incoming;
use super::partners::Lane;
use crate::error::{ExchangeProblem, Result};

/// Where a delivered message lies at its sender, as the delivery said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// In the sender's staging buffer, at the region of the lane.
    Staged,
    /// Offered in place: at `offset` of the sender's copy of buffer `buffer` of the call.
    Offered { buffer: usize, offset: usize },
}

impl Channel<'_> {
    /// Raises the delivery signal of call `call` to `to`, with the count inline when it fits,
    /// and in the count slot (before the signal) when it does not or the message was refused.
    /// `refusal` is 0, [`REJECTED`], or `REJECTED | NO_BUFFER`.
    #[inline]
    pub(super) fn deliver(
        &self,
        to: usize,
        lane: &Lane,
        call: u64,
        count: usize,
        refusal: u64,
    ) -> Result<()> {
        let (slot, signal) = delivery(call, count, refusal);
        if let Some(slot) = slot {
            self.counts.put(to, lane.remote, &[slot])?;
            self.rt.fence();
        }
        self.from_senders.set(to, lane.remote * STRIDE, signal)
    }

    /// [`deliver`](Self::deliver) of a message this PE offers in place, at element `offset`
    /// of buffer `buffer` of the call: the count goes through the count slot with the place
    /// and the [`OFFERED`] mark beside it.
    pub(super) fn deliver_offered(
        &self,
        to: usize,
        lane: &Lane,
        call: u64,
        count: usize,
        (buffer, offset): (usize, usize),
    ) -> Result<()> {
        let mut slot = [0u64; STRIDE];
        slot[0] = count as u64;
        slot[1] = offset as u64;
        slot[2] = OFFERED;
        slot[3] = buffer as u64;
        self.counts.put(to, lane.remote, &[slot])?;
        self.rt.fence();
        self.from_senders.set(to, lane.remote * STRIDE, call << COUNT_BITS | COUNT_ELSEWHERE)
    }

    /// Where the message behind delivery `signal` on `lane` lies in the sender's memory.
    #[inline]
    pub(super) fn source_of(&self, lane: &Lane, signal: u64) -> Result<Source> {
        if signal & COUNT_ELSEWHERE == COUNT_ELSEWHERE {
            let mut slot = [[0u64; STRIDE]];
            self.counts.read_local(lane.local, &mut slot)?;
            if slot[0][2] == OFFERED {
                return Ok(Source::Offered { buffer: slot[0][3] as usize, offset: slot[0][1] as usize });
            }
        }
        Ok(Source::Staged)
    }

    /// The count of a delivered message, checked against the room.
    #[inline]
    pub(super) fn delivered_count(&self, inc: Incoming, lane: &Lane) -> Result<usize> {
        let signal = self.from_senders.value(lane.local * STRIDE)?;
        self.count_of(inc, lane, signal)
    }

    /// The count a delivery signal carries (or points to), checked against the room.
    #[inline]
    pub(super) fn count_of(&self, inc: Incoming, lane: &Lane, signal: u64) -> Result<usize> {
        let mut count = signal & COUNT_ELSEWHERE;
        if count == COUNT_ELSEWHERE {
            let mut slot = [[0u64; STRIDE]];
            self.counts.read_local(lane.local, &mut slot)?;
            count = slot[0][0];
        }
        let elements = (count & !(REJECTED | NO_BUFFER)) as usize;
        if count & NO_BUFFER != 0 {
            return Err(self.refuse(ExchangeProblem::BuffersDiffer {
                sender: inc.from,
                receiver: self.rt.my_pe(),
                buffer: inc.buffer as u64,
                offset: inc.offset as u64,
                room: inc.room as u64,
            }));
        }
        if count & REJECTED != 0 || elements > inc.room {
            return Err(self.too_large(inc.from, self.rt.my_pe(), Some(elements), inc.room));
        }
        Ok(elements)
    }
}

/// The delivery of call `call` with `count` elements (`refusal`: 0, [`REJECTED`], or
/// `REJECTED | NO_BUFFER`): the count slot to write before the signal, where the count does
/// not fit inline or the message was refused, and the delivery signal's value.
#[inline]
pub(super) fn delivery(call: u64, count: usize, refusal: u64) -> (Option<[u64; STRIDE]>, u64) {
    let count = count as u64;
    if refusal != 0 || count >= COUNT_ELSEWHERE {
        let mut slot = [0u64; STRIDE];
        slot[0] = count | refusal;
        (Some(slot), call << COUNT_BITS | COUNT_ELSEWHERE)
    } else {
        (None, call << COUNT_BITS | count)
    }
}
