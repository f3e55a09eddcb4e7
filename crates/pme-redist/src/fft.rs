//! The distributed 3-D FFT of the PME grid: slabs along x in real space, slabs along y in
//! reciprocal space, and between the two the library's all-to-all within the PME group.
//!
//! **Forward.** A PME rank holds x planes `lo..hi` of the real grid (`Ky × Kz` each, z
//! fastest: the layout [`SlabGrid::slab`](crate::SlabGrid::slab) has after the overlap
//! reduction). Per plane it transforms every z line real to complex (`Kz` reals give
//! `Kz / 2 + 1` complex values, the rest follows from symmetry), transposes the plane to
//! `[kz][y]` and transforms every y line. Then the *transpose*: each rank sends to rank `r`,
//! for each of its planes and each `kz`, the y range of `r` (a contiguous run in the `[kz][y]`
//! layout), in one [`Alltoall`] of equal blocks (padded to the largest plane × y-range
//! product, so grids that do not divide evenly by the rank count work on every path). Each
//! rank unpacks what it received into `[kz][y][x]` and transforms every x line. The result,
//! the *spectrum*, is this rank's y range of the complex grid with every x and every `kz`.
//!
//! **Backward** runs the same steps in reverse order with the inverse transforms, which are
//! not normalised (a forward and backward pass multiply by `Kx · Ky · Kz`), as smooth PME
//! wants them: the convolution of the charge grid with the influence function is the backward
//! transform of their product, with no factor.
//!
//! The 1-D transforms come from `rustfft` (and its real-input wrapper `realfft`): pure Rust,
//! maintained, with AVX code chosen at run time, plans for any length (mixed radix for
//! products of small primes, Rader and Bluestein for the rest, so every grid size
//! [`PmeGrid`] accepts has a plan) and no native library to find at build time.
//!
//! The transpose goes over whichever [`AlltoallPath`] the FFT was built with; every path
//! leaves the same bytes, so the spectrum and everything computed from it is bit for bit the
//! same on each. On the one-sided paths, blocks of at least [`DIRECT_PACK_MIN`] bytes are
//! packed straight into the receivers' buffers where they are mapped (PEs on the node:
//! [`Alltoall::collective_run_packed`]), so a block is copied once, by the packing; smaller
//! blocks, and the MPI paths, pack into the send buffer and copy from there.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use num_complex::Complex;
use onesided::{Alltoall, AlltoallPath, DIRECT_PACK_MIN, PeGroup};
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftPlanner};

use crate::error::{Error, Result};
use crate::grid::PmeGrid;

/// A single-precision complex number, the element of the spectrum.
pub type Complex32 = Complex<f32>;

/// The 1-D transforms a rank needs, planned once.
struct Plans {
    r2c: Arc<dyn RealToComplex<f32>>,
    c2r: Arc<dyn ComplexToReal<f32>>,
    y: Arc<dyn Fft<f32>>,
    y_inverse: Arc<dyn Fft<f32>>,
    x: Arc<dyn Fft<f32>>,
    x_inverse: Arc<dyn Fft<f32>>,
}

impl Plans {
    fn new(k: [usize; 3]) -> Plans {
        let mut real = RealFftPlanner::<f32>::new();
        let mut complex = FftPlanner::<f32>::new();
        Plans {
            r2c: real.plan_fft_forward(k[2]),
            c2r: real.plan_fft_inverse(k[2]),
            y: complex.plan_fft_forward(k[1]),
            y_inverse: complex.plan_fft_inverse(k[1]),
            x: complex.plan_fft_forward(k[0]),
            x_inverse: complex.plan_fft_inverse(k[0]),
        }
    }

