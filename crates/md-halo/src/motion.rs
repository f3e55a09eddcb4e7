//! Deterministic motion between steps: every atom takes a small pseudo-random step that
//! depends only on its global index and the step number, so that every path and every
//! decomposition moves the same atoms the same way.

use crate::system::RVec;

/// The largest displacement per step along each axis, in nm.
pub const STEP_AMPLITUDE: f32 = 0.002;

/// The Verlet-style buffer a halo needs beyond the cutoff so that, between two repartitions
/// `nstlist` steps apart, no pair can come within the cutoff unseen. The halo is chosen per
/// axis (an atom within the range of a face along that axis), and along one axis two atoms
/// approach each other by at most twice the distance either travels, `nstlist` steps of at
/// most [`STEP_AMPLITUDE`]; the factor 1.001 absorbs rounding.
pub fn buffer_for(nstlist: usize) -> f32 {
    2.0 * nstlist as f32 * STEP_AMPLITUDE * 1.001
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
        let mean: f32 = (0..10_000).map(|g| displacement(g, 1)[0]).sum::<f32>() / 10_000.0;
        assert!(mean.abs() < 0.05 * STEP_AMPLITUDE, "unbiased: {mean}");
    }
}
