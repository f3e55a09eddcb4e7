//! The split-phase halo under the launcher with 2, 3, 4 and 8 PEs: a step with the kernel
//! between the halves of each exchange (the home pairs while the coordinates travel, the
//! settled home atoms moved while the forces travel) gives the blocking step's bits, step
//! after step with repartitions and load balancing, on every path, on grids of one, two and
//! three split dimensions with one and two pulses, with the periodic images made by the halo
//! and by the kernel. The forces of the atoms it calls settled are final before the finish.

use md_halo::{DdGrid, Dlb, HaloExchange, Local, PbcBox, PeriodicImages, RVec, ShiftForces};
use onesided::{Collectives, Fnv1a, Path, Runtime};
use onesided_suite::ensure;
use onesided_suite::pe_test::{self, CaseResult};

const SIDE: usize = 12; // atoms per box edge
const SPACING: f32 = 0.37; // nm
const CUTOFF: f32 = 0.8; // nm
const C6: f32 = 6.2e-3;
const C12: f32 = 9.7e-6;
const STEPS: u64 = 8;
const NSTLIST: u64 = 3;

/// A Lennard-Jones lattice, slightly perturbed per atom so that no two pairs are alike.
fn lattice() -> (PbcBox, Vec<RVec>) {
    let edge = SIDE as f32 * SPACING;
    let positions = (0..SIDE * SIDE * SIDE)
        .map(|i| {
            let c = [i % SIDE, i / SIDE % SIDE, i / (SIDE * SIDE)];
            std::array::from_fn(|d| (c[d] as f32 + 0.5) * SPACING + 0.01 * ((i * (d + 3)) % 7) as f32)
        })
        .collect();
    (PbcBox::rectangular([edge; 3]).expect("a valid box"), positions)
}

/// The grids of each PE count, with the halo's range: one pulse, two pulses (range past a
/// domain's width), two and three split dimensions.
fn grids(n: usize) -> Vec<([usize; 3], f32)> {
    match n {
        2 => vec![([2, 1, 1], 0.9), ([1, 2, 1], 0.9)],
        3 => vec![([3, 1, 1], 0.9), ([3, 1, 1], 1.6)],
        4 => vec![([2, 2, 1], 0.9), ([4, 1, 1], 1.2), ([1, 2, 2], 0.9)],
        8 => vec![([2, 2, 2], 0.9)],
        _ => Vec::new(),
    }
}

/// The Lennard-Jones force of a pair at separation `d`, within the cutoff.
fn pair(d: RVec) -> Option<RVec> {
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if r2 >= CUTOFF * CUTOFF || r2 == 0.0 {
        return None;
    }
    let inv6 = 1.0 / (r2 * r2 * r2);
    let scale = (12.0 * C12 * inv6 - 6.0 * C6) * inv6 / r2;
    Some(d.map(|c| scale * c))
}

/// The home atoms' part of a step's view: what the split step's home view holds.
fn home_part(local: Local<'_>, n_home: usize) -> Local<'_> {
    let Local { coordinates, forces, owner, .. } = local;
    Local { coordinates: &coordinates[..n_home], forces: &mut forces[..n_home], owner, images: &[] }
}

/// The home pairs, into the home forces (cleared first).
fn home_pairs(local: Local<'_>) {
    let Local { coordinates: x, forces, owner, .. } = local;
    forces.fill([0.0; 3]);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            if !owner.owns(i, j) {
                continue;
            }
            if let Some(f) = pair(std::array::from_fn(|k| x[i][k] - x[j][k])) {
                for k in 0..3 {
                    forces[i][k] += f[k];
                    forces[j][k] -= f[k];
                }
            }
        }
    }
}

