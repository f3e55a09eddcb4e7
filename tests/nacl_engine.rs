//! The whole NVE engine with PME, `examples/nacl_engine` (molten NaCl, Tosi-Fumi short range
//! over the halo in double precision, PME over the mesh, velocity Verlet), started as an
//! engine's own binary starts and checked by its physics:
//!
//! - 2, 3 and 4 PEs follow 1 PE within 1e-7 nm and 1e-5 nm/ps over 200 steps of 1 fs (the
//!   decomposition changes the order of the force sums and of the mesh's single-precision
//!   spreading, by an ulp), and the one-sided and the MPI paths give the same bits;
//! - the configurational pressure from the virial (short-range pairs and the mesh's) is the
//!   central difference of the energy under an isotropic strain, within 1e-3;
//! - after the lattice has melted, the total energy stays within twice velocity Verlet's
//!   error scale `dt² <|F|²/m> / 12` per ion of where it was, and drifts by less than that
//!   scale over the run, at orders 4 and 6.

use onesided_suite::launch::{self, EngineRun};

type Outcome = Result<(), Box<dyn std::error::Error>>;

fn run(pes: usize, args: &[&str]) -> Result<EngineRun, Box<dyn std::error::Error>> {
    launch::run_engine("nacl_engine", pes, args)
}

fn decompositions_follow_one_pe() -> Outcome {
    let common = ["--steps", "200", "--every", "50"];
    let with = |more: &[&'static str]| -> Vec<&'static str> { common.iter().chain(more).copied().collect() };
    let one = run(1, &with(&[]))?;
    let edge = f64::from((5.0 * 0.6306f64) as f32);
    let cube = [[edge, 0.0, 0.0], [0.0, edge, 0.0], [0.0, 0.0, edge]];
    for (pes, grid) in [(2, "2,1,1"), (3, "3,1,1"), (4, "2,2,1")] {
        let put = run(pes, &with(&["--grid", grid, "--path", "onesided"]))?;
        let mpi = run(pes, &with(&["--grid", grid, "--path", "mpi"]))?;
        if put.fields["fingerprint"] != mpi.fields["fingerprint"] || put.state != mpi.state {
            return Err(format!("{pes} PEs, grid {grid}: one-sided and MPI differ").into());
        }
        let (dx, dv) = one.differences(&put, cube);
        println!(
            "nacl_engine: {pes} PEs, grid {grid}: one-sided = MPI bit for bit; after 200 steps within \
             {dx:.1e} nm and {dv:.1e} nm/ps of 1 PE"
        );
        if dx > 1e-7 || dv > 1e-5 {
            return Err(format!("{pes} PEs, grid {grid}: {dx:e} nm, {dv:e} nm/ps from 1 PE").into());
        }
    }
    Ok(())
}

fn pressure_is_the_volume_derivative() -> Outcome {
    let r = run(2, &["--steps", "100", "--every", "100", "--pressure-check", "1e-4"])?;
    let (virial, fd) = (r.number("pressure_virial"), r.number("pressure_fd"));
    let off = (virial - fd).abs() / fd.abs();
    println!(
        "nacl_engine: configurational pressure {virial:.2} bar from the virial, {fd:.2} bar from -dU/dV ({off:.1e})"
    );
    if off > 1e-3 {
        return Err(format!("pressure from the virial {virial} against -dU/dV {fd}").into());
    }
    Ok(())
}

fn energy_is_conserved() -> Outcome {
    for order in ["4", "6"] {
        let r = run(2, &["--steps", "2000", "--equilibrate", "1000", "--every", "10", "--order", order])?;
        let (deviation, scale, drift) =
            (r.number("largest_deviation"), r.number("verlet_scale"), r.number("drift"));
        let over_run = drift.abs() * 0.001; // kJ/mol per ion over the fitted 0.001 ns
        println!(
            "nacl_engine: order {order}, 1 000 ions, 1 ps after 1 ps of melting: total energy within \
             {deviation:.2e} kJ/mol per ion (bound {:.2e}), drift {drift:.2e} kJ/mol per ion per ns",
            2.0 * scale
        );
        if deviation > 2.0 * scale || over_run > scale {
            return Err(format!(
                "order {order}: energy not conserved: deviation {deviation:e}, drift {drift:e}, scale {scale:e}"
            )
            .into());
        }
    }
    Ok(())
}

fn main() {
    let mut failed = false;
    for (name, case) in [
        ("decompositions_follow_one_pe", decompositions_follow_one_pe as fn() -> Outcome),
        ("pressure_is_the_volume_derivative", pressure_is_the_volume_derivative),
        ("energy_is_conserved", energy_is_conserved),
    ] {
        match case() {
            Ok(()) => println!("nacl_engine: {name} ok"),
            Err(e) => {
                eprintln!("nacl_engine: {name} FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
