//! What the one-sided paths share: lines of a cache line each, put with a signal, between a
//! particle PE and its targets only. A source announces its step to each target in the
//! target's inbox (its count, or its error, and where its atoms lie), in the slot the plan's
//! agreement gave it; a PME rank replies in the source's lines, at its index among the
//! source's targets (on the put path, where the atoms go; on both, the status of the step
//! and where the forces lie). Counters count what has been taken, monotonically over the
//! calls, so that nothing is ever reset. The PME ranks' vote lives here too.
//!
//! The slots grow with the most sources of any PME rank and the most targets of any PE,
//! agreed at each plan, never with the job.
//!
//! Forces left in a PME rank's force buffer are read where they lie: a particle PE whose
//! targets with forces for it are all on its node reads them through the mapping
//! ([`SymArray::remote_range`]) and unpacks them into home order in the same pass, getting
//! nothing first; otherwise it gets them into its force receive buffer and unpacks from there.
//! It then adds one to each such target's `back_taken`, which the target awaits before its
//! force buffer is written again.
//!
//! In a redistribution whose links differ ([`super::mixed`]) the lines serve the pairs of one
//! class only ([`Pairs`]), and the vote is MPI's.

use onesided::{Runtime, SignalArray, SymArray};

use super::buffers::{Buffers, Forces};
use super::by_rank;
use super::plan::{Pairs, Plan};
use super::vote::Vote;
use crate::error::Result;
use crate::particle::RVec;

/// Words per slot of the get path's tables: one cache line.
pub(super) const LINE: usize = 8;

/// One line.
pub(super) type Line = [u64; LINE];

/// Slots per source or target, and their signals.
struct Slots<'rt> {
    lines: SymArray<'rt, Line>,
    signals: SignalArray<'rt>,
}

impl<'rt> Slots<'rt> {
    fn collective_alloc(rt: &'rt Runtime, name: &str, len: usize) -> Result<Self> {
        Ok(Slots {
            lines: SymArray::collective_alloc(rt, name, len)?,
            signals: SignalArray::collective_alloc(rt, &format!("{name} signals"), len)?,
        })
    }

    fn bytes(&self) -> usize {
        self.lines.len() * (size_of::<Line>() + size_of::<u64>())
    }

    /// Puts `line` into slot `slot` of `pe` and raises its signal to `k`.
    fn put(&self, pe: usize, slot: usize, line: Line, k: u64) -> Result<()> {
        Ok(self.lines.put_signal(pe, slot, &[line], &self.signals, slot, k)?)
    }

    /// The lines of `slots` (this PE's own, each with its index among `n`) once each signal
    /// reaches `k`, as they come; by index, zero where no slot was awaited.
    fn await_all(&self, n: usize, slots: impl Iterator<Item = (usize, usize)>, k: u64) -> Result<Vec<Line>> {
        let mut lines = vec![[0u64; LINE]; n];
        let (mut pending, mut which): (Vec<(usize, u64)>, Vec<usize>) =
            slots.map(|(index, slot)| ((slot, k), index)).unzip();
        while !pending.is_empty() {
            let i = self.signals.wait_any_ge(&pending)?;
            let (slot, at) = (pending.swap_remove(i).0, which.swap_remove(i));
            self.lines.read_local(slot, &mut lines[at..at + 1])?;
        }
        Ok(lines)
    }
}

/// The one-sided paths' lines, counters and vote.
pub(super) struct Lines<'rt> {
    rt: &'rt Runtime,
    name: String,
    /// The pairs these lines serve.
    pairs: Pairs,
    /// On a PME rank, per source slot: the source's announcement of the step.
    inbox: Slots<'rt>,
    /// On a particle PE, per target: where the put path's atoms go in this step.
    offers: Slots<'rt>,
    /// On a particle PE, per target: the status of the step and where its forces lie.
    statuses: Slots<'rt>,
    /// On a PME rank, per source slot: the put path's atoms have arrived.
    pub delivered: SignalArray<'rt>,
    /// On a source: targets that have taken its atoms, over all calls; and how many that
    /// must be before the send buffer is packed again.
    taken: SignalArray<'rt>,
    owed_taken: u64,
    /// On a PME rank: sources that have taken their forces, over all returns; and how many
    /// that must be before the forces are written again.
    back_taken: SignalArray<'rt>,
    owed_back_taken: u64,
    /// The PME ranks' vote, where the lines serve every pair.
    vote: Option<Vote<'rt>>,
    /// What this PME rank brought to the vote of the current step, and which step that is
    /// (0: none started yet).
    ballot: u64,
    ballot_step: u64,
    /// Slots per source side and per target side.
    capacity: (usize, usize),
}

