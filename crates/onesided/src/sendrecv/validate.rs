//! The checks every call makes before anything moves, so that a refused call writes nothing
//! and leaves the exchange as it was.

use bytemuck::Pod;

use super::exchange::Exchange;
use super::message::{Incoming, LANES, Outgoing};
use crate::error::{ExchangeProblem, Result};
use crate::heap::SymArray;

/// Two regions, given as (buffer, start, length), that share an element.
fn meet(a: (usize, usize, usize), b: (usize, usize, usize)) -> bool {
    a.0 == b.0 && a.2 > 0 && b.2 > 0 && a.1 < b.1 + b.2 && b.1 < a.1 + a.2
}

/// The region an incoming message may be written into.
fn region(inc: &Incoming) -> (usize, usize, usize) {
    (inc.buffer, inc.offset, inc.room)
}

/// Two incoming messages whose regions share an element of the same buffer, if any.
fn overlapping(incoming: &[Incoming]) -> Option<(Incoming, Incoming)> {
    if incoming.len() <= 16 {
        // The common case (a few halo pulses): no allocation.
        for (i, a) in incoming.iter().enumerate() {
            if let Some(b) = incoming[i + 1..].iter().find(|b| meet(region(a), region(b))) {
                return Some((*a, *b));
            }
        }
        return None;
    }
    let mut sorted: Vec<Incoming> = incoming.iter().filter(|i| i.room > 0).copied().collect();
    sorted.sort_unstable_by_key(|i| (i.buffer, i.offset));
    sorted.windows(2).find(|w| meet(region(&w[0]), region(&w[1]))).map(|w| (w[0], w[1]))
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Checks a call's messages: partners, lanes, buffers, regions, offers and the room of
    /// the paths that stage.
    #[inline]
    pub(super) fn validate(
        &self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
    ) -> Result<()> {
        if let ([out], [inc]) = (outgoing, incoming) {
            // One message each way, the common case of a halo pulse, whose latency matters
            // most: no lanes to count, no regions to compare.
            self.check_outgoing(buffers, out, std::slice::from_ref(inc))?;
            self.check_incoming(buffers, inc)?;
            return self.check_room(outgoing, incoming);
        }
        let chan = &self.chan;
        let invalid = |problem: ExchangeProblem| Err(chan.refuse(problem));
        for (i, out) in outgoing.iter().enumerate() {
            self.check_outgoing(buffers, out, incoming)?;
            let to = out.to();
            if i >= LANES && outgoing[..i].iter().filter(|o| o.to() == to).count() >= LANES {
                return invalid(ExchangeProblem::TooManyMessages { pe: to, sending: true, lanes: LANES });
            }
        }
        for (i, inc) in incoming.iter().enumerate() {
            self.check_incoming(buffers, inc)?;
            if i >= LANES && incoming[..i].iter().filter(|m| m.from == inc.from).count() >= LANES {
                return invalid(ExchangeProblem::TooManyMessages {
                    pe: inc.from,
                    sending: false,
                    lanes: LANES,
                });
            }
        }
        if incoming.len() > 1
            && let Some((a, b)) = overlapping(incoming)
        {
            return invalid(ExchangeProblem::Overlapping { first: a.from, second: b.from, buffer: a.buffer });
        }
        self.check_room(outgoing, incoming)
    }

    /// An outgoing message: its receiver, and for an offer its region, which none of the
    /// call's `incoming` messages may land in.
    #[inline]
    fn check_outgoing(
        &self,
        buffers: &[&SymArray<'rt, T>],
        out: &Outgoing<'_, T>,
        incoming: &[Incoming],
    ) -> Result<()> {
        let chan = &self.chan;
        let to = out.to();
        chan.check_partner(to, "message to")?;
        if let Outgoing::Offered(offer) = out {
            let me = chan.rt.my_pe();
            let Some(buffer) = buffers.get(offer.buffer) else {
                let problem =
                    ExchangeProblem::NoSuchBuffer { index: offer.buffer, count: buffers.len(), from: me };
                return Err(chan.refuse(problem));
            };
            buffer.check("offered message", me, offer.range.start, offer.range.len())?;
            let offered = (offer.buffer, offer.range.start, offer.range.len());
            if let Some(inc) = incoming.iter().find(|inc| meet(offered, region(inc))) {
                let problem = ExchangeProblem::OfferReceived { to, from: inc.from, buffer: offer.buffer };
                return Err(chan.refuse(problem));
            }
        }
        Ok(())
    }

    /// An incoming message: its sender, and its region inside one of the call's buffers.
    #[inline]
    fn check_incoming(&self, buffers: &[&SymArray<'rt, T>], inc: &Incoming) -> Result<()> {
        let chan = &self.chan;
        chan.check_partner(inc.from, "message from")?;
        match buffers.get(inc.buffer) {
            Some(buffer) => buffer.check_local("receive", inc.offset, inc.room),
            None => Err(chan.refuse(ExchangeProblem::NoSuchBuffer {
                index: inc.buffer,
                count: buffers.len(),
                from: inc.from,
            })),
        }
    }

    /// On the paths that stage messages: room for every staged one (and a reservation at all
    /// where anything moves).
    #[inline]
    fn check_room(&self, outgoing: &[Outgoing<'_, T>], incoming: &[Incoming]) -> Result<()> {
        let Some(reserved) = self.transport.reserved() else { return Ok(()) };
        let stages_offers = self.transport.stages_offers();
        let staged = |o: &&Outgoing<'_, T>| stages_offers || !matches!(o, Outgoing::Offered(_));
        let largest = outgoing.iter().filter(staged).map(Outgoing::len).max();
        if largest.is_some_and(|l| l > reserved.unwrap_or(0))
            || (reserved.is_none() && (largest.is_some() || !incoming.is_empty()))
        {
            let (largest, reserved) = (largest.unwrap_or(0), reserved.unwrap_or(0));
            return Err(self.chan.refuse(ExchangeProblem::NotReserved { largest, reserved }));
        }
        Ok(())
    }
}
