//! The distributed 3-D FFT of a PME grid in pencils: `Px × Py` PME ranks, rank `(a, b)`
//! holding x planes of row `a` and y lines of column `b` of the real grid, every z; two
//! transposes per direction, each an all-to-all within a row or a column of ranks, as
//! GROMACS's `fft5d` does them.
//!
//! **Forward.** Every z line real to complex (`Kz / 2 + 1` values); the *row transpose*
//! (among the `Py` ranks of row `a`) gives rank `(a, b)` the `kz` range of column `b` for
//! every y of its planes, and every y line is transformed; the *column transpose* (among the
//! `Px` ranks of column `b`) gives it the y range of row `a` for every x, and every x line is
//! transformed. The spectrum of rank `(a, b)` is `[kz - kz_lo][y - y_lo][x]` over its `kz`
//! range (of column `b`) and its y range (of row `a`).
//!
//! **Backward** runs the same steps in reverse with the inverse transforms, not normalised,
//! as the slab FFT's.
//!
//! The row and column groups come from [`PeGroup::collective_split`], each owned by its
//! all-to-all (`AlltoallBuilder::collective_build_owning`). The transposes go over whichever
//! algorithm the FFT was built with (the ordered and node-aware one-sided all-to-alls, the
//! ordered MPI one, or `MPI_Alltoall` on the row's or column's communicator; not `shmem`,
//! whose active sets split groups are not); each packs its blocks into the all-to-all's send
//! buffer and unpacks what arrives, so every path leaves the same bytes. The row transpose's
//! blocks carry each rank's ballot in the redistribution's vote, the column transpose's the
//! smallest of its row, so that every rank hears every other's.

use std::ops::Range;
use std::time::{Duration, Instant};

use onesided::{Alltoall, AlltoallAlgorithm, Path, PeGroup, Runtime};

use super::blocks::{Complex32, Plans, ballot_element, ballot_of, fft_failed, split, widest};
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

/// The distributed real-to-complex 3-D FFT of a [`PmeGrid`] in pencils.
pub(super) struct PencilFft<'rt> {
    k: [usize; 3],
    kzc: usize,
    /// Real space: x planes per row, y lines per column (the grid's).
    x_bounds: Vec<usize>,
    y_bounds: Vec<usize>,
    /// After the row transpose: complex z values per column.
    kz_bounds: Vec<usize>,
    /// The spectrum: y lines per row.
    y2_bounds: Vec<usize>,
    /// This PE's (row, column), if it is a PME rank.
    place: Option<(usize, usize)>,
    plans: Plans,
    rows: Alltoall<'rt, 'rt, Complex32>,
    columns: Alltoall<'rt, 'rt, Complex32>,
    /// `[p][l][kz]`: this rank's z lines transformed.
    zlines: Vec<Complex32>,
    /// `[p][kz - kz_lo][y]`: every y of this rank's planes and `kz` range.
    ylines: Vec<Complex32>,
    /// `[kz - kz_lo][y - y_lo][x]`: the spectrum.
    spectrum: Vec<Complex32>,
    line: Vec<f32>,
    scratch: Vec<Complex32>,
    transposing: Duration,
}

