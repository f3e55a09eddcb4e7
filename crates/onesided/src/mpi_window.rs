//! An MPI-3 window over this PE's symmetric heap, for the MPI one-sided path of the exchanges
//! ([`Transport::MpiRma`](crate::Transport::MpiRma)).
//!
//! Every symmetric object lies at the same offset from the start of each PE's heap, so one
//! window over the whole heap reaches every symmetric array of every PE: the target
//! displacement of a symmetric address is its distance from this PE's heap start. The runtime
//! creates it at the first exchange on this path and frees it before finalising; where MPI
//! cannot create it, every PE gets the error. It is held in a passive-target epoch for all of
//! its life (`MPI_Win_lock_all` with `MPI_MODE_NOCHECK`): a put completes at its target by
//! `MPI_Win_flush`. Since a transport that emulates remote writes (Open MPI's UCX one-sided
//! component over TCP) lands them only when the target calls into MPI, every wait of the
//! library drives the window's progress once it exists.
//!
//! A signal is an `MPI_Put` of one aligned 64-bit element, flushed before the next write to
//! its PE ([`HeapWindow::raise_unflushed`]). MPI promises no atomicity between a put and a
//! load at the target (nor for accumulates); the path relies, as polling on notified puts over
//! MPI does in practice, on the transports storing an aligned 8-byte element whole (one store,
//! or a kernel copy of the word). Each word has one writer, whose puts to it are flushed one by
//! one, so they land in order. An `MPI_Accumulate` costs a lock round trip at the target in
//! Open MPI's UCX component (13.9 µs against 1.6 µs per 8-byte send-receive on one node),
//! `MPI_Fetch_and_op` with `MPI_REPLACE` 2.6 µs.

use std::ffi::c_void;
use std::mem::MaybeUninit;

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::error::{Error, Result};
use crate::mpi_raw::{bytes_type, u64_type};

/// Bytes one `MPI_Put` moves at most: counts are C `int`s.
const MAX_PUT_BYTES: usize = 1 << 30;

/// The window over this PE's symmetric heap, in a passive-target epoch to every PE.
pub(crate) struct HeapWindow {
    win: ffi::MPI_Win,
    /// This PE's heap start: displacements are measured from it.
    start: usize,
    len: usize,
    /// A communicator of its own on which nothing is ever sent: probing it drives MPI's
    /// progress without matching anyone's messages.
    progress: SimpleCommunicator,
    /// A communicator of its own for the barrier of
    /// [`barrier_progressing`](Self::barrier_progressing).
    fence: SimpleCommunicator,
}

// SAFETY: the window handle is used only through MPI calls, which are thread-safe under the
// MPI_THREAD_MULTIPLE the runtime obtained; the other fields are plain values and a
// communicator handle used the same way.
unsafe impl Send for HeapWindow {}
// SAFETY: as for Send; no method mutates the struct.
unsafe impl Sync for HeapWindow {}

