//! How a [`PmeGrid`] is made: its sizes from a spacing or given, checked against the box and
//! the interpolation order, and split over the PME ranks in slabs or pencils.

use std::cmp::Ordering;

use super::pme_grid::PmeGrid;
use crate::error::{Error, Result};
use crate::particle::RVec;
use crate::spline::{DEFAULT_ORDER, ORDERS};

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

/// The choices a [`PmeGrid`] is made with ([`PmeGrid::builder`]): its size, from a spacing
/// (0.12 nm, GROMACS's default `fourier-spacing`, unless told) or given in points, its
/// interpolation order (4 unless told) and its decomposition (GROMACS's rule,
/// [`PmeDecomposition::Auto`], unless told).
#[derive(Clone, Debug)]
#[must_use = "a builder makes no grid until build"]
pub struct PmeGridBuilder {
    box_vectors: [RVec; 3],
    pme_pes: Vec<usize>,
    size: Size,
    layout: Layout,
    order: usize,
}

/// How the grid is sized.
#[derive(Clone, Copy, Debug)]
enum Size {
    /// At most this spacing, in nm, rounded up to sizes FFTs like.
    Spacing(f32),
    /// Exactly these points.
    Points([usize; 3]),
}

/// How the grid is split.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Decomposition(PmeDecomposition),
    /// Exactly `Px × Py` pencils.
    Pencils([usize; 2]),
}

impl PmeGrid {
    /// A grid over the box `box_vectors` (GROMACS's box vectors a, b, c: the rows of its
    /// `matrix box`, a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz), in nm) whose size along
    /// each dimension `d` is at least the length of box vector `d` divided by `spacing` nm, as
    /// GROMACS's `calcFftGrid` sizes it (rounded up to products of 2, 3, 5 and 7, as FFT
    /// libraries like), split over the PME ranks `pme_pes` (PE numbers, in rank order) as
    /// GROMACS splits it: slabs while each holds at least `2 (order - 1)` planes, pencils
    /// beyond ([`PmeDecomposition::Auto`]). [`builder`](Self::builder) makes the others.
    ///
    /// # Errors
    /// As [`PmeGridBuilder::build`]: [`Error::Config`] for a box of another shape (naming the
    /// element), a spacing that is not positive, a grid too coarse or no PME ranks;
    /// [`Error::TooManyRanks`] when neither slabs nor any pencils are as thick as the
    /// interpolation order.
    pub fn new(box_vectors: [RVec; 3], spacing: f32, pme_pes: &[usize]) -> Result<PmeGrid> {
        PmeGrid::builder(box_vectors, pme_pes).spacing(spacing).build()
    }

    /// Starts a grid over the box `box_vectors` (as for [`new`](Self::new)) and the PME ranks
    /// `pme_pes` (PE numbers, in rank order), of a 0.12 nm spacing, order 4, split by
    /// GROMACS's rule, unless the builder says otherwise.
    pub fn builder(box_vectors: [RVec; 3], pme_pes: &[usize]) -> PmeGridBuilder {
        PmeGridBuilder {
            box_vectors,
            pme_pes: pme_pes.to_vec(),
            size: Size::Spacing(0.12),
            layout: Layout::Decomposition(PmeDecomposition::Auto),
            order: DEFAULT_ORDER,
        }
    }

