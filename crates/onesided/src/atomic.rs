//! Remote atomic operations on 64-bit integers in symmetric memory.
//!
//! Only 64-bit words are offered: Open MPI 4.1.4 crashes in 32-bit compare-and-swap
//! (open-mpi/ompi#11257), and 64 bits is what counters and offsets need.

use std::ffi::{c_longlong, c_ulonglong};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use bytemuck::Pod;

use crate::error::Result;
use crate::heap::SymArray;
use crate::runtime::Runtime;

mod sealed {
    pub trait Sealed {}
    impl Sealed for i64 {}
    impl Sealed for u64 {}
}

/// A 64-bit integer type with OpenSHMEM atomic routines (`i64` maps to the `longlong`
/// routines, `u64` to `ulonglong`).
///
/// # Safety
/// Implementations must call the routines of a C type with the same size and representation
/// as `Self`. The trait is sealed; `i64` and `u64` are the only implementations.
pub unsafe trait AtomicInt: Pod + sealed::Sealed + PartialEq + std::fmt::Debug {
    #[doc(hidden)]
    unsafe fn fetch_add(target: *mut Self, value: Self, pe: i32) -> Self;
    #[doc(hidden)]
    unsafe fn add(target: *mut Self, value: Self, pe: i32);
    #[doc(hidden)]
    unsafe fn fetch(target: *const Self, pe: i32) -> Self;
    #[doc(hidden)]
    unsafe fn set(target: *mut Self, value: Self, pe: i32);
    #[doc(hidden)]
    unsafe fn swap(target: *mut Self, value: Self, pe: i32) -> Self;
    #[doc(hidden)]
    unsafe fn compare_swap(target: *mut Self, cond: Self, value: Self, pe: i32) -> Self;
}

macro_rules! atomic_int {
    ($t:ty, $c:ty, $fetch_add:ident, $add:ident, $fetch:ident, $set:ident, $swap:ident, $cswap:ident) => {
        // SAFETY: $c is the C type of the same size and signedness as $t (checked by the
        // shmem-sys layout test: long long is 8 bytes).
        unsafe impl AtomicInt for $t {
            unsafe fn fetch_add(target: *mut Self, value: Self, pe: i32) -> Self {
                // SAFETY: forwarded contract: target is a symmetric word, pe exists.
                crate::watchdog::watch(stringify!($fetch_add), Some(pe as usize), || unsafe {
                    shmem_sys::$fetch_add(target.cast::<$c>(), value as $c, pe) as $t
                })
            }
            unsafe fn add(target: *mut Self, value: Self, pe: i32) {
                // SAFETY: as above.
                crate::watchdog::watch(stringify!($add), Some(pe as usize), || unsafe {
                    shmem_sys::$add(target.cast::<$c>(), value as $c, pe)
                })
            }
            unsafe fn fetch(target: *const Self, pe: i32) -> Self {
                // SAFETY: as above.
                crate::watchdog::watch(stringify!($fetch), Some(pe as usize), || unsafe {
                    shmem_sys::$fetch(target.cast::<$c>(), pe) as $t
                })
            }
            unsafe fn set(target: *mut Self, value: Self, pe: i32) {
                // SAFETY: as above.
                crate::watchdog::watch(stringify!($set), Some(pe as usize), || unsafe {
                    shmem_sys::$set(target.cast::<$c>(), value as $c, pe)
                })
            }
            unsafe fn swap(target: *mut Self, value: Self, pe: i32) -> Self {
                // SAFETY: as above.
                crate::watchdog::watch(stringify!($swap), Some(pe as usize), || unsafe {
                    shmem_sys::$swap(target.cast::<$c>(), value as $c, pe) as $t
                })
            }
            unsafe fn compare_swap(target: *mut Self, cond: Self, value: Self, pe: i32) -> Self {
                // SAFETY: as above.
                crate::watchdog::watch(stringify!($cswap), Some(pe as usize), || unsafe {
                    shmem_sys::$cswap(target.cast::<$c>(), cond as $c, value as $c, pe) as $t
                })
            }
        }
    };
}

