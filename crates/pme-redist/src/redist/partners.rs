//! Partners from the plan: which PME ranks each home atom may reach before the next plan, the
//! PME ranks a particle PE therefore sends to (its targets) with a bound on the atoms each may
//! receive from it, and the agreement by which each PME rank learns who will send to it (its
//! sources) and how much at most.
//!
//! An atom's reach is a run of consecutive PME ranks around the ring of slabs: by default its
//! planned rank and one either side; with a displacement margin, the slabs its x fraction can
//! reach when it moves by at most the margin in any direction. A step in which an atom lies
//! outside its reach reports it on every PE (as [`Error::MovedTooFar`](crate::Error)); so
//! while no error is reported, a PME rank receives from each source at most that source's
//! bound, and the receive buffers sized by the bounds always suffice.
//!
//! The agreement costs, per PE, O(targets) messages and two barriers and a few reductions per
//! plan, nothing of the size of the job: each particle PE takes a slot at each target with a
//! remote fetch-add, and after a barrier writes `[pe, bound, its index for the target]` into
//! that slot; each PME rank sorts what it finds by PE (never by slot, which depends on
//! timing), so that every path lays its atoms out alike.

use onesided::{AtomicArray, GlobalMaxArray, Runtime};

use super::{GROWTH, Particle};
use crate::error::Result;
use crate::grid::PmeGrid;

/// How far an atom may move between two plans before a step reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Margin {
    /// Into the slab on either side of its planned one, whatever the distance.
    Slab,
    /// Up to this many nm in any direction.
    Distance(f32),
}

/// Each home atom's reach, and this PE's targets and bounds.
///
/// An atom's reach is a run of rows of PME ranks around the ring of rows (with slabs, of
/// ranks) and, with pencils, a run of columns around the ring of columns: the ranks of both.
#[derive(Debug, Default, Clone)]
pub(super) struct Reach {
    /// The home atoms it is for.
    pub atoms: usize,
    /// First row of each home atom's reach (empty on a relay's first hop, where every atom
    /// goes to the relay).
    pub lo: Vec<u32>,
    /// Number of rows, from `lo` around the ring, in each home atom's reach.
    pub span: Vec<u32>,
    /// With pencils, the first column and the number of columns (empty with slabs).
    pub y_lo: Vec<u32>,
    pub y_span: Vec<u32>,
    /// Columns per row (1 with slabs).
    columns: u32,
    /// The PME ranks this PE sends to, ascending.
    pub targets: Vec<usize>,
    /// Per target, the home atoms whose reach includes it: the most it can receive from this
    /// PE while no error is reported.
    pub bounds: Vec<usize>,
}

/// A run of `span` of `ring` places from `lo`, for a change of fraction `df` at fraction `s`
/// along a dimension cut by `place_of` (fraction to place) and now at `planned`.
fn run_of(ring: u32, s: f64, df: f64, planned: u32, place_of: impl Fn(f64) -> u32) -> (u32, u32) {
    if 2.0 * df >= 1.0 || !s.is_finite() {
        return (0, ring);
    }
    let (lo, hi) = (place_of(s - df), place_of(s + df));
    // Measured from the planned place, so that it always lies inside; rounding that would
    // put it outside makes the run the whole ring, never too small.
    let below = (planned + ring - lo) % ring;
    let above = (hi + ring - planned) % ring;
    let span = below + above + 1;
    if span >= ring { (0, ring) } else { ((planned + ring - below) % ring, span) }
}

/// The run of one place either side of `planned` on a ring of `ring` (all of it up to 3).
fn neighbours(ring: u32, planned: u32) -> (u32, u32) {
    if ring <= 3 { (0, ring) } else { (if planned == 0 { ring - 1 } else { planned - 1 }, 3) }
}

