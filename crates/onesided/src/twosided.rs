//! MPI two-sided on plain bytes, for the MPI paths of the crates built on this one: a
//! communicator whose errors come back as values ([`Comm`]), all-to-alls and neighbourhood
//! all-to-alls whose counts and offsets are checked against the buffers, matched probes
//! ([`Probed`]), non-blocking sends ([`Sends`]) and a non-blocking minimum ([`MinVote`]).
//! Every call that can block on a peer runs under the [watchdog](crate::watchdog), and every
//! return code is checked.

use std::ffi::c_int;
use std::mem::MaybeUninit;

use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Color, Communicator, SimpleCommunicator};

use crate::error::{Error, Result};
use crate::mpi_raw::{
    any_tag, bytes_type, check, count_of, min_op, status_ignore, statuses_ignore, u64_type,
};
use crate::runtime::Runtime;
use crate::watchdog::watch;

/// The signature `MPI_Alltoall` and `MPI_Neighbor_alltoall` share.
type EachFn = unsafe extern "C" fn(
    *const std::ffi::c_void,
    c_int,
    ffi::MPI_Datatype,
    *mut std::ffi::c_void,
    c_int,
    ffi::MPI_Datatype,
    ffi::MPI_Comm,
) -> c_int;

/// The signature `MPI_Alltoallv` and `MPI_Neighbor_alltoallv` share.
type EachVFn = unsafe extern "C" fn(
    *const std::ffi::c_void,
    *const c_int,
    *const c_int,
    ffi::MPI_Datatype,
    *mut std::ffi::c_void,
    *const c_int,
    *const c_int,
    ffi::MPI_Datatype,
    ffi::MPI_Comm,
) -> c_int;

/// A communicator for MPI paths: its errors return codes instead of ending the job, and its
/// messages never meet another path's.
pub struct Comm {
    comm: SimpleCommunicator,
    /// On a distributed graph: its in- and out-degree.
    degrees: Option<(usize, usize)>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm").field("rank", &self.rank()).field("size", &self.size()).finish_non_exhaustive()
    }
}

