//! A whole NVE engine with PME on the crates: molten NaCl with Tosi-Fumi short-range forces
//! and Ewald electrostatics, the short range (Born-Mayer-Huggins repulsion and dispersion,
//! real-space Ewald) over the halo exchange of `md_halo` in double precision, the
//! reciprocal part over the PME mesh of `pme_redist`, velocity Verlet, energies and the
//! pressure from the virial. The template for an engine with long-range electrostatics.
//!
//! ```text
//! cargo run --release --example nacl_engine -- --pes 2 --steps 2000
//! ```
//!
//! One step, as `md_halo::Home` writes it down:
//!
//! 1. half a kick with the last forces, a drift of the home positions;
//! 2. every `--nstlist` steps the repartition (velocities move with the atoms), then a new
//!    redistribution plan for the new home order;
//! 3. `move_x`, the short-range kernel on the step's view, `move_f`: short-range totals;
//! 4. the PME step on the same home positions: `redistribute`, the mesh
//!    (`Pme::collective_step` on energy steps, `collective_forces` between), the reciprocal
//!    forces back in home order, added to `Home::forces`, the totals that migrate with the
//!    atoms;
//! 5. the second half kick.
//!
//! Everything the step communicates with lives in one struct ([`Engine`]): the halo
//! exchange, the redistribution and the mesh each borrow only the runtime.
//!
//! Options: `--pes N`, `--cells C` (C³ rock-salt cells of 8 ions; 5: 1 000 ions),
//! `--steps S` (1 000), `--dt PS` (0.001), `--temperature K` (2 400, the initial velocities:
//! the lattice takes about half as it melts, and the melt settles near 1 200 K),
//! `--equilibrate S` (steps before the drift is fitted, 0: the first picosecond of a
//! melting lattice is no equilibrium),
//! `--nstlist N` (10), `--path onesided|mpi` (every exchange's), `--order N` (4),
//! `--spacing NM` (0.12), `--cutoff NM` (1.0), `--rtol R` (1e-5), `--every N` (energies every
//! N steps, 10), `--grid X,Y,Z`, `--dump FILE` (every ion's final position and velocity in
//! global order), `--pressure-check EPS` (at the end, the configurational pressure from the
//! virial against central differences of the energy under an isotropic strain of EPS),
//! `--parts N` (at the end, microseconds per force step on the slowest PE, medians of seven
//! blocks of N: the whole step's forces, the halo's part alone, the mesh's alone, and the
//! median ratio of the whole to the sum of the parts).
//! PE 0 prints the energies and a last line `summary ... drift=<kJ/mol per ion per ns>
//! pressure=<bar> fingerprint=<hex of every ion's final position and velocity>`.

mod salt;

use md_halo::{DdGrid, HaloExchange, PbcBox};
use onesided::{AnyError, Collectives, ErrorScope, Fnv1a, Path, ReduceOp, Runtime};
use pme_redist::{Particle, Pme, PmeEnergy, PmeGrid, Redistribution, ewald_coefficient, ewald_self_energy};
use salt::{CHARGE, LATTICE, MASS, Share, crystal, short_range, species, thermal_velocity};

/// kJ mol⁻¹ nm⁻³ in bar.
const BAR: f64 = 16.605_390_4;

struct Options {
    cells: usize,
    steps: usize,
    dt: f64,
    temperature: f64,
    equilibrate: usize,
    nstlist: usize,
    path: Path,
    order: usize,
    spacing: f32,
    /// The PME grid's points, where they must not follow the box (the pressure check).
    sizes: Option<[usize; 3]>,
    cutoff: f64,
    rtol: f64,
    every: usize,
    grid: Option<[usize; 3]>,
    dump: Option<String>,
    pressure_check: Option<f64>,
    parts: usize,
}

