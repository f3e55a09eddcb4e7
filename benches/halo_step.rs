//! The whole MD step with the halo in flight against the blocking step, kernel included, in
//! the strong-scaling regime (1 000-3 000 atoms a PE): Lennard-Jones argon on an fcc lattice
//! (4 000 atoms), a pair-list kernel in two passes (the home pairs, then the pairs with a
//! halo atom), the second half kick of each atom once its force is complete.
//!
//! - `halo_step/<variant>/<atoms>`: one step, from the start of the coordinate exchange to
//!   the last kick;
//! - `halo_wait/<variant>/<atoms>`: the part of the step spent in the exchange calls, that
//!   is, the communication the kernel does not hide: `move_x` and `move_f` when blocking,
//!   both halves of both exchanges (`start_x`, its finish, `start_f`, its finish) when
//!   overlapped.
//!
//! Variants: `onesided` and `mpi` block; `onesided-overlap` and `mpi-overlap` run the same
//! step split (the paired ratio of an `-overlap` variant is against its blocking path). The
//! PEs run step after step with no barrier between, as an engine does.
//!
//! `cargo bench --bench halo_step` launches 2 PEs through scripts/pe-run, one thread each;
//! `scripts/bench-overlap` runs it on one node and on 2 emulated nodes.

use std::time::{Duration, Instant};

use md_halo::{DdGrid, HaloExchange, Local, PbcBox, PeriodicImages, RVec};
use onesided::{Path, Runtime};
use onesided_suite::bench::{self, Bench};

const CELLS: usize = 10; // fcc cells per edge: 4 000 atoms
const LATTICE: f32 = 0.5745; // nm
const CUTOFF: f32 = 0.85; // nm
const RANGE: f32 = 0.95; // nm: the cutoff and a pair-list buffer
const C6: f32 = 6.2e-3;
const C12: f32 = 9.7e-6;
const DT: f32 = 0.002;
const MASS: f32 = 39.948;

fn main() {
    bench::main(2, run);
}

/// The pairs of a domain within the list's range, in two lists: of home atoms, then with a
/// halo atom (each halo atom's pairs in order), as the two passes run them.
struct Pairs {
    home: Vec<(u32, u32)>,
    halo: Vec<(u32, u32)>,
}

impl Pairs {
    fn of(halo: &mut HaloExchange<'_>) -> md_halo::Result<Pairs> {
        let n_home = halo.home_count();
        let mut view = halo.move_x()?;
        let Local { coordinates: x, owner, .. } = view.local();
        let near = |i: usize, j: usize| {
            let d: RVec = std::array::from_fn(|k| x[i][k] - x[j][k]);
            d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < RANGE * RANGE
        };
        let mut pairs = Pairs { home: Vec::new(), halo: Vec::new() };
        for i in 0..n_home {
            for j in i + 1..n_home {
                if near(i, j) {
                    pairs.home.push((i as u32, j as u32));
                }
            }
        }
        for j in n_home..x.len() {
            for i in 0..j {
                if owner.owns(i, j) && near(i, j) {
                    pairs.halo.push((i as u32, j as u32));
                }
            }
        }
        view.move_f()?;
        Ok(pairs)
    }
}

/// Pairs between two calls of the kernel's progress function ([`Runtime::progress`]): about
/// 60 µs of work here.
const CHUNK: usize = 16384;

/// The forces of `pairs` within the cutoff, added to `forces`, calling `progress` between
/// chunks of [`CHUNK`] pairs.
fn kernel(x: &[RVec], forces: &mut [RVec], pairs: &[(u32, u32)], progress: &dyn Fn()) {
    for chunk in pairs.chunks(CHUNK) {
        pairs_into(x, forces, chunk);
        progress();
    }
}

fn pairs_into(x: &[RVec], forces: &mut [RVec], pairs: &[(u32, u32)]) {
    for &(i, j) in pairs {
        let (i, j) = (i as usize, j as usize);
        let d: RVec = std::array::from_fn(|k| x[i][k] - x[j][k]);
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        if r2 >= CUTOFF * CUTOFF {
            continue;
        }
        let inv6 = 1.0 / (r2 * r2 * r2);
        let scale = (12.0 * C12 * inv6 - 6.0 * C6) * inv6 / r2;
        for k in 0..3 {
            forces[i][k] += scale * d[k];
            forces[j][k] -= scale * d[k];
        }
    }
}

