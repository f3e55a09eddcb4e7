//! Charge spreading onto a PME rank's slab or pencil with B-splines of the grid's order `n`,
//! the overlap exchange between neighbouring slabs or pencils, and the force gather (the
//! serial references of both are [`serial_spread`](crate::reference::serial_spread) and
//! [`serial_gather`](crate::reference::serial_gather)).
//!
//! A charge whose x grid line is `i` spreads onto planes `i - (n - 1) ..= i`: a PME rank's
//! local grid is its slab plus the `n - 1` planes below it, whose contributions belong to the
//! slab below and travel there ([`SlabGrid::collective_reduce_overlap`]); for the gather, the
//! final values of those planes come back ([`SlabGrid::collective_return_overlap`]). With
//! pencils the local grid also holds the `n - 1` y lines below the pencil's: the overlap is summed
//! along y first (to the pencil below in y, every local plane), then along x (to the pencil
//! below in x), and comes back in the reverse order, so that the corner, below in both,
//! arrives by way of the pencil beside it, as GROMACS's `gmx_sum_qgrid_dd` does it.
//!
//! Each charge's stencil (its x line, its `n` y and z lines wrapped once, the B-spline
//! weights and their derivatives) is made once per step and kept for the gather of the same
//! particles, as GROMACS does. Spreading runs on rayon over x planes, from records sorted by
//! plane: each plane sums the contributions of the charges whose spline reaches it, by the
//! plane of each charge's line and then in received order, so the grid is the same whatever
//! the number of threads; `n`
//! neighbouring z points are one short vector. The order is a value of the grid and each
//! order's loops are compiled for it ([`with_order`](crate::spline::with_order)), so the
//! default order's code is what a constant order made.

use std::any::Any;

use onesided::{Exchange, Incoming, Outgoing, Path, Runtime, SymArray};
use rayon::prelude::*;

use crate::error::Result;
use crate::grid::PmeGrid;
use crate::particle::{Particle, RVec};
use crate::spline::{weights, with_order};

/// One PME rank's slab (or pencil) of the charge grid, with the overlap planes below it (and
/// with pencils the overlap lines).
pub struct SlabGrid<'rt> {
    grid: PmeGrid,
    rank: Option<usize>,
    lo: usize,
    hi: usize,
    /// The planes below a slab (and lines below a pencil) that its charges reach: the
    /// interpolation order less one.
    reach: usize,
    /// Local rows per plane: `Ky` with slabs; with pencils the lines `y_lo - reach .. y_hi`
    /// (wrapped), starting at global line `origin`.
    rows: usize,
    origin: usize,
    /// Planes `lo - reach .. hi` (wrapped), each `rows × Kz`, y major.
    data: Vec<f32>,
    /// With pencils, this rank's own part (planes `lo..hi`, lines `y_lo..y_hi`, every z),
    /// for the FFT; empty with slabs, whose own part lies contiguous in `data`.
    own: Vec<f32>,
    reduce: Exchange<'rt, f32>,
    back: Exchange<'rt, f32>,
    overlap: SymArray<'rt, f32>,
    /// With pencils, the exchanges and buffer of the overlap lines.
    reduce_y: Exchange<'rt, f32>,
    back_y: Exchange<'rt, f32>,
    overlap_y: SymArray<'rt, f32>,
    /// The stencils of the last spread (a `Vec<Stencil<N>>` for the grid's order `N`) and
    /// the positions they were made for: the gather of the same particles reuses them, as
    /// GROMACS's gather reuses its spread's splines.
    stencils: Box<dyn Any + Send + Sync>,
    spread_positions: Vec<RVec>,
    /// The spread's records, sorted by plane (a `Vec<SpreadPoint<N>>`, kept to reuse the
    /// allocation).
    spread_points: Box<dyn Any + Send + Sync>,
}

