//! Starting PEs: every test, benchmark and example goes through `scripts/pe-run`, the one
//! place that knows the launcher's flags and the environment this machine needs, for either
//! implementation: root allowed, `OMPI_MCA_osc=ucx`, `--oversubscribe` and no binding to cores
//! where the PEs outnumber the cores, and for Sandia OpenSHMEM Open MPI's `mpirun` with
//! address-space randomisation off and a libfabric provider (docs/RUNNING.md).
//!
//! An engine's own binary gets the same single-node launch without the script, from
//! [`onesided::launch::ensure_launched`]; emulated nodes (`--nodes`, `ONESIDED_NODES`) stay
//! with `scripts/pe-run`.

use std::ffi::OsStr;
use std::process::{Command, ExitStatus, Output, Stdio};

/// The launch script, `scripts/pe-run` in the repository.
pub const PE_RUN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pe-run");

/// Whether this process is a PE started by a launcher (`scripts/pe-run`, `oshrun`, `mpirun`,
/// `srun`): [`onesided::launch::under_launcher`], which knows the variables of Open MPI,
/// PMIx, Hydra and Slurm job steps.
pub fn under_launcher() -> bool {
    onesided::launch::under_launcher()
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

/// Runs `command` to completion with its output captured, killing it after `limit`: for
/// tests that launch a job which must fail cleanly and must not hang.
pub fn output_with_timeout(command: &mut Command, limit: std::time::Duration) -> std::io::Result<Output> {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    // Drain the pipes while waiting, so that a chatty job cannot block on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut text).map(|_| text)
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the launch did not end within {limit:?}"),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let joined = |handle: std::thread::JoinHandle<std::io::Result<Vec<u8>>>| {
        handle.join().unwrap_or_else(|_| Err(std::io::Error::other("output reader panicked")))
    };
    Ok(Output { status, stdout: joined(out)?, stderr: joined(err)? })
}

/// An example cargo built beside the running test binary (`target/<profile>/examples/`).
/// `cargo test` builds every example; a run filtered to one test target (`--test NAME`) does
/// not, and then this says so.
pub fn example_binary(name: &str) -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let examples = exe.parent().and_then(|deps| deps.parent()).map(|profile| profile.join("examples"));
    match examples.map(|dir| dir.join(name)) {
        Some(path) if path.is_file() => Ok(path),
        path => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "the example {name} is not built ({}); run `cargo build --example {name}` with this \
                 profile first, or `cargo test` without a --test filter, which builds every example",
                path.map_or_else(|| "no target directory".to_string(), |p| p.display().to_string())
            ),
        )),
    }
}

/// One run of an engine example (`lj_engine`, `nacl_engine`) that prints a `summary
/// key=value ...` line and, given `--dump FILE`, writes six numbers per atom (position and
/// velocity, global order): the summary's fields and the dump.
pub struct EngineRun {
    /// The summary line's fields.
    pub fields: std::collections::HashMap<String, String>,
    /// The dump, six numbers per atom.
    pub state: Vec<f64>,
}

impl EngineRun {
    /// The summary field `key` as a number.
    ///
    /// # Panics
    /// When the summary has no such field or it is not a number: the test's own mistake.
    pub fn number(&self, key: &str) -> f64 {
        self.fields[key].parse().expect("a number")
    }

    /// The largest difference in position (nm, by the minimum image of the box `vectors`)
    /// and in velocity (nm/ps) between this run's dump and `other`'s.
    pub fn differences(&self, other: &EngineRun, vectors: [[f64; 3]; 3]) -> (f64, f64) {
        let (mut dx, mut dv) = (0.0f64, 0.0f64);
        for (p, q) in self.state.chunks(6).zip(other.state.chunks(6)) {
            let mut d: [f64; 3] = std::array::from_fn(|k| p[k] - q[k]);
            for v in (0..3).rev() {
                let shift = (d[v] / vectors[v][v]).round();
                (0..3).for_each(|k| d[k] -= shift * vectors[v][k]);
            }
            dx = dx.max(d.iter().map(|c| c.abs()).fold(0.0, f64::max));
            dv = dv.max((3..6).map(|k| (p[k] - q[k]).abs()).fold(0.0, f64::max));
        }
        (dx, dv)
    }
}

/// Runs the engine example `name` as `pes` PEs (`--pes`, through its own launch) with
/// `args` and a dump in the temporary directory, within ten minutes.
///
/// # Errors
/// When the example is not built, fails, or prints no summary or a dump that does not parse.
pub fn run_engine<S: AsRef<str>>(
    name: &str,
    pes: usize,
    args: &[S],
) -> Result<EngineRun, Box<dyn std::error::Error>> {
    let example = example_binary(name)?;
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let dump =
        std::env::temp_dir().join(format!("{name}-{}-{pes}-{}.txt", std::process::id(), args.join("")));
    let mut command = Command::new(&example);
    command.args(["--pes", &pes.to_string(), "--dump", dump.to_str().ok_or("path")?]).args(&args);
    let output = output_with_timeout(&mut command, std::time::Duration::from_secs(600))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{name} {args:?} on {pes} PEs failed:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let summary = stdout.lines().find(|l| l.starts_with("summary")).ok_or("no summary line")?;
    let fields = summary
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let text = std::fs::read_to_string(&dump)?;
    let _ = std::fs::remove_file(&dump);
    let state = text.split_whitespace().map(str::parse).collect::<Result<_, _>>()?;
    Ok(EngineRun { fields, state })
}
