//! A validated call as the transports see it ([`Job`]): the messages, their lanes, where the
//! counts go, and the call's packing and consuming functions.

use bytemuck::Pod;

use super::message::{Incoming, Outgoing};
use super::partners::Lane;
use crate::heap::SymArray;

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
