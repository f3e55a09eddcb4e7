//! The PME grid ([`PmeGrid`]): its sizes, box and decomposition over the PME ranks, and where
//! an atom sits on it.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::particle::RVec;
use crate::spline::ORDER;

/// How the PME grid is split over the PME ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmeDecomposition {
    /// Slabs along x: at most a quarter as many PME ranks as x planes.
    Slab,
    /// Pencils along x and y, `Px × Py` ranks as [`PmeGrid::pencil_dims`] chooses them.
    Pencil,
    /// Slabs while each holds at least `2 (order - 1)` planes, pencils beyond, as GROMACS
    /// decides.
    Auto,
}

impl std::str::FromStr for PmeDecomposition {
    type Err = Error;

    fn from_str(s: &str) -> Result<PmeDecomposition> {
        match s {
            "slab" => Ok(PmeDecomposition::Slab),
            "pencil" => Ok(PmeDecomposition::Pencil),
            "auto" => Ok(PmeDecomposition::Auto),
            other => Err(Error::Config(format!(
                "unknown PME decomposition {other:?}: expected slab, pencil or auto"
            ))),
        }
    }
}

/// The PME grid and its decomposition.
#[derive(Clone, Debug, PartialEq)]
pub struct PmeGrid {
    box_vectors: [RVec; 3],
    k: [usize; 3],
    /// PME ranks along x and along y (slabs: `[m, 1]`).
    dims: [usize; 2],
    /// `bounds[a]..bounds[a + 1]` are the x planes of row `a` (of PME rank `a` with slabs).
    bounds: Vec<usize>,
    /// `y_bounds[b]..y_bounds[b + 1]` are the y lines of column `b`.
    y_bounds: Vec<usize>,
    /// The row of each x plane.
    plane_rank: Vec<u32>,
    /// The column of each y line.
    line_column: Vec<u32>,
    /// The reciprocal box, GROMACS's `recipbox`: the inverse of the matrix whose rows are the
    /// box vectors, lower triangular like it (`recip[e][d]` is ∂s_d/∂x_e). Positions become
    /// fractions by multiplications.
    recip: [[f64; 3]; 3],
    /// Whether the x fraction depends on x alone (`recip[1][0]` and `recip[2][0]` zero: b
    /// and c have no x component), as in a rectangular box: placement then reads x only.
    x_only: bool,
    /// The PE of each PME rank.
    pes: Vec<usize>,
}

/// The names of the box elements in messages: `box[i][j]`, component `j` of vector `i`.
const ELEMENT_NAMES: [[&str; 3]; 3] = [["a_x", "a_y", "a_z"], ["b_x", "b_y", "b_z"], ["c_x", "c_y", "c_z"]];

/// Checks that `box_vectors` has GROMACS's shape: the elements above the diagonal zero, the
/// diagonal positive and finite, the rest finite.
fn check_box(box_vectors: &[RVec; 3]) -> Result<()> {
    const SHAPE: &str = "the box vectors must have GROMACS's shape, a = (ax, 0, 0), b = (bx, by, 0), \
                         c = (cx, cy, cz)";
    for (i, row) in box_vectors.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            let name = format!("box[{i}][{j}] ({})", ELEMENT_NAMES[i][j]);
            let problem = match i.cmp(&j) {
                Ordering::Less if v != 0.0 => format!("{name} is {v}, not 0"),
                Ordering::Equal if !(v > 0.0 && v.is_finite()) => {
                    format!(
                        "{name}, the box's extent along {}, is {v}, not a positive length",
                        ["x", "y", "z"][i]
                    )
                }
                Ordering::Greater if !v.is_finite() => {
                    format!("{name} is {v}, not a finite length")
                }
                _ => continue,
            };
            return Err(Error::Config(format!("{SHAPE}: {problem}")));
        }
    }
    Ok(())
}

/// The reciprocal box of a checked box: the same matrix as GROMACS's `calc_recipbox`, in
/// double precision, with each diagonal element a single division, so that in a rectangular
/// box s_d is exactly `x_d · (1 / L_d)`.
fn reciprocal_box(box_vectors: &[RVec; 3]) -> [[f64; 3]; 3] {
    let b = box_vectors.map(|row| row.map(f64::from));
    let (xx, yy, zz) = (b[0][0], b[1][1], b[2][2]);
    [
        [1.0 / xx, 0.0, 0.0],
        [-b[1][0] / (xx * yy), 1.0 / yy, 0.0],
        [(b[1][0] * b[2][1] - yy * b[2][0]) / (xx * yy * zz), -b[2][1] / (yy * zz), 1.0 / zz],
    ]
}

