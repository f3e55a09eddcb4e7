//! Latency of the onesided core against MPI two-sided and against the C library called
//! directly, in the same run, between PE 0 and PE 1:
//!
//! - `pingpong/onesided/B`: put-with-signal, the partner answers in kind; one round trip per
//!   iteration. `pingpong/raw/B`: the same through the C library directly (put, fence,
//!   atomic set, `shmem_wait_until`). `pingpong/mpi/B`: `MPI_Send` / `MPI_Recv`.
//!   `pingpong/auto/B`: an [`Exchange`] on [`Path::Auto`] reserved for B bytes, one
//!   call sending and one receiving per leg: the path the link was measured fastest on for
//!   messages of that size, as an engine's exchange takes it.
//! - `put/onesided/B`: a safe put followed by quiet; `put/raw/B`: `shmem_putmem` +
//!   `shmem_quiet` through the raw bindings, the C library's own latency.
//! - `get/onesided/B`, `get/raw/B`: blocking get.
//! - `atomic/onesided/8`, `atomic/raw/8`: remote fetch-and-add.
//!
//! `cargo bench --bench core` launches 2 PEs through scripts/pe-run. With more
//! (`ONESIDED_BENCH_PES=4`), the ping-pongs run between every pair of PEs at once (0 and 1,
//! 2 and 3, ...), each pair on its own, and PE 0's time is reported; the other benchmarks stay
//! between PE 0 and PE 1 while the rest idle.

use std::cell::Cell;
use std::ffi::c_void;
use std::time::Instant;

use mpi::traits::{Communicator, Destination, Source};
use onesided::{AtomicArray, Exchange, Incoming, Outgoing, Path, Runtime, SignalArray, SymArray};
use onesided_suite::bench::{self, Bench, SIZES};

const LEADER: usize = 0;
const PARTNER: usize = 1;

fn main() {
    bench::main(2, run);
}

