//! The kernel: the instruction sets it runs with, its constants, the Ewald `erfc` and `exp`
//! helpers, and the forces of one chunk's entries with a copy per instruction set.

use super::chunk::{Chunk, I_CLUSTER, J_CLUSTER};
use super::layout::{Slots, cluster};
use crate::force::{Electrostatics, ForceField};

/// Mask bit of the pair (i atom `a`, j atom `b`) of an entry.
const BIT: [[u32; J_CLUSTER]; I_CLUSTER] = {
    let mut bits = [[0u32; J_CLUSTER]; I_CLUSTER];
    let mut a = 0;
    while a < I_CLUSTER {
        let mut b = 0;
        while b < J_CLUSTER {
            bits[a][b] = 1 << (a * J_CLUSTER + b);
            b += 1;
        }
        a += 1;
    }
    bits
};

/// The instruction set the kernel runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 (F and VL) on 256-bit vectors: the AVX2 kernel with twice the registers.
    Avx512,
    /// 256-bit AVX2 vectors: one j-cluster per instruction.
    Avx2,
    /// The architecture's baseline (SSE2 on x86-64).
    Baseline,
}

impl Isa {
    /// The best the processor running this has.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
            {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Baseline
    }

    /// Whether the processor running this can run the kernel on `self`.
    pub fn available(self) -> bool {
        match self {
            Isa::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isa::Avx512 => "AVX-512",
            Isa::Avx2 => "AVX2",
            Isa::Baseline => "baseline SIMD",
        })
    }
}

/// The constants of the kernel, in single precision.
#[derive(Clone, Copy, Debug)]
pub(super) struct Constants {
    pub(super) cutoff2: f32,
    pub(super) k_rf: f32,
    pub(super) c_rf: f32,
    /// Ewald: the splitting coefficient β, 2β/√π, and the potential shift erfc(β r_c)/r_c.
    pub(super) beta: f32,
    pub(super) two_beta_over_sqrt_pi: f32,
    pub(super) ewald_shift: f32,
}

impl Constants {
    pub(super) fn of(field: &ForceField) -> Constants {
        let beta = match field.electrostatics() {
            Electrostatics::Ewald { beta } => beta,
            Electrostatics::ReactionField => 0.0,
        };
        Constants {
            cutoff2: (field.cutoff * field.cutoff) as f32,
            k_rf: field.k_rf() as f32,
            c_rf: field.c_rf() as f32,
            beta: beta as f32,
            two_beta_over_sqrt_pi: (beta * std::f64::consts::FRAC_2_SQRT_PI) as f32,
            ewald_shift: field.ewald_shift() as f32,
        }
    }
}

/// `erfc(x)` and `exp(-x²)` for `x ≥ 0` in single precision, in straight-line code that
/// vectorises: `erfc` by Abramowitz and Stegun's 7.1.26 (absolute error below 1.5 × 10⁻⁷, up
/// to 7 × 10⁻⁷ for x < 1 after single-precision rounding),
/// whose factor `exp(-x²)` the Ewald force needs as well.
#[inline(always)]
pub(super) fn erfc_and_gaussian(x: f32) -> (f32, f32) {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_7, -1.453_152_1, 1.061_405_4];
    let gaussian = exp_nonpositive(-(x * x));
    let t = 1.0 / (1.0 + P * x);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    (poly * gaussian, gaussian)
}

/// `exp(y)` for `-87 < y ≤ 0` in single precision (relative error about 2 × 10⁻⁷): with
/// `y = n ln 2 + r` and `|r| ≤ ln 2 / 2`, a degree-7 Taylor polynomial in `r`, and `2ⁿ` put
/// into the exponent bits. Adding 1.5 × 2²³ rounds `y log₂ e` to the nearest integer `n` and
/// leaves `n` in the low bits of the sum, so every step is a plain vector instruction (no
/// conversion, no call).
#[inline(always)]
pub(super) fn exp_nonpositive(y: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let y = if y > -87.0 { y } else { -87.0 };
    let shifted = y * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 / 5040.0;
    let p = p * r + 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    // The low bits of `shifted` are n + 2²², so (n + 127) << 23 is 2ⁿ's bit pattern.
    let two_n = shifted.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23;
    p * f32::from_bits(two_n)
}

