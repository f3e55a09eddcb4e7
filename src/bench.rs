//! Criterion across several PEs: PE 0 leads, the others follow.
//!
//! Criterion picks iteration counts adaptively, so PEs running it independently would
//! diverge and deadlock in paired operations. Here only PE 0 runs criterion. Before each batch
//! it tells every other PE which benchmark to run and how many iterations; every PE then runs
//! that many iterations of the benchmark's body, and PE 0 reports its own time. The followers
//! loop until PE 0 tells them to stop. The word goes with the library's own put-with-signal
//! and waits (`Commands`), which sleep where PEs share cores: a follower waiting in a
//! library broadcast would spin on a core that a PE in the benchmark needs.
//!
//! `ONESIDED_BENCH_PES` launches more PEs than a benchmark's minimum: with 4 on this 2-core
//! machine the benchmarks run oversubscribed (`scripts/bench-oversubscribed`), and the
//! pairwise ones run in every pair of PEs at once (each bench file says which).
//!
//! Ids are `GROUP/VARIANT/BYTES`, as criterion forms them from a group name and a
//! `BenchmarkId::new(variant, bytes)`, with the one-sided and MPI variants of a group in the
//! same run.
//!
//! On a virtual machine whose host moves vCPUs about, the cost of a cross-core cache transfer
//! changes by up to three times between two benchmarks, so a ratio of two criterion medians
//! is mostly noise. After criterion, each variant and its group's reference therefore run in
//! alternating batches of equal iteration counts (ABBA order), and the median of the
//! per-round ratios is recorded beside criterion's results ([`PairedRatio`], by default in
//! `target/criterion/paired-ratios.json`), which the report prefers. Before its benchmarks
//! each launch also measures the machine on PE 0 and PE 1 ([`LaunchProbe`]: a signal round
//! trip, a local copy, the pull of data the other PE has just written and the overwrite of
//! data it has just read, in `launch-probes.json` beside them), which the report lists per
//! launch, so that a run's state can be read beside its figures. `cargo bench -- --test` runs
//! each benchmark once, measures nothing and keeps the last real run's records.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use onesided::{Runtime, SignalArray, SymArray};

use crate::launch;
use crate::records::{LaunchProbe, PairedRatio, record_paired, record_probe};

/// What a benchmark's body returns: the time its iterations took, or why they failed (any
/// error: onesided's, or that of a crate built on it).
pub type BodyResult = Result<Duration, Box<dyn std::error::Error>>;

/// The body of a benchmark: runs `iters` iterations on this PE and returns the time taken
/// (PE 0's is the one reported).
pub type Body<'a> = Box<dyn FnMut(u64) -> BodyResult + 'a>;

/// One benchmark every PE runs in step.
pub struct Bench<'a> {
    /// Criterion group, such as `pingpong`.
    pub group: &'static str,
    /// Variant, such as `onesided` or `mpi`.
    pub variant: &'static str,
    /// The id's last part: the message size in bytes, or another size (atoms).
    pub bytes: usize,
    /// Whether `bytes` is a byte count, reported as throughput.
    pub throughput: bool,
    /// What every PE runs per batch.
    pub body: Body<'a>,
}

impl<'a> Bench<'a> {
    /// A benchmark from its id parts and body.
    pub fn new(
        group: &'static str,
        variant: &'static str,
        bytes: usize,
        body: impl FnMut(u64) -> BodyResult + 'a,
    ) -> Self {
        Bench { group, variant, bytes, throughput: true, body: Box::new(body) }
    }

    /// A benchmark whose size is not a byte count (atoms, say): no throughput is reported.
    pub fn sized(
        group: &'static str,
        variant: &'static str,
        size: usize,
        body: impl FnMut(u64) -> BodyResult + 'a,
    ) -> Self {
        Bench { group, variant, bytes: size, throughput: false, body: Box::new(body) }
    }
}

/// Marks the end in the leader's command.
const STOP: u64 = u64::MAX;

/// How long a follower waits for the leader's next command: criterion analyses a benchmark
/// between two of them, for seconds on a slow machine.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(3600);

/// The variable that launches a benchmark with more PEs than its minimum.
pub const BENCH_PES: &str = "ONESIDED_BENCH_PES";

/// The leader's commands to the followers (which benchmark, how many iterations): a
/// put-with-signal into each follower's slot, and an acknowledgement back once the follower
/// has read it, which the leader awaits before it overwrites the slot with the next command.
/// Every wait is the library's, so it sleeps between polls where PEs share cores.
struct Commands<'rt> {
    slot: SymArray<'rt, u64>,
    posted: SignalArray<'rt>,
    /// On the leader, one per PE: the last command that PE has read.
    read: SignalArray<'rt>,
    count: u64,
}