impl<'rt> Lines<'rt> {
    /// Lines for the pairs `pairs` serves, with the vote of `m` PME ranks where that is
    /// every pair.
    ///
    /// # Collective
    /// Every PE allocates the same lines.
    pub fn collective_new(
        rt: &'rt Runtime,
        name: &dyn Fn(&str) -> String,
        m: usize,
        pairs: Pairs,
    ) -> Result<Self> {
        let slots = |what: &str| Slots::collective_alloc(rt, &name(what), 1);
        Ok(Lines {
            rt,
            name: name(""),
            pairs,
            inbox: slots("announcements")?,
            offers: slots("offers")?,
            statuses: slots("statuses")?,
            delivered: SignalArray::collective_alloc(rt, &name("delivered"), 1)?,
            taken: SignalArray::collective_alloc(rt, &name("taken"), 1)?,
            owed_taken: 0,
            back_taken: SignalArray::collective_alloc(rt, &name("forces taken"), 1)?,
            owed_back_taken: 0,
            vote: (pairs == Pairs::All).then(|| Vote::collective_new(rt, name, m)).transpose()?,
            ballot: u64::MAX,
            ballot_step: 0,
            capacity: (1, 1),
        })
    }

    /// The pairs these lines serve.
    pub fn pairs(&self) -> Pairs {
        self.pairs
    }

    /// Symmetric bytes held.
    pub fn symmetric_bytes(&self) -> usize {
        self.inbox.bytes()
            + self.offers.bytes()
            + self.statuses.bytes()
            + 8 * (self.delivered.len() + 2)
            + self.vote.as_ref().map_or(0, Vote::symmetric_bytes)
    }

    /// Grows the slots to the plan's most sources and targets (with a fifth to spare).
    ///
    /// # Collective
    /// Every PE calls it with the plan of the same agreement.
    pub fn collective_fit(&mut self, plan: &Plan<'rt>) -> Result<()> {
        let rt = self.rt;
        let (sources, targets) = (plan.agreed.most_sources.max(1), plan.agreed.most_targets.max(1));
        let spare = |n: usize| n + n / 5;
        if sources > self.capacity.0 {
            let len = spare(sources);
            self.inbox = Slots::collective_alloc(rt, &format!("{}announcements", self.name), len)?;
            self.delivered = SignalArray::collective_alloc(rt, &format!("{}delivered", self.name), len)?;
            self.capacity.0 = len;
        }
        if targets > self.capacity.1 {
            let len = spare(targets);
            self.offers = Slots::collective_alloc(rt, &format!("{}offers", self.name), len)?;
            self.statuses = Slots::collective_alloc(rt, &format!("{}statuses", self.name), len)?;
            self.capacity.1 = len;
        }
        Ok(())
    }

    /// Waits until every target has taken this source's atoms of the last call, so that its
    /// send buffer may be packed again; then counts this call's.
    pub fn await_taken(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.taken.wait_ge(0, self.owed_taken)?;
        self.owed_taken += plan.targets_of(self.pairs).count() as u64;
        Ok(())
    }

    /// Tells source PE `pe` that this PME rank has taken its atoms.
    pub fn took(&self, pe: usize) -> Result<()> {
        Ok(self.taken.add(pe, 0, 1)?)
    }

    /// Announces this step to every target served: this PE's count for it (or its error), and where
    /// its atoms for it start in the packed home order (on the put path, where their forces go
    /// in the force receive buffer).
    pub fn announce(&self, plan: &Plan<'rt>) -> Result<()> {
        for (_, r, slot) in plan.targets_of(self.pairs) {
            let mut line = [0u64; LINE];
            line[0] = plan.count_to(r);
            line[1] = plan.dest_offsets[r] as u64;
            self.inbox.put(plan.grid.pe_of(r), slot, line, plan.calls)?;
        }
        Ok(())
    }

    /// Every source's announcement of this step, in source order, read as each arrives (zero
    /// lines for the sources not served).
    pub fn announcements(&self, plan: &Plan<'rt>) -> Result<Vec<Line>> {
        let served = plan.sources_of(self.pairs).map(|(j, s)| (j, s.slot));
        self.inbox.await_all(plan.sources().len(), served, plan.calls)
    }

