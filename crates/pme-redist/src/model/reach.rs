//! Partners from the plan, without a runtime: which PME ranks each home atom may reach before
//! the next plan ([`Reach`]), the PME ranks a particle PE therefore sends to (its targets) and
//! a bound on the atoms each may receive from it ([`planned_targets`]); on pencils, how many of
//! them may go on to each row ([`planned_stage_targets`]). The redistribution's agreement
//! tells each target what this computes; the scale model computes it for every PE of a job.
//!
//! An atom's reach is a run of consecutive PME ranks around the ring of slabs (with pencils, a
//! run of rows around the ring of rows and a run of columns around the ring of columns): by
//! default its planned slab, row or column and one either side; with a displacement margin,
//! those its x (and y) fraction can reach when it moves by at most the margin in any
//! direction. A PE's bounds, the atoms whose reach includes each PME rank, come from a 2-D
//! difference array over rows and columns, O(home + ranks). A step in which an atom lies
//! outside its reach reports it on every PE (as [`Error::MovedTooFar`](crate::Error)); so
//! while no error is reported, a PME rank receives from each source at most that source's
//! bound, and the receive buffers sized by the bounds always suffice.

use crate::grid::PmeGrid;
use crate::particle::Particle;

/// How far an atom may move between two plans before a step reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Margin {
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
pub(crate) struct Reach {
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
    /// On the stage along y of a relay's second hop ([`Reach::along_y`]), per target: how
    /// many of the atoms that may go there may then go on to each row (empty elsewhere).
    pub rows: Vec<RowCounts>,
}

/// The most rows a [`RowCounts`] names one by one; beyond, it bounds every row alike.
pub(crate) const MOST_ROWS: usize = 7;

/// How many atoms may go on to each row of PME ranks from one column: counts for the rows
/// `lo..lo + counts.len()` around the ring of rows, or (`every`) at most `every` to any row
/// (the largest of the counts, where they span more rows than a line names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RowCounts {
    pub lo: usize,
    pub counts: Vec<usize>,
    pub every: Option<usize>,
}

impl RowCounts {
    /// The counts of `rows` (row, count) sorted by row, on a ring of `ring` rows: the
    /// shortest run around the ring that holds them, or a bound for every row where that run
    /// is longer than [`MOST_ROWS`].
    pub(crate) fn of(rows: &[(usize, usize)], ring: usize) -> RowCounts {
        if rows.is_empty() {
            return RowCounts::default();
        }
        // The run starts after the largest gap between consecutive rows around the ring.
        let (mut lo, mut gap) = (rows[0].0, 0);
        for (k, &(row, _)) in rows.iter().enumerate() {
            let previous = rows[(k + rows.len() - 1) % rows.len()].0;
            let g = (row + ring - previous - 1) % ring;
            if rows.len() > 1 && g > gap {
                (lo, gap) = (row, g);
            }
        }
        let span = if rows.len() == 1 { 1 } else { ring - gap };
        if span > MOST_ROWS {
            // The largest count bounds each row's.
            let most = rows.iter().map(|&(_, c)| c).max().unwrap_or(0);
            return RowCounts { lo: 0, counts: Vec::new(), every: Some(most) };
        }
        let mut counts = vec![0; span];
        for &(row, c) in rows {
            counts[(row + ring - lo) % ring] += c;
        }
        RowCounts { lo, counts, every: None }
    }

    /// Adds these counts to `per_row` (one entry per row).
    pub(crate) fn add_to(&self, per_row: &mut [usize]) {
        let ring = per_row.len();
        match self.every {
            Some(bound) => per_row.iter_mut().for_each(|c| *c += bound),
            None => {
                for (k, &c) in self.counts.iter().enumerate() {
                    per_row[(self.lo + k) % ring] += c;
                }
            }
        }
    }
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

