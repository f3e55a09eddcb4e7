//! The grid of domains ([`DdGrid`]): its dimensions, box, range and pulses, where each
//! domain lies, and its boundaries (shared, or per row).

use crate::error::{Error, Result};
use crate::pbc::{PbcBox, RVec};

use super::rowset::{AXES, RowSet, equal_bounds};

/// The most pulses a dimension may need. Each pulse is one more round of communication in
/// every step, forwarding atoms one domain further, with a latency no larger message can
/// hide; a grid whose domains are narrower than half the halo range has more domains along
/// that dimension than fit the cutoff, and fewer, larger domains serve it better.
pub const MAX_PULSES: usize = 2;

/// A grid of domains and the communication range it serves.
///
/// Whatever depends on the boundaries reads them through [`send_limits`](Self::send_limits)
/// and [`cell_of_fraction`](Self::cell_of_fraction): the halo plan, migration, the periodic
/// images and [`model`](crate::model); pair ownership reads only the atoms' zones. So a grid
/// whose boundaries moved ([`with_bounds`](Self::with_bounds)) or are staggered
/// ([`with_rows`](Self::with_rows)) needs nothing else of them.
#[derive(Clone, Debug, PartialEq)]
pub struct DdGrid {
    pub(super) dims: [usize; 3],
    pub(super) pbc: PbcBox,
    pub(super) range: f32,
    /// The range in fractions, per dimension.
    pub(super) reach: [f64; 3],
    pub(super) pulses: [usize; 3],
    /// The domain boundaries along each dimension in fractions, per row of domains along it
    /// (indexed by [`row`](Self::row)), or one row that all share, or the rows near one
    /// domain: `dims[d] + 1` of them, from exactly 0 to exactly 1, increasing.
    pub(super) bounds: [RowSet; 3],
    /// The domain whose neighbourhood's rows `bounds` holds, where it holds only those.
    pub(super) near: Option<[usize; 3]>,
}

impl DdGrid {
    /// Whether load balancing staggers the grid's boundaries: where two or more dimensions
    /// are split, each row of domains along a later one gets its own, as GROMACS's DLB gives
    /// them.
    pub(crate) fn staggers(&self) -> bool {
        self.dims().iter().filter(|&&n| n > 1).count() >= 2
    }

    /// The grid `dims` over the box `pbc`, for halos of width `range` (the cutoff plus any
    /// Verlet buffer: the interaction range), on `n_pes` PEs.
    ///
    /// # Errors
    /// [`Error::Config`] when the grid does not have one domain per PE (or more PEs than
    /// OpenSHMEM and MPI number: `i32::MAX`), when `range` is not
    /// below half the box height in every dimension (the minimum-image convention: then no
    /// two images of an atom are within range of one point), or when a dimension has more
    /// domains than fit the range (more than [`MAX_PULSES`] pulses). For a skewed box the
    /// height rule is stricter than GROMACS's own limit (about half the shortest box vector):
    /// the plan brings at most one image of an atom along each dimension, which needs the
    /// range below half of every height.
    pub fn new(dims: [usize; 3], pbc: PbcBox, range: f32, n_pes: usize) -> Result<DdGrid> {
        let [nx, ny, nz] = dims;
        let domains = nx.checked_mul(ny).and_then(|d| d.checked_mul(nz));
        if dims.contains(&0) || domains != Some(n_pes) {
            return Err(Error::Config(format!(
                "grid {nx}x{ny}x{nz} has {} domains but the job has {n_pes} PEs; use a grid whose \
                 product is the number of PEs",
                domains.map_or("too many".to_string(), |d| d.to_string())
            )));
        }
        if n_pes > i32::MAX as usize {
            return Err(Error::Config(format!(
                "a job of {n_pes} PEs is more than OpenSHMEM and MPI number (at most {}); use a \
                 grid of the job's real PE count",
                i32::MAX
            )));
        }
        if !(range > 0.0 && range.is_finite()) {
            return Err(Error::Config(format!("the halo range must be a positive length, got {range} nm")));
        }
        below_half_box(pbc, range)?;
        let reach: [f64; 3] = std::array::from_fn(|d| range as f64 / pbc.height(d));
        let mut pulses = [0; 3];
        for d in 0..3 {
            let n = dims[d] as f64;
            pulses[d] = (reach[d] * n).ceil() as usize;
            // The pulses must cover the range in the arithmetic the halo search uses.
            while (pulses[d] as f64) / n < reach[d] {
                pulses[d] += 1;
            }
            if pulses[d] > MAX_PULSES {
                return Err(Error::Config(format!(
                    "{} domains along {} are {:.3} nm wide, and a halo of {range:.3} nm would \
                     need {} pulses (at most {MAX_PULSES}): more domains than fit the cutoff; use \
                     fewer domains along {}",
                    dims[d],
                    AXES[d],
                    pbc.height(d) / n,
                    pulses[d],
                    AXES[d]
                )));
            }
        }
        let bounds = std::array::from_fn(|d| RowSet::Shared(equal_bounds(dims[d])));
        Ok(DdGrid { dims, pbc, range, reach, pulses, bounds, near: None })
    }