impl<'rt> Commands<'rt> {
    /// # Collective
    /// Every PE creates it.
    fn collective_new(rt: &'rt Runtime) -> onesided::Result<Self> {
        Ok(Commands {
            slot: SymArray::collective_alloc(rt, "bench command", 2)?,
            posted: SignalArray::collective_alloc(rt, "bench command posted", 1)?,
            read: SignalArray::collective_alloc(rt, "bench command read", rt.n_pes())?,
            count: 0,
        })
    }

    /// On the leader: posts `command` to every follower once each has read the last one.
    fn post(&mut self, rt: &Runtime, command: [u64; 2]) -> onesided::Result<()> {
        for follower in 1..rt.n_pes() {
            self.read.wait_ge(follower, self.count)?;
        }
        self.count += 1;
        for follower in 1..rt.n_pes() {
            self.slot.put_signal(follower, 0, &command, &self.posted, 0, self.count)?;
        }
        Ok(())
    }

    /// On a follower: the leader's next command.
    fn next(&mut self, rt: &Runtime) -> onesided::Result<[u64; 2]> {
        self.count += 1;
        self.posted.wait_ge_for(0, self.count, COMMAND_TIMEOUT)?;
        let mut command = [0u64; 2];
        self.slot.read_local(0, &mut command)?;
        self.read.set(0, rt.my_pe(), self.count)?;
        Ok(command)
    }
}

/// Launches the benchmark binary with `pes` PEs if it was started directly (by
/// `cargo bench`), then initialises the runtime.
pub fn start(pes: usize) -> Runtime {
    launch::ensure_launched(launched_pes(pes));
    Runtime::init().unwrap_or_else(|e| {
        eprintln!("benchmark: {e}");
        std::process::exit(1)
    })
}

/// The `main` of a benchmark binary: launches `pes` PEs when started by `cargo bench`,
/// refuses a job of fewer PEs, gives rayon one thread per PE (the PEs already use the
/// machine's cores), then runs `run`; an error on any PE ends the job.
pub fn main<E: std::fmt::Display>(pes: usize, run: impl FnOnce(&Runtime) -> Result<(), E>) {
    let rt = start(pes);
    if rt.n_pes() < pes {
        eprintln!("the benchmarks need at least {pes} PEs, the job has {}", rt.n_pes());
        std::process::exit(2);
    }
    match onesided::StartReport::collective_gather(&rt) {
        Ok(report) if rt.my_pe() == 0 => eprintln!("benchmark: {}", report.summary),
        Ok(_) => {}
        Err(e) => eprintln!("PE {}: no start-up report: {e}", rt.my_pe()),
    }
    if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(1).build_global() {
        eprintln!("cannot size the thread pool: {e}");
    }
    if let Err(e) = run(&rt) {
        eprintln!("PE {}: {e}", rt.my_pe());
        rt.abort(1);
    }
}

/// The PEs to launch for a benchmark that needs `minimum`: [`BENCH_PES`] if it names more.
fn launched_pes(minimum: usize) -> usize {
    match std::env::var(BENCH_PES) {
        Err(_) => minimum,
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(pes) if pes >= minimum => pes,
            _ => {
                eprintln!("benchmark: {BENCH_PES}={value:?} must be a number of PEs, at least {minimum}");
                std::process::exit(2)
            }
        },
    }
}

/// The systems of the MD benchmarks: the 648-atom SPC water box of `data/` replicated to
/// 20 736 and 97 200 atoms.
pub fn water_systems() -> md_demo::Result<Vec<md_demo::Structure>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro");
    let water = md_demo::Structure::read_gro(std::path::Path::new(path))?;
    [[2, 4, 4], [5, 5, 6]].into_iter().map(|copies| water.replicate(copies)).collect()
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
    let mut commands = Commands::collective_new(rt)?;
    let probe = probe_launch(rt)?;
    if rt.my_pe() == 0 {
        let commands = &mut commands;
        let mut criterion = criterion();
        let mut ran = vec![false; benches.len()];
        let mut index = 0;
        while index < benches.len() {
            let group_name = benches[index].group;
            let mut group = criterion.benchmark_group(group_name);
            while index < benches.len() && benches[index].group == group_name {
                let bench = &mut benches[index];
                if bench.throughput {
                    group.throughput(Throughput::Bytes(bench.bytes as u64));
                }
                let id = BenchmarkId::new(bench.variant, bench.bytes);
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        ran[index] = true;
                        lead_batch(rt, commands, bench, index, iters)
                    })
                });
                index += 1;
            }
            group.finish();
        }
        // `cargo bench -- --test` runs each benchmark once to see that it works: nothing is
        // measured, and the recorded ratios of the last real run are kept.
        let testing = std::env::args().any(|a| a == "--test");
        let paired = if testing { Vec::new() } else { paired_ratios(rt, commands, &mut benches, &ran) };
        commands.post(rt, [STOP, 0])?;
        criterion.final_summary();
        if !paired.is_empty() {
            record_paired(&paired);
        }
        if let Some(probe) = probe
            && !testing
        {
            // Each group once, in the order of its first benchmark.
            let mut groups: Vec<&str> = Vec::new();
            for bench in &benches {
                if !groups.contains(&bench.group) {
                    groups.push(bench.group);
                }
            }
            record_probe(&LaunchProbe { groups: groups.join(" "), ..probe });
        }
    } else {
        loop {
            let command = commands.next(rt)?;
            if command[0] == STOP {
                break;
            }
            let bench = &mut benches[command[0] as usize];
            if let Err(e) = (bench.body)(command[1]) {
                fail(rt, bench.group, bench.variant, &*e);
            }
        }
    }
    Ok(())
}

