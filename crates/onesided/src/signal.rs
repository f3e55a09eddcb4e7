//! Signals ([`SignalArray`]): monotonic 64-bit words in symmetric memory, set by remote PEs
//! (alone or with a put), awaited locally with `>=`; and put-with-signal.

use std::ffi::c_ulonglong;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::Duration;

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::heap::SymArray;
use crate::poll::poll_until;
use crate::rma::NbiScope;
use crate::runtime::Runtime;

/// Polls between two calls into the library for progress.
const POLLS_PER_PROGRESS: u32 = 16;
/// The same when every PE's memory is mapped: signals then arrive as plain stores, and the
/// library is called only for the progress of anything else it may have in flight.
const POLLS_PER_PROGRESS_MAPPED: u32 = 1024;

/// An array of signal words in symmetric memory, zero at allocation, only ever accessed
/// atomically.
///
/// A signal's value only grows (a step or call number) and is awaited with `>=`, so a signal
/// never needs resetting and a late waiter still sees that its value was reached.
///
/// A wait polls with an acquire load, calling the library's test (which drives its progress,
/// for transports that need the target's help) every 16th poll, or every 1024th where every
/// PE's heap is mapped and signals arrive as plain stores. It spins briefly, then yields the
/// core (or, where PEs share cores, sleeps between polls: [`Runtime::oversubscribed`]), and
/// after the runtime's [timeout](Runtime::wait_timeout) returns [`Error::WaitTimeout`] naming
/// the PE, the signal and its array, the value awaited and the value seen.
pub struct SignalArray<'rt> {
    words: SymArray<'rt, u64>,
}

impl<'rt> SignalArray<'rt> {
    /// Allocates `len` signal words on every PE, all zero.
    ///
    /// # Collective
    /// As [`SymArray::collective_alloc`].
    pub fn collective_alloc(rt: &'rt Runtime, name: &str, len: usize) -> Result<Self> {
        Ok(SignalArray { words: SymArray::collective_alloc(rt, name, len)? })
    }

    /// The number of signal words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether there are no signal words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The name given at allocation.
    pub fn name(&self) -> &str {
        self.words.name()
    }

