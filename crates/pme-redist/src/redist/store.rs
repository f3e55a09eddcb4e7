//! Where each buffer of the redistribution lives: in symmetric memory only where other PEs
//! read or write it, in this PE's own memory everywhere else.
//!
//! | path | send | receive | forces out | forces in |
//! |---|---|---|---|---|
//! | one-sided get | symmetric (targets get from it) | local | symmetric (sources read it) | local |
//! | one-sided put | local | symmetric (sources put into it) | symmetric (sources read it) | symmetric (targets put into it) |
//! | MPI (every kind) | local | local | local | local |
//!
//! A symmetric buffer has the same size on every PE (OpenSHMEM allocates collectively): the
//! most any PE needs, so a particle PE holds as much as the busiest PME rank. A local one
//! holds what this PE's own role needs (its home atoms, or what can reach it as a PME rank),
//! with the same fifth to spare, and grows without any other PE.

use std::ptr::NonNull;

use bytemuck::Pod;
use onesided::{GlobalMaxArray, GrowthPolicy, Runtime, SymArray};

use super::RedistPath;
use crate::error::Result;

/// Which of the four buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// A particle PE's atoms, packed by target.
    Send,
    /// A PME rank's atoms, by source.
    Receive,
    /// A PME rank's forces, where sources read them or they are sent from.
    ForcesOut,
    /// A particle PE's forces, by target, before they are unpacked into home order.
    ForcesIn,
}

impl Role {
    /// Whether `path` needs this buffer in symmetric memory: other PEs read or write it.
    pub(super) fn symmetric_on(self, path: RedistPath) -> bool {
        match path {
            RedistPath::OneSidedGet => matches!(self, Role::Send | Role::ForcesOut),
            RedistPath::OneSidedPut => self != Role::Send,
            _ => false,
        }
    }
}

/// One buffer, symmetric or local.
pub(super) enum Store<'rt, T: Pod> {
    /// As large as the most any PE needs, on every PE.
    Symmetric(GlobalMaxArray<'rt, T>),
    /// As large as this PE needs.
    Local(Local<T>),
}

impl<'rt, T: Pod> Store<'rt, T> {
    /// A buffer for `role` on `path`, with room for `need` elements (this PE's; a symmetric
    /// one for the most of any PE's).
    ///
    /// # Collective
    /// Every PE calls it alike (a symmetric buffer is allocated collectively).
    pub(super) fn collective_new(
        rt: &'rt Runtime,
        name: &str,
        role: Role,
        path: RedistPath,
        need: usize,
        policy: GrowthPolicy,
    ) -> Result<Self> {
        Ok(if role.symmetric_on(path) {
            Store::Symmetric(GlobalMaxArray::collective_alloc(rt, name, need, policy)?)
        } else {
            Store::Local(Local::zeroed(grown(need, policy)))
        })
    }

    /// Makes room for `need` elements (every PE's, for a symmetric buffer), keeping this PE's
    /// elements; new ones are zero.
    ///
    /// # Collective
    /// Every PE calls it alike when the buffer is symmetric; a local one grows on its own.
    pub(super) fn collective_ensure(&mut self, need: usize, policy: GrowthPolicy) -> Result<()> {
        match self {
            Store::Symmetric(array) => {
                array.collective_ensure(need)?;
            }
            Store::Local(local) if need > local.len => {
                let mut grown = Local::zeroed(grown(need, policy));
                // SAFETY: both blocks are initialised and hold at least the old length; this
                // PE's exclusive `&mut` means no view of either lives.
                unsafe { std::ptr::copy_nonoverlapping(local.ptr.as_ptr(), grown.ptr.as_ptr(), local.len) };
                std::mem::swap(local, &mut grown);
            }
            Store::Local(_) => {}
        }
        Ok(())
    }

    /// The room, in elements.
    pub(super) fn capacity(&self) -> usize {
        match self {
            Store::Symmetric(array) => array.capacity(),
            Store::Local(local) => local.len,
        }
    }

    /// Whether the buffer is symmetric.
    pub(super) fn is_symmetric(&self) -> bool {
        matches!(self, Store::Symmetric(_))
    }

    /// The symmetric array, for other PEs' reads and writes.
    ///
    /// Only the paths that [`Role::symmetric_on`] names symmetric call this, for those
    /// buffers: a local buffer here is a bug of this module's callers.
    pub(super) fn sym(&self) -> &SymArray<'rt, T> {
        match self {
            Store::Symmetric(array) => array.array(),
            Store::Local(_) => unreachable!("a local redistribution buffer used as a symmetric one"),
        }
    }

    /// Element 0 of this PE's copy.
    pub(super) fn as_ptr(&self) -> *mut T {
        match self {
            Store::Symmetric(array) => array.array().as_ptr(),
            Store::Local(local) => local.ptr.as_ptr(),
        }
    }

    /// A shared view of elements `range` of this PE's copy.
    ///
    /// # Safety
    /// No PE (this one included) writes those elements while the slice lives.
    ///
    /// # Panics
    /// When `range` is not within the buffer (a bug of the caller).
    pub(super) unsafe fn local_range(&self, range: std::ops::Range<usize>) -> &[T] {
        self.check(&range);
        // SAFETY: the range lies within the block of initialised (zeroed, Pod) elements
        // (checked); the caller promises no writes to it while the slice lives.
        unsafe { std::slice::from_raw_parts(self.as_ptr().add(range.start), range.len()) }
    }

    /// An exclusive view of elements `range` of this PE's copy.
    ///
    /// # Safety
    /// No PE (this one included) reads or writes those elements while the slice lives, but
    /// through it.
    ///
    /// # Panics
    /// When `range` is not within the buffer (a bug of the caller).
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn local_range_mut(&self, range: std::ops::Range<usize>) -> &mut [T] {
        self.check(&range);
        // SAFETY: as in local_range, and the caller promises no other access at all.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr().add(range.start), range.len()) }
    }

    fn check(&self, range: &std::ops::Range<usize>) {
        assert!(
            range.start <= range.end && range.end <= self.capacity(),
            "range {range:?} of a redistribution buffer of {} elements",
            self.capacity()
        );
    }
}

/// What `policy` allocates for `need`: a fifth more, as the symmetric buffers.
fn grown(need: usize, policy: GrowthPolicy) -> usize {
    ((need as f64 * policy.over_allocation).ceil() as usize).max(need)
}

/// A zeroed block of this PE's memory, written and read through raw pointers (as symmetric
/// memory is), so that views of disjoint ranges may coexist.
pub(super) struct Local<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
}

impl<T: Pod> Local<T> {
    fn zeroed(len: usize) -> Self {
        let block: Box<[T]> = vec![T::zeroed(); len].into_boxed_slice();
        let len = block.len();
        // SAFETY: Box::into_raw never returns null.
        let ptr = unsafe { NonNull::new_unchecked(Box::into_raw(block).cast::<T>()) };
        Local { ptr, len }
    }
}

impl<T: Pod> Drop for Local<T> {
    fn drop(&mut self) {
        // SAFETY: ptr and len come from Box::into_raw of a boxed slice of len elements, and
        // no view outlives the buffer (they borrow it).
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
    }
}

// SAFETY: the block is owned plain data; access from other threads goes through the unsafe
// views, whose callers promise no conflicting access, as for a symmetric array.
unsafe impl<T: Pod + Send> Send for Local<T> {}
// SAFETY: as for Send.
unsafe impl<T: Pod + Sync> Sync for Local<T> {}
