//! The PME decomposition: a charge grid `Kx × Ky × Kz` over a rectangular or triclinic box,
//! split into slabs along its first axis over the PME ranks, and where an atom sits on it.
//!
//! The box is given as GROMACS gives it: three box vectors, the rows of its `matrix box`,
//! a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz). An atom is placed by its fractional
//! coordinates through the reciprocal box, as GROMACS's `calc_interpolation_idx` does:
//! s_x = x·rxx + y·ryx + z·rzx, s_y = y·ryy + z·rzy, s_z = z·rzz, each wrapped into [0, 1)
//! and scaled by the grid size. Grid plane `i` along x is therefore the plane s_x = i / Kx,
//! parallel to b and c; the slabs are stacks of such planes.

use std::cmp::Ordering;

use crate::RVec;
use crate::error::{Error, Result};
use crate::redist::Particle;
use crate::spline::ORDER;

/// Up to this many PME ranks, the eight-wide placement finds ranks by comparison.
const COMPARED_RANKS: usize = 16;

/// The PME grid and its slabs.
#[derive(Clone, Debug, PartialEq)]
pub struct PmeGrid {
    box_vectors: [RVec; 3],
    k: [usize; 3],
    /// `bounds[r]..bounds[r + 1]` are the x planes of PME rank `r`.
    bounds: Vec<usize>,
    /// The PME rank of each x plane.
    plane_rank: Vec<u32>,
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
    /// over the PME ranks `pme_pes` (PE numbers, in slab order).
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
        let length = |v: RVec| v.iter().map(|&c| c as f64 * c as f64).sum::<f64>().sqrt() as f32;
        let k: [usize; 3] =
            std::array::from_fn(|d| nice_size((length(box_vectors[d]) / spacing).ceil() as usize));
        PmeGrid::with_sizes(box_vectors, k, pme_pes)
    }

    /// A grid of exactly `k` points over the box `box_vectors` (as for [`new`](Self::new)),
    /// split over `pme_pes`.
    ///
    /// # Errors
    /// As [`new`](Self::new), except for the spacing.
    pub fn with_sizes(box_vectors: [RVec; 3], k: [usize; 3], pme_pes: &[usize]) -> Result<PmeGrid> {
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
        let bounds: Vec<usize> = (0..=m).map(|r| r * k[0] / m).collect();
        let thinnest = bounds.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
        if thinnest < ORDER {
            return Err(Error::Config(format!(
                "{} x planes over {m} PME ranks leave slabs of {thinnest} planes, but interpolation \
                 order {ORDER} spreads each charge over {ORDER}: the grid is too coarse for the \
                 interpolation order on this many PME ranks; use at most {} PME ranks or a finer spacing",
                k[0],
                k[0] / ORDER
            )));
        }
        let plane_rank =
            (0..k[0]).map(|plane| (bounds.partition_point(|&b| b <= plane) - 1) as u32).collect();
        let recip = reciprocal_box(&box_vectors);
        let x_only = recip[1][0] == 0.0 && recip[2][0] == 0.0;
        Ok(PmeGrid { box_vectors, k, bounds, plane_rank, recip, x_only, pes: pme_pes.to_vec() })
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

    /// The x planes `lo..hi` of PME rank `rank`.
    pub fn slab(&self, rank: usize) -> (usize, usize) {
        (self.bounds[rank], self.bounds[rank + 1])
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
        self.rank_of_plane(self.line(0, x).0)
    }

    /// The PME rank of each atom of `atoms`, into `ranks` (as long), the number of atoms of
    /// each rank added to `counts` (one per PME rank), and the first atom of each run of atoms
    /// of one rank appended to `runs` (atom 0 first, numbered within `atoms`):
    /// [`rank_of`](Self::rank_of) of each, to the bit, eight atoms at a time where the
    /// processor has AVX2 and FMA.
    ///
    /// The eight-wide path computes the grid coordinate `u = Kx·(s_x - floor(s_x))` in `f32`
    /// and bounds its distance from `rank_of`'s `f64` one (below `Kx·(T + 1)·2⁻²²`, where `T`
    /// is the sum of the magnitudes of the three products that make `s_x`: `4T·2⁻²⁴` for the
    /// rounding of the reciprocal box to `f32`, of the product and of the two multiply-adds;
    /// the `+ 1` for that of `s_x - floor(s_x)`, inexact only for `s_x` in (-½, 0), and of
    /// the scaling). Where `u` lies further than four times that bound from every integer,
    /// both truncate to the same plane; an atom closer to a plane boundary, or not finite,
    /// goes through `rank_of` with the rest of its group (about one atom in a thousand inside
    /// the box). Beyond `|s_x| = 2²²` the bound exceeds one half, so such atoms take that path
    /// too.
    pub(crate) fn ranks_of(
        &self,
        atoms: &[Particle],
        ranks: &mut [u32],
        counts: &mut [usize],
        runs: &mut Vec<u32>,
    ) {
        assert_eq!(atoms.len(), ranks.len(), "one rank per atom");
        assert_eq!(counts.len(), self.ranks(), "one count per PME rank");
        assert!(atoms.len() <= u32::MAX as usize, "atom numbers fit a u32");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // With one PME rank every atom is rank 0 whatever its fraction: x alone will do.
            let x_only = self.x_only || self.ranks() == 1;
            // SAFETY: the processor has AVX2, FMA and POPCNT (checked just above); the lengths
            // agree (asserted above).
            unsafe {
                if x_only {
                    self.ranks_of_avx2_for::<true>(atoms, ranks, counts, runs)
                } else {
                    self.ranks_of_avx2_for::<false>(atoms, ranks, counts, runs)
                }
            }
            return;
        }
        self.ranks_of_exact(atoms, ranks, counts);
        push_run_starts(ranks, 0, runs);
    }

    /// [`ranks_of_avx2`](Self::ranks_of_avx2) with the number of compared boundaries for this
    /// grid's PME ranks.
    ///
    /// # Safety
    /// The processor has AVX2, FMA and POPCNT; `ranks` is as long as `atoms`, `counts` has one
    /// entry per PME rank.
    #[cfg(target_arch = "x86_64")]
    unsafe fn ranks_of_avx2_for<const X_ONLY: bool>(
        &self,
        atoms: &[Particle],
        ranks: &mut [u32],
        counts: &mut [usize],
        runs: &mut Vec<u32>,
    ) {
        // SAFETY (for each call): the caller's promise; the number of compared boundaries is
        // m - 1 where that is below four, and beyond COMPARED_RANKS - 1 with the rest unused.
        unsafe {
            match self.ranks() {
                1 => self.ranks_of_avx2::<0, X_ONLY>(atoms, ranks, counts, runs),
                2 => self.ranks_of_avx2::<1, X_ONLY>(atoms, ranks, counts, runs),
                3 => self.ranks_of_avx2::<2, X_ONLY>(atoms, ranks, counts, runs),
                4 => self.ranks_of_avx2::<3, X_ONLY>(atoms, ranks, counts, runs),
                _ => self.ranks_of_avx2::<{ COMPARED_RANKS - 1 }, X_ONLY>(atoms, ranks, counts, runs),
            }
        }
    }

    /// [`ranks_of`](Self::ranks_of) one atom at a time through [`rank_of`](Self::rank_of),
    /// without the runs.
    fn ranks_of_exact(&self, atoms: &[Particle], ranks: &mut [u32], counts: &mut [usize]) {
        for (rank, atom) in ranks.iter_mut().zip(atoms) {
            let r = self.rank_of(atom.x);
            counts[r] += 1;
            *rank = r as u32;
        }
    }

    /// [`ranks_of`](Self::ranks_of) eight atoms at a time: each atom's first 16 bytes (x, y, z
    /// and the charge) in one load, eight transposed into a vector of x, of y and of z. Up to
    /// `B + 1` PME ranks (`B` the number of slab boundaries inside the box, a constant so that
    /// the boundaries and the counts stay in registers), a plane's rank is found by comparing
    /// it with the boundaries; beyond, by table. Where the rank changes between neighbours
    /// is found from the same vector of eight ranks. With `X_ONLY` (a box upright along x,
    /// see [`line`](Self::line)) the fraction is x times one element, and y and z are not
    /// transposed.
    ///
    /// # Safety
    /// The processor has AVX2, FMA and POPCNT; `ranks` is as long as `atoms`, `counts` has one
    /// entry per PME rank; `B` is `m - 1` for `m` PME ranks, or larger (the extra boundaries
    /// lie beyond every plane), or `m` exceeds `B + 1` and then `COMPARED_RANKS` (ranks by
    /// table).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,popcnt")]
    unsafe fn ranks_of_avx2<const B: usize, const X_ONLY: bool>(
        &self,
        atoms: &[Particle],
        ranks: &mut [u32],
        counts: &mut [usize],
        runs: &mut Vec<u32>,
    ) {
        use std::arch::x86_64::*;
        let m = self.ranks();
        let r = &self.recip;
        let k = self.k[0];
        let (r00, r10, r20) = (r[0][0] as f32, r[1][0] as f32, r[2][0] as f32);
        let (vr00, vr10, vr20) = (_mm256_set1_ps(r00), _mm256_set1_ps(r10), _mm256_set1_ps(r20));
        // Four times the bound on |u_f32 - u_f64| per unit of T + 1, folded into the
        // magnitudes of the reciprocal box: the test compares with slack·(T + 1).
        let slack = k as f32 * 2.0f32.powi(-20);
        let (ar00, ar10, ar20) = (
            _mm256_set1_ps(r00.abs() * slack),
            _mm256_set1_ps(r10.abs() * slack),
            _mm256_set1_ps(r20.abs() * slack),
        );
        let vslack = _mm256_set1_ps(slack);
        let scale = _mm256_set1_ps(k as f32);
        let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let (lowest, highest) = (_mm256_setzero_si256(), _mm256_set1_epi32(k as i32 - 1));
        let by_compare = m <= B + 1;
        // Boundaries past the last slab (B larger than m - 1) are never reached.
        let starts: [__m256i; B] = std::array::from_fn(|b| {
            _mm256_set1_epi32(
                self.bounds.get(b + 1).filter(|_| b + 1 < m).map_or(i32::MAX, |&p| p as i32 - 1),
            )
        });
        let mut above = [_mm256_setzero_si256(); B];
        // Groups ranked one atom at a time (few): the others were ranked by comparison.
        let mut one_by_one = 0usize;
        // Lane j of `previous` is the rank before lane j's atom; u32::MAX (no rank) before the
        // first atom, so that a run starts there.
        let rotate = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
        let seven = _mm256_set1_epi32(7);
        let mut last = _mm256_set1_epi32(-1);
        // The atoms of each group where a run starts are written eight at a time, without a
        // branch per start: their numbers packed to the front of a vector, all eight stored,
        // and the length moved on by how many they are. Room for eight past the last start.
        runs.reserve(atoms.len() + 8);
        let mut found = runs.len();
        let starts_out = runs.as_mut_ptr();
        let mut numbers = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let eight = _mm256_set1_epi32(8);
        for (group, out) in atoms.chunks_exact(8).zip(ranks.chunks_exact_mut(8)) {
            // SAFETY: a Particle is repr(C) and starts with x, y, z and q: 16 bytes of f32.
            let load = |a: &Particle| unsafe { _mm_loadu_ps((a as *const Particle).cast::<f32>()) };
            // Lane j holds atom j (low half) and atom j + 4 (high half) of the group.
            let v0 = _mm256_set_m128(load(&group[4]), load(&group[0]));
            let v1 = _mm256_set_m128(load(&group[5]), load(&group[1]));
            let v2 = _mm256_set_m128(load(&group[6]), load(&group[2]));
            let v3 = _mm256_set_m128(load(&group[7]), load(&group[3]));
            let (t0, t1) = (_mm256_unpacklo_ps(v0, v1), _mm256_unpacklo_ps(v2, v3));
            let (t2, t3) = (_mm256_unpackhi_ps(v0, v1), _mm256_unpackhi_ps(v2, v3));
            // x0 x1 x2 x3 | x4 x5 x6 x7, and so on: the lanes in atom order.
            let x = _mm256_shuffle_ps::<0x44>(t0, t1);
            let (s, bound) = if X_ONLY {
                (_mm256_mul_ps(x, vr00), _mm256_fmadd_ps(_mm256_and_ps(x, magnitude), ar00, vslack))
            } else {
                let y = _mm256_shuffle_ps::<0xEE>(t0, t1);
                let z = _mm256_shuffle_ps::<0x44>(t2, t3);
                let s = _mm256_fmadd_ps(x, vr00, _mm256_fmadd_ps(y, vr10, _mm256_mul_ps(z, vr20)));
                let (ax, ay, az) =
                    (_mm256_and_ps(x, magnitude), _mm256_and_ps(y, magnitude), _mm256_and_ps(z, magnitude));
                let bound =
                    _mm256_fmadd_ps(ax, ar00, _mm256_fmadd_ps(ay, ar10, _mm256_fmadd_ps(az, ar20, vslack)));
                (s, bound)
            };
            let u = _mm256_mul_ps(_mm256_sub_ps(s, _mm256_floor_ps(s)), scale);
            let off =
                _mm256_and_ps(_mm256_sub_ps(u, _mm256_round_ps::<_MM_FROUND_TO_NEAREST_INT>(u)), magnitude);
            // Near a boundary (true for NaN and infinities, whose off or bound is NaN or
            // infinite), or |s| at or beyond 2^22, where the bound exceeds 4 Kx > 1/2 >= off:
            // the exact path.
            let exact = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NGT_UQ>(off, bound));
            let rank = if exact == 0 && by_compare {
                // Off every integer by more than the bound, u lies strictly inside (0, Kx):
                // its truncation is its plane. The rank is the number of boundaries at or
                // below the plane; each comparison also counts the atoms at or above it.
                let plane = _mm256_cvttps_epi32(u);
                let mut rank = _mm256_setzero_si256();
                for (start, above) in starts.iter().zip(&mut above) {
                    let at_or_above = _mm256_cmpgt_epi32(plane, *start);
                    rank = _mm256_sub_epi32(rank, at_or_above);
                    *above = _mm256_sub_epi32(*above, at_or_above);
                }
                // SAFETY: `out` holds eight u32, 32 bytes; the store is unaligned.
                unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), rank) };
                rank
            } else {
                one_by_one += 1;
                let plane = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvttps_epi32(u), lowest), highest);
                let mut planes = [0i32; 8];
                // SAFETY: `planes` holds eight i32, 32 bytes; the store is unaligned.
                unsafe { _mm256_storeu_si256(planes.as_mut_ptr().cast(), plane) };
                for (lane, (rank, &plane)) in out.iter_mut().zip(&planes).enumerate() {
                    let r = if exact & (1 << lane) == 0 {
                        // SAFETY: plane is clamped to 0..=k - 1, and plane_rank has k entries.
                        unsafe { *self.plane_rank.get_unchecked(plane as usize) as usize }
                    } else {
                        self.rank_of(group[lane].x)
                    };
                    *rank = r as u32;
                    counts[r] += 1;
                }
                // SAFETY: `out` holds eight u32, 32 bytes; the load is unaligned.
                unsafe { _mm256_loadu_si256(out.as_ptr().cast()) }
            };
            let previous = _mm256_blend_epi32::<1>(_mm256_permutevar8x32_epi32(rank, rotate), last);
            let same = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(rank, previous)));
            let changes = !same as usize & 0xff;
            // SAFETY: COMPRESS has 256 entries of eight bytes, and `changes` is below 256.
            let lanes = unsafe { _mm_loadl_epi64(COMPRESS.get_unchecked(changes).as_ptr().cast()) };
            let starts_here = _mm256_permutevar8x32_epi32(numbers, _mm256_cvtepu8_epi32(lanes));
            // SAFETY: `found` is at most the length before this call plus the atoms of the
            // groups before this one, and room for that plus all atoms and eight more was
            // reserved; the store is unaligned.
            unsafe { _mm256_storeu_si256(starts_out.add(found).cast(), starts_here) };
            found += changes.count_ones() as usize;
            numbers = _mm256_add_epi32(numbers, eight);
            last = _mm256_permutevar8x32_epi32(rank, seven);
        }
        // SAFETY: the elements up to `found` were written above (or were there before), and
        // `found` is within the capacity reserved.
        unsafe { runs.set_len(found) };
        // Atoms at or above each boundary, summed over the lanes, make the counts of the
        // groups ranked by comparison.
        let mut at_or_above = [0usize; B];
        for (total, above) in at_or_above.iter_mut().zip(&above) {
            let mut lanes = [0u32; 8];
            // SAFETY: `lanes` holds eight u32, 32 bytes; the store is unaligned.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), *above) };
            *total = lanes.iter().map(|&c| c as usize).sum();
        }
        if by_compare {
            let compared = (atoms.len() / 8 - one_by_one) * 8;
            for (r, count) in counts.iter_mut().enumerate() {
                let from = if r == 0 { compared } else { at_or_above[r - 1] };
                *count += from - if r < B { at_or_above[r] } else { 0 };
            }
        }
        let tail = atoms.len() / 8 * 8;
        self.ranks_of_exact(&atoms[tail..], &mut ranks[tail..], counts);
        push_run_starts(ranks, tail, runs);
    }

    /// The PME rank whose slab holds x plane `plane` (`plane` below the x size).
    pub fn rank_of_plane(&self, plane: usize) -> usize {
        self.plane_rank[plane] as usize
    }
}

