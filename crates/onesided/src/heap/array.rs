//! [`SymArray`]: a typed array of the same length at the same symmetric address on every PE.

use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::raw::{RawSymmetric, SYMMETRIC_ALIGN};
use crate::runtime::Runtime;

/// A typed array in symmetric memory: the same length at the same symmetric address on every
/// PE, so that any PE can put into or get from any other PE's copy.
///
/// Elements are plain old data ([`bytemuck::Pod`]): no references, no padding, any bit
/// pattern valid, so whatever a remote PE writes is a valid `T`. The array borrows the
/// [`Runtime`], so it cannot outlive it.
///
/// # Memory model
/// Symmetric memory is memory other PEs write without this process's knowledge. The safe
/// accessors therefore only copy ([`read_local`](Self::read_local),
/// [`write_local`](Self::write_local), [`get`](Self::get), [`put`](Self::put)): a race
/// between a remote put and a local copy of the same elements gives unspecified, possibly
/// torn values, never a reference to changing memory. A slice view
/// ([`local_slice`](Self::local_slice) and its kin) is `unsafe`, and its contract is that no
/// PE writes the viewed elements while the view lives. Types that know their protocol (the
/// [`Exchange`](crate::Exchange), the [`Alltoall`](crate::Alltoall)) hand out safe views,
/// because their own synchronisation proves the memory quiescent. Signal words are only ever
/// accessed atomically ([`SignalArray`](crate::SignalArray)).
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

// SAFETY: `&SymArray` gives no reference into the memory without `unsafe`: every safe access
// is a copy through raw pointers or a library call, which OpenSHMEM with THREAD_MULTIPLE
// allows from any thread; T: Pod is Sync. The array is deliberately not Send: dropping it is
// collective, and must happen on the thread that issues the PE's collectives.
unsafe impl<T: Pod> Sync for SymArray<'_, T> {}

impl<'rt, T: Pod> SymArray<'rt, T> {
    /// Allocates `len` elements on every PE, zeroed.
    ///
    /// Each PE allocates its block (`shmem_align` to [`SYMMETRIC_ALIGN`] or more) and zeroes
    /// it; then a max-reduction agrees on success and on the block's offset, and is also the
    /// barrier that publishes the zeroed memory: no remote put can land before the block is
    /// zeroed (OSHMEM's own `shmem_calloc` zeroes after its barrier, so it could wipe a put
    /// that a faster PE has already made into the new block).
    ///
    /// # Collective
    /// Every PE must call it with the same `len` and `T`, from one thread per PE, in the same
    /// order relative to other collectives. Both are checked, in debug and release builds, by
    /// a reduction of the sizes that every allocation makes anyway; only when they differ does
    /// an all-gather find the first PE that differs.
    ///
    /// # Errors
    /// On every PE alike, so no PE is left waiting:
    /// - [`Error::AsymmetricAllocation`] names the first PE whose request differs from PE 0's;
    /// - [`Error::HeapTooSmall`] before the implementation is asked, when the heap cannot
    ///   hold the array beside what is in use ([`HeapStatus::now`](crate::HeapStatus::now));
    /// - [`Error::HeapExhausted`] names the variable that sizes the heap;
    /// - [`Error::HeapDiverged`] when the block lands at different heap offsets (an earlier
    ///   collective ran on some PEs only);
    /// - [`Error::SizeOverflow`].
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
        const LIMIT: u64 = i64::MAX as u64;
        let index = rt.next_allocation_index();
        let elem_size = size_of::<T>();
        let align = SYMMETRIC_ALIGN.max(align_of::<T>());
        // The whole sequence holds the collective lock, so allocations from several threads of
        // one PE cannot interleave.
        let mut collectives = rt.lock_collectives();

        // 1. Every PE asks for the same size: maxima of the values and of their complements.
        let len64 = (len as u64).min(LIMIT);
        // The heap in use rides along (its maximum): after an exhaustion that failed on some
        // PEs only, those that succeeded hold a block the others do not, and the check below
        // must still come out the same everywhere.
        let in_use = (crate::raw::heap_in_use() as u64).min(LIMIT);
        let mut sizes =
            [len64, LIMIT - len64, elem_size as u64, LIMIT - elem_size as u64, in_use].map(|v| v as i64);
        collectives.reduce_max(rt.n_pes(), &mut sizes);
        if sizes[0] != i64::MAX - sizes[1] || sizes[2] != i64::MAX - sizes[3] {
            drop(collectives);
            return Err(asymmetry(rt, index, name, len, elem_size));
        }

