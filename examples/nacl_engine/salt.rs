//! The salt: Tosi-Fumi NaCl on a rock-salt lattice, its pair terms with the real-space
//! Ewald term, the short-range kernel over the halo's view, and thermal velocities.

use md_halo::Local;
use pme_redist::ONE_4PI_EPS0;

/// The rock-salt lattice constant at molten density (1.55 g/cm³, 31.9 ions per nm³), nm.
pub const LATTICE: f64 = 0.6306;
/// Na⁺ and Cl⁻: masses (u) and charges (e).
pub const MASS: [f64; 2] = [22.98977, 35.453];
pub const CHARGE: [f64; 2] = [1.0, -1.0];
/// Tosi-Fumi (1964) for NaCl: `A_ij b exp((σ_i + σ_j - r) / ρ) - C_ij / r⁶ - D_ij / r⁸`,
/// b = 0.338e-19 J, ρ = 0.317 Å, σ 1.170 and 1.585 Å, Pauling factors A, and the dispersion
/// coefficients C (1e-79 J m⁶) and D (1e-99 J m⁸), in kJ/mol and nm.
const B: f64 = 20.355;
const RHO: f64 = 0.0317;
const SIGMA: [f64; 2] = [0.1170, 0.1585];
const PAULING: [[f64; 2]; 2] = [[1.25, 1.0], [1.0, 0.75]];
const C6: [[f64; 2]; 2] = [[1.0117e-4, 6.7448e-4], [6.7448e-4, 6.9857e-3]];
const C8: [[f64; 2]; 2] = [[4.8177e-7, 8.3708e-6], [8.3708e-6, 1.40316e-4]];

/// The species of ion `global` (0 Na⁺, 1 Cl⁻) on the rock-salt lattice: eight sites per
/// cubic cell, the Na⁺ fcc sublattice first, then Cl⁻ half a cell along x from each.
pub fn species(global: u32) -> usize {
    (global as usize % 8) / 4
}

/// The initial crystal: C³ cells, positions in global order.
pub fn crystal(cells: usize) -> Vec<[f64; 3]> {
    let fcc = [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]];
    (0..cells.pow(3) * 8)
        .map(|g| {
            let cell = [g / 8 % cells, g / 8 / cells % cells, g / 8 / cells / cells];
            let site = fcc[g % 4];
            let shift = if g % 8 >= 4 { 0.5 } else { 0.0 };
            let frac = [site[0] + shift, site[1], site[2]];
            std::array::from_fn(|d| (cell[d] as f64 + frac[d] + 0.25) * LATTICE)
        })
        .collect()
}

/// The pair terms at distance `r` between species `a` and `b`: (energy, force along the
/// separation, i.e. -dV/dr), Tosi-Fumi plus the real-space Ewald term `f q q erfc(βr) / r`.
pub fn pair(r: f64, a: usize, b: usize, beta: f64) -> (f64, f64) {
    let repulsion = PAULING[a][b] * B * ((SIGMA[a] + SIGMA[b] - r) / RHO).exp();
    let (r2, r6) = (r * r, r.powi(6));
    let qq = ONE_4PI_EPS0 * CHARGE[a] * CHARGE[b];
    let erfc = libm::erfc(beta * r);
    let gauss = 2.0 * beta / std::f64::consts::PI.sqrt() * (-beta * beta * r2).exp();
    let energy = repulsion - C6[a][b] / r6 - C8[a][b] / (r6 * r2) + qq * erfc / r;
    let force = repulsion / RHO - 6.0 * C6[a][b] / (r6 * r) - 8.0 * C8[a][b] / (r6 * r2 * r)
        + qq * (erfc / r2 + gauss / r);
    (energy, force)
}

/// What a force evaluation gives this PE: its share of the potential energy and of the
/// virial `Ξ = -½ Σ r ⊗ F` (kJ/mol), the reciprocal parts only on energy steps.
#[derive(Clone, Copy, Default)]
pub struct Share {
    pub potential: f64,
    pub virial: [[f64; 3]; 3],
}

/// The short-range forces over the pairs this PE owns, through a cell list of the local
/// atoms, shifted-force at the cutoff (energy and force go smoothly to zero, so the total
/// energy is conserved); returns this PE's share of the energy and of the pair virial.
pub fn short_range(local: Local<'_, f64>, species: &[usize], cutoff: f64, beta: f64) -> Share {
    let Local { coordinates: x, forces, owner, .. } = local;
    let cut: [[(f64, f64); 2]; 2] =
        std::array::from_fn(|a| std::array::from_fn(|b| pair(cutoff, a, b, beta)));
    let lower: [f64; 3] = std::array::from_fn(|d| x.iter().map(|p| p[d]).fold(f64::MAX, f64::min));
    let upper: [f64; 3] = std::array::from_fn(|d| x.iter().map(|p| p[d]).fold(f64::MIN, f64::max));
    let cells: [usize; 3] = std::array::from_fn(|d| (((upper[d] - lower[d]) / cutoff) as usize).max(1));
    let cell_of = |p: &[f64; 3]| -> [usize; 3] {
        std::array::from_fn(|d| (((p[d] - lower[d]) / cutoff) as usize).min(cells[d] - 1))
    };
    let index = |c: [usize; 3]| (c[2] * cells[1] + c[1]) * cells[0] + c[0];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); cells.iter().product()];
    x.iter().enumerate().for_each(|(i, p)| members[index(cell_of(p))].push(i));
    forces.fill([0.0; 3]);
    let mut share = Share::default();
    for (i, p) in x.iter().enumerate() {
        let c = cell_of(p);
        let near = |d: usize| c[d].saturating_sub(1)..=(c[d] + 1).min(cells[d] - 1);
        for cz in near(2) {
            for cy in near(1) {
                for cx in near(0) {
                    for &j in members[index([cx, cy, cz])].iter().filter(|&&j| j > i) {
                        let d: [f64; 3] = std::array::from_fn(|k| p[k] - x[j][k]);
                        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                        if r2 >= cutoff * cutoff || !owner.owns(i, j) {
                            continue;
                        }
                        let r = r2.sqrt();
                        let (a, b) = (species[i], species[j]);
                        let (v, f) = pair(r, a, b, beta);
                        let (v_cut, f_cut) = cut[a][b];
                        share.potential += v - v_cut + (r - cutoff) * f_cut;
                        let scale = (f - f_cut) / r;
                        for k in 0..3 {
                            forces[i][k] += scale * d[k];
                            forces[j][k] -= scale * d[k];
                            for l in 0..3 {
                                share.virial[k][l] -= 0.5 * d[k] * scale * d[l];
                            }
                        }
                    }
                }
            }
        }
    }
    share
}

/// A Maxwell velocity for ion `global` of mass `mass` at `temperature`, from a hash of its
/// index (Box-Muller).
pub fn thermal_velocity(global: u32, mass: f64, temperature: f64) -> [f64; 3] {
    let mut state = u64::from(global).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    let mut uniform = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let scale = (md_halo::BOLTZMANN * temperature / mass).sqrt();
    std::array::from_fn(|_| {
        let (u, v) = (uniform().max(f64::MIN_POSITIVE), uniform());
        scale * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    })
}
