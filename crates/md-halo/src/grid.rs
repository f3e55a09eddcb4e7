//! Domain decomposition: a grid of `Nx × Ny × Nz` equal domains over a rectangular periodic
//! box, one per PE; the PE of domain `(i, j, k)` is `(i*Ny + j)*Nz + k`.

use crate::error::{Error, Result};
use crate::system::RVec;

/// The most pulses a dimension may need. Each pulse is one more round of communication in
/// every step, forwarding atoms one domain further, with a latency no larger message can
/// hide; a grid whose domains are narrower than half the halo range has more domains along
/// that dimension than fit the cutoff, and fewer, larger domains serve it better.
pub const MAX_PULSES: usize = 2;

/// A grid of domains and the communication range it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct DdGrid {
    dims: [usize; 3],
    box_size: RVec,
    range: f32,
    pulses: [usize; 3],
}

const AXES: [&str; 3] = ["x", "y", "z"];

impl DdGrid {
    /// The grid `dims` over `box_size`, for halos of width `range` (the cutoff plus any
    /// buffer), on `n_pes` PEs.
    ///
    /// # Errors
    /// [`Error::Config`] when the grid does not have one domain per PE, when `range` is not
    /// below half the box in every dimension (the minimum-image convention), or when a
    /// dimension has more domains than fit the range (more than [`MAX_PULSES`] pulses).
    pub fn new(dims: [usize; 3], box_size: RVec, range: f32, n_pes: usize) -> Result<DdGrid> {
        let [nx, ny, nz] = dims;
        if dims.contains(&0) || nx * ny * nz != n_pes {
            return Err(Error::Config(format!(
                "grid {nx}x{ny}x{nz} has {} domains but the job has {n_pes} PEs; use a grid whose \
                 product is the number of PEs",
                nx * ny * nz
            )));
        }
        if !(range > 0.0 && range.is_finite()) {
            return Err(Error::Config(format!("the halo range must be a positive length, got {range} nm")));
        }
        for d in 0..3 {
            if range >= box_size[d] / 2.0 {
                return Err(Error::Config(format!(
                    "the cutoff plus buffer ({range:.3} nm) is not shorter than half the box in {} \
                     ({:.3} nm); use a shorter cutoff or a larger (replicated) box",
                    AXES[d],
                    box_size[d] / 2.0
                )));
            }
        }
        let mut pulses = [0; 3];
        for d in 0..3 {
            let width = box_size[d] / dims[d] as f32;
            pulses[d] = (range / width).ceil() as usize;
            // The pulses must cover the range in the arithmetic the halo search uses.
            while (pulses[d] as f32) * width < range {
                pulses[d] += 1;
            }
            if pulses[d] > MAX_PULSES {
                return Err(Error::Config(format!(
                    "{} domains along {} are {width:.3} nm wide, and a halo of {range:.3} nm would \
                     need {} pulses (at most {MAX_PULSES}): more domains than fit the cutoff; use \
                     fewer domains along {}",
                    dims[d], AXES[d], pulses[d], AXES[d]
                )));
            }
        }
        Ok(DdGrid { dims, box_size, range, pulses })
    }

    /// The grid a PE count suggests: of every factorisation of `n_pes` into three counts that
    /// fits the range, the one that communicates the least (smallest halo volume per domain),
    /// preferring to split x, then y.
    ///
    /// # Errors
    /// [`Error::Config`] when no factorisation fits, naming the one that came closest.
    pub fn choose(n_pes: usize, box_size: RVec, range: f32) -> Result<DdGrid> {
        let mut best: Option<(f64, DdGrid)> = None;
        let mut last_error = None;
        for nx in (1..=n_pes).rev() {
            if !n_pes.is_multiple_of(nx) {
                continue;
            }
            for ny in (1..=n_pes / nx).rev() {
                if !(n_pes / nx).is_multiple_of(ny) {
                    continue;
                }
                let nz = n_pes / nx / ny;
                match DdGrid::new([nx, ny, nz], box_size, range, n_pes) {
                    Ok(grid) => {
                        let cost = grid.halo_volume();
                        if best.as_ref().is_none_or(|(c, _)| cost < *c - 1e-9) {
                            best = Some((cost, grid));
                        }
                    }
                    Err(e) => last_error = Some(e),
                }
            }
        }
        best.map(|(_, grid)| grid)
            .ok_or_else(|| last_error.unwrap_or_else(|| Error::Config(format!("no grid fits {n_pes} PEs"))))
    }

    /// The volume of one domain's half-shell halo, the measure [`choose`](Self::choose)
    /// minimises.
    fn halo_volume(&self) -> f64 {
        let w: [f64; 3] = std::array::from_fn(|d| self.width(d) as f64);
        let r = self.range as f64;
        (w[0] + r) * (w[1] + r) * (w[2] + r) - w[0] * w[1] * w[2]
    }

    /// Domains per dimension.
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    /// The number of domains.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// Always false: a grid has at least one domain.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The box.
    pub fn box_size(&self) -> RVec {
        self.box_size
    }

    /// The halo width the grid serves.
    pub fn range(&self) -> f32 {
        self.range
    }

    /// Pulses per dimension: how many domains away a halo reaches.
    pub fn pulses(&self) -> [usize; 3] {
        self.pulses
    }

    /// The width of a domain along `d`.
    pub fn width(&self, d: usize) -> f32 {
        self.box_size[d] / self.dims[d] as f32
    }

    /// The PE of domain `cell`.
    pub fn pe_of(&self, [i, j, k]: [usize; 3]) -> usize {
        (i * self.dims[1] + j) * self.dims[2] + k
    }

