//! Staggered rows of boundaries: each row of domains along a dimension (the domains sharing
//! their indices before it) may have boundaries of its own, as GROMACS's load balancing
//! staggers them. The limits between neighbouring rows, the corner limits a halo plan needs
//! (`send_limits`), and the grids of only the rows near one domain that a PE keeps after
//! balancing ([`DdGrid::near`]).

use std::collections::BTreeMap;

use super::domains::DdGrid;
use super::rowset::{AXES, RowLimit, RowSet, equal_bounds};
use crate::error::{Error, Result};

impl DdGrid {
    /// This grid with the domain boundaries `bounds` (per dimension, in fractions: one more
    /// than the domains along it, from exactly 0 to exactly 1, increasing), shared by every
    /// row of domains, the same box, range and pulses: what a load balancer makes of it
    /// ([`crate::Dlb`]).
    ///
    /// # Errors
    /// As [`with_rows`](Self::with_rows).
    pub fn with_bounds(&self, bounds: [Vec<f64>; 3]) -> Result<DdGrid> {
        self.with_rows(bounds.map(|b| vec![b]))
    }

    /// This grid with staggered boundaries: `rows[d]` holds the boundaries along `d` of each
    /// row of domains along `d`, in the order of [`row`](Self::row) (`rows[1]` one per x
    /// index, `rows[2]` one per (x, y) pair, x major), or a single row that they all share.
    /// Each row is as [`with_bounds`](Self::with_bounds) takes one. The same box, range and
    /// pulses.
    ///
    /// Besides each row covering the range with its pulses, neighbouring rows (those within
    /// the pulses of each other along the earlier dimensions) must not be staggered by so much
    /// that two domains within the range of each other lie more than the pulses apart, nor
    /// that a point's domain index differs by more than one between them (an atom crossing
    /// into the next row keeps to its neighbours).
    ///
    /// # Errors
    /// [`Error::Config`] naming the dimension and domain, when a dimension has the wrong
    /// number of rows or boundaries, a row does not start at 0 and end at 1, does not
    /// increase, or has domains so narrow that the grid's pulses no longer cover the range
    /// (every run of `pulses` consecutive domains, periodically, must be at least the range in
    /// fractions wide: [`min_width`](Self::min_width) a domain keeps that for any neighbours),
    /// or when neighbouring rows are staggered by more than the above allows.
    pub fn with_rows(&self, rows: [Vec<Vec<f64>>; 3]) -> Result<DdGrid> {
        for (d, rows) in rows.iter().enumerate() {
            let axis = AXES[d];
            let expected = self.rows(d);
            if rows.len() != 1 && rows.len() != expected {
                return Err(Error::Config(format!(
                    "{} rows of boundaries along {axis}; give one per row of domains along it \
                     ({expected}) or one for all",
                    rows.len()
                )));
            }
            for (r, b) in rows.iter().enumerate() {
                self.check_row(d, r, rows.len() > 1, b)?;
            }
        }
        // Rows that are all alike are one shared row.
        let bounds = rows.map(|mut rows| {
            if rows.windows(2).all(|w| w[0] == w[1]) {
                RowSet::Shared(rows.swap_remove(0))
            } else {
                RowSet::Each(rows)
            }
        });
        let grid = DdGrid { bounds, near: None, ..self.clone() };
        for d in 1..3 {
            if let RowSet::Each(rows) = &grid.bounds[d] {
                grid.check_neighbouring_rows(d, 0..rows.len())?;
            }
        }
        Ok(grid)
    }

