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
//!   ([`pme_redist::planned_targets`], with the displacement margin `--margin`, default
//!   0.1 nm): the PME ranks its atoms can reach, and the bound on what each can receive.
//!
//! Per rank per step it prints the halo exchange's messages and bytes (coordinates out and
//! forces back, 12 bytes per atom each way, one message per pulse to another rank), the PME
//! redistribution's (one message per target each way, 20 bytes per atom out and 12 back, as
//! the `mpi` path sends them; a PME rank also takes part in the error vote, ⌈log₂ M⌉ rounds
//! each way), mean and most over ranks; the redistribution's symmetric memory per PE (as the
//! library allocates it: a fifth over the most any PE needs, one buffer per side with PME on
//! separate ranks) and its ratio to the bytes of the atoms the PE holding the fewest holds;
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
//! measured across nodes. `--svg FILE` draws the predicted halo time per step against ranks.

use std::path::PathBuf;

use md_demo::Structure;
use md_halo::DdGrid;
use md_halo::model::halo_traffic;
use onesided_suite::cli;
use onesided_suite::report::{Point, svg_labelled};
use pme_redist::spline::ORDER;
use pme_redist::{Particle, PmeDecomposition, PmeGrid, planned_targets};

/// A transport's cost model: a message of `b` bytes takes `alpha + b / beta` seconds.
#[derive(Clone, Debug)]
struct Path {
    name: String,
    alpha: f64,
    beta: f64,
    source: String,
}

impl Path {
    /// From a ping-pong's round trips of 8 bytes and of 4 MiB.
    fn from_pingpong(name: &str, small_rt: f64, large_rt: f64) -> Path {
        let alpha = small_rt / 2.0;
        let beta = (4 << 20) as f64 / (large_rt / 2.0 - alpha);
        Path {
            name: name.to_string(),
            alpha,
            beta,
            source: format!(
                "ping-pong on one node: 8 B {small_rt:.2e} s, 4 MiB {large_rt:.2e} s per round trip"
            ),
        }
    }

    /// Latencies per target and step beyond one message each way: the one-sided paths' put
    /// path announces, is offered a place and writes (two more); MPI sends once each way.
    fn extra_latencies(&self) -> f64 {
        if self.name.starts_with("onesided") { 2.0 } else { 0.0 }
    }

    fn time(&self, bytes: usize) -> f64 {
        self.alpha + bytes as f64 / self.beta
    }
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
    paths: Vec<Path>,
    svg: Option<PathBuf>,
}

