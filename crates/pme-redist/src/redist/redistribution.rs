//! The redistribution: its plan, buffers, agreement and transport, with a relay's onward hop;
//! a plan at every repartition, a step's forward half, and the return of the forces.
//!
//! With a relay ([`RedistBuilder::relay`](super::RedistBuilder::relay)) a redistribution is
//! two hops of the same kind on the same wires. The first sends all of a particle PE's atoms
//! to its relay PME rank: one target, and no vote, since no atom can be too far for it. The
//! relay's received atoms are the home atoms of the second, among the PME ranks, with the
//! displacement margin, the partners and the vote; at each plan one round trip of the first
//! hop tells the relays where the atoms are now, and the second is planned from there. Forces
//! come back through the second hop into the first hop's force buffer, then through the
//! first. An atom too far is reported as held by its particle PE: the second hop knows which
//! source each run of its home atoms came from (`Plan::origins`). On pencils of two rows and
//! two columns or more the second hop is two stages (`plan::Stage`): along y within the
//! relay's row, each atom checked against its whole reach, then along x within each column,
//! planned from the counts per row that the first stage's agreement carries (its home atoms
//! change every step, so it has targets and bounds but no per-atom reach); the second stage
//! votes, carrying what the first found. On the MPI paths, where no buffer is symmetric, the
//! hops' buffers take turns in four banks of local memory (`store::RELAY_BANKS`).

use std::fmt;
use std::rc::Rc;

use super::agreement::Agreement;
use super::buffers::{Buffers, Forces};
use super::by_rank;
use super::path::{Wire, Wires};
use super::plan::{self, Plan, Stage, agree_home};
use super::protocol::Protocol;
use super::store::Bank;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;
use crate::model::Reach;
use crate::particle::{Particle, RVec};
use onesided::Links;

/// The redistribution of one set of home atoms to the PME ranks, and of their forces back.
///
/// Built once ([`builder`](Self::builder)), planned at every repartition
/// ([`collective_plan`](Self::collective_plan)), and every step:
/// [`redistribute`](Self::redistribute), which returns the step's view; on PME ranks, the
/// mesh reads the atoms and writes their forces ([`Step::mesh`](crate::Step::mesh)); then
/// [`Step::return_forces`](crate::Step::return_forces) brings every PE its home atoms' forces in home order.
pub struct Redistribution<'rt> {
    pub(super) links: Wires,
    pub(super) plan: Plan<'rt>,
    pub(super) buffers: Buffers<'rt>,
    pub(super) agreement: Agreement<'rt>,
    pub(super) transport: Box<dyn Protocol<'rt> + 'rt>,
    /// With a relay ([`RedistBuilder::relay`](super::RedistBuilder::relay)), the second hop:
    /// from each relay PME rank, whose received atoms are its home atoms, to the atoms' own PME
    /// ranks.
    pub(super) onward: Option<Box<Onward<'rt>>>,
    /// With a relay on the MPI paths, the banks its hops' buffers take turns in (held by the
    /// first hop).
    pub(super) banks: Vec<Rc<Bank>>,
}

/// The second hop of a relay (the forces it brings back to the relay PME rank land in the
/// first hop's force buffer, from which the first hop returns them).
pub(super) struct Onward<'rt> {
    pub(super) hop: Redistribution<'rt>,
}

impl fmt::Debug for Redistribution<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redistribution")
            .field("links", &self.links)
            .field("pme_rank", &self.plan.my_rank)
            .field("pme_ranks", &self.plan.grid.ranks())
            .field("home_count", &self.plan.home_count())
            .field("received", &self.last_hop().plan.received)
            .finish_non_exhaustive()
    }
}

impl<'rt> Redistribution<'rt> {
    /// The transport of each class of link ([`Path::Auto`](onesided::Path::Auto) made
    /// concrete; a baseline's are [`Transport::Mpi`](onesided::Transport::Mpi)).
    pub fn links(&self) -> Links {
        self.links.links()
    }

    /// This PE's PME rank, if it is one.
    pub fn pme_rank(&self) -> Option<usize> {
        self.plan.my_rank
    }

    /// The PME grid.
    pub fn grid(&self) -> &PmeGrid {
        &self.plan.grid
    }

