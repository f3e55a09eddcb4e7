//! New boundaries from the loads: GROMACS's relaxed move within the least width and the
//! half-slab limit (`cellsizes.cpp`), and the way back to equal domains; on grids of two or
//! three split dimensions, per row of domains (staggered), as far towards them as the limits
//! between neighbouring rows allow (`moved_row`).

use crate::grid::{DdGrid, equal_bounds};

/// GROMACS's under-relaxation of the cell-size change.
const RELAX: f64 = 0.5;
/// The largest change of a slab's width at one update, as a fraction of it (GROMACS's
/// `GMX_DLB_MAX_BOX_SCALING` default of 10 %).
const CHANGE_LIMIT: f64 = 0.1;

/// One step of boundaries `old` back towards equal domains: the furthest along the straight
/// line to them that moves no boundary past the middle of a slab it bounded (so no atom moves
/// more than one domain). Every width on the way is a weighted mean of the old one and the
/// equal one, so none falls below the smaller of the two, and the steps shrink every distance
/// to equal domains by the same factor (6 steps from six slabs at their least width beside six
/// wide ones, 7 for sixteen).
pub(crate) fn toward_equal(old: &[f64]) -> Vec<f64> {
    equal_by(old, share_toward_equal(old))
}

/// How far along the straight line from `old` to equal domains a step may go (1: all the way)
/// without moving a boundary past the middle of a slab it bounded.
pub(crate) fn share_toward_equal(old: &[f64]) -> f64 {
    let n = old.len() - 1;
    let equal = equal_bounds(n);
    let mut t = 1.0f64;
    for i in 1..n {
        let to = equal[i] - old[i];
        // Half the slab on the side it moves towards.
        let room = if to > 0.0 { 0.5 * (old[i + 1] - old[i]) } else { 0.5 * (old[i] - old[i - 1]) };
        if to.abs() > room {
            t = t.min(room / to.abs());
        }
    }
    t
}

/// The boundaries `share` of the way from `old` to equal domains.
pub(crate) fn equal_by(old: &[f64], share: f64) -> Vec<f64> {
    along(old, &equal_bounds(old.len() - 1), share)
}

/// New boundaries for one dimension (`old`: its `n + 1` boundaries) from the loads of its `n`
/// slabs, each slab at least `least` wide (fractions), and whether a limit held some slab or
/// boundary back. Returns `old` where the limits leave no room.
pub(crate) fn balanced_bounds(old: &[f64], loads: &[f64], least: f64) -> (Vec<f64>, bool) {
    let n = loads.len();
    debug_assert_eq!(old.len(), n + 1);
    let mean = loads.iter().sum::<f64>() / n as f64;
    if mean.is_nan() || mean <= 0.0 || least * n as f64 >= 1.0 {
        return (old.to_vec(), false);
    }
    let imbalance: Vec<f64> = loads.iter().map(|&l| (l - mean) / mean).collect();
    let change = imbalance.iter().fold(0.0f64, |m, &i| m.max((RELAX * i).abs()));
    let scale = if change > CHANGE_LIMIT { RELAX * CHANGE_LIMIT / change } else { RELAX };
    let mut size: Vec<f64> = (0..n).map(|i| (old[i + 1] - old[i]) * (1.0 - scale * imbalance[i])).collect();
    // Slabs below the least width are held at it and the rest share what is left, until no
    // more are held (GROMACS's dd_cell_sizes_dlb_root_enforce_limits).
    let mut held = vec![false; n];
    loop {
        let free: f64 = (0..n).filter(|&i| !held[i]).map(|i| size[i]).sum();
        let room = 1.0 - least * held.iter().filter(|&&h| h).count() as f64;
        let factor = room / free;
        let mut newly = false;
        for i in 0..n {
            if !held[i] {
                size[i] *= factor;
                if size[i] < least {
                    size[i] = least;
                    held[i] = true;
                    newly = true;
                }
            }
        }
        if !newly {
            break;
        }
    }
    let mut limited = held.iter().any(|&h| h);
    let mut bounds = Vec::with_capacity(n + 1);
    bounds.push(0.0);
    for i in 0..n - 1 {
        let wanted = bounds[i] + size[i];
        // No boundary past the middle of either slab it bounded.
        let (low, high) = (0.5 * (old[i] + old[i + 1]), 0.5 * (old[i + 1] + old[i + 2]));
        let placed = wanted.clamp(low, high);
        limited |= placed != wanted;
        bounds.push(placed);
    }
    bounds.push(1.0);
    if bounds.windows(2).any(|w| w[1] - w[0] < least) {
        // The two limits disagree: stay where the last update left the boundaries.
        return (old.to_vec(), true);
    }
    (bounds, limited)
}