/// For each set of eight lanes (a bit each), the lanes in it, in order, packed to the front.
#[cfg(target_arch = "x86_64")]
static COMPRESS: [[u8; 8]; 256] = {
    let mut table = [[0u8; 8]; 256];
    let mut set = 0;
    while set < 256 {
        let (mut lane, mut packed) = (0, 0);
        while lane < 8 {
            if set & (1 << lane) != 0 {
                table[set][packed] = lane as u8;
                packed += 1;
            }
            lane += 1;
        }
        set += 1;
    }
    table
};

/// Appends to `runs` each atom from `from` on whose rank differs from the one before it
/// (atom 0 always).
fn push_run_starts(ranks: &[u32], from: usize, runs: &mut Vec<u32>) {
    for i in from..ranks.len() {
        if i == 0 || ranks[i] != ranks[i - 1] {
            runs.push(i as u32);
        }
    }
}

/// `v.floor()`, without the library call that `f64::floor` becomes on the x86-64 baseline
/// (no SSE4.1 rounding instruction), and without a branch, so that loops over atoms stay
/// straight: the same value for every `v` of magnitude below 2^63 (beyond 2^52 every f64 is
/// an integer, which the conversion keeps), up to the sign of a zero; NaN gives 0.
#[inline]
fn floor(v: f64) -> f64 {
    let t = v as i64 as f64;
    t - f64::from(u8::from(t > v))
}

