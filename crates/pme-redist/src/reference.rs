//! The references PME is checked against, serial and in double precision:
//!
//! - [`ewald_sum`]: the reciprocal part of the Ewald sum by direct summation over wave
//!   vectors, converged to a requested accuracy: what smooth PME approximates;
//! - [`serial_fft`]: the 3-D FFT of a whole grid;
//! - [`serial_spread`] and [`serial_gather`]: the charges onto a whole grid, and the force on
//!   a charge from it;
//! - [`serial_pme`]: smooth PME on one process over the whole grid (spread, 3-D FFT, solve,
//!   backward FFT, gather), the same method as the distributed one, so the two agree to
//!   rounding.
//!
//! The unit tests here check that serial PME converges to the Ewald sum at the rate of its
//! interpolation order `n` (halving the spacing divides the force error by about 2ⁿ⁻¹ and the
//! energy's by about 2ⁿ) and the gather against the numerical gradient of the energy. The multi-PE tests
//! (`tests/pme_mesh.rs`) check the distributed FFT against [`serial_fft`] on grids that do not
//! divide evenly by the rank count, and whole steps against [`serial_pme`] to single-precision
//! rounding and against [`ewald_sum`] to the grid's accuracy, with the same bits on every
//! transpose and redistribution path.

use num_complex::Complex;
use rustfft::FftPlanner;

use crate::error::{Error, Result};
use crate::grid::PmeGrid;
use crate::mesh::{Influence, ONE_4PI_EPS0, virial_of};
use crate::particle::RVec;
use crate::spline::weights_into;

/// Energy and forces of a reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Electrostatics {
    /// The reciprocal energy in kJ mol⁻¹.
    pub energy: f64,
    /// The reciprocal force on each atom in kJ mol⁻¹ nm⁻¹.
    pub forces: Vec<[f64; 3]>,
    /// The reciprocal virial, GROMACS's `Ξ = -½ Σ r ⊗ F` of the reciprocal term, in
    /// kJ mol⁻¹ (see [`PmeEnergy`](crate::PmeEnergy)).
    pub virial: [[f64; 3]; 3],
}

