//! Moving per-atom data between home order and PME-rank order in one pass each way.
//!
//! Packing writes each home atom to the next free place of its PME rank's message; unpacking
//! reads each home atom's force from the next place of its rank's message. Both keep home
//! order within each rank, so the packed layout is the stable sort of the home atoms by rank,
//! the same on every path.
//!
//! How a pass moves the atoms depends on their order. Atoms sorted in space (as an engine
//! sorts them into cells, or whole replicas of a box) come in runs of one rank, which
//! placement found once for the step: each run is one copy. Otherwise (the rank changes at
//! more than one atom in eight) a branch on the rank would be mispredicted as often as once
//! in two atoms: with two ranks in use (the usual case: a PE's domain
//! overlaps one to three slabs) the pass chooses by arithmetic instead; with up to
//! [`CURSORS`] it keeps a cursor per rank in a register (a cursor in memory makes each atom
//! wait for the previous one's store and reload), and beyond, in memory. All atoms bound for
//! one rank are one copy. On the thread pool, each chunk of atoms (whose counts per rank
//! placement made) has its own stretch of every message.

use rayon::prelude::*;

/// Ranks one pass serves from registers.
const CURSORS: usize = 4;

/// How the home atoms were cut when they were placed: `chunk`-sized chunks (the last may be
/// shorter), with the number of atoms of each of `ranks` PME ranks in each chunk
/// (`counts[c * ranks + r]`), on the thread pool or not; and where each run of atoms of one
/// rank starts, found by placement, for packing and unpacking both.
pub(super) struct Chunks<'a> {
    pub(super) chunk: usize,
    pub(super) ranks: usize,
    pub(super) counts: &'a [usize],
    pub(super) parallel: bool,
    pub(super) runs: &'a [u32],
}

impl Chunks<'_> {
    /// The first atom of each chunk, and the end.
    fn starts(&self, atoms: usize) -> Vec<usize> {
        let chunks = self.counts.len() / self.ranks.max(1);
        (0..chunks).map(|c| (c * self.chunk).min(atoms)).chain([atoms]).collect()
    }

    /// The runs of the atoms `range`, whose ranks are `ranks` (all atoms').
    fn part<'a>(&'a self, ranks: &'a [u32], range: std::ops::Range<usize>) -> Runs<'a> {
        let first = self.runs.partition_point(|&s| s as usize <= range.start).saturating_sub(1);
        let end = self.runs.partition_point(|&s| (s as usize) < range.end).max(first);
        let starts = if range.is_empty() { &[][..] } else { &self.runs[first..end] };
        Runs { starts, first: range.start, ranks: &ranks[range] }
    }
}

/// `data` cut into consecutive slices of `counts` elements (which sum to its length), shared
/// or not.
pub(super) fn split<S: Split>(data: S, counts: &[usize]) -> Vec<S> {
    let mut rest = data;
    let slices = counts
        .iter()
        .map(|&count| {
            let (head, tail) = std::mem::take(&mut rest).split(count);
            rest = tail;
            head
        })
        .collect();
    assert!(rest.is_empty(), "the counts cover the whole slice");
    slices
}

/// Cuts each rank's slice into consecutive pieces, one per chunk (`counts[c * m + r]` long),
/// returned chunk-major (`pieces[c * m + r]`).
fn cut<S: Split>(by_rank: Vec<S>, counts: &[usize], m: usize) -> Vec<S> {
    let mut rest = by_rank;
    let mut pieces = Vec::with_capacity(counts.len());
    for chunk in counts.chunks_exact(m.max(1)) {
        for (slice, &count) in rest.iter_mut().zip(chunk) {
            let (piece, tail) = std::mem::take(slice).split(count);
            pieces.push(piece);
            *slice = tail;
        }
    }
    assert!(rest.iter().all(|slice| slice.is_empty()), "every rank's slice is exactly as long as its count");
    pieces
}

/// A slice that can be cut in two, shared or not.
pub(super) trait Split: Default + Sized {
    fn split(self, at: usize) -> (Self, Self);
    fn is_empty(&self) -> bool;
}

impl<T> Split for &[T] {
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at(at)
    }
    fn is_empty(&self) -> bool {
        <[T]>::is_empty(self)
    }
}

