//! The slab FFT: slabs along x in real space, slabs along y in reciprocal space, and between
//! the two one all-to-all within the PME group.
//!
//! **Forward.** A PME rank holds x planes `lo..hi` of the real grid (`Ky × Kz` each, z
//! fastest). Per plane it transforms every z line real to complex, transposes the plane to
//! `[kz][y]` and transforms every y line. Then the *transpose*: each rank sends to rank `r`,
//! for each of its planes and each `kz`, the y range of `r` (a contiguous run in the `[kz][y]`
//! layout), in one [`Alltoall`] of equal blocks (padded to the largest plane × y-range
//! product, so grids that do not divide evenly by the rank count work on every path). Each
//! rank unpacks what it received into `[kz][y][x]` and transforms every x line. **Backward**
//! runs the same steps in reverse order with the inverse transforms.
//!
//! On the one-sided paths, to ranks whose memory is mapped (PEs on the node), each element is
//! written straight to its place in the receiver's layout
//! ([`AlltoallCall::fuse`](onesided::AlltoallCall::fuse)): packing, moving and unpacking are
//! one strided pass, which is why the planes and the spectrum live in symmetric memory. Other
//! ranks, and the MPI and shmem paths, pack into the all-to-all's send buffer, and the receiver
//! unpacks. Both arrays are as long as the widest rank's, and a rank leaves them alone from
//! entering a transpose (its ready signal, after which senders may write them) until the
//! transpose returns. A sender that writes a receiver's spectrum directly leaves its ballot in
//! a tail slot of that array, one per rank. The strided side of each transpose goes in 16 × 16
//! tiles, so that the lines read and the lines written both stay in the L1 cache.

use std::ops::Range;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use onesided::{Alltoall, AlltoallAlgorithm, Path, PeGroup, Runtime, SymArray};

use super::blocks::{Complex32, Plans, ballot_element, ballot_of, fft_failed, split, widest};
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

/// The distributed real-to-complex 3-D FFT of a [`PmeGrid`] over its PME ranks.
pub(super) struct SlabFft<'rt> {
    k: [usize; 3],
    /// Complex values per z line: `Kz / 2 + 1`.
    kzc: usize,
    /// `x_bounds[r]..x_bounds[r + 1]`: the x planes of rank `r` (the grid's slabs).
    x_bounds: Vec<usize>,
    /// `y_bounds[r]..y_bounds[r + 1]`: the y lines of rank `r`'s spectrum.
    y_bounds: Vec<usize>,
    rank: Option<usize>,
    plans: Plans,
    alltoall: Alltoall<'rt, 'rt, Complex32>,
    /// This rank's planes in complex form, `[plane][kz][y]`, in the first `planes_len`
    /// elements: symmetric (as long as the widest rank's), since the backward transpose's
    /// senders write it directly where they can.
    planes: SymArray<'rt, Complex32>,
    planes_len: usize,
    /// This rank's spectrum, `[kz][y - y_lo][x]`, in the first `spectrum_len` elements:
    /// symmetric for the forward transpose's senders.
    spectrum: SymArray<'rt, Complex32>,
    spectrum_len: usize,
    /// Where the spectrum array's tail starts: one slot per rank, where a rank that writes
    /// this one's spectrum directly leaves its ballot ([`forward_voting`](Self::forward_voting)).
    ballots_at: usize,
    /// One real line and one transposed plane.
    line: Vec<f32>,
    plane: Vec<Complex32>,
    scratch: Vec<Complex32>,
    /// Time spent in the transposes' communication, both ways, since creation.
    transposing: Duration,
    /// The whole transposes (packing, communication, unpacking) on every path.
    exchanging: Duration,
}

