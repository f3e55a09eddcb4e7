//! Which transport an exchange takes to each partner ([`Links`]): one for the PEs of this
//! node and one for the PEs of other nodes, optionally per range of message sizes, with where
//! they came from ([`LinksSource`]); and what [`env::TRANSPORT`] asks for. Plain values,
//! below the runtime that keeps the settled links:
//! [`Runtime::collective_links`](crate::Runtime::collective_links) settles them, by the
//! calibration that times the exchanges themselves.
//!
//! The two classes are kept apart because they differ: on a node whose heaps are mapped the
//! one-sided paths are copies and beat MPI, while across nodes without RDMA they lose to it
//! (OSHMEM over UCX's TCP transport emulates each remote write with messages the target must
//! progress).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::agree::Fnv1a;
use crate::env;
use crate::error::{Error, Result};
use crate::path::Transport;

/// The transports a [`Path::Auto`](crate::Path::Auto) exchange takes: one to and from the PEs
/// of this node, one to and from the PEs of other nodes, and where a calibration found other
/// transports faster for some sizes of message, those per range of sizes
/// ([`by_size`](Self::by_size)), which an exchange follows once
/// [`Exchange::collective_reserve`](crate::Exchange::collective_reserve) has told it the
/// largest message it carries.
///
/// Two links are equal when they name the same transports; where they came from
/// ([`source`](Self::source)) is not compared.
#[derive(Clone, Debug)]
pub struct Links {
    /// The transport to PEs on this PE's node ([`Runtime::same_node`](crate::Runtime::same_node)),
    /// for messages of no stated size.
    pub same_node: Transport,
    /// The transport to PEs on other nodes, for messages of no stated size.
    pub other_node: Transport,
    /// From each size in bytes on, up to the next, the transports (same node, other node) for
    /// messages of that size, in ascending order of size (at most [`Links::MAX_RANGES`]);
    /// empty: `same_node` and `other_node` at every size.
    pub by_size: Vec<(usize, Transport, Transport)>,
    source: LinksSource,
}

/// How many transports a link may take.
pub(crate) const TRANSPORTS: u64 = Transport::LINKS.len() as u64;

/// The median time of one send-receive call a calibration measured, on PE 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The class of link: `true` for PEs of one node.
    pub same_node: bool,
    /// The transport.
    pub transport: Transport,
    /// The message size in bytes.
    pub bytes: usize,
    /// The median call.
    pub time: Duration,
}

/// Where [`Links`] came from.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum LinksSource {
    /// The program made them ([`Links::new`], [`Links::uniform`], parsed), or set them
    /// ([`Runtime::collective_set_links`](crate::Runtime::collective_set_links)).
    #[default]
    Program,
    /// [`env::TRANSPORT`] named them.
    Environment,
    /// A calibration of an earlier run, read from this cache file.
    Cache(PathBuf),
    /// Calibrated in this run.
    Calibrated {
        /// How long the calibration took on PE 0.
        seconds: f64,
        /// The cache file written, if any.
        cache: Option<PathBuf>,
        /// What it measured.
        measured: Vec<Measured>,
    },
}

impl PartialEq for Links {
    fn eq(&self, other: &Links) -> bool {
        (self.same_node, self.other_node, &self.by_size)
            == (other.same_node, other.other_node, &other.by_size)
    }
}

impl Eq for Links {}

impl Links {
    /// The most ranges of sizes a [`Links`] holds.
    pub const MAX_RANGES: usize = 4;

    /// `same_node` to the PEs of this node and `other_node` to the rest, at every size.
    pub fn new(same_node: Transport, other_node: Transport) -> Links {
        Links { same_node, other_node, by_size: Vec::new(), source: LinksSource::Program }
    }

    /// The same transport to every PE, at every size.
    pub fn uniform(transport: Transport) -> Links {
        Links::new(transport, transport)
    }

    /// These links with `same_node` and `other_node` from `bytes` on (ranges ascend).
    pub fn from_bytes(mut self, bytes: usize, same_node: Transport, other_node: Transport) -> Links {
        self.by_size.push((bytes, same_node, other_node));
        self
    }

    /// Where they came from.
    pub fn source(&self) -> &LinksSource {
        &self.source
    }

