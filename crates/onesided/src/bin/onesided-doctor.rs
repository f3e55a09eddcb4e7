//! Checks a launch the way the crates will use it, and prints what each node got.
//!
//! ```text
//! srun --mpi=pmix onesided-doctor            # inside a Slurm allocation
//! mpirun -n 8 --hostfile hosts onesided-doctor
//! onesided-doctor --pes 4                    # starts itself on this node
//! ```
//!
//! Start it exactly as the engine will be started (same launcher, options, environment and
//! nodes). Every start-up check of `Runtime::init` runs (a launch that starts each process
//! alone, PEs with different libraries or settings, address-space randomisation where Sandia
//! OpenSHMEM's CMA needs it off); a failure prints the message every PE got and ends with
//! status 1. Otherwise PE 0 prints the job in one line, then each node: its PEs, transport,
//! how its PEs reach each other's memory, cores, randomisation, and the symmetric heap; then
//! a put, a signal and a barrier between every pair of neighbouring PEs check that the
//! transport carries data, and the program ends with status 0.

use std::process::ExitCode;

use onesided::{Collectives, HeapStatus, Runtime, SignalArray, StartReport, SymArray, launch};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut pes = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--pes", Some(n)) if n.parse::<usize>().is_ok_and(|n| n > 0) => pes = n.parse().ok(),
            ("-h" | "--help", _) => {
                println!("usage: onesided-doctor [--pes N]   (under a launcher: srun, mpirun, oshrun)");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("onesided-doctor: unknown argument {arg:?}; usage: onesided-doctor [--pes N]");
                return ExitCode::from(2);
            }
        }
    }
    if !launch::under_launcher() {
        match pes {
            Some(n) => launch::ensure_launched(n),
            None => eprintln!(
                "onesided-doctor: not under a launcher: checking this process alone (start it \
                 with srun, mpirun or oshrun as the engine will be, or give --pes N)"
            ),
        }
    }
    let rt = match Runtime::init() {
        Ok(rt) => rt,
        Err(e) => {
            launch::say(&format!("onesided-doctor: start-up failed: {e}"));
            return ExitCode::from(1);
        }
    };
    match check(&rt) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            launch::say(&format!("onesided-doctor: PE {}: {e}", rt.my_pe()));
            // Every check below is collective and fails on every PE alike, except a wait
            // that timed out; end the job so that none is left waiting.
            if e.scope() == onesided::ErrorScope::ThisPe {
                rt.abort(1);
            }
            ExitCode::from(1)
        }
    }
}

/// The report, then a round of traffic: each PE puts its number with a signal into the next
/// PE and waits for the previous one's.
fn check(rt: &Runtime) -> onesided::Result<()> {
    let report = StartReport::collective_gather(rt)?;
    let heap = HeapStatus::now();
    if rt.my_pe() == 0 {
        print!("{report}");
        println!(
            "symmetric heap: {} MiB ({}: {}), {} KiB in use after start-up",
            heap.capacity.map_or("unreadable".to_string(), |c| (c >> 20).to_string()),
            heap.variable,
            heap.setting,
            heap.in_use.div_ceil(1024)
        );
    }
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let values = SymArray::<u64>::collective_alloc(rt, "doctor values", 1)?;
    let signals = SignalArray::collective_alloc(rt, "doctor signals", 1)?;
    let next = (me + 1) % n;
    values.put_signal(next, 0, &[1000 + me as u64], &signals, 0, 1)?;
    signals.wait_ge(0, 1)?;
    let previous = (me + n - 1) % n;
    let got = values.get_value(me, 0)?;
    let expected = 1000 + previous as u64;
    rt.barrier();
    let mut wrong = [u64::from(got != expected)];
    rt.max_u64(&mut wrong)?;
    if rt.my_pe() == 0 {
        if wrong[0] == 0 {
            println!("traffic: every PE's put and signal reached the next PE ({n} PEs): ok");
        } else {
            println!("traffic: a put arrived wrong (PE {me} got {got}, expected {expected}): FAILED");
        }
    }
    if wrong[0] != 0 {
        return Err(onesided::Error::CollectiveArgument("a put arrived with the wrong value".to_string()));
    }
    Ok(())
}