    /// The reach of the `home` atoms of a relay in row `row` of a pencil grid, for the stage
    /// of its second hop along y (GROMACS's minor dimension first): each atom's whole reach,
    /// rows and columns, as [`new`](Self::new) finds it (the step checks against it), but the
    /// targets are the ranks of this row in the columns the atoms reach, each bound by the
    /// atoms whose columns include it, and with, per target, how many of those may go on to
    /// each row ([`rows`](Self::rows)): the stage along x plans from those.
    pub fn along_y(grid: &PmeGrid, margin: Margin, home: &[Particle], planned: &[u32], row: usize) -> Reach {
        let [px, py] = grid.dims();
        let mut reach = Reach::new(grid, margin, home, planned, row * py);
        // (column, row) -> atoms that may go to the column and then on to the row.
        let mut pairs = std::collections::BTreeMap::<(usize, usize), usize>::new();
        let mut columns = std::collections::BTreeMap::<usize, usize>::new();
        for i in 0..home.len() {
            for dc in 0..reach.y_span[i] as usize {
                let column = (reach.y_lo[i] as usize + dc) % py;
                *columns.entry(column).or_default() += 1;
                for dr in 0..reach.span[i] as usize {
                    *pairs.entry((column, (reach.lo[i] as usize + dr) % px)).or_default() += 1;
                }
            }
        }
        reach.targets.clear();
        reach.bounds.clear();
        for (&column, &bound) in &columns {
            reach.targets.push(row * py + column);
            reach.bounds.push(bound);
            let rows: Vec<(usize, usize)> =
                pairs.range((column, 0)..(column + 1, 0)).map(|(&(_, r), &c)| (r, c)).collect();
            reach.rows.push(RowCounts::of(&rows, px));
        }
        if reach.targets.is_empty() {
            // No atoms: one target all the same, this row's first rank, to hear of errors.
            reach.targets.push(row * py);
            reach.bounds.push(0);
            reach.rows.push(RowCounts::default());
        }
        reach
    }

    /// A reach given by the plan before (the stage along x of a relay's second hop, whose home
    /// atoms change every step): these targets and bounds, for up to `capacity` home atoms, no
    /// per-atom reach (the stage along y checked each atom's).
    pub fn given(grid: &PmeGrid, targets: Vec<usize>, bounds: Vec<usize>, capacity: usize) -> Reach {
        Reach { atoms: capacity, columns: grid.dims()[1] as u32, targets, bounds, ..Reach::default() }
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
/// on the atoms it may send there: what [`Redistribution::targets`](crate::Redistribution::targets)
/// reports and the agreement tells each target, computed without a runtime (for a model of
/// what a job at scale would send, say). `margin` is the displacement margin in nm
/// ([`RedistBuilder::displacement_margin`](crate::RedistBuilder::displacement_margin)), or
/// `None` for one slab.
pub fn planned_targets(grid: &PmeGrid, margin: Option<f32>, home: &[Particle]) -> (Vec<usize>, Vec<usize>) {
    let planned: Vec<u32> = home.iter().map(|p| grid.rank_of(p.x) as u32).collect();
    let margin = margin.map_or(Margin::Slab, Margin::Distance);
    let reach = Reach::new(grid, margin, home, &planned, 0);
    if home.is_empty() { (Vec::new(), Vec::new()) } else { (reach.targets, reach.bounds) }
}

/// On a pencil grid, the stage along y of the second hop of a relay in row `row` holding
/// `home` (what its particle PEs sent it): per target, a rank of that row, the bound on the
/// atoms it may send there and how many of those may then go on to each row (`(row,
/// count)`, by row), as the agreement tells the target, which plans its stage along x from
/// the sum over its sources. Computed without a runtime, as
/// [`planned_targets`] is; `margin` as there.
pub fn planned_stage_targets(
    grid: &PmeGrid,
    margin: Option<f32>,
    row: usize,
    home: &[Particle],
) -> Vec<StageTarget> {
    if home.is_empty() {
        return Vec::new();
    }
    let planned: Vec<u32> = home.iter().map(|p| grid.rank_of(p.x) as u32).collect();
    let reach = Reach::along_y(grid, margin.map_or(Margin::Slab, Margin::Distance), home, &planned, row);
    let px = grid.dims()[0];
    reach
        .targets
        .iter()
        .zip(&reach.bounds)
        .zip(&reach.rows)
        .map(|((&t, &bound), rows)| {
            let mut per_row = vec![0; px];
            rows.add_to(&mut per_row);
            let rows = per_row.into_iter().enumerate().filter(|&(_, c)| c > 0).collect();
            StageTarget { rank: t, bound, rows }
        })
        .collect()
}

/// A target of the stage along y of a relay's second hop ([`planned_stage_targets`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageTarget {
    /// The PME rank, in the relay's row.
    pub rank: usize,
    /// The most atoms the relay may send it in a step.
    pub bound: usize,
    /// How many of those may go on to each row, `(row, count)` by row.
    pub rows: Vec<(usize, usize)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(m: usize) -> PmeGrid {
        let pes: Vec<usize> = (0..m).collect();
        PmeGrid::builder([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]], &pes)
            .sizes([64, 16, 16])
            .build()
            .unwrap()
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

    /// A 4 nm cube on 4 × 4 pencils.
    fn pencils_4x4() -> PmeGrid {
        let pes: Vec<usize> = (0..16).collect();
        let cube = [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]];
        PmeGrid::builder(cube, &pes).sizes([64, 64, 16]).pencils([4, 4]).build().unwrap()
    }