impl Comm {
    /// A duplicate of the world communicator whose errors return codes: ranks are PEs.
    ///
    /// # Collective
    /// `MPI_Comm_dup` over the world: every PE calls it, in the same order.
    ///
    /// # Errors
    /// [`Error::Mpi`] when MPI refuses the error handler.
    pub fn collective_world(rt: &Runtime) -> Result<Comm> {
        let comm = watch("MPI_Comm_dup", None, || rt.world().duplicate());
        // SAFETY: the communicator is valid; MPI_ERRORS_RETURN is a predefined handler.
        check("MPI_Comm_set_errhandler", unsafe {
            ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN)
        })?;
        Ok(Comm { comm, degrees: None })
    }

    /// The members of this communicator that pass `Some(key)`, ranked by key, as a
    /// communicator of their own (`None` on the others).
    ///
    /// # Collective
    /// Every member calls it.
    pub fn collective_split(&self, key: Option<usize>) -> Option<Comm> {
        let color = if key.is_some() { Color::with_value(1) } else { Color::undefined() };
        let part = watch("MPI_Comm_split", None, || {
            self.comm.split_by_color_with_key(color, key.unwrap_or(0) as c_int)
        });
        part.map(|comm| Comm { comm, degrees: None })
    }

    /// A distributed graph over this communicator's ranks whose in-neighbours are `sources`
    /// and out-neighbours `destinations` (ranks, in that order, not reordered), for the
    /// neighbourhood all-to-alls.
    ///
    /// # Collective
    /// Every member calls it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside the communicator; [`Error::Mpi`].
    pub fn collective_graph(&self, sources: &[usize], destinations: &[usize]) -> Result<Comm> {
        let size = self.size();
        if let Some(&stray) = sources.iter().chain(destinations).find(|&&r| r >= size) {
            return Err(Error::InvalidArgument(format!(
                "a neighbour graph names rank {stray} of a communicator of {size}"
            )));
        }
        let from: Vec<c_int> = sources.iter().map(|&p| p as c_int).collect();
        let to: Vec<c_int> = destinations.iter().map(|&p| p as c_int).collect();
        let mut graph = MaybeUninit::uninit();
        // SAFETY: the lists hold their lengths' ranks; MPI_UNWEIGHTED and MPI_INFO_NULL are
        // rsmpi's constants; no reordering, so ranks stay as given; graph is an out-pointer.
        let code = watch("MPI_Dist_graph_create_adjacent", None, || unsafe {
            ffi::MPI_Dist_graph_create_adjacent(
                self.comm.as_raw(),
                from.len() as c_int,
                from.as_ptr(),
                ffi::RSMPI_UNWEIGHTED(),
                to.len() as c_int,
                to.as_ptr(),
                ffi::RSMPI_UNWEIGHTED(),
                ffi::RSMPI_INFO_NULL,
                0,
                graph.as_mut_ptr(),
            )
        });
        check("MPI_Dist_graph_create_adjacent", code)?;
        // SAFETY: a live intra-communicator made just above, used only through the wrapper,
        // which frees it when dropped.
        let comm = unsafe { SimpleCommunicator::from_raw(graph.assume_init()) };
        Ok(Comm { comm, degrees: Some((sources.len(), destinations.len())) })
    }

    /// This PE's rank.
    pub fn rank(&self) -> usize {
        self.comm.rank() as usize
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.comm.size() as usize
    }

    /// The communicator, for rsmpi's own calls.
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// One `u64` from every rank to every rank: `send[r]` to rank `r`, `recv[s]` from `s`.
    ///
    /// # Collective
    /// Every rank calls it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a slice is not one value per rank; [`Error::Mpi`].
    pub fn alltoall_u64(&self, send: &[u64], recv: &mut [u64]) -> Result<()> {
        let n = self.size();
        if send.len() != n || recv.len() != n {
            return Err(Error::InvalidArgument(format!(
                "alltoall_u64 of {} and {} values over {n} ranks: one per rank",
                send.len(),
                recv.len()
            )));
        }
        // SAFETY: both buffers hold one u64 per rank, checked above; every rank calls it.
        unsafe { self.one_u64_each(("MPI_Alltoall", ffi::MPI_Alltoall), send, recv) }
    }

    /// Bytes from every rank to every rank: `send_counts[r]` bytes at `send_offsets[r]` of
    /// `send` to rank `r`, `recv_counts[s]` from rank `s` at `recv_offsets[s]` of `recv`. A
    /// side that moves nothing may be an empty slice.
    ///
    /// # Collective
    /// Every rank calls it, the counts matching pairwise.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a list that is not one per rank or a range outside its
    /// buffer; [`Error::Mpi`].
    pub fn alltoallv(&self, send: Bytes<'_>, recv: BytesMut<'_>) -> Result<()> {
        let n = self.size();
        let (sc, sd) = send.counts(n, "send")?;
        let (rc, rd) = recv.counts(n, "receive")?;
        // SAFETY: every counted range lies inside its slice (checked by counts); every rank
        // calls it with matching counts.
        unsafe {
            self.bytes_each(("MPI_Alltoallv", ffi::MPI_Alltoallv), (&send, &sc, &sd), (&recv, &rc, &rd))
        }
    }

    /// On a graph ([`collective_graph`](Self::collective_graph)): one `u64` to each
    /// out-neighbour, one from each in-neighbour, in the graph's orders.
    ///
    /// # Collective
    /// Every rank of the graph calls it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on a communicator that is not a graph, or slices that are
    /// not one value per neighbour; [`Error::Mpi`].
    pub fn neighbor_alltoall_u64(&self, send: &[u64], recv: &mut [u64]) -> Result<()> {
        let (ins, outs) = self.degrees("neighbor_alltoall_u64")?;
        if send.len() != outs || recv.len() != ins {
            return Err(Error::InvalidArgument(format!(
                "neighbor_alltoall_u64 of {} and {} values on a graph of {outs} out- and {ins} \
                 in-neighbours: one per neighbour",
                send.len(),
                recv.len()
            )));
        }
        // SAFETY: one u64 per out- and per in-neighbour, checked above; every rank calls it
        // on the same graph.
        unsafe { self.one_u64_each(("MPI_Neighbor_alltoall", ffi::MPI_Neighbor_alltoall), send, recv) }
    }

    /// On a graph: bytes to each out-neighbour and from each in-neighbour, as
    /// [`alltoallv`](Self::alltoallv) with one count and offset per neighbour.
    ///
    /// # Collective
    /// Every rank of the graph calls it, the counts matching pairwise.
    ///
    /// # Errors
    /// As [`neighbor_alltoall_u64`](Self::neighbor_alltoall_u64), and for a range outside
    /// its buffer.
    pub fn neighbor_alltoallv(&self, send: Bytes<'_>, recv: BytesMut<'_>) -> Result<()> {
        let (ins, outs) = self.degrees("neighbor_alltoallv")?;
        let (sc, sd) = send.counts(outs, "send")?;
        let (rc, rd) = recv.counts(ins, "receive")?;
        let call: (_, EachVFn) = ("MPI_Neighbor_alltoallv", ffi::MPI_Neighbor_alltoallv);
        // SAFETY: as in alltoallv, one count and offset per neighbour.
        unsafe { self.bytes_each(call, (&send, &sc, &sd), (&recv, &rc, &rd)) }
    }

    /// `call`, `MPI_Alltoall` or `MPI_Neighbor_alltoall`, of one `u64` each way per rank or
    /// neighbour.
    ///
    /// # Safety
    /// `send` and `recv` hold one value per rank (or per out- and in-neighbour), and every
    /// rank of the communicator makes the same call.
    unsafe fn one_u64_each(
        &self,
        (name, call): (&'static str, EachFn),
        send: &[u64],
        recv: &mut [u64],
    ) -> Result<()> {
        // SAFETY: the caller's promise; the pointers come from live slices.
        let code = watch(name, None, || unsafe {
            call(
                send.as_ptr().cast(),
                1,
                u64_type(),
                recv.as_mut_ptr().cast(),
                1,
                u64_type(),
                self.comm.as_raw(),
            )
        });
        check(name, code)
    }

    /// `call`, `MPI_Alltoallv` or `MPI_Neighbor_alltoallv`, of bytes by counts and offsets.
    ///
    /// # Safety
    /// Every counted range lies inside its slice, and every rank of the communicator makes
    /// the same call with matching counts.
    unsafe fn bytes_each(
        &self,
        (name, call): (&'static str, EachVFn),
        (send, sc, sd): (&Bytes<'_>, &[c_int], &[c_int]),
        (recv, rc, rd): (&BytesMut<'_>, &[c_int], &[c_int]),
    ) -> Result<()> {
        let mut empty = [0u8; 2];
        let (send_at, recv_at) = apart(send, recv, &mut empty);
        // SAFETY: the caller's promise for the ranges; the two slices do not overlap (Rust's
        // borrows), or a side that moves nothing points at a byte of `empty` instead.
        let code = watch(name, None, || unsafe {
            let comm = self.comm.as_raw();
            call(
                send_at.cast(),
                sc.as_ptr(),
                sd.as_ptr(),
                bytes_type(),
                recv_at.cast(),
                rc.as_ptr(),
                rd.as_ptr(),
                bytes_type(),
                comm,
            )
        });
        check(name, code)
    }

    /// The next message from rank `from`, matched (`MPI_Mprobe`): its tag and size, to be
    /// received by [`Probed::receive`].
    ///
    /// # Errors
    /// [`Error::Mpi`].
    pub fn probe(&self, from: usize) -> Result<Probed> {
        let (mut message, mut status) = (MaybeUninit::uninit(), MaybeUninit::<ffi::MPI_Status>::uninit());
        // SAFETY: valid out-pointers; the matched message is received by its handle alone.
        let code = watch("MPI_Mprobe", Some(from), || unsafe {
            ffi::MPI_Mprobe(
                from as c_int,
                any_tag(),
                self.comm.as_raw(),
                message.as_mut_ptr(),
                status.as_mut_ptr(),
            )
        });
        check("MPI_Mprobe", code)?;
        let mut bytes = 0;
        // SAFETY: the status was filled by the successful probe.
        check("MPI_Get_count", unsafe { ffi::MPI_Get_count(status.as_ptr(), bytes_type(), &mut bytes) })?;
        // SAFETY: both filled by the successful probe.
        let (message, status) = unsafe { (message.assume_init(), status.assume_init()) };
        Ok(Probed { message, tag: status.MPI_TAG, bytes: bytes.max(0) as usize })
    }

    fn degrees(&self, what: &str) -> Result<(usize, usize)> {
        self.degrees.ok_or_else(|| {
            Error::InvalidArgument(format!("{what} needs a graph communicator (Comm::collective_graph)"))
        })
    }
}

/// Bytes to send in an all-to-all: the buffer and, per rank or neighbour, how many bytes at
/// which offset.
#[derive(Clone, Copy, Debug)]
pub struct Bytes<'a> {
    /// The buffer (empty where nothing is sent).
    pub data: &'a [u8],
    /// Bytes per rank or neighbour.
    pub counts: &'a [usize],
    /// Where each rank's or neighbour's bytes start.
    pub offsets: &'a [usize],
}

/// Where the bytes of an all-to-all are received: as [`Bytes`], writable.
#[derive(Debug)]
pub struct BytesMut<'a> {
    /// The buffer (empty where nothing is received).
    pub data: &'a mut [u8],
    /// Bytes per rank or neighbour.
    pub counts: &'a [usize],
    /// Where each rank's or neighbour's bytes go.
    pub offsets: &'a [usize],
}

/// Counts and offsets as MPI's, checked to be `n` and inside a buffer of `len` bytes.
fn checked_counts(
    len: usize,
    counts: &[usize],
    offsets: &[usize],
    n: usize,
    side: &str,
) -> Result<(Vec<c_int>, Vec<c_int>)> {
    if counts.len() != n || offsets.len() != n {
        return Err(Error::InvalidArgument(format!(
            "{side} counts and offsets of {} and {} entries for {n} ranks or neighbours",
            counts.len(),
            offsets.len()
        )));
    }
    for (i, (&c, &o)) in counts.iter().zip(offsets).enumerate() {
        if c > 0 && o.checked_add(c).is_none_or(|end| end > len) {
            return Err(Error::InvalidArgument(format!(
                "{side} range {o}..{} of entry {i} lies outside its buffer of {len} bytes",
                o.saturating_add(c)
            )));
        }
    }
    let ints = |v: &[usize]| v.iter().map(|&c| count_of(c)).collect::<Result<Vec<c_int>>>();
    Ok((ints(counts)?, ints(offsets)?))
}

impl Bytes<'_> {
    fn counts(&self, n: usize, side: &str) -> Result<(Vec<c_int>, Vec<c_int>)> {
        checked_counts(self.data.len(), self.counts, self.offsets, n, side)
    }

    fn moves_nothing(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }
}

