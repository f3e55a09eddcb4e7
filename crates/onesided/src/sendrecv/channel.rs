//! What every path of an exchange shares: the partners' slots and signals, the call numbers
//! of each pair and lane, the receives posted ahead of their call, and the wait for several
//! partners at once.

use bytemuck::Pod;

use super::message::{Incoming, LANES, Outgoing};
use super::partners::{Lane, Partners};
use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::{GlobalMaxArray, GrowthPolicy, SymArray};
use crate::runtime::Runtime;
use crate::signal::SignalArray;

/// Marks a count as rejected: the message did not fit the announced room.
pub(super) const REJECTED: u64 = 1 << 63;
/// Marks a count as rejected because the sender has no such buffer as the one announced (the
/// two PEs passed different buffer lists).
pub(super) const NO_BUFFER: u64 = 1 << 62;

/// Marks a count slot as describing a message offered in place (the next words its offset
/// and its buffer), not staged.
pub(super) const OFFERED: u64 = 0x4f46_4645_5245_4421;

/// Words per slot of the exchange's small symmetric arrays: one 64-byte cache line each, so
/// that partners writing different slots never share a line.
pub(super) const STRIDE: usize = 8;

/// Bits of a delivery signal that carry the message's element count; the call number sits
/// above them, so delivery signals still grow with every call and are awaited with `>=`. A
/// count that does not fit (or a rejection) is marked [`COUNT_ELSEWHERE`] and written to the
/// sender's count slot first. Carrying the count in the signal saves the receiver a cache
/// miss per message.
pub(super) const COUNT_BITS: u32 = 24;
/// The inline count that says "read the count slot".
pub(super) const COUNT_ELSEWHERE: u64 = (1 << COUNT_BITS) - 1;
/// Call numbers must stay below this for the delivery encoding (about 10^12 calls).
const MAX_CALLS: u64 = 1 << (64 - COUNT_BITS);

/// The state every path of an exchange shares.
pub(super) struct Channel<'rt> {
    pub rt: &'rt Runtime,
    pub name: String,
    pub partners: Partners,
    /// Signal `(p * LANES + l) * STRIDE`, raised by receiver `p`: announced (put path),
    /// taken (get path), consumed (buffered path, a 0/1 flag).
    pub from_receivers: SignalArray<'rt>,
    /// Signal `(p * LANES + l) * STRIDE`, raised by sender `p`: delivered or offered, as
    /// `call << COUNT_BITS | count` (put and get paths); posted (buffered path, 0/1).
    pub from_senders: SignalArray<'rt>,
    /// Slot `p * LANES + l`, written by sender `p`: a count that does not fit the signal, an
    /// offered message's place.
    pub counts: SymArray<'rt, [u64; STRIDE]>,
    /// Calls this PE has made sending to each PE and lane.
    pub sends: Vec<u64>,
    /// Calls this PE has made receiving from each PE and lane.
    pub recvs: Vec<u64>,
    /// Receives announced ahead of their call by `Exchange::post_receives`, per slot.
    pub posted: Vec<Option<Incoming>>,
    /// Which lanes `await_each` has served, and (signal, awaited value) of those pending.
    served: Vec<bool>,
    waits: Vec<(usize, u64)>,
}

impl<'rt> Channel<'rt> {
    /// # Collective
    /// Every PE creates the channels of its exchanges in the same order.
    pub fn collective_new(rt: &'rt Runtime, name: &str, partners: Partners) -> Result<Self> {
        let slots = partners.capacity * LANES;
        let padded = slots * STRIDE;
        Ok(Channel {
            rt,
            name: name.to_string(),
            partners,
            from_receivers: SignalArray::collective_alloc(rt, &format!("{name}: from receivers"), padded)?,
            from_senders: SignalArray::collective_alloc(rt, &format!("{name}: from senders"), padded)?,
            counts: SymArray::collective_alloc(rt, &format!("{name}: counts"), slots)?,
            sends: vec![0; slots],
            recvs: vec![0; slots],
            posted: vec![None; slots],
            served: Vec::new(),
            waits: Vec::new(),
        })
    }