    /// Builds the plan for a new set of home atoms: records which PME ranks each of this PE's
    /// `home` atoms may reach from where it is now (later steps report an atom found beyond
    /// them as having moved too far), agrees with those PME ranks that this PE will send to
    /// them, and grows the buffers to the most any PE now needs (over-allocated by a fifth, so
    /// that small changes cost no reallocation): for the home atoms, and on PME ranks for
    /// what their sources can send. Call it whenever the home atoms are (re)partitioned; the
    /// following steps must pass the same home atoms (positions may change, their number and
    /// order may not).
    ///
    /// # Collective
    /// Every PE must call it, each with its own home atoms (none on PME-only PEs).
    ///
    /// With a relay, the relay PME ranks learn where the atoms are now with one round trip
    /// of the first hop, and the second hop is planned from there.
    ///
    /// # Errors
    /// On every PE, the plan left as it was: [`Error::Config`] when a PME-only PE is given
    /// home atoms; [`Error::Comm`] when the symmetric heap cannot hold the grown buffers
    /// (naming the variable that raises its size). With a relay, an error of a later hop's
    /// plan (the second hop, or on pencils either of its stages) leaves the hops before it
    /// planned anew and the rest as they were: plan again before the next step.
    pub fn collective_plan(&mut self, home: &[Particle]) -> Result<()> {
        agree_home(self.plan.rt, self.plan.particle, home)?;
        self.collective_partners(home)?;
        if self.plan.stage != Stage::Whole {
            self.collective_plan_along_x()?;
        } else if self.onward.is_some() {
            let received = self.collective_round_trip(home)?;
            if let Some(onward) = &mut self.onward {
                onward.hop.collective_plan(&received)?;
            }
        }
        Ok(())
    }