impl<T> Split for &mut [T] {
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at_mut(at)
    }
    fn is_empty(&self) -> bool {
        <[T]>::is_empty(self)
    }
}

/// Writes `items[i]` to the next free place of `out[ranks[i]]`, in home order: `out[r]` must
/// be exactly as long as the number of atoms of rank `r`, as `chunks` counts them.
pub(super) fn pack<T: Copy + Send + Sync>(ranks: &[u32], items: &[T], out: Vec<&mut [T]>, chunks: &Chunks) {
    assert_eq!(ranks.len(), items.len(), "one rank per item");
    let m = chunks.ranks.max(1);
    let starts = chunks.starts(items.len());
    let mut pieces = cut(out, chunks.counts, m);
    let part = |(out, range): (&mut [&mut [T]], &[usize])| {
        pack_part(chunks.part(ranks, range[0]..range[1]), &items[range[0]..range[1]], out);
    };
    if chunks.parallel {
        pieces.par_chunks_mut(m).zip(starts.par_windows(2)).for_each(part);
    } else {
        pieces.chunks_mut(m).zip(starts.windows(2)).for_each(part);
    }
}

/// Reads `out[i]` from the next place of `from[ranks[i]]`, in home order: the inverse of
/// [`pack`] with the same `chunks`.
pub(super) fn unpack<T: Copy + Send + Sync>(ranks: &[u32], from: Vec<&[T]>, out: &mut [T], chunks: &Chunks) {
    assert_eq!(ranks.len(), out.len(), "one rank per item");
    let m = chunks.ranks.max(1);
    let starts = chunks.starts(out.len());
    let pieces = cut(from, chunks.counts, m);
    let lengths: Vec<usize> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let outs = split(out, &lengths);
    if chunks.parallel {
        pieces.par_chunks(m).zip(outs.into_par_iter().zip(starts.par_windows(2))).for_each(
            |(from, (out, range))| {
                unpack_part(chunks.part(ranks, range[0]..range[1]), from, out);
            },
        );
    } else {
        for (from, (out, range)) in pieces.chunks(m).zip(outs.into_iter().zip(starts.windows(2))) {
            unpack_part(chunks.part(ranks, range[0]..range[1]), from, out);
        }
    }
}

/// The ranks of `slices` with atoms in this part, and for each rank its slot among them.
fn slots(lengths: impl Iterator<Item = usize>) -> (Vec<usize>, Vec<u8>) {
    let lengths: Vec<usize> = lengths.collect();
    let used: Vec<usize> = (0..lengths.len()).filter(|&r| lengths[r] > 0).collect();
    let mut slot = vec![0u8; lengths.len()];
    for (s, &r) in used.iter().enumerate() {
        slot[r] = s.min(u8::MAX as usize) as u8;
    }
    (used, slot)
}

/// The atoms before the last run of one rank, and that run's rank: up to there both of two
/// messages have room left before every atom (each has an atom further on).
fn before_last_run(ranks: &[u32]) -> (usize, u32) {
    let last = ranks.last().copied().unwrap_or_default();
    (ranks.len() - ranks.iter().rev().take_while(|&&r| r == last).count(), last)
}

/// [`pack_part`] with two ranks in use (`second` the other's number), without a branch per
/// atom: which rank an atom goes to follows its position, and in an order unrelated to space
/// a branch on it is mispredicted once in two atoms, some 15 cycles each, more than the rest
/// of the loop (2.4x slower on 48 600 atoms in random order; no slower in runs). Each atom is
/// written to the next free place of both messages and only its own rank's cursor moves on,
/// so the other write is overwritten later by the atom that belongs there. That holds while
/// both messages have an atom still to come, which is until the last run of one rank: that
/// run is one copy.
fn pack_two<T: Copy>(ranks: &[u32], items: &[T], second: u32, one: &mut [T], two: &mut [T]) {
    let (end, last) = before_last_run(ranks);
    let (mut at_one, mut at_two) = (0, 0);
    for (&r, &item) in ranks[..end].iter().zip(&items[..end]) {
        one[at_one] = item;
        two[at_two] = item;
        let is_second = usize::from(r == second);
        at_one += 1 - is_second;
        at_two += is_second;
    }
    let rest = &items[end..];
    if last == second { two[at_two..].copy_from_slice(rest) } else { one[at_one..].copy_from_slice(rest) }
}