/// The smallest size at least `n` whose prime factors are 2, 3, 5 and 7.
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

    /// The eight-wide placement agrees with `rank_of` to the bit, and counts every rank:
    /// positions inside, on and around the box, on and next to plane boundaries (where the
    /// f32 path must hand over), some boxes away and far outside it, negative, and not
    /// finite; rectangular and triclinic boxes; ranks found by comparison (3 and 7 PME
    /// ranks) and by table (20); lengths not a multiple of eight.
    #[test]
    fn ranks_of_is_rank_of_for_every_position() {
        let triclinic = [[4.1, 0.0, 0.0], [1.3, 3.9, 0.0], [-0.9, 1.1, 3.7]];
        let rectangular = [[3.72, 0.0, 0.0], [0.0, 4.4, 0.0], [0.0, 0.0, 5.1]];
        // Three PME ranks and seven (ranked by comparison), and twenty in a long triclinic
        // box (by table, beyond COMPARED_RANKS).
        let long = [[12.1, 0.0, 0.0], [1.3, 3.9, 0.0], [-0.9, 1.1, 3.7]];
        let many: Vec<usize> = (0..20).collect();
        let seven: Vec<usize> = (0..7).collect();
        // A rectangular box places by x alone (its own eight-wide variant), by comparison
        // and by table.
        let long_rectangular = [[12.1, 0.0, 0.0], [0.0, 3.9, 0.0], [0.0, 0.0, 3.7]];
        for (box_vectors, pes) in [
            (rectangular, &[0, 1, 2][..]),
            (rectangular, &[0, 1]),
            (long_rectangular, &many),
            (triclinic, &[0, 1, 2]),
            (long, &seven),
            (long, &many),
        ] {
            let grid = PmeGrid::new(box_vectors, 0.12, pes).expect("grid");
            let mut seed = 0x9E37_79B9_7F4A_7C15u64;
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 11) as f64 / (1u64 << 53) as f64
            };
            let a = box_vectors[0][0];
            let mut positions: Vec<RVec> = (0..4001)
                .map(|_| [(next() * 3.0 - 1.0) as f32 * a, (next() * 5.0) as f32, (next() * 5.0) as f32])
                .collect();
            // Every x plane boundary, and just below and above it.
            for plane in 0..=grid.sizes()[0] {
                let x = (plane as f32) * a / grid.sizes()[0] as f32;
                positions.extend([[x, 0.0, 0.0], [x.next_down(), 0.0, 0.0], [x.next_up(), 0.0, 0.0]]);
            }
            // The plane boundaries of s_x off the x axis (through y and z in a triclinic box),
            // and positions some boxes away, where the bound of the f32 path is wider.
            let recip = grid.reciprocal_box();
            for plane in 0..=grid.sizes()[0] {
                for shift in [0.0, 3.0, -17.0, 250.0] {
                    let (y, z) = (next() * 5.0, next() * 5.0);
                    let s = (plane as f64) / grid.sizes()[0] as f64 + shift;
                    let x = ((s - y * recip[1][0] - z * recip[2][0]) / recip[0][0]) as f32;
                    let (y, z) = (y as f32, z as f32);
                    positions.extend([[x, y, z], [x.next_down(), y, z], [x.next_up(), y, z]]);
                    positions.extend([[x, y.next_up(), z], [x, y, z.next_down()]]);
                }
            }
            positions.extend((0..2000).map(|_| {
                let far = 2.0f64.powi((next() * 26.0) as i32);
                [(next() - 0.5) as f32 * far as f32, (next() - 0.5) as f32 * far as f32, next() as f32 * 5.0]
            }));
            positions.extend([
                [1e10, 0.0, 0.0],
                [-1e10, 2.0, 1.0],
                [f32::MAX, 0.0, 0.0],
                [f32::NAN, 0.0, 0.0],
                [0.0, f32::INFINITY, 0.0],
                [f32::NEG_INFINITY, 0.0, 0.0],
                [-0.0, -0.0, -0.0],
            ]);
            let atoms: Vec<Particle> = positions
                .iter()
                .enumerate()
                .map(|(i, &x)| Particle { x, q: 1.0, global: i as u32 })
                .collect();
            for len in [atoms.len(), atoms.len() - 1, 3, 0] {
                let mut ranks = vec![u32::MAX; len];
                let mut counts = vec![7; grid.ranks()];
                let mut runs = vec![u32::MAX];
                grid.ranks_of(&atoms[..len], &mut ranks, &mut counts, &mut runs);
                let mut expected = vec![7; grid.ranks()];
                let mut expected_runs = vec![u32::MAX];
                for (i, (&rank, atom)) in ranks.iter().zip(&atoms).enumerate() {
                    let exact = grid.rank_of(atom.x);
                    assert_eq!(rank as usize, exact, "atom {i} at {:?}", atom.x);
                    expected[exact] += 1;
                    if i == 0 || exact != grid.rank_of(atoms[i - 1].x) {
                        expected_runs.push(i as u32);
                    }
                }
                assert_eq!(counts, expected, "counts are added to what was there");
                assert_eq!(runs, expected_runs, "run starts are appended to what was there");
            }
        }
    }

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