fn run(rt: &Runtime) -> onesided::Result<()> {
    let me = rt.my_pe();
    let max = *SIZES.last().expect("sizes");
    let data = SymArray::<u8>::collective_alloc(rt, "bench data", max)?;
    let signals = SignalArray::collective_alloc(rt, "bench signal", 1)?;
    let words = AtomicArray::<u64>::collective_alloc(rt, "bench atomics", 1)?;
    let source: Vec<u8> = (0..max).map(|i| (i * 7 + me) as u8).collect();
    let world = rt.world();
    // Signal values only grow, across all ping-pong benchmarks.
    let step = Cell::new(0u64);
    // SAFETY: reading a constant of the shim.
    let cmp_ge = unsafe { shmem_sys::shmem_sys_cmp_ge };

    // Ping-pong pairs: PE 2k leads, PE 2k + 1 answers; a last PE of an odd count idles.
    let pair = me ^ 1;
    let paired = pair < rt.n_pes();
    let leads = me.is_multiple_of(2);
    let partners: Vec<usize> = if paired { vec![pair] } else { Vec::new() };
    let inbox = SymArray::<u8>::collective_alloc(rt, "bench inbox", max)?;
    // An `Auto` exchange per size, reserved for it, as an engine sizes its exchanges.
    let mut exchanges = Vec::new();
    for &bytes in SIZES {
        let mut exchange: Exchange<'_, u8> =
            Exchange::builder(rt, "pingpong").path(Path::Auto).partners(&partners).collective_build()?;
        exchange.collective_reserve(bytes)?;
        exchanges.push(std::cell::RefCell::new(exchange));
    }
    let mut benches = Vec::new();
    for &bytes in SIZES {
        let (data, signals, source, step) = (&data, &signals, &source, &step);
        benches.push(Bench::new("pingpong", "onesided", bytes, move |iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let s = step.get() + 1;
                step.set(s);
                if paired && leads {
                    data.put_signal(pair, 0, &source[..bytes], signals, 0, s)?;
                    signals.wait_ge(0, s)?;
                } else if paired {
                    signals.wait_ge(0, s)?;
                    data.put_signal(pair, 0, &source[..bytes], signals, 0, s)?;
                }
            }
            Ok(start.elapsed())
        }));
        benches.push(Bench::new("pingpong", "raw", bytes, move |iters| {
            let start = Instant::now();
            if paired {
                let other = pair;
                for _ in 0..iters {
                    let s = step.get() + 1;
                    step.set(s);
                    // SAFETY: symmetric addresses in bounds; the partner exists. The C
                    // library's own put-with-signal of spec 1.4: put, fence, atomic set, and
                    // shmem_wait_until on the local signal (a shmem_test loop never returns
                    // with Open MPI's OSHMEM over TCP: its test does not progress).
                    unsafe {
                        let signal = signals.as_ptr();
                        if !leads {
                            shmem_sys::shmem_ulonglong_wait_until(signal, cmp_ge, s);
                        }
                        shmem_sys::shmem_putmem(
                            data.as_ptr().cast::<c_void>(),
                            source.as_ptr().cast::<c_void>(),
                            bytes,
                            other as i32,
                        );
                        shmem_sys::shmem_fence();
                        shmem_sys::shmem_ulonglong_atomic_set(signal, s, other as i32);
                        if leads {
                            shmem_sys::shmem_ulonglong_wait_until(signal, cmp_ge, s);
                        }
                    }
                }
            }
            Ok(start.elapsed())
        }));
        let exchange = &exchanges[SIZES.iter().position(|&b| b == bytes).expect("a size")];
        let inbox = &inbox;
        benches.push(Bench::new("pingpong", "auto", bytes, move |iters| {
            let start = Instant::now();
            if paired {
                let mut exchange = exchange.borrow_mut();
                let incoming = [Incoming { from: pair, buffer: 0, offset: 0, room: bytes }];
                let outgoing = [Outgoing::Copy { to: pair, data: &source[..bytes] }];
                for _ in 0..iters {
                    if leads {
                        exchange.call(&[inbox]).send(&outgoing).run()?;
                        exchange.call(&[inbox]).receive(&incoming).run()?;
                    } else {
                        exchange.call(&[inbox]).receive(&incoming).run()?;
                        exchange.call(&[inbox]).send(&outgoing).run()?;
                    }
                }
            }
            Ok(start.elapsed())
        }));
        let world = &world;
        let mut buffer = vec![0u8; bytes];
        benches.push(Bench::new("pingpong", "mpi", bytes, move |iters| {
            let start = Instant::now();
            if paired {
                let other = world.process_at_rank(pair as i32);
                for _ in 0..iters {
                    if leads {
                        other.send(&source[..bytes]);
                        other.receive_into(&mut buffer[..]);
                    } else {
                        other.receive_into(&mut buffer[..]);
                        other.send(&source[..bytes]);
                    }
                }
            }
            Ok(start.elapsed())
        }));
    }
    for &bytes in SIZES {
        let (data, source) = (&data, &source);
        benches.push(Bench::new("put", "onesided", bytes, move |iters| {
            leader_only(me, iters, || {
                data.put(PARTNER, 0, &source[..bytes])?;
                rt.quiet();
                Ok(())
            })
        }));
        benches.push(Bench::new("put", "raw", bytes, move |iters| {
            leader_only(me, iters, || {
                // SAFETY: data is symmetric and holds at least `bytes` bytes; PE 1 exists.
                unsafe {
                    shmem_sys::shmem_putmem(
                        data.as_ptr().cast::<c_void>(),
                        source.as_ptr().cast::<c_void>(),
                        bytes,
                        PARTNER as i32,
                    );
                    shmem_sys::shmem_quiet();
                }
                Ok(())
            })
        }));
        let mut sink = vec![0u8; bytes];
        benches.push(Bench::new("get", "onesided", bytes, move |iters| {
            leader_only(me, iters, || data.get(PARTNER, 0, &mut sink))
        }));
        let mut sink = vec![0u8; bytes];
        benches.push(Bench::new("get", "raw", bytes, move |iters| {
            leader_only(me, iters, || {
                // SAFETY: as for the raw put; sink holds `bytes` bytes.
                unsafe {
                    shmem_sys::shmem_getmem(
                        sink.as_mut_ptr().cast::<c_void>(),
                        data.as_ptr().cast::<c_void>(),
                        bytes,
                        PARTNER as i32,
                    )
                };
                Ok(())
            })
        }));
    }
    let words = &words;
    benches.push(Bench::new("atomic", "onesided", 8, move |iters| {
        leader_only(me, iters, || words.fetch_add(PARTNER, 0, 1).map(drop))
    }));
    benches.push(Bench::new("atomic", "raw", 8, move |iters| {
        leader_only(me, iters, || {
            // SAFETY: the word is symmetric and 8 bytes; PE 1 exists.
            unsafe { shmem_sys::shmem_ulonglong_atomic_fetch_add(words.as_ptr(), 1, PARTNER as i32) };
            Ok(())
        })
    }));
    bench::run(rt, benches)
}

/// Runs `op` `iters` times on the leader; the other PEs return at once.
fn leader_only(me: usize, iters: u64, mut op: impl FnMut() -> onesided::Result<()>) -> bench::BodyResult {
    let start = Instant::now();
    if me == LEADER {
        for _ in 0..iters {
            op()?;
        }
    }
    Ok(start.elapsed())
}