    #[test]
    fn row_counts_take_the_shortest_run_around_the_ring() {
        let r = RowCounts::of(&[(0, 2), (1, 3), (7, 1)], 8);
        assert_eq!((r.lo, r.counts.clone(), r.every), (7, vec![1, 2, 3], None));
        let mut per_row = vec![0; 8];
        r.add_to(&mut per_row);
        assert_eq!(per_row, vec![2, 3, 0, 0, 0, 0, 0, 1]);
        let one = RowCounts::of(&[(5, 4)], 8);
        assert_eq!((one.lo, one.counts), (5, vec![4]));
        // More rows than a line names: one bound for every row.
        let wide: Vec<(usize, usize)> = (0..9).map(|r| (r, 1 + r % 3)).collect();
        assert_eq!(RowCounts::of(&wide, 10).every, Some(3));
    }

    #[test]
    fn the_stage_along_y_counts_what_may_go_on_to_each_row() {
        let g = pencils_4x4();
        let home: Vec<Particle> = (0..40)
            .map(|i| Particle { x: [0.1 * i as f32 % 4.0, 0.37 * i as f32 % 4.0, 1.0], q: 1.0, global: i })
            .collect();
        let planned: Vec<u32> = home.iter().map(|p| g.rank_of(p.x) as u32).collect();
        let margin = Margin::Distance(0.3);
        let whole = Reach::new(&g, margin, &home, &planned, 0);
        let row = 2;
        let stage = Reach::along_y(&g, margin, &home, &planned, row);
        // The same per-atom reach, so the step checks each atom as the direct hop would.
        assert_eq!(
            (&stage.lo, &stage.span, &stage.y_lo, &stage.y_span),
            (&whole.lo, &whole.span, &whole.y_lo, &whole.y_span)
        );
        // Brute force per column of the row and per row beyond.
        for ((&t, &bound), rows) in stage.targets.iter().zip(&stage.bounds).zip(&stage.rows) {
            assert_eq!(t / 4, row, "target {t} outside row {row}");
            let column = t % 4;
            let reaches = |i: usize, lo: &[u32], span: &[u32], x: usize| {
                (0..span[i] as usize).any(|k| (lo[i] as usize + k) % 4 == x)
            };
            let want_bound =
                (0..home.len()).filter(|&i| reaches(i, &stage.y_lo, &stage.y_span, column)).count();
            assert_eq!(bound, want_bound, "column {column}");
            let mut per_row = vec![0; 4];
            rows.add_to(&mut per_row);
            for (a, &count) in per_row.iter().enumerate() {
                let want = (0..home.len())
                    .filter(|&i| {
                        reaches(i, &stage.y_lo, &stage.y_span, column)
                            && reaches(i, &stage.lo, &stage.span, a)
                    })
                    .count();
                assert_eq!(count, want, "column {column}, row {a}");
            }
        }
        let model = planned_stage_targets(&g, Some(0.3), row, &home);
        assert_eq!(model.iter().map(|s| s.rank).collect::<Vec<_>>(), stage.targets);
    }

    #[test]
    fn pencils_reach_the_rows_and_columns_a_displacement_can() {
        let g = pencils_4x4();
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