impl BytesMut<'_> {
    fn counts(&self, n: usize, side: &str) -> Result<(Vec<c_int>, Vec<c_int>)> {
        checked_counts(self.data.len(), self.counts, self.offsets, n, side)
    }

    fn moves_nothing(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }
}

/// The send and receive addresses of a vector all-to-all, a side that moves nothing pointed
/// at a byte of `empty`: MPI wants a valid address even where no byte moves.
fn apart(send: &Bytes<'_>, recv: &BytesMut<'_>, empty: &mut [u8; 2]) -> (*const u8, *mut u8) {
    let [no_send, no_recv] = empty;
    let send_at = if send.moves_nothing() { no_send as *const u8 } else { send.data.as_ptr() };
    let recv_at = if recv.moves_nothing() { no_recv as *mut u8 } else { recv.data.as_ptr().cast_mut() };
    (send_at, recv_at)
}

/// A message matched by [`Comm::probe`], not yet received.
#[derive(Debug)]
#[must_use = "a probed message stays with MPI until it is received"]
pub struct Probed {
    message: ffi::MPI_Message,
    /// Its tag.
    pub tag: i32,
    /// Its size in bytes.
    pub bytes: usize,
}

impl Probed {
    /// Receives the message into `into`, which holds at least its bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `into` is smaller than the message (which stays
    /// unreceived); [`Error::Mpi`].
    pub fn receive(self, into: &mut [u8]) -> Result<()> {
        if into.len() < self.bytes {
            return Err(Error::InvalidArgument(format!(
                "a message of {} bytes into room for {}",
                self.bytes,
                into.len()
            )));
        }
        let count = count_of(self.bytes)?;
        let mut message = self.message;
        // SAFETY: `into` holds the message's bytes and is borrowed mutably for the call; the
        // message was matched by probe and is received once (self is consumed).
        let code = watch("MPI_Mrecv", None, || unsafe {
            ffi::MPI_Mrecv(into.as_mut_ptr().cast(), count, bytes_type(), &mut message, status_ignore())
        });
        check("MPI_Mrecv", code)
    }

