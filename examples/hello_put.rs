//! Every PE puts a greeting into its right neighbour's symmetric inbox with a signal, waits
//! for the one from its left neighbour, and prints what it received.
//!
//! Run under the launcher: `scripts/pe-run -n 4 target/release/examples/hello_put`, or let
//! it launch itself: `cargo run --release --example hello_put -- --pes 4`.

use onesided::{Runtime, SignalArray, SymArray};
use onesided_suite::cli;

const LEN: usize = 8;

fn main() {
    let (_, rt) = cli::start("hello_put", parse_pes, |&pes| pes, |_| 1);
    match run(&rt) {
        Ok(true) => {}
        Ok(false) => {
            cli::say(&format!("hello_put: PE {} received corrupted data", rt.my_pe()));
            rt.abort(1);
        }
        Err(e) => {
            cli::say(&format!("hello_put: PE {}: {e}", rt.my_pe()));
            rt.abort(1);
        }
    }
}

fn parse_pes() -> Result<usize, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(4),
        [flag, n] if flag == "--pes" => cli::positive(flag, n).map(|n| n as usize),
        _ => Err("usage: hello_put [--pes N]".to_string()),
    }
}

/// Returns whether the received greeting is intact.
fn run(rt: &Runtime) -> onesided::Result<bool> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let inbox = SymArray::<u64>::collective_alloc(rt, "inbox", LEN)?;
    let delivered = SignalArray::collective_alloc(rt, "delivered", 1)?;
    // Each value says who sent it and where it belongs: sender * 100 + index.
    let greeting: Vec<u64> = (0..LEN as u64).map(|i| me as u64 * 100 + i).collect();
    let right = (me + 1) % n;
    inbox.put_signal(right, 0, &greeting, &delivered, 0, 1)?;
    delivered.wait_ge(0, 1)?;
    let received = inbox.to_vec_local();
    let left = (me + n - 1) % n;
    let intact = received.iter().enumerate().all(|(i, &v)| v == left as u64 * 100 + i as u64);
    // Print in PE order.
    for pe in 0..n {
        if pe == me {
            println!(
                "PE {me} of {n} received from PE {left}: {received:?} ({})",
                if intact { "intact" } else { "CORRUPTED" }
            );
        }
        rt.barrier();
    }
    Ok(intact)
}
