//! Remote memory access: typed, bounds-checked put and get, non-blocking forms inside a scope
//! that keeps their buffers borrowed until completion, and direct load/store access to PEs
//! on the same node.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;

use bytemuck::Pod;

use crate::error::Result;
use crate::heap::SymArray;
use crate::runtime::Runtime;

impl<T: Pod> SymArray<'_, T> {
    /// Copies `src` into elements `offset..offset + src.len()` of PE `pe`'s copy
    /// (`shmem_putmem`).
    ///
    /// Returns when `src` may be reused; the data is delivered at the latest by the next
    /// [`Runtime::quiet`], barrier, or signal put after a fence. Bounds are checked before
    /// anything is sent: an out-of-range put is an [`Error::OutOfBounds`](crate::Error) and
    /// transfers nothing.
    pub fn put(&self, pe: usize, offset: usize, src: &[T]) -> Result<()> {
        self.check("put", pe, offset, src.len())?;
        if !src.is_empty() {
            // SAFETY: the target range is inside the symmetric array (checked) and pe exists;
            // src is a valid slice for the duration of the blocking call.
            unsafe {
                shmem_sys::shmem_putmem(
                    self.element_ptr(offset).cast::<c_void>(),
                    src.as_ptr().cast::<c_void>(),
                    std::mem::size_of_val(src),
                    pe as i32,
                )
            };
        }
        Ok(())
    }

    /// Copies elements `offset..offset + dst.len()` of PE `pe`'s copy into `dst`
    /// (`shmem_getmem`); complete on return.
    pub fn get(&self, pe: usize, offset: usize, dst: &mut [T]) -> Result<()> {
        self.check("get", pe, offset, dst.len())?;
        if !dst.is_empty() {
            // SAFETY: the source range is inside the symmetric array (checked) and pe exists;
            // dst is a valid, exclusively borrowed slice.
            unsafe {
                shmem_sys::shmem_getmem(
                    dst.as_mut_ptr().cast::<c_void>(),
                    self.element_ptr(offset).cast::<c_void>(),
                    std::mem::size_of_val(dst),
                    pe as i32,
                )
            };
        }
        Ok(())
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
    /// (`shmem_ptr`: PEs on the same node with a shared-memory transport), or `None`, in which
    /// case [`put`](Self::put) and [`get`](Self::get) are the way.
    pub fn direct(&self, pe: usize) -> Result<Option<DirectAccess<'_, T>>> {
        self.runtime().check_pe(pe)?;
        // SAFETY: the address is symmetric and pe exists.
        let remote = unsafe { shmem_sys::shmem_ptr(self.as_ptr().cast::<c_void>(), pe as i32) };
        Ok(NonNull::new(remote.cast::<T>()).map(|ptr| DirectAccess {
            array: self,
            ptr,
            pe,
        }))
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
        self.array
            .check("direct write", self.pe, offset, src.len())?;
        // SAFETY: the mapping covers the whole array and the range is checked; no reference
        // into the other process's memory is created.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len())
        };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Copies elements `offset..offset + dst.len()` of the mapped copy into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        self.array
            .check("direct read", self.pe, offset, dst.len())?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: as for write.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
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
        let scope = NbiScope {
            rt: self,
            _scope: PhantomData,
            _env: PhantomData,
        };
        let _complete = QuietOnExit(self);
        f(&scope)
    }
}

impl<'env> NbiScope<'_, 'env> {
    /// Starts copying `src` into elements `offset..` of PE `pe`'s copy (`shmem_putmem_nbi`).
    pub fn put<T: Pod>(
        &self,
        array: &'env SymArray<'_, T>,
        pe: usize,
        offset: usize,
        src: &'env [T],
    ) -> Result<()> {
        array.check("non-blocking put", pe, offset, src.len())?;
        if !src.is_empty() {
            // SAFETY: range checked; src stays borrowed (and unmodified) until the scope's
            // quiet completes the transfer; the array outlives the scope.
            unsafe {
                shmem_sys::shmem_putmem_nbi(
                    array.element_ptr(offset).cast::<c_void>(),
                    src.as_ptr().cast::<c_void>(),
                    std::mem::size_of_val(src),
                    pe as i32,
                )
            };
        }
        Ok(())
    }

    /// Starts copying elements `offset..` of PE `pe`'s copy into `dst` (`shmem_getmem_nbi`).
    pub fn get<T: Pod>(
        &self,
        array: &'env SymArray<'_, T>,
        pe: usize,
        offset: usize,
        dst: &'env mut [T],
    ) -> Result<()> {
        array.check("non-blocking get", pe, offset, dst.len())?;
        if !dst.is_empty() {
            // SAFETY: range checked; dst stays exclusively borrowed until the scope's quiet
            // completes the transfer; the array outlives the scope.
            unsafe {
                shmem_sys::shmem_getmem_nbi(
                    dst.as_mut_ptr().cast::<c_void>(),
                    array.element_ptr(offset).cast::<c_void>(),
                    std::mem::size_of_val(dst),
                    pe as i32,
                )
            };
        }
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