impl<'rt> SlabGrid<'rt> {
    /// The slab of this PE's PME rank (empty on PEs that are not PME ranks); overlap planes
    /// travel over `path` (the one-sided put path or MPI).
    ///
    /// # Collective
    /// Every PE must call it.
    pub fn collective_new(rt: &'rt Runtime, grid: &PmeGrid, path: Path) -> Result<Self> {
        let rank = grid.rank_of_pe(rt.my_pe());
        let (lo, hi) = rank.map_or((0, 0), |r| grid.slab(r));
        let [_, ky, kz] = grid.sizes();
        let [px, py] = grid.dims();
        let pencil = grid.is_pencil();
        let reach = grid.order() - 1;
        let (y_lo, y_hi) = rank.map_or((0, 0), |r| grid.lines(r));
        let rows = if pencil { y_hi - y_lo + reach } else { ky };
        let origin = if pencil { (y_lo + ky - reach) % ky } else { 0 };
        let planes = if rank.is_some() { hi - lo + reach } else { 0 };
        // Symmetric buffers are as long as the widest rank's.
        let widest_rows = if pencil {
            (0..py).map(|b| grid.lines(b).1 - grid.lines(b).0).max().unwrap_or(0) + reach
        } else {
            ky
        };
        let widest_planes =
            (0..px).map(|a| grid.slab(a * py).1 - grid.slab(a * py).0).max().unwrap_or(0) + reach;
        let own = if pencil && rank.is_some() { (hi - lo) * (y_hi - y_lo) * kz } else { 0 };
        // Under `Auto`, the links over every size, not those of the planes' size: the planes
        // go while a partner may still be spreading, and a one-sided transfer across TCP
        // waits for its target's progress where MPI sends up to its eager limit (64 KiB)
        // regardless (the whole step measured 1.04-1.07x MPI's with planes of 47 KB on the
        // get path across 1 Gbit links, 0.96-1.01x on the links over every size).
        let everyone: Vec<usize> = (0..rt.n_pes()).collect();
        let exchange = |name: &str| match path {
            Path::Auto => Exchange::builder(rt, name)
                .links(rt.collective_links()?.plain())
                .partners(&everyone)
                .collective_build(),
            path => Exchange::builder(rt, name).path(path).collective_build(),
        };
        let mut slab = SlabGrid {
            grid: grid.clone(),
            rank,
            lo,
            hi,
            reach,
            rows,
            origin,
            data: vec![0.0; planes * rows * kz],
            own: vec![0.0; own],
            reduce: exchange("pme overlap")?,
            back: exchange("pme overlap return")?,
            overlap: SymArray::collective_alloc(rt, "pme overlap planes", reach * widest_rows * kz)?,
            reduce_y: exchange("pme overlap lines")?,
            back_y: exchange("pme overlap lines return")?,
            overlap_y: SymArray::collective_alloc(
                rt,
                "pme overlap lines",
                if pencil { widest_planes * reach * kz } else { 1 },
            )?,
            stencils: Box::new(()),
            spread_positions: Vec::new(),
            spread_points: Box::new(()),
        };
        // Each exchange is told its messages' size, which a link on the get path needs room
        // for.
        let plane_message = if rank.is_some() { reach * rows * kz } else { 0 };
        let line_message = if pencil && rank.is_some() { planes * reach * kz } else { 0 };
        slab.reduce.collective_reserve(plane_message)?;
        slab.back.collective_reserve(plane_message)?;
        slab.reduce_y.collective_reserve(line_message)?;
        slab.back_y.collective_reserve(line_message)?;
        Ok(slab)
    }

    fn plane_len(&self) -> usize {
        self.rows * self.grid.sizes()[2]
    }

    /// The PE of the rank below (`-1`) or above (`+1`) this one in x (`d` 0) or y (`d` 1).
    fn neighbour(&self, rank: usize, d: usize, step: isize) -> usize {
        let [px, py] = self.grid.dims();
        let (a, b) = (rank / py, rank % py);
        let (a, b) = match d {
            0 => ((a as isize + step).rem_euclid(px as isize) as usize, b),
            _ => (a, (b as isize + step).rem_euclid(py as isize) as usize),
        };
        self.grid.pe_of(a * py + b)
    }

