//! The MPI paths, on a private duplicate of the world communicator whose errors return codes:
//!
//! - **mpi**, between partners only: one `MPI_Isend` per target, whose size is the count (or
//!   the error, under its own tag); each PME rank probes each source in source order
//!   (`MPI_Mprobe`), which tells it the count, and receives each message straight into place
//!   (`MPI_Mrecv`); forces go back one message per source the same way.
//! - **mpi-alltoallv**, over every rank, the reference: `MPI_Alltoall` of the counts, then
//!   `MPI_Alltoallv` of the data.
//!
//! On both, the PME ranks agree on the error of a step with an `MPI_Iallreduce` on their own
//! communicator, started once the counts are in and completed before the statuses go out.
//! Every call completes its sends before it returns, whatever failed.
//!
//! In a redistribution whose links differ ([`super::mixed`]) the partner path serves the
//! pairs of one class, in steps the mixed transport interleaves with the other part's, and
//! its vote is every PME rank's.

use std::ffi::c_int;
use std::mem::{MaybeUninit, size_of};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use onesided::Runtime;
use onesided::watchdog::watch;

use super::plan::{Pairs, Plan};
use super::{Buffers, Forces, Particle, Transport};
use crate::RVec;
use crate::error::{Error, Result};

/// Tag of a message that carries atoms or forces.
pub(super) const DATA: c_int = 1;
/// Tag of a message that carries an error marker instead.
const MARK: c_int = 2;

/// The messages of atoms a PME rank probed, by source index, and the first broken bound.
pub(super) type Probed = (Vec<(usize, ffi::MPI_Message)>, Result<()>);

/// The MPI transport: its communicators, and whether it uses the collectives.
pub(super) struct Mpi {
    comm: SimpleCommunicator,
    pub vote: MpiVote,
    alltoallv: bool,
    /// The pairs the partner path serves.
    pairs: Pairs,
    requests: Vec<ffi::MPI_Request>,
    /// The error marker this PE sends, where MPI reads it until the sends complete.
    marker: Box<u64>,
}

/// The PME ranks' vote on the MPI paths: an `MPI_Iallreduce` on their own communicator,
/// started once the announcements are in and completed before the statuses go out, so that
/// it travels while the mesh works.
pub(super) struct MpiVote {
    /// The PME ranks' communicator (rank order), on PME ranks only.
    pme: Option<SimpleCommunicator>,
    /// This rank's ballot and the outcome, where MPI reads and writes them until the wait.
    values: Box<[u64; 2]>,
    request: Option<ffi::MPI_Request>,
}

impl MpiVote {
    /// # Collective
    /// Every PE of `comm` calls it: splits off the PME ranks' communicator.
    pub(super) fn collective_new(comm: &SimpleCommunicator, my_rank: Option<usize>) -> Self {
        let color = if my_rank.is_some() { Color::with_value(1) } else { Color::undefined() };
        MpiVote {
            pme: watch("MPI_Comm_split (the PME ranks)", None, || {
                comm.split_by_color_with_key(color, my_rank.unwrap_or(0) as i32)
            }),
            values: Box::new([u64::MAX; 2]),
            request: None,
        }
    }

    /// Starts the vote on the step's error with this PME rank's ballot.
    ///
    /// # Collective
    /// Every PME rank calls it once per step, then [`run`](Self::run) (nothing where the plan
    /// does not vote).
    pub(super) fn start(&mut self, plan: &Plan<'_>) -> Result<()> {
        if let Some(mut stale) = self.request.take() {
            // A step every PE dropped before its return: its vote completes first.
            let code = watch("MPI_Wait", None, || {
                // SAFETY: a request of an earlier start; the status is ignored.
                unsafe { ffi::MPI_Wait(&mut stale, status_ignore()) }
            });
            mpi_check(code, "MPI_Wait")?;
        }
        let Some(pme) = self.pme.as_ref().filter(|_| plan.votes) else { return Ok(()) };
        self.values[0] = plan.ballot();
        let (send, receive) = self.values.split_at_mut(1);
        let mut request = MaybeUninit::uninit();
        // SAFETY: one u64 each way, in the boxed pair, which stays in place and untouched
        // until the wait in run; every PME rank starts it once per step.
        let code = unsafe {
            ffi::MPI_Iallreduce(
                send.as_ptr().cast(),
                receive.as_mut_ptr().cast(),
                1,
                u64_type(),
                min_op(),
                pme.as_raw(),
                request.as_mut_ptr(),
            )
        };
        mpi_check(code, "MPI_Iallreduce")?;
        // SAFETY: initialised by the successful call.
        self.request = Some(unsafe { request.assume_init() });
        Ok(())
    }