impl Reach {
    /// The reach of each of the `home` atoms planned on PME ranks `planned`, and this PE's
    /// targets. A particle PE without atoms names one PME rank all the same (`me` around the
    /// ring), to hear of the errors of each step from it.
    pub fn new(grid: &PmeGrid, margin: Margin, home: &[Particle], planned: &[u32], me: usize) -> Reach {
        let [px, py] = grid.dims().map(|d| d as u32);
        let pencil = py > 1;
        let n = home.len();
        let mut reach = Reach { atoms: n, columns: py, ..Reach::default() };
        reach.lo.reserve(n);
        reach.span.reserve(n);
        if pencil {
            reach.y_lo.reserve(n);
            reach.y_span.reserve(n);
        }
        let (dfx, dfy) = match margin {
            Margin::Slab => (None, None),
            // A little more than the margin, so that rounding never reports an atom that
            // moved by exactly the margin.
            Margin::Distance(nm) => {
                let pad = |df: f64| Some(df * (1.0 + 1e-6) + 1e-12);
                (pad(grid.x_fraction_reach(f64::from(nm))), pad(grid.y_fraction_reach(f64::from(nm))))
            }
        };
        for (p, &rank) in home.iter().zip(planned) {
            let (row, column) = (rank / py, rank % py);
            let (l, s) = match dfx {
                None => neighbours(px, row),
                Some(df) => {
                    run_of(px, grid.x_fraction(p.x), df, row, |f| grid.rank_of_plane(grid.plane_at(f)) as u32)
                }
            };
            reach.lo.push(l);
            reach.span.push(s);
            if pencil {
                let (l, s) = match dfy {
                    None => neighbours(py, column),
                    Some(df) => run_of(py, grid.y_fraction(p.x), df, column, |f| {
                        grid.column_of_line(grid.line_at(f)) as u32
                    }),
                };
                reach.y_lo.push(l);
                reach.y_span.push(s);
            }
        }
        // Atoms per rank from a difference array over the rows and columns around both rings:
        // O(home + ranks).
        let (rows, cols) = (px as usize, py as usize);
        let mut diff = vec![0i64; (rows + 1) * (cols + 1)];
        let mut add = |r0: usize, r1: usize, c0: usize, c1: usize| {
            diff[r0 * (cols + 1) + c0] += 1;
            diff[r0 * (cols + 1) + c1] -= 1;
            diff[r1 * (cols + 1) + c0] -= 1;
            diff[r1 * (cols + 1) + c1] += 1;
        };
        let wrap = |lo: usize, span: usize, ring: usize| -> [(usize, usize); 2] {
            if lo + span <= ring { [(lo, lo + span), (0, 0)] } else { [(lo, ring), (0, lo + span - ring)] }
        };
        for i in 0..n {
            let xs = wrap(reach.lo[i] as usize, reach.span[i] as usize, rows);
            let ys = if pencil {
                wrap(reach.y_lo[i] as usize, reach.y_span[i] as usize, cols)
            } else {
                [(0, 1), (0, 0)]
            };
            for &(r0, r1) in xs.iter().filter(|(a, b)| a < b) {
                for &(c0, c1) in ys.iter().filter(|(a, b)| a < b) {
                    add(r0, r1, c0, c1);
                }
            }
        }
        for r in 0..rows {
            for c in 0..cols {
                let i = r * (cols + 1) + c;
                let up = if r > 0 { diff[i - (cols + 1)] } else { 0 };
                let left = if c > 0 { diff[i - 1] } else { 0 };
                let corner = if r > 0 && c > 0 { diff[i - (cols + 1) - 1] } else { 0 };
                diff[i] += up + left - corner;
                if diff[i] > 0 {
                    reach.targets.push(r * cols + c);
                    reach.bounds.push(diff[i] as usize);
                }
            }
        }
        if reach.targets.is_empty() {
            reach.targets.push(me % (rows * cols));
            reach.bounds.push(0);
        }
        reach
    }

    /// The reach of `n` home atoms that all go to PME rank `r` of `grid` (the first hop of a
    /// relay), whatever their position: `r` is the one target, bound by `n`.
    pub fn all_to(grid: &PmeGrid, n: usize, r: usize) -> Reach {
        Reach {
            atoms: n,
            columns: grid.dims()[1] as u32,
            targets: vec![r],
            bounds: vec![n],
            ..Reach::default()
        }
    }

