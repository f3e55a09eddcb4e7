//! Which path an exchange takes to each partner: one for the PEs of this node and one for
//! the PEs of other nodes ([`Links`]), per range of message sizes ([`SizedLinks`]), where they
//! came from ([`LinkChoice`]), and what [`env::TRANSPORT`] asks for. Plain values, below the
//! runtime that keeps the settled choice: [`Runtime::collective_links`](crate::Runtime::collective_links)
//! settles it, by the calibration that times the exchanges themselves.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::agree::Fnv1a;
use crate::env;
use crate::error::{Error, Result};
use crate::path::ExchangePath;

/// The paths an [`ExchangePath::Auto`] exchange takes: one to and from the PEs of this node,
/// one to and from the PEs of other nodes. Each is [`ExchangePath::Put`],
/// [`ExchangePath::Get`], [`ExchangePath::Mpi`] or [`ExchangePath::MpiRma`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Links {
    /// The path to PEs on this PE's node ([`Runtime::same_node`]).
    pub same_node: ExchangePath,
    /// The path to PEs on other nodes.
    pub other_node: ExchangePath,
}

/// The paths a link may take, in the order their codes number them.
pub(crate) const LINK_PATHS: [ExchangePath; 4] =
    [ExchangePath::Put, ExchangePath::Get, ExchangePath::Mpi, ExchangePath::MpiRma];

/// How many paths a link may take.
pub(crate) const PATHS: u64 = LINK_PATHS.len() as u64;

impl Links {
    /// The same path to every PE.
    pub fn uniform(path: ExchangePath) -> Links {
        Links { same_node: path, other_node: path }
    }

    /// The path to a PE on this node (`same_node`) or on another.
    pub fn path(&self, same_node: bool) -> ExchangePath {
        if same_node { self.same_node } else { self.other_node }
    }

    /// Each link's path passed through `f`: how an exchange that needs a variant of a path
    /// (the halo's forces are pulled where its coordinates are put) derives its links.
    pub fn map(self, f: impl Fn(ExchangePath) -> ExchangePath) -> Links {
        Links { same_node: f(self.same_node), other_node: f(self.other_node) }
    }

    /// Whether both links take the same path.
    pub fn is_uniform(&self) -> bool {
        self.same_node == self.other_node
    }

    /// `Err` naming the link whose path cannot serve one (`Auto` or the buffered baseline).
    pub(crate) fn check(&self) -> Result<()> {
        for (class, path) in [("same-node", self.same_node), ("other-node", self.other_node)] {
            if !LINK_PATHS.contains(&path) {
                return Err(Error::InvalidArgument(format!(
                    "the {class} link cannot take the {path} path: a link takes onesided-put, \
                     onesided-get, mpi or mpi-rma"
                )));
            }
        }
        Ok(())
    }

    /// A number for the links, the same on every PE (1 to 16; 0 is no links).
    pub(crate) fn code(&self) -> u64 {
        let index = |p: ExchangePath| LINK_PATHS.iter().position(|&q| q == p).unwrap_or(0) as u64;
        1 + PATHS * index(self.same_node) + index(self.other_node)
    }

    /// The links of [`code`](Self::code).
    pub(crate) fn from_code(code: u64) -> Option<Links> {
        let i = code.checked_sub(1).filter(|&i| i < PATHS * PATHS)?;
        let (same, other) = ((i / PATHS) as usize, (i % PATHS) as usize);
        Some(Links { same_node: LINK_PATHS[same], other_node: LINK_PATHS[other] })
    }
}

impl fmt::Display for Links {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "same-node={},other-node={}", self.same_node, self.other_node)
    }
}

impl FromStr for Links {
    type Err = Error;

    /// One path for every link (`put`, `onesided-get`, `mpi`, ...), or
    /// `same-node=PATH,other-node=PATH` (either may be left out: it is then `onesided-put`).
    fn from_str(s: &str) -> Result<Links> {
        let links = if s.contains('=') {
            let mut links = Links::uniform(ExchangePath::Put);
            for part in s.split(',') {
                match part.trim().split_once('=') {
                    Some(("same-node", path)) => links.same_node = path.trim().parse()?,
                    Some(("other-node", path)) => links.other_node = path.trim().parse()?,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "{part:?} in links {s:?}: expected same-node=PATH or other-node=PATH"
                        )));
                    }
                }
            }
            links
        } else {
            Links::uniform(s.trim().parse()?)
        };
        links.check()?;
        Ok(links)
    }
}

/// Links that may differ with the size of an exchange's messages: what a calibration found
/// fastest for each range of sizes. An [`ExchangePath::Auto`] exchange starts on `links` and,
/// once [`Exchange::collective_reserve`] has told it the largest message it carries, takes
/// the links of that size ([`for_bytes`](Self::for_bytes)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SizedLinks {
    /// The links for messages of no stated size: the calibration's choice over every size it
    /// measured.
    pub links: Links,
    /// From each size in bytes on, up to the next, the links for messages of that size, in
    /// ascending order of size (at most [`SizedLinks::MAX_RANGES`]); empty: `links` at every
    /// size.
    pub by_size: Vec<(usize, Links)>,
}

