//! The PME mesh in 2 × 2 pencils between 4 PEs, all PME ranks, on every all-to-all path in
//! the same run (the 4 PEs share the machine's cores, so the paired ratios are the figures to
//! read, not the absolute times):
//!
//! - `pme_pencil_fft/{ordered-onesided,node-aware-onesided,ordered-mpi,mpi}/<K>`: a forward
//!   and a backward pencil 3-D FFT of a `K³` grid (K = 48, 96), four transposes, each an
//!   all-to-all within a row or a column of 2 PEs;
//! - `pme_pencil_transpose/.../<K>`: the same iterations, timing the four transposes alone
//!   (packing, communication, unpacking), the figure against `MPI_Alltoall` on the same
//!   groups;
//! - `pme_pencil_step/{onesided,mpi}/<atoms>`: a whole PME step on 2 × 2 pencils on a water box
//!   of about 20 000 and 100 000 atoms (0.12 nm grid): redistribution to the pencils, spread
//!   with the overlap summed along y then x, FFT, solve, FFT, gather, forces back; one-sided is
//!   the put redistribution, put overlaps and the ordered one-sided transposes, MPI the partner
//!   redistribution, MPI overlaps and `MPI_Alltoall`; on both the PME ranks' vote on the
//!   step's error rides in the forward transposes (`Pme::collective_step`).
//!
//! Each iteration starts after a barrier (not timed). `cargo bench --bench pme_pencil`
//! launches 4 PEs through scripts/pe-run, one thread each.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use md_demo::types::TypeTable;
use md_halo::DdGrid;
use onesided::{AlltoallAlgorithm, Path, PeGroup, Runtime};
use onesided_suite::bench::{self, Bench};
use pme_redist::{MeshFft, Particle, Pme, PmeGrid, RVec, Redistribution, ewald_coefficient};

/// The transposes benchmarked, with `mpi` (`MPI_Alltoall` on the row and column
/// communicators) the reference of the ratios.
const FFT_PATHS: [(&str, AlltoallAlgorithm); 4] = [
    ("ordered-onesided", AlltoallAlgorithm::Ordered),
    ("node-aware-onesided", AlltoallAlgorithm::NodeAware),
    ("ordered-mpi", AlltoallAlgorithm::OrderedMpi),
    ("mpi", AlltoallAlgorithm::Mpi),
];

/// The pencils: 2 × 2.
const DIMS: [usize; 2] = [2, 2];

fn main() {
    bench::main(4, run);
}

fn run(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let pme: Vec<usize> = (0..4).collect();
    let group = PeGroup::collective_new(rt, "pme", &pme)?;
    for k in [48usize, 96] {
        let edge = 0.12 * k as f32;
        let box_vectors = [[edge, 0.0, 0.0], [0.0, edge, 0.0], [0.0, 0.0, edge]];
        let grid = PmeGrid::builder(box_vectors, &pme).sizes([k, k, k]).pencils(DIMS).build()?;
        let rank = group.my_rank().ok_or("every PE is a PME rank")?;
        let ((lo, hi), (ylo, yhi)) = (grid.slab(rank), grid.lines(rank));
        let pencil: Vec<f32> =
            (0..(hi - lo) * (yhi - ylo) * k).map(|i| ((i * 7919 + rank) % 1009) as f32 / 1009.0).collect();
        let mut ffts = Vec::new();
        for (name, algorithm) in FFT_PATHS {
            ffts.push((name, RefCell::new(MeshFft::collective_new(rt, &grid, Path::Auto, Some(algorithm))?)));
        }
        let pencil = &pencil;
        let mut benches = Vec::new();
        for timed_group in ["pme_pencil_fft", "pme_pencil_transpose"] {
            for (name, fft) in &ffts {
                benches.push(Bench::sized(timed_group, name, k, move |iters| {
                    let mut fft = fft.borrow_mut();
                    let mut back = vec![0.0f32; pencil.len()];
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        rt.barrier();
                        let (start, transposing) = (Instant::now(), fft.transpose_time());
                        fft.forward(pencil)?;
                        fft.backward(&mut back)?;
                        total += match timed_group {
                            "pme_pencil_transpose" => fft.transpose_time() - transposing,
                            _ => start.elapsed(),
                        };
                    }
                    Ok(total)
                }));
            }
        }
        bench::run(rt, benches)?;
    }
    steps(rt)
}

/// One configuration's whole PME step.
struct Step<'rt> {
    redist: Redistribution<'rt>,
    mesh: Pme<'rt>,
    home: Vec<Particle>,
    home_forces: Vec<RVec>,
}

fn steps(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let pme: Vec<usize> = (0..4).collect();
    let table = TypeTable::builtin();
    let beta = ewald_coefficient(0.9, 1e-5)?;
    let configurations = [("onesided", Path::OneSided, Path::OneSided), ("mpi", Path::Mpi, Path::Mpi)];
    for system in bench::water_systems()? {
        let params = table.assign(&system.atoms, "data/spc216.gro")?;
        let k = PmeGrid::new(system.pbc.vectors(), 0.12, &[0])?.sizes();
        let grid = PmeGrid::builder(system.pbc.vectors(), &pme).sizes(k).pencils(DIMS).build()?;
        let domains = DdGrid::choose(4, system.pbc, 1e-3)?;
        let home: Vec<Particle> = (0..system.len())
            .filter(|&g| domains.pe_of_position(system.positions[g]) == rt.my_pe())
            .map(|g| Particle { x: system.positions[g], q: params[g].charge, global: g as u32 })
            .collect();
        let mut steps = Vec::new();
        for (name, path, mesh_path) in configurations {
            let redist = Redistribution::builder(rt, grid.clone()).path(path).collective_build(&home)?;
            let mesh = Pme::builder(rt, &grid, beta).path(mesh_path).collective_build()?;
            let step = Step { redist, mesh, home: home.clone(), home_forces: vec![[0.0; 3]; home.len()] };
            steps.push((name, RefCell::new(step)));
        }
        let benches = steps
            .iter()
            .map(|(name, step)| {
                Bench::sized("pme_pencil_step", name, system.len(), move |iters| {
                    let mut guard = step.borrow_mut();
                    let step = &mut *guard;
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        rt.barrier();
                        let start = Instant::now();
                        let mut delivered = step.redist.redistribute(&step.home)?;
                        step.mesh.collective_forces(delivered.mesh())?;
                        delivered.return_forces(&mut step.home_forces)?;
                        total += start.elapsed();
                    }
                    Ok(total)
                })
            })
            .collect();
        bench::run(rt, benches)?;
    }
    Ok(())
}
