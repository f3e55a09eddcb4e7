//! Send-receive and all-to-all, one-sided against MPI in the same run, between PE 0 and PE 1
//! (and every other pair, with more PEs):
//!
//! - `sendrecv/VARIANT/B`: both PEs send B bytes to each other and receive B bytes, per
//!   iteration; `onesided-put` (offset swap), `onesided-get`, `buffered` (the 2013 baseline)
//!   and `mpi` (`MPI_Sendrecv`) carry one message each way; `onesided-2way` and `mpi-2way`
//!   (`Isend`/`Irecv`/`Waitall`) carry two each way at once, forward and backward; `auto`
//!   takes the path the link was measured fastest on for messages of B bytes (an exchange
//!   per size, reserved for it: [`Path::Auto`], [`Exchange::collective_reserve`]).
//! - `alltoall/VARIANT/B`: B bytes per pair of PEs; `ordered-onesided`, `ordered-mpi`,
//!   `mpi` (`MPI_Alltoall`), `shmem` (`shmem_alltoall64`) and `auto` (the one of them
//!   measured fastest at creation, [`Path::Auto`]).
//! - `memcpy/local/B`: a plain copy of B bytes on PE 0, the bandwidth the others are measured
//!   against.
//!
//! `cargo bench --bench sendrecv` launches 2 PEs through scripts/pe-run. With more
//! (`ONESIDED_BENCH_PES=4`), every pair of PEs (0 and 1, 2 and 3, ...) sends and receives at
//! once and the all-to-all spans them all; PE 0's time is reported.

use std::hint::black_box;
use std::time::Instant;

use onesided::{
    Alltoall, AlltoallAlgorithm, Exchange, Incoming, Outgoing, Path, PeGroup, Runtime, SymArray, Transport,
};
use onesided_suite::bench::{self, Bench, SIZES};

/// All-to-all sizes per pair of PEs: 8 B to 256 KiB.
const ALLTOALL_SIZES: &[usize] = &[8, 64, 512, 4096, 32768, 262144];

fn main() {
    bench::main(2, run);
}

/// One cache line of words.
#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
struct Line([u64; 8]);

/// `words` words, 64-byte aligned, word `i` being `value(i)`.
fn aligned(words: usize, value: impl Fn(usize) -> u64) -> Vec<Line> {
    (0..words.div_ceil(8)).map(|l| Line(std::array::from_fn(|j| value(l * 8 + j)))).collect()
}

