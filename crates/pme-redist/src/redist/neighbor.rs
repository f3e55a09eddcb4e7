//! The MPI neighbourhood path: at each plan, two distributed graphs over the partners
//! (`MPI_Dist_graph_create_adjacent`; forward, each particle PE to its targets, and backward,
//! each PME rank to its sources, each in source or target order by PE), and every step
//! `MPI_Neighbor_alltoall` of the counts and `MPI_Neighbor_alltoallv` of the data on them:
//! MPI's own collective between partners, in place of `MPI_Alltoallv` over every rank. A
//! baseline, with the `baselines` feature; the PME ranks' vote is the MPI path's.

use std::mem::size_of;

use onesided::Runtime;
use onesided::twosided::Comm;

use super::buffers::{Buffers, Forces};
use super::mpi::{DATA, Elements, MpiVote, check_bound};
use super::plan::{ERROR, Plan};
use super::protocol::Protocol;
use crate::error::{Error, Result};
use crate::particle::{Particle, RVec};

/// The neighbourhood transport: the world's duplicate, the plan's two graphs, the vote.
pub(super) struct Neighbor {
    comm: Comm,
    vote: MpiVote,
    /// Forward (particle PEs to targets) and backward graphs of the current plan.
    graphs: Option<[Comm; 2]>,
}

impl Neighbor {
    /// # Collective
    /// Duplicates the world communicator and splits off the PME ranks'.
    pub(super) fn collective_new(rt: &Runtime, my_rank: Option<usize>) -> Result<Self> {
        let comm = Comm::collective_world(rt)?;
        let vote = MpiVote::collective_new(&comm, my_rank);
        Ok(Neighbor { comm, vote, graphs: None })
    }
}

impl<'rt> Protocol<'rt> for Neighbor {
    fn collective_replan(&mut self, plan: &Plan<'rt>) -> Result<()> {
        let sources: Vec<usize> = plan.sources().iter().map(|s| s.pe).collect();
        let targets: Vec<usize> = plan.reach.targets.iter().map(|&r| plan.grid.pe_of(r)).collect();
        self.graphs = None;
        let forward = self.comm.collective_graph(&sources, &targets)?;
        let backward = self.comm.collective_graph(&targets, &sources)?;
        self.graphs = Some([forward, backward]);
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
        forward.neighbor_alltoall_u64(&out, &mut raw)?;
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
        let send = Elements::new(&send_counts, &send_offsets, size_of::<Particle>());
        let recv = Elements::new(&recv_counts, &plan.src_offsets, size_of::<Particle>());
        // SAFETY: the send buffer holds the packed home atoms at the targets' offsets, the
        // receive buffer the sum of the sources' bounds (each count checked against its
        // source's just above, none received beyond); this PE's own buffers, which nobody else
        // touches during the call; where they share memory, one side moves nothing.
        let (send_bytes, recv_bytes) = unsafe {
            (send.view(buffers.send().as_ptr().cast()), recv.view_mut(buffers.recv().as_ptr().cast()))
        };
        let received = forward.neighbor_alltoallv(send.bytes(send_bytes), recv.bytes_mut(recv_bytes));
        outcome.and(received.map_err(Error::Comm))
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
        backward.neighbor_alltoall_u64(&out, &mut statuses)?;
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
        let send = Elements::new(&send_counts, &plan.src_offsets, size_of::<RVec>());
        let recv = Elements::new(&recv_counts, &recv_offsets, size_of::<RVec>());
        // SAFETY: the force receive buffer holds the home atoms' forces, which only this PE
        // touches now; every PE takes part with the counts both sides derived from the
        // statuses.
        let recv_bytes = unsafe { recv.view_mut(buffers.force_recv().as_ptr().cast()) };
        backward
            .neighbor_alltoallv(send.bytes(bytemuck::cast_slice(forces.data)), recv.bytes_mut(recv_bytes))?;
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
