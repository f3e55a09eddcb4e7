//! Forces from the pair list: the kernel over every chunk, the chunks' forces summed into
//! the atoms' (with the images'), and the Ewald exclusion corrections.

use md_halo::{PeriodicImage, RVec, ShiftForces};
use rayon::prelude::*;

use super::kernel::{Isa, chunk_kernel};
#[cfg(target_arch = "x86_64")]
use super::kernel::{chunk_avx2, chunk_avx512};
use super::layout::gather;
use super::list::PairList;
use crate::error::{Error, Result};

impl PairList {
    /// The forces on the local atoms at `positions` (the same atoms, in the same order, as
    /// at the build; without the images the list makes, [`stored_len`](Self::stored_len) of
    /// them) from the pairs in the list within the cutoff, written to `forces`, one per
    /// position.
    ///
    /// # Errors
    /// [`Error::Config`] when `positions` does not hold the atoms the list was built for
    /// (rebuild it after every repartition).
    pub fn forces(&mut self, positions: &[RVec], forces: &mut Vec<RVec>) -> Result<()> {
        forces.resize(self.stored_len(), [0.0; 3]);
        self.compute::<false>(positions, forces).map(|_| ())
    }

    /// As [`forces`](Self::forces), into `forces` of exactly one element per position: memory
    /// the caller does not own as a `Vec`, such as the halo exchange's own force array (the
    /// forces of [`Step::local`](md_halo::Step::local)), which the forces then leave from
    /// without a copy.
    ///
    /// # Errors
    /// As [`forces`](Self::forces), and [`Error::Config`] when `forces` is not as long as
    /// `positions`.
    pub fn forces_into(&mut self, positions: &[RVec], forces: &mut [RVec]) -> Result<()> {
        if forces.len() != positions.len() {
            return Err(Error::Config(format!(
                "{} forces for {} positions: the kernel writes one force per position",
                forces.len(),
                positions.len()
            )));
        }
        self.compute::<false>(positions, forces).map(|_| ())
    }

    /// As [`forces`](Self::forces), and returns the potential energy of the pairs (under
    /// Ewald with the exclusion corrections, without the self energy).
    ///
    /// # Errors
    /// As [`forces`](Self::forces).
    pub fn forces_and_energy(&mut self, positions: &[RVec], forces: &mut Vec<RVec>) -> Result<f64> {
        forces.resize(self.stored_len(), [0.0; 3]);
        self.compute::<true>(positions, forces)
    }

    fn compute<const ENERGY: bool>(&mut self, positions: &[RVec], forces: &mut [RVec]) -> Result<f64> {
        if self.constants.beta > 0.0 {
            self.compute_with::<ENERGY, true>(positions, forces)
        } else {
            self.compute_with::<ENERGY, false>(positions, forces)
        }
    }

    fn compute_with<const ENERGY: bool, const EWALD: bool>(
        &mut self,
        positions: &[RVec],
        forces: &mut [RVec],
    ) -> Result<f64> {
        if positions.len() != self.stored_len() {
            return Err(Error::Config(format!(
                "the pair list was built for {} atoms, not {}: rebuild it after every repartition",
                self.stored_len(),
                positions.len()
            )));
        }
        gather(&self.atom_of_slot, positions, &self.images.table, &mut self.slots);
        let (slots, constants, isa) = (&self.slots, self.constants, self.isa);
        let energy: f64 = self
            .chunks
            .par_iter_mut()
            .map(|chunk| match isa {
                // SAFETY: `build` accepted `Isa::Avx2` only where the processor has AVX2.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { chunk_avx2::<ENERGY, EWALD>(chunk, slots, constants) },
                // SAFETY: `build` accepted `Isa::Avx512` only where the processor has it.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { chunk_avx512::<ENERGY, EWALD>(chunk, slots, constants) },
                _ => chunk_kernel::<ENERGY, EWALD>(chunk, slots, constants),
            })
            .collect::<Vec<f64>>()
            .iter()
            .sum();
        let mut shift_forces = self.reduce(forces);
        let corrections = self.exclusion_corrections(positions, forces, &mut shift_forces);
        self.shift_forces = shift_forces;
        Ok(energy + corrections)
    }

