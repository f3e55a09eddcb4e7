//! Untyped blocks of symmetric memory: what the typed arrays and the collectives' scratch are
//! made of.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

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
