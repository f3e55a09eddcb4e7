//! The put path, between partners only, as an offset swap: each particle PE announces to
//! each target its count (or its error) and where that target's forces go in its force
//! receive buffer; each PME rank, once its sources have announced, offers each source where
//! its atoms go (by source order, so that the layout is every path's), and the sources write
//! them there, packed straight into place where the PME rank's memory is mapped, with a
//! signal. Forces come back put from the caller's array (or a relay's force buffer, where its
//! second hop brought them) into the sources' force receive buffers before the status that
//! says so; forces the mesh wrote in place are read by their PEs where they lie instead, as
//! on the get path ([`Lines::send_back`]).

use onesided::SymArray;

use super::lines::Lines;
use super::plan::Plan;
use super::{Buffers, Forces, LINE, Particle, Transport, by_rank};
use crate::RVec;
use crate::error::Result;

/// The put transport.
pub(super) struct Put<'rt> {
    lines: Lines<'rt>,
    /// On a PME rank, per source: where its forces go in its force receive buffer.
    force_at: Vec<usize>,
}

impl<'rt> Put<'rt> {
    /// # Collective
    /// Every PE allocates the same lines.
    pub(super) fn collective_new(
        rt: &'rt onesided::Runtime,
        name: &dyn Fn(&str) -> String,
        m: usize,
    ) -> Result<Self> {
        Ok(Put { lines: Lines::collective_new(rt, name, m)?, force_at: Vec::new() })
    }
}

impl<'rt> Transport<'rt> for Put<'rt> {
    fn collective_replan(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.lines.collective_fit(plan)
    }

    fn symmetric_bytes(&self) -> usize {
        self.lines.symmetric_bytes()
    }

    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        let k = plan.calls;
        if plan.particle {
            self.lines.announce(plan)?;
        }
        if plan.my_rank.is_some() {
            let lines = self.lines.announcements(plan)?;
            let raw: Vec<u64> = lines.iter().map(|l| l[0]).collect();
            plan.take_source_counts(&raw);
            self.lines.vote_start(plan)?;
            self.force_at = lines.iter().map(|l| l[1] as usize).collect();
            for j in 0..plan.sources().len() {
                let mut line = [0u64; LINE];
                line[0] = plan.src_offsets[j] as u64;
                self.lines.offer(plan, j, line)?;
            }
        }
        if plan.particle {
            let offers = self.lines.offers(plan)?;
            self.write_atoms(plan, buffers, home, &offers)?;
        }
        if plan.my_rank.is_some() {
            for (j, source) in plan.sources().iter().enumerate() {
                if plan.src_counts[j] > 0 {
                    self.lines.delivered.wait_ge(source.slot, k)?;
                }
            }
        }
        Ok(())
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
    /// Writes this PE's atoms where its targets offered (`offers`, by target): packed
    /// straight into a mapped target's receive buffer, or packed into the send buffer and put;
    /// then signals each target that received atoms.
    fn write_atoms(
        &self,
        plan: &Plan<'rt>,
        buffers: &Buffers<'rt>,
        home: &[Particle],
        offers: &[[u64; LINE]],
    ) -> Result<()> {
        if plan.withheld() {
            return Ok(());
        }
        let recv: &SymArray<'rt, Particle> = buffers.recv().sym();
        // SAFETY: on the put path the send buffer is this PE's own memory, apart from the
        // receive buffer ([`super::store`]), which no other PE reads or writes; this PE reads
        // it only below; the range holds the home atoms (redistribute checked).
        let packed = unsafe { buffers.send().local_range_mut(0..home.len()) };
        let mut out = by_rank::split(packed, &plan.rank_counts());
        let mut staged = vec![false; plan.grid.ranks()];
        for (i, r, _) in plan.targets() {
            let count = plan.send_count(r);
            if count == 0 {
                continue;
            }
            let at = offers[i][0] as usize;
            // SAFETY: target r offered elements at..at + count of its receive buffer to this
            // PE alone for this call (the offsets of its sources do not overlap), and reads
            // them only after this PE's signal below; the view lives until then.
            match unsafe { recv.remote_range_mut(plan.grid.pe_of(r), at..at + count)? } {
                Some(place) => out[r] = place,
                None => staged[r] = true,
            }
        }
        plan.pack(home, out);
        for (i, r, slot) in plan.targets() {
            let count = plan.send_count(r);
            if count == 0 {
                continue;
            }
            let pe = plan.grid.pe_of(r);
            if staged[r] {
                let at = plan.dest_offsets[r];
                // SAFETY: the send buffer's range for r, just packed; nothing writes it until
                // this blocking put returns.
                let data = unsafe { buffers.send().local_range(at..at + count) };
                recv.put_signal(pe, offers[i][0] as usize, data, &self.lines.delivered, slot, plan.calls)?;
            } else {
                self.lines.delivered.set(pe, slot, plan.calls)?;
            }
        }
        Ok(())
    }
}