    /// The smallest error any PME rank knows of in this step, into the plan (starting the
    /// vote first if the path has not).
    ///
    /// # Collective
    /// Every PME rank calls it once per step.
    pub(super) fn run(&mut self, plan: &mut Plan<'_>) -> Result<()> {
        if self.pme.is_none() || !plan.votes {
            return Ok(());
        }
        if self.request.is_none() {
            self.start(plan)?;
        }
        let mut request = self.request.take().expect("started just above");
        // SAFETY: a request of start; the status is ignored.
        let code = watch("MPI_Wait", None, || unsafe { ffi::MPI_Wait(&mut request, status_ignore()) });
        mpi_check(code, "MPI_Wait")?;
        plan.take_vote(self.values[1]);
        Ok(())
    }
}

impl Mpi {
    /// The transport of the pairs `pairs` serves (every pair with `alltoallv`).
    ///
    /// # Collective
    /// Duplicates the world communicator and splits off the PME ranks'.
    pub(super) fn collective_new(
        rt: &Runtime,
        my_rank: Option<usize>,
        alltoallv: bool,
        pairs: Pairs,
    ) -> Result<Self> {
        let comm = onesided::collective_error_returning_world(rt)?;
        let vote = MpiVote::collective_new(&comm, my_rank);
        Ok(Mpi { comm, vote, alltoallv, pairs, requests: Vec::new(), marker: Box::new(0) })
    }

    /// Starts sending `bytes` bytes from `data` to `to` under `tag`.
    ///
    /// # Safety
    /// `data` is valid for `bytes` bytes of reads, which nobody writes until
    /// [`waitall`](Self::waitall) returns.
    unsafe fn isend(&mut self, data: *const u8, bytes: usize, to: usize, tag: c_int) -> Result<()> {
        let mut request = MaybeUninit::uninit();
        // SAFETY: `data` holds `bytes` bytes that stay untouched until waitall (the caller's
        // promise); the request is a valid out-pointer.
        let code = unsafe {
            ffi::MPI_Isend(
                data.cast(),
                count_of(bytes)?,
                bytes_type(),
                to as c_int,
                tag,
                self.comm.as_raw(),
                request.as_mut_ptr(),
            )
        };
        mpi_check(code, "MPI_Isend")?;
        // SAFETY: initialised by the successful call.
        self.requests.push(unsafe { request.assume_init() });
        Ok(())
    }

    /// Completes every send started.
    pub(super) fn waitall(&mut self) -> Result<()> {
        let requests = &mut self.requests;
        // SAFETY: every request was started by isend; statuses are ignored.
        let code = watch("MPI_Waitall", None, || unsafe {
            ffi::MPI_Waitall(requests.len() as c_int, requests.as_mut_ptr(), statuses_ignore())
        });
        requests.clear();
        mpi_check(code, "MPI_Waitall")
    }

    /// The next message from `from`: its handle, tag and size in bytes.
    fn probe(&self, from: usize) -> Result<(ffi::MPI_Message, c_int, usize)> {
        let (mut message, mut status) = (MaybeUninit::uninit(), MaybeUninit::<ffi::MPI_Status>::uninit());
        // SAFETY: valid out-pointers; a matched message is received below by its handle.
        let code = watch("MPI_Mprobe", Some(from), || unsafe {
            ffi::MPI_Mprobe(
                from as c_int,
                any_tag(),
                self.comm.as_raw(),
                message.as_mut_ptr(),
                status.as_mut_ptr(),
            )
        });
        mpi_check(code, "MPI_Mprobe")?;
        let mut bytes = 0;
        // SAFETY: status filled by the successful probe.
        let code = unsafe { ffi::MPI_Get_count(status.as_ptr(), bytes_type(), &mut bytes) };
        mpi_check(code, "MPI_Get_count")?;
        // SAFETY: filled by the successful probe.
        let (message, status) = unsafe { (message.assume_init(), status.assume_init()) };
        Ok((message, status.MPI_TAG, bytes.max(0) as usize))
    }

