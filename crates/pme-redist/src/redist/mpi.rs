//! The MPI paths, on a private duplicate of the world communicator whose errors return codes:
//!
//! - **mpi**, between partners only: one `MPI_Isend` per target, whose size is the count (or
//!   the error, under its own tag); each PME rank probes each source in source order
//!   (`MPI_Mprobe`), which tells it the count, and receives each message straight into place
//!   (`MPI_Mrecv`); forces go back one message per source the same way.
//! - **mpi-alltoallv**, over every rank, the reference (a baseline, with the `baselines`
//!   feature): `MPI_Alltoall` of the counts, then `MPI_Alltoallv` of the data.
//!
//! On both, where the step's mesh did not carry the vote (`plan.rs`), the PME ranks agree on
//! the error of a step with an `MPI_Iallreduce` on their own communicator, started once the
//! counts are in and completed before the statuses go out.
//! Every call completes its sends before it returns, whatever failed.
//!
//! In a redistribution whose links differ ([`super::mixed`]) the partner path serves the
//! pairs of one class, in steps the mixed transport interleaves with the other part's, and
//! its vote is every PME rank's.

use std::mem::size_of;

use onesided::Runtime;
use onesided::twosided::{Bytes, BytesMut, Comm, MinVote, Probed, Sends};

use super::buffers::{Buffers, Forces};
use super::plan::{Pairs, Plan};
use super::protocol::Protocol;
use crate::error::{Error, Result};
use crate::particle::{Particle, RVec};

/// Tag of a message that carries atoms or forces.
pub(super) const DATA: i32 = 1;
/// Tag of a message that carries an error marker instead.
const MARK: i32 = 2;

/// The messages of atoms a PME rank probed, by source index, and the first broken bound.
pub(super) type ProbedSources = (Vec<(usize, Probed)>, Result<()>);

/// The MPI transport: its communicators, and whether it uses the collectives.
pub(super) struct Mpi {
    comm: Comm,
    pub vote: MpiVote,
    alltoallv: bool,
    /// The pairs the partner path serves.
    pairs: Pairs,
    sends: Sends,
    /// The error marker this PE sends, where MPI reads it until the sends complete.
    marker: Box<u64>,
}

/// The PME ranks' vote on the MPI paths: an `MPI_Iallreduce` on their own communicator,
/// started once the announcements are in and completed before the statuses go out, so that
/// it travels while the mesh works.
pub(super) struct MpiVote {
    /// The PME ranks' communicator (rank order), on PME ranks only.
    pme: Option<Comm>,
    vote: MinVote,
}

impl MpiVote {
    /// # Collective
    /// Every PE of `comm` calls it: splits off the PME ranks' communicator.
    pub(super) fn collective_new(comm: &Comm, my_rank: Option<usize>) -> Self {
        MpiVote { pme: comm.collective_split(my_rank), vote: MinVote::new() }
    }

    /// Starts the vote on the step's error with this PME rank's ballot.
    ///
    /// # Collective
    /// Every PME rank calls it once per step, then [`run`](Self::run) (nothing where the plan
    /// does not vote).
    pub(super) fn start(&mut self, plan: &Plan<'_>) -> Result<()> {
        // A step every PE dropped before its return: its vote completes first.
        self.vote.wait()?;
        let Some(pme) = self.pme.as_ref().filter(|_| plan.own_vote) else { return Ok(()) };
        Ok(self.vote.start(pme, plan.ballot())?)
    }

    /// The smallest error any PME rank knows of in this step, into the plan (starting the
    /// vote first if the path has not).
    ///
    /// # Collective
    /// Every PME rank calls it once per step.
    pub(super) fn run(&mut self, plan: &mut Plan<'_>) -> Result<()> {
        if self.pme.is_none() || !plan.own_vote {
            return Ok(());
        }
        if !self.vote.started() {
            self.start(plan)?;
        }
        if let Some(agreed) = self.vote.wait()? {
            plan.take_vote(agreed);
        }
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
        let comm = Comm::collective_world(rt)?;
        let vote = MpiVote::collective_new(&comm, my_rank);
        Ok(Mpi { comm, vote, alltoallv, pairs, sends: Sends::new(), marker: Box::new(0) })
    }