    /// Checks one row of boundaries along `d` on its own: count, ends, order, and its pulses
    /// covering the range.
    fn check_row(&self, d: usize, r: usize, staggered: bool, b: &[f64]) -> Result<()> {
        let n = self.dims[d];
        let axis = AXES[d];
        let row = if staggered { format!(" in row {}", self.row_name(d, r)) } else { String::new() };
        if b.len() != n + 1 {
            return Err(Error::Config(format!(
                "{} domain boundaries along {axis}{row} for {n} domains; give {}",
                b.len(),
                n + 1
            )));
        }
        if b[0] != 0.0 || b[n] != 1.0 {
            return Err(Error::Config(format!(
                "the domain boundaries along {axis}{row} run from {} to {}; they must run from 0 to 1 \
                 (fractions of the box)",
                b[0], b[n]
            )));
        }
        if let Some(c) = (0..n).find(|&c| b[c].partial_cmp(&b[c + 1]) != Some(std::cmp::Ordering::Less)) {
            return Err(Error::Config(format!(
                "domain {c} along {axis}{row} runs from {} to {}: boundaries must increase",
                b[c],
                b[c + 1]
            )));
        }
        // Each domain's halo, what the domains above it send along the pulses, must reach
        // the range above its upper boundary.
        let p = self.pulses[d];
        for c in 0..n {
            let (top, wraps) = ((c + 1 + p) % n, (c + 1 + p) / n);
            let reached = b[top] + wraps as f64 - b[c + 1];
            if n > 1 && reached < self.reach[d] {
                return Err(Error::Config(format!(
                    "domain {c} along {axis}{row}: the {p} domain(s) above it span {:.3} nm, less \
                     than the halo range {:.3} nm its {p} pulse(s) must cover; keep every domain \
                     at least {:.3} nm wide",
                    reached * self.pbc.height(d),
                    self.range,
                    self.min_width(d) * self.pbc.height(d)
                )));
            }
        }
        Ok(())
    }

    /// Whether `b` would do as a row of boundaries along `d` on its own: the count, the ends,
    /// the order, and its pulses covering the range ([`with_rows`](Self::with_rows)'s checks
    /// of one row).
    pub(crate) fn row_fits(&self, d: usize, b: &[f64]) -> bool {
        self.check_row(d, 0, false, b).is_ok()
    }

    /// Checks the stagger between each row along `d` and its neighbouring rows: a domain
    /// `pulses + 1` places above one in a neighbouring row starts at least the range above its
    /// top (so that no pair within the range is more pulses apart than the halo forwards),
    /// and two places above at or above its top (so that a point's index differs by at most
    /// one between the rows).
    fn check_neighbouring_rows(&self, d: usize, rows: impl Iterator<Item = usize>) -> Result<()> {
        let n = self.dims[d];
        if n == 1 {
            return Ok(());
        }
        let p = self.pulses[d];
        let axis = AXES[d];
        let limits = self.row_limits(d);
        for r in rows {
            let cell = self.row_cell(d, r);
            let mine = self.bounds(d, cell);
            for other in self.neighbouring_rows(d, cell) {
                // A grid of the rows near one domain checks the pairs it holds; the PEs near
                // the others check theirs.
                let Some(theirs) = self.bounds[d].get(self.row(d, other)) else { continue };
                let Some(limit) = limits.iter().find(|l| l.slack(mine, theirs) < 0.0) else { continue };
                let mut named = cell;
                named[d] = limit.c;
                let above = theirs[limit.j] + limit.wrap - mine[limit.c + 1];
                let how = if limit.least > 0.0 {
                    format!(
                        "its domain {} above starts {:.3} nm above this one's top, less than the halo \
                         range {:.3} nm",
                        p + 1,
                        above * self.pbc.height(d),
                        self.range
                    )
                } else {
                    format!(
                        "its domain 2 above starts {:.3} nm below this one's top",
                        -above * self.pbc.height(d)
                    )
                };
                return Err(Error::Config(format!(
                    "domain {named:?} along {axis}: the neighbouring row {} is staggered from this \
                     domain's row {} by too much: {how}; neighbouring rows' boundaries may differ by \
                     at most what keeps the range within {p} pulse(s) and a domain's neighbours one \
                     step away",
                    self.row_name(d, self.row(d, other)),
                    self.row_name(d, r)
                )));
            }
        }
        Ok(())
    }