/// What of a limit between two rows neither row's move may take, against rounding.
const SLACK_KEPT: f64 = 1e-12;

/// The row of domain `cell` along `d` moved from its old boundaries towards `target`, as far
/// as its neighbouring rows in `grid` allow, and whether a limit cut it short. Each limit
/// between it and a neighbouring row ([`DdGrid::row_limits`]) gives either row at most half
/// of what it has to spare, less [`SLACK_KEPT`], so that both may move at once and the limit
/// still holds; each boundary goes as far as the limits it is in allow, as GROMACS clamps
/// each boundary by its neighbours' (`cellFracLowerMax`, `cellFracUpperMin`). Every boundary
/// then lies between its old place and its target, so the half-slab limit holds; the widths
/// stay at or above `least` (the least width with its margin) as the old and the target rows
/// have them, which the halved limits between rows keep but for a rounding, or a grid given
/// with a domain narrower than that (the pulses cover the range over several domains): where
/// a width would fall below the smaller of `least`, its old and its target width, the whole
/// row goes instead the share of its way its most limited boundary allows, a straight line on
/// which the row's own limits hold as at both ends. Rows are thus decided one by one, each by
/// its own loads and its neighbours' old boundaries: a pair of rows at their limit holds back
/// no other row, and every PE of a row, whose grid holds the rows near it, finds the same row.
pub(crate) fn moved_row(
    grid: &DdGrid,
    d: usize,
    cell: [usize; 3],
    target: &[f64],
    least: f64,
) -> (Vec<f64>, bool) {
    let mine = grid.bounds(d, cell);
    if grid.dims()[d] == 1 || mine == target {
        return (target.to_vec(), false);
    }
    let r = grid.row(d, cell);
    let delta: Vec<f64> = target.iter().zip(mine).map(|(t, o)| t - o).collect();
    // Per boundary, the share of its move the limits it is in allow.
    let mut shares = vec![1.0f64; mine.len()];
    let mut bound = |i: usize, spends: f64, slack: f64| {
        if spends > 0.0 {
            shares[i] = shares[i].min(((0.5 * slack - SLACK_KEPT) / spends).max(0.0));
        }
    };
    let limits = grid.row_limits(d);
    for other in grid.neighbouring_rows(d, cell) {
        if grid.row(d, other) == r {
            continue;
        }
        let theirs = grid.bounds(d, other);
        for limit in &limits {
            // This row below the other: its top rising spends the limit's slack; this row
            // above it: its lower face falling does.
            bound(limit.c + 1, delta[limit.c + 1], limit.slack(mine, theirs));
            bound(limit.j, -delta[limit.j], limit.slack(theirs, mine));
        }
    }
    let most = shares.iter().copied().fold(1.0, f64::min);
    if most >= 1.0 {
        return (target.to_vec(), false);
    }
    let n = mine.len() - 1;
    let mut each: Vec<f64> =
        (0..=n).map(|i| if shares[i] >= 1.0 { target[i] } else { mine[i] + shares[i] * delta[i] }).collect();
    (each[0], each[n]) = (0.0, 1.0);
    let width = |b: &[f64], i: usize| b[i + 1] - b[i];
    let wide = (0..n).all(|i| width(&each, i) >= least.min(width(mine, i)).min(width(target, i)));
    if wide && grid.row_fits(d, &each) {
        return (each, true);
    }
    (along(mine, target, most), true)
}