    /// These links, from `source`.
    pub(crate) fn with_source(self, source: LinksSource) -> Links {
        Links { source, ..self }
    }

    /// The transport to a PE on this node (`same_node`) or on another, for messages of no
    /// stated size.
    pub fn transport(&self, same_node: bool) -> Transport {
        if same_node { self.same_node } else { self.other_node }
    }

    /// The transports for messages of no stated size, at every size: these links without
    /// their ranges.
    pub fn plain(&self) -> Links {
        Links::new(self.same_node, self.other_node).with_source(self.source.clone())
    }

    /// The links for messages of up to `bytes` bytes: one transport per class, no ranges.
    pub fn for_bytes(&self, bytes: usize) -> Links {
        let (same, other) = self
            .by_size
            .iter()
            .rev()
            .find(|(from, ..)| *from <= bytes)
            .map_or((self.same_node, self.other_node), |&(_, s, o)| (s, o));
        Links::new(same, other).with_source(self.source.clone())
    }

    /// Whether some size takes other transports than those of no stated size.
    pub fn varies(&self) -> bool {
        self.by_size.iter().any(|&(_, s, o)| (s, o) != (self.same_node, self.other_node))
    }

    /// Whether every class and size takes the same transport.
    pub fn is_uniform(&self) -> bool {
        self.same_node == self.other_node && !self.varies()
    }

    /// Every transport passed through `f`: how an exchange that needs a variant of a transport
    /// (the halo's forces are pulled where its coordinates are put) derives its links.
    pub fn map(&self, f: impl Fn(Transport) -> Transport) -> Links {
        Links {
            same_node: f(self.same_node),
            other_node: f(self.other_node),
            by_size: self.by_size.iter().map(|&(from, s, o)| (from, f(s), f(o))).collect(),
            source: self.source.clone(),
        }
    }

    /// `Err` naming what cannot serve: a link's transport, ranges out of order or too many.
    pub(crate) fn check(&self) -> Result<()> {
        let pairs =
            [(self.same_node, self.other_node)].into_iter().chain(self.by_size.iter().map(|r| (r.1, r.2)));
        for (same, other) in pairs {
            for (class, transport) in [("same-node", same), ("other-node", other)] {
                if !Transport::LINKS.contains(&transport) {
                    return Err(Error::InvalidArgument(format!(
                        "the {class} link cannot take the {transport} transport: a link takes \
                         onesided-put, onesided-get, mpi or mpi-rma"
                    )));
                }
            }
        }
        if self.by_size.len() > Self::MAX_RANGES {
            return Err(Error::InvalidArgument(format!(
                "links for {} ranges of message sizes: at most {} are kept",
                self.by_size.len(),
                Self::MAX_RANGES
            )));
        }
        if self.by_size.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::InvalidArgument(format!(
                "links by message size {self}: the sizes must ascend"
            )));
        }
        Ok(())
    }

    /// A number for the links, the same on every PE and below 2^60: 1 to 16 for a pair of
    /// transports at every size (0 is no links).
    pub(crate) fn code(&self) -> u64 {
        if self.by_size.is_empty() {
            pair_code(self.same_node, self.other_node)
        } else {
            100 + (Fnv1a::new().bytes(self.to_string().as_bytes()).finish() >> 8)
        }
    }

    /// The links as words to broadcast: the range count, the pair's code, then each range's
    /// first size and code.
    pub(crate) fn encode(&self) -> [u64; 2 + 2 * Links::MAX_RANGES] {
        let mut words = [0; 2 + 2 * Links::MAX_RANGES];
        words[0] = self.by_size.len() as u64;
        words[1] = pair_code(self.same_node, self.other_node);
        for (i, &(from, same, other)) in self.by_size.iter().take(Self::MAX_RANGES).enumerate() {
            words[2 + 2 * i] = from as u64;
            words[3 + 2 * i] = pair_code(same, other);
        }
        words
    }

    /// The links of [`encode`](Self::encode)'s words; `None` when the words hold none.
    pub(crate) fn decode(words: &[u64; 2 + 2 * Links::MAX_RANGES]) -> Option<Links> {
        let ranges = usize::try_from(words[0]).ok().filter(|&n| n <= Self::MAX_RANGES)?;
        let by_size = (0..ranges)
            .map(|i| pair_of(words[3 + 2 * i]).map(|(s, o)| (words[2 + 2 * i] as usize, s, o)))
            .collect::<Option<Vec<_>>>()?;
        let (same, other) = pair_of(words[1])?;
        Some(Links { by_size, ..Links::new(same, other) })
    }
}