    /// The limits between any row along `d` and a neighbouring one, the same for every pair
    /// of rows: for each domain, the domain `pulses + 1` above it in the other row starts at
    /// least the range above its top, and the domain 2 above at or above it.
    pub(crate) fn row_limits(&self, d: usize) -> Vec<RowLimit> {
        let (n, p) = (self.dims[d], self.pulses[d]);
        (0..n)
            .flat_map(|c| {
                [(p, self.reach[d]), (1, 0.0)].map(|(k, least)| RowLimit {
                    c,
                    j: (c + 1 + k) % n,
                    wrap: ((c + 1 + k) / n) as f64,
                    least,
                })
            })
            .collect()
    }

    /// The number of rows of domains along `d`: the product of the domain counts before it.
    pub(crate) fn rows(&self, d: usize) -> usize {
        self.dims[..d].iter().product()
    }

    /// The row along `d` that domain `cell` is in: its indices before `d`, x major.
    pub fn row(&self, d: usize, cell: [usize; 3]) -> usize {
        match d {
            0 => 0,
            1 => cell[0],
            _ => cell[0] * self.dims[1] + cell[1],
        }
    }

    /// The first domain of row `r` along `d`.
    pub(crate) fn row_cell(&self, d: usize, r: usize) -> [usize; 3] {
        match d {
            0 => [0, 0, 0],
            1 => [r, 0, 0],
            _ => [r / self.dims[1], r % self.dims[1], 0],
        }
    }

    /// Row `r` along `d` for messages: its indices before `d`.
    fn row_name(&self, d: usize, r: usize) -> String {
        let cell = self.row_cell(d, r);
        format!("{:?}", &cell[..d])
    }

    /// The rows along `d` within the pulses of `cell`'s along each earlier dimension, above
    /// and below, with its own, each once.
    pub(crate) fn neighbouring_rows(&self, d: usize, cell: [usize; 3]) -> Vec<[usize; 3]> {
        self.rows_around(d, cell, |e| self.pulses[e].min(self.dims[e] - 1))
    }

    /// The rows along `d` (each by a domain of it) within `radius(e)` of `cell`'s along each
    /// earlier dimension `e`, above and below, periodically, each once (`radius(e)` less than
    /// `dims[e]`).
    fn rows_around(&self, d: usize, cell: [usize; 3], radius: impl Fn(usize) -> usize) -> Vec<[usize; 3]> {
        let mut rows = vec![cell];
        for e in 0..d {
            let (n, p) = (self.dims[e], radius(e));
            let mut next = Vec::new();
            for &row in &rows {
                for k in 0..=2 * p {
                    let mut other = row;
                    other[e] = (row[e] + n - p + k) % n;
                    if !next.contains(&other) {
                        next.push(other);
                    }
                }
            }
            rows = next;
        }
        rows
    }

    /// This grid with the boundaries a load balancer gave the rows near domain `centre`
    /// ([`near`](Self::near)): `x` along x (one row), and along y and z the rows of
    /// [`view_rows`](Self::view_rows)`(d, centre)` by their index (empty where the dimension has
    /// one domain). Each row is checked as [`with_rows`](Self::with_rows) checks it, and the
    /// limits between every two neighbouring rows held; the PEs near the other domains check
    /// theirs.
    ///
    /// # Errors
    /// As [`with_rows`](Self::with_rows), or [`Error::Config`] when the rows are not those of
    /// the view.
    pub(crate) fn with_near_rows(
        &self,
        centre: [usize; 3],
        x: Vec<f64>,
        near: [BTreeMap<usize, Vec<f64>>; 2],
    ) -> Result<DdGrid> {
        self.check_row(0, 0, false, &x)?;
        let [y, z] = near;
        let mut bounds =
            [RowSet::Shared(x), RowSet::Shared(equal_bounds(1)), RowSet::Shared(equal_bounds(1))];
        for (d, rows) in [(1, y), (2, z)] {
            if self.dims[d] == 1 {
                continue;
            }
            let view = self.view_rows(d, centre);
            if !rows.keys().copied().eq(view.iter().copied()) {
                return Err(Error::Config(format!(
                    "rows {:?} along {} near domain {centre:?}, where its view holds rows {view:?}",
                    rows.keys().collect::<Vec<_>>(),
                    AXES[d]
                )));
            }
            for (&r, b) in &rows {
                self.check_row(d, r, true, b)?;
            }
            bounds[d] = RowSet::Near(rows);
        }
        let grid = DdGrid { bounds, near: Some(centre), ..self.clone() };
        for d in 1..3 {
            if let RowSet::Near(rows) = &grid.bounds[d] {
                grid.check_neighbouring_rows(d, rows.keys().copied())?;
            }
        }
        Ok(grid)
    }