    /// With pencils, copies this rank's own lines between the local grid and `own`.
    fn own_lines(&mut self, into_own: bool) {
        let kz = self.grid.sizes()[2];
        let reach = self.reach;
        let lines = self.rows - self.reach;
        let plane_len = self.plane_len();
        for (p, own) in self.own.chunks_exact_mut(lines * kz).enumerate() {
            let start = (p + reach) * plane_len + reach * kz;
            let local = &mut self.data[start..start + lines * kz];
            if into_own {
                own.copy_from_slice(local);
            } else {
                local.copy_from_slice(own);
            }
        }
    }

    /// The local plane of the grid line `i` of a charge of this rank (`lo <= i < hi`): its
    /// spline covers local planes `top - reach ..= top`.
    fn top_plane(&self, i: usize) -> usize {
        debug_assert!(self.lo <= i && i < self.hi, "charge of another slab");
        i - self.lo + self.reach
    }

    /// Spreads the charges of `particles` (all of this PME rank's) onto the local grid,
    /// replacing what it held.
    pub fn spread(&mut self, particles: &[Particle]) {
        if self.rank.is_none() {
            return;
        }
        with_order!(self.grid.order(), N => self.spread_with::<N>(particles))
    }

    fn spread_with<const N: usize>(&mut self, particles: &[Particle]) {
        let kz = self.grid.sizes()[2];
        let plane_len = self.plane_len();
        let planes = self.data.len() / plane_len.max(1);
        let mut located: Vec<Stencil<N>> = std::mem::replace(&mut self.stencils, Box::new(()))
            .downcast::<Vec<Stencil<N>>>()
            .map(|v| *v)
            .unwrap_or_default();
        particles.par_iter().map(|p| Stencil::new(&self.grid, p.x)).collect_into_vec(&mut located);
        self.spread_positions.clear();
        self.spread_positions.extend(particles.iter().map(|p| p.x));
        // The charges sorted by the local plane of their grid line (stable: received order
        // within a plane), as compact single-precision records, so that each plane reads N
        // contiguous runs.
        let mut start = vec![0usize; planes + 1];
        for stencil in &located {
            start[self.top_plane(stencil.line) + 1] += 1;
        }
        for plane in 0..planes {
            start[plane + 1] += start[plane];
        }
        let mut fill = start.clone();
        let mut sorted: Vec<SpreadPoint<N>> = std::mem::replace(&mut self.spread_points, Box::new(()))
            .downcast::<Vec<SpreadPoint<N>>>()
            .map(|v| *v)
            .unwrap_or_default();
        sorted.resize(located.len(), SpreadPoint::ZERO);
        let (origin, ky) = (self.origin, self.grid.sizes()[1]);
        for (stencil, p) in located.iter().zip(particles) {
            let plane = self.top_plane(stencil.line);
            sorted[fill[plane]] = SpreadPoint::new(stencil, p.q, origin, ky);
            fill[plane] += 1;
        }
        let sorted_ref = &sorted;
        self.data.par_chunks_mut(plane_len).enumerate().for_each(|(plane, values)| {
            values.fill(0.0);
            // Charges whose line lies at or up to N - 1 planes above this one reach it.
            for above in 0..N.min(planes - plane) {
                let j = N - 1 - above;
                for point in &sorted_ref[start[plane + above]..start[plane + above + 1]] {
                    let wx = point.wx[j];
                    for (&y, &wy) in point.y.iter().zip(&point.wy) {
                        let row = &mut values[y as usize * kz..(y as usize + 1) * kz];
                        let wxy = wx * wy;
                        if point.z_run {
                            // N neighbouring points: one short vector.
                            let z = point.z[0] as usize;
                            let run: &mut [f32; N] = (&mut row[z..z + N]).try_into().expect("N points");
                            for (v, &w) in run.iter_mut().zip(&point.wz) {
                                *v += wxy * w;
                            }
                        } else {
                            for (&z, &w) in point.z.iter().zip(&point.wz) {
                                row[z as usize] += wxy * w;
                            }
                        }
                    }
                }
            }
        });
        self.spread_points = Box::new(sorted);
        self.stencils = Box::new(located);
    }