impl PmeGrid {
    /// A grid over the box `box_vectors` (GROMACS's box vectors a, b, c: the rows of its
    /// `matrix box`, a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz), in nm) whose size along
    /// each dimension `d` is at least the length of box vector `d` divided by `spacing` nm, as
    /// GROMACS's `calcFftGrid` sizes it (rounded up to products of 2, 3, 5 and 7, as FFT
    /// libraries like), split into slabs
    /// over the PME ranks `pme_pes` (PE numbers, in rank order).
    ///
    /// # Errors
    /// [`Error::Config`] for a box of another shape (naming the element), a spacing that is not
    /// positive, no PME ranks, more PME ranks than x planes, or slabs thinner than the
    /// interpolation order needs ("a grid too coarse for the interpolation order").
    pub fn new(box_vectors: [RVec; 3], spacing: f32, pme_pes: &[usize]) -> Result<PmeGrid> {
        check_box(&box_vectors)?;
        if !(spacing > 0.0 && spacing.is_finite()) {
            return Err(Error::Config(format!(
                "the grid spacing must be a positive length, got {spacing} nm"
            )));
        }
        // The length in f64 and back: exactly the diagonal element for an upright vector.
        PmeGrid::new_with(box_vectors, spacing, pme_pes, PmeDecomposition::Slab)
    }

    /// [`new`](Self::new), decomposed as `decomposition` says: slabs, pencils
    /// ([`pencil_dims`](Self::pencil_dims)), or by GROMACS's rule.
    ///
    /// # Errors
    /// As [`new`](Self::new), for slabs or pencils too thin for the interpolation order.
    pub fn new_with(
        box_vectors: [RVec; 3],
        spacing: f32,
        pme_pes: &[usize],
        decomposition: PmeDecomposition,
    ) -> Result<PmeGrid> {
        check_box(&box_vectors)?;
        if !(spacing > 0.0 && spacing.is_finite()) {
            return Err(Error::Config(format!(
                "the grid spacing must be a positive length, got {spacing} nm"
            )));
        }
        let length = |v: RVec| v.iter().map(|&c| c as f64 * c as f64).sum::<f64>().sqrt() as f32;
        let mut k = [0usize; 3];
        for d in 0..3 {
            let lines = (length(box_vectors[d]) / spacing).ceil();
            if lines > MAX_GRID_LINES as f32 {
                return Err(Error::Config(format!(
                    "a spacing of {spacing} nm gives {lines} grid lines along {}, more than {MAX_GRID_LINES}; \
                     use a coarser spacing",
                    ["x", "y", "z"][d]
                )));
            }
            k[d] = nice_size(lines as usize);
        }
        PmeGrid::unsplit(box_vectors, k, pme_pes)?.decomposed(decomposition)
    }

    /// [`with_sizes`](Self::with_sizes), decomposed as `decomposition` says.
    ///
    /// # Errors
    /// As [`new_with`](Self::new_with), except for the spacing.
    pub fn with_sizes_as(
        box_vectors: [RVec; 3],
        k: [usize; 3],
        pme_pes: &[usize],
        decomposition: PmeDecomposition,
    ) -> Result<PmeGrid> {
        PmeGrid::unsplit(box_vectors, k, pme_pes)?.decomposed(decomposition)
    }

    /// A grid of exactly `k` points in `px × py` pencils over `pme_pes` (rank `a · py + b`).
    ///
    /// # Errors
    /// As [`with_sizes`](Self::with_sizes), and as [`with_pencils`](Self::with_pencils).
    pub fn with_sizes_in_pencils(
        box_vectors: [RVec; 3],
        k: [usize; 3],
        pme_pes: &[usize],
        dims: [usize; 2],
    ) -> Result<PmeGrid> {
        PmeGrid::unsplit(box_vectors, k, pme_pes)?.split(dims)
    }

