//! Which OpenSHMEM the build found, and whether the launcher sees the same.
//!
//! - `ONESIDED_EXPECT_OPENSHMEM` (`scripts/test-sos` sets `sos 1.5`): when set, the bindings
//!   must come from that implementation and specification version, so that a suite meant for
//!   Sandia OpenSHMEM cannot pass against another installation.
//! - `scripts/pe-run` must launch a program the way its implementation needs: Sandia
//!   OpenSHMEM under `setarch -R` (its same-node transport needs the same addresses in every
//!   PE), Open MPI's OSHMEM with `OMPI_MCA_osc=ucx`.
//!
//! Bindings that drift from the real header fail earlier, in the build: the suite is built
//! against Open MPI's OSHMEM (`cargo test`) and against Sandia OpenSHMEM 1.5.3
//! (`scripts/test-sos`), and CI runs both.

use std::process::Command;

use onesided_suite::launch;

#[test]
fn the_bindings_come_from_the_expected_implementation() {
    let found =
        format!("{} {}.{}", shmem_sys::IMPLEMENTATION, shmem_sys::SPEC_VERSION.0, shmem_sys::SPEC_VERSION.1);
    println!("built against {found}");
    if let Ok(expected) = std::env::var("ONESIDED_EXPECT_OPENSHMEM") {
        assert_eq!(
            found,
            expected.trim(),
            "the build found another OpenSHMEM than ONESIDED_EXPECT_OPENSHMEM names"
        );
    }
    match shmem_sys::IMPLEMENTATION {
        "sos" => assert!(shmem_sys::SPEC_VERSION >= (1, 5), "Sandia OpenSHMEM 1.5 or later: {found}"),
        "oshmem" => assert!(shmem_sys::SPEC_VERSION >= (1, 4), "OSHMEM 1.4 or later: {found}"),
        other => panic!("unknown implementation {other:?}"),
    }
}

#[test]
fn pe_run_launches_a_program_as_its_implementation_needs() {
    let program = launch::example_binary("hello_put").expect("the hello_put example");
    let output = Command::new(launch::PE_RUN)
        .args(["-n", "2", "--dry-run"])
        .arg(&program)
        .output()
        .expect("run scripts/pe-run --dry-run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "pe-run --dry-run failed:\n{stdout}\n{stderr}");
    // Both take UCX's one-sided component (OSHMEM's shmem_finalize needs it, MPI windows
    // across nodes beside Sandia OpenSHMEM too); only Sandia OpenSHMEM runs under setarch -R.
    assert!(stdout.contains("OMPI_MCA_osc=ucx"), "no OMPI_MCA_osc=ucx in the launch: {stdout}");
    let sos_launch = stdout.contains(" setarch ") && stdout.contains(" -R ");
    match shmem_sys::IMPLEMENTATION {
        "sos" => assert!(sos_launch, "not a Sandia OpenSHMEM launch: {stdout}"),
        _ => assert!(!sos_launch, "not an OSHMEM launch: {stdout}"),
    }
}