        // 2. The same size on every PE, so the same outcome everywhere.
        let bytes = len
            .checked_mul(elem_size)
            .filter(|&b| b <= isize::MAX as usize - align)
            .ok_or_else(|| Error::SizeOverflow { array: name.to_string(), len, elem_size })?;
        // A block that cannot fit beside what is in use fails before the implementation is
        // asked (which may print its own errors or abort); every PE has the same figures.
        let heap = crate::raw::HeapStatus::now();
        let block = RawSymmetric::rounded(bytes, align);
        let in_use = sizes[4] as usize;
        if let Some(capacity) = heap.capacity
            && in_use.saturating_add(block) > capacity
        {
            drop(collectives);
            return Err(Error::HeapTooSmall {
                array: name.to_string(),
                bytes: block,
                in_use,
                capacity,
                variable: heap.variable,
                current: heap.setting,
                suggest: crate::raw::HeapStatus::setting_for(in_use.saturating_add(block)),
            });
        }
        let raw = RawSymmetric::collective_alloc(bytes, align);
        if let Some(raw) = &raw {
            // SAFETY: the block is fresh, at least `len * size_of::<T>()` bytes long and aligned
            // to `align >= align_of::<T>()`; no PE can write it before the agreement below
            // (their allocation has not returned); zeroed memory is a valid T (Pod).
            let slice = unsafe {
                std::ptr::write_bytes(raw.as_ptr(), 0, raw.bytes());
                std::slice::from_raw_parts_mut(raw.as_ptr().cast::<T>(), len)
            };
            init(slice);
        }

        // 3. Agree on success and on the block's offset in the heap. The agreement is also the
        // barrier that publishes the zeroed, initialised memory.
        let offset = raw.as_ref().map_or(0, |r| heap_offset(r.as_ptr() as usize, rt.heap().base()));
        let failed = if raw.is_some() { 0 } else { rt.my_pe() as i64 + 1 };
        let mut agreement = [failed, offset, i64::MAX - offset];
        collectives.reduce_max(rt.n_pes(), &mut agreement);
        drop(collectives);
        // A block that succeeded here is left unfreed on failure (RawSymmetric frees only
        // explicitly): shmem_free is collective and the other PEs will not call it.
        if agreement[0] > 0 {
            let (variable, current) = crate::env::heap_size_setting();
            return Err(Error::HeapExhausted {
                array: name.to_string(),
                bytes,
                pe: agreement[0] as usize - 1,
                variable,
                current,
            });
        }
        if agreement[1] != i64::MAX - agreement[2] {
            return Err(Error::HeapDiverged {
                index,
                array: name.to_string(),
                pe: first_differing_pe(rt, offset),
            });
        }
        let raw = raw.expect("the agreement says every PE allocated");
        let ptr = NonNull::new(raw.as_ptr().cast::<T>()).expect("shmem_align returned non-null");
        let mapped = (0..rt.n_pes())
            .map(|pe| rt.heap().remote(ptr.as_ptr() as usize, pe).map(NonNull::cast::<T>))
            .collect();
        Ok(SymArray { rt, ptr, mapped, raw: Some(raw), len, name: name.to_string(), _elements: PhantomData })
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
    pub(crate) fn check(&self, op: &'static str, pe: usize, offset: usize, count: usize) -> Result<()> {
        self.rt.check_pe(pe, || format!("{op} on '{}'", self.name))?;
        self.check_range(op, pe, offset, count)
    }

    /// [`check`](Self::check) of this PE's copy.
    #[inline]
    pub(crate) fn check_local(&self, op: &'static str, offset: usize, count: usize) -> Result<()> {
        self.check_range(op, self.rt.my_pe(), offset, count)
    }

    #[inline]
    fn check_range(&self, op: &'static str, pe: usize, offset: usize, count: usize) -> Result<()> {
        match offset.checked_add(count) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::OutOfBounds { op, array: self.name.clone(), pe, offset, count, len: self.len }),
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
        unsafe { std::ptr::copy_nonoverlapping(self.element_ptr(offset), dst.as_mut_ptr(), dst.len()) };
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

    /// Copies `count` elements of this PE's copy of `source` from `source_offset` into this
    /// PE's copy of `self` at `offset` (a local copy between symmetric arrays, which may be
    /// the same array).
    #[cfg(feature = "baselines")]
    pub(crate) fn copy_local_from(
        &self,
        offset: usize,
        source: &SymArray<'_, T>,
        source_offset: usize,
        count: usize,
    ) -> Result<()> {
        self.check("local copy", self.rt.my_pe(), offset, count)?;
        source.check("local copy", self.rt.my_pe(), source_offset, count)?;
        // SAFETY: both ranges are inside their arrays (checked); `ptr::copy` allows overlap;
        // no reference to symmetric memory is created.
        unsafe { std::ptr::copy(source.element_ptr(source_offset), self.element_ptr(offset), count) };
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
        self.read_local(0, &mut out).expect("the whole array is in bounds");
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

    /// A shared view of elements `range` of this PE's copy, and of nothing else: the view an
    /// exchange's caller takes of the regions it knows are complete while other regions of the
    /// same array may still be written.
    ///
    /// # Safety
    /// No PE (this one included, from another thread) may write elements `range` of this PE's
    /// copy while the returned slice lives.
    ///
    /// # Panics
    /// When `range` is not within the array (a bug of the caller, as an out-of-bounds index).
    pub unsafe fn local_range(&self, range: std::ops::Range<usize>) -> &[T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "range {range:?} of {} elements",
            self.len
        );
        // SAFETY: the range lies within the block of `len` initialised (zeroed, Pod)
        // elements; the caller promises no concurrent writes to it for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(range.start), range.end - range.start) }
    }

