//! The PME redistribution of an MD step on a real system: coordinates and charges from the
//! particle PEs to the PME ranks, charge spreading onto their slabs, and forces back.
//!
//! ```text
//! scripts/pe-run -n 4 target/release/examples/pme_redist --replicate 2,2,2 --pme-pes 2 --verify
//! cargo run --release --example pme_redist -- --pes 4 --replicate 2,2,2 --verify
//! ```
//!
//! Options: `--gro FILE` (any GROMACS structure, rectangular or triclinic box; default: the
//! SPC water box in data/), `--types FILE` (charges and Lennard-Jones parameters for atom
//! names the built-in table lacks: `NAME charge c6 c12` per line), `--replicate NX,NY,NZ`,
//! `--spacing NM` (grid spacing, default 0.12), `--pme-pes M` (default: every PE; fewer puts
//! PME on the last M PEs and particles on the others), `--path
//! mpi|mpi-alltoallv|onesided-get|onesided-put|all`, `--steps S`, `--verify`, `--threads T`,
//! and `--pes N` when the program launches itself.
//!
//! Each step: redistribute, spread the charges (cubic B-splines, order 4) onto the slabs, sum the
//! slab overlaps, gather a force on each atom from the grid, return the forces (on the
//! one-sided paths gathered straight into the redistribution's buffer and read by their PEs
//! where they lie, `return_forces_in_place`); then every
//! atom takes a small deterministic step. The plan is rebuilt every 10 steps, as a
//! domain-decomposition code would at repartition. The last line for each path is
//! `summary path=<p> atoms=<n> pes=<k> pme_pes=<m> steps=<s> redist_us=<t> forces_us=<t>
//! verified=<yes|no|off>`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use md_demo::types::TypeTable;
use md_demo::{Structure, motion, verify::fingerprint};
use md_halo::DdGrid;
use mpi::datatype::PartitionMut;
use mpi::traits::{Communicator, CommunicatorCollectives};
use onesided::{Collectives, Path, Runtime};
use onesided_suite::cli;
use onesided_suite::route::Route;
use pme_redist::reference::{serial_gather, serial_spread};
use pme_redist::{Particle, PmeGrid, RVec, Redistribution, SlabGrid};

struct Options {
    gro: PathBuf,
    types: Option<PathBuf>,
    replicate: [usize; 3],
    spacing: f32,
    pme_pes: Option<usize>,
    paths: Vec<Route>,
    steps: u64,
    verify: bool,
    threads: usize,
    pes: usize,
}

const USAGE: &str = "usage: pme_redist [--gro FILE] [--types FILE] [--replicate NX,NY,NZ] [--spacing NM] \
[--pme-pes M] [--path mpi|mpi-alltoallv|onesided-get|onesided-put|all] [--steps S] [--verify] [--threads T] \
[--pes N]";

/// Steps between two plans.
const REPLAN: u64 = 10;

