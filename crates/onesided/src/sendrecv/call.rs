//! One call of an exchange: the builder a caller names its messages with ([`Call`]), and the
//! receives a caller posts ahead of the next call.

use bytemuck::Pod;

use super::exchange::{Exchange, Work};
use super::job::Job;
use super::message::{Incoming, Outgoing};
use super::partners::Lane;
use crate::error::{ExchangeProblem, Result};
use crate::heap::SymArray;

/// The packing function of a call without packed messages.
pub(super) type NoPack<T> = fn(&mut [&mut [T]]);
/// The consuming function of a call whose messages land in place.
pub(super) type NoConsume<T> = fn(usize, &[T]);

/// One call of an [`Exchange`]: the messages this PE sends and receives, and what to do with
/// packed and consumed ones. Made by [`Exchange::call`]; nothing moves until
/// [`run`](Self::run).
#[must_use = "a call moves nothing until it is run"]
pub struct Call<'e, 'c, 'rt, T: Pod, P = NoPack<T>, C = NoConsume<T>> {
    pub(super) exchange: &'e mut Exchange<'rt, T>,
    pub(super) buffers: &'c [&'c SymArray<'rt, T>],
    pub(super) outgoing: &'c [Outgoing<'c, T>],
    pub(super) incoming: &'c [Incoming],
    pub(super) pack: Option<P>,
    pub(super) consume: Option<C>,
}

impl<'e, 'c, 'rt, T: Pod> Call<'e, 'c, 'rt, T> {
    #[inline]
    fn new(exchange: &'e mut Exchange<'rt, T>, buffers: &'c [&'c SymArray<'rt, T>]) -> Self {
        Call { exchange, buffers, outgoing: &[], incoming: &[], pack: None, consume: None }
    }
}

