//! The C ABI from C hosts under the launcher: `crates/onesided-c/tests/c/*.c`, compiled with
//! the MPI compiler wrapper against the committed header and the shared library this build
//! made, each a program that starts MPI itself.
//!
//! - `abi_core` on 1, 2, 3 and 4 PEs: attach, put with signal around the ring, get, PME on
//!   every PE against PME on PE 0 alone (GROMACS's `-npme 1`), the
//!   send-receive on every path (values encoding sender, call and index), objects left alive
//!   freed with the runtime, MPI used after it and finalised by the host; status 0 and
//!   nothing on stderr.
//! - `abi_misuse calls` on 1, 2 and 3 PEs: every bad use a PE survives (null pointers, null,
//!   freed and wrong-kind handles, sizes that differ between PEs, regions past the end, a
//!   message larger than its room, partners not mutual, a sub-communicator, a second start)
//!   gives its status and a message naming the PE, on every PE.
//! - `abi_cpp` on 1, 2 and 4 PEs: the C++ wrapper's RAII handles and exceptions (status,
//!   PE-prefixed message, every-PE flag), moves, destructors that free in order.
//! - `examples/{halo_step,pme_step}.{c,cpp}` against `examples/{halo_step,pme_step}.rs`, on 2
//!   and 4 PEs (or those `ONESIDED_TEST_PES` lists) and every path: the same lines, each PE's
//!   fingerprint of its home atoms (after 50 halo steps and 5 repartitions; after 30 PME
//!   steps and 3 plans, with the energy).
//! - `abi_misuse thread-level`: MPI without `MPI_THREAD_MULTIPLE` is refused with the call
//!   to make.
//! - `abi_misuse partial`: a collective only PE 0 calls ends the job at the deadline with a
//!   message naming the call, not a hang.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use onesided_suite::launch;