atomic_int!(
    i64,
    c_longlong,
    shmem_longlong_atomic_fetch_add,
    shmem_longlong_atomic_add,
    shmem_longlong_atomic_fetch,
    shmem_longlong_atomic_set,
    shmem_longlong_atomic_swap,
    shmem_longlong_atomic_compare_swap
);
atomic_int!(
    u64,
    c_ulonglong,
    shmem_ulonglong_atomic_fetch_add,
    shmem_ulonglong_atomic_add,
    shmem_ulonglong_atomic_fetch,
    shmem_ulonglong_atomic_set,
    shmem_ulonglong_atomic_swap,
    shmem_ulonglong_atomic_compare_swap
);

/// An array of 64-bit integers in symmetric memory that is only ever accessed atomically,
/// locally as well as remotely. Zero at allocation.
///
/// The operations are OpenSHMEM's atomics, so that PEs on different nodes stay atomic with
/// respect to each other (a processor's atomic through a mapping is not atomic with respect
/// to a library atomic from another node). When every PE of the job is mapped into this
/// process (one node, direct path on), they are the processor's atomics through the mapping,
/// on every PE alike: atomic with respect to each other, and none waits for its target to
/// call into the library (Sandia OpenSHMEM applies a same-node atomic only then).
pub struct AtomicArray<'rt, A: AtomicInt> {
    words: SymArray<'rt, A>,
}

impl<'rt, A: AtomicInt> AtomicArray<'rt, A> {
    /// Allocates `len` words on every PE, all zero.
    ///
    /// # Collective
    /// As [`SymArray::collective_alloc`].
    pub fn collective_alloc(rt: &'rt Runtime, name: &str, len: usize) -> Result<Self> {
        Ok(AtomicArray { words: SymArray::collective_alloc(rt, name, len)? })
    }

    /// The number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether there are no words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The name given at allocation.
    pub fn name(&self) -> &str {
        self.words.name()
    }

    /// The local address of word 0 (its symmetric address on every PE), for calling the C
    /// library directly. When every PE is mapped ([`Runtime`]'s direct path on one node), the
    /// array's own operations are the processor's atomics: do not mix them with the C
    /// library's atomics on the same words.
    pub fn as_ptr(&self) -> *mut A {
        self.words.as_ptr()
    }

    /// Checks the word and issues a release fence, so that this PE's earlier copies through
    /// the shared-memory mapping are visible before the atomic is.
    fn target(&self, op: &'static str, pe: usize, index: usize) -> Result<*mut A> {
        self.words.check(op, pe, index, 1)?;
        fence(Ordering::Release);
        Ok(self.words.element_ptr(index))
    }

    /// PE `pe`'s word `index` as a processor atomic, when every PE of the job is mapped into
    /// this process: then no PE uses the library's atomics on the array, so the processor's
    /// stay atomic with respect to each other, and none waits for the target to call into the
    /// library (Sandia OpenSHMEM applies its atomics within a node only then). `index` is in
    /// bounds and `pe` exists.
    fn processor_word(&self, pe: usize, index: usize) -> Option<&AtomicU64> {
        if !self.words.runtime().all_pes_mapped() {
            return None;
        }
        let base = self.words.mapped(pe)?;
        // SAFETY: the word is inside PE `pe`'s mapped copy (index checked by the caller),
        // 8-byte aligned (a 64-byte-aligned block of 8-byte words) and only ever accessed
        // atomically; A is an 8-byte integer, so its bits are a u64's. The reference lives no
        // longer than `self`, which keeps the mapping.
        Some(unsafe { AtomicU64::from_ptr(base.as_ptr().add(index).cast::<u64>()) })
    }

    /// An acquire fence after a fetching atomic, so that data the value vouches for is read
    /// after it.
    fn acquired(value: A) -> A {
        fence(Ordering::Acquire);
        value
    }

