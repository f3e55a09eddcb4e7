//! What the halo exchange and PME communicate per rank per step at 16 to 4096 ranks, from the
//! real plans, with a predicted communication time per path. Runs in one process: no launcher,
//! no runtime.
//!
//! ```text
//! cargo run --release --example scale_model -- --atoms 1000000 --ranks 64,512,4096
//! ```
//!
//! For a system (`--gro FILE`, default the SPC water box, replicated to at least `--atoms N`
//! atoms, default 100 000, or `--replicate NX,NY,NZ`) and each rank count (`--ranks`, default
//! 16,64,256,512,1024,4096), it builds:
//!
//! - the domain decomposition over the particle ranks ([`md_halo::DdGrid::choose`]) and
//!   every domain's halo plan ([`md_halo::model::halo_traffic`], the same counts the ranks'
//!   own plans have), with the range `--cutoff` (default 1.0 nm) plus `--buffer` (0.1 nm);
//! - the PME grid (`--spacing`, default 0.12 nm) over `--pme-fraction` of the ranks (default
//!   0.25, as separate PME ranks), decomposed as `--pme-decomposition` says (default `auto`:
//!   slabs while each holds at least 2 (order - 1) planes, else pencils of the most ranks up
//!   to that fraction that split into pencils at least the interpolation order thick each way,
//!   [`pme_redist::PmeGrid::pencil_dims`]; `slab` caps the ranks at a quarter of the x
//!   planes);
//! - each particle rank's partners from the library's own plan
//!   ([`pme_redist::model::planned_targets`], with the displacement margin `--margin`, default
//!   0.1 nm): the PME ranks its atoms can reach, and the bound on what each can receive.
//!
//! - with `--routing relay` (default `both`, a line each), each particle rank's relay
//!   ([`pme_redist::PmeGrid::relay_rank`]), which sends the atoms it received on to the PME
//!   ranks they can reach, as a particle rank would (its targets from the same plan).
//!
//! Per rank per step it prints the halo exchange's messages and bytes (coordinates out and
//! forces back, 12 bytes per atom each way, one message per pulse to another rank), the PME
//! redistribution's (one message per target each way, 20 bytes per atom out and 12 back, as
//! the `mpi` path sends them; the PME ranks' vote on each step's error rides in the FFT
//! transposes as the examples run it, or with `--vote own` costs ⌈log₂ M⌉ rounds each way),
//! mean and most over ranks; the redistribution's buffer memory per PE on each kind of path
//! (as the library allocates it: symmetric where other PEs read or write a buffer, the most
//! any PE needs on every PE; this PE's own need elsewhere, every buffer on the MPI paths; a
//! fifth over), the most of any PE and the most of any PE's against the bytes of the atoms it
//! holds (home atoms; on a PME rank the most any hop brings it, 32 bytes each);
//! and the FFT transposes' (slabs: one all-to-all among the PME ranks per direction;
//! pencils: one within each row and one within each column). The share of halo messages below
//! 4 KiB goes beside the 2013 report's 70–80 % at 512–768 ranks, with the histogram of halo
//! message sizes, and a predicted time per step per path: per pulse `α + bytes / β` (pulses
//! run one after another, a rank's step is as slow as its slowest pulse partner, so the
//! maximum over ranks), for the redistribution the slowest particle rank (its messages, two
//! more latencies per target on the one-sided put path: the announcement and the offer) or
//! the busiest PME rank (its sources' latencies and bytes, and the vote), and per transpose
//! `(n - 1)(α + block / β)` over its `n` ranks.
//!
//! `α` and `β` come from the ping-pong benchmark between 2 PEs on one node of this machine
//! (docs/bench/RESULTS.md): one-sided 8 B in 77 ns and 4 MiB in 225 µs per round trip, MPI
//! 466 ns and 999 µs. `--path NAME:ALPHA_US:GB_PER_S` adds a path (repeatable), such as one
//! measured across nodes.
//!
//! `--links FILE` (repeatable) adds the paths a links calibration measured, from its cache
//! file (`ONESIDED_CACHE_DIR`, `links-by-size-4paths-*.txt`): each path it timed (`cal:NAME`)
//! and `cal:auto`, per class of link the path the calibration chose, as the exchanges' `Path::Auto`
//! takes it (a halo pulse's messages on the path of their size's range where the calibration
//! chose per size, as a halo reserves them); each with an `α` and `β` per class (to ranks on the same node and to the
//! others), fitted to the calibration's send-receive calls (a class no file measured takes
//! the other's). Every message, transpose block and redistribution source is then costed on
//! the link between its two ranks, `--ranks-per-node K` a node (default 1: every link
//! crosses), the PME ranks interleaved with the particle ranks as GROMACS places them.
//! `--svg FILE` draws the predicted halo time per step against ranks.

use std::path::PathBuf;

use md_demo::Structure;
use md_halo::DdGrid;
use md_halo::model::{BalanceTraffic, balance_traffic, halo_traffic};
use onesided_suite::cli;
use onesided_suite::report::{Point, svg_labelled};
use pme_redist::model::{planned_stage_targets, planned_targets};
use pme_redist::spline::DEFAULT_ORDER as ORDER;
use pme_redist::{Particle, PmeDecomposition, PmeGrid, RVec};

/// One class of link's cost: a message of `b` bytes takes `alpha + b / beta` seconds, and a
/// redistribution target costs `extra` latencies beyond one message each way.
#[derive(Clone, Copy, Debug)]
struct Link {
    alpha: f64,
    beta: f64,
    extra: f64,
}

impl Link {
    fn time(&self, bytes: usize) -> f64 {
        self.alpha + bytes as f64 / self.beta
    }
}

/// A transport's cost model: a [`Link`] to ranks on the same node and one to the others.
#[derive(Clone, Debug)]
struct Path {
    name: String,
    same: Link,
    other: Link,
    /// Where the PME redistribution takes one path for every pair, as `Path::Auto` does
    /// when both classes chose MPI or both a one-sided path (the other-node class's where the
    /// job spans nodes): that path's link within a node. `None`: each pair's own link (where
    /// one class chose MPI and the other a one-sided path, `Auto` mixes them per pair).
    redist_far_same: Option<Link>,
    /// `cal:auto`: its transposes take the fastest calibrated path's all-to-all.
    auto: bool,
    /// `cal:auto` where the calibration chose per range of message sizes: from each size in
    /// bytes on, the links to the same node and to others of a halo pulse's messages.
    by_size: Vec<(usize, Link, Link)>,
    source: String,
}

impl Path {
    /// The same link to every rank. The one-sided paths' put path announces, is offered a
    /// place and writes (two latencies more per target); MPI sends once each way.
    fn uniform(name: &str, alpha: f64, beta: f64, source: String) -> Path {
        let extra = if name.starts_with("onesided") { 2.0 } else { 0.0 };
        let link = Link { alpha, beta, extra };
        Path {
            name: name.to_string(),
            same: link,
            other: link,
            redist_far_same: None,
            auto: false,
            by_size: Vec::new(),
            source,
        }
    }

