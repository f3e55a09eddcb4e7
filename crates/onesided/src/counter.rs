//! Call counters ([`CallCounters`]): pairwise synchronisation without barriers.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::signal::SignalArray;

/// Per-peer call counters of one kind of paired operation (one send-receive channel, say).
///
/// Each PE counts the paired operations it has started with each peer. Arriving at the next
/// operation with `peer` ([`arrive`](Self::arrive)) fences, increments the count and writes it
/// into `peer`'s symmetric slot for this PE; waiting for `peer` ([`wait`](Self::wait)) means
/// waiting until `peer`'s count in this PE's slot has reached this PE's own count. Two PEs
/// thus synchronise without a barrier and without involving the others, and since counts
/// only grow, nothing is ever reset.
pub struct CallCounters<'rt> {
    /// Slot `p` on this PE holds the count PE `p` has reached with this PE.
    arrived: SignalArray<'rt>,
    /// `calls[p]`: the count this PE has reached with PE `p`.
    calls: Vec<u64>,
}

impl<'rt> CallCounters<'rt> {
    /// Allocates counters for every pair of PEs, all zero.
    ///
    /// # Collective
    /// As [`SymArray::collective_alloc`](crate::SymArray::collective_alloc).
    pub fn collective_alloc(rt: &'rt Runtime, name: &str) -> Result<Self> {
        Ok(CallCounters {
            arrived: SignalArray::collective_alloc(rt, name, rt.n_pes())?,
            calls: vec![0; rt.n_pes()],
        })
    }

    /// The runtime the counters belong to.
    pub fn runtime(&self) -> &'rt Runtime {
        self.arrived.runtime()
    }

    /// The count this PE has reached with `peer`.
    pub fn calls(&self, peer: usize) -> Result<u64> {
        self.check_peer(peer)?;
        Ok(self.calls[peer])
    }

    /// The count `peer` has announced to this PE so far.
    pub fn peer_calls(&self, peer: usize) -> Result<u64> {
        self.check_peer(peer)?;
        self.arrived.value(peer)
    }

    fn check_peer(&self, peer: usize) -> Result<()> {
        self.runtime().check_pe(peer, || format!("call counter '{}'", self.arrived.name()))
    }

    /// Starts the next paired operation with `peer` and tells `peer` so; returns the new count.
    ///
    /// A fence comes first, so puts this PE issued to `peer` before arriving are delivered
    /// before `peer` can see the new count.
    pub fn arrive(&mut self, peer: usize) -> Result<u64> {
        let rt = self.runtime();
        self.check_peer(peer)?;
        self.calls[peer] += 1;
        rt.fence();
        self.arrived.set(peer, rt.my_pe(), self.calls[peer])?;
        Ok(self.calls[peer])
    }

    /// Waits until `peer` has arrived at least as far as this PE (its count with this PE has
    /// reached this PE's count with it), or fails with the runtime's timeout.
    pub fn wait(&self, peer: usize) -> Result<()> {
        self.wait_for(peer, self.runtime().wait_timeout())
    }

    /// [`wait`](Self::wait) with an explicit timeout.
    pub fn wait_for(&self, peer: usize, timeout: Duration) -> Result<()> {
        self.check_peer(peer)?;
        self.arrived.wait_ge_from(peer, self.calls[peer], Some(peer), timeout).map(|_| ()).map_err(
            |e| match e {
                Error::WaitTimeout { pe, peer, awaited, seen, waited, .. } => Error::WaitTimeout {
                    pe,
                    what: format!("the call counter '{}'", self.arrived.name()),
                    peer,
                    awaited,
                    seen,
                    waited,
                },
                other => other,
            },
        )
    }

    /// Whether `peer` has arrived at least as far as this PE.
    pub fn test(&self, peer: usize) -> Result<bool> {
        self.check_peer(peer)?;
        self.arrived.test_ge(peer, self.calls[peer])
    }

    /// [`arrive`](Self::arrive) then [`wait`](Self::wait): a pairwise barrier with `peer`.
    pub fn sync(&mut self, peer: usize) -> Result<()> {
        self.arrive(peer)?;
        self.wait(peer)
    }
}

impl std::fmt::Debug for CallCounters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallCounters").field("calls", &self.calls).finish_non_exhaustive()
    }
}