/// The options that take a value; every other argument is refused before the PEs start.
const FLAGS: [&str; 17] = [
    "--pes",
    "--cells",
    "--steps",
    "--dt",
    "--temperature",
    "--equilibrate",
    "--nstlist",
    "--path",
    "--order",
    "--spacing",
    "--cutoff",
    "--rtol",
    "--every",
    "--grid",
    "--dump",
    "--pressure-check",
    "--parts",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    // What can be checked before the PEs start is, once.
    let flags = args.iter().skip(1).step_by(2);
    let pes = match (flags.clone().find(|f| !FLAGS.contains(&f.as_str())), value("--pes")) {
        (Some(f), _) => Err(format!("unknown option {f}; the options are {}", FLAGS.join(" "))),
        _ if args.len().is_multiple_of(2) => Err(format!("{} needs a value", args[args.len() - 1])),
        (None, None) => Ok(2),
        (None, Some(n)) => {
            n.parse().ok().filter(|&n| n > 0).ok_or(format!("--pes {n}: expected a positive count"))
        }
    };
    let pes = pes.unwrap_or_else(|e| {
        eprintln!("nacl_engine: {e}");
        std::process::exit(2)
    });
    onesided::launch::ensure_launched(pes);
    let rt = Runtime::init().unwrap_or_else(|e| {
        eprintln!("nacl_engine: {e}");
        std::process::exit(1)
    });
    // Every PE reads the same arguments, so a bad one is an error on every PE.
    let outcome = options(value).and_then(|options| run(&rt, &options));
    if let Err(e) = outcome {
        eprintln!("nacl_engine: PE {}: {e}", rt.my_pe());
        if e.scope() == ErrorScope::EveryPe {
            drop(rt);
            std::process::exit(1);
        }
        rt.abort(1);
    }
}

/// A bad option, an error on every PE alike.
fn bad(what: String) -> AnyError {
    onesided::Error::CollectiveArgument(what).into()
}

fn options<'a>(value: impl Fn(&str) -> Option<&'a String>) -> Result<Options, AnyError> {
    let number = |name: &str, default: f64, least: f64| -> Result<f64, AnyError> {
        match value(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= least)
                .ok_or_else(|| bad(format!("{name} {v}: expected a number of at least {least}"))),
        }
    };
    let count = |name: &str, default: usize, least: usize| -> Result<usize, AnyError> {
        match value(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= least)
                .ok_or_else(|| bad(format!("{name} {v}: expected a whole number of at least {least}"))),
        }
    };
    let order = count("--order", pme_redist::spline::DEFAULT_ORDER, 0)?;
    if !pme_redist::spline::ORDERS.contains(&order) {
        return Err(bad(format!("--order {order}: the interpolation order runs from 3 to 12")));
    }
    let grid = match value("--grid") {
        None => None,
        Some(g) => {
            let dims: Vec<usize> = g.split(',').filter_map(|d| d.parse().ok()).collect();
            Some(<[usize; 3]>::try_from(dims).map_err(|_| bad(format!("--grid {g}: expected X,Y,Z")))?)
        }
    };
    let path = match value("--path").map(String::as_str) {
        None | Some("onesided") => Path::OneSided,
        Some("mpi") => Path::Mpi,
        Some(other) => return Err(bad(format!("--path {other}: expected onesided or mpi"))),
    };
    Ok(Options {
        cells: count("--cells", 5, 1)?,
        steps: count("--steps", 1000, 0)?,
        dt: number("--dt", 0.001, f64::MIN_POSITIVE)?,
        temperature: number("--temperature", 2400.0, 0.0)?,
        equilibrate: count("--equilibrate", 0, 0)?,
        nstlist: count("--nstlist", 10, 1)?,
        path,
        order,
        spacing: number("--spacing", 0.12, f64::MIN_POSITIVE)? as f32,
        sizes: None,
        cutoff: number("--cutoff", 1.0, f64::MIN_POSITIVE)?,
        rtol: number("--rtol", 1e-5, f64::MIN_POSITIVE)?,
        every: count("--every", 10, 1)?,
        grid,
        dump: value("--dump").cloned(),
        parts: count("--parts", 0, 0)?,
        pressure_check: value("--pressure-check")
            .map(|_| number("--pressure-check", 0.0, f64::MIN_POSITIVE))
            .transpose()?,
    })
}

/// Everything the step communicates with, in one place: each part borrows only the runtime.
struct Engine<'rt> {
    rt: &'rt Runtime,
    halo: HaloExchange<'rt, f64>,
    redistribution: Redistribution<'rt>,
    mesh: Pme<'rt>,
    /// The species of each local atom (home and halo), as of the last plan.
    local_species: Vec<usize>,
    /// This PE's home ions as the redistribution takes them, and their reciprocal forces.
    particles: Vec<Particle>,
    reciprocal: Vec<[f32; 3]>,
    beta: f64,
    cutoff: f64,
    pme_sizes: [usize; 3],
}

