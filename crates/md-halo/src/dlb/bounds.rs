//! New boundaries from the loads: GROMACS's relaxed move within the least width and the
//! half-slab limit (`cellsizes.cpp`), and the way back to equal domains.

use crate::grid::equal_bounds;

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
    if t >= 1.0 {
        return equal;
    }
    let mut bounds: Vec<f64> = old.iter().zip(&equal).map(|(&b, &e)| b + t * (e - b)).collect();
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

#[cfg(test)]
mod tests {
    use super::*;

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