    /// The runtime the signals belong to.
    pub fn runtime(&self) -> &'rt Runtime {
        self.words.runtime()
    }

    /// The local address of signal word 0 (its symmetric address on every PE), for calling
    /// the C library directly.
    pub fn as_ptr(&self) -> *mut u64 {
        self.words.as_ptr()
    }

    fn word(&self, index: usize) -> *mut c_ulonglong {
        self.words.element_ptr(index).cast::<c_ulonglong>()
    }

    fn check_local(&self, index: usize) -> Result<()> {
        self.words.check("signal access", self.runtime().my_pe(), index, 1)
    }

    /// The current value of this PE's signal `index`.
    pub fn value(&self, index: usize) -> Result<u64> {
        self.check_local(index)?;
        Ok(self.load(index))
    }

    fn load(&self, index: usize) -> u64 {
        // SAFETY: index is in bounds; the word is 8-byte aligned (64-byte-aligned block) and
        // only ever accessed atomically (remote atomics, local atomic loads).
        unsafe { AtomicU64::from_ptr(self.words.element_ptr(index)) }.load(Ordering::Acquire)
    }

    /// Sets PE `pe`'s signal `index` to `value` (an atomic set, ordered after this PE's
    /// earlier puts to `pe` only if a [`Runtime::fence`] separates them).
    ///
    /// Each signal word must have one writer at a time: a release store through the mapping
    /// where `pe`'s memory is mapped into this process, the library's atomic set otherwise.
    pub fn set(&self, pe: usize, index: usize, value: u64) -> Result<()> {
        self.words.check("signal set", pe, index, 1)?;
        // SAFETY: index in bounds and pe exists (checked).
        unsafe { self.set_unchecked(pe, index, value) };
        Ok(())
    }

    /// # Safety
    /// `index` is in bounds and `pe` exists.
    unsafe fn set_unchecked(&self, pe: usize, index: usize, value: u64) {
        match self.words.mapped(pe) {
            Some(base) => {
                // SAFETY: the mapped word is 8-byte aligned and only accessed atomically; the
                // release store orders this PE's earlier stores through the mapping before it.
                let word = unsafe { AtomicU64::from_ptr(base.as_ptr().add(index)) };
                word.store(value, Ordering::Release)
            }
            // SAFETY: in bounds, pe exists, 8-byte word updated only atomically.
            None => crate::watchdog::watch("shmem_ulonglong_atomic_set", Some(pe), || unsafe {
                shmem_sys::shmem_ulonglong_atomic_set(self.word(index), value, pe as i32)
            }),
        }
    }

    /// Stores `value` into this PE's own signal `index`: for protocols that hand a word back
    /// and forth (a flag that the owner resets before the other side may set it again).
    #[cfg(feature = "baselines")]
    pub(crate) fn store_local(&self, index: usize, value: u64) {
        // SAFETY: callers pass an index in bounds; the word is 8-byte aligned and accessed
        // atomically.
        unsafe { AtomicU64::from_ptr(self.words.element_ptr(index)) }.store(value, Ordering::Release)
    }

    /// Adds `delta` to PE `pe`'s signal `index`: the library's atomic add, so that adds from
    /// any number of PEs, on this node or not, stay atomic with respect to each other; or,
    /// when every PE of the job is mapped into this process, the processor's atomic add
    /// through the mapping, which every PE then uses (see [`AtomicArray`](crate::AtomicArray)).
    ///
    /// A signal word is either set (by one writer at a time) or added to, never both: a set
    /// through the mapping is a plain store, not atomic with respect to a library add.
    pub fn add(&self, pe: usize, index: usize, delta: u64) -> Result<()> {
        self.words.check("signal add", pe, index, 1)?;
        if self.runtime().all_pes_mapped()
            && let Some(base) = self.words.mapped(pe)
        {
            // SAFETY: in bounds (checked), 8-byte aligned, only accessed atomically; the
            // release orders this PE's earlier stores through the mapping before the add.
            unsafe { AtomicU64::from_ptr(base.as_ptr().add(index)) }.fetch_add(delta, Ordering::Release);
            return Ok(());
        }
        // Stores through the mapping must be visible before the add is.
        fence(Ordering::Release);
        // SAFETY: in bounds, pe exists, 8-byte word updated only atomically.
        crate::watchdog::watch("shmem_ulonglong_atomic_add", Some(pe), || unsafe {
            shmem_sys::shmem_ulonglong_atomic_add(self.word(index), delta, pe as i32)
        });
        Ok(())
    }

    /// Whether this PE's signal `index` has reached `value` (`>=`).
    pub fn test_ge(&self, index: usize, value: u64) -> Result<bool> {
        self.check_local(index)?;
        Ok(self.test(index, value))
    }

    /// `shmem_test`s the word and, when it has not reached `value`, drives the library's
    /// progress once, as Sandia OpenSHMEM's test does by itself. Transports that emulate remote
    /// writes with messages (UCX over TCP between nodes) apply them only while the target
    /// progresses, and Open MPI's OSHMEM does not progress inside `shmem_test`.
    fn test(&self, index: usize, value: u64) -> bool {
        let cmp_ge = self.runtime().constants().cmp_ge;
        // SAFETY: index is in bounds (checked by callers).
        let reached = unsafe { shmem_sys::shmem_ulonglong_test(self.word(index), cmp_ge, value) } != 0;
        if reached {
            // Data put before the signal must not be read before the signal was seen.
            fence(Ordering::Acquire);
        } else {
            // SAFETY: progress takes no arguments; the library was initialised with
            // SHMEM_THREAD_MULTIPLE, so any thread of the PE may call it.
            unsafe { shmem_sys::shmem_sys_progress() };
            self.runtime().progress_window();
        }
        reached
    }

    /// Whether this PE's signal `index` has reached `value`, the cheapest way: an acquire
    /// load when every PE writes signals through the mapping, a library test otherwise.
    /// `index` must be in bounds.
    pub(crate) fn reached(&self, index: usize, value: u64) -> bool {
        if self.runtime().all_pes_mapped() {
            let reached = self.load(index) >= value;
            if reached {
                fence(Ordering::Acquire);
            }
            reached
        } else {
            self.test(index, value)
        }
    }

    /// The check a wait makes on each poll: an acquire load (a cache-line read, far cheaper
    /// than a library call), with a library test every [`POLLS_PER_PROGRESS`] polls (or
    /// [`POLLS_PER_PROGRESS_MAPPED`]). When some
    /// PE may write through the library rather than the mapping, a value seen by the load is
    /// confirmed by a library test before the wait ends: OpenSHMEM 1.4 promises the data of a
    /// put-fence-set sequence only to a PE that saw the flag through its test or wait.
    fn poll(&self, index: usize, value: u64, polls: &mut u32) -> bool {
        *polls = polls.wrapping_add(1);
        let mapped = self.runtime().all_pes_mapped();
        let every = if mapped { POLLS_PER_PROGRESS_MAPPED } else { POLLS_PER_PROGRESS };
        if polls.is_multiple_of(every) {
            self.test(index, value)
        } else if self.load(index) >= value {
            mapped || self.test(index, value)
        } else {
            false
        }
    }

    /// Waits until this PE's signal `index` reaches `value` (`>=`) and returns the value seen,
    /// or fails after the runtime's [wait timeout](Runtime::wait_timeout).
    pub fn wait_ge(&self, index: usize, value: u64) -> Result<u64> {
        self.wait_ge_for(index, value, self.runtime().wait_timeout())
    }

    /// [`wait_ge`](Self::wait_ge) with an explicit timeout.
    pub fn wait_ge_for(&self, index: usize, value: u64, timeout: Duration) -> Result<u64> {
        self.wait_ge_from(index, value, None, timeout)
    }

    /// Waits, naming the PE expected to update the signal in a timeout's diagnosis.
    pub(crate) fn wait_ge_from(
        &self,
        index: usize,
        value: u64,
        peer: Option<usize>,
        timeout: Duration,
    ) -> Result<u64> {
        self.wait_ge_polling(index, value, peer, timeout, self.runtime().oversubscribed(), false)
    }

    /// [`wait_ge`](Self::wait_ge) for a PE that has nothing else to do while other PEs are
    /// timed (the links calibration): it naps between polls once it has spun a while, as on
    /// an oversubscribed node, whatever this node's count, so that it leaves the cores to the
    /// PEs timed (emulated nodes share one machine's cores), and drives the library's
    /// progress at every poll, so that no PE waits on it for that.
    pub(crate) fn wait_ge_idle(&self, index: usize, value: u64) -> Result<u64> {
        self.wait_ge_polling(index, value, None, self.runtime().wait_timeout(), false, true)
    }

    /// The wait, napping between polls after a while when `nap`, and `idle` as
    /// [`wait_ge_idle`](Self::wait_ge_idle) waits.
    fn wait_ge_polling(
        &self,
        index: usize,
        value: u64,
        peer: Option<usize>,
        timeout: Duration,
        nap: bool,
        idle: bool,
    ) -> Result<u64> {
        self.check_local(index)?;
        // Already there: one acquire load, no polling machinery.
        if self.runtime().all_pes_mapped() {
            let seen = self.load(index);
            if seen >= value {
                return Ok(seen);
            }
        }
        let mut polls = 0;
        // An idle wait polls rarely (it naps), so each of its polls drives the library's
        // progress: a PE on another node may be waiting for this one to apply its remote
        // writes (UCX over TCP applies them only while the target progresses).
        let mut check = || if idle { self.test(index, value) } else { self.poll(index, value, &mut polls) };
        match poll_until(timeout, nap || idle, &mut check) {
            Ok(()) => Ok(self.load(index)),
            Err(waited) => {
                self.deadline_spent(timeout);
                Err(Error::WaitTimeout {
                    pe: self.runtime().my_pe(),
                    what: format!("signal {index} of '{}'", self.name()),
                    peer,
                    awaited: value,
                    seen: self.load(index),
                    waited,
                })
            }
        }
    }

    /// After a wait that ran out `timeout`: when that was the whole deadline, a peer is lost,
    /// and the watchdog gives later blocking calls only a short time (see
    /// [`crate::watchdog::after_a_timeout`]).
    fn deadline_spent(&self, timeout: Duration) {
        if timeout >= self.runtime().wait_timeout() {
            crate::watchdog::deadline_spent();
        }
    }

    /// Waits until any of `waits` (pairs of signal index and awaited value) is reached and
    /// returns its position in `waits`. Each poll starts one entry further along, so no entry
    /// is starved by those before it, and whichever peer is first is served first.
    pub fn wait_any_ge(&self, waits: &[(usize, u64)]) -> Result<usize> {
        self.wait_any_ge_for(waits, self.runtime().wait_timeout())
    }

    /// [`wait_any_ge`](Self::wait_any_ge) with an explicit timeout.
    pub fn wait_any_ge_for(&self, waits: &[(usize, u64)], timeout: Duration) -> Result<usize> {
        if waits.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "wait_any_ge on '{}' needs at least one signal to wait for",
                self.name()
            )));
        }
        for &(index, _) in waits {
            self.check_local(index)?;
        }
        let mut found = 0;
        let mut polls = 0u32;
        let outcome = poll_until(timeout, self.runtime().oversubscribed(), || {
            match waits.iter().position(|&(i, v)| self.poll(i, v, &mut polls)) {
                Some(position) => {
                    found = position;
                    true
                }
                None => false,
            }
        });
        match outcome {
            Ok(()) => Ok(found),
            Err(waited) => {
                self.deadline_spent(timeout);
                let pending: Vec<String> =
                    waits.iter().map(|&(i, v)| format!("{i}>={v} (is {})", self.load(i))).collect();
                Err(Error::WaitTimeout {
                    pe: self.runtime().my_pe(),
                    what: format!("any of signals [{}] of '{}'", pending.join(", "), self.name()),
                    peer: None,
                    awaited: waits[0].1,
                    seen: self.load(waits[0].0),
                    waited,
                })
            }
        }
    }
}