    /// From a ping-pong's round trips of 8 bytes and of 4 MiB.
    fn from_pingpong(name: &str, small_rt: f64, large_rt: f64) -> Path {
        let alpha = small_rt / 2.0;
        let beta = (4 << 20) as f64 / (large_rt / 2.0 - alpha);
        let source =
            format!("ping-pong on one node: 8 B {small_rt:.2e} s, 4 MiB {large_rt:.2e} s per round trip");
        Path::uniform(name, alpha, beta, source)
    }

    /// The link between two ranks, by whether they share a node.
    fn link(&self, same_node: bool) -> &Link {
        if same_node { &self.same } else { &self.other }
    }

    /// The link of a halo pulse's messages of `bytes` between two ranks: the range of their
    /// size's where the calibration chose per size, as an exchange reserved for them takes.
    fn halo_link(&self, same_node: bool, bytes: usize) -> &Link {
        match self.by_size.iter().rev().find(|(from, _, _)| *from <= bytes) {
            Some((_, same, other)) => {
                if same_node {
                    same
                } else {
                    other
                }
            }
            None => self.link(same_node),
        }
    }

    /// The link of the PME redistribution between two ranks, in a job that spans nodes or not.
    fn redist_link(&self, same_node: bool, spans_nodes: bool) -> &Link {
        match &self.redist_far_same {
            Some(far_same) if spans_nodes && same_node => far_same,
            _ => self.link(same_node),
        }
    }
}

/// Which node each rank runs on: `per_node` ranks a node, the particle and PME ranks
/// interleaved in rank order as GROMACS places them by default (`-ddorder interleave`: each
/// PME rank after its share of the particle ranks).
struct Nodes {
    particle: Vec<usize>,
    pme: Vec<usize>,
    /// Whether the ranks take more than one node.
    spans: bool,
}

impl Nodes {
    fn interleaved(n: usize, m: usize, per_node: usize) -> Nodes {
        let (mut particle, mut pme) = (Vec::with_capacity(n), Vec::with_capacity(m));
        let mut rank = 0;
        for q in 0..m {
            for _ in q * n / m..(q + 1) * n / m {
                particle.push(rank / per_node);
                rank += 1;
            }
            pme.push(rank / per_node);
            rank += 1;
        }
        Nodes { particle, pme, spans: rank > per_node }
    }

    /// The node of a sender of a hop: PME rank `me`, or else particle rank `index`.
    fn of_sender(&self, me: Option<usize>, index: usize) -> usize {
        me.map_or(self.particle[index], |q| self.pme[q])
    }
}

/// The paths a links calibration's cache files give (`--links`): each path it measured, and
/// `auto`, per class of link the path chosen by the first file that measured that class, each
/// class's `beta` from the smallest and largest messages' times and `alpha` from the
/// smallest's. A send-receive call's time holds its protocol, so no extra latencies. A class
/// no file measured takes the other's link.
fn calibrated_paths(files: &[PathBuf]) -> Result<Vec<Path>, String> {
    // Per (class, path): (bytes, seconds) measured; per class the path chosen.
    let mut measured: std::collections::BTreeMap<(bool, String), Vec<(f64, f64)>> = Default::default();
    let mut chosen: [Option<String>; 2] = [None, None];
    // The first file's ranges of sizes, each with its paths to the same node and to others.
    let mut ranges: Option<Vec<(usize, [Option<String>; 2])>> = None;
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("--links {}: {e}", file.display()))?;
        let mut named = [None, None];
        let mut classes = [false, false];
        for line in text.lines() {
            if let Some(links) = line.strip_prefix("links ") {
                // "LINKS; from BYTES: LINKS; ..."
                let mut parts = links.split(';');
                named = class_paths(parts.next().unwrap_or_default());
                let listed: Vec<(usize, [Option<String>; 2])> = parts
                    .filter_map(|r| {
                        let (from, links) = r.trim().strip_prefix("from ")?.split_once(':')?;
                        Some((from.trim().parse().ok()?, class_paths(links)))
                    })
                    .collect();
                if ranges.is_none() && !listed.is_empty() {
                    ranges = Some(listed);
                }
            } else if let Some(note) = line.strip_prefix("# ") {
                // "CLASS PATH BYTES B: TIME us"
                let words: Vec<&str> = note.split_whitespace().collect();
                if let [class, path, bytes, "B:", time, "us"] = words.as_slice()
                    && let (Ok(bytes), Ok(time)) = (bytes.parse::<f64>(), time.parse::<f64>())
                {
                    let same = *class == "same-node";
                    classes[usize::from(!same)] = true;
                    measured.entry((same, path.to_string())).or_default().push((bytes, time * 1e-6));
                }
            }
        }
        for c in 0..2 {
            if classes[c] && chosen[c].is_none() {
                chosen[c] = named[c].take();
            }
        }
    }
    let fit = |points: &[(f64, f64)]| -> Option<(f64, f64)> {
        let mut points = points.to_vec();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (&(b1, t1), &(b3, t3)) = (points.first()?, points.last()?);
        // Times that do not grow with size say nothing of a bandwidth (an oversubscribed
        // calibration's, say): no link.
        (b3 > b1 && t3 > t1).then(|| {
            let beta = (b3 - b1) / (t3 - t1);
            ((t1 - b1 / beta).max(0.0), beta)
        })
    };
    let names: std::collections::BTreeSet<String> = measured.keys().map(|(_, p)| p.clone()).collect();
    let link_of = |same: bool, name: &str| {
        let link = |same| measured.get(&(same, name.to_string())).and_then(|p| fit(p));
        link(same).or_else(|| link(!same)).map(|(alpha, beta)| Link { alpha, beta, extra: 0.0 })
    };
    let source = format!(
        "send-receive calls of a links calibration ({})",
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    let mut paths = Vec::new();
    for name in &names {
        if let (Some(same), Some(other)) = (link_of(true, name), link_of(false, name)) {
            let name = format!("cal:{name}");
            paths.push(Path {
                name,
                same,
                other,
                redist_far_same: None,
                auto: false,
                by_size: Vec::new(),
                source: source.clone(),
            });
        }
    }
    // A class no file measured takes the other's choice.
    let [Some(near), Some(far)] =
        [chosen[0].clone().or(chosen[1].clone()), chosen[1].clone().or(chosen[0].clone())]
    else {
        return Err("--links: no file holds a calibration's `links` line and measurements".to_string());
    };
    // Per range, a class the range leaves out takes the put path, as the library reads them.
    let mut by_size = Vec::new();
    for (from, [range_near, range_far]) in ranges.unwrap_or_default() {
        let put = || "onesided-put".to_string();
        let (range_near, range_far) = (range_near.unwrap_or_else(put), range_far.unwrap_or_else(put));
        if let (Some(same), Some(other)) = (link_of(true, &range_near), link_of(false, &range_far)) {
            by_size.push((from, same, other));
        }
    }
    match (link_of(true, &near), link_of(false, &far)) {
        (Some(same), Some(other)) => paths.push(Path {
            name: "cal:auto".to_string(),
            same,
            other,
            redist_far_same: if near.starts_with("mpi") != far.starts_with("mpi") {
                None
            } else {
                link_of(true, &far)
            },
            auto: true,
            by_size,
            source: format!("{near} to the same node, {far} to others; {source}"),
        }),
        _ => {
            return Err(format!(
                "--links: the files do not measure {near} and {far}, the paths chosen, with times \
                 that grow with the message size"
            ));
        }
    }
    Ok(paths)
}