impl<'rt> Engine<'rt> {
    /// The engine over `positions` (global order) in a cubic box of edge `edge` nm.
    fn collective_new(
        rt: &'rt Runtime,
        o: &Options,
        edge: f64,
        positions: &[[f64; 3]],
    ) -> Result<Self, AnyError> {
        let e = edge as f32;
        let pbc = PbcBox::new([[e, 0.0, 0.0], [0.0, e, 0.0], [0.0, 0.0, e]])?;
        let buffer = md_halo::verlet_buffer(o.temperature, MASS[0], o.nstlist as f64 * o.dt);
        let range = o.cutoff as f32 + buffer;
        let grid = match o.grid {
            Some(dims) => DdGrid::new(dims, pbc, range, rt.n_pes())?,
            None => DdGrid::choose(rt.n_pes(), pbc, range)?,
        };
        let halo = HaloExchange::builder(rt, grid)
            .real::<f64>()
            .path(o.path)
            .verlet_buffer(buffer)
            .collective_from_global(positions)?;
        let pme_pes: Vec<usize> = (0..rt.n_pes()).collect();
        let pme_grid = match o.sizes {
            Some(k) => PmeGrid::builder(pbc.vectors(), &pme_pes).sizes(k),
            None => PmeGrid::builder(pbc.vectors(), &pme_pes).spacing(o.spacing),
        }
        .order(o.order)
        .build()?;
        let beta = ewald_coefficient(o.cutoff, o.rtol)?;
        let mut engine = Engine {
            rt,
            redistribution: Redistribution::builder(rt, pme_grid.clone())
                .path(o.path)
                .displacement_margin(buffer / 2.0)
                .collective_build(&[])?,
            mesh: Pme::builder(rt, &pme_grid, beta).path(o.path).collective_build()?,
            halo,
            local_species: Vec::new(),
            particles: Vec::new(),
            reciprocal: Vec::new(),
            beta,
            cutoff: o.cutoff,
            pme_sizes: pme_grid.sizes(),
        };
        engine.replan()?;
        Ok(engine)
    }

    /// After the halo's plan changed: the local species and the redistribution's plan.
    fn replan(&mut self) -> Result<(), AnyError> {
        self.local_species = self.halo.global_indices().iter().map(|&g| species(g)).collect();
        self.home_particles();
        self.redistribution.collective_plan(&self.particles)?;
        Ok(())
    }

    /// The home ions as the redistribution takes them, from the home positions.
    fn home_particles(&mut self) {
        let n = self.halo.home_count();
        let ids = &self.halo.global_indices()[..n];
        let x = &self.halo.coordinates()[..n];
        self.particles.clear();
        self.particles.extend(ids.iter().zip(x).map(|(&g, p)| Particle {
            x: p.map(|c| c as f32),
            q: CHARGE[species(g)] as f32,
            global: g,
        }));
    }

    /// The forces on the home ions into `Home::forces`; the energy and virial with them when
    /// `energies` (every PE alike).
    fn collective_forces(&mut self, energies: bool) -> Result<Share, AnyError> {
        let mut share = self.short_range_step()?;
        let mesh = self.reciprocal_step(energies)?;
        // The meeting point: the reciprocal forces join the short-range totals.
        for (f, r) in self.halo.home_mut().forces.iter_mut().zip(&self.reciprocal) {
            for d in 0..3 {
                f[d] += f64::from(r[d]);
            }
        }
        // The mesh's whole energy and virial once, on PE 0's share.
        if let (Some(mesh), 0) = (mesh, self.rt.my_pe()) {
            share.potential += mesh.energy;
            for a in 0..3 {
                for b in 0..3 {
                    share.virial[a][b] += mesh.virial[a][b];
                }
            }
        }
        Ok(share)
    }

    /// The halo's part: coordinates out, the kernel, forces back into `Home::forces`.
    fn short_range_step(&mut self) -> Result<Share, AnyError> {
        let mut step = self.halo.move_x()?;
        let share = short_range(step.local(), &self.local_species, self.cutoff, self.beta);
        step.move_f()?;
        Ok(share)
    }

