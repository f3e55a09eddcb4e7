//! A harness for multi-PE integration tests that `cargo test` runs like any other test
//! target (`harness = false`, so that no collective OpenSHMEM or MPI call runs inside
//! libtest's harness, which runs tests on threads of its own).
//!
//! Started by cargo, the binary is the *parent*: for every PE count its cases ask for (most
//! suites 2, 3 and 4, [`TWO_THREE_FOUR`]) and every variant of the environment a suite runs
//! under ([`Variant`]: most suites with and without the direct path, [`DIRECT_AND_LIBRARY`]), it
//! launches itself through `scripts/pe-run -n N`, relays what the PEs print, bounds each
//! launch in time, and fails if any launch fails. Each launch calibrates afresh, in a cache
//! directory of its own that is removed when it ends, so the tests leave nothing behind. A
//! launch that asked for emulated nodes this machine cannot make (`scripts/pe-run` exits
//! with status 4) counts as skipped. Started under the launcher, the binary is a *PE*: it
//! initialises the runtime and runs, in order, the cases that take the job's PE count.
//!
//! A case that fails on any PE (an error, or a panic such as a failed `assert!`) prints the
//! PE, the case and the message. After each case the PEs agree whether it failed anywhere,
//! by a non-blocking max-reduction on a communicator of its own (so it cannot match an MPI
//! call a failed case left behind); if it did, every PE ends normally with status 1. A PE on
//! which the case failed waits for that agreement as long as the others may still be waiting
//! for it (their wait timeout, plus a margin); when they do not come (stuck in a barrier,
//! say), it ends the whole job at once ([`Runtime::abort`]), so no PE is left waiting.
//!
//! Arguments (as with libtest): words are name filters; `--skip NAME` leaves out the cases
//! whose names contain NAME; `--list` lists the cases; other flags cargo passes are accepted
//! and ignored.
//! `ONESIDED_TEST_LAUNCH_TIMEOUT` bounds each launch in seconds (default 600); the PEs'
//! `ONESIDED_WAIT_TIMEOUT` defaults to the library's 60 s unless set. `ONESIDED_TEST_PES` (such as `2,4`)
//! keeps only the launches with those PE counts, `ONESIDED_TEST_VARIANTS` (such as `direct`)
//! only the variants with those labels (in suites that have several).

use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::Stdio;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use onesided::Runtime;

use crate::launch;

/// The PE counts every multi-PE test runs with: two, three and four.
pub const TWO_THREE_FOUR: &[usize] = &[2, 3, 4];

/// What a case returns: `?` works on the crate's errors and on strings.
pub type CaseResult = Result<(), Box<dyn std::error::Error>>;

/// One multi-PE test.
#[derive(Clone, Copy)]
pub struct Case {
    /// Its name, for filters and reports.
    pub name: &'static str,
    /// The PE counts it runs with; a case that needs exactly N PEs lists only N.
    pub pes: &'static [usize],
    /// The test, run on every PE.
    pub run: fn(&Runtime) -> CaseResult,
}

/// Cases named after their functions, all with the same PE counts:
/// `cases![TWO_THREE_FOUR => put_get, atomics]`.
#[macro_export]
macro_rules! cases {
    ($pes:expr => $($run:ident),+ $(,)?) => {
        [$($crate::pe_test::Case { name: stringify!($run), pes: $pes, run: $run }),+]
    };
}

/// Fails a case with a message unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+).into());
        }
    };
}

const FILTER_VAR: &str = "ONESIDED_TEST_FILTER";
const LAUNCH_TIMEOUT_VAR: &str = "ONESIDED_TEST_LAUNCH_TIMEOUT";
const PES_VAR: &str = "ONESIDED_TEST_PES";
const VARIANTS_VAR: &str = "ONESIDED_TEST_VARIANTS";
const WAIT_TIMEOUT_VAR: &str = onesided::env::WAIT_TIMEOUT;

