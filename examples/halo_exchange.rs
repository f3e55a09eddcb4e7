//! The domain-decomposition halo exchange of an MD step, one-sided and MPI, on a real system.
//!
//! ```text
//! scripts/pe-run -n 4 target/release/examples/halo_exchange --replicate 2,2,2 --verify
//! cargo run --release --example halo_exchange -- --pes 4 --replicate 2,2,2 --verify
//! ```
//!
//! Options: `--gro FILE` (any GROMACS structure, rectangular or triclinic box; default: the
//! SPC water box in data/), `--types FILE` (charges and Lennard-Jones parameters for atom
//! names the built-in table lacks: `NAME charge c6 c12` per line), `--replicate NX,NY,NZ`,
//! `--cutoff NM`, `--grid NX,NY,NZ` (default: chosen from the PE count), `--steps S`,
//! `--nstlist K` (repartition and pair-search interval), `--threads T`,
//! `--path mpi|onesided|mpi-rma|auto|both|all` (mpi-rma: the one-sided offset swap over an
//! MPI-3 window; auto: per neighbour, the path of its link, measured at the start or cached;
//! all: onesided, mpi, mpi-rma and auto), `--verify`, `--dump-halo DIR`, `--kernel cluster|reference`
//! (the clustered pair-list kernel, or the plain cell-list loop it is checked against),
//! `--images kernel|halo` (who makes the periodic images along dimensions of the grid with
//! one domain: the force kernel, from the stored atoms and a shift, as GROMACS does, the
//! default; or the halo exchange, which copies them in `move_x` and adds their forces back
//! in `move_f`),
//! `--squeeze STEP` (at the repartition of that step every atom moves into the lower half of
//! the box along x, so that the domains there take them all and their buffers grow: a test
//! of a repartition that needs more memory, such as a heap too small for it),
//! `--coulomb rf|pme` (reaction field, or PME: the real-space Ewald term in the force kernel
//! and the reciprocal part on every PE's slab of the grid, `--spacing NM` and `--rtol R` as
//! GROMACS's `fourier-spacing` and `ewald-rtol`), `--dlb no|yes|auto` (dynamic load
//! balancing with GROMACS's `-dlb` meanings, default no: the domain boundaries follow each
//! PE's load at every repartition: the update after the last `move_f` and the force kernel,
//! without the exchanges, the barriers that time them apart, the search, the checks or the
//! mesh; with several paths the later ones replay the
//! first path's measured loads, so that every path takes the same boundaries and the paths
//! stay comparable bit for bit), `--dds F` (GROMACS's `-dds`, with `--dlb yes|auto`: pulses
//! are provisioned so that a domain may shrink to F of its equal width, default 0.8;
//! `DdGrid::with_balancing_room`), and `--pes N` when the program launches itself.
//!
//! With `--coulomb pme` each step also sends the home atoms to their PME slabs, runs the mesh
//! (spread, distributed FFT on the library's all-to-all, solve, gather) and brings the
//! reciprocal forces back, one-sided on the one-sided path and over MPI on the MPI path; it
//! prints those phases per step under GROMACS's names, and `--verify` checks the reciprocal
//! forces against serial PME and the real-space forces (with their exclusion corrections)
//! against the serial computation.
//!
//! The program drives the halo exchange as an MD engine would, through its public API only.
//! Each step: `move_x`, a Lennard-Jones plus reaction-field (or real-space Ewald) force on home and halo atoms,
//! `move_f`, then every home atom takes a step with its velocity (a per-atom state kept by
//! the program, which migrates with the atoms); every `nstlist` steps the atoms are
//! repartitioned and the pair list is built again (with the same buffer as the halo). With `--verify`, the halo is checked against a brute-force search after
//! every repartition, the forces and the virial against a serial computation at the last
//! step, and the final positions against a serial replay of the motion.
//!
//! Per path it prints GROMACS's two load-balance figures (the average load imbalance and the
//! part of the run time spent waiting for it) over the second half of the run, as GROMACS
//! counts them with `-resethway`, as `dlb path=<p> mode=<m> imbalance_pct=<i> waiting_pct=<w>
//! moves=<k> step_ms=<t> first_half_imbalance_pct=.. first_half_waiting_pct=..
//! first_half_moves=.. run_step_ms=<t> balancing=on|off|off-for-good turned_off=<n>`
//! (`step_ms`: the mean wall time of a step in the second half, `run_step_ms` over the whole
//! run, repartitions and searches included; `turned_off`: how often `--dlb auto` turned
//! balancing off for slowing the steps, over the whole run), then the
//! median per step of each phase under GROMACS's names (Comm. coord.,
//! Force, Wait + Comm. F with the wait for the slowest PE apart, Neighbor search), the same
//! as `phases path=<p> comm_coord_us=<t> force_us=<t> wait_us=<t> comm_f_us=<t> search_us=<t>
//! step_us=<t> kernel=<isa>` for scripts, and last
//! `summary path=<p> atoms=<n> pes=<k> steps=<s> move_x_us=<t> move_f_us=<t> verified=<yes|no|off>
//! fingerprint=<hex>`, the fingerprint covering every PE's coordinates, forces (and PME
//! results) at every step: the same for the same job wherever its PEs run.

