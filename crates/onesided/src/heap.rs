//! The symmetric heap: typed symmetric arrays, exact and grow-to-global-max.
//!
//! Symmetric memory is memory other PEs write without this process's knowledge. The safe
//! accessors therefore only copy (a race between a remote put and a local copy of the same
//! elements gives unspecified, possibly torn values, never a reference to changing memory);
//! a slice view is `unsafe` and its contract is that no PE writes the array while the view
//! lives. Higher-level types that know their protocol (the send-receive channels) hand out
//! safe views.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// Alignment of every symmetric allocation. glibc's `memcpy` on this class of CPU is about
/// 15x slower into destinations 1 to 15 bytes past a 64-byte boundary; 64 also keeps signal
/// words of different arrays off shared cache lines.
pub const SYMMETRIC_ALIGN: usize = 64;

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
    pub(crate) fn collective_alloc(bytes: usize) -> Option<RawSymmetric> {
        let bytes = bytes.max(1).div_ceil(SYMMETRIC_ALIGN) * SYMMETRIC_ALIGN;
        // SAFETY: OpenSHMEM is initialised (callers hold a Runtime or are creating one).
        let ptr = unsafe { shmem_sys::shmem_align(SYMMETRIC_ALIGN, bytes) };
        NonNull::new(ptr.cast::<u8>()).map(|ptr| RawSymmetric { ptr, bytes })
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
        // SAFETY: the pointer came from shmem_align and is freed once (self is consumed).
        unsafe { shmem_sys::shmem_free(self.ptr.as_ptr().cast::<c_void>()) }
    }
}

/// A typed array in symmetric memory: the same length at the same symmetric address on every
/// PE, so that any PE can put into or get from any other PE's copy.
///
/// Elements are plain old data ([`bytemuck::Pod`]): no references, no padding, any bit
/// pattern valid, so whatever a remote PE writes is a valid `T`.
///
/// Dropping the array frees it; see [`SymArray::collective_free`].
pub struct SymArray<'rt, T: Pod> {
    rt: &'rt Runtime,
    raw: Option<RawSymmetric>,
    ptr: NonNull<T>,
    /// Element 0 of each PE's copy where it is mapped into this process (`shmem_ptr`).
    mapped: Box<[Option<NonNull<T>>]>,
    len: usize,
    name: String,
    _elements: PhantomData<T>,
}

// SAFETY: the array is a handle on symmetric memory; every safe access is a copy or a library
// call, which OpenSHMEM with THREAD_MULTIPLE allows from any thread. T: Pod is Send + Sync.
unsafe impl<T: Pod> Send for SymArray<'_, T> {}
// SAFETY: as above; `&SymArray` gives no reference into the memory without `unsafe`.
unsafe impl<T: Pod> Sync for SymArray<'_, T> {}

impl<'rt, T: Pod> SymArray<'rt, T> {
    /// Allocates `len` elements on every PE, zeroed.
    ///
    /// # Collective
    /// Every PE must call it with the same `len` and `T`, in the same order relative to other
    /// collectives. Debug builds check this and return [`Error::AsymmetricAllocation`] on every
    /// PE, naming the first PE that differs; release builds skip the check.
    ///
    /// # Errors
    /// [`Error::HeapExhausted`] (on every PE) names the variable that sizes the heap.
    pub fn collective_alloc(rt: &'rt Runtime, name: &str, len: usize) -> Result<Self> {
        Self::collective_alloc_with(rt, name, len, |_| {})
    }

