//! Agreements over PEs: what every PE must see alike before anything moves, so that a problem
//! one PE finds becomes the same error on every PE rather than a hang.
//!
//! An [`Agreement`] collects terms (the largest or least of a value, whether every PE passed
//! the same, the lowest PE on which something holds), encodes them all as words of one
//! maximum-reduction, and reads each back by the handle its term returned: many questions, one
//! collective call ([`Agreement::collective_run`]). A minimum travels as `TOP - value`, "the
//! same" as a value and its complement, so a maximum answers all of them.
//!
//! [`Fnv1a`] is the hash the agreements and the fingerprints share: the same in every process
//! and build, unlike the standard library's.

use std::marker::PhantomData;

/// The largest value a term carries: the maximum-reduction reduces signed 64-bit integers.
pub const TOP: u64 = i64::MAX as u64;

/// Bits for the PE in a [`Agreement::max_with_pe`] word: up to 2^24 PEs, values below 2^39.
const PE_BITS: u32 = 24;

/// Terms to agree on in one maximum-reduction over every PE.
///
/// ```no_run
/// # fn main() -> onesided::Result<()> {
/// use onesided::{Agreement, Runtime};
///
/// let rt = Runtime::init()?;
/// let home = vec![0u32; 10 + rt.my_pe()];
/// let mut agreement = Agreement::new();
/// let count = agreement.extent(home.len() as u64);
/// let empty = agreement.lowest_pe(home.is_empty());
/// let agreed = agreement.collective_run(&rt)?;
/// let (least, most) = agreed.get(count);
/// if let Some(pe) = agreed.get(empty) {
///     eprintln!("PE {pe} holds no atoms");
/// }
/// # let _ = (least, most);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Agreement {
    terms: Vec<Term>,
}

/// A term as this PE contributes it, encoded once the PE number is known.
#[derive(Clone, Copy, Debug)]
enum Term {
    /// One word: the value (a maximum), or `TOP - value` (a minimum).
    Word(u64),
    /// Two words: the value and its complement to [`TOP`].
    Both(u64),
    /// `TOP - pe` where the flag holds, else 0.
    LowestPe(bool),
    /// `(value + 1) << PE_BITS | pe` where given, else 0.
    WithPe(Option<u64>),
}

/// A question asked of an [`Agreement`], answered by [`Agreed::get`].
#[derive(Debug)]
pub struct Asked<K> {
    at: usize,
    kind: PhantomData<K>,
}

impl<K> Clone for Asked<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Asked<K> {}

/// What an [`Agreement`]'s single reduction gave, the same on every PE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreed {
    words: Vec<u64>,
}

/// What a question reads from the reduced words.
pub trait Kind: private::Sealed {
    /// The answer.
    type Answer;
    /// The answer from the reduced words, from the term's first word on.
    #[doc(hidden)]
    fn read(words: &[u64]) -> Self::Answer;
}

mod private {
    pub trait Sealed {}
}

/// The largest value over the PEs.
#[derive(Debug)]
pub enum Max {}
/// The least value over the PEs.
#[derive(Debug)]
pub enum Min {}
/// The least and the largest value over the PEs: `(least, most)`.
#[derive(Debug)]
pub enum Extent {}
/// Whether every PE passed the same value.
#[derive(Debug)]
pub enum Same {}
/// Whether any PE passed `true`.
#[derive(Debug)]
pub enum Any {}
/// The lowest PE that passed `true`, if any did.
#[derive(Debug)]
pub enum LowestPe {}
/// The largest value any PE passed and, of the PEs that passed it, the highest.
#[derive(Debug)]
pub enum MaxWithPe {}
/// The largest of non-negative floating-point values.
#[derive(Debug)]
pub enum MaxF64 {}
/// The least of non-negative floating-point values.
#[derive(Debug)]
pub enum MinF64 {}

impl private::Sealed for Max {}
impl Kind for Max {
    type Answer = u64;
    fn read(words: &[u64]) -> u64 {
        words[0]
    }
}

impl private::Sealed for Min {}
impl Kind for Min {
    type Answer = u64;
    fn read(words: &[u64]) -> u64 {
        TOP - words[0]
    }
}

impl private::Sealed for Extent {}
impl Kind for Extent {
    type Answer = (u64, u64);
    fn read(words: &[u64]) -> (u64, u64) {
        (TOP - words[1], words[0])
    }
}

impl private::Sealed for Same {}
impl Kind for Same {
    type Answer = bool;
    fn read(words: &[u64]) -> bool {
        words[0] == TOP - words[1]
    }
}