    /// The grid before it is split over its ranks.
    pub(super) fn unsplit(
        box_vectors: [RVec; 3],
        k: [usize; 3],
        pme_pes: &[usize],
        order: usize,
    ) -> Result<PmeGrid> {
        check_box(&box_vectors)?;
        let m = pme_pes.len();
        if m == 0 {
            return Err(Error::Config("PME needs at least one PME rank".to_string()));
        }
        if !ORDERS.contains(&order) {
            return Err(Error::Config(format!(
                "interpolation order {order} is not one the mesh takes: pme-order runs from {} to {} \
                 (4, cubic, is GROMACS's default)",
                ORDERS.start(),
                ORDERS.end()
            )));
        }
        for (d, &kd) in k.iter().enumerate() {
            if kd < 2 * order {
                return Err(Error::Config(format!(
                    "a PME grid of {kd} points along {} is too coarse for interpolation order {order}: \
                     it needs at least {}; use a finer spacing or a lower order",
                    ["x", "y", "z"][d],
                    2 * order
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
            order,
        };
        Ok(grid)
    }

    /// The pencils GROMACS-style for `m` ranks on a grid of `k` points and interpolation
    /// order `order`: of the ways to write `m = px · py` with at least `order` planes and
    /// lines per rank, the one whose thinnest side is thickest (then the larger `px`); slabs
    /// when none fits.
    pub fn pencil_dims(k: [usize; 3], m: usize, order: usize) -> [usize; 2] {
        (1..=m)
            .filter(|px| m.is_multiple_of(*px))
            .map(|px| [px, m / px])
            .filter(|&[px, py]| k[0] / px >= order && k[1] / py >= order)
            .max_by_key(|&[px, py]| ((k[0] / px).min(k[1] / py), px))
            .unwrap_or([m, 1])
    }

    pub(super) fn split(mut self, [px, py]: [usize; 2]) -> Result<PmeGrid> {
        let (m, k, order) = (self.ranks(), self.k, self.order);
        if px.checked_mul(py) != Some(m) || px == 0 {
            return Err(Error::Config(format!(
                "{px} x {py} pencils do not make the {m} PME ranks: their product must be the rank count"
            )));
        }
        let bounds: Vec<usize> = (0..=px).map(|r| r * k[0] / px).collect();
        let y_bounds: Vec<usize> = (0..=py).map(|r| r * k[1] / py).collect();
        let thinnest = |b: &[usize]| b.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
        if thinnest(&bounds) < order {
            let (lines, thinnest, most) = (k[0], thinnest(&bounds), k[0] / order);
            return Err(Error::TooManyRanks {
                axis: 'x',
                lines,
                ranks: px,
                thinnest,
                most,
                order,
                pencils: py > 1,
            });
        }
        if py > 1 && thinnest(&y_bounds) < order {
            let (lines, thinnest, most) = (k[1], thinnest(&y_bounds), k[1] / order);
            return Err(Error::TooManyRanks {
                axis: 'y',
                lines,
                ranks: py,
                thinnest,
                most,
                order,
                pencils: true,
            });
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
}

impl PmeGridBuilder {
    /// Sizes the grid by its largest spacing, in nm, as [`PmeGrid::new`] does.
    pub fn spacing(self, nm: f32) -> Self {
        PmeGridBuilder { size: Size::Spacing(nm), ..self }
    }

    /// Sizes the grid at exactly `k` points along x, y and z.
    pub fn sizes(self, k: [usize; 3]) -> Self {
        PmeGridBuilder { size: Size::Points(k), ..self }
    }

    /// Interpolates with B-splines of order `order` (GROMACS's `pme-order`, 3 to 12; 4 unless
    /// told): each charge covers `order` grid lines along each dimension, and slabs and pencils
    /// must be at least that thick. At a given accuracy a higher order allows a coarser grid
    /// (GROMACS suggests order 5 with a spacing raised to match when running in parallel).
    pub fn order(self, order: usize) -> Self {
        PmeGridBuilder { order, ..self }
    }

    /// Splits the grid as `decomposition` says: slabs, pencils
    /// ([`PmeGrid::pencil_dims`]), or by GROMACS's rule.
    pub fn decomposition(self, decomposition: PmeDecomposition) -> Self {
        PmeGridBuilder { layout: Layout::Decomposition(decomposition), ..self }
    }

    /// Splits the grid into exactly `px × py` pencils (rank `a · py + b` holding row `a` and
    /// column `b`; `py` 1: slabs).
    pub fn pencils(self, dims: [usize; 2]) -> Self {
        PmeGridBuilder { layout: Layout::Pencils(dims), ..self }
    }

    /// The grid.
    ///
    /// # Errors
    /// [`Error::Config`] for a box of another shape (naming the element), a spacing that is not
    /// positive or gives more than 65 536 lines along a dimension, an order outside 3 to 12, a
    /// grid coarser than twice the interpolation order, no PME ranks, or pencils whose product is not the rank count;
    /// [`Error::TooManyRanks`] for slabs or pencils thinner than the interpolation order, with
    /// the most ranks the grid allows.
    pub fn build(self) -> Result<PmeGrid> {
        let PmeGridBuilder { box_vectors, pme_pes, size, layout, order } = self;
        check_box(&box_vectors)?;
        let k = match size {
            Size::Points(k) => k,
            Size::Spacing(spacing) => grid_size(&box_vectors, spacing)?,
        };
        let grid = PmeGrid::unsplit(box_vectors, k, &pme_pes, order)?;
        let m = grid.ranks();
        let dims = match layout {
            Layout::Pencils(dims) => dims,
            Layout::Decomposition(PmeDecomposition::Slab) => [m, 1],
            Layout::Decomposition(PmeDecomposition::Auto) if k[0] / m >= 2 * (order - 1) || m == 1 => [m, 1],
            Layout::Decomposition(_) => PmeGrid::pencil_dims(k, m, order),
        };
        grid.split(dims)
    }
}

/// The grid's size for `spacing` nm over a checked box, as GROMACS's `calcFftGrid` sizes it.
fn grid_size(box_vectors: &[RVec; 3], spacing: f32) -> Result<[usize; 3]> {
    if !(spacing > 0.0 && spacing.is_finite()) {
        return Err(Error::Config(format!("the grid spacing must be a positive length, got {spacing} nm")));
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
    Ok(k)
}

/// The names of the box elements in messages: `box[i][j]`, component `j` of vector `i`.
const ELEMENT_NAMES: [[&str; 3]; 3] = [["a_x", "a_y", "a_z"], ["b_x", "b_y", "b_z"], ["c_x", "c_y", "c_z"]];

/// Checks that `box_vectors` has GROMACS's shape: the elements above the diagonal zero, the
/// diagonal positive and finite, the rest finite.
pub(super) fn check_box(box_vectors: &[RVec; 3]) -> Result<()> {
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
pub(super) fn reciprocal_box(box_vectors: &[RVec; 3]) -> [[f64; 3]; 3] {
    let b = box_vectors.map(|row| row.map(f64::from));
    let (xx, yy, zz) = (b[0][0], b[1][1], b[2][2]);
    [
        [1.0 / xx, 0.0, 0.0],
        [-b[1][0] / (xx * yy), 1.0 / yy, 0.0],
        [(b[1][0] * b[2][1] - yy * b[2][0]) / (xx * yy * zz), -b[2][1] / (yy * zz), 1.0 / zz],
    ]
}

/// The most grid lines [`PmeGrid::new`] makes along one dimension from a spacing: far beyond
/// any MD system's mesh (GROMACS's reach a few hundred), so that a mistaken spacing is an
/// error rather than an attempt at an enormous grid.
pub(super) const MAX_GRID_LINES: usize = 1 << 16;

/// The smallest size at least `n` whose prime factors are 2, 3, 5 and 7.
pub(super) fn nice_size(n: usize) -> usize {
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