/// A configuration the cases run under: a label and environment variables for the PEs.
pub struct Variant {
    /// Shown in reports.
    pub label: &'static str,
    /// Set in the PEs' environment.
    pub env: &'static [(&'static str, &'static str)],
}

/// The default environment only.
pub const DEFAULT: &[Variant] = &[Variant { label: "default", env: &[] }];

/// Both transfer paths of the onesided core: through the shared-memory mapping of same-node
/// PEs (the default) and through library calls only (`ONESIDED_DIRECT=0`).
pub const DIRECT_AND_LIBRARY: &[Variant] =
    &[Variant { label: "direct", env: &[] }, Variant { label: "library", env: &[("ONESIDED_DIRECT", "0")] }];

/// The entry point of a multi-PE test binary.
pub fn main(suite: &str, cases: &[Case]) {
    main_with_variants(suite, cases, DEFAULT)
}

/// The entry point of a multi-PE test binary whose cases run under each of `variants`.
pub fn main_with_variants(suite: &str, cases: &[Case], variants: &[Variant]) {
    if launch::under_launcher() {
        run_as_pe(cases);
    } else {
        std::process::exit(run_as_parent(suite, cases, variants));
    }
}

/// The name filters among libtest's arguments (words) and the names to skip (`--skip NAME`
/// or `--skip=NAME`, as libtest takes them); other flags are ignored.
fn name_filters(args: &[String]) -> (Vec<&str>, Vec<&str>) {
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut words = args.iter().map(String::as_str);
    while let Some(word) = words.next() {
        if word == "--skip" {
            skips.extend(words.next());
        } else if let Some(name) = word.strip_prefix("--skip=") {
            skips.push(name);
        } else if !word.starts_with('-') {
            filters.push(word);
        }
    }
    (filters, skips)
}

fn run_as_parent(suite: &str, cases: &[Case], variants: &[Variant]) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (filters, skips) = name_filters(&args);
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f)))
        .filter(|c| !skips.iter().any(|s| c.name.contains(s)))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for case in &selected {
            println!("{}: test", case.name);
        }
        return 0;
    }
    let mut counts: Vec<usize> = selected.iter().flat_map(|c| c.pes.iter().copied()).collect();
    counts.sort_unstable();
    counts.dedup();
    if let Ok(only) = std::env::var(PES_VAR) {
        match only.split(',').map(|n| n.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>() {
            Ok(only) => counts.retain(|n| only.contains(n)),
            Err(_) => {
                println!("{suite}: {PES_VAR}={only:?} is not a list of PE counts such as 2,4");
                return 1;
            }
        }
    }
    let timeout = match std::env::var(LAUNCH_TIMEOUT_VAR) {
        Err(_) => Duration::from_secs(600),
        Ok(v) => match v.parse::<u64>() {
            Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
            _ => {
                println!("{suite}: {LAUNCH_TIMEOUT_VAR}={v:?} is not a positive number of seconds");
                return 1;
            }
        },
    };
    // A suite of one variant has nothing to choose from.
    let variants: Vec<&Variant> = match std::env::var(VARIANTS_VAR) {
        Ok(only) if variants.len() > 1 => {
            let labels: Vec<&str> = only.split(',').map(str::trim).collect();
            if let Some(unknown) = labels.iter().find(|l| !variants.iter().any(|v| v.label == **l)) {
                let known: Vec<&str> = variants.iter().map(|v| v.label).collect();
                println!(
                    "{suite}: {VARIANTS_VAR}={only:?} names {unknown:?}; this suite's variants are {known:?}"
                );
                return 1;
            }
            variants.iter().filter(|v| labels.contains(&v.label)).collect()
        }
        _ => variants.iter().collect(),
    };
    let names: Vec<&str> = selected.iter().map(|c| c.name).collect();
    let mut failed = Vec::new();
    for variant in &variants {
        let label =
            if variants.len() > 1 { format!("{suite} [{}]", variant.label) } else { suite.to_string() };
        for &pes in &counts {
            let n_cases = selected.iter().filter(|c| c.pes.contains(&pes)).count();
            println!("{label}: launching {n_cases} cases with {pes} PEs: {}", launch::PE_RUN);
            let started = Instant::now();
            match launch_once(pes, &names, variant.env, timeout) {
                Ok(Launch::Ran) => {
                    let seconds = started.elapsed().as_secs_f64();
                    println!("{label}: {pes} PEs ok ({seconds:.1} s)");
                }
                Ok(Launch::Skipped) => {
                    println!(
                        "{label}: {pes} PEs SKIPPED: the emulated nodes cannot be made here (see above)"
                    );
                }
                Err(why) => {
                    println!("{label}: {pes} PEs FAILED: {why}");
                    failed.push(format!("{pes} PEs ({})", variant.label));
                }
            }
        }
    }
    if failed.is_empty() {
        let n = selected.iter().filter(|c| c.pes.iter().any(|p| counts.contains(p))).count();
        println!("{suite}: all {n} cases passed with {counts:?} PEs");
        0
    } else {
        println!("{suite}: failures with {}", failed.join(", "));
        1
    }
}