impl private::Sealed for Any {}
impl Kind for Any {
    type Answer = bool;
    fn read(words: &[u64]) -> bool {
        words[0] != 0
    }
}

impl private::Sealed for LowestPe {}
impl Kind for LowestPe {
    type Answer = Option<usize>;
    fn read(words: &[u64]) -> Option<usize> {
        (words[0] != 0).then(|| (TOP - words[0]) as usize)
    }
}

impl private::Sealed for MaxWithPe {}
impl Kind for MaxWithPe {
    type Answer = Option<(u64, usize)>;
    fn read(words: &[u64]) -> Option<(u64, usize)> {
        (words[0] != 0).then(|| ((words[0] >> PE_BITS) - 1, (words[0] & ((1 << PE_BITS) - 1)) as usize))
    }
}

impl private::Sealed for MaxF64 {}
impl Kind for MaxF64 {
    type Answer = f64;
    fn read(words: &[u64]) -> f64 {
        f64::from_bits(words[0])
    }
}

impl private::Sealed for MinF64 {}
impl Kind for MinF64 {
    type Answer = f64;
    fn read(words: &[u64]) -> f64 {
        f64::from_bits(TOP - words[0])
    }
}

impl Agreement {
    /// An agreement with no terms yet.
    pub fn new() -> Agreement {
        Agreement::default()
    }

    fn ask<K>(&mut self, term: Term) -> Asked<K> {
        let at = self.terms.iter().map(|t| t.words()).sum();
        self.terms.push(term);
        Asked { at, kind: PhantomData }
    }

    /// The largest `value` over the PEs (values above [`TOP`] count as `TOP`).
    pub fn max(&mut self, value: u64) -> Asked<Max> {
        self.ask(Term::Word(value.min(TOP)))
    }

    /// The least `value` over the PEs (values above [`TOP`] count as `TOP`).
    pub fn min(&mut self, value: u64) -> Asked<Min> {
        self.ask(Term::Word(TOP - value.min(TOP)))
    }

    /// The least and the largest `value` over the PEs (values above [`TOP`] count as `TOP`).
    pub fn extent(&mut self, value: u64) -> Asked<Extent> {
        self.ask(Term::Both(value.min(TOP)))
    }

    /// Whether every PE passed the same `value` (compared below [`TOP`]: pass a hash, or a
    /// count, not a full 64-bit pattern).
    pub fn same(&mut self, value: u64) -> Asked<Same> {
        self.ask(Term::Both(value & TOP))
    }

    /// Whether every PE passed the same bytes: their [`Fnv1a`] hash compared.
    pub fn same_bytes(&mut self, bytes: &[u8]) -> Asked<Same> {
        self.same(Fnv1a::new().bytes(bytes).finish())
    }

    /// Whether `flag` holds on any PE.
    pub fn any(&mut self, flag: bool) -> Asked<Any> {
        self.ask(Term::Word(u64::from(flag)))
    }

    /// The lowest PE on which `flag` holds: the PE an error every PE reports names.
    pub fn lowest_pe(&mut self, flag: bool) -> Asked<LowestPe> {
        self.ask(Term::LowestPe(flag))
    }

    /// The largest `value` any PE passed (`None`: this PE has none), below 2^39, with the
    /// highest PE that passed it: one atom that every PE reports alike, and where it was found.
    pub fn max_with_pe(&mut self, value: Option<u64>) -> Asked<MaxWithPe> {
        self.ask(Term::WithPe(value.map(|v| v.min((1 << (63 - PE_BITS)) - 2))))
    }

    /// The largest of every PE's non-negative `value` (its bits order as it does).
    pub fn max_f64(&mut self, value: f64) -> Asked<MaxF64> {
        self.ask(Term::Word(value.max(0.0).to_bits().min(TOP)))
    }

    /// The least of every PE's non-negative `value`.
    pub fn min_f64(&mut self, value: f64) -> Asked<MinF64> {
        self.ask(Term::Word(TOP - value.max(0.0).to_bits().min(TOP)))
    }

    /// The words this PE (`me`) contributes to the reduction.
    pub(crate) fn words(&self, me: usize) -> Vec<u64> {
        let mut words = Vec::with_capacity(self.terms.iter().map(|t| t.words()).sum());
        for term in &self.terms {
            match *term {
                Term::Word(w) => words.push(w),
                Term::Both(v) => words.extend([v, TOP - v]),
                Term::LowestPe(flag) => words.push(if flag { TOP - me as u64 } else { 0 }),
                Term::WithPe(v) => words.push(v.map_or(0, |v| (v + 1) << PE_BITS | me as u64)),
            }
        }
        words
    }

