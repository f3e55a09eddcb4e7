//! The PME grid ([`PmeGrid`]): its sizes, box and decomposition over the PME ranks, and where
//! an atom sits on it.

use crate::error::{Error, Result};
use crate::particle::RVec;

/// The PME grid and its decomposition.
#[derive(Clone, Debug, PartialEq)]
pub struct PmeGrid {
    pub(super) box_vectors: [RVec; 3],
    pub(super) k: [usize; 3],
    /// PME ranks along x and along y (slabs: `[m, 1]`).
    pub(super) dims: [usize; 2],
    /// `bounds[a]..bounds[a + 1]` are the x planes of row `a` (of PME rank `a` with slabs).
    pub(super) bounds: Vec<usize>,
    /// `y_bounds[b]..y_bounds[b + 1]` are the y lines of column `b`.
    pub(super) y_bounds: Vec<usize>,
    /// The row of each x plane.
    pub(super) plane_rank: Vec<u32>,
    /// The column of each y line.
    pub(super) line_column: Vec<u32>,
    /// The reciprocal box, GROMACS's `recipbox`: the inverse of the matrix whose rows are the
    /// box vectors, lower triangular like it (`recip[e][d]` is ∂s_d/∂x_e). Positions become
    /// fractions by multiplications.
    pub(super) recip: [[f64; 3]; 3],
    /// Whether the x fraction depends on x alone (`recip[1][0]` and `recip[2][0]` zero: b
    /// and c have no x component), as in a rectangular box: placement then reads x only.
    pub(super) x_only: bool,
    /// The PE of each PME rank.
    pub(super) pes: Vec<usize>,
    /// The interpolation order: grid lines a charge's spline covers along each dimension.
    pub(super) order: usize,
}

impl PmeGrid {
    /// Grid points per dimension.
    pub fn sizes(&self) -> [usize; 3] {
        self.k
    }

    /// The interpolation order, GROMACS's `pme-order`: the grid lines a charge's B-spline
    /// covers along each dimension (4, cubic interpolation, unless the builder's
    /// [`order`](crate::PmeGridBuilder::order) said otherwise).
    pub fn order(&self) -> usize {
        self.order
    }

    /// The box vectors a, b, c (the rows of GROMACS's `matrix box`), in nm.
    pub fn box_vectors(&self) -> [RVec; 3] {
        self.box_vectors
    }

    /// The reciprocal box (GROMACS's `recipbox`): `recip[e][d]` is ∂s_d/∂x_e, the change of
    /// fractional coordinate `d` with Cartesian coordinate `e`; a wave vector of integers `m`
    /// is the Cartesian vector `Σ_d m_d recip[e][d]`.
    pub fn reciprocal_box(&self) -> [[f64; 3]; 3] {
        self.recip
    }