    /// The mesh's part: the home ions to the PME ranks, the mesh, the reciprocal forces back
    /// into `self.reciprocal` (home order); the mesh's energy and virial when `energies`.
    fn reciprocal_step(&mut self, energies: bool) -> Result<Option<PmeEnergy>, AnyError> {
        self.home_particles();
        let mut delivered = self.redistribution.redistribute(&self.particles)?;
        let share = if energies {
            Some(self.mesh.collective_step(delivered.mesh())?)
        } else {
            self.mesh.collective_forces(delivered.mesh())?;
            None
        };
        self.reciprocal.resize(self.particles.len(), [0.0; 3]);
        delivered.return_forces(&mut self.reciprocal)?;
        Ok(match share {
            Some(share) => Some(self.mesh.collective_energy(share)?),
            None => None,
        })
    }

    /// Microseconds per force step on the slowest PE, the medians over seven blocks of
    /// `steps`: the whole (halo, mesh and their meeting) and each part alone, on the same
    /// positions, one after the other in each block so that all three see the same machine;
    /// and the median of the blocks' ratios of the whole to the sum of the parts.
    fn collective_time_parts(&mut self, steps: usize) -> Result<[f64; 4], AnyError> {
        let mut blocks: [Vec<f64>; 4] = Default::default();
        for _ in 0..7 {
            let mut times = [0.0; 3];
            for (part, time) in times.iter_mut().enumerate() {
                self.rt.barrier();
                let start = std::time::Instant::now();
                for _ in 0..steps {
                    match part {
                        0 => drop(self.collective_forces(false)?),
                        1 => drop(self.short_range_step()?),
                        _ => drop(self.reciprocal_step(false)?),
                    }
                }
                *time = self.rt.all_max(start.elapsed().as_secs_f64() * 1e6 / steps as f64);
            }
            blocks[3].push(times[0] / (times[1] + times[2]));
            for (block, time) in blocks.iter_mut().zip(times) {
                block.push(time);
            }
        }
        Ok(blocks.map(|mut b| {
            b.sort_by(f64::total_cmp);
            b[3]
        }))
    }
}

/// The kinetic energy tensor `½ Σ m v ⊗ v` of the home ions.
fn kinetic(halo: &HaloExchange<'_, f64>, velocities: &[[f64; 3]]) -> [[f64; 3]; 3] {
    let mut tensor = [[0.0; 3]; 3];
    for (&g, v) in halo.global_indices().iter().zip(velocities) {
        let m = MASS[species(g)];
        for a in 0..3 {
            for b in 0..3 {
                tensor[a][b] += 0.5 * m * v[a] * v[b];
            }
        }
    }
    tensor
}

/// A 3 x 3 tensor (kJ/mol).
type Tensor = [[f64; 3]; 3];

/// The sums over the PEs of a share and the kinetic tensor: (potential, virial, kinetic).
fn totals(rt: &Runtime, share: &Share, kinetic: &Tensor) -> Result<(f64, Tensor, Tensor), AnyError> {
    let mut all = vec![share.potential];
    all.extend(share.virial.iter().flatten());
    all.extend(kinetic.iter().flatten());
    rt.all_reduce(ReduceOp::Sum, &mut all)?;
    let tensor = |at: usize| std::array::from_fn(|a| std::array::from_fn(|b| all[at + 3 * a + b]));
    Ok((all[0], tensor(1), tensor(10)))
}

