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
//! - the PME grid (`--spacing`, default 0.12 nm) in slabs over `--pme-fraction` of the ranks
//!   (default 0.25, as separate PME ranks; capped where slabs would get thinner than the
//!   interpolation order, the limit of a slab decomposition), where every particle rank sends
//!   each atom to the PME rank of its slab ([`pme_redist::PmeGrid::rank_of`]).
//!
//! Per rank per step it prints the halo exchange's messages and bytes (coordinates out and
//! forces back, 12 bytes per atom each way, one message per pulse to another rank), the PME
//! redistribution's (20 bytes per atom out, 12 back, plus a count to and from every PME rank
//! every step, as `pme_redist` sends them) and the FFT transposes' (two all-to-alls per step
//! among the PME ranks), the share of halo messages below 4 KiB beside the 2013 report's
//! 70–80 % at 512–768 ranks, the histogram of halo message sizes, and a predicted time per
//! step per path: per pulse `α + bytes / β` (pulses run one after another, a rank's step is
//! as slow as its slowest pulse partner, so the maximum over ranks), the same for the
//! redistribution's messages, and `(M - 1)(α + block / β)` per transpose.
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
use pme_redist::PmeGrid;
use pme_redist::spline::ORDER;

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
    paths: Vec<Path>,
    svg: Option<PathBuf>,
}

const USAGE: &str = "usage: scale_model [--gro FILE] [--atoms N | --replicate NX,NY,NZ] [--ranks R1,R2,...] \
[--cutoff NM] [--buffer NM] [--spacing NM] [--pme-fraction F] [--path NAME:ALPHA_US:GB_PER_S]... [--svg FILE]";

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
    redist_msgs_particle: f64,
    redist_msgs_pme: f64,
    redist_bytes_pme: f64,
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
    let particle_ranks = ranks - wanted_pme;
    let grid = DdGrid::choose(particle_ranks, system.pbc, range)?;
    // The PME grid's x size limits the slabs: at least ORDER planes each.
    let k = PmeGrid::new(system.pbc.vectors(), options.spacing, &[0])?.sizes();
    let pme_ranks = wanted_pme.min(k[0] / ORDER).max(1);
    let pme_pes: Vec<usize> = (particle_ranks..particle_ranks + pme_ranks).collect();
    let pme = PmeGrid::new(system.pbc.vectors(), options.spacing, &pme_pes)?;
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
    // The redistribution: counts from every particle rank to every PME rank, and back; atoms
    // to the PME rank of their slab, forces back.
    let mut per_pair = vec![0usize; n * pme_ranks];
    for &x in &system.positions {
        per_pair[grid.pe_of_position(x) * pme_ranks + pme.rank_of(x)] += 1;
    }
    let mut all_histogram = histogram;
    let bin = |size: usize| BINS.iter().position(|&b| size < b).unwrap_or(BINS.len() - 1);
    let mut redist_time = vec![0.0f64; options.paths.len()];
    let (mut particle_msgs, mut pme_msgs, mut pme_bytes) =
        (0usize, vec![0usize; pme_ranks], vec![0usize; pme_ranks]);
    for rank in 0..n {
        let row = &per_pair[rank * pme_ranks..(rank + 1) * pme_ranks];
        let mut rank_time = vec![0.0f64; options.paths.len()];
        for (r, &atoms) in row.iter().enumerate() {
            // A count each way every step, the atoms (20 B) out and the forces (12 B) back.
            let messages = if atoms > 0 { 4 } else { 2 };
            all_histogram[bin(8)] += 2;
            if atoms > 0 {
                all_histogram[bin(atoms * 20)] += 1;
                all_histogram[bin(atoms * 12)] += 1;
            }
            particle_msgs += messages;
            pme_msgs[r] += messages;
            pme_bytes[r] += atoms * 32 + 16;
            for (t, path) in rank_time.iter_mut().zip(&options.paths) {
                *t += 2.0 * path.time(8);
                if atoms > 0 {
                    *t += path.time(atoms * 20) + path.time(atoms * 12);
                }
            }
        }
        for (total, t) in redist_time.iter_mut().zip(rank_time) {
            *total = total.max(t);
        }
    }
    // The PME ranks receive from every particle rank: as slow as the busiest of them.
    for (total, path) in redist_time.iter_mut().zip(&options.paths) {
        let busiest = (0..pme_ranks)
            .map(|p| pme_msgs[p] as f64 * path.alpha + pme_bytes[p] as f64 / path.beta)
            .fold(0.0, f64::max);
        *total = total.max(busiest);
    }
    // Two transposes per step among the PME ranks, blocks padded to the widest slabs.
    let kzc = k[2] / 2 + 1;
    let block = 8 * k[0].div_ceil(pme_ranks) * k[1].div_ceil(pme_ranks) * kzc;
    let fft_time: Vec<f64> =
        options.paths.iter().map(|p| 2.0 * (pme_ranks - 1) as f64 * p.time(block)).collect();
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
        redist_msgs_particle: particle_msgs as f64 / n as f64,
        redist_msgs_pme: pme_msgs.iter().sum::<usize>() as f64 / pme_ranks as f64,
        redist_bytes_pme: pme_bytes.iter().sum::<usize>() as f64 / pme_ranks as f64,
        fft_block: block,
        time: (0..options.paths.len()).map(|i| [halo_time[i], redist_time[i], fft_time[i]]).collect(),
    })
}

fn print_tables(options: &Options, rows: &[Row]) {
    println!();
    println!("Per rank per step (particle ranks for the halo; means over ranks, max where marked):");
    println!(
        "| ranks | DD grid | PME ranks (grid) | atoms/rank | halo msgs | halo KiB (max) | halo < 4 KiB | redist msgs particle / PME rank | all < 4 KiB | redist KiB per PME rank | FFT block KiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let share = |h: &[usize; 6]| {
            100.0 * h[..3].iter().sum::<usize>() as f64 / h.iter().sum::<usize>().max(1) as f64
        };
        println!(
            "| {} | {}x{}x{} | {} ({}x{}x{}) | {:.0} | {:.1} | {:.1} ({:.1}) | {:.0} % | {:.1} / {:.0} | {:.0} % | {:.1} | {:.1} |",
            r.ranks,
            r.dims[0],
            r.dims[1],
            r.dims[2],
            r.pme_ranks,
            r.grid[0],
            r.grid[1],
            r.grid[2],
            r.home,
            r.halo_msgs,
            r.halo_bytes / 1024.0,
            r.halo_max_bytes as f64 / 1024.0,
            share(&r.histogram),
            r.redist_msgs_particle,
            r.redist_msgs_pme,
            share(&r.all_histogram),
            r.redist_bytes_pme / 1024.0,
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
