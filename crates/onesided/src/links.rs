//! Which path an exchange takes to each partner: one for the PEs of this node and one for
//! the PEs of other nodes ([`Links`]), what [`ExchangePath::Auto`] exchanges use.
//!
//! The runtime settles the links once, at the first [`Runtime::collective_links`]: from
//! [`env::TRANSPORT`] when it names them; else from the cache file of an earlier calibration
//! of the same implementation, hosts, PE count and settings; else by calibrating. The
//! calibration times send-receive calls between PE 0 and one PE of its node and one PE of
//! another node on each candidate path (the one-sided put and get paths, MPI two-sided and
//! MPI one-sided), at three message sizes, and gives each class of link the path whose times
//! are the least, summed as ratios to the fastest at each size ([`Links`]), and for each range
//! of sizes around a measured one the path fastest there where it beats that choice by over
//! 30 %, or at all at the largest, bandwidth-bound size ([`SizedLinks`], which an exchange
//! follows once told the size of its messages by [`Exchange::collective_reserve`]). PE 0
//! decides and every PE takes its decision, so the PEs agree. PE 0 measures one class after the other, and only the
//! pair measured runs: every other PE waits napping between polls, leaving it the cores.
//! Where PE 0's node runs more PEs than it has cores ([`Runtime::oversubscribed`]), the
//! same-node link keeps the one-sided put unmeasured: two PEs timed while the others sleep
//! cannot show what MPI's polling costs the rest. Each path, class and size is timed at most
//! 25 ms beyond three calls, so a slow path costs the calibration little.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::env;
use crate::error::{Error, Result};
use crate::heap::SymArray;
use crate::runtime::Runtime;
use crate::sendrecv::{Exchange, ExchangePath, Incoming, Outgoing};

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
const LINK_PATHS: [ExchangePath; 4] =
    [ExchangePath::Put, ExchangePath::Get, ExchangePath::Mpi, ExchangePath::MpiRma];

/// The cache file's name's first part: the links, among this many paths.
const CACHE_NAME: &str = "links-by-size-4paths";

/// How many paths a link may take.
const PATHS: u64 = LINK_PATHS.len() as u64;

