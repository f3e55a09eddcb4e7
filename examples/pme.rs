//! Whole PME steps on a real system: coordinates and charges to the PME ranks, charge
//! spreading, the distributed 3-D FFT (its transposes on the library's all-to-all), the
//! solve, the backward FFT, the force gather and the forces back to their owners, timed per
//! phase under the names of GROMACS's cycle accounting.
//!
//! ```text
//! scripts/pe-run -n 2 target/release/examples/pme --replicate 3,3,3 --verify
//! cargo run --release --example pme -- --pes 2 --replicate 3,3,3 --fft-path all --verify
//! ```
//!
//! Options: `--gro FILE` (any GROMACS structure; default: the SPC water box in data/),
//! `--types FILE` (charges for atom names the built-in table lacks), `--replicate NX,NY,NZ`,
//! `--spacing NM` (grid spacing, default 0.12) or `--grid KX,KY,KZ`, `--order N` (the
//! interpolation order, GROMACS's `pme-order`, 3 to 12, default 4), `--cutoff NM` and
//! `--rtol R` (the Ewald coefficient from the real-space cutoff and GROMACS's `ewald-rtol`,
//! defaults 0.9 and 1e-5), `--pme-pes M` (default every PE; fewer puts PME on the last M),
//! `--pme-decomposition slab|pencil|auto` (default auto: slabs while each holds at least
//! 2 (order - 1) planes, pencils beyond), `--margin NM` (how far an atom may move between two
//! plans; default what the motion can move in the 10 steps between plans), `--relay` (with
//! `--pme-pes` below the PEs: each particle PE sends all its atoms to one PME rank under its
//! domain, which passes them on, as GROMACS does; `RedistBuilder::relay`),
//! `--path onesided-put|onesided-get|mpi|mpi-alltoallv|mpi-neighbor|auto|all` (the
//! redistribution; default onesided-put and mpi),
//! `--fft-path ordered-onesided|node-aware-onesided|ordered-mpi|mpi|shmem|auto|all` (the
//! transposes; default: ordered-onesided with a one-sided redistribution, mpi with an MPI
//! one, auto with auto; auto: the one measured fastest for the grid's blocks, cached; the
//! redistribution's auto takes per link class the path its link was measured fastest on,
//! mixing MPI and one-sided pairs where the classes differ that way), `--steps S`,
//! `--verify`, `--energies`, `--threads T`, and `--pes N` when the program launches itself.
//!
//! Atoms take a small deterministic step each step, and the redistribution plan is rebuilt
//! every 10 steps. The overlap planes between slabs travel one-sided (put) with a one-sided
//! redistribution, over MPI with an MPI one, and under `--path auto` each pair on its link's
//! path (`Path::Auto`). `--verify` checks the last step's energy and
//! forces against serial PME in double precision on the same grid, and that every
//! configuration gave the same bits. The last line per configuration is `summary path=<p>
//! fft_path=<f> atoms=<n> pes=<k> pme_pes=<m> grid=<KxKxK> steps=<s> redist_x_us= spread_us=
//! fft_us= fft_comm_us= solve_us= gather_us= redist_f_us= step_us= energy=<kJ/mol>
//! verified=<yes|no|off> fingerprint=<hex>`, each time the mean per step on the slowest PE;
//! the fingerprint covers every PE's energy and forces back at every step, the same for the
//! same job wherever its PEs run. Before it, a `heap PE <p>` line per PE gives the
//! redistribution's symmetric and local memory on that PE against the atoms it holds.
//!
//! `--energies` adds, for the coordinates as read (before the first step moves them), the
//! electrostatic energy by part, in kJ/mol, computed on PE 0 after the steps: `energies atoms=<n>
//! volume=<nm^3> beta=<nm^-1> reciprocal=<the distributed mesh> reciprocal_serial=<serial PME, double
//! precision, same grid> coulomb_real=<real-space Ewald Coulomb: pairs within the cutoff
//! (potential-shifted), exclusion corrections and self energy, md_demo::force::serial_forces
//! without Lennard-Jones> self=<the self energy, part of coulomb_real> net_charge=<e>
//! charge_correction=<-π f Q² / (2 V β²), GROMACS's net-charge term; in neither of the
//! others> virial=<the mesh's reciprocal virial, xx,xy,xz,yy,yz,zz, kJ/mol>
//! virial_serial=<serial PME's> virial_correction=<the net-charge term's>`.
//! scripts/gromacs-pme-check sets these beside GROMACS's energies and virial.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use md_demo::force::{ForceField, Topology, serial_forces};
use md_demo::types::{AtomParams, TypeTable};
use md_demo::{Structure, motion, verify::fingerprint};
use md_halo::DdGrid;
use onesided::{AlltoallAlgorithm, Collectives, Path, Runtime, Transport};
use onesided_suite::cli;
use onesided_suite::route::Route;
use pme_redist::reference::serial_pme;
use pme_redist::{
    Particle, Pme, PmeDecomposition, PmeEnergy, PmeGrid, RVec, Redistribution, ewald_coefficient,
};