    /// Receives the probed `message` of `bytes` bytes into `into`.
    ///
    /// # Safety
    /// `into` is valid for `bytes` bytes of writes, and nothing else accesses them meanwhile.
    unsafe fn receive(message: ffi::MPI_Message, into: *mut u8, bytes: usize) -> Result<()> {
        let mut message = message;
        let count = count_of(bytes)?;
        // SAFETY: the caller's promise; the message was matched by probe.
        let code = watch("MPI_Mrecv", None, || unsafe {
            ffi::MPI_Mrecv(into.cast(), count, bytes_type(), &mut message, status_ignore())
        });
        mpi_check(code, "MPI_Mrecv")
    }

    /// Receives a probed marker.
    fn receive_marker(message: ffi::MPI_Message, bytes: usize) -> Result<u64> {
        let mut marker = 0u64;
        if bytes != size_of::<u64>() {
            return Err(Error::Verification(format!("an error marker of {bytes} bytes, not 8")));
        }
        // SAFETY: a u64 holds the 8 bytes.
        unsafe { Mpi::receive(message, (&mut marker as *mut u64).cast(), bytes)? };
        Ok(marker)
    }

    /// One u64 from every PE to every PE (zero where nothing is meant).
    fn alltoall(&self, out: &[u64], into: &mut [u64]) -> Result<()> {
        // SAFETY: both buffers hold one u64 per PE; every PE calls MPI_Alltoall.
        let code = watch("MPI_Alltoall", None, || unsafe {
            ffi::MPI_Alltoall(
                out.as_ptr().cast(),
                1,
                u64_type(),
                into.as_mut_ptr().cast(),
                1,
                u64_type(),
                self.comm.as_raw(),
            )
        });
        mpi_check(code, "MPI_Alltoall")
    }

    /// Elements of `size` bytes: `send` holds `counts[p]` for PE `p` at `offsets[p]`, and
    /// `recv` receives `counts[s]` from PE `s` at `offsets[s]`; the two may be one buffer
    /// where one side moves nothing (a PE whose two sides share it).
    fn alltoallv(
        &self,
        send: *const u8,
        (send_counts, send_offsets): (&[usize], &[usize]),
        recv: *mut u8,
        (recv_counts, recv_offsets): (&[usize], &[usize]),
        size: usize,
    ) -> Result<()> {
        let ints = |v: &[usize]| v.iter().map(|&c| count_of(c * size)).collect::<Result<Vec<c_int>>>();
        let (sc, sd, rc, rd) =
            (ints(send_counts)?, ints(send_offsets)?, ints(recv_counts)?, ints(recv_offsets)?);
        let mut empty = [0u8; 2];
        let (send, recv) = apart((send, &sc), (recv, &rc), &mut empty);
        // SAFETY: the buffers hold the counted ranges at their offsets (buffers sized
        // for the home atoms and for the bounds of the sources, or the caller's forces, one
        // per received atom, checked by return_with); no mutable reference to them exists;
        // every PE calls MPI_Alltoallv with matching counts (the counts were exchanged first).
        let code = watch("MPI_Alltoallv", None, || unsafe {
            ffi::MPI_Alltoallv(
                send.cast(),
                sc.as_ptr(),
                sd.as_ptr(),
                bytes_type(),
                recv.cast(),
                rc.as_ptr(),
                rd.as_ptr(),
                bytes_type(),
                self.comm.as_raw(),
            )
        });
        mpi_check(code, "MPI_Alltoallv")
    }

    /// The partner path's forward: a message per target, probed and received in source order.
    /// The sends complete before it returns, whatever failed.
    fn forward_partners(&mut self, plan: &mut Plan<'_>, buffers: &Buffers<'_>) -> Result<()> {
        let sent = if plan.particle { self.send_atoms(plan, buffers) } else { Ok(()) };
        let received =
            if sent.is_ok() && plan.my_rank.is_some() { self.receive_atoms(plan, buffers) } else { Ok(()) };
        let waited = self.waitall();
        sent.and(received).and(waited)
    }

    /// A particle PE's sends: to each served target its range of the packed send buffer, or
    /// this PE's error marker. They complete in [`waitall`](Self::waitall), which every way out
    /// of the step passes.
    pub(super) fn send_atoms(&mut self, plan: &Plan<'_>, buffers: &Buffers<'_>) -> Result<()> {
        let send = buffers.send().as_ptr();
        // Each target's range of the packed send buffer (pointer arithmetic only; isend
        // reads it).
        let messages = plan.targets_of(self.pairs).map(|(_, r, _)| {
            let data = send.wrapping_add(plan.dest_offsets[r]).cast::<u8>().cast_const();
            (plan.grid.pe_of(r), data, plan.dest_counts[r] * size_of::<Particle>())
        });
        let messages: Vec<_> = messages.collect();
        // SAFETY: the ranges lie in the send buffer, which nobody writes before the next
        // step, after waitall.
        unsafe { self.send_each(plan.pending, messages) }
    }

