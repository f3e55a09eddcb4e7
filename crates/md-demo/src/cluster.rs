//! The fast force kernel: the demo force field (Lennard-Jones plus reaction field, or the
//! real-space part of Ewald summation for PME) on a domain's local atoms through a clustered
//! Verlet pair list, in the manner of GROMACS's nbnxm (Páll and Hess 2013).
//!
//! - **Layout.** The atoms are sorted into columns over the x-y plane and by z within a
//!   column, each column padded to a multiple of [`J_CLUSTER`] slots. Four consecutive slots
//!   form an *i-cluster*, eight a *j-cluster*. Coordinates and parameters live in plain `f32`
//!   arrays in slot order, so the eight atoms of a j-cluster are one vector load.
//! - **Pair list.** Built every `nstlist` steps with the list radius `rlist` (the cutoff plus
//!   the Verlet buffer): for every i-cluster, the j-clusters whose bounding boxes lie within
//!   `rlist`, each with a 32-bit mask of the atom pairs that interact (not padding, not the
//!   same molecule, owned by this domain by their [zones](Zone), and each pair once: slot of
//!   i below slot of j).
//!   Between builds the list is reused; the kernel applies the cutoff itself.
//! - **Kernel.** 4 × 8 pairs per list entry, written as loops over the eight j lanes that the
//!   compiler turns into vector instructions (AVX2 where the processor has it, chosen at run
//!   time; SSE2 otherwise); every pair is evaluated once and its force added to both atoms
//!   (Newton's third law).
//! - **Threads.** The i-clusters are cut into chunks of a fixed size; each chunk adds into its
//!   own force buffer and the buffers are summed in chunk order. Chunks depend on the system
//!   only, so the forces are bit for bit the same for any number of threads, and the same on
//!   either instruction set (no fused multiply-add, no approximate reciprocal).
//! - **Ewald.** Under [`Electrostatics::Ewald`] the kernel evaluates `erfc(βr)` in single
//!   precision with the rational approximation of Abramowitz and Stegun (7.1.26, absolute
//!   error below 1.5 × 10⁻⁷) and `exp(−β²r²)` with a polynomial that vectorises, shared by the
//!   potential and the force. Pairs within a molecule, which the mask leaves out, still need
//!   their Ewald exclusion correction (the reciprocal sum counts them): the list keeps those
//!   pairs apart and adds their correction in double precision after the kernel, in a fixed
//!   order.

use md_halo::{HaloExchange, PeriodicImage, RVec, ShiftForces, Zone};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::force::{Electrostatics, ForceField, ONE_4PI_EPS0, Topology, bucket};
use crate::types::AtomParams;

/// Atoms per i-cluster.
pub const I_CLUSTER: usize = 4;
/// Atoms per j-cluster: the vector width of the kernel.
pub const J_CLUSTER: usize = 8;
/// i-clusters per chunk, the unit of threading and of force accumulation.
const CHUNK_CLUSTERS: usize = 128;
/// The slot of padding.
const PADDING: u32 = u32::MAX;
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

/// An axis-aligned bounding box; empty (lower above upper) when it holds no atom.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    lower: [f32; 3],
    upper: [f32; 3],
}

impl Bounds {
    const EMPTY: Bounds = Bounds { lower: [f32::INFINITY; 3], upper: [f32::NEG_INFINITY; 3] };

    fn add(&mut self, x: [f32; 3]) {
        for ((lower, upper), c) in self.lower.iter_mut().zip(&mut self.upper).zip(x) {
            *lower = lower.min(c);
            *upper = upper.max(c);
        }
    }

    /// The box around all of `boxes`.
    fn union(boxes: &[Bounds]) -> Bounds {
        let mut all = Bounds::EMPTY;
        for b in boxes.iter().filter(|b| !b.is_empty()) {
            all.add(b.lower);
            all.add(b.upper);
        }
        all
    }

    fn is_empty(&self) -> bool {
        self.lower[0] > self.upper[0]
    }

    /// Squared distance between two boxes along the dimensions `dims`.
    fn distance2(&self, other: &Bounds, dims: std::ops::Range<usize>) -> f32 {
        dims.map(|d| {
            let gap = (other.lower[d] - self.upper[d]).max(self.lower[d] - other.upper[d]).max(0.0);
            gap * gap
        })
        .sum()
    }
}