impl<'rt> SlabFft<'rt> {
    /// The FFT of `grid` (in slabs) over its PME ranks, in a group of their own that the
    /// transpose keeps; the transpose goes over `path`.
    ///
    /// # Collective
    /// Every PE of the job must call it with the same arguments (the all-to-all's buffers are
    /// symmetric); PEs outside the group hold nothing.
    ///
    /// # Errors
    /// [`Error::Config`] when the path cannot serve the group (the shmem path needs an active
    /// set); [`Error::Comm`] when the symmetric heap cannot hold the transpose's buffers.
    pub fn collective_new(
        rt: &'rt Runtime,
        grid: &PmeGrid,
        path: Path,
        algorithm: Option<AlltoallAlgorithm>,
    ) -> Result<Self> {
        let m = grid.ranks();
        debug_assert!(!grid.is_pencil(), "MeshFft sends pencils to PencilFft");
        let pes: Vec<usize> = (0..m).map(|r| grid.pe_of(r)).collect();
        let group = PeGroup::collective_new(rt, "pme fft", &pes)?;
        let rank = group.my_rank();
        let k = grid.sizes();
        let kzc = k[2] / 2 + 1;
        let x_bounds: Vec<usize> = (0..=m).map(|r| if r < m { grid.slab(r).0 } else { k[0] }).collect();
        let y_bounds = split(k[1], m);
        // Each block ends with a ballot of the PME ranks' vote (forward_voting).
        let block = widest(&x_bounds) * widest(&y_bounds) * kzc + 1;
        let builder = Alltoall::builder("pme fft transpose", block).path(path);
        let builder = match algorithm {
            Some(algorithm) => builder.algorithm(algorithm),
            None => builder,
        };
        let alltoall = builder.collective_build_owning(group).map_err(|e| match e {
            onesided::Error::InvalidArgument(why) => Error::Config(why),
            other => Error::Comm(other),
        })?;
        let (planes, lines) = match rank {
            Some(r) => (x_bounds[r + 1] - x_bounds[r], y_bounds[r + 1] - y_bounds[r]),
            None => (0, 0),
        };
        let plans = Plans::new(k);
        let scratch = vec![Complex32::default(); plans.scratch_len()];
        let symmetric =
            |name: &str, len: usize| SymArray::collective_alloc(rt, name, len.max(1)).map_err(Error::Comm);
        let planes_array = symmetric("pme fft planes", widest(&x_bounds) * kzc * k[1])?;
        let ballots_at = kzc * widest(&y_bounds) * k[0];
        let spectrum_array = symmetric("pme fft spectrum", ballots_at + m)?;
        // SAFETY: no other PE writes this PE's spectrum before it enters its first forward
        // transpose (they wait for its ready signal); the tail holds no ballot yet.
        unsafe { spectrum_array.local_range_mut(ballots_at..ballots_at + m) }.fill(ballot_element(u64::MAX));
        Ok(SlabFft {
            k,
            kzc,
            x_bounds,
            y_bounds,
            rank,
            plans,
            alltoall,
            planes: planes_array,
            planes_len: planes * kzc * k[1],
            spectrum: spectrum_array,
            spectrum_len: kzc * lines * k[0],
            ballots_at,
            line: vec![0.0; k[2]],
            plane: vec![Complex32::default(); k[1] * kzc],
            scratch,
            transposing: Duration::ZERO,
            exchanging: Duration::ZERO,
        })
    }

