//! A real force, so that the exchanged forces mean something: Lennard-Jones plus
//! reaction-field electrostatics (ε_rf = ∞) within a cutoff, intramolecular water pairs
//! excluded, found with cell lists.
//!
//! On a domain, a pair within the cutoff is computed by the domain whose home box holds the
//! corner of the pair's reference positions (the componentwise minimum, from when the plan was
//! built): every pair exactly once across all domains. Each atom gathers the forces of its own
//! pairs in a fixed order (neighbour cells, then atoms, by index), so the result is the same
//! whatever the number of threads; the price is that each pair is evaluated from both ends.

use rayon::prelude::*;

use crate::halo::HaloExchange;
use crate::system::{KindId, RVec, kind};

/// GROMACS's electric conversion factor, kJ mol⁻¹ nm e⁻².
const ONE_4PI_EPS0: f64 = 138.935_458;

/// The interaction of two atoms.
#[derive(Clone, Copy, Debug)]
pub struct ForceField {
    /// The cutoff in nm.
    pub cutoff: f64,
    k_rf: f64,
    c_rf: f64,
}

impl ForceField {
    /// Lennard-Jones and reaction field (ε_rf = ∞) cut off at `cutoff` nm.
    pub fn new(cutoff: f64) -> ForceField {
        ForceField { cutoff, k_rf: 1.0 / (2.0 * cutoff.powi(3)), c_rf: 3.0 / (2.0 * cutoff) }
    }

    /// The scalar force `f` (the force on the first atom is `f * r`, with `r` pointing from the
    /// second to the first) and the energy of a pair at squared distance `r2`.
    pub fn pair(&self, a: KindId, b: KindId, r2: f64) -> (f64, f64) {
        let (a, b) = (kind(a), kind(b));
        let rinv2 = 1.0 / r2;
        let rinv6 = rinv2 * rinv2 * rinv2;
        let c6 = (a.c6 as f64 * b.c6 as f64).sqrt();
        let c12 = (a.c12 as f64 * b.c12 as f64).sqrt();
        let mut f = (12.0 * c12 * rinv6 - 6.0 * c6) * rinv6 * rinv2;
        let mut v = (c12 * rinv6 - c6) * rinv6;
        let qq = ONE_4PI_EPS0 * a.charge as f64 * b.charge as f64;
        if qq != 0.0 {
            let rinv = rinv2.sqrt();
            f += qq * (rinv * rinv2 - 2.0 * self.k_rf);
            v += qq * (rinv + self.k_rf * r2 - self.c_rf);
        }
        (f, v)
    }
}

/// Whether a pair is excluded: two atoms of one water molecule (an SPC molecule is three
/// consecutive atoms OW, HW1, HW2 starting at a multiple of three).
pub fn excluded(kinds: &[KindId], a: u32, b: u32) -> bool {
    a / 3 == b / 3 && kind(kinds[a as usize]).water && kind(kinds[b as usize]).water
}

/// Atoms sorted into cells of at least the cutoff, for neighbour search.
struct Cells {
    lower: [f64; 3],
    size: [f64; 3],
    dims: [usize; 3],
    /// Atom indices grouped by cell.
    atoms: Vec<u32>,
    /// `atoms[start[c]..start[c + 1]]` are in cell `c`.
    start: Vec<usize>,
    /// `around[first[c]..first[c + 1]]`: the distinct cells around cell `c`, itself included,
    /// in increasing order.
    around: Vec<u32>,
    first: Vec<usize>,
}

impl Cells {
    /// Cells over the bounding box of `positions`; with `period`, the box is periodic and the
    /// positions must lie in `[0, period)`.
    fn new(positions: &[RVec], cutoff: f64, period: Option<[f64; 3]>) -> Cells {
        let (lower, extent) = match period {
            Some(p) => ([0.0; 3], p),
            None => {
                let mut lo = [f64::INFINITY; 3];
                let mut hi = [f64::NEG_INFINITY; 3];
                for x in positions {
                    for d in 0..3 {
                        lo[d] = lo[d].min(x[d] as f64);
                        hi[d] = hi[d].max(x[d] as f64);
                    }
                }
                if positions.is_empty() {
                    ([0.0; 3], [1.0; 3])
                } else {
                    (lo, std::array::from_fn(|d| (hi[d] - lo[d]).max(1e-9)))
                }
            }
        };
        let dims: [usize; 3] =
            std::array::from_fn(|d| ((extent[d] / cutoff).floor() as usize).clamp(1, 1 << 10));
        let size: [f64; 3] = std::array::from_fn(|d| extent[d] / dims[d] as f64);
        let mut cells = Cells {
            lower,
            size,
            dims,
            atoms: Vec::new(),
            start: Vec::new(),
            around: Vec::new(),
            first: vec![0],
        };
        let index: Vec<usize> = positions.iter().map(|x| cells.cell_index(cells.cell_of(*x))).collect();
        let n_cells = dims[0] * dims[1] * dims[2];
        let mut count = vec![0usize; n_cells + 1];
        for &c in &index {
            count[c + 1] += 1;
        }
        for c in 0..n_cells {
            count[c + 1] += count[c];
        }
        let mut fill = count.clone();
        let mut atoms = vec![0u32; positions.len()];
        for (i, &c) in index.iter().enumerate() {
            atoms[fill[c]] = i as u32;
            fill[c] += 1;
        }
        cells.atoms = atoms;
        cells.start = count;
        for i in 0..dims[0] {
            for j in 0..dims[1] {
                for k in 0..dims[2] {
                    let around = cells.neighbours([i, j, k], period.is_some());
                    cells.around.extend(around.iter().map(|&c| c as u32));
                    cells.first.push(cells.around.len());
                }
            }
        }
        cells
    }

