//! One step of a redistribution, between its forward half and the return of the forces: what a
//! PME rank received, and its share for the mesh.

use std::fmt;

use super::plan::Stage;
use super::redistribution::Redistribution;
use crate::error::{Error, Result};
use crate::particle::{Mesh, Particle, RVec, Vote};

/// One step of the redistribution, from [`Redistribution::redistribute`] to
/// [`return_forces`](Self::return_forces): on a PME rank, the atoms it received and the forces
/// on them ([`mesh`](Self::mesh)); its plan is [`redistribution`](Self::redistribution)'s.
///
/// A step dropped without returning forces returns none; every PE must then skip the return
/// alike.
#[must_use = "the forces go back only with return_forces"]
pub struct Step<'r, 'rt> {
    pub(super) redist: &'r mut Redistribution<'rt>,
}

impl fmt::Debug for Step<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step").field("redist", &*self.redist).finish()
    }
}

impl<'rt> Step<'_, 'rt> {
    /// The redistribution the step belongs to: what it says of its plan (the PME rank, the
    /// targets and sources, the memory) while the step holds it.
    pub fn redistribution(&self) -> &Redistribution<'rt> {
        self.redist
    }

    /// The atoms this PME rank received, by source PE (empty elsewhere).
    pub fn received(&self) -> &[Particle] {
        let hop = self.redist.last_hop();
        // SAFETY: other PEs write this PE's receive buffer only inside redistribute (which
        // takes &mut of the redistribution, held by this step), and on the get path nobody but
        // this PE writes it at all.
        unsafe { hop.buffers.recv().local_range(0..hop.plan.received) }
    }

    /// How many atoms this PME rank received from each of its sources in this step:
    /// `(source PE, count)`, by PE (empty elsewhere).
    pub fn received_counts(&self) -> Vec<(usize, usize)> {
        let plan = &self.redist.last_hop().plan;
        plan.sources().iter().zip(&plan.src_counts).map(|(s, &count)| (s.pe, count)).collect()
    }

    /// The atoms this PME rank received and the forces on them, for the mesh.
    pub fn mesh(&mut self) -> Mesh<'_> {
        let Redistribution { buffers, plan, .. } = self.redist.last_hop_mut();
        let received = plan.received;
        // SAFETY: as in received.
        let atoms = unsafe { buffers.recv().local_range(0..received) };
        // SAFETY: other PEs never write this PE's force buffer (the put path's returns write
        // the sources' force receive buffers: another allocation where PEs have both roles,
        // every PE doing PME or a relay's second hop, and otherwise those of PEs that hold no
        // mesh); on the one-sided paths they read it only between this PE's status and their
        // taken signals, which redistribute awaited for every return so far; on the MPI paths
        // only this PE touches it. This step's `&mut` keeps every other view of it away while
        // the slice lives, and the atoms live in another allocation (on an MPI relay another
        // bank, RELAY_BANKS), so the two views do not overlap.
        let forces = unsafe { buffers.force_send().local_range_mut(0..received) };
        let vote = (plan.votes && plan.my_rank.is_some()).then(|| {
            plan.mesh_agreed = None;
            Vote { ballot: plan.ballot(), pes: plan.pme_pes, agreed: &mut plan.mesh_agreed }
        });
        Mesh { atoms, forces, vote }
    }

    /// Sends the forces the mesh wrote ([`mesh`](Self::mesh)) back to the atoms' PEs, and
    /// writes this PE's home forces into `home_forces` (one per home atom, in home order).
    /// Nothing is staged on the PME rank; on the one-sided paths each PE reads its forces
    /// where they lie, on the put path too: writing forces into memory the source has just
    /// read, and its reading them back, costs more than its one pull of them (with a relay on
    /// the put path, the relay puts them to its particle PEs).
    ///
    /// # Collective
    /// Every PE must call it, or [`return_forces_from`](Self::return_forces_from).
    ///
    /// # Errors
    /// [`Error::MovedTooFar`] on every PE when any PE found an atom beyond the slabs or
    /// pencils its plan lets it reach in this step, naming the same atom everywhere; that
    /// step's forces are not delivered and `home_forces` is unchanged. Rebuild the plan
    /// ([`Redistribution::collective_plan`]) and go on. [`Error::Config`] when `home_forces`
    /// is not one per home atom (on this PE only).
    pub fn return_forces(self, home_forces: &mut [RVec]) -> Result<()> {
        self.redist.collective_return(None, home_forces)
    }

    /// [`return_forces`](Self::return_forces) of `forces` from the caller's array (one per
    /// received atom, in their order; empty on PEs that are not PME ranks): on the put path
    /// put into the sources' force buffers before the status that says so, on the get path
    /// staged first where the sources read them.
    ///
    /// # Collective
    /// As [`return_forces`](Self::return_forces).
    ///
    /// # Errors
    /// As [`return_forces`](Self::return_forces), and [`Error::Config`] when `forces` is not
    /// one per received atom.
    pub fn return_forces_from(self, forces: &[RVec], home_forces: &mut [RVec]) -> Result<()> {
        self.redist.collective_return(Some(forces), home_forces)
    }
}

