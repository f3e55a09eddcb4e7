//! The Sandia OpenSHMEM 1.5 code paths (`cfg(shmem_sos)`, `cfg(shmem_spec_1_5)`: native
//! put-with-signal, teams) cannot run here, where only Open MPI's OSHMEM 1.4 is installed, but
//! they must compile: `scripts/check-sandia-api` type-checks shmem-sys and onesided against a
//! header with Sandia OpenSHMEM's 1.5 declarations.

#[test]
fn the_sandia_openshmem_1_5_paths_type_check() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check-sandia-api");
    let output = std::process::Command::new(script).output().expect("run scripts/check-sandia-api");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "check-sandia-api failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("type-check as Sandia OpenSHMEM 1.5"), "{stdout}");
}