struct Options {
    gro: PathBuf,
    types: Option<PathBuf>,
    replicate: [usize; 3],
    spacing: f32,
    grid: Option<[usize; 3]>,
    order: usize,
    cutoff: f64,
    rtol: f64,
    pme_pes: Option<usize>,
    decomposition: PmeDecomposition,
    margin: Option<f32>,
    relay: bool,
    paths: Vec<Route>,
    fft_paths: Option<Vec<FftPath>>,
    steps: u64,
    verify: bool,
    energies: bool,
    threads: usize,
    pes: usize,
}

const USAGE: &str = "usage: pme [--gro FILE] [--types FILE] [--replicate NX,NY,NZ] [--spacing NM | --grid KX,KY,KZ] \
[--order N] [--cutoff NM] [--rtol R] [--pme-pes M] [--pme-decomposition slab|pencil|auto] [--margin NM] [--relay] \
[--path onesided-put|onesided-get|mpi|mpi-alltoallv|mpi-neighbor|auto|all] \
[--fft-path ordered-onesided|node-aware-onesided|ordered-mpi|mpi|shmem|auto|all] [--steps S] [--verify] [--energies] \
[--threads T] [--pes N]";

/// Steps between two redistribution plans.
const REPLAN: u64 = 10;

fn parse() -> Result<Options, String> {
    let mut options = Options {
        gro: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro")),
        types: None,
        replicate: [2, 2, 2],
        spacing: 0.12,
        grid: None,
        order: pme_redist::spline::DEFAULT_ORDER,
        cutoff: 0.9,
        rtol: 1e-5,
        pme_pes: None,
        decomposition: PmeDecomposition::Auto,
        margin: None,
        relay: false,
        paths: vec![Route::uniform(Transport::Put), Route::uniform(Transport::Mpi)],
        fft_paths: None,
        steps: 20,
        verify: false,
        energies: false,
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
            "--grid" => options.grid = Some(cli::triple(&flag, &value()?)?),
            "--order" => options.order = positive(value()?)? as usize,
            // In double precision, as GROMACS's rcoulomb: "0.9" read as f32 moved beta by 3e-8.
            "--cutoff" => {
                let v = value()?;
                options.cutoff = v
                    .parse::<f64>()
                    .ok()
                    .filter(|c| *c > 0.0 && c.is_finite())
                    .ok_or(format!("--cutoff needs a positive length in nm, got {v:?}"))?;
            }
            "--rtol" => {
                let v = value()?;
                options.rtol = v.parse().map_err(|_| format!("--rtol needs a number, got {v:?}"))?;
            }
            "--pme-pes" => options.pme_pes = Some(positive(value()?)? as usize),
            "--pme-decomposition" => options.decomposition = value()?.parse().map_err(|e| format!("{e}"))?,
            "--margin" => options.margin = Some(cli::length(&flag, &value()?)?),
            "--relay" => options.relay = true,
            "--path" => {
                let v = value()?;
                options.paths = if v == "all" { Route::all() } else { vec![v.parse()?] };
            }
            "--fft-path" => {
                let v = value()?;
                options.fft_paths = Some(if v == "all" {
                    AlltoallAlgorithm::ALL.into_iter().map(FftPath::Algorithm).collect()
                } else if v == "auto" {
                    vec![FftPath::Auto]
                } else {
                    vec![FftPath::Algorithm(v.parse().map_err(|e: onesided::Error| e.to_string())?)]
                });
            }
            "--steps" => options.steps = positive(value()?)?,
            "--threads" => options.threads = positive(value()?)? as usize,
            "--pes" => options.pes = positive(value()?)? as usize,
            "--verify" => options.verify = true,
            "--energies" => options.energies = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    Ok(options)
}

/// The system, its charges, the grid, the Ewald coefficient and this PE's home atoms.
struct Setup {
    structure: Structure,
    charges: Vec<f32>,
    grid: PmeGrid,
    pme: Vec<usize>,
    beta: f64,
    home: Vec<Particle>,
    /// The redistribution's displacement margin, nm.
    margin: f32,
    /// This PE's relay PME rank, with `--relay` on a particle PE.
    relay: Option<usize>,
}

fn main() {
    let (options, rt) = cli::start("pme", parse, |o| o.pes, |o| o.threads);
    // Input errors are found by every PE alike, before any communication.
    let setup = match prepare(&rt, &options) {
        Ok(setup) => setup,
        Err(e) => {
            cli::say(&format!("pme: PE {}: {e}", rt.my_pe()));
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
        // Errors every PE finds alike (a bad path for the group, an atom that moved too far):
        // the job can end normally.
        Err(
            e @ (pme_redist::Error::MovedTooFar { .. }
            | pme_redist::Error::Config(_)
            | pme_redist::Error::CollectiveConfig(_)),
        ) => {
            cli::say(&format!("pme: PE {}: {e}", rt.my_pe()));
            drop(rt);
            std::process::exit(1)
        }
        Err(e) => {
            cli::say(&format!("pme: PE {}: {e}", rt.my_pe()));
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
        .map(|p| p.charge)
        .collect();
    let n = rt.n_pes();
    let m = options.pme_pes.unwrap_or(n);
    if m > n {
        return Err(format!("--pme-pes {m} does not fit a job of {n} PEs; use at most {n}").into());
    }
    let pme: Vec<usize> = if m == n { (0..n).collect() } else { (n - m..n).collect() };
    let particle_pes = if m == n { n } else { n - m };
    let grid = match options.grid {
        Some(k) => PmeGrid::builder(structure.pbc.vectors(), &pme)
            .sizes(k)
            .order(options.order)
            .decomposition(options.decomposition)
            .build()?,
        None => PmeGrid::builder(structure.pbc.vectors(), &pme)
            .spacing(options.spacing)
            .order(options.order)
            .decomposition(options.decomposition)
            .build()?,
    };
    // What an atom can move between two plans (REPLAN steps), unless the user says.
    let margin = options.margin.unwrap_or(motion::buffer_for(REPLAN as usize, &structure.pbc) / 2.0);
    let beta = ewald_coefficient(options.cutoff, options.rtol)?;
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
    let relay = if options.relay && me < particle_pes {
        Some(grid.relay_rank(domains.dims(), domains.cell_of(me))?)
    } else {
        None
    };
    Ok(Setup { structure, charges, grid, pme, beta, home, margin, relay })
}

/// The transposes' all-to-all: one algorithm, or the one measured fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FftPath {
    Algorithm(AlltoallAlgorithm),
    Auto,
}

impl std::fmt::Display for FftPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FftPath::Algorithm(algorithm) => algorithm.fmt(f),
            FftPath::Auto => f.write_str("auto"),
        }
    }
}

