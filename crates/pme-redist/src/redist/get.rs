//! The get path, as the 2013 SHMEM port of GROMACS did it: each particle PE packs its atoms by
//! destination into its symmetric send buffer, publishes per-destination counts and offsets
//! in a symmetric table and raises a signal at every PME rank with its call number. Each PME
//! rank polls its sources round-robin, reads each source's entry as soon as it is published,
//! gets the atoms straight from the sources' send buffers, and adds one to each source's
//! `taken` counter; a source reuses its buffer only when every PME rank has taken its share
//! (`taken` reaches the number of PME ranks times the call number: the monotonic form of the
//! 2013 `used` counter, which never needs resetting). Forces come back the same way in
//! reverse, except that a PE whose PME ranks are all on its node unpacks them into home order
//! straight from the PME ranks' buffers, through the mapping, without getting them first;
//! forces a PME rank wrote in place ([`Redistribution::forces_mut`]) are not staged either.

use onesided::{Runtime, SignalArray, SymArray};

use super::plan::Plan;
use super::{Buffers, Forces, LINE, Particle, Transport, by_rank};
use crate::RVec;
use crate::error::Result;

/// The get transport's tables and signals.
pub(super) struct Get<'rt> {
    /// Slot `r`: (count, offset) of plan PE's atoms for PME rank `r`.
    table: SymArray<'rt, [u64; LINE]>,
    /// Signal `s` on a PME rank: source `s` published call `k`.
    published: SignalArray<'rt>,
    /// On a source: how many PME rank shares have been taken, over all calls.
    taken: SignalArray<'rt>,
    /// Slot `p` on a PME rank: (count, offset) of PE `p`'s forces.
    back_table: SymArray<'rt, [u64; LINE]>,
    /// Signal `r` on a PE: PME rank `r` published its forces of call `k`.
    back_published: SignalArray<'rt>,
    /// On a PME rank: how many PEs have taken their forces, over all calls.
    back_taken: SignalArray<'rt>,
    /// On a PME rank: how many times it has published forces.
    returns: u64,
}

impl<'rt> Get<'rt> {
    /// # Collective
    /// Every PE allocates the same tables.
    pub(super) fn collective_new(rt: &'rt Runtime, name: &dyn Fn(&str) -> String, m: usize) -> Result<Self> {
        let n = rt.n_pes();
        Ok(Get {
            table: SymArray::collective_alloc(rt, &name("table"), m)?,
            published: SignalArray::collective_alloc(rt, &name("published"), n)?,
            taken: SignalArray::collective_alloc(rt, &name("taken"), 1)?,
            back_table: SymArray::collective_alloc(rt, &name("force table"), n)?,
            back_published: SignalArray::collective_alloc(rt, &name("forces published"), m)?,
            back_taken: SignalArray::collective_alloc(rt, &name("forces taken"), 1)?,
            returns: 0,
        })
    }
}