    /// Replaces `staging` by an array of `largest` elements for every slot (one message per
    /// receiver and lane shares a PE's staging), for the paths that stage their messages.
    ///
    /// # Collective
    /// Every PE calls it with the same `largest` (agreed by the caller); the old array is
    /// freed first, on every PE.
    pub fn collective_restage<T: Pod>(
        &self,
        staging: &mut Option<GlobalMaxArray<'rt, T>>,
        largest: usize,
    ) -> Result<()> {
        let array = format!("{}: staging", self.name);
        let len = largest.checked_mul(self.slots()).ok_or_else(|| Error::SizeOverflow {
            array: array.clone(),
            len: largest,
            elem_size: std::mem::size_of::<T>(),
        })?;
        *staging = None;
        let policy = GrowthPolicy { over_allocation: 1.0, freeze_after: None };
        *staging = Some(GlobalMaxArray::collective_alloc(self.rt, &array, len, policy)?);
        Ok(())
    }

    /// The slots of every pair and lane.
    #[inline]
    pub fn slots(&self) -> usize {
        self.sends.len()
    }

    /// Symmetric bytes of the signals and slots.
    pub fn symmetric_bytes(&self) -> usize {
        (self.from_receivers.len() + self.from_senders.len()) * 8
            + self.counts.len() * std::mem::size_of::<[u64; STRIDE]>()
    }

    /// The start of every call, once validated: the lanes of its messages, and the check that
    /// every posted receive matches before any is consumed (a refused call leaves the posted
    /// receives as they were).
    #[inline]
    pub fn begin<T: Pod>(
        &self,
        out_lanes: &mut Vec<Lane>,
        in_lanes: &mut Vec<Lane>,
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
    ) -> Result<()> {
        self.partners.assign(out_lanes, outgoing.iter().map(|o| o.to()));
        self.partners.assign(in_lanes, incoming.iter().map(|i| i.from));
        incoming.iter().zip(in_lanes.iter()).try_for_each(|(inc, lane)| self.check_posted(inc, lane))
    }

