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
//!
//! On the MPI paths a relay's hops take turns in four [`Bank`]s of local memory, since the
//! lives of their buffers follow each other in a fixed order ([`RELAY_BANKS`]).

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::rc::Rc;

use bytemuck::Pod;
use onesided::{GlobalMaxArray, GrowthPolicy, Runtime, SymArray};

use super::path::Wire;
use crate::error::Result;

/// Which of the four buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
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
    pub(super) fn symmetric_on(self, path: Wire) -> bool {
        match path {
            Wire::Get => matches!(self, Role::Send | Role::ForcesOut),
            Wire::Put => self != Role::Send,
            _ => false,
        }
    }
}

/// Which [`Bank`] each buffer of a relay's hops takes on the MPI paths, by hop (the first,
/// the second or the stage along y, the stage along x) and by [`Role`] (send, receive,
/// forces out, forces in).
///
/// A buffer is in use from when it is written until it is read for the last time; buffers
/// in use at once, or borrowed at once by the calls that nest (each hop's `redistribute`
/// and return hold their home atoms or home forces while the next hop's run), take different
/// banks:
///
/// - forward, second hop: the first hop's receive side (its home atoms), its send and its
///   receive sides: banks 0, 1, 2; stage along x: those home atoms still borrowed, the
///   stage along y's receive side (its home atoms), its send and receive sides: 0, 2, 1, 3;
/// - the mesh: the last hop's receive side and forces out: 3 and 2 (two hops: 2 and 1);
/// - the return, stage along x: the first hop's forces out (the second hop unpacks into it),
///   the stage along y's forces out (likewise), its own forces out and in: 0, 1, 2, 3; then
///   the stage along y: 0, 1 and its forces in, 3.
///
/// The first hop's two pairs of sides are one buffer each (no PE has both roles); on a
/// particle PE they are its send side and forces in, in use at different times.
pub(super) const RELAY_BANKS: [[usize; 4]; 3] = [[0, 0, 0, 0], [1, 2, 1, 3], [1, 3, 2, 3]];

/// A block of this PE's memory that buffers whose lives do not overlap take turns in.
#[derive(Default)]
pub(super) struct Bank {
    block: RefCell<Option<Local<u64>>>,
}

impl Bank {
    /// Makes the block at least `bytes` long, keeping its contents.
    ///
    /// # Safety
    /// No view of the block lives: a longer block is another allocation.
    unsafe fn ensure(&self, bytes: usize) {
        let words = bytes.div_ceil(size_of::<u64>());
        // No view of the old block lives (the caller's promise), so it may move.
        self.block.borrow_mut().get_or_insert_with(|| Local::zeroed(0)).grow(words);
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.block.borrow().as_ref().map_or(0, |b| b.len * size_of::<u64>())
    }

    fn as_ptr(&self) -> *mut u64 {
        self.block.borrow().as_ref().map_or(NonNull::dangling().as_ptr(), |b| b.ptr.as_ptr())
    }
}

/// One buffer, symmetric or local.
pub(super) enum Store<'rt, T: Pod> {
    /// As large as the most any PE needs, on every PE.
    Symmetric(GlobalMaxArray<'rt, T>),
    /// As large as this PE needs.
    Local(Local<T>),
    /// As large as this PE needs, in a bank other buffers take turns in.
    Banked(Banked<T>),
}

/// A buffer's share of a [`Bank`]: its first `len` elements.
pub(super) struct Banked<T> {
    bank: Rc<Bank>,
    len: usize,
    _elements: PhantomData<T>,
}

impl<'rt, T: Pod> Store<'rt, T> {
    /// A buffer for `role` on `path`, with room for `need` elements (this PE's; a symmetric
    /// one for the most of any PE's), in `bank` where it is local and one is given.
    ///
    /// # Collective
    /// Every PE calls it alike (a symmetric buffer is allocated collectively).
    pub(super) fn collective_new(
        rt: &'rt Runtime,
        name: &str,
        (role, path): (Role, Wire),
        need: usize,
        policy: GrowthPolicy,
        bank: Option<&Rc<Bank>>,
    ) -> Result<Self> {
        Ok(if role.symmetric_on(path) {
            Store::Symmetric(GlobalMaxArray::collective_alloc(rt, name, need, policy)?)
        } else if let Some(bank) = bank {
            assert!(align_of::<T>() <= align_of::<u64>(), "a bank holds elements aligned to 8 bytes at most");
            let len = grown(need, policy);
            // SAFETY: a buffer is made while its redistribution is built: no step, and so no
            // view of any buffer, lives.
            unsafe { bank.ensure(len * size_of::<T>()) };
            Store::Banked(Banked { bank: Rc::clone(bank), len, _elements: PhantomData })
        } else {
            Store::Local(Local::zeroed(grown(need, policy)))
        })
    }