impl<'e, 'c, 'rt, T: Pod, P, C> Call<'e, 'c, 'rt, T, P, C>
where
    P: FnOnce(&mut [&mut [T]]),
    C: FnMut(usize, &[T]),
{
    /// The messages this PE sends in the call (at most [`LANES`](super::LANES) to one PE).
    #[inline]
    pub fn send(mut self, outgoing: &'c [Outgoing<'c, T>]) -> Self {
        self.outgoing = outgoing;
        self
    }

    /// The messages this PE receives in the call, and where each lands (at most
    /// [`LANES`](super::LANES) from one PE; regions of one call must not overlap).
    #[inline]
    pub fn receive(mut self, incoming: &'c [Incoming]) -> Self {
        self.incoming = incoming;
        self
    }

    /// The function that writes the call's [`Outgoing::Packed`] messages: it gets one slice
    /// per packed message, in the order of [`send`](Self::send), each `count` elements long,
    /// and must write every element. It is called once, when every receiver has announced
    /// where its message goes, so that data bound for several receivers (atoms sorted by the
    /// PE that owns them, say) is written in one pass over the source, straight where it is
    /// needed. A message its receiver has no room for gets a slice that is dropped.
    ///
    /// If it panics on the put path, the receivers it was writing for are not signalled; the
    /// exchange is not to be used again.
    #[inline]
    pub fn pack<F: FnOnce(&mut [&mut [T]])>(self, fill: F) -> Call<'e, 'c, 'rt, T, F, C> {
        let Call { exchange, buffers, outgoing, incoming, consume, .. } = self;
        Call { exchange, buffers, outgoing, incoming, pack: Some(fill), consume }
    }

    /// Hands each incoming message to `consume` (its index in [`receive`](Self::receive)'s
    /// list, and the whole message) where it lies, for a receiver that only combines it with
    /// data of its own (adds returned forces into its force array, say) and needs no copy of
    /// it. On the get path from a PE whose memory is mapped into this process (the same
    /// node), `consume` reads the message in the sender's memory: the data crosses between
    /// the cores once, as `consume` reads it, and nothing is copied on the receiving side.
    /// Elsewhere, and on the other paths, the message lands in its place first, and
    /// `consume` reads it there. A refused message is not handed over.
    #[inline]
    pub fn consume<F: FnMut(usize, &[T])>(self, consume: F) -> Call<'e, 'c, 'rt, T, P, F> {
        let Call { exchange, buffers, outgoing, incoming, pack, .. } = self;
        Call { exchange, buffers, outgoing, incoming, pack, consume: Some(consume) }
    }

    /// Sends every outgoing message and receives every incoming one, and returns the number
    /// of elements that arrived for each incoming message. Returns when every message this
    /// PE receives is in place (or consumed) and every message it sends may be overwritten at
    /// the source, except that offered regions may still be read on the get path
    /// ([`Exchange::wait_taken`]).
    ///
    /// # Errors
    /// - [`Error::MessageTooLarge`](crate::Error::MessageTooLarge) when a message exceeds the
    ///   room its receiver gave: on the receiver, and on the put path also on the sender,
    ///   which checks before writing anything; the other messages of the call are still
    ///   delivered;
    /// - [`Error::Exchange`](crate::Error::Exchange) for more than [`LANES`](super::LANES)
    ///   messages between one pair of PEs in one call, a buffer index out of range, a PE that
    ///   is not a partner, overlapping receive regions, an offer that is also received into,
    ///   packed messages without a packing function, a message larger than the reservation
    ///   of a path that stages, or buffer lists that differ between PEs;
    /// - [`Error::OutOfBounds`](crate::Error::OutOfBounds) when `offset + room`, or an
    ///   offered range, exceeds its buffer;
    /// - [`Error::WaitTimeout`](crate::Error::WaitTimeout) when a partner does not take part.
    ///
    /// On the MPI path, Open MPI 4.1 under `MPI_THREAD_MULTIPLE` can leave `MPI_Waitall`
    /// spinning on a truncated receive among several, so a message larger than its room in a
    /// call of several messages may hang its receiver there (an Open MPI defect, reproduced
    /// without this library); one message each way is refused cleanly.
    pub fn run(self) -> Result<&'e [usize]> {
        self.check("run")?;
        let Call { exchange, buffers, outgoing, incoming, pack, consume } = self;
        let Exchange { chan, transport, work, .. } = exchange;
        let Work { out_lanes, in_lanes, received, pack_buffer } = &mut *work;
        // One message each way, the common case of a halo pulse: lane 0 of each pair, kept
        // on the stack.
        let one: [Lane; 2];
        let (out_lanes, in_lanes): (&[Lane], &[Lane]) = if let ([out], [inc]) = (outgoing, incoming) {
            one = [chan.partners.lane(out.to(), 0), chan.partners.lane(inc.from, 0)];
            chan.check_posted(inc, &one[1])?;
            (&one[..1], &one[1..])
        } else {
            chan.begin(out_lanes, in_lanes, outgoing, incoming)?;
            (out_lanes, in_lanes)
        };
        received.clear();
        if incoming.len() == 1 {
            received.push(0);
        } else {
            received.resize(incoming.len(), 0);
        }
        let mut pack_once = once(pack);
        let mut consume = consume;
        let mut consume_each = consume.as_mut().map(|c| c as &mut dyn FnMut(usize, &[T]));
        let mut job = Job {
            buffers,
            outgoing,
            incoming,
            out_lanes,
            in_lanes,
            received,
            pack: &mut pack_once,
            consume: consume_each.take(),
            pack_buffer,
        };
        transport.exchange(chan, &mut job)?;
        let work: &'e Work<T> = work;
        Ok(&work.received)
    }
}