    /// The first home atom whose PME rank in this step (`dest`, of `m` ranks) lies outside
    /// its reach, if any.
    pub fn first_outside(&self, dest: &[u32], m: usize) -> Option<usize> {
        if !self.y_lo.is_empty() {
            let (py, px) = (self.columns, m as u32 / self.columns);
            let inside = |now: u32, lo: u32, span: u32, ring: u32| {
                let ahead = now + ring - lo;
                let ahead = if ahead >= ring { ahead - ring } else { ahead };
                ahead < span
            };
            return (0..dest.len()).find(|&i| {
                let (row, column) = (dest[i] / py, dest[i] % py);
                !(inside(row, self.lo[i], self.span[i], px)
                    && inside(column, self.y_lo[i], self.y_span[i], py))
            });
        }
        let ring = m as u32;
        let outside = |((&now, &lo), &span): ((&u32, &u32), &u32)| {
            let ahead = now + ring - lo;
            let ahead = if ahead >= ring { ahead - ring } else { ahead };
            u32::from(ahead >= span)
        };
        let triples = || dest.iter().zip(&self.lo).zip(&self.span);
        // A branch-free, vectorised sweep first: an atom too far is the rare case.
        let any = triples().map(outside).fold(0, u32::max) > 0;
        if any { triples().position(|t| outside(t) > 0) } else { None }
    }

    /// The index of PME rank `r` among the targets.
    pub fn target_index(&self, r: usize) -> Option<usize> {
        self.targets.binary_search(&r).ok()
    }
}

/// The PME ranks a particle PE holding `home` sends to under a plan, and per target the bound
/// on the atoms it may send there: what [`Redistribution::targets`](super::Redistribution::targets)
/// reports and the agreement tells each target, computed without a runtime (for a model of
/// what a job at scale would send, say). `margin` is the displacement margin in nm
/// ([`RedistBuilder::displacement_margin`](super::RedistBuilder::displacement_margin)), or
/// `None` for one slab.
pub fn planned_targets(grid: &PmeGrid, margin: Option<f32>, home: &[Particle]) -> (Vec<usize>, Vec<usize>) {
    let planned: Vec<u32> = home.iter().map(|p| grid.rank_of(p.x) as u32).collect();
    let margin = margin.map_or(Margin::Slab, Margin::Distance);
    let reach = Reach::new(grid, margin, home, &planned, 0);
    if home.is_empty() { (Vec::new(), Vec::new()) } else { (reach.targets, reach.bounds) }
}

/// A source of a PME rank, as agreed at the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Source {
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
pub(super) struct Agreed {
    /// This PE's slot at each of its targets.
    pub slots: Vec<usize>,
    /// On a PME rank, its sources by PE.
    pub sources: Vec<Source>,
    /// The most sources of any PME rank and the most targets of any PE, for the slots and
    /// lines the transports keep.
    pub most_sources: usize,
    pub most_targets: usize,
}