impl HeapWindow {
    /// Creates the window over each PE's heap (`bounds`: its start and length, or why they
    /// could not be found), where `first_block` (a symmetric block) must lie at the same
    /// distance from the start on every PE. A failure on any PE is an error on every PE.
    ///
    /// # Collective
    /// Every PE of `world` calls it at the same point.
    pub(crate) fn collective_new(
        world: &SimpleCommunicator,
        bounds: std::result::Result<(usize, usize), String>,
        first_block: usize,
    ) -> Result<HeapWindow> {
        use mpi::collective::SystemOperation;
        let me = world.rank();
        // Per PE: whether it found its heap (0 when it did), and the first block's distance
        // into it, as both its lowest and, negated, its highest.
        let distance = bounds.as_ref().map_or(0, |&(start, _)| (first_block - start) as u64);
        let mine = [u64::from(bounds.is_err()), distance, u64::MAX - distance];
        let mut agreed = [0u64; 3];
        world.all_reduce_into(&mine[..], &mut agreed[..], SystemOperation::max());
        let (start, len) = match bounds {
            Err(why) => {
                return Err(Error::InvalidArgument(format!(
                    "PE {me}: the MPI window over the symmetric heap: {why}: take another path \
                     than mpi-rma"
                )));
            }
            Ok(_) if agreed[0] != 0 => {
                return Err(Error::InvalidArgument(
                    "another PE could not find its symmetric heap for the MPI window (its own \
                     error says why): take another path than mpi-rma"
                        .to_string(),
                ));
            }
            Ok(bounds) => bounds,
        };
        let (lowest, highest) = (u64::MAX - agreed[2], agreed[1]);
        if lowest != highest {
            return Err(Error::InvalidArgument(format!(
                "PE {me}: the MPI window over the symmetric heap needs the heaps laid out alike, \
                 but the first symmetric block lies {distance} bytes into this PE's heap and \
                 between {lowest} and {highest} bytes into the others': take another path than \
                 mpi-rma"
            )));
        }
        // The window's communicator returns errors rather than ending the job: Open MPI may
        // have no one-sided component that reaches every PE (Debian's configuration leaves
        // out UCX's, and the rest need shared memory or RDMA), and then every PE must learn
        // it and go on without the window.
        let comm = world.duplicate();
        // SAFETY: `comm` is a valid communicator of this process.
        check("MPI_Comm_set_errhandler", unsafe {
            ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN)
        })?;
        let mut win = MaybeUninit::<ffi::MPI_Win>::uninit();
        // SAFETY: `start..start + len` is this PE's heap, mapped for the life of the runtime,
        // which outlives the window (the runtime frees it before finalising); MPI writes the
        // handle into `win`.
        let code = unsafe {
            ffi::MPI_Win_create(
                start as *mut c_void,
                len as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                comm.as_raw(),
                win.as_mut_ptr(),
            )
        };
        let failed = u64::from(code != ffi::MPI_SUCCESS as i32);
        let mut anywhere = 0u64;
        world.all_reduce_into(&failed, &mut anywhere, SystemOperation::max());
        if anywhere != 0 {
            // Where it succeeded the window is left unfreed: MPI_Win_free is collective over
            // every PE, and those where creation failed hold no window to free.
            let osc = std::env::var(crate::env::OMPI_OSC).unwrap_or_else(|_| "unset".to_string());
            return Err(Error::InvalidArgument(format!(
                "PE {me}: MPI could not create a window over the symmetric heaps (MPI_Win_create \
                 failed {} with error {code}): Open MPI needs a one-sided component that \
                 reaches every PE, UCX's between nodes ({}={osc}; set it to ucx); or take \
                 another path than mpi-rma",
                if failed != 0 { "on this PE" } else { "on another PE" },
                crate::env::OMPI_OSC,
            )));
        }
        // SAFETY: MPI_Win_create succeeded and wrote the handle.
        let win = unsafe { win.assume_init() };
        // SAFETY: `win` is a window of this process; errors return codes from here on rather
        // than ending the job.
        check("MPI_Win_set_errhandler", unsafe {
            ffi::MPI_Win_set_errhandler(win, ffi::RSMPI_ERRORS_RETURN)
        })?;
        // SAFETY: as above; the epoch lasts until `drop`.
        check("MPI_Win_lock_all", unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as i32, win) })?;
        Ok(HeapWindow { win, start, len, progress: world.duplicate(), fence: world.duplicate() })
    }

    /// The displacement of this PE's symmetric address `local` (of `bytes` bytes), the same
    /// on every PE; an error when the region is not in the heap the window covers.
    fn displacement(&self, local: usize, bytes: usize) -> Result<ffi::MPI_Aint> {
        if local < self.start || local.saturating_add(bytes) > self.start + self.len {
            return Err(Error::InvalidArgument(format!(
                "the MPI window covers the symmetric heap {:#x}+{:#x}, not {local:#x}+{bytes:#x}: \
                 the mpi-rma path reaches symmetric arrays only",
                self.start, self.len
            )));
        }
        Ok((local - self.start) as ffi::MPI_Aint)
    }

    /// Starts writing `data` to PE `pe` at the place of this PE's symmetric address `local`;
    /// it is complete there after [`flush`](Self::flush).
    ///
    /// # Safety
    /// `local..local + data.len()` lies in one symmetric array, and PE `pe` does not read or
    /// write that region until it learns of the flushed put (by a signal raised after it).
    /// `data` stays unchanged until the flush.
    pub(crate) unsafe fn put(&self, pe: usize, local: usize, data: &[u8]) -> Result<()> {
        let mut at = 0;
        while at < data.len() {
            let n = (data.len() - at).min(MAX_PUT_BYTES);
            let disp = self.displacement(local + at, n)?;
            // SAFETY: the source is `n` bytes of `data`, live until the flush (the caller's
            // promise); the target region lies in the window (displacement checked it) and
            // the caller promises no one else touches it meanwhile.
            let code = unsafe {
                ffi::MPI_Put(
                    data[at..].as_ptr().cast::<c_void>(),
                    n as i32,
                    bytes_type(),
                    pe as i32,
                    disp,
                    n as i32,
                    bytes_type(),
                    self.win,
                )
            };
            check("MPI_Put", code)?;
            at += n;
        }
        Ok(())
    }

    /// Sets PE `pe`'s signal word at the place of this PE's symmetric address `local` to
    /// `*source`, without waiting for it to land: the last write of an exchange call, which
    /// the target sees as it polls, while the origin goes on to work that may not drive MPI
    /// (an OpenSHMEM wait): a flush there would wait for the target's progress, which over a
    /// transport that emulates remote writes (UCX over TCP) acknowledges a put only when the
    /// target next calls into MPI.
    ///
    /// # Safety
    /// `*source` stays unchanged and alive until the next [`flush`](Self::flush) to `pe`,
    /// which must come before any later write to the same word.
    pub(crate) unsafe fn raise_unflushed(&self, pe: usize, local: usize, source: &u64) -> Result<()> {
        let disp = self.displacement(local, 8)?;
        // SAFETY: the origin is one u64 that the caller keeps until the flush; the target
        // word lies in the window (displacement checked it).
        let code = unsafe {
            ffi::MPI_Put(
                std::ptr::from_ref(source).cast::<c_void>(),
                1,
                u64_type(),
                pe as i32,
                disp,
                1,
                u64_type(),
                self.win,
            )
        };
        check("MPI_Put", code)
    }

    /// Completes every put this PE started to `pe`, at `pe`.
    pub(crate) fn flush(&self, pe: usize) -> Result<()> {
        // SAFETY: the window is in a passive-target epoch to every PE.
        check("MPI_Win_flush", unsafe { ffi::MPI_Win_flush(pe as i32, self.win) })
    }

    /// Waits until every PE has called it, driving MPI's progress (as [`progress`](Self::progress)
    /// does) meanwhile, so that the puts other PEs flush to this one complete while it waits;
    /// fails after `timeout`.
    ///
    /// # Collective
    /// Every PE calls it at the same point.
    pub(crate) fn barrier_progressing(
        &self,
        timeout: std::time::Duration,
        oversubscribed: bool,
    ) -> Result<()> {
        let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
        // SAFETY: `fence` is a communicator of this process; MPI writes the request.
        check("MPI_Ibarrier", unsafe { ffi::MPI_Ibarrier(self.fence.as_raw(), request.as_mut_ptr()) })?;
        // SAFETY: MPI_Ibarrier succeeded and wrote the request.
        let mut request = unsafe { request.assume_init() };
        let mut failed = None;
        let waited = crate::poll::poll_until(timeout, oversubscribed, || {
            let mut done = 0;
            // SAFETY: `request` is the live request of the barrier; the status is ignored.
            let code = unsafe { ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            if code != ffi::MPI_SUCCESS as i32 {
                failed = Some(code);
                return true;
            }
            if done == 0 {
                self.progress();
            }
            done != 0
        });
        match (failed, waited) {
            (Some(code), _) => check("MPI_Test", code),
            (None, Ok(())) => Ok(()),
            (None, Err(waited)) => Err(Error::InvalidArgument(format!(
                "the MPI window's barrier: another PE did not arrive within {waited:?} \
                 (ONESIDED_WAIT_TIMEOUT)"
            ))),
        }
    }

    /// Lets MPI land what other PEs write into this one (a probe that matches nothing), and
    /// makes the window's public and private copies agree (`MPI_Win_sync`).
    pub(crate) fn progress(&self) {
        use mpi::point_to_point::Source;
        let _ = self.progress.any_process().immediate_probe();
        // SAFETY: the window is in a passive-target epoch.
        unsafe { ffi::MPI_Win_sync(self.win) };
    }
}

impl Drop for HeapWindow {
    fn drop(&mut self) {
        // SAFETY: the epoch opened at creation is closed once, then the window freed once;
        // every PE drops its runtime's window at the same point (before finalising), as
        // MPI_Win_free is collective.
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        }
    }
}

/// `Err` naming `call` when MPI returned an error code.
fn check(call: &'static str, code: i32) -> Result<()> {
    if code == ffi::MPI_SUCCESS as i32 { Ok(()) } else { Err(Error::Mpi { call, code }) }
}