/// The paths of `same-node=PATH,other-node=PATH` (or one `PATH` for both), by class.
fn class_paths(links: &str) -> [Option<String>; 2] {
    let mut named = [None, None];
    for part in links.trim().split(',') {
        match part.trim().split_once('=') {
            Some(("same-node", path)) => named[0] = Some(path.trim().to_string()),
            Some(("other-node", path)) => named[1] = Some(path.trim().to_string()),
            None if !part.trim().is_empty() => {
                named = [Some(part.trim().to_string()), Some(part.trim().to_string())]
            }
            _ => {}
        }
    }
    named
}

struct Options {
    gro: PathBuf,
    atoms: usize,
    replicate: Option<[usize; 3]>,
    ranks: Vec<usize>,
    cutoff: f32,
    buffer: f32,
    spacing: f32,
    pme_fraction: f64,
    decomposition: PmeDecomposition,
    margin: f32,
    routings: Vec<Routing>,
    /// Whether the PME ranks' vote on each step's error rides in the FFT transposes (a step
    /// through `Pme::collective_step`, as the examples run) or costs its own messages (a step
    /// that skips the mesh).
    vote_in_mesh: bool,
    paths: Vec<Path>,
    /// Ranks a node, for the paths whose links differ by class.
    ranks_per_node: usize,
    svg: Option<PathBuf>,
}

const USAGE: &str = "usage: scale_model [--gro FILE] [--atoms N | --replicate NX,NY,NZ] [--ranks R1,R2,...] \
[--cutoff NM] [--buffer NM] [--spacing NM] [--pme-fraction F] [--pme-decomposition slab|pencil|auto] \
[--margin NM] [--routing direct|relay|both] [--vote mesh|own] [--path NAME:ALPHA_US:GB_PER_S]... \
[--links FILE]... [--ranks-per-node K] [--svg FILE]";

fn parse() -> Result<Options, String> {
    let mut options = Options {
        gro: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro")),
        atoms: 100_000,
        replicate: None,
        ranks: vec![16, 64, 256, 512, 1024, 4096],
        cutoff: 1.0,
        buffer: 0.1,
        spacing: 0.12,
        pme_fraction: 0.25,
        decomposition: PmeDecomposition::Auto,
        margin: 0.1,
        routings: vec![Routing::Direct, Routing::Relay],
        vote_in_mesh: true,
        paths: vec![
            Path::from_pingpong("onesided", 77.1e-9, 225e-6),
            Path::from_pingpong("mpi", 466e-9, 999e-6),
        ],
        ranks_per_node: 1,
        svg: None,
    };
    let mut links = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--gro" => options.gro = value()?.into(),
            "--atoms" => options.atoms = cli::positive(&flag, &value()?)? as usize,
            "--replicate" => options.replicate = Some(cli::triple(&flag, &value()?)?),
            "--ranks" => {
                let v = value()?;
                options.ranks = v
                    .split(',')
                    .map(|r| cli::positive(&flag, r.trim()).map(|n| n as usize))
                    .collect::<Result<_, _>>()?;
            }
            "--cutoff" => options.cutoff = cli::length(&flag, &value()?)?,
            "--buffer" => options.buffer = cli::length(&flag, &value()?)?,
            "--spacing" => options.spacing = cli::length(&flag, &value()?)?,
            "--pme-fraction" => {
                let v = value()?;
                options.pme_fraction = v
                    .parse::<f64>()
                    .ok()
                    .filter(|f| *f > 0.0 && *f < 1.0)
                    .ok_or(format!("--pme-fraction needs a number between 0 and 1, got {v:?}"))?;
            }
            "--pme-decomposition" => options.decomposition = value()?.parse().map_err(|e| format!("{e}"))?,
            "--margin" => options.margin = cli::length(&flag, &value()?)?,
            "--vote" => {
                options.vote_in_mesh = match value()?.as_str() {
                    "mesh" => true,
                    "own" => false,
                    other => return Err(format!("--vote needs mesh or own, got {other:?}")),
                }
            }
            "--routing" => {
                options.routings = match value()?.as_str() {
                    "direct" => vec![Routing::Direct],
                    "relay" => vec![Routing::Relay],
                    "both" => vec![Routing::Direct, Routing::Relay],
                    other => return Err(format!("--routing needs direct, relay or both, got {other:?}")),
                }
            }
            "--path" => {
                let v = value()?;
                let parts: Vec<&str> = v.split(':').collect();
                let numbers: Option<(f64, f64)> = match parts.as_slice() {
                    [_, a, b] => a.parse().ok().zip(b.parse().ok()),
                    _ => None,
                };
                let Some((alpha_us, gbps)) = numbers.filter(|(a, b): &(f64, f64)| *a >= 0.0 && *b > 0.0)
                else {
                    return Err(format!(
                        "--path needs NAME:ALPHA_US:GB_PER_S, such as tcp:25:0.11, got {v:?}"
                    ));
                };
                let source = "given on the command line".to_string();
                options.paths.push(Path::uniform(parts[0], alpha_us * 1e-6, gbps * 1e9, source));
            }
            "--links" => links.push(PathBuf::from(value()?)),
            "--ranks-per-node" => options.ranks_per_node = cli::positive(&flag, &value()?)? as usize,
            "--svg" => options.svg = Some(value()?.into()),
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    if !links.is_empty() {
        options.paths.extend(calibrated_paths(&links)?);
    }
    Ok(options)
}

fn main() {
    let options = parse().unwrap_or_else(|e| {
        eprintln!("scale_model: {e}");
        std::process::exit(2)
    });
    if let Err(e) = run(&options) {
        eprintln!("scale_model: {e}");
        std::process::exit(1);
    }
}

/// Upper bounds of the message-size histogram's bins, in bytes (the last is open).
const BINS: [usize; 6] = [256, 1024, 4096, 16384, 65536, usize::MAX];
const BIN_NAMES: [&str; 6] = ["<256 B", "<1 KiB", "<4 KiB", "<16 KiB", "<64 KiB", ">=64 KiB"];

