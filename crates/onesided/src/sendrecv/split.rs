//! A call in two halves, for communication in flight while the caller computes:
//! [`Call::start`] sends what it can and returns, [`Exchange::finish`] receives. On the
//! one-sided paths the start leaves each message in its receiver's memory (the offset swap)
//! or offered to it (the pull) with its delivery signal raised, so the receiver finds it
//! there whatever the sender does next; on the MPI path the start posts every receive and
//! send (`MPI_Irecv`, `MPI_Isend`) and the finish waits for them. The paths with no split
//! form (the offset swap over an MPI window, the buffered baseline, and a mixed exchange's
//! call that has partners of both classes) run the whole call in the start, so that the
//! finish only hands the messages over: the same bytes either way, the overlap where it
//! exists.
//!
//! The exchange keeps what the finish needs (the incoming messages and their lanes) and
//! refuses every other operation while a call is in flight; a finish needs the start's
//! buffers again, and is refused with others.

use bytemuck::Pod;

use super::call::{Call, NoConsume, once};
use super::exchange::{Exchange, Work};
use super::job::Job;
use crate::error::{ExchangeProblem, Result};
use crate::heap::SymArray;

/// What identifies each of `buffers`: its address and its length.
fn identities<T: Pod>(buffers: &[&SymArray<'_, T>]) -> impl Iterator<Item = (usize, usize)> {
    buffers.iter().map(|b| (b.as_ptr() as usize, b.len()))
}

impl<'e, 'c, 'rt, T: Pod, P> Call<'e, 'c, 'rt, T, P, NoConsume<T>>
where
    P: FnOnce(&mut [&mut [T]]),
{
    /// Starts the call and returns once this PE's messages are on their way: on the
    /// one-sided paths in their receivers' memory (or offered there) with their signals
    /// raised, on the MPI path posted with the receives. The packing function runs here.
    /// [`Exchange::finish`] (or [`finish_consuming`](Exchange::finish_consuming)) then
    /// receives, with the same buffers; in between this PE computes on memory the call does
    /// not touch. The start waits, on the offset swap, for each receiver's announcement of
    /// where its message goes (its own start, or a receive it posted ahead), so the PEs of a
    /// pair must both start. [`run_while`](Call::run_while) is the safe form, with the work
    /// in a closure.
    ///
    /// # Safety
    /// Until the exchange's finish returns, or the exchange is dropped: every buffer of the
    /// call stays allocated; this PE neither reads nor writes the receive regions, nor
    /// writes the data of the outgoing messages (copies and offered regions); and the data
    /// of [`Outgoing::Copy`](crate::Outgoing::Copy) messages stays alive (the MPI path sends
    /// it from where it lies).
    ///
    /// # Errors
    /// As [`Call::run`], and [`ExchangeProblem::InFlight`] when a started call is not yet
    /// finished. A message refused for its size is reported by the finish, after the
    /// receives; any other error leaves nothing in flight.
    pub unsafe fn start(self) -> Result<()> {
        self.start_parts().map(|_| ())
    }
}

impl<'e, 'c, 'rt, T: Pod, P, C> Call<'e, 'c, 'rt, T, P, C>
where
    P: FnOnce(&mut [&mut [T]]),
    C: FnMut(usize, &[T]),
{
    /// Runs the call around `work`: starts it ([`Call::start`]), runs `work` while the
    /// messages travel, then finishes it, and returns the counts (as [`Call::run`]) with what
    /// `work` returned. The borrows of the call keep its buffers and data untouched
    /// meanwhile. The same bytes land in the same places as with `run`.
    ///
    /// # Errors
    /// As [`Call::start`] and [`Exchange::finish`].
    pub fn run_while<R>(self, work: impl FnOnce() -> R) -> Result<(&'e [usize], R)> {
        let (exchange, buffers, consume) = self.start_parts()?;
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        let result = match done {
            Ok(result) => result,
            Err(panic) => {
                // No request may outlive the borrows the unwinding ends.
                exchange.abandon_in_flight();
                std::panic::resume_unwind(panic);
            }
        };
        Ok((exchange.finish_with(buffers, consume)?, result))
    }

    /// Validates and starts the call, and hands back what its finish needs.
    #[allow(clippy::type_complexity)]
    fn start_parts(self) -> Result<(&'e mut Exchange<'rt, T>, &'c [&'c SymArray<'rt, T>], Option<C>)> {
        self.check("start")?;
        let Call { exchange, buffers, outgoing, incoming, pack, consume } = self;
        let Exchange { chan, transport, work, in_flight, .. } = &mut *exchange;
        let Work { out_lanes, in_lanes, received, pack_buffer } = work;
        chan.begin(out_lanes, in_lanes, outgoing, incoming)?;
        received.clear();
        received.resize(incoming.len(), 0);
        let mut pack_once = once(pack);
        let mut job = Job {
            buffers,
            outgoing,
            incoming,
            out_lanes,
            in_lanes,
            received,
            pack: &mut pack_once,
            consume: None,
            pack_buffer,
        };
        let split = transport.start(chan, &mut job)?;
        in_flight.active = true;
        in_flight.split = split;
        in_flight.incoming.clear();
        in_flight.incoming.extend_from_slice(incoming);
        in_flight.buffers.clear();
        in_flight.buffers.extend(identities(buffers));
        Ok((exchange, buffers, consume))
    }
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Finishes the started call ([`Call::start`]): waits for every message this PE
    /// receives, in place, and returns the number of elements that arrived for each, in the
    /// order of the call's receives. Afterwards the call's buffers are the caller's again, as
    /// after [`Call::run`].
    ///
    /// # Errors
    /// As [`Call::run`]; [`ExchangeProblem::NotStarted`] without a started call;
    /// [`ExchangeProblem::FinishBuffers`] for other buffers than the start's (the call then
    /// stays in flight).
    pub fn finish(&mut self, buffers: &[&SymArray<'rt, T>]) -> Result<&[usize]> {
        self.finish_with(buffers, None::<NoConsume<T>>)
    }

    /// [`finish`](Self::finish), handing each incoming message to `consume` where it lies,
    /// as [`Call::consume`] does (on the get path from a PE of this node, in the sender's
    /// memory; elsewhere once it has landed in place), in the order the messages arrive.
    ///
    /// # Errors
    /// As [`finish`](Self::finish).
    pub fn finish_consuming(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        consume: impl FnMut(usize, &[T]),
    ) -> Result<&[usize]> {
        self.finish_with(buffers, Some(consume))
    }

    /// Whether a started call awaits its finish.
    pub fn in_flight(&self) -> bool {
        self.in_flight.active
    }

    /// An error naming `operation` while a started call is in flight.
    #[inline]
    pub(super) fn idle(&self, operation: &'static str) -> Result<()> {
        if self.in_flight.active {
            return Err(self.chan.refuse(ExchangeProblem::InFlight { operation }));
        }
        Ok(())
    }

    /// Ends a started call that will not be finished: no MPI request outlives it. The
    /// exchange is not to be used again (its partners' calls are out of step with its own).
    pub(super) fn abandon_in_flight(&mut self) {
        if std::mem::take(&mut self.in_flight.active) {
            self.transport.abandon();
        }
    }

    fn finish_with<C: FnMut(usize, &[T])>(
        &mut self,
        buffers: &[&SymArray<'rt, T>],
        consume: Option<C>,
    ) -> Result<&[usize]> {
        let Exchange { chan, transport, work, in_flight, .. } = self;
        if !in_flight.active {
            return Err(chan.refuse(ExchangeProblem::NotStarted));
        }
        if !identities(buffers).eq(in_flight.buffers.iter().copied()) {
            let (started, given) = (in_flight.buffers.len(), buffers.len());
            return Err(chan.refuse(ExchangeProblem::FinishBuffers { started, given }));
        }
        in_flight.active = false;
        {
            let Work { in_lanes, received, pack_buffer, .. } = &mut *work;
            let mut consume = consume;
            let mut nothing = |_: &mut [&mut [T]]| {};
            let mut job = Job {
                buffers,
                outgoing: &[],
                incoming: &in_flight.incoming,
                out_lanes: &[],
                in_lanes,
                received,
                pack: &mut nothing,
                consume: consume.as_mut().map(|c| c as &mut dyn FnMut(usize, &[T])),
                pack_buffer,
            };
            if in_flight.split {
                transport.finish(chan, &mut job)?;
            } else {
                for i in 0..job.incoming.len() {
                    let count = job.received[i];
                    job.consume_in_place(i, count);
                }
            }
        }
        Ok(&work.received)
    }
}

impl<T: Pod> Drop for Exchange<'_, T> {
    fn drop(&mut self) {
        self.abandon_in_flight();
    }
}