    /// Scratch enough for any of the transforms.
    fn scratch_len(&self) -> usize {
        [
            self.r2c.get_scratch_len(),
            self.c2r.get_scratch_len(),
            self.y.get_inplace_scratch_len(),
            self.y_inverse.get_inplace_scratch_len(),
            self.x.get_inplace_scratch_len(),
            self.x_inverse.get_inplace_scratch_len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}

/// The distributed real-to-complex 3-D FFT of a [`PmeGrid`] over its PME ranks.
pub struct SlabFft<'g, 'rt> {
    k: [usize; 3],
    /// Complex values per z line: `Kz / 2 + 1`.
    kzc: usize,
    /// `x_bounds[r]..x_bounds[r + 1]`: the x planes of rank `r` (the grid's slabs).
    x_bounds: Vec<usize>,
    /// `y_bounds[r]..y_bounds[r + 1]`: the y lines of rank `r`'s spectrum.
    y_bounds: Vec<usize>,
    rank: Option<usize>,
    plans: Plans,
    alltoall: Alltoall<'g, 'rt, Complex32>,
    /// This rank's planes in complex form, `[plane][kz][y]`.
    planes: Vec<Complex32>,
    /// This rank's spectrum, `[kz][y - y_lo][x]`.
    spectrum: Vec<Complex32>,
    /// One real line and one transposed plane.
    line: Vec<f32>,
    plane: Vec<Complex32>,
    scratch: Vec<Complex32>,
    /// Time spent in the all-to-all, both ways, since creation.
    transposing: Duration,
    /// The transposes' packing and communication on every path.
    exchanging: Duration,
}

/// `r * n / m` for `r` in `0..=m`: the split of `n` items over `m` ranks that [`PmeGrid`]
/// uses for its slabs.
fn split(n: usize, m: usize) -> Vec<usize> {
    (0..=m).map(|r| r * n / m).collect()
}

fn widest(bounds: &[usize]) -> usize {
    bounds.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
}

impl<'g, 'rt> SlabFft<'g, 'rt> {
    /// The FFT of `grid` over `group`, whose members must be the grid's PME ranks in slab
    /// order; the transpose goes over `path`.
    ///
    /// # Collective
    /// Every PE of the job must call it with the same arguments (the all-to-all's buffers are
    /// symmetric); PEs outside the group hold nothing.
    ///
    /// # Errors
    /// [`Error::Config`] when the group's members are not the grid's PME ranks, or the path
    /// cannot serve the group (the shmem path needs an active set);
    /// [`Error::Comm`] when the symmetric heap cannot hold the transpose's buffers.
    pub fn collective_new(group: &'g PeGroup<'rt>, grid: &PmeGrid, path: AlltoallPath) -> Result<Self> {
        let m = grid.ranks();
        let pme_pes: Vec<usize> = (0..m).map(|r| grid.pe_of(r)).collect();
        if group.members() != pme_pes.as_slice() {
            return Err(Error::Config(format!(
                "the PME FFT's group '{}' has members {:?}, but the grid's PME ranks are PEs {:?}: \
                 make the group of the grid's PME PEs in slab order",
                group.name(),
                group.members(),
                pme_pes
            )));
        }
        let k = grid.sizes();
        let kzc = k[2] / 2 + 1;
        let x_bounds: Vec<usize> = (0..=m).map(|r| if r < m { grid.slab(r).0 } else { k[0] }).collect();
        let y_bounds = split(k[1], m);
        let block = (widest(&x_bounds) * widest(&y_bounds) * kzc).max(1);
        let alltoall =
            Alltoall::collective_new(group, "pme fft transpose", block, path).map_err(|e| match e {
                onesided::Error::InvalidArgument(why) => Error::Config(why),
                other => Error::Comm(other),
            })?;
        let rank = group.my_rank();
        let (planes, lines) = match rank {
            Some(r) => (x_bounds[r + 1] - x_bounds[r], y_bounds[r + 1] - y_bounds[r]),
            None => (0, 0),
        };
        let plans = Plans::new(k);
        let scratch = vec![Complex32::default(); plans.scratch_len()];
        Ok(SlabFft {
            k,
            kzc,
            x_bounds,
            y_bounds,
            rank,
            plans,
            alltoall,
            planes: vec![Complex32::default(); planes * kzc * k[1]],
            spectrum: vec![Complex32::default(); kzc * lines * k[0]],
            line: vec![0.0; k[2]],
            plane: vec![Complex32::default(); k[1] * kzc],
            scratch,
            transposing: Duration::ZERO,
            exchanging: Duration::ZERO,
        })
    }

    /// The transpose's path.
    pub fn path(&self) -> AlltoallPath {
        self.alltoall.path()
    }

    /// Grid points per dimension.
    pub fn sizes(&self) -> [usize; 3] {
        self.k
    }

    /// The y lines `lo..hi` of this rank's spectrum (empty on PEs that are not PME ranks).
    pub fn spectrum_lines(&self) -> Range<usize> {
        match self.rank {
            Some(r) => self.y_bounds[r]..self.y_bounds[r + 1],
            None => 0..0,
        }
    }

    /// Complex values per z line of the spectrum, `Kz / 2 + 1`: the others are the complex
    /// conjugates of these at the mirrored wave vector.
    pub fn complex_z(&self) -> usize {
        self.kzc
    }

    /// This rank's spectrum after [`forward`](Self::forward): for `kz` in
    /// `0..`[`complex_z`](Self::complex_z), `y` in [`spectrum_lines`](Self::spectrum_lines)
    /// and `x` in `0..Kx`, element `(kz * lines + (y - lo)) * Kx + x`.
    pub fn spectrum(&self) -> &[Complex32] {
        &self.spectrum
    }

    /// The spectrum, to change before [`backward`](Self::backward).
    pub fn spectrum_mut(&mut self) -> &mut [Complex32] {
        &mut self.spectrum
    }

    /// The time spent in the transposes' communication, both ways, since creation: the
    /// all-to-all call after packing (as GROMACS's `PME 3D-FFT Comm.` counts it), or, where
    /// the one-sided paths pack straight into the receivers' memory, the packing and signals.
    pub fn transpose_time(&self) -> Duration {
        self.transposing
    }

    /// The time spent in the transposes' packing and communication, both ways, since
    /// creation, on every path: what one path's transpose costs against another's (on the
    /// one-sided paths the packing can be the transfer; on the others it comes before it).
    pub fn exchange_time(&self) -> Duration {
        self.exchanging
    }

    fn planes_of(&self, r: usize) -> usize {
        self.x_bounds[r + 1] - self.x_bounds[r]
    }

    fn lines_of(&self, r: usize) -> usize {
        self.y_bounds[r + 1] - self.y_bounds[r]
    }

    /// Transforms this rank's slab of the real grid (x planes of the grid's slab, `Ky × Kz`
    /// each, z fastest) into its part of the spectrum.
    ///
    /// # Collective
    /// Every member of the group must call it; other PEs must not.
    ///
    /// # Errors
    /// [`Error::Config`] on a PE outside the group or for a slab of the wrong length;
    /// [`Error::Comm`] when the transpose fails.
    pub fn forward(&mut self, slab: &[f32]) -> Result<()> {
        let me = self.member("forward")?;
        let [_, ky, kz] = self.k;
        let kzc = self.kzc;
        let planes = self.planes_of(me);
        if slab.len() != planes * ky * kz {
            return Err(Error::Config(format!(
                "the PME FFT of rank {me} takes {planes} planes of {ky} × {kz} points, {} values, \
                 but was given {}",
                planes * ky * kz,
                slab.len()
            )));
        }
        // z (real to complex) then y, plane by plane, into [plane][kz][y].
        for (p, real) in slab.chunks_exact(ky * kz).enumerate() {
            for (y, values) in real.chunks_exact(kz).enumerate() {
                self.line.copy_from_slice(values);
                let out = &mut self.plane[y * kzc..(y + 1) * kzc];
                self.plans
                    .r2c
                    .process_with_scratch(&mut self.line, out, &mut self.scratch)
                    .map_err(fft_failed)?;
            }
            let target = &mut self.planes[p * kzc * ky..(p + 1) * kzc * ky];
            transpose(&self.plane, target, ky, kzc);
            self.plans.y.process_with_scratch(target, &mut self.scratch);
        }
        // The transpose: to rank r, per plane and kz, r's y lines, packed straight into r's
        // receive buffer where it is mapped.
        let (planes, y_bounds) = (&self.planes, &self.y_bounds);
        let clocks = (&mut self.transposing, &mut self.exchanging);
        let received = transpose_packed(&mut self.alltoall, clocks, |r, out| {
            let (lo, hi) = (y_bounds[r], y_bounds[r + 1]);
            for (run, line) in planes.chunks_exact(ky).enumerate() {
                out[run * (hi - lo)..(run + 1) * (hi - lo)].copy_from_slice(&line[lo..hi]);
            }
        })?;
        let m = self.x_bounds.len() - 1;
        let block = received.len() / m;
        // From rank s, [plane][kz][my y] into [kz][my y][x]: a transpose of s's planes against
        // this rank's (kz, y) lines.
        let lines = self.y_bounds[me + 1] - self.y_bounds[me];
        let kx = self.k[0];
        for s in 0..m {
            let x0 = self.x_bounds[s];
            let planes = self.x_bounds[s + 1] - x0;
            let runs = kzc * lines;
            transpose_strided(&received[s * block..], runs, &mut self.spectrum[x0..], kx, planes, runs);
        }
        if !self.spectrum.is_empty() {
            self.plans.x.process_with_scratch(&mut self.spectrum, &mut self.scratch);
        }
        Ok(())
    }

    /// Transforms this rank's part of the spectrum back into its slab of the real grid (the
    /// layout [`forward`](Self::forward) takes), not normalised, and leaves the spectrum
    /// undefined.
    ///
    /// # Collective
    /// As [`forward`](Self::forward).
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn backward(&mut self, slab: &mut [f32]) -> Result<()> {
        let me = self.member("backward")?;
        let [kx, ky, kz] = self.k;
        let kzc = self.kzc;
        let planes = self.planes_of(me);
        if slab.len() != planes * ky * kz {
            return Err(Error::Config(format!(
                "the PME FFT of rank {me} gives {planes} planes of {ky} × {kz} points, {} values, \
                 but the slab to fill holds {}",
                planes * ky * kz,
                slab.len()
            )));
        }
        if !self.spectrum.is_empty() {
            self.plans.x_inverse.process_with_scratch(&mut self.spectrum, &mut self.scratch);
        }
        // To rank s, per plane of s and kz, my y lines, packed straight into s's receive
        // buffer where it is mapped.
        let m = self.x_bounds.len() - 1;
        let lines = self.lines_of(me);
        let (spectrum, x_bounds) = (&self.spectrum, &self.x_bounds);
        let clocks = (&mut self.transposing, &mut self.exchanging);
        let received = transpose_packed(&mut self.alltoall, clocks, |s, out| {
            let x0 = x_bounds[s];
            let runs = kzc * lines;
            transpose_strided(&spectrum[x0..], kx, out, runs, runs, x_bounds[s + 1] - x0);
        })?;
        let block = received.len() / m;
        for r in 0..m {
            let (lo, hi) = (self.y_bounds[r], self.y_bounds[r + 1]);
            let from = &received[r * block..];
            for (run, line) in self.planes.chunks_exact_mut(ky).enumerate() {
                line[lo..hi].copy_from_slice(&from[run * (hi - lo)..(run + 1) * (hi - lo)]);
            }
        }
        // y, then z (complex to real), plane by plane.
        for (p, real) in slab.chunks_exact_mut(ky * kz).enumerate() {
            let source = &mut self.planes[p * kzc * ky..(p + 1) * kzc * ky];
            self.plans.y_inverse.process_with_scratch(source, &mut self.scratch);
            transpose(source, &mut self.plane, kzc, ky);
            for (y, values) in real.chunks_exact_mut(kz).enumerate() {
                let spectrum = &mut self.plane[y * kzc..(y + 1) * kzc];
                // The values that must be real for a real result are real up to rounding (and
                // a triclinic influence function is not quite symmetric at the Nyquist
                // frequency); the real transform takes their real parts, as GROMACS's does.
                spectrum[0].im = 0.0;
                if kz.is_multiple_of(2) {
                    spectrum[kzc - 1].im = 0.0;
                }
                self.plans
                    .c2r
                    .process_with_scratch(spectrum, values, &mut self.scratch)
                    .map_err(fft_failed)?;
            }
        }
        Ok(())
    }

    fn member(&self, what: &str) -> Result<usize> {
        self.rank.ok_or_else(|| {
            Error::Config(format!(
                "the PME FFT's {what} transform runs on the PME ranks only, and this PE is not one"
            ))
        })
    }
}

/// The all-to-all with its blocks written by `pack`. It adds to `communication` the time of
/// the communication: where the one-sided paths pack straight into the receivers' memory
/// (blocks of at least [`DIRECT_PACK_MIN`] bytes) the packing and the signals, since the
/// packing is the transfer; otherwise the library call alone, after packing into the send
/// buffer, as GROMACS's `PME 3D-FFT Comm.` times its `MPI_Alltoall`. It adds to `exchange`
/// the packing and the communication on every path, the cost to compare between paths.
fn transpose_packed<'a>(
    alltoall: &'a mut Alltoall<'_, '_, Complex32>,
    (communication, exchange): (&mut Duration, &mut Duration),
    mut pack: impl FnMut(usize, &mut [Complex32]),
) -> Result<&'a [Complex32]> {
    let one_sided =
        matches!(alltoall.path(), AlltoallPath::OrderedOneSided | AlltoallPath::NodeAwareOneSided);
    let start = Instant::now();
    if one_sided && alltoall.block() * size_of::<Complex32>() >= DIRECT_PACK_MIN {
        let received = alltoall.collective_run_packed(pack)?;
        *communication += start.elapsed();
        *exchange += start.elapsed();
        return Ok(received);
    }
    let block = alltoall.block();
    for (r, out) in alltoall.send_buffer().chunks_exact_mut(block).enumerate() {
        pack(r, out);
    }
    let packed = Instant::now();
    let received = alltoall.collective_run()?;
    *communication += packed.elapsed();
    *exchange += start.elapsed();
    Ok(received)
}

