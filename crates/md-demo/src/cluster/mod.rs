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
//!   same molecule, owned by this domain by their [zones](md_halo::Zone), and each pair once:
//!   slot of i below slot of j).
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
//!
//! The code is split by concern: `layout.rs` sorts the atoms into columns and slots
//! (bounding boxes, coordinates in slot order); `search.rs` builds the list (the pair search,
//! its masks and the Ewald exclusions); `kernel.rs` holds the instruction sets and the kernel
//! over one chunk, with its `#[target_feature]` copies and the Ewald `erfc` and `exp`
//! helpers; `forces.rs` runs the kernel over the chunks, sums their forces and adds the
//! exclusion corrections; `images.rs` indexes the periodic images the list makes; `tests.rs`
//! holds the tests.
//!
//! [`Electrostatics::Ewald`]: crate::force::Electrostatics::Ewald

mod forces;
mod images;
mod kernel;
mod layout;
mod search;

pub use kernel::Isa;

use md_halo::ShiftForces;

use crate::force::ForceField;
use crate::types::AtomParams;
use images::Images;
use kernel::Constants;
use layout::Slots;
use search::Scratch;
// What the tests (`use super::*`) name besides the items of this module.
#[cfg(test)]
use {
    crate::error::Error,
    crate::force::Topology,
    kernel::{erfc_and_gaussian, exp_nonpositive},
    md_halo::{RVec, Zone},
};

/// Atoms per i-cluster.
pub const I_CLUSTER: usize = 4;
/// Atoms per j-cluster: the vector width of the kernel.
pub const J_CLUSTER: usize = 8;
/// i-clusters per chunk, the unit of threading and of force accumulation.
const CHUNK_CLUSTERS: usize = 128;
/// The slot of padding.
const PADDING: u32 = u32::MAX;

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
    /// The pair search's own buffers.
    scratch: Scratch,
}

impl PairList {
    /// The atoms whose positions [`forces`](Self::forces) takes: all local atoms, or all but
    /// the periodic images the list makes itself ([`for_domain`](Self::for_domain)).
    pub fn stored_len(&self) -> usize {
        self.len() - self.images.table.len()
    }

    /// The forces on the periodic images the list makes, summed per box vector as
    /// [`ShiftForces`] counts them, from the last computation: zero where the list makes no
    /// images. Add them to the shift forces of [`Step::move_f`] for the virial.
    ///
    /// [`Step::move_f`]: md_halo::Step::move_f
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
}

/// Gives `v` room for 19 % more than it holds when it has less than 12.5 % spare, as GROMACS
/// over-allocates its domain decomposition's buffers (`over_alloc_dd`): a list whose size
/// wanders by a few percent from one search to the next then stops growing after its first
/// searches, rather than doubling one buffer at some later search.
fn keep_room<T>(v: &mut Vec<T>) {
    if v.capacity() < v.len() + v.len() / 8 {
        v.reserve_exact(v.len() * 19 / 100);
    }
}

#[cfg(test)]
mod tests;