const USAGE: &str = "usage: scale_model [--gro FILE] [--atoms N | --replicate NX,NY,NZ] [--ranks R1,R2,...] \
[--cutoff NM] [--buffer NM] [--spacing NM] [--pme-fraction F] [--pme-decomposition slab|pencil|auto] \
[--margin NM] [--path NAME:ALPHA_US:GB_PER_S]... [--svg FILE]";

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
        paths: vec![
            Path::from_pingpong("onesided", 77.1e-9, 225e-6),
            Path::from_pingpong("mpi", 466e-9, 999e-6),
        ],
        svg: None,
    };
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
                options.paths.push(Path {
                    name: parts[0].to_string(),
                    alpha: alpha_us * 1e-6,
                    beta: gbps * 1e9,
                    source: "given on the command line".to_string(),
                });
            }
            "--svg" => options.svg = Some(value()?.into()),
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
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
    /// Halo and redistribution messages of the particle ranks together.
    all_histogram: [usize; 6],
    /// `[px, py]` of the PME decomposition.
    pme_dims: [usize; 2],
    redist_msgs_particle: f64,
    redist_msgs_particle_max: usize,
    redist_msgs_pme: f64,
    redist_msgs_pme_max: usize,
    redist_bytes_pme: f64,
    /// Symmetric bytes of the redistribution per PE, and the most of any PE against the
    /// bytes of the atoms it holds.
    memory: usize,
    memory_ratio: f64,
    fft_block: usize,
    /// Predicted seconds per step per path: halo, redistribution, FFT.
    time: Vec<[f64; 3]>,
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
    for p in &options.paths {
        println!(
            "path {}: alpha {:.3} us, beta {:.2} GB/s ({})",
            p.name,
            p.alpha * 1e6,
            p.beta / 1e9,
            p.source
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
            for (p, t) in options.paths.iter().zip(&row.time) {
                for (what, seconds) in [("halo", t[0]), ("pme", t[1] + t[2])] {
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
    let pme = PmeGrid::with_sizes_in_pencils(system.pbc.vectors(), k, &pme_pes, pme_dims)?;
    let traffic = halo_traffic(&grid, &system.positions);
    let n = traffic.len();
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
                histogram[BINS.iter().position(|&b| size < b).unwrap_or(BINS.len() - 1)] += 1;
            }
            for (t, path) in rank_time.iter_mut().zip(&options.paths) {
                // A pulse is a send-receive: as long as its larger message, each way.
                *t += 2.0 * path.time(12 * p.sent.max(p.received));
            }
        }
        bytes += rank_bytes;
        max_bytes = max_bytes.max(rank_bytes);
        for (total, t) in halo_time.iter_mut().zip(rank_time) {
            *total = total.max(t);
        }
    }
    // The redistribution between partners, from the library's own plan: each particle rank
    // sends to the PME ranks its atoms can reach within the margin (its targets), every
    // step, the atoms now on each (20 B out, 12 B back); a PME rank hears from the particle
    // ranks that named it, and the PME ranks vote on the step's error in log2 M rounds.
    let mut homes: Vec<Vec<Particle>> = vec![Vec::new(); n];
    for (g, &x) in system.positions.iter().enumerate() {
        homes[grid.pe_of_position(x)].push(Particle { x, q: 0.0, global: g as u32 });
    }
    let mut all_histogram = histogram;
    let bin = |size: usize| BINS.iter().position(|&b| size < b).unwrap_or(BINS.len() - 1);
    let mut redist_time = vec![0.0f64; options.paths.len()];
    let (mut particle_msgs, mut particle_max) = (0usize, 0usize);
    let (mut fan_in, mut pme_bytes, mut pme_bound) =
        (vec![0usize; pme_ranks], vec![0usize; pme_ranks], vec![0usize; pme_ranks]);
    let mut received = vec![0usize; pme_ranks];
    for home in &homes {
        let (targets, bounds) = planned_targets(&pme, Some(options.margin), home);
        let mut now = vec![0usize; targets.len()];
        for p in home {
            let r = pme.rank_of(p.x);
            now[targets.binary_search(&r).expect("an atom in its reach at the plan")] += 1;
        }
        let messages = 2 * targets.len();
        particle_msgs += messages;
        particle_max = particle_max.max(messages);
        let mut rank_time = vec![0.0f64; options.paths.len()];
        for ((&r, &bound), &atoms) in targets.iter().zip(&bounds).zip(&now) {
            fan_in[r] += 1;
            pme_bound[r] += bound;
            received[r] += atoms;
            pme_bytes[r] += atoms * 32;
            all_histogram[bin(atoms * 20)] += 1;
            all_histogram[bin(atoms * 12)] += 1;
            for (t, path) in rank_time.iter_mut().zip(&options.paths) {
                *t += path.time(atoms * 20) + path.time(atoms * 12) + path.extra_latencies() * path.alpha;
            }
        }
        for (total, t) in redist_time.iter_mut().zip(rank_time) {
            *total = total.max(t);
        }
    }
    let vote = pme_ranks.next_power_of_two().trailing_zeros() as usize;
    // The PME ranks receive from their sources: as slow as the busiest of them.
    for (total, path) in redist_time.iter_mut().zip(&options.paths) {
        let busiest = (0..pme_ranks)
            .map(|p| {
                (fan_in[p] as f64 * (2.0 + path.extra_latencies()) + 2.0 * vote as f64) * path.alpha
                    + pme_bytes[p] as f64 / path.beta
            })
            .fold(0.0, f64::max);
        *total = total.max(busiest);
    }
    let pme_msgs: Vec<usize> = fan_in.iter().map(|&f| 2 * f + 2 * vote).collect();
    // Symmetric memory per PE, as the library allocates it: a fifth over the most any PE
    // needs; with PME on a subset, one buffer per side serves both roles.
    let most_home = homes.iter().map(Vec::len).max().unwrap_or(0);
    let most_bound = pme_bound.iter().copied().max().unwrap_or(0);
    let over = pme_redist::GROWTH_FACTOR;
    let memory = (over * most_home.max(most_bound) as f64).ceil() as usize * 32;
    let least_held =
        homes.iter().map(Vec::len).chain(received.iter().copied()).filter(|&h| h > 0).min().unwrap_or(1);
    let memory_ratio = memory as f64 / (least_held * 32) as f64;
    // The FFT: slabs, one all-to-all among the M PME ranks per direction, blocks padded to
    // the widest slabs; pencils, one within each row (Py ranks) and one within each column
    // (Px) per direction.
    let kzc = k[2] / 2 + 1;
    let [px, py] = pme_dims;
    let (block, fft_time): (usize, Vec<f64>) = if py == 1 {
        let block = 8 * k[0].div_ceil(pme_ranks) * k[1].div_ceil(pme_ranks) * kzc;
        (block, options.paths.iter().map(|p| 2.0 * (pme_ranks - 1) as f64 * p.time(block)).collect())
    } else {
        let (planes, lines) = (k[0].div_ceil(px), k[1].div_ceil(py));
        let row = 8 * planes * lines * kzc.div_ceil(py);
        let column = 8 * planes * kzc.div_ceil(py) * k[1].div_ceil(px);
        let time = options
            .paths
            .iter()
            .map(|p| 2.0 * ((py - 1) as f64 * p.time(row) + (px - 1) as f64 * p.time(column)))
            .collect();
        (row.max(column), time)
    };
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
        all_histogram,
        pme_dims,
        redist_msgs_particle: particle_msgs as f64 / n as f64,
        redist_msgs_particle_max: particle_max,
        redist_msgs_pme: pme_msgs.iter().sum::<usize>() as f64 / pme_ranks as f64,
        redist_msgs_pme_max: pme_msgs.iter().copied().max().unwrap_or(0),
        redist_bytes_pme: pme_bytes.iter().sum::<usize>() as f64 / pme_ranks as f64,
        memory,
        memory_ratio,
        fft_block: block,
        time: (0..options.paths.len()).map(|i| [halo_time[i], redist_time[i], fft_time[i]]).collect(),
    })
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
        let [px, py] = PmeGrid::pencil_dims(k, m);
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
    println!();
    println!("Per rank per step (particle ranks for the halo; means over ranks, max where marked):");
    println!(
        "| ranks | DD grid | PME ranks (grid) | atoms/rank | halo msgs | halo KiB (max) | halo < 4 KiB | redist msgs particle (max) / PME rank (max) | all < 4 KiB | redist KiB per PME rank | redist MiB per PE (x share) | FFT block KiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let share = |h: &[usize; 6]| {
            100.0 * h[..3].iter().sum::<usize>() as f64 / h.iter().sum::<usize>().max(1) as f64
        };
        println!(
            "| {} | {}x{}x{} | {} = {}x{} ({}x{}x{}) | {:.0} | {:.1} | {:.1} ({:.1}) | {:.0} % | {:.1} ({}) / {:.0} ({}) | {:.0} % | {:.1} | {:.2} ({:.1}x) | {:.1} |",
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
            r.redist_msgs_particle,
            r.redist_msgs_particle_max,
            r.redist_msgs_pme,
            r.redist_msgs_pme_max,
            share(&r.all_histogram),
            r.redist_bytes_pme / 1024.0,
            r.memory as f64 / (1 << 20) as f64,
            r.memory_ratio,
            r.fft_block as f64 / 1024.0
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
    println!("| ranks | {} |", names.join(" | "));
    println!("|---:|{}", "---:|".repeat(names.len()));
    for r in rows {
        let cells: Vec<String> = r
            .time
            .iter()
            .map(|t| format!("{:.1} / {:.1} / {:.1}", t[0] * 1e6, t[1] * 1e6, t[2] * 1e6))
            .collect();
        println!("| {} | {} |", r.ranks, cells.join(" | "));
    }
}
