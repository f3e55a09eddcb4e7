//! The calibration of the links ([`Links`]) that [`Path::Auto`](crate::Path::Auto) exchanges
//! take.
//!
//! The runtime settles the links once, at the first [`Runtime::collective_links`]: from
//! [`env::TRANSPORT`] when it names them; else from the cache file of an earlier calibration
//! of the same implementation, hosts, PE count and same-node access; else by calibrating. The
//! calibration times send-receive calls between PE 0 and one PE of its node, then one PE of
//! another node, on each candidate path (the one-sided put and get paths, MPI two-sided and
//! MPI one-sided, which is left out where MPI cannot make its window), at three message sizes.
//! Each class of link takes the path whose times are the least, summed as ratios to the
//! fastest at each size ([`Links`]), and each range of sizes around a measured one the path
//! fastest there where it beats that choice by over 30 %, or at all at the largest,
//! bandwidth-bound size ([`Links::by_size`], which an exchange follows once told the size of
//! its messages by [`Exchange::collective_reserve`]). PE 0 broadcasts its medians and every
//! PE derives the same links from them. Only the pair measured runs: every other PE waits
//! napping between polls, leaving it the cores, until PE 0 releases them down a binary tree.
//! Where PE 0's node runs more PEs than it has cores ([`Runtime::oversubscribed`]), the
//! same-node link keeps the one-sided put unmeasured: two PEs timed while the others sleep
//! cannot show what MPI's polling costs the rest. Each path, class and size is timed at most
//! 25 ms beyond three calls, so a slow path costs the calibration little.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::exchange::Exchange;
use super::message::{Incoming, Outgoing};
use super::partners::Partners;
use crate::agree::{Agreement, TOP};
use crate::cache::{read_choice, write_choice};
use crate::collective::Collectives;
use crate::env;
use crate::error::{Error, Result};
use crate::heap::SymArray;
use crate::links::{Links, LinksSource, Measured, TRANSPORTS, TransportSetting, parse_transport};
use crate::path::{Path, Transport};
use crate::runtime::Runtime;
use crate::signal::SignalArray;

