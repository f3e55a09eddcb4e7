//! The MPI two-sided reference path: `MPI_Sendrecv` for one message each way, `MPI_Irecv` /
//! `MPI_Isend` / `MPI_Waitall` otherwise, on a duplicate of the world communicator whose
//! error handler returns codes ([`Comm`], as the MD crates' MPI paths use it), so that a
//! message larger than the posted room is an error rather than the end of the job. Every
//! request an error leaves posted is cancelled and completed before the error returns: no
//! receive outlives its call.
//!
//! Messages travel as bytes (`MPI_UINT8_T`), so any `Pod` element type works without an MPI
//! datatype of its own, and receives land straight in the final place in symmetric memory
//! through raw pointers.

use std::ffi::c_int;
use std::mem::{MaybeUninit, size_of};

use bytemuck::Pod;
use mpi::ffi;
use mpi::raw::AsRaw;

use super::channel::Channel;
use super::job::Job;
use super::message::{Incoming, LANES};
use super::protocol::Protocol;
use crate::error::{Error, Result};
use crate::mpi_raw::{bytes_type, request_null, status_ignore};
use crate::runtime::Runtime;
use crate::twosided::Comm;

/// The MPI transport: a communicator of its own.
pub(super) struct Mpi {
    channel: MpiChannel,
}

impl Mpi {
    /// # Collective
    /// `MPI_Comm_dup` over the world.
    pub(super) fn collective_new(rt: &Runtime) -> Result<Self> {
        Ok(Mpi { channel: MpiChannel::collective_new(rt)? })
    }
}

impl<'rt, T: Pod> Protocol<'rt, T> for Mpi {
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        self.prepare(chan, job)?;
        self.channel.exchange(job).map_err(|failure| failure.into_error(chan))?;
        consume_all(job);
        Ok(())
    }

    /// Posts every receive and send: the messages travel while the caller computes, as far
    /// as MPI progresses them without a call (eager sizes, or a progress thread).
    fn start(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<bool> {
        self.post_call(chan, job)?;
        Ok(true)
    }

    fn finish(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        self.complete_call(chan, job)
    }

    fn abandon(&mut self) {
        self.abandon_call();
    }

    #[cfg(feature = "fault-injection")]
    fn fail_isend(&mut self, index: usize) {
        self.channel.fail_isend = Some(self.channel.isends + index);
    }
}

impl Mpi {
    /// Takes the posted receives, stages the packed messages and sets the tags of `job`.
    fn prepare<'rt, T: Pod>(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        // Only the offset swap announces; the others just take the posted receives.
        for (inc, lane) in job.incoming.iter().zip(job.in_lanes) {
            chan.consume_posted(inc, lane)?;
        }
        job.stage_packed();
        // The lane is the tag, so the forward and backward messages of a pair stay apart.
        let channel = &mut self.channel;
        channel.out_tags.clear();
        channel.out_tags.extend(job.out_lanes.iter().map(|l| (l.remote % LANES) as c_int));
        channel.in_tags.clear();
        channel.in_tags.extend(job.in_lanes.iter().map(|l| (l.local % LANES) as c_int));
        Ok(())
    }

    /// Posts every receive and send of `job` and returns, so that another transport can run
    /// its part of a call meanwhile ([`super::mixed`]), or the caller compute
    /// ([`Call::start`](super::Call::start)); [`complete_call`](Self::complete_call) completes
    /// them, or [`abandon_call`](Self::abandon_call) cancels them. `job` must stay as it is until then.
    pub(super) fn post_call<'rt, T: Pod>(
        &mut self,
        chan: &mut Channel<'rt>,
        job: &mut Job<'_, 'rt, T>,
    ) -> Result<()> {
        self.prepare(chan, job)?;
        self.channel.post(job).map_err(|failure| failure.into_error(chan))
    }

    /// Completes what [`post_call`](Self::post_call) posted for the same `job`: the counts, then
    /// the call's consuming function.
    pub(super) fn complete_call<'rt, T: Pod>(
        &mut self,
        chan: &mut Channel<'rt>,
        job: &mut Job<'_, 'rt, T>,
    ) -> Result<()> {
        self.channel.complete(job).map_err(|failure| failure.into_error(chan))?;
        consume_all(job);
        Ok(())
    }

    /// Cancels and completes what [`post_call`](Self::post_call) posted, for a call that failed
    /// elsewhere: no receive outlives it.
    pub(super) fn abandon_call(&mut self) {
        release(&mut self.channel.requests);
    }
}