    /// Starts a message to each of `messages` (PE, data, bytes): its data, or this PE's marker
    /// where the step carries an error (`pending`).
    ///
    /// # Safety
    /// Each message's data is valid for its bytes of reads, which nobody writes until
    /// [`waitall`](Self::waitall) returns.
    unsafe fn send_each(
        &mut self,
        pending: Option<u64>,
        messages: Vec<(usize, *const u8, usize)>,
    ) -> Result<()> {
        *self.marker = pending.unwrap_or(0);
        for (to, data, bytes) in messages {
            if pending.is_some() {
                let marker: *const u64 = &*self.marker;
                // SAFETY: the boxed marker stays in place and unchanged until waitall, which
                // every way out of the step passes.
                unsafe { self.isend(marker.cast(), size_of::<u64>(), to, MARK)? };
            } else {
                // SAFETY: the caller's promise.
                unsafe { self.isend(data, bytes, to, DATA)? };
            }
        }
        Ok(())
    }

    /// A PME rank's half of the partner path's forward: each source probed in source order,
    /// its count or error taken, and every message received into place.
    fn receive_atoms(&mut self, plan: &mut Plan<'_>, buffers: &Buffers<'_>) -> Result<()> {
        let mut raw = vec![0; plan.sources().len()];
        let (probed, outcome) = self.probe_sources(plan, &mut raw)?;
        plan.take_source_counts(&raw);
        self.vote.start(plan)?;
        Mpi::receive_probed(plan, buffers, probed)?;
        outcome
    }

    /// On a PME rank: probes each served source in source order and writes its count or
    /// error into `raw` (by source); returns the messages of atoms to receive, by source
    /// index, and the first broken bound (its message received and dropped, so that none is
    /// left behind).
    pub(super) fn probe_sources(&mut self, plan: &Plan<'_>, raw: &mut [u64]) -> Result<Probed> {
        let mut probed = Vec::with_capacity(plan.sources().len());
        let mut outcome = Ok(());
        for (j, source) in plan.sources_of(self.pairs) {
            let (message, tag, bytes) = self.probe(source.pe)?;
            if tag == MARK {
                raw[j] = Mpi::receive_marker(message, bytes)?;
                continue;
            }
            if outcome.is_ok() {
                outcome = check_bound(bytes, source.bound, source.pe, tag);
            }
            if outcome.is_err() {
                // Received all the same, so that no message is left behind, and not kept.
                let mut scratch = vec![0u8; bytes];
                // SAFETY: scratch holds the bytes.
                unsafe { Mpi::receive(message, scratch.as_mut_ptr(), bytes)? };
                raw[j] = 0;
                continue;
            }
            raw[j] = (bytes / size_of::<Particle>()) as u64;
            probed.push((j, message));
        }
        Ok((probed, outcome))
    }

    /// Receives the `probed` messages ([`probe_sources`](Self::probe_sources)) into place, once
    /// the plan has taken the counts.
    pub(super) fn receive_probed(
        plan: &Plan<'_>,
        buffers: &Buffers<'_>,
        probed: Vec<(usize, ffi::MPI_Message)>,
    ) -> Result<()> {
        let recv = buffers.recv();
        for (j, message) in probed {
            let (at, count) = (plan.src_offsets[j], plan.src_counts[j]);
            // SAFETY: the source's range of the receive buffer, which holds the sum of the
            // bounds (each message checked against its source's when probed); only this PE
            // touches it now.
            unsafe { Mpi::receive(message, recv.as_ptr().add(at).cast(), count * size_of::<Particle>())? };
        }
        Ok(())
    }

    /// The partner path's backward: a message per source, probed and received by target. The
    /// sends complete before it returns, whatever failed.
    fn backward_partners(
        &mut self,
        plan: &mut Plan<'_>,
        buffers: &Buffers<'_>,
        forces: &[RVec],
    ) -> Result<()> {
        let sent = if plan.my_rank.is_some() { self.send_forces(plan, forces) } else { Ok(()) };
        let received =
            if sent.is_ok() && plan.particle { self.receive_forces(plan, buffers) } else { Ok(()) };
        let waited = self.waitall();
        sent.and(received).and(waited)
    }