/// What one rank count gives.
struct Row {
    ranks: usize,
    dims: [usize; 3],
    pme_ranks: usize,
    grid: [usize; 3],
    home: f64,
    halo_msgs: f64,
    halo_bytes: f64,
    halo_max_bytes: usize,
    histogram: [usize; 6],
    /// `[px, py]` of the PME decomposition.
    pme_dims: [usize; 2],
    /// The redistribution under each routing modelled.
    redist: Vec<Redist>,
    fft_block: usize,
    /// Predicted seconds per step per path: halo, FFT transposes.
    halo_time: Vec<f64>,
    fft_time: Vec<f64>,
    /// Load balancing at a repartition that moves the boundaries, most over the particle
    /// ranks, and the grid's rows whole for comparison.
    balance: BalanceTraffic,
    whole_grid: usize,
}

fn run(options: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let base = Structure::read_gro(&options.gro)?;
    let copies = options.replicate.unwrap_or_else(|| {
        // The fewest cubic-ish copies that reach the requested atoms.
        let per = (options.atoms as f64 / base.len() as f64).cbrt().ceil().max(1.0) as usize;
        [per, per, per]
    });
    let system = base.replicate(copies)?;
    let range = options.cutoff + options.buffer;
    let [lx, ly, lz] = system.pbc.diagonal();
    println!(
        "{}: {} atoms ({}x{}x{} copies), box {lx:.2} x {ly:.2} x {lz:.2} nm, halo range {range} nm, PME spacing {} nm",
        system.title,
        system.len(),
        copies[0],
        copies[1],
        copies[2],
        options.spacing
    );
    let show = |l: &Link| format!("alpha {:.3} us, beta {:.2} GB/s", l.alpha * 1e6, l.beta / 1e9);
    for p in &options.paths {
        if p.same.alpha == p.other.alpha && p.same.beta == p.other.beta {
            println!("path {}: {} ({})", p.name, show(&p.same), p.source);
        } else {
            println!(
                "path {}: same node {}; other nodes {} ({})",
                p.name,
                show(&p.same),
                show(&p.other),
                p.source
            );
        }
    }
    if options.paths.iter().any(|p| p.same.alpha != p.other.alpha || p.same.beta != p.other.beta) {
        println!(
            "{} ranks a node, the PME ranks interleaved with the particle ranks",
            options.ranks_per_node
        );
    }
    let mut rows = Vec::new();
    for &ranks in &options.ranks {
        match model(options, &system, ranks, range) {
            Ok(row) => rows.push(row),
            Err(e) => println!("{ranks} ranks: cannot be modelled: {e}"),
        }
    }
    print_tables(options, &rows);
    if let Some(path) = &options.svg {
        let mut points = Vec::new();
        for row in &rows {
            for (i, p) in options.paths.iter().enumerate() {
                let mut curves = vec![("halo".to_string(), row.halo_time[i])];
                for r in &row.redist {
                    curves.push((format!("pme {}", r.routing.name()), r.time[i] + row.fft_time[i]));
                }
                for (what, seconds) in curves {
                    points.push(Point {
                        group: "scale_model".to_string(),
                        variant: format!("{what} {}", p.name),
                        bytes: row.ranks as u64,
                        median_ns: seconds * 1e9,
                        is_bytes: false,
                    });
                }
            }
        }
        let title = format!("{} atoms: predicted communication per step (slowest rank)", system.len());
        let plot = svg_labelled("scale_model", &points, &title, "ranks").ok_or("nothing to plot")?;
        std::fs::write(path, plot).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn model(
    options: &Options,
    system: &Structure,
    ranks: usize,
    range: f32,
) -> Result<Row, Box<dyn std::error::Error>> {
    let wanted_pme = ((ranks as f64 * options.pme_fraction).round() as usize).clamp(1, ranks - 1);
    let (pme_ranks, pme_dims) = pme_decomposition(system, options, wanted_pme)?;
    // The particle ranks as if every wanted PME rank were used (those the decomposition
    // cannot use stay idle), so that the domain decomposition is the same for both.
    let particle_ranks = ranks - wanted_pme;
    let grid = DdGrid::choose(particle_ranks, system.pbc, range)?;
    let pme_pes: Vec<usize> = (particle_ranks..particle_ranks + pme_ranks).collect();
    let k = PmeGrid::new(system.pbc.vectors(), options.spacing, &[0])?.sizes();
    let pme = PmeGrid::builder(system.pbc.vectors(), &pme_pes).sizes(k).pencils(pme_dims).build()?;
    let traffic = halo_traffic(&grid, &system.positions);
    let n = traffic.len();
    let nodes = Nodes::interleaved(n, pme_ranks, options.ranks_per_node);
    let mut histogram = [0usize; 6];
    let (mut msgs, mut bytes, mut max_bytes) = (0usize, 0usize, 0usize);
    let mut halo_time = vec![0.0f64; options.paths.len()];
    for domain in &traffic {
        let mut rank_bytes = 0;
        let mut rank_time = vec![0.0f64; options.paths.len()];
        for p in domain.pulses.iter().filter(|p| p.to != domain.pe) {
            // Coordinates out (sent) and forces back (received): 12 bytes per atom each.
            for size in [p.sent * 12, p.received * 12] {
                msgs += 1;
                rank_bytes += size;
                histogram[bin(size)] += 1;
            }
            let same = nodes.particle[domain.pe] == nodes.particle[p.to];
            for (t, path) in rank_time.iter_mut().zip(&options.paths) {
                // A pulse is a send-receive: as long as its larger message, each way.
                let largest = 12 * p.sent.max(p.received);
                *t += 2.0 * path.halo_link(same, largest).time(largest);
            }
        }
        bytes += rank_bytes;
        max_bytes = max_bytes.max(rank_bytes);
        for (total, t) in halo_time.iter_mut().zip(rank_time) {
            *total = total.max(t);
        }
    }
    // The redistribution, from the library's own plans, for each routing.
    let mut homes: Vec<Vec<Particle>> = vec![Vec::new(); n];
    for (g, &x) in system.positions.iter().enumerate() {
        homes[grid.pe_of_position(x)].push(Particle { x, q: 0.0, global: g as u32 });
    }
    let redist = options
        .routings
        .iter()
        .map(|&routing| redistribution(options, &pme, &grid, &nodes, &homes, routing, histogram))
        .collect::<Result<Vec<_>, _>>()?;
    // The FFT: slabs, one all-to-all among the M PME ranks per direction, blocks padded to
    // the widest slabs; pencils, one within each row (Py ranks) and one within each column
    // (Px) per direction.
    let kzc = k[2] / 2 + 1;
    let [px, py] = pme_dims;
    // Per PME rank its partners' links, the slowest rank deciding (rank `a * py + c` is row
    // `a`, column `c`).
    let transposes = |row: usize, column: usize| -> Vec<f64> {
        let same = |q: usize, r: usize| nodes.pme[q] == nodes.pme[r];
        options
            .paths
            .iter()
            .map(|p| {
                (0..pme_ranks)
                    .map(|q| {
                        let (a, c) = (q / py, q % py);
                        let along_row: f64 =
                            (0..py).filter(|&d| d != c).map(|d| p.link(same(q, a * py + d)).time(row)).sum();
                        let along_column: f64 = (0..px)
                            .filter(|&b| b != a)
                            .map(|b| p.link(same(q, b * py + c)).time(column))
                            .sum();
                        2.0 * (along_row + along_column)
                    })
                    .fold(0.0, f64::max)
            })
            .collect()
    };
    let (block, fft_time): (usize, Vec<f64>) = if py == 1 {
        // Slabs: one all-to-all among all M ranks, as if one row of M.
        let block = 8 * k[0].div_ceil(pme_ranks) * k[1].div_ceil(pme_ranks) * kzc;
        let same = |q: usize, r: usize| nodes.pme[q] == nodes.pme[r];
        let time = options
            .paths
            .iter()
            .map(|p| {
                (0..pme_ranks)
                    .map(|q| {
                        2.0 * (0..pme_ranks)
                            .filter(|&r| r != q)
                            .map(|r| p.link(same(q, r)).time(block))
                            .sum::<f64>()
                    })
                    .fold(0.0, f64::max)
            })
            .collect();
        (block, time)
    } else {
        let (planes, lines) = (k[0].div_ceil(px), k[1].div_ceil(py));
        let row = 8 * planes * lines * kzc.div_ceil(py);
        let column = 8 * planes * kzc.div_ceil(py) * k[1].div_ceil(px);
        (row.max(column), transposes(row, column))
    };
    // An `auto` path's transposes take the one all-to-all measured fastest for the whole group
    // (the all-to-all's `Path::Auto`), not a path per pair: here the fastest calibrated path's.
    let mut fft_time = fft_time;
    for (i, p) in options.paths.iter().enumerate() {
        if p.auto {
            let calibrated = |q: &&Path| q.name.starts_with("cal:") && !q.auto;
            let fastest = options
                .paths
                .iter()
                .enumerate()
                .filter(|(_, q)| calibrated(q))
                .map(|(j, _)| fft_time[j])
                .fold(f64::INFINITY, f64::min);
            if fastest.is_finite() {
                fft_time[i] = fastest;
            }
        }
    }
    Ok(Row {
        ranks,
        dims: grid.dims(),
        pme_ranks,
        grid: k,
        home: system.len() as f64 / n as f64,
        halo_msgs: msgs as f64 / n as f64,
        halo_bytes: bytes as f64 / n as f64,
        halo_max_bytes: max_bytes,
        histogram,
        pme_dims,
        redist,
        fft_block: block,
        halo_time,
        fft_time,
        balance: most_balance_traffic(&grid),
        whole_grid: (0..3).map(|d| grid.dims()[..d].iter().product::<usize>() * (grid.dims()[d] + 1)).sum(),
    })
}

/// The most any particle rank reduces, reads and holds for load balancing with staggered
/// rows ([`balance_traffic`], the rows the balancer reads and keeps).
fn most_balance_traffic(grid: &DdGrid) -> BalanceTraffic {
    (0..grid.len()).map(|pe| balance_traffic(grid, grid.cell_of(pe))).fold(
        BalanceTraffic { reduced: 0, maxed: 0, read: 0, held: 0 },
        |a, b| BalanceTraffic {
            reduced: a.reduced.max(b.reduced),
            maxed: a.maxed.max(b.maxed),
            read: a.read.max(b.read),
            held: a.held.max(b.held),
        },
    )
}

/// How the particle ranks' atoms reach the PME ranks ([`pme_redist::RedistBuilder::relay`]).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Routing {
    /// Each particle rank to every PME rank its atoms can reach.
    Direct,
    /// Each particle rank to its relay, which passes the atoms on.
    Relay,
}

impl Routing {
    fn name(self) -> &'static str {
        match self {
            Routing::Direct => "direct",
            Routing::Relay => "relay",
        }
    }
}