    /// Adds the overlap planes to the slab below, whose owner adds them to its top planes:
    /// afterwards this rank's slab holds the complete charge grid.
    ///
    /// # Collective
    /// Every PE must call it (PEs without a slab take no part in the exchange).
    pub fn collective_reduce_overlap(&mut self) -> Result<()> {
        let Some(rank) = self.rank else { return Ok(()) };
        let kz = self.grid.sizes()[2];
        let reach = self.reach;
        let plane_len = self.plane_len();
        if self.grid.is_pencil() {
            // Along y first: the bottom lines of every local plane to the pencil below in y,
            // which adds them to its top lines.
            let (below, above) = (self.neighbour(rank, 1, -1), self.neighbour(rank, 1, 1));
            let planes = self.data.len() / plane_len;
            let n = planes * reach * kz;
            let mut bottom = Vec::with_capacity(n);
            for plane in self.data.chunks_exact(plane_len) {
                bottom.extend_from_slice(&plane[..reach * kz]);
            }
            self.reduce_y
                .call(&[&self.overlap_y])
                .send(&[Outgoing::Copy { to: below, data: &bottom }])
                .receive(&[Incoming { from: above, buffer: 0, offset: 0, room: n }])
                .run()?;
            self.overlap_y.read_local(0, &mut bottom)?;
            let top = plane_len - reach * kz;
            self.data.par_chunks_mut(plane_len).zip(bottom.par_chunks(reach * kz)).for_each(
                |(plane, add)| {
                    for (v, r) in plane[top..].iter_mut().zip(add) {
                        *v += r;
                    }
                },
            );
        }
        let (below, above) = (self.neighbour(rank, 0, -1), self.neighbour(rank, 0, 1));
        let n = reach * plane_len;
        self.reduce
            .call(&[&self.overlap])
            .send(&[Outgoing::Copy { to: below, data: &self.data[..n] }])
            .receive(&[Incoming { from: above, buffer: 0, offset: 0, room: n }])
            .run()?;
        let mut received = vec![0f32; n];
        self.overlap.read_local(0, &mut received)?;
        let top = self.data.len() - n;
        self.data[top..].par_iter_mut().zip(received.par_iter()).for_each(|(v, r)| *v += r);
        if self.grid.is_pencil() {
            self.own_lines(true);
        }
        Ok(())
    }

    /// Brings the final values of the overlap planes back from the slab below, for the gather.
    ///
    /// # Collective
    /// As [`collective_reduce_overlap`](Self::collective_reduce_overlap).
    pub fn collective_return_overlap(&mut self) -> Result<()> {
        let Some(rank) = self.rank else { return Ok(()) };
        let kz = self.grid.sizes()[2];
        let reach = self.reach;
        let plane_len = self.plane_len();
        if self.grid.is_pencil() {
            self.own_lines(false);
        }
        let (below, above) = (self.neighbour(rank, 0, -1), self.neighbour(rank, 0, 1));
        let n = reach * plane_len;
        let top = self.data.len() - n;
        self.back
            .call(&[&self.overlap])
            .send(&[Outgoing::Copy { to: above, data: &self.data[top..] }])
            .receive(&[Incoming { from: below, buffer: 0, offset: 0, room: n }])
            .run()?;
        self.overlap.read_local(0, &mut self.data[..n])?;
        if self.grid.is_pencil() {
            // Then along y: the top lines of every local plane (the planes below in x just
            // completed) to the pencil above in y, into its bottom lines.
            let (below, above) = (self.neighbour(rank, 1, -1), self.neighbour(rank, 1, 1));
            let planes = self.data.len() / plane_len;
            let n = planes * reach * kz;
            let top = plane_len - reach * kz;
            let mut lines = Vec::with_capacity(n);
            for plane in self.data.chunks_exact(plane_len) {
                lines.extend_from_slice(&plane[top..]);
            }
            self.back_y
                .call(&[&self.overlap_y])
                .send(&[Outgoing::Copy { to: above, data: &lines }])
                .receive(&[Incoming { from: below, buffer: 0, offset: 0, room: n }])
                .run()?;
            self.overlap_y.read_local(0, &mut lines)?;
            for (plane, from) in self.data.chunks_exact_mut(plane_len).zip(lines.chunks_exact(reach * kz)) {
                plane[..reach * kz].copy_from_slice(from);
            }
        }
        Ok(())
    }

