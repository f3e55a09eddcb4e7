//! Send-receive between pairs of PEs: one operation, [`Exchange::call`], whose messages say
//! what differs, on five paths: one-sided offset swap (put), one-sided pull (get), the
//! buffered baseline of the 2013 SHMEM port of GROMACS, MPI two-sided as the reference, and
//! the offset swap over MPI-3 one-sided (a window on the symmetric heap).
//!
//! Every message a PE receives names its final place: a buffer out of a list of symmetric
//! arrays both sides pass (the coordinate array itself, received in place, or a scratch
//! buffer), an element offset, and the room there ([`Incoming`]). A message a PE sends is a
//! copy of a slice, elements that the call's packing function writes (straight into the
//! receiver's place where its memory is mapped), or a region of a symmetric array offered
//! where it lies ([`Outgoing`]). A call can also hand each incoming message to a function
//! where it lies instead of landing it ([`Call::consume`]).
//!
//! On the **put** path the receiver writes (buffer, offset, room) into the sender's
//! symmetric slot and raises a signal with its call number; the sender waits for it, checks
//! that its message fits, puts the data straight into the final place and raises a signal
//! with its own call number. The receiver's announcement of call `k + 1` is also its word
//! that call `k`'s data has been consumed, so one exchange costs at most one round trip of
//! synchronisation, with no flag resets and no barrier.
//!
//! On the **get** path the sender copies its message into its symmetric staging buffer (or
//! offers it where it lies) and pushes (offset, count) to the receiver with a signal; the
//! receiver gets the data into the final place, or reads it through the mapping of a
//! same-node sender, and signals that it is done, which the sender awaits before reusing
//! its staging buffer.
//!
//! The **buffered** path is the 2013 first attempt: the sender waits for a "consumed" flag,
//! puts into the receiver's scratch slot, raises a "posted" flag; the receiver copies from
//! scratch into the final place, resets "posted", and sets the sender's "consumed" flag. It
//! exists for the benchmarks, to show what the direct forms save.
//!
//! The **MPI** path uses `MPI_Sendrecv` for one message each way and `MPI_Isend`,
//! `MPI_Irecv` and waits for more, receiving straight into the same final places.
//!
//! The **MPI one-sided** path is the put path's protocol with every remote write an `MPI_Put`
//! or `MPI_Accumulate` into a window over the symmetric heap, flushed before the signal that
//! publishes it.
//!
//! All five give the same bytes in the same places, whatever kind of message each side
//! chose. Each transport is one file behind the [`Transport`] trait (`put.rs`, `get.rs`,
//! `buffered.rs`, `mpi.rs`, `mpi_rma.rs`), holding its own state; `channel.rs` holds what they share (the
//! partners' slots and signals, call numbers, the delivery signal's encoding), `call.rs` the
//! call's builder and what the transports see of it, `validate.rs` the checks made before
//! anything moves.

use std::fmt;
use std::ops::Range;

use bytemuck::Pod;

use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::SymArray;
use crate::links::{Links, SizedLinks};
pub use crate::path::ExchangePath;
use crate::runtime::Runtime;

mod buffered;
mod calibrate;
mod call;
mod channel;
mod delivery;
mod get;
mod mixed;
mod mpi;
mod mpi_rma;
mod partners;
mod put;
mod validate;

pub use call::Call;
use call::Job;
use channel::{Channel, Lane};
pub use mpi::collective_error_returning_world;
use partners::Partners;

/// A message this PE sends in a [`call`](Exchange::call). The kind says where its elements
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
    /// `count` elements that the call's packing function ([`Call::pack`]) writes. On the put
    /// path to a PE whose memory is mapped into this process (the same node), it writes
    /// straight into the receiver's final place, so the message is packed where it is
    /// needed, with no buffer between; on the get path into the staging buffer the receiver
    /// reads; elsewhere into a buffer that is then sent.
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
/// [`Exchange::wait_taken`] waits until it has taken it (the next call on the exchange
/// waits too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    to: usize,
    buffer: usize,
    range: Range<usize>,
}

