//! The halo exchange under the launcher with 2, 3 and 4 PEs, on 1D and 2D grids (2x1x1,
//! 3x1x1, 2x2x1, 4x1x1) and cutoffs that need one and two pulses: halo sets against a
//! brute-force search, forces after move_f against a serial computation, one-sided and MPI
//! bit-identical, results independent of the thread count, repartition, and bad input
//! failing cleanly on every PE.

use std::time::Duration;

use md_halo::force::{ForceField, domain_forces};
use md_halo::{DdGrid, Error, HaloExchange, System, motion, verify};
use onesided::{Path, Runtime};
use onesided_suite::ensure;
use onesided_suite::pe_test::{self, CaseResult, TWO_THREE_FOUR};

fn water(copies: [usize; 3]) -> System {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro");
    System::read_gro(std::path::Path::new(path)).expect("data/spc216.gro").replicate(copies).expect("copies")
}

/// The grids each PE count is tested on, with a cutoff: one pulse, and two pulses where the
/// PE count allows more than two domains along a dimension.
fn grids(n: usize) -> Vec<([usize; 3], f32)> {
    match n {
        2 => vec![([2, 1, 1], 0.9)],
        3 => vec![([3, 1, 1], 0.9), ([3, 1, 1], 1.3)],
        4 => vec![([2, 2, 1], 0.9), ([4, 1, 1], 1.0)],
        _ => vec![],
    }
}

const NSTLIST: usize = 4;

/// Runs `steps` MD steps on `path` and returns per-step fingerprints of the coordinates after
/// move_x and of the home forces after move_f, after checking the halo (first step) and the
/// forces (last step).
fn run(
    rt: &Runtime,
    system: &System,
    grid: &DdGrid,
    cutoff: f32,
    path: Path,
    steps: u64,
    parallel_min: usize,
) -> Result<Vec<(u64, u64)>, Box<dyn std::error::Error>> {
    let field = ForceField::new(cutoff as f64);
    let mut halo = HaloExchange::collective_new(rt, system, grid.clone(), path)?;
    halo.set_parallel_min(parallel_min);
    verify::check_halo(&halo, system)?;
    let mut prints = Vec::new();
    for step in 0..steps {
        if step > 0 && step % NSTLIST as u64 == 0 {
            halo.collective_repartition()?;
        }
        halo.move_x()?;
        let (mut forces, _) = domain_forces(&halo, &system.kinds, &field);
        let x_print = verify::fingerprint(halo.coordinates());
        halo.move_f(&mut forces)?;
        prints.push((x_print, verify::fingerprint(&forces[..halo.home_count()])));
        if step + 1 == steps {
            let deviation = verify::force_deviation(rt, &halo, &forces, &system.kinds, &field)?;
            ensure!(
                deviation < 1e-4,
                "{path} on {:?}: forces deviate {deviation:.2e} from the serial computation",
                grid.dims()
            );
        }
        halo.displace_home(|g, x| motion::displaced(g, step, x))?;
    }
    Ok(prints)
}

fn grids_halos_forces_and_paths_agree(rt: &Runtime) -> CaseResult {
    let system = water([2, 2, 2]);
    for (dims, cutoff) in grids(rt.n_pes()) {
        let grid = DdGrid::new(dims, system.box_size, cutoff + motion::buffer_for(NSTLIST), rt.n_pes())?;
        let onesided = run(rt, &system, &grid, cutoff, Path::Put, 9, 4096)?;
        let mpi = run(rt, &system, &grid, cutoff, Path::Mpi, 9, 4096)?;
        ensure!(onesided == mpi, "one-sided and MPI differ on {dims:?} with cutoff {cutoff}");
        if rt.my_pe() == 0 {
            println!(
                "  grid {dims:?}, cutoff {cutoff} nm, pulses {:?}: halo, forces and paths agree",
                grid.pulses()
            );
        }
    }
    Ok(())
}

fn thread_count_does_not_change_results(rt: &Runtime) -> CaseResult {
    let system = water([2, 2, 2]);
    let (dims, cutoff) = grids(rt.n_pes())[0];
    let grid = DdGrid::new(dims, system.box_size, cutoff + motion::buffer_for(NSTLIST), rt.n_pes())?;
    let mut results = Vec::new();
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
        // A parallel threshold of one atom sends every pulse's packing and unpacking through
        // the pool, not only the force kernel.
        let prints =
            pool.install(|| run(rt, &system, &grid, cutoff, Path::Put, 6, 1).map_err(|e| e.to_string()))?;
        results.push(prints);
    }
    ensure!(results[0] == results[1], "1 and 2 threads gave different bits");
    Ok(())
}