    /// This rank's slab (x planes `lo..hi`, each `Ky × Kz`), after the overlap reduction;
    /// with pencils its pencil (x planes `lo..hi`, each of its lines
    /// [`PmeGrid::lines`](crate::PmeGrid::lines) × `Kz`).
    pub fn slab(&self) -> &[f32] {
        if self.rank.is_none() {
            return &[];
        }
        if self.grid.is_pencil() {
            return &self.own;
        }
        &self.data[self.reach * self.plane_len()..]
    }

    /// This rank's slab, to overwrite (with the convolved grid, say) before
    /// [`collective_return_overlap`](Self::collective_return_overlap) and the gather.
    pub fn slab_mut(&mut self) -> &mut [f32] {
        if self.rank.is_none() {
            return &mut [];
        }
        if self.grid.is_pencil() {
            return &mut self.own;
        }
        let start = self.reach * self.plane_len();
        &mut self.data[start..]
    }

    /// The x planes of the slab.
    pub fn planes(&self) -> (usize, usize) {
        (self.lo, self.hi)
    }

    /// The force on each particle from the grid: minus the charge times the Cartesian gradient
    /// of the grid interpolated at the particle (after both overlap exchanges), through the
    /// reciprocal box as GROMACS's `gather_f_bsplines` does, so also in a triclinic box.
    pub fn gather(&self, particles: &[Particle]) -> Vec<RVec> {
        let mut forces = vec![[0.0; 3]; particles.len()];
        self.gather_into(particles, &mut forces);
        forces
    }

    /// [`gather`](Self::gather) into `forces` (one per particle), for instance the
    /// redistribution's own force buffer ([`Mesh::forces`](crate::Mesh::forces)).
    ///
    /// # Panics
    /// When `forces` is not as long as `particles`.
    pub fn gather_into(&self, particles: &[Particle], forces: &mut [RVec]) {
        assert_eq!(forces.len(), particles.len(), "one force per particle");
        with_order!(self.grid.order(), N => self.gather_with::<N>(particles, forces))
    }

    fn gather_with<const N: usize>(&self, particles: &[Particle], forces: &mut [RVec]) {
        let stencils = self.stencils.downcast_ref::<Vec<Stencil<N>>>().filter(|stencils| {
            particles.len() == stencils.len()
                && particles
                    .iter()
                    .zip(&self.spread_positions)
                    .all(|(p, x)| p.x.map(f32::to_bits) == x.map(f32::to_bits))
        });
        let (grid, data) = (&self.grid, &self.data[..]);
        let local = Local { lo: self.lo, reach: self.reach, rows: self.rows, origin: self.origin };
        if let Some(stencils) = stencils {
            forces.par_iter_mut().zip(particles.par_iter().zip(stencils)).for_each(|(f, (p, stencil))| {
                *f = force_on(grid, data, local, p, stencil);
            });
        } else {
            forces.par_iter_mut().zip(particles.par_iter()).for_each(|(f, p)| {
                *f = force_on::<N>(grid, data, local, p, &Stencil::new(grid, p.x));
            });
        }
    }
}

/// Where a rank's local grid lies: its first own plane, the planes below it, rows per
/// plane, and the global line of row 0.
#[derive(Clone, Copy)]
struct Local {
    lo: usize,
    reach: usize,
    rows: usize,
    origin: usize,
}