use std::path::PathBuf;
use std::time::Instant;

use md_demo::cluster::PairList;
use md_demo::force::{ForceField, Topology, domain_forces};
use md_demo::types::TypeTable;
use md_demo::{Structure, motion, verify};
use md_halo::{DdGrid, Dlb, HaloExchange, PeriodicImages, RVec};
use onesided::{Collectives, Links, Path, Runtime, Transport};
use onesided_suite::cli;
use pme_redist::reference::serial_pme;
use pme_redist::{Particle, Pme, PmeGrid, Redistribution, ewald_coefficient};

struct Options {
    gro: PathBuf,
    types: Option<PathBuf>,
    replicate: [usize; 3],
    cutoff: f32,
    grid: Option<[usize; 3]>,
    steps: u64,
    nstlist: u64,
    threads: usize,
    paths: Vec<RunPath>,
    verify: bool,
    dump_halo: Option<PathBuf>,
    pes: usize,
    kernel: Kernel,
    images: PeriodicImages,
    pme: bool,
    spacing: f32,
    rtol: f64,
    squeeze: Option<u64>,
    dlb: Dlb,
    /// The least domain width balancing may reach, as a fraction of the equal width.
    dds: f64,
}

/// Which force kernel computes the step's forces.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// The clustered pair list and its vectorised kernel (md_demo::cluster).
    Cluster,
    /// The plain cell-list loop over every pair from both ends (md_demo::force::domain_forces).
    Reference,
}

const USAGE: &str = "usage: halo_exchange [--gro FILE] [--types FILE] [--replicate NX,NY,NZ] [--cutoff NM] \
[--grid NX,NY,NZ] [--steps S] [--nstlist K] [--threads T] [--path mpi|onesided|mpi-rma|auto|both|all] [--verify] \
[--dump-halo DIR] [--kernel cluster|reference] [--images kernel|halo] [--coulomb rf|pme] [--spacing NM] [--rtol R] \
[--squeeze STEP] [--dlb no|yes|auto] [--dds F] [--pes N]";