/// Repartition moves atoms to their new domains; an atom that jumped further than one domain
/// since the last repartition (possible only with four or more domains along a dimension)
/// is an error on every PE.
fn repartition_and_jumps(rt: &Runtime) -> CaseResult {
    let system = water([2, 2, 2]);
    let n = rt.n_pes();
    let grid = DdGrid::new([n, 1, 1], system.box_size, 0.9 + motion::buffer_for(NSTLIST), n)?;
    let mut halo = HaloExchange::collective_new(rt, &system, grid.clone(), Path::Put)?;
    // Atom 5 jumps half the box along x, wherever it is.
    let jump = system.box_size[0] / 2.0;
    halo.displace_home(|g, x| if g == 5 { [x[0] + jump, x[1], x[2]] } else { x })?;
    let outcome = halo.collective_repartition();
    if n >= 4 {
        match outcome {
            Err(e @ Error::MovedTooFar { atom: 5, from, to }) => {
                // Every PE names the same domains: where atom 5 lived and where it went.
                let home = grid.cell_of_position(system.positions[5]);
                let landed = grid.cell_of_position([
                    system.positions[5][0] + jump,
                    system.positions[5][1],
                    system.positions[5][2],
                ]);
                ensure!(from == home && to == landed, "{from:?} -> {to:?}, expected {home:?} -> {landed:?}");
                ensure!(e.to_string().contains("smaller --nstlist"), "{e}")
            }
            other => return Err(format!("a jump of {n}/2 domains gave {other:?}").into()),
        }
        return Ok(());
    }
    outcome?;
    // The atom now lives where its new position is, and no atom was lost or duplicated.
    let new_home = grid.cell_of_position([
        system.positions[5][0] + jump,
        system.positions[5][1],
        system.positions[5][2],
    ]);
    let holds = halo.global_indices()[..halo.home_count()].contains(&5);
    ensure!(
        holds == (halo.cell() == new_home),
        "atom 5 on PE {} (domain {:?}, its new home {new_home:?})",
        rt.my_pe(),
        halo.cell()
    );
    let mut counts = vec![0u64; n];
    counts[rt.my_pe()] = halo.home_count() as u64;
    rt.max_u64(&mut counts)?;
    ensure!(counts.iter().sum::<u64>() == system.len() as u64, "home atoms {counts:?} != {}", system.len());
    Ok(())
}

/// The example under the launcher with bad input: every PE reports the error and the job
/// fails, within a time limit.
fn bad_input_fails_on_every_pe(rt: &Runtime) -> CaseResult {
    if rt.my_pe() != 0 {
        return Ok(());
    }
    let example = onesided_suite::launch::example_binary("halo_exchange")?;
    let malformed = std::env::temp_dir().join(format!("onesided-malformed-{}.gro", std::process::id()));
    std::fs::write(&malformed, "title\n 2\n    1SOL     OW    1    .230    .628    .113\n")?;
    let malformed_path = malformed.to_str().unwrap_or_default();
    let cases: [(usize, &[&str], &str); 5] = [
        (2, &["--gro", "/nonexistent/box.gro"], "cannot read /nonexistent/box.gro"),
        (2, &["--gro", malformed_path], "line 4: the file ends after 1 of the 2 atoms"),
        (2, &["--replicate", "1,1,1", "--cutoff", "0.9"], "not shorter than half the box"),
        (2, &["--grid", "2,2,1"], "has 4 domains but the job has 2 PEs"),
        // Five domains of 0.74 nm along x need three pulses for a 1.57 nm halo.
        (
            5,
            &["--replicate", "2,2,2", "--grid", "5,1,1", "--cutoff", "1.5"],
            "more domains than fit the cutoff",
        ),
    ];
    for (pes, args, expected) in cases {
        let mut command = onesided_suite::launch::command(pes, &example);
        let output =
            onesided_suite::launch::output_with_timeout(command.args(args), Duration::from_secs(180))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "{args:?} succeeded");
        for pe in 0..pes {
            ensure!(
                stderr.lines().any(|l| l.contains(&format!("PE {pe}:")) && l.contains(expected)),
                "{args:?}: PE {pe} did not report {expected:?}:\n{stderr}"
            );
        }
    }
    let _ = std::fs::remove_file(&malformed);
    Ok(())
}

fn main() {
    let cases = onesided_suite::cases![TWO_THREE_FOUR =>
        grids_halos_forces_and_paths_agree,
        thread_count_does_not_change_results,
        repartition_and_jumps,
    ];
    let mut cases = cases.to_vec();
    cases.push(pe_test::Case {
        name: "bad_input_fails_on_every_pe",
        pes: &[2],
        run: bad_input_fails_on_every_pe,
    });
    pe_test::main_with_variants("halo", &cases, pe_test::DIRECT_AND_LIBRARY);
}