    /// Makes room for `need` elements (every PE's, for a symmetric buffer), keeping this PE's
    /// elements; new ones are zero, but in a bank, where they hold what other buffers left.
    ///
    /// # Collective
    /// Every PE calls it alike when the buffer is symmetric; a local one grows on its own.
    ///
    /// # Safety
    /// No view ([`local_range`](Self::local_range), [`local_range_mut`](Self::local_range_mut)
    /// or a pointer from [`as_ptr`](Self::as_ptr) in use) of any buffer sharing this one's bank
    /// lives: growing the bank moves it. (The redistribution grows its buffers at builds and
    /// plans only, under `&mut` of the first hop, when no step and so no view lives.)
    pub(super) unsafe fn collective_ensure(&mut self, need: usize, policy: GrowthPolicy) -> Result<()> {
        match self {
            Store::Symmetric(array) => {
                array.collective_ensure(need)?;
            }
            // This PE's exclusive `&mut` means no view of it lives.
            Store::Local(local) if need > local.len => local.grow(grown(need, policy)),
            Store::Local(_) => {}
            Store::Banked(banked) if need > banked.len => {
                banked.len = grown(need, policy);
                // SAFETY: the caller's promise: no view of the bank lives.
                unsafe { banked.bank.ensure(banked.len * size_of::<T>()) };
            }
            Store::Banked(_) => {}
        }
        Ok(())
    }

    /// The room, in elements.
    pub(super) fn capacity(&self) -> usize {
        match self {
            Store::Symmetric(array) => array.capacity(),
            Store::Local(local) => local.len,
            Store::Banked(banked) => banked.len,
        }
    }

    /// Bytes this buffer holds of its own: (symmetric, local); a banked one's bank counts
    /// apart.
    pub(super) fn bytes(&self) -> (usize, usize) {
        let bytes = self.capacity() * size_of::<T>();
        match self {
            Store::Symmetric(_) => (bytes, 0),
            Store::Local(_) => (0, bytes),
            Store::Banked(_) => (0, 0),
        }
    }

    /// The symmetric array, for other PEs' reads and writes.
    ///
    /// Only the paths that [`Role::symmetric_on`] names symmetric call this, for those
    /// buffers: a local buffer here is a bug of this module's callers.
    pub(super) fn sym(&self) -> &SymArray<'rt, T> {
        match self {
            Store::Symmetric(array) => array.array(),
            Store::Local(_) | Store::Banked(_) => {
                unreachable!("a local redistribution buffer used as a symmetric one")
            }
        }
    }

    /// Element 0 of this PE's copy.
    pub(super) fn as_ptr(&self) -> *mut T {
        match self {
            Store::Symmetric(array) => array.array().as_ptr(),
            Store::Local(local) => local.ptr.as_ptr(),
            // The bank's block moves only when it grows, at plans, when no view lives.
            Store::Banked(banked) => banked.bank.as_ptr().cast(),
        }
    }

    /// A shared view of elements `range` of this PE's copy.
    ///
    /// # Safety
    /// No PE (this one included) writes those elements while the slice lives, neither through
    /// this buffer nor, in a bank, through another sharing it ([`RELAY_BANKS`] says which may
    /// be in use at once).
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
    /// through it: neither through this buffer nor, in a bank, through another sharing it.
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

    /// Makes the block at least `len` elements long, keeping its contents; new ones are zero.
    /// The block moves when it grows: no view of it may live (`&mut`).
    fn grow(&mut self, len: usize) {
        if len > self.len {
            let mut grown = Local::zeroed(len);
            // SAFETY: both blocks are initialised and hold at least the old length, and do
            // not overlap; `&mut self` means no view of the old one lives.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), grown.ptr.as_ptr(), self.len) };
            std::mem::swap(self, &mut grown);
        }
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
