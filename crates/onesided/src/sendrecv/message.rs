//! The messages of a call: what this PE sends ([`Outgoing`], [`Offer`]) and what it receives
//! and where ([`Incoming`]).

use std::ops::Range;

/// A message this PE sends in a [`call`](crate::Exchange::call). The kind says where its elements
/// come from; the receiver gets the same elements in the same place whatever the kind.
#[derive(Clone, Debug)]
pub enum Outgoing<'a, T> {
    /// A copy of `data`.
    Copy {
        /// The receiving PE.
        to: usize,
        /// The elements.
        data: &'a [T],
    },
    /// `count` elements that the call's packing function ([`Call::pack`](crate::Call::pack))
    /// writes. On the put path to a PE whose memory is mapped into this process (the same
    /// node), it writes straight into the receiver's final place, so the message is packed
    /// where it is needed, with no buffer between; on the get path into the staging buffer the
    /// receiver reads; elsewhere into a buffer that is then sent.
    Packed {
        /// The receiving PE.
        to: usize,
        /// How many elements the packing function writes for it.
        count: usize,
    },
    /// A region of one of the call's buffers, left where it lies ([`Offer`]).
    Offered(Offer),
}

impl<T> Outgoing<'_, T> {
    /// The receiving PE.
    pub fn to(&self) -> usize {
        match self {
            Outgoing::Copy { to, .. } | Outgoing::Packed { to, .. } => *to,
            Outgoing::Offered(offer) => offer.to,
        }
    }

    /// How many elements the message carries.
    pub fn len(&self) -> usize {
        match self {
            Outgoing::Copy { data, .. } => data.len(),
            Outgoing::Packed { count, .. } => *count,
            Outgoing::Offered(offer) => offer.range.len(),
        }
    }

    /// Whether the message carries no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A message already in symmetric memory: elements `range` of this PE's copy of buffer
/// `buffer` of the call, sent without a copy on the sending side where the path allows it.
/// On the get path the receiver reads it where it lies (through the mapping of a same-node
/// PE, or by a get); the other paths send it as they send a copy. A producer that writes its
/// output straight into symmetric memory (a force kernel writing the forces on halo atoms,
/// say) saves the copy into a staging buffer.
///
/// On the get path the receiver may still be reading the region after the call returns:
/// [`Exchange::wait_taken`](crate::Exchange::wait_taken) waits until it has taken it (the next
/// call on the exchange waits too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    pub(super) to: usize,
    pub(super) buffer: usize,
    pub(super) range: Range<usize>,
}

impl Offer {
    /// Offers elements `range` of buffer `buffer` of the call to `to`.
    ///
    /// # Safety
    /// No PE writes `range` of this PE's copy of that buffer from the call that sends the
    /// offer until its receiver has taken it: until
    /// [`Exchange::wait_taken`](crate::Exchange::wait_taken), or the next call on the same
    /// exchange, has returned on this PE. (The exchange itself never writes it: a call that
    /// also receives into the offered region is refused.)
    pub unsafe fn new(to: usize, buffer: usize, range: Range<usize>) -> Offer {
        Offer { to, buffer, range }
    }
}

/// A message this PE receives in a [`call`](crate::Exchange::call), and where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// The sending PE.
    pub from: usize,
    /// Which of the call's buffers receives it.
    pub buffer: usize,
    /// The element offset in that buffer.
    pub offset: usize,
    /// How many elements fit there; a larger message is an error on both sides.
    pub room: usize,
}

/// Messages one PE may send to the same PE in one call: forward and backward of a two-way
/// exchange between two PEs that are each other's neighbour on both sides.
pub const LANES: usize = 2;