/// Above every code of links or settings ([`SizedLinks::code`]): PEs agree on a code `c` when
/// the maxima of `c` and of `AGREE_TOP - c` add up to it.
const AGREE_TOP: u64 = 1 << 60;

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
    fn check(&self) -> Result<()> {
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
    fn code(&self) -> u64 {
        let index = |p: ExchangePath| LINK_PATHS.iter().position(|&q| q == p).unwrap_or(0) as u64;
        1 + PATHS * index(self.same_node) + index(self.other_node)
    }

    /// The links of [`code`](Self::code).
    fn from_code(code: u64) -> Option<Links> {
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
            100 + (fnv1a(self.to_string().as_bytes()) >> 8)
        }
    }

    /// The links as words to broadcast: the range count, the links' code, then each range's
    /// first size and code.
    fn encode(&self) -> [u64; 2 + 2 * SizedLinks::MAX_RANGES] {
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
    fn decode(words: &[u64; 2 + 2 * SizedLinks::MAX_RANGES]) -> Option<SizedLinks> {
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
    fn new(
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
    fn code(&self) -> u64 {
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

/// The message sizes the calibration times, in bytes.
const SIZES: [usize; 3] = [64, 8 << 10, 128 << 10];
/// The first size of the range each of [`SIZES`] stands for (the ranges meet halfway between
/// the sizes, on a logarithmic scale).
const RANGE_FROM: [usize; 3] = [0, 1 << 10, 32 << 10];
/// Per size, how much faster than a class's path over every size another path must be at
/// that size to take its range. At the small sizes less would follow the noise of a few calls
/// (with 4 PEs on 2 cores a margin of a tenth let single calibrations take the put across
/// nodes for 1-32 KiB, where it is 4x MPI's time). At the large size, bound by the links'
/// bandwidth, a path within the noise of the best costs a few per cent and MPI's send-receive
/// swings between launches (across 1 Gbit, 128 KiB in 1.2 to 2.6 ms while the get took 1.2 to
/// 1.6 ms, never more than 4 % slower than MPI): the fastest takes it.
const SIZE_MARGIN: [f64; 3] = [0.7, 0.7, 1.0];
/// Timed calls per size at most (after two to warm up).
const REPEATS: [usize; 3] = [40, 20, 8];
/// Timed calls per size at least.
const MIN_REPEATS: usize = 3;
/// Time per path, class and size after which no round of calls follows the least ones: a
/// path whose calls take milliseconds (a peer descheduled, a slow transport) is measured by a
/// few.
const BUDGET: Duration = Duration::from_millis(25);

impl Runtime {
    /// The paths [`ExchangePath::Auto`] exchanges take to the PEs of this node and to the
    /// others: from [`env::TRANSPORT`], the cache of an earlier calibration, or a calibration
    /// now (see [the module](crate::links)); settled at the first call and the same on every
    /// PE. A calibration takes a fraction of a second (a few hundred send-receive calls
    /// between three PEs).
    ///
    /// # Collective
    /// Every PE must call it (creating an `Auto` exchange does).
    ///
    /// # Errors
    /// On every PE: [`Error::Environment`] when [`env::TRANSPORT`] is malformed or differs
    /// between PEs; what an exchange of the calibration reports.
    pub fn collective_links(&self) -> Result<Links> {
        Ok(self.collective_sized_links()?.links)
    }

    /// The links of [`collective_links`](Self::collective_links) with the paths the
    /// calibration found fastest per range of message sizes ([`SizedLinks`]): what an
    /// [`ExchangePath::Auto`] exchange follows once [`Exchange::collective_reserve`] has told it
    /// the size of its messages.
    ///
    /// # Collective
    /// As [`collective_links`](Self::collective_links).
    ///
    /// # Errors
    /// As [`collective_links`](Self::collective_links).
    pub fn collective_sized_links(&self) -> Result<SizedLinks> {
        if let Some(choice) = self.link_choice() {
            return Ok(choice.sized());
        }
        let value = std::env::var(env::TRANSPORT).unwrap_or_default();
        let setting = parse_transport(&value);
        let code = setting.as_ref().map_or(AGREE_TOP, |s| s.code());
        let mut agreed = [code, AGREE_TOP - code];
        self.max_u64(&mut agreed)?;
        let setting = match setting {
            Err(e) => {
                return Err(Error::Environment { variable: env::TRANSPORT, value, problem: e.to_string() });
            }
            Ok(_) if agreed[0] != AGREE_TOP - agreed[1] => {
                return Err(Error::Environment {
                    variable: env::TRANSPORT,
                    value,
                    problem: "the PEs were given different values (or some a malformed one): set \
                              the same on every PE"
                        .to_string(),
                });
            }
            Ok(setting) => setting,
        };
        let choice = match setting {
            TransportSetting::Links(sized) => LinkChoice::new(sized, LinksSource::Environment, Vec::new()),
            TransportSetting::Auto | TransportSetting::Calibrate => {
                // Named by the candidates: a calibration among fewer paths is not reused.
                let cache = self.collective_cache_file(CACHE_NAME)?;
                let cached = match (&cache, setting) {
                    (Some(file), TransportSetting::Auto) if self.my_pe() == 0 => read_cache(file),
                    _ => None,
                };
                let mut words = cached.map_or([0; 2 + 2 * SizedLinks::MAX_RANGES], |l| l.encode());
                self.broadcast(0, &mut words)?;
                match (SizedLinks::decode(&words), cache) {
                    (Some(sized), Some(file)) => LinkChoice::new(sized, LinksSource::Cache(file), Vec::new()),
                    (_, cache) => self.collective_calibrate(cache)?,
                }
            }
        };
        let sized = choice.sized();
        *self.links.lock().unwrap_or_else(|p| p.into_inner()) = Some(choice);
        Ok(sized)
    }

    /// Sets the links [`ExchangePath::Auto`] exchanges created from now on take, in place of
    /// a calibration or [`env::TRANSPORT`]: [`Links`], or [`SizedLinks`] with paths per range
    /// of message sizes.
    ///
    /// # Collective
    /// Every PE must call it, with the same links.
    ///
    /// # Errors
    /// On every PE: [`Error::CollectiveArgument`] when the PEs pass different links;
    /// [`Error::InvalidArgument`] for a link on the buffered or `Auto` path, or ranges of sizes
    /// not ascending or too many.
    pub fn collective_set_links(&self, links: impl Into<SizedLinks>) -> Result<()> {
        let sized = links.into();
        self.collective_agree_links(&sized, "collective_set_links")?;
        *self.links.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(LinkChoice::new(sized, LinksSource::Set, Vec::new()));
        Ok(())
    }

    /// Checks that `links` serve (on every PE) and are the same on every PE, for `what`.
    ///
    /// # Collective
    /// One reduction.
    pub(crate) fn collective_agree_links(&self, links: &SizedLinks, what: &str) -> Result<()> {
        let valid = links.check();
        let code = if valid.is_ok() { links.code() } else { 0 };
        let mut agreed = [code, AGREE_TOP - code];
        self.max_u64(&mut agreed)?;
        valid?;
        if agreed[0] != AGREE_TOP - agreed[1] {
            return Err(Error::CollectiveArgument(format!(
                "{what}: the PEs pass different links (or some pass links that cannot serve); \
                 every PE must pass the same"
            )));
        }
        Ok(())
    }

    /// The links settled so far, where they came from and what was measured; `None` before
    /// the first [`collective_links`](Self::collective_links).
    pub fn link_choice(&self) -> Option<LinkChoice> {
        self.links.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The cache file for this job's calibration of `what` (PE 0's path; `None` where no
    /// cache directory can be found): its name holds `what`, the implementation, the PE
    /// count, the nodes, a hash of their host names and the settings that change the paths'
    /// speed.
    ///
    /// # Collective
    /// One reduction over the world.
    pub(crate) fn collective_cache_file(&self, what: &str) -> Result<Option<PathBuf>> {
        use mpi::collective::SystemOperation;
        use mpi::traits::CommunicatorCollectives;
        // One term per node, from its first PE: the host's hash and a count.
        let leader = self.node_pes().first() == Some(&self.my_pe());
        let host = crate::layout::host_name();
        let mine = if leader { [fnv1a(host.as_bytes()) >> 12, 1] } else { [0, 0] };
        let mut sum = [0u64; 2];
        crate::watchdog::watch("MPI_Allreduce (the host set)", None, || {
            self.world().all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
        });
        let dir = std::env::var_os(env::CACHE_DIR)
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("onesided")))
            .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/onesided")));
        let access = match self.same_node_access() {
            crate::SameNodeAccess::ImplementationMapping => "mapped",
            crate::SameNodeAccess::SharedHeaps => "shared",
            crate::SameNodeAccess::LibraryCalls(_) => "calls",
        };
        Ok(dir.map(|d| {
            d.join(format!(
                "{what}-{:?}-{}pes-{}nodes-{:013x}-{access}.txt",
                self.implementation(),
                self.n_pes(),
                sum[1],
                sum[0] & ((1 << 52) - 1)
            ))
        }))
    }

    /// Times each candidate path between PE 0 and a PE of its node and one of another node,
    /// chooses per link class, and writes the choice to `cache`.
    ///
    /// # Collective
    /// Every PE takes part in the exchanges' creation and the final broadcast.
    fn collective_calibrate(&self, cache: Option<PathBuf>) -> Result<LinkChoice> {
        let start = Instant::now();
        let me = self.my_pe();
        // PE 0's partners: the first other PE of its node and the first PE of another node.
        let mut pair = [u64::MAX; 2];
        if me == 0 {
            let node = self.node_pes();
            // Where the node's PEs outnumber its cores, a call between two of them while the
            // others sleep says nothing of the job, whose PEs all run: MPI's waits poll
            // without yielding and take the cores from the rest, which the one-sided waits
            // leave them. The node's link then keeps the one-sided put, unmeasured.
            if let Some(&p) = node.iter().find(|&&p| p != 0).filter(|_| !self.oversubscribed()) {
                pair[0] = p as u64;
            }
            // The node's PEs are sorted: the first PE not among them is the first gap.
            let first_other = node.iter().enumerate().find(|&(i, &p)| p != i).map_or(node.len(), |(i, _)| i);
            if first_other < self.n_pes() {
                pair[1] = first_other as u64;
            }
        }
        self.broadcast(0, &mut pair)?;
        let pair = pair.map(|p| (p != u64::MAX).then_some(p as usize));
        let partners: Vec<usize> = match me {
            0 => pair.iter().flatten().copied().collect(),
            _ if pair.contains(&Some(me)) => vec![0],
            _ => Vec::new(),
        };
        let largest = SIZES[SIZES.len() - 1] / 8;
        let inbox = SymArray::<u64>::collective_alloc(self, "link calibration inbox", largest)?;
        let data: Vec<u64> = (0..largest as u64).map(|i| i ^ (me as u64) << 40).collect();
        // Slot 0: the job's release at the end; slot 1: PE 0's go to the peer of a class.
        let released = crate::SignalArray::collective_alloc(self, "link calibration release", 2)?;
        // Every collective step comes before the measurements, so that the PEs not measuring
        // wait in the release below, not spinning in a collective.
        let mut exchanges = Vec::with_capacity(LINK_PATHS.len());
        for path in LINK_PATHS {
            match Exchange::<u64>::collective_with_partners(self, "link calibration", path, &partners) {
                Ok(mut exchange) => {
                    exchange.collective_reserve(largest)?;
                    exchanges.push(Some(exchange));
                }
                // No window over the heaps (Open MPI without a one-sided component that reaches
                // every PE): the MPI one-sided path is left out, as every PE learns alike.
                Err(_) if path == ExchangePath::MpiRma => exchanges.push(None),
                Err(e) => return Err(e),
            }
        }
        // Median per (class, path, size), as nanoseconds, PE 0's.
        let mut medians = [0u64; 2 * LINK_PATHS.len() * SIZES.len()];
        // One class after the other, every path of it, with the other class's peer waiting for
        // PE 0's go (not in an exchange's wait, which on MPI polls without yielding), napping
        // as every PE not measured does: only the pair measured runs, so that where the job's
        // PEs share cores (emulated nodes on one machine) a third PE's polling is not what is
        // timed.
        for (class, peer) in pair.iter().enumerate() {
            let Some(peer) = *peer else { continue };
            let other = if me == 0 {
                released.set(peer, 1, 1)?;
                peer
            } else if me == peer {
                released.wait_ge_idle(1, 1)?;
                0
            } else {
                continue;
            };
            // Per size, the paths take turns call by call, so that what changes during the
            // measurement (a TCP connection's window, a peer's core taken) falls on all of
            // them alike: measured one after the other, MPI's median at 128 KiB across 1 Gbit
            // links came out 1.4 or 2.4 ms from one calibration to the next.
            for (s, (&bytes, &repeats)) in SIZES.iter().zip(&REPEATS).enumerate() {
                let count = bytes / 8;
                let mut times = vec![Vec::with_capacity(repeats); exchanges.len()];
                let mut message = data[..count].to_vec();
                let started = Instant::now();
                for round in 0.. {
                    // PE 0 decides whether another round follows and says so in the first
                    // word of its messages, so that both sides stop after the same one: after
                    // the repeats, or once the budget is spent with a few timed.
                    if me == 0 {
                        let timed = round.max(2) - 2;
                        let more = timed + 1 < repeats
                            && (timed + 1 < MIN_REPEATS || started.elapsed() < BUDGET * PATHS as u32);
                        message[0] = u64::from(round < 2 || more);
                    }
                    for (p, exchange) in exchanges.iter_mut().enumerate() {
                        let Some(exchange) = exchange else { continue };
                        let begin = Instant::now();
                        exchange
                            .call(&[&inbox])
                            .send(&[Outgoing::Copy { to: other, data: &message }])
                            .receive(&[Incoming { from: other, buffer: 0, offset: 0, room: largest }])
                            .run()?;
                        if round >= 2 {
                            times[p].push(begin.elapsed().as_nanos() as u64);
                        }
                    }
                    let go_on = if me == 0 { message[0] } else { inbox.get_value(me, 0)? };
                    if go_on == 0 {
                        break;
                    }
                }
                for (p, mut times) in times.into_iter().enumerate() {
                    times.sort_unstable();
                    // A path left out never wins.
                    medians[(class * LINK_PATHS.len() + p) * SIZES.len() + s] =
                        times.get(times.len() / 2).copied().unwrap_or(u64::MAX);
                }
            }
        }
        // The PEs that did not measure waited napping, which leaves the cores to the measuring
        // PEs; PE 0 releases them down a binary tree, each PE its two children, so that no PE
        // sends more than two signals.
        if me != 0 {
            released.wait_ge_idle(0, 1)?;
        }
        for child in [2 * me + 1, 2 * me + 2] {
            if child < self.n_pes() {
                released.set(child, 0, 1)?;
            }
        }
        self.broadcast(0, &mut medians)?;
        // Per class, the path whose times summed as ratios to the fastest at each size are the
        // least; a class with no PE to measure keeps the put path.
        let median =
            |class: usize, p: usize, s: usize| medians[(class * LINK_PATHS.len() + p) * SIZES.len() + s];
        let choose = |class: usize| {
            if pair[class].is_none() {
                return ExchangePath::Put;
            }
            let score = |p: usize| -> f64 {
                (0..SIZES.len())
                    .map(|s| {
                        let best =
                            (0..LINK_PATHS.len()).map(|q| median(class, q, s)).min().unwrap_or(1).max(1);
                        median(class, p, s) as f64 / best as f64
                    })
                    .sum()
            };
            let best = (0..LINK_PATHS.len()).min_by(|&a, &b| score(a).total_cmp(&score(b))).unwrap_or(0);
            LINK_PATHS[best]
        };
        let links = Links { same_node: choose(0), other_node: choose(1) };
        // Per range of sizes, the path fastest at its measured size where it beats the class's
        // own path there by the margin.
        let fastest_at = |class: usize, s: usize, path: ExchangePath| {
            let own = LINK_PATHS.iter().position(|&p| p == path).unwrap_or(0);
            let best = (0..LINK_PATHS.len()).min_by_key(|&q| median(class, q, s)).unwrap_or(own);
            let faster = (median(class, best, s) as f64) < SIZE_MARGIN[s] * median(class, own, s) as f64;
            if pair[class].is_some() && faster { LINK_PATHS[best] } else { path }
        };
        let ranges = (0..SIZES.len()).map(|s| {
            let at = Links {
                same_node: fastest_at(0, s, links.same_node),
                other_node: fastest_at(1, s, links.other_node),
            };
            (RANGE_FROM[s], at)
        });
        // Only the ranges whose links differ from those below them (the first's from the
        // links over every size), which hold until the next.
        let mut by_size: Vec<(usize, Links)> = Vec::new();
        for (from, at) in ranges {
            if at != by_size.last().map_or(links, |&(_, below)| below) {
                by_size.push((from, at));
            }
        }
        let mut measured = Vec::new();
        for (class, peer) in pair.iter().enumerate() {
            if peer.is_some() {
                for (p, &path) in LINK_PATHS.iter().enumerate() {
                    for (s, &bytes) in
                        SIZES.iter().enumerate().filter(|&(s, _)| median(class, p, s) != u64::MAX)
                    {
                        measured.push((class == 0, path, bytes, Duration::from_nanos(median(class, p, s))));
                    }
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let sized = SizedLinks { links, by_size };
        let written = match &cache {
            Some(file) if me == 0 => write_cache(file, &sized, &measured).then(|| file.clone()),
            _ => cache,
        };
        Ok(LinkChoice::new(sized, LinksSource::Calibrated { seconds, cache: written }, measured))
    }
}

/// The links a cache file holds, if it holds them well formed.
fn read_cache(file: &std::path::Path) -> Option<SizedLinks> {
    read_choice(file, "links")?.parse().ok()
}

/// Writes the calibration's choice and measurements to `file`; whether it could.
fn write_cache(
    file: &std::path::Path,
    links: &SizedLinks,
    measured: &[(bool, ExchangePath, usize, Duration)],
) -> bool {
    let notes: Vec<String> = measured
        .iter()
        .map(|(same, path, bytes, time)| {
            let class = if *same { "same-node" } else { "other-node" };
            format!("{class} {path} {bytes} B: {:.2} us", time.as_secs_f64() * 1e6)
        })
        .collect();
    write_choice(file, "links", &links.to_string(), &notes)
}

/// The value of the line `KEY VALUE` of a cache file.
pub(crate) fn read_choice(file: &std::path::Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| Some(l.strip_prefix(key)?.strip_prefix(' ')?.trim().to_string()))
}

/// Writes `KEY VALUE` and the `notes` (as comments) to a cache file; whether it could.
pub(crate) fn write_choice(file: &std::path::Path, key: &str, value: &str, notes: &[String]) -> bool {
    let mut text = format!("{key} {value}\n");
    for note in notes {
        text.push_str(&format!("# {note}\n"));
    }
    let parent_made = file.parent().is_none_or(|d| std::fs::create_dir_all(d).is_ok());
    // Written beside and renamed, so that a concurrent reader never sees half a file.
    let temporary = file.with_extension(format!("tmp{}", std::process::id()));
    parent_made && std::fs::write(&temporary, text).is_ok() && std::fs::rename(&temporary, file).is_ok()
}

/// The 64-bit FNV-1a hash: stable across builds, unlike the standard library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
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
        assert!(sized.code() < AGREE_TOP);
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

    #[test]
    fn a_cache_file_gives_back_its_links() {
        let dir = std::env::temp_dir().join(format!("onesided-links-{}", std::process::id()));
        let file = dir.join("links.txt");
        let links = Links { same_node: ExchangePath::Get, other_node: ExchangePath::Mpi };
        let measured = [(false, ExchangePath::Mpi, 64, Duration::from_micros(25))];
        assert!(write_cache(&file, &links.into(), &measured));
        assert_eq!(read_cache(&file), Some(links.into()));
        let sized =
            SizedLinks { links, by_size: vec![(0, links), (32 << 10, Links::uniform(ExchangePath::Get))] };
        assert!(write_cache(&file, &sized, &measured));
        assert_eq!(read_cache(&file), Some(sized));
        std::fs::write(&file, "links same-node=carrier-pigeon\n").unwrap();
        assert_eq!(read_cache(&file), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
