//! The clusters' sizes and the unit of threading: a chunk of i-clusters with its entries and
//! the force buffer they add into.

/// Atoms per i-cluster.
pub const I_CLUSTER: usize = 4;
/// Atoms per j-cluster: the vector width of the kernel.
pub const J_CLUSTER: usize = 8;
/// i-clusters per chunk, the unit of threading and of force accumulation.
pub(super) const CHUNK_CLUSTERS: usize = 128;
/// The slot of padding.
pub(super) const PADDING: u32 = u32::MAX;

/// A slice of the pair list: consecutive i-clusters, their entries, and the force buffer
/// they add into.
#[derive(Clone, Debug, Default)]
pub(super) struct Chunk {
    /// The i-clusters with entries, ascending.
    pub(super) i_clusters: Vec<u32>,
    /// Entries of `i_clusters[e]` are `starts[e]..starts[e + 1]`.
    pub(super) starts: Vec<u32>,
    /// The j-cluster of each entry.
    pub(super) j_clusters: Vec<u32>,
    /// Which of the 4 × 8 pairs of each entry interact (bit `8a + b`).
    pub(super) masks: Vec<u32>,
    /// The slots this chunk's forces touch: `lower..lower + force.len() / 3`.
    pub(super) lower: usize,
    /// Forces on slots `lower..`, x, y and z in three consecutive runs.
    pub(super) force: Vec<f32>,
}

impl Chunk {
    pub(super) fn span(&self) -> usize {
        self.force.len() / 3
    }
}

/// Gives `v` room for 19 % more than it holds when it has less than 12.5 % spare, as GROMACS
/// over-allocates its domain decomposition's buffers (`over_alloc_dd`): a list whose size
/// wanders by a few percent from one search to the next then stops growing after its first
/// searches, rather than doubling one buffer at some later search.
pub(super) fn keep_room<T>(v: &mut Vec<T>) {
    if v.capacity() < v.len() + v.len() / 8 {
        v.reserve_exact(v.len() * 19 / 100);
    }
}