/// The transpose path that goes with a redistribution path by default.
fn matching_fft_path(path: &Route) -> FftPath {
    match path.mesh_path() {
        Path::OneSided => FftPath::Algorithm(AlltoallAlgorithm::Ordered),
        Path::Mpi => FftPath::Algorithm(AlltoallAlgorithm::Mpi),
        Path::Auto => FftPath::Auto,
    }
}

/// What one configuration measured: mean per step on the slowest PE, in µs, by phase.
struct Outcome {
    path: Route,
    fft_path: FftPath,
    /// redist X, spread, FFT, FFT comm., solve, gather, redist F, whole step.
    us: [f64; 8],
    energy: f64,
    /// The reciprocal energy of the first step, at the coordinates as read.
    first_energy: PmeEnergy,
    verified: Option<bool>,
    prints: Vec<(u64, u64)>,
}

fn run(rt: &Runtime, options: &Options, setup: &Setup) -> pme_redist::Result<bool> {
    let me = rt.my_pe();
    if me == 0 {
        let [kx, ky, kz] = setup.grid.sizes();
        let [px, py] = setup.grid.dims();
        let decomposition = if py > 1 { format!("{px}x{py} pencils") } else { format!("{px} slabs") };
        println!(
            "{}: {} atoms, {} PEs ({} PME ranks), grid {kx}x{ky}x{kz} in {decomposition}, order {}, beta {:.6} nm^-1 (cutoff {} nm, ewald-rtol {:e}), margin {:.4} nm{}",
            setup.structure.title,
            setup.structure.len(),
            rt.n_pes(),
            setup.pme.len(),
            setup.grid.order(),
            setup.beta,
            options.cutoff,
            options.rtol,
            setup.margin,
            if options.relay { ", relayed" } else { "" }
        );
    }
    let mut outcomes = Vec::new();
    for path in &options.paths {
        let fft_paths = options.fft_paths.clone().unwrap_or_else(|| vec![matching_fft_path(path)]);
        for fft_path in fft_paths {
            outcomes.push(run_configuration(rt, options, setup, path, fft_path)?);
        }
    }
    let mut all = true;
    if outcomes.len() > 1 {
        let same = outcomes.windows(2).all(|w| w[0].prints == w[1].prints);
        if me == 0 {
            println!(
                "configurations bit-identical (energy and forces back at their owners, every step): {}",
                if same { "yes" } else { "NO" }
            );
        }
        all &= !options.verify || same;
    }
    if let [first, .., last] = &outcomes[..]
        && me == 0
    {
        let ratio = |i: usize| if last.us[i] > 0.0 { first.us[i] / last.us[i] } else { f64::NAN };
        println!(
            "ratio {}+{} / {}+{}: redist X {:.2}, FFT comm. {:.2}, redist F {:.2}, step {:.2}",
            first.path,
            first.fft_path,
            last.path,
            last.fft_path,
            ratio(0),
            ratio(3),
            ratio(6),
            ratio(7)
        );
    }
    let [kx, ky, kz] = setup.grid.sizes();
    for o in &outcomes {
        all &= o.verified != Some(false);
        let steps: Vec<[u64; 2]> = o.prints.iter().map(|&(e, f)| [e, f]).collect();
        let job = md_demo::verify::job_fingerprint(rt, &steps)?;
        if me == 0 {
            let [x, spread, fft, comm, solve, gather, f, step] = o.us;
            println!(
                "summary path={} fft_path={} atoms={} pes={} pme_pes={} grid={kx}x{ky}x{kz} steps={} redist_x_us={x:.2} \
                 spread_us={spread:.2} fft_us={fft:.2} fft_comm_us={comm:.2} solve_us={solve:.2} gather_us={gather:.2} \
                 redist_f_us={f:.2} step_us={step:.2} energy={:.6} verified={} fingerprint={job:016x}",
                o.path,
                o.fft_path,
                setup.structure.len(),
                rt.n_pes(),
                setup.pme.len(),
                options.steps,
                o.energy,
                match o.verified {
                    None => "off",
                    Some(true) => "yes",
                    Some(false) => "no",
                }
            );
        }
    }
    if options.energies && me == 0 {
        print_energies(options, setup, &outcomes[0].first_energy)?;
    }
    Ok(all)
}

