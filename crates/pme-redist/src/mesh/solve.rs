//! The reciprocal-space solve of smooth PME (Essmann et al. 1995, as GROMACS's
//! `solve_pme_yzx` does it): the Ewald coefficient from a tolerance, the B-spline moduli, the
//! influence function, the reciprocal energy and the convolution.
//!
//! With `X(m)` the forward transform of the charge grid `Q` (a sum with `exp(-2πi m·k/K)`),
//! the reciprocal energy is
//!
//! ```text
//! E = ½ Σ_{m ≠ 0} η(m) |X(m)|²,   η(m) = f exp(-π² |m|² / β²) / (π V |m|² B(m))
//! ```
//!
//! with `f` the electric conversion factor, `V` the box volume, `m` the reciprocal vector of
//! the integer wave vector (through the reciprocal box, so also in a triclinic box) and
//! `B(m)` the product of the B-spline moduli of its three components. Multiplying the
//! spectrum by `η` and transforming back (unnormalised) gives the convolution of `Q` with the
//! influence function, whose gradient at each charge, through its spline, is the force on it.
//!
//! The influence function depends only on the box and the grid, so it is tabulated once per
//! rank for its part of the spectrum; a step costs one multiplication and one addition per
//! complex value, and the virial a dozen more. The energy counts each value of the half
//! spectrum for itself and its mirror, but on the planes `kz = 0` and `kz = Kz/2`, which hold
//! their own mirrors.
//!
//! The virial is GROMACS's `Ξ = -½ Σ r ⊗ F` of the reciprocal term, from the solve as
//! `solve_pme_yzx` computes it: with `E(m)` the energy of one wave vector,
//!
//! ```text
//! Ξ_ab = ½ Σ_m E(m) (2 (1 + π² |m|² / β²) m_a m_b / |m|² - δ_ab)
//! ```
//!
//! which is half the energy's derivative by a strain of the box that carries the atoms along
//! (`∂E/∂ε_ab = 2 Ξ_ab`): the pressure is `P = 2 / (3V) (E_kin - Ξ)` in GROMACS's convention.

use std::ops::Range;

use super::fft::Complex32;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;
use crate::spline::weights_into;

/// GROMACS's electric conversion factor `1 / (4π ε₀)`, kJ mol⁻¹ nm e⁻².
pub const ONE_4PI_EPS0: f64 = 138.935_458;

/// The Ewald splitting coefficient β (nm⁻¹) at which the real-space term
/// `erfc(β r) / r` has fallen to `rtol` of its unscreened value at the cutoff: GROMACS's
/// `calc_ewaldcoeff_q` (`ewald-rtol`, default 1e-5), the same bisection to the same bits.
///
/// # Errors
/// [`Error::Config`] for a cutoff that is not a positive length or a tolerance outside (0, 1).
pub fn ewald_coefficient(cutoff: f64, rtol: f64) -> Result<f64> {
    if !(cutoff > 0.0 && cutoff.is_finite()) {
        return Err(Error::Config(format!(
            "the Ewald coefficient needs a positive real-space cutoff, got {cutoff} nm"
        )));
    }
    if !(rtol > 0.0 && rtol < 1.0) {
        return Err(Error::Config(format!(
            "ewald-rtol must lie strictly between 0 and 1 (GROMACS's default is 1e-5), got {rtol}"
        )));
    }
    let mut beta = 5.0f64;
    let mut doublings = 0;
    loop {
        doublings += 1;
        beta *= 2.0;
        if libm::erfc(beta * cutoff) <= rtol {
            break;
        }
    }
    let (mut low, mut high) = (0.0f64, beta);
    for _ in 0..doublings + 60 {
        beta = (low + high) / 2.0;
        if libm::erfc(beta * cutoff) > rtol {
            low = beta;
        } else {
            high = beta;
        }
    }
    Ok(beta)
}