/// The kernel over one chunk with AVX2 code generation.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn chunk_avx2<const ENERGY: bool, const EWALD: bool>(
    chunk: &mut Chunk,
    slots: &Slots,
    k: Constants,
) -> f64 {
    chunk_kernel::<ENERGY, EWALD>(chunk, slots, k)
}

/// The kernel over one chunk with AVX-512 code generation on 256-bit vectors (32 vector
/// registers, mask registers).
///
/// # Safety
/// The processor must have AVX-512F and AVX-512VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512vl")]
pub(super) unsafe fn chunk_avx512<const ENERGY: bool, const EWALD: bool>(
    chunk: &mut Chunk,
    slots: &Slots,
    k: Constants,
) -> f64 {
    chunk_kernel::<ENERGY, EWALD>(chunk, slots, k)
}

/// The kernel over one chunk: forces into the chunk's buffer, and the energy when `ENERGY`;
/// Ewald's real-space electrostatics when `EWALD`, else reaction field.
#[inline(always)]
pub(super) fn chunk_kernel<const ENERGY: bool, const EWALD: bool>(
    chunk: &mut Chunk,
    slots: &Slots,
    k: Constants,
) -> f64 {
    let span = chunk.span();
    chunk.force.fill(0.0);
    let (fx, rest) = chunk.force.split_at_mut(span);
    let (fy, fz) = rest.split_at_mut(span);
    let lower = chunk.lower;
    let mut energy = 0.0f64;
    for (e, &ci) in chunk.i_clusters.iter().enumerate() {
        let si = ci as usize * I_CLUSTER;
        let i = Lanes::<I_CLUSTER>::load(slots, si);
        let mut fi = [[[0.0f32; J_CLUSTER]; 3]; I_CLUSTER];
        let mut vsum = [0.0f32; J_CLUSTER];
        let entries = chunk.starts[e] as usize..chunk.starts[e + 1] as usize;
        for (&cj, &mask) in chunk.j_clusters[entries.clone()].iter().zip(&chunk.masks[entries]) {
            let sj = cj as usize * J_CLUSTER;
            let j = Lanes::<J_CLUSTER>::load(slots, sj);
            let mut fj = [[0.0f32; J_CLUSTER]; 3];
            // Unrolled, so that the accumulators stay in registers.
            let [f0, f1, f2, f3] = &mut fi;
            row::<ENERGY, EWALD>(0, mask, &i, &j, &k, f0, &mut fj, &mut vsum);
            row::<ENERGY, EWALD>(1, mask, &i, &j, &k, f1, &mut fj, &mut vsum);
            row::<ENERGY, EWALD>(2, mask, &i, &j, &k, f2, &mut fj, &mut vsum);
            row::<ENERGY, EWALD>(3, mask, &i, &j, &k, f3, &mut fj, &mut vsum);
            let j = sj - lower;
            for (dst, add) in
                [&mut fx[j..j + J_CLUSTER], &mut fy[j..j + J_CLUSTER], &mut fz[j..j + J_CLUSTER]]
                    .into_iter()
                    .zip(&fj)
            {
                for (d, a) in dst.iter_mut().zip(add) {
                    *d += a;
                }
            }
        }
        let i = si - lower;
        for (a, f) in fi.iter().enumerate() {
            fx[i + a] += f[0].iter().fold(0.0, |s, v| s + v);
            fy[i + a] += f[1].iter().fold(0.0, |s, v| s + v);
            fz[i + a] += f[2].iter().fold(0.0, |s, v| s + v);
        }
        if ENERGY {
            energy += vsum.iter().fold(0.0f64, |s, &v| s + v as f64);
        }
    }
    energy
}