impl Offer {
    /// Offers elements `range` of buffer `buffer` of the call to `to`.
    ///
    /// # Safety
    /// No PE writes `range` of this PE's copy of that buffer from the call that sends the
    /// offer until its receiver has taken it: until [`Exchange::wait_taken`], or the next
    /// call on the same exchange, has returned on this PE. (The exchange itself never writes
    /// it: a call that also receives into the offered region is refused.)
    pub unsafe fn new(to: usize, buffer: usize, range: Range<usize>) -> Offer {
        Offer { to, buffer, range }
    }
}

/// A message this PE receives in a [`call`](Exchange::call), and where it goes.
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

/// One transport's protocol for a whole call, once the call has been validated and its lanes
/// assigned: each implementation reads top to bottom in its own file and holds its own state;
/// what every path shares is the [`Channel`] it is handed.
trait Transport<'rt, T: Pod> {
    /// Sends every outgoing message of `job` and receives every incoming one
    /// (`job.received[i]` the count of message `i`), as [`Call::run`] describes.
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()>;

    /// Announces a receive posted ahead of its call ([`Exchange::post_receives`]), on the
    /// paths that announce.
    fn post(&mut self, _chan: &mut Channel<'rt>, _incoming: &Incoming, _lane: &Lane) -> Result<()> {
        Ok(())
    }

    /// Waits until the receivers of this PE's last messages are done with them at the source.
    fn settle(&mut self, _chan: &mut Channel<'rt>) -> Result<()> {
        Ok(())
    }

    /// Makes room for messages of up to `largest` elements (agreed by every PE), on the paths
    /// that stage them.
    ///
    /// # Collective
    /// Every PE calls it with the same `largest`.
    fn collective_reserve(&mut self, _chan: &mut Channel<'rt>, _largest: usize) -> Result<()> {
        Ok(())
    }

    /// Whether the path stages messages (`None`: it does not), and if so the elements per
    /// message it has room for (`Some(None)`: none reserved yet).
    fn reserved(&self) -> Option<Option<usize>> {
        None
    }

    /// Whether the path stages offered messages too (the others read them in place).
    fn stages_offers(&self) -> bool {
        false
    }

    /// Symmetric bytes the transport holds of its own.
    fn symmetric_bytes(&self) -> usize {
        0
    }

    /// Makes the MPI path's `index`-th `MPI_Isend` from now on fail (see
    /// [`Exchange::fail_mpi_isend`]).
    #[cfg(feature = "fault-injection")]
    fn fail_isend(&mut self, _index: usize) {}
}

/// A send-receive channel for elements of type `T`, on one of the [`ExchangePath`]s.
///
/// Exchanges are pairwise: only the PEs that exchange messages take part, and they need not
/// arrive together. Per pair and direction, the `k`-th send of one PE meets the `k`-th
/// receive of the other; within one call, the `l`-th message one PE sends another meets the
/// `l`-th message the other receives from it (at most [`LANES`] per pair and call).
pub struct Exchange<'rt, T: Pod> {
    path: ExchangePath,
    /// The path to each class of partner (one for every partner unless `path` is `Auto`).
    links: Links,
    /// The links per size of message an `Auto` exchange follows at each reservation.
    sized: SizedLinks,
    /// What every path shares: partners, slots, signals, call numbers.
    chan: Channel<'rt>,
    /// The path's own protocol and state.
    transport: Box<dyn Transport<'rt, T> + 'rt>,
    /// The transports of links taken before and left at a reservation, kept for a return.
    spare: Vec<(Links, Box<dyn Transport<'rt, T> + 'rt>)>,
    /// Per-call bookkeeping, kept between calls so that a call allocates nothing.
    work: Work<T>,
}

