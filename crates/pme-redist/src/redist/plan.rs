//! What every path of the redistribution shares: who sends and who receives, each home atom's
//! PME rank at the plan and in this step, the counts and offsets per PME rank and per source
//! that lay out every message, and the errors a step carries to every PE.

use onesided::{GlobalMaxArray, Runtime};

use super::{PARALLEL_MIN, Particle, by_rank, place};
use crate::RVec;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

/// A count with this bit set reports an error instead: an atom (low 32 bits) on a PE (the
/// next 31 bits) moved too far for the plan.
pub(super) const ERROR: u64 = 1 << 63;
const PE_MASK: u64 = (1 << 31) - 1;

/// The plan and the current step's layout: everything a transport reads and writes besides
/// the buffers.
pub(super) struct Plan<'rt> {
    pub rt: &'rt Runtime,
    pub grid: PmeGrid,
    pub my_rank: Option<usize>,
    /// Whether each PE holds home atoms (sends).
    pub is_particle: Vec<bool>,
    /// PME rank of each home atom when the plan was built.
    planned: Vec<u32>,
    /// PME rank of each home atom in this step.
    pub dest: Vec<u32>,
    /// Where each run of home atoms of one PME rank starts in this step.
    runs: Vec<u32>,
    /// The same for each chunk of [`PARALLEL_MIN`] home atoms placed on the thread pool.
    chunk_runs: Vec<Vec<u32>>,
    /// Home atoms of each PME rank per chunk of [`PARALLEL_MIN`] home atoms (`[c * m + r]`),
    /// or for all of them when placement stays on the calling thread.
    chunk_counts: Vec<usize>,
    pub dest_counts: Vec<usize>,
    pub dest_offsets: Vec<usize>,
    pub src_counts: Vec<usize>,
    pub src_offsets: Vec<usize>,
    /// Atoms this PME rank received in this step.
    pub received: usize,
    /// An error this PE found or heard of during the step, reported at its end.
    pub pending: Option<u64>,
    /// This PE found an atom too far in this step and sends its PME ranks the error in place
    /// of its count, and no atoms.
    withheld: bool,
    /// Steps so far.
    pub calls: u64,
}

impl<'rt> Plan<'rt> {
    pub fn new(rt: &'rt Runtime, grid: PmeGrid, is_particle: Vec<bool>, home: &[Particle]) -> Self {
        let (n, m) = (rt.n_pes(), grid.ranks());
        let mut plan = Plan {
            rt,
            my_rank: grid.rank_of_pe(rt.my_pe()),
            grid,
            is_particle,
            planned: Vec::new(),
            dest: Vec::new(),
            runs: Vec::new(),
            chunk_runs: Vec::new(),
            chunk_counts: Vec::new(),
            dest_counts: vec![0; m],
            dest_offsets: vec![0; m],
            src_counts: vec![0; n],
            src_offsets: vec![0; n],
            received: 0,
            pending: None,
            withheld: false,
            calls: 0,
        };
        plan.record(home);
        plan
    }

    /// The number of home atoms the plan is for.
    pub fn home_count(&self) -> usize {
        self.planned.len()
    }

    /// Records the PME rank of each home atom, as the plan.
    pub fn record(&mut self, home: &[Particle]) {
        self.planned.resize(home.len(), 0);
        let (mut counts, mut runs) = (Vec::new(), Vec::new());
        place(&self.grid, home, &mut self.planned, &mut counts, &mut runs, &mut self.chunk_runs);
    }

    /// Starts a step: places every home atom, counts the atoms per PME rank and lays them out
    /// by rank, and checks them against the plan (an atom more than one slab from its planned
    /// rank is carried as this PE's error, reported at the end of the step).
    pub fn begin_step(&mut self, home: &[Particle]) {
        let me = self.rt.my_pe();
        self.calls += 1;
        self.pending = None;
        let m = self.grid.ranks();
        // Kept between steps: a fresh vector of this size would be new pages every step.
        let mut dest = std::mem::take(&mut self.dest);
        dest.resize(home.len(), 0);
        place(&self.grid, home, &mut dest, &mut self.chunk_counts, &mut self.runs, &mut self.chunk_runs);
        self.dest_counts.fill(0);
        for chunk in self.chunk_counts.chunks_exact(m) {
            for (total, &count) in self.dest_counts.iter_mut().zip(chunk) {
                *total += count;
            }
        }
        let far = first_too_far(&dest, &self.planned, m);
        self.dest = dest;
        if let Some(i) = far {
            self.pending = Some(marker(home[i].global, me));
        }
        self.withheld = far.is_some();
        let mut next = 0;
        for r in 0..m {
            self.dest_offsets[r] = next;
            next += self.dest_counts[r];
        }
    }