/// The constants of the kernel, in single precision.
#[derive(Clone, Copy, Debug)]
struct Constants {
    cutoff2: f32,
    k_rf: f32,
    c_rf: f32,
    /// Ewald: the splitting coefficient β, 2β/√π, and the potential shift erfc(β r_c)/r_c.
    beta: f32,
    two_beta_over_sqrt_pi: f32,
    ewald_shift: f32,
}

/// `erfc(x)` and `exp(-x²)` for `x ≥ 0` in single precision, in straight-line code that
/// vectorises: `erfc` by Abramowitz and Stegun's 7.1.26 (absolute error below 1.5 × 10⁻⁷, up
/// to 7 × 10⁻⁷ for x < 1 after single-precision rounding),
/// whose factor `exp(-x²)` the Ewald force needs as well.
#[inline(always)]
fn erfc_and_gaussian(x: f32) -> (f32, f32) {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_7, -1.453_152_1, 1.061_405_4];
    let gaussian = exp_nonpositive(-(x * x));
    let t = 1.0 / (1.0 + P * x);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    (poly * gaussian, gaussian)
}

/// `exp(y)` for `-87 < y ≤ 0` in single precision (relative error about 2 × 10⁻⁷): with
/// `y = n ln 2 + r` and `|r| ≤ ln 2 / 2`, a degree-7 Taylor polynomial in `r`, and `2ⁿ` put
/// into the exponent bits. Adding 1.5 × 2²³ rounds `y log₂ e` to the nearest integer `n` and leaves `n`
/// in the low bits of the sum, so every step is a plain vector instruction (no conversion).
#[inline(always)]
fn exp_nonpositive(y: f32) -> f32 {
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

/// A slice of the pair list: consecutive i-clusters, their entries, and the force buffer
/// they add into.
#[derive(Clone, Debug, Default)]
struct Chunk {
    /// The i-clusters with entries, ascending.
    i_clusters: Vec<u32>,
    /// Entries of `i_clusters[e]` are `starts[e]..starts[e + 1]`.
    starts: Vec<u32>,
    /// The j-cluster of each entry.
    j_clusters: Vec<u32>,
    /// Which of the 4 × 8 pairs of each entry interact (bit `8a + b`).
    masks: Vec<u32>,
    /// The slots this chunk's forces touch: `lower..lower + force.len() / 3`.
    lower: usize,
    /// Forces on slots `lower..`, x, y and z in three consecutive runs.
    force: Vec<f32>,
}

impl Chunk {
    fn span(&self) -> usize {
        self.force.len() / 3
    }
}

/// Atom data in slot order.
#[derive(Clone, Debug, Default)]
struct Slots {
    x: Vec<f32>,
    y: Vec<f32>,
    z: Vec<f32>,
    /// Charge times √(1/4πε₀): the product of two is the Coulomb prefactor.
    charge: Vec<f32>,
    /// √(6 C6) and √(12 C12): the product of two is the geometric combination, times the
    /// factors of the force.
    sqrt_c6: Vec<f32>,
    sqrt_c12: Vec<f32>,
}

/// The clustered Verlet pair list of one domain, with the kernel that computes forces from
/// it. Build it after every repartition (the local atoms change), use it for every step until
/// the next.
#[derive(Clone, Debug)]
pub struct PairList {
    /// The local atom in each slot, [`PADDING`] where none.
    atom_of_slot: Vec<u32>,
    /// The slot of each local atom.
    slot_of_atom: Vec<u32>,
    slots: Slots,
    chunks: Vec<Chunk>,
    constants: Constants,
    isa: Isa,
    /// Interacting pairs in the list.
    pairs: usize,
    /// Summed chunk forces per slot (x, y, z runs), reused between steps.
    total: Vec<f32>,
    /// The force field the list was built for.
    field: ForceField,
    /// Under Ewald: the pairs within one molecule that this domain owns, as local atoms
    /// `(i, j)` with `i < j`, and their parameters; empty otherwise.
    exclusions: Vec<[u32; 2]>,
    exclusion_params: Vec<[AtomParams; 2]>,
    /// The periodic images the kernel makes (local atoms `stored..`, one per entry), empty
    /// where the positions hold every local atom.
    images: Images,
    /// The forces the images carried across the periodic boundaries in the last computation.
    shift_forces: ShiftForces,
}

/// The images a [`PairList`] makes: what each is, and per stored atom its images, so that
/// the pass that writes an atom's force adds its images' forces in the same read.
#[derive(Clone, Debug, Default)]
struct Images {
    table: Vec<PeriodicImage>,
    /// The images of stored atom `a` are `of_atom[first[a]..first[a + 1]]` (empty when there
    /// are no images at all).
    first: Vec<u32>,
    of_atom: Vec<u32>,
}

impl Images {
    fn new(table: &[PeriodicImage], stored: usize) -> Images {
        if table.is_empty() {
            return Images::default();
        }
        let mut first = vec![0u32; stored + 1];
        for image in table {
            first[image.atom as usize + 1] += 1;
        }
        for a in 0..stored {
            first[a + 1] += first[a];
        }
        let mut fill = first.clone();
        let mut of_atom = vec![0u32; table.len()];
        for (k, image) in table.iter().enumerate() {
            of_atom[fill[image.atom as usize] as usize] = k as u32;
            fill[image.atom as usize] += 1;
        }
        Images { table: table.to_vec(), first, of_atom }
    }

    /// Local atom `atom`: the stored atom its force goes to, and the image it is, if one.
    #[inline]
    fn resolve(&self, atom: usize, stored: usize) -> (usize, Option<&PeriodicImage>) {
        match atom.checked_sub(stored) {
            Some(k) => (self.table[k].atom as usize, Some(&self.table[k])),
            None => (atom, None),
        }
    }
}

impl PairList {
    /// The pair list of a domain's local atoms (home and halo, as [`HaloExchange::move_x`]
    /// left them) with the domain's pair ownership, at the list radius of the halo plan (the
    /// cutoff plus the Verlet buffer), for the [best](Isa::detect) instruction set.
    ///
    /// # Errors
    /// As [`PairList::build`].
    ///
    /// Under [`PeriodicImages::Kernel`](md_halo::PeriodicImages::Kernel) the list makes the
    /// halo's periodic images itself: [`forces`](Self::forces) then takes the stored
    /// coordinates ([`HaloExchange::coordinates`]), adds each image's shift where it loads
    /// the image, writes one force per stored atom with the images' forces added, and keeps
    /// the forces the images carried across the boundaries
    /// ([`shift_forces`](Self::shift_forces)).
    pub fn for_domain(halo: &HaloExchange<'_>, topology: &Topology, field: &ForceField) -> Result<PairList> {
        let mut list = PairList::build(
            &halo.positions_with_images(),
            halo.global_indices(),
            &halo.pair_owner().zones(),
            topology,
            field,
            halo.grid().range() as f64,
            Isa::detect(),
        )?;
        list.images = Images::new(halo.images(), halo.stored_count());
        Ok(list)
    }

    /// The pair list of the atoms at `positions` (global indices `ids`, real-space
    /// coordinates, no periodicity): every pair within `rlist` that is not excluded and whose
    /// [`zones`](Zone) pair with each other, each once. All atoms in [`Zone::HOME`] computes
    /// every pair. Under Ewald electrostatics the excluded pairs whose zones pair are kept
    /// too, for their exclusion correction ([`ForceField::exclusion`]).
    ///
    /// # Errors
    /// [`Error::Config`] when the arrays differ in length, `rlist` is below the cutoff, a
    /// position is not finite, a global index has no entry in `topology`, or the kernel cannot
    /// run on `isa` here.
    pub fn build(
        positions: &[RVec],
        ids: &[u32],
        zones: &[Zone],
        topology: &Topology,
        field: &ForceField,
        rlist: f64,
        isa: Isa,
    ) -> Result<PairList> {
        if rlist.is_nan() || rlist < field.cutoff {
            return Err(Error::Config(format!(
                "the pair-list radius {rlist} nm is below the cutoff {} nm: pairs would be missed",
                field.cutoff
            )));
        }
        if !isa.available() {
            return Err(Error::Config(format!(
                "this processor cannot run the {isa} kernel: use Isa::detect()"
            )));
        }
        if positions.len() != ids.len() || zones.len() != ids.len() {
            return Err(Error::Config(format!(
                "{} positions and {} zones for {} global indices",
                positions.len(),
                zones.len(),
                ids.len()
            )));
        }
        if let Some(i) = positions.iter().position(|x| x.iter().any(|c| !c.is_finite())) {
            return Err(Error::Config(format!(
                "local atom {i} (global {}) has a position that is not finite: {:?}",
                ids[i], positions[i]
            )));
        }
        if let Some(&g) = ids.iter().find(|&&g| g as usize >= topology.params.len()) {
            return Err(Error::Config(format!(
                "global index {g} is beyond the topology's {} atoms",
                topology.params.len()
            )));
        }
        let mut columns = Columns::new(positions, rlist as f32);
        let atom_of_slot = columns.slots(positions);
        let mut slot_of_atom = vec![0u32; positions.len()];
        for (slot, &atom) in atom_of_slot.iter().enumerate() {
            if atom != PADDING {
                slot_of_atom[atom as usize] = slot as u32;
            }
        }
        let scale = ONE_4PI_EPS0.sqrt();
        let param = |slot: usize, f: &dyn Fn(usize) -> f32| match atom_of_slot[slot] {
            PADDING => 0.0,
            atom => f(ids[atom as usize] as usize),
        };
        let n_slots = atom_of_slot.len();
        let p = &topology.params;
        let mut slots = Slots {
            charge: (0..n_slots).map(|s| param(s, &|g| (p[g].charge as f64 * scale) as f32)).collect(),
            sqrt_c6: (0..n_slots).map(|s| param(s, &|g| (6.0 * p[g].c6 as f64).sqrt() as f32)).collect(),
            sqrt_c12: (0..n_slots).map(|s| param(s, &|g| (12.0 * p[g].c12 as f64).sqrt() as f32)).collect(),
            ..Slots::default()
        };
        let molecule: Vec<u32> = atom_of_slot
            .iter()
            .map(|&a| if a == PADDING { PADDING } else { topology.molecules[ids[a as usize] as usize] })
            .collect();
        gather(&atom_of_slot, positions, &[], &mut slots);
        let bounds = |first: usize, len: usize| {
            let mut b = Bounds::EMPTY;
            for &atom in &atom_of_slot[first..first + len] {
                if let Some(&x) = positions.get(atom as usize) {
                    b.add(x);
                }
            }
            b
        };
        let i_bounds: Vec<Bounds> =
            (0..n_slots / I_CLUSTER).map(|c| bounds(c * I_CLUSTER, I_CLUSTER)).collect();
        // A j-cluster is two consecutive i-clusters.
        let j_bounds: Vec<Bounds> = i_bounds.chunks(J_CLUSTER / I_CLUSTER).map(Bounds::union).collect();
        let zone: Vec<u8> =
            atom_of_slot.iter().map(|&a| zones.get(a as usize).map_or(0, |z| z.bits())).collect();
        let summaries = |size: usize| -> Vec<Summary> {
            (0..n_slots / size)
                .map(|c| {
                    let slots = c * size..(c + 1) * size;
                    Summary::of(&atom_of_slot[slots.clone()], &molecule[slots.clone()], &zone[slots])
                })
                .collect()
        };
        let search = Search {
            columns: &columns,
            i_bounds: &i_bounds,
            j_bounds: &j_bounds,
            atom_of_slot: &atom_of_slot,
            molecule: &molecule,
            slots: &slots,
            rlist2: (rlist * rlist) as f32,
            // Rounding of the box distances must never drop a pair within rlist.
            bounds_rlist2: ((rlist * (1.0 + 1e-5) + 1e-6).powi(2)) as f32,
            zone: &zone,
            i_summary: summaries(I_CLUSTER),
            j_summary: summaries(J_CLUSTER),
        };
        let n_i = n_slots / I_CLUSTER;
        let chunks: Vec<Chunk> = (0..n_i.div_ceil(CHUNK_CLUSTERS))
            .into_par_iter()
            .map(|c| {
                let range = c * CHUNK_CLUSTERS..((c + 1) * CHUNK_CLUSTERS).min(n_i);
                match isa {
                    // SAFETY: `isa.available()` was checked above.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512 => unsafe { search_avx512(&search, range, n_slots) },
                    _ => search.chunk(range, n_slots),
                }
            })
            .collect();
        let pairs = chunks.iter().flat_map(|c| &c.masks).map(|m| m.count_ones() as usize).sum();
        let beta = match field.electrostatics() {
            Electrostatics::Ewald { beta } => beta,
            Electrostatics::ReactionField => 0.0,
        };
        let constants = Constants {
            cutoff2: (field.cutoff * field.cutoff) as f32,
            k_rf: field.k_rf() as f32,
            c_rf: field.c_rf() as f32,
            beta: beta as f32,
            two_beta_over_sqrt_pi: (beta * std::f64::consts::FRAC_2_SQRT_PI) as f32,
            ewald_shift: field.ewald_shift() as f32,
        };
        let exclusions = if beta > 0.0 { excluded_pairs(ids, zones, topology) } else { Vec::new() };
        let exclusion_params =
            exclusions.iter().map(|pair| pair.map(|a| topology.params[ids[a as usize] as usize])).collect();
        Ok(PairList {
            atom_of_slot,
            slot_of_atom,
            slots,
            chunks,
            constants,
            isa,
            pairs,
            total: vec![0.0; 3 * n_slots],
            field: *field,
            exclusions,
            exclusion_params,
            images: Images::default(),
            shift_forces: ShiftForces::default(),
        })
    }

    /// The atoms whose positions [`forces`](Self::forces) takes: all local atoms, or all but
    /// the periodic images the list makes itself ([`for_domain`](Self::for_domain)).
    pub fn stored_len(&self) -> usize {
        self.len() - self.images.table.len()
    }

    /// The forces on the periodic images the list makes, summed per box vector as
    /// [`ShiftForces`] counts them, from the last computation: zero where the list makes no
    /// images. Add them to the shift forces of [`HaloExchange::move_f`] for the virial.
    pub fn shift_forces(&self) -> ShiftForces {
        self.shift_forces
    }

    /// The number of local atoms the list was built for, the images it makes itself
    /// included ([`stored_len`](Self::stored_len) is what [`forces`](Self::forces) takes).
    pub fn len(&self) -> usize {
        self.slot_of_atom.len()
    }

    /// Whether the list was built for no atoms.
    pub fn is_empty(&self) -> bool {
        self.slot_of_atom.is_empty()
    }

    /// The atom pairs in the list (within `rlist` of each other at the build, or close).
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    /// The list entries (i-cluster, j-cluster): each costs the kernel 32 pair evaluations.
    pub fn entries(&self) -> usize {
        self.chunks.iter().map(|c| c.masks.len()).sum()
    }

    /// The instruction set the kernel runs with.
    pub fn isa(&self) -> Isa {
        self.isa
    }

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
    /// the caller does not own as a `Vec`, such as the halo exchange's own force array
    /// (`md_halo::HaloExchange::coordinates_and_forces_mut`), which the forces then leave from
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

/// The pairs `(i, j)`, `i < j`, of local atoms in one molecule whose zones pair: the excluded
/// pairs this domain owns, in the order of their first atom.
fn excluded_pairs(ids: &[u32], zones: &[Zone], topology: &Topology) -> Vec<[u32; 2]> {
    let mut by_molecule: Vec<u32> = (0..ids.len() as u32).collect();
    by_molecule.sort_unstable_by_key(|&a| (topology.molecules[ids[a as usize] as usize], a));
    let mut pairs = Vec::new();
    for molecule in by_molecule.chunk_by(|&a, &b| {
        topology.molecules[ids[a as usize] as usize] == topology.molecules[ids[b as usize] as usize]
    }) {
        for (n, &i) in molecule.iter().enumerate() {
            for &j in &molecule[n + 1..] {
                if zones[i as usize].pairs_with(zones[j as usize]) {
                    pairs.push([i, j]);
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// Where padding in `slot` sits: far from every atom and from all other padding, so that
/// the pair search finds nothing near it (the kernel ignores it by its mask bits).
fn far(slot: usize) -> f32 {
    1e9 + 1e6 * slot as f32
}

/// Copies the coordinates into slot order; padding keeps its place [far] away.
fn gather(atom_of_slot: &[u32], positions: &[RVec], images: &[PeriodicImage], slots: &mut Slots) {
    let n = atom_of_slot.len();
    if slots.x.len() != n {
        for v in [&mut slots.x, &mut slots.y, &mut slots.z] {
            *v = (0..n).map(far).collect();
        }
    }
    let stored = positions.len();
    for (((&atom, x), y), z) in atom_of_slot.iter().zip(&mut slots.x).zip(&mut slots.y).zip(&mut slots.z) {
        if let Some(p) = positions.get(atom as usize) {
            (*x, *y, *z) = (p[0], p[1], p[2]);
        } else if let Some(image) = (atom as usize).checked_sub(stored).and_then(|k| images.get(k)) {
            // As the halo makes an image: its atom's position plus the whole shift.
            let p = image.position(positions[image.atom as usize]);
            (*x, *y, *z) = (p[0], p[1], p[2]);
        }
    }
}

/// Columns over the x-y plane of the atoms' bounding box, each about as wide as a j-cluster
/// of atoms is tall.
struct Columns {
    lower: [f32; 2],
    width: [f32; 2],
    dims: [usize; 2],
    /// Slots of column `c` are `first[c]..first[c + 1]`; its atoms fill the first `atoms[c]`.
    first: Vec<usize>,
    atoms: Vec<usize>,
    /// The x-y bounding box of each column's atoms.
    bounds: Vec<Bounds>,
}

impl Columns {
    fn new(positions: &[RVec], rlist: f32) -> Columns {
        let mut all = Bounds::EMPTY;
        for &x in positions {
            all.add(x);
        }
        let (lower, extent) = if positions.is_empty() {
            ([0.0; 3], [1.0; 3])
        } else {
            (all.lower, std::array::from_fn(|d| (all.upper[d] - all.lower[d]).max(1e-3)))
        };
        // About J_CLUSTER atoms per cube of the column's width at the average density, and
        // no wider than the list radius.
        let density = positions.len().max(1) as f32 / (extent[0] * extent[1] * extent[2]);
        let side = (J_CLUSTER as f32 / density).cbrt().min(rlist.max(1e-3));
        let dims: [usize; 2] =
            std::array::from_fn(|d| ((extent[d] / side).round() as usize).clamp(1, 1 << 12));
        Columns {
            lower: [lower[0], lower[1]],
            width: std::array::from_fn(|d| extent[d] / dims[d] as f32),
            dims,
            first: Vec::new(),
            atoms: Vec::new(),
            bounds: Vec::new(),
        }
    }

    fn column_of(&self, x: RVec) -> [usize; 2] {
        std::array::from_fn(|d| {
            (((x[d] - self.lower[d]) / self.width[d]).max(0.0) as usize).min(self.dims[d] - 1)
        })
    }

    fn count(&self) -> usize {
        self.dims[0] * self.dims[1]
    }

    /// Sorts the atoms into the columns (by z within each, ties by index) and returns the atom
    /// of every slot; fills `first`, `atoms` and `bounds`.
    fn slots(&mut self, positions: &[RVec]) -> Vec<u32> {
        let n_columns = self.count();
        let column: Vec<usize> = positions
            .iter()
            .map(|&x| {
                let [i, j] = self.column_of(x);
                i * self.dims[1] + j
            })
            .collect();
        let (mut members, start) = bucket(&column, n_columns);
        self.first = Vec::with_capacity(n_columns + 1);
        self.atoms = Vec::with_capacity(n_columns);
        self.bounds = Vec::with_capacity(n_columns);
        let mut atom_of_slot = Vec::with_capacity(positions.len() + n_columns * J_CLUSTER);
        for c in 0..n_columns {
            let list = &mut members[start[c]..start[c + 1]];
            list.sort_by(|&a, &b| {
                positions[a as usize][2].total_cmp(&positions[b as usize][2]).then(a.cmp(&b))
            });
            let mut b = Bounds::EMPTY;
            for &a in list.iter() {
                b.add(positions[a as usize]);
            }
            self.first.push(atom_of_slot.len());
            self.atoms.push(list.len());
            self.bounds.push(b);
            atom_of_slot.extend_from_slice(list);
            atom_of_slot.resize(atom_of_slot.len().next_multiple_of(J_CLUSTER), PADDING);
        }
        self.first.push(atom_of_slot.len());
        atom_of_slot
    }
}

/// What the pair search of the chunks shares.
struct Search<'a> {
    columns: &'a Columns,
    i_bounds: &'a [Bounds],
    j_bounds: &'a [Bounds],
    atom_of_slot: &'a [u32],
    molecule: &'a [u32],
    /// Coordinates in slot order.
    slots: &'a Slots,
    rlist2: f32,
    bounds_rlist2: f32,
    /// Zone bits in slot order.
    zone: &'a [u8],
    /// Per i-cluster and per j-cluster: what the fast path of [`Search::mask`] needs.
    i_summary: Vec<Summary>,
    j_summary: Vec<Summary>,
}

/// What decides, for most entries, that every pair of real atoms interacts.
#[derive(Clone, Copy, Debug, Default)]
struct Summary {
    /// One bit per molecule hash: two clusters with no common bit share no molecule.
    molecules: u64,
    /// The OR of the atoms' zone bits.
    zones: u8,
    /// Bit `k` set when slot `k` of the cluster holds an atom.
    real: u8,
}

impl Summary {
    fn of(atoms: &[u32], molecules: &[u32], zones: &[u8]) -> Summary {
        let mut summary = Summary::default();
        for (k, ((&atom, &molecule), &zone)) in atoms.iter().zip(molecules).zip(zones).enumerate() {
            if atom != PADDING {
                summary.molecules |= 1 << (molecule.wrapping_mul(0x9E37_79B1) >> 26);
                summary.zones |= zone;
                summary.real |= 1 << k;
            }
        }
        summary
    }
}

impl Search<'_> {
    /// The entries of i-clusters `range`, and the force buffer they need.
    #[inline(always)]
    fn chunk(&self, range: std::ops::Range<usize>, n_slots: usize) -> Chunk {
        let mut chunk =
            Chunk { lower: (range.start * I_CLUSTER) / J_CLUSTER * J_CLUSTER, ..Chunk::default() };
        let mut upper = (range.end * I_CLUSTER).min(n_slots);
        let columns = self.columns;
        let reach = self.bounds_rlist2.sqrt();
        for ci in range {
            let ib = &self.i_bounds[ci];
            if ib.is_empty() {
                continue;
            }
            let first_entry = chunk.j_clusters.len();
            let own_column = columns.first.partition_point(|&f| f <= ci * I_CLUSTER) - 1;
            let span = |d: usize| {
                let lo =
                    ((ib.lower[d] - reach - columns.lower[d]) / columns.width[d]).floor().max(0.0) as usize;
                let hi = ((ib.upper[d] - columns.lower[d] + reach) / columns.width[d]).max(0.0) as usize;
                lo.min(columns.dims[d] - 1)..=hi.min(columns.dims[d] - 1)
            };
            for cx in span(0) {
                for cy in span(1) {
                    let column = cx * columns.dims[1] + cy;
                    // Each pair once: j slots above some i slot, so no column before this one.
                    if column < own_column || columns.atoms[column] == 0 {
                        continue;
                    }
                    if ib.distance2(&columns.bounds[column], 0..2) >= self.bounds_rlist2 {
                        continue;
                    }
                    let first_j = columns.first[column] / J_CLUSTER;
                    let real_j = columns.atoms[column].div_ceil(J_CLUSTER);
                    let j_range = &self.j_bounds[first_j..first_j + real_j];
                    // Clusters are sorted by z: skip those entirely below the i-cluster.
                    let start = j_range.partition_point(|b| b.upper[2] < ib.lower[2] - reach);
                    for (k, jb) in j_range.iter().enumerate().skip(start) {
                        if jb.lower[2] > ib.upper[2] + reach {
                            break;
                        }
                        let cj = first_j + k;
                        if (cj + 1) * J_CLUSTER <= ci * I_CLUSTER + 1
                            || ib.distance2(jb, 0..3) >= self.bounds_rlist2
                        {
                            continue;
                        }
                        let mask = self.mask(ci, cj);
                        if mask != 0 {
                            chunk.j_clusters.push(cj as u32);
                            chunk.masks.push(mask);
                            upper = upper.max((cj + 1) * J_CLUSTER);
                        }
                    }
                }
            }
            if chunk.j_clusters.len() > first_entry {
                if chunk.starts.is_empty() {
                    chunk.starts.push(first_entry as u32);
                }
                chunk.i_clusters.push(ci as u32);
                chunk.starts.push(chunk.j_clusters.len() as u32);
            }
        }
        chunk.force = vec![0.0; 3 * (upper - chunk.lower)];
        chunk
    }

    /// The interacting pairs of an entry; zero when none of them is within `rlist`.
    #[inline(always)]
    fn mask(&self, ci: usize, cj: usize) -> u32 {
        let (si, sj) = (ci * I_CLUSTER, cj * J_CLUSTER);
        let (is, js) = (self.i_summary[ci], self.j_summary[cj]);
        if sj >= si + I_CLUSTER && is.molecules & js.molecules == 0 && Zone::pair_bits(is.zones, js.zones) {
            // Every pair of real atoms interacts: no common molecule, the zones agree, and
            // every j slot lies above every i slot. Padding sits far away (see `gather`).
            let [xj, yj, zj]: [[f32; J_CLUSTER]; 3] =
                [&self.slots.x, &self.slots.y, &self.slots.z].map(|v| cluster(v, sj));
            let [xi, yi, zi]: [[f32; I_CLUSTER]; 3] =
                [&self.slots.x, &self.slots.y, &self.slots.z].map(|v| cluster(v, si));
            let mut closest = [f32::INFINITY; J_CLUSTER];
            for a in 0..I_CLUSTER {
                for b in 0..J_CLUSTER {
                    let (dx, dy, dz) = (xi[a] - xj[b], yi[a] - yj[b], zi[a] - zj[b]);
                    let r2 = dx * dx + dy * dy + dz * dz;
                    closest[b] = if r2 < closest[b] { r2 } else { closest[b] };
                }
            }
            let closest = closest.iter().fold(f32::INFINITY, |m, &r2| if r2 < m { r2 } else { m });
            if closest >= self.rlist2 {
                return 0;
            }
            let rows =
                (0..I_CLUSTER).filter(|a| is.real & (1 << a) != 0).fold(0u32, |m, a| m | 0xFF << (8 * a));
            return rows & (u32::from(js.real) * 0x0101_0101);
        }
        let (mut mask, mut near) = (0u32, 0u32);
        let (molecule_j, atom_j): ([u32; J_CLUSTER], [u32; J_CLUSTER]) =
            (cluster(self.molecule, sj), cluster(self.atom_of_slot, sj));
        let zone_j: [u8; J_CLUSTER] = cluster(self.zone, sj);
        let [xj, yj, zj]: [[f32; J_CLUSTER]; 3] =
            [&self.slots.x, &self.slots.y, &self.slots.z].map(|v| cluster(v, sj));
        for a in 0..I_CLUSTER {
            let si = ci * I_CLUSTER + a;
            let (xi, yi, zi, molecule_i) =
                (self.slots.x[si], self.slots.y[si], self.slots.z[si], self.molecule[si]);
            let (real_i, zone_i) = (self.atom_of_slot[si] != PADDING, self.zone[si]);
            let (mut valid, mut close) = ([false; J_CLUSTER], [false; J_CLUSTER]);
            for b in 0..J_CLUSTER {
                valid[b] = real_i
                    & (sj + b > si)
                    & (atom_j[b] != PADDING)
                    & (molecule_j[b] != molecule_i)
                    & Zone::pair_bits(zone_i, zone_j[b]);
                let (dx, dy, dz) = (xi - xj[b], yi - yj[b], zi - zj[b]);
                close[b] = dx * dx + dy * dy + dz * dz < self.rlist2;
            }
            let row = bits(valid);
            mask |= row << (a * J_CLUSTER);
            near |= row & bits(close);
        }
        if near != 0 { mask } else { 0 }
    }
}

/// The pair search of one chunk with AVX-512 code generation.
///
/// # Safety
/// The processor must have AVX-512F and AVX-512VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512bw")]
unsafe fn search_avx512(search: &Search<'_>, range: std::ops::Range<usize>, n_slots: usize) -> Chunk {
    search.chunk(range, n_slots)
}

/// The `N` values of `v` from `first` on: a cluster's slots as one array, so that loops over
/// it vectorise without bounds checks.
#[inline(always)]
fn cluster<T: Copy, const N: usize>(v: &[T], first: usize) -> [T; N] {
    v[first..first + N].try_into().expect("a cluster lies within the slots")
}

/// Lane `b` of `lanes` as bit `b`.
#[inline(always)]
fn bits(lanes: [bool; J_CLUSTER]) -> u32 {
    lanes.iter().enumerate().fold(0, |m, (b, &v)| m | (u32::from(v) << b))
}

/// The kernel over one chunk with AVX2 code generation.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn chunk_avx2<const ENERGY: bool, const EWALD: bool>(
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
unsafe fn chunk_avx512<const ENERGY: bool, const EWALD: bool>(
    chunk: &mut Chunk,
    slots: &Slots,
    k: Constants,
) -> f64 {
    chunk_kernel::<ENERGY, EWALD>(chunk, slots, k)
}

/// The kernel over one chunk: forces into the chunk's buffer, and the energy when `ENERGY`;
/// Ewald's real-space electrostatics when `EWALD`, else reaction field.
#[inline(always)]
fn chunk_kernel<const ENERGY: bool, const EWALD: bool>(
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
/// rather than a closure so that it is always inlined into the kernel of each instruction set.
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

#[cfg(test)]
mod tests;
