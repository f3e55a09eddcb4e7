//! The loop an MD engine writes around the halo exchange, on the fast path: build once,
//! then every step the coordinates out while the kernel computes the home atoms' pairs, the
//! pairs with halo atoms, the forces back while the atoms in no neighbour's halo move, then
//! the rest; a repartition every ten steps takes the velocities along. A Lennard-Jones fluid
//! on a lattice; the kernel writes straight into the exchange's force array, from which the
//! halo forces go back without a copy.
//!
//! The kernel sums each atom's forces in the order of one loop over the pairs `i < j` of all
//! local atoms (the home pairs come first in that order, then each halo atom's pairs), so the
//! overlapped step gives the bits of the blocking one (`move_x`, the kernel, `move_f`), which
//! the C and C++ versions of this loop (`crates/onesided-c/examples/`) run.
//!
//! `cargo run --release --example halo_step -- --pes 2 [--path onesided|mpi|auto]` (or under
//! `scripts/pe-run -n 2`). Each PE ends with a line holding a fingerprint of its home atoms
//! (FNV-1a over each one's global index and coordinate bits, in home order), which the C and
//! C++ versions print alike, bit for bit.

use md_halo::{DdGrid, HaloExchange, Local, PbcBox, RVec};
use onesided::{Fnv1a, Path, Runtime};

const SIDE: usize = 10; // atoms per box edge
const SPACING: f32 = 0.37; // nm
const CUTOFF: f32 = 0.8; // nm; the pair list's buffer below widens the halo's range
const RANGE: f32 = 0.9;
const DT: f32 = 0.002; // ps
const C6: f32 = 6.2e-3; // kJ mol⁻¹ nm⁶ (argon)
const C12: f32 = 9.7e-6; // kJ mol⁻¹ nm¹²
const MASS: f32 = 39.948; // g mol⁻¹

fn main() {
    let arg = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let pes = arg("--pes").map_or(2, |n| n.parse().expect("--pes N"));
    let path: Path = arg("--path").map_or(Path::OneSided, |p| p.parse().expect("--path onesided|mpi|auto"));
    onesided::launch::ensure_launched(pes);
    let rt = Runtime::init().expect("the runtime starts");
    if let Err(e) = run(&rt, path) {
        eprintln!("halo_step: PE {}: {e}", rt.my_pe());
        rt.abort(1);
    }
}

fn run(rt: &Runtime, path: Path) -> md_halo::Result<()> {
    let edge = SIDE as f32 * SPACING;
    let pbc = PbcBox::rectangular([edge; 3])?;
    let positions: Vec<RVec> = (0..SIDE * SIDE * SIDE)
        .map(|i| [i % SIDE, i / SIDE % SIDE, i / (SIDE * SIDE)].map(|c| (c as f32 + 0.5) * SPACING))
        .collect();
    let grid = DdGrid::choose(rt.n_pes(), pbc, RANGE)?;
    let mut halo = HaloExchange::builder(rt, grid).path(path).collective_from_global(&positions)?;
    // Per-atom state the engine keeps in home order: it migrates at every repartition.
    let mut velocities: Vec<RVec> =
        (0..halo.home_count()).map(|i| [0.05 * (i % 7) as f32 - 0.15, 0.0, 0.0]).collect();
    for step in 1..=50 {
        // The home pairs while the halo's coordinates travel, then the pairs with halo atoms.
        let n_home = halo.home_count();
        let mut x = halo.start_x()?;
        home_pairs(x.home());
        let mut view = x.finish()?;
        halo_pairs(view.local(), n_home);
        // The atoms in no neighbour's halo move while the other forces come back.
        let mut f = view.start_f()?;
        let settled = f.home();
        advance(settled.coordinates, &mut velocities, settled.forces, settled.atoms);
        let _shift_forces = f.finish()?; // for the virial
        let home = halo.home_mut();
        advance(home.coordinates, &mut velocities, home.forces, home.returning);
        if step % 10 == 0 {
            halo.collective_repartition(&mut [&mut velocities])?;
        }
    }
    let globals = halo.global_indices()[..halo.home_count()].to_vec();
    let home = halo.home_mut();
    let net: f64 = home.forces.iter().map(|f| f64::from(f[0])).sum();
    let words = globals.iter().zip(home.coordinates.iter()).flat_map(|(&g, x)| {
        [u64::from(g), u64::from(x[0].to_bits()), u64::from(x[1].to_bits()), u64::from(x[2].to_bits())]
    });
    let fingerprint = Fnv1a::new().words(words).finish();
    println!(
        "PE {}: {} home atoms, {} halo; net x force on them {net:.3e}; fingerprint {fingerprint:016x}",
        rt.my_pe(),
        halo.home_count(),
        halo.local_count() - halo.home_count()
    );
    Ok(())
}

/// Moves each of `atoms` (home indices) by its force: a kick and a drift.
fn advance(x: &mut [RVec], v: &mut [RVec], f: &[RVec], atoms: &[u32]) {
    for &i in atoms {
        let i = i as usize;
        for d in 0..3 {
            v[i][d] += DT * f[i][d] / MASS;
            x[i][d] += DT * v[i][d];
        }
    }
}

/// The force of the pair `i`, `j` within the cutoff, added to `i` and taken from `j`
/// (Newton's third law).
fn pair(x: &[RVec], forces: &mut [RVec], i: usize, j: usize) {
    let d: RVec = std::array::from_fn(|k| x[i][k] - x[j][k]);
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if r2 >= CUTOFF * CUTOFF {
        return;
    }
    let inv6 = 1.0 / (r2 * r2 * r2);
    let scale = (12.0 * C12 * inv6 - 6.0 * C6) * inv6 / r2;
    for k in 0..3 {
        forces[i][k] += scale * d[k];
        forces[j][k] -= scale * d[k];
    }
}

/// The pairs of home atoms (all this domain's), into the home forces cleared first.
fn home_pairs(home: Local<'_>) {
    let Local { coordinates: x, forces, .. } = home;
    forces.fill([0.0; 3]);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            pair(x, forces, i, j);
        }
    }
}

/// The pairs with a halo atom that this domain owns (every pair in range is owned by exactly
/// one domain), added to what the home pairs left: halo atom by halo atom, so that each atom's
/// forces are summed in the order of one loop over all pairs `i < j`.
fn halo_pairs(local: Local<'_>, n_home: usize) {
    let Local { coordinates: x, forces, owner, .. } = local;
    forces[n_home..].fill([0.0; 3]);
    for j in n_home..x.len() {
        for i in 0..j {
            if owner.owns(i, j) {
                pair(x, forces, i, j);
            }
        }
    }
}