/// The pairs with a halo atom or an image (`all`: the positions with the images), added to
/// the home forces the home pairs left and written to the halo's, the images' folded onto
/// their atoms; the shift forces the images carried.
fn halo_pairs(local: Local<'_>, all: &[RVec], n_home: usize) -> ShiftForces {
    let Local { forces, owner, images, .. } = local;
    let stored = forces.len();
    let mut extra = vec![[0.0f32; 3]; all.len()];
    for j in n_home..all.len() {
        for i in 0..j {
            if !owner.owns(i, j) {
                continue;
            }
            if let Some(f) = pair(std::array::from_fn(|k| all[i][k] - all[j][k])) {
                for k in 0..3 {
                    extra[i][k] += f[k];
                    extra[j][k] -= f[k];
                }
            }
        }
    }
    for (i, e) in extra[..stored].iter().enumerate() {
        if i >= n_home {
            forces[i] = [0.0; 3];
        }
        for k in 0..3 {
            forces[i][k] += e[k];
        }
    }
    let mut shift_forces = ShiftForces::default();
    for (k, image) in images.iter().enumerate().rev() {
        let f = extra[stored + k];
        shift_forces.add_image(image, f.map(f64::from));
        for c in 0..3 {
            forces[image.atom as usize][c] += f[c];
        }
    }
    shift_forces
}

/// Moves home atom `i` by its force (a small step, bounded), and by a drift that differs
/// per step, so that atoms cross boundaries between repartitions.
fn advance(x: &mut RVec, f: &RVec, step: u64, global: u32) {
    for d in 0..3 {
        let drift = 0.004 * (((global as u64 * 7 + step * 3 + d as u64) % 5) as f32 - 2.0);
        x[d] += (1e-5 * f[d]).clamp(-0.01, 0.01) + drift;
    }
}

/// Per step: fingerprints of the coordinates after the coordinate exchange, of the home
/// forces and of the shift forces after the force exchange.
type Prints = Vec<(u64, u64, u64)>;

fn print_of(values: impl IntoIterator<Item = u64>) -> u64 {
    Fnv1a::new().words(values).finish()
}

fn coordinate_print(x: &[RVec]) -> u64 {
    print_of(x.iter().flat_map(|p| p.map(|c| u64::from(c.to_bits()))))
}

/// A deterministic load for the balancing: more per atom in domains of larger index.
fn load(halo: &HaloExchange<'_>) -> std::time::Duration {
    let [i, j, k] = halo.cell();
    std::time::Duration::from_nanos(halo.home_count() as u64 * 500 * (1 + (i + 2 * j + 3 * k) as u64))
}

/// Runs the steps blocking or overlapped, and returns what each step left.
fn run(
    rt: &Runtime,
    grid: &DdGrid,
    positions: &[RVec],
    (path, images, dlb): (Path, PeriodicImages, Dlb),
    overlap: bool,
) -> Result<Prints, Box<dyn std::error::Error>> {
    let mut halo = HaloExchange::builder(rt, grid.clone())
        .path(path)
        .periodic_images(images)
        .load_balancing(dlb)
        .collective_from_global(positions)?;
    let mut prints = Vec::new();
    let mut nothing: Vec<u8> = vec![0; halo.home_count()];
    for step in 0..STEPS {
        if step > 0 && step % NSTLIST == 0 {
            nothing.resize(halo.home_count(), 0);
            halo.collective_repartition(&mut [&mut nothing])?;
        }
        let n_home = halo.home_count();
        let mut view = if overlap {
            let mut x = halo.start_x()?;
            home_pairs(x.home());
            x.finish()?
        } else {
            let mut view = halo.move_x()?;
            home_pairs(home_part(view.local(), n_home));
            view
        };
        let all = view.halo().positions_with_images();
        let x_print = coordinate_print(view.halo().coordinates());
        let kernel_shift = halo_pairs(view.local(), &all, n_home);
        if dlb != Dlb::No {
            let measured = load(view.halo());
            view.record_load(measured);
        }
        let ids = view.halo().global_indices()[..n_home].to_vec();
        let shift_forces = if overlap {
            let mut f = view.start_f()?;
            let settled = f.home();
            let early: Vec<RVec> = settled.atoms.iter().map(|&i| settled.forces[i as usize]).collect();
            for &i in settled.atoms {
                let i = i as usize;
                advance(&mut settled.coordinates[i], &settled.forces[i], step, ids[i]);
            }
            let atoms = settled.atoms.to_vec();
            let shift_forces = f.finish()?;
            let home = halo.home_mut();
            for (&i, e) in atoms.iter().zip(&early) {
                ensure!(home.forces[i as usize] == *e, "PE {}: settled atom {i}'s force changed", rt.my_pe());
            }
            let returning = halo.returning().to_vec();
            ensure!(atoms.len() + returning.len() == n_home, "settled and returning cover the home atoms");
            let home = halo.home_mut();
            for &i in &returning {
                let i = i as usize;
                advance(&mut home.coordinates[i], &home.forces[i], step, ids[i]);
            }
            shift_forces
        } else {
            let shift_forces = view.move_f()?;
            let home = halo.home_mut();
            for ((x, f), &g) in home.coordinates.iter_mut().zip(home.forces.iter()).zip(&ids) {
                advance(x, f, step, g);
            }
            shift_forces
        };
        let mut shift = shift_forces;
        shift += kernel_shift;
        let home = halo.home_mut();
        let f_print = coordinate_print(home.forces);
        let s_print = print_of((0..3).flat_map(|d| shift.along(d)).map(f64::to_bits));
        prints.push((x_print, f_print, s_print));
    }
    Ok(prints)
}

