//! The whole loop of an engine, `examples/lj_engine` (Lennard-Jones argon, velocity Verlet,
//! the halo of md-halo, energies over the runtime's reductions), started as an engine's own
//! binary starts (`--pes N`, through `onesided::launch`), checked by its physics:
//!
//! - over 1 000 steps of 2 fs the total energy strays from its start by at most twice the
//!   scale of velocity Verlet's energy error, dt² <|F|²> / (12 m) per atom, and drifts by
//!   less than that scale over the run;
//! - 2, 3, 4 and 8 PEs on 1-, 2- and 3-D grids, and a triclinic box, follow the trajectory
//!   of 1 PE within 1e-5 nm and 1e-4 nm/ps over 50 steps (the forces of a PE's pairs are
//!   summed in f64 and rounded once, then the halo's partial forces are added in `f32`: the
//!   order of those additions changes with the decomposition, by an ulp);
//! - the one-sided and the MPI paths give the same bits on every grid.

use onesided_suite::launch::{self, EngineRun};

type Outcome = Result<(), Box<dyn std::error::Error>>;

fn run<S: AsRef<str>>(pes: usize, args: &[S]) -> Result<EngineRun, Box<dyn std::error::Error>> {
    launch::run_engine("lj_engine", pes, args)
}

fn energy_is_conserved() -> Outcome {
    let r = run(1, &["--cells", "6", "--steps", "1000", "--every", "10"])?;
    let (deviation, scale, drift) =
        (r.number("largest_deviation"), r.number("verlet_scale"), r.number("drift"));
    let over_run = drift.abs() * 0.002; // kJ/mol per atom over the 0.002 ns
    println!(
        "engine: 864 atoms, 1000 steps of 2 fs: total energy within {deviation:.2e} kJ/mol per atom of its \
         start (bound {:.2e}), drift {drift:.2e} kJ/mol per atom per ns ({over_run:.1e} over the run)",
        2.0 * scale
    );
    if deviation > 2.0 * scale || over_run > scale {
        return Err(format!(
            "energy not conserved: deviation {deviation:e}, drift {drift:e}, scale {scale:e}"
        )
        .into());
    }
    Ok(())
}

fn decompositions_follow_one_pe() -> Outcome {
    let common = ["--cells", "6", "--steps", "50", "--every", "50"];
    for triclinic in [false, true] {
        let extra: &[&str] = if triclinic { &["--triclinic"] } else { &[] };
        let args = |more: &[&str]| -> Vec<String> {
            common.iter().chain(extra).chain(more).map(|s| s.to_string()).collect()
        };
        let one = run(1, &args(&[]))?;
        let edge = (6.0 * 0.5745f64) as f32 as f64;
        let lean = if triclinic { edge / 2.0 } else { 0.0 };
        let vectors = [[edge, 0.0, 0.0], [lean, edge, 0.0], [lean, 0.0, edge]];
        let grids: &[(usize, &str)] = if triclinic {
            &[(2, "2,1,1"), (4, "1,2,2")]
        } else {
            &[(2, "2,1,1"), (3, "3,1,1"), (4, "2,2,1"), (8, "2,2,2")]
        };
        for &(pes, grid) in grids {
            let mut runs = Vec::new();
            for path in ["onesided", "mpi"] {
                runs.push(run(pes, &args(&["--grid", grid, "--path", path]))?);
            }
            let (put, mpi) = (&runs[0], &runs[1]);
            if put.fields["fingerprint"] != mpi.fields["fingerprint"] || put.state != mpi.state {
                return Err(format!(
                    "{pes} PEs, grid {grid}, triclinic {triclinic}: one-sided and MPI differ"
                )
                .into());
            }
            let (dx, dv) = one.differences(put, vectors);
            println!(
                "engine: {pes} PEs, grid {grid}{}: one-sided = MPI bit for bit; after 50 steps within \
                 {dx:.1e} nm and {dv:.1e} nm/ps of 1 PE",
                if triclinic { ", triclinic" } else { "" }
            );
            if dx > 1e-5 || dv > 1e-4 {
                return Err(format!("{pes} PEs, grid {grid}: {dx:e} nm, {dv:e} nm/ps from 1 PE").into());
            }
        }
    }
    Ok(())
}

fn main() {
    let mut failed = false;
    for (name, case) in [
        ("energy_is_conserved", energy_is_conserved as fn() -> Outcome),
        ("decompositions_follow_one_pe", decompositions_follow_one_pe),
    ] {
        match case() {
            Ok(()) => println!("engine: {name} ok"),
            Err(e) => {
                eprintln!("engine: {name} FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