    /// The domain whose neighbourhood's rows this grid holds, where it holds only those: the
    /// grid of a PE after load balancing staggered its boundaries ([`crate::Dlb`]), which
    /// keeps what grows with the PE's neighbours rather than with the PE count. Such a grid
    /// answers for the domains near that one; [`holds`](Self::holds) tells which, and
    /// [`HaloExchange::collective_whole_grid`](crate::HaloExchange::collective_whole_grid)
    /// gathers every row.
    pub fn near(&self) -> Option<[usize; 3]> {
        self.near
    }

    /// Whether this grid holds the boundaries along `d` of the row of domain `cell`: always,
    /// but on a grid of the rows near one domain ([`near`](Self::near)).
    pub fn holds(&self, d: usize, cell: [usize; 3]) -> bool {
        self.bounds[d].get(self.row(d, cell)).is_some()
    }

    /// How many domains away along `e` a grid of the rows near one domain holds the rows of
    /// later dimensions: the pulses (a plan's corner limits and the limits between rows) and
    /// the steps an atom may take along `e` between repartitions (its new domain is found in
    /// those rows), one more for each split dimension before `e`.
    fn view_radius(&self, e: usize) -> usize {
        let earlier = self.dims[..e].iter().filter(|&&n| n > 1).count();
        self.pulses[e].max(1 + earlier)
    }

    /// The rows along `d` a grid of the rows near domain `centre` holds, by index: those
    /// within [`view_radius`](Self::view_radius) of `centre`'s along each earlier dimension,
    /// periodically, each once, in increasing order.
    pub(crate) fn view_rows(&self, d: usize, centre: [usize; 3]) -> Vec<usize> {
        let cells = self.rows_around(d, centre, |e| self.view_radius(e).min(self.dims[e] / 2));
        let mut rows: Vec<usize> = cells.iter().map(|&c| self.row(d, c)).collect();
        rows.sort_unstable();
        rows
    }

    /// The boundaries along `d` that place a point of domain `cell`'s row: that row's, or on
    /// a grid of the rows near one domain, where it does not hold it, the nearest it holds
    /// (each earlier index as far towards `cell`'s as the view reaches), so that a point
    /// beyond the view is placed no nearer than the view's edge.
    pub(crate) fn placing_bounds(&self, d: usize, cell: [usize; 3]) -> &[f64] {
        if let (RowSet::Near(rows), Some(centre)) = (&self.bounds[d], self.near)
            && !rows.contains_key(&self.row(d, cell))
        {
            let mut at = cell;
            for e in 0..d {
                let n = self.dims[e] as isize;
                let mut off = (cell[e] as isize - centre[e] as isize).rem_euclid(n);
                if off > n / 2 {
                    off -= n;
                }
                let radius = self.view_radius(e) as isize;
                at[e] = (centre[e] as isize + off.clamp(-radius, radius)).rem_euclid(n) as usize;
            }
            return self.bounds(d, at);
        }
        self.bounds(d, cell)
    }

    /// Whether the rows along `d` may each have boundaries of their own (they are not one
    /// shared row): the same on every PE of an exchange, as it decides collective steps.
    pub(crate) fn has_rows_along(&self, d: usize) -> bool {
        !matches!(self.bounds[d], RowSet::Shared(_))
    }

