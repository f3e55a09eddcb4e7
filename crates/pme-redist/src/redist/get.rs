//! The get path, as the 2013 SHMEM port of GROMACS did it, between partners only: each
//! particle PE packs its atoms by target into its symmetric send buffer and announces to each
//! target, in one put with a signal, its count (or its error) and where its atoms lie. Each
//! PME rank reads its sources' announcements as they come, gets the atoms straight from the
//! sources' send buffers, and adds one to each source's `taken` counter; a source packs its
//! buffer again only when every target has taken its share (`taken` reaches the sum of its
//! targets over the calls: the monotonic form of the 2013 `used` counter, which never needs
//! resetting). Forces come back the same way in reverse ([`Lines::send_back`]), read where
//! they lie on the node.
//!
//! In a redistribution whose links differ ([`super::mixed`]) it serves the pairs of one class.

use onesided::Runtime;

use super::buffers::{Buffers, Forces};
use super::lines::{Line, Lines};
use super::plan::{Pairs, Plan};
use super::protocol::Protocol;
use crate::error::Result;
use crate::particle::{Particle, RVec};

/// The get transport.
pub(super) struct Get<'rt> {
    pub lines: Lines<'rt>,
}

impl<'rt> Get<'rt> {
    /// The transport of the pairs `pairs` serves.
    ///
    /// # Collective
    /// Every PE allocates the same lines.
    pub(super) fn collective_new(
        rt: &'rt Runtime,
        name: &dyn Fn(&str) -> String,
        m: usize,
        pairs: Pairs,
    ) -> Result<Self> {
        Ok(Get { lines: Lines::collective_new(rt, name, m, pairs)? })
    }

    /// On a particle PE: packs `home` into the send buffer once every target has taken the
    /// last call's atoms from it.
    pub(super) fn pack(&mut self, plan: &Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        self.lines.await_taken(plan)?;
        // SAFETY: every target has taken its share of the previous call (awaited just above),
        // and none reads the buffer again before this call's announcement, after the packing.
        unsafe { plan.pack_into(home, buffers.send()) };
        Ok(())
    }

    /// On a PME rank whose sources' announcements are in (`announced`, by source): gets the
    /// atoms of every source served, and tells each it has taken them.
    pub(super) fn take_atoms(
        &self,
        plan: &Plan<'rt>,
        buffers: &Buffers<'rt>,
        announced: &[Line],
    ) -> Result<()> {
        for (j, source) in plan.sources_of(self.lines.pairs()) {
            let (count, at) = (plan.src_counts[j], plan.src_offsets[j]);
            if count > 0 {
                // SAFETY: on the get path only this PE writes its receive buffer, and nothing
                // reads it during the copy; the range lies inside it (each source sends at
                // most its bound, and the buffer holds the sum of the bounds).
                let dst = unsafe { buffers.recv().local_range_mut(at..at + count) };
                buffers.send().sym().get(source.pe, announced[j][1] as usize, dst)?;
            }
            self.lines.took(source.pe)?;
        }
        Ok(())
    }
}

impl<'rt> Protocol<'rt> for Get<'rt> {
    fn collective_replan(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.lines.collective_fit(plan)
    }

    fn symmetric_bytes(&self) -> usize {
        self.lines.symmetric_bytes()
    }

    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        if plan.particle {
            self.pack(plan, buffers, home)?;
            self.lines.announce(plan)?;
        }
        if plan.my_rank.is_none() {
            return Ok(());
        }
        let lines = self.lines.announcements(plan)?;
        let raw: Vec<u64> = lines.iter().map(|l| l[0]).collect();
        plan.take_source_counts(&raw);
        self.lines.vote_start(plan)?;
        self.take_atoms(plan, buffers, &lines)
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool> {
        self.lines.send_back(plan, buffers, forces, None)?;
        self.lines.take_back(plan, buffers, home_forces)
    }

    fn forces_free(&mut self, plan: &Plan<'rt>) -> Result<()> {
        self.lines.forces_free(plan)
    }
}