/// The force on `p` from the local grid `data` (planes `lo - reach ..` of `grid`) through its
/// stencil.
fn force_on<const N: usize>(
    grid: &PmeGrid,
    data: &[f32],
    local: Local,
    p: &Particle,
    stencil: &Stencil<N>,
) -> RVec {
    let [_, ky, kz] = grid.sizes();
    let (lo, plane_len) = (local.lo, local.rows * kz);
    let rows = stencil.y.map(|y| {
        let row = y as usize + ky - local.origin;
        (if row >= ky { row - ky } else { row }) as u32
    });
    let (w, dw) = (&stencil.w, &stencil.dw);
    let mut gradient = [0.0f64; 3];
    // The local plane of the charge's line, minus the spline's reach below it.
    let first = stencil.line - lo + local.reach + 1 - N;
    // Along z first, as GROMACS's gather does: two sums per grid line, then three
    // products per line instead of three per point.
    for i in 0..N {
        let plane = &data[(first + i) * plane_len..(first + i + 1) * plane_len];
        for (a, &y) in rows.iter().enumerate() {
            let row = &plane[y as usize * kz..(y as usize + 1) * kz];
            let values: [f32; N] = match stencil.z_run {
                Some(z) => row[z as usize..z as usize + N].try_into().expect("N points"),
                None => stencil.z.map(|z| row[z as usize]),
            };
            let (mut along, mut slope) = (0.0f64, 0.0f64);
            for b in 0..N {
                along += values[b] as f64 * w[2][b];
                slope += values[b] as f64 * dw[2][b];
            }
            gradient[0] += dw[0][i] * w[1][a] * along;
            gradient[1] += w[0][i] * dw[1][a] * along;
            gradient[2] += w[0][i] * w[1][a] * slope;
        }
    }
    grid.force(p.q as f64, gradient).map(|f| f as f32)
}

/// Where a charge's spline of order `N` lands on the grid: the x line at or below it, the `N`
/// y and z lines its spline covers (wrapped once, here, so no loop divides), the first of the
/// z lines when they are neighbours in memory (no wrap), and the weights with their
/// derivatives.
struct Stencil<const N: usize> {
    line: usize,
    y: [u32; N],
    z: [u32; N],
    z_run: Option<u32>,
    w: [[f64; N]; 3],
    dw: [[f64; N]; 3],
}

impl<const N: usize> Stencil<N> {
    fn new(grid: &PmeGrid, x: RVec) -> Stencil<N> {
        let [_, ky, kz] = grid.sizes();
        let (index, fraction) = grid.locate(x);
        // i < k, so i + k + a + 1 - N lies in [k - N + 1, 2k): one conditional subtraction
        // wraps it (a division here was a third of the spread).
        let lines = |i: usize, k: usize| -> [u32; N] {
            std::array::from_fn(|a| {
                let line = i + k + a + 1 - N;
                (if line >= k { line - k } else { line }) as u32
            })
        };
        let z = lines(index[2], kz);
        let z_run = (z[N - 1] == z[0] + (N - 1) as u32).then_some(z[0]);
        let both: [([f64; N], [f64; N]); 3] = std::array::from_fn(|d| weights::<N>(fraction[d]));
        Stencil {
            line: index[0],
            y: lines(index[1], ky),
            z,
            z_run,
            w: both.map(|b| b.0),
            dw: both.map(|b| b.1),
        }
    }
}

/// What spreading one charge needs, in single precision: the charge times its x weights, the
/// y and z weights and lines, and whether the z lines are neighbours in memory.
#[derive(Clone, Copy, Debug)]
struct SpreadPoint<const N: usize> {
    wx: [f32; N],
    wy: [f32; N],
    wz: [f32; N],
    y: [u32; N],
    z: [u32; N],
    z_run: bool,
}

impl<const N: usize> SpreadPoint<N> {
    /// A point that spreads nothing, to size the records with.
    const ZERO: SpreadPoint<N> =
        SpreadPoint { wx: [0.0; N], wy: [0.0; N], wz: [0.0; N], y: [0; N], z: [0; N], z_run: false };

    /// The point of `stencil` with charge `q`, its y lines numbered from local row 0 at global
    /// line `origin` (of `ky`).
    fn new(stencil: &Stencil<N>, q: f32, origin: usize, ky: usize) -> SpreadPoint<N> {
        let q = q as f64;
        SpreadPoint {
            wx: stencil.w[0].map(|w| (q * w) as f32),
            wy: stencil.w[1].map(|w| w as f32),
            wz: stencil.w[2].map(|w| w as f32),
            y: stencil.y.map(|y| {
                let row = y as usize + ky - origin;
                (if row >= ky { row - ky } else { row }) as u32
            }),
            z: stencil.z,
            z_run: stencil.z_run.is_some(),
        }
    }
}

impl std::fmt::Debug for SlabGrid<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlabGrid")
            .field("rank", &self.rank)
            .field("planes", &(self.lo..self.hi))
            .finish_non_exhaustive()
    }
}
