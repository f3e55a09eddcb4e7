//! Times the clustered pair search and force kernel on one process, no communication:
//! `cargo run --release -p md-demo --example force_kernel -- [NX,NY,NZ] [cutoff] [rlist] [threads] [rf|ewald]`
//! (`ewald`: the real-space part of PME with GROMACS's `ewald-rtol` 1e-5 at the cutoff).
use std::time::Instant;

use md_demo::Structure;
use md_demo::cluster::{Isa, PairList};
use md_demo::force::{ForceField, Topology};
use md_demo::types::TypeTable;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rep: Vec<usize> =
        args.get(1).map_or("3,3,3", |s| s).split(',').map(|v| v.parse().expect("NX,NY,NZ")).collect();
    let cutoff: f64 = args.get(2).map_or(0.9, |s| s.parse().expect("cutoff"));
    let rlist: f64 = args.get(3).map_or(0.98, |s| s.parse().expect("rlist"));
    let threads: usize = args.get(4).map_or(1, |s| s.parse().expect("threads"));
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().expect("pool");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
    let s = Structure::read_gro(std::path::Path::new(&format!("{dir}/spc216.gro")))
        .expect("spc216")
        .replicate([rep[0], rep[1], rep[2]])
        .expect("replicable");
    let topology = Topology::new(&s, &TypeTable::builtin(), "spc216.gro").expect("SPC names");
    let field = match args.get(5).map_or("rf", |s| s) {
        "rf" => ForceField::new(cutoff),
        "ewald" => ForceField::ewald(cutoff, pme_redist::ewald_coefficient(cutoff, 1e-5).expect("valid")),
        other => panic!("electrostatics rf or ewald, not {other}"),
    };
    let ids: Vec<u32> = (0..s.len() as u32).collect();
    let zones = vec![md_halo::Zone::HOME; s.len()];
    for isa in [Isa::Avx512, Isa::Avx2, Isa::Baseline].into_iter().filter(|isa| isa.available()) {
        let mut builds = Vec::new();
        let mut list = None;
        for _ in 0..5 {
            let t = Instant::now();
            list = Some(
                PairList::build(&s.positions, &ids, &zones, &topology, &field, rlist, isa).expect("valid"),
            );
            builds.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut list = list.expect("built");
        let mut forces = Vec::new();
        let mut times = Vec::new();
        for _ in 0..30 {
            let t = Instant::now();
            list.forces(&s.positions, &mut forces).expect("same atoms");
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        builds.sort_by(f64::total_cmp);
        times.sort_by(f64::total_cmp);
        println!(
            "{isa}: {} atoms, {} entries, {} pairs ({:.0}% of lanes), search {:.2} ms, force {:.3} ms ({:.2} ns per pair)",
            s.len(),
            list.entries(),
            list.pairs(),
            100.0 * list.pairs() as f64 / (32.0 * list.entries() as f64),
            builds[2],
            times[15],
            times[15] * 1e6 / list.pairs() as f64
        );
    }
}