/// What the redistribution costs per step under one routing.
struct Redist {
    routing: Routing,
    /// Halo and redistribution messages of the particle ranks together, by size.
    all_histogram: [usize; 6],
    msgs_particle: f64,
    msgs_particle_max: usize,
    msgs_pme: f64,
    msgs_pme_max: usize,
    bytes_pme: f64,
    /// The share of the atoms that travel a second hop.
    forwarded: f64,
    /// Per kind of path ([`Class::ALL`]): the redistribution's bytes on the PE that holds the
    /// most, and the most of any PE's bytes against those of the atoms it holds.
    memory: [(usize, f64); 3],
    /// Predicted seconds per step per path.
    time: Vec<f64>,
}

/// A sender's plan for one hop: its own PME rank, if it is one, and per target `(rank,
/// bound, atoms sent in the step modelled)`.
type Plan = (Option<usize>, Vec<(usize, usize, usize)>);

/// One hop of the redistribution: who sends what to whom, from the library's own plan
/// ([`planned_targets`]) for each sender's `homes` (20 B per atom out, 12 B back), every
/// message counted at both ends and at most one of each per pair and direction.
struct Hop {
    /// Per sender: messages (two per target besides itself) and its predicted time per path.
    sender_msgs: Vec<usize>,
    sender_time: Vec<Vec<f64>>,
    /// Per PME rank: messages from others (two per source besides itself) and bytes received
    /// and returned, each from the same node and from others (`[same, other]`), the sum of
    /// its sources' bounds, and atoms received.
    fan_in: Vec<[usize; 2]>,
    bytes: Vec<[usize; 2]>,
    /// Whether the job spans nodes.
    spans: bool,
    bound: Vec<usize>,
    received: Vec<usize>,
}

impl Hop {
    /// A hop to `m` PME ranks with no senders yet.
    fn empty(m: usize, spans: bool) -> Hop {
        Hop {
            spans,
            sender_msgs: Vec::new(),
            sender_time: Vec::new(),
            fan_in: vec![[0; 2]; m],
            bytes: vec![[0; 2]; m],
            bound: vec![0; m],
            received: vec![0; m],
        }
    }

    /// Every sender's hop from the library's plan for its atoms, to the PME ranks they reach
    /// (`me`: the sender's own PME rank, if it is one, whose share is no message).
    fn new(
        options: &Options,
        pme: &PmeGrid,
        nodes: &Nodes,
        senders: &[(Option<usize>, Vec<Particle>)],
        histogram: &mut [usize; 6],
    ) -> Hop {
        let plans: Vec<Plan> = senders
            .iter()
            .map(|(me, home)| {
                let (targets, bounds) = planned_targets(pme, Some(options.margin), home);
                let mut now = vec![0usize; targets.len()];
                for p in home {
                    let r = pme.rank_of(p.x);
                    now[targets.binary_search(&r).expect("an atom in its reach at the plan")] += 1;
                }
                (*me, targets.into_iter().zip(bounds).zip(now).map(|((t, b), n)| (t, b, n)).collect())
            })
            .collect();
        Hop::from_plans(options, pme.ranks(), nodes, &plans, histogram)
    }

