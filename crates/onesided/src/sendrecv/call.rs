//! One call of an exchange: the builder a caller names its messages with ([`Call`]), and
//! what the transports see of it once it is validated ([`Job`]).

use bytemuck::Pod;

use super::channel::Lane;
use super::{Exchange, Incoming, Outgoing, Work};
use crate::error::Result;
use crate::heap::SymArray;

/// The packing function of a call without packed messages.
type NoPack<T> = fn(&mut [&mut [T]]);
/// The consuming function of a call whose messages land in place.
type NoConsume<T> = fn(usize, &[T]);

/// One call of an [`Exchange`]: the messages this PE sends and receives, and what to do with
/// packed and consumed ones. Made by [`Exchange::call`]; nothing moves until
/// [`run`](Self::run).
#[must_use = "a call moves nothing until it is run"]
pub struct Call<'e, 'c, 'rt, T: Pod, P = NoPack<T>, C = NoConsume<T>> {
    exchange: &'e mut Exchange<'rt, T>,
    buffers: &'c [&'c SymArray<'rt, T>],
    outgoing: &'c [Outgoing<'c, T>],
    incoming: &'c [Incoming],
    pack: Option<P>,
    consume: Option<C>,
}

impl<'e, 'c, 'rt, T: Pod> Call<'e, 'c, 'rt, T> {
    #[inline]
    pub(super) fn new(exchange: &'e mut Exchange<'rt, T>, buffers: &'c [&'c SymArray<'rt, T>]) -> Self {
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
        let Call { exchange, buffers, outgoing, incoming, pack, consume } = self;
        exchange.validate(buffers, outgoing, incoming)?;
        if pack.is_none() && outgoing.iter().any(|o| matches!(o, Outgoing::Packed { .. })) {
            return Err(exchange.chan.refuse(crate::ExchangeProblem::NoPacking));
        }
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
        let mut pack = pack;
        let mut pack_once = |slices: &mut [&mut [T]]| {
            if let Some(fill) = pack.take() {
                fill(slices);
            }
        };
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

/// A call's consuming function, as the transports call it.
pub(super) type Consume<'j, T> = &'j mut dyn FnMut(usize, &[T]);

/// A validated call, as a transport sees it: the messages, their lanes, where the counts go,
/// and the call's packing and consuming functions.
pub(super) struct Job<'j, 'rt, T: Pod> {
    pub buffers: &'j [&'j SymArray<'rt, T>],
    pub outgoing: &'j [Outgoing<'j, T>],
    pub incoming: &'j [Incoming],
    pub out_lanes: &'j [Lane],
    pub in_lanes: &'j [Lane],
    /// One count per incoming message.
    pub received: &'j mut [usize],
    /// Writes the packed messages; calls after the first do nothing.
    pub pack: &'j mut dyn FnMut(&mut [&mut [T]]),
    /// Where incoming messages go when the call consumes them.
    pub consume: Option<Consume<'j, T>>,
    /// Packed messages that are staged.
    pub pack_buffer: &'j mut Vec<T>,
}

impl<T: Pod> Job<'_, '_, T> {
    /// Writes every packed message into the pack buffer, one after the other in the order
    /// of the outgoing messages, for the paths that send them as copies.
    pub fn stage_packed(&mut self) {
        let packed = |o: &&Outgoing<'_, T>| matches!(o, Outgoing::Packed { .. });
        let count = self.outgoing.iter().filter(packed).count();
        if count == 0 {
            return;
        }
        self.pack_buffer.clear();
        self.pack_buffer.resize(self.outgoing.iter().map(packed_count).sum(), T::zeroed());
        let mut slices =
            split_counted(self.pack_buffer, self.outgoing.iter().filter(packed).map(packed_count));
        (self.pack)(&mut slices);
    }

    /// The elements of outgoing message `i`, once [`stage_packed`](Self::stage_packed) has
    /// run: its data, its staged packing, or its offered region.
    pub fn data(&self, i: usize) -> &[T] {
        let o = &self.outgoing[i];
        direct_data(self.buffers, o).unwrap_or_else(|| {
            let at: usize = self.outgoing[..i].iter().map(packed_count).sum();
            &self.pack_buffer[at..at + o.len()]
        })
    }

    /// Hands incoming message `i`, which has landed in its place with `count` elements, to
    /// the call's consuming function, if it has one.
    pub fn consume_in_place(&mut self, i: usize, count: usize) {
        if let Some(consume) = self.consume.as_mut() {
            let inc = self.incoming[i];
            // SAFETY: the message is in place (the transport has seen it arrive) and no PE
            // writes this region again before this PE's next call on the exchange, which
            // needs `&mut` of it; `count <= room`, which validation checked against the buffer.
            let message = unsafe { self.buffers[inc.buffer].local_range(inc.offset..inc.offset + count) };
            consume(i, message);
        }
    }
}

/// The elements of a message that are there before the call packs anything: a copy's data,
/// an offered region; `None` for a packed message.
pub(super) fn direct_data<'a, T: Pod>(
    buffers: &[&'a SymArray<'_, T>],
    o: &'a Outgoing<'_, T>,
) -> Option<&'a [T]> {
    match o {
        Outgoing::Copy { data, .. } => Some(data),
        Outgoing::Packed { .. } => None,
        Outgoing::Offered(offer) => {
            // SAFETY: validation checked the range against the buffer; no PE writes it until
            // the receiver has taken the message (the promise made by `Offer::new`), and this
            // PE only reads it.
            Some(unsafe { buffers[offer.buffer].local_range(offer.range.clone()) })
        }
    }
}

/// The elements a message makes the pack buffer hold: its count when packed, else none.
fn packed_count<T>(o: &Outgoing<'_, T>) -> usize {
    match o {
        Outgoing::Packed { count, .. } => *count,
        _ => 0,
    }
}

/// `data` cut into consecutive slices of `counts` elements (which sum to at most its length).
pub(super) fn split_counted<T>(data: &mut [T], counts: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut slices = Vec::with_capacity(counts.size_hint().0);
    let mut rest = data;
    for count in counts {
        let (slice, tail) = std::mem::take(&mut rest).split_at_mut(count);
        slices.push(slice);
        rest = tail;
    }
    slices
}