/// The `energies` line (see the module documentation) for the coordinates as read, with the
/// reciprocal energy and virial `mesh` gave for them.
fn print_energies(options: &Options, setup: &Setup, mesh: &PmeEnergy) -> pme_redist::Result<()> {
    let positions = &setup.structure.positions;
    let serial = serial_pme(&setup.grid, positions, &setup.charges, setup.beta)?;
    // Coulomb only: the charges with Lennard-Jones switched off, molecules as the demo's.
    let topology = Topology {
        params: setup.charges.iter().map(|&charge| AtomParams { charge, c6: 0.0, c12: 0.0 }).collect(),
        molecules: setup.structure.molecules.clone(),
    };
    let field = ForceField::ewald(options.cutoff, setup.beta);
    let real = serial_forces(positions, &setup.structure.pbc, &topology, &field)
        .map_err(|e| pme_redist::Error::Config(format!("--energies: {e}")))?;
    let self_energy = field.self_energy(setup.charges.iter().copied());
    let net_charge: f64 = setup.charges.iter().map(|&q| q as f64).sum();
    // GROMACS's ewald_charge_correction (epsilon_r = 1): the energy of a uniform neutralising
    // background, which the reciprocal sum over non-zero wave vectors leaves out.
    let correction = PmeEnergy::charge_correction(setup.grid.volume(), net_charge, setup.beta);
    // The virial's upper triangle, xx,xy,xz,yy,yz,zz.
    let upper = |v: &[[f64; 3]; 3]| {
        [v[0][0], v[0][1], v[0][2], v[1][1], v[1][2], v[2][2]].map(|x| format!("{x:.9e}")).join(",")
    };
    println!(
        "energies atoms={} volume={:.9} beta={:.10} reciprocal={:.6} reciprocal_serial={:.6} coulomb_real={:.6} \
         self={self_energy:.6} net_charge={net_charge:.6} charge_correction={:.6} virial={} virial_serial={} \
         virial_correction={}",
        setup.structure.len(),
        setup.grid.volume(),
        setup.beta,
        mesh.energy,
        serial.energy,
        real.energy,
        correction.energy,
        upper(&mesh.virial),
        upper(&serial.virial),
        upper(&correction.virial),
    );
    Ok(())
}

