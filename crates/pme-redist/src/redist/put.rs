//! The put path: counts go to the PME ranks first; each PME rank announces where every
//! source's atoms go and the sources write them there ([`onesided::Exchange`], the offset
//! swap), packing them straight into place where the PME rank's memory is mapped
//! ([`onesided::Outgoing::Packed`]). Forces come back the same way, put from the
//! caller's own array; forces written in place ([`super::Redistribution::forces_mut`]) are
//! read by their PEs where they lie instead, as on the get path.

use onesided::{Exchange, ExchangePath, Incoming, Outgoing, Runtime, SymArray};

use super::get::Get;
use super::plan::Plan;
use super::{Buffers, Forces, Particle, Transport};
use crate::RVec;
use crate::error::Result;

/// The put transport's exchanges and count buffers.
pub(super) struct Put<'rt> {
    counts: Exchange<'rt, u64>,
    /// Forward counts (slot per source PE) and backward counts (slot per PME rank).
    count_buffers: [SymArray<'rt, u64>; 2],
    data: Exchange<'rt, Particle>,
    forces: Exchange<'rt, RVec>,
    /// Forces written in place go back as on the get path: their PEs read them where they
    /// lie.
    pull: Get<'rt>,
}

impl<'rt> Put<'rt> {
    /// # Collective
    /// Every PE creates the same exchanges.
    pub(super) fn collective_new(rt: &'rt Runtime, name: &dyn Fn(&str) -> String, m: usize) -> Result<Self> {
        let n = rt.n_pes();
        Ok(Put {
            counts: Exchange::collective_new(rt, &name("counts"), ExchangePath::Put)?,
            count_buffers: [
                SymArray::collective_alloc(rt, &name("counts in"), n)?,
                SymArray::collective_alloc(rt, &name("counts back"), m)?,
            ],
            data: Exchange::collective_new(rt, &name("atoms"), ExchangePath::Put)?,
            forces: Exchange::collective_new(rt, &name("forces"), ExchangePath::Put)?,
            pull: Get::collective_new(rt, &|what| name(&format!("forces in place: {what}")), m)?,
        })
    }
}

impl<'rt> Transport<'rt> for Put<'rt> {
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        let (me, n, m) = (plan.rt.my_pe(), plan.rt.n_pes(), plan.grid.ranks());
        let count_values: Vec<u64> = (0..m).map(|r| plan.count_to(r)).collect();
        let sources: Vec<usize> = (0..n).filter(|&s| plan.is_particle[s]).collect();
        let mut raw = vec![0u64; n];
        {
            let (counts, count_buffers) = (&mut self.counts, &mut self.count_buffers);
            let mut outgoing = Vec::new();
            if plan.is_particle[me] {
                for (r, value) in count_values.iter().enumerate() {
                    outgoing
                        .push(Outgoing::Copy { to: plan.grid.pe_of(r), data: std::slice::from_ref(value) });
                }
            }
            let incoming: Vec<Incoming> = if plan.my_rank.is_some() {
                sources.iter().map(|&s| Incoming { from: s, buffer: 0, offset: s, room: 1 }).collect()
            } else {
                Vec::new()
            };
            let buffers = [&count_buffers[0], &count_buffers[1]];
            counts.call(&buffers).send(&outgoing).receive(&incoming).run()?;
            if plan.my_rank.is_some() {
                count_buffers[0].read_local(0, &mut raw)?;
                for (s, value) in raw.iter_mut().enumerate() {
                    if !plan.is_particle[s] {
                        *value = 0;
                    }
                }
            }
        }
        plan.take_source_counts(&raw);
        let mut outgoing = Vec::new();
        if plan.is_particle[me] {
            for r in 0..m {
                outgoing.push(Outgoing::Packed { to: plan.grid.pe_of(r), count: plan.send_count(r) });
            }
        }
        let incoming: Vec<Incoming> = if plan.my_rank.is_some() {
            sources
                .iter()
                .map(|&s| Incoming {
                    from: s,
                    buffer: 0,
                    offset: plan.src_offsets[s],
                    room: plan.src_counts[s],
                })
                .collect()
        } else {
            Vec::new()
        };
        // Each atom is written once, into its PME rank's receive buffer where that is mapped.
        let plan = &*plan;
        let pack = |out: &mut [&mut [Particle]]| {
            if plan.is_particle[me] {
                plan.pack(home, out.iter_mut().map(|o| &mut **o).collect());
            }
        };
        self.data.call(&[&buffers.recv]).send(&outgoing).receive(&incoming).pack(pack).run()?;
        Ok(())
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        if forces.in_place {
            // Already in symmetric memory: each PE reads its forces there and unpacks them in
            // the same pass (through the mapping on the node), which costs less than writing
            // them into lines the receiver has just read and reading them back.
            return self.pull.backward(plan, buffers, forces, home_forces);
        }
        let forces = forces.data;
        let (me, n, m) = (plan.rt.my_pe(), plan.rt.n_pes(), plan.grid.ranks());
        let (counts, count_buffers, exchange) = (&mut self.counts, &mut self.count_buffers, &mut self.forces);
        // Status (and count) from every PME rank to every PE.
        let values: Vec<u64> = (0..n).map(|p| plan.status_to(p)).collect();
        let mut outgoing = Vec::new();
        if plan.my_rank.is_some() {
            for p in 0..n {
                outgoing.push(Outgoing::Copy { to: p, data: &values[p..p + 1] });
            }
        }
        let incoming: Vec<Incoming> =
            (0..m).map(|r| Incoming { from: plan.grid.pe_of(r), buffer: 1, offset: r, room: 1 }).collect();
        counts.call(&[&count_buffers[0], &count_buffers[1]]).send(&outgoing).receive(&incoming).run()?;
        let mut statuses = vec![0u64; m];
        count_buffers[1].read_local(0, &mut statuses)?;
        for (r, &value) in statuses.iter().enumerate() {
            plan.take_status(r, value)?;
        }
        // Straight from the caller's forces: the put path needs no staging.
        let mut outgoing = Vec::new();
        if plan.my_rank.is_some() {
            // An error status goes without forces.
            let failed = plan.pending.is_some();
            for p in (0..n).filter(|&p| plan.is_particle[p]) {
                let (at, count) = (plan.src_offsets[p], if failed { 0 } else { plan.src_counts[p] });
                outgoing.push(Outgoing::Copy { to: p, data: &forces[at..at + count] });
            }
        }
        let incoming: Vec<Incoming> = if plan.is_particle[me] {
            (0..m)
                .map(|r| Incoming {
                    from: plan.grid.pe_of(r),
                    buffer: 0,
                    offset: plan.dest_offsets[r],
                    room: plan.dest_counts[r],
                })
                .collect()
        } else {
            Vec::new()
        };
        exchange.call(&[buffers.force_recv.array()]).send(&outgoing).receive(&incoming).run()?;
        Ok(false)
    }

    fn forces_free(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.pull.forces_free(plan)
    }
}