    /// An error when a receive different from `inc` was posted for its lane.
    #[inline]
    pub fn check_posted(&self, inc: &Incoming, lane: &Lane) -> Result<()> {
        match self.posted_mismatch(inc, lane) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether a receive of this message was posted (and is now consumed); an error when a
    /// different receive was posted for its lane.
    #[inline]
    pub fn consume_posted(&mut self, inc: &Incoming, lane: &Lane) -> Result<bool> {
        if let Some(e) = self.posted_mismatch(inc, lane) {
            return Err(e);
        }
        Ok(self.posted[lane.local].take().is_some())
    }

    /// The error when a receive different from `inc` was posted for its lane.
    #[inline]
    fn posted_mismatch(&self, inc: &Incoming, lane: &Lane) -> Option<Error> {
        match self.posted[lane.local] {
            None => None,
            Some(posted) if posted == *inc => None,
            Some(_) => Some(self.refuse(ExchangeProblem::PostedMismatch { from: inc.from })),
        }
    }

    /// The error for `problem` on this exchange.
    #[cold]
    pub fn refuse(&self, problem: ExchangeProblem) -> Error {
        Error::Exchange { channel: self.name.clone(), problem }
    }

    /// The error for a message of `count` elements (unknown: `None`) from `sender` that does
    /// not fit the `room` its receiver gave.
    #[cold]
    pub fn too_large(&self, sender: usize, receiver: usize, count: Option<usize>, room: usize) -> Error {
        Error::MessageTooLarge { pe: sender, to: receiver, channel: self.name.clone(), count, room }
    }

    /// Advances the call number of a slot, as sender or receiver.
    #[inline]
    pub fn next_call(&mut self, slot: usize, sending: bool) -> Result<u64> {
        let calls = if sending { &mut self.sends } else { &mut self.recvs };
        if calls[slot] + 1 >= MAX_CALLS {
            return Err(self.refuse(ExchangeProblem::CallsExhausted));
        }
        calls[slot] += 1;
        Ok(calls[slot])
    }

    /// Waits, for each of `lanes` (outgoing ones: the signals from their receivers; incoming
    /// ones: from their senders), until its signal reaches `value`, in whichever order they
    /// come, and calls `reached` with its position. Whatever has already arrived is served
    /// first, without waiting; only when nothing is ready does it block, on all the pending
    /// signals at once.
    pub fn await_each(
        &mut self,
        lanes: &[Lane],
        incoming: bool,
        value: impl Fn(&Self, &Lane) -> u64,
        mut reached: impl FnMut(&mut Self, usize, &Lane) -> Result<()>,
    ) -> Result<()> {
        let mut served = std::mem::take(&mut self.served);
        served.clear();
        served.resize(lanes.len(), false);
        let outcome = self.serve(lanes, incoming, &mut served, value, &mut reached);
        self.served = served;
        outcome
    }

    fn serve(
        &mut self,
        lanes: &[Lane],
        incoming: bool,
        served: &mut [bool],
        value: impl Fn(&Self, &Lane) -> u64,
        reached: &mut impl FnMut(&mut Self, usize, &Lane) -> Result<()>,
    ) -> Result<()> {
        let mut remaining = lanes.len();
        while remaining > 0 {
            let mut progressed = false;
            for (i, lane) in lanes.iter().enumerate() {
                let signals = if incoming { &self.from_senders } else { &self.from_receivers };
                if !served[i] && signals.reached(lane.local * STRIDE, value(self, lane)) {
                    served[i] = true;
                    remaining -= 1;
                    progressed = true;
                    reached(self, i, lane)?;
                }
            }
            if progressed || remaining == 0 {
                continue;
            }
            self.waits.clear();
            for (i, lane) in lanes.iter().enumerate() {
                if !served[i] {
                    let awaited = value(self, lane);
                    self.waits.push((lane.local * STRIDE, awaited));
                }
            }
            let signals = if incoming { &self.from_senders } else { &self.from_receivers };
            if let [(index, awaited)] = self.waits[..] {
                let peer = lanes[served.iter().position(|s| !s).expect("one pending")].peer;
                signals.wait_ge_from(index, awaited, Some(peer), self.rt.wait_timeout())?;
            } else {
                signals.wait_any_ge(&self.waits)?;
            }
        }
        Ok(())
    }

    /// Waits until the signal of `lane` (from its receiver, or from its sender when
    /// `incoming`) reaches `value`, and returns the signal.
    #[inline]
    pub fn wait_lane(&self, lane: &Lane, incoming: bool, value: u64) -> Result<u64> {
        let signals = if incoming { &self.from_senders } else { &self.from_receivers };
        signals.wait_ge_from(lane.local * STRIDE, value, Some(lane.peer), self.rt.wait_timeout())
    }
}

impl Channel<'_> {
    /// An error when `peer` is not a PE of the job (`what` says which message named it), or
    /// not one of the exchange's partners.
    #[inline]
    pub(super) fn check_partner(&self, peer: usize, what: &str) -> Result<()> {
        match &self.partners.listed {
            // An exchange with every PE: any PE of the job.
            None if peer < self.partners.capacity => Ok(()),
            None => self.rt.check_pe(peer, || format!("exchange '{}': {what}", self.name)),
            Some(list) if list.binary_search_by_key(&peer, |p| p.0).is_ok() => Ok(()),
            Some(list) => {
                let named: Vec<usize> = list.iter().map(|p| p.0).collect();
                Err(self.refuse(ExchangeProblem::NotAPartner { pe: peer, me: self.partners.me, named }))
            }
        }
    }
}
