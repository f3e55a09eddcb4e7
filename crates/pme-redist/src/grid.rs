//! The PME decomposition: a charge grid `Kx × Ky × Kz` from a spacing, split into slabs along
//! x over the PME ranks, and the rank an atom belongs to.

use md_halo::RVec;

use crate::error::{Error, Result};
use crate::spline::ORDER;

/// The PME grid and its slabs.
#[derive(Clone, Debug, PartialEq)]
pub struct PmeGrid {
    box_size: RVec,
    k: [usize; 3],
    /// `bounds[r]..bounds[r + 1]` are the x planes of PME rank `r`.
    bounds: Vec<usize>,
    /// The PME rank of each x plane.
    plane_rank: Vec<u32>,
    /// `1 / box_size`, per dimension: positions become fractions by a multiplication, as
    /// GROMACS does with the reciprocal box.
    reciprocal: [f64; 3],
    /// The PE of each PME rank.
    pes: Vec<usize>,
}

impl PmeGrid {
    /// A grid whose spacing is at most `spacing` nm in every dimension (sizes rounded up to
    /// products of 2, 3, 5 and 7, as FFT libraries like), split into slabs over the PME ranks
    /// `pme_pes` (PE numbers, in slab order).
    ///
    /// # Errors
    /// [`Error::Config`] for a spacing that is not positive, no PME ranks, more PME ranks than
    /// x planes, or slabs thinner than the interpolation order needs ("a grid too coarse for
    /// the interpolation order").
    pub fn new(box_size: RVec, spacing: f32, pme_pes: &[usize]) -> Result<PmeGrid> {
        if !(spacing > 0.0 && spacing.is_finite()) {
            return Err(Error::Config(format!(
                "the grid spacing must be a positive length, got {spacing} nm"
            )));
        }
        let k: [usize; 3] = std::array::from_fn(|d| nice_size((box_size[d] / spacing).ceil() as usize));
        PmeGrid::with_sizes(box_size, k, pme_pes)
    }

    /// A grid of exactly `k` points, split over `pme_pes`.
    pub fn with_sizes(box_size: RVec, k: [usize; 3], pme_pes: &[usize]) -> Result<PmeGrid> {
        let m = pme_pes.len();
        if m == 0 {
            return Err(Error::Config("PME needs at least one PME rank".to_string()));
        }
        for (d, &kd) in k.iter().enumerate() {
            if kd < 2 * ORDER {
                return Err(Error::Config(format!(
                    "a PME grid of {kd} points along {} is too coarse for interpolation order {ORDER}: \
                     it needs at least {}; use a finer spacing",
                    ["x", "y", "z"][d],
                    2 * ORDER
                )));
            }
        }
        let bounds: Vec<usize> = (0..=m).map(|r| r * k[0] / m).collect();
        let thinnest = bounds.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
        if thinnest < ORDER {
            return Err(Error::Config(format!(
                "{} x planes over {m} PME ranks leave slabs of {thinnest} planes, but interpolation \
                 order {ORDER} spreads each charge over {ORDER}: the grid is too coarse for the \
                 interpolation order on this many PME ranks; use at most {} PME ranks or a finer spacing",
                k[0],
                k[0] / ORDER
            )));
        }
        let plane_rank =
            (0..k[0]).map(|plane| (bounds.partition_point(|&b| b <= plane) - 1) as u32).collect();
        let reciprocal = std::array::from_fn(|d| 1.0 / box_size[d] as f64);
        Ok(PmeGrid { box_size, k, bounds, plane_rank, reciprocal, pes: pme_pes.to_vec() })
    }

    /// Grid points per dimension.
    pub fn sizes(&self) -> [usize; 3] {
        self.k
    }

    /// The box.
    pub fn box_size(&self) -> RVec {
        self.box_size
    }

    /// The number of PME ranks.
    pub fn ranks(&self) -> usize {
        self.pes.len()
    }

    /// The PE of PME rank `rank`.
    pub fn pe_of(&self, rank: usize) -> usize {
        self.pes[rank]
    }

    /// The PME rank of PE `pe`, if it is one.
    pub fn rank_of_pe(&self, pe: usize) -> Option<usize> {
        self.pes.iter().position(|&p| p == pe)
    }

    /// The x planes `lo..hi` of PME rank `rank`.
    pub fn slab(&self, rank: usize) -> (usize, usize) {
        (self.bounds[rank], self.bounds[rank + 1])
    }

