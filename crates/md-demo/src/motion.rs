//! Deterministic motion between steps: every atom takes a small pseudo-random kick that
//! depends only on its global index and the step number, so that every path and every
//! decomposition moves the same atoms the same way. [`advance`] keeps a velocity that
//! remembers earlier kicks, so an engine's per-atom state must migrate with its atoms for the
//! motion to come out right.

use md_halo::{PbcBox, RVec};

/// The largest kick per step along each axis, in nm.
pub const STEP_AMPLITUDE: f32 = 0.002;

/// The largest displacement per step along each axis under [`advance`]: the velocity's
/// geometric series of kicks stays below twice the largest kick.
pub const MAX_STEP: f32 = 2.0 * STEP_AMPLITUDE;

/// The Verlet-style buffer a halo needs beyond the cutoff so that, between two repartitions
/// `nstlist` steps apart, no pair can come within the cutoff unseen. The halo is chosen per
/// box face (an atom within the range of a face), and towards a face of unit normal `n` an
/// atom moves by at most `MAX_STEP * Σ|n_k|` per step ([`MAX_STEP`] in a rectangular box,
/// under [`advance`] or [`displaced`]); two atoms approach each other by at most twice that.
/// The factor 1.001 absorbs rounding.
pub fn buffer_for(nstlist: usize, pbc: &PbcBox) -> f32 {
    let reach = (0..3).map(|d| pbc.face_normal(d).iter().map(|c| c.abs()).sum::<f64>()).fold(0.0, f64::max);
    (2.0 * nstlist as f64 * MAX_STEP as f64 * reach * 1.001) as f32
}

/// The displacement of atom `global` in step `step`.
pub fn displacement(global: u32, step: u64) -> RVec {
    let mut state =
        (global as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step.wrapping_mul(0xD1B5_4A32_D192_ED03);
    std::array::from_fn(|_| {
        state = splitmix(state);
        // 24 random bits to [-1, 1), scaled.
        let unit = (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        unit * STEP_AMPLITUDE
    })
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One step of atom `global` with velocity `v` (nm per step): `v ← v/2 + kick`, `x ← x + v`.
pub fn advance(global: u32, step: u64, x: &mut RVec, v: &mut RVec) {
    let kick = displacement(global, step);
    for d in 0..3 {
        v[d] = 0.5 * v[d] + kick[d];
        x[d] += v[d];
    }
}

/// `x` moved by the displacement of `global` in `step`.
pub fn displaced(global: u32, step: u64, x: RVec) -> RVec {
    let d = displacement(global, step);
    [x[0] + d[0], x[1] + d[1], x[2] + d[2]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displacements_are_small_deterministic_and_varied() {
        let a = displacement(7, 3);
        assert_eq!(a, displacement(7, 3));
        assert_ne!(a, displacement(7, 4));
        assert_ne!(a, displacement(8, 3));
        for g in 0..1000 {
            for c in displacement(g, 11) {
                assert!(c.abs() <= STEP_AMPLITUDE, "{c}");
            }
        }
        let (mut x, mut v) = ([0.0f32; 3], [0.0f32; 3]);
        for step in 0..1000 {
            let before = x;
            advance(3, step, &mut x, &mut v);
            assert!((0..3).all(|d| (x[d] - before[d]).abs() <= MAX_STEP), "{x:?} {before:?}");
        }
        let mean: f32 = (0..10_000).map(|g| displacement(g, 1)[0]).sum::<f32>() / 10_000.0;
        assert!(mean.abs() < 0.05 * STEP_AMPLITUDE, "unbiased: {mean}");
    }

    #[test]
    fn buffers_grow_with_the_skew() {
        let cube = PbcBox::rectangular([3.0; 3]).expect("valid");
        assert_eq!(buffer_for(10, &cube), (2.0 * 10.0 * MAX_STEP as f64 * 1.001) as f32);
        let skewed = PbcBox::new([[3.0, 0.0, 0.0], [1.0, 3.0, 0.0], [1.0, 1.0, 3.0]]).expect("valid");
        assert!(buffer_for(10, &skewed) > buffer_for(10, &cube));
    }
}