    /// Adds the Ewald exclusion corrections of the pairs within a molecule to `forces`, in
    /// list order (an image's share to its atom, and to `shift_forces`), and
    /// returns their energy.
    fn exclusion_corrections(
        &self,
        positions: &[RVec],
        forces: &mut [RVec],
        shift_forces: &mut ShiftForces,
    ) -> f64 {
        let rc2 = self.field.cutoff * self.field.cutoff;
        let stored = positions.len();
        let at = |a: usize| -> (usize, Option<&PeriodicImage>, RVec) {
            let (atom, image) = self.images.resolve(a, stored);
            let x = positions[atom];
            (atom, image, image.map_or(x, |im| im.position(x)))
        };
        let mut energy = 0.0;
        for (&[i, j], [pi, pj]) in self.exclusions.iter().zip(&self.exclusion_params) {
            let ((i, image_i, xi), (j, image_j, xj)) = (at(i as usize), at(j as usize));
            let r: [f64; 3] = std::array::from_fn(|d| xi[d] as f64 - xj[d] as f64);
            let r2 = r.iter().map(|c| c * c).sum::<f64>();
            if r2 >= rc2 {
                continue;
            }
            let (f, v) = self.field.exclusion(pi, pj, r2);
            let fi: [f32; 3] = std::array::from_fn(|d| (f * r[d]) as f32);
            for d in 0..3 {
                forces[i][d] += fi[d];
                forces[j][d] -= fi[d];
            }
            if let Some(image) = image_i {
                shift_forces.add_image(image, fi.map(f64::from));
            }
            if let Some(image) = image_j {
                shift_forces.add_image(image, fi.map(|c| -(c as f64)));
            }
            energy += v;
        }
        energy
    }

    /// Sums the chunks' forces in chunk order and writes them to the atoms, each stored atom's
    /// images' forces added to its own in the same pass; returns the images' shift forces
    /// (summed per block of atoms, the blocks in order, whatever the thread count).
    fn reduce(&mut self, forces: &mut [RVec]) -> ShiftForces {
        const BLOCK: usize = 1024;
        let n = self.atom_of_slot.len();
        let chunks = &self.chunks;
        let (tx, rest) = self.total.split_at_mut(n);
        let (ty, tz) = rest.split_at_mut(n);
        tx.par_chunks_mut(BLOCK)
            .zip(ty.par_chunks_mut(BLOCK))
            .zip(tz.par_chunks_mut(BLOCK))
            .enumerate()
            .for_each(|(b, ((tx, ty), tz))| {
                let block = b * BLOCK..b * BLOCK + tx.len();
                tx.fill(0.0);
                ty.fill(0.0);
                tz.fill(0.0);
                for chunk in chunks {
                    let (lo, hi) =
                        (chunk.lower.max(block.start), (chunk.lower + chunk.span()).min(block.end));
                    if lo >= hi {
                        continue;
                    }
                    let span = chunk.span();
                    let (fx, fy, fz) =
                        (&chunk.force[..span], &chunk.force[span..2 * span], &chunk.force[2 * span..]);
                    for slot in lo..hi {
                        let (t, c) = (slot - block.start, slot - chunk.lower);
                        tx[t] += fx[c];
                        ty[t] += fy[c];
                        tz[t] += fz[c];
                    }
                }
            });
        let stored = self.stored_len();
        let (tx, ty, tz) = (&self.total[..n], &self.total[n..2 * n], &self.total[2 * n..]);
        let images = &self.images;
        if images.table.is_empty() {
            forces.par_iter_mut().zip(self.slot_of_atom.par_iter()).for_each(|(f, &slot)| {
                let s = slot as usize;
                *f = [tx[s], ty[s], tz[s]];
            });
            return ShiftForces::default();
        }
        let slot_of_atom = &self.slot_of_atom;
        let blocks: Vec<ShiftForces> = forces
            .par_chunks_mut(BLOCK)
            .enumerate()
            .map(|(b, block)| {
                let mut shift_forces = ShiftForces::default();
                for (k, f) in block.iter_mut().enumerate() {
                    let a = b * BLOCK + k;
                    let s = slot_of_atom[a] as usize;
                    let mut sum = [tx[s], ty[s], tz[s]];
                    for &image in &images.of_atom[images.first[a] as usize..images.first[a + 1] as usize] {
                        let s = slot_of_atom[stored + image as usize] as usize;
                        let g = [tx[s], ty[s], tz[s]];
                        for c in 0..3 {
                            sum[c] += g[c];
                        }
                        shift_forces.add_image(&images.table[image as usize], g.map(f64::from));
                    }
                    *f = sum;
                }
                shift_forces
            })
            .collect();
        let mut total = ShiftForces::default();
        for block in blocks {
            total += block;
        }
        total
    }
}