fn run(rt: &Runtime, o: &Options) -> Result<(), AnyError> {
    let positions = crystal(o.cells);
    let atoms = positions.len() as f64;
    let edge = o.cells as f64 * LATTICE;
    let volume = edge.powi(3);
    let mut engine = Engine::collective_new(rt, o, edge, &positions)?;
    // The self energy, constant: the total energy's share of each ion's own Gaussian.
    let charges = (0..positions.len() as u32).map(|g| CHARGE[species(g)]);
    let self_energy = ewald_self_energy(charges, engine.beta);
    let home = |engine: &Engine<'_>| engine.halo.global_indices()[..engine.halo.home_count()].to_vec();
    let mut velocities: Vec<[f64; 3]> =
        home(&engine).iter().map(|&g| thermal_velocity(g, MASS[species(g)], o.temperature)).collect();
    // Less the centre-of-mass motion.
    let mut momentum = [0.0; 4];
    for (&g, v) in home(&engine).iter().zip(&velocities) {
        let m = MASS[species(g)];
        (0..3).for_each(|d| momentum[d] += m * v[d]);
        momentum[3] += m;
    }
    rt.all_reduce(ReduceOp::Sum, &mut momentum)?;
    velocities.iter_mut().for_each(|v| (0..3).for_each(|d| v[d] -= momentum[d] / momentum[3]));
    let mut share = engine.collective_forces(true)?;
    let mut energies = Vec::new();
    let mut pressure = 0.0;
    for step in 0..=o.steps {
        let energy_step = step % o.every == 0 || step == o.steps;
        if step > 0 {
            let ids = home(&engine);
            let home_atoms = engine.halo.home_mut();
            for (((x, v), f), &g) in
                home_atoms.coordinates.iter_mut().zip(&mut velocities).zip(home_atoms.forces.iter()).zip(&ids)
            {
                let m = MASS[species(g)];
                for d in 0..3 {
                    v[d] += 0.5 * o.dt * f[d] / m;
                    x[d] += o.dt * v[d];
                }
            }
            if step % o.nstlist == 0 {
                engine.halo.collective_repartition(&mut [&mut velocities])?;
                engine.replan()?;
            }
            share = engine.collective_forces(energy_step)?;
            let ids = home(&engine);
            for ((v, f), &g) in velocities.iter_mut().zip(engine.halo.home_mut().forces.iter()).zip(&ids) {
                (0..3).for_each(|d| v[d] += 0.5 * o.dt * f[d] / MASS[species(g)]);
            }
        }
        if energy_step {
            let (potential, virial, kinetic) = totals(rt, &share, &kinetic(&engine.halo, &velocities))?;
            let ekin = kinetic[0][0] + kinetic[1][1] + kinetic[2][2];
            let total = ekin + potential + self_energy;
            let temperature = 2.0 * ekin / ((3.0 * atoms - 3.0) * md_halo::BOLTZMANN);
            pressure = 2.0 / (3.0 * volume) * (ekin - (virial[0][0] + virial[1][1] + virial[2][2])) * BAR;
            if step >= o.equilibrate {
                energies.push((step as f64 * o.dt, total));
            }
            if rt.my_pe() == 0 {
                println!(
                    "step {step:6} T {temperature:8.2} K  Epot {:12.4}  Etot {total:12.4} kJ/mol  P {pressure:10.2} bar",
                    potential + self_energy
                );
            }
        }
    }
    // The drift: the slope of a straight line through the total energy after the
    // equilibration, per ion and ns.
    if energies.is_empty() {
        return Err(bad(format!("--equilibrate {} leaves no energy step of the {}", o.equilibrate, o.steps)));
    }
    let n = energies.len() as f64;
    let (mt, me) = energies.iter().fold((0.0, 0.0), |(t, e), (a, b)| (t + a / n, e + b / n));
    let (cov, var) =
        energies.iter().fold((0.0, 0.0), |(c, v), (t, e)| (c + (t - mt) * (e - me), v + (t - mt) * (t - mt)));
    let drift = if var > 0.0 { cov / var * 1000.0 / atoms } else { 0.0 };
    let spread = energies.iter().map(|(_, e)| (e - energies[0].1).abs()).fold(0.0, f64::max) / atoms;
    // The scale of velocity Verlet's energy error per ion, dt² <|F|²/m> / 12, at the end.
    let ids = home(&engine);
    let squared: f64 = engine
        .halo
        .home_mut()
        .forces
        .iter()
        .zip(&ids)
        .map(|(f, &g)| f.iter().map(|c| c * c).sum::<f64>() / MASS[species(g)])
        .sum();
    let scale = o.dt * o.dt * rt.all_sum(squared) / atoms / 12.0;
    // Every ion's position and velocity in global order, on PE 0 alone.
    let n_home = engine.halo.home_count();
    let state: Vec<[f64; 6]> = engine.halo.coordinates()[..n_home]
        .iter()
        .zip(&velocities)
        .map(|(x, v)| [x[0], x[1], x[2], v[0], v[1], v[2]])
        .collect();
    let all = engine.halo.collective_gather_home(0, &state)?;
    let mut checked = String::new();
    if o.parts > 0 {
        let [whole, halo, mesh, ratio] = engine.collective_time_parts(o.parts)?;
        checked =
            format!(" step_us={whole:.1} halo_us={halo:.1} mesh_us={mesh:.1} step_over_parts={ratio:.3}");
    }
    if let Some(eps) = o.pressure_check {
        let (analytic, numeric) = pressure_check(rt, o, &mut engine, edge, eps)?;
        checked += &format!(" pressure_virial={analytic:.6e} pressure_fd={numeric:.6e}");
    }
    if let Some(all) = all {
        let print = Fnv1a::new().words(all.iter().flatten().map(|c| c.to_bits())).finish();
        if let Some(path) = &o.dump {
            let lines: Vec<String> = all
                .iter()
                .map(|a| format!("{:e} {:e} {:e} {:e} {:e} {:e}\n", a[0], a[1], a[2], a[3], a[4], a[5]))
                .collect();
            std::fs::write(path, lines.concat())?;
        }
        println!(
            "summary atoms={} pes={} path={} order={} steps={} dt={} drift={drift:.3e} largest_deviation={spread:.3e} \
             verlet_scale={scale:.3e} pressure={pressure:.3}{checked} fingerprint={print:016x}",
            positions.len(),
            rt.n_pes(),
            o.path.name(),
            o.order,
            o.steps,
            o.dt
        );
    }
    Ok(())
}