impl<'rt> Transport<'rt> for Get<'rt> {
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        let (me, n, m, k) = (plan.rt.my_pe(), plan.rt.n_pes(), plan.grid.ranks(), plan.calls);
        // Only particle PEs have a send buffer that PME ranks read: it is packed again once
        // every PME rank has taken its share of the previous call.
        if plan.is_particle[me] {
            self.taken.wait_ge(0, m as u64 * (k - 1))?;
            // SAFETY: every PME rank has taken its share of the previous call (awaited just
            // above), and none reads the buffer again before plan call's publication below.
            unsafe { plan.pack_into(home, &buffers.send) };
        }
        let sources: Vec<usize> = (0..n).filter(|&s| plan.is_particle[s]).collect();
        let mut raw = vec![0u64; n];
        let mut offsets = vec![0u64; n];
        {
            let (table, published) = (&self.table, &self.published);
            if plan.is_particle[me] {
                let entries: Vec<[u64; LINE]> = (0..m)
                    .map(|r| {
                        let mut line = [0u64; LINE];
                        line[0] = plan.count_to(r);
                        line[1] = plan.dest_offsets[r] as u64;
                        line
                    })
                    .collect();
                table.write_local(0, &entries)?;
                for r in 0..m {
                    published.set(plan.grid.pe_of(r), me, k)?;
                }
            }
            let Some(rank) = plan.my_rank else { return Ok(()) };
            // Read each source's entry as soon as it is published, whichever comes first.
            let mut pending: Vec<usize> = sources.clone();
            while !pending.is_empty() {
                let waits: Vec<(usize, u64)> = pending.iter().map(|&s| (s, k)).collect();
                let s = pending.swap_remove(published.wait_any_ge(&waits)?);
                let mut line = [[0u64; LINE]];
                table.get(s, rank, &mut line)?;
                raw[s] = line[0][0];
                offsets[s] = line[0][1];
            }
        }
        plan.take_source_counts(&raw);
        let taken = &self.taken;
        for &s in &sources {
            let (count, at) = (plan.src_counts[s], plan.src_offsets[s]);
            if count > 0 {
                // SAFETY: on the get path only plan PE writes its receive buffer, and nothing
                // reads it during the copy; the range lies inside it (counts sum to at most
                // the total number of atoms, its length).
                let dst = unsafe { buffers.recv.local_range_mut(at..at + count) };
                buffers.send.array().get(s, offsets[s] as usize, dst)?;
            }
            taken.add(s, 0, 1)?;
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
        let (me, n, m, k) = (plan.rt.my_pe(), plan.rt.n_pes(), plan.grid.ranks(), plan.calls);
        if plan.my_rank.is_some() {
            if !forces.in_place {
                // The forces are staged where the PEs take them from, once every PE has taken
                // those of the previous returns (forces written in place waited in forces_mut).
                self.forces_free(plan)?;
                buffers.force_send.write_local(0, forces.data)?;
            }
            self.returns += 1;
        }
        let (back_table, back_published, back_taken) =
            (&self.back_table, &self.back_published, &self.back_taken);
        if let Some(rank) = plan.my_rank {
            let entries: Vec<[u64; LINE]> = (0..n)
                .map(|p| {
                    let mut line = [0u64; LINE];
                    line[0] = plan.status_to(p);
                    line[1] = plan.src_offsets[p] as u64;
                    line
                })
                .collect();
            back_table.write_local(0, &entries)?;
            for p in 0..n {
                back_published.set(p, rank, k)?;
            }
        }
        // Every PME rank's entry first, as each is published: its status, and where plan
        // PE's forces lie in its staging buffer.
        let mut offsets = vec![0usize; m];
        let mut pending: Vec<usize> = (0..m).collect();
        while !pending.is_empty() {
            let waits: Vec<(usize, u64)> = pending.iter().map(|&r| (r, k)).collect();
            let r = pending.swap_remove(back_published.wait_any_ge(&waits)?);
            let pe = plan.grid.pe_of(r);
            let mut line = [[0u64; LINE]];
            back_table.get(pe, me, &mut line)?;
            let (value, offset) = (line[0][0], line[0][1] as usize);
            plan.take_status(r, value)?;
            offsets[r] = offset;
        }
        let unpacked = if plan.is_particle[me] && plan.pending.is_none() {
            // SAFETY (for the views): each PME rank writes its staging buffer again only
            // once every PE has signalled its forces taken (forces_free), which plan PE does
            // below, after the last use of the views.
            let views: Result<Option<Vec<&[RVec]>>> = (0..m)
                .map(|r| {
                    let (at, count) = (offsets[r], plan.dest_counts[r]);
                    if count == 0 {
                        return Ok(Some(&[][..]));
                    }
                    // SAFETY: as above.
                    Ok(unsafe { buffers.force_send.remote_range(plan.grid.pe_of(r), at..at + count)? })
                })
                .collect::<Result<Vec<Option<&[RVec]>>>>()
                .map(|views| views.into_iter().collect());
            match views? {
                // Every PME rank with forces for plan PE is on plan node: they are read where
                // they lie and unpacked into home order in one pass, copied nowhere between.
                Some(views) => {
                    by_rank::unpack(&plan.dest, views, home_forces, &plan.chunks());
                    true
                }
                None => {
                    for (r, &offset) in offsets.iter().enumerate() {
                        let (at, count) = (plan.dest_offsets[r], plan.dest_counts[r]);
                        if count > 0 {
                            // SAFETY: on the get path only plan PE writes its force receive
                            // buffer; the range lies inside it (dest offsets and counts cover
                            // the home atoms).
                            let dst = unsafe { buffers.force_recv.array().local_range_mut(at..at + count) };
                            buffers.force_send.get(plan.grid.pe_of(r), offset, dst)?;
                        }
                    }
                    false
                }
            }
        } else {
            false
        };
        for r in 0..m {
            back_taken.add(plan.grid.pe_of(r), 0, 1)?;
        }
        Ok(unpacked)
    }

    fn forces_free(&mut self, plan: &Plan<'rt>) -> Result<()> {
        if plan.my_rank.is_some() {
            self.back_taken.wait_ge(0, plan.rt.n_pes() as u64 * self.returns)?;
        }
        Ok(())
    }
}
