//! Criterion across several PEs: PE 0 leads, the others follow.
//!
//! Criterion picks iteration counts adaptively, so PEs running it independently would
//! diverge and deadlock in paired operations. Here only PE 0 runs criterion. Before each batch
//! it broadcasts which benchmark to run and how many iterations; every PE then runs that many
//! iterations of the benchmark's body, and PE 0 reports its own time. The followers loop until
//! PE 0 broadcasts the end.
//!
//! Ids are `GROUP/VARIANT/BYTES`, as criterion forms them from a group name and a
//! `BenchmarkId::new(variant, bytes)`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use onesided::Runtime;

use crate::launch;

/// The body of a benchmark: runs `iters` iterations on this PE and returns the time taken
/// (PE 0's is the one reported).
pub type Body<'a> = Box<dyn FnMut(u64) -> onesided::Result<Duration> + 'a>;

/// One benchmark every PE runs in step.
pub struct Bench<'a> {
    /// Criterion group, such as `pingpong`.
    pub group: &'static str,
    /// Variant, such as `onesided` or `mpi`.
    pub variant: &'static str,
    /// Message size in bytes (the id's last part and the throughput).
    pub bytes: usize,
    /// What every PE runs per batch.
    pub body: Body<'a>,
}

impl<'a> Bench<'a> {
    /// A benchmark from its id parts and body.
    pub fn new(
        group: &'static str,
        variant: &'static str,
        bytes: usize,
        body: impl FnMut(u64) -> onesided::Result<Duration> + 'a,
    ) -> Self {
        Bench {
            group,
            variant,
            bytes,
            body: Box::new(body),
        }
    }
}

/// Marks the end in the broadcast command.
const STOP: u64 = u64::MAX;

/// Launches the benchmark binary with `pes` PEs if it was started directly (by
/// `cargo bench`), then initialises the runtime.
pub fn start(pes: usize) -> Runtime {
    launch::ensure_launched(pes);
    Runtime::init().unwrap_or_else(|e| {
        eprintln!("benchmark: {e}");
        std::process::exit(1)
    })
}

/// The criterion configuration of the workspace's benchmarks: short enough for a 2-core
/// machine, with command-line overrides (`cargo bench -- --measurement-time 10`).
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .without_plots()
        .configure_from_args()
}

/// Runs `benches` with PE 0 leading criterion and the other PEs following.
///
/// # Collective
/// Every PE must call it with the same benchmarks in the same order.
pub fn run(rt: &Runtime, mut benches: Vec<Bench<'_>>) -> onesided::Result<()> {
    if rt.my_pe() == 0 {
        let mut criterion = criterion();
        let mut index = 0;
        while index < benches.len() {
            let group_name = benches[index].group;
            let mut group = criterion.benchmark_group(group_name);
            while index < benches.len() && benches[index].group == group_name {
                let bench = &mut benches[index];
                group.throughput(Throughput::Bytes(bench.bytes as u64));
                let id = BenchmarkId::new(bench.variant, bench.bytes);
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let mut command = [index as u64, iters];
                        let outcome = rt
                            .broadcast(0, &mut command)
                            .and_then(|()| (bench.body)(iters));
                        outcome.unwrap_or_else(|e| fail(rt, bench.group, bench.variant, e))
                    })
                });
                index += 1;
            }
            group.finish();
        }
        rt.broadcast(0, &mut [STOP, 0])?;
        criterion.final_summary();
    } else {
        loop {
            let mut command = [0u64; 2];
            rt.broadcast(0, &mut command)?;
            if command[0] == STOP {
                break;
            }
            let bench = &mut benches[command[0] as usize];
            if let Err(e) = (bench.body)(command[1]) {
                fail(rt, bench.group, bench.variant, e);
            }
        }
    }
    Ok(())
}

/// A benchmark body failed on this PE: its partners would wait for it forever, so the job
/// ends here.
fn fail(rt: &Runtime, group: &str, variant: &str, e: onesided::Error) -> ! {
    eprintln!(
        "benchmark {group}/{variant} failed on PE {}: {e}",
        rt.my_pe()
    );
    rt.abort(1)
}

/// The message sizes of the latency and bandwidth sweeps: 8 B to 4 MiB.
pub const SIZES: &[usize] = &[8, 64, 512, 4096, 65536, 524288, 4 << 20];