/// How a launch that did not fail ended.
enum Launch {
    /// The cases ran.
    Ran,
    /// The launch asked for emulated nodes (`ONESIDED_NODES`) and this machine cannot make
    /// them: `scripts/pe-run` said why and exited with status 4.
    Skipped,
}

/// Whether a launch with `env` asks `scripts/pe-run` for more than one emulated node.
fn wants_nodes(env: &[(&str, &str)]) -> bool {
    let nodes = env
        .iter()
        .find(|(name, _)| *name == "ONESIDED_NODES")
        .map(|(_, value)| value.to_string())
        .or_else(|| std::env::var("ONESIDED_NODES").ok());
    nodes.and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n > 1)
}

/// Runs one launch, relaying its output line by line, within `timeout`.
/// A directory removed when dropped.
struct CacheDir(std::path::PathBuf);

impl CacheDir {
    fn new(pes: usize) -> CacheDir {
        static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let launch = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("onesided-test-cache-{}-{pes}-{launch}", std::process::id());
        CacheDir(std::env::temp_dir().join(name))
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn launch_once(
    pes: usize,
    names: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> Result<Launch, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the test binary: {e}"))?;
    // Every launch calibrates afresh (the exchanges' and the all-to-alls' Path::Auto), in a cache
    // directory of its own, removed when it ends: the tests measure, and leave nothing behind.
    let cache = CacheDir::new(pes);
    let mut child = launch::command(pes, exe)
        .env(FILTER_VAR, names.join(","))
        .env(onesided::env::CACHE_DIR, &cache.0)
        // The library's default deadline: it now also ends a job whose PEs block inside
        // OpenSHMEM or MPI (the watchdog), and with 30 s Sandia OpenSHMEM's oversubscribed
        // runs (4 PEs on 2 cores) once stalled past it in a case that passes.
        .env(WAIT_TIMEOUT_VAR, std::env::var(WAIT_TIMEOUT_VAR).unwrap_or_else(|_| "60".to_string()))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", launch::PE_RUN))?;
    let relay = |stream: Box<dyn std::io::Read + Send>, to_stderr: bool| {
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if to_stderr {
                    eprintln!("    {line}");
                } else {
                    println!("    {line}");
                }
                seen.push(line);
            }
            seen
        })
    };
    let out = relay(Box::new(child.stdout.take().expect("piped")), false);
    let err = relay(Box::new(child.stderr.take().expect("piped")), true);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                // SIGTERM lets the launcher take its PEs down with it.
                let _ = std::process::Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
                std::thread::sleep(Duration::from_secs(5));
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no result after {} s; raise {LAUNCH_TIMEOUT_VAR} if the machine is only slow",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for the launcher: {e}")),
        }
    };
    let out = out.join().unwrap_or_default();
    let _ = err.join();
    if status.code() == Some(4) && wants_nodes(env) {
        return Ok(Launch::Skipped);
    }
    if !status.success() {
        return Err(format!("the launcher exited with {status}"));
    }
    if !out.iter().any(|l| l.starts_with("all ")) {
        return Err("the PEs ended without reporting".to_string());
    }
    Ok(Launch::Ran)
}

