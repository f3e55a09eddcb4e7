//! An NVE molecular-dynamics engine on the crates, the template for an engine author:
//! Lennard-Jones argon from an fcc lattice, velocity Verlet, the halo exchange of `md_halo`
//! (built once with its Verlet buffer, repartitioned every `--nstlist` steps with the
//! velocities, which checks that no atom outran half the buffer), a cell-list force kernel
//! in two passes with the halo in flight (the home pairs while the coordinates travel, the
//! second half kick of the atoms in no neighbour's halo while the forces come back), and
//! energies summed over the PEs with `Runtime::all_sum`.
//!
//! ```text
//! cargo run --release --example lj_engine -- --pes 4 --steps 1000
//! ```
//!
//! Options: `--pes N` (starts itself as N PEs unless under a launcher), `--cells C` (C³ fcc
//! cells of 4 atoms; 12: 6 912 atoms), `--steps S`, `--dt PS` (0.002), `--temperature K`
//! (94), `--nstlist N` (10), `--path onesided|mpi|auto`, `--grid X,Y,Z`, `--triclinic` (the same crystal
//! in a triclinic box; C even), `--every N` (energies every N steps, 10), `--dump FILE`
//! (every atom's final position and velocity, one line each, in global order). PE 0 prints the
//! energies and a last line `summary ... drift=<kJ/mol per atom per ns>
//! fingerprint=<hex of every atom's final position and velocity, in global order>`.

use md_halo::{DdGrid, ErrorScope, HaloExchange, Local, PbcBox, RVec};
use onesided::{Collectives, Fnv1a, Path, ReduceOp, Runtime};

const SIGMA: f64 = 0.3405; // nm
const EPSILON: f64 = 0.996; // kJ/mol (119.8 K)
const MASS: f64 = 39.948; // u
const CUTOFF: f64 = 0.85; // nm, 2.5 sigma
const LATTICE: f64 = 0.5745; // nm: liquid density, 21.1 atoms per nm³

struct Options {
    cells: usize,
    steps: usize,
    dt: f64,
    temperature: f64,
    nstlist: usize,
    path: Path,
    grid: Option<[usize; 3]>,
    triclinic: bool,
    every: usize,
    dump: Option<String>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    onesided::launch::ensure_launched(value("--pes").map_or(2, |n| n.parse().expect("--pes N")));
    let rt = Runtime::init().expect("the runtime starts");
    // Every PE reads the same arguments, so a bad one is an error on every PE.
    let options = match options(&args, value) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("lj_engine: PE {}: {e}", rt.my_pe());
            drop(rt);
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&rt, &options) {
        eprintln!("lj_engine: PE {}: {e}", rt.my_pe());
        // An error every PE returned ends the job normally; one of this PE alone may leave
        // the others waiting for it.
        if e.scope() == ErrorScope::EveryPe {
            drop(rt);
            std::process::exit(1);
        }
        rt.abort(1);
    }
}

/// The options, or what is wrong with them.
fn options<'a>(args: &[String], value: impl Fn(&str) -> Option<&'a String>) -> md_halo::Result<Options> {
    let bad = |name: &str, v: &str| md_halo::Error::Config(format!("{name} {v}: not a valid value"));
    let number = |name: &str, default: f64, least: f64| -> md_halo::Result<f64> {
        match value(name) {
            None => Ok(default),
            Some(v) => {
                v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= least).ok_or_else(|| bad(name, v))
            }
        }
    };
    let grid = match value("--grid") {
        None => None,
        Some(g) => {
            let dims: Vec<usize> = g.split(',').filter_map(|d| d.parse().ok()).collect();
            Some(<[usize; 3]>::try_from(dims).map_err(|_| bad("--grid", g))?)
        }
    };
    Ok(Options {
        cells: number("--cells", 8.0, 1.0)? as usize,
        steps: number("--steps", 200.0, 0.0)? as usize,
        dt: number("--dt", 0.002, f64::MIN_POSITIVE)?,
        temperature: number("--temperature", 94.0, 0.0)?,
        nstlist: number("--nstlist", 10.0, 1.0)? as usize,
        path: value("--path").map_or(Ok(Path::OneSided), |p| p.parse())?,
        grid,
        triclinic: args.iter().any(|a| a == "--triclinic"),
        every: number("--every", 10.0, 1.0)? as usize,
        dump: value("--dump").cloned(),
    })
}

