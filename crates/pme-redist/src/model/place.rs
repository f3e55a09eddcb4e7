//! Where each home atom goes: its PME rank, counted per rank, and where each run of atoms of
//! one rank starts, all in one pass ([`PmeGrid::ranks_of`]; on the thread pool in chunks of
//! [`PARALLEL_MIN`] atoms, each chunk starting a run).
//!
//! With slabs, where the processor has AVX2, FMA and POPCNT, it places eight atoms at a time
//! in `f32`, with a bound on the distance from the exact `f64` placement every other part of
//! the crate uses ([`PmeGrid::rank_of`]): an atom whose grid coordinate lies within four times
//! the bound of a plane boundary (about one in a thousand), or is not finite, goes through
//! `rank_of` with the rest of its group of eight, so that all agree to the bit (a unit test
//! holds the two to the same bits on every kind of position, near every boundary). Where the
//! box is upright along x (b and c with no x component, as in a rectangular box) it reads x
//! alone: the x fraction is then x times one element, in every placement alike. Up to 16 PME
//! ranks an atom's rank is the number of slab boundaries at or below its plane, found by
//! comparison, which counts the atoms per rank in the same pass; beyond, and for the groups
//! that fall back, a table gives each plane's rank. The runs' starts come from the same vector
//! of eight ranks and are written eight at a time through a table, with no branch per start.
//! With pencils, where the y line matters too, atoms are placed one at a time, exactly.

use rayon::prelude::*;

use crate::grid::PmeGrid;
use crate::particle::Particle;
use crate::threads::{PARALLEL_MIN, parallel};

/// Up to this many PME ranks, the eight-wide placement finds ranks by comparison.
const COMPARED_RANKS: usize = 16;

/// The PME rank of each of the `home` atoms into `ranks`, counted per rank and chunk of
/// [`PARALLEL_MIN`] atoms into `chunk_counts` (`[c * m + r]`), or for all atoms in one row
/// when placement stays on the calling thread; and the first atom of each run of one rank
/// into `runs` (on the thread pool each chunk starts a run).
pub(crate) fn place(
    grid: &PmeGrid,
    home: &[Particle],
    ranks: &mut [u32],
    chunk_counts: &mut Vec<usize>,
    runs: &mut Vec<u32>,
    chunk_runs: &mut Vec<Vec<u32>>,
) {
    let m = grid.ranks();
    chunk_counts.clear();
    runs.clear();
    if !parallel(home.len(), PARALLEL_MIN) {
        chunk_counts.resize(m, 0);
        grid.ranks_of(home, ranks, chunk_counts, runs);
    } else {
        let chunks = home.len().div_ceil(PARALLEL_MIN);
        chunk_counts.resize(chunks * m, 0);
        chunk_runs.resize_with(chunks, Vec::new);
        chunk_counts
            .par_chunks_mut(m)
            .zip(ranks.par_chunks_mut(PARALLEL_MIN))
            .zip(home.par_chunks(PARALLEL_MIN))
            .zip(chunk_runs.par_iter_mut())
            .for_each(|(((counts, r), h), chunk_runs)| {
                chunk_runs.clear();
                grid.ranks_of(h, r, counts, chunk_runs);
            });
        for (c, chunk) in chunk_runs.iter().enumerate() {
            runs.extend(chunk.iter().map(|&start| (c * PARALLEL_MIN) as u32 + start));
        }
    }
}

impl PmeGrid {
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
        // Pencils need the y line too: one atom at a time, exactly.
        #[cfg(target_arch = "x86_64")]
        if !self.is_pencil()
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // With one PME rank every atom is rank 0 whatever its fraction: x alone will do.
            let x_only = self.x_only() || self.ranks() == 1;
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
        // SAFETY: for each call, the caller's promise; the number of compared boundaries is
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
    /// see [`PmeGrid::locate`]) the fraction is x times one element, and y and z are not
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
        let r = self.recip();
        let k = self.sizes()[0];
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
                self.bounds().get(b + 1).filter(|_| b + 1 < m).map_or(i32::MAX, |&p| p as i32 - 1),
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
                        unsafe { *self.plane_ranks().get_unchecked(plane as usize) as usize }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::particle::RVec;

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
}
