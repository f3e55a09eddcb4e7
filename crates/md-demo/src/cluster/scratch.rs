//! What the pair search keeps between searches so that its buffers keep their capacity, and
//! the summary of a cluster that decides most entries' masks at once.

use super::chunk::PADDING;
use super::layout::{Bounds, Columns};

/// What the pair search needs only while it runs, kept in the list so that its buffers keep
/// their capacity from one search to the next.
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    pub(super) columns: Columns,
    /// The molecule and the zone bits of every slot.
    pub(super) molecule: Vec<u32>,
    pub(super) zone: Vec<u8>,
    /// The bounding box of every i-cluster and every j-cluster.
    pub(super) i_bounds: Vec<Bounds>,
    pub(super) j_bounds: Vec<Bounds>,
    pub(super) i_summary: Vec<Summary>,
    pub(super) j_summary: Vec<Summary>,
}

/// What decides, for most entries, that every pair of real atoms interacts.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Summary {
    /// One bit per molecule hash: two clusters with no common bit share no molecule.
    pub(super) molecules: u64,
    /// The OR of the atoms' zone bits.
    pub(super) zones: u8,
    /// Bit `k` set when slot `k` of the cluster holds an atom.
    pub(super) real: u8,
}

impl Summary {
    pub(super) fn of(atoms: &[u32], molecules: &[u32], zones: &[u8]) -> Summary {
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