    /// Runs the agreement on a maximum-reduction of this PE's words, for code that reduces
    /// over MPI before the runtime exists (the start-up checks).
    pub(crate) fn run_with(self, me: usize, reduce_max: impl FnOnce(&mut [u64])) -> Agreed {
        let mut words = self.words(me);
        reduce_max(&mut words);
        Agreed { words }
    }

    /// The agreement of words already reduced (every PE's maximum of [`words`](Self::words)).
    pub(crate) fn agreed(words: Vec<u64>) -> Agreed {
        Agreed { words }
    }
}

impl Term {
    fn words(&self) -> usize {
        match self {
            Term::Both(_) => 2,
            _ => 1,
        }
    }
}

impl Agreed {
    /// The answer to a question of the agreement.
    pub fn get<K: Kind>(&self, asked: Asked<K>) -> K::Answer {
        K::read(&self.words[asked.at..])
    }
}

/// The 64-bit FNV-1a hash, fed with bytes or with whole words (each `u64` folded in at once):
/// the same in every process and build, for the agreements and the examples' fingerprints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a::new()
    }
}

impl Fnv1a {
    const PRIME: u64 = 0x0100_0000_01b3;

    /// The hash of nothing (FNV-1a's offset basis).
    pub const fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    /// The hash with `bytes` folded in, one byte at a time (FNV-1a proper).
    pub fn bytes(self, bytes: &[u8]) -> Fnv1a {
        Fnv1a(bytes.iter().fold(self.0, |h, &b| (h ^ u64::from(b)).wrapping_mul(Self::PRIME)))
    }

    /// The hash with `word` folded in whole (one round for eight bytes).
    pub fn word(self, word: u64) -> Fnv1a {
        Fnv1a((self.0 ^ word).wrapping_mul(Self::PRIME))
    }

    /// The hash with each of `words` folded in whole.
    pub fn words(self, words: impl IntoIterator<Item = u64>) -> Fnv1a {
        words.into_iter().fold(self, Fnv1a::word)
    }

    /// The hash.
    pub fn finish(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every PE's words reduced by maximum, as the runtime's reduction does.
    fn reduce(per_pe: &[Agreement]) -> Agreed {
        let mut words = per_pe[0].words(0);
        for (pe, a) in per_pe.iter().enumerate().skip(1) {
            for (w, v) in words.iter_mut().zip(a.words(pe)) {
                *w = (*w).max(v);
            }
        }
        Agreement::agreed(words)
    }

    #[test]
    fn one_reduction_answers_every_question() {
        let values = [7u64, 3, 9, 3];
        let flags = [false, true, false, true];
        let mut asked = None;
        let per_pe: Vec<Agreement> = (0..4)
            .map(|pe| {
                let mut a = Agreement::new();
                let q = (
                    a.max(values[pe]),
                    a.min(values[pe]),
                    a.extent(values[pe]),
                    a.same(42),
                    a.same(values[pe]),
                    a.any(flags[pe]),
                    a.lowest_pe(flags[pe]),
                    a.max_with_pe(flags[pe].then_some(values[pe] + pe as u64)),
                    a.max_f64(values[pe] as f64 / 2.0),
                    a.min_f64(values[pe] as f64 / 2.0),
                    a.lowest_pe(false),
                );
                asked = Some(q);
                a
            })
            .collect();
        let agreed = reduce(&per_pe);
        let (max, min, extent, same, differs, any, lowest, with_pe, max_f, min_f, none) = asked.unwrap();
        assert_eq!(agreed.get(max), 9);
        assert_eq!(agreed.get(min), 3);
        assert_eq!(agreed.get(extent), (3, 9));
        assert!(agreed.get(same));
        assert!(!agreed.get(differs));
        assert!(agreed.get(any));
        assert_eq!(agreed.get(lowest), Some(1));
        assert_eq!(agreed.get(with_pe), Some((6, 3)));
        assert_eq!(agreed.get(max_f), 4.5);
        assert_eq!(agreed.get(min_f), 1.5);
        assert_eq!(agreed.get(none), None);
    }

    #[test]
    fn fnv1a_is_the_reference_hash() {
        // The FNV-1a test vectors of its authors.
        assert_eq!(Fnv1a::new().bytes(b"").finish(), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fnv1a::new().bytes(b"a").finish(), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fnv1a::new().bytes(b"foobar").finish(), 0x8594_4171_f739_67e8);
        assert_eq!(Fnv1a::new().word(u64::from(b'a')).finish(), Fnv1a::new().bytes(b"a").finish());
        assert_ne!(Fnv1a::new().words([1, 2]).finish(), Fnv1a::new().words([2, 1]).finish());
    }
}