    /// A shared view of elements `range` of PE `pe`'s copy through the mapping of its heap
    /// into this process (a PE on this node, with direct access enabled), so that data
    /// another PE published can be read where it lies, with no copy; `None` where that PE's
    /// heap is not mapped (then [`get`](Self::get) it).
    ///
    /// # Safety
    /// No PE (`pe` included) may write elements `range` of `pe`'s copy while the returned
    /// slice lives: typically `pe` has published them with a signal this PE has awaited, and
    /// writes them again only after this PE signals that it is done.
    ///
    /// # Errors
    /// [`Error::InvalidPe`] for a PE that does not exist; [`Error::OutOfBounds`] when `range`
    /// is not within the array.
    pub unsafe fn remote_range(&self, pe: usize, range: std::ops::Range<usize>) -> Result<Option<&[T]>> {
        self.check("remote view", pe, range.start, range.len())?;
        Ok(self.mapped(pe).map(|base| {
            // SAFETY: the range lies within the block of `len` initialised (zeroed, Pod)
            // elements of `pe`'s copy, mapped at `base` in this process (checked above); the
            // caller promises no writes to it for the slice's lifetime.
            unsafe { std::slice::from_raw_parts(base.as_ptr().add(range.start).cast_const(), range.len()) }
        }))
    }

    /// An exclusive view of elements `range` of PE `pe`'s copy through the mapping of its
    /// heap into this process, for writing data straight into its final place on a PE of this
    /// node (packing into a receiver's buffer, say); `None` where that PE's heap is not mapped
    /// (then [`put`](Self::put) it).
    ///
    /// # Safety
    /// No PE (`pe` included) may read or write elements `range` of `pe`'s copy while the
    /// returned slice lives, and no other view of them may exist: typically `pe` has offered
    /// the range with a signal this PE has awaited, and reads it only after this PE signals
    /// that it is written.
    ///
    /// # Errors
    /// As [`remote_range`](Self::remote_range).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn remote_range_mut(
        &self,
        pe: usize,
        range: std::ops::Range<usize>,
    ) -> Result<Option<&mut [T]>> {
        self.check("remote view", pe, range.start, range.len())?;
        Ok(self.mapped(pe).map(|base| {
            // SAFETY: as for remote_range, with exclusivity promised by the caller.
            unsafe { std::slice::from_raw_parts_mut(base.as_ptr().add(range.start), range.len()) }
        }))
    }

    /// An exclusive view of elements `range` of this PE's copy, and of nothing else.
    ///
    /// # Safety
    /// No PE may read or write elements `range` of this PE's copy while the returned slice
    /// lives, and no other view of them may exist.
    ///
    /// # Panics
    /// When `range` is not within the array.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn local_range_mut(&self, range: std::ops::Range<usize>) -> &mut [T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "range {range:?} of {} elements",
            self.len
        );
        // SAFETY: as for local_range, with exclusivity promised by the caller.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(range.start), range.end - range.start) }
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

/// The offset of a block from the heap base, biased to be positive and below `i64::MAX`.
fn heap_offset(address: usize, base: usize) -> i64 {
    const BIAS: i128 = 1 << 62;
    (address as i128 - base as i128 + BIAS).clamp(0, i64::MAX as i128) as i64
}

/// After a size mismatch, which every PE saw: gathers every PE's request (through MPI) to
/// name the first PE that differs from PE 0.
fn asymmetry(rt: &Runtime, index: u64, name: &str, len: usize, elem_size: usize) -> Error {
    let all = all_gather(rt, [len as u64, elem_size as u64]);
    let describe = |pair: &[u64; 2]| format!("{} elements of {} bytes", pair[0], pair[1]);
    let pe = all.iter().position(|pair| pair != &all[0]).unwrap_or(0);
    Error::AsymmetricAllocation {
        index,
        array: name.to_string(),
        pe,
        expected: describe(&all[0]),
        asked: describe(&all[pe]),
    }
}

/// After an offset mismatch, which every PE saw: the first PE whose offset differs from PE 0's.
fn first_differing_pe(rt: &Runtime, offset: i64) -> usize {
    let all = all_gather(rt, [offset as u64, 0]);
    all.iter().position(|pair| pair != &all[0]).unwrap_or(0)
}

/// Every PE's pair of values, through MPI (only on error paths, which every PE takes).
fn all_gather(rt: &Runtime, mine: [u64; 2]) -> Vec<[u64; 2]> {
    use mpi::traits::CommunicatorCollectives;
    let mut all = vec![0u64; 2 * rt.n_pes()];
    crate::watchdog::watch("MPI_Allgather (an allocation's check)", None, || {
        rt.world().all_gather_into(&mine[..], &mut all[..])
    });
    all.chunks(2).map(|c| [c[0], c[1]]).collect()
}
