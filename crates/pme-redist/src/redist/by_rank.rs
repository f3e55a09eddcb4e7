//! Moving per-atom data between home order and PME-rank order in one pass each way.
//!
//! Packing writes each home atom to the next free place of its PME rank's message; unpacking
//! reads each home atom's force from the next place of its rank's message. Both keep home
//! order within each rank, so the packed layout is the stable sort of the home atoms by rank,
//! the same on every path.
//!
//! A PE's atoms go to few PME ranks (those whose slabs its domain overlaps, usually one to
//! three), so each pass keeps one cursor per rank it uses in a register, up to [`CURSORS`]:
//! a cursor in memory would make each atom wait for the previous one's update (a store and a
//! reload, several cycles). All atoms bound for one rank are one copy. With more ranks in
//! use, the pass falls back to cursors in memory. On the thread pool, each chunk of atoms
//! (whose counts per rank placement made) has its own stretch of every message.

use rayon::prelude::*;

/// Ranks one pass serves from registers.
const CURSORS: usize = 4;

/// How the home atoms were cut when they were placed: `chunk`-sized chunks (the last may be
/// shorter), with the number of atoms of each of `ranks` PME ranks in each chunk
/// (`counts[c * ranks + r]`), on the thread pool or not.
pub(super) struct Chunks<'a> {
    pub(super) chunk: usize,
    pub(super) ranks: usize,
    pub(super) counts: &'a [usize],
    pub(super) parallel: bool,
}

impl Chunks<'_> {
    /// The first atom of each chunk, and the end.
    fn starts(&self, atoms: usize) -> Vec<usize> {
        let chunks = self.counts.len() / self.ranks.max(1);
        (0..chunks).map(|c| (c * self.chunk).min(atoms)).chain([atoms]).collect()
    }
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
    pieces
}

/// A slice that can be cut in two, shared or not.
trait Split: Default + Sized {
    fn split(self, at: usize) -> (Self, Self);
}

impl<T> Split for &[T] {
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at(at)
    }
}

impl<T> Split for &mut [T] {
    fn split(self, at: usize) -> (Self, Self) {
        self.split_at_mut(at)
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
        pack_part(&ranks[range[0]..range[1]], &items[range[0]..range[1]], out);
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
    let mut outs = Vec::with_capacity(starts.len());
    let mut rest = out;
    for w in starts.windows(2) {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        outs.push(head);
        rest = tail;
    }
    if chunks.parallel {
        pieces.par_chunks(m).zip(outs.into_par_iter().zip(starts.par_windows(2))).for_each(
            |(from, (out, range))| {
                unpack_part(&ranks[range[0]..range[1]], from, out);
            },
        );
    } else {
        for (from, (out, range)) in pieces.chunks(m).zip(outs.into_iter().zip(starts.windows(2))) {
            unpack_part(&ranks[range[0]..range[1]], from, out);
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

/// One pass of [`pack`] over a part: `items[i]` to the next free place of `out[ranks[i]]`.
fn pack_part<T: Copy>(ranks: &[u32], items: &[T], out: &mut [&mut [T]]) {
    let (used, slot) = slots(out.iter().map(|o| o.len()));
    match used[..] {
        [] => {}
        // Every atom goes to one rank: one copy.
        [only] => out[only].copy_from_slice(items),
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
fn unpack_part<T: Copy>(ranks: &[u32], from: &[&[T]], out: &mut [T]) {
    let (used, slot) = slots(from.iter().map(|f| f.len()));
    match used[..] {
        [] => {}
        [only] => out.copy_from_slice(from[only]),
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
