//! The symmetric scratch of the collectives, owned by the runtime: two sets of `pSync`, work,
//! source and target, used in alternation (see [`crate::collective`] for why that needs no
//! extra synchronisation), and the max-reduction over them.

use std::ffi::c_long;
use std::mem::size_of;

use crate::constants::Constants;
use crate::error::{Error, Result};
use crate::raw::{RawSymmetric, SYMMETRIC_ALIGN};

/// Elements reduced per library call.
const REDUCE_CHUNK: usize = 64;
/// Elements of the first call of [`max_u64`](crate::Collectives::max_u64): a header of three and up to five
/// values, padded, so that the call has the same size on every PE.
pub(crate) const FIRST_CHUNK: usize = 8;
/// Bytes broadcast per library call.
const BCAST_CHUNK: usize = 4096;

/// Byte offsets of one scratch set inside the block.
#[derive(Clone, Copy)]
struct SetLayout {
    psync: usize,
    pwrk: usize,
    src: usize,
    dst: usize,
}

/// The symmetric scratch of the collectives, owned by the runtime.
pub(crate) struct CollectiveScratch {
    block: Option<RawSymmetric>,
    sets: [SetLayout; 2],
    psync_len: usize,
    pwrk_len: usize,
    parity: usize,
}

// SAFETY: the scratch is only touched under the runtime's Mutex.
unsafe impl Send for CollectiveScratch {}

fn round_up(bytes: usize) -> usize {
    bytes.div_ceil(SYMMETRIC_ALIGN) * SYMMETRIC_ALIGN
}

impl CollectiveScratch {
    /// # Collective
    /// Called by [`Runtime::init`](crate::Runtime::init) on every PE; ends with a barrier.
    pub(crate) fn collective_alloc(constants: &Constants) -> Result<Self> {
        let psync_len = constants.psync_len;
        let pwrk_len = (REDUCE_CHUNK / 2 + 1).max(constants.reduce_min_wrkdata);
        let data = round_up(BCAST_CHUNK.max(REDUCE_CHUNK * size_of::<i64>()));
        let psync_bytes = round_up(psync_len * size_of::<c_long>());
        let pwrk_bytes = round_up(pwrk_len * size_of::<i64>());
        let set_bytes = psync_bytes + pwrk_bytes + 2 * data;
        let layout = |base: usize| SetLayout {
            psync: base,
            pwrk: base + psync_bytes,
            src: base + psync_bytes + pwrk_bytes,
            dst: base + psync_bytes + pwrk_bytes + data,
        };
        let Some(block) = RawSymmetric::collective_alloc(2 * set_bytes, SYMMETRIC_ALIGN) else {
            let (variable, current) = crate::env::heap_size_setting();
            // SAFETY: OpenSHMEM is initialised.
            let pe = unsafe { shmem_sys::shmem_my_pe() } as usize;
            return Err(Error::HeapExhausted {
                array: "collective scratch".to_string(),
                bytes: 2 * set_bytes,
                pe,
                variable,
                current,
            });
        };
        let scratch = CollectiveScratch {
            block: Some(block),
            sets: [layout(0), layout(set_bytes)],
            psync_len,
            pwrk_len,
            parity: 0,
        };
        for set in 0..2 {
            let psync = scratch.ptr::<c_long>(set, |s| s.psync);
            for i in 0..psync_len {
                // SAFETY: psync_len longs fit the psync region of the fresh block.
                unsafe { psync.add(i).write(constants.sync_value) };
            }
        }
        // SAFETY: OpenSHMEM is initialised; every PE initialised its pSync before this barrier.
        crate::watchdog::watch("shmem_barrier_all", None, || unsafe { shmem_sys::shmem_barrier_all() });
        Ok(scratch)
    }

    fn ptr<T>(&self, set: usize, region: impl Fn(&SetLayout) -> usize) -> *mut T {
        let block = self.block.as_ref().expect("scratch is freed only when the runtime drops");
        // SAFETY: the region offsets lie inside the block by construction.
        unsafe { block.as_ptr().add(region(&self.sets[set])).cast::<T>() }
    }