    /// This grid with as many pulses along each split dimension as let a domain shrink to
    /// `scaling` of its equal width while its pulses still cover the range: room for a load
    /// balancer ([`crate::Dlb`]) to narrow a loaded domain, as GROMACS's `-dds` provisions
    /// (its default is 0.8). A dimension of `n` domains takes at most `n - 1` pulses (a
    /// domain's halo then spans every other domain along it) and at most [`MAX_PULSES`], so a
    /// small `scaling` may leave the least width above `scaling` of the equal one. Each pulse
    /// is one more round of communication in every step; the boundaries stay as they are.
    ///
    /// # Errors
    /// [`Error::Config`] when `scaling` is not in (0, 1].
    pub fn with_balancing_room(&self, scaling: f64) -> Result<DdGrid> {
        if !(scaling > 0.0 && scaling <= 1.0) {
            return Err(Error::Config(format!(
                "a cell size scaling of {scaling}: it is the least width a domain may shrink to, as a \
                 fraction of the equal width, in (0, 1] (GROMACS's -dds, 0.8 by default)"
            )));
        }
        let mut pulses = self.pulses;
        for (d, p) in pulses.iter_mut().enumerate() {
            let n = self.dims[d];
            // The least width, `scaling / n` in fractions, times the pulses must cover the reach.
            let most = MAX_PULSES.min(n.saturating_sub(1)).max(*p);
            while *p < most && (*p as f64) * scaling / (n as f64) < self.reach[d] {
                *p += 1;
            }
        }
        Ok(DdGrid { pulses, ..self.clone() })
    }

    /// The narrowest a domain along `d` may be, in fractions, whatever its neighbours: the
    /// range in fractions over the pulses, so that any `pulses` consecutive domains cover it.
    pub fn min_width(&self, d: usize) -> f64 {
        self.reach[d] / self.pulses[d] as f64
    }