fn parse() -> Result<Options, String> {
    let mut options = Options {
        gro: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro")),
        types: None,
        replicate: [2, 2, 2],
        cutoff: 0.9,
        grid: None,
        steps: 20,
        nstlist: 10,
        threads: 1,
        paths: vec![RunPath::OneSided, RunPath::Mpi],
        verify: false,
        dump_halo: None,
        pes: 2,
        kernel: Kernel::Cluster,
        images: PeriodicImages::Kernel,
        pme: false,
        spacing: 0.12,
        rtol: 1e-5,
        squeeze: None,
        dlb: Dlb::No,
        dds: 0.8,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--gro" => options.gro = value()?.into(),
            "--types" => options.types = Some(value()?.into()),
            "--replicate" => options.replicate = cli::triple(&flag, &value()?)?,
            "--cutoff" => options.cutoff = cli::length(&flag, &value()?)?,
            "--grid" => options.grid = Some(cli::triple(&flag, &value()?)?),
            "--steps" => options.steps = cli::positive(&flag, &value()?)?,
            "--nstlist" => options.nstlist = cli::positive(&flag, &value()?)?,
            "--threads" => options.threads = cli::positive(&flag, &value()?)? as usize,
            "--pes" => options.pes = cli::positive(&flag, &value()?)? as usize,
            "--path" => {
                options.paths = match value()?.as_str() {
                    "both" => vec![RunPath::OneSided, RunPath::Mpi],
                    "all" => vec![RunPath::OneSided, RunPath::Mpi, RunPath::MpiRma, RunPath::Auto],
                    "onesided" => vec![RunPath::OneSided],
                    "mpi" => vec![RunPath::Mpi],
                    "mpi-rma" => vec![RunPath::MpiRma],
                    "auto" => vec![RunPath::Auto],
                    other => {
                        return Err(format!(
                            "--path takes mpi, onesided, mpi-rma, auto, both or all, got {other:?}"
                        ));
                    }
                }
            }
            "--kernel" => {
                options.kernel = match value()?.as_str() {
                    "cluster" => Kernel::Cluster,
                    "reference" => Kernel::Reference,
                    other => return Err(format!("--kernel takes cluster or reference, got {other:?}")),
                }
            }
            "--images" => {
                options.images = match value()?.as_str() {
                    "kernel" => PeriodicImages::Kernel,
                    "halo" => PeriodicImages::Halo,
                    other => return Err(format!("--images takes kernel or halo, got {other:?}")),
                }
            }
            "--coulomb" => {
                options.pme = match value()?.as_str() {
                    "rf" => false,
                    "pme" => true,
                    other => return Err(format!("--coulomb takes rf or pme, got {other:?}")),
                }
            }
            "--spacing" => options.spacing = cli::length(&flag, &value()?)?,
            "--rtol" => {
                let v = value()?;
                options.rtol = v.parse().map_err(|_| format!("--rtol needs a number, got {v:?}"))?;
            }
            "--verify" => options.verify = true,
            "--squeeze" => options.squeeze = Some(cli::positive(&flag, &value()?)?),
            "--dump-halo" => options.dump_halo = Some(value()?.into()),
            "--dlb" => options.dlb = value()?.parse().map_err(|e| format!("--dlb: {e}"))?,
            "--dds" => {
                let v = value()?;
                options.dds = v.parse().map_err(|_| format!("--dds needs a number, got {v:?}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    if let Some(step) = options.squeeze {
        if step % options.nstlist != 0 {
            return Err(format!(
                "--squeeze {step} needs a step of a repartition, a multiple of --nstlist {}",
                options.nstlist
            ));
        }
        if options.verify || options.pme {
            return Err(
                "--squeeze moves atoms off the motion that --verify replays and --coulomb pme plans for; \
                        drop those options"
                    .to_string(),
            );
        }
    }
    Ok(options)
}

/// What a path's run measured and found.
struct Outcome {
    path: RunPath,
    move_x_us: f64,
    move_f_us: f64,
    verified: Option<bool>,
    /// Per step: fingerprints of the coordinates after move_x, the forces after move_f and
    /// (with PME) the reciprocal energy and forces back at their owners.
    fingerprints: Vec<(u64, u64, u64)>,
    /// This PE's load per step as the load balance took it: its force computation.
    loads: Vec<std::time::Duration>,
}

/// The system and everything derived from it, the same on every PE.
struct Setup {
    structure: Structure,
    topology: Topology,
    grid: DdGrid,
    /// With --coulomb pme: the grid over every PE and the Ewald coefficient.
    pme: Option<(PmeGrid, f64)>,
}

fn main() {
    let (options, rt) = cli::start("halo_exchange", parse, |o| o.pes, |o| o.threads);
    // Input errors are found by every PE alike, before any communication: each says so and
    // the job ends normally, with a failure status.
    let setup = match prepare(&rt, &options) {
        Ok(setup) => setup,
        Err(e) => {
            cli::say(&format!("halo_exchange: PE {}: {e}", rt.my_pe()));
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
        Err(e) => {
            cli::say(&format!("halo_exchange: PE {}: {e}", rt.my_pe()));
            if e.scope() == onesided::ErrorScope::EveryPe {
                // Every PE has it from the same call: end together, normally.
                drop(rt);
                std::process::exit(1)
            }
            // Possibly this PE's alone: the others may be waiting for it.
            rt.abort(1)
        }
    }
}

fn prepare(rt: &Runtime, options: &Options) -> md_demo::Result<Setup> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .build_global()
        .map_err(|e| md_demo::Error::Config(format!("cannot start {} threads: {e}", options.threads)))?;
    let structure = Structure::read_gro(&options.gro)?.replicate(options.replicate)?;
    let mut table = TypeTable::builtin();
    if let Some(types) = &options.types {
        table = table.read_file(types)?;
    }
    let topology = Topology::new(&structure, &table, &options.gro.display().to_string())?;
    let range = options.cutoff + motion::buffer_for(options.nstlist as usize, &structure.pbc);
    let grid = match options.grid {
        Some(dims) => DdGrid::new(dims, structure.pbc, range, rt.n_pes())?,
        None => DdGrid::choose(rt.n_pes(), structure.pbc, range)?,
    };
    // As GROMACS with its DLB on or able to turn on: pulses with room to shrink a domain.
    let grid = if options.dlb == Dlb::No { grid } else { grid.with_balancing_room(options.dds)? };
    let pme = if options.pme {
        let all: Vec<usize> = (0..rt.n_pes()).collect();
        let pme_grid = PmeGrid::new(structure.pbc.vectors(), options.spacing, &all).map_err(config)?;
        Some((pme_grid, ewald_coefficient(options.cutoff as f64, options.rtol).map_err(config)?))
    } else {
        None
    };
    Ok(Setup { structure, topology, grid, pme })
}

/// A PME error as the demo's.
fn config(e: pme_redist::Error) -> md_demo::Error {
    md_demo::Error::Config(e.to_string())
}

fn run(rt: &Runtime, options: &Options, setup: &Setup) -> md_demo::Result<bool> {
    let me = rt.my_pe();
    let field = match &setup.pme {
        Some((_, beta)) => ForceField::ewald(options.cutoff as f64, *beta),
        None => ForceField::new(options.cutoff as f64),
    };
    let (structure, grid) = (&setup.structure, &setup.grid);
    if me == 0 {
        let [nx, ny, nz] = grid.dims();
        let v = structure.pbc.vectors();
        let shape = if structure.pbc.is_rectangular() {
            format!("box {:.3} x {:.3} x {:.3} nm", v[0][0], v[1][1], v[2][2])
        } else {
            format!("triclinic box a={:?} b={:?} c={:?} nm", v[0], v[1], v[2])
        };
        println!(
            "{}: {} atoms, {shape}, {} PEs (grid {nx}x{ny}x{nz}, pulses {:?}), cutoff {:.3} nm + buffer {:.3} nm, \
             {} threads per PE, periodic images by the {}",
            structure.title,
            structure.len(),
            rt.n_pes(),
            grid.pulses(),
            options.cutoff,
            grid.range() - options.cutoff,
            options.threads,
            match options.images {
                PeriodicImages::Kernel => "kernel",
                PeriodicImages::Halo => "halo",
            },
        );
    }
    let mut outcomes = Vec::new();
    for (i, &path) in options.paths.iter().enumerate() {
        // The later paths balance on the first one's loads: the same boundaries, the same bits.
        let replay = outcomes.first().map(|first: &Outcome| first.loads.as_slice());
        outcomes.push(run_path(rt, options, setup, &field, path, i == 0, replay)?);
    }
    let mut all_verified = true;
    if options.paths.len() >= 2 {
        let same = outcomes.windows(2).all(|w| w[0].fingerprints == w[1].fingerprints);
        let differing = rt.max_u64_one(u64::from(!same))?;
        if me == 0 {
            println!(
                "paths bit-identical (coordinates after move_x, forces after move_f, every step): {}",
                if differing == 0 { "yes" } else { "NO" }
            );
        }
        if options.verify && differing != 0 {
            for outcome in &mut outcomes {
                outcome.verified = Some(false);
            }
        }
    }
    for outcome in &outcomes {
        all_verified &= outcome.verified != Some(false);
        let steps: Vec<[u64; 3]> = outcome.fingerprints.iter().map(|&(x, f, m)| [x, f, m]).collect();
        let job = verify::job_fingerprint(rt, &steps)?;
        if me == 0 {
            println!(
                "summary path={} atoms={} pes={} steps={} move_x_us={:.2} move_f_us={:.2} verified={} \
                 fingerprint={job:016x}",
                label(outcome.path),
                structure.len(),
                rt.n_pes(),
                options.steps,
                outcome.move_x_us,
                outcome.move_f_us,
                match outcome.verified {
                    None => "off",
                    Some(true) => "yes",
                    Some(false) => "no",
                }
            );
        }
    }
    Ok(all_verified)
}

/// Reports the outcome of a check every PE made: prints each failing PE's reason, and on PE
/// 0 one line for all; returns whether every PE passed.
fn agree(rt: &Runtime, path: RunPath, what: &str, local: md_demo::Result<String>) -> md_demo::Result<bool> {
    let me = rt.my_pe();
    if let Err(e) = &local {
        cli::say(&format!("PE {me}: {e}"));
    }
    let failed = rt.max_u64_one(u64::from(local.is_err()))?;
    if me == 0 {
        let detail = local.as_ref().map(String::as_str).unwrap_or("");
        println!("  {}: {what}: {}{detail}", label(path), if failed == 0 { "ok" } else { "FAILED" });
    }
    Ok(failed == 0)
}

fn run_path(
    rt: &Runtime,
    options: &Options,
    setup: &Setup,
    field: &ForceField,
    path: RunPath,
    first: bool,
    replay: Option<&[std::time::Duration]>,
) -> md_demo::Result<Outcome> {
    let me = rt.my_pe();
    let (structure, topology) = (&setup.structure, &setup.topology);
    let n_atoms = structure.len();
    let builder = HaloExchange::builder(rt, setup.grid.clone());
    let builder = match path {
        RunPath::OneSided => builder.path(Path::OneSided),
        RunPath::Mpi => builder.path(Path::Mpi),
        RunPath::MpiRma => builder.links(Links::uniform(Transport::MpiRma)),
        RunPath::Auto => builder.path(Path::Auto),
    };
    let mut halo = builder
        .periodic_images(options.images)
        .load_balancing(options.dlb)
        .collective_from_global(&structure.positions)?;
    if path == RunPath::Auto {
        let links = rt.collective_links()?;
        if me == 0 {
            println!("auto: {links} ({})", links.source());
        }
    }
    if first && let Some(dir) = &options.dump_halo {
        dump_halo(&halo, dir, me)?;
    }
    // The engine's per-atom state: velocities, in home order, migrating with the atoms.
    let mut velocities: Vec<RVec> = vec![[0.0; 3]; halo.home_count()];
    let mut checks_pass = true;
    let mut halo_checks = Ok(String::new());
    if options.verify {
        halo_checks = verify::collective_check_halo(&halo, &structure.positions).map(|()| String::new());
    }
    // Per-step records, resident from the start, so that the memory report sees the library.
    let steps = options.steps as usize;
    let record = || cli::resident_vec(steps, std::time::Duration::MAX);
    let (mut move_x, mut move_f, mut force, mut wait) = (record(), record(), record(), record());
    let mut search = std::time::Duration::ZERO;
    let mut memory = cli::MemoryTrack::new(options.steps.saturating_sub(1));
    // The pair list, searched again after every repartition into the same buffers.
    let (mut list, mut list_stale): (Option<PairList>, bool) = (None, true);
    let mut list_isa = None;
    let mut forces = Vec::new();
    let mut fingerprints = cli::resident_vec(steps, (u64::MAX, u64::MAX, u64::MAX));
    let mut loads = record();
    // With PME: the mesh over every PE, fed along the redistribution's plan; the one-sided
    // path uses one-sided puts, overlap planes and transposes, the MPI path MPI for all three.
    let mut pme = match &setup.pme {
        Some((pme_grid, beta)) => {
            let (redist_path, mesh_path) = match path {
                RunPath::Mpi => (Path::Mpi, Path::Mpi),
                _ => (Path::OneSided, Path::OneSided),
            };
            let home = particles(&halo, topology);
            // Every step goes through the mesh, whose transposes carry the vote.
            let redist = Redistribution::builder(rt, pme_grid.clone())
                .path(redist_path)
                .collective_build(&home)
                .map_err(config)?;
            let mesh =
                Pme::builder(rt, pme_grid, *beta).path(mesh_path).collective_build().map_err(config)?;
            Some(MeshState {
                redist,
                mesh,
                home,
                forces: Vec::new(),
                energy: 0.0,
                x: cli::resident_vec(steps, std::time::Duration::MAX),
                f: cli::resident_vec(steps, std::time::Duration::MAX),
            })
        }
        None => None,
    };
    let mut pme_checks = Ok(String::new());
    // The update after the last move_f: the first part of the next step's load.
    let mut advanced = std::time::Duration::ZERO;
    let run_start = Instant::now();
    // The second half of the run, as GROMACS's -resethway counts it.
    let (halfway, mut first_half, mut late_start) = (options.steps / 2, None, run_start);
    for step in 0..options.steps {
        if step == halfway && halfway > 0 {
            first_half = Some(halo.collective_load_report()?);
            halo.reset_load_report();
            late_start = Instant::now();
        }
        if options.squeeze == Some(step) {
            // Every atom into the lower half of the box along x: at this repartition the
            // domains there take them all, and their buffers grow.
            for x in halo.home_mut().coordinates.iter_mut() {
                x[0] *= 0.5;
            }
        }
        if step > 0 && step % options.nstlist == 0 {
            // The configuration the new plan is built from, for the brute-force search.
            let before =
                if options.verify { Some(verify::gather_positions(rt, &halo, n_atoms)?) } else { None };
            halo.collective_repartition(&mut [&mut velocities])?;
            // A repartition reopens the load region, as it does GROMACS's.
            advanced = std::time::Duration::ZERO;
            list_stale = true;
            // The repartition's temporaries are freed here: give their pages back, or the
            // allocator keeps them and resident memory drifts up over a long run while the
            // memory in use stays level.
            cli::return_free_memory();
            if let Some(state) = pme.as_mut() {
                state.home = particles(&halo, topology);
                state.redist.collective_plan(&state.home).map_err(config)?;
            }
            // On every PE alike (the check is collective), keeping the first failure.
            if let Some(positions) = &before {
                let checked = verify::collective_check_halo(&halo, positions).map(|()| String::new());
                if halo_checks.is_ok() {
                    halo_checks = checked;
                }
            }
        }
        // The exchanges are timed after a barrier, so that they measure communication rather
        // than how long a neighbour took over its forces.
        rt.barrier();
        let start = Instant::now();
        let mut step_view = halo.move_x()?;
        let moved_x = Instant::now();
        let mut force_start = moved_x;
        if options.kernel == Kernel::Cluster && list_stale {
            // The pair search, on the coordinates the halo just brought: GROMACS's Neighbor
            // search, outside the Force phase.
            let built = PairList::search_into(&mut list, step_view.halo(), topology, field)?;
            list_isa = Some(built.isa());
            list_stale = false;
            force_start = Instant::now();
            search += force_start - moved_x;
        }
        // The kernel's shift forces: those of the images it made (none when the halo makes
        // them). The forces go straight into the exchange's array, which move_f sends from.
        let kernel_shift = match list.as_mut() {
            Some(list) => {
                let local = step_view.local();
                list.forces_into(local.coordinates, local.forces)?;
                list.shift_forces()
            }
            None => {
                let all = domain_forces(step_view.halo(), topology, field).0;
                step_view.local().fold_forces(&all)?
            }
        };
        let computed = Instant::now();
        // The load balance takes the update and the kernel: not the barriers around them,
        // nor move_x (its wait is the neighbour's lateness), nor the search (once in a
        // repartition interval, which would count wherever it is not the step left out).
        let load = replay.map_or(advanced + (computed - force_start), |loads| loads[step as usize]);
        step_view.record_load(load);
        loads.push(load);
        let coordinates_print = verify::fingerprint(step_view.halo().coordinates());
        // The wait for the slowest PE, which GROMACS counts in Wait + Comm. F; timed apart,
        // so that move_f measures communication alone.
        let fingerprinted = Instant::now();
        rt.barrier();
        let before_f = Instant::now();
        let mut shift_forces = step_view.move_f()?;
        let moved_f = Instant::now();
        // The program's copy of the home forces, for the checks below (not timed).
        forces.clear();
        forces.extend_from_slice(halo.home_mut().forces);
        shift_forces += kernel_shift;
        wait.push(before_f - fingerprinted);
        let mut mesh_print = 0;
        if let Some(state) = pme.as_mut() {
            state.step(rt, &halo, step == 0)?;
            mesh_print = verify::fingerprint(&state.forces) ^ state.energy.to_bits();
        }
        fingerprints.push((coordinates_print, verify::fingerprint(&forces[..halo.home_count()]), mesh_print));
        memory.step(step);
        if options.verify && step + 1 == options.steps {
            if let Some(state) = pme.as_ref() {
                pme_checks = verify::gather_positions(rt, &halo, n_atoms)
                    .and_then(|positions| state.check(setup, topology, &positions));
            }
            let deviation = verify::deviation(rt, &halo, &forces, &shift_forces, topology, field)?;
            let ok = deviation.force <= FORCE_TOLERANCE && deviation.virial <= FORCE_TOLERANCE;
            checks_pass &= ok;
            if me == 0 {
                println!(
                    "  {}: forces and virial after move_f against a serial computation: largest deviations \
                     {:.2e} and {:.2e} of the largest value (tolerance {FORCE_TOLERANCE:.0e}): {}",
                    label(path),
                    deviation.force,
                    deviation.virial,
                    if ok { "ok" } else { "FAILED" }
                );
            }
        }
        let advance_start = Instant::now();
        let ids = halo.global_indices()[..halo.home_count()].to_vec();
        for ((x, v), &g) in halo.home_mut().coordinates.iter_mut().zip(&mut velocities).zip(&ids) {
            motion::advance(g, step, x, v);
        }
        advanced = advance_start.elapsed();
        move_x.push(moved_x - start);
        force.push(computed - force_start);
        move_f.push(moved_f - before_f);
    }
    let (run_time, late_time) = (run_start.elapsed(), late_start.elapsed());
    memory.report(rt, label(path))?;
    let balance = halo.collective_load_report()?;
    let early = first_half.unwrap_or(balance);
    // Every row, where balancing left each PE the rows near it.
    let grid = halo.collective_whole_grid()?;
    if me == 0 {
        let bounds: Vec<String> = (0..3)
            .filter(|&d| grid.dims()[d] > 1)
            .map(|d| {
                // One row per row of domains along d where they are staggered.
                let rows: Vec<String> = (grid.rows_of_bounds(d).iter())
                    .map(|(_, row)| row.iter().map(|b| format!("{b:.3}")).collect::<Vec<_>>().join(" "))
                    .collect();
                format!("{}: {}", ["x", "y", "z"][d], rows.join(" | "))
            })
            .collect();
        println!(
            "  {}: second half of the run: {balance}; boundaries (fractions) {}",
            label(path),
            bounds.join(", ")
        );
        let late_steps = (options.steps - halfway).max(1) as f64;
        println!(
            "dlb path={} mode={} imbalance_pct={:.2} waiting_pct={:.2} moves={} step_ms={:.4} \
             first_half_imbalance_pct={:.2} first_half_waiting_pct={:.2} first_half_moves={} run_step_ms={:.4} \
             balancing={} turned_off={}",
            label(path),
            options.dlb,
            100.0 * balance.imbalance,
            100.0 * balance.waiting,
            balance.moves,
            late_time.as_secs_f64() * 1e3 / late_steps,
            100.0 * early.imbalance,
            100.0 * early.waiting,
            early.moves,
            run_time.as_secs_f64() * 1e3 / options.steps as f64,
            if balance.off_for_good {
                "off-for-good"
            } else if balance.balancing {
                "on"
            } else {
                "off"
            },
            balance.turned_off
        );
    }
    if options.verify {
        let repartitions = (options.steps - 1) / options.nstlist;
        checks_pass &= agree(
            rt,
            path,
            &format!(
                "halo sets against a brute-force search, at the start and after {repartitions} repartitions"
            ),
            halo_checks,
        )?;
        let replay = verify::gather_positions(rt, &halo, n_atoms).and_then(|positions| {
            replay_motion(structure, options.steps, &positions)
                .map(|worst| format!(" (largest difference {worst:.1e} nm)"))
        });
        checks_pass &= agree(rt, path, "final positions against a serial replay of the motion", replay)?;
        if pme.is_some() {
            checks_pass &= agree(
                rt,
                path,
                "reciprocal energy and forces against serial PME (double precision, same grid)",
                pme_checks,
            )?;
        }
    }
    // Medians per PE, then the slowest PE: a step is as fast as its slowest domain.
    let median_us = |times: &mut Vec<std::time::Duration>| -> f64 {
        times.sort_unstable();
        times.get(times.len() / 2).map_or(0.0, |t| t.as_secs_f64() * 1e6)
    };
    // The pair search runs every nstlist steps: its mean per step, as GROMACS reports it.
    let search_us = search.as_secs_f64() * 1e6 / options.steps as f64;
    let mut medians = [
        median_us(&mut move_x),
        median_us(&mut move_f),
        median_us(&mut force),
        search_us,
        median_us(&mut wait),
    ]
    .map(|us| (us * 1000.0) as u64);
    rt.max_u64(&mut medians)?;
    let [x_us, f_us, force_us, search_us, wait_us] = medians.map(|ns| ns as f64 / 1000.0);
    // With PME: the redistributions' medians and the mesh phases' means per timed step (the
    // first step is a warm-up), on the slowest PE; in PME_PHASES order.
    let mut pme_us = [0.0f64; 7];
    if let Some(state) = pme.as_mut() {
        let timed = options.steps.saturating_sub(1).max(1) as f64;
        let times = state.mesh.times();
        let mean = |t: std::time::Duration| t.as_secs_f64() * 1e6 / timed;
        let mut ns = [
            median_us(&mut state.x),
            mean(times.spread),
            mean(times.fft),
            mean(times.fft_comm),
            mean(times.solve),
            mean(times.gather),
            median_us(&mut state.f),
        ]
        .map(|us| (us * 1000.0) as u64);
        rt.max_u64(&mut ns)?;
        pme_us = ns.map(|ns| ns as f64 / 1000.0);
    }
    let pme_total: f64 = pme_us.iter().sum();
    let pme_comm = pme_us[0] + pme_us[3] + pme_us[6];
    if me == 0 {
        // GROMACS's names for the phases (its log's cycle accounting), so the two read side
        // by side: Comm. coord. is move_x, Wait + Comm. F the wait for the slowest PE plus
        // move_f, Force the force kernel, Neighbor search the pair-list build (its mean per
        // step). The step is their sum.
        let step_us = x_us + search_us + force_us + wait_us + f_us + pme_total;
        println!(
            "  {}: median per step on the slowest PE: Comm. coord. {x_us:.2} us, Force {:.3} ms, \
             Wait + Comm. F {:.2} us (wait {wait_us:.2}, move_f {f_us:.2}), Neighbor search {:.3} ms; \
             communication {:.1}% of the step",
            label(path),
            force_us / 1000.0,
            wait_us + f_us,
            search_us / 1000.0,
            100.0 * (x_us + f_us + pme_comm) / step_us.max(1e-9)
        );
        if pme.is_some() {
            let phases: Vec<String> = onesided_suite::yardstick::PME_PHASES
                .iter()
                .zip(&pme_us)
                .map(|(name, us)| format!("{name} {us:.1}"))
                .collect();
            println!("  {}: PME, us per step on the slowest PE: {}", label(path), phases.join(", "));
        }
        println!(
            "phases path={} comm_coord_us={x_us:.2} force_us={force_us:.2} wait_us={wait_us:.2} \
             comm_f_us={f_us:.2} search_us={search_us:.2} pme_redist_x_us={:.2} pme_spread_us={:.2} \
             pme_fft_us={:.2} pme_fft_comm_us={:.2} pme_solve_us={:.2} pme_gather_us={:.2} pme_redist_f_us={:.2} \
             step_us={step_us:.2} kernel={}",
            label(path),
            pme_us[0],
            pme_us[1],
            pme_us[2],
            pme_us[3],
            pme_us[4],
            pme_us[5],
            pme_us[6],
            list_isa.map_or("reference".to_string(), |isa| isa.to_string().replace(' ', "-"))
        );
    }
    Ok(Outcome {
        path,
        move_x_us: x_us,
        move_f_us: f_us,
        verified: options.verify.then_some(checks_pass),
        fingerprints,
        loads,
    })
}

/// The PME part of a step: the redistribution to the slabs, the mesh, and what came back.
struct MeshState<'rt> {
    redist: Redistribution<'rt>,
    mesh: Pme<'rt>,
    /// The home atoms as the redistribution takes them (positions refreshed every step).
    home: Vec<Particle>,
    /// The reciprocal forces on the home atoms, in home order, after the last step.
    forces: Vec<RVec>,
    /// The reciprocal energy of the last step, summed over the PME ranks.
    energy: f64,
    /// Time of `PME redist. X` and `PME redist. F` per timed step.
    x: Vec<std::time::Duration>,
    f: Vec<std::time::Duration>,
}

/// The home atoms of `halo` with their charges, as PME particles.
fn particles(halo: &HaloExchange<'_>, topology: &Topology) -> Vec<Particle> {
    let home = halo.home_count();
    halo.coordinates()[..home]
        .iter()
        .zip(&halo.global_indices()[..home])
        .map(|(&x, &g)| Particle { x, q: topology.params[g as usize].charge, global: g })
        .collect()
}

impl MeshState<'_> {
    /// One PME step on the home atoms' current positions; `warm_up` leaves it untimed (page
    /// faults, the FFT plans' first touch).
    ///
    /// # Collective
    /// Every PE must call it.
    fn step(&mut self, rt: &Runtime, halo: &HaloExchange<'_>, warm_up: bool) -> md_demo::Result<()> {
        let home = halo.home_count();
        for (p, &x) in self.home.iter_mut().zip(&halo.coordinates()[..home]) {
            p.x = x;
        }
        self.forces.resize(home, [0.0; 3]);
        rt.barrier();
        let start = Instant::now();
        let mut delivered = self.redist.redistribute(&self.home).map_err(config)?;
        let x_done = Instant::now();
        let share = self.mesh.collective_step(delivered.mesh()).map_err(config)?;
        let f_start = Instant::now();
        delivered.return_forces(&mut self.forces).map_err(config)?;
        let end = Instant::now();
        self.energy = self.mesh.collective_energy(share).map_err(config)?.energy;
        if warm_up {
            self.mesh.times_mut().reset();
        } else {
            self.x.push(x_done - start);
            self.f.push(end - f_start);
        }
        Ok(())
    }

    /// The last step's reciprocal energy and forces against serial PME on `positions` (every
    /// atom's, gathered).
    fn check(&self, setup: &Setup, topology: &Topology, positions: &[RVec]) -> md_demo::Result<String> {
        let Some((pme_grid, beta)) = &setup.pme else { return Ok(String::new()) };
        let charges: Vec<f32> = topology.params.iter().map(|p| p.charge).collect();
        let serial = serial_pme(pme_grid, positions, &charges, *beta).map_err(config)?;
        if (self.energy - serial.energy).abs() > 1e-5 * serial.energy.abs() {
            return Err(md_demo::Error::Verification(format!(
                "the reciprocal energy {} deviates from the serial {}",
                self.energy, serial.energy
            )));
        }
        let largest = serial.forces.iter().flatten().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
        let mut worst = 0f64;
        for (p, f) in self.home.iter().zip(&self.forces) {
            let s = serial.forces[p.global as usize];
            for d in 0..3 {
                worst = worst.max((s[d] - f64::from(f[d])).abs() / largest);
            }
        }
        if worst > FORCE_TOLERANCE {
            return Err(md_demo::Error::Verification(format!(
                "the reciprocal forces deviate {worst:.2e} of the largest from serial PME (tolerance \
                 {FORCE_TOLERANCE:.0e})"
            )));
        }
        Ok(format!(" (energy {:.3} kJ/mol, largest force deviation {worst:.1e})", self.energy))
    }
}

/// Replays every atom's motion serially from the start and returns the largest distance
/// between where it ends and where the run left it (the run wraps positions into the box at
/// each repartition, so the two differ by rounding, never by a step).
fn replay_motion(structure: &Structure, steps: u64, positions: &[RVec]) -> md_demo::Result<f64> {
    let mut worst = 0.0f64;
    for (g, (&start, &end)) in structure.positions.iter().zip(positions).enumerate() {
        let (mut x, mut v) = (start, [0.0f32; 3]);
        for step in 0..steps {
            motion::advance(g as u32, step, &mut x, &mut v);
        }
        let r = structure.pbc.minimum_image(x, end);
        let distance = (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt();
        worst = worst.max(distance);
        if distance > REPLAY_TOLERANCE {
            return Err(md_demo::Error::Verification(format!(
                "atom {g} ended {distance:.2e} nm from where a serial replay of its motion puts it: its \
                 velocity did not travel with it"
            )));
        }
    }
    Ok(worst)
}

/// How far a replayed position may lie from the run's: rounding of positions wrapped at every
/// repartition, far below one step.
const REPLAY_TOLERANCE: f64 = 1e-4;

/// A path the demo runs: the library's three, and MPI's one-sided transport pinned for every
/// link ([`Links`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunPath {
    OneSided,
    Mpi,
    MpiRma,
    Auto,
}

/// The name of a path on the command line and in the summary.
fn label(path: RunPath) -> &'static str {
    match path {
        RunPath::OneSided => "onesided",
        RunPath::Mpi => "mpi",
        RunPath::MpiRma => "mpi-rma",
        RunPath::Auto => "auto",
    }
}

/// Largest deviation of parallel from serial forces, relative to the largest force: the
/// forces travel and add up in single precision.
const FORCE_TOLERANCE: f64 = 1e-4;

/// Writes `DIR/pe<N>.home` and `DIR/pe<N>.halo`: the global indices of this PE's home and
/// halo atoms, one per line, in ascending order.
fn dump_halo(halo: &HaloExchange<'_>, dir: &std::path::Path, me: usize) -> md_demo::Result<()> {
    let io =
        |e: std::io::Error| md_demo::Error::Io { path: dir.display().to_string(), problem: e.to_string() };
    std::fs::create_dir_all(dir).map_err(io)?;
    let ids = halo.global_indices();
    let (home, halo_ids) = ids.split_at(halo.home_count());
    for (name, list) in [("home", home), ("halo", halo_ids)] {
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        let text: String = sorted.iter().map(|g| format!("{g}\n")).collect();
        std::fs::write(dir.join(format!("pe{me}.{name}")), text).map_err(io)?;
    }
    Ok(())
}