    /// The set for the next call; flips the parity.
    fn next_set(&mut self) -> usize {
        let set = self.parity;
        self.parity ^= 1;
        set
    }

    /// # Collective
    /// Called when the runtime drops.
    pub(crate) fn free(&mut self) {
        if let Some(block) = self.block.take() {
            block.collective_free();
        }
    }
}

impl CollectiveScratch {
    /// The address of the scratch block: the first symmetric allocation of the job.
    pub(crate) fn block_address(&self) -> usize {
        self.block.as_ref().map_or(0, |b| b.as_ptr() as usize)
    }

    /// Element-wise maximum over all PEs, in place.
    ///
    /// # Collective
    /// Every PE must call it with a slice of the same length, holding the runtime's
    /// collective lock (`self` is that lock's content).
    pub(crate) fn reduce_max(&mut self, n_pes: usize, values: &mut [i64]) {
        for chunk in values.chunks_mut(REDUCE_CHUNK) {
            let set = self.next_set();
            let src = self.ptr::<i64>(set, |s| s.src);
            let dst = self.ptr::<i64>(set, |s| s.dst);
            let pwrk = self.ptr::<i64>(set, |s| s.pwrk);
            let psync = self.ptr::<c_long>(set, |s| s.psync);
            debug_assert!(self.pwrk_len > chunk.len() / 2 && self.psync_len >= 1);
            // SAFETY: chunk.len() <= REDUCE_CHUNK fits the src region; no other PE writes this
            // PE's src (reductions only read it, and only during the call).
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), src, chunk.len()) };
            // SAFETY: src, dst, pwrk and psync are symmetric, sized for REDUCE_CHUNK elements,
            // and this set's previous call has ended on every PE (module docs).
            crate::watchdog::watch("shmem_longlong_max_to_all", None, || unsafe {
                shmem_sys::shmem_longlong_max_to_all(
                    dst,
                    src,
                    chunk.len() as i32,
                    0,
                    0,
                    n_pes as i32,
                    pwrk,
                    psync,
                )
            });
            // SAFETY: the reduction has completed into dst; inside the region.
            unsafe { std::ptr::copy_nonoverlapping(dst, chunk.as_mut_ptr(), chunk.len()) };
        }
    }

    /// Broadcasts `bytes` from `root` to every PE of `n_pes` (this PE is `me`), in chunks of
    /// the scratch's size, each ended by `shmem_sync_all` (see the module docs of
    /// [`crate::collective`] for why a broadcast needs it).
    ///
    /// # Collective
    /// Every PE calls it with the same root and length.
    pub(crate) fn broadcast(&mut self, me: usize, n_pes: usize, root: usize, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(BCAST_CHUNK) {
            let set = self.next_set();
            let src = self.ptr::<u8>(set, |s| s.src);
            let dst = self.ptr::<u8>(set, |s| s.dst);
            let psync = self.ptr::<c_long>(set, |s| s.psync);
            let words = chunk.len().div_ceil(8);
            if me == root {
                // SAFETY: chunk.len() <= BCAST_CHUNK fits the src region.
                unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), src, chunk.len()) };
            }
            // SAFETY: src, dst and psync are symmetric and sized for BCAST_CHUNK bytes
            // (rounded up to whole 64-bit words inside the 64-byte-rounded region); this set's
            // previous call has ended on every PE.
            crate::watchdog::watch("shmem_broadcast64", None, || unsafe {
                shmem_sys::shmem_broadcast64(
                    dst.cast(),
                    src.cast(),
                    words,
                    root as i32,
                    0,
                    0,
                    n_pes as i32,
                    psync,
                )
            });
            if me != root {
                // SAFETY: the broadcast completed into dst on this non-root PE.
                unsafe { std::ptr::copy_nonoverlapping(dst, chunk.as_mut_ptr(), chunk.len()) };
            }
            // SAFETY: OpenSHMEM is initialised; see the module docs for why.
            crate::watchdog::watch("shmem_sync_all", None, || unsafe { shmem_sys::shmem_sync_all() });
        }
    }
}