    /// The grid a PE count suggests: of every factorisation of `n_pes` into three counts that
    /// fits the range, the one that communicates the least (smallest halo volume per domain),
    /// preferring to split x, then y.
    ///
    /// # Errors
    /// [`Error::Config`] when no factorisation fits, with the reason the last one tried (the
    /// one splitting z the most) does not.
    pub fn choose(n_pes: usize, pbc: PbcBox, range: f32) -> Result<DdGrid> {
        if !(range > 0.0 && range.is_finite()) {
            return Err(Error::Config(format!("the halo range must be a positive length, got {range} nm")));
        }
        // A range no grid fits, whatever the PE count: said as such, not as too many PEs.
        below_half_box(pbc, range)?;
        // At most this many domains fit along each dimension ([`MAX_PULSES`] pulses of a
        // domain's width cover the range): the search never looks past them, so its cost
        // follows the box, not the PE count.
        let most: [usize; 3] = std::array::from_fn(|d| {
            let fit = (MAX_PULSES as f64 * pbc.height(d) / range as f64).floor();
            if fit >= (1u64 << 32) as f64 { 1 << 32 } else { fit as usize + 1 }
        });
        let fits = most.iter().try_fold(1usize, |p, &m| p.checked_mul(m));
        if n_pes > i32::MAX as usize {
            return Err(Error::Config(format!("{n_pes} PEs are more than MPI can number ({})", i32::MAX)));
        }
        if n_pes == 0 || fits.is_some_and(|fits| n_pes > fits) {
            return Err(Error::Config(format!(
                "no grid of {n_pes} domains fits: at most {}x{}x{} domains of this box fit a halo of \
                 {range:.3} nm; use between 1 and {} PEs, or a larger (replicated) box",
                most[0],
                most[1],
                most[2],
                fits.map_or("many".to_string(), |f| f.to_string())
            )));
        }
        // The divisors of the PE count, largest first: O(sqrt(n_pes)) to find.
        let mut divisors: Vec<usize> = (1..)
            .take_while(|d: &usize| d.saturating_mul(*d) <= n_pes)
            .filter(|d| n_pes.is_multiple_of(*d))
            .flat_map(|d| [d, n_pes / d])
            .collect();
        divisors.sort_unstable_by(|a, b| b.cmp(a));
        divisors.dedup();
        let mut best: Option<(f64, DdGrid)> = None;
        let mut last_error = None;
        for &nx in divisors.iter().filter(|&&nx| nx <= most[0]) {
            for &ny in divisors.iter().filter(|&&ny| ny <= most[1]) {
                if !(n_pes / nx).is_multiple_of(ny) {
                    continue;
                }
                let nz = n_pes / nx / ny;
                match DdGrid::new([nx, ny, nz], pbc, range, n_pes) {
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
        let w: [f64; 3] = std::array::from_fn(|d| self.pbc.height(d) / self.dims[d] as f64);
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

    /// The periodic box.
    pub fn pbc(&self) -> &PbcBox {
        &self.pbc
    }

    /// The halo width the grid serves, in nm.
    pub fn range(&self) -> f32 {
        self.range
    }

    /// The halo width in fraction `d`: `range / height(d)`.
    pub fn reach(&self, d: usize) -> f64 {
        self.reach[d]
    }

    /// Pulses per dimension: how many domains away a halo reaches.
    pub fn pulses(&self) -> [usize; 3] {
        self.pulses
    }

    /// The dimensions in the order the halo exchange runs their pulses: those split over
    /// several domains first (x before y before z), then those of one domain, whose pulses
    /// only make periodic images of the domain's own atoms and of what it received. Each
    /// dimension's rule looks at that dimension's fraction alone, so the order does not change
    /// which atoms and images a domain holds, only where they lie; with the undivided
    /// dimensions last, nothing any PE sends is an image made along one of them, which lets a
    /// force kernel make those images itself ([`crate::PeriodicImages::Kernel`]).
    pub fn exchange_order(&self) -> [usize; 3] {
        let mut order = [0, 1, 2];
        order.sort_by_key(|&d| self.dims[d] == 1);
        order
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

    /// The domain whose home an atom at `x` is: the one holding its fractions once it is put
    /// into the box ([`PbcBox::put_in_box`]). On a grid of the rows near one domain
    /// ([`near`](Self::near)), as [`cell_of_fraction`](Self::cell_of_fraction): exact for the
    /// domains whose rows it holds (to place any atom, take
    /// [`HaloExchange::collective_whole_grid`](crate::HaloExchange::collective_whole_grid)).
    pub fn cell_of_position(&self, x: RVec) -> [usize; 3] {
        self.cell_of_fraction(self.pbc.unit_fraction(x))
    }

    /// The PE whose domain is the home of an atom at `x` (any position; it is put into the
    /// box first), as [`cell_of_position`](Self::cell_of_position) finds it.
    pub fn pe_of_position(&self, x: RVec) -> usize {
        self.pe_of(self.cell_of_position(x))
    }

    /// The domain holding fractions `s` (each in `[0, 1)`): the one with `lower <= s <
    /// upper` in every dimension, exactly as [`lower`](Self::lower) and
    /// [`upper`](Self::upper) give them; found along x, then along y in that slab's row, then
    /// along z in that column's. On a grid of the rows near one domain ([`near`](Self::near)),
    /// exact for the domains whose rows it holds; a point beyond them is placed by the nearest
    /// rows it holds, so its indices along x (and along y, where it holds that slab's row) are
    /// still exact.
    pub fn cell_of_fraction(&self, s: [f64; 3]) -> [usize; 3] {
        let mut cell = [0; 3];
        for d in 0..3 {
            // The boundaries at or below s: the first is 0, so one at least for any s >= 0.
            let at_or_below = self.placing_bounds(d, cell).partition_point(|&b| b <= s[d]);
            cell[d] = at_or_below.saturating_sub(1).min(self.dims[d] - 1);
        }
        cell
    }

    /// The lower corner of domain `cell`, in fractions.
    ///
    /// # Panics
    /// As [`bounds`](Self::bounds): on a grid of the rows near one domain, for a domain whose
    /// rows it does not hold.
    pub fn lower(&self, cell: [usize; 3]) -> [f64; 3] {
        std::array::from_fn(|d| self.bounds(d, cell)[cell[d]])
    }

    /// The upper corner of domain `cell`, in fractions (1 for the last domain).
    ///
    /// # Panics
    /// As [`lower`](Self::lower).
    pub fn upper(&self, cell: [usize; 3]) -> [f64; 3] {
        std::array::from_fn(|d| self.bounds(d, cell)[cell[d] + 1])
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

/// Refuses a range not below half the box height in every dimension (the minimum-image
/// convention), which no grid of any PE count fits.
fn below_half_box(pbc: PbcBox, range: f32) -> Result<()> {
    for (d, axis) in AXES.iter().enumerate() {
        let half = pbc.height(d) / 2.0;
        if range as f64 >= half {
            let what = if pbc.is_rectangular() {
                format!("half the box in {axis}")
            } else {
                format!("half the box height along {axis} (the distance between its faces)")
            };
            return Err(Error::Config(format!(
                "the cutoff plus buffer ({range:.3} nm) is not shorter than {what} ({half:.3} nm); \
                 use a shorter cutoff or a larger (replicated) box"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: f32 = 3.72412;

    fn cube() -> PbcBox {
        PbcBox::rectangular([L; 3]).expect("valid")
    }

    #[test]
    fn cells_agree_with_their_corners_at_every_boundary() {
        for dims in [[3, 1, 1], [5, 2, 1], [7, 3, 2]] {
            let grid = DdGrid::new(dims, cube(), 0.5, dims.iter().product()).expect("fits");
            for d in 0..3 {
                for c in 1..dims[d] {
                    let edge = grid.bounds(d, [0; 3])[c];
                    // The boundary and the fractions right around it.
                    for s in [edge.next_down(), edge, edge.next_up()] {
                        let mut fraction = [0.1; 3];
                        fraction[d] = s;
                        let cell = grid.cell_of_fraction(fraction);
                        let (lo, hi) = (grid.lower(cell)[d], grid.upper(cell)[d]);
                        assert!(lo <= s && s < hi, "{dims:?} d={d}: {s} in [{lo}, {hi}) of {cell:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn moved_boundaries_place_every_fraction_in_its_domain() {
        let grid = DdGrid::new([3, 2, 1], cube(), 0.5, 6).expect("fits");
        let moved = grid
            .with_bounds([vec![0.0, 0.15, 0.8, 1.0], vec![0.0, 0.62, 1.0], vec![0.0, 1.0]])
            .expect("wide enough");
        assert!(grid.is_uniform() && !moved.is_uniform());
        assert_eq!(moved.lower([1, 1, 0]), [0.15, 0.62, 0.0]);
        assert_eq!(moved.upper([1, 1, 0]), [0.8, 1.0, 1.0]);
        for d in 0..2 {
            for &edge in &moved.bounds(d, [0; 3])[1..moved.dims()[d]] {
                for s in [edge.next_down(), edge, edge.next_up()] {
                    let mut fraction = [0.5; 3];
                    fraction[d] = s;
                    let cell = moved.cell_of_fraction(fraction);
                    let (lo, hi) = (moved.lower(cell)[d], moved.upper(cell)[d]);
                    assert!(lo <= s && s < hi, "d={d}: {s} in [{lo}, {hi}) of {cell:?}");
                }
            }
        }
        assert_eq!(moved.cell_of_fraction([0.1, 0.7, 0.0]), [0, 1, 0]);
        assert_eq!(moved.cell_of_fraction([0.9999, 0.0, 0.9999]), [2, 0, 0]);
    }

    #[test]
    fn boundaries_that_cannot_serve_the_halo_are_explained() {
        // 0.5 nm of 3.724 is 0.134 of the box: one pulse, so no domain narrower than that.
        let grid = DdGrid::new([3, 1, 1], cube(), 0.5, 3).expect("fits");
        let ones = || vec![0.0, 1.0];
        let message = |b: Vec<f64>| grid.with_bounds([b, ones(), ones()]).expect_err("bad").to_string();
        let narrow = message(vec![0.0, 0.45, 0.55, 1.0]);
        assert!(narrow.contains("domain 0 along x") && narrow.contains("at least 0.500 nm"), "{narrow}");
        let wrapped = message(vec![0.0, 0.05, 0.5, 1.0]);
        assert!(wrapped.contains("domain 2 along x"), "{wrapped}");
        let order = message(vec![0.0, 0.6, 0.5, 1.0]);
        assert!(order.contains("domain 1 along x runs from 0.6 to 0.5"), "{order}");
        let ends = message(vec![0.1, 0.4, 0.7, 1.0]);
        assert!(ends.contains("must run from 0 to 1"), "{ends}");
        let count = message(vec![0.0, 0.5, 1.0]);
        assert!(count.contains("3 domains; give 4"), "{count}");
        assert!((grid.min_width(0) - grid.reach(0)).abs() < 1e-15);
    }

    #[test]
    fn pe_numbering_and_cells() {
        let grid = DdGrid::new([2, 2, 1], cube(), 1.0, 4).expect("fits");
        for pe in 0..4 {
            assert_eq!(grid.pe_of(grid.cell_of(pe)), pe);
        }
        assert_eq!(grid.pe_of([1, 0, 0]), 2);
        assert_eq!(grid.cell_of_position([2.0, 0.5, 3.0]), [1, 0, 0]);
        assert_eq!(grid.cell_of_position([-0.1, 3.8, 0.0]), [1, 0, 0], "wrapped");
        assert_eq!(grid.neighbour([0, 1, 0], 0, false), [1, 1, 0]);
        assert_eq!(grid.upper([1, 1, 0]), [1.0, 1.0, 1.0]);
    }

    #[test]
    fn triclinic_domains_follow_the_skew() {
        // A dodecahedron: c leans half a box along x and y.
        let d = 6.0f32;
        let pbc =
            PbcBox::new([[d, 0.0, 0.0], [0.0, d, 0.0], [d / 2.0, d / 2.0, d * 0.70710677]]).expect("valid");
        let grid = DdGrid::new([2, 1, 1], pbc, 1.0, 2).expect("fits");
        // At the top of the box, x = 3.2 nm lies in the first half of the skewed slab.
        assert_eq!(grid.cell_of_position([3.2, 3.0, 4.2]), [0, 0, 0]);
        assert_eq!(grid.cell_of_position([3.2, 3.0, 0.1]), [1, 0, 0]);
        // The range in fractions follows the height, which is shorter than the diagonal.
        assert!(pbc.height(0) < d as f64 && (grid.reach(0) - 1.0 / pbc.height(0)).abs() < 1e-12);
        let message = DdGrid::new([1, 1, 1], pbc, 2.2, 1).expect_err("height").to_string();
        assert!(message.contains("half the box height along z"), "{message}");
    }

    #[test]
    fn balancing_room_adds_pulses_up_to_one_less_than_the_domains() {
        let slab = PbcBox::rectangular([3.0, 3.0, 9.0]).expect("valid");
        let grid = DdGrid::new([1, 1, 3], slab, 0.98, 3).expect("fits");
        assert_eq!(grid.pulses(), [1, 1, 1]);
        // 0.8 of 3 nm still holds 0.98 nm; 0.3 of it (0.9 nm) takes a second pulse; less is
        // capped at two pulses for three domains.
        assert_eq!(grid.with_balancing_room(0.8).expect("fits").pulses(), [1, 1, 1]);
        let roomy = grid.with_balancing_room(0.3).expect("fits");
        assert_eq!(roomy.pulses(), [1, 1, 2]);
        assert!((roomy.min_width(2) - grid.min_width(2) / 2.0).abs() < 1e-12);
        assert_eq!(roomy.bounds(2, [0; 3]), grid.bounds(2, [0; 3]));
        assert_eq!(grid.with_balancing_room(0.01).expect("fits").pulses(), [1, 1, 2]);
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(matches!(grid.with_balancing_room(bad), Err(Error::Config(_))), "{bad}");
        }
    }

    #[test]
    fn pulses_follow_the_domain_width() {
        assert_eq!(DdGrid::new([2, 1, 1], cube(), 1.0, 2).expect("fits").pulses(), [1, 1, 1]);
        assert_eq!(DdGrid::new([2, 1, 1], cube(), 1.0, 2).expect("fits").exchange_order(), [0, 1, 2]);
        assert_eq!(DdGrid::new([1, 2, 1], cube(), 1.0, 2).expect("fits").exchange_order(), [1, 0, 2]);
        assert_eq!(DdGrid::new([1, 2, 2], cube(), 1.0, 4).expect("fits").exchange_order(), [1, 2, 0]);
        assert_eq!(DdGrid::new([1, 1, 1], cube(), 1.0, 1).expect("fits").exchange_order(), [0, 1, 2]);
        // Domains of 0.93 nm need two pulses for a 1.0 nm halo.
        assert_eq!(DdGrid::new([4, 1, 1], cube(), 1.0, 4).expect("fits").pulses(), [2, 1, 1]);
    }

    #[test]
    fn bad_grids_are_explained() {
        let message = DdGrid::new([2, 2, 1], cube(), 1.0, 3).expect_err("4 != 3").to_string();
        assert!(message.contains("has 4 domains but the job has 3 PEs"), "{message}");
        let message = DdGrid::new([2, 1, 1], cube(), 1.9, 2).expect_err("half box").to_string();
        assert!(message.contains("half the box in x"), "{message}");
        let message = DdGrid::new([16, 1, 1], cube(), 1.5, 16).expect_err("pulses").to_string();
        assert!(
            message.contains("more domains than fit the cutoff") && message.contains("along x"),
            "{message}"
        );
        // Eleven PEs can only split one dimension eleven ways: five pulses.
        let message = DdGrid::choose(11, PbcBox::rectangular([1.0; 3]).expect("valid"), 0.45)
            .expect_err("no grid fits")
            .to_string();
        assert!(message.contains("more domains than fit the cutoff"), "{message}");
    }

    #[test]
    fn chosen_grids_fit_and_split_long_dimensions() {
        let grid = DdGrid::choose(4, cube(), 1.0).expect("a grid fits");
        assert_eq!(grid.len(), 4);
        let long =
            DdGrid::choose(2, PbcBox::rectangular([8.0, 2.5, 2.5]).expect("valid"), 1.0).expect("fits");
        assert_eq!(long.dims(), [2, 1, 1], "the long dimension is split");
        assert_eq!(DdGrid::choose(3, cube(), 1.0).expect("fits").len(), 3);
    }

    #[test]
    fn a_range_no_grid_fits_names_the_box_not_the_pes() {
        for n_pes in [1, 2, 8] {
            let message = DdGrid::choose(n_pes, cube(), 100.0).expect_err("too long").to_string();
            assert!(message.contains("not shorter than half the box in x"), "{n_pes} PEs: {message}");
            assert!(!message.contains("PEs"), "{n_pes} PEs: {message}");
        }
    }
}