    /// The box volume in nm³.
    pub fn volume(&self) -> f64 {
        let b = &self.box_vectors;
        b[0][0] as f64 * b[1][1] as f64 * b[2][2] as f64
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

    /// PME ranks along x and along y (`[m, 1]` with slabs).
    pub fn dims(&self) -> [usize; 2] {
        self.dims
    }

    /// Whether the grid is split in two dimensions.
    pub fn is_pencil(&self) -> bool {
        self.dims[1] > 1
    }

    /// The relay PME rank ([`RedistBuilder::relay`](crate::RedistBuilder::relay)) of domain
    /// `cell` of a domain grid of `domains` cells along the box's x, y and z (cut evenly in
    /// fractional coordinates, as md-halo's `DdGrid` cuts them), so that every PME rank relays
    /// for as many domains as any other, give or take one, and each domain's relay lies near
    /// it: the domains in order of x (then z, then y) are cut into as many runs as there are
    /// rows of PME ranks along x, and each row's domains in order of y (then x, then z) into as
    /// many as there are columns (GROMACS maps domains to PME ranks by their index to the same
    /// end). Where a row's domains do not span y (fewer domains than PME ranks), each goes to
    /// the column under its centre instead, and some PME ranks relay for none. The atoms a
    /// relay receives then lie mostly in its own slab or pencil and the ones beside it.
    ///
    /// Costs O(domains / rows of PME ranks).
    ///
    /// # Errors
    /// [`Error::Config`] when a dimension of `domains` is zero or `cell` lies outside them.
    pub fn relay_rank(&self, domains: [usize; 3], cell: [usize; 3]) -> Result<usize> {
        if domains.contains(&0) || (0..3).any(|d| cell[d] >= domains[d]) {
            return Err(Error::Config(format!(
                "domain cell {cell:?} does not lie in a domain grid of {domains:?} cells"
            )));
        }
        let [dx, dy, dz] = domains;
        let [px, py] = self.dims;
        let n = dx * dy * dz;
        // Index in x, then z, then y order, and back.
        let index = |[x, y, z]: [usize; 3]| (x * dz + z) * dy + y;
        let cell_at = |i: usize| [i / (dy * dz), i % dy, (i / dy) % dz];
        let row = index(cell) * px / n;
        let (lo, hi) = ((row * n).div_ceil(px), ((row + 1) * n).div_ceil(px));
        if hi - lo < dy {
            // The row's domains do not span y: the column under this domain's centre, so
            // that it stays near (some PME ranks of the row then relay for none).
            return Ok(row * py + (2 * cell[1] + 1) * py / (2 * dy));
        }
        // This domain's place among its row's in y, x, z order.
        let key = |[x, y, z]: [usize; 3]| (y, x, z);
        let place = (lo..hi).filter(|&i| key(cell_at(i)) < key(cell)).count();
        Ok(row * py + place * py / (hi - lo))
    }

    /// The x planes `lo..hi` of PME rank `rank`.
    pub fn slab(&self, rank: usize) -> (usize, usize) {
        let a = rank / self.dims[1];
        (self.bounds[a], self.bounds[a + 1])
    }

    /// The y lines `lo..hi` of PME rank `rank` (every line with slabs).
    pub fn lines(&self, rank: usize) -> (usize, usize) {
        let b = rank % self.dims[1];
        (self.y_bounds[b], self.y_bounds[b + 1])
    }

    /// Where an atom sits on the grid: per dimension, the grid line at or below its wrapped
    /// fractional coordinate and the fractional distance past it, in grid spacings.
    pub fn locate(&self, x: RVec) -> ([usize; 3], [f64; 3]) {
        let mut index = [0usize; 3];
        let mut fraction = [0.0f64; 3];
        for d in 0..3 {
            (index[d], fraction[d]) = self.line(d, x);
        }
        (index, fraction)
    }

    /// The grid line at or below position `x` along dimension `d`, and the fraction past it:
    /// the one computation every placement uses, so that they all agree to the bit.
    #[inline(always)]
    fn line(&self, d: usize, x: RVec) -> (usize, f64) {
        let [x, y, z] = x.map(f64::from);
        let r = &self.recip;
        let mut f = match d {
            // The same value for finite y and z (their terms are zero); y and z that are not
            // finite do not move an atom between slabs of a box upright along x.
            0 if self.x_only => x * r[0][0],
            0 => x * r[0][0] + y * r[1][0] + z * r[2][0],
            1 => y * r[1][1] + z * r[2][1],
            _ => z * r[2][2],
        };
        f -= floor(f);
        // f lies in [0, 1] (NaN for a NaN position), so u in [0, K]: its integer part is its
        // floor, clamped to the last line (f rounds to 1 just below a boundary; NaN gives 0).
        let k = self.k[d] as i64;
        let u = f * k as f64;
        let i = (u as i64).clamp(0, k - 1);
        (i as usize, (u - i as f64).clamp(0.0, 1.0))
    }

    /// The x plane at or below fractional coordinate `s` along x (any real, wrapped into
    /// the box as [`line`](Self::line) wraps it).
    pub(crate) fn plane_at(&self, s: f64) -> usize {
        let f = s - floor(s);
        let k = self.k[0] as i64;
        ((f * k as f64) as i64).clamp(0, k - 1) as usize
    }

    /// The fractional coordinate along x of position `x`, before wrapping, computed as
    /// [`line`](Self::line) computes it.
    pub(crate) fn x_fraction(&self, x: RVec) -> f64 {
        let [x, y, z] = x.map(f64::from);
        let r = &self.recip;
        if self.x_only { x * r[0][0] } else { x * r[0][0] + y * r[1][0] + z * r[2][0] }
    }

    /// The largest change of the x fraction a displacement of `distance` nm can make, in any
    /// direction: `distance` times the length of the reciprocal box's first column.
    pub(crate) fn x_fraction_reach(&self, distance: f64) -> f64 {
        let r = &self.recip;
        distance * (r[0][0] * r[0][0] + r[1][0] * r[1][0] + r[2][0] * r[2][0]).sqrt()
    }

    /// The force on a charge `q` from the gradient of the interpolated grid with respect to
    /// the grid coordinates (`gradient[d]` = ∂/∂u_d, u_d = K_d · s_d): minus `q` times the
    /// Cartesian gradient, by the chain rule through the reciprocal box, as GROMACS's
    /// `gather_f_bsplines` does.
    #[inline]
    pub(crate) fn force(&self, q: f64, gradient: [f64; 3]) -> [f64; 3] {
        let [gx, gy, gz] = std::array::from_fn::<f64, 3, _>(|d| gradient[d] * self.k[d] as f64);
        let r = &self.recip;
        [
            -q * (gx * r[0][0]),
            -q * (gx * r[1][0] + gy * r[1][1]),
            -q * (gx * r[2][0] + gy * r[2][1] + gz * r[2][2]),
        ]
    }

    /// The PME rank an atom at `x` belongs to: the one whose slab holds the x plane at or
    /// below it (its spline reaches [`order`](Self::order) less one planes further down, into the slab below,
    /// whose share comes back through the overlap exchange).
    #[inline]
    pub fn rank_of(&self, x: RVec) -> usize {
        let row = self.rank_of_plane(self.line(0, x).0);
        if self.dims[1] == 1 { row } else { row * self.dims[1] + self.column_of_line(self.line(1, x).0) }
    }

    /// The y fraction of position `x`, before wrapping, computed as [`line`](Self::line)
    /// computes it.
    pub(crate) fn y_fraction(&self, x: RVec) -> f64 {
        let [_, y, z] = x.map(f64::from);
        y * self.recip[1][1] + z * self.recip[2][1]
    }

    /// The largest change of the y fraction a displacement of `distance` nm can make.
    pub(crate) fn y_fraction_reach(&self, distance: f64) -> f64 {
        let r = &self.recip;
        distance * (r[1][1] * r[1][1] + r[2][1] * r[2][1]).sqrt()
    }

    /// The y line at or below fractional coordinate `s` along y (any real, wrapped).
    pub(crate) fn line_at(&self, s: f64) -> usize {
        let f = s - floor(s);
        let k = self.k[1] as i64;
        ((f * k as f64) as i64).clamp(0, k - 1) as usize
    }

    /// The column (of pencils) whose lines hold y line `line`; 0 with slabs.
    pub fn column_of_line(&self, line: usize) -> usize {
        self.line_column[line] as usize
    }

    /// The reciprocal box, GROMACS's `recipbox`: `recip[e][d]` is ∂s_d/∂x_e.
    pub(crate) fn recip(&self) -> &[[f64; 3]; 3] {
        &self.recip
    }

    /// Whether the x fraction depends on x alone (b and c have no x component).
    pub(crate) fn x_only(&self) -> bool {
        self.x_only
    }

    /// The first x plane of each PME rank's slab, then the x size.
    pub(crate) fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// The PME rank of each x plane.
    pub(crate) fn plane_ranks(&self) -> &[u32] {
        &self.plane_rank
    }

    /// The PME rank whose slab holds x plane `plane` (`plane` below the x size); with pencils,
    /// the row of PME ranks.
    pub fn rank_of_plane(&self, plane: usize) -> usize {
        self.plane_rank[plane] as usize
    }
}

/// `v.floor()`, without the library call that `f64::floor` becomes on the x86-64 baseline
/// (no SSE4.1 rounding instruction), and without a branch, so that loops over atoms stay
/// straight: the same value for every `v` of magnitude below 2^63 (beyond 2^52 every f64 is
/// an integer, which the conversion keeps), up to the sign of a zero; NaN gives 0.
#[inline]
pub(crate) fn floor(v: f64) -> f64 {
    let t = v as i64 as f64;
    t - f64::from(u8::from(t > v))
}