    /// Allocates, zeroes, lets `init` fill this PE's copy, and only then synchronises, so no
    /// remote put into the new array can arrive before `init` ran.
    pub(crate) fn collective_alloc_with(
        rt: &'rt Runtime,
        name: &str,
        len: usize,
        init: impl FnOnce(&mut [T]),
    ) -> Result<Self> {
        let index = rt.next_allocation_index();
        if cfg!(debug_assertions) {
            check_symmetric(rt, index, name, len, size_of::<T>())?;
        }
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::SizeOverflow {
                array: name.to_string(),
                len,
                elem_size: size_of::<T>(),
            })?;
        let raw = RawSymmetric::collective_alloc(bytes);
        if let Some(raw) = &raw {
            // SAFETY: the block is fresh, at least `bytes` long and aligned to 64 >= align_of T;
            // no PE can write it before the agreement below; zeroed memory is a valid T (Pod).
            let slice = unsafe {
                std::ptr::write_bytes(raw.as_ptr(), 0, raw.bytes());
                std::slice::from_raw_parts_mut(raw.as_ptr().cast::<T>(), len)
            };
            init(slice);
        }
        // The agreement is also the barrier that publishes the zeroed, initialised memory.
        let failed_on = rt.max_u64_one(if raw.is_some() {
            0
        } else {
            rt.my_pe() as u64 + 1
        })?;
        if failed_on > 0 {
            // A block that succeeded here is left unfreed (RawSymmetric frees only
            // explicitly): shmem_free is collective and the PEs that failed will not call it.
            let (variable, current) = crate::env::heap_size_setting();
            return Err(Error::HeapExhausted {
                array: name.to_string(),
                bytes,
                pe: failed_on as usize - 1,
                variable,
                current,
            });
        }
        let raw = raw.expect("the agreement says every PE allocated");
        let ptr = NonNull::new(raw.as_ptr().cast::<T>()).expect("shmem_align returned non-null");
        let mapped = (0..rt.n_pes())
            .map(|pe| {
                if !rt.direct_enabled() {
                    return None;
                }
                // SAFETY: ptr is a symmetric address and pe exists.
                let remote =
                    unsafe { shmem_sys::shmem_ptr(ptr.as_ptr().cast::<c_void>(), pe as i32) };
                NonNull::new(remote.cast::<T>())
            })
            .collect();
        Ok(SymArray {
            rt,
            ptr,
            mapped,
            raw: Some(raw),
            len,
            name: name.to_string(),
            _elements: PhantomData,
        })
    }

    /// Frees the array; the same as dropping it, spelled out.
    ///
    /// # Collective
    /// Every PE must free its copy, in the same order relative to other collectives
    /// (`shmem_free` synchronises all PEs). A PE that unwinds from a panic leaks its arrays
    /// instead, and the runtime then ends the job.
    pub fn collective_free(self) {
        drop(self)
    }

    /// The number of elements (the same on every PE).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name given at allocation, used in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime the array belongs to.
    pub fn runtime(&self) -> &'rt Runtime {
        self.rt
    }

    /// The local address of element 0 (its symmetric address on every PE).
    pub fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Checks that `count` elements from `offset` lie inside the array and `pe` exists.
    pub(crate) fn check(
        &self,
        op: &'static str,
        pe: usize,
        offset: usize,
        count: usize,
    ) -> Result<()> {
        self.rt.check_pe(pe)?;
        match offset.checked_add(count) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::OutOfBounds {
                op,
                array: self.name.clone(),
                pe,
                offset,
                count,
                len: self.len,
            }),
        }
    }

    /// Element 0 of PE `pe`'s copy, if it is mapped into this process and direct access is
    /// enabled (see [`env::DIRECT`](crate::env::DIRECT)); `pe` must exist.
    pub(crate) fn mapped(&self, pe: usize) -> Option<NonNull<T>> {
        self.mapped[pe]
    }

    /// The symmetric address of element `offset` (valid for the array's length).
    pub(crate) fn element_ptr(&self, offset: usize) -> *mut T {
        debug_assert!(offset <= self.len);
        // SAFETY: callers checked offset <= len, so the result is inside or one past the block.
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// Copies elements `offset..offset + dst.len()` of this PE's copy into `dst`.
    ///
    /// A put into those elements that is still in flight may be seen partly; use a signal or
    /// call counter to know when data is complete.
    pub fn read_local(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        self.check("local read", self.rt.my_pe(), offset, dst.len())?;
        // SAFETY: the range is inside the array (checked); dst is a distinct Rust slice; no
        // reference to symmetric memory is created.
        unsafe {
            std::ptr::copy_nonoverlapping(self.element_ptr(offset), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` into elements `offset..offset + src.len()` of this PE's copy.
    pub fn write_local(&self, offset: usize, src: &[T]) -> Result<()> {
        self.check("local write", self.rt.my_pe(), offset, src.len())?;
        // SAFETY: the range is inside the array (checked); src is a distinct Rust slice; no
        // reference to symmetric memory is created.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.element_ptr(offset), src.len()) };
        Ok(())
    }

    /// Sets every element of this PE's copy to `value`.
    pub fn fill_local(&self, value: T) {
        for i in 0..self.len {
            // SAFETY: i < len; a raw write, no reference is created.
            unsafe { self.element_ptr(i).write(value) };
        }
    }

    /// This PE's copy as a vector.
    pub fn to_vec_local(&self) -> Vec<T> {
        let mut out = vec![T::zeroed(); self.len];
        self.read_local(0, &mut out)
            .expect("the whole array is in bounds");
        out
    }

    /// A shared view of this PE's copy.
    ///
    /// # Safety
    /// No PE (this one included, from another thread) may write this PE's copy while the
    /// returned slice lives: typically the caller has waited for the signal or call counter
    /// that ends the last put and no new exchange can start before the slice is dropped.
    pub unsafe fn local_slice(&self) -> &[T] {
        // SAFETY: the block holds `len` initialised (zeroed, Pod) elements; the caller promises
        // no concurrent writes for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// An exclusive view of this PE's copy.
    ///
    /// # Safety
    /// No PE may read or write this PE's copy while the returned slice lives, and no other
    /// view of it may exist.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn local_slice_mut(&self) -> &mut [T] {
        // SAFETY: as for local_slice, with exclusivity promised by the caller.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> Drop for SymArray<'_, T> {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            // While unwinding, the block is left unfreed: shmem_free is collective and the
            // runtime ends the job instead.
            if !std::thread::panicking() {
                raw.collective_free();
            }
        }
    }
}

impl<T: Pod> std::fmt::Debug for SymArray<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymArray")
            .field("name", &self.name)
            .field("len", &self.len)
            .field("elem_size", &size_of::<T>())
            .finish()
    }
}

/// In debug builds: every PE asked for the same length and element size.
fn check_symmetric(
    rt: &Runtime,
    index: u64,
    name: &str,
    len: usize,
    elem_size: usize,
) -> Result<()> {
    use mpi::traits::CommunicatorCollectives;
    let mine = [len as u64, elem_size as u64];
    let mut all = vec![0u64; 2 * rt.n_pes()];
    rt.world().all_gather_into(&mine[..], &mut all[..]);
    let describe = |pair: &[u64]| format!("{} elements of {} bytes", pair[0], pair[1]);
    let first = &all[0..2];
    match all.chunks(2).position(|pair| pair != first) {
        None => Ok(()),
        Some(pe) => Err(Error::AsymmetricAllocation {
            index,
            array: name.to_string(),
            pe,
            expected: describe(first),
            asked: describe(&all[2 * pe..2 * pe + 2]),
        }),
    }
}

/// How a [`GlobalMaxArray`] grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrowthPolicy {
    /// Capacity allocated for a global maximum `m`: `ceil(m * over_allocation)`; at least 1.
    pub over_allocation: f64,
    /// Stop the max-reduction after this many consecutive calls without growth (the 2013
    /// heuristic); later requests are checked locally against the frozen capacity. `None`
    /// never freezes.
    pub freeze_after: Option<u32>,
}

impl Default for GrowthPolicy {
    /// 20 % over-allocation, never frozen.
    fn default() -> Self {
        GrowthPolicy {
            over_allocation: 1.2,
            freeze_after: None,
        }
    }
}

impl GrowthPolicy {
    fn capacity_for(&self, global_max: usize) -> usize {
        let grown = (global_max as f64 * self.over_allocation).ceil();
        if grown >= usize::MAX as f64 {
            usize::MAX
        } else {
            (grown as usize).max(global_max)
        }
    }

    fn validate(&self) -> Result<()> {
        if self.over_allocation.is_finite() && self.over_allocation >= 1.0 {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "GrowthPolicy::over_allocation must be a finite number >= 1.0, got {}",
                self.over_allocation
            )))
        }
    }
}

/// What [`GlobalMaxArray::collective_ensure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// The capacity suffices on every PE.
    Unchanged,
    /// Every PE reallocated to a larger capacity.
    Grown {
        /// The old capacity.
        from: usize,
        /// The new capacity.
        to: usize,
    },
    /// The array is frozen and the request fits locally; no reduction took place.
    Frozen,
}

/// A symmetric array whose capacity is the maximum any PE needs, over-allocated, so PEs with
/// different needs share one symmetric size. Growing takes a max-reduction of the requests
/// (double-buffered scratch, no extra synchronisation) and a collective reallocation.
pub struct GlobalMaxArray<'rt, T: Pod> {
    array: SymArray<'rt, T>,
    policy: GrowthPolicy,
    stable_calls: u32,
    frozen: bool,
}

impl<'rt, T: Pod> GlobalMaxArray<'rt, T> {
    /// Allocates the global maximum of every PE's `need`, over-allocated by the policy.
    ///
    /// # Collective
    /// Every PE must call it (with its own `need`) in the same order relative to other
    /// collectives.
    pub fn collective_alloc(
        rt: &'rt Runtime,
        name: &str,
        need: usize,
        policy: GrowthPolicy,
    ) -> Result<Self> {
        policy.validate()?;
        let global = rt.max_u64_one(need as u64)? as usize;
        let array = SymArray::collective_alloc(rt, name, policy.capacity_for(global))?;
        Ok(GlobalMaxArray {
            array,
            policy,
            stable_calls: 0,
            frozen: false,
        })
    }

    /// Makes the capacity at least every PE's `need`. Growth keeps this PE's elements
    /// (`0..old capacity`); the new elements are zero.
    ///
    /// # Collective
    /// Every PE must call it while the array is not frozen. Once
    /// [`is_frozen`](Self::is_frozen), the call is local.
    ///
    /// # Errors
    /// [`Error::CapacityFrozen`] on the PE whose request exceeds a frozen capacity (only that
    /// PE knows; the others will see it as a timeout if they wait for it);
    /// [`Error::HeapExhausted`] on every PE.
    pub fn collective_ensure(&mut self, need: usize) -> Result<Growth> {
        let rt = self.array.rt;
        if self.frozen {
            return if need <= self.array.len() {
                Ok(Growth::Frozen)
            } else {
                Err(Error::CapacityFrozen {
                    array: self.array.name.clone(),
                    pe: rt.my_pe(),
                    needed: need,
                    capacity: self.array.len(),
                    stable_calls: self.stable_calls,
                })
            };
        }
        let global = rt.max_u64_one(need as u64)? as usize;
        let from = self.array.len();
        if global <= from {
            self.stable_calls += 1;
            if self
                .policy
                .freeze_after
                .is_some_and(|n| self.stable_calls >= n)
            {
                self.frozen = true;
            }
            return Ok(Growth::Unchanged);
        }
        let to = self.policy.capacity_for(global);
        let old = &self.array;
        let grown = SymArray::collective_alloc_with(rt, &old.name, to, |new| {
            // SAFETY: this PE's copy of the old array is quiescent: every PE is inside this
            // collective call, and the barrier ending shmem_align completed their earlier puts.
            new[..from].copy_from_slice(unsafe { old.local_slice() });
        })?;
        self.array = grown;
        self.stable_calls = 0;
        Ok(Growth::Grown { from, to })
    }

    /// The array at its current capacity.
    pub fn array(&self) -> &SymArray<'rt, T> {
        &self.array
    }

    /// The current capacity in elements, the same on every PE.
    pub fn capacity(&self) -> usize {
        self.array.len()
    }

    /// Whether the reduction has stopped (see [`GrowthPolicy::freeze_after`]).
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }
}
