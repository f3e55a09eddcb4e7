//! The put path: counts go to the PME ranks first; each PME rank announces where every
//! source's atoms go and the sources write them there ([`onesided::Exchange`], the offset
//! swap), packing them straight into place where the PME rank's memory is mapped
//! ([`onesided::Outgoing::Packed`]). Forces come back the same way, put from the
//! caller's own array; forces written in place ([`super::Redistribution::forces_mut`]) are
//! read by their PEs where they lie instead, as on the get path.

use onesided::{Exchange, ExchangePath, Incoming, Outgoing, Runtime, SymArray};

use super::get::Get;
use super::{ERROR, Forces, Particle, Redistribution, Transport, check_count, note_error};
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
    fn forward(&mut self, this: &mut Redistribution<'rt>, home: &[Particle]) -> Result<()> {
        let (me, n, m) = (this.rt.my_pe(), this.rt.n_pes(), this.grid.ranks());
        let count_values: Vec<u64> = (0..m).map(|r| this.count_to(r)).collect();
        let sources: Vec<usize> = (0..n).filter(|&s| this.is_particle[s]).collect();
        let mut raw = vec![0u64; n];
        {
            let (counts, count_buffers) = (&mut self.counts, &mut self.count_buffers);
            let mut outgoing = Vec::new();
            if this.is_particle[me] {
                for (r, value) in count_values.iter().enumerate() {
                    outgoing
                        .push(Outgoing::Copy { to: this.grid.pe_of(r), data: std::slice::from_ref(value) });
                }
            }
            let incoming: Vec<Incoming> = if this.my_rank.is_some() {
                sources.iter().map(|&s| Incoming { from: s, buffer: 0, offset: s, room: 1 }).collect()
            } else {
                Vec::new()
            };
            let buffers = [&count_buffers[0], &count_buffers[1]];
            counts.call(&buffers).send(&outgoing).receive(&incoming).run()?;
            if this.my_rank.is_some() {
                count_buffers[0].read_local(0, &mut raw)?;
                for (s, value) in raw.iter_mut().enumerate() {
                    if !this.is_particle[s] {
                        *value = 0;
                    }
                }
            }
        }
        this.take_source_counts(&raw);
        let mut outgoing = Vec::new();
        if this.is_particle[me] {
            for r in 0..m {
                outgoing.push(Outgoing::Packed { to: this.grid.pe_of(r), count: this.send_count(r) });
            }
        }
        let incoming: Vec<Incoming> = if this.my_rank.is_some() {
            sources
                .iter()
                .map(|&s| Incoming {
                    from: s,
                    buffer: 0,
                    offset: this.src_offsets[s],
                    room: this.src_counts[s],
                })
                .collect()
        } else {
            Vec::new()
        };
        // Each atom is written once, into its PME rank's receive buffer where that is mapped.
        let this = &*this;
        let pack = |out: &mut [&mut [Particle]]| {
            if this.is_particle[me] && !this.withheld {
                this.pack(home, out.iter_mut().map(|o| &mut **o).collect());
            }
        };
        self.data.call(&[&this.recv]).send(&outgoing).receive(&incoming).pack(pack).run()?;
        Ok(())
    }

    fn backward(
        &mut self,
        this: &mut Redistribution<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        if forces.in_place {
            // Already in symmetric memory: each PE reads its forces there and unpacks them in
            // the same pass (through the mapping on the node), which costs less than writing
            // them into lines the receiver has just read and reading them back.
            return self.pull.backward(this, forces, home_forces);
        }
        let forces = forces.data;
        let (me, n, m) = (this.rt.my_pe(), this.rt.n_pes(), this.grid.ranks());
        let (counts, count_buffers, exchange) = (&mut self.counts, &mut self.count_buffers, &mut self.forces);
        // Status (and count) from every PME rank to every PE.
        let values: Vec<u64> = (0..n).map(|p| this.pending.unwrap_or(this.src_counts[p] as u64)).collect();
        let mut outgoing = Vec::new();
        if this.my_rank.is_some() {
            for p in 0..n {
                outgoing.push(Outgoing::Copy { to: p, data: &values[p..p + 1] });
            }
        }
        let incoming: Vec<Incoming> =
            (0..m).map(|r| Incoming { from: this.grid.pe_of(r), buffer: 1, offset: r, room: 1 }).collect();
        let buffers = [&count_buffers[0], &count_buffers[1]];
        counts.call(&buffers).send(&outgoing).receive(&incoming).run()?;
        let mut statuses = vec![0u64; m];
        count_buffers[1].read_local(0, &mut statuses)?;
        for (r, &value) in statuses.iter().enumerate() {
            if value & ERROR != 0 {
                note_error(&mut this.pending, value);
            } else if this.is_particle[me] {
                check_count(value as usize, this.dest_counts[r], this.grid.pe_of(r))?;
            }
        }
        // Straight from the caller's forces: the put path needs no staging.
        let mut outgoing = Vec::new();
        if this.my_rank.is_some() {
            // An error status goes without forces.
            let failed = this.pending.is_some();
            for p in (0..n).filter(|&p| this.is_particle[p]) {
                let (at, count) = (this.src_offsets[p], if failed { 0 } else { this.src_counts[p] });
                outgoing.push(Outgoing::Copy { to: p, data: &forces[at..at + count] });
            }
        }
        let incoming: Vec<Incoming> = if this.is_particle[me] {
            (0..m)
                .map(|r| Incoming {
                    from: this.grid.pe_of(r),
                    buffer: 0,
                    offset: this.dest_offsets[r],
                    room: this.dest_counts[r],
                })
                .collect()
        } else {
            Vec::new()
        };
        exchange.call(&[this.force_recv.array()]).send(&outgoing).receive(&incoming).run()?;
        Ok(false)
    }

    fn forces_free(&mut self, this: &Redistribution<'rt>) -> Result<()> {
        self.pull.forces_free(this)
    }
}
