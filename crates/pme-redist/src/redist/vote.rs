//! The PME ranks' vote on the error of a step: each PME rank knows the errors its sources
//! announced; after the vote every PME rank holds the smallest of all, and passes it to its
//! sources with their forces, so that every PE reports the same atom without counts from
//! every PE to every PE. It runs where the step's mesh did not carry the vote (`plan.rs`).
//!
//! A dissemination among the PME ranks: in round `j` rank `r` puts what it knows to rank
//! `r + 2^j` (around the ring) with a signal, and takes the smallest of that and what rank
//! `r - 2^j` put to it; after ⌈log₂ M⌉ rounds each knows the smallest of all. Slots alternate
//! with the parity of the step, so that a fast rank's next vote never overwrites a value its
//! partner has still to read (to reach the next vote it must have heard, through the rounds,
//! from every rank, that partner included, that it finished this one).

use onesided::{Runtime, SignalArray, SymArray};

use crate::error::Result;
use crate::grid::PmeGrid;

/// The vote's slots: per parity and round, a value and its signal.
pub(super) struct Vote<'rt> {
    values: SymArray<'rt, u64>,
    signals: SignalArray<'rt>,
    rounds: usize,
}

impl<'rt> Vote<'rt> {
    /// # Collective
    /// Every PE allocates the same slots.
    pub fn collective_new(rt: &'rt Runtime, name: &dyn Fn(&str) -> String, m: usize) -> Result<Self> {
        let rounds = m.next_power_of_two().trailing_zeros() as usize;
        Ok(Vote {
            values: SymArray::collective_alloc(rt, &name("vote"), 2 * rounds.max(1))?,
            signals: SignalArray::collective_alloc(rt, &name("vote signals"), 2 * rounds.max(1))?,
            rounds,
        })
    }

    /// Symmetric bytes held.
    pub fn symmetric_bytes(&self) -> usize {
        2 * self.values.len() * size_of::<u64>()
    }

    /// Starts the vote of step `k` (from 1) on PME rank `rank` with `mine`: the first round's
    /// put, which needs nothing from the other ranks, so that it travels while the mesh
    /// works. [`finish`](Self::finish) completes it.
    ///
    /// # Collective
    /// Every PME rank calls it once per step, with the same `k`, then `finish`.
    pub fn start(&self, grid: &PmeGrid, rank: usize, k: u64, mine: u64) -> Result<()> {
        if self.rounds > 0 {
            let slot = (k as usize % 2) * self.rounds;
            let to = (rank + 1) % grid.ranks();
            self.values.put_signal(grid.pe_of(to), slot, &[mine], &self.signals, slot, k)?;
        }
        Ok(())
    }

    /// The smallest of every PME rank's `mine` in step `k`, after [`start`](Self::start) with
    /// the same `mine`.
    ///
    /// # Collective
    /// As [`start`](Self::start).
    pub fn finish(&self, grid: &PmeGrid, rank: usize, k: u64, mine: u64) -> Result<u64> {
        let m = grid.ranks();
        let mut known = mine;
        for j in 0..self.rounds {
            let slot = (k as usize % 2) * self.rounds + j;
            if j > 0 {
                let to = (rank + (1 << j)) % m;
                self.values.put_signal(grid.pe_of(to), slot, &[known], &self.signals, slot, k)?;
            }
            self.signals.wait_ge(slot, k)?;
            let mut heard = [0u64];
            self.values.read_local(slot, &mut heard)?;
            known = known.min(heard[0]);
        }
        Ok(known)
    }
}