/// The runs of one rank in a part of the atoms: each rank and the range of atoms of the run,
/// from the run starts that placement found for all atoms.
struct Runs<'a> {
    /// Starts of the runs that meet the part, in all atoms' numbering; the first may lie
    /// before the part.
    starts: &'a [u32],
    /// The part's first atom in that numbering.
    first: usize,
    /// The part's ranks.
    ranks: &'a [u32],
}

impl Runs<'_> {
    /// Whether the rank changes between more than one in eight neighbouring atoms. Atoms
    /// sorted in space come in runs of one rank, each moved as one copy; otherwise a pass per
    /// atom is faster.
    fn often_changes(&self) -> bool {
        self.starts.len().saturating_sub(1) * 8 > self.ranks.len()
    }
}

impl Iterator for Runs<'_> {
    type Item = (usize, std::ops::Range<usize>);

    fn next(&mut self) -> Option<Self::Item> {
        let (&start, rest) = self.starts.split_first()?;
        self.starts = rest;
        let start = (start as usize).saturating_sub(self.first);
        let end = rest.first().map_or(self.ranks.len(), |&s| s as usize - self.first);
        Some((self.ranks[start] as usize, start..end))
    }
}

/// [`unpack_part`] with two ranks in use (`second` the other's number), choosing the source
/// of each atom by a conditional move instead of a branch (see [`pack_two`]).
fn unpack_two<T: Copy>(ranks: &[u32], one: &[T], two: &[T], second: u32, out: &mut [T]) {
    let (end, last) = before_last_run(ranks);
    let (head, rest) = out.split_at_mut(end);
    let (mut at_one, mut at_two) = (0, 0);
    for (&r, o) in ranks[..end].iter().zip(head) {
        let is_second = r == second;
        *o = *std::hint::select_unpredictable(is_second, &two[at_two], &one[at_one]);
        at_one += usize::from(!is_second);
        at_two += usize::from(is_second);
    }
    rest.copy_from_slice(if last == second { &two[at_two..] } else { &one[at_one..] });
}

/// One pass of [`pack`] over a part: `items[i]` to the next free place of `out[ranks[i]]`.
fn pack_part<T: Copy>(runs: Runs, items: &[T], out: &mut [&mut [T]]) {
    let ranks = runs.ranks;
    let (used, slot) = slots(out.iter().map(|o| o.len()));
    match used[..] {
        [] => {}
        // Every atom goes to one rank: one copy.
        [only] => out[only].copy_from_slice(items),
        _ if !runs.often_changes() => {
            let mut at = vec![0usize; out.len()];
            for (r, range) in runs {
                out[r][at[r]..at[r] + range.len()].copy_from_slice(&items[range.clone()]);
                at[r] += range.len();
            }
        }
        [first, second] => {
            let (one, two) = (std::mem::take(&mut out[first]), std::mem::take(&mut out[second]));
            pack_two(ranks, items, second as u32, one, two);
        }
        _ if used.len() <= CURSORS => {
            let mut take =
                |s: usize| used.get(s).map_or_else(Default::default, |&r| std::mem::take(&mut out[r]));
            let (s0, s1, s2, s3) = (take(0), take(1), take(2), take(3));
            let (mut p0, mut p1, mut p2, mut p3) = (0, 0, 0, 0);
            for (&r, &item) in ranks.iter().zip(items) {
                match slot[r as usize] {
                    0 => (s0[p0], p0) = (item, p0 + 1),
                    1 => (s1[p1], p1) = (item, p1 + 1),
                    2 => (s2[p2], p2) = (item, p2 + 1),
                    _ => (s3[p3], p3) = (item, p3 + 1),
                }
            }
        }
        _ => {
            let mut at = vec![0usize; out.len()];
            for (&r, &item) in ranks.iter().zip(items) {
                let r = r as usize;
                out[r][at[r]] = item;
                at[r] += 1;
            }
        }
    }
}

