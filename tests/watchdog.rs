//! The watchdog under the real launcher with 2 PEs: a call that blocks on a peer past
//! `ONESIDED_WAIT_TIMEOUT` ends the whole job, with the status and a message that names the
//! PE, the call and the peers; a peer that is only late, within the deadline, is no fault.
//!
//! Started by cargo, the binary launches itself once per scenario (`WATCHDOG_SCENARIO`) with a
//! deadline of 2 s and checks what the job printed, how it ended and how long it took.

use std::process::Output;
use std::time::{Duration, Instant};

use onesided::{Collectives, ReduceOp, Runtime};
use onesided_suite::launch;

const SCENARIO_VAR: &str = "WATCHDOG_SCENARIO";
/// The deadline the jobs run with.
const DEADLINE: Duration = Duration::from_secs(2);
/// How long the late PE stays away from the library in the scenarios that must end.
const AWAY: Duration = Duration::from_secs(40);

fn main() {
    if launch::under_launcher() {
        as_pe();
        return;
    }
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if std::env::args().any(|a| a == "--list") {
        for (name, _) in SCENARIOS {
            println!("{name}: test");
        }
        return;
    }
    let mut failed = 0;
    for &(name, expect) in SCENARIOS {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let started = Instant::now();
        let exe = std::env::current_exe().expect("the test binary");
        let mut command = launch::command(2, exe);
        command.env(SCENARIO_VAR, name).env(onesided::env::WAIT_TIMEOUT, DEADLINE.as_secs().to_string());
        let outcome = launch::output_with_timeout(&mut command, Duration::from_secs(120))
            .map_err(|e| format!("the launch failed: {e}"))
            .and_then(|output| check(expect, &output, started.elapsed()));
        match outcome {
            Ok(()) => println!("test {name} ... ok ({:.1} s)", started.elapsed().as_secs_f64()),
            Err(message) => {
                println!("test {name} ... FAILED: {message}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
}

/// How a scenario's job must end.
#[derive(Clone, Copy)]
enum Expect {
    /// Ended by PE 0's watchdog in one of these calls, waiting for the other PEs or PE 1.
    Ended(&'static [&'static str]),
    /// Ended by PE 0's watchdog in one of these calls, made after a wait of PE 0's own ran
    /// out the deadline: within a short time, not a second deadline.
    EndedAfterTimeout(&'static [&'static str]),
    /// Finished normally.
    Completes,
}

/// The scenarios and how each must end.
const SCENARIOS: &[(&str, Expect)] = &[
    ("barrier_with_a_peer_away", Expect::Ended(&["shmem_barrier_all"])),
    ("mpi_collective_with_a_peer_away", Expect::Ended(&["MPI_Allreduce"])),
    // The atomic completes without PE 1 where the implementation needs no help from the
    // target (shared memory) and blocks where it does; the barrier after it blocks anyway.
    ("atomic_on_a_peer_that_never_comes", Expect::Ended(&["atomic_fetch_add", "shmem_barrier_all"])),
    ("a_barrier_after_a_wait_that_ran_out", Expect::EndedAfterTimeout(&["shmem_barrier_all"])),
    ("a_late_peer_is_no_fault", Expect::Completes),
    ("many_short_calls_are_no_fault", Expect::Completes),
];

fn check(expect: Expect, output: &Output, took: Duration) -> Result<(), String> {
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    match expect {
        Expect::Ended(calls) => ended_by_watchdog(output, &text, took, calls, false),
        Expect::EndedAfterTimeout(calls) => ended_by_watchdog(output, &text, took, calls, true),
        Expect::Completes => completes(output, &text),
    }
}

/// The watchdog's status, and its message on PE 0 naming one of `calls`, the peers, the time
/// and the setting, within the deadline plus the abort's grace and a launcher's margin (well
/// before the away PE would come back). A call with a whole deadline was reported at half of
/// it; one made `after_timeout` (after a wait of PE 0's own ran out the deadline) says so
/// instead of having a deadline of its own.
fn ended_by_watchdog(
    output: &Output,
    text: &str,
    took: Duration,
    calls: &[&str],
    after_timeout: bool,
) -> Result<(), String> {
    let limit = DEADLINE + onesided::watchdog::ABORT_GRACE + Duration::from_secs(10);
    if output.status.success() {
        return Err(format!("the job succeeded; output:\n{text}"));
    }
    if output.status.code() != Some(onesided::watchdog::EXIT_STATUS) {
        return Err(format!(
            "status {:?}, not {}; output:\n{text}",
            output.status,
            onesided::watchdog::EXIT_STATUS
        ));
    }
    let line = text
        .lines()
        .find(|l| {
            l.contains("onesided: PE 0 on")
                && l.contains("past the deadline")
                && calls.iter().any(|c| l.contains(c))
        })
        .ok_or_else(|| format!("no message from PE 0 naming {calls:?}; output:\n{text}"))?;
    if after_timeout {
        if !line.contains("which a wait of this PE had already run out") {
            return Err(format!(
                "the call after the timed-out wait had a deadline of its own; output:\n{text}"
            ));
        }
    } else if !text
        .lines()
        .any(|l| l.contains("onesided: PE 0 on") && l.contains("the job ends if it still has"))
    {
        return Err(format!("no report at half the deadline from PE 0; output:\n{text}"));
    }
    let peers = line.contains("waiting for the other PEs") || line.contains("waiting for PE 1");
    if !peers || !line.contains("ONESIDED_WAIT_TIMEOUT") || !line.contains("has blocked for") {
        return Err(format!("the message does not name the peers, the time and the setting: {line}"));
    }
    if took > limit {
        return Err(format!("the job took {took:?} to end, more than {limit:?}"));
    }
    Ok(())
}

fn completes(output: &Output, text: &str) -> Result<(), String> {
    if !output.status.success() || text.contains("past the deadline") {
        return Err(format!("status {:?}; output:\n{text}", output.status));
    }
    if !text.contains("PE 0: the late peer arrived") {
        return Err(format!("PE 0 did not finish; output:\n{text}"));
    }
    Ok(())
}

/// One PE of a scenario.
fn as_pe() {
    let rt = Runtime::init().expect("the runtime");
    let scenario = std::env::var(SCENARIO_VAR).unwrap_or_default();
    let me = rt.my_pe();
    rt.barrier();
    match scenario.as_str() {
        "barrier_with_a_peer_away" => {
            if me == 1 {
                std::thread::sleep(AWAY);
            }
            rt.barrier();
        }
        "mpi_collective_with_a_peer_away" => {
            if me == 1 {
                std::thread::sleep(AWAY);
            }
            let mut values = [me as f64];
            rt.all_reduce(ReduceOp::Sum, &mut values).expect("the reduction");
        }
        "atomic_on_a_peer_that_never_comes" => {
            // PE 1 is away; PE 0's atomics on it complete (through the mapping or by the
            // implementation's own progress) or block: either way PE 0 then blocks in the
            // barrier, which the watchdog ends.
            let word = onesided::AtomicArray::<u64>::collective_alloc(&rt, "word", 1).expect("the word");
            if me == 1 {
                std::thread::sleep(AWAY);
            } else {
                word.fetch_add(1, 0, 1).expect("the atomic");
            }
            rt.barrier();
        }
        "a_barrier_after_a_wait_that_ran_out" => {
            // PE 0 waits for a signal PE 1 never sends: the wait returns its error after the
            // deadline, and the barrier after it ends the job a moment later.
            let signal = onesided::SignalArray::collective_alloc(&rt, "never sent", 1).expect("the signal");
            if me == 1 {
                std::thread::sleep(AWAY);
            } else {
                let waited = signal.wait_ge(0, 1);
                assert!(waited.is_err(), "the wait for a signal never sent returned {waited:?}");
            }
            rt.barrier();
        }
        "a_late_peer_is_no_fault" => {
            if me == 1 {
                std::thread::sleep(DEADLINE / 2);
            }
            rt.barrier();
            if me == 0 {
                println!("PE 0: the late peer arrived");
            }
        }
        "many_short_calls_are_no_fault" => {
            // Twice the deadline of barriers, PE 1 a millisecond late to each: PE 0 is inside
            // some barrier at nearly every look of its watchdog, a new one each time.
            let end = Instant::now() + 2 * DEADLINE;
            let mut going = 1;
            while going > 0 {
                if me == 1 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                rt.barrier();
                going = rt.max_u64_one(u64::from(Instant::now() < end)).expect("the reduction");
            }
            if me == 0 {
                println!("PE 0: the late peer arrived");
            }
        }
        other => panic!("unknown scenario {other:?}"),
    }
    drop(rt);
}
