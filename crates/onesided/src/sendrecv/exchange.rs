//! The exchange itself: its channel, its protocol for the links it takes, and what it keeps
//! between calls; built on links already settled (its builder resolves [`Path::Auto`] first).
//!
//! When a reservation changes an `Auto` exchange's transports, a lane's call numbers stay as
//! they were: they live in the channel that every transport shares (the MPI path uses none),
//! so both sides of a pair go on counting from the same number on the new transport.

use std::fmt;

use bytemuck::Pod;

#[cfg(feature = "baselines")]
use super::buffered;
use super::channel::Channel;
use super::message::Incoming;
use super::partners::{Lane, Partners};
use super::protocol::Protocol;
use super::{get, mixed, mpi, mpi_rma, put};
use crate::collective::Collectives;
use crate::error::{Error, ExchangeProblem, Result};
use crate::links::Links;
use crate::path::{Path, Transport};
use crate::runtime::Runtime;

/// The transports to PEs of this node and of other nodes.
pub(super) type Pair = (Transport, Transport);

/// A send-receive channel for elements of type `T`, on a [`Path`] chosen when it is built
/// ([`builder`](Self::builder)).
///
/// It has one operation, a [`call`](Self::call), whose messages say what differs. Every
/// message a PE receives names its final place ([`Incoming`](crate::Incoming)): a buffer out
/// of a list of symmetric arrays both sides pass in the same order (the coordinate array
/// itself, received in place, or a scratch buffer), an element offset, and the room there.
/// Every message a PE sends says where its elements come from
/// ([`Outgoing`](crate::Outgoing)): a copy of a slice, elements the call's packing function
/// writes ([`Call::pack`](crate::Call::pack), straight into a same-node receiver's place
/// where it can), or a region of one of the call's buffers offered where it lies
/// ([`Offer`](crate::Offer)). A call can also hand each incoming message to a function where
/// it lies instead of landing it ([`Call::consume`](crate::Call::consume)). Whatever the
/// [`Transport`] (the one-sided offset swap or pull, MPI two-sided, the offset swap over MPI
/// one-sided) and whatever kind of message each side chose, the same bytes land in the same
/// places.
///
/// Exchanges are pairwise: only the PEs that exchange messages take part, and they need not
/// arrive together. Per pair and direction, the `k`-th send of one PE meets the `k`-th
/// receive of the other; within one call, the `l`-th message one PE sends another meets the
/// `l`-th message the other receives from it (at most [`LANES`](crate::LANES) per pair and
/// call, so that two PEs that are each other's neighbour on both sides send forward and
/// backward at once).
///
/// A misuse is refused before anything of the call moves (overlapping receive regions, an
/// offer the same call receives into, a call that differs from the receives posted for it:
/// see [`ExchangeProblem`]), and a message too large for its room is refused with nothing
/// written while the call's other messages are still delivered
/// ([`Call::run`](crate::Call::run)).
pub struct Exchange<'rt, T: Pod> {
    pub(super) path: Path,
    /// The transport to each class of partner for the size of message last reserved (one
    /// for every partner unless `path` is `Auto`).
    pub(super) current: Pair,
    /// The links, per size of message, an `Auto` exchange follows at each reservation.
    pub(super) links: Links,
    /// What every path shares: partners, slots, signals, call numbers.
    pub(super) chan: Channel<'rt>,
    /// The path's own protocol and state.
    pub(super) transport: Box<dyn Protocol<'rt, T> + 'rt>,
    /// The transports of links taken before and left at a reservation, kept for a return.
    pub(super) spare: Vec<(Pair, Box<dyn Protocol<'rt, T> + 'rt>)>,
    /// Per-call bookkeeping, kept between calls so that a call allocates nothing.
    pub(super) work: Work<T>,
    /// The started call that is not finished yet, if any.
    pub(super) in_flight: InFlight,
}

/// What a call needs beside its messages, kept between calls.
pub(super) struct Work<T> {
    pub(super) out_lanes: Vec<Lane>,
    pub(super) in_lanes: Vec<Lane>,
    /// The count of each incoming message of the last call.
    pub(super) received: Vec<usize>,
    /// Where packed messages are written when they cannot go straight to their receiver.
    pub(super) pack_buffer: Vec<T>,
}