/// Hands every received message to the call's consuming function, in place.
fn consume_all<T: Pod>(job: &mut Job<'_, '_, T>) {
    for i in 0..job.incoming.len() {
        let count = job.received[i];
        job.consume_in_place(i, count);
    }
}

/// A communicator of the same members as the world, private to one exchange.
struct MpiChannel {
    comm: Comm,
    /// Fault injection for the tests of the error paths: the `MPI_Isend` with this index
    /// (counted over the channel's life) reports failure without being started.
    fail_isend: Option<usize>,
    isends: usize,
    /// Tags, requests and statuses of the last exchange, kept so that an exchange allocates
    /// nothing.
    out_tags: Vec<c_int>,
    in_tags: Vec<c_int>,
    requests: Vec<ffi::MPI_Request>,
    statuses: Vec<MaybeUninit<ffi::MPI_Status>>,
}

/// Why an MPI exchange failed.
#[derive(Debug)]
enum MpiFailure {
    /// A message from `from` did not fit `room` elements.
    Truncated { from: usize, room: usize },
    /// Another MPI error.
    Other(Error),
}

impl MpiFailure {
    /// The exchange's error for it.
    fn into_error(self, chan: &Channel<'_>) -> Error {
        match self {
            MpiFailure::Truncated { from, room } => chan.too_large(from, chan.rt.my_pe(), None, room),
            MpiFailure::Other(e) => e,
        }
    }
}

