//! A real force, so that the exchanged forces mean something: Lennard-Jones plus
//! electrostatics within a cutoff, reaction field (ε_rf = ∞) or the real-space part of Ewald
//! summation (with the exclusion corrections and self energy PME needs), pairs within one
//! molecule excluded, found with cell lists.
//!
//! On a domain, a pair within the cutoff is computed where the halo exchange says it is owned
//! ([`HaloExchange::pair_owner`]): every pair exactly once across all domains. Each atom
//! gathers the forces of its own pairs in a fixed order (neighbour cells, then atoms, by
//! index), so the result is the same whatever the number of threads; the price is that each
//! pair is evaluated from both ends.

use md_halo::{HaloExchange, PbcBox, RVec};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::structure::Structure;
use crate::types::{AtomParams, TypeTable};

/// GROMACS's electric conversion factor, kJ mol⁻¹ nm e⁻².
pub(crate) const ONE_4PI_EPS0: f64 = 138.935_458;

/// How the electrostatic interaction is computed within the cutoff.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Electrostatics {
    /// Reaction field with ε_rf = ∞, shifted to zero at the cutoff.
    ReactionField,
    /// The real-space part of Ewald summation (PME): `erfc(β r) / r`, shifted to zero at the
    /// cutoff as GROMACS's default `coulomb-modifier = Potential-shift` does; the rest of the
    /// electrostatics comes from the reciprocal sum (`pme_redist::Pme`).
    Ewald {
        /// The splitting coefficient β in nm⁻¹ (GROMACS's `ewaldcoeff_q`;
        /// `pme_redist::ewald_coefficient` gives it from the cutoff and `ewald-rtol`).
        beta: f64,
    },
}

/// The interaction of two atoms.
#[derive(Clone, Copy, Debug)]
pub struct ForceField {
    /// The cutoff in nm.
    pub cutoff: f64,
    k_rf: f64,
    c_rf: f64,
    electrostatics: Electrostatics,
    /// Ewald: erfc(β r_c) / r_c, the potential shift.
    shift: f64,
}

/// 2 / √π.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

impl ForceField {
    /// Lennard-Jones and reaction field (ε_rf = ∞) cut off at `cutoff` nm.
    pub fn new(cutoff: f64) -> ForceField {
        ForceField {
            cutoff,
            k_rf: 1.0 / (2.0 * cutoff.powi(3)),
            c_rf: 3.0 / (2.0 * cutoff),
            electrostatics: Electrostatics::ReactionField,
            shift: 0.0,
        }
    }

    /// Lennard-Jones and the real-space part of Ewald electrostatics with splitting
    /// coefficient `beta` (nm⁻¹), both cut off at `cutoff` nm. Pairs within a molecule get
    /// the exclusion correction ([`exclusion`](Self::exclusion)), and a system its self
    /// energy ([`self_energy`](Self::self_energy)): with the reciprocal energy of the same β
    /// they make the whole Ewald electrostatic energy.
    pub fn ewald(cutoff: f64, beta: f64) -> ForceField {
        ForceField {
            electrostatics: Electrostatics::Ewald { beta },
            shift: libm::erfc(beta * cutoff) / cutoff,
            ..ForceField::new(cutoff)
        }
    }

    /// The electrostatics.
    pub fn electrostatics(&self) -> Electrostatics {
        self.electrostatics
    }

    /// Under Ewald the potential shift erfc(β r_c) / r_c in nm⁻¹ (zero under reaction field).
    pub fn ewald_shift(&self) -> f64 {
        self.shift
    }

    /// The reaction-field coefficient k_rf = 1 / (2 r_c³) in nm⁻³ (ε_rf = ∞).
    pub fn k_rf(&self) -> f64 {
        self.k_rf
    }

    /// The reaction-field shift c_rf = 3 / (2 r_c) in nm⁻¹: the potential is zero at the cutoff.
    pub fn c_rf(&self) -> f64 {
        self.c_rf
    }