/// The atoms of a cluster as `N` lanes: coordinates and parameters.
struct Lanes<const N: usize> {
    x: [f32; N],
    y: [f32; N],
    z: [f32; N],
    q: [f32; N],
    c6: [f32; N],
    c12: [f32; N],
}

impl<const N: usize> Lanes<N> {
    /// The `N` slots from `first` on.
    #[inline(always)]
    fn load(slots: &Slots, first: usize) -> Lanes<N> {
        Lanes {
            x: cluster(&slots.x, first),
            y: cluster(&slots.y, first),
            z: cluster(&slots.z, first),
            q: cluster(&slots.charge, first),
            c6: cluster(&slots.sqrt_c6, first),
            c12: cluster(&slots.sqrt_c12, first),
        }
    }
}

/// One row of an entry: i atom `a` against the eight j atoms, as eight lanes. A function
/// rather than a closure so that it is always inlined into the kernel of each instruction set:
/// a closure of this size was not inlined into the `#[target_feature]` copies and ran scalar,
/// six times slower.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn row<const ENERGY: bool, const EWALD: bool>(
    a: usize,
    mask: u32,
    i: &Lanes<I_CLUSTER>,
    j: &Lanes<J_CLUSTER>,
    k: &Constants,
    fi: &mut [[f32; J_CLUSTER]; 3],
    fj: &mut [[f32; J_CLUSTER]; 3],
    vsum: &mut [f32; J_CLUSTER],
) {
    // Ewald: erfc(βr)/r and exp(-β²r²) of the row's lanes first, in a loop of their own
    // (measured 5 % faster than within the main loop).
    let (mut screened, mut gaussian) = ([0.0f32; J_CLUSTER], [0.0f32; J_CLUSTER]);
    if EWALD {
        for b in 0..J_CLUSTER {
            let dx = i.x[a] - j.x[b];
            let dy = i.y[a] - j.y[b];
            let dz = i.z[a] - j.z[b];
            let r2 = dx * dx + dy * dy + dz * dz;
            let r = if r2 < k.cutoff2 { r2 } else { 1.0 }.sqrt();
            let (erfc, g) = erfc_and_gaussian(k.beta * r);
            screened[b] = erfc / r;
            gaussian[b] = g;
        }
    }
    for b in 0..J_CLUSTER {
        let dx = i.x[a] - j.x[b];
        let dy = i.y[a] - j.y[b];
        let dz = i.z[a] - j.z[b];
        let r2 = dx * dx + dy * dy + dz * dz;
        let inside = ((mask & BIT[a][b]) != 0) & (r2 < k.cutoff2);
        // Outside lanes compute on a harmless distance and contribute zero.
        let r2 = if inside { r2 } else { 1.0 };
        let rinv = 1.0 / r2.sqrt();
        let rinv2 = rinv * rinv;
        let rinv6 = rinv2 * rinv2 * rinv2;
        // 6 C6 and 12 C12: the slots hold √(6 C6) and √(12 C12).
        let c6 = i.c6[a] * j.c6[b];
        let c12 = i.c12[a] * j.c12[b];
        let qq = i.q[a] * j.q[b];
        let coulomb = if EWALD {
            screened[b] + k.two_beta_over_sqrt_pi * gaussian[b]
        } else {
            rinv - 2.0 * k.k_rf * r2
        };
        let f = ((c12 * rinv6 - c6) * rinv6 + qq * coulomb) * rinv2;
        let f = if inside { f } else { 0.0 };
        fi[0][b] += f * dx;
        fi[1][b] += f * dy;
        fi[2][b] += f * dz;
        fj[0][b] -= f * dx;
        fj[1][b] -= f * dy;
        fj[2][b] -= f * dz;
        if ENERGY {
            let coulomb = if EWALD { screened[b] - k.ewald_shift } else { rinv + k.k_rf * r2 - k.c_rf };
            let v = (c12 * (1.0 / 12.0) * rinv6 - c6 * (1.0 / 6.0)) * rinv6 + qq * coulomb;
            vsum[b] += if inside { v } else { 0.0 };
        }
    }
}
