//! Starting PEs: every test, benchmark and example goes through `scripts/pe-run`, the one
//! place that knows the launcher's flags and the environment this machine needs.

use std::ffi::OsStr;
use std::process::{Command, ExitStatus};

/// The launch script, `scripts/pe-run` in the repository.
pub const PE_RUN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pe-run");

/// Whether this process is a PE started by a launcher (`scripts/pe-run`, or `oshrun` /
/// `mpirun` directly: Open MPI and Hydra set their own variables).
pub fn under_launcher() -> bool {
    ["ONESIDED_PE_RUN", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// Variables a launcher gives its processes; a launch from inside a PE must not inherit
/// them, or the new launcher takes itself for part of the running job.
const LAUNCHER_PREFIXES: &[&str] = &["OMPI_", "PMIX_", "ORTE_", "OPAL_", "PMI_", "HYDRA_", "ONESIDED_PE_RUN"];

/// `scripts/pe-run -n <pes> <program>`; add arguments and environment before running it.
/// The launcher variables of the current job, if any, are not passed on.
pub fn command(pes: usize, program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(PE_RUN);
    command.arg("-n").arg(pes.to_string()).arg(program);
    for (name, _) in std::env::vars_os() {
        let inherited = name.to_str().is_some_and(|n| LAUNCHER_PREFIXES.iter().any(|p| n.starts_with(p)));
        if inherited {
            command.env_remove(name);
        }
    }
    command
}

/// Runs this same program, with the same arguments, as `pes` PEs and returns their exit
/// status. For binaries that launch themselves when started directly (`cargo bench`,
/// `cargo run --example`).
pub fn relaunch_self(pes: usize) -> std::io::Result<ExitStatus> {
    relaunch_self_with(pes, false)
}

/// [`relaunch_self`], unbound from cores when `threaded` (PEs that run several threads).
pub fn relaunch_self_with(pes: usize, threaded: bool) -> std::io::Result<ExitStatus> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(PE_RUN);
    if threaded {
        command.arg("--bind").arg("none");
    }
    command.arg("-n").arg(pes.to_string()).arg(exe).args(std::env::args_os().skip(1)).status()
}

/// If this process is not under a launcher, runs it again as `pes` PEs and exits with their
/// status; otherwise returns, and the caller goes on as a PE.
pub fn ensure_launched(pes: usize) {
    ensure_launched_with(pes, false)
}

/// [`ensure_launched`], unbound from cores when `threaded`.
pub fn ensure_launched_with(pes: usize, threaded: bool) {
    if under_launcher() {
        return;
    }
    match relaunch_self_with(pes, threaded) {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("cannot start {PE_RUN}: {e}");
            std::process::exit(1)
        }
    }
}
