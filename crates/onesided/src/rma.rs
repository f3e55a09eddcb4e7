//! Remote memory access: typed, bounds-checked put and get, non-blocking forms inside a scope
//! that keeps their buffers borrowed until completion, and direct load/store access to PEs
//! on the same node.
//!
//! Two transfer paths. To a PE whose heap is mapped into this process (the same node, a
//! shared-memory transport) a put or get is a `memcpy` through the mapping, ordered by a
//! fence; to any other PE it is the library call. The mapping of each PE's copy is looked up
//! once, when the array is allocated. The direct path is what makes the 8-byte ping-pong take
//! a quarter of MPI's time on one node (docs/bench/RESULTS.md); the library path is the
//! portable one, and `ONESIDED_DIRECT=0` forces it (the core tests run under both).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{Ordering, fence};

use bytemuck::Pod;

use crate::error::Result;
use crate::heap::SymArray;
use crate::runtime::Runtime;
use crate::watchdog::watch;

impl<T: Pod> SymArray<'_, T> {
    /// Copies `src` into elements `offset..offset + src.len()` of PE `pe`'s copy.
    ///
    /// Returns when `src` may be reused. To a PE whose memory is mapped into this process the
    /// copy goes through the mapping and is visible on return; otherwise it is
    /// `shmem_putmem`, complete at the latest at the next [`Runtime::quiet`] or barrier, and
    /// ordered before later puts and signals to the same PE by a [`Runtime::fence`] (which a
    /// [put with signal](SymArray::put_signal) includes). Bounds are checked before anything
    /// is sent: an out-of-range put is an [`Error::OutOfBounds`](crate::Error) and transfers
    /// nothing.
    pub fn put(&self, pe: usize, offset: usize, src: &[T]) -> Result<()> {
        self.check("put", pe, offset, src.len())?;
        // SAFETY: the target range is inside the array on `pe` (checked, same length on every
        // PE); src is a valid slice for the duration of the blocking call.
        unsafe { self.put_unchecked(pe, offset, src, false) };
        Ok(())
    }

    /// The put, after checks: through the mapping, or the blocking or non-blocking library
    /// routine.
    ///
    /// # Safety
    /// `offset..offset + src.len()` lies inside the array, `pe` exists, and for `nbi` the
    /// source stays valid and unmodified until the next quiet.
    pub(crate) unsafe fn put_unchecked(&self, pe: usize, offset: usize, src: &[T], nbi: bool) {
        if src.is_empty() {
            return;
        }
        if let Some(base) = self.mapped(pe) {
            // SAFETY: the mapping covers the whole array (caller checked the range); no
            // reference into the mapped memory is created. The release fence orders the copy
            // before any later signal or counter store.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), base.as_ptr().add(offset), src.len()) };
            fence(Ordering::Release);
            return;
        }
        let (dst, src_ptr, bytes) = (
            self.element_ptr(offset).cast::<c_void>(),
            src.as_ptr().cast::<c_void>(),
            std::mem::size_of_val(src),
        );
        // SAFETY: forwarded from the caller.
        unsafe {
            if nbi {
                watch("shmem_putmem_nbi", Some(pe), || {
                    shmem_sys::shmem_putmem_nbi(dst, src_ptr, bytes, pe as i32)
                })
            } else {
                watch("shmem_putmem", Some(pe), || shmem_sys::shmem_putmem(dst, src_ptr, bytes, pe as i32))
            }
        }
    }

    /// Copies elements `offset..offset + dst.len()` of PE `pe`'s copy into `dst`; complete on
    /// return (through the mapping where there is one, `shmem_getmem` otherwise).
    pub fn get(&self, pe: usize, offset: usize, dst: &mut [T]) -> Result<()> {
        self.check("get", pe, offset, dst.len())?;
        // SAFETY: the source range is inside the array on `pe` (checked); dst is a valid,
        // exclusively borrowed slice.
        unsafe { self.get_unchecked(pe, offset, dst, false) };
        Ok(())
    }

    /// The get, after checks.
    ///
    /// # Safety
    /// `offset..offset + dst.len()` lies inside the array, `pe` exists, and for `nbi` the
    /// destination stays valid and untouched until the next quiet.
    pub(crate) unsafe fn get_unchecked(&self, pe: usize, offset: usize, dst: &mut [T], nbi: bool) {
        // SAFETY: forwarded; a slice is valid for writes of its length.
        unsafe { self.get_raw(pe, offset, dst.as_mut_ptr(), dst.len(), nbi) }
    }

    /// Copies `count` elements from PE `pe`'s copy at `offset` to `dst`, which may be local
    /// symmetric memory (no reference to it is created).
    ///
    /// # Safety
    /// `offset..offset + count` lies inside the array, `pe` exists, `dst` is valid for
    /// `count` writes and does not overlap the source, and for `nbi` it stays valid and
    /// unread until the next quiet.
    pub(crate) unsafe fn get_raw(&self, pe: usize, offset: usize, dst: *mut T, count: usize, nbi: bool) {
        if count == 0 {
            return;
        }
        if let Some(base) = self.mapped(pe) {
            fence(Ordering::Acquire);
            // SAFETY: the mapping covers the checked range; dst is valid for count writes.
            unsafe { std::ptr::copy_nonoverlapping(base.as_ptr().add(offset), dst, count) };
            return;
        }
        let (dst_ptr, src, bytes) = (
            dst.cast::<c_void>(),
            self.element_ptr(offset).cast::<c_void>(),
            count * std::mem::size_of::<T>(),
        );
        // SAFETY: forwarded from the caller.
        unsafe {
            if nbi {
                watch("shmem_getmem_nbi", Some(pe), || {
                    shmem_sys::shmem_getmem_nbi(dst_ptr, src, bytes, pe as i32)
                })
            } else {
                watch("shmem_getmem", Some(pe), || shmem_sys::shmem_getmem(dst_ptr, src, bytes, pe as i32))
            }
        }
    }

    /// Writes one element of PE `pe`'s copy.
    pub fn put_value(&self, pe: usize, index: usize, value: T) -> Result<()> {
        self.put(pe, index, std::slice::from_ref(&value))
    }

    /// Reads one element of PE `pe`'s copy.
    pub fn get_value(&self, pe: usize, index: usize) -> Result<T> {
        let mut value = T::zeroed();
        self.get(pe, index, std::slice::from_mut(&mut value))?;
        Ok(value)
    }

    /// Direct load/store access to PE `pe`'s copy when it is mapped into this process
    /// (`shmem_ptr`: PEs on the same node with a shared-memory transport, and direct access
    /// not turned off with `ONESIDED_DIRECT=0`), or `None`, in which case
    /// [`put`](Self::put) and [`get`](Self::get) call the library.
    pub fn direct(&self, pe: usize) -> Result<Option<DirectAccess<'_, T>>> {
        self.runtime().check_pe(pe, || format!("direct access to '{}'", self.name()))?;
        Ok(self.mapped(pe).map(|ptr| DirectAccess { array: self, ptr, pe }))
    }
}