/// Bytes of the launch probe's pull of freshly written data.
const PROBE_PULL: usize = 256 << 10;

/// Blocks of the launch probe's round trips, and round trips per block.
const PROBE_BLOCKS: usize = 21;
const PROBE_TRIPS: u64 = 200;

/// Measures the launch on PE 0 and PE 1 ([`LaunchProbe`], without its groups); `None` on
/// the other PEs, and with one PE.
///
/// # Collective
/// Every PE calls it.
fn probe_launch(rt: &Runtime) -> onesided::Result<Option<LaunchProbe>> {
    // The allocations synchronise after zeroing, so the signals start at 0 on every PE; every
    // PE allocates (and frees, at the end) both arrays, though only PE 0 and PE 1 use them.
    let signals = SignalArray::collective_alloc(rt, "bench launch probe", 1)?;
    let fresh = SymArray::<u8>::collective_alloc(rt, "bench launch probe: fresh data", PROBE_PULL)?;
    let me = rt.my_pe();
    if rt.n_pes() < 2 || me > 1 {
        rt.barrier();
        return Ok(None);
    }
    let mut blocks = Vec::with_capacity(PROBE_BLOCKS);
    let mut sent = 0;
    for _ in 0..PROBE_BLOCKS {
        let start = Instant::now();
        for _ in 0..PROBE_TRIPS {
            sent += 1;
            if me == 0 {
                signals.set(1, 0, sent)?;
                signals.wait_ge(0, sent)?;
            } else {
                signals.wait_ge(0, sent)?;
                signals.set(0, 0, sent)?;
            }
        }
        blocks.push(start.elapsed().as_secs_f64() * 1e9 / PROBE_TRIPS as f64);
    }
    // PE 1 writes the buffer and signals; PE 0 gets it and answers, for every round.
    let mut pulled = vec![0u8; PROBE_PULL];
    let mut pulls = Vec::with_capacity(PROBE_BLOCKS);
    for round in 0..PROBE_BLOCKS {
        sent += 1;
        if me == 1 {
            fresh.fill_local(round as u8);
            signals.set(0, 0, sent)?;
            signals.wait_ge(0, sent + 1)?;
        } else {
            signals.wait_ge(0, sent)?;
            let start = Instant::now();
            fresh.get(1, 0, &mut pulled)?;
            pulls.push(start.elapsed().as_secs_f64() * 1e9);
            signals.set(1, 0, sent + 1)?;
        }
        sent += 1;
    }
    // PE 1 reads PE 0's buffer and signals; PE 0 overwrites it and answers, for every round.
    let mut overwrites = Vec::with_capacity(PROBE_BLOCKS);
    for round in 0..PROBE_BLOCKS {
        sent += 1;
        if me == 1 {
            fresh.get(0, 0, &mut pulled)?;
            std::hint::black_box(&pulled);
            signals.set(0, 0, sent)?;
            signals.wait_ge(0, sent + 1)?;
        } else {
            signals.wait_ge(0, sent)?;
            // A copy into the buffer, as move_f stages its forces.
            let data = vec![round as u8; PROBE_PULL];
            let start = Instant::now();
            fresh.write_local(0, &data)?;
            overwrites.push(start.elapsed().as_secs_f64() * 1e9);
            signals.set(1, 0, sent + 1)?;
        }
        sent += 1;
    }
    rt.barrier();
    if me != 0 {
        return Ok(None);
    }
    let source = vec![1u8; 1 << 20];
    let mut target = vec![0u8; 1 << 20];
    let mut copies = Vec::with_capacity(PROBE_BLOCKS);
    for i in 0..PROBE_BLOCKS {
        let start = Instant::now();
        target.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut target)[i] = 2;
        copies.push(start.elapsed().as_secs_f64() * 1e9);
    }
    let median = crate::yardstick::median;
    let probe = LaunchProbe {
        groups: String::new(),
        round_trip_ns: median(blocks),
        copy_ns: median(copies),
        pull_ns: median(pulls),
        overwrite_ns: median(overwrites),
    };
    eprintln!(
        "benchmark: launch probe: signal round trip between PE 0 and PE 1 {:.0} ns, local copy of 1 MiB {:.1} us, \
         get of 256 KiB PE 1 just wrote {:.1} us, overwrite of 256 KiB PE 1 just read {:.1} us",
        probe.round_trip_ns,
        probe.copy_ns / 1e3,
        probe.pull_ns / 1e3,
        probe.overwrite_ns / 1e3
    );
    Ok(Some(probe))
}