impl<T: Pod> SymArray<'_, T> {
    /// Puts `src` into elements `offset..` of PE `pe`'s copy and then sets PE `pe`'s signal
    /// `index` to `value`: when the target sees the signal, the data is there.
    ///
    /// `shmem_putmem_signal` where the library has it (OpenSHMEM 1.5); put, fence and atomic
    /// set on 1.4.
    pub fn put_signal(
        &self,
        pe: usize,
        offset: usize,
        src: &[T],
        signals: &SignalArray<'_>,
        index: usize,
        value: u64,
    ) -> Result<()> {
        self.check("put with signal", pe, offset, src.len())?;
        signals.words.check("signal set", pe, index, 1)?;
        if self.mapped(pe).is_some() {
            // SAFETY: both ranges checked; the copy ends with a release fence and the signal
            // is a release store, so the data is visible first.
            unsafe {
                self.put_unchecked(pe, offset, src, false);
                signals.set_unchecked(pe, index, value);
            }
            return Ok(());
        }
        #[cfg(shmem_spec_1_5)]
        // SAFETY: both ranges checked; src is valid for the blocking call.
        crate::watchdog::watch("shmem_putmem_signal", Some(pe), || unsafe {
            shmem_sys::shmem_putmem_signal(
                self.element_ptr(offset).cast::<std::ffi::c_void>(),
                src.as_ptr().cast::<std::ffi::c_void>(),
                std::mem::size_of_val(src),
                signals.word(index).cast::<u64>(),
                value,
                self.runtime().constants().signal_set,
                pe as i32,
            )
        });
        #[cfg(not(shmem_spec_1_5))]
        {
            self.put(pe, offset, src)?;
            self.runtime().fence();
            signals.set(pe, index, value)?;
        }
        Ok(())
    }
}