/// PE `pe`'s copy of a symmetric array, mapped into this process. Accesses are plain copies
/// through the mapping: visible to the owner without a quiet, and ordered before a later
/// signal by the release fence each write ends with.
pub struct DirectAccess<'a, T: Pod> {
    array: &'a SymArray<'a, T>,
    ptr: NonNull<T>,
    pe: usize,
}

impl<T: Pod> DirectAccess<'_, T> {
    /// The PE whose copy this is.
    pub fn pe(&self) -> usize {
        self.pe
    }

    /// Copies `src` into elements `offset..offset + src.len()` of the mapped copy.
    pub fn write(&self, offset: usize, src: &[T]) -> Result<()> {
        self.array.check("direct write", self.pe, offset, src.len())?;
        // SAFETY: the mapping covers the whole array and the range is checked; no reference
        // into the other process's memory is created.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len()) };
        fence(Ordering::Release);
        Ok(())
    }

    /// Copies elements `offset..offset + dst.len()` of the mapped copy into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        self.array.check("direct read", self.pe, offset, dst.len())?;
        fence(Ordering::Acquire);
        // SAFETY: as for write.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
}

/// A scope for non-blocking puts and gets. Buffers passed in stay borrowed until the scope
/// ends, and the scope ends with `shmem_quiet`, which completes every transfer: a source
/// cannot be modified, nor a destination read, while a transfer may still touch it.
///
/// Created by [`Runtime::nbi_scope`].
pub struct NbiScope<'scope, 'env: 'scope> {
    rt: &'env Runtime,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl Runtime {
    /// Runs `f` with a scope for non-blocking transfers and completes them all before
    /// returning (also when `f` panics).
    ///
    /// ```no_run
    /// # fn demo(rt: &onesided::Runtime, a: &onesided::SymArray<'_, f64>) -> onesided::Result<()> {
    /// let forward = vec![1.0; 100];
    /// let mut back = vec![0.0; 100];
    /// rt.nbi_scope(|s| {
    ///     s.put(a, (rt.my_pe() + 1) % rt.n_pes(), 0, &forward)?;
    ///     s.get(a, (rt.my_pe() + 1) % rt.n_pes(), 100, &mut back)
    /// })?;
    /// // Both transfers are complete here.
    /// # Ok(()) }
    /// ```
    pub fn nbi_scope<'env, R>(
        &'env self,
        f: impl for<'scope> FnOnce(&'scope NbiScope<'scope, 'env>) -> R,
    ) -> R {
        struct QuietOnExit<'a>(&'a Runtime);
        impl Drop for QuietOnExit<'_> {
            fn drop(&mut self) {
                self.0.quiet();
            }
        }
        let scope = NbiScope { rt: self, _scope: PhantomData, _env: PhantomData };
        let _complete = QuietOnExit(self);
        f(&scope)
    }
}

