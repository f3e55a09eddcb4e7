//! Starting an engine's own binary as PEs on one node, without a script: [`ensure_launched`]
//! at the top of `main` runs the program again under the launcher of the OpenSHMEM this
//! crate was built against, unless it already runs under one, so that `cargo run --release
//! -- --pes 4` works as `oshrun -np 4 target/release/engine` does.
//!
//! The launch is the one `scripts/pe-run` makes for one node (docs/RUNNING.md): Open MPI's
//! `oshrun` for its OSHMEM, Open MPI's `mpirun` (which provides PMIx) for Sandia OpenSHMEM
//! with address-space randomisation off and the OFI provider `tcp;ofi_rxm` unless one is
//! set; PEs bound to cores unless there are more PEs than cores, then oversubscribed and
//! unbound; running as root allowed. On a cluster, start the binary with the site's launcher
//! (`srun`, `mpirun`) instead: under any launcher, [`ensure_launched`] does nothing.
//!
//! The job's end is here too, below everything else in the crate: the line a PE writes
//! ([`say`]) and the end of the whole job that the runtime, the watchdog and a panic share.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};

/// Variables a launcher gives its processes. A launch from inside a PE must not inherit
/// them, or the new launcher takes itself for part of the running job; a launch from a
/// plain process keeps them all (the user's `OMPI_MCA_*` settings, `OPAL_PREFIX`).
const LAUNCHER_PREFIXES: &[&str] = &["OMPI_", "PMIX_", "ORTE_", "OPAL_", "PMI_", "HYDRA_", "SLURM_STEP_"];

/// Set in every PE a [`Launch`] starts.
const MARK: &str = "ONESIDED_PE_RUN";

/// Writes `line` and a newline to standard error in one write. Every PE's messages go
/// through the launcher to the same stream, and `eprintln!` writes each formatted piece on its
/// own, so two PEs' lines could interleave mid-line; a line shorter than a pipe's atomic write
/// (4 KiB on Linux) arrives whole.
pub fn say(line: &str) {
    use std::io::Write;
    let whole = format!("{line}\n");
    // Nothing better to do with a failure to write a message.
    let _ = std::io::stderr().write_all(whole.as_bytes());
}

/// Ends every PE of the job with exit status `code` (see [`Runtime::abort`](crate::Runtime::abort)), from any thread
/// of a PE whose runtime exists.
pub(crate) fn end_job(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    if cfg!(shmem_sos) {
        use mpi::topology::{Communicator, SimpleCommunicator};
        SimpleCommunicator::world().abort(code)
    }
    // SAFETY: OpenSHMEM is initialised (the runtime exists); shmem_global_exit does not
    // return.
    unsafe { shmem_sys::shmem_global_exit(code) };
    std::process::exit(code)
}

/// This machine's host name (empty where the kernel does not say), for the cache key of the
/// links and the watchdog's message.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string()
}

/// Whether this process was started by a launcher (a [`Launch`], `scripts/pe-run`,
/// `oshrun`, `mpirun`, `srun`): Open MPI, PMIx, Hydra and Slurm job steps set variables of
/// their own.
///
/// A Slurm job step counts only for the process it started (`SLURM_TASK_PID`, wrappers that
/// `exec` included): a program run from the shell of `srun --pty bash` is not under a
/// launcher and launches itself.
pub fn under_launcher() -> bool {
    let slurm_task =
        std::env::var("SLURM_TASK_PID").is_ok_and(|pid| pid.trim() == std::process::id().to_string());
    std::env::var_os(MARK).is_some()
        || slurm_task
        || ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
}

/// If this process is not under a launcher, runs this program again, with the same
/// arguments, as `pes` PEs on this node and exits with the job's status; under a launcher
/// it returns at once and the caller goes on as a PE. Call it first in `main`, before
/// [`Runtime::init`](crate::Runtime::init).
///
/// When the launch cannot start (no launcher installed, say), it prints why and exits
/// with status 127.
pub fn ensure_launched(pes: usize) {
    if under_launcher() {
        return;
    }
    match Launch::new(pes).run_self() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => {
            eprintln!("cannot start {pes} PEs: {e}");
            std::process::exit(127)
        }
    }
}

/// A launch of `pes` PEs on this node, as [`ensure_launched`] makes it; build the command
/// for any program with [`command`](Self::command).
#[derive(Clone, Debug)]
pub struct Launch {
    pes: usize,
    bind: Option<bool>,
    randomise: bool,
}

impl Launch {
    /// `pes` PEs, bound to cores when there are no more PEs than cores.
    pub fn new(pes: usize) -> Launch {
        Launch { pes, bind: None, randomise: false }
    }

