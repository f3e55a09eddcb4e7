//! The put path, between partners only, as an offset swap: each particle PE announces to
//! each target its count (or its error) and where that target's forces go in its force
//! receive buffer; each PME rank, once its sources have announced, offers each source where
//! its atoms go (by source order, so that the layout is every path's), and the sources write
//! them there, packed straight into place where the PME rank's memory is mapped
//! ([`SymArray::remote_range_mut`]: each atom written once, where it is needed; the other
//! targets' atoms are packed into the send buffer and put), with a signal. Forces come back
//! put from the caller's array (or a relay's force buffer, where its second hop brought them)
//! into the sources' force receive buffers before the status that says so; forces the mesh
//! wrote in place are read by their PEs where they lie instead, as on the get path
//! ([`Lines::send_back`]): writing them into memory the source has just read, and its reading
//! them back, costs more than its one pull of them.
//!
//! In a redistribution whose links differ ([`super::mixed`]) it serves the pairs of one class,
//! from a send buffer packed before (the other part's messages start first), so that its
//! atoms are put from there rather than packed into place.

use onesided::SymArray;

use super::buffers::{Buffers, Forces};
use super::by_rank;
use super::lines::LINE;
use super::lines::{Line, Lines};
use super::plan::{Pairs, Plan};
use super::protocol::Protocol;
use crate::error::Result;
use crate::particle::{Particle, RVec};

/// The put transport.
pub(super) struct Put<'rt> {
    pub lines: Lines<'rt>,
    /// On a PME rank, per source: where its forces go in its force receive buffer.
    pub force_at: Vec<usize>,
}

impl<'rt> Put<'rt> {
    /// The transport of the pairs `pairs` serves.
    ///
    /// # Collective
    /// Every PE allocates the same lines.
    pub(super) fn collective_new(
        rt: &'rt onesided::Runtime,
        name: &dyn Fn(&str) -> String,
        m: usize,
        pairs: Pairs,
    ) -> Result<Self> {
        Ok(Put { lines: Lines::collective_new(rt, name, m, pairs)?, force_at: Vec::new() })
    }
}

impl<'rt> Protocol<'rt> for Put<'rt> {
    fn collective_replan(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.lines.collective_fit(plan)
    }

    fn symmetric_bytes(&self) -> usize {
        self.lines.symmetric_bytes()
    }

    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        if plan.particle {
            self.lines.announce(plan)?;
        }
        if plan.my_rank.is_some() {
            let lines = self.lines.announcements(plan)?;
            let raw: Vec<u64> = lines.iter().map(|l| l[0]).collect();
            plan.take_source_counts(&raw);
            self.lines.vote_start(plan)?;
            self.offer(plan, &lines)?;
        }
        self.write(plan, buffers, Some(home))?;
        self.await_delivered(plan)
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        self.lines.send_back(plan, buffers, forces, Some(&self.force_at))?;
        self.lines.take_back(plan, buffers, home_forces)
    }

    fn forces_free(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.lines.forces_free(plan)
    }
}

impl<'rt> Put<'rt> {
    /// On a PME rank whose sources' counts are in (`announced`, by source): offers each
    /// source served where its atoms go, and notes where its forces go.
    pub(super) fn offer(&mut self, plan: &Plan<'rt>, announced: &[Line]) -> Result<()> {
        self.force_at = announced.iter().map(|l| l[1] as usize).collect();
        for (j, _) in plan.sources_of(self.lines.pairs()) {
            let mut line = [0u64; LINE];
            line[0] = plan.src_offsets[j] as u64;
            self.lines.offer(plan, j, line)?;
        }
        Ok(())
    }

    /// On a particle PE: awaits every served target's offer and writes this PE's atoms there
    /// ([`write_atoms`](Self::write_atoms)), from `home`, or from the send buffer where it is
    /// packed already (`None`).
    pub(super) fn write(
        &self,
        plan: &Plan<'rt>,
        buffers: &Buffers<'rt>,
        home: Option<&[Particle]>,
    ) -> Result<()> {
        if plan.particle {
            let offers = self.lines.offers(plan)?;
            self.write_atoms(plan, buffers, home, &offers)?;
        }
        Ok(())
    }

    /// On a PME rank: waits until every served source with atoms for it has written them.
    pub(super) fn await_delivered(&self, plan: &Plan<'rt>) -> Result<()> {
        if plan.my_rank.is_some() {
            for (j, source) in plan.sources_of(self.lines.pairs()) {
                if plan.src_counts[j] > 0 {
                    self.lines.delivered.wait_ge(source.slot, plan.calls)?;
                }
            }
        }
        Ok(())
    }

    /// Writes this PE's atoms where its served targets offered (`offers`, by target): packed
    /// straight into a mapped target's receive buffer, or packed into the send buffer and put
    /// (from `home`; with `None`, put from the send buffer, packed already); then signals each
    /// target that received atoms.
    fn write_atoms(
        &self,
        plan: &Plan<'rt>,
        buffers: &Buffers<'rt>,
        home: Option<&[Particle]>,
        offers: &[Line],
    ) -> Result<()> {
        if plan.withheld() {
            return Ok(());
        }
        let recv: &SymArray<'rt, Particle> = buffers.recv().sym();
        let pairs = self.lines.pairs();
        let mut staged = vec![home.is_none(); plan.grid.ranks()];
        if let Some(home) = home {
            self.pack_into_place(plan, buffers, home, offers, &mut staged)?;
        }
        for (i, r, slot) in plan.targets_of(pairs) {
            let count = plan.send_count(r);
            if count == 0 {
                continue;
            }
            let pe = plan.grid.pe_of(r);
            if staged[r] {
                let at = plan.dest_offsets[r];
                // SAFETY: the send buffer's range for r, packed; nothing writes it until this
                // blocking put returns.
                let data = unsafe { buffers.send().local_range(at..at + count) };
                recv.put_signal(pe, offers[i][0] as usize, data, &self.lines.delivered, slot, plan.calls)?;
            } else {
                self.lines.delivered.set(pe, slot, plan.calls)?;
            }
        }
        Ok(())
    }

    /// Packs `home` by target: straight into each mapped target's offered place, the rest into
    /// the send buffer (those marked in `staged`, by PME rank). Every target is served (a
    /// mixed redistribution packs before the offers).
    fn pack_into_place(
        &self,
        plan: &Plan<'rt>,
        buffers: &Buffers<'rt>,
        home: &[Particle],
        offers: &[Line],
        staged: &mut [bool],
    ) -> Result<()> {
        let recv: &SymArray<'rt, Particle> = buffers.recv().sym();
        // SAFETY: on the put path the send buffer is this PE's own memory, apart from the
        // receive buffer ([`super::store`]), which no other PE reads or writes; this PE reads
        // it only in write_atoms, after this view's last use; the range holds the home atoms
        // (redistribute checked).
        let packed = unsafe { buffers.send().local_range_mut(0..home.len()) };
        let mut out = by_rank::split(packed, &plan.rank_counts());
        for (i, r, _) in plan.targets() {
            let count = plan.send_count(r);
            if count == 0 {
                continue;
            }
            let at = offers[i][0] as usize;
            // SAFETY: target r offered elements at..at + count of its receive buffer to this
            // PE alone for this call (the offsets of its sources do not overlap), and reads
            // them only after this PE's signal in write_atoms; the view ends before it.
            match unsafe { recv.remote_range_mut(plan.grid.pe_of(r), at..at + count)? } {
                Some(place) => out[r] = place,
                None => staged[r] = true,
            }
        }
        plan.pack(home, out);
        Ok(())
    }
}