    /// On the stage along y of a relay's second hop, plans its onward stage along x: the
    /// targets and bounds this stage agreed (`(rank, bound)`), for up to what this stage can
    /// receive a step.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    pub(super) fn collective_plan_along_x(&mut self) -> Result<()> {
        let Redistribution { plan, onward, .. } = self;
        let capacity = plan.sources().iter().map(|s| s.bound).sum();
        match onward {
            Some(onward) => onward.hop.collective_plan_given(&plan.agreed.along_x, capacity),
            None => Ok(()),
        }
    }

    /// The plan of the stage along x of a relay's second hop from the targets and bounds the
    /// stage along y agreed (`(rank, bound)`), for up to `capacity` atoms a step.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    pub(super) fn collective_plan_given(
        &mut self,
        along_x: &[(usize, usize)],
        capacity: usize,
    ) -> Result<()> {
        let reach = if self.plan.particle {
            let (mut targets, mut bounds): (Vec<usize>, Vec<usize>) = along_x.iter().copied().unzip();
            if targets.is_empty() {
                // Nothing may come here: one target all the same, this rank, to hear of errors.
                targets.push(self.plan.my_rank.unwrap_or(0));
                bounds.push(0);
            }
            Reach::given(&self.plan.grid, targets, bounds, capacity)
        } else {
            Reach::default()
        };
        self.collective_partners_with(reach, capacity)
    }

    /// One step of this hop alone, with no forces: the atoms this PME rank receives from
    /// `home` (on every PE, the first hop of a relay at each plan).
    ///
    /// # Collective
    /// Every PE calls it.
    pub(super) fn collective_round_trip(&mut self, home: &[Particle]) -> Result<Vec<Particle>> {
        let onward = self.onward.take();
        let result = (|| {
            let step = self.redistribute(home)?;
            let received = step.received().to_vec();
            let mut home_forces = vec![[0.0; 3]; home.len()];
            step.return_forces_from(&vec![[0.0; 3]; received.len()], &mut home_forces)?;
            Ok(received)
        })();
        self.onward = onward;
        result
    }

    /// The hop whose PME ranks hold the atoms for the mesh: the second of a relay, or this.
    pub(super) fn last_hop(&self) -> &Redistribution<'rt> {
        self.onward.as_ref().map_or(self, |o| o.hop.last_hop())
    }

    /// [`last_hop`](Self::last_hop), to change.
    pub(super) fn last_hop_mut(&mut self) -> &mut Redistribution<'rt> {
        match self.onward {
            Some(ref mut onward) => onward.hop.last_hop_mut(),
            None => self,
        }
    }

    /// The partners of the plan for `home`: the reach of each atom, the agreement with the
    /// targets, the receive buffers grown to the bounds, and the transport fitted.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    pub(super) fn collective_partners(&mut self, home: &[Particle]) -> Result<()> {
        let reach = self.plan.reach(home);
        self.collective_partners_with(reach, home.len())
    }

    /// [`collective_partners`](Self::collective_partners) for a reach already made, for up to
    /// `home` home atoms.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    pub(super) fn collective_partners_with(&mut self, reach: Reach, home: usize) -> Result<()> {
        let plan = &mut self.plan;
        let agreed = self.agreement.collective_agree(
            plan.rt,
            &plan.grid,
            plan.my_rank,
            &reach.targets,
            &reach.bounds,
            &reach.rows,
        )?;
        // Each source sends at most its bound, so this is never more than the system.
        let share = agreed.sources.iter().map(|s| s.bound).sum::<usize>();
        // SAFETY: plans are made under `&mut` of the first hop (builds, collective_plan), when
        // no step, and so no view of any buffer, lives.
        unsafe { self.buffers.collective_fit(home, share)? };
        let old = plan.replace(reach, agreed);
        // A transport that cannot follow (no memory for its slots, on every PE alike) leaves
        // the old plan in place, whose slots it still has.
        if let Err(e) = self.transport.collective_replan(&self.plan) {
            self.plan.replace(old.0, old.1);
            return Err(e);
        }
        Ok(())
    }

    /// The atoms this PME rank received for its mesh in the last step (zero elsewhere).
    pub fn last_received(&self) -> usize {
        self.last_hop().plan.received
    }

    /// The PME ranks this PE sends to under the current plan: a particle PE's targets (its
    /// relay alone, with a relay), and with a relay a PME rank's targets in the last hop (on
    /// pencils, the second stage's: ranks of its column); none elsewhere.
    pub fn targets(&self) -> &[usize] {
        let hop = if self.plan.particle { self } else { self.last_hop() };
        if hop.plan.particle { &hop.plan.reach.targets } else { &[] }
    }

    /// The PEs whose atoms this PME rank's mesh receives under the current plan (none
    /// elsewhere), ascending: particle PEs, or with a relay the PME ranks of the last hop (the
    /// relays, or on pencils the ranks of this column that passed the atoms on).
    pub fn sources(&self) -> Vec<usize> {
        self.last_hop().plan.sources().iter().map(|s| s.pe).collect()
    }

    /// With a relay, the particle PEs this PME rank relays for, ascending (none elsewhere,
    /// and without a relay).
    pub fn relayed_for(&self) -> Vec<usize> {
        if self.onward.is_some() { self.plan.sources().iter().map(|s| s.pe).collect() } else { Vec::new() }
    }

    /// With a relay, the atoms this PME rank received in the last step from the particle PEs
    /// it relays for (zero elsewhere, and without a relay).
    pub fn last_relayed(&self) -> usize {
        if self.onward.is_some() { self.plan.received } else { 0 }
    }

    /// The symmetric memory this redistribution holds on each PE, in bytes (the same on every
    /// PE): the buffers other PEs read or write, sized by the most any PE's home atoms or any
    /// PME rank's bounds need, and its transport's slots; with a relay, of every hop. None of
    /// the buffers on the MPI paths.
    pub fn symmetric_bytes(&self) -> usize {
        let own =
            self.buffers.bytes().0 + self.agreement.symmetric_bytes() + self.transport.symmetric_bytes();
        own + self.onward.as_ref().map_or(0, |o| o.hop.symmetric_bytes())
    }

    /// The memory of this PE's own that the redistribution's buffers hold, in bytes: those no
    /// other PE reads or writes (every buffer on the MPI paths, the receive sides on the get
    /// path, the send side on the put path), sized by this PE's own home atoms and bounds;
    /// with a relay, of every hop.
    pub fn local_bytes(&self) -> usize {
        let banks: usize = self.banks.iter().map(|b| b.bytes()).sum();
        banks + self.buffers.bytes().1 + self.onward.as_ref().map_or(0, |o| o.hop.local_bytes())
    }
}