    /// The put path's offer to source `j`: where its atoms go.
    pub fn offer(&self, plan: &Plan<'rt>, j: usize, line: Line) -> Result<()> {
        let source = plan.sources()[j];
        self.offers.put(source.pe, source.index, line, plan.calls)
    }

    /// Every served target's offer of this step, by target.
    pub fn offers(&self, plan: &Plan<'rt>) -> Result<Vec<Line>> {
        let served = plan.targets_of(self.pairs).map(|(i, ..)| (i, i));
        self.offers.await_all(plan.reach.targets.len(), served, plan.calls)
    }

    /// The status of this step to source `j` (after the vote), and where its forces lie.
    pub fn status(&self, plan: &Plan<'rt>, j: usize, line: Line) -> Result<()> {
        let source = plan.sources()[j];
        self.statuses.put(source.pe, source.index, line, plan.calls)
    }

    /// Every served target's status line of this step, by target, each taken into the plan
    /// (its error, or its count checked: the first mismatch comes back beside the lines, so
    /// that the caller still tells every target it is done).
    pub fn statuses(&self, plan: &mut Plan<'rt>) -> Result<(Vec<Line>, Result<()>)> {
        let served: Vec<usize> = plan.targets_of(self.pairs).map(|(i, ..)| i).collect();
        let lines =
            self.statuses.await_all(plan.reach.targets.len(), served.iter().map(|&i| (i, i)), plan.calls)?;
        let mut outcome = Ok(());
        for i in served {
            let taken = plan.take_status(plan.reach.targets[i], lines[i][0]);
            if outcome.is_ok() {
                outcome = taken;
            }
        }
        Ok((lines, outcome))
    }

    /// On a PME rank, once its sources' announcements are in: starts the vote on the step's
    /// error ([`Vote::start`]), so that its first round travels while the mesh works.
    ///
    /// # Collective
    /// Every PME rank calls it once per step, after the announcements (nothing where the plan
    /// does not vote or the lines serve some pairs only).
    pub fn vote_start(&mut self, plan: &Plan<'rt>) -> Result<()> {
        if let (Some(rank), Some(vote)) = (plan.my_rank.filter(|_| plan.own_vote), &self.vote) {
            self.ballot = plan.ballot();
            self.ballot_step = plan.calls;
            vote.start(&plan.grid, rank, plan.calls, self.ballot)?;
        }
        Ok(())
    }

    /// On a PME rank: the smallest error any PME rank knows of in this step, into the plan
    /// (starting the vote first where the step left it to the mesh, which did not carry it).
    ///
    /// # Collective
    /// Every PME rank calls it once per step.
    pub fn vote(&mut self, plan: &mut Plan<'rt>) -> Result<()> {
        if plan.own_vote && self.ballot_step != plan.calls {
            self.vote_start(plan)?;
        }
        if let (Some(rank), Some(vote)) = (plan.my_rank.filter(|_| plan.own_vote), &self.vote) {
            let agreed = vote.finish(&plan.grid, rank, plan.calls, self.ballot)?;
            plan.take_vote(agreed);
        }
        Ok(())
    }

    /// Waits until every source has taken the forces of the last return from this PME rank's
    /// force buffer, so that it may be written again.
    pub fn forces_free(&self, plan: &Plan<'rt>) -> Result<()> {
        if plan.my_rank.is_some() {
            self.back_taken.wait_ge(0, self.owed_back_taken)?;
        }
        Ok(())
    }

