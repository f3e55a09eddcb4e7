//! Partners from the plan: which PME ranks each home atom may reach before the next plan, the
//! PME ranks a particle PE therefore sends to (its targets) with a bound on the atoms each may
//! receive from it, and the agreement by which each PME rank learns who will send to it (its
//! sources) and how much at most.
//!
//! An atom's reach is a run of consecutive PME ranks around the ring of slabs: by default its
//! planned rank and one either side; with a displacement margin, the slabs its x fraction can
//! reach when it moves by at most the margin in any direction. A step in which an atom lies
//! outside its reach reports it on every PE (as [`Error::MovedTooFar`](crate::Error)); so
//! while no error is reported, a PME rank receives from each source at most that source's
//! bound, and the receive buffers sized by the bounds always suffice.
//!
//! The agreement costs, per PE, O(targets) messages and two barriers and a few reductions per
//! plan, nothing of the size of the job: each particle PE takes a slot at each target with a
//! remote fetch-add, and after a barrier writes `[pe, bound, its index for the target]` into
//! that slot; each PME rank sorts what it finds by PE (never by slot, which depends on
//! timing), so that every path lays its atoms out alike.

use onesided::{AtomicArray, GlobalMaxArray, Runtime};

use super::{GROWTH, Particle};
use crate::error::Result;
use crate::grid::PmeGrid;

/// How far an atom may move between two plans before a step reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Margin {
    /// Into the slab on either side of its planned one, whatever the distance.
    Slab,
    /// Up to this many nm in any direction.
    Distance(f32),
}

/// Each home atom's reach, and this PE's targets and bounds.
#[derive(Debug, Default, Clone)]
pub(super) struct Reach {
    /// First PME rank of each home atom's reach.
    pub lo: Vec<u32>,
    /// Number of PME ranks, from `lo` around the ring, in each home atom's reach.
    pub span: Vec<u32>,
    /// The PME ranks this PE sends to, ascending.
    pub targets: Vec<usize>,
    /// Per target, the home atoms whose reach includes it: the most it can receive from this
    /// PE while no error is reported.
    pub bounds: Vec<usize>,
}

impl Reach {
    /// The reach of each of the `home` atoms planned on PME ranks `planned`, and this PE's
    /// targets. A particle PE without atoms names one PME rank all the same (`me` around the
    /// ring), to hear of the errors of each step from it.
    pub fn new(grid: &PmeGrid, margin: Margin, home: &[Particle], planned: &[u32], me: usize) -> Reach {
        let m = grid.ranks();
        let ring = m as u32;
        let (mut lo, mut span) = (Vec::with_capacity(home.len()), Vec::with_capacity(home.len()));
        match margin {
            Margin::Slab if m <= 3 => {
                lo.resize(home.len(), 0);
                span.resize(home.len(), ring);
            }
            Margin::Slab => {
                lo.extend(planned.iter().map(|&p| if p == 0 { ring - 1 } else { p - 1 }));
                span.resize(home.len(), 3);
            }
            Margin::Distance(nm) => {
                // A little more than the margin, so that rounding never reports an atom that
                // moved by exactly the margin.
                let df = grid.x_fraction_reach(f64::from(nm)) * (1.0 + 1e-6) + 1e-12;
                for (p, &planned) in home.iter().zip(planned) {
                    let (l, s) = reach_of(grid, grid.x_fraction(p.x), df, planned);
                    lo.push(l);
                    span.push(s);
                }
            }
        }
        // Atoms per rank from a difference array around the ring: O(home + m).
        let mut diff = vec![0i64; m + 1];
        for (&l, &s) in lo.iter().zip(&span) {
            let (l, end) = (l as usize, l as usize + s as usize);
            diff[l] += 1;
            if end <= m {
                diff[end] -= 1;
            } else {
                diff[m] -= 1;
                diff[0] += 1;
                diff[end - m] -= 1;
            }
        }
        let (mut targets, mut bounds) = (Vec::new(), Vec::new());
        let mut running = 0i64;
        for (r, d) in diff[..m].iter().enumerate() {
            running += d;
            if running > 0 {
                targets.push(r);
                bounds.push(running as usize);
            }
        }
        if targets.is_empty() {
            targets.push(me % m);
            bounds.push(0);
        }
        Reach { lo, span, targets, bounds }
    }