fn run_configuration(
    rt: &Runtime,
    options: &Options,
    setup: &Setup,
    path: &Route,
    fft_path: FftPath,
) -> pme_redist::Result<Outcome> {
    let me = rt.my_pe();
    let mut home = setup.home.clone();
    // Every step goes through the mesh, whose transposes carry the vote on the step's error.
    let builder =
        path.apply(Redistribution::builder(rt, setup.grid.clone())).displacement_margin(setup.margin);
    let builder = if options.relay { builder.relay(|_| setup.relay.unwrap_or(usize::MAX)) } else { builder };
    let mut redist = builder.collective_build(&home)?;
    // The overlap planes go the way the redistribution went; under auto, per partner the
    // path of its link.
    let overlap = match path {
        Route::Auto => Path::Auto,
        _ if redist.links().other_node == Transport::Mpi => Path::Mpi,
        _ => Path::OneSided,
    };
    if *path == Route::Auto && me == 0 {
        let links = redist.links();
        if links.same_node == links.other_node {
            println!("  auto: the redistribution took {} for every pair", links.same_node);
        } else {
            println!(
                "  auto: the redistribution took {} within a node, {} across nodes",
                links.same_node, links.other_node
            );
        }
    }
    let mesh = Pme::builder(rt, &setup.grid, setup.beta).path(overlap);
    let mut mesh = match fft_path {
        FftPath::Algorithm(algorithm) => mesh.fft_algorithm(algorithm),
        FftPath::Auto => mesh.fft_path(Path::Auto),
    }
    .collective_build()?;
    if fft_path == FftPath::Auto && me == 0 {
        println!("  {path} + auto: the transposes took {} (measured fastest)", mesh.fft().algorithm());
    }
    let mut home_forces = vec![[0.0f32; 3]; home.len()];
    let (mut x_time, mut f_time, mut step_time) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    // Per-step records, resident from the start, so that the memory report sees the library.
    let mut prints = cli::resident_vec(options.steps as usize + 1, (u64::MAX, u64::MAX));
    let mut memory = cli::MemoryTrack::new(options.steps);
    let (mut energy, mut first_energy, mut verified) = (0.0, PmeEnergy::default(), None);
    // The first step is a warm-up (page faults, FFT plans' first touch): not timed.
    for step in 0..=options.steps {
        if step > 0 && step % REPLAN == 0 {
            redist.collective_plan(&home)?;
        }
        if step == 1 {
            mesh.times_mut().reset();
            (x_time, f_time, step_time) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        }
        rt.barrier();
        let start = Instant::now();
        let mut delivered = redist.redistribute(&home)?;
        let x_done = Instant::now();
        let share = mesh.collective_step(delivered.mesh())?;
        let f_start = Instant::now();
        delivered.return_forces(&mut home_forces)?;
        let end = Instant::now();
        x_time += x_done - start;
        f_time += end - f_start;
        step_time += end - start;
        let total = mesh.collective_energy(share)?;
        energy = total.energy;
        if step == 0 {
            first_energy = total;
        }
        prints.push((energy.to_bits(), fingerprint(&home_forces)));
        memory.step(step);
        if options.verify && step == options.steps {
            verified = Some(verify(rt, setup, &home, &home_forces, energy, step)?);
        }
        for p in &mut home {
            p.x = motion::displaced(p.global, step, p.x);
        }
    }
    memory.report(rt, &format!("{path}+{fft_path}"))?;
    print_heap(rt, &redist, home.len())?;
    let times = mesh.times();
    let per_step = |t: Duration| t.as_nanos() as u64 / options.steps;
    let mut ns = [
        per_step(x_time),
        per_step(times.spread),
        per_step(times.fft),
        per_step(times.fft_comm),
        per_step(times.solve),
        per_step(times.gather),
        per_step(f_time),
        per_step(step_time),
    ];
    rt.max_u64(&mut ns)?;
    let us = ns.map(|v| v as f64 / 1000.0);
    if me == 0 {
        let names = onesided_suite::yardstick::PME_PHASES.iter().chain(&["step"]);
        let phases: Vec<String> = names.zip(&us).map(|(name, t)| format!("{name} {t:.1}")).collect();
        println!("  {path} + {fft_path}: us per step on the slowest PE: {}", phases.join(", "));
    }
    Ok(Outcome { path: path.clone(), fft_path, us, energy, first_energy, verified, prints })
}

