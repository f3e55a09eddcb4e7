//! The loop an MD engine writes around the PME mesh, on the fast path: every step the home
//! atoms go to the PME ranks that own their slabs (`redistribute`), the mesh spreads their
//! charges, transforms, solves and gathers the forces straight into the redistribution's
//! buffer (`collective_step` on the step's mesh view), and `return_forces` brings each PE its
//! home atoms' reciprocal forces in home order, read where they lie. The plan is rebuilt
//! every ten steps, as at a repartition. Charges on a lattice, every PE a PME rank.
//!
//! `cargo run --release --example pme_step -- --pes 2 [--path onesided|mpi|auto]` (or under
//! `scripts/pe-run -n 2`). Each PE ends with a line holding the energy and a fingerprint of
//! its home atoms (FNV-1a over each one's global index and position bits, in home order),
//! which the C and C++ versions of this loop (`crates/onesided-c/examples/`) print alike.

use onesided::{Fnv1a, Path, Runtime};
use pme_redist::{Particle, Pme, PmeGrid, Redistribution, ewald_coefficient};

const SIDE: usize = 12; // charges per box edge
const SPACING: f32 = 0.31; // nm
const CUTOFF: f64 = 0.9; // nm, with GROMACS's ewald-rtol below
const DT: f32 = 0.002; // ps
const MASS: f32 = 20.0; // g mol⁻¹

fn main() {
    let arg = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let pes = arg("--pes").map_or(2, |n| n.parse().expect("--pes N"));
    let path: Path = arg("--path").map_or(Path::OneSided, |p| p.parse().expect("--path onesided|mpi|auto"));
    onesided::launch::ensure_launched(pes);
    let rt = Runtime::init().expect("the runtime starts");
    if let Err(e) = run(&rt, path) {
        eprintln!("pme_step: PE {}: {e}", rt.my_pe());
        rt.abort(1);
    }
}

fn run(rt: &Runtime, path: Path) -> pme_redist::Result<()> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let edge = SIDE as f32 * SPACING;
    let pes: Vec<usize> = (0..n).collect();
    let grid = PmeGrid::new([[edge, 0.0, 0.0], [0.0, edge, 0.0], [0.0, 0.0, edge]], 0.12, &pes)?;
    // This PE's home atoms: a share of a lattice of alternating charges (an engine's domain).
    let total = SIDE * SIDE * SIDE;
    let mut home: Vec<Particle> = (me * total / n..(me + 1) * total / n)
        .map(|g| {
            let c = [g % SIDE, g / SIDE % SIDE, g / (SIDE * SIDE)];
            let q = if c.iter().sum::<usize>() % 2 == 0 { 0.5 } else { -0.5 };
            Particle { x: c.map(|c| (c as f32 + 0.5) * SPACING), q, global: g as u32 }
        })
        .collect();
    let beta = ewald_coefficient(CUTOFF, 1e-5)?;
    let mut mesh = Pme::builder(rt, &grid, beta).path(path).collective_build()?;
    // Every step goes through the mesh: its transposes carry the vote on the step's error.
    let mut redist = Redistribution::builder(rt, grid).path(path).collective_build(&home)?;
    let mut forces = vec![[0.0f32; 3]; home.len()];
    let mut velocities = vec![[0.0f32; 3]; home.len()];
    let mut energy = 0.0;
    for step in 1..=30 {
        let mut delivered = redist.redistribute(&home)?;
        let share = mesh.collective_step(delivered.mesh())?;
        delivered.return_forces(&mut forces)?;
        energy = mesh.collective_energy(share)?.energy;
        for ((p, v), f) in home.iter_mut().zip(&mut velocities).zip(&forces) {
            for d in 0..3 {
                v[d] += DT * f[d] / MASS;
                p.x[d] += DT * v[d];
            }
        }
        if step % 10 == 0 {
            redist.collective_plan(&home)?;
        }
    }
    let words = home.iter().flat_map(|p| {
        [
            u64::from(p.global),
            u64::from(p.x[0].to_bits()),
            u64::from(p.x[1].to_bits()),
            u64::from(p.x[2].to_bits()),
        ]
    });
    let fingerprint = Fnv1a::new().words(words).finish();
    println!("PE {me}: {} home atoms; energy {energy:.9e}; fingerprint {fingerprint:016x}", home.len());
    if me == 0 {
        let times = mesh.times();
        let per_step = |t: std::time::Duration| t.as_secs_f64() * 1e6 / times.steps as f64;
        println!("reciprocal energy after {} steps: {energy:.4} kJ/mol", times.steps);
        for (name, time) in times.phases() {
            println!("  {name:<18} {:8.1} us per step", per_step(time));
        }
    }
    Ok(())
}