    /// The scalar force `f` (the force on the first atom is `f * r`, with `r` pointing from the
    /// second to the first) and the energy of a pair at squared distance `r2`. C6 and C12
    /// combine geometrically.
    pub fn pair(&self, a: &AtomParams, b: &AtomParams, r2: f64) -> (f64, f64) {
        let rinv2 = 1.0 / r2;
        let rinv6 = rinv2 * rinv2 * rinv2;
        let c6 = (a.c6 as f64 * b.c6 as f64).sqrt();
        let c12 = (a.c12 as f64 * b.c12 as f64).sqrt();
        let mut f = (12.0 * c12 * rinv6 - 6.0 * c6) * rinv6 * rinv2;
        let mut v = (c12 * rinv6 - c6) * rinv6;
        let qq = ONE_4PI_EPS0 * a.charge as f64 * b.charge as f64;
        if qq != 0.0 {
            let rinv = rinv2.sqrt();
            match self.electrostatics {
                Electrostatics::ReactionField => {
                    f += qq * (rinv * rinv2 - 2.0 * self.k_rf);
                    v += qq * (rinv + self.k_rf * r2 - self.c_rf);
                }
                Electrostatics::Ewald { beta } => {
                    let r = r2 * rinv;
                    let screened = libm::erfc(beta * r) * rinv;
                    f += qq * (screened + TWO_OVER_SQRT_PI * beta * (-beta * beta * r2).exp()) * rinv2;
                    v += qq * (screened - self.shift);
                }
            }
        }
        (f, v)
    }

    /// The correction of a pair within one molecule (excluded from [`pair`](Self::pair)) at
    /// squared distance `r2`, as `(f, v)` like `pair`: under Ewald the reciprocal sum counts
    /// every pair, excluded or not, so each excluded pair takes back its `erf(β r) / r` part
    /// (GROMACS puts this into `Coulomb (SR)`); nothing under reaction field.
    pub fn exclusion(&self, a: &AtomParams, b: &AtomParams, r2: f64) -> (f64, f64) {
        let Electrostatics::Ewald { beta } = self.electrostatics else { return (0.0, 0.0) };
        let qq = ONE_4PI_EPS0 * a.charge as f64 * b.charge as f64;
        if qq == 0.0 || r2 == 0.0 {
            return (0.0, 0.0);
        }
        let rinv2 = 1.0 / r2;
        let rinv = rinv2.sqrt();
        let r = r2 * rinv;
        let unscreened = libm::erf(beta * r) * rinv;
        (qq * (TWO_OVER_SQRT_PI * beta * (-beta * beta * r2).exp() - unscreened) * rinv2, -qq * unscreened)
    }

    /// The self energy of charges `charges` (e) under Ewald, `-β / √π f Σ q²` in kJ mol⁻¹
    /// (pme-redist's `ewald_self_energy`; GROMACS puts it into `Coulomb (SR)`); zero under
    /// reaction field.
    pub fn self_energy(&self, charges: impl IntoIterator<Item = f32>) -> f64 {
        let Electrostatics::Ewald { beta } = self.electrostatics else { return 0.0 };
        let sum: f64 = charges.into_iter().map(|q| q as f64 * q as f64).sum();
        -beta / std::f64::consts::PI.sqrt() * ONE_4PI_EPS0 * sum
    }
}

/// What the force field needs of every atom, by global index: its parameters and its
/// molecule (pairs within one molecule are excluded).
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Charge and Lennard-Jones parameters per atom.
    pub params: Vec<AtomParams>,
    /// Molecule number per atom.
    pub molecules: Vec<u32>,
}

impl Topology {
    /// Parameters from `table` for every atom of `structure`; `source` names the structure in
    /// errors.
    ///
    /// # Errors
    /// As [`TypeTable::assign`]: an atom the table cannot map, with how to supply it.
    pub fn new(structure: &Structure, table: &TypeTable, source: &str) -> Result<Topology> {
        Ok(Topology {
            params: table.assign(&structure.atoms, source)?,
            molecules: structure.molecules.clone(),
        })
    }

    /// Whether the pair of atoms `a` and `b` (global indices) is excluded: the same molecule.
    #[inline]
    pub fn excluded(&self, a: u32, b: u32) -> bool {
        self.molecules[a as usize] == self.molecules[b as usize]
    }
}

/// Atoms sorted into cells of at least the cutoff over their bounding box, for neighbour
/// search among a domain's local atoms (real-space images, no periodicity).
struct Cells {
    lower: [f64; 3],
    size: [f64; 3],
    dims: [usize; 3],
    /// Atom indices grouped by cell.
    atoms: Vec<u32>,
    /// `atoms[start[c]..start[c + 1]]` are in cell `c`.
    start: Vec<usize>,
}