/// What a call needs beside its messages, kept between calls.
struct Work<T> {
    out_lanes: Vec<Lane>,
    in_lanes: Vec<Lane>,
    /// The count of each incoming message of the last call.
    received: Vec<usize>,
    /// Where packed messages are written when they cannot go straight to their receiver.
    pack_buffer: Vec<T>,
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
    /// Creates a channel on `path` between any PEs: its slots and signals grow with the PE
    /// count (about 512 bytes of symmetric memory per PE). An exchange whose partners are
    /// known, as a halo pulse's are, should name them:
    /// [`collective_with_partners`](Self::collective_with_partners).
    ///
    /// # Collective
    /// Every PE must create it, with the same path, in the same order.
    pub fn collective_new(rt: &'rt Runtime, name: &str, path: ExchangePath) -> Result<Self> {
        let partners = Partners { me: rt.my_pe(), listed: None, capacity: rt.n_pes() };
        Self::collective_build(rt, name, path, None, partners)
    }

    /// Builds the exchange on `path`, or for `Auto` on `links` where given, else on the
    /// runtime's links.
    fn collective_build(
        rt: &'rt Runtime,
        name: &str,
        path: ExchangePath,
        links: Option<SizedLinks>,
        partners: Partners,
    ) -> Result<Self> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidArgument(format!(
                "exchange '{name}': elements of zero size carry nothing to exchange"
            )));
        }
        let (path, sized) = match (path, links) {
            // Links given that agree, and do not change with the size, are that one path.
            (ExchangePath::Auto, Some(sized)) => {
                rt.collective_agree_links(&sized, &format!("exchange '{name}'"))?;
                let one = sized.links.is_uniform() && !sized.varies();
                (if one { sized.links.same_node } else { ExchangePath::Auto }, sized)
            }
            (ExchangePath::Auto, None) => (ExchangePath::Auto, rt.collective_sized_links()?),
            (path, _) => (path, Links::uniform(path).into()),
        };
        let links = sized.links;
        let mut chan = Channel::collective_new(rt, name, partners)?;
        let transport = Self::collective_transport(&mut chan, links)?;
        Ok(Exchange { path, links, sized, chan, transport, spare: Vec::new(), work: Work::default() })
    }

    /// The transport of `links` on `chan`.
    ///
    /// # Collective
    /// Every PE builds the same transports (the links are agreed), whatever its partners:
    /// their construction is collective.
    fn collective_transport(
        chan: &mut Channel<'rt>,
        links: Links,
    ) -> Result<Box<dyn Transport<'rt, T> + 'rt>> {
        let rt = chan.rt;
        let mut transport_of = |path: ExchangePath| -> Result<Box<dyn Transport<'rt, T> + 'rt>> {
            Ok(match path {
                ExchangePath::Put => Box::new(put::Put::collective_new(chan)?),
                ExchangePath::Get => Box::new(get::Get::new()),
                ExchangePath::Buffered => Box::new(buffered::Buffered::collective_new(chan)),
                ExchangePath::Mpi => Box::new(mpi::Mpi::collective_new(rt)?),
                ExchangePath::MpiRma => Box::new(mpi_rma::MpiRma::collective_new(chan)?),
                ExchangePath::Auto => unreachable!("links name concrete paths"),
            })
        };
        Ok(if links.is_uniform() {
            transport_of(links.same_node)?
        } else {
            let mut part = |path: ExchangePath| -> Result<mixed::Part<'rt, T>> {
                Ok(match path {
                    ExchangePath::Mpi => mixed::Part::Mpi(mpi::Mpi::collective_new(rt)?),
                    other => mixed::Part::OneSided(transport_of(other)?),
                })
            };
            let near = part(links.same_node)?;
            let far = part(links.other_node)?;
            Box::new(mixed::Mixed { near, far })
        })
    }

    /// The path to each class of partner: the one path given at creation for both, or for an
    /// [`ExchangePath::Auto`] exchange the runtime's [`Links`] (or those given), for the size
    /// of message last reserved ([`collective_reserve`](Self::collective_reserve)).
    pub fn links(&self) -> Links {
        self.links
    }

    /// The links per size of message this exchange follows at each
    /// [`collective_reserve`](Self::collective_reserve) (for a path given at creation, that
    /// path at every size).
    pub fn sized_links(&self) -> &SizedLinks {
        &self.sized
    }

    /// The path messages to and from `pe` take.
    pub fn path_to(&self, pe: usize) -> ExchangePath {
        self.links.path(self.chan.rt.same_node(pe))
    }

    /// The path.
    pub fn path(&self) -> ExchangePath {
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
    /// On an [`ExchangePath::Auto`] exchange whose links differ with the size of message
    /// ([`sized_links`](Self::sized_links)), the calls from now on take the links of the
    /// largest message reserved on any PE: the transport of each class of partner measured
    /// fastest at that size. Before a change of links it waits until the receivers of the
    /// last call's offers have taken them ([`wait_taken`](Self::wait_taken)); the transports
    /// of links left are kept for a return.
    ///
    /// # Collective
    /// Every PE must call it, each with its own `max_message`.
    ///
    /// # Errors
    /// On every PE: [`Error::Exchange`] with [`ExchangeProblem::PostedAcrossReserve`] when a
    /// receive is posted ([`post_receives`](Self::post_receives)) on some PE of an exchange
    /// whose links may change here: reserve before posting.
    pub fn collective_reserve(&mut self, max_message: usize) -> Result<()> {
        let varies = self.sized.varies();
        let posted = varies && self.chan.posted.iter().any(Option::is_some);
        let mut agreed = [max_message as u64, u64::from(posted)];
        self.chan.rt.max_u64(&mut agreed)?;
        let largest = agreed[0] as usize;
        if agreed[1] != 0 {
            return Err(self.chan.refuse(ExchangeProblem::PostedAcrossReserve));
        }
        if varies {
            let links = self.sized.for_bytes(largest.saturating_mul(std::mem::size_of::<T>()));
            if links != self.links {
                self.transport.settle(&mut self.chan)?;
                let next = match self.spare.iter().position(|(l, _)| *l == links) {
                    Some(i) => self.spare.swap_remove(i).1,
                    None => Self::collective_transport(&mut self.chan, links)?,
                };
                let left = std::mem::replace(&mut self.transport, next);
                self.spare.push((self.links, left));
                self.links = links;
            }
        }
        self.transport.collective_reserve(&mut self.chan, largest)
    }

    /// Starts a call whose messages land in, or are offered from, `buffers`: a list of
    /// symmetric arrays that every PE of a pair passes in the same order. Name the messages
    /// with [`send`](Call::send) and [`receive`](Call::receive), and run it with
    /// [`run`](Call::run):
    ///
    /// ```no_run
    /// # fn main() -> onesided::Result<()> {
    /// use onesided::{Exchange, ExchangePath, Incoming, Outgoing, Runtime, SymArray};
    ///
    /// let rt = Runtime::init()?;
    /// let (me, n) = (rt.my_pe(), rt.n_pes());
    /// let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    /// let inbox = SymArray::<u64>::collective_alloc(&rt, "inbox", 8)?;
    /// let mut ring = Exchange::collective_with_partners(&rt, "ring", ExchangePath::Put, &[left, right])?;
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
    /// that [announce](ExchangePath::announces) use it; the others accept posted receives and
    /// ignore them.
    ///
    /// From the moment of posting, the senders may write into the announced regions.
    ///
    /// # Errors
    /// As [`Call::run`] for the incoming messages; [`ExchangeProblem::AlreadyPosted`] when a
    /// receive from the same PE and lane is posted already.
    pub fn post_receives(&mut self, buffers: &[&SymArray<'rt, T>], incoming: &[Incoming]) -> Result<()> {
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

    /// Waits until the receivers of this PE's messages of the last call have taken them:
    /// after it, the regions offered ([`Offer`]) may be written again. Returns at once on the
    /// paths other than the get path, whose calls return only once their messages may be
    /// overwritten at the source.
    ///
    /// # Errors
    /// [`Error::WaitTimeout`] when a receiver does not take its message.
    pub fn wait_taken(&mut self) -> Result<()> {
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