/// The symmetric state of the agreement: two slot counters (one per parity of the plan; each
/// PME rank zeroes the one it used as soon as it has read it) and the table of sources.
pub(super) struct Agreement<'rt> {
    counters: AtomicArray<'rt, u64>,
    table: GlobalMaxArray<'rt, [u64; 4]>,
    parity: usize,
}

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
        2 * size_of::<u64>() + self.table.capacity() * size_of::<[u64; 4]>()
    }

    /// Tells each of this PE's `targets` (PME ranks of `grid`) that it will send at most
    /// `bounds` atoms, and learns, on a PME rank (`my_rank`), who will send to it.
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
            let line = [me as u64, bounds[i] as u64, i as u64, 0];
            self.table.array().put(grid.pe_of(t), slot, &[line])?;
        }
        // Every line is in place before any PME rank reads its table.
        rt.barrier();
        let mut lines = vec![[0u64; 4]; fan_in];
        self.table.array().read_local(0, &mut lines)?;
        let mut sources: Vec<Source> = lines
            .iter()
            .enumerate()
            .map(|(slot, l)| Source { pe: l[0] as usize, bound: l[1] as usize, slot, index: l[2] as usize })
            .collect();
        sources.sort_unstable_by_key(|s| s.pe);
        Ok(Agreed { slots, sources, most_sources: most[0] as usize, most_targets: most[1] as usize })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(m: usize) -> PmeGrid {
        let pes: Vec<usize> = (0..m).collect();
        PmeGrid::with_sizes([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]], [64, 16, 16], &pes).unwrap()
    }

    fn atom(x: f32) -> Particle {
        Particle { x: [x, 1.0, 1.0], q: 1.0, global: 0 }
    }

    /// Brute force: every rank a displacement of at most `nm` along x can reach.
    fn reached(g: &PmeGrid, x: f32, nm: f32) -> Vec<usize> {
        let mut ranks: Vec<usize> =
            (-200..=200).map(|i| g.rank_of([x + nm * i as f32 / 200.0, 1.0, 1.0])).collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
    }

    #[test]
    fn a_margin_reaches_what_a_displacement_can() {
        let g = grid(8);
        for &x in &[0.01f32, 0.49, 0.51, 1.0, 1.74, 2.0, 3.99] {
            for &nm in &[0.05f32, 0.3, 0.6] {
                let home = [atom(x)];
                let planned = [g.rank_of(home[0].x) as u32];
                let reach = Reach::new(&g, Margin::Distance(nm), &home, &planned, 0);
                let mut covered: Vec<usize> =
                    (0..reach.span[0]).map(|j| (reach.lo[0] as usize + j as usize) % 8).collect();
                covered.sort_unstable();
                let want = reached(&g, x, nm);
                assert!(
                    want.iter().all(|r| covered.contains(r)),
                    "x {x} nm {nm}: {covered:?} misses {want:?}"
                );
                assert!(covered.len() <= want.len() + 1, "x {x} nm {nm}: {covered:?} for {want:?}");
                assert_eq!(reach.targets, covered, "x {x} nm {nm}");
                assert!(reach.bounds.iter().all(|&b| b == 1));
            }
        }
    }

    #[test]
    fn targets_and_bounds_count_the_atoms_that_reach() {
        let g = grid(8);
        // Slabs of half a nm: atoms in slabs 0 and 7 reach around the ring.
        let home: Vec<Particle> = [0.1f32, 0.2, 3.9, 1.6].map(atom).to_vec();
        let planned: Vec<u32> = home.iter().map(|p| g.rank_of(p.x) as u32).collect();
        let reach = Reach::new(&g, Margin::Slab, &home, &planned, 0);
        assert_eq!(reach.targets, vec![0, 1, 2, 3, 4, 6, 7]);
        assert_eq!(reach.bounds, vec![3, 2, 1, 1, 1, 1, 3]);
        let mut dest = planned.clone();
        assert_eq!(reach.first_outside(&dest, 8), None);
        dest[3] = 4;
        assert_eq!(reach.first_outside(&dest, 8), None);
        dest[1] = 6;
        assert_eq!(reach.first_outside(&dest, 8), Some(1));
        // No atoms: one target all the same.
        let empty = Reach::new(&g, Margin::Slab, &[], &[], 11);
        assert_eq!((empty.targets, empty.bounds), (vec![3], vec![0]));
        // Three ranks or fewer: every rank.
        let small = grid(3);
        let reach = Reach::new(&small, Margin::Slab, &home, &[0, 0, 2, 1], 0);
        assert_eq!(reach.targets, vec![0, 1, 2]);
        assert_eq!(reach.first_outside(&[2, 1, 0, 2], 3), None);
    }

    #[test]
    fn pencils_reach_the_rows_and_columns_a_displacement_can() {
        let pes: Vec<usize> = (0..16).collect();
        let g = PmeGrid::with_sizes_in_pencils(
            [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]],
            [64, 64, 16],
            &pes,
            [4, 4],
        )
        .unwrap();
        for &(x, y) in &[(0.02f32, 0.02f32), (0.99, 2.01), (1.5, 3.98), (2.2, 1.0)] {
            for &nm in &[0.05f32, 0.4] {
                let home = [Particle { x: [x, y, 1.0], q: 1.0, global: 0 }];
                let planned = [g.rank_of(home[0].x) as u32];
                let reach = Reach::new(&g, Margin::Distance(nm), &home, &planned, 0);
                let along = |d: usize| {
                    let mut v: Vec<usize> = (-100..=100)
                        .map(|i| {
                            let mut p = home[0].x;
                            p[d] += nm * i as f32 / 100.0;
                            let r = g.rank_of(p);
                            if d == 0 { r / 4 } else { r % 4 }
                        })
                        .collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                };
                let mut want: Vec<usize> =
                    along(0).iter().flat_map(|&a| along(1).into_iter().map(move |b| a * 4 + b)).collect();
                want.sort_unstable();
                assert_eq!(reach.targets, want, "({x}, {y}) by {nm} nm");
                let mut dest = planned;
                assert_eq!(reach.first_outside(&dest, 16), None);
                // Two rows away along x: outside unless the margin reaches it.
                dest[0] = (planned[0] + 8) % 16;
                assert_eq!(reach.first_outside(&dest, 16).is_some(), !want.contains(&(dest[0] as usize)));
            }
        }
    }
}