    /// The domain of PE `pe`.
    pub fn cell_of(&self, pe: usize) -> [usize; 3] {
        let k = pe % self.dims[2];
        let j = (pe / self.dims[2]) % self.dims[1];
        let i = pe / (self.dims[1] * self.dims[2]);
        [i, j, k]
    }

    /// The domain containing `x`, wrapped into the box: the one with `lower <= x < upper` in
    /// every dimension, exactly as [`lower`](Self::lower) and [`upper`](Self::upper) round.
    pub fn cell_of_position(&self, x: RVec) -> [usize; 3] {
        let x = crate::system::wrap(x, self.box_size);
        std::array::from_fn(|d| {
            let width = self.width(d);
            let mut c = ((x[d] / width) as usize).min(self.dims[d] - 1);
            // The division may round across a boundary that the products of lower and upper
            // place on the other side.
            while c > 0 && x[d] < c as f32 * width {
                c -= 1;
            }
            while c + 1 < self.dims[d] && x[d] >= (c + 1) as f32 * width {
                c += 1;
            }
            c
        })
    }

    /// The lower corner of domain `cell`.
    pub fn lower(&self, cell: [usize; 3]) -> RVec {
        std::array::from_fn(|d| cell[d] as f32 * self.width(d))
    }

    /// The upper corner of domain `cell` (the box edge for the last domain).
    pub fn upper(&self, cell: [usize; 3]) -> RVec {
        std::array::from_fn(|d| {
            if cell[d] + 1 == self.dims[d] { self.box_size[d] } else { (cell[d] + 1) as f32 * self.width(d) }
        })
    }

    /// The neighbour of `cell` one step along `d` (`up`: towards higher indices), periodic.
    pub fn neighbour(&self, cell: [usize; 3], d: usize, up: bool) -> [usize; 3] {
        let mut next = cell;
        next[d] = if up { (cell[d] + 1) % self.dims[d] } else { (cell[d] + self.dims[d] - 1) % self.dims[d] };
        next
    }

    /// How far domain `to` is from `from` along `d`, as the shorter periodic count of steps.
    pub fn steps(&self, from: [usize; 3], to: [usize; 3], d: usize) -> usize {
        let n = self.dims[d];
        let ahead = (to[d] + n - from[d]) % n;
        ahead.min(n - ahead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOX: RVec = [3.72412, 3.72412, 3.72412];

    #[test]
    fn cells_agree_with_their_corners_at_every_boundary() {
        for dims in [[3, 1, 1], [5, 2, 1], [7, 3, 2]] {
            let grid = DdGrid::new(dims, BOX, 0.5, dims.iter().product()).expect("fits");
            for d in 0..3 {
                for c in 1..dims[d] {
                    // The boundary and the floats right around it.
                    let edge = grid.lower({
                        let mut cell = [0; 3];
                        cell[d] = c;
                        cell
                    })[d];
                    for x in [edge.next_down(), edge, edge.next_up()] {
                        let mut position = [0.1; 3];
                        position[d] = x;
                        let cell = grid.cell_of_position(position);
                        let (lo, hi) = (grid.lower(cell)[d], grid.upper(cell)[d]);
                        assert!(lo <= x && x < hi, "{dims:?} d={d}: {x} in [{lo}, {hi}) of {cell:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn pe_numbering_and_cells() {
        let grid = DdGrid::new([2, 2, 1], BOX, 1.0, 4).expect("fits");
        for pe in 0..4 {
            assert_eq!(grid.pe_of(grid.cell_of(pe)), pe);
        }
        assert_eq!(grid.pe_of([1, 0, 0]), 2);
        assert_eq!(grid.cell_of_position([2.0, 0.5, 3.0]), [1, 0, 0]);
        assert_eq!(grid.cell_of_position([-0.1, 3.8, 0.0]), [1, 0, 0], "wrapped");
        assert_eq!(grid.neighbour([0, 1, 0], 0, false), [1, 1, 0]);
        assert_eq!(grid.upper([1, 1, 0]), BOX);
    }

    #[test]
    fn pulses_follow_the_domain_width() {
        assert_eq!(DdGrid::new([2, 1, 1], BOX, 1.0, 2).expect("fits").pulses(), [1, 1, 1]);
        // Domains of 0.93 nm need two pulses for a 1.0 nm halo.
        assert_eq!(DdGrid::new([4, 1, 1], BOX, 1.0, 4).expect("fits").pulses(), [2, 1, 1]);
    }

    #[test]
    fn bad_grids_are_explained() {
        let message = DdGrid::new([2, 2, 1], BOX, 1.0, 3).expect_err("4 != 3").to_string();
        assert!(message.contains("has 4 domains but the job has 3 PEs"), "{message}");
        let message = DdGrid::new([2, 1, 1], BOX, 1.9, 2).expect_err("half box").to_string();
        assert!(message.contains("half the box in x"), "{message}");
        let message = DdGrid::new([16, 1, 1], BOX, 1.5, 16).expect_err("pulses").to_string();
        assert!(
            message.contains("more domains than fit the cutoff") && message.contains("along x"),
            "{message}"
        );
        // Eleven PEs can only split one dimension eleven ways: five pulses.
        let message = DdGrid::choose(11, [1.0, 1.0, 1.0], 0.45).expect_err("no grid fits").to_string();
        assert!(message.contains("more domains than fit the cutoff"), "{message}");
    }

    #[test]
    fn chosen_grids_fit_and_split_long_dimensions() {
        let grid = DdGrid::choose(4, BOX, 1.0).expect("a grid fits");
        assert_eq!(grid.len(), 4);
        let long = DdGrid::choose(2, [8.0, 2.5, 2.5], 1.0).expect("fits");
        assert_eq!(long.dims(), [2, 1, 1], "the long dimension is split");
        assert_eq!(DdGrid::choose(3, BOX, 1.0).expect("fits").len(), 3);
    }
}