    /// How the home atoms were cut when they were placed.
    pub fn chunks(&self) -> by_rank::Chunks<'_> {
        let m = self.grid.ranks();
        let parallel = self.chunk_counts.len() > m;
        let chunk = if parallel { PARALLEL_MIN } else { self.dest.len().max(1) };
        by_rank::Chunks { chunk, ranks: m, counts: &self.chunk_counts, parallel, runs: &self.runs }
    }

    /// Writes the `home` atoms into `out`, one slice per PME rank (`dest_counts[r]` long), in
    /// home order: the layout every path sends. Nothing, when this PE withholds its atoms.
    pub fn pack(&self, home: &[Particle], out: Vec<&mut [Particle]>) {
        if !self.withheld {
            by_rank::pack(&self.dest, home, out, &self.chunks());
        }
    }

    /// Packs the `home` atoms into `send`, by PME rank from `dest_offsets`.
    ///
    /// # Safety
    /// No PE reads this PE's `send` now (the get path's readers of the previous call are
    /// done).
    pub unsafe fn pack_into(&self, home: &[Particle], send: &GlobalMaxArray<'rt, Particle>) {
        // SAFETY: no PE writes this PE's send buffer, and no PE reads it now (the caller's
        // promise); the range holds the home atoms (redistribute checked the capacity).
        let packed = unsafe { send.array().local_range_mut(0..home.len()) };
        self.pack(home, by_rank::split(packed, &self.dest_counts));
    }

    /// The forces that arrived by PME rank (`arrived`, laid out as the atoms went), into
    /// `home_forces` in home order.
    pub fn unpack(&self, arrived: Vec<&[RVec]>, home_forces: &mut [RVec]) {
        by_rank::unpack(&self.dest, arrived, home_forces, &self.chunks());
    }

    /// How many atoms this PE sends to PME rank `r` in this step (none when it reports an
    /// error instead).
    pub fn send_count(&self, r: usize) -> usize {
        if self.withheld { 0 } else { self.dest_counts[r] }
    }

    /// The forward count this PE sends to PME rank `r`, with its error if it has one.
    pub fn count_to(&self, r: usize) -> u64 {
        self.pending.unwrap_or(self.dest_counts[r] as u64)
    }

    /// The status this PME rank returns to PE `p` with its forces: the count, or the error.
    pub fn status_to(&self, p: usize) -> u64 {
        self.pending.unwrap_or(self.src_counts[p] as u64)
    }

    /// Notes the counts received from the sources: errors, offsets by source order.
    pub fn take_source_counts(&mut self, raw: &[u64]) {
        let mut next = 0;
        for (s, &value) in raw.iter().enumerate() {
            let count = if value & ERROR != 0 {
                self.note_error(value);
                0
            } else {
                value as usize
            };
            self.src_counts[s] = count;
            self.src_offsets[s] = next;
            next += count;
        }
        self.received = next;
    }

    /// Notes the status PME rank `r` returned: an error, or the count, checked against what
    /// this PE sent it.
    pub fn take_status(&mut self, r: usize, value: u64) -> Result<()> {
        if value & ERROR != 0 {
            self.note_error(value);
            Ok(())
        } else if self.is_particle[self.rt.my_pe()] {
            check_count(value as usize, self.dest_counts[r], self.grid.pe_of(r))
        } else {
            Ok(())
        }
    }

    /// Notes an error heard of in this step. Of several, every PE keeps the smallest marker,
    /// so that every PE reports the same atom.
    pub fn note_error(&mut self, value: u64) {
        self.pending = Some(self.pending.map_or(value, |p| p.min(value)));
    }

    /// The error of this step, if any PE found one.
    pub fn outcome(&self) -> Result<()> {
        match self.pending {
            Some(marked) => Err(decode(marked)),
            None => Ok(()),
        }
    }
}

/// The most home atoms any PE holds, agreed by every PE, and an error on every PE when a PE
/// that only does PME (not a particle PE) was given home atoms.
///
/// # Collective
/// One max-reduction.
pub(super) fn agree_home(rt: &Runtime, is_particle: &[bool], home: &[Particle]) -> Result<usize> {
    let me = rt.my_pe();
    let misplaced = if is_particle[me] || home.is_empty() { 0 } else { me as u64 + 1 };
    let mut agreed = [home.len() as u64, misplaced];
    rt.max_u64(&mut agreed)?;
    if agreed[1] > 0 {
        let pe = agreed[1] - 1;
        return Err(Error::CollectiveConfig(format!(
            "PE {pe} is a PME-only rank but was given home atoms; with a subset of PEs doing \
             PME, the atoms belong to the other PEs"
        )));
    }
    Ok(agreed[0] as usize)
}

fn marker(atom: u32, pe: usize) -> u64 {
    ERROR | (pe as u64 & PE_MASK) << 32 | atom as u64
}

fn decode(marked: u64) -> Error {
    Error::MovedTooFar { atom: marked as u32, pe: ((marked >> 32) & PE_MASK) as usize }
}

/// The first atom more than one slab from its planned rank (around the ring of `m` slabs,
/// with no division), if any. On a ring of three slabs or fewer no rank is further than one
/// from any other.
fn first_too_far(dest: &[u32], planned: &[u32], m: usize) -> Option<usize> {
    if m <= 3 {
        return None;
    }
    let ring = m as u32;
    let too_far = |(&now, &then): (&u32, &u32)| {
        let ahead = now.wrapping_sub(then).wrapping_add(ring);
        let apart = if ahead >= ring { ahead - ring } else { ahead };
        u32::from(apart > 1 && apart < ring - 1)
    };
    // A branch-free, vectorised sweep first (the largest flag of all): an atom too far is
    // the rare case.
    let any = dest.iter().zip(planned).map(too_far).fold(0, u32::max) > 0;
    if any { dest.iter().zip(planned).position(|pair| too_far(pair) > 0) } else { None }
}

/// A PE returned a different number of forces than it was sent atoms.
pub(super) fn check_count(got: usize, expected: usize, from: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "PE {from} returns {got} forces for the {expected} atoms it was sent"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        assert_eq!(decode(marker(12345, 3)), Error::MovedTooFar { atom: 12345, pe: 3 });
        assert_eq!(decode(marker(u32::MAX, 1 << 20)), Error::MovedTooFar { atom: u32::MAX, pe: 1 << 20 });
        assert!(marker(0, 0) & ERROR != 0);
    }
}
