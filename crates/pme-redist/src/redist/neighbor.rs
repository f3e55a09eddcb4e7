//! The MPI neighbourhood path: at each plan, two distributed graphs over the partners
//! (`MPI_Dist_graph_create_adjacent`; forward, each particle PE to its targets, and backward,
//! each PME rank to its sources, each in source or target order by PE), and every step
//! `MPI_Neighbor_alltoall` of the counts and `MPI_Neighbor_alltoallv` of the data on them:
//! MPI's own collective between partners, in place of `MPI_Alltoallv` over every rank.

use std::ffi::c_int;
use std::mem::{MaybeUninit, size_of};

use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::SimpleCommunicator;
use onesided::Runtime;
use onesided::watchdog::watch;

use super::mpi::{DATA, MpiVote, bytes_type, check_bound, count_of, mpi_check, u64_type};
use super::plan::{ERROR, Plan};
use super::{Buffers, Forces, Particle, Transport};
use crate::RVec;
use crate::error::{Error, Result};

/// The neighbourhood transport: the world's duplicate, the plan's two graphs, the vote.
pub(super) struct Neighbor {
    comm: SimpleCommunicator,
    vote: MpiVote,
    /// Forward (particle PEs to targets) and backward graphs of the current plan.
    graphs: Option<[SimpleCommunicator; 2]>,
}

impl Neighbor {
    /// # Collective
    /// Duplicates the world communicator and splits off the PME ranks'.
    pub(super) fn collective_new(rt: &Runtime, my_rank: Option<usize>) -> Result<Self> {
        let comm = onesided::collective_error_returning_world(rt)?;
        let vote = MpiVote::collective_new(&comm, my_rank);
        Ok(Neighbor { comm, vote, graphs: None })
    }

    /// A graph whose in-neighbours are `from` and out-neighbours `to`, in that order.
    ///
    /// # Collective
    /// Every PE of the world's duplicate calls it.
    fn graph(&self, from: &[usize], to: &[usize]) -> Result<SimpleCommunicator> {
        let from: Vec<c_int> = from.iter().map(|&p| p as c_int).collect();
        let to: Vec<c_int> = to.iter().map(|&p| p as c_int).collect();
        let mut graph = MaybeUninit::uninit();
        // SAFETY: the lists hold their lengths' ranks; MPI_UNWEIGHTED and MPI_INFO_NULL are
        // rsmpi's constants; no reordering, so ranks stay PE numbers; graph is an out-pointer.
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
        mpi_check(code, "MPI_Dist_graph_create_adjacent")?;
        // SAFETY: a live intra-communicator made just above, used only through the wrapper,
        // which frees it when dropped.
        Ok(unsafe { SimpleCommunicator::from_raw(graph.assume_init()) })
    }

    /// One u64 to each out-neighbour of `graph`, one from each in-neighbour.
    fn counts(graph: &SimpleCommunicator, out: &[u64], into: &mut [u64]) -> Result<()> {
        // SAFETY: one u64 per out- and per in-neighbour (the graph's lists, of these lengths);
        // every PE calls it on the same graph.
        let code = watch("MPI_Neighbor_alltoall", None, || unsafe {
            ffi::MPI_Neighbor_alltoall(
                out.as_ptr().cast(),
                1,
                u64_type(),
                into.as_mut_ptr().cast(),
                1,
                u64_type(),
                graph.as_raw(),
            )
        });
        mpi_check(code, "MPI_Neighbor_alltoall")
    }

    /// Elements of `size` bytes to each out-neighbour (`counts[i]` at `offsets[i]` of `send`)
    /// and from each in-neighbour (into `recv`).
    ///
    /// # Safety
    /// `send` and `recv` hold the counted ranges at their offsets; nothing else touches them
    /// during the call.
    unsafe fn data(
        graph: &SimpleCommunicator,
        send: *const u8,
        out: (&[usize], &[usize]),
        recv: *mut u8,
        into: (&[usize], &[usize]),
        size: usize,
    ) -> Result<()> {
        let ints = |v: &[usize]| v.iter().map(|&c| count_of(c * size)).collect::<Result<Vec<c_int>>>();
        let (sc, sd, rc, rd) = (ints(out.0)?, ints(out.1)?, ints(into.0)?, ints(into.1)?);
        let mut empty = [0u8; 2];
        let (send, recv) = super::mpi::apart((send, &sc), (recv, &rc), &mut empty);
        // SAFETY: the caller's promise; one count and offset per neighbour.
        let code = watch("MPI_Neighbor_alltoallv", None, || unsafe {
            ffi::MPI_Neighbor_alltoallv(
                send.cast(),
                sc.as_ptr(),
                sd.as_ptr(),
                bytes_type(),
                recv.cast(),
                rc.as_ptr(),
                rd.as_ptr(),
                bytes_type(),
                graph.as_raw(),
            )
        });
        mpi_check(code, "MPI_Neighbor_alltoallv")
    }
}