    /// A grid of exactly `k` points over the box `box_vectors` (as for [`new`](Self::new)),
    /// split into slabs over `pme_pes`.
    ///
    /// # Errors
    /// As [`new`](Self::new), except for the spacing.
    pub fn with_sizes(box_vectors: [RVec; 3], k: [usize; 3], pme_pes: &[usize]) -> Result<PmeGrid> {
        let m = pme_pes.len();
        PmeGrid::unsplit(box_vectors, k, pme_pes)?.split([m, 1])
    }

    /// The grid before it is split over its ranks.
    fn unsplit(box_vectors: [RVec; 3], k: [usize; 3], pme_pes: &[usize]) -> Result<PmeGrid> {
        check_box(&box_vectors)?;
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
        let recip = reciprocal_box(&box_vectors);
        let x_only = recip[1][0] == 0.0 && recip[2][0] == 0.0;
        let grid = PmeGrid {
            box_vectors,
            k,
            dims: [m, 1],
            bounds: Vec::new(),
            y_bounds: Vec::new(),
            plane_rank: Vec::new(),
            line_column: Vec::new(),
            recip,
            x_only,
            pes: pme_pes.to_vec(),
        };
        Ok(grid)
    }

    /// The same grid over the same PME ranks, decomposed as `decomposition` says.
    ///
    /// # Errors
    /// [`Error::Config`] when the ranks cannot be decomposed so (slabs or pencils thinner than
    /// the interpolation order).
    pub fn decomposed(self, decomposition: PmeDecomposition) -> Result<PmeGrid> {
        let m = self.ranks();
        let slabs_hold = self.k[0] / m >= 2 * (ORDER - 1);
        match decomposition {
            PmeDecomposition::Slab => self.split([m, 1]),
            PmeDecomposition::Auto if slabs_hold || m == 1 => self.split([m, 1]),
            _ => {
                let dims = PmeGrid::pencil_dims(self.k, m);
                self.split(dims)
            }
        }
    }

    /// The same grid over the same PME ranks in `px × py` pencils (`py` 1: slabs).
    ///
    /// # Errors
    /// [`Error::Config`] when `px · py` is not the number of PME ranks, or a pencil would hold
    /// fewer planes or lines than the interpolation order.
    pub fn with_pencils(self, [px, py]: [usize; 2]) -> Result<PmeGrid> {
        self.split([px, py])
    }

    /// The pencils GROMACS-style for `m` ranks on a grid of `k` points: of the ways to write
    /// `m = px · py` with at least the interpolation order of planes and lines per rank, the
    /// one whose thinnest side is thickest (then the larger `px`); slabs when none fits.
    pub fn pencil_dims(k: [usize; 3], m: usize) -> [usize; 2] {
        (1..=m)
            .filter(|px| m.is_multiple_of(*px))
            .map(|px| [px, m / px])
            .filter(|&[px, py]| k[0] / px >= ORDER && k[1] / py >= ORDER)
            .max_by_key(|&[px, py]| ((k[0] / px).min(k[1] / py), px))
            .unwrap_or([m, 1])
    }

    fn split(mut self, [px, py]: [usize; 2]) -> Result<PmeGrid> {
        let (m, k) = (self.ranks(), self.k);
        if px.checked_mul(py) != Some(m) || px == 0 {
            return Err(Error::Config(format!(
                "{px} x {py} pencils do not make the {m} PME ranks: their product must be the rank count"
            )));
        }
        let bounds: Vec<usize> = (0..=px).map(|r| r * k[0] / px).collect();
        let y_bounds: Vec<usize> = (0..=py).map(|r| r * k[1] / py).collect();
        let thinnest = |b: &[usize]| b.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
        if thinnest(&bounds) < ORDER {
            let what = if py == 1 { "slabs" } else { "pencils" };
            return Err(Error::Config(format!(
                "{} x planes over {px} PME ranks along x leave {what} of {} planes, but interpolation \
                 order {ORDER} spreads each charge over {ORDER}: the grid is too coarse for the \
                 interpolation order on this many PME ranks; use at most {} PME ranks along x, \
                 pencils, or a finer spacing",
                k[0],
                thinnest(&bounds),
                k[0] / ORDER
            )));
        }
        if py > 1 && thinnest(&y_bounds) < ORDER {
            return Err(Error::Config(format!(
                "{} y lines over {py} PME ranks along y leave pencils {} lines wide, but interpolation \
                 order {ORDER} spreads each charge over {ORDER}: use at most {} PME ranks along y or a \
                 finer spacing",
                k[1],
                thinnest(&y_bounds),
                k[1] / ORDER
            )));
        }
        self.plane_rank =
            (0..k[0]).map(|plane| (bounds.partition_point(|&b| b <= plane) - 1) as u32).collect();
        self.line_column =
            (0..k[1]).map(|line| (y_bounds.partition_point(|&b| b <= line) - 1) as u32).collect();
        self.bounds = bounds;
        self.y_bounds = y_bounds;
        self.dims = [px, py];
        Ok(self)
    }

