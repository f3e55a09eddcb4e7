//! When a loop is worth the thread pool.

/// Below this many atoms, finding destinations and packing run on the calling thread:
/// handing a few microseconds of work to the thread pool costs more than it saves.
pub(crate) const PARALLEL_MIN: usize = 4096;

/// Whether a loop over `len` items is worth handing to the thread pool: at least
/// `parallel_min` items, and more than one thread to share them.
pub(crate) fn parallel(len: usize, parallel_min: usize) -> bool {
    len >= parallel_min && rayon::current_num_threads() > 1
}
