//! The all-to-all's calibration: which algorithm is fastest for this group and block on this
//! job's nodes, cached like the exchanges' links.

use std::mem::size_of;

use bytemuck::Pod;

use super::algorithm::AlltoallAlgorithm;
use super::state::{Alltoall, GroupRef};
use crate::collective::Collectives;
use crate::error::Result;
use crate::group::PeGroup;

/// Timed calls per candidate when [`Path::Auto`](crate::Path::Auto) calibrates, after a
/// warm-up call.
const CALIBRATION_CALLS: usize = 5;

/// The most buffer bytes [`Path::Auto`](crate::Path::Auto)'s candidates may hold at once to
/// be timed in interleaved rounds; beyond it they are timed one after another.
const INTERLEAVED_BYTES: usize = 64 << 20;

/// The algorithms [`Path::Auto`](crate::Path::Auto) chooses among: an engine's, not the
/// benchmarks' baselines.
const CANDIDATES: [AlltoallAlgorithm; 4] = [
    AlltoallAlgorithm::Ordered,
    AlltoallAlgorithm::NodeAware,
    AlltoallAlgorithm::OrderedMpi,
    AlltoallAlgorithm::Mpi,
];

impl<'g, 'rt, T: Pod> Alltoall<'g, 'rt, T> {
    /// The algorithm to take for [`Path::Auto`](crate::Path::Auto), among those an engine may
    /// run (not the baselines): from the cache, else by timing each
    /// candidate ([`CALIBRATION_CALLS`] calls after a warm-up; a call's time is its slowest
    /// member's, agreed over the job, and the median call decides), written to the cache.
    /// Candidates whose buffers fit [`INTERLEAVED_BYTES`] together are timed in interleaved
    /// rounds, one call of each per round, so that a slow spell of the machine (a peer
    /// descheduled on an oversubscribed node, a burst of other traffic) weighs on every
    /// candidate alike; larger ones one after another. From the second round on, a candidate
    /// whose fastest call took over twice the best median so far makes no more calls.
    ///
    /// # Collective
    /// Every PE of the job, as the creation.
    pub(super) fn collective_calibrate(
        group: &PeGroup<'rt>,
        name: &str,
        block: usize,
    ) -> Result<AlltoallAlgorithm> {
        let rt = group.runtime();
        let bytes = block.saturating_mul(size_of::<T>());
        let key = "alltoall";
        let cache = rt.collective_cache_file(&format!("alltoall-{}x{bytes}B", group.len()))?;
        let cached = match &cache {
            Some(file) if rt.my_pe() == 0 => {
                crate::cache::read_choice(file, key).and_then(|v| v.parse().ok())
            }
            _ => None,
        };
        let candidates = CANDIDATES.to_vec();
        let slot = |p: AlltoallAlgorithm| CANDIDATES.iter().position(|&q| q == p).unwrap_or(0);
        let mut code = [cached.filter(|p| CANDIDATES.contains(p)).map_or(0, |p| slot(p) as u64 + 1)];
        rt.broadcast(0, &mut code)?;
        if let Some(&algorithm) = (code[0] as usize).checked_sub(1).and_then(|i| CANDIDATES.get(i)) {
            return Ok(algorithm);
        }
        // A candidate's send and receive buffers.
        let each = bytes.saturating_mul(group.len()).saturating_mul(2);
        let batches: Vec<Vec<AlltoallAlgorithm>> =
            if each.saturating_mul(candidates.len()) <= INTERLEAVED_BYTES {
                vec![candidates.clone()]
            } else {
                candidates.iter().map(|&p| vec![p]).collect()
            };
        let member = group.my_rank().is_some();
        let mut calls: Vec<Vec<u64>> = vec![Vec::new(); CANDIDATES.len()];
        let median = |times: &[u64]| {
            let mut sorted = times.to_vec();
            sorted.sort_unstable();
            sorted.get(sorted.len() / 2).copied()
        };
        for batch in batches {
            let mut live = Vec::with_capacity(batch.len());
            for &path in &batch {
                let name = format!("{name}: calibration");
                live.push((
                    path,
                    Alltoall::<T>::collective_with(GroupRef::Borrowed(group), &name, block, path)?,
                ));
            }
            // A warm-up call each (connections, registrations, first touches), not timed.
            if member {
                for (_, alltoall) in &mut live {
                    alltoall.call().run()?;
                }
            }
            for round in 0..CALIBRATION_CALLS {
                let mut this = vec![0u64; live.len()];
                if member {
                    for ((_, alltoall), time) in live.iter_mut().zip(&mut this) {
                        let start = std::time::Instant::now();
                        alltoall.call().run()?;
                        *time = (start.elapsed().as_nanos() as u64).min(i64::MAX as u64);
                    }
                }
                rt.max_u64(&mut this)?;
                for ((path, _), time) in live.iter().zip(this) {
                    calls[slot(*path)].push(time);
                }
                if round >= 1 {
                    // Every PE holds the same times, so every PE drops the same candidates
                    // (whose buffers it frees collectively) in the same order.
                    let best = calls.iter().filter_map(|t| median(t)).min().unwrap_or(u64::MAX);
                    live.retain(|(path, _)| {
                        calls[slot(*path)]
                            .iter()
                            .min()
                            .is_some_and(|&fastest| fastest <= best.saturating_mul(2))
                    });
                }
            }
        }
        let medians: Vec<u64> = calls.iter().map(|t| median(t).unwrap_or(u64::MAX)).collect();
        let best = candidates
            .iter()
            .copied()
            .min_by_key(|&p| medians[slot(p)])
            .unwrap_or(AlltoallAlgorithm::Ordered);
        if let Some(file) = cache.filter(|_| rt.my_pe() == 0) {
            let notes: Vec<String> = candidates
                .iter()
                .map(|&p| {
                    let times = &calls[slot(p)];
                    format!(
                        "{p}: {:.2} us, the median of {} calls (each its slowest member's)",
                        medians[slot(p)] as f64 / 1e3,
                        times.len()
                    )
                })
                .collect();
            crate::cache::write_choice(&file, key, best.name(), &notes);
        }
        Ok(best)
    }
}