    /// Grid points per dimension.
    pub fn sizes(&self) -> [usize; 3] {
        self.k
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
    /// below it (its spline reaches `ORDER - 1` planes further down, into the slab below,
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

/// The smallest size at least `n` whose prime factors are 2, 3, 5 and 7.
/// The most grid lines [`PmeGrid::new`] makes along one dimension from a spacing: far beyond
/// any MD system's mesh (GROMACS's reach a few hundred), so that a mistaken spacing is an
/// error rather than an attempt at an enormous grid.
pub const MAX_GRID_LINES: usize = 1 << 16;

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
    fn fast_floor_is_floor_below_two_to_the_63() {
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
            if v.is_nan() {
                assert_eq!(fast, 0.0, "NaN gives 0");
            } else if v.abs() < 9.2e18 {
                // Equal values; a zero may lose its sign.
                assert!(fast == exact, "{v:e}: {fast} {exact}");
            }
        }
    }

    /// Every domain of `domains` with its relay on pencils `dims` of a 128 × 128 × 16 grid.
    fn relays(domains: [usize; 3], dims: [usize; 2]) -> (PmeGrid, Vec<([usize; 3], usize)>) {
        let pes: Vec<usize> = (0..dims[0] * dims[1]).collect();
        let g =
            PmeGrid::with_sizes_in_pencils(rectangular([4.0, 4.0, 4.0]), [128, 128, 16], &pes, dims).unwrap();
        let mut out = Vec::new();
        for x in 0..domains[0] {
            for y in 0..domains[1] {
                for z in 0..domains[2] {
                    out.push(([x, y, z], g.relay_rank(domains, [x, y, z]).unwrap()));
                }
            }
        }
        (g, out)
    }

    #[test]
    fn relays_are_shared_evenly_and_lie_near_their_domains() {
        for (domains, dims) in
            [([16, 16, 12], [32, 32]), ([8, 8, 6], [16, 8]), ([3, 2, 2], [4, 1]), ([4, 4, 3], [2, 2])]
        {
            let (g, relays) = relays(domains, dims);
            let mut count = vec![0usize; g.ranks()];
            for &(cell, r) in &relays {
                count[r] += 1;
                // The relay's row and column overlap the domain's extent, or lie beside it.
                let near = |c: usize, d: usize, line: usize, p: usize| {
                    let (lo, hi) = (c as f64 / d as f64, (c + 1) as f64 / d as f64);
                    let (a, b) = (line as f64 / p as f64, (line + 1) as f64 / p as f64);
                    let step = 1.0 / p as f64;
                    a < hi + step && b > lo - step
                };
                assert!(
                    near(cell[0], domains[0], r / dims[1], dims[0]),
                    "{domains:?} on {dims:?}: {cell:?} -> {r}"
                );
                assert!(
                    near(cell[1], domains[1], r % dims[1], dims[1]),
                    "{domains:?} on {dims:?}: {cell:?} -> {r}"
                );
            }
            let (least, most) = (count.iter().min().unwrap(), count.iter().max().unwrap());
            assert!(most - least <= 1, "{domains:?} on {dims:?}: {count:?}");
        }
        // Fewer domains than PME ranks: each under its centre.
        let (_, relays) = relays([2, 8, 1], [4, 4]);
        assert!(relays.iter().all(|&([x, y, _], r)| r / 4 / 2 == x && r % 4 == y / 2), "{relays:?}");
        let g = relays_grid();
        assert!(matches!(g.relay_rank([2, 2, 0], [0, 0, 0]), Err(Error::Config(_))));
        assert!(matches!(g.relay_rank([2, 2, 2], [0, 2, 0]), Err(Error::Config(_))));
    }

    fn relays_grid() -> PmeGrid {
        relays([1, 1, 1], [2, 2]).0
    }