    /// The first home atom whose PME rank in this step (`dest`, on a ring of `m` ranks) lies
    /// outside its reach, if any.
    pub fn first_outside(&self, dest: &[u32], m: usize) -> Option<usize> {
        let ring = m as u32;
        let outside = |((&now, &lo), &span): ((&u32, &u32), &u32)| {
            let ahead = now + ring - lo;
            let ahead = if ahead >= ring { ahead - ring } else { ahead };
            u32::from(ahead >= span)
        };
        let triples = || dest.iter().zip(&self.lo).zip(&self.span);
        // A branch-free, vectorised sweep first: an atom too far is the rare case.
        let any = triples().map(outside).fold(0, u32::max) > 0;
        if any { triples().position(|t| outside(t) > 0) } else { None }
    }

    /// The index of PME rank `r` among the targets.
    pub fn target_index(&self, r: usize) -> Option<usize> {
        self.targets.binary_search(&r).ok()
    }
}

/// The reach of an atom at x fraction `s` (unwrapped) planned on PME rank `planned`, for a
/// change of the x fraction of at most `df`: `(first rank, ranks)` around the ring.
fn reach_of(grid: &PmeGrid, s: f64, df: f64, planned: u32) -> (u32, u32) {
    let m = grid.ranks() as u32;
    if 2.0 * df >= 1.0 || !s.is_finite() {
        return (0, m);
    }
    let lo = grid.rank_of_plane(grid.plane_at(s - df)) as u32;
    let hi = grid.rank_of_plane(grid.plane_at(s + df)) as u32;
    // Measured from the planned rank, so that it always lies inside; rounding that would
    // put it outside makes the reach the whole ring, never too small.
    let below = (planned + m - lo) % m;
    let above = (hi + m - planned) % m;
    let span = below + above + 1;
    if span >= m { (0, m) } else { ((planned + m - below) % m, span) }
}

/// A source of a PME rank, as agreed at the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Source {
    /// Its PE.
    pub pe: usize,
    /// The most atoms it can send in a step.
    pub bound: usize,
    /// Its slot at this PME rank (where it announces, and its signals).
    pub slot: usize,
    /// This PME rank's index among its targets (where this rank replies to it).
    pub index: usize,
}

/// What a PE learns from the agreement at a plan.
#[derive(Clone, Debug, Default)]
pub(super) struct Agreed {
    /// This PE's slot at each of its targets.
    pub slots: Vec<usize>,
    /// On a PME rank, its sources by PE.
    pub sources: Vec<Source>,
    /// The most sources of any PME rank and the most targets of any PE, for the slots and
    /// lines the transports keep.
    pub most_sources: usize,
    pub most_targets: usize,
}

/// The symmetric state of the agreement: two slot counters (one per parity of the plan, so
/// that a counter is reset a whole plan before it is used again) and the table of sources.
pub(super) struct Agreement<'rt> {
    counters: AtomicArray<'rt, u64>,
    table: GlobalMaxArray<'rt, [u64; 4]>,
    parity: usize,
}

impl<'rt> Agreement<'rt> {
    /// # Collective
    /// Every PE allocates the same arrays.
    pub fn collective_new(rt: &'rt Runtime, name: &dyn Fn(&str) -> String) -> Result<Self> {
        Ok(Agreement {
            counters: AtomicArray::collective_alloc(rt, &name("source counters"), 2)?,
            table: GlobalMaxArray::collective_alloc(rt, &name("sources"), 1, GROWTH)?,
            parity: 0,
        })
    }

    /// Symmetric bytes held.
    pub fn symmetric_bytes(&self) -> usize {
        2 * size_of::<u64>() + self.table.capacity() * size_of::<[u64; 4]>()
    }