/// `|b(m)|⁻²` of smooth PME for `m = 0..k` and a spline of order `order`: the squared modulus
/// of the discrete Fourier transform of the B-spline at the integer points, as GROMACS's
/// `make_bspline_moduli` computes it, with a zero (possible for odd orders) replaced by the
/// mean of its neighbours.
pub(crate) fn bspline_moduli(k: usize, order: usize) -> Vec<f64> {
    let (mut at_integers, mut slopes) = (vec![0.0; order], vec![0.0; order]);
    weights_into(0.0, &mut at_integers, &mut slopes);
    // The spline's values at 1, 2, .., order - 1, placed from index 1 (GROMACS's bsp_data).
    let mut data = vec![0.0f64; k];
    for (i, &w) in at_integers.iter().take(order - 1).enumerate() {
        data[(i + 1) % k] += w;
    }
    let mut moduli: Vec<f64> = (0..k)
        .map(|m| {
            let (mut c, mut s) = (0.0f64, 0.0f64);
            for (j, &d) in data.iter().enumerate() {
                let arg = 2.0 * std::f64::consts::PI * (m * j % k) as f64 / k as f64;
                c += d * arg.cos();
                s += d * arg.sin();
            }
            c * c + s * s
        })
        .collect();
    for m in 0..k {
        if moduli[m] < 1e-7 {
            moduli[m] = 0.5 * (moduli[(m + k - 1) % k] + moduli[(m + 1) % k]);
        }
    }
    moduli
}

/// The wave number of grid index `i` of `k`: `i` up to half the grid, `i - k` above it.
fn wave(i: usize, k: usize) -> f64 {
    if i < k.div_ceil(2) { i as f64 } else { i as f64 - k as f64 }
}

/// The reciprocal energy (kJ mol⁻¹) and virial (kJ mol⁻¹, GROMACS's `Ξ = -½ Σ r ⊗ F`, see
/// [`Pme`](crate::Pme)) of a mesh step: one PME rank's share from
/// [`Pme::collective_step`](crate::Pme::collective_step), the whole from
/// [`Pme::collective_energy`](crate::Pme::collective_energy).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PmeEnergy {
    /// The reciprocal energy: the sum over wave vectors `m ≠ 0`, without the self energy
    /// ([`ewald_self_energy`](crate::ewald_self_energy)) and the net-charge correction
    /// ([`PmeEnergy::charge_correction`]).
    pub energy: f64,
    /// The reciprocal virial tensor, symmetric: the pressure's long-range part is
    /// `-2 / (3V) tr Ξ`, its tensor `-2 / V Ξ` (kJ mol⁻¹ nm⁻³; 16.6054 bar each).
    pub virial: [[f64; 3]; 3],
}

impl PmeEnergy {
    /// The energy and virial of a neutralising background for a system of net charge `net_charge`
    /// (e) in a box of `volume` nm³ with Ewald coefficient `beta`: GROMACS's
    /// `ewald_charge_correction` (its `Coul. recip.` holds it), `-π f Q² / (2 V β²)`, and its
    /// virial `-E / 2` on the diagonal (the energy goes as `1 / V`). Zero for a neutral system; the
    /// mesh's energy leaves it out, so that a net charge is the engine's choice.
    pub fn charge_correction(volume: f64, net_charge: f64, beta: f64) -> PmeEnergy {
        let energy =
            -std::f64::consts::PI * ONE_4PI_EPS0 * net_charge * net_charge / (2.0 * volume * beta * beta);
        let mut virial = [[0.0; 3]; 3];
        for (d, row) in virial.iter_mut().enumerate() {
            row[d] = -0.5 * energy;
        }
        PmeEnergy { energy, virial }
    }
}

/// The Ewald self energy of charges `charges` with coefficient `beta`,
/// `-f β / √π Σ q²` (kJ mol⁻¹): what the mesh's reciprocal energy counts of each charge's
/// interaction with its own screening Gaussian, which an engine subtracts (GROMACS puts it in
/// `Coulomb (SR)`). It does not depend on positions or the box: no force, no virial.
pub fn ewald_self_energy(charges: impl IntoIterator<Item = f64>, beta: f64) -> f64 {
    let sum: f64 = charges.into_iter().map(|q| q * q).sum();
    -beta / std::f64::consts::PI.sqrt() * ONE_4PI_EPS0 * sum
}

/// The influence function η of a grid and an Ewald coefficient, in double precision.
pub(crate) struct Influence {
    k: [usize; 3],
    moduli: [Vec<f64>; 3],
    recip: [[f64; 3]; 3],
    volume: f64,
    /// π² / β².
    factor: f64,
}

impl Influence {
    pub(crate) fn new(grid: &PmeGrid, beta: f64) -> Influence {
        let k = grid.sizes();
        Influence {
            k,
            moduli: k.map(|k| bspline_moduli(k, grid.order())),
            recip: grid.reciprocal_box(),
            volume: grid.volume(),
            factor: std::f64::consts::PI * std::f64::consts::PI / (beta * beta),
        }
    }