fn overlap_gives_the_blocking_bits(rt: &Runtime) -> CaseResult {
    let (pbc, positions) = lattice();
    let mut settled_somewhere = 0;
    for (dims, range) in grids(rt.n_pes()) {
        let grid = DdGrid::new(dims, pbc, range, rt.n_pes())?;
        for path in [Path::OneSided, Path::Mpi, Path::Auto] {
            for images in [PeriodicImages::Halo, PeriodicImages::Kernel] {
                let dlb = if images == PeriodicImages::Halo { Dlb::Yes } else { Dlb::No };
                let how = (path, images, dlb);
                let blocking = run(rt, &grid, &positions, how, false)?;
                let overlapped = run(rt, &grid, &positions, how, true)?;
                let first = blocking.iter().zip(&overlapped).position(|(a, b)| a != b);
                ensure!(
                    first.is_none(),
                    "{path:?} on {dims:?} (range {range}, images by {images:?}, dlb {dlb}): step {first:?} differs \
                     between blocking and overlapped"
                );
                let distinct = blocking.windows(2).all(|w| w[0].1 != w[1].1);
                ensure!(distinct, "{path:?} on {dims:?}: the forces did not change between steps");
            }
        }
        let halo = HaloExchange::<f32>::builder(rt, grid.clone()).collective_from_global(&positions)?;
        settled_somewhere += rt.all_sum((halo.home_count() - halo.returning().len()) as u64);
        if rt.my_pe() == 0 {
            println!("  grid {dims:?}, range {range} nm, pulses {:?}: overlapped = blocking", grid.pulses());
        }
    }
    ensure!(settled_somewhere > 0, "no grid had a settled home atom: the early integration went untested");
    Ok(())
}

/// A view dropped unfinished finishes its exchange: the next step works and its forces are
/// those of a finished one.
fn dropped_views_finish(rt: &Runtime) -> CaseResult {
    let (pbc, positions) = lattice();
    let grid = DdGrid::choose(rt.n_pes(), pbc, 0.9)?;
    for path in [Path::OneSided, Path::Mpi] {
        let mut halo =
            HaloExchange::builder(rt, grid.clone()).path(path).collective_from_global(&positions)?;
        let mut reference = Vec::new();
        for dropped in [false, true] {
            {
                let mut x = halo.start_x()?;
                home_pairs(x.home());
                if dropped {
                    drop(x);
                } else {
                    drop(x.finish()?);
                }
            }
            let n_home = halo.home_count();
            let mut view = halo.move_x()?;
            let all = view.halo().positions_with_images();
            home_pairs(home_part(view.local(), n_home));
            halo_pairs(view.local(), &all, n_home);
            let f = view.start_f()?;
            if dropped {
                drop(f);
            } else {
                f.finish()?;
            }
            let forces = halo.home_mut().forces.to_vec();
            if dropped {
                ensure!(forces == reference, "{path:?}: a dropped force view gave other forces");
            } else {
                reference = forces;
            }
        }
    }
    Ok(())
}

fn main() {
    let cases = onesided_suite::cases![&[2, 3, 4, 8] =>
        overlap_gives_the_blocking_bits,
        dropped_views_finish,
    ];
    pe_test::main_with_variants("overlap", &cases, pe_test::DIRECT_AND_LIBRARY);
}