fn run(rt: &Runtime) -> onesided::Result<()> {
    let me = rt.my_pe();
    // Pairs of PEs (0 and 1, 2 and 3, ...) exchange at once; a last PE of an odd count idles.
    let partner = Some(me ^ 1).filter(|&p| p < rt.n_pes());
    let max_words = SIZES.iter().max().expect("sizes") / 8;
    let target = SymArray::<u64>::collective_alloc(rt, "sendrecv target", 2 * max_words)?;
    // Sources aligned to 64 bytes, as the symmetric targets are: glibc's memcpy is much slower
    // between buffers misaligned with each other, which would measure the allocator.
    let forward_lines = aligned(max_words, |i| (me as u64) << 32 | i as u64);
    let backward_lines = aligned(max_words, |i| !((me as u64) << 32 | i as u64));
    let forward: &[u64] = bytemuck::cast_slice(&forward_lines);
    let backward: &[u64] = bytemuck::cast_slice(&backward_lines);
    let source = SymArray::<u8>::collective_alloc(rt, "memcpy source", max_words * 8)?;
    let destination = SymArray::<u8>::collective_alloc(rt, "memcpy destination", max_words * 8)?;

    let mut exchanges = Vec::new();
    for (variant, path, two_way) in [
        ("onesided-put", Transport::Put, false),
        ("onesided-get", Transport::Get, false),
        ("onesided-2way", Transport::Put, true),
        ("buffered", Transport::Buffered, false),
        ("mpi", Transport::Mpi, false),
        ("mpi-2way", Transport::Mpi, true),
        ("mpi-rma", Transport::MpiRma, false),
    ] {
        let mut exchange: Exchange<'_, u64> =
            Exchange::builder(rt, variant).transport(path).collective_build()?;
        exchange.collective_reserve(max_words)?;
        exchanges.push((variant, two_way, None, exchange));
    }
    // `auto` as a user sizes it: an exchange per message size, which takes the links measured
    // fastest for its messages.
    for &bytes in SIZES {
        let mut exchange: Exchange<'_, u64> =
            Exchange::builder(rt, "auto").path(Path::Auto).collective_build()?;
        exchange.collective_reserve(bytes / 8)?;
        exchanges.push(("auto", false, Some(bytes), exchange));
    }
    let world = PeGroup::collective_world(rt)?;
    let mut alltoalls = Vec::new();
    for (variant, algorithm) in [
        ("ordered-onesided", Some(AlltoallAlgorithm::Ordered)),
        ("ordered-mpi", Some(AlltoallAlgorithm::OrderedMpi)),
        ("mpi", Some(AlltoallAlgorithm::Mpi)),
        ("shmem", Some(AlltoallAlgorithm::Shmem)),
        ("auto", None),
    ] {
        for &bytes in ALLTOALL_SIZES {
            let builder = Alltoall::<u64>::builder(variant, bytes / 8).path(Path::Auto);
            let builder = match algorithm {
                Some(algorithm) => builder.algorithm(algorithm),
                None => builder,
            };
            let alltoall = builder.collective_build(&world)?;
            alltoalls.push((variant, bytes, alltoall));
        }
    }

    let mut benches = Vec::new();
    let target = &target;
    for (variant, two_way, size, exchange) in &mut exchanges {
        let two_way = *two_way;
        // One Exchange serves every size of its variant (or its one size); the bodies take
        // turns with it.
        let exchange = std::rc::Rc::new(std::cell::RefCell::new(exchange));
        for &bytes in SIZES.iter().filter(|&&b| size.is_none_or(|s| s == b)) {
            let words = bytes / 8;
            let exchange = exchange.clone();
            benches.push(Bench::new("sendrecv", variant, bytes, move |iters| {
                let start = Instant::now();
                let Some(other) = partner else {
                    return Ok(start.elapsed());
                };
                let mut exchange = exchange.borrow_mut();
                let mut received = 0;
                for _ in 0..iters {
                    let counts = if two_way {
                        exchange
                            .call(&[target])
                            .send(&[
                                Outgoing::Copy { to: other, data: &forward[..words] },
                                Outgoing::Copy { to: other, data: &backward[..words] },
                            ])
                            .receive(&[
                                Incoming { from: other, buffer: 0, offset: 0, room: words },
                                Incoming { from: other, buffer: 0, offset: max_words, room: words },
                            ])
                            .run()?
                    } else {
                        exchange
                            .call(&[target])
                            .send(&[Outgoing::Copy { to: other, data: &forward[..words] }])
                            .receive(&[Incoming { from: other, buffer: 0, offset: 0, room: max_words }])
                            .run()?
                    };
                    received = counts[0];
                }
                debug_assert_eq!(received, words);
                Ok(start.elapsed())
            }));
        }
    }
    for (variant, bytes, alltoall) in &mut alltoalls {
        benches.push(Bench::new("alltoall", variant, *bytes, move |iters| {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(alltoall.call().run()?);
            }
            Ok(start.elapsed())
        }));
    }
    for &bytes in SIZES {
        let (source, destination) = (&source, &destination);
        benches.push(Bench::new("memcpy", "local", bytes, move |iters| {
            let start = Instant::now();
            if me == 0 {
                for _ in 0..iters {
                    // SAFETY: both 64-byte aligned blocks hold at least `bytes` bytes and are
                    // used by nothing else.
                    unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), destination.as_ptr(), bytes) };
                    black_box(destination.as_ptr());
                }
            }
            Ok(start.elapsed())
        }));
    }
    bench::run(rt, benches)
}