    /// η at grid index `[x, y, z]` (z up to `Kz / 2` for the half spectrum; in a full
    /// spectrum, `z` above `Kz / 2` stands for `z - Kz`), zero at the origin. The wave numbers
    /// wrap as GROMACS's `solve_pme_yzx` wraps them.
    pub(crate) fn at(&self, [x, y, z]: [usize; 3]) -> f64 {
        if x == 0 && y == 0 && z == 0 {
            return 0.0;
        }
        let m = self.wave_vector([x, y, z]);
        let m2 = m[0] * m[0] + m[1] * m[1] + m[2] * m[2];
        let denominator = std::f64::consts::PI
            * self.volume
            * m2
            * self.moduli[0][x]
            * self.moduli[1][y]
            * self.moduli[2][z];
        ONE_4PI_EPS0 * (-self.factor * m2).exp() / denominator
    }

    /// The Cartesian reciprocal vector `m` (nm⁻¹) of grid index `[x, y, z]`, wrapped as in
    /// [`at`](Self::at).
    pub(crate) fn wave_vector(&self, [x, y, z]: [usize; 3]) -> [f64; 3] {
        let [kx, ky, kz] = self.k;
        let (mx, my) = (wave(x, kx), wave(y, ky));
        let mz = if z <= kz / 2 { z as f64 } else { z as f64 - kz as f64 };
        let r = &self.recip;
        [mx * r[0][0], mx * r[1][0] + my * r[1][1], mx * r[2][0] + my * r[2][1] + mz * r[2][2]]
    }

    /// The virial factor of wave vector `m`, `2 (1 + π² |m|² / β²) / |m|²`: a value of energy
    /// `e` adds `½ e (factor m_a m_b - δ_ab)` to the virial.
    pub(crate) fn virial_factor(&self, m: [f64; 3]) -> f64 {
        let m2 = m[0] * m[0] + m[1] * m[1] + m[2] * m[2];
        2.0 * (1.0 + self.factor * m2) / m2
    }
}

/// The virial `Ξ_ab = ½ (Σ e f m_a m_b - δ_ab Σ e)` from the sums a solve collects: `upper`
/// holds `Σ e f m_a m_b` as xx, xy, xz, yy, yz, zz, `energy` is `Σ e`.
pub(crate) fn virial_of(upper: [f64; 6], energy: f64) -> [[f64; 3]; 3] {
    let [xx, xy, xz, yy, yz, zz] = upper;
    [
        [0.5 * (xx - energy), 0.5 * xy, 0.5 * xz],
        [0.5 * xy, 0.5 * (yy - energy), 0.5 * yz],
        [0.5 * xz, 0.5 * yz, 0.5 * (zz - energy)],
    ]
}

/// The influence function on one rank's part of the spectrum, and the solve with it.
#[derive(Clone, Debug)]
pub(crate) struct Reciprocal {
    /// η per complex value of the spectrum, in its layout `[kz][y - lo][x]`.
    eta: Vec<f32>,
    /// The same, times the number of times the value stands for itself and its mirror in
    /// the energy sum (1 on the planes kz = 0 and kz = Kz/2, 2 elsewhere), halved: the
    /// energy is `Σ weight |X|²`.
    weight: Vec<f64>,
    /// The virial factor of each value, `2 (1 + π² |m|² / β²) / |m|²` (zero at the origin).
    virial_factor: Vec<f64>,
    /// The wave vector's parts for the virial, by axis: `[mx r00, mx r10, mx r20]` per x
    /// index, `[my r11, my r21]` per line, `mz r22` per z value, so that `m` of a value is
    /// two additions.
    along_x: Vec<[f64; 3]>,
    along_y: Vec<[f64; 2]>,
    along_z: Vec<f64>,
}