    /// Every sender's hop from its plan: per target, the bound and the atoms it sends in the
    /// step modelled (`me`: the sender's own PME rank, whose share is no message).
    fn from_plans(
        options: &Options,
        m: usize,
        nodes: &Nodes,
        plans: &[Plan],
        histogram: &mut [usize; 6],
    ) -> Hop {
        let mut hop = Hop::empty(m, nodes.spans);
        for (index, (me, targets)) in plans.iter().enumerate() {
            let (mut msgs, mut time) = (0, vec![0.0f64; options.paths.len()]);
            let same = |r: usize| nodes.of_sender(*me, index) == nodes.pme[r];
            for &(r, bound, atoms) in targets {
                if Some(r) == *me {
                    hop.bound[r] += bound;
                    hop.received[r] += atoms;
                } else {
                    msgs += 2;
                    hop.pair(options, (r, same(r)), bound, atoms, histogram, &mut time);
                }
            }
            hop.sender_msgs.push(msgs);
            hop.sender_time.push(time);
        }
        hop
    }

    /// What sending and receiving in this hop costs PME rank `r` on path `i` (`path`): its
    /// own sends, then per source a round trip of latencies and the bytes.
    fn pme_time(&self, r: usize, i: usize, path: &Path) -> f64 {
        self.sender_time.get(r).map_or(0.0, |t| t[i]) + self.fan_in_time(r, path)
    }

    /// What PME rank `r`'s sources cost it on `path`: per source a round trip of latencies,
    /// and the bytes, each over the link of its class.
    fn fan_in_time(&self, r: usize, path: &Path) -> f64 {
        [true, false]
            .into_iter()
            .enumerate()
            .map(|(c, same)| {
                let link = path.redist_link(same, self.spans);
                let latencies = self.fan_in[r][c] as f64 / 2.0 * (2.0 + link.extra);
                latencies * link.alpha + self.bytes[r][c] as f64 / link.beta
            })
            .sum()
    }

    /// A sender's `atoms` (at most `bound`) to PME rank `r` (on the sender's node: `same`)
    /// and their forces back: two messages, their sizes into `histogram` and their time per
    /// path added to `time`.
    fn pair(
        &mut self,
        options: &Options,
        (r, same): (usize, bool),
        bound: usize,
        atoms: usize,
        histogram: &mut [usize; 6],
        time: &mut [f64],
    ) {
        let class = usize::from(!same);
        self.bound[r] += bound;
        self.received[r] += atoms;
        self.fan_in[r][class] += 2;
        self.bytes[r][class] += atoms * 32;
        histogram[bin(atoms * 20)] += 1;
        histogram[bin(atoms * 12)] += 1;
        for (t, path) in time.iter_mut().zip(&options.paths) {
            let link = path.redist_link(same, self.spans);
            *t += link.time(atoms * 20) + link.time(atoms * 12) + link.extra * link.alpha;
        }
    }
}

fn bin(size: usize) -> usize {
    BINS.iter().position(|&b| size < b).unwrap_or(BINS.len() - 1)
}

/// The redistribution of the particle ranks' `homes` (domains of `grid`) to the PME ranks of
/// `pme` under `routing`: direct, each particle rank to the PME ranks its atoms can reach
/// within the margin; or relayed, each to its relay ([`PmeGrid::relay_rank`]), which sends
/// its atoms on as a particle rank would. The PME ranks vote on each step's error in the
/// mesh's transposes, or (`--vote own`) in ⌈log₂ M⌉ rounds each way (once, on the last hop).
fn redistribution(
    options: &Options,
    pme: &PmeGrid,
    grid: &DdGrid,
    nodes: &Nodes,
    homes: &[Vec<Particle>],
    routing: Routing,
    halo_histogram: [usize; 6],
) -> Result<Redist, Box<dyn std::error::Error>> {
    let mut all_histogram = halo_histogram;
    let histogram = &mut all_histogram;
    let (n, m) = (homes.len(), pme.ranks());
    // In the mesh the vote rides in the transposes; on its own, ⌈log₂ M⌉ rounds each way.
    let vote = if options.vote_in_mesh { 0 } else { m.next_power_of_two().trailing_zeros() as usize };
    let paths = options.paths.len();
    // The first hop: to the PME ranks the atoms reach, or all of a rank's to its relay.
    let (first, onward, forwarded) = match routing {
        Routing::Direct => {
            let senders: Vec<_> = homes.iter().map(|h| (None, h.clone())).collect();
            let hop = Hop::new(options, pme, nodes, &senders, histogram);
            (hop, Vec::new(), 0.0)
        }
        Routing::Relay => {
            let mut relayed: Vec<(Option<usize>, Vec<Particle>)> =
                (0..m).map(|r| (Some(r), Vec::new())).collect();
            let mut first = Hop::empty(m, nodes.spans);
            for (pe, home) in homes.iter().enumerate() {
                let r = pme.relay_rank(grid.dims(), grid.cell_of(pe))?;
                relayed[r].1.extend_from_slice(home);
                let mut time = vec![0.0f64; paths];
                let same = nodes.particle[pe] == nodes.pme[r];
                first.pair(options, (r, same), home.len(), home.len(), histogram, &mut time);
                first.sender_msgs.push(2);
                first.sender_time.push(time);
            }
            // The share of the atoms that leave their relay for a PME rank of their own.
            let total: usize = relayed.iter().map(|(_, atoms)| atoms.len()).sum();
            let own: usize = relayed
                .iter()
                .map(|(r, atoms)| atoms.iter().filter(|p| Some(pme.rank_of(p.x)) == *r).count())
                .sum();
            let forwarded = (total - own) as f64 / total.max(1) as f64;
            // The second hop's messages are between PME ranks: not in the particle ranks' sizes.
            let [px, py] = pme.dims();
            if px > 1 && py > 1 {
                // Pencils: along y within the relay's row, then along x within each column.
                let (along_y, along_x) = two_stages(options, pme, nodes, &relayed);
                (first, vec![along_y, along_x], forwarded)
            } else {
                let second = Hop::new(options, pme, nodes, &relayed, &mut [0; 6]);
                (first, vec![second], forwarded)
            }
        }
    };
    // The particle ranks: as slow as the slowest.
    let particle_msgs = &first.sender_msgs;
    let mut time: Vec<f64> =
        (0..paths).map(|i| first.sender_time.iter().map(|t| t[i]).fold(0.0, f64::max)).collect();
    // The PME ranks: as slow as the busiest, over both hops.
    let pme_msgs: Vec<usize> = (0..m)
        .map(|r| {
            let fan_in = |h: &Hop| h.fan_in[r].iter().sum::<usize>();
            fan_in(&first) + onward.iter().map(|h| h.sender_msgs[r] + fan_in(h)).sum::<usize>() + 2 * vote
        })
        .collect();
    for (i, (total, path)) in time.iter_mut().zip(&options.paths).enumerate() {
        let busiest = (0..m)
            .map(|r| {
                // The vote's rounds span the PME ranks: across nodes.
                first.fan_in_time(r, path)
                    + onward.iter().map(|h| h.pme_time(r, i, path)).sum::<f64>()
                    + 2.0 * vote as f64 * path.other.alpha
            })
            .fold(0.0, f64::max);
        *total = total.max(busiest);
    }
    // The buffers' sides per PE (particle PEs, then the PME ranks): the first hop's senders
    // are the particle PEs, the later hops' the PME ranks, which send on what the hop before
    // brought (the stage along x: up to the sum of the stage along y's bounds).
    let pe_of_rank = |per_rank: &[usize]| {
        let mut sides = vec![0usize; n];
        sides.extend_from_slice(per_rank);
        sides
    };
    let mut sides = vec![Sides {
        home: homes.iter().map(Vec::len).chain(std::iter::repeat_n(0, m)).collect(),
        share: pe_of_rank(&first.bound),
        both: false,
    }];
    for (k, hop) in onward.iter().enumerate() {
        let sent = if k == 0 { &first.received } else { &onward[k - 1].bound };
        sides.push(Sides { home: pe_of_rank(sent), share: pe_of_rank(&hop.bound), both: true });
    }
    // What each PE holds: its home atoms, or on a PME rank the most any hop brings it.
    let mut held = pe_of_rank(&first.received);
    for (pe, home) in homes.iter().enumerate() {
        held[pe] = home.len();
    }
    for hop in &onward {
        for (r, &got) in hop.received.iter().enumerate() {
            held[n + r] = held[n + r].max(got);
        }
    }
    let memory = Class::ALL.map(|class| {
        let bytes = buffer_bytes(&sides, class);
        let ratio = bytes
            .iter()
            .zip(&held)
            .filter(|&(_, &h)| h > 0)
            .map(|(&b, &h)| b as f64 / (32 * h) as f64)
            .fold(0.0, f64::max);
        (bytes.iter().copied().max().unwrap_or(0), ratio)
    });
    Ok(Redist {
        routing,
        all_histogram,
        msgs_particle: particle_msgs.iter().sum::<usize>() as f64 / n as f64,
        msgs_particle_max: particle_msgs.iter().copied().max().unwrap_or(0),
        msgs_pme: pme_msgs.iter().sum::<usize>() as f64 / m as f64,
        msgs_pme_max: pme_msgs.iter().copied().max().unwrap_or(0),
        bytes_pme: [&first].into_iter().chain(&onward).flat_map(|h| h.bytes.iter().flatten()).sum::<usize>()
            as f64
            / m as f64,
        forwarded,
        memory,
        time,
    })
}