/// The cache file's name's first part: the links, among this many paths.
const CACHE_NAME: &str = "links-by-size-4paths";

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
    /// The transports [`Path::Auto`](crate::Path::Auto) exchanges take to the PEs of this
    /// node and to the others, with those a calibration found faster per range of message
    /// sizes ([`Links::by_size`]): from [`env::TRANSPORT`], the cache of an earlier
    /// calibration, or a calibration now (it times the transports between PE 0 and a PE of
    /// its node and one of another node, at three sizes of message); settled at the first
    /// call and the same on every PE, after which a call returns them at once. A calibration
    /// takes a fraction of a second (a few hundred send-receive calls between three PEs).
    /// [`Links::source`] says where they came from and what was measured.
    ///
    /// # Collective
    /// Every PE must call it (creating an `Auto` exchange does).
    ///
    /// # Errors
    /// On every PE: [`Error::Environment`] when [`env::TRANSPORT`] is malformed or differs
    /// between PEs; what an exchange of the calibration reports.
    pub fn collective_links(&self) -> Result<Links> {
        if let Some(links) = self.links.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Ok(links);
        }
        let value = std::env::var(env::TRANSPORT).unwrap_or_default();
        let setting = parse_transport(&value);
        let mut agreement = Agreement::new();
        let same = agreement.same(setting.as_ref().map_or(TOP, |s| s.code()));
        let same = agreement.collective_run(self)?.get(same);
        let setting = match setting {
            Err(e) => {
                return Err(Error::Environment { variable: env::TRANSPORT, value, problem: e.to_string() });
            }
            Ok(_) if !same => {
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
        let links = match setting {
            TransportSetting::Links(links) => links.with_source(LinksSource::Environment),
            TransportSetting::Auto | TransportSetting::Calibrate => {
                // Named by the candidates: a calibration among fewer transports is not reused.
                let cache = self.collective_cache_file(CACHE_NAME)?;
                let cached = match (&cache, setting) {
                    (Some(file), TransportSetting::Auto) if self.my_pe() == 0 => read_cache(file),
                    _ => None,
                };
                let mut words = cached.map_or([0; 2 + 2 * Links::MAX_RANGES], |l| l.encode());
                self.broadcast(0, &mut words)?;
                match (Links::decode(&words), cache) {
                    (Some(links), Some(file)) => links.with_source(LinksSource::Cache(file)),
                    (_, cache) => self.collective_calibrate(cache)?,
                }
            }
        };
        *self.links.lock().unwrap_or_else(|p| p.into_inner()) = Some(links.clone());
        Ok(links)
    }

    /// Sets the links [`Path::Auto`](crate::Path::Auto) exchanges created from now on take,
    /// in place of a calibration or [`env::TRANSPORT`].
    ///
    /// # Collective
    /// Every PE must call it, with the same links.
    ///
    /// # Errors
    /// On every PE: [`Error::CollectiveArgument`] when the PEs pass different links;
    /// [`Error::InvalidArgument`] for a link on the buffered transport, or ranges of sizes
    /// not ascending or too many.
    pub fn collective_set_links(&self, links: Links) -> Result<()> {
        self.collective_agree_links(&links, "collective_set_links")?;
        *self.links.lock().unwrap_or_else(|p| p.into_inner()) = Some(links.with_source(LinksSource::Program));
        Ok(())
    }

    /// Checks that `links` serve (on every PE) and are the same on every PE, for `what`.
    ///
    /// # Collective
    /// One reduction.
    pub(crate) fn collective_agree_links(&self, links: &Links, what: &str) -> Result<()> {
        let valid = links.check();
        let mut agreement = Agreement::new();
        let same = agreement.same(if valid.is_ok() { links.code() } else { 0 });
        let same = agreement.collective_run(self)?.get(same);
        valid?;
        if !same {
            return Err(Error::CollectiveArgument(format!(
                "{what}: the PEs pass different links (or some pass links that cannot serve); \
                 every PE must pass the same"
            )));
        }
        Ok(())
    }

    /// Times each candidate path between PE 0 and a PE of its node and one of another node,
    /// chooses per link class, and writes the choice to `cache`.
    ///
    /// # Collective
    /// Every PE takes part in the exchanges' creation and the final broadcast.
    fn collective_calibrate(&self, cache: Option<PathBuf>) -> Result<Links> {
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
        let released = SignalArray::collective_alloc(self, "link calibration release", 2)?;
        // Every collective step comes before the measurements, so that the PEs not measuring
        // wait in the release below, not spinning in a collective.
        let mut exchanges = Vec::with_capacity(Transport::LINKS.len());
        for path in Transport::LINKS {
            // Built on the path itself, beneath the constructors that settle an Auto
            // exchange's links by this calibration.
            let name = "link calibration";
            let built = Partners::collective_listed(self, name, &partners).and_then(|listed| {
                Exchange::<u64>::collective_on(self, name, Path::Auto, Links::uniform(path), listed)
            });
            match built {
                Ok(mut exchange) => {
                    exchange.collective_reserve(largest)?;
                    exchanges.push(Some(exchange));
                }
                // No window over the heaps (Open MPI without a one-sided component that reaches
                // every PE): the MPI one-sided path is left out, as every PE learns alike.
                Err(_) if path == Transport::MpiRma => exchanges.push(None),
                Err(e) => return Err(e),
            }
        }
        // Median per (class, path, size), as nanoseconds, PE 0's.
        let mut medians = [0u64; 2 * Transport::LINKS.len() * SIZES.len()];
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
                            && (timed + 1 < MIN_REPEATS || started.elapsed() < BUDGET * TRANSPORTS as u32);
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
                    medians[(class * Transport::LINKS.len() + p) * SIZES.len() + s] =
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
        let median = |class: usize, p: usize, s: usize| {
            medians[(class * Transport::LINKS.len() + p) * SIZES.len() + s]
        };
        let choose = |class: usize| {
            if pair[class].is_none() {
                return Transport::Put;
            }
            let score = |p: usize| -> f64 {
                (0..SIZES.len())
                    .map(|s| {
                        let best = (0..Transport::LINKS.len())
                            .map(|q| median(class, q, s))
                            .min()
                            .unwrap_or(1)
                            .max(1);
                        median(class, p, s) as f64 / best as f64
                    })
                    .sum()
            };
            let best =
                (0..Transport::LINKS.len()).min_by(|&a, &b| score(a).total_cmp(&score(b))).unwrap_or(0);
            Transport::LINKS[best]
        };
        let (same_node, other_node) = (choose(0), choose(1));
        // Per range of sizes, the path fastest at its measured size where it beats the class's
        // own path there by the margin.
        let fastest_at = |class: usize, s: usize, path: Transport| {
            let own = Transport::LINKS.iter().position(|&p| p == path).unwrap_or(0);
            let best = (0..Transport::LINKS.len()).min_by_key(|&q| median(class, q, s)).unwrap_or(own);
            let faster = (median(class, best, s) as f64) < SIZE_MARGIN[s] * median(class, own, s) as f64;
            if pair[class].is_some() && faster { Transport::LINKS[best] } else { path }
        };
        let ranges = (0..SIZES.len())
            .map(|s| (RANGE_FROM[s], fastest_at(0, s, same_node), fastest_at(1, s, other_node)));
        // Only the ranges whose links differ from those below them (the first's from the
        // links over every size), which hold until the next.
        let mut links = Links::new(same_node, other_node);
        for (from, same, other) in ranges {
            let below = links.by_size.last().map_or((same_node, other_node), |&(_, s, o)| (s, o));
            if (same, other) != below {
                links = links.from_bytes(from, same, other);
            }
        }
        let mut measured = Vec::new();
        for (class, peer) in pair.iter().enumerate() {
            if peer.is_some() {
                for (p, &transport) in Transport::LINKS.iter().enumerate() {
                    for (s, &bytes) in
                        SIZES.iter().enumerate().filter(|&(s, _)| median(class, p, s) != u64::MAX)
                    {
                        let time = Duration::from_nanos(median(class, p, s));
                        measured.push(Measured { same_node: class == 0, transport, bytes, time });
                    }
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let written = match &cache {
            Some(file) if me == 0 => write_cache(file, &links, &measured).then(|| file.clone()),
            _ => cache,
        };
        Ok(links.with_source(LinksSource::Calibrated { seconds, cache: written, measured }))
    }
}

/// The links a cache file holds, if it holds them well formed.
fn read_cache(file: &std::path::Path) -> Option<Links> {
    read_choice(file, "links")?.parse().ok()
}

/// Writes the calibration's choice and measurements to `file`; whether it could.
fn write_cache(file: &std::path::Path, links: &Links, measured: &[Measured]) -> bool {
    let notes: Vec<String> = measured
        .iter()
        .map(|m| {
            let class = if m.same_node { "same-node" } else { "other-node" };
            format!("{class} {} {} B: {:.2} us", m.transport, m.bytes, m.time.as_secs_f64() * 1e6)
        })
        .collect();
    write_choice(file, "links", &links.to_string(), &notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_file_gives_back_its_links() {
        let dir = std::env::temp_dir().join(format!("onesided-links-{}", std::process::id()));
        let file = dir.join("links.txt");
        let links = Links::new(Transport::Get, Transport::Mpi);
        let time = Duration::from_micros(25);
        let measured = [Measured { same_node: false, transport: Transport::Mpi, bytes: 64, time }];
        assert!(write_cache(&file, &links, &measured));
        assert_eq!(read_cache(&file), Some(links.clone()));
        let sized = links.clone().from_bytes(0, Transport::Get, Transport::Mpi).from_bytes(
            32 << 10,
            Transport::Get,
            Transport::Get,
        );
        assert!(write_cache(&file, &sized, &measured));
        assert_eq!(read_cache(&file), Some(sized));
        std::fs::write(&file, "links same-node=carrier-pigeon\n").unwrap();
        assert_eq!(read_cache(&file), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