/// On the leader: tells the followers to run `iters` iterations of benchmark `index`, runs
/// them too, and returns the leader's time.
fn lead_batch(
    rt: &Runtime,
    commands: &mut Commands<'_>,
    bench: &mut Bench<'_>,
    index: usize,
    iters: u64,
) -> Duration {
    if let Err(e) = commands.post(rt, [index as u64, iters]) {
        fail(rt, bench.group, bench.variant, &e)
    }
    (bench.body)(iters).unwrap_or_else(|e| fail(rt, bench.group, bench.variant, &*e))
}

/// Rounds of the paired comparison.
const PAIRED_ROUNDS: usize = 15;
/// Target duration of one batch of the paired comparison.
const PAIRED_BATCH: Duration = Duration::from_millis(3);

/// Criterion measures one benchmark after another, and on a virtual machine whose cores the
/// host moves about, the speed of a cache-line transfer can change by a factor of three
/// between two benchmarks. A ratio of two such medians is then mostly noise. Here each
/// variant and its reference run in alternating batches of equal iteration counts (ABBA
/// order) and the ratio is taken per round, then its median: drifts cancel.
fn paired_ratios(
    rt: &Runtime,
    commands: &mut Commands<'_>,
    benches: &mut [Bench<'_>],
    ran: &[bool],
) -> Vec<PairedRatio> {
    let mut out = Vec::new();
    for i in 0..benches.len() {
        let (group, variant, bytes) = (benches[i].group, benches[i].variant, benches[i].bytes);
        let variants: Vec<&str> = benches.iter().filter(|b| b.group == group).map(|b| b.variant).collect();
        let Some(reference) = crate::report::reference_of(variant, &variants) else {
            continue;
        };
        let partner =
            benches.iter().position(|b| b.group == group && b.variant == reference && b.bytes == bytes);
        let Some(j) = partner.filter(|&j| j != i && ran[i] && ran[j]) else {
            continue;
        };
        // Calibrate on the slower of the two, so that a batch lasts about PAIRED_BATCH.
        let first = lead_batch(rt, commands, &mut benches[i], i, 20);
        let probe = first.max(lead_batch(rt, commands, &mut benches[j], j, 20));
        let per_iter = probe.as_secs_f64() / 20.0;
        let iters = ((PAIRED_BATCH.as_secs_f64() / per_iter.max(1e-9)) as u64).clamp(1, 1_000_000);
        let mut ratios = Vec::with_capacity(PAIRED_ROUNDS);
        for round in 0..PAIRED_ROUNDS {
            let (variant_time, reference_time) = if round % 2 == 0 {
                let a = lead_batch(rt, commands, &mut benches[i], i, iters);
                (a, lead_batch(rt, commands, &mut benches[j], j, iters))
            } else {
                let b = lead_batch(rt, commands, &mut benches[j], j, iters);
                (lead_batch(rt, commands, &mut benches[i], i, iters), b)
            };
            ratios.push(variant_time.as_secs_f64() / reference_time.as_secs_f64().max(1e-12));
        }
        let median = crate::yardstick::median(ratios);
        println!(
            "paired {group}/{variant}/{bytes}: {median:.3}x {reference} (median of {PAIRED_ROUNDS} interleaved rounds)"
        );
        out.push(PairedRatio {
            group: group.to_string(),
            variant: variant.to_string(),
            reference: reference.to_string(),
            bytes,
            median,
        });
    }
    out
}

/// A benchmark body failed on this PE: its partners would wait for it forever, so the job
/// ends here.
fn fail(rt: &Runtime, group: &str, variant: &str, e: &dyn std::error::Error) -> ! {
    eprintln!("benchmark {group}/{variant} failed on PE {}: {e}", rt.my_pe());
    rt.abort(1)
}

/// The message sizes of the latency and bandwidth sweeps: 8 B to 4 MiB.
pub const SIZES: &[usize] = &[8, 64, 512, 4096, 65536, 524288, 4 << 20];