/// One hop's buffers per PE (particle PEs, then the PME ranks): the atoms it sends, and
/// the room for what may reach it (the sum of its sources' bounds); `both` when a PE may do
/// both (a relay's later hops, among the PME ranks), so that no pair of sides shares a
/// buffer.
struct Sides {
    home: Vec<usize>,
    share: Vec<usize>,
    both: bool,
}

/// The kinds of path, by where the redistribution keeps its buffers.
#[derive(Clone, Copy)]
enum Class {
    /// `onesided-put`: the receive and force sides symmetric, the send side local.
    Put,
    /// `onesided-get`: the send side and the forces out symmetric, the rest local.
    Get,
    /// Every MPI path: all local.
    Mpi,
}

impl Class {
    const ALL: [Class; 3] = [Class::Put, Class::Get, Class::Mpi];
}

/// Which of four banks of local memory each buffer of a relay's hops takes on the MPI paths,
/// by hop and by side (send, receive, forces out, forces in): `pme_redist`'s
/// `redist/store.rs` `RELAY_BANKS`, which says why.
const RELAY_BANKS: [[usize; 4]; 3] = [[0, 0, 0, 0], [1, 2, 1, 3], [1, 3, 2, 3]];

/// The redistribution's buffer bytes per PE over `hops` on `class`, as the library allocates
/// them (where no PE has both sides, each pair of sides shares one buffer where both live
/// alike): a symmetric buffer the most any PE needs, on every PE; a local one this PE's own
/// need (relayed on MPI, in banks the hops take turns in); each a fifth over
/// (`pme_redist::GROWTH_FACTOR`); 20 bytes per atom, 12 per force.
fn buffer_bytes(hops: &[Sides], class: Class) -> Vec<usize> {
    let fit = |atoms: usize| (pme_redist::GROWTH_FACTOR * atoms as f64).ceil() as usize;
    let (atom, force) = (size_of::<Particle>(), size_of::<RVec>());
    let pes = hops.first().map_or(0, |h| h.home.len());
    if matches!(class, Class::Mpi) && hops.len() > 1 {
        return (0..pes)
            .map(|pe| {
                let mut banks = [0usize; 4];
                for (k, hop) in hops.iter().enumerate() {
                    let (h, s) = (hop.home[pe], hop.share[pe]);
                    // Each side's bytes, in the order of the table's columns; the first
                    // hop's pairs are one buffer each.
                    let sides = if hop.both {
                        [atom * fit(h), atom * fit(s), force * fit(s), force * fit(h)]
                    } else {
                        let pair = fit(h.max(s));
                        [atom * pair, atom * pair, force * pair, force * pair]
                    };
                    for (side, bytes) in sides.into_iter().enumerate() {
                        let bank = &mut banks[RELAY_BANKS[k][side]];
                        *bank = (*bank).max(bytes);
                    }
                }
                banks.iter().sum()
            })
            .collect();
    }
    let mut bytes = vec![0usize; pes];
    for hop in hops {
        let most = |v: &[usize]| v.iter().copied().max().unwrap_or(0);
        // One buffer for a pair of sides where it may serve both, else one each.
        let pair = |h: usize, s: usize| if hop.both { fit(h) + fit(s) } else { fit(h.max(s)) };
        let (h, s) = (most(&hop.home), most(&hop.share));
        let symmetric = match class {
            Class::Put => atom * fit(s) + force * pair(h, s),
            Class::Get => atom * fit(h) + force * fit(s),
            Class::Mpi => 0,
        };
        for (pe, b) in bytes.iter_mut().enumerate() {
            let (h, s) = (hop.home[pe], hop.share[pe]);
            *b += symmetric
                + match class {
                    Class::Put => atom * fit(h),
                    Class::Get => atom * fit(s) + force * fit(h),
                    Class::Mpi => (atom + force) * pair(h, s),
                };
        }
    }
    bytes
}