impl Reciprocal {
    /// The influence function of `grid` with Ewald coefficient `beta` (nm⁻¹) on the complex z
    /// values `zs` (of `Kz / 2 + 1`) and y lines `lines` of a spectrum laid out
    /// `[kz - zs.start][y - lines.start][x]` (a [`MeshFft`](crate::MeshFft)'s).
    ///
    /// # Errors
    /// [`Error::Config`] for a `beta` that is not a positive finite number, or lines or z
    /// values beyond the grid.
    pub fn new(grid: &PmeGrid, beta: f64, zs: Range<usize>, lines: Range<usize>) -> Result<Reciprocal> {
        if !(beta > 0.0 && beta.is_finite()) {
            return Err(Error::Config(format!(
                "the Ewald coefficient must be a positive number of inverse nm, got {beta} \
                 (see ewald_coefficient for the one of a cutoff and ewald-rtol)"
            )));
        }
        let [kx, ky, kz] = grid.sizes();
        if lines.end > ky || lines.start > lines.end {
            return Err(Error::Config(format!(
                "y lines {lines:?} of a spectrum lie outside the grid's {ky} lines"
            )));
        }
        let kzc = kz / 2 + 1;
        if zs.end > kzc || zs.start > zs.end {
            return Err(Error::Config(format!(
                "complex z values {zs:?} of a spectrum lie outside the grid's {kzc}"
            )));
        }
        let influence = Influence::new(grid, beta);
        let r = grid.reciprocal_box();
        let along_x = (0..kx).map(|x| influence.wave_vector([x, 0, 0])).collect();
        let along_y = lines
            .clone()
            .map(|y| {
                let my = wave(y, ky);
                [my * r[1][1], my * r[2][1]]
            })
            .collect();
        let along_z = zs.clone().map(|c| c as f64 * r[2][2]).collect();
        let n = zs.len() * lines.len() * kx;
        let (mut eta, mut weight) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut virial_factor = Vec::with_capacity(n);
        for c in zs {
            let corner = if c == 0 || (kz.is_multiple_of(2) && c == kz / 2) { 0.5 } else { 1.0 };
            for y in lines.clone() {
                for x in 0..kx {
                    let value = influence.at([x, y, c]);
                    eta.push(value as f32);
                    weight.push(corner * value);
                    let origin = x == 0 && y == 0 && c == 0;
                    virial_factor.push(if origin {
                        0.0
                    } else {
                        influence.virial_factor(influence.wave_vector([x, y, c]))
                    });
                }
            }
        }
        Ok(Reciprocal { eta, weight, virial_factor, along_x, along_y, along_z })
    }

    /// The convolution alone, for a step that needs no energy: the spectrum multiplied by
    /// the influence function.
    ///
    /// # Errors
    /// [`Error::Config`] for a spectrum of another size than the one this was built for.
    pub fn convolve(&self, spectrum: &mut [Complex32]) -> Result<()> {
        self.check(spectrum)?;
        for (v, &eta) in spectrum.iter_mut().zip(&self.eta) {
            *v *= eta;
        }
        Ok(())
    }

    fn check(&self, spectrum: &[Complex32]) -> Result<()> {
        if spectrum.len() != self.eta.len() {
            return Err(Error::Config(format!(
                "the PME solve was built for {} spectrum values and was given {}",
                self.eta.len(),
                spectrum.len()
            )));
        }
        Ok(())
    }

