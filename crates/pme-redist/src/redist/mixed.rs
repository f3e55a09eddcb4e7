//! A redistribution whose links take different wires (MPI for one class of pairs and a
//! one-sided path for the other: [`Links`](onesided::Links) so given, or what
//! [`Path::Auto`](onesided::Path::Auto) takes across nodes where the calibration chose so):
//! each pair of PEs goes by its class's transport, both in the same step ([`Pairs`]). A pair
//! is of one class from both ends, so a source and its target always agree on how their
//! atoms, counts, statuses and forces travel.
//!
//! The MPI part's sends start first and complete last, so that both parts are in flight
//! together, and no PE blocks in one part on a PE that is blocked in the other:
//!
//! - forward: a particle PE packs all its atoms into its send buffer (on the put path too:
//!   the MPI messages must start before the one-sided offers come, so the put part puts
//!   from there rather than packing into place), starts its MPI sends, and announces to its
//!   one-sided targets; a PME rank reads its one-sided sources' announcements and probes its
//!   MPI sources (the sends were all started before anyone waits), takes the counts, starts
//!   the vote, and offers (put) or gets (get); a particle PE then writes where it was offered;
//!   a PME rank receives its MPI messages and awaits its one-sided deliveries;
//! - return: the PME ranks' vote (MPI's: the PME ranks span the classes), the MPI part's
//!   sends of forces, then the one-sided part's statuses and forces, then each particle PE
//!   takes both.
//!
//! The vote is the MPI path's (`MPI_Iallreduce` among the PME ranks), since one of the
//! classes was measured faster on MPI; the one-sided part's lines hold no vote.

use super::buffers::{Buffers, Forces};
use super::get::Get;
use super::lines::Lines;
use super::mpi::Mpi;
use super::path::{Wire, Wires};
use super::plan::{Pairs, Plan};
use super::protocol::Protocol;
use super::put::Put;
use crate::error::Result;
use crate::particle::{Particle, RVec};

/// The one-sided part.
enum OneSided<'rt> {
    Put(Put<'rt>),
    Get(Get<'rt>),
}

impl<'rt> OneSided<'rt> {
    fn lines(&mut self) -> &mut Lines<'rt> {
        match self {
            OneSided::Put(put) => &mut put.lines,
            OneSided::Get(get) => &mut get.lines,
        }
    }

    fn lines_ref(&self) -> &Lines<'rt> {
        match self {
            OneSided::Put(put) => &put.lines,
            OneSided::Get(get) => &get.lines,
        }
    }
}

/// The transport of a redistribution with MPI for the pairs of one class and a one-sided
/// path for the others.
pub(super) struct Mixed<'rt> {
    one_sided: OneSided<'rt>,
    mpi: Mpi,
}

impl<'rt> Mixed<'rt> {
    /// The transport of `links` (checked: one class on MPI, the other on a one-sided path),
    /// for `m` PME ranks, this PE being PME rank `my_rank` if it is one.
    ///
    /// # Collective
    /// Every PE calls it alike.
    pub(super) fn collective_new(
        rt: &'rt onesided::Runtime,
        name: &dyn Fn(&str) -> String,
        m: usize,
        my_rank: Option<usize>,
        links: Wires,
    ) -> Result<Self> {
        let (one_sided_path, pairs, mpi_pairs) = if links.same_node == Wire::Mpi {
            (links.other_node, Pairs::OtherNode, Pairs::SameNode)
        } else {
            (links.same_node, Pairs::SameNode, Pairs::OtherNode)
        };
        let one_sided = match one_sided_path {
            Wire::Get => OneSided::Get(Get::collective_new(rt, name, m, pairs)?),
            _ => OneSided::Put(Put::collective_new(rt, name, m, pairs)?),
        };
        Ok(Mixed { one_sided, mpi: Mpi::collective_new(rt, my_rank, false, mpi_pairs)? })
    }

    /// The forward but for completing the MPI sends.
    fn forward_parts(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        home: &[Particle],
    ) -> Result<()> {
        if plan.particle {
            match &mut self.one_sided {
                // SAFETY: on the put path no other PE reads or writes this PE's send buffer,
                // and this PE's MPI sends from it completed in the last step.
                OneSided::Put(_) => unsafe { plan.pack_into(home, buffers.send()) },
                OneSided::Get(get) => get.pack(plan, buffers, home)?,
            }
            self.mpi.send_atoms(plan, buffers)?;
            self.one_sided.lines().announce(plan)?;
        }
        let mut probed = (Vec::new(), Ok(()));
        if plan.my_rank.is_some() {
            let announced = self.one_sided.lines().announcements(plan)?;
            let mut raw: Vec<u64> = announced.iter().map(|l| l[0]).collect();
            probed = self.mpi.probe_sources(plan, &mut raw)?;
            plan.take_source_counts(&raw);
            self.mpi.vote.start(plan)?;
            match &mut self.one_sided {
                OneSided::Put(put) => put.offer(plan, &announced)?,
                OneSided::Get(get) => get.take_atoms(plan, buffers, &announced)?,
            }
        }
        if let OneSided::Put(put) = &self.one_sided {
            put.write(plan, buffers, None)?;
        }
        if plan.my_rank.is_some() {
            let (messages, outcome) = probed;
            Mpi::receive_probed(plan, buffers, messages)?;
            if let OneSided::Put(put) = &self.one_sided {
                put.await_delivered(plan)?;
            }
            outcome?;
        }
        Ok(())
    }

    /// The return but for completing the MPI sends.
    fn backward_parts(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        self.mpi.vote.run(plan)?;
        if plan.my_rank.is_some() {
            self.mpi.send_forces(plan, forces.data)?;
        }
        let (lines, push) = match &mut self.one_sided {
            OneSided::Put(put) => (&mut put.lines, Some(put.force_at.as_slice())),
            OneSided::Get(get) => (&mut get.lines, None),
        };
        lines.send_back(plan, buffers, forces, push)?;
        let unpacked = lines.take_back(plan, buffers, home_forces);
        let received = if plan.particle { self.mpi.receive_forces(plan, buffers) } else { Ok(()) };
        // Every target's forces taken before the first error is reported, so that none is
        // left behind.
        let unpacked = unpacked?;
        received?;
        Ok(unpacked)
    }
}

impl<'rt> Protocol<'rt> for Mixed<'rt> {
    fn collective_replan(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.one_sided.lines().collective_fit(plan)
    }

    fn symmetric_bytes(&self) -> usize {
        self.one_sided.lines_ref().symmetric_bytes()
    }

    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        let result = self.forward_parts(plan, buffers, home);
        let waited = self.mpi.waitall();
        result.and(waited)
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        let result = self.backward_parts(plan, buffers, forces, home_forces);
        let waited = self.mpi.waitall();
        let unpacked = result?;
        waited?;
        Ok(unpacked)
    }

    fn forces_free(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.one_sided.lines().forces_free(plan)
    }
}
