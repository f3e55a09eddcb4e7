//! The checks every call makes before anything moves, so that a refused call writes nothing
//! and leaves the exchange as it was.

use bytemuck::Pod;

use super::{Exchange, Incoming, LANES, Outgoing};
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
    pub(super) fn validate(
        &self,
        buffers: &[&SymArray<'rt, T>],
        outgoing: &[Outgoing<'_, T>],
        incoming: &[Incoming],
    ) -> Result<()> {
        let chan = &self.chan;
        let (me, name) = (chan.rt.my_pe(), &chan.name);
        let invalid = |problem: ExchangeProblem| Err(chan.refuse(problem));
        for (i, out) in outgoing.iter().enumerate() {
            let to = out.to();
            chan.rt.check_pe(to, || format!("exchange '{name}': message to"))?;
            chan.check_partner(to)?;
            if outgoing[..i].iter().filter(|o| o.to() == to).count() >= LANES {
                return invalid(ExchangeProblem::TooManyMessages { pe: to, sending: true, lanes: LANES });
            }
            if let Outgoing::Offered(offer) = out {
                let Some(buffer) = buffers.get(offer.buffer) else {
                    return invalid(ExchangeProblem::NoSuchBuffer {
                        index: offer.buffer,
                        count: buffers.len(),
                        from: me,
                    });
                };
                buffer.check("offered message", me, offer.range.start, offer.range.len())?;
                let offered = (offer.buffer, offer.range.start, offer.range.len());
                if let Some(inc) = incoming.iter().find(|inc| meet(offered, region(inc))) {
                    return invalid(ExchangeProblem::OfferReceived {
                        to,
                        from: inc.from,
                        buffer: offer.buffer,
                    });
                }
            }
        }
        for (i, inc) in incoming.iter().enumerate() {
            chan.rt.check_pe(inc.from, || format!("exchange '{name}': message from"))?;
            chan.check_partner(inc.from)?;
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
            buffer.check("receive", me, inc.offset, inc.room)?;
        }
        if let Some((a, b)) = overlapping(incoming) {
            return invalid(ExchangeProblem::Overlapping { first: a.from, second: b.from, buffer: a.buffer });
        }
        if let Some(reserved) = self.transport.reserved() {
            let stages_offers = self.transport.stages_offers();
            let staged = |o: &&Outgoing<'_, T>| stages_offers || !matches!(o, Outgoing::Offered(_));
            let largest = outgoing.iter().filter(staged).map(Outgoing::len).max();
            if largest.is_some_and(|l| l > reserved.unwrap_or(0))
                || (reserved.is_none() && (largest.is_some() || !incoming.is_empty()))
            {
                let (largest, reserved) = (largest.unwrap_or(0), reserved.unwrap_or(0));
                return invalid(ExchangeProblem::NotReserved { largest, reserved });
            }
        }
        Ok(())
    }
}