impl Cells {
    fn new(positions: &[RVec], cutoff: f64) -> Cells {
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for x in positions {
            for d in 0..3 {
                lo[d] = lo[d].min(x[d] as f64);
                hi[d] = hi[d].max(x[d] as f64);
            }
        }
        let (lower, extent) = if positions.is_empty() {
            ([0.0; 3], [1.0; 3])
        } else {
            (lo, std::array::from_fn(|d| (hi[d] - lo[d]).max(1e-9)))
        };
        let dims: [usize; 3] =
            std::array::from_fn(|d| ((extent[d] / cutoff).floor() as usize).clamp(1, 1 << 10));
        let size: [f64; 3] = std::array::from_fn(|d| extent[d] / dims[d] as f64);
        let mut cells = Cells { lower, size, dims, atoms: Vec::new(), start: Vec::new() };
        let index: Vec<usize> = positions.iter().map(|x| cells.index(cells.cell_of(*x))).collect();
        (cells.atoms, cells.start) = bucket(&index, dims[0] * dims[1] * dims[2]);
        cells
    }

    fn cell_of(&self, x: RVec) -> [usize; 3] {
        std::array::from_fn(|d| {
            (((x[d] as f64 - self.lower[d]) / self.size[d]).floor().max(0.0) as usize).min(self.dims[d] - 1)
        })
    }

    fn index(&self, c: [usize; 3]) -> usize {
        (c[0] * self.dims[1] + c[1]) * self.dims[2] + c[2]
    }

    /// The cells around the cell of `x`, itself included, in increasing order.
    fn around(&self, x: RVec) -> impl Iterator<Item = &[u32]> {
        let c = self.cell_of(x);
        let range = move |d: usize| c[d].saturating_sub(1)..(c[d] + 2).min(self.dims[d]);
        range(0).flat_map(move |i| {
            range(1).flat_map(move |j| {
                range(2).map(move |k| {
                    let cell = self.index([i, j, k]);
                    &self.atoms[self.start[cell]..self.start[cell + 1]]
                })
            })
        })
    }
}

/// Items `0..index.len()` grouped by `index` (a counting sort): the items, and where each
/// group starts.
pub(crate) fn bucket(index: &[usize], groups: usize) -> (Vec<u32>, Vec<usize>) {
    let mut start = vec![0usize; groups + 1];
    for &c in index {
        start[c + 1] += 1;
    }
    for c in 0..groups {
        start[c + 1] += start[c];
    }
    let mut fill = start.clone();
    let mut items = vec![0u32; index.len()];
    for (i, &c) in index.iter().enumerate() {
        items[fill[c]] = i as u32;
        fill[c] += 1;
    }
    (items, start)
}

/// Forces on the local atoms of `halo` (home, halo and the periodic images, stored or not:
/// [`HaloExchange::positions_with_images`]) from the pairs this domain owns, and this
/// domain's share of the potential energy: write them into the step's forces with
/// [`Local::fold_forces`](md_halo::Local::fold_forces), which folds the images' forces onto
/// their atoms; after [`Step::move_f`](md_halo::Step::move_f) the home forces are the total
/// forces. It evaluates every pair from both ends, in plain double precision: the reference
/// the multi-PE halo test checks the [pair-list kernel](crate::cluster::PairList) against on
/// every domain.
pub fn domain_forces(halo: &HaloExchange<'_>, topology: &Topology, field: &ForceField) -> (Vec<RVec>, f64) {
    let positions = halo.positions_with_images();
    let x = &positions[..];
    let ids = halo.global_indices();
    let cells = Cells::new(x, field.cutoff);
    let rc2 = field.cutoff * field.cutoff;
    let owner = halo.pair_owner();
    let ewald = matches!(field.electrostatics(), Electrostatics::Ewald { .. });
    let per_atom: Vec<(RVec, f64)> = (0..x.len())
        .into_par_iter()
        .map(|i| {
            let (mut f, mut v) = ([0.0f64; 3], 0.0f64);
            let pi = &topology.params[ids[i] as usize];
            for members in cells.around(x[i]) {
                for &j in members {
                    let j = j as usize;
                    if j == i {
                        continue;
                    }
                    let excluded = topology.excluded(ids[i], ids[j]);
                    if excluded && !ewald {
                        continue;
                    }
                    let r: [f64; 3] = std::array::from_fn(|d| x[i][d] as f64 - x[j][d] as f64);
                    let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                    if r2 >= rc2 || !owner.owns(i, j) {
                        continue;
                    }
                    let pj = &topology.params[ids[j] as usize];
                    let (scalar, energy) =
                        if excluded { field.exclusion(pi, pj, r2) } else { field.pair(pi, pj, r2) };
                    for d in 0..3 {
                        f[d] += scalar * r[d];
                    }
                    v += 0.5 * energy;
                }
            }
            ([f[0] as f32, f[1] as f32, f[2] as f32], v)
        })
        .collect();
    // The self energy of the home atoms, once per atom over all domains.
    let home = ids[..halo.home_count()].iter().map(|&g| topology.params[g as usize].charge);
    let energy = per_atom.iter().map(|p| p.1).sum::<f64>() + field.self_energy(home);
    (per_atom.into_iter().map(|p| p.0).collect(), energy)
}