    /// The distinct cells around the cell of `x`, itself included, in increasing order.
    fn around(&self, x: RVec) -> &[u32] {
        let c = self.cell_index(self.cell_of(x));
        &self.around[self.first[c]..self.first[c + 1]]
    }

    fn cell_of(&self, x: RVec) -> [usize; 3] {
        std::array::from_fn(|d| {
            (((x[d] as f64 - self.lower[d]) / self.size[d]).floor().max(0.0) as usize).min(self.dims[d] - 1)
        })
    }

    fn cell_index(&self, c: [usize; 3]) -> usize {
        (c[0] * self.dims[1] + c[1]) * self.dims[2] + c[2]
    }

    /// The distinct cells around `c` (27 at most; fewer where the grid is small), with
    /// periodic wrapping when `periodic`.
    fn neighbours(&self, c: [usize; 3], periodic: bool) -> Vec<usize> {
        let mut out = Vec::with_capacity(27);
        for dx in -1i64..=1 {
            for dy in -1i64..=1 {
                for dz in -1i64..=1 {
                    let delta = [dx, dy, dz];
                    let mut cell = [0usize; 3];
                    let mut inside = true;
                    for d in 0..3 {
                        let n = self.dims[d] as i64;
                        let v = c[d] as i64 + delta[d];
                        if periodic {
                            cell[d] = v.rem_euclid(n) as usize;
                        } else if v < 0 || v >= n {
                            inside = false;
                        } else {
                            cell[d] = v as usize;
                        }
                    }
                    if inside {
                        let index = self.cell_index(cell);
                        if !out.contains(&index) {
                            out.push(index);
                        }
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    fn members(&self, cell: usize) -> &[u32] {
        &self.atoms[self.start[cell]..self.start[cell + 1]]
    }
}

/// Forces on the local atoms of `halo` (home and halo) from the pairs this domain owns, and
/// this domain's share of the potential energy. After [`HaloExchange::move_f`] the home
/// forces are the total forces.
pub fn domain_forces(halo: &HaloExchange<'_>, kinds: &[KindId], field: &ForceField) -> (Vec<RVec>, f64) {
    let x = halo.coordinates();
    let ids = halo.global_indices();
    let reference = halo.reference_positions();
    let cells = Cells::new(x, field.cutoff, None);
    let rc2 = field.cutoff * field.cutoff;
    let (lower, upper) = halo.home_box();
    let owns = |x: RVec| (0..3).all(|d| lower[d] <= x[d] && x[d] < upper[d]);
    let per_atom: Vec<(RVec, f64)> = (0..x.len())
        .into_par_iter()
        .map(|i| {
            let (mut f, mut v) = ([0.0f64; 3], 0.0f64);
            for &cell in cells.around(x[i]) {
                for &j in cells.members(cell as usize) {
                    let j = j as usize;
                    if j == i || excluded(kinds, ids[i], ids[j]) {
                        continue;
                    }
                    let r: [f64; 3] = std::array::from_fn(|d| x[i][d] as f64 - x[j][d] as f64);
                    let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                    if r2 >= rc2 {
                        continue;
                    }
                    let corner: RVec = std::array::from_fn(|d| reference[i][d].min(reference[j][d]));
                    if !owns(corner) {
                        continue;
                    }
                    let (scalar, energy) = field.pair(kinds[ids[i] as usize], kinds[ids[j] as usize], r2);
                    for d in 0..3 {
                        f[d] += scalar * r[d];
                    }
                    v += 0.5 * energy;
                }
            }
            ([f[0] as f32, f[1] as f32, f[2] as f32], v)
        })
        .collect();
    let energy = per_atom.iter().map(|p| p.1).sum();
    (per_atom.into_iter().map(|p| p.0).collect(), energy)
}

/// The serial reference: the force on every atom of a periodic system from all pairs within
/// the cutoff (minimum image), and the total potential energy. `positions` need not be
/// wrapped.
pub fn serial_forces(
    positions: &[RVec],
    kinds: &[KindId],
    box_size: RVec,
    field: &ForceField,
) -> (Vec<[f64; 3]>, f64) {
    let period: [f64; 3] = std::array::from_fn(|d| box_size[d] as f64);
    let wrapped: Vec<RVec> = positions.iter().map(|x| crate::system::wrap(*x, box_size)).collect();
    let cells = Cells::new(&wrapped, field.cutoff, Some(period));
    let rc2 = field.cutoff * field.cutoff;
    let per_atom: Vec<([f64; 3], f64)> = (0..wrapped.len())
        .into_par_iter()
        .map(|i| {
            let (mut f, mut v) = ([0.0f64; 3], 0.0f64);
            for &cell in cells.around(wrapped[i]) {
                for &j in cells.members(cell as usize) {
                    if j as usize == i || excluded(kinds, i as u32, j) {
                        continue;
                    }
                    let j = j as usize;
                    let r: [f64; 3] = std::array::from_fn(|d| {
                        let mut r = wrapped[i][d] as f64 - wrapped[j][d] as f64;
                        r -= (r / period[d]).round() * period[d];
                        r
                    });
                    let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                    if r2 >= rc2 {
                        continue;
                    }
                    let (scalar, energy) = field.pair(kinds[i], kinds[j], r2);
                    for d in 0..3 {
                        f[d] += scalar * r[d];
                    }
                    v += 0.5 * energy;
                }
            }
            (f, v)
        })
        .collect();
    let energy = per_atom.iter().map(|p| p.1).sum();
    (per_atom.into_iter().map(|p| p.0).collect(), energy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lennard_jones_minimum_and_reaction_field_vanish_where_expected() {
        let field = ForceField::new(1.0);
        let ar = crate::system::KINDS.iter().position(|k| k.name == "AR").unwrap() as KindId;
        // The LJ minimum of argon lies at 2^(1/6) sigma: no force there.
        let r_min = 2f64.powf(1.0 / 6.0) * 0.34;
        let (f, v) = field.pair(ar, ar, r_min * r_min);
        assert!(f.abs() < 1e-3, "force at the minimum {f}");
        assert!((v + 0.99774).abs() < 1e-3, "well depth {v}");
        // The reaction-field force of two charges vanishes at the cutoff.
        let ow = 0;
        let (f, _) = field.pair(ow, ow, 1.0 - 1e-12);
        let lj_only = {
            let k = kind(ow);
            12.0 * k.c12 as f64 - 6.0 * k.c6 as f64
        };
        assert!((f - lj_only).abs() < 1e-6, "Coulomb part at the cutoff: {}", f - lj_only);
    }

    #[test]
    fn serial_forces_sum_to_zero_and_match_brute_force() {
        let water = crate::system::System::read_gro(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/spc216.gro"
        )))
        .expect("spc216.gro");
        let field = ForceField::new(0.8);
        let (forces, _) = serial_forces(&water.positions, &water.kinds, water.box_size, &field);
        let total: [f64; 3] = std::array::from_fn(|d| forces.iter().map(|f| f[d]).sum());
        assert!(total.iter().all(|t| t.abs() < 1e-6), "Newton's third law: {total:?}");
        // Brute force over all pairs for a few atoms.
        let l: [f64; 3] = std::array::from_fn(|d| water.box_size[d] as f64);
        for i in [0usize, 17, 300, 647] {
            let mut f = [0.0f64; 3];
            for j in 0..water.len() {
                if i == j || excluded(&water.kinds, i as u32, j as u32) {
                    continue;
                }
                let r: [f64; 3] = std::array::from_fn(|d| {
                    let r = water.positions[i][d] as f64 - water.positions[j][d] as f64;
                    r - (r / l[d]).round() * l[d]
                });
                let r2: f64 = r.iter().map(|c| c * c).sum();
                if r2 < 0.64 {
                    let (s, _) = field.pair(water.kinds[i], water.kinds[j], r2);
                    for d in 0..3 {
                        f[d] += s * r[d];
                    }
                }
            }
            for d in 0..3 {
                assert!((f[d] - forces[i][d]).abs() < 1e-6 * f[d].abs().max(1.0), "atom {i}");
            }
        }
    }
}