/// One pass of [`unpack`] over a part: `out[i]` from the next place of `from[ranks[i]]`.
fn unpack_part<T: Copy>(runs: Runs, from: &[&[T]], out: &mut [T]) {
    let ranks = runs.ranks;
    let (used, slot) = slots(from.iter().map(|f| f.len()));
    match used[..] {
        [] => {}
        [only] => out.copy_from_slice(from[only]),
        _ if !runs.often_changes() => {
            let mut at = vec![0usize; from.len()];
            for (r, range) in runs {
                out[range.clone()].copy_from_slice(&from[r][at[r]..at[r] + range.len()]);
                at[r] += range.len();
            }
        }
        [first, second] => unpack_two(ranks, from[first], from[second], second as u32, out),
        _ if used.len() <= CURSORS => {
            let take = |s: usize| used.get(s).map_or(&[][..], |&r| from[r]);
            let (s0, s1, s2, s3) = (take(0), take(1), take(2), take(3));
            let (mut p0, mut p1, mut p2, mut p3) = (0, 0, 0, 0);
            for (&r, o) in ranks.iter().zip(out) {
                match slot[r as usize] {
                    0 => (*o, p0) = (s0[p0], p0 + 1),
                    1 => (*o, p1) = (s1[p1], p1 + 1),
                    2 => (*o, p2) = (s2[p2], p2 + 1),
                    _ => (*o, p3) = (s3[p3], p3 + 1),
                }
            }
        }
        _ => {
            let mut at = vec![0usize; from.len()];
            for (&r, o) in ranks.iter().zip(out) {
                let r = r as usize;
                *o = from[r][at[r]];
                at[r] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packing is the stable sort by rank and unpacking its inverse, for every way of
    /// cutting: one rank, a few (register cursors), more than [`CURSORS`] in one part
    /// (cursors in memory), ranks with no atoms, one part or many chunks, on the calling
    /// thread or the pool; atoms in runs of one rank and in random order (the two-rank passes
    /// without branches, whose last run is a copy).
    #[test]
    fn pack_sorts_by_rank_and_unpack_inverts_it() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (m, used) in
            [(1, vec![0]), (2, vec![1]), (3, vec![0, 2]), (4, vec![0, 1, 2, 3]), (6, vec![0, 1, 2, 3, 5])]
        {
            // Runs of one rank, as atoms sorted in space give, and a rank per atom at random (the
            // two-rank passes without branches).
            for (n, longest) in [(0, 1), (1, 1), (7, 3), (100, 40), (5000, 40), (5000, 1)] {
                let mut ranks = Vec::with_capacity(n);
                while ranks.len() < n {
                    let r = used[next() as usize % used.len()] as u32;
                    let run = 1 + next() as usize % longest;
                    ranks.extend(std::iter::repeat_n(r, run.min(n - ranks.len())));
                }
                let items: Vec<[u32; 2]> = (0..n).map(|i| [i as u32, ranks[i]]).collect();
                let mut sorted = items.clone();
                sorted.sort_by_key(|item| item[1]);
                for (chunk, parallel) in [(n.max(1), false), (64, false), (64, true), (999, true)] {
                    let chunks_of = (n.div_ceil(chunk)).max(1);
                    let mut counts = vec![0usize; chunks_of * m];
                    for (i, &r) in ranks.iter().enumerate() {
                        counts[i / chunk * m + r as usize] += 1;
                    }
                    let runs: Vec<u32> =
                        (0..n).filter(|&i| i == 0 || ranks[i] != ranks[i - 1]).map(|i| i as u32).collect();
                    let chunks = Chunks { chunk, ranks: m, counts: &counts, parallel, runs: &runs };
                    let per_rank: Vec<usize> =
                        (0..m).map(|r| ranks.iter().filter(|&&x| x == r as u32).count()).collect();
                    let mut packed = vec![[u32::MAX; 2]; n];
                    pack(&ranks, &items, split(&mut packed[..], &per_rank), &chunks);
                    assert_eq!(packed, sorted, "m {m}, n {n}, chunk {chunk}, parallel {parallel}");
                    let mut back = vec![[u32::MAX; 2]; n];
                    unpack(&ranks, split(&packed[..], &per_rank), &mut back, &chunks);
                    assert_eq!(back, items, "m {m}, n {n}, chunk {chunk}, parallel {parallel}");
                }
            }
        }
    }
}