    /// A rectangular box of extents `l`.
    fn rectangular(l: RVec) -> [RVec; 3] {
        [[l[0], 0.0, 0.0], [0.0, l[1], 0.0], [0.0, 0.0, l[2]]]
    }

    /// A triclinic box with every lower element set.
    const TRICLINIC: [RVec; 3] = [[3.0, 0.0, 0.0], [1.0, 2.8, 0.0], [-1.2, 1.1, 2.6]];

    #[test]
    fn sizes_slabs_and_ranks() {
        let grid = PmeGrid::new(rectangular([3.72412; 3]), 0.12, &[0, 1, 2]).expect("fits");
        assert_eq!(grid.sizes(), [32; 3], "ceil(31.03) = 32 = 2^5");
        assert_eq!(grid.slab(0), (0, 10));
        assert_eq!(grid.slab(2), (21, 32));
        assert_eq!(grid.rank_of([0.0, 0.0, 0.0]), 0);
        assert_eq!(grid.rank_of([3.72, 1.0, 1.0]), 2);
        assert_eq!(grid.rank_of([-0.01, 1.0, 1.0]), 2, "wrapped");
        assert_eq!(grid.rank_of_plane(10), 1);
        assert_eq!(grid.box_vectors(), rectangular([3.72412; 3]));
        assert_eq!(nice_size(31), 32);
        assert_eq!(nice_size(11), 12);
        assert_eq!(nice_size(13), 14);
        let grid = PmeGrid::new(TRICLINIC, 0.25, &[0]).expect("fits");
        // From the vector lengths, as GROMACS: 3, 2.97 and 3.07 nm over 0.25 nm: 12, 12, 13 -> 14.
        assert_eq!(grid.sizes(), [12, 12, 14]);
    }

    #[test]
    fn bad_decompositions_are_explained() {
        let cube = rectangular([3.72412; 3]);
        let coarse = PmeGrid::new(cube, 0.6, &[0]).expect_err("7 points").to_string();
        assert!(coarse.contains("too coarse for interpolation order 4"), "{coarse}");
        let thin = PmeGrid::new(cube, 0.12, &[0, 1, 2, 3, 4, 5, 6, 7, 8]).expect_err("thin").to_string();
        assert!(thin.contains("too coarse for the interpolation order on this many PME ranks"), "{thin}");
        assert!(PmeGrid::new(rectangular([1.0; 3]), 0.0, &[0]).is_err());
        assert!(PmeGrid::new(rectangular([1.0; 3]), 0.1, &[]).is_err());
    }

    #[test]
    fn boxes_of_another_shape_are_refused_naming_the_element() {
        let cases: [((usize, usize), f32, &str); 7] = [
            ((0, 1), 0.5, "box[0][1] (a_y) is 0.5, not 0"),
            ((0, 2), -1.0, "box[0][2] (a_z) is -1, not 0"),
            ((1, 2), 0.1, "box[1][2] (b_z) is 0.1, not 0"),
            ((0, 0), 0.0, "box[0][0] (a_x), the box's extent along x, is 0, not a positive length"),
            ((1, 1), -2.0, "box[1][1] (b_y), the box's extent along y, is -2, not a positive length"),
            ((2, 2), f32::INFINITY, "box[2][2] (c_z), the box's extent along z, is inf"),
            ((2, 0), f32::NAN, "box[2][0] (c_x) is NaN, not a finite length"),
        ];
        for ((i, j), value, expected) in cases {
            let mut box_vectors = TRICLINIC;
            box_vectors[i][j] = value;
            for outcome in
                [PmeGrid::new(box_vectors, 0.25, &[0]), PmeGrid::with_sizes(box_vectors, [12, 12, 12], &[0])]
            {
                match outcome {
                    Err(Error::Config(m)) => {
                        assert!(m.contains(expected), "{m}");
                        assert!(m.contains("a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz)"), "{m}");
                    }
                    other => panic!("box[{i}][{j}] = {value}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn reciprocal_box_inverts_the_box() {
        for box_vectors in
            [TRICLINIC, rectangular([3.0, 2.5, 4.0]), [[2.0, 0.0, 0.0], [1.0, 1.7, 0.0], [1.0, 0.6, 1.6]]]
        {
            let recip = reciprocal_box(&box_vectors);
            let product: [[f64; 3]; 3] = std::array::from_fn(|i| {
                std::array::from_fn(|j| (0..3).map(|e| box_vectors[i][e] as f64 * recip[e][j]).sum())
            });
            for (i, row) in product.iter().enumerate() {
                for (j, &value) in row.iter().enumerate() {
                    let identity = if i == j { 1.0 } else { 0.0 };
                    assert!((value - identity).abs() < 1e-15, "{box_vectors:?}: [{i}][{j}] = {value}");
                }
            }
        }
    }

    #[test]
    fn rectangular_boxes_place_at_x_times_one_over_length() {
        let l = [3.72412f32, 2.9, 4.1];
        let grid = PmeGrid::with_sizes(rectangular(l), [32, 24, 36], &[0, 1]).expect("fits");
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            let x: RVec = std::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.25) * 2.0 * l[0]
            });
            let (index, fraction) = grid.locate(x);
            for d in 0..3 {
                let mut f = x[d] as f64 * (1.0 / l[d] as f64);
                f -= floor(f);
                let u = f * grid.k[d] as f64;
                let i = (floor(u) as usize).min(grid.k[d] - 1);
                assert_eq!(index[d], i, "{x:?} along {d}");
                assert_eq!(
                    fraction[d].to_bits(),
                    (u - i as f64).clamp(0.0, 1.0).to_bits(),
                    "{x:?} along {d}"
                );
            }
        }
    }