/// Compiles `crates/onesided-c/{name}` (C99 or, for `.cpp`, C++17; without fused
/// multiply-adds, so that the examples round as Rust does) against the headers and the
/// library in `lib`.
fn compile(name: &str, lib: &Path, out: &Path) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join("crates/onesided-c").join(name);
    let name = name.rsplit('/').next().expect("a file name");
    let (stem, cpp) = match name.strip_suffix(".cpp") {
        Some(stem) => (stem, true),
        None => (name.trim_end_matches(".c"), false),
    };
    let exe = out.join(if cpp { format!("{stem}_cpp") } else { stem.to_string() });
    // Open MPI's deprecated C++ bindings do not compile warning-free: the C API only.
    let (compiler, standard) =
        if cpp { ("mpicxx", "-std=c++17 -DOMPI_SKIP_MPICXX") } else { ("mpicc", "-std=c99") };
    let output = Command::new(compiler)
        .args(standard.split(' '))
        .args(["-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root.join("crates/onesided-c/include").display()))
        .arg(&source)
        .arg(format!("-L{}", lib.display()))
        .arg("-lonesided_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("cannot run {compiler} (install libopenmpi-dev: scripts/setup): {e}"))?;
    if !output.status.success() {
        return Err(format!("{compiler} {name} failed:\n{}", String::from_utf8_lossy(&output.stderr)));
    }
    Ok(exe)
}

/// One run: the program on `pes` PEs with `args`; what it must show.
struct Case {
    program: &'static str,
    args: &'static [&'static str],
    pes: usize,
    env: &'static [(&'static str, &'static str)],
    /// The exit status the job must end with.
    status: i32,
    /// A line every PE prints on stdout, when the run succeeds.
    every_pe: Option<&'static str>,
    /// Text stderr must hold (`None`: stderr must be empty).
    stderr: Option<&'static str>,
}

/// The launch of a C program: cargo's `LD_LIBRARY_PATH` (which names `target/debug`, where
/// an older build of the library may lie) would override the program's run path.
fn c_command(pes: usize, exe: &Path) -> Command {
    let mut command = launch::command(pes, exe);
    command.env_remove("LD_LIBRARY_PATH");
    command
}

fn run(case: &Case, exe: &Path) -> Result<(), String> {
    let mut command = c_command(case.pes, exe);
    command.args(case.args);
    for (key, value) in case.env {
        command.env(key, value);
    }
    let output = launch::output_with_timeout(&mut command, Duration::from_secs(120))
        .map_err(|e| format!("cannot run: {e}"))?;
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let wrong = |why: String| Err(format!("{why}\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    if output.status.code() != Some(case.status) {
        return wrong(format!("status {:?}, not {}", output.status, case.status));
    }
    if let Some(line) = case.every_pe {
        for pe in 0..case.pes {
            let want = format!("{line} PE {pe}");
            if !stdout.lines().any(|l| l.starts_with(&want)) {
                return wrong(format!("no line '{want}'"));
            }
        }
    }
    if stdout.contains("<- WRONG") {
        return wrong("a case went wrong".into());
    }
    match case.stderr {
        None if !stderr.trim().is_empty() => wrong("stderr is not empty".into()),
        Some(text) if !stderr.contains(text) => wrong(format!("stderr lacks '{text}'")),
        _ => Ok(()),
    }
}

fn main() {
    let lib = std::env::current_exe().expect("the test binary").parent().expect("its folder").to_path_buf();
    if !lib.join("libonesided_c.so").exists() {
        eprintln!("c_abi: no libonesided_c.so beside {}: build with cargo test", lib.display());
        std::process::exit(1);
    }
    let out = lib.join("c_abi");
    std::fs::create_dir_all(&out).expect("a folder for the C programs");
    let mut exes = std::collections::HashMap::new();
    let sources = [
        "tests/c/abi_core.c",
        "tests/c/abi_misuse.c",
        "tests/c/abi_cpp.cpp",
        "examples/halo_step.c",
        "examples/halo_step.cpp",
        "examples/pme_step.c",
        "examples/pme_step.cpp",
    ];
    for name in sources {
        match compile(name, &lib, &out) {
            Ok(exe) => {
                exes.insert(name.rsplit('/').next().expect("a file name"), exe);
            }
            Err(e) => {
                eprintln!("c_abi: {e}");
                std::process::exit(1);
            }
        };
    }
    let core = |pes| Case {
        program: "abi_core.c",
        args: &[],
        pes,
        env: &[],
        status: 0,
        every_pe: Some("abi_core ok:"),
        stderr: None,
    };
    let misuse = |pes| Case {
        program: "abi_misuse.c",
        args: &["calls"],
        pes,
        env: &[],
        status: 0,
        every_pe: Some("abi_misuse ok:"),
        stderr: None,
    };
    let cpp = |pes| Case { program: "abi_cpp.cpp", every_pe: Some("abi_cpp ok:"), ..core(pes) };
    let cases = [
        cpp(1),
        cpp(2),
        cpp(4),
        core(1),
        core(2),
        core(3),
        core(4),
        misuse(1),
        misuse(2),
        misuse(3),
        Case { args: &["thread-level"], ..misuse(2) },
        Case {
            args: &["partial"],
            env: &[("ONESIDED_WAIT_TIMEOUT", "5")],
            status: 124,
            every_pe: None,
            stderr: Some("past the deadline of 5s (ONESIDED_WAIT_TIMEOUT)"),
            ..misuse(2)
        },
    ];
    let mut failed = false;
    for case in &cases {
        let label = [case.program.to_string(), case.args.join(" "), format!("on {} PEs", case.pes)]
            .iter()
            .filter(|part| !part.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        match run(case, &exes[case.program]) {
            Ok(()) => println!("c_abi: {label} ok"),
            Err(e) => {
                eprintln!("c_abi: {label} FAILED: {e}");
                failed = true;
            }
        }
    }
    failed |= !same_as_rust(&exes);
    if failed {
        std::process::exit(1);
    }
}

/// The PE counts of the comparisons with the Rust examples: 2 and 4, or those
/// `ONESIDED_TEST_PES` lists (`2` in CI's short pass on Sandia OpenSHMEM).
fn comparison_pes() -> Vec<usize> {
    match std::env::var("ONESIDED_TEST_PES") {
        Ok(list) => list.split(',').filter_map(|p| p.trim().parse().ok()).filter(|&p| p > 0).collect(),
        Err(_) => vec![2, 4],
    }
}

/// The C and C++ examples print what the Rust ones print, line for line (each PE's
/// fingerprint of its home atoms, and PME's energy), on 2 and 4 PEs and every path.
fn same_as_rust(exes: &std::collections::HashMap<&str, PathBuf>) -> bool {
    let mut same = true;
    let pairs = [
        ("halo_step", "halo_step.c"),
        ("halo_step", "halo_step.cpp"),
        ("pme_step", "pme_step.c"),
        ("pme_step", "pme_step.cpp"),
    ];
    for (example, c_name) in pairs {
        let rust = match launch::example_binary(example) {
            Ok(path) => path,
            Err(e) => {
                eprintln!("c_abi: {e}");
                return false;
            }
        };
        for &pes in &comparison_pes() {
            for path in ["onesided", "mpi", "auto"] {
                let lines = |program: &Path, args: &[&str]| -> Result<Vec<String>, String> {
                    let mut command = c_command(pes, program);
                    command.args(args);
                    let output = launch::output_with_timeout(&mut command, Duration::from_secs(120))
                        .map_err(|e| format!("cannot run: {e}"))?;
                    if !output.status.success() {
                        return Err(format!(
                            "status {:?}: {}",
                            output.status,
                            String::from_utf8_lossy(&output.stderr)
                        ));
                    }
                    // The lines of every PE's result (pme_step.rs adds PE 0's timings).
                    let mut lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
                        .lines()
                        .filter(|l| l.contains("fingerprint"))
                        .map(str::to_string)
                        .collect();
                    lines.sort();
                    Ok(lines)
                };
                let label = format!("{c_name} against {example}.rs on {pes} PEs, {path}");
                match (lines(&rust, &["--path", path]), lines(&exes[c_name], &[path])) {
                    (Ok(r), Ok(c))
                        if r == c && r.len() == pes && r.iter().all(|l| l.contains("fingerprint")) =>
                    {
                        println!("c_abi: {label}: the same {} lines", r.len());
                    }
                    (Ok(r), Ok(c)) => {
                        eprintln!("c_abi: {label} FAILED: Rust\n{}\nC\n{}", r.join("\n"), c.join("\n"));
                        same = false;
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        eprintln!("c_abi: {label} FAILED: {e}");
                        same = false;
                    }
                }
            }
        }
    }
    same
}