    /// Binds each PE to a core (`true`) or leaves them unbound (`false`, for PEs that run
    /// several threads), in place of the default.
    pub fn bind_to_core(mut self, bind: bool) -> Launch {
        self.bind = Some(bind);
        self
    }

    /// With Sandia OpenSHMEM, leaves address-space randomisation on (`true`) rather than
    /// starting each PE under `setarch -R`: for a build without cross-memory attach, which
    /// needs no common layout. With CMA, [`Runtime::init`](crate::Runtime::init) then
    /// refuses to start ([`Error::AddressRandomisation`](crate::Error::AddressRandomisation)).
    /// Open MPI's OSHMEM needs neither.
    pub fn address_randomisation(mut self, on: bool) -> Launch {
        self.randomise = on;
        self
    }

    /// The launcher's command that starts `program` as the PEs; add the program's
    /// arguments with [`Command::args`]. From inside a PE, the launcher variables of the
    /// running job are not passed on; from a plain process every variable is.
    ///
    /// # Errors
    /// When `pes` is 0, or the launcher is not installed (with what to install, or which
    /// variable names another: `OSHRUN` for OSHMEM, `SOS_LAUNCHER` for Sandia OpenSHMEM).
    pub fn command(&self, program: impl AsRef<OsStr>) -> std::io::Result<Command> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        if self.pes == 0 {
            return Err(invalid("a launch needs at least one PE".to_string()));
        }
        let sos = cfg!(shmem_sos);
        let (variable, default, hint) = if sos {
            (
                "SOS_LAUNCHER",
                "mpirun",
                "Sandia OpenSHMEM programs start under Open MPI's mpirun (apt-get install openmpi-bin)",
            )
        } else {
            ("OSHRUN", "oshrun", "install Open MPI's OpenSHMEM (apt-get install libopenmpi-dev openmpi-bin)")
        };
        let launcher = std::env::var_os(variable).unwrap_or_else(|| default.into());
        let Some(path) = find_on_path(&launcher) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "the launcher {} is not on PATH: {hint}, or set {variable}",
                    launcher.to_string_lossy()
                ),
            ));
        };
        let mut command = Command::new(path);
        if under_launcher() {
            for (name, _) in std::env::vars_os() {
                if name.to_str().is_some_and(|n| LAUNCHER_PREFIXES.iter().any(|p| n.starts_with(p))) {
                    command.env_remove(name);
                }
            }
        }
        command.env(MARK, "1").arg("-np").arg(self.pes.to_string());
        // Open MPI's launchers name themselves "Open MPI", "OpenRTE" or "Open SHMEM".
        let version = Command::new(command.get_program()).arg("--version").output();
        let text = version
            .map(|o| [o.stdout, o.stderr].concat())
            .map(|bytes| String::from_utf8_lossy(&bytes).to_lowercase().replace(' ', ""))
            .unwrap_or_default();
        if ["openmpi", "openrte", "openshmem"].iter().any(|name| text.contains(name)) {
            command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            // UCX's one-sided component, the user's choice else: Open MPI's OSHMEM crashes in
            // shmem_finalize without it, and beside Sandia OpenSHMEM MPI windows across nodes
            // need it (Debian's configuration leaves it out).
            command.env("OMPI_MCA_osc", std::env::var_os("OMPI_MCA_osc").unwrap_or_else(|| "ucx".into()));
            let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
            if self.pes > cores {
                command.arg("--oversubscribe");
            }
            let bind = self.bind.unwrap_or(self.pes <= cores);
            command.arg("--bind-to").arg(if bind { "core" } else { "none" });
        }
        if sos {
            if std::env::var_os("SHMEM_OFI_PROVIDER").is_none() && std::env::var_os("FI_PROVIDER").is_none() {
                command.env("SHMEM_OFI_PROVIDER", "tcp;ofi_rxm");
            }
            // SOS's same-node transport needs the symmetric heap at the same address in
            // every PE (docs/RUNNING.md).
            if !self.randomise {
                command.arg("setarch").arg(std::env::consts::ARCH).arg("-R");
            }
        }
        command.arg(program);
        Ok(command)
    }

    /// Runs this program again, with the same arguments, as the PEs, and waits for them.
    ///
    /// # Errors
    /// As [`command`](Self::command), and when the launcher cannot be started.
    pub fn run_self(&self) -> std::io::Result<ExitStatus> {
        let exe = std::env::current_exe()?;
        self.command(exe)?.args(std::env::args_os().skip(1)).status()
    }
}

/// `name` if it is a path, else the first executable of that name on `PATH`.
fn find_on_path(name: &OsStr) -> Option<PathBuf> {
    let name = PathBuf::from(name);
    if name.components().count() > 1 {
        return name.is_file().then_some(name);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(&name)).find(|p| p.is_file())
}