impl<'env> NbiScope<'_, 'env> {
    /// Starts copying `src` into elements `offset..` of PE `pe`'s copy (`shmem_putmem_nbi`,
    /// or a copy through the mapping, complete at once).
    pub fn put<T: Pod>(
        &self,
        array: &'env SymArray<'_, T>,
        pe: usize,
        offset: usize,
        src: &'env [T],
    ) -> Result<()> {
        array.check("non-blocking put", pe, offset, src.len())?;
        // SAFETY: range checked; src stays borrowed (and unmodified) until the scope's quiet
        // completes the transfer; the array outlives the scope.
        unsafe { array.put_unchecked(pe, offset, src, true) };
        Ok(())
    }

    /// Starts copying elements `offset..` of PE `pe`'s copy into `dst` (`shmem_getmem_nbi`,
    /// or a copy through the mapping, complete at once).
    pub fn get<T: Pod>(
        &self,
        array: &'env SymArray<'_, T>,
        pe: usize,
        offset: usize,
        dst: &'env mut [T],
    ) -> Result<()> {
        array.check("non-blocking get", pe, offset, dst.len())?;
        // SAFETY: range checked; dst stays exclusively borrowed until the scope's quiet
        // completes the transfer; the array outlives the scope.
        unsafe { array.get_unchecked(pe, offset, dst, true) };
        Ok(())
    }

    /// Orders the transfers started so far before those started later, per target PE.
    pub fn fence(&self) {
        self.rt.fence();
    }

    /// The runtime the scope belongs to.
    pub fn runtime(&self) -> &'env Runtime {
        self.rt
    }
}

impl<T: Pod> std::fmt::Debug for DirectAccess<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectAccess")
            .field("array", self.array)
            .field("pe", &self.pe)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for NbiScope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbiScope").field("pe", &self.rt.my_pe()).finish_non_exhaustive()
    }
}