    /// The lowest fraction along `d` that domain `cell` (the sender) sends down to the domain
    /// below it, per zone of the atom ([`Zone`](crate::Zone) bits: along which earlier
    /// dimensions it arrived at `cell`): the range above the highest lower boundary among this
    /// domain and those above it within the pulses along the earlier dimensions the atom did
    /// not arrive along, as GROMACS corrects its zone corners. The domain below pairs its
    /// atoms with those of its zones, whose boundaries along `d` are those rows'. Without
    /// staggering every entry is this domain's lower boundary plus the range.
    ///
    /// # Panics
    /// As [`bounds`](Self::bounds), where the grid holds only the rows near another domain.
    pub fn send_limits(&self, cell: [usize; 3], d: usize) -> [f64; 8] {
        std::array::from_fn(|zone| {
            let mut rows = vec![cell];
            for e in 0..d {
                if zone & (1 << e) != 0 || !self.has_rows_along(d) {
                    continue;
                }
                let (n, p) = (self.dims[e], self.pulses[e]);
                rows = rows
                    .iter()
                    .flat_map(|&row| {
                        (0..=p.min(n - 1)).map(move |k| {
                            let mut other = row;
                            other[e] = (row[e] + k) % n;
                            other
                        })
                    })
                    .collect();
            }
            let lowest =
                rows.iter().map(|&row| self.bounds(d, row)[cell[d]]).fold(f64::NEG_INFINITY, f64::max);
            lowest + self.reach[d]
        })
    }

    /// The domain boundaries along `d` of the row of domains `cell` is in (those sharing its
    /// indices before `d`), in fractions: `dims()[d] + 1` of them, 0 first and 1 last.
    ///
    /// # Panics
    /// On a grid of the rows near one domain ([`near`](Self::near)), where it does not hold
    /// `cell`'s row ([`holds`](Self::holds)).
    pub fn bounds(&self, d: usize, cell: [usize; 3]) -> &[f64] {
        let r = self.row(d, cell);
        self.bounds[d].get(r).unwrap_or_else(|| {
            panic!(
                "the row {} along {} is not among the rows near domain {:?} this grid holds \
                 (DdGrid::holds); HaloExchange::collective_whole_grid gathers every row",
                self.row_name(d, r),
                AXES[d],
                self.near
            )
        })
    }

    /// The rows of boundaries along `d` this grid holds, each with its index
    /// ([`row`](Self::row)): one, index 0, that every row shares; or each row's; or on a grid
    /// of the rows near one domain ([`near`](Self::near)), those rows'.
    pub fn rows_of_bounds(&self, d: usize) -> Vec<(usize, &[f64])> {
        match &self.bounds[d] {
            RowSet::Shared(b) => vec![(0, b.as_slice())],
            RowSet::Each(rows) => rows.iter().enumerate().map(|(r, b)| (r, b.as_slice())).collect(),
            RowSet::Near(rows) => rows.iter().map(|(&r, b)| (r, b.as_slice())).collect(),
        }
    }

    /// Whether some rows of domains have boundaries of their own ([`with_rows`](Self::with_rows)),
    /// among the rows this grid holds (on a grid of the rows near one domain, this PE's
    /// answer, which another PE's may differ from).
    pub fn is_staggered(&self) -> bool {
        (0..3).any(|d| {
            let rows = self.rows_of_bounds(d);
            rows.windows(2).any(|w| w[0].1 != w[1].1)
        })
    }