/// The reciprocal part of the Ewald sum of point charges `charges` at `positions` in the
/// periodic box `box_vectors` (GROMACS's box vectors) with Ewald coefficient `beta` (nm⁻¹),
///
/// ```text
/// E = f / (2π V) Σ_{m ≠ 0} exp(-π² m² / β²) / m² |S(m)|²,   S(m) = Σ_j q_j exp(2πi m·r_j)
/// ```
///
/// summed directly over every wave vector whose Gaussian factor `exp(-π² m² / β²)` is at
/// least `tolerance` (1e-16 sums to double precision). The cost grows as the number of atoms
/// times `(β / (π L))³ log(1 / tolerance)^{3/2}`: meant for test systems of up to some
/// thousands of atoms.
///
/// # Errors
/// [`Error::Config`] for a box not of GROMACS's shape, a `beta` or `tolerance` out of range,
/// or positions and charges of different lengths.
pub fn ewald_sum(
    box_vectors: [RVec; 3],
    positions: &[RVec],
    charges: &[f32],
    beta: f64,
    tolerance: f64,
) -> Result<Electrostatics> {
    if positions.len() != charges.len() {
        return Err(Error::Config(format!(
            "{} positions but {} charges for the Ewald sum",
            positions.len(),
            charges.len()
        )));
    }
    if !(beta > 0.0 && beta.is_finite() && tolerance > 0.0 && tolerance < 1.0) {
        return Err(Error::Config(format!(
            "the Ewald sum needs a positive coefficient and a tolerance in (0, 1), got β = {beta}, \
             tolerance = {tolerance}"
        )));
    }
    // The box's shape is checked by the grid; its reciprocal box is the one PME uses.
    let grid = PmeGrid::builder(box_vectors, &[0]).sizes([8, 8, 8]).build()?;
    let recip = grid.reciprocal_box();
    let volume = grid.volume();
    let pi = std::f64::consts::PI;
    // |m| reaches m_max where the Gaussian falls to the tolerance; since m · a_d = n_d, the
    // integers along d reach m_max |a_d|.
    let m_max = beta / pi * (-tolerance.ln()).sqrt();
    let reach: [i64; 3] = std::array::from_fn(|d| {
        let a = box_vectors[d].map(f64::from);
        (m_max * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()).ceil() as i64
    });
    let x: Vec<[f64; 3]> = positions.iter().map(|p| p.map(f64::from)).collect();
    let q: Vec<f64> = charges.iter().map(|&c| c as f64).collect();
    let mut energy = 0.0f64;
    let mut upper = [0.0f64; 6];
    let mut forces = vec![[0.0f64; 3]; x.len()];
    let mut phases = vec![(0.0f64, 0.0f64); x.len()];
    // Half of the wave vectors: m and -m contribute alike.
    for n0 in 0..=reach[0] {
        for n1 in -reach[1]..=reach[1] {
            for n2 in -reach[2]..=reach[2] {
                let first_nonzero = [n0, n1, n2].into_iter().find(|&n| n != 0);
                if first_nonzero.is_none_or(|n| n < 0) {
                    continue;
                }
                let n = [n0 as f64, n1 as f64, n2 as f64];
                let m: [f64; 3] = std::array::from_fn(|e| (0..3).map(|d| n[d] * recip[e][d]).sum());
                let m2 = m[0] * m[0] + m[1] * m[1] + m[2] * m[2];
                let gauss = (-pi * pi * m2 / (beta * beta)).exp();
                if gauss < tolerance {
                    continue;
                }
                let (mut s_re, mut s_im) = (0.0f64, 0.0f64);
                for ((xj, &qj), phase) in x.iter().zip(&q).zip(phases.iter_mut()) {
                    let arg = 2.0 * pi * (m[0] * xj[0] + m[1] * xj[1] + m[2] * xj[2]);
                    let (sin, cos) = arg.sin_cos();
                    *phase = (cos, sin);
                    s_re += qj * cos;
                    s_im += qj * sin;
                }
                // Twice: for m and for -m.
                let weight = 2.0 * ONE_4PI_EPS0 / (2.0 * pi * volume) * gauss / m2;
                let e = weight * (s_re * s_re + s_im * s_im);
                energy += e;
                // ∂E(m)/∂ε_ab through m (m_a m_b terms) and the volume (δ_ab).
                let f = e * 2.0 * (1.0 + pi * pi * m2 / (beta * beta)) / m2;
                for (u, (a, b)) in upper.iter_mut().zip([(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]) {
                    *u += f * m[a] * m[b];
                }
                // F_j = -∂E/∂r_j = weight · 4π q_j m Im(conj(S) e^{2πi m·r_j}).
                for ((f, &(cos, sin)), &qj) in forces.iter_mut().zip(&phases).zip(&q) {
                    let im = s_re * sin - s_im * cos;
                    for e in 0..3 {
                        f[e] += weight * 4.0 * pi * qj * m[e] * im;
                    }
                }
            }
        }
    }
    Ok(Electrostatics { energy, forces, virial: virial_of(upper, energy) })
}

/// Smooth PME on one process: the charges spread onto the whole grid in double precision,
/// the 3-D FFT, the solve with the same influence function as the distributed solve, the
/// backward FFT and the gather. The reference of the distributed PME: the same method on the
/// same grid, differing only by rounding (the distributed one runs in single precision).
///
/// # Errors
/// [`Error::Config`] for a `beta` that is not positive, or positions and charges of
/// different lengths.
pub fn serial_pme(grid: &PmeGrid, positions: &[RVec], charges: &[f32], beta: f64) -> Result<Electrostatics> {
    if positions.len() != charges.len() {
        return Err(Error::Config(format!(
            "{} positions but {} charges for the serial PME",
            positions.len(),
            charges.len()
        )));
    }
    if !(beta > 0.0 && beta.is_finite()) {
        return Err(Error::Config(format!("the Ewald coefficient must be positive, got {beta}")));
    }
    let [kx, ky, kz] = grid.sizes();
    let mut data: Vec<Complex<f64>> =
        serial_spread(grid, positions, charges).into_iter().map(|v| Complex::new(v, 0.0)).collect();
    fft_3d(&mut data, [kx, ky, kz], false);
    let influence = Influence::new(grid, beta);
    let mut energy = 0.0f64;
    let mut upper = [0.0f64; 6];
    // Energy and virial over the half spectrum z <= Kz / 2, each value standing for itself
    // and its mirror but on the planes z = 0 and z = Kz / 2, as the distributed solve and
    // GROMACS's solve_pme_yzx count them: the sign of a Nyquist component along x or y of a
    // mirrored value is then the one the half spectrum gives it, which moves the virial's
    // off-diagonal elements (by 1e-5 of the largest at order 5, 1e-7 at order 4) where the
    // full spectrum's own signs would.
    for x in 0..kx {
        for y in 0..ky {
            for z in 0..kz {
                let v = &mut data[(x * ky + y) * kz + z];
                let eta = influence.at([x, y, z]);
                let corner = if z == 0 || (kz.is_multiple_of(2) && z == kz / 2) { 0.5 } else { 1.0 };
                let e = if z <= kz / 2 { corner * eta * v.norm_sqr() } else { 0.0 };
                energy += e;
                *v *= eta;
                if e != 0.0 {
                    let m = influence.wave_vector([x, y, z]);
                    let f = e * influence.virial_factor(m);
                    for (u, (a, b)) in upper.iter_mut().zip([(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)])
                    {
                        *u += f * m[a] * m[b];
                    }
                }
            }
        }
    }
    fft_3d(&mut data, [kx, ky, kz], true);
    let convolved: Vec<f64> = data.iter().map(|v| v.re).collect();
    let forces =
        positions.iter().zip(charges).map(|(&x, &q)| serial_gather(grid, &convolved, x, q)).collect();
    Ok(Electrostatics { energy, forces, virial: virial_of(upper, energy) })
}

/// The forward 3-D FFT (`X(m) = Σ_k data(k) exp(-2πi m·k / K)`, unnormalised) of a real grid
/// of `k[0] × k[1] × k[2]` points (last index fastest), in double precision, every point of
/// the spectrum in the same layout: the reference of [`MeshFft`](crate::MeshFft).
pub fn serial_fft(k: [usize; 3], data: &[f64]) -> Vec<Complex<f64>> {
    let mut spectrum: Vec<Complex<f64>> = data.iter().map(|&v| Complex::new(v, 0.0)).collect();
    fft_3d(&mut spectrum, k, false);
    spectrum
}

/// An unnormalised 3-D FFT of `data` (`k[0] × k[1] × k[2]`, last index fastest), forward
/// (`exp(-2πi ...)`) or inverse, one dimension at a time.
fn fft_3d(data: &mut [Complex<f64>], k: [usize; 3], inverse: bool) {
    let mut planner = FftPlanner::<f64>::new();
    let plans: Vec<_> = k
        .iter()
        .map(|&n| if inverse { planner.plan_fft_inverse(n) } else { planner.plan_fft_forward(n) })
        .collect();
    let strides = [k[1] * k[2], k[2], 1];
    let mut line = Vec::new();
    for d in 0..3 {
        let (n, stride) = (k[d], strides[d]);
        line.resize(n, Complex::new(0.0, 0.0));
        for start in 0..data.len() {
            // Each line once: from the points whose index along d is zero.
            if (start / stride) % n != 0 {
                continue;
            }
            for (i, v) in line.iter_mut().enumerate() {
                *v = data[start + i * stride];
            }
            plans[d].process(&mut line);
            for (i, v) in line.iter().enumerate() {
                data[start + i * stride] = *v;
            }
        }
    }
}

/// The grid line below a position and the spline weights along each dimension.
fn locate_weights(grid: &PmeGrid, x: RVec) -> ([usize; 3], [Vec<f64>; 3]) {
    let (index, w, _) = locate_weights_derivatives(grid, x);
    (index, w)
}

/// As `locate_weights`, with the derivatives.
fn locate_weights_derivatives(grid: &PmeGrid, x: RVec) -> ([usize; 3], [Vec<f64>; 3], [Vec<f64>; 3]) {
    let (index, fraction) = grid.locate(x);
    let n = grid.order();
    let (mut w, mut dw) = (std::array::from_fn(|_| vec![0.0; n]), std::array::from_fn(|_| vec![0.0; n]));
    for d in 0..3 {
        weights_into(fraction[d], &mut w[d], &mut dw[d]);
    }
    (index, w, dw)
}

/// The serial reference: every charge spread onto the whole grid, `Kx × Ky × Kz`, x major,
/// in double precision.
pub fn serial_spread(grid: &PmeGrid, positions: &[RVec], charges: &[f32]) -> Vec<f64> {
    let [kx, ky, kz] = grid.sizes();
    let mut data = vec![0f64; kx * ky * kz];
    for (x, &q) in positions.iter().zip(charges) {
        let (index, w) = locate_weights(grid, *x);
        for_each_point(grid, index, |at, [i, a, b]| data[at] += q as f64 * w[0][i] * w[1][a] * w[2][b]);
    }
    data
}

/// Calls `f` with the index into the whole grid (`Kx × Ky × Kz`, x major, periodic) of each
/// point of the `n³` stencil (`n` the grid's order) whose last point is `index`, and the
/// point's place in it.
fn for_each_point(grid: &PmeGrid, index: [usize; 3], mut f: impl FnMut(usize, [usize; 3])) {
    let [kx, ky, kz] = grid.sizes();
    let n = grid.order();
    for i in 0..n {
        let gx = (index[0] + kx + i + 1 - n) % kx;
        for a in 0..n {
            let gy = (index[1] + ky + a + 1 - n) % ky;
            for b in 0..n {
                let gz = (index[2] + kz + b + 1 - n) % kz;
                f((gx * ky + gy) * kz + gz, [i, a, b]);
            }
        }
    }
}

/// The serial reference of the gather: the force on an atom at `x` with charge `q` from the
/// whole grid `data` (`Kx × Ky × Kz`, x major, as [`serial_spread`] returns), that is minus the
/// gradient with respect to `x` (Cartesian) of `q` times the grid interpolated at `x`,
/// `q Σ θx θy θz · data`.
pub fn serial_gather(grid: &PmeGrid, data: &[f64], x: RVec, q: f32) -> [f64; 3] {
    let (index, w, dw) = locate_weights_derivatives(grid, x);
    let mut gradient = [0.0f64; 3];
    for_each_point(grid, index, |at, [i, a, b]| {
        let v = data[at];
        gradient[0] += v * dw[0][i] * w[1][a] * w[2][b];
        gradient[1] += v * w[0][i] * dw[1][a] * w[2][b];
        gradient[2] += v * w[0][i] * w[1][a] * dw[2][b];
    });
    grid.force(q as f64, gradient)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Charges in a small triclinic box, neutral, at scattered places.
    fn system() -> ([RVec; 3], Vec<RVec>, Vec<f32>) {
        let b = [[2.1f32, 0.0, 0.0], [0.3, 1.9, 0.0], [-0.4, 0.5, 2.3]];
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let n = 40;
        let positions: Vec<RVec> = (0..n)
            .map(|_| {
                let s = [next(), next(), next()];
                std::array::from_fn(|e| (0..3).map(|d| s[d] * b[d][e] as f64).sum::<f64>() as f32)
            })
            .collect();
        let charges: Vec<f32> = (0..n).map(|i| if i % 2 == 0 { 0.41 } else { -0.41 }).collect();
        (b, positions, charges)
    }

    #[test]
    fn ewald_forces_are_minus_the_energy_gradient() {
        let (b, mut x, q) = system();
        let beta = 3.0;
        let sum = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid");
        for (atom, e) in [(3usize, 0usize), (17, 1), (28, 2)] {
            let h = 1e-3f32;
            let original = x[atom][e];
            x[atom][e] = original + h;
            let up = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid").energy;
            x[atom][e] = original - h;
            let down = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid").energy;
            x[atom][e] = original;
            let step = (original + h) as f64 - (original - h) as f64;
            let numeric = -(up - down) / step;
            let analytic = sum.forces[atom][e];
            assert!(
                (numeric - analytic).abs() < 1e-4 * analytic.abs().max(1.0),
                "atom {atom} dim {e}: {numeric} against {analytic}"
            );
        }
        let total: [f64; 3] = std::array::from_fn(|e| sum.forces.iter().map(|f| f[e]).sum());
        assert!(total.iter().all(|t| t.abs() < 1e-9), "the reciprocal forces sum to zero: {total:?}");
    }

    #[test]
    fn serial_pme_converges_to_the_ewald_sum() {
        let (b, x, q) = system();
        let beta = 3.0;
        let exact = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid");
        let scale = exact.forces.iter().flat_map(|f| f.iter()).fold(0.0f64, |m, v| m.max(v.abs()));
        // Halving the spacing must cut the error as order-4 interpolation predicts: the
        // forces by about 2³, the energy by about 2⁴ (measured 8.2x and 22x, then 7.8x and 16x).
        let (mut previous_force, mut previous_energy) = (f64::INFINITY, f64::INFINITY);
        for k in [16usize, 32, 64] {
            let grid = PmeGrid::builder(b, &[0]).sizes([k, k, k]).build().expect("valid");
            let pme = serial_pme(&grid, &x, &q, beta).expect("valid");
            let force_error = pme
                .forces
                .iter()
                .zip(&exact.forces)
                .flat_map(|(a, b)| (0..3).map(move |e| (a[e] - b[e]).abs()))
                .fold(0.0f64, f64::max)
                / scale;
            let energy_error = (pme.energy - exact.energy).abs() / exact.energy.abs();
            assert!(
                force_error < previous_force / 6.0,
                "grid {k}: force error {force_error} after {previous_force}"
            );
            assert!(
                energy_error < previous_energy / 10.0,
                "grid {k}: energy error {energy_error} after {previous_energy}"
            );
            (previous_force, previous_energy) = (force_error, energy_error);
        }
        assert!(previous_force < 1e-4, "the finest grid's relative force error: {previous_force}");
        assert!(previous_energy < 1e-5, "the finest grid's relative energy error: {previous_energy}");
    }

    #[test]
    fn higher_orders_converge_at_their_rate() {
        // Order n: halving the spacing divides the force error by about 2^(n-1), the
        // energy's by about 2^n (order 4: 8 and 16, as above). Measured from 16 to 32 points:
        // order 5 24x and 102x, order 6 45x and 148x.
        let (b, x, q) = system();
        let beta = 3.0;
        let exact = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid");
        let scale = exact.forces.iter().flat_map(|f| f.iter()).fold(0.0f64, |m, v| m.max(v.abs()));
        let errors = |order: usize, k: usize| {
            let grid = PmeGrid::builder(b, &[0]).sizes([k, k, k]).order(order).build().expect("valid");
            let pme = serial_pme(&grid, &x, &q, beta).expect("valid");
            let force = pme
                .forces
                .iter()
                .zip(&exact.forces)
                .flat_map(|(a, b)| (0..3).map(move |e| (a[e] - b[e]).abs()))
                .fold(0.0f64, f64::max)
                / scale;
            (force, (pme.energy - exact.energy).abs() / exact.energy.abs())
        };
        for (order, force_rate, energy_rate) in [(5, 12.0, 20.0), (6, 24.0, 40.0)] {
            let (coarse, fine) = (errors(order, 16), errors(order, 32));
            assert!(coarse.0 / fine.0 > force_rate, "order {order}: forces {coarse:?} -> {fine:?}");
            assert!(coarse.1 / fine.1 > energy_rate, "order {order}: energy {coarse:?} -> {fine:?}");
        }
        // At one spacing each order beats the one below it.
        let at_16: Vec<f64> = (4..=8).map(|order| errors(order, 16).0).collect();
        assert!(at_16.windows(2).all(|w| w[1] < w[0]), "force errors by order at 16 points: {at_16:?}");
    }

    /// The energy of `system()` under the strain `x_a += eps x_b` of box and atoms, by
    /// `energy_of(box, positions)`.
    fn strained(a: usize, b: usize, eps: f64, energy_of: &dyn Fn([RVec; 3], &[RVec]) -> f64) -> (f64, f64) {
        let (mut bx, mut x, _) = system();
        let original = bx[2][a];
        for v in bx.iter_mut().chain(x.iter_mut()) {
            v[a] = (v[a] as f64 + eps * v[b] as f64) as f32;
        }
        // The strain the f32 box carries (box vector c has every component).
        let applied = (bx[2][a] as f64 - original as f64) / bx[2][b] as f64;
        (energy_of(bx, &x), applied)
    }

    /// `∂E/∂ε_ab` by central differences against `2 Ξ_ab`, for the diagonal and the shears a
    /// GROMACS box allows.
    fn check_virial(virial: [[f64; 3]; 3], energy_of: &dyn Fn([RVec; 3], &[RVec]) -> f64, tolerance: f64) {
        let scale = (0..3).map(|d| virial[d][d].abs()).fold(0.0f64, f64::max);
        for (a, b) in [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)] {
            // The f32 box and positions round each strained value by up to 6e-8 of it:
            // a strain of 4e-3 keeps that below 2e-5 of the difference.
            let h = 4e-3;
            let (up, hu) = strained(a, b, h, energy_of);
            let (down, hd) = strained(a, b, -h, energy_of);
            let derivative = (up - down) / (hu - hd);
            assert!(
                (derivative - 2.0 * virial[a][b]).abs() <= tolerance * scale,
                "strain {a}{b}: dE/de {derivative} against 2 Xi {} (scale {scale})",
                2.0 * virial[a][b]
            );
        }
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            assert_eq!(virial[a][b].to_bits(), virial[b][a].to_bits(), "symmetric");
        }
    }

    #[test]
    fn ewald_virial_is_the_strain_derivative() {
        let (b, x, q) = system();
        let beta = 3.0;
        let sum = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid");
        check_virial(sum.virial, &|b, x| ewald_sum(b, x, &q, beta, 1e-16).expect("valid").energy, 1e-4);
    }

    #[test]
    fn pme_virial_is_the_strain_derivative_and_converges_to_ewald() {
        let (b, x, q) = system();
        let beta = 3.0;
        let exact = ewald_sum(b, &x, &q, beta, 1e-16).expect("valid");
        // The method's own error on 32 points: measured 3.5e-4 of the largest diagonal
        // element at order 4, 5e-6 at order 6.
        for (order, accuracy) in [(4, 5e-4), (5, 1e-4), (6, 5e-5)] {
            let grid = PmeGrid::builder(b, &[0]).sizes([32, 32, 32]).order(order).build().expect("valid");
            let pme = serial_pme(&grid, &x, &q, beta).expect("valid");
            // The grid's own energy, on grids of the same size over each strained box.
            let energy_of = |b: [RVec; 3], x: &[RVec]| {
                let grid = PmeGrid::builder(b, &[0]).sizes([32, 32, 32]).order(order).build().expect("valid");
                serial_pme(&grid, x, &q, beta).expect("valid").energy
            };
            check_virial(pme.virial, &energy_of, 1e-4);
            let scale = (0..3).map(|d| exact.virial[d][d].abs()).fold(0.0f64, f64::max);
            let off = (0..9)
                .map(|i| (pme.virial[i / 3][i % 3] - exact.virial[i / 3][i % 3]).abs())
                .fold(0.0, f64::max);
            assert!(
                off < accuracy * scale,
                "order {order}: virial {:?} against the Ewald sum's {:?}",
                pme.virial,
                exact.virial
            );
        }
    }

    /// A generator of numbers in [-1, 1).
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        }
    }

    /// `q` times the grid `phi` interpolated at `x`: the energy whose gradient the gather
    /// returns, computed from the weights alone.
    fn energy(grid: &PmeGrid, phi: &[f64], x: [f64; 3], q: f32) -> f64 {
        let (index, w) = locate_weights(grid, x.map(|v| v as f32));
        let mut sum = 0.0;
        for_each_point(grid, index, |at, [i, a, b]| sum += phi[at] * w[0][i] * w[1][a] * w[2][b]);
        q as f64 * sum
    }

    /// `serial_gather` against minus the central difference of the energy along each
    /// Cartesian direction, at random positions in and around the box.
    fn check_gather_against_differences(box_vectors: [RVec; 3], k: [usize; 3]) {
        let grid = PmeGrid::builder(box_vectors, &[0]).sizes(k).build().expect("fits");
        let mut random = Random(0x2545_F491_4F6C_DD1D);
        let phi: Vec<f64> = (0..k.iter().product::<usize>()).map(|_| random.next()).collect();
        // Positions exactly representable in f32 and a step that keeps them so: the points of
        // the difference are the points the energy is evaluated at.
        let h = 1.0 / 1024.0;
        let mut worst = 0f64;
        let mut largest = 0f64;
        for _ in 0..200 {
            let s: [f64; 3] = std::array::from_fn(|_| 0.75 * random.next() + 0.5);
            let x: [f64; 3] = std::array::from_fn(|e| {
                let v: f64 = (0..3).map(|v| s[v] * box_vectors[v][e] as f64).sum();
                (v * 4096.0).round() / 4096.0
            });
            let q = (random.next() * 2.0) as f32;
            let force = serial_gather(&grid, &phi, x.map(|v| v as f32), q);
            for e in 0..3 {
                let (mut up, mut down) = (x, x);
                up[e] += h;
                down[e] -= h;
                let numerical = -(energy(&grid, &phi, up, q) - energy(&grid, &phi, down, q)) / (2.0 * h);
                worst = worst.max((force[e] - numerical).abs());
                largest = largest.max(numerical.abs());
            }
        }
        assert!(largest > 1.0, "the test grid gives forces");
        // The central difference is off by O(h²) times the third derivative of the spline
        // (piecewise cubic in each fractional coordinate); h is a few thousandths of a grid
        // spacing.
        assert!(worst <= 5e-4 * largest, "{box_vectors:?}: off by {worst:e} (largest force {largest:e})");
    }

    #[test]
    fn gather_is_minus_the_gradient_in_a_triclinic_box() {
        check_gather_against_differences([[3.0, 0.0, 0.0], [1.0, 2.8, 0.0], [-1.2, 1.1, 2.6]], [12, 14, 15]);
    }

    #[test]
    fn gather_is_minus_the_gradient_in_a_rectangular_box() {
        check_gather_against_differences([[3.0, 0.0, 0.0], [0.0, 2.8, 0.0], [0.0, 0.0, 2.6]], [12, 14, 15]);
    }
}
