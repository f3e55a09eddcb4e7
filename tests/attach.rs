//! A program that starts MPI itself, as every MD code does, and attaches the runtime to it
//! (`Runtime::attach`): under the launcher with 2 and 3 PEs, the runtime works on the
//! program's MPI (a put around the ring, an exchange on the one-sided and the MPI paths, a
//! reduction, each value encoding the PE it came from), the program goes on using MPI after
//! dropping it, and finalises MPI itself with no error on stderr and status 0 (under Open
//! MPI, whose `shmem_finalize` would end MPI too, OpenSHMEM ends inside the program's
//! `MPI_Finalize`). `Runtime::init` in such a program says to attach; a program with too
//! little thread support, or none initialised, gets an error naming what to call.
//!
//! The test binary is the host program itself: started by `cargo test`, it launches itself
//! as PEs in each mode and checks what they printed.

use std::time::Duration;

use mpi::environment::Threading;
use mpi::traits::{Communicator, CommunicatorCollectives};
use onesided::{Collectives, Error, Exchange, Incoming, Outgoing, Path, Runtime, SymArray};
use onesided_suite::launch;

/// What a PE does in `mode`; returns the line it prints on success.
fn host(mode: &str) -> Result<String, Box<dyn std::error::Error>> {
    match mode {
        "before-mpi" => {
            return match Runtime::attach() {
                Err(e @ Error::MpiNotInitialized) => Ok(format!("refused: {e}")),
                other => Err(format!("attach before MPI gave {other:?}").into()),
            };
        }
        "funneled" => {
            let (_universe, _) = mpi::initialize_with_threading(Threading::Funneled).ok_or("MPI starts")?;
            return match Runtime::attach() {
                Err(e @ Error::HostThreadLevel { .. }) => Ok(format!("refused: {e}")),
                other => Err(format!("attach with MPI_THREAD_FUNNELED gave {other:?}").into()),
            };
        }
        _ => {}
    }
    let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple).ok_or("MPI starts")?;
    if threading != Threading::Multiple {
        return Err(format!("this MPI gives {threading:?}").into());
    }
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    match Runtime::init() {
        Err(e @ Error::MpiAlreadyInitialized) => {
            if !e.to_string().contains("Runtime::attach") {
                return Err(format!("init's message does not say to attach: {e}").into());
            }
        }
        other => return Err(format!("init after the program's MPI_Init gave {:?}", other.map(drop)).into()),
    }
    {
        let rt = Runtime::attach()?;
        if (rt.my_pe(), rt.n_pes()) != (rank, size) {
            return Err(format!("PE {} of {} on rank {rank} of {size}", rt.my_pe(), rt.n_pes()).into());
        }
        // A put around the ring, the value encoding its sender.
        let ring = SymArray::<u64>::collective_alloc(&rt, "attach ring", 4)?;
        let next = (rank + 1) % size;
        let sent: Vec<u64> = (0..4).map(|i| 1000 * rank as u64 + i).collect();
        ring.put(next, 0, &sent)?;
        rt.barrier();
        let mut got = [0u64; 4];
        ring.read_local(0, &mut got)?;
        let from = (rank + size - 1) % size;
        if got.iter().enumerate().any(|(i, &v)| v != 1000 * from as u64 + i as u64) {
            return Err(format!("PE {rank} received {got:?} from PE {from}").into());
        }
        // An exchange with both neighbours on each path.
        for path in [Path::OneSided, Path::Mpi] {
            let prev = (rank + size - 1) % size;
            let mut partners = vec![prev, next];
            partners.dedup();
            let mut exchange = Exchange::<u32>::builder(&rt, "attach exchange")
                .path(path)
                .partners(&partners)
                .collective_build()?;
            let buffer = SymArray::<u32>::collective_alloc(&rt, "attach exchange buffer", 16)?;
            let data: Vec<u32> = (0..3).map(|i| (rank * 100 + i) as u32).collect();
            exchange
                .call(&[&buffer])
                .send(&[Outgoing::Copy { to: next, data: &data }])
                .receive(&[Incoming { from: prev, buffer: 0, offset: 0, room: 16 }])
                .run()?;
            let mut back = [0u32; 3];
            buffer.read_local(0, &mut back)?;
            if back.iter().enumerate().any(|(i, &v)| v != (prev * 100 + i) as u32) {
                return Err(format!("{path:?}: PE {rank} received {back:?} from PE {prev}").into());
            }
        }
        let total = rt.all_sum(rank as u64 + 1);
        if total != (size * (size + 1) / 2) as u64 {
            return Err(format!("the runtime's sum is {total}").into());
        }
    }
    // The program's MPI after the runtime is gone, then its own finalisation.
    let mut sum = 0u64;
    world.all_reduce_into(&(rank as u64), &mut sum, mpi::collective::SystemOperation::sum());
    if sum != (size * (size - 1) / 2) as u64 {
        return Err(format!("the program's sum after the runtime is {sum}").into());
    }
    drop(universe);
    Ok(format!("attached and finalised: PE {rank} of {size}"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    if let (Some(flag), Some(mode)) = (args.next(), args.next())
        && flag == "--mode"
    {
        // A PE of the host program.
        match host(&mode) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("attach {mode}: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut failed = false;
    for (pes, mode, expect) in [
        (2, "attached", "attached and finalised"),
        (3, "attached", "attached and finalised"),
        (2, "funneled", "MPI_THREAD_MULTIPLE"),
        (2, "before-mpi", "needs MPI initialised by the program"),
    ] {
        let mut command = launch::command(pes, &exe);
        command.args(["--mode", mode]);
        let outcome = launch::output_with_timeout(&mut command, Duration::from_secs(120));
        let verdict = match outcome {
            Ok(output) => {
                let (stdout, stderr) =
                    (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
                let every = stdout.lines().filter(|l| l.contains(expect)).count() == pes;
                if output.status.success() && every && stderr.trim().is_empty() {
                    Ok(())
                } else {
                    Err(format!("status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status))
                }
            }
            Err(e) => Err(format!("cannot run: {e}")),
        };
        match verdict {
            Ok(()) => println!("attach: {mode} on {pes} PEs ok"),
            Err(e) => {
                eprintln!("attach: {mode} on {pes} PEs FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
