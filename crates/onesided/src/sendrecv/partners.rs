//! The partners of an exchange: per partner [`LANES`] slots in this PE's arrays and as many
//! in the partner's, found once when the exchange is built.

use super::message::LANES;
use crate::collective::Collectives;
use crate::error::{Error, ExchangeProblem, Result};
use crate::heap::SymArray;
use crate::runtime::Runtime;

/// Where one message of a call meets its partner: the key of the pair and lane in this PE's
/// arrays, and in the partner's.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lane {
    /// The partner PE.
    pub peer: usize,
    /// `peer * LANES + lane`: this PE's slot and signal for the partner's side of it.
    pub local: usize,
    /// `me * LANES + lane`: the partner's slot and signal for this PE's side of it.
    pub remote: usize,
}

/// The PEs an exchange talks to, and where each pair's slots sit: per partner, [`LANES`]
/// slots in this PE's arrays and as many in the partner's. An exchange built for every PE
/// keeps a partner's slots at the partner's number; one built for a few partners keeps them
/// at the partner's place in its sorted list, so that its arrays grow with the partners, not
/// with the PE count.
#[derive(Debug)]
pub(super) struct Partners {
    pub(super) me: usize,
    /// The sorted partners with, for each, this PE's place in the partner's list; `None`:
    /// every PE, each at its own number.
    pub(super) listed: Option<Vec<(usize, usize)>>,
    /// Partners per PE the arrays hold (the largest list over all PEs).
    pub(super) capacity: usize,
}

impl Partners {
    /// This PE's place for `peer`, and the partner's place for this PE, or `None` when `peer`
    /// is not a partner.
    #[inline]
    pub(super) fn places(&self, peer: usize) -> Option<(usize, usize)> {
        match &self.listed {
            None => Some((peer, self.me)),
            Some(list) => list.binary_search_by_key(&peer, |p| p.0).ok().map(|i| (i, list[i].1)),
        }
    }

    /// The lane `lane` of the pair with `peer` (a partner).
    #[inline]
    pub(super) fn lane(&self, peer: usize, lane: usize) -> Lane {
        let (local, remote) = self.places(peer).expect("validated partner");
        Lane { peer, local: local * LANES + lane, remote: remote * LANES + lane }
    }

    /// Fills `lanes` for a list of partners: the `l`-th message to (or from) a PE takes lane
    /// `l`.
    #[inline]
    pub(super) fn assign(&self, lanes: &mut Vec<Lane>, peers: impl Iterator<Item = usize>) {
        lanes.clear();
        for peer in peers {
            let lane = if lanes.is_empty() { 0 } else { lanes.iter().filter(|l| l.peer == peer).count() };
            lanes.push(self.lane(peer, lane));
        }
    }
}

impl Partners {
    /// The partners of an exchange between this PE and `partners` only, agreed: each PE
    /// publishes its sorted list and finds its place in each partner's.
    ///
    /// # Collective
    /// Every PE calls it.
    ///
    /// # Errors
    /// On every PE: [`Error::Exchange`] for a partner that is not a PE
    /// ([`NoSuchPartner`](ExchangeProblem::NoSuchPartner)), or when some PE names a partner
    /// that does not name it back ([`NotMutual`](ExchangeProblem::NotMutual)).
    pub(super) fn collective_listed(rt: &Runtime, name: &str, partners: &[usize]) -> Result<Partners> {
        let me = rt.my_pe();
        let mut peers = partners.to_vec();
        peers.sort_unstable();
        peers.dedup();
        let stray = peers.iter().find(|&&p| p >= rt.n_pes()).map_or(0, |&p| p as u64 + 1);
        let mut agreed = [peers.len() as u64, stray.min(i64::MAX as u64)];
        rt.max_u64(&mut agreed)?;
        if agreed[1] > 0 {
            return Err(Error::Exchange {
                channel: name.to_string(),
                problem: ExchangeProblem::NoSuchPartner { pe: agreed[1] as usize - 1, n_pes: rt.n_pes() },
            });
        }
        let capacity = agreed[0] as usize;
        // Each PE publishes its list; each reads its partners' lists to find its place there.
        let table = SymArray::<u64>::collective_alloc(rt, &format!("{name}: partner lists"), capacity + 1)?;
        let mut mine = vec![u64::MAX; capacity + 1];
        mine[0] = peers.len() as u64;
        for (slot, &p) in mine[1..].iter_mut().zip(&peers) {
            *slot = p as u64;
        }
        table.write_local(0, &mine)?;
        rt.barrier();
        let mut listed = Vec::with_capacity(peers.len());
        let mut theirs = vec![0u64; capacity + 1];
        let mut one_sided = 0;
        for &p in &peers {
            table.get(p, 0, &mut theirs)?;
            let count = (theirs[0] as usize).min(capacity);
            match theirs[1..=count].iter().position(|&q| q == me as u64) {
                Some(place) => listed.push((p, place)),
                None => one_sided = one_sided.max((me as u64 + 1) << 24 | p as u64),
            }
        }
        // Everyone has read every list it needs before the table goes.
        let mut one = [one_sided];
        rt.max_u64(&mut one)?;
        let one_sided = one[0];
        drop(table);
        if one_sided > 0 {
            return Err(Error::Exchange {
                channel: name.to_string(),
                problem: ExchangeProblem::NotMutual {
                    pe: (one_sided >> 24) as usize - 1,
                    partner: (one_sided & 0xff_ffff) as usize,
                },
            });
        }
        Ok(Partners { me, listed: Some(listed), capacity })
    }
}
