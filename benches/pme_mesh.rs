//! The PME mesh between 2 PEs, both PME ranks, on every all-to-all path in the same run:
//!
//! - `pme_fft/{ordered-onesided,node-aware-onesided,ordered-mpi,mpi,auto}/<K>`: a forward and a
//!   backward distributed 3-D FFT of a `K³` grid (K = 48, 96, 128), transposes included;
//! - `pme_fft_comm/.../<K>`: the same iterations, timing only the two transposes' communication
//!   as GROMACS's `PME 3D-FFT Comm.` counts it (the all-to-all call without packing and
//!   unpacking; where the one-sided paths write straight into the receivers' layout, that
//!   single pass, which is the transfer);
//! - `pme_fft_transpose/.../<K>`: the same iterations, timing the two whole transposes
//!   (packing, communication, unpacking) on every path: the cost of one path's transpose
//!   against another's;
//! - `pme_step/{onesided,mpi}/<atoms>`: a whole PME step on a water box of about 20 000 and
//!   100 000 atoms (0.12 nm grid, order 4, ewald-rtol 1e-5 at 0.9 nm): coordinates and charges
//!   to the PME ranks, spread, FFT, solve, FFT, gather, forces back; one-sided is the put
//!   redistribution, put overlaps and the ordered one-sided transpose, MPI the partner
//!   redistribution (`Isend`, `Mprobe`, `Mrecv`), MPI overlaps and `MPI_Alltoall`; on both
//!   the PME ranks' vote on the step's error rides in the forward transposes
//!   (`Pme::collective_step`); `pme_step/auto/<atoms>` takes
//!   [`Path::Auto`](onesided::Path::Auto) for both (the paths the job's links and the grid's
//!   blocks were measured fastest on) and [`Path::Auto`](onesided::Path::Auto) for the
//!   overlaps (per partner, its link's path).
//!
//! Each iteration starts after a barrier (not timed). `cargo bench --bench pme_mesh` launches
//! 2 PEs through scripts/pe-run, one thread each.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use md_demo::types::TypeTable;
use md_halo::DdGrid;
use onesided::{AlltoallAlgorithm, Path, PeGroup, Runtime};
use onesided_suite::bench::{self, Bench};
use pme_redist::{MeshFft, Particle, Pme, PmeGrid, RVec, Redistribution, ewald_coefficient};

/// The transposes benchmarked, with `mpi` (`MPI_Alltoall`) the reference of the ratios;
/// `auto` is the one of the others measured fastest for the grid's blocks at creation.
const FFT_PATHS: [(&str, Option<AlltoallAlgorithm>); 5] = [
    ("ordered-onesided", Some(AlltoallAlgorithm::Ordered)),
    ("node-aware-onesided", Some(AlltoallAlgorithm::NodeAware)),
    ("ordered-mpi", Some(AlltoallAlgorithm::OrderedMpi)),
    ("mpi", Some(AlltoallAlgorithm::Mpi)),
    ("auto", None),
];

fn main() {
    bench::main(2, run);
}

fn run(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let pme: Vec<usize> = (0..rt.n_pes()).collect();
    let group = PeGroup::collective_new(rt, "pme", &pme)?;
    // One grid at a time, so that the symmetric heap holds one grid's buffers.
    for k in [48usize, 96, 128] {
        let edge = 0.12 * k as f32;
        let grid = PmeGrid::builder([[edge, 0.0, 0.0], [0.0, edge, 0.0], [0.0, 0.0, edge]], &pme)
            .sizes([k, k, k])
            .build()?;
        let rank = group.my_rank().ok_or("every PE is a PME rank")?;
        let (lo, hi) = grid.slab(rank);
        let slab: Vec<f32> = (lo * k * k..hi * k * k).map(|i| ((i * 7919) % 1009) as f32 / 1009.0).collect();
        let mut ffts = Vec::new();
        for (name, algorithm) in FFT_PATHS {
            ffts.push((name, RefCell::new(MeshFft::collective_new(rt, &grid, Path::Auto, algorithm)?)));
        }
        let slab = &slab;
        let mut benches = Vec::new();
        for timed_group in ["pme_fft", "pme_fft_comm", "pme_fft_transpose"] {
            for (name, fft) in &ffts {
                benches.push(Bench::sized(timed_group, name, k, move |iters| {
                    let mut fft = fft.borrow_mut();
                    let mut back = vec![0.0f32; slab.len()];
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        rt.barrier();
                        let (start, comm, exchange) =
                            (Instant::now(), fft.transpose_time(), fft.exchange_time());
                        fft.forward(slab)?;
                        fft.backward(&mut back)?;
                        total += match timed_group {
                            "pme_fft_comm" => fft.transpose_time() - comm,
                            "pme_fft_transpose" => fft.exchange_time() - exchange,
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
    let pme: Vec<usize> = (0..rt.n_pes()).collect();
    let table = TypeTable::builtin();
    let beta = ewald_coefficient(0.9, 1e-5)?;
    let configurations = [
        ("onesided", Path::OneSided, Path::OneSided),
        ("mpi", Path::Mpi, Path::Mpi),
        ("auto", Path::Auto, Path::Auto),
    ];
    for system in bench::water_systems()? {
        let params = table.assign(&system.atoms, "data/spc216.gro")?;
        let grid = PmeGrid::new(system.pbc.vectors(), 0.12, &pme)?;
        let domains = DdGrid::choose(rt.n_pes(), system.pbc, 1e-3)?;
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
                Bench::sized("pme_step", name, system.len(), move |iters| {
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
