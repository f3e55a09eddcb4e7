//! The agreement by which each PME rank learns who will send to it at a plan (its sources) and
//! how much at most: per PE, O(targets) messages and two barriers and a few reductions per
//! plan, nothing of the size of the job. Each particle PE takes a slot at each target with a
//! remote fetch-add, and after a barrier writes `[pe, bound, its index for the target]` into
//! that slot; each PME rank sorts what it finds by PE (never by slot, which depends on
//! timing), so that every path lays its atoms out alike.

use onesided::{AtomicArray, Collectives, GlobalMaxArray, Runtime};

use super::buffers::GROWTH;
use crate::error::Result;
use crate::grid::PmeGrid;
use crate::model::{MOST_ROWS, RowCounts};

/// A source of a PME rank, as agreed at the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    /// Its PE.
    pub pe: usize,
    /// The most atoms it can send in a step.
    pub bound: usize,
    /// Its slot at this PME rank (where it announces, and its signals).
    pub slot: usize,
    /// This PME rank's index among its targets (where this rank replies to it).
    pub index: usize,
}

/// What a PE learns from the agreement at a plan.
#[derive(Clone, Debug, Default)]
pub(crate) struct Agreed {
    /// This PE's slot at each of its targets.
    pub slots: Vec<usize>,
    /// On a PME rank, its sources by PE.
    pub sources: Vec<Source>,
    /// The most sources of any PME rank and the most targets of any PE, for the slots and
    /// lines the transports keep.
    pub most_sources: usize,
    pub most_targets: usize,
    /// On a PME rank that receives the stage along y of a relay's second hop: the ranks of
    /// its column that the atoms it may receive may go on to, and how many at most to each
    /// (`(rank, bound)` by rank): the targets of its stage along x.
    pub along_x: Vec<(usize, usize)>,
}

/// The symmetric state of the agreement: two slot counters (one per parity of the plan; each
/// PME rank zeroes the one it used as soon as it has read it) and the table of sources.
pub(crate) struct Agreement<'rt> {
    counters: AtomicArray<'rt, u64>,
    table: GlobalMaxArray<'rt, Line>,
    parity: usize,
}

/// A source's line in a PME rank's table: its PE, bound and index for this target, and the
/// counts per row that go on from here ([`RowCounts`]: first row, number of rows or
/// `u64::MAX` for a bound on every row, then the counts), 96 bytes.
type Line = [u64; 5 + MOST_ROWS];

impl<'rt> Agreement<'rt> {
    /// # Collective
    /// Every PE allocates the same arrays.
    pub fn collective_new(rt: &'rt Runtime, name: &dyn Fn(&str) -> String) -> Result<Self> {
        Ok(Agreement {
            counters: AtomicArray::collective_alloc(rt, &name("source counters"), 2)?,
            table: GlobalMaxArray::collective_alloc(rt, &name("sources"), 1, GROWTH)?,
            parity: 0,
        })
    }

    /// Symmetric bytes held.
    pub fn symmetric_bytes(&self) -> usize {
        2 * size_of::<u64>() + self.table.capacity() * size_of::<Line>()
    }

    /// Tells each of this PE's `targets` (PME ranks of `grid`) that it will send at most
    /// `bounds` atoms (and, with `rows`, how many of them may go on to each row), and learns,
    /// on a PME rank (`my_rank`), who will send to it.
    ///
    /// # Collective
    /// Every PE must call it; two barriers and three reductions.
    pub fn collective_agree(
        &mut self,
        rt: &Runtime,
        grid: &PmeGrid,
        my_rank: Option<usize>,
        targets: &[usize],
        bounds: &[usize],
        rows: &[RowCounts],
    ) -> Result<Agreed> {
        let (me, p) = (rt.my_pe(), self.parity);
        let mut slots = Vec::with_capacity(targets.len());
        for &t in targets {
            slots.push(self.counters.fetch_add(grid.pe_of(t), p, 1)? as usize);
        }
        // Every slot is taken (the fetch-adds returned) before any PME rank counts them.
        rt.barrier();
        let fan_in = if my_rank.is_some() { self.counters.load(p)? as usize } else { 0 };
        // Every fetch-add is done and only this PE reads its counter: zeroed now, and the
        // parity flipped, so that the next agreement starts afresh however this one ends.
        self.counters.set(me, p, 0)?;
        self.parity = 1 - p;
        let mut most = [fan_in as u64, targets.len() as u64];
        rt.max_u64(&mut most)?;
        self.table.collective_ensure(fan_in)?;
        for (i, (&t, &slot)) in targets.iter().zip(&slots).enumerate() {
            let mut line: Line = [0; 5 + MOST_ROWS];
            line[..3].copy_from_slice(&[me as u64, bounds[i] as u64, i as u64]);
            if let Some(r) = rows.get(i) {
                match r.every {
                    Some(bound) => line[3..6].copy_from_slice(&[0, u64::MAX, bound as u64]),
                    None => {
                        line[3] = r.lo as u64;
                        line[4] = r.counts.len() as u64;
                        for (k, &c) in r.counts.iter().enumerate() {
                            line[5 + k] = c as u64;
                        }
                    }
                }
            }
            self.table.array().put(grid.pe_of(t), slot, &[line])?;
        }
        // Every line is in place before any PME rank reads its table.
        rt.barrier();
        let mut lines = vec![[0u64; 5 + MOST_ROWS]; fan_in];
        self.table.array().read_local(0, &mut lines)?;
        let mut sources: Vec<Source> = lines
            .iter()
            .enumerate()
            .map(|(slot, l)| Source { pe: l[0] as usize, bound: l[1] as usize, slot, index: l[2] as usize })
            .collect();
        sources.sort_unstable_by_key(|s| s.pe);
        let along_x = match my_rank {
            Some(rank) if lines.iter().any(|l| l[4] > 0) => along_x(grid, rank, &lines),
            _ => Vec::new(),
        };
        Ok(Agreed { slots, sources, most_sources: most[0] as usize, most_targets: most[1] as usize, along_x })
    }
}

/// From its sources' lines, the targets and bounds of the stage along x of PME rank `rank`:
/// per row of its column, the sum over its sources of the atoms that may go on there.
fn along_x(grid: &PmeGrid, rank: usize, lines: &[Line]) -> Vec<(usize, usize)> {
    let [px, py] = grid.dims();
    let mut per_row = vec![0usize; px];
    for l in lines {
        let rows = match l[4] {
            u64::MAX => RowCounts { every: Some(l[5] as usize), ..RowCounts::default() },
            span => RowCounts {
                lo: l[3] as usize,
                counts: l[5..5 + (span as usize).min(MOST_ROWS)].iter().map(|&c| c as usize).collect(),
                every: None,
            },
        };
        rows.add_to(&mut per_row);
    }
    let column = rank % py;
    per_row.iter().enumerate().filter(|&(_, &c)| c > 0).map(|(row, &c)| (row * py + column, c)).collect()
}