impl<'env> NbiScope<'_, 'env> {
    /// Starts a put of `src` followed by setting PE `pe`'s signal `index` to `value`
    /// (`shmem_putmem_signal_nbi` on 1.5; non-blocking put, fence and atomic set on 1.4).
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal<T: Pod>(
        &self,
        array: &'env SymArray<'_, T>,
        pe: usize,
        offset: usize,
        src: &'env [T],
        signals: &'env SignalArray<'_>,
        index: usize,
        value: u64,
    ) -> Result<()> {
        array.check("non-blocking put with signal", pe, offset, src.len())?;
        signals.words.check("signal set", pe, index, 1)?;
        if array.mapped(pe).is_some() {
            // SAFETY: as in SymArray::put_signal; through the mapping the put completes at once.
            unsafe {
                array.put_unchecked(pe, offset, src, true);
                signals.set_unchecked(pe, index, value);
            }
            return Ok(());
        }
        #[cfg(shmem_spec_1_5)]
        // SAFETY: both ranges checked; src stays borrowed until the scope's quiet.
        crate::watchdog::watch("shmem_putmem_signal_nbi", Some(pe), || unsafe {
            shmem_sys::shmem_putmem_signal_nbi(
                array.element_ptr(offset).cast::<std::ffi::c_void>(),
                src.as_ptr().cast::<std::ffi::c_void>(),
                std::mem::size_of_val(src),
                signals.word(index).cast::<u64>(),
                value,
                self.runtime().constants().signal_set,
                pe as i32,
            )
        });
        #[cfg(not(shmem_spec_1_5))]
        {
            self.put(array, pe, offset, src)?;
            self.fence();
            signals.set(pe, index, value)?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for SignalArray<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalArray").field("name", &self.name()).field("len", &self.len()).finish()
    }
}