fn run(rt: &Runtime, o: &Options) -> md_halo::Result<()> {
    // The crystal, and its box: cubic, or the same periodic crystal with b and c leaning
    // half a box along x (a lattice translation when the cell count is even).
    let edge = o.cells as f64 * LATTICE;
    let basis = [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]];
    let positions: Vec<RVec> = (0..o.cells.pow(3) * 4)
        .map(|i| {
            let cell = [i / 4 % o.cells, i / 4 / o.cells % o.cells, i / 4 / o.cells / o.cells];
            std::array::from_fn(|d| ((cell[d] as f64 + basis[i % 4][d] + 0.25) * LATTICE) as f32)
        })
        .collect();
    let lean = if o.triclinic { edge / 2.0 } else { 0.0 };
    let e = edge as f32;
    let pbc = PbcBox::new([[e, 0.0, 0.0], [lean as f32, e, 0.0], [lean as f32, 0.0, e]])?;
    // The halo's range: the cutoff and a Verlet buffer for the motion between repartitions.
    let buffer = md_halo::verlet_buffer(o.temperature, MASS, o.nstlist as f64 * o.dt);
    let range = CUTOFF as f32 + buffer;
    let grid = match o.grid {
        Some(dims) => DdGrid::new(dims, pbc, range, rt.n_pes())?,
        None => DdGrid::choose(rt.n_pes(), pbc, range)?,
    };
    let dims = grid.dims();
    let mut halo = HaloExchange::builder(rt, grid)
        .path(o.path)
        .verlet_buffer(buffer)
        .collective_from_global(&positions)?;
    // Velocities in home order, drawn from each atom's global index; less the centre-of-mass
    // motion, summed over the PEs (in an order that follows the decomposition).
    let mut velocities: Vec<[f64; 3]> = halo.global_indices()[..halo.home_count()]
        .iter()
        .map(|&g| thermal_velocity(g, o.temperature))
        .collect();
    let mut momentum = [0.0; 3];
    for v in &velocities {
        (0..3).for_each(|d| momentum[d] += v[d]);
    }
    rt.all_reduce(ReduceOp::Sum, &mut momentum)?;
    let drift = momentum.map(|p| p / positions.len() as f64);
    velocities.iter_mut().for_each(|v| (0..3).for_each(|d| v[d] -= drift[d]));

    let mut scratch = Vec::new();
    let mut potential = forces(&mut halo, &mut scratch, |_, _| {})?;
    let atoms = positions.len() as f64;
    let mut energies = Vec::new();
    for step in 0..=o.steps {
        if step > 0 {
            // Velocity Verlet: half a kick with the last forces, a drift, then (after the
            // repartition, when due) the new forces and the second half kick.
            let home = halo.home_mut();
            for ((x, v), f) in home.coordinates.iter_mut().zip(&mut velocities).zip(home.forces) {
                for d in 0..3 {
                    v[d] += 0.5 * o.dt * f64::from(f[d]) / MASS;
                    x[d] = (f64::from(x[d]) + o.dt * v[d]) as f32;
                }
            }
            if step % o.nstlist == 0 {
                halo.collective_repartition(&mut [&mut velocities])?;
            }
            // The second half kick of each atom as soon as its force is complete: of the
            // atoms in no neighbour's halo while the others' forces come back.
            let kick = |atoms: &[u32], forces: &[RVec]| {
                for &i in atoms {
                    let (v, f) = (&mut velocities[i as usize], forces[i as usize]);
                    (0..3).for_each(|d| v[d] += 0.5 * o.dt * f64::from(f[d]) / MASS);
                }
            };
            potential = forces(&mut halo, &mut scratch, kick)?;
        }
        if step % o.every == 0 || step == o.steps {
            let kinetic: f64 =
                velocities.iter().map(|v| 0.5 * MASS * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2])).sum();
            let (kinetic, potential) = (rt.all_sum(kinetic), rt.all_sum(potential));
            // 3N - 3 degrees of freedom: the centre of mass does not move.
            let temperature = 2.0 * kinetic / ((3.0 * atoms - 3.0) * md_halo::BOLTZMANN);
            energies.push((step as f64 * o.dt, kinetic + potential));
            if rt.my_pe() == 0 {
                println!(
                    "step {step:6} T {temperature:8.3} K  Epot {potential:12.4}  Etot {:12.4} kJ/mol",
                    kinetic + potential
                );
            }
        }
    }
    // The drift: the slope of a straight line through the total energy, per atom and ns.
    let n = energies.len() as f64;
    let (mt, me) = energies.iter().fold((0.0, 0.0), |(t, e), (a, b)| (t + a / n, e + b / n));
    let (cov, var) =
        energies.iter().fold((0.0, 0.0), |(c, v), (t, e)| (c + (t - mt) * (e - me), v + (t - mt) * (t - mt)));
    let slope = if var > 0.0 { cov / var * 1000.0 / atoms } else { 0.0 };
    let spread = energies.iter().map(|(_, e)| (e - energies[0].1).abs()).fold(0.0, f64::max) / atoms;
    // The scale of velocity Verlet's energy error per atom, dt² <|F|²> / (12 m): the bound
    // the largest deviation of the total energy is held to.
    let squared: f64 =
        halo.home_mut().forces.iter().map(|f| f.iter().map(|&c| f64::from(c).powi(2)).sum::<f64>()).sum();
    let scale = o.dt * o.dt * rt.all_sum(squared) / atoms / (12.0 * MASS);
    let state = gather(rt, &halo, &velocities, positions.len())?;
    let print = Fnv1a::new().words(state.iter().map(|c| c.to_bits())).finish();
    if let (Some(path), 0) = (&o.dump, rt.my_pe()) {
        let lines: Vec<String> = state
            .chunks(6)
            .map(|a| format!("{:e} {:e} {:e} {:e} {:e} {:e}\n", a[0], a[1], a[2], a[3], a[4], a[5]))
            .collect();
        std::fs::write(path, lines.concat())
            .map_err(|e| md_halo::Error::Config(format!("--dump {path}: {e}")))?;
    }
    if rt.my_pe() == 0 {
        println!(
            "summary atoms={} pes={} grid={}x{}x{} path={} triclinic={} steps={} dt={} buffer={buffer:.4} \
             drift={slope:.3e} largest_deviation={spread:.3e} verlet_scale={scale:.3e} fingerprint={print:016x}",
            positions.len(),
            rt.n_pes(),
            dims[0],
            dims[1],
            dims[2],
            o.path.name(),
            o.triclinic,
            o.steps,
            o.dt
        );
    }
    Ok(())
}