/// A number for a pair of link transports, 1 to 16.
fn pair_code(same: Transport, other: Transport) -> u64 {
    let index = |t: Transport| Transport::LINKS.iter().position(|&q| q == t).unwrap_or(0) as u64;
    1 + TRANSPORTS * index(same) + index(other)
}

/// The pair of [`pair_code`].
fn pair_of(code: u64) -> Option<(Transport, Transport)> {
    let i = code.checked_sub(1).filter(|&i| i < TRANSPORTS * TRANSPORTS)?;
    Some((Transport::LINKS[(i / TRANSPORTS) as usize], Transport::LINKS[(i % TRANSPORTS) as usize]))
}

impl fmt::Display for Links {
    /// `same-node=T,other-node=T`, then `; from BYTES: same-node=T,other-node=T` for each
    /// range of sizes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "same-node={},other-node={}", self.same_node, self.other_node)?;
        for (from, same, other) in &self.by_size {
            write!(f, "; from {from}: same-node={same},other-node={other}")?;
        }
        Ok(())
    }
}

/// One transport for every link (`put`, `onesided-get`, `mpi`, ...), or
/// `same-node=T,other-node=T` (either may be left out: it is then `onesided-put`).
fn parse_pair(s: &str) -> Result<(Transport, Transport)> {
    if !s.contains('=') {
        let t = s.trim().parse()?;
        return Ok((t, t));
    }
    let (mut same, mut other) = (Transport::Put, Transport::Put);
    for part in s.split(',') {
        match part.trim().split_once('=') {
            Some(("same-node", t)) => same = t.trim().parse()?,
            Some(("other-node", t)) => other = t.trim().parse()?,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{part:?} in links {s:?}: expected same-node=TRANSPORT or other-node=TRANSPORT"
                )));
            }
        }
    }
    Ok((same, other))
}

impl FromStr for Links {
    type Err = Error;

    /// Transports as one link's (`mpi`, or `same-node=onesided-put,other-node=mpi`), then any
    /// number of `; from BYTES: LINKS` (`BYTES` a number, or one with `k` or `M` for KiB or
    /// MiB): `mpi; from 32k: other-node=onesided-get`.
    fn from_str(s: &str) -> Result<Links> {
        let mut parts = s.split(';');
        let (same, other) = parse_pair(parts.next().unwrap_or_default())?;
        let mut links = Links::new(same, other);
        for part in parts {
            let range = part.trim().strip_prefix("from ").and_then(|r| r.split_once(':'));
            let Some((bytes, pair)) = range else {
                return Err(Error::InvalidArgument(format!(
                    "{part:?} in links {s:?}: expected `from BYTES: LINKS`"
                )));
            };
            let from = parse_bytes(bytes.trim()).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{bytes:?} in links {s:?}: expected a size in bytes (a number, with k or M for \
                     KiB or MiB)"
                ))
            })?;
            let (same, other) = parse_pair(pair)?;
            links = links.from_bytes(from, same, other);
        }
        links.check()?;
        Ok(links)
    }
}

/// `n`, `nk` or `nM` (KiB, MiB) as bytes.
fn parse_bytes(s: &str) -> Option<usize> {
    let (digits, scale) = match s.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1 << 10),
        None => match s.strip_suffix('M') {
            Some(d) => (d, 1 << 20),
            None => (s, 1),
        },
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(scale)
}

impl fmt::Display for LinksSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinksSource::Program => f.write_str("set by the program"),
            LinksSource::Environment => write!(f, "{}", env::TRANSPORT),
            LinksSource::Cache(file) => write!(f, "calibrated earlier, {}", file.display()),
            LinksSource::Calibrated { seconds, .. } => write!(f, "calibrated in {:.0} ms", seconds * 1e3),
        }
    }
}

