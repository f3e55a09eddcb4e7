//! The pair list of one domain ([`PairList`]) and what it says of itself; `search.rs` builds
//! it, `forces.rs` computes with it.

use md_halo::ShiftForces;

use super::chunk::Chunk;
use super::images::Images;
use super::kernel::{Constants, Isa};
use super::layout::Slots;
use super::scratch::Scratch;
use crate::force::ForceField;
use crate::types::AtomParams;

/// The clustered Verlet pair list of one domain, with the kernel that computes forces from
/// it. Build it after every repartition (the local atoms change), use it for every step until
/// the next.
#[derive(Clone, Debug)]
pub struct PairList {
    /// The local atom in each slot, [`PADDING`](super::chunk::PADDING) where none.
    pub(super) atom_of_slot: Vec<u32>,
    /// The slot of each local atom.
    pub(super) slot_of_atom: Vec<u32>,
    pub(super) slots: Slots,
    pub(super) chunks: Vec<Chunk>,
    pub(super) constants: Constants,
    pub(super) isa: Isa,
    /// Interacting pairs in the list.
    pub(super) pairs: usize,
    /// Summed chunk forces per slot (x, y, z runs), reused between steps.
    pub(super) total: Vec<f32>,
    /// The force field the list was built for.
    pub(super) field: ForceField,
    /// Under Ewald: the pairs within one molecule that this domain owns, as local atoms
    /// `(i, j)` with `i < j`, and their parameters; empty otherwise.
    pub(super) exclusions: Vec<[u32; 2]>,
    pub(super) exclusion_params: Vec<[AtomParams; 2]>,
    /// The periodic images the kernel makes (local atoms `stored..`, one per entry), empty
    /// where the positions hold every local atom.
    pub(super) images: Images,
    /// The forces the images carried across the periodic boundaries in the last computation.
    pub(super) shift_forces: ShiftForces,
    /// The pair search's own buffers.
    pub(super) scratch: Scratch,
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