    /// Receives the message and drops it: so that none is left behind where it is refused.
    ///
    /// # Errors
    /// [`Error::Mpi`].
    pub fn discard(self) -> Result<()> {
        let mut scratch = vec![0u8; self.bytes];
        self.receive(&mut scratch)
    }
}

/// Non-blocking sends, completed together by [`waitall`](Self::waitall) (or when dropped).
#[derive(Debug, Default)]
pub struct Sends {
    requests: Vec<ffi::MPI_Request>,
}

impl Sends {
    /// No sends yet.
    pub fn new() -> Sends {
        Sends::default()
    }

    /// Starts sending `bytes` bytes from `data` to rank `to` of `comm` under `tag`.
    ///
    /// # Safety
    /// `data` is valid for `bytes` bytes of reads, and nothing writes them until
    /// [`waitall`](Self::waitall) returns or these sends are dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more bytes than one message counts; [`Error::Mpi`].
    pub unsafe fn isend(
        &mut self,
        comm: &Comm,
        data: *const u8,
        bytes: usize,
        to: usize,
        tag: i32,
    ) -> Result<()> {
        let count = count_of(bytes)?;
        let mut request = MaybeUninit::uninit();
        // SAFETY: `data` holds `bytes` bytes that stay untouched until the wait (the caller's
        // promise); the request is a valid out-pointer.
        let code = unsafe {
            ffi::MPI_Isend(
                data.cast(),
                count,
                bytes_type(),
                to as c_int,
                tag,
                comm.comm.as_raw(),
                request.as_mut_ptr(),
            )
        };
        check("MPI_Isend", code)?;
        // SAFETY: initialised by the successful call.
        self.requests.push(unsafe { request.assume_init() });
        Ok(())
    }