impl<T: Pod, P, C> Call<'_, '_, '_, T, P, C> {
    /// The checks a call makes before anything moves, `operation` (run, start) naming it:
    /// no call in flight, the messages valid, a packing function for packed messages.
    pub(super) fn check(&self, operation: &'static str) -> Result<()> {
        self.exchange.idle(operation)?;
        self.exchange.validate(self.buffers, self.outgoing, self.incoming)?;
        if self.pack.is_none() && self.outgoing.iter().any(|o| matches!(o, Outgoing::Packed { .. })) {
            return Err(self.exchange.chan.refuse(crate::ExchangeProblem::NoPacking));
        }
        Ok(())
    }
}

/// A call's packing function as the transports call it: `pack` the first time, nothing after.
pub(super) fn once<T, P: FnOnce(&mut [&mut [T]])>(pack: Option<P>) -> impl FnMut(&mut [&mut [T]]) {
    let mut pack = pack;
    move |slices| {
        if let Some(fill) = pack.take() {
            fill(slices);
        }
    }
}

impl<T: Pod, P, C> std::fmt::Debug for Call<'_, '_, '_, T, P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("exchange", &self.exchange.name())
            .field("buffers", &self.buffers.len())
            .field("outgoing", &self.outgoing.len())
            .field("incoming", &self.incoming.len())
            .field("packs", &self.pack.is_some())
            .field("consumes", &self.consume.is_some())
            .finish()
    }
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Starts a call whose messages land in, or are offered from, `buffers`: a list of
    /// symmetric arrays that every PE of a pair passes in the same order. Name the messages
    /// with [`send`](Call::send) and [`receive`](Call::receive), and run it with
    /// [`run`](Call::run):
    ///
    /// ```no_run
    /// # fn main() -> onesided::Result<()> {
    /// use onesided::{Exchange, Incoming, Outgoing, Runtime, SymArray};
    ///
    /// let rt = Runtime::init()?;
    /// let (me, n) = (rt.my_pe(), rt.n_pes());
    /// let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    /// let inbox = SymArray::<u64>::collective_alloc(&rt, "inbox", 8)?;
    /// let mut ring = Exchange::builder(&rt, "ring").partners(&[left, right]).collective_build()?;
    /// let message = [me as u64; 8];
    /// let counts = ring
    ///     .call(&[&inbox])
    ///     .send(&[Outgoing::Copy { to: right, data: &message }])
    ///     .receive(&[Incoming { from: left, buffer: 0, offset: 0, room: 8 }])
    ///     .run()?;
    /// assert_eq!(counts, [8]);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn call<'e, 'c>(&'e mut self, buffers: &'c [&'c SymArray<'rt, T>]) -> Call<'e, 'c, 'rt, T> {
        Call::new(self, buffers)
    }

    /// Announces now where the next call's `incoming` messages go, so that their senders
    /// need not wait for it: the way to take the announcement off the critical path when the
    /// receive regions are known, and free, ahead of time (after the data of the previous
    /// call has been used). The next call must receive exactly these messages. Only the paths
    /// that [announce](crate::Transport::announces) use it; the others accept posted receives and
    /// ignore them.
    ///
    /// From the moment of posting, the senders may write into the announced regions.
    ///
    /// # Errors
    /// As [`Call::run`] for the incoming messages; [`ExchangeProblem::AlreadyPosted`] when a
    /// receive from the same PE and lane is posted already.
    pub fn post_receives(&mut self, buffers: &[&SymArray<'rt, T>], incoming: &[Incoming]) -> Result<()> {
        self.idle("post_receives")?;
        self.validate(buffers, &[], incoming)?;
        let mut lanes = Vec::with_capacity(incoming.len());
        self.chan.partners.assign(&mut lanes, incoming.iter().map(|i| i.from));
        for (inc, lane) in incoming.iter().zip(&lanes) {
            if self.chan.posted[lane.local].is_some() {
                return Err(self.chan.refuse(ExchangeProblem::AlreadyPosted { from: inc.from }));
            }
        }
        for (inc, lane) in incoming.iter().zip(&lanes) {
            self.transport.post(&mut self.chan, inc, lane)?;
            self.chan.posted[lane.local] = Some(*inc);
        }
        Ok(())
    }
}
