//! [`GlobalMaxArray`]: a symmetric array sized to the largest need of any PE, grown by a
//! max-reduction and, once stable, frozen (the 2013 port's heuristic).

use bytemuck::Pod;

use super::array::SymArray;
use crate::collective::Collectives;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// How a [`GlobalMaxArray`] grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrowthPolicy {
    /// Capacity allocated for a global maximum `m`: `ceil(m * over_allocation)`; at least 1.
    pub over_allocation: f64,
    /// Stop the max-reduction after this many consecutive calls without growth (the 2013
    /// heuristic); later requests are checked locally against the frozen capacity. `None`
    /// never freezes.
    pub freeze_after: Option<u32>,
}

impl Default for GrowthPolicy {
    /// 20 % over-allocation, never frozen.
    fn default() -> Self {
        GrowthPolicy { over_allocation: 1.2, freeze_after: None }
    }
}

impl GrowthPolicy {
    fn capacity_for(&self, global_max: usize) -> usize {
        let grown = (global_max as f64 * self.over_allocation).ceil();
        if grown >= usize::MAX as f64 { usize::MAX } else { (grown as usize).max(global_max) }
    }

    fn validate(&self) -> Result<()> {
        if self.over_allocation.is_finite() && self.over_allocation >= 1.0 {
            Ok(())
        } else {
            Err(Error::CollectiveArgument(format!(
                "GrowthPolicy::over_allocation must be a finite number >= 1.0, got {}",
                self.over_allocation
            )))
        }
    }
}

/// What [`GlobalMaxArray::collective_ensure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// The capacity suffices on every PE.
    Unchanged,
    /// Every PE reallocated to a larger capacity.
    Grown {
        /// The old capacity.
        from: usize,
        /// The new capacity.
        to: usize,
    },
    /// The array is frozen and the request fits locally; no reduction took place.
    Frozen,
}

/// A symmetric array whose capacity is the maximum any PE needs, over-allocated, so PEs with
/// different needs share one symmetric size. Growing takes a max-reduction of the requests
/// (double-buffered scratch, no extra synchronisation) and a collective reallocation.
pub struct GlobalMaxArray<'rt, T: Pod> {
    array: SymArray<'rt, T>,
    policy: GrowthPolicy,
    stable_calls: u32,
    frozen: bool,
}

impl<'rt, T: Pod> GlobalMaxArray<'rt, T> {
    /// Allocates the global maximum of every PE's `need`, over-allocated by the policy.
    ///
    /// # Collective
    /// Every PE must call it (with its own `need`) in the same order relative to other
    /// collectives.
    pub fn collective_alloc(rt: &'rt Runtime, name: &str, need: usize, policy: GrowthPolicy) -> Result<Self> {
        // An invalid policy on any PE fails on every PE, after the same reduction.
        let mut request = [need as u64, u64::from(policy.validate().is_err())];
        rt.max_u64(&mut request)?;
        policy.validate()?;
        if request[1] > 0 {
            return Err(Error::CollectiveArgument(format!(
                "'{name}': another PE passed an invalid GrowthPolicy (over_allocation must be a \
                 finite number >= 1.0)"
            )));
        }
        let array = SymArray::collective_alloc(rt, name, policy.capacity_for(request[0] as usize))?;
        Ok(GlobalMaxArray { array, policy, stable_calls: 0, frozen: false })
    }

    /// Makes the capacity at least every PE's `need`. Growth keeps this PE's elements
    /// (`0..old capacity`); the new elements are zero.
    ///
    /// # Collective
    /// Every PE must call it while the array is not frozen. Once
    /// [`is_frozen`](Self::is_frozen), the call is local.
    ///
    /// # Errors
    /// [`Error::CapacityFrozen`] on the PE whose request exceeds a frozen capacity (only that
    /// PE knows; the others will see it as a timeout if they wait for it);
    /// [`Error::HeapExhausted`] on every PE.
    pub fn collective_ensure(&mut self, need: usize) -> Result<Growth> {
        let rt = self.array.runtime();
        if self.frozen {
            return if need <= self.array.len() {
                Ok(Growth::Frozen)
            } else {
                Err(Error::CapacityFrozen {
                    array: self.array.name().to_string(),
                    pe: rt.my_pe(),
                    needed: need,
                    capacity: self.array.len(),
                    stable_calls: self.stable_calls,
                })
            };
        }
        let mut global = [need as u64];
        rt.max_u64(&mut global)?;
        let global = global[0] as usize;
        let from = self.array.len();
        if global <= from {
            self.stable_calls = self.stable_calls.saturating_add(1);
            if self.policy.freeze_after.is_some_and(|n| self.stable_calls >= n) {
                self.frozen = true;
            }
            return Ok(Growth::Unchanged);
        }
        let to = self.policy.capacity_for(global);
        let old = &self.array;
        let grown = SymArray::collective_alloc_with(rt, old.name(), to, |new| {
            old.read_local(0, &mut new[..from]).expect("the old capacity fits the new one");
        })?;
        self.array = grown;
        self.stable_calls = 0;
        Ok(Growth::Grown { from, to })
    }

    /// The name given at allocation.
    pub fn name(&self) -> &str {
        self.array.name()
    }

    /// The array at its current capacity.
    pub fn array(&self) -> &SymArray<'rt, T> {
        &self.array
    }

    /// The current capacity in elements, the same on every PE.
    pub fn capacity(&self) -> usize {
        self.array.len()
    }

    /// Whether the reduction has stopped (see [`GrowthPolicy::freeze_after`]).
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }
}

impl<T: Pod> std::fmt::Debug for GlobalMaxArray<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalMaxArray")
            .field("array", &self.array)
            .field("policy", &self.policy)
            .field("frozen", &self.frozen)
            .finish_non_exhaustive()
    }
}