impl<'rt> PencilFft<'rt> {
    /// The FFT of `grid` (in pencils) over its PME ranks; the transposes go over `path`.
    ///
    /// # Collective
    /// Every PE of the job must call it with the same arguments (the row and column groups
    /// and their all-to-alls are made here, symmetric on every PE).
    ///
    /// # Errors
    /// [`Error::Config`] when the path cannot serve the groups (the shmem path needs active
    /// sets, which split groups are not); [`Error::Comm`] when the symmetric heap cannot hold
    /// the transposes' buffers.
    pub fn collective_new(
        rt: &'rt Runtime,
        grid: &PmeGrid,
        path: Path,
        algorithm: Option<AlltoallAlgorithm>,
    ) -> Result<Self> {
        let [px, py] = grid.dims();
        let k = grid.sizes();
        let kzc = k[2] / 2 + 1;
        let x_bounds: Vec<usize> = (0..px).map(|a| grid.slab(a * py).0).chain([k[0]]).collect();
        let y_bounds: Vec<usize> = (0..py).map(|b| grid.lines(b).0).chain([k[1]]).collect();
        let (kz_bounds, y2_bounds) = (split(kzc, py), split(k[1], px));
        let place = grid.rank_of_pe(rt.my_pe()).map(|r| (r / py, r % py));
        let rows: Vec<Vec<usize>> =
            (0..px).map(|a| (0..py).map(|b| grid.pe_of(a * py + b)).collect()).collect();
        let columns: Vec<Vec<usize>> =
            (0..py).map(|b| (0..px).map(|a| grid.pe_of(a * py + b)).collect()).collect();
        let (wx, wy, wz, wy2) =
            (widest(&x_bounds), widest(&y_bounds), widest(&kz_bounds), widest(&y2_bounds));
        let a2a = |group: PeGroup<'rt>, name: &str, block: usize| {
            let builder = Alltoall::builder(name, block.max(1)).path(path);
            let builder = match algorithm {
                Some(algorithm) => builder.algorithm(algorithm),
                None => builder,
            };
            builder.collective_build_owning(group).map_err(|e| match e {
                onesided::Error::InvalidArgument(why) => Error::Config(why),
                other => Error::Comm(other),
            })
        };
        // Each block ends with a ballot of the PME ranks' vote (forward_voting).
        let rows =
            a2a(PeGroup::collective_split(rt, "pme pencil rows", &rows)?, "pme fft rows", wx * wy * wz + 1)?;
        let columns = a2a(
            PeGroup::collective_split(rt, "pme pencil columns", &columns)?,
            "pme fft columns",
            wx * wz * wy2 + 1,
        )?;
        let (planes, lines, zs, ys) = match place {
            Some((a, b)) => (
                x_bounds[a + 1] - x_bounds[a],
                y_bounds[b + 1] - y_bounds[b],
                kz_bounds[b + 1] - kz_bounds[b],
                y2_bounds[a + 1] - y2_bounds[a],
            ),
            None => (0, 0, 0, 0),
        };
        let plans = Plans::new(k);
        let scratch_len = plans.scratch_len();
        Ok(PencilFft {
            k,
            kzc,
            x_bounds,
            y_bounds,
            kz_bounds,
            y2_bounds,
            place,
            plans,
            rows,
            columns,
            zlines: vec![Complex32::default(); planes * lines * kzc],
            ylines: vec![Complex32::default(); planes * zs * k[1]],
            spectrum: vec![Complex32::default(); zs * ys * k[0]],
            line: vec![0.0; k[2]],
            scratch: vec![Complex32::default(); scratch_len],
            transposing: Duration::ZERO,
        })
    }

    /// The transposes' algorithm.
    pub fn algorithm(&self) -> AlltoallAlgorithm {
        self.rows.algorithm()
    }

    /// The y lines of this rank's spectrum (empty on PEs that are not PME ranks).
    pub fn spectrum_lines(&self) -> Range<usize> {
        self.place.map_or(0..0, |(a, _)| self.y2_bounds[a]..self.y2_bounds[a + 1])
    }

    /// The complex z values of this rank's spectrum (of `Kz / 2 + 1`).
    pub fn spectrum_z(&self) -> Range<usize> {
        self.place.map_or(0..0, |(_, b)| self.kz_bounds[b]..self.kz_bounds[b + 1])
    }

    /// This rank's spectrum after [`forward_voting`](Self::forward_voting):
    /// `[kz - kz_lo][y - y_lo][x]` over [`spectrum_z`](Self::spectrum_z) and
    /// [`spectrum_lines`](Self::spectrum_lines).
    pub fn spectrum(&self) -> &[Complex32] {
        &self.spectrum
    }

    /// The spectrum, to change before [`backward`](Self::backward).
    pub fn spectrum_mut(&mut self) -> &mut [Complex32] {
        &mut self.spectrum
    }

    /// The time spent in the transposes (packing, communication and unpacking), both ways,
    /// since creation.
    pub fn transpose_time(&self) -> Duration {
        self.transposing
    }

    fn member(&self, what: &str) -> Result<(usize, usize)> {
        self.place.ok_or_else(|| {
            Error::Config(format!(
                "the PME FFT's {what} transform runs on the PME ranks only, and this PE is not one"
            ))
        })
    }

    /// Transforms this rank's pencil of the real grid (`planes × lines × Kz`, z fastest) into
    /// its part of the spectrum, with this rank's `ballot` in a vote of the PME ranks that
    /// costs no message of its own: the row transpose's blocks carry it, the column
    /// transpose's the smallest of the row, and the smallest ballot of every rank comes back.
    ///
    /// # Collective
    /// Every PME rank must call it; other PEs must not.
    ///
    /// # Errors
    /// [`Error::Config`] on a PE that is not a PME rank or for a pencil of the wrong length;
    /// [`Error::Comm`] when a transpose fails.
    pub(super) fn forward_voting(&mut self, pencil: &[f32], ballot: u64) -> Result<u64> {
        let (a, b) = self.member("forward")?;
        let [kx, ky, kz] = self.k;
        let kzc = self.kzc;
        let planes = self.x_bounds[a + 1] - self.x_bounds[a];
        let lines = self.y_bounds[b + 1] - self.y_bounds[b];
        if pencil.len() != planes * lines * kz {
            return Err(Error::Config(format!(
                "the PME FFT of rank ({a}, {b}) takes {planes} × {lines} × {kz} values, but was given {}",
                pencil.len()
            )));
        }
        for (values, out) in pencil.chunks_exact(kz).zip(self.zlines.chunks_exact_mut(kzc)) {
            self.line.copy_from_slice(values);
            self.plans
                .r2c
                .process_with_scratch(&mut self.line, out, &mut self.scratch)
                .map_err(fft_failed)?;
        }
        let start = Instant::now();
        let block = self.rows.block();
        // Row transpose: to column c, its kz range of every (plane, line).
        let (zl, zb) = (&self.zlines, &self.kz_bounds);
        let received = self
            .rows
            .call()
            .pack(|c, out| {
                let (z0, z1) = (zb[c], zb[c + 1]);
                let n = z1 - z0;
                for (i, line) in zl.chunks_exact(kzc).enumerate() {
                    out[i * n..(i + 1) * n].copy_from_slice(&line[z0..z1]);
                }
                out[block - 1] = ballot_element(ballot);
            })
            .run()
            .map_err(Error::Comm)?;
        let py = self.y_bounds.len() - 1;
        let row = received
            .chunks_exact(block)
            .take(py)
            .map(|from| ballot_of(from[block - 1]))
            .fold(ballot, u64::min);
        let zs = self.kz_bounds[b + 1] - self.kz_bounds[b];
        for c in 0..self.y_bounds.len() - 1 {
            let (l0, ls) = (self.y_bounds[c], self.y_bounds[c + 1] - self.y_bounds[c]);
            let from = &received[c * block..];
            for p in 0..planes {
                for l in 0..ls {
                    for z in 0..zs {
                        self.ylines[(p * zs + z) * ky + l0 + l] = from[(p * ls + l) * zs + z];
                    }
                }
            }
        }
        self.transposing += start.elapsed();
        for line in self.ylines.chunks_exact_mut(ky) {
            self.plans.y.process_with_scratch(line, &mut self.scratch);
        }
        let start = Instant::now();
        let block = self.columns.block();
        // Column transpose: to row r, its y range of every (plane, kz).
        let (yl, y2) = (&self.ylines, &self.y2_bounds);
        let received = self
            .columns
            .call()
            .pack(|r, out| {
                let (v0, v1) = (y2[r], y2[r + 1]);
                let n = v1 - v0;
                for (i, line) in yl.chunks_exact(ky).enumerate() {
                    out[i * n..(i + 1) * n].copy_from_slice(&line[v0..v1]);
                }
                out[block - 1] = ballot_element(row);
            })
            .run()
            .map_err(Error::Comm)?;
        let px = self.x_bounds.len() - 1;
        let agreed =
            received.chunks_exact(block).take(px).map(|from| ballot_of(from[block - 1])).fold(row, u64::min);
        let ys = self.y2_bounds[a + 1] - self.y2_bounds[a];
        for r in 0..self.x_bounds.len() - 1 {
            let (p0, ps) = (self.x_bounds[r], self.x_bounds[r + 1] - self.x_bounds[r]);
            let from = &received[r * block..];
            for p in 0..ps {
                for z in 0..zs {
                    for v in 0..ys {
                        self.spectrum[(z * ys + v) * kx + p0 + p] = from[(p * zs + z) * ys + v];
                    }
                }
            }
        }
        self.transposing += start.elapsed();
        for line in self.spectrum.chunks_exact_mut(kx) {
            self.plans.x.process_with_scratch(line, &mut self.scratch);
        }
        Ok(agreed)
    }

    /// Transforms this rank's part of the spectrum back into its pencil of the real grid (the
    /// layout [`forward_voting`](Self::forward_voting) takes), not normalised, and leaves the spectrum
    /// undefined.
    ///
    /// # Collective
    /// As [`forward_voting`](Self::forward_voting).
    ///
    /// # Errors
    /// As [`forward_voting`](Self::forward_voting).
    pub fn backward(&mut self, pencil: &mut [f32]) -> Result<()> {
        let (a, b) = self.member("backward")?;
        let [kx, ky, kz] = self.k;
        let kzc = self.kzc;
        let planes = self.x_bounds[a + 1] - self.x_bounds[a];
        let lines = self.y_bounds[b + 1] - self.y_bounds[b];
        if pencil.len() != planes * lines * kz {
            return Err(Error::Config(format!(
                "the PME FFT of rank ({a}, {b}) gives {planes} × {lines} × {kz} values, but the pencil to fill holds {}",
                pencil.len()
            )));
        }
        for line in self.spectrum.chunks_exact_mut(kx) {
            self.plans.x_inverse.process_with_scratch(line, &mut self.scratch);
        }
        let zs = self.kz_bounds[b + 1] - self.kz_bounds[b];
        let ys = self.y2_bounds[a + 1] - self.y2_bounds[a];
        let start = Instant::now();
        let block = self.columns.block();
        // Column transpose back: to row r, its x range of every (kz, y).
        let (sp, xb) = (&self.spectrum, &self.x_bounds);
        let received = self
            .columns
            .call()
            .pack(|r, out| {
                let (p0, p1) = (xb[r], xb[r + 1]);
                let ps = p1 - p0;
                for p in 0..ps {
                    for z in 0..zs {
                        for v in 0..ys {
                            out[(p * zs + z) * ys + v] = sp[(z * ys + v) * kx + p0 + p];
                        }
                    }
                }
            })
            .run()
            .map_err(Error::Comm)?;
        for r in 0..self.y2_bounds.len() - 1 {
            let (v0, vs) = (self.y2_bounds[r], self.y2_bounds[r + 1] - self.y2_bounds[r]);
            let from = &received[r * block..];
            for (i, line) in self.ylines.chunks_exact_mut(ky).enumerate() {
                line[v0..v0 + vs].copy_from_slice(&from[i * vs..(i + 1) * vs]);
            }
        }
        self.transposing += start.elapsed();
        for line in self.ylines.chunks_exact_mut(ky) {
            self.plans.y_inverse.process_with_scratch(line, &mut self.scratch);
        }
        let start = Instant::now();
        let block = self.rows.block();
        // Row transpose back: to column c, its y range of every (plane, kz).
        let (yl, yb) = (&self.ylines, &self.y_bounds);
        let received = self
            .rows
            .call()
            .pack(|c, out| {
                let (l0, l1) = (yb[c], yb[c + 1]);
                let ls = l1 - l0;
                for p in 0..planes {
                    for l in 0..ls {
                        for z in 0..zs {
                            out[(p * ls + l) * zs + z] = yl[(p * zs + z) * ky + l0 + l];
                        }
                    }
                }
            })
            .run()
            .map_err(Error::Comm)?;
        for c in 0..self.kz_bounds.len() - 1 {
            let (z0, zn) = (self.kz_bounds[c], self.kz_bounds[c + 1] - self.kz_bounds[c]);
            let from = &received[c * block..];
            for (i, line) in self.zlines.chunks_exact_mut(kzc).enumerate() {
                line[z0..z0 + zn].copy_from_slice(&from[i * zn..(i + 1) * zn]);
            }
        }
        self.transposing += start.elapsed();
        for (spectrum, values) in self.zlines.chunks_exact_mut(kzc).zip(pencil.chunks_exact_mut(kz)) {
            // As the slab FFT: the values that must be real are real up to rounding; the
            // real transform takes their real parts, as GROMACS's does.
            spectrum[0].im = 0.0;
            if kz.is_multiple_of(2) {
                spectrum[kzc - 1].im = 0.0;
            }
            self.plans.c2r.process_with_scratch(spectrum, values, &mut self.scratch).map_err(fft_failed)?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for PencilFft<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PencilFft")
            .field("sizes", &self.k)
            .field("place", &self.place)
            .field("algorithm", &self.algorithm())
            .finish_non_exhaustive()
    }
}