/// The serial reference for a whole periodic system.
#[derive(Clone, Debug, PartialEq)]
pub struct SerialForces {
    /// The force on every atom.
    pub forces: Vec<[f64; 3]>,
    /// The potential energy: Lennard-Jones and the electrostatics within the cutoff; under
    /// Ewald also the exclusion corrections of pairs within a molecule and the self energy, so
    /// that adding the reciprocal energy of the same β gives the whole electrostatic energy
    /// (GROMACS's `Coulomb (SR)` plus `Coul. recip.`, with the LJ terms).
    pub energy: f64,
    /// The virial of the pair forces, `-½ Σ_pairs r_ij ⊗ f_ij`, as `[row][column]`.
    pub virial: [[f64; 3]; 3],
}

/// The serial reference: the force on every atom of a periodic system from all pairs within
/// the cutoff (minimum image, in any box the halo exchange accepts), the potential energy and
/// the virial. `positions` need not be wrapped.
///
/// # Errors
/// [`Error::Config`] when the cutoff is not below half of every box height, where more than
/// one image of an atom could interact with another (the halo exchange refuses such a range
/// too).
pub fn serial_forces(
    positions: &[RVec],
    pbc: &PbcBox,
    topology: &Topology,
    field: &ForceField,
) -> Result<SerialForces> {
    if let Some(d) = (0..3).find(|&d| field.cutoff >= pbc.height(d) / 2.0) {
        return Err(Error::Config(format!(
            "the cutoff {} nm is not below half the box height along {} ({:.3} nm)",
            field.cutoff,
            ["x", "y", "z"][d],
            pbc.height(d) / 2.0
        )));
    }
    let wrapped: Vec<RVec> = positions.iter().map(|x| pbc.wrap(*x)).collect();
    // Cells in fractions, each at least the cutoff across: a pair within the cutoff lies in
    // neighbouring cells, and the neighbour's image is the one of the unwrapped cell.
    let dims: [usize; 3] = std::array::from_fn(|d| ((pbc.height(d) / field.cutoff).floor() as usize).max(1));
    let cell_of = |x: RVec| -> [usize; 3] {
        let s = pbc.clamped_fraction(x);
        std::array::from_fn(|d| ((s[d] * dims[d] as f64) as usize).min(dims[d] - 1))
    };
    let index = |c: [usize; 3]| (c[0] * dims[1] + c[1]) * dims[2] + c[2];
    let cell_index: Vec<usize> = wrapped.iter().map(|&x| index(cell_of(x))).collect();
    let (members, start) = bucket(&cell_index, dims[0] * dims[1] * dims[2]);
    let v = pbc.vectors();
    let rc2 = field.cutoff * field.cutoff;
    let ewald = matches!(field.electrostatics(), Electrostatics::Ewald { .. });
    let per_atom: Vec<([f64; 3], f64, [[f64; 3]; 3])> = (0..wrapped.len())
        .into_par_iter()
        .map(|i| {
            let (mut f, mut energy, mut virial) = ([0.0f64; 3], 0.0f64, [[0.0f64; 3]; 3]);
            let c = cell_of(wrapped[i]);
            for delta in 0..27 {
                let offset = [delta / 9, delta / 3 % 3, delta % 3].map(|o| o as i64 - 1);
                let mut neighbour = [0usize; 3];
                let mut image = [0.0f64; 3];
                for d in 0..3 {
                    let n = dims[d] as i64;
                    let unwrapped = c[d] as i64 + offset[d];
                    neighbour[d] = unwrapped.rem_euclid(n) as usize;
                    let t = unwrapped.div_euclid(n) as f64;
                    for k in 0..3 {
                        image[k] += t * v[d][k] as f64;
                    }
                }
                let cell = index(neighbour);
                for &j in &members[start[cell]..start[cell + 1]] {
                    let j = j as usize;
                    if j == i {
                        continue;
                    }
                    let excluded = topology.excluded(i as u32, j as u32);
                    if excluded && !ewald {
                        continue;
                    }
                    let r: [f64; 3] =
                        std::array::from_fn(|k| wrapped[i][k] as f64 - (wrapped[j][k] as f64 + image[k]));
                    let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                    if r2 >= rc2 {
                        continue;
                    }
                    let (pi, pj) = (&topology.params[i], &topology.params[j]);
                    let (scalar, pair_energy) =
                        if excluded { field.exclusion(pi, pj, r2) } else { field.pair(pi, pj, r2) };
                    for d in 0..3 {
                        f[d] += scalar * r[d];
                        for e in 0..3 {
                            // Each pair is seen from both ends: half of -½ r ⊗ f each time.
                            virial[d][e] -= 0.25 * r[d] * scalar * r[e];
                        }
                    }
                    energy += 0.5 * pair_energy;
                }
            }
            (f, energy, virial)
        })
        .collect();
    let energy = per_atom.iter().map(|p| p.1).sum::<f64>()
        + field.self_energy(topology.params.iter().map(|p| p.charge));
    let virial = std::array::from_fn(|d| std::array::from_fn(|e| per_atom.iter().map(|p| p.2[d][e]).sum()));
    Ok(SerialForces { forces: per_atom.into_iter().map(|p| p.0).collect(), energy, virial })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argon() -> AtomParams {
        AtomParams { charge: 0.0, c6: 0.006_165_2, c12: 9.524_1e-6 }
    }

    #[test]
    fn lennard_jones_minimum_and_reaction_field_vanish_where_expected() {
        let field = ForceField::new(1.0);
        // The LJ minimum of argon lies at 2^(1/6) sigma: no force there.
        let r_min = 2f64.powf(1.0 / 6.0) * 0.34;
        let (f, v) = field.pair(&argon(), &argon(), r_min * r_min);
        assert!(f.abs() < 1e-3, "force at the minimum {f}");
        assert!((v + 0.99774).abs() < 1e-3, "well depth {v}");
        // The reaction-field force of two charges vanishes at the cutoff.
        let charged = AtomParams { charge: -0.82, c6: 0.0, c12: 0.0 };
        let (f, _) = field.pair(&charged, &charged, 1.0 - 1e-12);
        assert!(f.abs() < 1e-6, "Coulomb part at the cutoff: {f}");
    }

    #[test]
    fn ewald_forces_are_minus_the_energy_gradient_and_vanish_at_the_cutoff() {
        let field = ForceField::ewald(0.9, 3.47);
        let (a, b) = (
            AtomParams { charge: -0.82, c6: 0.002_617_4, c12: 2.633_4e-6 },
            AtomParams { charge: 0.41, c6: 0.0, c12: 0.0 },
        );
        for r in [0.1f64, 0.25, 0.5, 0.85] {
            let h = 1e-6;
            for what in ["pair", "exclusion"] {
                let f = |r: f64| {
                    if what == "pair" { field.pair(&a, &b, r * r) } else { field.exclusion(&a, &b, r * r) }
                };
                let numeric = -(f(r + h).1 - f(r - h).1) / (2.0 * h);
                // The force on the first atom is f r along r: its magnitude is f r.
                let analytic = f(r).0 * r;
                assert!(
                    (numeric - analytic).abs() < 1e-5 * analytic.abs().max(1.0),
                    "{what} at {r}: {numeric} against {analytic}"
                );
            }
        }
        // The shifted potential is zero at the cutoff (LJ aside).
        let charged = AtomParams { charge: 0.41, c6: 0.0, c12: 0.0 };
        assert!(field.pair(&charged, &charged, 0.81).1.abs() < 1e-9);
        // Reaction field has no exclusion correction and no self energy.
        let rf = ForceField::new(0.9);
        assert_eq!(rf.exclusion(&a, &b, 0.01), (0.0, 0.0));
        assert_eq!(rf.self_energy([0.41f32, -0.82]), 0.0);
        assert!(
            (field.self_energy([1.0f32]) + 3.47 / std::f64::consts::PI.sqrt() * ONE_4PI_EPS0).abs() < 1e-9
        );
    }

    /// The whole Ewald electrostatic energy (real space with exclusion corrections and self
    /// energy, plus the reciprocal sum) does not depend on the splitting β, and neither do the
    /// forces: the real-space and reciprocal parts must be each other's complements.
    #[test]
    fn ewald_total_does_not_depend_on_the_splitting() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
        let water = Structure::read_gro(std::path::Path::new(&format!("{dir}/spc216.gro"))).expect("spc216");
        let topology = Topology::new(&water, &TypeTable::builtin(), "spc216.gro").expect("SPC names");
        let charges: Vec<f32> = topology.params.iter().map(|p| p.charge).collect();
        let total = |beta: f64| {
            let real = serial_forces(&water.positions, &water.pbc, &topology, &ForceField::ewald(0.9, beta))
                .expect("cutoff fits");
            let reciprocal = pme_redist::reference::ewald_sum(
                water.pbc.vectors(),
                &water.positions,
                &charges,
                beta,
                1e-14,
            )
            .expect("valid");
            let forces: Vec<[f64; 3]> = real
                .forces
                .iter()
                .zip(&reciprocal.forces)
                .map(|(a, b)| std::array::from_fn(|d| a[d] + b[d]))
                .collect();
            (real.energy + reciprocal.energy, forces)
        };
        let (e1, f1) = total(3.47);
        let (e2, f2) = total(4.2);
        assert!((e1 - e2).abs() < 1e-4 * e1.abs(), "total energy {e1} at β 3.47 against {e2} at 4.2");
        let largest = f1.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
        for (i, (a, b)) in f1.iter().zip(&f2).enumerate() {
            for d in 0..3 {
                assert!((a[d] - b[d]).abs() < 2e-3 * largest, "atom {i}: {a:?} against {b:?}");
            }
        }
    }

    /// Brute force over every pair and every image within two box vectors.
    fn brute_force(s: &Structure, topology: &Topology, field: &ForceField, i: usize) -> [f64; 3] {
        let v = s.pbc.vectors();
        let mut f = [0.0f64; 3];
        for j in 0..s.len() {
            if i == j || topology.excluded(i as u32, j as u32) {
                continue;
            }
            for t in 0..125 {
                let t = [t / 25, t / 5 % 5, t % 5].map(|o| o as f64 - 2.0);
                let r: [f64; 3] = std::array::from_fn(|k| {
                    s.positions[i][k] as f64
                        - s.positions[j][k] as f64
                        - (0..3).map(|d| t[d] * v[d][k] as f64).sum::<f64>()
                });
                let r2: f64 = r.iter().map(|c| c * c).sum();
                if r2 < field.cutoff * field.cutoff {
                    let (scalar, _) = field.pair(&topology.params[i], &topology.params[j], r2);
                    for d in 0..3 {
                        f[d] += scalar * r[d];
                    }
                }
            }
        }
        f
    }

    #[test]
    fn serial_forces_match_brute_force_in_rectangular_and_triclinic_boxes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
        let water = Structure::read_gro(std::path::Path::new(&format!("{dir}/spc216.gro"))).expect("spc216");
        let l = water.pbc.diagonal();
        // The same atoms in a skewed box: b leans along x, c along x and y.
        let mut skewed = water.clone();
        skewed.pbc = PbcBox::new([[l[0], 0.0, 0.0], [0.4, l[1], 0.0], [-0.6, 0.5, l[2]]]).expect("valid");
        skewed.positions = water.positions.iter().map(|&x| skewed.pbc.wrap(x)).collect();
        let field = ForceField::new(0.8);
        for s in [water, skewed] {
            let topology = Topology::new(&s, &TypeTable::builtin(), "spc216.gro").expect("SPC names");
            let serial = serial_forces(&s.positions, &s.pbc, &topology, &field).expect("cutoff fits");
            let total: [f64; 3] = std::array::from_fn(|d| serial.forces.iter().map(|f| f[d]).sum());
            assert!(total.iter().all(|t| t.abs() < 1e-6), "Newton's third law: {total:?}");
            for i in [0usize, 17, 300, 647] {
                let f = brute_force(&s, &topology, &field, i);
                for (want, got) in f.iter().zip(&serial.forces[i]) {
                    assert!((want - got).abs() < 1e-6 * want.abs().max(1.0), "atom {i}");
                }
            }
            // The virial of central pair forces is symmetric.
            for d in 0..3 {
                for e in 0..3 {
                    assert!(
                        (serial.virial[d][e] - serial.virial[e][d]).abs() < 1e-6 * serial.virial[d][d].abs()
                    );
                }
            }
        }
    }
}
