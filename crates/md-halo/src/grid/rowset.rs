//! The boundaries of a grid's rows of domains along one dimension ([`RowSet`]), the limit
//! between two neighbouring rows ([`RowLimit`]), and the equal boundaries load balancing
//! starts from.

use std::collections::BTreeMap;

/// The axes' names, for messages.
pub(crate) const AXES: [&str; 3] = ["x", "y", "z"];

/// The boundaries along one dimension: one row every row of domains shares, a row for each
/// row of domains (indexed by [`DdGrid::row`](crate::DdGrid::row)), or the rows near one
/// domain by index ([`DdGrid::near`](crate::DdGrid::near)).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RowSet {
    Shared(Vec<f64>),
    Each(Vec<Vec<f64>>),
    Near(BTreeMap<usize, Vec<f64>>),
}

impl RowSet {
    /// Row `r`'s boundaries, where held.
    pub(crate) fn get(&self, r: usize) -> Option<&[f64]> {
        match self {
            RowSet::Shared(b) => Some(b),
            RowSet::Each(rows) => rows.get(r).map(Vec::as_slice),
            RowSet::Near(rows) => rows.get(&r).map(Vec::as_slice),
        }
    }
}

/// One limit between two neighbouring rows of domains along a dimension
/// ([`DdGrid::row_limits`](crate::DdGrid::row_limits)): domain `c`'s top in one row,
/// `mine[c + 1]`, lies at least `least` below `theirs[j] + wrap` in the other (a lower face,
/// periodically).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RowLimit {
    pub(crate) c: usize,
    pub(crate) j: usize,
    pub(crate) wrap: f64,
    pub(crate) least: f64,
}

impl RowLimit {
    /// How much more than `least` lies between `mine`'s top of domain `c` and `theirs`'s face
    /// (negative: the limit is broken).
    pub(crate) fn slack(&self, mine: &[f64], theirs: &[f64]) -> f64 {
        theirs[self.j] + self.wrap - mine[self.c + 1] - self.least
    }
}

/// The boundaries of `n` equal domains in fractions: `c / n`, exactly 0 and 1 at the ends.
pub(crate) fn equal_bounds(n: usize) -> Vec<f64> {
    (0..=n).map(|c| c as f64 / n as f64).collect()
}