impl Redistribution<'_> {
    /// Returns the mesh's `forces` (`None`: where the mesh wrote them, in place) and brings
    /// this PE its home forces, through both hops with a relay.
    ///
    /// # Collective
    /// Every PE calls it once per step.
    pub(super) fn collective_return(
        &mut self,
        forces: Option<&[RVec]>,
        home_forces: &mut [RVec],
    ) -> Result<()> {
        if let Some(onward) = &mut self.onward {
            // The second hop's forces come to the relay PME rank, and go on from there.
            let received = self.plan.received;
            // SAFETY: this hop's force buffer: no PE reads it now (on the one-sided paths
            // redistribute waited until every source had taken the last return's forces, and
            // this return's statuses go out only below; on MPI only this PE touches it), the
            // put path's sources write their own force buffers, not this one, and no other
            // view of it lives: the mesh's are the last hop's buffers, and on an MPI relay no
            // buffer in use during the later hops' returns shares its bank (RELAY_BANKS).
            let staged = unsafe { self.buffers.force_send().local_range_mut(0..received) };
            let failed = match onward.hop.collective_return(forces, staged) {
                Ok(()) => None,
                // Every PME rank heard of it in the second hop's vote: the first hop's
                // statuses carry it to every particle PE.
                Err(Error::MovedTooFar { atom, pe }) => {
                    self.plan.note_error(plan::marker(atom, pe));
                    None
                }
                // The first hop returns all the same, so that no particle PE waits for this
                // relay; they hear that it failed, and it reports its own error.
                Err(e) => {
                    self.plan.note_error(plan::RELAY_FAILED);
                    Some(e)
                }
            };
            // SAFETY: as above; this PE is done writing it, and it is only read from here on.
            let data = unsafe { self.buffers.force_send().local_range(0..received) };
            // The put path puts them into the sources' force buffers (on one node faster than
            // each source reading them here: pme_relay, docs/bench/PME-SCALE.md); the others
            // return them from where they lie.
            let forces = Forces { data, in_place: self.links.storage() != Wire::Put };
            let first =
                return_with(&mut self.plan, &self.buffers, self.transport.as_mut(), forces, home_forces);
            return failed.map_or(first, Err);
        }
        let forces = match forces {
            Some(data) => Forces { data, in_place: false },
            None => {
                // SAFETY: nobody writes the force buffer during the return: other PEs never
                // write it, and this PE writes it only through a step's mesh, which the
                // caller's step has consumed.
                let data = unsafe { self.buffers.force_send().local_range(0..self.plan.received) };
                Forces { data, in_place: true }
            }
        };
        return_with(&mut self.plan, &self.buffers, self.transport.as_mut(), forces, home_forces)
    }
}

/// Brings every PE its home forces, from `forces` (in place or the caller's), on `transport`.
fn return_with<'rt>(
    plan: &mut Plan<'rt>,
    buffers: &Buffers<'rt>,
    transport: &mut (dyn Protocol<'rt> + 'rt),
    forces: Forces<'_>,
    home_forces: &mut [RVec],
) -> Result<()> {
    let n_home = plan.dest.len();
    if forces.data.len() != plan.received || home_forces.len() != n_home {
        return Err(Error::Config(format!(
            "PE {} returns {} forces for {} received atoms into room for {} home forces (needs {n_home})",
            plan.rt.my_pe(),
            forces.data.len(),
            plan.received,
            home_forces.len()
        )));
    }
    // Where the mesh's transposes carried the vote (on every PME rank, or on none), the
    // transport need not.
    plan.take_mesh_vote();
    let unpacked = transport.backward(plan, buffers, forces, home_forces)?;
    plan.outcome()?;
    if !unpacked {
        // SAFETY: the forces for this step have all arrived (backward returned); no PE writes
        // this PE's force receive buffer before the next return.
        let arrived = unsafe { buffers.force_recv().local_range(0..n_home) };
        plan.unpack(by_rank::split(arrived, &plan.rank_counts()), home_forces);
    }
    Ok(())
}
