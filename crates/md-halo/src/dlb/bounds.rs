//! New boundaries from the loads: GROMACS's relaxed move within the least width and the
//! half-slab limit (`cellsizes.cpp`), and the way back to equal domains; on grids of two or
//! three split dimensions, per row of domains (staggered), as far towards them as the limits
//! between neighbouring rows allow.

use crate::error::Result;
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
fn share_toward_equal(old: &[f64]) -> f64 {
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
fn equal_by(old: &[f64], share: f64) -> Vec<f64> {
    let n = old.len() - 1;
    let equal = equal_bounds(n);
    if share >= 1.0 {
        return equal;
    }
    let mut bounds: Vec<f64> = old.iter().zip(&equal).map(|(&b, &e)| b + share * (e - b)).collect();
    (bounds[0], bounds[n]) = (0.0, 1.0);
    bounds
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

/// The boundaries rows: one row per row of domains along each dimension (as
/// [`DdGrid::with_rows`] takes them), each dimension's indexed by [`DdGrid::row`].
pub(crate) type Rows = [Vec<Vec<f64>>; 3];

/// Every row of `grid`'s boundaries, one per row of domains along each dimension even where
/// they share one.
fn rows_of(grid: &DdGrid) -> Rows {
    std::array::from_fn(|d| {
        let count: usize = grid.dims()[..d].iter().product();
        let shared = grid.rows_of_bounds(d);
        (0..count).map(|r| if shared.len() == 1 { shared[0].clone() } else { shared[r].clone() }).collect()
    })
}

/// Staggered boundaries from the load of every domain (`loads[pe]`): x's from the slabs'
/// summed loads, each x slab's y boundaries from its (x, y) columns' loads, each column's z
/// boundaries from its domains' loads, each row by [`balanced_bounds`] on its own. Returns
/// them with whether some row was held at its least width or the half-slab limit.
pub(crate) fn staggered_rows(grid: &DdGrid, loads: &[f64], margin: f64) -> (Rows, bool) {
    let mut limited = false;
    let mut rows = rows_of(grid);
    for (d, rows) in rows.iter_mut().enumerate() {
        if grid.dims()[d] == 1 {
            continue;
        }
        // The loads of each row's domains along d, each summed over the later dimensions.
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

/// `grid` with its boundaries moved from where they are towards `target` (rows as
/// [`staggered_rows`] gives them), along the straight line from every old boundary to its
/// target, as far as [`DdGrid::with_rows`] accepts: every boundary takes the same share of
/// its way, so the limits each row keeps on its own (least width, half-slab) hold on the way,
/// and the limits between neighbouring rows cut the share where they would be broken (the old
/// grid, share 0, keeps them). Returns the grid and whether the share was cut, or `None`
/// where nothing moves.
pub(crate) fn towards(grid: &DdGrid, target: &Rows) -> Result<Option<(DdGrid, bool)>> {
    let old = rows_of(grid);
    let at = |share: f64| -> Rows {
        std::array::from_fn(|d| {
            old[d]
                .iter()
                .zip(&target[d])
                .map(|(o, t)| {
                    let n = o.len() - 1;
                    let mut row: Vec<f64> = o.iter().zip(t).map(|(&o, &t)| o + share * (t - o)).collect();
                    (row[0], row[n]) = (0.0, 1.0);
                    row
                })
                .collect()
        })
    };
    if old == *target {
        return Ok(None);
    }
    if let Ok(moved) = grid.with_rows(target.clone()) {
        return Ok(Some((moved, false)));
    }
    // The largest share that keeps the limits between rows: they are linear in it, so the
    // shares that keep them are an interval from 0.
    let (mut kept, mut broken) = (0.0, 1.0);
    for _ in 0..30 {
        let share = 0.5 * (kept + broken);
        if grid.with_rows(at(share)).is_ok() {
            kept = share;
        } else {
            broken = share;
        }
    }
    if kept == 0.0 {
        return Ok(None);
    }
    Ok(Some((grid.with_rows(at(kept))?, true)))
}

/// Every row of `grid`'s boundaries one step back towards equal domains: the same share of
/// the way for all, the smallest any row's half-slab limit allows ([`toward_equal`]). Both
/// ends of that line keep the limits between neighbouring rows, and the limits are linear in
/// the share, so every step on it keeps them too: [`towards`] never has to cut it, and the
/// way back cannot stall where a share of its own per row would break them.
pub(crate) fn rows_toward_equal(grid: &DdGrid) -> Rows {
    let rows = rows_of(grid);
    let share = rows.iter().flatten().map(|row| share_toward_equal(row)).fold(1.0, f64::min);
    rows.map(|rows| rows.iter().map(|row| equal_by(row, share)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (moved, cut) = towards(&grid, &rows).expect("valid").expect("moves");
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
            let Some((moved, cut)) = towards(&grid, &target).expect("valid") else { break };
            assert!(moved.with_rows(rows_of(&moved)).is_ok());
            cuts += usize::from(cut);
            grid = moved;
        }
        let (first, second) = (grid.bounds(1, [0, 0, 0]), grid.bounds(1, [1, 0, 0]));
        assert!(cuts > 0, "the limits never bound: {first:?} / {second:?}");
        assert!(first[2] < 0.45 && second[2] > 0.55, "{first:?} / {second:?}");
        // Back to equal domains, step by step, on a line the limits never cut.
        for _ in 0..60 {
            match towards(&grid, &rows_toward_equal(&grid)).expect("valid") {
                Some((moved, cut)) => {
                    assert!(!cut, "the way back was cut at {:?}", grid.rows_of_bounds(1));
                    grid = moved;
                }
                None => break,
            }
        }
        assert!(grid.is_uniform(), "{:?}", grid.rows_of_bounds(1));
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