    /// A PME rank's sends of the return: to each served source its range of `forces`, or the
    /// step's error marker. They complete in [`waitall`](Self::waitall), which every way out
    /// of the step passes.
    pub(super) fn send_forces(&mut self, plan: &Plan<'_>, forces: &[RVec]) -> Result<()> {
        let messages = plan.sources_of(self.pairs).map(|(j, s)| {
            let (at, count) = (plan.src_offsets[j], plan.src_counts[j]);
            (s.pe, forces[at..at + count].as_ptr().cast(), count * size_of::<RVec>())
        });
        let messages: Vec<_> = messages.collect();
        // SAFETY: ranges of the caller's forces, borrowed for the step's return, which waits
        // for the sends before it returns.
        unsafe { self.send_each(plan.pending, messages) }
    }

    /// A particle PE's half of the partner path's backward: each served target's status, and
    /// its forces into place.
    pub(super) fn receive_forces(&mut self, plan: &mut Plan<'_>, buffers: &Buffers<'_>) -> Result<()> {
        let mut outcome = Ok(());
        let recv = buffers.force_recv();
        let targets: Vec<usize> = plan.targets_of(self.pairs).map(|(_, r, _)| r).collect();
        for r in targets {
            let (message, tag, bytes) = self.probe(plan.grid.pe_of(r))?;
            if tag == MARK {
                plan.note_error(Mpi::receive_marker(message, bytes)?);
                continue;
            }
            let (at, count) = (plan.dest_offsets[r], plan.dest_counts[r]);
            let got = bytes / size_of::<RVec>();
            if got != count || plan.pending.is_some() {
                // Received all the same, so that no message is left behind.
                let mut scratch = vec![0u8; bytes];
                // SAFETY: scratch holds the bytes.
                unsafe { Mpi::receive(message, scratch.as_mut_ptr(), bytes)? };
                if outcome.is_ok() {
                    outcome = plan.take_status(r, got as u64);
                }
                continue;
            }
            // SAFETY: this target's range of the force receive buffer (the offsets and counts
            // cover the home atoms); only this PE touches it now.
            unsafe { Mpi::receive(message, recv.as_ptr().add(at).cast(), bytes)? };
        }
        outcome
    }

    /// The reference path's forward: counts and data over every rank.
    fn forward_everyone(&mut self, plan: &mut Plan<'_>, buffers: &Buffers<'_>) -> Result<()> {
        let n = plan.rt.n_pes();
        let mut counts_out = vec![0u64; n];
        let mut send_counts = vec![0usize; n];
        let mut send_offsets = vec![0usize; n];
        if plan.particle {
            for &r in &plan.reach.targets {
                let pe = plan.grid.pe_of(r);
                counts_out[pe] = plan.count_to(r);
                send_counts[pe] = plan.send_count(r);
                send_offsets[pe] = plan.dest_offsets[r];
            }
        }
        let mut counts_in = vec![0u64; n];
        self.alltoall(&counts_out, &mut counts_in)?;
        let raw: Vec<u64> = plan.sources().iter().map(|s| counts_in[s.pe]).collect();
        let (mut recv_counts, mut recv_offsets) = (vec![0usize; n], vec![0usize; n]);
        let mut outcome = Ok(());
        if plan.my_rank.is_some() {
            plan.take_source_counts(&raw);
            self.vote.start(plan)?;
            for (j, s) in plan.sources().iter().enumerate() {
                if outcome.is_ok() {
                    outcome = check_bound(plan.src_counts[j] * size_of::<Particle>(), s.bound, s.pe, DATA);
                }
                // Beyond its bound, received nowhere: every PE still takes part alike.
                if outcome.is_ok() {
                    recv_counts[s.pe] = plan.src_counts[j];
                    recv_offsets[s.pe] = plan.src_offsets[j];
                }
            }
        }
        let received = self.alltoallv(
            buffers.send().as_ptr().cast(),
            (&send_counts, &send_offsets),
            buffers.recv().as_ptr().cast(),
            (&recv_counts, &recv_offsets),
            size_of::<Particle>(),
        );
        outcome.and(received)
    }