/// The configurational pressure (bar) of the current positions from the virial, and from
/// central differences of the potential energy under the isotropic strain `±eps` of box and
/// positions (`P = -dU/dV`): each strained system is built afresh from every position, which
/// this check (not the engine's step) gathers onto every PE.
fn pressure_check(
    rt: &Runtime,
    o: &Options,
    engine: &mut Engine<'_>,
    edge: f64,
    eps: f64,
) -> Result<(f64, f64), AnyError> {
    let share = engine.collective_forces(true)?;
    let (_, virial, _) = totals(rt, &share, &[[0.0; 3]; 3])?;
    let volume = edge.powi(3);
    let analytic = -2.0 / (3.0 * volume) * (virial[0][0] + virial[1][1] + virial[2][2]) * BAR;
    let n_home = engine.halo.home_count();
    let total = rt.all_sum(n_home as u64) as usize;
    let mut positions = vec![0.0f64; 3 * total];
    for (&g, x) in engine.halo.global_indices().iter().zip(&engine.halo.coordinates()[..n_home]) {
        positions[3 * g as usize..3 * g as usize + 3].copy_from_slice(x);
    }
    rt.all_reduce(ReduceOp::Sum, &mut positions)?;
    let energy = |strain: f64| -> Result<(f64, f64), AnyError> {
        // The box in f32, as PbcBox holds it: the strain it carries is the one applied.
        let strained_edge = f64::from((edge * (1.0 + strain)) as f32);
        let applied = strained_edge / edge - 1.0;
        let scaled: Vec<[f64; 3]> =
            positions.chunks_exact(3).map(|x| std::array::from_fn(|d| x[d] * (1.0 + applied))).collect();
        let options = Options {
            grid: Some(engine.halo.grid().dims()),
            sizes: Some(engine.pme_sizes),
            dump: None,
            pressure_check: None,
            parts: 0,
            ..*o
        };
        let mut strained = Engine::collective_new(rt, &options, strained_edge, &scaled)?;
        let share = strained.collective_forces(true)?;
        let (potential, _, _) = totals(rt, &share, &[[0.0; 3]; 3])?;
        Ok((potential, applied))
    };
    let ((up, hu), (down, hd)) = (energy(eps)?, energy(-eps)?);
    if hu == hd {
        return Err(bad(format!(
            "--pressure-check {eps}: the box in f32 does not change under so small a strain; use 1e-5 or more"
        )));
    }
    // dU/dε of the isotropic strain; dV = 3 V dε.
    let numeric = -(up - down) / (hu - hd) / (3.0 * volume) * BAR;
    Ok((analytic, numeric))
}