/// Each PE's memory for the redistribution, printed by PE 0: its symmetric bytes (the same
/// on every PE) and its own (local) bytes, the atoms it holds (home atoms, or on a PME rank
/// those it received last, for its mesh and with a relay for the PEs it relays for) and the
/// ratio of both to the bytes out and back (32 per atom) of the most of those.
fn print_heap(rt: &Runtime, redist: &Redistribution<'_>, home: usize) -> pme_redist::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    const COLUMNS: usize = 6;
    let mut table = vec![0u64; COLUMNS * n];
    let row = &mut table[COLUMNS * me..COLUMNS * (me + 1)];
    row[0] = redist.symmetric_bytes() as u64;
    row[1] = redist.local_bytes() as u64;
    row[2] = home as u64;
    row[3] = redist.last_received() as u64;
    row[4] = redist.targets().len() as u64;
    row[5] = redist.last_relayed() as u64;
    rt.max_u64(&mut table)?;
    if me == 0 {
        for (pe, row) in table.chunks_exact(COLUMNS).enumerate() {
            let held = row[2].max(row[3]).max(row[5]).max(1);
            println!(
                "  heap PE {pe}: redistribution {:.1} KiB symmetric + {:.1} KiB local for {} home, {} \
                 received and {} relayed atoms ({:.1}x the most's bytes, {} targets)",
                row[0] as f64 / 1024.0,
                row[1] as f64 / 1024.0,
                row[2],
                row[3],
                row[5],
                (row[0] + row[1]) as f64 / (32 * held) as f64,
                row[4]
            );
        }
    }
    Ok(())
}

/// The last step against serial PME on the same grid, in double precision; every PE returns
/// the same verdict.
fn verify(
    rt: &Runtime,
    setup: &Setup,
    home: &[Particle],
    home_forces: &[RVec],
    energy: f64,
    step: u64,
) -> pme_redist::Result<bool> {
    let me = rt.my_pe();
    // The positions every atom has now, replayed from the start with the same arithmetic.
    let mut positions = setup.structure.positions.clone();
    for s in 0..step {
        for (g, x) in positions.iter_mut().enumerate() {
            *x = motion::displaced(g as u32, s, *x);
        }
    }
    let serial = serial_pme(&setup.grid, &positions, &setup.charges, setup.beta)?;
    let mut failures = Vec::new();
    if (energy - serial.energy).abs() > 1e-5 * serial.energy.abs() {
        failures.push(format!("the reciprocal energy {energy} deviates from the serial {}", serial.energy));
    }
    let largest = serial.forces.iter().flatten().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    let worst = home
        .iter()
        .zip(home_forces)
        .flat_map(|(p, f)| {
            let s = serial.forces[p.global as usize];
            (0..3).map(move |d| (s[d] - f[d] as f64).abs())
        })
        .fold(0f64, f64::max);
    if worst / largest > 1e-4 {
        failures.push(format!("the forces deviate {:.2e} from serial PME", worst / largest));
    }
    for f in &failures {
        cli::say(&format!("PE {me}: {f}"));
    }
    let failed = rt.max_u64_one(u64::from(!failures.is_empty()))?;
    if me == 0 {
        println!(
            "  energy and forces against serial PME (double precision, same grid): {}",
            if failed == 0 { "ok" } else { "FAILED" }
        );
    }
    Ok(failed == 0)
}