impl SizedLinks {
    /// The most ranges of sizes a [`SizedLinks`] holds.
    pub const MAX_RANGES: usize = 4;

    /// The links for messages of up to `bytes` bytes.
    pub fn for_bytes(&self, bytes: usize) -> Links {
        self.by_size.iter().rev().find(|(from, _)| *from <= bytes).map_or(self.links, |&(_, links)| links)
    }

    /// Whether some size takes other links than `links`.
    pub fn varies(&self) -> bool {
        self.by_size.iter().any(|&(_, links)| links != self.links)
    }

    /// Every range's links passed through `f` ([`Links::map`]).
    pub fn map(&self, f: impl Fn(ExchangePath) -> ExchangePath) -> SizedLinks {
        SizedLinks {
            links: self.links.map(&f),
            by_size: self.by_size.iter().map(|&(from, links)| (from, links.map(&f))).collect(),
        }
    }

    /// `Err` naming what cannot serve: a link's path, ranges out of order or too many.
    pub(crate) fn check(&self) -> Result<()> {
        self.links.check()?;
        for &(_, links) in &self.by_size {
            links.check()?;
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

    /// A number for the links, the same on every PE and below 2^60 (the plain links' own
    /// code where no size differs).
    pub(crate) fn code(&self) -> u64 {
        if self.by_size.is_empty() {
            self.links.code()
        } else {
            100 + (Fnv1a::new().bytes(self.to_string().as_bytes()).finish() >> 8)
        }
    }

    /// The links as words to broadcast: the range count, the links' code, then each range's
    /// first size and code.
    pub(crate) fn encode(&self) -> [u64; 2 + 2 * SizedLinks::MAX_RANGES] {
        let mut words = [0; 2 + 2 * SizedLinks::MAX_RANGES];
        words[0] = self.by_size.len() as u64;
        words[1] = self.links.code();
        for (i, &(from, links)) in self.by_size.iter().take(Self::MAX_RANGES).enumerate() {
            words[2 + 2 * i] = from as u64;
            words[3 + 2 * i] = links.code();
        }
        words
    }

    /// The links of [`encode`](Self::encode)'s words; `None` when the words hold none.
    pub(crate) fn decode(words: &[u64; 2 + 2 * SizedLinks::MAX_RANGES]) -> Option<SizedLinks> {
        let ranges = usize::try_from(words[0]).ok().filter(|&n| n <= Self::MAX_RANGES)?;
        let by_size = (0..ranges)
            .map(|i| Some((words[2 + 2 * i] as usize, Links::from_code(words[3 + 2 * i])?)))
            .collect::<Option<Vec<_>>>()?;
        Some(SizedLinks { links: Links::from_code(words[1])?, by_size })
    }
}

impl From<Links> for SizedLinks {
    fn from(links: Links) -> SizedLinks {
        SizedLinks { links, by_size: Vec::new() }
    }
}

impl fmt::Display for SizedLinks {
    /// The links, then `; from BYTES: LINKS` for each range of sizes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.links)?;
        for (from, links) in &self.by_size {
            write!(f, "; from {from}: {links}")?;
        }
        Ok(())
    }
}

impl FromStr for SizedLinks {
    type Err = Error;

    /// Links as [`Links`] reads them, then any number of `; from BYTES: LINKS` (`BYTES` a
    /// number, or one with `k` or `M` for KiB or MiB): `mpi; from 32k: other-node=onesided-get`.
    fn from_str(s: &str) -> Result<SizedLinks> {
        let mut parts = s.split(';');
        let links = parts.next().unwrap_or_default().parse()?;
        let mut by_size = Vec::new();
        for part in parts {
            let range = part.trim().strip_prefix("from ").and_then(|r| r.split_once(':'));
            let Some((bytes, range_links)) = range else {
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
            by_size.push((from, range_links.parse()?));
        }
        let sized = SizedLinks { links, by_size };
        sized.check()?;
        Ok(sized)
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

/// Where the runtime's [`Links`] came from.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LinksSource {
    /// [`env::TRANSPORT`] named them.
    Environment,
    /// [`Runtime::collective_set_links`] set them.
    Set,
    /// A calibration of an earlier run, read from this cache file.
    Cache(PathBuf),
    /// Calibrated in this run, taking this long; written to the cache file where it could be.
    Calibrated {
        /// How long the calibration took on PE 0.
        seconds: f64,
        /// The cache file written, if any.
        cache: Option<PathBuf>,
    },
}

/// The runtime's links, where they came from and, when calibrated in this run, what was
/// measured.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkChoice {
    /// The paths for messages of no stated size.
    pub links: Links,
    /// The paths per range of message sizes ([`SizedLinks::by_size`]).
    pub by_size: Vec<(usize, Links)>,
    /// Where they came from.
    pub source: LinksSource,
    /// The median time of a send-receive call per link class measured (`true`: same node),
    /// path and message size in bytes, on PE 0.
    pub measured: Vec<(bool, ExchangePath, usize, Duration)>,
}

impl LinkChoice {
    /// The choice of `sized`, from `source`, with what was `measured`.
    pub(crate) fn new(
        sized: SizedLinks,
        source: LinksSource,
        measured: Vec<(bool, ExchangePath, usize, Duration)>,
    ) -> Self {
        LinkChoice { links: sized.links, by_size: sized.by_size, source, measured }
    }