/// The boundaries `share` of the way from `old` to `target` (exactly `target` at 1).
pub(crate) fn along(old: &[f64], target: &[f64], share: f64) -> Vec<f64> {
    if share >= 1.0 {
        return target.to_vec();
    }
    let n = old.len() - 1;
    let mut row: Vec<f64> = old.iter().zip(target).map(|(&o, &t)| o + share * (t - o)).collect();
    (row[0], row[n]) = (0.0, 1.0);
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of a whole grid, one per row of domains along each dimension.
    type Rows = [Vec<Vec<f64>>; 3];

    /// The first domain of every row along each dimension.
    fn row_cells(grid: &DdGrid) -> [Vec<[usize; 3]>; 3] {
        std::array::from_fn(|d| (0..grid.rows(d)).map(|r| grid.row_cell(d, r)).collect())
    }

    fn rows_of(grid: &DdGrid) -> Rows {
        let cells = row_cells(grid);
        std::array::from_fn(|d| cells[d].iter().map(|&c| grid.bounds(d, c).to_vec()).collect())
    }

    /// Each row's target from the loads of every domain (`loads[pe]`), as the PEs of each row
    /// find it from their row's loads, and whether a limit held one.
    fn staggered_rows(grid: &DdGrid, loads: &[f64], margin: f64) -> (Rows, bool) {
        let mut limited = false;
        let mut rows = rows_of(grid);
        for (d, rows) in rows.iter_mut().enumerate() {
            if grid.dims()[d] == 1 {
                continue;
            }
            let mut sums = vec![vec![0.0; grid.dims()[d]]; rows.len()];
            for (pe, &load) in loads.iter().enumerate() {
                let cell = grid.cell_of(pe);
                sums[grid.row(d, cell)][cell[d]] += load;
            }
            for (row, sums) in rows.iter_mut().zip(&sums) {
                let (moved, held) = balanced_bounds(row, sums, grid.min_width(d) * margin);
                *row = moved;
                limited |= held;
            }
        }
        (rows, limited)
    }

    /// Every row moved towards its target by its own share, as the balancer moves each.
    fn towards(grid: &DdGrid, target: &Rows) -> Option<(DdGrid, bool)> {
        let cells = row_cells(grid);
        let mut cut = false;
        let moved: Rows = std::array::from_fn(|d| {
            cells[d]
                .iter()
                .zip(&target[d])
                .map(|(&c, t)| {
                    let (row, short) = moved_row(grid, d, c, t, grid.min_width(d) * 1.0001);
                    cut |= short;
                    row
                })
                .collect()
        });
        (moved != rows_of(grid)).then(|| (grid.with_rows(moved).expect("the shares keep the limits"), cut))
    }

    /// One step back towards equal domains, one share for every row (the smallest any row's
    /// half-slab limit allows), as the balancer agrees it.
    fn back_toward_equal(grid: &DdGrid) -> Option<DdGrid> {
        let rows = rows_of(grid);
        let share = rows.iter().flatten().map(|row| share_toward_equal(row)).fold(1.0, f64::min);
        let back: Rows = rows.map(|rows| rows.iter().map(|row| equal_by(row, share)).collect());
        (!grid.is_uniform()).then(|| grid.with_rows(back).expect("the way back keeps the limits"))
    }

    /// A 2x4x1 grid over a 3.72 nm cube with a 0.5 nm range: a domain's least width is a
    /// 0.134 fraction, so rows can stagger by about a domain before the limits bind.
    fn two_slabs() -> DdGrid {
        let cube = crate::pbc::PbcBox::rectangular([3.72412; 3]).expect("valid");
        DdGrid::new([2, 4, 1], cube, 0.5, 8).expect("fits")
    }

    #[test]
    fn each_row_moves_by_its_own_loads() {
        let grid = two_slabs();
        // The first slab even, the second's domain 3 loaded (PE 4 + j is domain [1, j, 0]).
        let loads = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0];
        let (rows, _) = staggered_rows(&grid, &loads, 1.0);
        assert_eq!(rows[1][0], uniform(4), "the even slab's row stays");
        assert!(rows[1][1][3] > 0.75 + 1e-3, "the loaded domain shrinks from below: {:?}", rows[1][1]);
        // x: the second slab carries more load, so the boundary between them moves up.
        assert!(rows[0][0][1] > 0.5, "{:?}", rows[0]);
        let (moved, cut) = towards(&grid, &rows).expect("moves");
        assert!(!cut && moved.is_staggered());
        assert_eq!(moved.bounds(1, [1, 0, 0]), &rows[1][1][..]);
    }

    #[test]
    fn rows_stagger_no_further_than_their_neighbours_allow() {
        // Opposite loads in the two slabs push their y boundaries apart at every step; the
        // limits between the rows must cut the moves, never break them.
        let mut grid = two_slabs();
        let loads = [8.0, 8.0, 1.0, 1.0, 1.0, 1.0, 8.0, 8.0];
        let mut cuts = 0;
        for _ in 0..60 {
            let (target, _) = staggered_rows(&grid, &loads, 1.0001);
            let Some((moved, cut)) = towards(&grid, &target) else { break };
            cuts += usize::from(cut);
            grid = moved;
        }
        let (first, second) = (grid.bounds(1, [0, 0, 0]), grid.bounds(1, [1, 0, 0]));
        assert!(cuts > 0, "the limits never bound: {first:?} / {second:?}");
        assert!(first[2] < 0.45 && second[2] > 0.55, "{first:?} / {second:?}");
        // Back to equal domains, step by step.
        for _ in 0..60 {
            match back_toward_equal(&grid) {
                Some(moved) => grid = moved,
                None => break,
            }
        }
        assert!(grid.is_uniform(), "{:?}", rows_of(&grid)[1]);
    }

    #[test]
    fn rows_at_their_limit_hold_back_only_themselves() {
        // Four x slabs of four y domains: slab 2 is no neighbour of slab 0, and rows 0 and 1
        // start exactly at a limit (row 1's domain 2 starts the range above row 0's top of
        // domain 0), which both rows' loads would spend: only those two boundaries stay.
        let cube = crate::pbc::PbcBox::rectangular([3.72412; 3]).expect("valid");
        let grid = DdGrid::new([4, 4, 1], cube, 0.5, 16).expect("fits");
        let reach = grid.reach(1);
        let tight = vec![0.0, 0.15, 0.25 + reach + 1e-9, 0.7, 1.0];
        let x = vec![equal_bounds(4)];
        let y = vec![uniform(4), tight, uniform(4), uniform(4)];
        let grid = grid.with_rows([x, y.clone(), vec![equal_bounds(1)]]).expect("valid");
        // Every x slab carries 10; PE 4 i + j is domain [i, j, 0].
        let loads = [1.0, 4.0, 1.0, 4.0, 4.0, 4.0, 1.0, 1.0, 4.0, 1.0, 1.0, 4.0, 2.5, 2.5, 2.5, 2.5];
        let (target, _) = staggered_rows(&grid, &loads, 1.0001);
        assert!(target[1][0][1] > y[0][1] && target[1][1][2] < y[1][2], "{:?}", target[1]);
        let (moved, cut) = towards(&grid, &target).expect("row 2 moves");
        assert!(cut);
        // The boundaries at the limit (row 0's first, row 1's second) spend at most half each
        // of the 1e-9 they had to spare; the rest of rows 0 and 1 still move, row 0's last
        // all the way.
        for (r, at_limit) in [(0, 1), (1, 2)] {
            let row = moved.bounds(1, [r, 0, 0]);
            assert!((row[at_limit] - y[r][at_limit]).abs() <= 1e-9, "row {r}: {row:?}");
            assert!(row[at_limit] != target[1][r][at_limit], "row {r}: {row:?}");
            let others = (1..4).filter(|&i| i != at_limit);
            assert!(others.clone().any(|i| row[i] != y[r][i]), "row {r} frozen whole: {row:?}");
        }
        assert_eq!(moved.bounds(1, [0, 0, 0])[3], target[1][0][3]);
        assert_eq!(moved.bounds(1, [2, 0, 0]), &target[1][2][..], "row 2 goes all the way");
        assert_eq!(moved.bounds(1, [3, 0, 0]), &y[3][..], "row 3's loads are even");
        assert_eq!(moved.bounds(0, [0, 0, 0]), &equal_bounds(4)[..], "the slabs' loads are even");
    }

    #[test]
    fn every_pe_takes_the_way_back_on_its_rows_as_the_whole_grid_does() {
        // Four y domains per x slab, rows far from equal (two domains near their least width
        // beside a wide one), so that a step back goes part of the way; staggered from slab to slab.
        let cube = crate::pbc::PbcBox::rectangular([3.72412; 3]).expect("valid");
        let grid = DdGrid::new([4, 4, 1], cube, 0.5, 16).expect("fits");
        let width = grid.min_width(1) * 1.2;
        let row = |first: f64| vec![0.0, first, first + width, first + 2.0 * width, 1.0];
        let y = vec![row(0.5), row(0.49), row(0.5), row(0.51)];
        let mut grid = grid.with_rows([vec![equal_bounds(4)], y, vec![equal_bounds(1)]]).expect("valid");
        let mut steps = 0;
        while !grid.is_uniform() {
            let rows = rows_of(&grid);
            let share = rows.iter().flatten().map(|row| share_toward_equal(row)).fold(1.0, f64::min);
            let whole = back_toward_equal(&grid).expect("not uniform");
            if share < 1.0 {
                for pe in 0..grid.len() {
                    let cell = grid.cell_of(pe);
                    let near = super::super::back_near(&grid, cell, share).expect("keeps the limits");
                    for other in (0..grid.len()).map(|p| grid.cell_of(p)) {
                        if near.holds(1, other) {
                            assert_eq!(
                                near.bounds(1, other),
                                whole.bounds(1, other),
                                "{cell:?} for {other:?}"
                            );
                        }
                    }
                }
            }
            grid = whole;
            steps += 1;
            assert!(steps < 20, "not back after {steps} steps: {:?}", rows_of(&grid)[1]);
        }
        assert!(steps >= 2, "the way back took one step: the case does not test a partial share");
    }

    /// A fixed sequence of numbers in [0, 1) for the property case.
    fn next(state: &mut u64) -> f64 {
        *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (*state >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn rows_moved_at_once_keep_every_limit_under_any_loads() {
        // Every row moved by its own loads at once, from noisy and extreme loads, on grids of
        // two and three split dimensions, one and two pulses: the whole grid must pass
        // with_rows (every limit between rows) at every step, no boundary pass the middle of
        // an old slab it bounded, no domain get narrower than the least width.
        let cube = crate::pbc::PbcBox::rectangular([3.72412; 3]).expect("valid");
        let mut state = 0x5eed;
        for (dims, room) in
            [([4, 4, 1], false), ([3, 5, 1], false), ([2, 3, 3], false), ([3, 3, 3], true), ([4, 6, 1], true)]
        {
            let mut grid = DdGrid::new(dims, cube, 0.5, dims.iter().product()).expect("fits");
            if room {
                grid = grid.with_balancing_room(0.5).expect("valid");
            }
            let mut moves = 0;
            for _ in 0..150 {
                let loads: Vec<f64> =
                    (0..grid.len()).map(|_| 1.0 + 20.0 * next(&mut state).powi(6)).collect();
                let (target, _) = staggered_rows(&grid, &loads, 1.0001);
                // towards builds the whole grid with with_rows, which checks every limit.
                let Some((moved, _)) = towards(&grid, &target) else { continue };
                moves += 1;
                for (d, cells) in row_cells(&grid).iter().enumerate() {
                    for &c in cells {
                        let (old, new) = (grid.bounds(d, c), moved.bounds(d, c));
                        for i in 1..old.len() - 1 {
                            let (low, high) = (0.5 * (old[i - 1] + old[i]), 0.5 * (old[i] + old[i + 1]));
                            assert!(new[i] >= low && new[i] <= high, "{dims:?}: {old:?} to {new:?}");
                        }
                        let narrowest = new.windows(2).map(|w| w[1] - w[0]).fold(1.0, f64::min);
                        assert!(narrowest >= grid.min_width(d), "{dims:?}: {new:?}");
                    }
                }
                grid = moved;
            }
            assert!(moves > 100 && grid.is_staggered(), "{dims:?}: {moves} moves");
        }
    }

    fn uniform(n: usize) -> Vec<f64> {
        (0..=n).map(|c| c as f64 / n as f64).collect()
    }

    #[test]
    fn a_loaded_slab_shrinks_by_at_most_a_tenth() {
        let (bounds, limited) = balanced_bounds(&uniform(3), &[1.0, 18.0, 1.0], 0.05);
        let widths: Vec<f64> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(!limited, "{bounds:?}");
        // The middle slab loses 10 % of its width (the limit), the outer two share it.
        assert!((widths[1] - 0.9 / 3.0).abs() < 1e-12, "{widths:?}");
        assert!((widths[0] - widths[2]).abs() < 1e-12 && widths[0] > 1.0 / 3.0, "{widths:?}");
        assert_eq!((bounds[0], bounds[3]), (0.0, 1.0));
    }

    #[test]
    fn balanced_loads_leave_the_boundaries() {
        let old = [0.0, 0.2, 0.7, 1.0];
        let (bounds, limited) = balanced_bounds(&old, &[5.0, 5.0, 5.0], 0.05);
        assert!(!limited);
        for (b, o) in bounds.iter().zip(old) {
            assert!((b - o).abs() < 1e-15, "{bounds:?}");
        }
    }

    #[test]
    fn repeated_updates_even_out_a_load_proportional_to_width() {
        // Load density 19 in the middle third, 1 elsewhere (a slab beside vacuum).
        let density = |a: f64, b: f64| {
            let inside = (b.min(2.0 / 3.0) - a.max(1.0 / 3.0)).max(0.0);
            19.0 * inside + ((b - a) - inside)
        };
        let mut bounds = uniform(3);
        for _ in 0..60 {
            let loads: Vec<f64> = bounds.windows(2).map(|w| density(w[0], w[1])).collect();
            bounds = balanced_bounds(&bounds, &loads, 0.05).0;
        }
        let loads: Vec<f64> = bounds.windows(2).map(|w| density(w[0], w[1])).collect();
        let mean = loads.iter().sum::<f64>() / 3.0;
        assert!(loads.iter().all(|&l| (l - mean).abs() < 0.02 * mean), "{loads:?} at {bounds:?}");
    }

    #[test]
    fn slabs_stop_at_their_least_width() {
        // All load in slab 1: it shrinks until held at the least width.
        let mut bounds = uniform(3);
        let mut held = false;
        for _ in 0..100 {
            let (next, limited) = balanced_bounds(&bounds, &[0.0, 1.0, 0.0], 0.2);
            bounds = next;
            held |= limited;
        }
        let widths: Vec<f64> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(held && widths.iter().all(|&w| w >= 0.2 - 1e-12), "{widths:?}");
        assert!((widths[1] - 0.2).abs() < 1e-3, "{widths:?}");
    }

    #[test]
    fn no_boundary_passes_the_middle_of_a_slab() {
        // An empty slab beside a full one: the boundary between them moves at most half a slab.
        let old = uniform(2);
        let (bounds, _) = balanced_bounds(&old, &[0.0, 10.0], 0.01);
        assert!(bounds[1] >= 0.25 && bounds[1] <= 0.75, "{bounds:?}");
    }

    #[test]
    fn boundaries_go_back_to_equal_domains_within_the_limits() {
        // Wide slabs beside slabs at their least width, either way round, and a plain skew.
        let cases: Vec<(Vec<f64>, f64)> = vec![
            ([0.7 / 6.0; 6].into_iter().chain([0.05; 6]).collect(), 0.05),
            ([0.05; 6].into_iter().chain([0.7 / 6.0; 6]).collect(), 0.05),
            ([0.04; 8].into_iter().chain([0.68 / 8.0; 8]).collect(), 0.04),
            (vec![0.38, 0.62], 0.1),
        ];
        for (widths, least) in cases {
            let n = widths.len();
            let mut bounds: Vec<f64> = std::iter::once(0.0)
                .chain(widths.iter().scan(0.0, |at, w| {
                    *at += w;
                    Some(*at)
                }))
                .collect();
            bounds[n] = 1.0;
            let mut steps = 0;
            while bounds != uniform(n) {
                let next = toward_equal(&bounds);
                for i in 1..n {
                    let (low, high) = (0.5 * (bounds[i - 1] + bounds[i]), 0.5 * (bounds[i] + bounds[i + 1]));
                    assert!(
                        next[i] >= low - 1e-12 && next[i] <= high + 1e-12,
                        "boundary {i} past a middle: {next:?}"
                    );
                }
                assert!(next.windows(2).all(|w| w[1] - w[0] >= least - 1e-12), "below {least}: {next:?}");
                assert!(next != bounds, "stuck at {bounds:?}");
                bounds = next;
                steps += 1;
                assert!(steps <= 60, "{n} domains not equal after 60 steps: {bounds:?}");
            }
        }
    }
}