    /// Where an atom sits on the grid: per dimension, the grid line at or below it and the
    /// fractional distance past it.
    pub fn locate(&self, x: RVec) -> ([usize; 3], [f64; 3]) {
        let mut index = [0usize; 3];
        let mut fraction = [0.0f64; 3];
        for d in 0..3 {
            (index[d], fraction[d]) = self.line(d, x[d]);
        }
        (index, fraction)
    }

    /// The grid line at or below coordinate `x` along dimension `d`, and the fraction past it:
    /// the one computation every placement uses, so that they all agree to the bit.
    #[inline]
    fn line(&self, d: usize, x: f32) -> (usize, f64) {
        let mut f = x as f64 * self.reciprocal[d];
        f -= floor(f);
        let u = f * self.k[d] as f64;
        let i = (floor(u) as usize).min(self.k[d] - 1);
        (i, (u - i as f64).clamp(0.0, 1.0))
    }

    /// The PME rank an atom at `x` belongs to: the one whose slab holds the x plane at or
    /// below it (its spline reaches `ORDER - 1` planes further down, into the slab below,
    /// whose share comes back through the overlap exchange).
    #[inline]
    pub fn rank_of(&self, x: RVec) -> usize {
        self.rank_of_plane(self.line(0, x[0]).0)
    }

    /// The PME rank whose slab holds x plane `plane` (`plane` below the x size).
    pub fn rank_of_plane(&self, plane: usize) -> usize {
        self.plane_rank[plane] as usize
    }
}

/// `v.floor()`, without the library call that `f64::floor` becomes on the x86-64 baseline
/// (no SSE4.1 rounding instruction): the same value for every finite `v`.
#[inline]
fn floor(v: f64) -> f64 {
    // Beyond 2^52 every f64 is an integer already; zeros keep their sign; NaN stays NaN.
    if v.is_nan() || v.abs() >= (1u64 << 52) as f64 || v == 0.0 {
        return v;
    }
    let t = v as i64 as f64;
    if t > v { t - 1.0 } else { t }
}

/// The smallest size at least `n` whose prime factors are 2, 3, 5 and 7.
fn nice_size(n: usize) -> usize {
    (n.max(1)..)
        .find(|&c| {
            let mut v = c;
            for p in [2, 3, 5, 7] {
                while v.is_multiple_of(p) {
                    v /= p;
                }
            }
            v == 1
        })
        .expect("such sizes are unbounded")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_floor_is_floor_to_the_bit() {
        let mut values =
            vec![0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5e15, -2.5e15, 1e300, -1e300, f64::MIN_POSITIVE];
        values.extend([f64::INFINITY, f64::NEG_INFINITY, 4503599627370495.5, -4503599627370495.5]);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            values.push(((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 200.0);
            values.push(f64::from_bits(state));
        }
        for v in values {
            let (fast, exact) = (floor(v), v.floor());
            assert!(
                fast.to_bits() == exact.to_bits() || (fast.is_nan() && exact.is_nan()),
                "{v:e}: {fast} {exact}"
            );
        }
    }

    #[test]
    fn sizes_slabs_and_ranks() {
        let grid = PmeGrid::new([3.72412; 3], 0.12, &[0, 1, 2]).expect("fits");
        assert_eq!(grid.sizes(), [32; 3], "ceil(31.03) = 32 = 2^5");
        assert_eq!(grid.slab(0), (0, 10));
        assert_eq!(grid.slab(2), (21, 32));
        assert_eq!(grid.rank_of([0.0, 0.0, 0.0]), 0);
        assert_eq!(grid.rank_of([3.72, 1.0, 1.0]), 2);
        assert_eq!(grid.rank_of([-0.01, 1.0, 1.0]), 2, "wrapped");
        assert_eq!(grid.rank_of_plane(10), 1);
        assert_eq!(nice_size(31), 32);
        assert_eq!(nice_size(11), 12);
        assert_eq!(nice_size(13), 14);
    }

    #[test]
    fn bad_decompositions_are_explained() {
        let coarse = PmeGrid::new([3.72412; 3], 0.6, &[0]).expect_err("7 points").to_string();
        assert!(coarse.contains("too coarse for interpolation order 4"), "{coarse}");
        let thin =
            PmeGrid::new([3.72412; 3], 0.12, &[0, 1, 2, 3, 4, 5, 6, 7, 8]).expect_err("thin").to_string();
        assert!(thin.contains("too coarse for the interpolation order on this many PME ranks"), "{thin}");
        assert!(PmeGrid::new([1.0; 3], 0.0, &[0]).is_err());
        assert!(PmeGrid::new([1.0; 3], 0.1, &[]).is_err());
    }
}