fn run_as_pe(cases: &[Case]) {
    let names = std::env::var(FILTER_VAR).unwrap_or_default();
    let rt = match Runtime::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot initialise the runtime: {e}");
            std::process::exit(1);
        }
    };
    let (me, n) = (rt.my_pe(), rt.n_pes());
    // The agreement's own communicator: it cannot match an MPI call a failed case left behind.
    let verdicts = rt.world().duplicate();
    let mut ran = 0;
    let mut failed = false;
    for case in cases.iter().filter(|c| c.pes.contains(&n)) {
        if !names.is_empty() && !names.split(',').any(|name| name == case.name) {
            continue;
        }
        rt.barrier();
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| (case.run)(&rt)));
        let message = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(panic) => Some(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".to_string()),
            ),
        };
        if let Some(message) = &message {
            println!("PE {me}/{n}: case {} FAILED: {message}", case.name);
            let _ = std::io::stdout().flush();
        }
        if agree_on_failure(&rt, &verdicts, message.is_some()) {
            failed = true;
            break;
        }
        // Every PE has finished the case, its puts complete, before PE 0 reports it.
        rt.barrier();
        if me == 0 {
            println!(
                "case {} ... ok ({} PEs, {:.0} ms)",
                case.name,
                n,
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        ran += 1;
    }
    if failed {
        // Every PE knows: the job ends normally, with a failure status.
        drop(verdicts);
        drop(rt);
        std::process::exit(1);
    }
    if me == 0 {
        println!("all {ran} cases passed on {n} PEs");
    }
}

/// Whether the case failed on any PE, agreed by every PE. A PE on which it passed waits for
/// the others as long as they take. A PE on which it failed waits as long as the others may
/// still be waiting for it before their waits time out, plus a margin; if they have not come
/// by then, they are stuck, and it ends the job.
fn agree_on_failure(rt: &Runtime, verdicts: &SimpleCommunicator, failed_here: bool) -> bool {
    let patience = failed_here.then(|| rt.wait_timeout() + Duration::from_secs(10));
    let mine = i32::from(failed_here);
    let mut anywhere = 0i32;
    let started = Instant::now();
    mpi::request::scope(|scope| {
        let mut request =
            verdicts.immediate_all_reduce_into(scope, &mine, &mut anywhere, SystemOperation::max());
        let mut polls = 0u32;
        loop {
            match request.test() {
                Ok(_) => break,
                Err(pending) => request = pending,
            }
            if let Some(patience) = patience
                && started.elapsed() > patience
            {
                println!(
                    "PE {}/{}: the other PEs did not finish the case within {} s; ending the job",
                    rt.my_pe(),
                    rt.n_pes(),
                    patience.as_secs()
                );
                rt.abort(1);
            }
            polls = polls.saturating_add(1);
            if polls < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    anywhere != 0
}

#[cfg(test)]
mod tests {
    use super::name_filters;

    #[test]
    fn filters_and_skips_are_told_apart() {
        let args: Vec<String> =
            ["halo", "--skip", "every_shipped", "--nocapture", "--skip=model", "grids", "--skip"]
                .map(String::from)
                .to_vec();
        let (filters, skips) = name_filters(&args);
        assert_eq!(filters, ["halo", "grids"]);
        assert_eq!(skips, ["every_shipped", "model"]);
    }
}