/// `to[c * to_stride + r] = from[r * from_stride + c]` for `r < rows`, `c < cols`: a `rows ×
/// cols` block of one matrix into another, transposed, in tiles small enough that the lines
/// read and the lines written both stay in the L1 cache (one of the two is strided).
fn transpose_strided(
    from: &[Complex32],
    from_stride: usize,
    to: &mut [Complex32],
    to_stride: usize,
    rows: usize,
    cols: usize,
) {
    const TILE: usize = 16;
    for r0 in (0..rows).step_by(TILE) {
        let r1 = (r0 + TILE).min(rows);
        for c0 in (0..cols).step_by(TILE) {
            let c1 = (c0 + TILE).min(cols);
            for r in r0..r1 {
                let row = &from[r * from_stride..];
                for c in c0..c1 {
                    to[c * to_stride + r] = row[c];
                }
            }
        }
    }
}

/// `to[c * rows + r] = from[r * cols + c]`: a `rows × cols` matrix into `cols × rows`.
fn transpose(from: &[Complex32], to: &mut [Complex32], rows: usize, cols: usize) {
    debug_assert!(from.len() == rows * cols && to.len() == rows * cols);
    for (r, row) in from.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            to[c * rows + r] = v;
        }
    }
}

fn fft_failed(e: realfft::FftError) -> Error {
    Error::Config(format!("a 1-D transform of the PME FFT failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_moves_every_element_once() {
        let from: Vec<Complex32> = (0..12).map(|i| Complex32::new(i as f32, -(i as f32))).collect();
        let mut to = vec![Complex32::default(); 12];
        transpose(&from, &mut to, 3, 4);
        for r in 0..3 {
            for c in 0..4 {
                assert_eq!(to[c * 3 + r], from[r * 4 + c]);
            }
        }
    }

    #[test]
    fn split_matches_the_slabs_of_the_grid() {
        let grid =
            PmeGrid::with_sizes([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]], [25, 9, 8], &[0, 1, 2])
                .expect("valid grid");
        let bounds = split(25, 3);
        for r in 0..3 {
            assert_eq!(grid.slab(r), (bounds[r], bounds[r + 1]));
        }
        assert_eq!(widest(&bounds), 9);
    }
}