    /// Completes every send started.
    ///
    /// # Errors
    /// [`Error::Mpi`]; the sends are completed or released all the same.
    pub fn waitall(&mut self) -> Result<()> {
        if self.requests.is_empty() {
            return Ok(());
        }
        let requests = &mut self.requests;
        // SAFETY: every request was started by isend; statuses are ignored.
        let code = watch("MPI_Waitall", None, || unsafe {
            ffi::MPI_Waitall(requests.len() as c_int, requests.as_mut_ptr(), statuses_ignore())
        });
        requests.clear();
        check("MPI_Waitall", code)
    }
}

impl Drop for Sends {
    fn drop(&mut self) {
        // MPI may still read the buffers of sends not waited for.
        let _ = self.waitall();
    }
}

/// The minimum of one `u64` over a communicator's ranks, started ([`start`](Self::start))
/// and completed ([`wait`](Self::wait)) apart, so that it travels while a PE works.
#[derive(Debug)]
pub struct MinVote {
    /// This rank's value and the outcome, where MPI reads and writes them until the wait.
    values: Box<[u64; 2]>,
    request: Option<ffi::MPI_Request>,
}

impl Default for MinVote {
    fn default() -> Self {
        MinVote { values: Box::new([u64::MAX; 2]), request: None }
    }
}

impl MinVote {
    /// No vote under way.
    pub fn new() -> MinVote {
        MinVote::default()
    }

    /// Whether a vote has been started and not yet waited for.
    pub fn started(&self) -> bool {
        self.request.is_some()
    }

    /// Starts the minimum of every rank's `value` over `comm` (completing a vote still under
    /// way first).
    ///
    /// # Collective
    /// Every rank of `comm` starts it, once per vote, and waits for it.
    ///
    /// # Errors
    /// [`Error::Mpi`].
    pub fn start(&mut self, comm: &Comm, value: u64) -> Result<()> {
        self.wait()?;
        self.values[0] = value;
        let (send, receive) = self.values.split_at_mut(1);
        let mut request = MaybeUninit::uninit();
        // SAFETY: one u64 each way in the boxed pair, which stays in place and untouched until
        // the wait (the box is this vote's, and wait, or drop, precedes any other use).
        let code = unsafe {
            ffi::MPI_Iallreduce(
                send.as_ptr().cast(),
                receive.as_mut_ptr().cast(),
                1,
                u64_type(),
                min_op(),
                comm.comm.as_raw(),
                request.as_mut_ptr(),
            )
        };
        check("MPI_Iallreduce", code)?;
        // SAFETY: initialised by the successful call.
        self.request = Some(unsafe { request.assume_init() });
        Ok(())
    }

    /// Completes the vote under way: the minimum, or `None` when none was started.
    ///
    /// # Errors
    /// [`Error::Mpi`].
    pub fn wait(&mut self) -> Result<Option<u64>> {
        let Some(mut request) = self.request.take() else { return Ok(None) };
        // SAFETY: a request of start; the status is ignored.
        let code = watch("MPI_Wait", None, || unsafe { ffi::MPI_Wait(&mut request, status_ignore()) });
        check("MPI_Wait", code)?;
        Ok(Some(self.values[1]))
    }
}

impl Drop for MinVote {
    fn drop(&mut self) {
        // MPI may still write the boxed pair of a vote not waited for.
        let _ = self.wait();
    }
}