    #[test]
    fn rectangular_forces_are_the_gradient_times_k_over_length() {
        let l = [3.72412f32, 2.9, 4.1];
        let grid = PmeGrid::with_sizes(rectangular(l), [32, 24, 36], &[0]).expect("fits");
        let (q, gradient) = (-0.82, [0.37, -1.25, 2.5e-3]);
        let force = grid.force(q, gradient);
        for d in 0..3 {
            let scaled = -q * gradient[d] * (grid.k[d] as f64 / l[d] as f64);
            assert!((force[d] - scaled).abs() <= 1e-15 * scaled.abs(), "{d}: {} {scaled}", force[d]);
        }
    }

    #[test]
    fn triclinic_placement_follows_the_box_vectors() {
        let grid = PmeGrid::with_sizes(TRICLINIC, [12, 16, 20], &[0, 1]).expect("fits");
        let k = grid.sizes();
        let at = |s: [f64; 3]| -> RVec {
            std::array::from_fn(|e| (0..3).map(|v| s[v] * TRICLINIC[v][e] as f64).sum::<f64>() as f32)
        };
        // Grid coordinate, modulo the grid size.
        let grid_coordinate = |x: RVec| -> [f64; 3] {
            let (index, fraction) = grid.locate(x);
            std::array::from_fn(|d| index[d] as f64 + fraction[d])
        };
        let periodic_distance = |a: f64, b: f64, kd: usize| {
            let d = (a - b).rem_euclid(kd as f64);
            d.min(kd as f64 - d)
        };
        for s in [[0.1, 0.2, 0.3], [0.95, 0.05, 0.5], [0.51, 0.77, 0.02], [-0.3, 1.4, 2.25]] {
            let x = at(s);
            let u = grid_coordinate(x);
            for d in 0..3 {
                let want = s[d].rem_euclid(1.0) * k[d] as f64;
                assert!(periodic_distance(u[d], want, k[d]) < 1e-4, "{s:?} along {d}: {} not {want}", u[d]);
            }
            assert_eq!(grid.rank_of(x), grid.rank_of_plane(grid.locate(x).0[0]));
            // A whole box vector away is the same place.
            for v in TRICLINIC {
                let shifted: RVec = std::array::from_fn(|e| x[e] + v[e]);
                let w = grid_coordinate(shifted);
                for d in 0..3 {
                    assert!(periodic_distance(u[d], w[d], k[d]) < 1e-4, "{s:?} + {v:?} along {d}");
                }
            }
        }
        // The planes of a slab are parallel to b and c: moving along them keeps the x line.
        let x = at([0.4, 0.3, 0.6]);
        for v in [TRICLINIC[1], TRICLINIC[2]] {
            let moved: RVec = std::array::from_fn(|e| x[e] + 0.1 * v[e]);
            assert_eq!(grid.locate(moved).0[0], grid.locate(x).0[0], "along {v:?}");
        }
    }
}