    /// Tells each of this PE's `targets` (PME ranks of `grid`) that it will send at most
    /// `bounds` atoms, and learns, on a PME rank (`my_rank`), who will send to it.
    ///
    /// # Collective
    /// Every PE must call it; two barriers and three reductions.
    pub fn collective_agree(
        &mut self,
        rt: &Runtime,
        grid: &PmeGrid,
        my_rank: Option<usize>,
        targets: &[usize],
        bounds: &[usize],
    ) -> Result<Agreed> {
        let (me, p) = (rt.my_pe(), self.parity);
        let mut slots = Vec::with_capacity(targets.len());
        for &t in targets {
            slots.push(self.counters.fetch_add(grid.pe_of(t), p, 1)? as usize);
        }
        // Every slot is taken (the fetch-adds returned) before any PME rank counts them.
        rt.barrier();
        let fan_in = if my_rank.is_some() { self.counters.load(p)? as usize } else { 0 };
        // The other counter was last used a plan ago and is next used a plan from now, after
        // the barriers below.
        self.counters.set(me, 1 - p, 0)?;
        let mut most = [fan_in as u64, targets.len() as u64];
        rt.max_u64(&mut most)?;
        self.table.collective_ensure(fan_in)?;
        for (i, (&t, &slot)) in targets.iter().zip(&slots).enumerate() {
            let line = [me as u64, bounds[i] as u64, i as u64, 0];
            self.table.array().put(grid.pe_of(t), slot, &[line])?;
        }
        // Every line is in place before any PME rank reads its table.
        rt.barrier();
        let mut lines = vec![[0u64; 4]; fan_in];
        self.table.array().read_local(0, &mut lines)?;
        let mut sources: Vec<Source> = lines
            .iter()
            .enumerate()
            .map(|(slot, l)| Source { pe: l[0] as usize, bound: l[1] as usize, slot, index: l[2] as usize })
            .collect();
        sources.sort_unstable_by_key(|s| s.pe);
        self.parity = 1 - p;
        Ok(Agreed { slots, sources, most_sources: most[0] as usize, most_targets: most[1] as usize })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(m: usize) -> PmeGrid {
        let pes: Vec<usize> = (0..m).collect();
        PmeGrid::with_sizes([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]], [64, 16, 16], &pes).unwrap()
    }

    fn atom(x: f32) -> Particle {
        Particle { x: [x, 1.0, 1.0], q: 1.0, global: 0 }
    }

    /// Brute force: every rank a displacement of at most `nm` along x can reach.
    fn reached(g: &PmeGrid, x: f32, nm: f32) -> Vec<usize> {
        let mut ranks: Vec<usize> =
            (-200..=200).map(|i| g.rank_of([x + nm * i as f32 / 200.0, 1.0, 1.0])).collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
    }

    #[test]
    fn a_margin_reaches_what_a_displacement_can() {
        let g = grid(8);
        for &x in &[0.01f32, 0.49, 0.51, 1.0, 1.74, 2.0, 3.99] {
            for &nm in &[0.05f32, 0.3, 0.6] {
                let home = [atom(x)];
                let planned = [g.rank_of(home[0].x) as u32];
                let reach = Reach::new(&g, Margin::Distance(nm), &home, &planned, 0);
                let mut covered: Vec<usize> =
                    (0..reach.span[0]).map(|j| (reach.lo[0] as usize + j as usize) % 8).collect();
                covered.sort_unstable();
                let want = reached(&g, x, nm);
                assert!(
                    want.iter().all(|r| covered.contains(r)),
                    "x {x} nm {nm}: {covered:?} misses {want:?}"
                );
                assert!(covered.len() <= want.len() + 1, "x {x} nm {nm}: {covered:?} for {want:?}");
                assert_eq!(reach.targets, covered, "x {x} nm {nm}");
                assert!(reach.bounds.iter().all(|&b| b == 1));
            }
        }
    }

    #[test]
    fn targets_and_bounds_count_the_atoms_that_reach() {
        let g = grid(8);
        // Slabs of half a nm: atoms in slabs 0 and 7 reach around the ring.
        let home: Vec<Particle> = [0.1f32, 0.2, 3.9, 1.6].map(atom).to_vec();
        let planned: Vec<u32> = home.iter().map(|p| g.rank_of(p.x) as u32).collect();
        let reach = Reach::new(&g, Margin::Slab, &home, &planned, 0);
        assert_eq!(reach.targets, vec![0, 1, 2, 3, 4, 6, 7]);
        assert_eq!(reach.bounds, vec![3, 2, 1, 1, 1, 1, 3]);
        let mut dest = planned.clone();
        assert_eq!(reach.first_outside(&dest, 8), None);
        dest[3] = 4;
        assert_eq!(reach.first_outside(&dest, 8), None);
        dest[1] = 6;
        assert_eq!(reach.first_outside(&dest, 8), Some(1));
        // No atoms: one target all the same.
        let empty = Reach::new(&g, Margin::Slab, &[], &[], 11);
        assert_eq!((empty.targets, empty.bounds), (vec![3], vec![0]));
        // Three ranks or fewer: every rank.
        let small = grid(3);
        let reach = Reach::new(&small, Margin::Slab, &home, &[0, 0, 2, 1], 0);
        assert_eq!(reach.targets, vec![0, 1, 2]);
        assert_eq!(reach.first_outside(&[2, 1, 0, 2], 3), None);
    }
}