/// What [`env::TRANSPORT`] asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TransportSetting {
    /// The cache, else a calibration (the default).
    Auto,
    /// A calibration now, whatever the cache holds.
    Calibrate,
    /// These links.
    Links(Links),
}

impl TransportSetting {
    pub(crate) fn code(&self) -> u64 {
        match self {
            TransportSetting::Auto => 0,
            TransportSetting::Calibrate => 50,
            TransportSetting::Links(links) => links.code(),
        }
    }
}

/// Parses [`env::TRANSPORT`]'s value.
pub(crate) fn parse_transport(value: &str) -> Result<TransportSetting> {
    match value.trim() {
        "" | "auto" => Ok(TransportSetting::Auto),
        "calibrate" => Ok(TransportSetting::Calibrate),
        other => other.parse().map(TransportSetting::Links),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_parse_print_and_number_alike() {
        for same in Transport::LINKS {
            for other in Transport::LINKS {
                let links = Links::new(same, other);
                assert_eq!(pair_of(links.code()), Some((same, other)));
                assert_eq!(links.to_string().parse::<Links>().unwrap(), links);
            }
        }
        assert_eq!("mpi".parse::<Links>().unwrap(), Links::uniform(Transport::Mpi));
        assert_eq!(
            "same-node=put,other-node=mpi-rma".parse::<Links>().unwrap(),
            Links::new(Transport::Put, Transport::MpiRma)
        );
        assert_eq!("other-node=mpi".parse::<Links>().unwrap(), Links::new(Transport::Put, Transport::Mpi));
        assert!("buffered".parse::<Links>().is_err());
        assert!("same-node=auto".parse::<Links>().is_err());
        assert!("near=put".parse::<Links>().is_err());
        assert_eq!(pair_of(0), None);
        assert_eq!(pair_of(17), None);
        assert_eq!(parse_transport("calibrate").unwrap(), TransportSetting::Calibrate);
        assert_eq!(parse_transport("").unwrap(), TransportSetting::Auto);
        assert!(parse_transport("fast").is_err());
    }

    #[test]
    fn sized_links_parse_print_encode_and_choose_by_size() {
        let put_mpi = Links::new(Transport::Put, Transport::Mpi);
        let get = Links::new(Transport::Put, Transport::Get);
        let sized: Links =
            "same-node=onesided-put,other-node=mpi; from 32k: other-node=onesided-get".parse().unwrap();
        assert_eq!(sized, put_mpi.clone().from_bytes(32 << 10, Transport::Put, Transport::Get));
        assert_eq!(sized.to_string().parse::<Links>().unwrap(), sized);
        assert_eq!(Links::decode(&sized.encode()), Some(sized.clone()));
        assert_eq!(sized.for_bytes(0), put_mpi);
        assert_eq!(sized.for_bytes((32 << 10) - 1), put_mpi);
        assert_eq!(sized.for_bytes(32 << 10), get);
        assert_eq!(sized.for_bytes(usize::MAX), get);
        assert!(sized.varies());
        assert!(!put_mpi.varies());
        assert_eq!(Links::decode(&get.encode()), Some(get.clone()));
        assert_eq!(Links::decode(&[0; 2 + 2 * Links::MAX_RANGES]), None);
        assert_ne!(sized.code(), put_mpi.code());
        assert!(sized.code() < 1 << 60);
        assert_eq!(
            "mpi; from 1M: put".parse::<Links>().unwrap().by_size,
            vec![(1 << 20, Transport::Put, Transport::Put)]
        );
        assert!("mpi; from 8k: put; from 4k: mpi".parse::<Links>().is_err());
        assert!("mpi; 8k: put".parse::<Links>().is_err());
        assert!("mpi; from lots: put".parse::<Links>().is_err());
        assert!("mpi; from 1k: buffered".parse::<Links>().is_err());
        assert!(
            matches!(parse_transport("mpi; from 64k: onesided-put"), Ok(TransportSetting::Links(s)) if s.varies())
        );
        assert_eq!(
            Links::uniform(Transport::Mpi).with_source(LinksSource::Environment),
            Links::uniform(Transport::Mpi)
        );
    }
}