/// The second hop of a relay on pencils in its two stages, from the library's plans
/// ([`planned_stage_targets`]): along y, each relay to the ranks of its row in the columns its
/// atoms reach; along x, each of those to the rows its sources' counts name.
fn two_stages(
    options: &Options,
    pme: &PmeGrid,
    nodes: &Nodes,
    relayed: &[(Option<usize>, Vec<Particle>)],
) -> (Hop, Hop) {
    let (m, py) = (pme.ranks(), pme.dims()[1]);
    // What each rank holds after the stage along y, and the rows its sources name.
    let mut held: Vec<Vec<Particle>> = vec![Vec::new(); m];
    let mut rows: Vec<std::collections::BTreeMap<usize, usize>> = vec![Default::default(); m];
    let plans_y: Vec<Plan> = relayed
        .iter()
        .map(|(me, home)| {
            let relay = me.expect("a relay is a PME rank");
            let row = relay / py;
            let targets = planned_stage_targets(pme, Some(options.margin), row, home);
            let mut now = vec![0usize; targets.len()];
            for p in home {
                let t = row * py + pme.rank_of(p.x) % py;
                let k = targets.iter().position(|s| s.rank == t).expect("an atom in its reach at the plan");
                now[k] += 1;
                held[t].push(*p);
            }
            for target in &targets {
                for &(a, c) in &target.rows {
                    *rows[target.rank].entry(a).or_default() += c;
                }
            }
            (*me, targets.iter().zip(now).map(|(s, n)| (s.rank, s.bound, n)).collect())
        })
        .collect();
    let plans_x: Vec<Plan> = (0..m)
        .map(|r| {
            let column = r % py;
            let targets: Vec<(usize, usize, usize)> = rows[r]
                .iter()
                .map(|(&a, &bound)| {
                    let t = a * py + column;
                    (t, bound, held[r].iter().filter(|p| pme.rank_of(p.x) == t).count())
                })
                .collect();
            (Some(r), targets)
        })
        .collect();
    (
        Hop::from_plans(options, m, nodes, &plans_y, &mut [0; 6]),
        Hop::from_plans(options, m, nodes, &plans_x, &mut [0; 6]),
    )
}

/// The PME ranks and their `[px, py]` for `wanted` PME ranks, as the options decide: slabs
/// capped at a quarter of the x planes; pencils of the most ranks up to `wanted` that split
/// into pencils of at least the interpolation order each way.
fn pme_decomposition(
    system: &Structure,
    options: &Options,
    wanted: usize,
) -> Result<(usize, [usize; 2]), Box<dyn std::error::Error>> {
    let k = PmeGrid::new(system.pbc.vectors(), options.spacing, &[0])?.sizes();
    let slabs = wanted.min(k[0] / ORDER).max(1);
    let fits = |m: usize| {
        let [px, py] = PmeGrid::pencil_dims(k, m, ORDER);
        (px * py == m && k[0] / px >= ORDER && (py == 1 || k[1] / py >= ORDER)).then_some((m, [px, py]))
    };
    let pencils = || (1..=wanted).rev().find_map(fits).unwrap_or((slabs, [slabs, 1]));
    Ok(match options.decomposition {
        PmeDecomposition::Slab => (slabs, [slabs, 1]),
        PmeDecomposition::Pencil => pencils(),
        PmeDecomposition::Auto if k[0] / wanted >= 2 * (ORDER - 1) => (wanted, [wanted, 1]),
        PmeDecomposition::Auto => pencils(),
    })
}

fn print_tables(options: &Options, rows: &[Row]) {
    let share =
        |h: &[usize; 6]| 100.0 * h[..3].iter().sum::<usize>() as f64 / h.iter().sum::<usize>().max(1) as f64;
    println!();
    println!("Per rank per step (particle ranks for the halo; means over ranks, max where marked):");
    println!(
        "| ranks | DD grid | PME ranks (grid) | atoms/rank | halo msgs | halo KiB (max) | halo < 4 KiB | routing | redist msgs particle (max) / PME rank (max) | forwarded | all < 4 KiB | redist KiB per PME rank | redist memory, KiB on the PE holding most (most x its atoms): put / get / mpi | FFT block KiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        for d in &r.redist {
            println!(
                "| {} | {}x{}x{} | {} = {}x{} ({}x{}x{}) | {:.0} | {:.1} | {:.1} ({:.1}) | {:.0} % | {} | {:.1} ({}) / {:.0} ({}) | {:.0} % | {:.0} % | {:.1} | {} | {:.1} |",
                r.ranks,
                r.dims[0],
                r.dims[1],
                r.dims[2],
                r.pme_ranks,
                r.pme_dims[0],
                r.pme_dims[1],
                r.grid[0],
                r.grid[1],
                r.grid[2],
                r.home,
                r.halo_msgs,
                r.halo_bytes / 1024.0,
                r.halo_max_bytes as f64 / 1024.0,
                share(&r.histogram),
                d.routing.name(),
                d.msgs_particle,
                d.msgs_particle_max,
                d.msgs_pme,
                d.msgs_pme_max,
                100.0 * d.forwarded,
                share(&d.all_histogram),
                d.bytes_pme / 1024.0,
                d.memory
                    .iter()
                    .map(|&(bytes, ratio)| format!("{:.0} ({ratio:.1}x)", bytes as f64 / 1024.0))
                    .collect::<Vec<_>>()
                    .join(" / "),
                r.fft_block as f64 / 1024.0
            );
        }
    }
    println!();
    println!(
        "Load balancing at a repartition that moves the boundaries (staggered rows on grids of two or three split \
         dimensions), values of 8 bytes per particle rank, most over ranks:"
    );
    println!(
        "| ranks | DD grid | reduced over all ranks (sum / max) | read from other ranks | grid held | every row |"
    );
    println!("|---:|---|---:|---:|---:|---:|");
    for r in rows {
        let b = r.balance;
        println!(
            "| {} | {}x{}x{} | {} / {} | {} | {} | {} |",
            r.ranks, r.dims[0], r.dims[1], r.dims[2], b.reduced, b.maxed, b.read, b.held, r.whole_grid
        );
    }
    println!();
    println!("Halo message sizes (coordinates and forces), share of all halo messages:");
    println!("| ranks | {} |", BIN_NAMES.join(" | "));
    println!("|---:|{}", "---:|".repeat(BINS.len()));
    for r in rows {
        let total = r.histogram.iter().sum::<usize>().max(1) as f64;
        let shares: Vec<String> =
            r.histogram.iter().map(|&c| format!("{:.0} %", 100.0 * c as f64 / total)).collect();
        println!("| {} | {} |", r.ranks, shares.join(" | "));
    }
    println!();
    println!(
        "Predicted communication time per step, µs (slowest rank): halo / PME redistribution / FFT transposes:"
    );
    let names: Vec<&str> = options.paths.iter().map(|p| p.name.as_str()).collect();
    println!("| ranks | routing | {} |", names.join(" | "));
    println!("|---:|---|{}", "---:|".repeat(names.len()));
    for r in rows {
        for d in &r.redist {
            let cells: Vec<String> = (0..names.len())
                .map(|i| {
                    format!(
                        "{:.1} / {:.1} / {:.1}",
                        r.halo_time[i] * 1e6,
                        d.time[i] * 1e6,
                        r.fft_time[i] * 1e6
                    )
                })
                .collect();
            println!("| {} | {} | {} |", r.ranks, d.routing.name(), cells.join(" | "));
        }
    }
}