    /// The solve: the reciprocal energy and virial of this rank's part of the spectrum (summed
    /// in spectrum order, in double precision), and the spectrum multiplied by the influence
    /// function, ready for the backward transform.
    ///
    /// # Errors
    /// [`Error::Config`] for a spectrum of another size than the one this was built for.
    pub fn solve(&self, spectrum: &mut [Complex32]) -> Result<PmeEnergy> {
        self.check(spectrum)?;
        let kx = self.along_x.len();
        let mut energy = 0.0f64;
        // The wave vector of a value is its x part p(x) plus its line's part q = (0, q1, q2):
        // per x, the sums over lines of e f, e f q1, e f q2, e f q1², e f q1 q2 and e f q2²
        // (each x its own accumulator, so the loop runs in vectors); the virial's sums
        // Σ e f m_a m_b follow from them and p in O(Kx) at the end.
        let mut sums = [const { Vec::<f64>::new() }; 6];
        for sum in &mut sums {
            sum.resize(kx, 0.0);
        }
        let lines = spectrum
            .chunks_exact_mut(kx)
            .zip(self.eta.chunks_exact(kx))
            .zip(self.weight.chunks_exact(kx))
            .zip(self.virial_factor.chunks_exact(kx));
        let walls = self.along_z.iter().flat_map(|&mz| self.along_y.iter().map(move |&my| (my, mz)));
        for ((((values, etas), weights), factors), ([my1, my2], mz)) in lines.zip(walls) {
            let (q1, q2) = (my1, my2 + mz);
            let q = [1.0, q1, q2, q1 * q1, q1 * q2, q2 * q2];
            let [s0, s1, s2, s3, s4, s5] = &mut sums;
            for (((((v, &eta), &w), &factor), x0), ((((x1, x2), x3), x4), x5)) in
                values.iter_mut().zip(etas).zip(weights).zip(factors).zip(s0.iter_mut()).zip(
                    s1.iter_mut().zip(s2.iter_mut()).zip(s3.iter_mut()).zip(s4.iter_mut()).zip(s5.iter_mut()),
                )
            {
                let e = w * v.norm_sqr() as f64;
                energy += e;
                *v *= eta;
                let f = e * factor;
                *x0 += f * q[0];
                *x1 += f * q[1];
                *x2 += f * q[2];
                *x3 += f * q[3];
                *x4 += f * q[4];
                *x5 += f * q[5];
            }
        }
        // Σ e f (p_a + q_a)(p_b + q_b) per x, with q_x = 0.
        let mut upper = [0.0f64; 6];
        for (x, &[p0, p1, p2]) in self.along_x.iter().enumerate() {
            let [t, t1, t2, t11, t12, t22] = [0, 1, 2, 3, 4, 5].map(|i| sums[i][x]);
            upper[0] += p0 * p0 * t;
            upper[1] += p0 * (p1 * t + t1);
            upper[2] += p0 * (p2 * t + t2);
            upper[3] += p1 * p1 * t + 2.0 * p1 * t1 + t11;
            upper[4] += p1 * p2 * t + p1 * t2 + p2 * t1 + t12;
            upper[5] += p2 * p2 * t + 2.0 * p2 * t2 + t22;
        }
        Ok(PmeEnergy { energy, virial: virial_of(upper, energy) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewald_coefficient_reaches_the_tolerance_at_the_cutoff() {
        let beta = ewald_coefficient(0.9, 1e-5).expect("valid");
        assert!((libm::erfc(beta * 0.9) - 1e-5).abs() < 1e-12, "erfc(β rc) = {}", libm::erfc(beta * 0.9));
        // GROMACS's log for rc = 0.9 nm, ewald-rtol 1e-5: "Using a Gaussian width (1/beta) of 0.288146 nm".
        assert!((1.0 / beta - 0.288146).abs() < 5e-7, "1/β = {}", 1.0 / beta);
        assert!(ewald_coefficient(0.9, 0.0).is_err());
        assert!(ewald_coefficient(0.9, 1.0).is_err());
        assert!(ewald_coefficient(-1.0, 1e-5).is_err());
    }

    #[test]
    fn moduli_of_the_cubic_spline() {
        // For order 4, |Σ M4(k+1) e^{2πi m k/K}|² = (2/3 + cos(2π m/K) / 3)².
        let k = 12;
        for (m, &v) in bspline_moduli(k, 4).iter().enumerate() {
            let want = (2.0 / 3.0 + (2.0 * std::f64::consts::PI * m as f64 / k as f64).cos() / 3.0).powi(2);
            assert!((v - want).abs() < 1e-14, "m = {m}: {v} against {want}");
        }
    }

    #[test]
    fn charge_correction_virial_is_its_strain_derivative() {
        let (volume, q, beta) = (27.0, 1.7, 3.1);
        let c = PmeEnergy::charge_correction(volume, q, beta);
        assert!(
            (c.energy + std::f64::consts::PI * ONE_4PI_EPS0 * q * q / (2.0 * volume * beta * beta)).abs()
                < 1e-12
        );
        // A strain eps along one axis scales the volume by 1 + eps.
        let h = 1e-6;
        let up = PmeEnergy::charge_correction(volume * (1.0 + h), q, beta).energy;
        let down = PmeEnergy::charge_correction(volume * (1.0 - h), q, beta).energy;
        let derivative = (up - down) / (2.0 * h);
        for d in 0..3 {
            assert!(
                (2.0 * c.virial[d][d] - derivative).abs() < 1e-6 * derivative.abs(),
                "{c:?} {derivative}"
            );
        }
        assert_eq!(c.virial[0][1], 0.0);
        assert_eq!(PmeEnergy::charge_correction(volume, 0.0, beta), PmeEnergy::default());
    }

    #[test]
    fn self_energy_is_the_gaussians_own() {
        let beta = 3.47;
        let e = ewald_self_energy([0.41, 0.41, -0.82], beta);
        let want = -ONE_4PI_EPS0 * beta / std::f64::consts::PI.sqrt() * (2.0 * 0.41 * 0.41 + 0.82 * 0.82);
        assert!((e - want).abs() < 1e-12 * want.abs(), "{e} against {want}");
    }

    #[test]
    fn wave_numbers_wrap_past_half_the_grid() {
        assert_eq!((0..6).map(|i| wave(i, 6)).collect::<Vec<_>>(), [0.0, 1.0, 2.0, -3.0, -2.0, -1.0]);
        assert_eq!((0..5).map(|i| wave(i, 5)).collect::<Vec<_>>(), [0.0, 1.0, 2.0, -2.0, -1.0]);
    }
}