fn parse() -> Result<Options, String> {
    let mut options = Options {
        gro: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro")),
        types: None,
        replicate: [2, 2, 2],
        spacing: 0.12,
        pme_pes: None,
        paths: Route::all(),
        steps: 20,
        verify: false,
        threads: 1,
        pes: 2,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        let positive = |v: String| cli::positive(&flag, &v);
        match flag.as_str() {
            "--gro" => options.gro = value()?.into(),
            "--types" => options.types = Some(value()?.into()),
            "--replicate" => options.replicate = cli::triple(&flag, &value()?)?,
            "--spacing" => options.spacing = cli::length(&flag, &value()?)?,
            "--pme-pes" => options.pme_pes = Some(positive(value()?)? as usize),
            "--path" => {
                let v = value()?;
                options.paths = if v == "all" { Route::all() } else { vec![v.parse()?] };
            }
            "--steps" => options.steps = positive(value()?)?,
            "--threads" => options.threads = positive(value()?)? as usize,
            "--pes" => options.pes = positive(value()?)? as usize,
            "--verify" => options.verify = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    Ok(options)
}

/// The system, its charges, the PME grid and this PE's home atoms.
struct Setup {
    structure: Structure,
    /// The charge of every atom, by global index.
    charges: Vec<f32>,
    grid: PmeGrid,
    home: Vec<Particle>,
    pme_pes: usize,
}

fn main() {
    let (options, rt) = cli::start("pme_redist", parse, |o| o.pes, |o| o.threads);
    // Input errors are found by every PE alike, before any communication.
    let setup = match prepare(&rt, &options) {
        Ok(setup) => setup,
        Err(e) => {
            cli::say(&format!("pme_redist: PE {}: {e}", rt.my_pe()));
            drop(rt);
            std::process::exit(1)
        }
    };
    match run(&rt, &options, &setup) {
        Ok(true) => {}
        Ok(false) => {
            drop(rt);
            std::process::exit(1)
        }
        // Reported by every PE at the end of a step: the job can end normally.
        Err(e @ pme_redist::Error::MovedTooFar { .. }) => {
            cli::say(&format!("pme_redist: PE {}: {e}", rt.my_pe()));
            drop(rt);
            std::process::exit(1)
        }
        Err(e) => {
            cli::say(&format!("pme_redist: PE {}: {e}", rt.my_pe()));
            rt.abort(1)
        }
    }
}

fn prepare(rt: &Runtime, options: &Options) -> Result<Setup, Box<dyn std::error::Error>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .build_global()
        .map_err(|e| format!("cannot start {} threads: {e}", options.threads))?;
    let structure = Structure::read_gro(&options.gro)?.replicate(options.replicate)?;
    let mut table = TypeTable::builtin();
    if let Some(types) = &options.types {
        table = table.read_file(types)?;
    }
    let charges: Vec<f32> = table
        .assign(&structure.atoms, &options.gro.display().to_string())?
        .iter()
        .map(|params| params.charge)
        .collect();
    let n = rt.n_pes();
    let m = options.pme_pes.unwrap_or(n);
    if m > n {
        return Err(format!("--pme-pes {m} does not fit a job of {n} PEs; use at most {n}").into());
    }
    if m < n && m == 0 {
        return Err("--pme-pes needs at least one PME rank".into());
    }
    // PME on every PE, or on the last m PEs with the particles on the others.
    let pme: Vec<usize> = if m == n { (0..n).collect() } else { (n - m..n).collect() };
    let particle_pes = if m == n { n } else { n - m };
    let grid = PmeGrid::new(structure.pbc.vectors(), options.spacing, &pme)?;
    // The particles' domains, as the halo exchange would have them (a nominal halo).
    let domains = DdGrid::choose(particle_pes, structure.pbc, 1e-3)?;
    let me = rt.my_pe();
    let home: Vec<Particle> = if me < particle_pes {
        (0..structure.len())
            .filter(|&g| domains.pe_of_position(structure.positions[g]) == me)
            .map(|g| Particle { x: structure.positions[g], q: charges[g], global: g as u32 })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Setup { structure, charges, grid, home, pme_pes: m })
}

/// What a path's run measured and found.
struct Outcome {
    path: Route,
    redist_us: f64,
    forces_us: f64,
    verified: Option<bool>,
    fingerprints: Vec<[u64; 3]>,
}

fn run(rt: &Runtime, options: &Options, setup: &Setup) -> pme_redist::Result<bool> {
    let me = rt.my_pe();
    if me == 0 {
        let [kx, ky, kz] = setup.grid.sizes();
        let pbc = &setup.structure.pbc;
        let v = pbc.vectors();
        let shape = if pbc.is_rectangular() {
            format!("box {:.3} x {:.3} x {:.3} nm", v[0][0], v[1][1], v[2][2])
        } else {
            format!("triclinic box a={:?} b={:?} c={:?} nm", v[0], v[1], v[2])
        };
        println!(
            "{}: {} atoms, {shape}, {} PEs ({} PME ranks), grid {kx}x{ky}x{kz}, order {}",
            setup.structure.title,
            setup.structure.len(),
            rt.n_pes(),
            setup.pme_pes,
            setup.grid.order()
        );
    }
    let mut outcomes = Vec::new();
    for path in &options.paths {
        outcomes.push(run_path(rt, options, setup, path)?);
    }
    if outcomes.len() > 1 {
        let same = outcomes.windows(2).all(|w| w[0].fingerprints == w[1].fingerprints);
        let differing = rt.max_u64_one(u64::from(!same))?;
        if me == 0 {
            println!(
                "paths bit-identical (received atoms, spread slabs, returned forces, every step): {}",
                if differing == 0 { "yes" } else { "NO" }
            );
        }
        if options.verify && differing != 0 {
            outcomes.iter_mut().for_each(|o| o.verified = Some(false));
        }
    }
    let mut all = true;
    for o in &outcomes {
        all &= o.verified != Some(false);
        if me == 0 {
            println!(
                "summary path={} atoms={} pes={} pme_pes={} steps={} redist_us={:.2} forces_us={:.2} verified={}",
                o.path,
                setup.structure.len(),
                rt.n_pes(),
                setup.pme_pes,
                options.steps,
                o.redist_us,
                o.forces_us,
                match o.verified {
                    None => "off",
                    Some(true) => "yes",
                    Some(false) => "no",
                }
            );
        }
    }
    Ok(all)
}

fn run_path(rt: &Runtime, options: &Options, setup: &Setup, path: &Route) -> pme_redist::Result<Outcome> {
    let me = rt.my_pe();
    let overlap_path = if path.is_mpi() { Path::Mpi } else { Path::OneSided };
    let mut home = setup.home.clone();
    let mut redist = path.apply(Redistribution::builder(rt, setup.grid.clone())).collective_build(&home)?;
    let mut slab = SlabGrid::collective_new(rt, &setup.grid, overlap_path)?;
    let (mut redist_times, mut force_times) = (Vec::new(), Vec::new());
    let mut fingerprints = Vec::new();
    let mut checks = true;
    let mut home_forces = vec![[0.0f32; 3]; home.len()];
    for step in 0..options.steps {
        if step > 0 && step % REPLAN == 0 {
            redist.collective_plan(&home)?;
        }
        // Timed after a barrier: the exchanges, not a neighbour's spreading.
        rt.barrier();
        let start = Instant::now();
        let mut delivered = redist.redistribute(&home)?;
        redist_times.push(start.elapsed());
        slab.spread(delivered.received());
        slab.collective_reduce_overlap()?;
        slab.collective_return_overlap()?;
        // The one-sided paths gather straight into the redistribution's buffer, from which the
        // PEs read their forces where they lie; MPI sends from the gather's vector, as MPI
        // codes do.
        let in_place = path.is_one_sided();
        let forces = if in_place {
            let mesh = delivered.mesh();
            slab.gather_into(mesh.atoms, mesh.forces);
            Vec::new()
        } else {
            slab.gather(delivered.received())
        };
        // The program's copy of the atoms received, for the checks below (not timed).
        let received = delivered.received().to_vec();
        rt.barrier();
        let start = Instant::now();
        if in_place {
            delivered.return_forces(&mut home_forces)?;
        } else {
            delivered.return_forces_from(&forces, &mut home_forces)?;
        }
        force_times.push(start.elapsed());
        fingerprints.push([fingerprint(&received), fingerprint(slab.slab()), fingerprint(&home_forces)]);
        if options.verify && step + 1 == options.steps {
            let ok = verify_step(
                rt,
                setup,
                (path, redist.pme_rank(), &received),
                &slab,
                &home,
                &home_forces,
                step,
            )?;
            checks &= ok;
        }
        for p in &mut home {
            p.x = motion::displaced(p.global, step, p.x);
        }
    }
    let median_us = |times: &mut Vec<Duration>| -> f64 {
        times.sort_unstable();
        times.get(times.len() / 2).map_or(0.0, |t| t.as_secs_f64() * 1e6)
    };
    let mut medians =
        [median_us(&mut redist_times), median_us(&mut force_times)].map(|us| (us * 1000.0) as u64);
    rt.max_u64(&mut medians)?;
    let [redist_us, forces_us] = medians.map(|ns| ns as f64 / 1000.0);
    if me == 0 {
        println!(
            "  {path}: median per step on the slowest PE (GROMACS's PME redist. X/F): X {redist_us:.2} us, F \
             {forces_us:.2} us"
        );
    }
    Ok(Outcome {
        path: path.clone(),
        redist_us,
        forces_us,
        verified: options.verify.then_some(checks),
        fingerprints,
    })
}

/// The checks of the last step; every PE returns the same verdict.
fn verify_step(
    rt: &Runtime,
    setup: &Setup,
    (path, pme_rank, received): (&Route, Option<usize>, &[Particle]),
    slab: &SlabGrid<'_>,
    home: &[Particle],
    home_forces: &[RVec],
    step: u64,
) -> pme_redist::Result<bool> {
    let me = rt.my_pe();
    let grid = &setup.grid;
    // The positions every atom has now, replayed from the start with the same arithmetic.
    let mut positions = setup.structure.positions.clone();
    for s in 0..step {
        for (g, x) in positions.iter_mut().enumerate() {
            *x = motion::displaced(g as u32, s, *x);
        }
    }
    let serial = serial_spread(grid, &positions, &setup.charges);
    let mut failures = Vec::new();
    // Every atom on the right PME rank...
    if let Some(rank) = pme_rank
        && let Some(p) = received.iter().find(|p| grid.rank_of(p.x) != rank)
    {
        failures.push(format!(
            "atom {} reached PME rank {rank} but belongs to {}",
            p.global,
            grid.rank_of(p.x)
        ));
    }
    // ...and on exactly one.
    let ids: Vec<u32> = received.iter().map(|p| p.global).collect();
    let mut all_ids = gather_all(&rt.world(), &ids);
    all_ids.sort_unstable();
    let expected: Vec<u32> = (0..setup.structure.len() as u32).collect();
    if all_ids != expected {
        failures.push(format!(
            "the PME ranks hold {} atoms where each of {} should be held once",
            all_ids.len(),
            expected.len()
        ));
    }
    // The spread slab against the serial spread.
    if pme_rank.is_some() {
        let [_, ky, kz] = grid.sizes();
        let (lo, hi) = slab.planes();
        let reference = &serial[lo * ky * kz..hi * ky * kz];
        let largest = reference.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
        let worst =
            reference.iter().zip(slab.slab()).map(|(s, p)| (s - *p as f64).abs()).fold(0f64, f64::max);
        if worst / largest > 1e-5 {
            failures.push(format!("the slab deviates {:.2e} from the serial spread", worst / largest));
        }
    }
    // The forces, back at their owners in the original order, against the serial gather.
    let serial_forces: Vec<[f64; 3]> = home.iter().map(|p| serial_gather(grid, &serial, p.x, p.q)).collect();
    let largest = serial_forces.iter().flatten().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    let worst = serial_forces
        .iter()
        .zip(home_forces)
        .flat_map(|(s, f)| (0..3).map(move |d| (s[d] - f[d] as f64).abs()))
        .fold(0f64, f64::max);
    if worst / largest > 1e-4 {
        failures.push(format!("the returned forces deviate {:.2e} from the serial gather", worst / largest));
    }
    for f in &failures {
        cli::say(&format!("PE {me}: {f}"));
    }
    let failed = rt.max_u64_one(u64::from(!failures.is_empty()))?;
    if me == 0 {
        println!(
            "  {}: atoms on their PME ranks, slabs against the serial spread, forces back in order: {}",
            path,
            if failed == 0 { "ok" } else { "FAILED" }
        );
    }
    Ok(failed == 0)
}

/// Every PE's `local` values, concatenated in PE order, on every PE.
fn gather_all(world: &mpi::topology::SimpleCommunicator, local: &[u32]) -> Vec<u32> {
    let mut counts = vec![0i32; world.size() as usize];
    world.all_gather_into(&(local.len() as i32), &mut counts[..]);
    let displacements: Vec<i32> =
        counts.iter().scan(0, |sum, &c| Some(std::mem::replace(sum, *sum + c))).collect();
    let mut all = vec![0u32; counts.iter().sum::<i32>() as usize];
    let mut partition = PartitionMut::new(&mut all[..], counts, &displacements[..]);
    world.all_gather_varcount_into(local, &mut partition);
    all
}