    /// A PME rank's half of the return: the vote (MPI's, taken before, where the lines serve
    /// some pairs only), then per source served the status of the step and where its forces
    /// lie. The forces are either read by the sources where they lie in this
    /// rank's force buffer (staged there first unless they are there in place), or, with
    /// `push` (the put path's source offsets in the sources' force receive buffers) and forces
    /// not in place (in the caller's array, or a put relay's in its force buffer), put there
    /// before the status. The status line says which, so that each source acts on what its
    /// targets did.
    pub fn send_back(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        push: Option<&[usize]>,
    ) -> Result<()> {
        if plan.my_rank.is_none() {
            return Ok(());
        }
        let push = push.filter(|_| !forces.in_place);
        let force_send = buffers.force_send().sym();
        if push.is_none() && !forces.in_place && !std::ptr::eq(forces.data.as_ptr(), force_send.as_ptr()) {
            // Staged where the sources take them from, once every source has taken those of
            // the last return (forces written in place waited in redistribute); forces already
            // there (a relay's) are not copied onto themselves.
            self.forces_free(plan)?;
            force_send.write_local(0, forces.data)?;
        }
        self.vote(plan)?;
        if let Some(force_at) = push {
            if plan.pending.is_none() {
                for (j, source) in plan.sources_of(self.pairs) {
                    let (at, count) = (plan.src_offsets[j], plan.src_counts[j]);
                    if count > 0 {
                        let data = &forces.data[at..at + count];
                        buffers.force_recv().sym().put(source.pe, force_at[j], data)?;
                    }
                }
            }
            // The forces land before the statuses that say they are there.
            self.rt.fence();
        }
        let served: Vec<usize> = plan.sources_of(self.pairs).map(|(j, _)| j).collect();
        for &j in &served {
            let mut line = [0u64; LINE];
            line[0] = plan.status_to(j);
            line[1] = plan.src_offsets[j] as u64;
            line[2] = u64::from(push.is_none());
            self.status(plan, j, line)?;
        }
        if push.is_none() {
            self.owed_back_taken += served.len() as u64;
        }
        Ok(())
    }

    /// A particle PE's half of the return: every served target's status, then its forces,
    /// read where they lie and unpacked into home order in the same pass when every target
    /// with forces for this PE left them in its force buffer on this node (then `true`);
    /// otherwise each served target's forces land in the force receive buffer (got, or put
    /// there by the target), to unpack from.
    /// Each target that left its forces to be read is told when they have been.
    pub fn take_back(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        if !plan.particle {
            return Ok(false);
        }
        let (lines, checked) = self.statuses(plan)?;
        let unpacked = if plan.pending.is_none() && checked.is_ok() {
            self.read_forces(plan, buffers, &lines, home_forces)
        } else {
            Ok(false)
        };
        for (i, &r) in plan.reach.targets.iter().enumerate() {
            if lines[i][2] == 1 {
                self.back_taken.add(plan.grid.pe_of(r), 0, 1)?;
            }
        }
        checked?;
        unpacked
    }

    /// Reads this PE's forces from the targets that left them in their force buffers, at the
    /// offsets of `lines`: unpacked straight from the targets' memory where every target
    /// left them so and is mapped (then `true`), otherwise got into the force receive buffer.
    fn read_forces(
        &self,
        plan: &Plan<'rt>,
        buffers: &Buffers<'rt>,
        lines: &[Line],
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        let force_send = buffers.force_send().sym();
        let mut views: Vec<&[RVec]> = vec![&[]; plan.grid.ranks()];
        let mut mapped = true;
        for (i, &r) in plan.reach.targets.iter().enumerate() {
            let (at, count) = (lines[i][1] as usize, plan.dest_counts[r]);
            if count == 0 {
                continue;
            }
            if lines[i][2] == 0 {
                // Put here by the target, or (a zero line) sent by another transport.
                mapped = false;
                continue;
            }
            // SAFETY: each PME rank writes its force buffer again only once every source has
            // signalled its forces taken (forces_free), which this PE does only after the
            // views' last use, in take_back.
            match unsafe { force_send.remote_range(plan.grid.pe_of(r), at..at + count)? } {
                Some(view) => views[r] = view,
                None => mapped = false,
            }
        }
        if mapped {
            // Every target with forces for this PE is on its node: read where they lie and
            // unpacked into home order in one pass, copied nowhere between.
            by_rank::unpack(&plan.dest, views, home_forces, &plan.chunks());
            return Ok(true);
        }
        for (i, &r) in plan.reach.targets.iter().enumerate() {
            let (at, count) = (plan.dest_offsets[r], plan.dest_counts[r]);
            if count > 0 && lines[i][2] == 1 {
                // SAFETY: no other PE writes this range of the force receive buffer in this
                // return (a target that puts writes only its own range, and this one leaves
                // its forces to be read); the range lies inside it (the offsets and counts
                // cover the home atoms).
                let dst = unsafe { buffers.force_recv().local_range_mut(at..at + count) };
                force_send.get(plan.grid.pe_of(r), lines[i][1] as usize, dst)?;
            }
        }
        Ok(false)
    }
}