    /// The paths with their ranges of message sizes.
    pub fn sized(&self) -> SizedLinks {
        SizedLinks { links: self.links, by_size: self.by_size.clone() }
    }
}

impl fmt::Display for LinkChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (", self.sized())?;
        match &self.source {
            LinksSource::Environment => write!(f, "{}", env::TRANSPORT)?,
            LinksSource::Set => f.write_str("set by the program")?,
            LinksSource::Cache(file) => write!(f, "calibrated earlier, {}", file.display())?,
            LinksSource::Calibrated { seconds, .. } => write!(f, "calibrated in {:.0} ms", seconds * 1e3)?,
        }
        f.write_str(")")
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
    Links(SizedLinks),
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
        for same in LINK_PATHS {
            for other in LINK_PATHS {
                let links = Links { same_node: same, other_node: other };
                assert_eq!(Links::from_code(links.code()), Some(links));
                assert_eq!(links.to_string().parse::<Links>().unwrap(), links);
            }
        }
        assert_eq!("mpi".parse::<Links>().unwrap(), Links::uniform(ExchangePath::Mpi));
        assert_eq!(
            "same-node=put,other-node=mpi-rma".parse::<Links>().unwrap(),
            Links { same_node: ExchangePath::Put, other_node: ExchangePath::MpiRma }
        );
        assert_eq!(
            "other-node=mpi".parse::<Links>().unwrap(),
            Links { same_node: ExchangePath::Put, other_node: ExchangePath::Mpi }
        );
        assert!("buffered".parse::<Links>().is_err());
        assert!("same-node=auto".parse::<Links>().is_err());
        assert!("near=put".parse::<Links>().is_err());
        assert_eq!(Links::from_code(0), None);
        assert_eq!(Links::from_code(17), None);
        assert_eq!(parse_transport("calibrate").unwrap(), TransportSetting::Calibrate);
        assert_eq!(parse_transport("").unwrap(), TransportSetting::Auto);
        assert!(parse_transport("fast").is_err());
    }

    #[test]
    fn sized_links_parse_print_encode_and_choose_by_size() {
        let put_mpi = Links { same_node: ExchangePath::Put, other_node: ExchangePath::Mpi };
        let get = Links { same_node: ExchangePath::Put, other_node: ExchangePath::Get };
        let sized: SizedLinks =
            "same-node=onesided-put,other-node=mpi; from 32k: other-node=onesided-get".parse().unwrap();
        assert_eq!(sized, SizedLinks { links: put_mpi, by_size: vec![(32 << 10, get)] });
        assert_eq!(sized.to_string().parse::<SizedLinks>().unwrap(), sized);
        assert_eq!(SizedLinks::decode(&sized.encode()), Some(sized.clone()));
        assert_eq!(sized.for_bytes(0), put_mpi);
        assert_eq!(sized.for_bytes((32 << 10) - 1), put_mpi);
        assert_eq!(sized.for_bytes(32 << 10), get);
        assert_eq!(sized.for_bytes(usize::MAX), get);
        assert!(sized.varies());
        assert!(!SizedLinks::from(put_mpi).varies());
        assert_eq!(SizedLinks::decode(&SizedLinks::from(get).encode()), Some(get.into()));
        assert_eq!(SizedLinks::decode(&[0; 2 + 2 * SizedLinks::MAX_RANGES]), None);
        assert_ne!(sized.code(), SizedLinks::from(put_mpi).code());
        assert!(sized.code() < 1 << 60);
        assert_eq!(
            "mpi; from 1M: put".parse::<SizedLinks>().unwrap().by_size,
            vec![(1 << 20, Links::uniform(ExchangePath::Put))]
        );
        assert!("mpi; from 8k: put; from 4k: mpi".parse::<SizedLinks>().is_err());
        assert!("mpi; 8k: put".parse::<SizedLinks>().is_err());
        assert!("mpi; from lots: put".parse::<SizedLinks>().is_err());
        assert!("mpi; from 1k: buffered".parse::<SizedLinks>().is_err());
        assert!(
            matches!(parse_transport("mpi; from 64k: onesided-put"), Ok(TransportSetting::Links(s)) if s.varies())
        );
    }
}