/// A started call's state ([`Call::start`](crate::Call::start)), kept in its exchange (reused between calls, so a start
/// allocates nothing once the lists have grown).
#[derive(Default)]
pub(super) struct InFlight {
    /// Whether a started call awaits its finish.
    pub(super) active: bool,
    /// Whether the transport left the receives to the finish (else the call ran whole).
    pub(super) split: bool,
    pub(super) incoming: Vec<Incoming>,
    /// The start's buffers (address and length), which the finish must be given again.
    pub(super) buffers: Vec<(usize, usize)>,
}

impl<T> Default for Work<T> {
    fn default() -> Self {
        Work { out_lanes: Vec::new(), in_lanes: Vec::new(), received: Vec::new(), pack_buffer: Vec::new() }
    }
}

impl<T: Pod> fmt::Debug for Exchange<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange")
            .field("name", &self.chan.name)
            .field("path", &self.path)
            .field("partners", &self.chan.partners)
            .field("symmetric_bytes", &self.symmetric_bytes())
            .finish_non_exhaustive()
    }
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Builds the exchange on `path` with its links settled (one transport for every link
    /// unless `path` is `Auto`), between `partners`.
    ///
    /// # Collective
    /// Every PE builds it with the same path and links.
    pub(super) fn collective_on(
        rt: &'rt Runtime,
        name: &str,
        path: Path,
        links: Links,
        partners: Partners,
    ) -> Result<Self> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': elements of zero size carry nothing to exchange"
            )));
        }
        let current = (links.same_node, links.other_node);
        let mut chan = Channel::collective_new(rt, name, partners)?;
        let transport = Self::collective_transport(&mut chan, current)?;
        Ok(Exchange {
            path,
            current,
            links,
            chan,
            transport,
            spare: Vec::new(),
            work: Work::default(),
            in_flight: InFlight::default(),
        })
    }

    /// The protocol of the transports `(same node, other node)` on `chan`.
    ///
    /// # Collective
    /// Every PE builds the same protocols (the links are agreed), whatever its partners:
    /// their construction is collective.
    fn collective_transport(
        chan: &mut Channel<'rt>,
        (same_node, other_node): Pair,
    ) -> Result<Box<dyn Protocol<'rt, T> + 'rt>> {
        let rt = chan.rt;
        let protocol_of = |transport: Transport| -> Result<Box<dyn Protocol<'rt, T> + 'rt>> {
            Ok(match transport {
                Transport::Put => Box::new(put::Put::collective_new(chan)?),
                Transport::Get => Box::new(get::Get::new()),
                #[cfg(feature = "baselines")]
                Transport::Buffered => Box::new(buffered::Buffered::collective_new(chan)),
                Transport::Mpi => Box::new(mpi::Mpi::collective_new(rt)?),
                Transport::MpiRma => Box::new(mpi_rma::MpiRma::collective_new(chan)?),
            })
        };
        Ok(if same_node == other_node {
            protocol_of(same_node)?
        } else {
            let part = |transport: Transport| -> Result<mixed::Part<'rt, T>> {
                Ok(match transport {
                    Transport::Mpi => mixed::Part::Mpi(mpi::Mpi::collective_new(rt)?),
                    other => mixed::Part::OneSided(protocol_of(other)?),
                })
            };
            let near = part(same_node)?;
            let far = part(other_node)?;
            Box::new(mixed::Mixed { near, far, started: None })
        })
    }

    /// The links this exchange follows: for a [`Path::OneSided`] or [`Path::Mpi`] exchange
    /// that path's transport for every link and size, for a [`Path::Auto`] one the runtime's
    /// (or those its builder was given), whose ranges of sizes it follows at each
    /// [`collective_reserve`](Self::collective_reserve).
    pub fn links(&self) -> &Links {
        &self.links
    }

    /// The transports of [`links`](Self::links) for the size of message last reserved
    /// ([`collective_reserve`](Self::collective_reserve)): one per class of link, no ranges.
    pub fn reserved_links(&self) -> Links {
        Links::new(self.current.0, self.current.1)
    }

    /// The transport messages to and from `pe` take, for the size of message last reserved.
    pub fn transport_to(&self, pe: usize) -> Transport {
        if self.chan.rt.same_node(pe) { self.current.0 } else { self.current.1 }
    }

    /// The path it was built on ([`Path::Auto`] where its builder was given links or a
    /// transport).
    pub fn path(&self) -> Path {
        self.path
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.chan.name
    }

    /// The runtime.
    pub fn runtime(&self) -> &'rt Runtime {
        self.chan.rt
    }

    /// Symmetric bytes this exchange holds on each PE (slots, signals, staging), for the
    /// links it takes and those it took before.
    pub fn symmetric_bytes(&self) -> usize {
        let spare: usize = self.spare.iter().map(|(_, t)| t.symmetric_bytes()).sum();
        self.chan.symmetric_bytes() + self.transport.symmetric_bytes() + spare
    }

    /// Makes room for messages of up to `max_message` elements each on the get and buffered
    /// paths (a symmetric buffer grown to the global maximum), for every message but those
    /// offered in place on the get path. The put and MPI paths need none.
    ///
    /// On an [`Path::Auto`] exchange whose links differ with the size of message
    /// ([`Links::by_size`]), the calls from now on take the transports of the largest message
    /// reserved on any PE: the transport of each class of partner measured fastest at that
    /// size. The size is agreed here, at a collective point, because both sides of a pair must
    /// take the same transport for a message, and a receiver knows only the room it gives, not
    /// the size its sender will send. Before a change of links it waits until the receivers of
    /// the last call's offers have taken them ([`wait_taken`](Self::wait_taken)); the
    /// transports of links left are kept for a return.
    ///
    /// # Collective
    /// Every PE must call it, each with its own `max_message`.
    ///
    /// # Errors
    /// On every PE: [`Error::Exchange`] with [`ExchangeProblem::PostedAcrossReserve`] when a
    /// receive is posted ([`post_receives`](Self::post_receives)) on some PE of an exchange
    /// whose links may change here: reserve before posting.
    pub fn collective_reserve(&mut self, max_message: usize) -> Result<()> {
        self.idle("collective_reserve")?;
        let varies = self.links.varies();
        let posted = varies && self.chan.posted.iter().any(Option::is_some);
        let mut agreed = [max_message as u64, u64::from(posted)];
        self.chan.rt.max_u64(&mut agreed)?;
        let largest = agreed[0] as usize;
        if agreed[1] != 0 {
            return Err(self.chan.refuse(ExchangeProblem::PostedAcrossReserve));
        }
        if varies {
            let at = self.links.for_bytes(largest.saturating_mul(std::mem::size_of::<T>()));
            let pair = (at.same_node, at.other_node);
            if pair != self.current {
                self.transport.settle(&mut self.chan)?;
                let next = match self.spare.iter().position(|(p, _)| *p == pair) {
                    Some(i) => self.spare.swap_remove(i).1,
                    None => Self::collective_transport(&mut self.chan, pair)?,
                };
                let left = std::mem::replace(&mut self.transport, next);
                self.spare.push((self.current, left));
                self.current = pair;
            }
        }
        self.transport.collective_reserve(&mut self.chan, largest)
    }

    /// Waits until the receivers of this PE's messages of the last call have taken them: after
    /// it, the regions offered ([`Offer`](crate::Offer)) may be written again. Returns at once
    /// on the paths other than the get path, whose calls return only once their messages may
    /// be overwritten at the source.
    ///
    /// # Errors
    /// [`Error::WaitTimeout`] when a receiver does not take its message.
    pub fn wait_taken(&mut self) -> Result<()> {
        self.idle("wait_taken")?;
        self.transport.settle(&mut self.chan)
    }

    /// For the tests of the MPI path's error handling: the `index`-th `MPI_Isend` from now on
    /// fails as if MPI had refused it (the call then cancels what it had posted and returns
    /// the error). Only with the `fault-injection` feature; no effect on the other paths.
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fn fail_mpi_isend(&mut self, index: usize) {
        self.transport.fail_isend(index);
    }
}