    /// Adds `value` to word `index` of PE `pe` and returns the previous value.
    pub fn fetch_add(&self, pe: usize, index: usize, value: A) -> Result<A> {
        let target = self.target("atomic fetch_add", pe, index)?;
        if let Some(word) = self.processor_word(pe, index) {
            return Ok(from_bits(word.fetch_add(to_bits(value), Ordering::AcqRel)));
        }
        // SAFETY: target is a checked symmetric word, pe exists.
        Ok(Self::acquired(unsafe { A::fetch_add(target, value, pe as i32) }))
    }

    /// Adds `value` to word `index` of PE `pe`.
    pub fn add(&self, pe: usize, index: usize, value: A) -> Result<()> {
        let target = self.target("atomic add", pe, index)?;
        if let Some(word) = self.processor_word(pe, index) {
            word.fetch_add(to_bits(value), Ordering::Release);
            return Ok(());
        }
        // SAFETY: as above.
        unsafe { A::add(target, value, pe as i32) };
        Ok(())
    }

    /// Reads word `index` of PE `pe` atomically.
    pub fn fetch(&self, pe: usize, index: usize) -> Result<A> {
        let target = self.target("atomic fetch", pe, index)?;
        if let Some(word) = self.processor_word(pe, index) {
            return Ok(from_bits(word.load(Ordering::Acquire)));
        }
        // SAFETY: as above.
        Ok(Self::acquired(unsafe { A::fetch(target, pe as i32) }))
    }

    /// Writes word `index` of PE `pe` atomically.
    pub fn set(&self, pe: usize, index: usize, value: A) -> Result<()> {
        let target = self.target("atomic set", pe, index)?;
        if let Some(word) = self.processor_word(pe, index) {
            word.store(to_bits(value), Ordering::Release);
            return Ok(());
        }
        // SAFETY: as above.
        unsafe { A::set(target, value, pe as i32) };
        Ok(())
    }

    /// Replaces word `index` of PE `pe` with `value` and returns the previous value.
    pub fn swap(&self, pe: usize, index: usize, value: A) -> Result<A> {
        let target = self.target("atomic swap", pe, index)?;
        if let Some(word) = self.processor_word(pe, index) {
            return Ok(from_bits(word.swap(to_bits(value), Ordering::AcqRel)));
        }
        // SAFETY: as above.
        Ok(Self::acquired(unsafe { A::swap(target, value, pe as i32) }))
    }

    /// Replaces word `index` of PE `pe` with `value` if it equals `cond`; returns the
    /// previous value (equal to `cond` when the swap happened).
    pub fn compare_swap(&self, pe: usize, index: usize, cond: A, value: A) -> Result<A> {
        let target = self.target("atomic compare_swap", pe, index)?;
        if let Some(word) = self.processor_word(pe, index) {
            let previous =
                word.compare_exchange(to_bits(cond), to_bits(value), Ordering::AcqRel, Ordering::Acquire);
            return Ok(from_bits(previous.unwrap_or_else(|seen| seen)));
        }
        // SAFETY: as above.
        Ok(Self::acquired(unsafe { A::compare_swap(target, cond, value, pe as i32) }))
    }

    /// Reads this PE's word `index` atomically.
    pub fn load(&self, index: usize) -> Result<A> {
        self.fetch(self.words.runtime().my_pe(), index)
    }
}

/// The bits of a 64-bit atomic integer as a `u64` (the processor's atomics work on those).
fn to_bits<A: AtomicInt>(value: A) -> u64 {
    bytemuck::cast(value)
}

/// A 64-bit atomic integer from its bits.
fn from_bits<A: AtomicInt>(bits: u64) -> A {
    bytemuck::cast(bits)
}

impl<A: AtomicInt> std::fmt::Debug for AtomicArray<'_, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicArray").field("name", &self.name()).field("len", &self.len()).finish()
    }
}