    /// The reference path's backward: statuses and forces over every rank.
    fn backward_everyone(
        &mut self,
        plan: &mut Plan<'_>,
        buffers: &Buffers<'_>,
        forces: &[RVec],
    ) -> Result<()> {
        let n = plan.rt.n_pes();
        let mut status_out = vec![0u64; n];
        let (mut send_counts, mut send_offsets) = (vec![0usize; n], vec![0usize; n]);
        if plan.my_rank.is_some() {
            for (j, s) in plan.sources().iter().enumerate() {
                status_out[s.pe] = plan.status_to(j);
                if plan.pending.is_none() {
                    send_counts[s.pe] = plan.src_counts[j];
                    send_offsets[s.pe] = plan.src_offsets[j];
                }
            }
        }
        let mut status_in = vec![0u64; n];
        self.alltoall(&status_out, &mut status_in)?;
        let (mut recv_counts, mut recv_offsets) = (vec![0usize; n], vec![0usize; n]);
        let mut outcome = Ok(());
        if plan.particle {
            for r in plan.reach.targets.clone() {
                let pe = plan.grid.pe_of(r);
                if outcome.is_ok() {
                    outcome = plan.take_status(r, status_in[pe]);
                }
                if status_in[pe] & super::plan::ERROR == 0 {
                    recv_counts[pe] = plan.dest_counts[r];
                    recv_offsets[pe] = plan.dest_offsets[r];
                }
            }
        }
        // Every PE takes part, whatever it found: the counts both sides use agree.
        self.alltoallv(
            forces.as_ptr().cast(),
            (&send_counts, &send_offsets),
            buffers.force_recv().as_ptr().cast(),
            (&recv_counts, &recv_offsets),
            size_of::<RVec>(),
        )?;
        outcome
    }
}

impl<'rt> Transport<'rt> for Mpi {
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        if plan.particle {
            // SAFETY: on this path no PE reads or writes another's send buffer.
            unsafe { plan.pack_into(home, buffers.send()) };
        }
        if self.alltoallv {
            self.forward_everyone(plan, buffers)
        } else {
            self.forward_partners(plan, buffers)
        }
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        _home_forces: &mut [RVec],
    ) -> Result<bool> {
        self.vote.run(plan)?;
        // Sent from wherever they are, the caller's array or the staging buffer alike.
        if self.alltoallv {
            self.backward_everyone(plan, buffers, forces.data)?;
        } else {
            self.backward_partners(plan, buffers, forces.data)?;
        }
        Ok(false)
    }
}

/// A message of `bytes` from `pe` that carries more atoms than its bound: the plan's promise
/// broken, reported rather than written past the source's room.
pub(super) fn check_bound(bytes: usize, bound: usize, pe: usize, tag: c_int) -> Result<()> {
    if tag == DATA && bytes > bound * size_of::<Particle>() {
        return Err(Error::Verification(format!(
            "PE {pe} sent {} atoms, more than the {bound} its plan allows",
            bytes / size_of::<Particle>()
        )));
    }
    Ok(())
}

/// rsmpi's constants, read from its shim.
pub(super) fn bytes_type() -> ffi::MPI_Datatype {
    // SAFETY: reading a constant of rsmpi's shim, initialised before main.
    unsafe { ffi::RSMPI_UINT8_T }
}

pub(super) fn u64_type() -> ffi::MPI_Datatype {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_UINT64_T }
}

fn min_op() -> ffi::MPI_Op {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_MIN }
}

fn any_tag() -> c_int {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_ANY_TAG }
}

fn status_ignore() -> *mut ffi::MPI_Status {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_STATUS_IGNORE }
}

fn statuses_ignore() -> *mut ffi::MPI_Status {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_STATUSES_IGNORE }
}

/// A byte count as an MPI count.
pub(super) fn count_of(bytes: usize) -> Result<c_int> {
    c_int::try_from(bytes)
        .map_err(|_| Error::Config(format!("{bytes} bytes exceed what one MPI message can count (i32::MAX)")))
}

/// An MPI return code as a result.
pub(super) fn mpi_check(code: c_int, call: &'static str) -> Result<()> {
    if code == 0 { Ok(()) } else { Err(Error::Comm(onesided::Error::Mpi { call, code })) }
}

/// The send and receive addresses of a vector all-to-all, given their counts, with a side
/// that moves nothing pointed at a byte of `empty` instead: MPI forbids the same buffer as
/// input and output, and a PE whose two sides share a buffer passes it as both while one
/// side is empty.
pub(super) fn apart(
    (send, send_counts): (*const u8, &[c_int]),
    (recv, recv_counts): (*mut u8, &[c_int]),
    empty: &mut [u8; 2],
) -> (*const u8, *mut u8) {
    let [no_send, no_recv] = empty;
    let send = if send_counts.iter().all(|&c| c == 0) { no_send as *const u8 } else { send };
    let recv = if recv_counts.iter().all(|&c| c == 0) { no_recv as *mut u8 } else { recv };
    (send, recv)
}