impl<'rt> Redistribution<'rt> {
    /// Sends every home atom (in the order of the plan's home atoms) to its PME rank and
    /// returns the step's view: on a PME rank, its atoms by source PE ([`Step::mesh`]).
    ///
    /// An atom that moved too far for the plan is not an error yet: the step goes on, so that
    /// no PE is left waiting, and [`Step::return_forces`] reports it on every PE.
    ///
    /// On the one-sided paths a PME rank returns only once every source has taken the forces
    /// of the last return from its force buffer, so the mesh never writes them while another
    /// PE reads them.
    ///
    /// # Collective
    /// Every PE must call it.
    ///
    /// # Errors
    /// [`Error::PlanOutOfDate`] when `home` is not the plan's number of home atoms (on this
    /// PE only); what the transport reports.
    pub fn redistribute(&mut self, home: &[Particle]) -> Result<Step<'_, 'rt>> {
        // The stage along x takes what the stage along y brought, up to its plan's count.
        let fits = match self.plan.stage {
            Stage::AlongX => home.len() <= self.plan.home_count(),
            _ => home.len() == self.plan.home_count(),
        };
        if !fits || home.len() > self.buffers.send().capacity() {
            return Err(Error::PlanOutOfDate {
                pe: self.plan.rt.my_pe(),
                home: home.len(),
                planned: self.plan.home_count(),
            });
        }
        self.plan.begin_step(home);
        self.transport.forward(&mut self.plan, &self.buffers, home)?;
        // The PEs' reads of the last step's forces end before the mesh, or with a relay the
        // second hop's return, writes them.
        self.transport.forces_free(&self.plan)?;
        if let Some(onward) = &mut self.onward {
            // SAFETY: the first hop's atoms have all arrived (forward returned); no other PE
            // writes this PE's receive buffer again before the next step's forward, and this
            // PE writes it (or, on an MPI relay, a buffer sharing its bank) only in the
            // return, after this view's last use; the second hop only reads them, into
            // buffers of other banks (RELAY_BANKS).
            let relayed = unsafe { self.buffers.recv().local_range(0..self.plan.received) };
            let origins = &mut onward.hop.plan.origins;
            origins.clear();
            origins.extend(self.plan.src_offsets.iter().zip(self.plan.sources()).map(|(&at, s)| (at, s.pe)));
            // An error the stage along y found or heard of goes on with the stage along x,
            // whose vote tells every PME rank.
            if self.plan.stage != Stage::Whole {
                onward.hop.plan.inherited = self.plan.pending;
            }
            drop(onward.hop.redistribute(relayed)?);
        }
        Ok(Step { redist: self })
    }
}