impl<'rt> Transport<'rt> for Neighbor {
    fn collective_replan(&mut self, plan: &Plan<'rt>) -> Result<()> {
        let sources: Vec<usize> = plan.sources().iter().map(|s| s.pe).collect();
        let targets: Vec<usize> = plan.reach.targets.iter().map(|&r| plan.grid.pe_of(r)).collect();
        self.graphs = None;
        self.graphs = Some([self.graph(&sources, &targets)?, self.graph(&targets, &sources)?]);
        Ok(())
    }

    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        let [forward, _] = self.graphs.as_ref().ok_or_else(unplanned)?;
        if plan.particle {
            // SAFETY: on this path no PE reads or writes another's send buffer.
            unsafe { plan.pack_into(home, buffers.send()) };
        }
        let targets = plan.reach.targets.clone();
        let out: Vec<u64> = targets.iter().map(|&r| plan.count_to(r)).collect();
        let mut raw = vec![0u64; plan.sources().len()];
        Neighbor::counts(forward, &out, &mut raw)?;
        plan.take_source_counts(&raw);
        self.vote.start(plan)?;
        let mut outcome = Ok(());
        let mut recv_counts = plan.src_counts.clone();
        for (j, s) in plan.sources().iter().enumerate() {
            if outcome.is_ok() {
                outcome = check_bound(plan.src_counts[j] * size_of::<Particle>(), s.bound, s.pe, DATA);
            }
            // Beyond its bound, received nowhere: every PE still takes part alike.
            if outcome.is_err() {
                recv_counts[j] = 0;
            }
        }
        let send_counts: Vec<usize> = targets.iter().map(|&r| plan.send_count(r)).collect();
        let send_offsets: Vec<usize> = targets.iter().map(|&r| plan.dest_offsets[r]).collect();
        // SAFETY: the send buffer holds the packed home atoms at the targets' offsets, the
        // receive buffer the sum of the sources' bounds (each count checked against its
        // source's just above, none received beyond); this PE's own buffers, which nobody else
        // touches during the call.
        let received = unsafe {
            Neighbor::data(
                forward,
                buffers.send().as_ptr().cast(),
                (&send_counts, &send_offsets),
                buffers.recv().as_ptr().cast(),
                (&recv_counts, &plan.src_offsets),
                size_of::<Particle>(),
            )
        };
        outcome.and(received)
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        _home_forces: &mut [RVec],
    ) -> Result<bool> {
        let [_, backward] = self.graphs.as_ref().ok_or_else(unplanned)?;
        self.vote.run(plan)?;
        let sources = plan.sources().len();
        let out: Vec<u64> = (0..sources).map(|j| plan.status_to(j)).collect();
        let targets = plan.reach.targets.clone();
        let mut statuses = vec![0u64; targets.len()];
        Neighbor::counts(backward, &out, &mut statuses)?;
        let failed = plan.pending.is_some();
        let send_counts: Vec<usize> =
            (0..sources).map(|j| if failed { 0 } else { plan.src_counts[j] }).collect();
        let mut outcome = Ok(());
        let (mut recv_counts, mut recv_offsets) = (vec![0; targets.len()], vec![0; targets.len()]);
        for (i, &r) in targets.iter().enumerate() {
            if outcome.is_ok() {
                outcome = plan.take_status(r, statuses[i]);
            }
            if statuses[i] & ERROR == 0 {
                (recv_counts[i], recv_offsets[i]) = (plan.dest_counts[r], plan.dest_offsets[r]);
            }
        }
        // SAFETY: the caller's forces hold one per received atom (checked by return_with),
        // the force receive buffer the home atoms; every PE takes part with the counts both
        // sides derived from the statuses.
        unsafe {
            Neighbor::data(
                backward,
                forces.data.as_ptr().cast(),
                (&send_counts, &plan.src_offsets),
                buffers.force_recv().as_ptr().cast(),
                (&recv_counts, &recv_offsets),
                size_of::<RVec>(),
            )?
        };
        outcome.map(|()| false)
    }
}

/// A step without graphs: the last plan failed.
fn unplanned() -> Error {
    Error::Config(
        "the redistribution has no plan (the last collective_plan failed): call collective_plan again"
            .to_string(),
    )
}