    /// Starts sending `bytes` bytes from `data` to `to` under `tag`.
    ///
    /// # Safety
    /// `data` is valid for `bytes` bytes of reads, which nobody writes until
    /// [`waitall`](Self::waitall) returns.
    unsafe fn isend(&mut self, data: *const u8, bytes: usize, to: usize, tag: i32) -> Result<()> {
        // SAFETY: the caller's promise.
        Ok(unsafe { self.sends.isend(&self.comm, data, bytes, to, tag) }?)
    }

    /// Completes every send started.
    pub(super) fn waitall(&mut self) -> Result<()> {
        Ok(self.sends.waitall()?)
    }

    /// Receives a probed marker.
    fn receive_marker(message: Probed) -> Result<u64> {
        if message.bytes != size_of::<u64>() {
            return Err(Error::Verification(format!("an error marker of {} bytes, not 8", message.bytes)));
        }
        let mut marker = 0u64;
        message.receive(bytemuck::bytes_of_mut(&mut marker))?;
        Ok(marker)
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
    pub(super) fn probe_sources(&mut self, plan: &Plan<'_>, raw: &mut [u64]) -> Result<ProbedSources> {
        let mut probed = Vec::with_capacity(plan.sources().len());
        let mut outcome = Ok(());
        for (j, source) in plan.sources_of(self.pairs) {
            let message = self.comm.probe(source.pe)?;
            if message.tag == MARK {
                raw[j] = Mpi::receive_marker(message)?;
                continue;
            }
            if outcome.is_ok() {
                outcome = check_bound(message.bytes, source.bound, source.pe, message.tag);
            }
            if outcome.is_err() {
                // Received all the same, so that no message is left behind, and not kept.
                message.discard()?;
                raw[j] = 0;
                continue;
            }
            raw[j] = (message.bytes / size_of::<Particle>()) as u64;
            probed.push((j, message));
        }
        Ok((probed, outcome))
    }

    /// Receives the `probed` messages ([`probe_sources`](Self::probe_sources)) into place, once
    /// the plan has taken the counts.
    pub(super) fn receive_probed(
        plan: &Plan<'_>,
        buffers: &Buffers<'_>,
        probed: Vec<(usize, Probed)>,
    ) -> Result<()> {
        let recv = buffers.recv();
        for (j, message) in probed {
            let (at, count) = (plan.src_offsets[j], plan.src_counts[j]);
            // SAFETY: the source's range of the receive buffer, which holds the sum of the
            // bounds (each message checked against its source's when probed); only this PE
            // touches it now, through this slice alone.
            let into = unsafe { bytes_mut(recv.as_ptr().add(at).cast(), count * size_of::<Particle>()) };
            message.receive(into)?;
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
            let message = self.comm.probe(plan.grid.pe_of(r))?;
            if message.tag == MARK {
                plan.note_error(Mpi::receive_marker(message)?);
                continue;
            }
            let (at, count) = (plan.dest_offsets[r], plan.dest_counts[r]);
            let got = message.bytes / size_of::<RVec>();
            if got != count || plan.pending.is_some() {
                // Received all the same, so that no message is left behind.
                message.discard()?;
                if outcome.is_ok() {
                    outcome = plan.take_status(r, got as u64);
                }
                continue;
            }
            // SAFETY: this target's range of the force receive buffer (the offsets and counts
            // cover the home atoms); only this PE touches it now, through this slice alone.
            let into = unsafe { bytes_mut(recv.as_ptr().add(at).cast(), message.bytes) };
            message.receive(into)?;
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
        self.comm.alltoall_u64(&counts_out, &mut counts_in)?;
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
        let send = Elements::new(&send_counts, &send_offsets, size_of::<Particle>());
        let recv = Elements::new(&recv_counts, &recv_offsets, size_of::<Particle>());
        // SAFETY: the send buffer holds the packed home atoms at the targets' offsets, the
        // receive buffer the sum of the sources' bounds (each count checked just above, none
        // received beyond); this PE's own buffers, which nobody else touches during the call;
        // where they share memory, one side moves nothing (no PE has both roles then).
        let (send_bytes, recv_bytes) = unsafe {
            (send.view(buffers.send().as_ptr().cast()), recv.view_mut(buffers.recv().as_ptr().cast()))
        };
        let received = self.comm.alltoallv(send.bytes(send_bytes), recv.bytes_mut(recv_bytes));
        outcome.and(received.map_err(Error::Comm))
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
        self.comm.alltoall_u64(&status_out, &mut status_in)?;
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
        let send = Elements::new(&send_counts, &send_offsets, size_of::<RVec>());
        let recv = Elements::new(&recv_counts, &recv_offsets, size_of::<RVec>());
        // SAFETY: the caller's forces hold one per received atom (checked by return_with), the
        // force receive buffer the home atoms, which only this PE touches now.
        let recv_bytes = unsafe { recv.view_mut(buffers.force_recv().as_ptr().cast()) };
        self.comm.alltoallv(send.bytes(bytemuck::cast_slice(forces)), recv.bytes_mut(recv_bytes))?;
        outcome
    }
}

impl<'rt> Protocol<'rt> for Mpi {
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
pub(super) fn check_bound(bytes: usize, bound: usize, pe: usize, tag: i32) -> Result<()> {
    if tag == DATA && bytes > bound * size_of::<Particle>() {
        return Err(Error::Verification(format!(
            "PE {pe} sent {} atoms, more than the {bound} its plan allows",
            bytes / size_of::<Particle>()
        )));
    }
    Ok(())
}

/// Elements of `size` bytes: `counts[i]` at `offsets[i]`, as byte counts and offsets, and the
/// bytes they reach.
pub(super) struct Elements {
    counts: Vec<usize>,
    offsets: Vec<usize>,
    extent: usize,
}

impl Elements {
    pub(super) fn new(counts: &[usize], offsets: &[usize], size: usize) -> Elements {
        let extent = counts.iter().zip(offsets).filter(|(c, _)| **c > 0).map(|(c, o)| (o + c) * size).max();
        Elements {
            counts: counts.iter().map(|c| c * size).collect(),
            offsets: offsets.iter().map(|o| o * size).collect(),
            extent: extent.unwrap_or(0),
        }
    }

    /// The bytes at `data` that these elements reach (none where they move nothing).
    ///
    /// # Safety
    /// `data` is valid for the extent's reads, which nothing writes while the slice lives.
    pub(super) unsafe fn view<'a>(&self, data: *const u8) -> &'a [u8] {
        if self.extent == 0 {
            return &[];
        }
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(data, self.extent) }
    }

    /// As [`view`](Self::view), to write.
    ///
    /// # Safety
    /// `data` is valid for the extent's writes, and nothing else touches them while the slice
    /// lives.
    pub(super) unsafe fn view_mut<'a>(&self, data: *mut u8) -> &'a mut [u8] {
        if self.extent == 0 {
            return &mut [];
        }
        // SAFETY: the caller's promise.
        unsafe { bytes_mut(data, self.extent) }
    }

    pub(super) fn bytes<'a>(&'a self, data: &'a [u8]) -> Bytes<'a> {
        Bytes { data, counts: &self.counts, offsets: &self.offsets }
    }

    pub(super) fn bytes_mut<'a>(&'a self, data: &'a mut [u8]) -> BytesMut<'a> {
        BytesMut { data, counts: &self.counts, offsets: &self.offsets }
    }
}

/// `bytes` bytes at `data`, to write.
///
/// # Safety
/// `data` is valid for `bytes` bytes of writes, and nothing else touches them while the slice
/// lives.
unsafe fn bytes_mut<'a>(data: *mut u8, bytes: usize) -> &'a mut [u8] {
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts_mut(data, bytes) }
}
