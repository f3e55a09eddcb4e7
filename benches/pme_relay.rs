//! The PME redistribution's round trip with PME on 2 of 4 PEs (1 × 2 pencils), the atoms sent
//! directly to the PME ranks they reach or relayed through one PME rank per particle PE
//! ([`pme_redist::RedistBuilder::relay`]), on the one-sided put and get paths and MPI's
//! partner path, in the same run: `pme_relay/{path}-{direct,relay}/<atoms>` (MPI's direct
//! variant is `mpi`, the reference of the ratios) on a water box
//! of about 20 000 and 100 000 atoms (0.12 nm grid), coordinates and charges out and forces
//! back from the caller's array, from a barrier on, as the time PE 0 takes to finish it. On
//! one node a relay costs a second hop for the atoms outside their relay's pencil; what it
//! saves, a particle PE's messages at scale, the scale model tabulates. The 4 PEs share the
//! machine's cores: the paired ratios are the figures to read.
//!
//! `cargo bench --bench pme_relay` launches 4 PEs through scripts/pe-run, one thread each.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use md_demo::types::TypeTable;
use md_halo::DdGrid;
use onesided::{Links, Runtime, Transport};
use onesided_suite::bench::{self, Bench};
use pme_redist::{Particle, PmeGrid, RVec, Redistribution};

const SPACING: f32 = 0.12;

/// The paths benchmarked, each direct and relayed: the path and the two variants' names
/// (MPI direct is the reference).
const PATHS: [(Transport, [&str; 2]); 3] = [
    (Transport::Put, ["onesided-put-direct", "onesided-put-relay"]),
    (Transport::Get, ["onesided-get-direct", "onesided-get-relay"]),
    (Transport::Mpi, ["mpi", "mpi-relay"]),
];

fn main() {
    bench::main(4, run);
}

/// One configuration: its redistribution, this PE's home atoms, the PME ranks' forces and
/// the home forces back.
type Case<'rt> = (Redistribution<'rt>, Vec<Particle>, Vec<RVec>, Vec<RVec>);

fn run(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let me = rt.my_pe();
    let pme = [2, 3];
    let table = TypeTable::builtin();
    let mut cases: Vec<(&str, usize, RefCell<Case<'_>>)> = Vec::new();
    for system in bench::water_systems()? {
        let params = table.assign(&system.atoms, "data/spc216.gro")?;
        let grid = PmeGrid::builder(system.pbc.vectors(), &pme).spacing(SPACING).pencils([1, 2]).build()?;
        let domains = DdGrid::choose(2, system.pbc, 1e-3)?;
        let home: Vec<Particle> = (0..system.len())
            .filter(|&g| me < 2 && domains.pe_of_position(system.positions[g]) == me)
            .map(|g| Particle { x: system.positions[g], q: params[g].charge, global: g as u32 })
            .collect();
        let relay = if me < 2 { grid.relay_rank(domains.dims(), domains.cell_of(me))? } else { 0 };
        for (path, names) in PATHS {
            for (relayed, name) in [false, true].into_iter().zip(names) {
                let builder = Redistribution::builder(rt, grid.clone())
                    .links(Links::uniform(path))
                    .displacement_margin(0.1);
                let builder = if relayed { builder.relay(|_| relay) } else { builder };
                let redist = builder.collective_build(&home)?;
                let home_forces = vec![[0.0; 3]; home.len()];
                cases.push((
                    name,
                    system.len(),
                    RefCell::new((redist, home.clone(), Vec::new(), home_forces)),
                ));
            }
        }
    }
    let mut benches = Vec::new();
    for (name, atoms, case) in &cases {
        benches.push(Bench::sized("pme_relay", name, *atoms, move |iters| {
            let (redist, home, forces, home_forces) = &mut *case.borrow_mut();
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                rt.barrier();
                let start = Instant::now();
                let delivered = redist.redistribute(home)?;
                forces.resize(delivered.received().len(), [0.5, -0.25, 1.0]);
                delivered.return_forces_from(forces, home_forces)?;
                total += start.elapsed();
            }
            Ok(total)
        }));
    }
    bench::run(rt, benches)?;
    Ok(())
}
