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
use crate::gather;
use crate::reduce::{self, ReduceOp, Reducible};
use crate::runtime::Runtime;
use crate::scratch::FIRST_CHUNK;

/// The collectives of every PE of a job ([`Runtime`]), the same bits on every PE: what the
/// library's agreements and an engine's totals are made of. A trait, as rsmpi's
/// `CommunicatorCollectives` is, so that the runtime's own surface stays small: bring it in
/// with `use onesided::Collectives`.
///
/// # Collective
/// Every method must be called by every PE, in the same order, from the thread that makes
/// the PE's collectives.
pub trait Collectives {
    /// Element-wise maximum over all PEs, in place: afterwards every PE holds the same values.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] when the PEs passed slices of different
    /// lengths or when any PE passed a value above `i64::MAX` (the library reduces signed
    /// 64-bit integers).
    fn max_u64(&self, values: &mut [u64]) -> Result<()>;

    /// The maximum of one value over all PEs ([`max_u64`](Self::max_u64) of one).
    ///
    /// # Errors
    /// As [`max_u64`](Self::max_u64).
    fn max_u64_one(&self, value: u64) -> Result<u64> {
        let mut values = [value];
        self.max_u64(&mut values)?;
        Ok(values[0])
    }

    /// Copies `data` of PE `root` into `data` of every other PE. Every PE passes the same
    /// `root` and a slice of the same length (unlike [`max_u64`](Self::max_u64), lengths are
    /// not checked: the broadcast is the way the length itself is shared).
    ///
    /// # Errors
    /// [`Error::InvalidPe`] for a `root` that is not a PE.
    fn broadcast<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()>;

    /// Reduces `values` element by element over all PEs, in place: afterwards every PE holds
    /// the same bits. A floating-point reduction is made on PE 0 and broadcast from there, so
    /// that no PE rounds in another order (an MPI all-reduce may add in a different order on
    /// different ranks); an integer one takes one all-reduce. Integer overflow is not
    /// detected: keep sums in range.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] when the PEs passed slices of different
    /// lengths (nothing is reduced then).
    fn all_reduce<T: Reducible>(&self, op: ReduceOp, values: &mut [T]) -> Result<()>;

    /// The sum of `value` over all PEs, the same bits on every PE.
    fn all_sum<T: Reducible>(&self, value: T) -> T;

    /// The smallest `value` over all PEs.
    fn all_min<T: Reducible>(&self, value: T) -> T;

    /// The largest `value` over all PEs.
    fn all_max<T: Reducible>(&self, value: T) -> T;

    /// Per-atom values in global order on PE `root`: each PE passes the global indices of
    /// its atoms and one value for each (`values[k]` of atom `indices[k]`), and `root`
    /// returns `Some` of all `total` of them, entry `i` atom `i`'s; every other PE returns
    /// `None`. For output, restarts and checks: only `root` holds the whole system (its
    /// memory O(`total` + PEs), every other PE's what it passed), in two MPI gathers and a
    /// broadcast of the root's verdict.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] when an index is out of range, comes
    /// twice or not at all, a PE passed indices and values of different lengths (naming the
    /// index and the PE), the whole is more than MPI's 2 GiB in one gather, or `root` is not
    /// a PE.
    fn gather_by_index<T: Pod>(
        &self,
        root: usize,
        total: usize,
        indices: &[u32],
        values: &[T],
    ) -> Result<Option<Vec<T>>>;
}

impl Collectives for Runtime {
    fn max_u64(&self, values: &mut [u64]) -> Result<()> {
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

    fn broadcast<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        self.check_pe(root, || "broadcast".to_string())?;
        if self.n_pes() == 1 {
            return Ok(());
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(data);
        self.lock_collectives().broadcast(self.my_pe(), self.n_pes(), root, bytes);
        Ok(())
    }

    fn all_reduce<T: Reducible>(&self, op: ReduceOp, values: &mut [T]) -> Result<()> {
        reduce::all_reduce(self, op, values)
    }

    fn gather_by_index<T: Pod>(
        &self,
        root: usize,
        total: usize,
        indices: &[u32],
        values: &[T],
    ) -> Result<Option<Vec<T>>> {
        gather::gather_by_index(self, root, total, indices, values)
    }

    fn all_sum<T: Reducible>(&self, value: T) -> T {
        reduce::reduce_one(self, ReduceOp::Sum, value)
    }

    fn all_min<T: Reducible>(&self, value: T) -> T {
        reduce::reduce_one(self, ReduceOp::Min, value)
    }

    fn all_max<T: Reducible>(&self, value: T) -> T {
        reduce::reduce_one(self, ReduceOp::Max, value)
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