/// One step's forces, with the halo in flight while the kernel computes: the coordinates
/// out during the home atoms' pairs, the pairs with halo atoms, the forces back while `kick`
/// takes the home atoms whose forces are complete (those in no neighbour's halo), then the
/// rest. `total` is the kernel's double-precision sum, kept between the two passes. Returns
/// this PE's share of the potential energy.
fn forces(
    halo: &mut HaloExchange<'_>,
    total: &mut Vec<[f64; 3]>,
    mut kick: impl FnMut(&[u32], &[RVec]),
) -> md_halo::Result<f64> {
    let n_home = halo.home_count();
    let mut x = halo.start_x()?;
    let home = x.home();
    total.clear();
    total.resize(n_home, [0.0; 3]);
    let mut potential = lennard_jones(home.coordinates, home.owner, total, 0);
    let mut view = x.finish()?;
    let Local { coordinates, forces, owner, .. } = view.local();
    total.resize(coordinates.len(), [0.0; 3]);
    potential += lennard_jones(coordinates, owner, total, n_home);
    for (f, t) in forces.iter_mut().zip(total.iter()) {
        *f = t.map(|c| c as f32);
    }
    let mut returning = view.start_f()?;
    let settled = returning.home();
    kick(settled.atoms, settled.forces);
    returning.finish()?;
    let home = halo.home_mut();
    kick(home.returning, home.forces);
    Ok(potential)
}

