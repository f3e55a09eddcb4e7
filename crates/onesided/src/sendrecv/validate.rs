//! The checks every exchange call makes before anything moves, and the receives posted
//! ahead of a call: so that a refused call writes nothing and leaves the channel as it was.

use bytemuck::Pod;

use super::{Exchange, Incoming, LANES, Lane, Message};
use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::SymArray;

/// Two incoming messages whose regions share an element of the same buffer, if any.
fn overlapping(incoming: &[Incoming]) -> Option<(Incoming, Incoming)> {
    let meet = |a: &Incoming, b: &Incoming| {
        a.buffer == b.buffer
            && a.room > 0
            && b.room > 0
            && a.offset < b.offset + b.room
            && b.offset < a.offset + a.room
    };
    if incoming.len() <= 16 {
        // The common case (a few halo pulses): no allocation.
        for (i, a) in incoming.iter().enumerate() {
            if let Some(b) = incoming[i + 1..].iter().find(|b| meet(a, b)) {
                return Some((*a, *b));
            }
        }
        return None;
    }
    let mut sorted: Vec<Incoming> = incoming.iter().filter(|i| i.room > 0).copied().collect();
    sorted.sort_unstable_by_key(|i| (i.buffer, i.offset));
    sorted.windows(2).find(|w| meet(&w[0], &w[1])).map(|w| (w[0], w[1]))
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// The checks of [`validate`](Self::validate) for one message each way.
    pub(super) fn validate_one(
        &self,
        buffers: &[&SymArray<'rt, T>],
        to: usize,
        inc: &Incoming,
    ) -> Result<()> {
        self.rt.check_pe(to, || format!("exchange '{}': message to", self.name))?;
        self.rt.check_pe(inc.from, || format!("exchange '{}': message from", self.name))?;
        self.check_partner(to)?;
        self.check_partner(inc.from)?;
        match buffers.get(inc.buffer) {
            Some(buffer) => buffer.check("receive", self.rt.my_pe(), inc.offset, inc.room),
            None => Err(self.refuse(ExchangeProblem::NoSuchBuffer {
                index: inc.buffer,
                count: buffers.len(),
                from: inc.from,
            })),
        }
    }

    pub(super) fn validate(
        &self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[impl Message],
        incoming: &[Incoming],
        received: usize,
    ) -> Result<()> {
        let invalid = |problem: ExchangeProblem| Err(self.refuse(problem));
        if received != incoming.len() {
            return invalid(ExchangeProblem::ReceivedLength { got: received, expected: incoming.len() });
        }
        for (i, out) in outgoing.iter().enumerate() {
            self.rt.check_pe(out.to(), || format!("exchange '{}': message to", self.name))?;
            self.check_partner(out.to())?;
            if outgoing[..i].iter().filter(|o| o.to() == out.to()).count() >= LANES {
                return invalid(ExchangeProblem::TooManyMessages {
                    pe: out.to(),
                    sending: true,
                    lanes: LANES,
                });
            }
        }
        for (i, inc) in incoming.iter().enumerate() {
            self.rt.check_pe(inc.from, || format!("exchange '{}': message from", self.name))?;
            self.check_partner(inc.from)?;
            if incoming[..i].iter().filter(|m| m.from == inc.from).count() >= LANES {
                return invalid(ExchangeProblem::TooManyMessages {
                    pe: inc.from,
                    sending: false,
                    lanes: LANES,
                });
            }
            let Some(buffer) = buffers.get(inc.buffer) else {
                return invalid(ExchangeProblem::NoSuchBuffer {
                    index: inc.buffer,
                    count: buffers.len(),
                    from: inc.from,
                });
            };
            buffer.check("receive", self.rt.my_pe(), inc.offset, inc.room)?;
        }
        if let Some((a, b)) = overlapping(incoming) {
            return invalid(ExchangeProblem::Overlapping { first: a.from, second: b.from, buffer: a.buffer });
        }
        if self.path.needs_reserve() {
            let largest = outgoing.iter().map(|o| o.len()).max().unwrap_or(0);
            if largest > self.reserved
                || (self.staging.is_none() && !(outgoing.is_empty() && incoming.is_empty()))
            {
                return invalid(ExchangeProblem::NotReserved { largest, reserved: self.reserved });
            }
        }
        Ok(())
    }

    /// Whether a receive of this message was posted (and is now consumed); an error when a
    /// different receive was posted for its lane.
    pub(super) fn consume_posted(&mut self, inc: &Incoming, lane: &Lane) -> Result<bool> {
        if let Some(e) = self.posted_mismatch(inc, lane) {
            return Err(e);
        }
        Ok(self.posted[lane.local].take().is_some())
    }

    /// The error when a receive different from `inc` was posted for its lane.
    pub(super) fn posted_mismatch(&self, inc: &Incoming, lane: &Lane) -> Option<Error> {
        match self.posted[lane.local] {
            None => None,
            Some(posted) if posted == *inc => None,
            Some(_) => Some(self.refuse(ExchangeProblem::PostedMismatch { from: inc.from })),
        }
    }
}