    /// Whether every domain along every dimension is an equal slice, as [`new`](Self::new)
    /// cut them (on a grid of the rows near one domain, every domain of those rows: this
    /// PE's answer, which another PE's may differ from).
    pub fn is_uniform(&self) -> bool {
        (0..3).all(|d| self.rows_of_bounds(d).iter().all(|(_, b)| *b == equal_bounds(self.dims[d])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pbc::PbcBox;

    const L: f32 = 3.72412;

    fn cube() -> PbcBox {
        PbcBox::rectangular([L; 3]).expect("valid")
    }

    /// A 2x4x1 grid whose y rows differ between the two x slabs.
    fn staggered() -> (DdGrid, Vec<Vec<f64>>) {
        let grid = DdGrid::new([2, 4, 1], cube(), 0.5, 8).expect("fits");
        let rows = vec![vec![0.0, 0.25, 0.5, 0.75, 1.0], vec![0.0, 0.35, 0.6, 0.85, 1.0]];
        let staggered =
            grid.with_rows([vec![equal_bounds(2)], rows.clone(), vec![equal_bounds(1)]]).expect("valid");
        (staggered, rows)
    }

    #[test]
    fn staggered_rows_find_domains_row_by_row() {
        let (grid, rows) = staggered();
        assert!(grid.is_staggered() && !grid.is_uniform());
        assert_eq!(grid.pulses(), [1, 1, 1]);
        // y = 0.3 is in domain 1 of the first slab's row and in domain 0 of the second's.
        assert_eq!(grid.cell_of_fraction([0.25, 0.3, 0.5]), [0, 1, 0]);
        assert_eq!(grid.cell_of_fraction([0.75, 0.3, 0.5]), [1, 0, 0]);
        assert_eq!(grid.cell_of_fraction([0.75, 0.35, 0.5]), [1, 1, 0]);
        assert_eq!(grid.bounds(1, [1, 3, 0]), &rows[1][..]);
        assert_eq!(grid.lower([1, 1, 0]), [0.5, 0.35, 0.0]);
        assert_eq!(grid.upper([0, 1, 0]), [0.5, 0.5, 1.0]);
        let flat = grid.with_bounds([equal_bounds(2), rows[1].clone(), equal_bounds(1)]).expect("valid");
        assert!(!flat.is_staggered() && flat.rows_of_bounds(1).len() == 1);
    }

    #[test]
    fn send_limits_take_the_highest_lower_face_of_the_zone_rows() {
        let (grid, rows) = staggered();
        let reach = grid.reach(1);
        // Domain [0, 2] sends along y: an atom that did not arrive along x pairs below with
        // atoms of both slabs (domains [0, 1] and [1, 1], whose tops are 0.5 and 0.6); one
        // that arrived along x only with the first slab's.
        let limits = grid.send_limits([0, 2, 0], 1);
        assert_eq!(limits[0], rows[1][2] + reach);
        assert_eq!(limits[1], rows[0][2] + reach);
        assert_eq!(limits[0b100], limits[0], "bits of later dimensions do not count");
        // From the second slab the slab above wraps to the first.
        assert_eq!(grid.send_limits([1, 2, 0], 1)[0], rows[1][2] + reach);
        // Along x, and on a grid without staggering, every zone's limit is the lower face plus
        // the range.
        let flat = DdGrid::new([2, 4, 1], cube(), 0.5, 8).expect("fits");
        for (g, cell, d) in [(&grid, [1, 2, 0], 0), (&flat, [0, 2, 0], 1), (&flat, [1, 3, 0], 0)] {
            assert!(g.send_limits(cell, d).iter().all(|&l| l == g.lower(cell)[d] + g.reach(d)));
        }
    }

    /// A 4x4x2 grid over a 6 nm cube whose y and z rows are staggered, with every row.
    fn staggered_4x4x2() -> DdGrid {
        let grid =
            DdGrid::new([4, 4, 2], PbcBox::rectangular([6.0; 3]).expect("valid"), 1.0, 32).expect("fits");
        let shifted = |n: usize, r: usize| -> Vec<f64> {
            (0..=n)
                .map(|c| {
                    let sign = if (r + c).is_multiple_of(2) { 1.0 } else { -1.0 };
                    (c as f64 + if c == 0 || c == n { 0.0 } else { 0.05 * sign * (r % 3) as f64 }) / n as f64
                })
                .collect()
        };
        let rows = [
            vec![equal_bounds(4)],
            (0..4).map(|r| shifted(4, r)).collect(),
            (0..16).map(|r| shifted(2, r)).collect(),
        ];
        grid.with_rows(rows).expect("valid")
    }

    #[test]
    fn a_grid_of_near_rows_places_what_it_holds_as_the_whole_grid() {
        let whole = staggered_4x4x2();
        assert!(whole.is_staggered() && whole.near().is_none());
        let centre = [0, 1, 1];
        // One slab either side along x (one pulse); along y two columns either side (an atom
        // crossing into the next slab may find itself two columns off), here all four.
        assert_eq!(whole.view_rows(1, centre), vec![0, 1, 3]);
        assert_eq!(whole.view_rows(2, centre), vec![0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15]);
        let rows_of = |d: usize| -> BTreeMap<usize, Vec<f64>> {
            whole
                .view_rows(d, centre)
                .into_iter()
                .map(|r| (r, whole.bounds(d, whole.row_cell(d, r)).to_vec()))
                .collect()
        };
        let near = whole.with_near_rows(centre, equal_bounds(4), [rows_of(1), rows_of(2)]).expect("valid");
        assert_eq!(near.near(), Some(centre));
        assert!(near.holds(2, [3, 0, 0]) && !near.holds(2, [2, 0, 0]) && !near.holds(1, [2, 3, 1]));
        assert!(near.has_rows_along(1) && near.has_rows_along(2));
        // Every point placed in a domain whose rows the near grid holds lands where the whole
        // grid puts it; beyond them, x is still exact.
        let mut beyond = 0;
        for i in 0..40 {
            for j in 0..40 {
                for k in 0..8 {
                    let s = [(i as f64 + 0.31) / 40.0, (j as f64 + 0.17) / 40.0, (k as f64 + 0.5) / 8.0];
                    let (cell, placed) = (whole.cell_of_fraction(s), near.cell_of_fraction(s));
                    if near.holds(1, cell) && near.holds(2, cell) {
                        assert_eq!(placed, cell, "{s:?}");
                    } else {
                        assert_eq!(placed[0], cell[0], "{s:?}");
                        beyond += 1;
                    }
                }
            }
        }
        assert!(beyond > 0);
        // The plan's corner limits read only rows it holds, and agree.
        for d in 0..3 {
            assert_eq!(near.send_limits(centre, d), whole.send_limits(centre, d));
        }
        // Rows other than the view's are refused.
        let mut extra = rows_of(2);
        extra.insert(8, whole.bounds(2, [2, 0, 0]).to_vec());
        let message =
            whole.with_near_rows(centre, equal_bounds(4), [rows_of(1), extra]).expect_err("view").to_string();
        assert!(message.contains("its view holds rows"), "{message}");
    }

    #[test]
    fn rows_staggered_too_far_are_refused() {
        let grid = DdGrid::new([2, 4, 1], cube(), 0.5, 8).expect("fits");
        let x = vec![equal_bounds(2)];
        let z = vec![equal_bounds(1)];
        let row = |b: &[f64]| b.to_vec();
        // Three rows for two slabs.
        let three = vec![equal_bounds(4); 3];
        let message = grid.with_rows([x.clone(), three, z.clone()]).expect_err("rows").to_string();
        assert!(message.contains("3 rows of boundaries along y"), "{message}");
        // Each row is fine alone, but the second's domain 0 ends 0.1 below the first's domain
        // 1's top: a pair across them would be two domains apart.
        let far = vec![row(&[0.0, 0.25, 0.5, 0.75, 1.0]), row(&[0.0, 0.4, 0.65, 0.85, 1.0])];
        let message = grid.with_rows([x.clone(), far, z.clone()]).expect_err("staggered").to_string();
        assert!(message.contains("domain [1, 0, 0] along y") && message.contains("staggered"), "{message}");
        // A row on its own too narrow names its row.
        let narrow = vec![row(&[0.0, 0.25, 0.5, 0.75, 1.0]), row(&[0.0, 0.25, 0.3, 0.75, 1.0])];
        let message = grid.with_rows([x, narrow, z]).expect_err("narrow").to_string();
        assert!(message.contains("along y in row [1]"), "{message}");
    }
}