/// Shifted-force Lennard-Jones over the pairs of `x` this PE owns (`owner.owns`) that hold
/// an atom from `first` on (0: every pair), found through a cell list of the atoms (home,
/// halo and periodic images alike), forces on both atoms added to `total`; energy and force
/// go smoothly to zero at the cutoff, so the total energy is conserved. With the home atoms
/// first (`first` 0 on them alone) and then every atom (`first` the home count), each pair
/// is summed once.
fn lennard_jones(x: &[RVec], owner: md_halo::PairOwner<'_>, total: &mut [[f64; 3]], first: usize) -> f64 {
    let pair = |r2: f64| {
        let s6 = (SIGMA * SIGMA / r2).powi(3);
        (4.0 * EPSILON * (s6 * s6 - s6), 24.0 * EPSILON * (2.0 * s6 * s6 - s6) / r2.sqrt())
    };
    let (v_cut, f_cut) = pair(CUTOFF * CUTOFF);
    // Cells of at least the cutoff over the atoms' bounding box.
    let lower: [f32; 3] = std::array::from_fn(|d| x.iter().map(|p| p[d]).fold(f32::MAX, f32::min));
    let upper: [f32; 3] = std::array::from_fn(|d| x.iter().map(|p| p[d]).fold(f32::MIN, f32::max));
    let cells: [usize; 3] =
        std::array::from_fn(|d| (((upper[d] - lower[d]) as f64 / CUTOFF) as usize).max(1));
    let cell_of = |p: &RVec| -> [usize; 3] {
        std::array::from_fn(|d| (((p[d] - lower[d]) as f64 / CUTOFF) as usize).min(cells[d] - 1))
    };
    let index = |c: [usize; 3]| (c[2] * cells[1] + c[1]) * cells[0] + c[0];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); cells.iter().product()];
    x.iter().enumerate().for_each(|(i, p)| members[index(cell_of(p))].push(i));
    let mut potential = 0.0;
    for (i, p) in x.iter().enumerate() {
        let c = cell_of(p);
        let near = |d: usize| c[d].saturating_sub(1)..=(c[d] + 1).min(cells[d] - 1);
        for cz in near(2) {
            for cy in near(1) {
                for cx in near(0) {
                    for &j in members[index([cx, cy, cz])].iter().filter(|&&j| j > i && j >= first) {
                        let d: [f64; 3] = std::array::from_fn(|k| f64::from(p[k]) - f64::from(x[j][k]));
                        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                        if r2 >= CUTOFF * CUTOFF || !owner.owns(i, j) {
                            continue;
                        }
                        let r = r2.sqrt();
                        let (v, f) = pair(r2);
                        potential += v - v_cut + (r - CUTOFF) * f_cut;
                        let scale = (f - f_cut) / r;
                        for k in 0..3 {
                            total[i][k] += scale * d[k];
                            total[j][k] -= scale * d[k];
                        }
                    }
                }
            }
        }
    }
    potential
}

/// A Maxwell velocity for atom `global` at `temperature`: three normal deviates from a hash
/// of its index (Box-Muller), times sqrt(kT/m).
fn thermal_velocity(global: u32, temperature: f64) -> [f64; 3] {
    let mut state = u64::from(global).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    let mut uniform = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let scale = (md_halo::BOLTZMANN * temperature / MASS).sqrt();
    std::array::from_fn(|_| {
        let (u, v) = (uniform().max(f64::MIN_POSITIVE), uniform());
        scale * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    })
}

/// Every atom's position and velocity in global order (six numbers each), on every PE: each
/// PE writes its home atoms into an array of the whole system, zero elsewhere, and the sum
/// over the PEs fills it (adding zeros changes no value: only a -0.0 becomes +0.0, on any
/// decomposition alike). A check at the end of a run, so its memory of the whole system is
/// spent once.
fn gather(
    rt: &Runtime,
    halo: &HaloExchange<'_>,
    velocities: &[[f64; 3]],
    atoms: usize,
) -> md_halo::Result<Vec<f64>> {
    let mut state = vec![0.0f64; atoms * 6];
    let positions = &halo.coordinates()[..halo.home_count()];
    for ((&g, x), v) in halo.global_indices().iter().zip(positions).zip(velocities) {
        let g = g as usize * 6;
        state[g..g + 3].copy_from_slice(&x.map(f64::from));
        state[g + 3..g + 6].copy_from_slice(v);
    }
    rt.all_reduce(ReduceOp::Sum, &mut state)?;
    Ok(state)
}
