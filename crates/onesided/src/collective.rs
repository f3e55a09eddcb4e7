//! Collectives over all PEs: max-reduction of sizes and broadcast, on double-buffered
//! symmetric scratch so consecutive reductions need no extra synchronisation.
//!
//! OpenSHMEM 1.4 collectives take a `pSync` work array that must not be reused until every PE
//! has left the previous collective that used it. Calls alternate between two scratch sets:
//! call `k + 2` reuses the set of call `k`. A reduction returns on no PE before every PE has
//! entered it (each result needs every contribution), so no PE can enter call `k + 2` before
//! every PE has entered call `k + 1`, that is, left call `k`. A broadcast lacks that property
//! (the root may return at once), so each broadcast chunk ends with `shmem_sync_all` to give
//! it back.

use std::ffi::c_long;
use std::mem::size_of;

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::raw::{RawSymmetric, SYMMETRIC_ALIGN};
use crate::runtime::{Constants, Runtime};

/// Elements reduced per library call.
const REDUCE_CHUNK: usize = 64;
/// Elements of the first call of [`Runtime::max_u64`]: a header of three and up to five
/// values, padded, so that the call has the same size on every PE.
const FIRST_CHUNK: usize = 8;
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
    /// Called by [`Runtime::init`] on every PE; ends with a barrier.
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
        unsafe { shmem_sys::shmem_barrier_all() };
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
            unsafe {
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
            };
            // SAFETY: the reduction has completed into dst; inside the region.
            unsafe { std::ptr::copy_nonoverlapping(dst, chunk.as_mut_ptr(), chunk.len()) };
        }
    }
}

impl Runtime {
    /// Element-wise maximum over all PEs, in place: afterwards every PE holds the same values.
    ///
    /// # Collective
    /// Every PE must call it with a slice of the same length.
    ///
    /// # Errors
    /// On every PE alike: [`Error::InvalidArgument`] when the PEs passed slices of different
    /// lengths or when any PE passed a value above `i64::MAX` (the library reduces signed
    /// 64-bit integers).
    pub fn max_u64(&self, values: &mut [u64]) -> Result<()> {
        const LIMIT: u64 = i64::MAX as u64;
        // A header travels in the first chunk, so every PE learns of a length mismatch or an
        // oversized value after the same library call, and they all stop there together.
        let len = values.len() as u64;
        let too_big = values.iter().filter(|&&v| v > LIMIT).count() as i64;
        let mut stream: Vec<i64> = [len.min(LIMIT) as i64, (LIMIT - len.min(LIMIT)) as i64, too_big]
            .into_iter()
            .chain(values.iter().map(|&v| v.min(LIMIT) as i64))
            .collect();
        // The first call reduces a fixed number of elements whatever the PEs passed, so that
        // it matches across PEs even when the lengths do not.
        stream.resize(stream.len().max(FIRST_CHUNK), 0);
        let mut scratch = self.lock_collectives();
        scratch.reduce_max(self.n_pes(), &mut stream[..FIRST_CHUNK]);
        let (max_len, min_len) = (stream[0] as u64, LIMIT - stream[1] as u64);
        if max_len != min_len {
            return Err(Error::InvalidArgument(format!(
                "max_u64: the PEs passed slices of different lengths ({min_len} to {max_len}); \
                 every PE must reduce the same number of values"
            )));
        }
        if stream[2] > 0 {
            return Err(Error::InvalidArgument(
                "max_u64 reduces values up to i64::MAX, and some PE passed a larger one".to_string(),
            ));
        }
        scratch.reduce_max(self.n_pes(), &mut stream[FIRST_CHUNK..]);
        for (v, r) in values.iter_mut().zip(&stream[3..]) {
            *v = *r as u64;
        }
        Ok(())
    }

    /// The maximum of one value over all PEs.
    ///
    /// # Collective
    /// Every PE must call it.
    pub fn max_u64_one(&self, value: u64) -> Result<u64> {
        let mut values = [value];
        self.max_u64(&mut values)?;
        Ok(values[0])
    }

    /// Copies `data` of PE `root` into `data` of every other PE.
    ///
    /// # Collective
    /// Every PE must call it with the same `root` and a slice of the same length (unlike
    /// [`max_u64`](Self::max_u64), lengths are not checked: the broadcast is the way the
    /// length itself is shared).
    pub fn broadcast<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        self.check_pe(root, || "broadcast".to_string())?;
        if self.n_pes() == 1 {
            return Ok(());
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(data);
        let mut scratch = self.lock_collectives();
        for chunk in bytes.chunks_mut(BCAST_CHUNK) {
            let set = scratch.next_set();
            let src = scratch.ptr::<u8>(set, |s| s.src);
            let dst = scratch.ptr::<u8>(set, |s| s.dst);
            let psync = scratch.ptr::<c_long>(set, |s| s.psync);
            let words = chunk.len().div_ceil(8);
            if self.my_pe() == root {
                // SAFETY: chunk.len() <= BCAST_CHUNK fits the src region.
                unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), src, chunk.len()) };
            }
            // SAFETY: src, dst and psync are symmetric and sized for BCAST_CHUNK bytes
            // (rounded up to whole 64-bit words inside the 64-byte-rounded region); this set's
            // previous call has ended on every PE.
            unsafe {
                shmem_sys::shmem_broadcast64(
                    dst.cast(),
                    src.cast(),
                    words,
                    root as i32,
                    0,
                    0,
                    self.n_pes() as i32,
                    psync,
                )
            };
            if self.my_pe() != root {
                // SAFETY: the broadcast completed into dst on this non-root PE.
                unsafe { std::ptr::copy_nonoverlapping(dst, chunk.as_mut_ptr(), chunk.len()) };
            }
            // SAFETY: OpenSHMEM is initialised; see the module docs for why.
            unsafe { shmem_sys::shmem_sync_all() };
        }
        Ok(())
    }
}