    /// The transpose's algorithm.
    pub fn algorithm(&self) -> AlltoallAlgorithm {
        self.alltoall.algorithm()
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

    /// This rank's spectrum after [`forward_voting`](Self::forward_voting): for `kz` in
    /// `0..`[`complex_z`](Self::complex_z), `y` in [`spectrum_lines`](Self::spectrum_lines)
    /// and `x` in `0..Kx`, element `(kz * lines + (y - lo)) * Kx + x`.
    pub fn spectrum(&self) -> &[Complex32] {
        // SAFETY: other PEs write this rank's spectrum only during a forward transpose, after
        // this rank has entered it (its ready signal), which `&self` excludes while the slice
        // lives.
        unsafe { self.spectrum.local_range(0..self.spectrum_len) }
    }

    /// The spectrum, to change before [`backward`](Self::backward).
    pub fn spectrum_mut(&mut self) -> &mut [Complex32] {
        // SAFETY: as in `spectrum`, and `&mut self` makes the view the only one.
        unsafe { self.spectrum.local_range_mut(0..self.spectrum_len) }
    }

    /// The time spent in the transposes' communication, both ways, since creation: the
    /// all-to-all call after packing (as GROMACS's `PME 3D-FFT Comm.` counts it), or, where
    /// the one-sided paths pack straight into the receivers' memory, the packing and signals.
    pub fn transpose_time(&self) -> Duration {
        self.transposing
    }

    /// The time spent in the whole transposes, both ways, since creation, on every path:
    /// packing, communication and unpacking, what one path's transpose costs against
    /// another's. On the one-sided paths, between PEs whose memory is mapped, the three are
    /// one pass: each element is written straight to its place in the receiver's layout.
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
    /// each, z fastest) into its part of the spectrum, with this rank's `ballot` in a vote of
    /// the PME ranks that costs no message of its own: every block of the transpose carries
    /// it, and the smallest ballot of every rank comes back.
    ///
    /// # Collective
    /// Every member of the group must call it; other PEs must not.
    ///
    /// # Errors
    /// [`Error::Config`] on a PE outside the group or for a slab of the wrong length;
    /// [`Error::Comm`] when the transpose fails.
    pub(super) fn forward_voting(&mut self, slab: &[f32], ballot: u64) -> Result<u64> {
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
        // SAFETY: other PEs write this rank's planes only during a backward transpose, after
        // this rank has entered it; `&mut self` excludes that while the view lives.
        let my_planes = unsafe { self.planes.local_range_mut(0..self.planes_len) };
        for (p, real) in slab.chunks_exact(ky * kz).enumerate() {
            for (y, values) in real.chunks_exact(kz).enumerate() {
                self.line.copy_from_slice(values);
                let out = &mut self.plane[y * kzc..(y + 1) * kzc];
                self.plans
                    .r2c
                    .process_with_scratch(&mut self.line, out, &mut self.scratch)
                    .map_err(fft_failed)?;
            }
            let target = &mut my_planes[p * kzc * ky..(p + 1) * kzc * ky];
            transpose(&self.plane, target, ky, kzc);
            self.plans.y.process_with_scratch(target, &mut self.scratch);
        }
        // The transpose: element (plane p, kz, y) goes to the rank r owning y, at
        // ((kz * lines_r + y - lo_r) * Kx + x) of its spectrum, x = x_me + p.
        let (kx, x_me) = (self.k[0], self.x_bounds[me]);
        let (x_bounds, y_bounds) = (&self.x_bounds, &self.y_bounds);
        let planes: &[Complex32] = my_planes;
        let to_spectrum = self.spectrum.as_ptr();
        let timed = Timed::start();
        let (ballots_at, data) = (self.ballots_at, self.alltoall.block() - 1);
        let heard = std::cell::Cell::new(ballot);
        let direct = |r: usize, base: NonNull<Complex32>| {
            // SAFETY: slot `me` of rank r's ballot tail, inside its array (ballots_at + m),
            // written by this rank alone and read by r only after the call.
            unsafe { base.as_ptr().add(ballots_at + me).write(ballot_element(ballot)) };
            let (lo, hi) = (y_bounds[r], y_bounds[r + 1]);
            let lines = hi - lo;
            for kz in 0..kzc {
                // SAFETY: as for the call; the rows (planes) and columns (lines) end
                // inside both arrays.
                unsafe {
                    transpose_into(
                        &planes[kz * ky + lo..],
                        kzc * ky,
                        base.as_ptr().add(kz * lines * kx + x_me),
                        kx,
                        planes.len() / (kzc * ky),
                        lines,
                    )
                };
            }
        };
        let pack = |r: usize, out: &mut [Complex32]| {
            timed.packing(|| {
                let (lo, hi) = (y_bounds[r], y_bounds[r + 1]);
                for (run, line) in planes.chunks_exact(ky).enumerate() {
                    out[run * (hi - lo)..(run + 1) * (hi - lo)].copy_from_slice(&line[lo..hi]);
                }
                out[data] = ballot_element(ballot);
            })
        };
        let unpack = |s: usize, block: &[Complex32]| {
            heard.set(heard.get().min(ballot_of(block[data])));
            timed.packing(|| {
                let x0 = x_bounds[s];
                let runs = kzc * (y_bounds[me + 1] - y_bounds[me]);
                // SAFETY: as for the call; this rank's own spectrum, x columns of s.
                unsafe { transpose_into(block, runs, to_spectrum.add(x0), kx, x_bounds[s + 1] - x0, runs) };
            })
        };
        // SAFETY: `direct` and `unpack` write, in rank r's spectrum, only x columns
        // `x_s..x_s + planes_s` of the sender s and within `kzc * lines_r * Kx` (inside the
        // array, which holds the widest rank's); no rank touches its spectrum during the call.
        let result = unsafe { self.alltoall.call().pack(pack).fuse(&self.spectrum, direct, unpack) }.run();
        timed.account(&mut self.transposing, &mut self.exchanging);
        result.map_err(Error::Comm)?;
        let m = self.x_bounds.len() - 1;
        // SAFETY: the transpose is over: every rank that wrote a ballot here did so before its
        // arrived signal, and none writes again before this rank's next ready signal.
        let tail = unsafe { self.spectrum.local_range_mut(ballots_at..ballots_at + m) };
        let agreed = tail.iter().map(|&e| ballot_of(e)).fold(heard.get(), u64::min);
        tail.fill(ballot_element(u64::MAX));
        if self.spectrum_len > 0 {
            // SAFETY: the transpose is over; as in `spectrum_mut`.
            let spectrum = unsafe { self.spectrum.local_range_mut(0..self.spectrum_len) };
            self.plans.x.process_with_scratch(spectrum, &mut self.scratch);
        }
        Ok(agreed)
    }

    /// Transforms this rank's part of the spectrum back into its slab of the real grid (the
    /// layout [`forward_voting`](Self::forward_voting) takes), not normalised, and leaves the spectrum
    /// undefined.
    ///
    /// # Collective
    /// As [`forward_voting`](Self::forward_voting).
    ///
    /// # Errors
    /// As [`forward_voting`](Self::forward_voting).
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
        let lines = self.lines_of(me);
        let spectrum: &[Complex32] = {
            // SAFETY: as in `spectrum_mut`: no PE writes this rank's spectrum before it enters
            // the next forward transpose.
            let spectrum = unsafe { self.spectrum.local_range_mut(0..self.spectrum_len) };
            if !spectrum.is_empty() {
                self.plans.x_inverse.process_with_scratch(spectrum, &mut self.scratch);
            }
            spectrum
        };
        // The transpose back: element (kz, y, x) goes to the rank s owning x, at
        // ((x - x_s) * kzc + kz) * Ky + y of its planes.
        let lo_me = self.y_bounds[me];
        let (x_bounds, y_bounds) = (&self.x_bounds, &self.y_bounds);
        let to_planes = self.planes.as_ptr();
        let timed = Timed::start();
        let direct = |s: usize, base: NonNull<Complex32>| {
            let x0 = x_bounds[s];
            for kz in 0..kzc {
                // SAFETY: as for the call; the rows (lines) and columns (planes of s)
                // end inside both arrays.
                unsafe {
                    transpose_into(
                        &spectrum[kz * lines * kx + x0..],
                        kx,
                        base.as_ptr().add(kz * ky + lo_me),
                        kzc * ky,
                        lines,
                        x_bounds[s + 1] - x0,
                    )
                };
            }
        };
        let pack = |s: usize, out: &mut [Complex32]| {
            timed.packing(|| {
                let x0 = x_bounds[s];
                let runs = kzc * lines;
                transpose_strided(&spectrum[x0..], kx, out, runs, runs, x_bounds[s + 1] - x0);
            })
        };
        let unpack = |r: usize, block: &[Complex32]| {
            timed.packing(|| {
                let (lo, hi) = (y_bounds[r], y_bounds[r + 1]);
                let runs = (x_bounds[me + 1] - x_bounds[me]) * kzc;
                for run in 0..runs {
                    let from = &block[run * (hi - lo)..(run + 1) * (hi - lo)];
                    // SAFETY: as for the call; this rank's own planes, y lines of r.
                    unsafe {
                        std::ptr::copy_nonoverlapping(from.as_ptr(), to_planes.add(run * ky + lo), hi - lo)
                    };
                }
            })
        };
        // SAFETY: `direct` and `unpack` write, in rank s's planes, only the y lines of the
        // sender and within `planes_s * kzc * Ky` (inside the array, which holds the widest
        // rank's); no rank touches its planes during the call.
        let result = unsafe { self.alltoall.call().pack(pack).fuse(&self.planes, direct, unpack) }.run();
        timed.account(&mut self.transposing, &mut self.exchanging);
        result.map_err(Error::Comm)?;
        // SAFETY: the transpose is over; other PEs write this rank's planes again only in the
        // next backward transpose, which `&mut self` excludes.
        let my_planes = unsafe { self.planes.local_range_mut(0..self.planes_len) };
        // y, then z (complex to real), plane by plane.
        for (p, real) in slab.chunks_exact_mut(ky * kz).enumerate() {
            let source = &mut my_planes[p * kzc * ky..(p + 1) * kzc * ky];
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

/// The clocks of one transpose: the time packing into and unpacking out of the all-to-all's
/// buffers, which the communication time excludes (as GROMACS's `PME 3D-FFT Comm.` times its
/// `MPI_Alltoall` alone); where the one-sided paths write straight into the receivers'
/// layout, that single pass is the communication.
struct Timed {
    start: Instant,
    packing: std::cell::Cell<Duration>,
}

impl Timed {
    fn start() -> Timed {
        Timed { start: Instant::now(), packing: std::cell::Cell::new(Duration::ZERO) }
    }

    /// Runs `work`, packing or unpacking, on the packing clock.
    fn packing(&self, work: impl FnOnce()) {
        let start = Instant::now();
        work();
        self.packing.set(self.packing.get() + start.elapsed());
    }

    /// Adds the communication to `communication` and the whole transpose to `whole`.
    fn account(&self, communication: &mut Duration, whole: &mut Duration) {
        let total = self.start.elapsed();
        *whole += total;
        *communication += total.saturating_sub(self.packing.get());
    }
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
    if rows == 0 || cols == 0 {
        return;
    }
    assert!((cols - 1) * to_stride + rows <= to.len(), "transposed block beyond its target");
    // SAFETY: every index written, c * to_stride + r < (cols - 1) * to_stride + rows, is
    // inside `to` (checked), which `&mut` makes this the only access to.
    unsafe { transpose_into(from, from_stride, to.as_mut_ptr(), to_stride, rows, cols) }
}

/// [`transpose_strided`] into memory given by a pointer: a receiver's layout, written while
/// other PEs write other elements of the same array.
///
/// # Safety
/// `to.add(c * to_stride + r)` for `r < rows`, `c < cols` is valid for writes, and nothing else
/// accesses those elements during the call.
unsafe fn transpose_into(
    from: &[Complex32],
    from_stride: usize,
    to: *mut Complex32,
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
                for (c, &value) in row.iter().enumerate().take(c1).skip(c0) {
                    // SAFETY: within the rows and columns the caller vouches for.
                    unsafe { to.add(c * to_stride + r).write(value) };
                }
            }
        }
    }
}

/// `to[c * rows + r] = from[r * cols + c]`: a `rows × cols` matrix into `cols × rows`.
pub(super) fn transpose(from: &[Complex32], to: &mut [Complex32], rows: usize, cols: usize) {
    debug_assert!(from.len() == rows * cols && to.len() == rows * cols);
    for (r, row) in from.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            to[c * rows + r] = v;
        }
    }
}

impl std::fmt::Debug for SlabFft<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlabFft")
            .field("sizes", &self.k)
            .field("rank", &self.rank)
            .field("alltoall", &self.alltoall)
            .finish_non_exhaustive()
    }
}