/// The second half kick of `atoms`.
fn kick(v: &mut [RVec], f: &[RVec], atoms: impl IntoIterator<Item = usize>) {
    for i in atoms {
        (0..3).for_each(|d| v[i][d] += 0.5 * DT * f[i][d] / MASS);
    }
}

/// One step; returns its time and the time spent in the exchange calls.
fn step(
    rt: &Runtime,
    halo: &mut HaloExchange<'_>,
    pairs: &Pairs,
    v: &mut [RVec],
    overlap: bool,
) -> md_halo::Result<(Duration, Duration)> {
    let n_home = halo.home_count();
    let progress = || rt.progress();
    let begin = Instant::now();
    let mut exchange = Duration::ZERO;
    let mut timed = |from: Instant| exchange += from.elapsed();
    if overlap {
        let t = Instant::now();
        let mut x = halo.start_x()?;
        timed(t);
        let Local { coordinates, forces, .. } = x.home();
        forces.fill([0.0; 3]);
        kernel(coordinates, forces, &pairs.home, &progress);
        let t = Instant::now();
        let mut view = x.finish()?;
        timed(t);
        let Local { coordinates, forces, .. } = view.local();
        forces[n_home..].fill([0.0; 3]);
        kernel(coordinates, forces, &pairs.halo, &|| {});
        let t = Instant::now();
        let mut f = view.start_f()?;
        timed(t);
        let settled = f.home();
        kick(v, settled.forces, settled.atoms.iter().map(|&i| i as usize));
        let t = Instant::now();
        f.finish()?;
        timed(t);
        let home = halo.home_mut();
        kick(v, home.forces, home.returning.iter().map(|&i| i as usize));
    } else {
        let t = Instant::now();
        let mut view = halo.move_x()?;
        timed(t);
        let Local { coordinates, forces, .. } = view.local();
        forces.fill([0.0; 3]);
        kernel(coordinates, forces, &pairs.home, &|| {});
        kernel(coordinates, forces, &pairs.halo, &|| {});
        let t = Instant::now();
        view.move_f()?;
        timed(t);
        let home = halo.home_mut();
        kick(v, home.forces, 0..n_home);
    }
    Ok((begin.elapsed(), exchange))
}

fn run(rt: &Runtime) -> md_demo::Result<()> {
    let edge = CELLS as f32 * LATTICE;
    let basis = [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]];
    let positions: Vec<RVec> = (0..CELLS.pow(3) * 4)
        .map(|i| {
            let cell = [i / 4 % CELLS, i / 4 / CELLS % CELLS, i / 4 / CELLS / CELLS];
            std::array::from_fn(|d| (cell[d] as f32 + basis[i % 4][d] + 0.25) * LATTICE)
        })
        .collect();
    let pbc = PbcBox::rectangular([edge; 3])?;
    let grid = DdGrid::choose(rt.n_pes(), pbc, RANGE)?;
    let mut halos = Vec::new();
    for (variant, path, overlap) in [
        ("onesided", Path::OneSided, false),
        ("onesided-overlap", Path::OneSided, true),
        ("mpi", Path::Mpi, false),
        ("mpi-overlap", Path::Mpi, true),
    ] {
        let mut halo = HaloExchange::builder(rt, grid.clone())
            .path(path)
            .periodic_images(PeriodicImages::Halo)
            .collective_from_global(&positions)?;
        let pairs = Pairs::of(&mut halo)?;
        let velocities = vec![[0.0f32; 3]; halo.home_count()];
        halos.push((variant, overlap, std::cell::RefCell::new((halo, pairs, velocities))));
    }
    if rt.my_pe() == 0 {
        let (halo, pairs, _) = &*halos[0].2.borrow();
        eprintln!(
            "halo_step: {} atoms on grid {:?}, PE 0: {} home, {} halo atoms, {} + {} pairs",
            positions.len(),
            grid.dims(),
            halo.home_count(),
            halo.local_count() - halo.home_count(),
            pairs.home.len(),
            pairs.halo.len()
        );
    }
    let atoms = positions.len();
    let mut benches = Vec::new();
    for (group, wait) in [("halo_step", false), ("halo_wait", true)] {
        for (variant, overlap, state) in &halos {
            benches.push(Bench::sized(group, variant, atoms, move |iters| {
                let (halo, pairs, v) = &mut *state.borrow_mut();
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (whole, exchange) = step(rt, halo, pairs, v, *overlap)?;
                    total += if wait { exchange } else { whole };
                }
                Ok(total)
            }));
        }
    }
    bench::run(rt, benches)?;
    Ok(())
}