/// Where incoming message `inc` lands: its offset in its buffer (validation checked
/// `offset + room` against the buffer).
fn place<T: Pod>(buffers: &[&crate::heap::SymArray<'_, T>], inc: &Incoming) -> *mut std::ffi::c_void {
    buffers[inc.buffer].element_ptr(inc.offset).cast()
}

fn mpi_error(call: &'static str, code: c_int) -> MpiFailure {
    MpiFailure::Other(Error::Mpi { call, code })
}

/// `elements` of `size` bytes as an MPI count of bytes.
fn bytes_of(elements: usize, size: usize, what: &str) -> std::result::Result<c_int, MpiFailure> {
    elements.checked_mul(size).and_then(|bytes| c_int::try_from(bytes).ok()).ok_or_else(|| {
        MpiFailure::Other(Error::InvalidArgument(format!(
            "{what} of {elements} elements of {size} bytes exceeds what one MPI message can \
                 count (i32::MAX bytes)"
        )))
    })
}

impl MpiChannel {
    /// # Collective
    /// `MPI_Comm_dup` over the world.
    fn collective_new(rt: &Runtime) -> Result<Self> {
        let comm = Comm::collective_world(rt)?;
        debug_assert_eq!(comm.size(), rt.n_pes());
        Ok(MpiChannel {
            comm,
            fail_isend: None,
            isends: 0,
            out_tags: Vec::new(),
            in_tags: Vec::new(),
            requests: Vec::new(),
            statuses: Vec::new(),
        })
    }

    /// Sends and receives the messages of `job` (packed ones staged), with the tags set;
    /// `job.received[i]` gets the element count of incoming message `i`.
    fn exchange<T: Pod>(&mut self, job: &mut Job<'_, '_, T>) -> std::result::Result<(), MpiFailure> {
        let (buffers, incoming) = (job.buffers, job.incoming);
        let (out_tags, in_tags) = (&self.out_tags, &self.in_tags);
        let (size, comm, bytes_type) = (size_of::<T>(), self.comm.communicator().as_raw(), bytes_type());
        let recv_ptr = |inc: &Incoming| place(buffers, inc);
        if let ([out], [inc]) = (job.outgoing, incoming) {
            let data = job.data(0);
            let send_bytes = bytes_of(data.len(), size, "a message")?;
            let room_bytes = bytes_of(inc.room, size, "a receive room")?;
            let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
            // SAFETY: the send buffer is a live slice of send_bytes bytes; the receive range
            // lies inside this PE's buffer (checked by the caller: offset + room <= len) and no
            // reference to it exists; ranks exist; status is a valid out-pointer.
            let code = crate::watchdog::watch("MPI_Sendrecv", Some(inc.from), || unsafe {
                ffi::MPI_Sendrecv(
                    data.as_ptr().cast(),
                    send_bytes,
                    bytes_type,
                    out.to() as c_int,
                    out_tags[0],
                    recv_ptr(inc),
                    room_bytes,
                    bytes_type,
                    inc.from as c_int,
                    in_tags[0],
                    comm,
                    status.as_mut_ptr(),
                )
            });
            check(code, "MPI_Sendrecv", inc)?;
            // SAFETY: MPI_Sendrecv succeeded and filled the status.
            job.received[0] = count(unsafe { status.assume_init_ref() }, bytes_type)? / size.max(1);
            return Ok(());
        }
        self.post(job)?;
        self.complete(job)
    }

    /// Posts a receive for every incoming message of `job` and a send for every outgoing
    /// one (packed ones staged), with the tags set. The receive places and the send data
    /// must stay untouched until [`complete`](Self::complete), or [`release`] on an error.
    fn post<T: Pod>(&mut self, job: &mut Job<'_, '_, T>) -> std::result::Result<(), MpiFailure> {
        let (buffers, incoming) = (job.buffers, job.incoming);
        let (out_tags, in_tags) = (&self.out_tags, &self.in_tags);
        let (size, comm, bytes_type) = (size_of::<T>(), self.comm.communicator().as_raw(), bytes_type());
        let recv_ptr = |inc: &Incoming| place(buffers, inc);
        // Every size is checked before the first receive is posted, so that an error never
        // leaves a request pending on memory the caller gets back.
        for inc in incoming {
            bytes_of(inc.room, size, "a receive room")?;
        }
        for i in 0..job.outgoing.len() {
            bytes_of(job.data(i).len(), size, "a message")?;
        }
        let requests = &mut self.requests;
        requests.clear();
        // SAFETY: reading a constant of rsmpi's shim.
        requests.resize(incoming.len() + job.outgoing.len(), request_null());
        for ((inc, tag), request) in incoming.iter().zip(in_tags).zip(requests.iter_mut()) {
            let room_bytes = bytes_of(inc.room, size, "a receive room").expect("checked above");
            // SAFETY: the receive range lies inside this PE's buffer (validation checked
            // offset + room <= len), no reference to it exists, and it stays untouched until
            // complete() or release() ends the request (post's contract).
            let code = unsafe {
                ffi::MPI_Irecv(recv_ptr(inc), room_bytes, bytes_type, inc.from as c_int, *tag, comm, request)
            };
            if code != 0 {
                release(requests);
                return Err(mpi_error("MPI_Irecv", code));
            }
        }
        for (i, (tag, request)) in out_tags.iter().zip(requests[incoming.len()..].iter_mut()).enumerate() {
            let (to, data) = (job.outgoing[i].to(), job.data(i));
            let send_bytes = bytes_of(data.len(), size, "a message").expect("checked above");
            self.isends += 1;
            if self.fail_isend == Some(self.isends - 1) {
                release(requests);
                return Err(mpi_error("MPI_Isend", INJECTED));
            }
            // SAFETY: the send slice (the caller's data, an offer or the staged packing) stays
            // alive and unwritten until complete() or release() ends the request.
            let code = unsafe {
                ffi::MPI_Isend(data.as_ptr().cast(), send_bytes, bytes_type, to as c_int, *tag, comm, request)
            };
            if code != 0 {
                release(requests);
                return Err(mpi_error("MPI_Isend", code));
            }
        }
        Ok(())
    }

    /// Waits for every request [`post`](Self::post) started for `job`; `job.received[i]`
    /// gets the element count of incoming message `i`.
    fn complete<T: Pod>(&mut self, job: &mut Job<'_, '_, T>) -> std::result::Result<(), MpiFailure> {
        let (incoming, size, bytes_type) = (job.incoming, size_of::<T>(), bytes_type());
        let requests = &mut self.requests;
        let statuses = &mut self.statuses;
        statuses.clear();
        statuses.resize(requests.len(), MaybeUninit::uninit());
        // SAFETY: every request was started by post (or is null); statuses has one slot per
        // request.
        let code = crate::watchdog::watch("MPI_Waitall", None, || unsafe {
            ffi::MPI_Waitall(requests.len() as c_int, requests.as_mut_ptr(), statuses.as_mut_ptr().cast())
        });
        // The statuses are filled on success, and with MPI_ERR_IN_STATUS (each then holds its
        // request's own error); after any other error they are not to be read.
        let mut class = 0;
        if code != 0 {
            // SAFETY: a valid out-pointer.
            unsafe { ffi::MPI_Error_class(code, &mut class) };
            // Requests that did not complete (MPI_ERR_PENDING, or any after another error)
            // are still active: cancelled and completed before the buffers go back.
            release(requests);
            if class as u32 != ffi::MPI_ERR_IN_STATUS {
                return Err(mpi_error("MPI_Waitall", code));
            }
        }
        for (i, inc) in incoming.iter().enumerate() {
            // SAFETY: filled, as argued above.
            let status = unsafe { statuses[i].assume_init_ref() };
            if code != 0 {
                check(status.MPI_ERROR, "MPI_Waitall", inc)?;
            }
            job.received[i] = count(status, bytes_type)? / size.max(1);
        }
        if code != 0 {
            return Err(mpi_error("MPI_Waitall", code));
        }
        Ok(())
    }
}

/// The error code an injected failure reports (`MPI_ERR_OTHER` in spirit; never read as a
/// class).
const INJECTED: c_int = -1;

/// Cancels every request still active and completes it, so that none outlives the call that
/// posted it: a receive cancelled before it matched writes nothing; a send either completes
/// or is cancelled. Requests already completed (`MPI_REQUEST_NULL`) are skipped.
fn release(requests: &mut [ffi::MPI_Request]) {
    for request in requests.iter_mut() {
        // SAFETY: reading a constant of rsmpi's shim.
        if *request == request_null() {
            continue;
        }
        // SAFETY: an active request started by this channel; cancelling and waiting on it is
        // valid in any state, and the wait leaves it MPI_REQUEST_NULL. The status is ignored.
        crate::watchdog::watch("MPI_Wait (a cancelled request)", None, || unsafe {
            ffi::MPI_Cancel(request);
            ffi::MPI_Wait(request, status_ignore());
        });
    }
}

/// Maps a return code, recognising truncation (a message larger than the room).
fn check(code: c_int, call: &'static str, inc: &Incoming) -> std::result::Result<(), MpiFailure> {
    if code == 0 {
        return Ok(());
    }
    let mut class = 0;
    // SAFETY: a valid out-pointer.
    unsafe { ffi::MPI_Error_class(code, &mut class) };
    if class as u32 == ffi::MPI_ERR_TRUNCATE {
        Err(MpiFailure::Truncated { from: inc.from, room: inc.room })
    } else {
        Err(mpi_error(call, code))
    }
}

fn count(status: &ffi::MPI_Status, bytes_type: ffi::MPI_Datatype) -> std::result::Result<usize, MpiFailure> {
    let mut bytes = 0;
    // SAFETY: status comes from a completed receive; bytes is a valid out-pointer.
    let code = unsafe { ffi::MPI_Get_count(status, bytes_type, &mut bytes) };
    if code != 0 {
        return Err(mpi_error("MPI_Get_count", code));
    }
    Ok(bytes as usize)
}
