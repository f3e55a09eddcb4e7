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

use bytemuck::Pod;

use crate::agree::{Agreed, Agreement};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::scratch::FIRST_CHUNK;

impl Runtime {
    /// Element-wise maximum over all PEs, in place: afterwards every PE holds the same values.
    ///
    /// # Collective
    /// Every PE must call it with a slice of the same length.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] when the PEs passed slices of different
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
            return Err(Error::CollectiveArgument(format!(
                "max_u64: the PEs passed slices of different lengths ({min_len} to {max_len}); \
                 every PE must reduce the same number of values"
            )));
        }
        if stream[2] > 0 {
            return Err(Error::CollectiveArgument(
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
        self.lock_collectives().broadcast(self.my_pe(), self.n_pes(), root, bytes);
        Ok(())
    }
}

impl Agreement {
    /// Every PE's terms in one maximum-reduction: the answers, the same on every PE.
    ///
    /// # Collective
    /// Every PE must call it, with the same terms in the same order.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] when the PEs asked different numbers
    /// of words.
    pub fn collective_run(self, rt: &Runtime) -> Result<Agreed> {
        let mut words = self.words(rt.my_pe());
        rt.max_u64(&mut words)?;
        Ok(Agreement::agreed(words))
    }
}
