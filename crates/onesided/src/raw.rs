//! Untyped blocks of symmetric memory, what the typed arrays and the collectives' scratch are
//! made of, and the heap they come from: its size by the implementation's setting and what
//! the blocks hold ([`HeapStatus`]).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::env;
use crate::watchdog::watch;

/// Alignment of every symmetric allocation. glibc's `memcpy` on this class of CPU is about
/// 15x slower into destinations 1 to 15 bytes past a 64-byte boundary; 64 also keeps signal
/// words of different arrays off shared cache lines.
pub const SYMMETRIC_ALIGN: usize = 64;

/// Bytes of the symmetric heap that this process's blocks hold (one runtime per process, so
/// one heap).
static HEAP_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Bytes of the symmetric heap the crate's blocks hold, alignment included: the same on every
/// PE, since every block is allocated and freed collectively with the same size.
pub(crate) fn heap_in_use() -> usize {
    HEAP_IN_USE.load(Ordering::Relaxed)
}

/// An untyped block of symmetric memory; freeing is explicit (there is no `Drop`: freeing is
/// collective, and a block that is not freed is simply leaked).
pub(crate) struct RawSymmetric {
    ptr: NonNull<u8>,
    bytes: usize,
}

impl RawSymmetric {
    /// `shmem_align` of at least one alignment unit. Returns `None` where the heap is
    /// exhausted; the caller must agree on the outcome with the other PEs.
    ///
    /// # Collective
    /// `shmem_align` ends with a barrier.
    ///
    /// `bytes` must leave room for rounding up to `align` below `isize::MAX`; `align` is a
    /// power of two.
    pub(crate) fn collective_alloc(bytes: usize, align: usize) -> Option<RawSymmetric> {
        debug_assert!(align.is_power_of_two() && bytes <= isize::MAX as usize - align);
        let bytes = Self::rounded(bytes, align);
        // SAFETY: OpenSHMEM is initialised (callers hold a Runtime or are creating one).
        let ptr = watch("shmem_align", None, || unsafe { shmem_sys::shmem_align(align, bytes) });
        let raw = NonNull::new(ptr.cast::<u8>()).map(|ptr| RawSymmetric { ptr, bytes });
        if raw.is_some() {
            HEAP_IN_USE.fetch_add(bytes, Ordering::Relaxed);
        }
        // Open MPI's shmem_align returns NULL before its closing barrier, which the PEs that
        // succeeded are waiting in; join it so that every PE reaches the caller's agreement.
        #[cfg(shmem_oshmem)]
        if raw.is_none() {
            // SAFETY: OpenSHMEM is initialised.
            watch("shmem_barrier_all", None, || unsafe { shmem_sys::shmem_barrier_all() });
        }
        raw
    }

    /// The bytes a block of `bytes` at `align` takes.
    pub(crate) fn rounded(bytes: usize, align: usize) -> usize {
        bytes.max(1).div_ceil(align) * align
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// # Collective
    /// `shmem_free` synchronises all PEs.
    pub(crate) fn collective_free(self) {
        HEAP_IN_USE.fetch_sub(self.bytes, Ordering::Relaxed);
        // SAFETY: the pointer came from shmem_align and is freed once (self is consumed).
        let ptr = self.ptr.as_ptr().cast::<c_void>();
        // SAFETY: as above.
        watch("shmem_free", None, || unsafe { shmem_sys::shmem_free(ptr) })
    }
}

/// The capacity and use of the symmetric heap on each PE (the same on every PE:
/// allocations are symmetric, and [`Runtime::init`](crate::Runtime::init) checked that the
/// PEs share the heap-size setting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapStatus {
    /// The heap's size in bytes, as the implementation reads the setting (`None` when the
    /// setting cannot be read as a size; the implementation will say so itself).
    pub capacity: Option<usize>,
    /// Bytes this crate's allocations hold, alignment included (the implementation keeps a
    /// little more of its own).
    pub in_use: usize,
    /// The variable that sizes the heap for the implementation in use.
    pub variable: &'static str,
    /// Its value, or `unset, default ...`.
    pub setting: String,
}

impl HeapStatus {
    /// What the environment and this process's allocations say now: the same on every PE
    /// once the runtime has started.
    pub fn now() -> HeapStatus {
        let (variable, setting) = env::heap_size_setting();
        HeapStatus { capacity: heap_capacity(variable), in_use: heap_in_use(), variable, setting }
    }

    /// A value of the heap variable that fits `bytes` in all, with a quarter to spare, in
    /// whole MiB or GiB.
    pub fn setting_for(bytes: usize) -> String {
        let mib = (bytes as u128 * 5 / 4).div_ceil(1 << 20).max(1);
        if mib >= 1024 { format!("{}G", mib.div_ceil(1024)) } else { format!("{}M", mib.div_ceil(64) * 64) }
    }
}

/// The heap's size by `variable` (the one in effect), or the implementation's default.
pub(crate) fn heap_capacity(variable: &str) -> Option<usize> {
    parse_size(&std::env::var(variable).unwrap_or_else(|_| env::heap_size_default().to_string()))
}

/// A size as Sandia OpenSHMEM reads its heap variable (`%lf%c`), which accepts all that Open
/// MPI's OSHMEM does (a whole number and at most one suffix letter; it refuses the rest at
/// start-up itself): a decimal number, then
/// optionally `k`, `m`, `g` or `t` (either case; powers of 1024); anything after the suffix is
/// ignored (`2GB` is 2 GiB).
pub(crate) fn parse_size(value: &str) -> Option<usize> {
    let value = value.trim();
    let end = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let number: f64 = value[..end].parse().ok().filter(|n: &f64| n.is_finite())?;
    let scale = match value[end..].chars().next().map(|c| c.to_ascii_lowercase()) {
        None => 1.0,
        Some('k') => 1024.0,
        Some('m') => 1024.0 * 1024.0,
        Some('g') => 1024.0 * 1024.0 * 1024.0,
        Some('t') => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        Some(_) => return None,
    };
    let bytes = (number * scale).ceil();
    (bytes < usize::MAX as f64).then_some(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_sizes_read_as_the_implementations_read_them() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2GB"), Some(2 << 30));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size(" 64k "), Some(64 << 10));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("2X"), None);
        assert_eq!(parse_size("99999999999T"), None);
        assert_eq!(HeapStatus::setting_for(300 << 20), "384M");
        assert_eq!(HeapStatus::setting_for(1000 << 20), "2G");
        assert_eq!(HeapStatus::setting_for(1), "64M");
    }
}
