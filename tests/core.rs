//! The onesided core under the real launcher with 2, 3 and 4 PEs: runtime, symmetric heap,
//! put/get, non-blocking transfers, direct access, atomics, signals, call counters and
//! collectives. Values encode the sender PE and the element index, so a misplaced element is
//! caught.

use mpi::traits::{Communicator, CommunicatorCollectives};
use std::time::Duration;

use onesided::{
    AtomicArray, CallCounters, Collectives, Error, ErrorScope, GlobalMaxArray, Growth, GrowthPolicy,
    HeapStatus, Implementation, ReduceOp, Runtime, SameNodeAccess, SignalArray, SymArray,
};
use onesided_suite::ensure;
use onesided_suite::pe_test::{self, CaseResult, TWO_THREE_FOUR};

/// The value PE `pe` writes at element `i` of message `tag`.
fn stamp(pe: usize, tag: u64, i: usize) -> u64 {
    (pe as u64) << 48 | tag << 24 | i as u64
}

/// A small deterministic generator for per-PE delays.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn delay(&mut self, max_us: u64) {
        let us = self.next() % (max_us + 1);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

fn runtime_basics(rt: &Runtime) -> CaseResult {
    use mpi::traits::Communicator;
    ensure!(rt.my_pe() < rt.n_pes(), "my_pe {} out of 0..{}", rt.my_pe(), rt.n_pes());
    let world = rt.world();
    ensure!(world.rank() as usize == rt.my_pe(), "MPI rank {} != PE {}", world.rank(), rt.my_pe());
    ensure!(world.size() as usize == rt.n_pes(), "MPI size {} != n_pes {}", world.size(), rt.n_pes());
    match Runtime::init() {
        Err(Error::AlreadyInitialized) => {}
        Err(other) => return Err(format!("second init gave {other}").into()),
        Ok(_) => return Err("a second runtime was created".into()),
    }
    ensure!(rt.implementation().spec_version() >= (1, 4), "spec {:?}", rt.implementation().spec_version());
    Ok(())
}

fn put_get_blocks(rt: &Runtime) -> CaseResult {
    const LEN: usize = 1000;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let inbox = SymArray::<u64>::collective_alloc(rt, "inbox", n * LEN)?;
    ensure!((inbox.as_ptr() as usize).is_multiple_of(onesided::SYMMETRIC_ALIGN), "base not 64-byte aligned");
    let outgoing: Vec<u64> = (0..LEN).map(|i| stamp(me, 1, i)).collect();
    for pe in 0..n {
        inbox.put(pe, me * LEN, &outgoing)?;
    }
    rt.barrier();
    let local = inbox.to_vec_local();
    for sender in 0..n {
        for i in 0..LEN {
            let got = local[sender * LEN + i];
            ensure!(got == stamp(sender, 1, i), "PE {me}: block of PE {sender} element {i} is {got:#x}");
        }
    }
    let right = (me + 1) % n;
    let mut back = vec![0u64; LEN];
    inbox.get(right, me * LEN, &mut back)?;
    ensure!(back == outgoing, "PE {me}: what PE {right} holds from me differs");
    let single = inbox.get_value(right, right * LEN + 7)?;
    ensure!(single == stamp(right, 1, 7), "get_value gave {single:#x}");
    rt.barrier();
    inbox.put_value(right, me * LEN + 3, stamp(me, 2, 3))?;
    rt.barrier();
    let left = (me + n - 1) % n;
    let mut one = [0u64];
    inbox.read_local(left * LEN + 3, &mut one)?;
    ensure!(one[0] == stamp(left, 2, 3), "put_value from PE {left} gave {:#x}", one[0]);
    // Zero-length transfers are valid anywhere in bounds, including the end.
    inbox.put(right, n * LEN, &[])?;
    inbox.get(right, n * LEN, &mut [])?;
    Ok(())
}

fn out_of_bounds_is_rejected_before_sending(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let array = SymArray::<u32>::collective_alloc(rt, "bounded", 8)?;
    array.fill_local(7);
    rt.barrier();
    let right = (me + 1) % n;
    match array.put(right, 7, &[1, 2]) {
        Err(Error::OutOfBounds { op, array: name, pe, offset, count, len }) => {
            ensure!(op == "put" && name == "bounded", "wrong context {op} {name}");
            ensure!(
                (pe, offset, count, len) == (right, 7, 2, 8),
                "wrong numbers {pe} {offset} {count} {len}"
            );
        }
        other => return Err(format!("out-of-bounds put gave {other:?}").into()),
    }
    let message = array.put(right, usize::MAX, &[1]).expect_err("offset overflow").to_string();
    ensure!(message.contains("'bounded'") && message.contains("nothing was transferred"), "{message}");
    ensure!(matches!(array.get(right, 5, &mut [0; 4]), Err(Error::OutOfBounds { .. })), "get past the end");
    match array.put(n, 0, &[1]) {
        Err(e @ Error::InvalidPe { pe, n_pes, .. }) if pe == n && n_pes == n => {
            let message = e.to_string();
            let named = message.contains("put on 'bounded'");
            ensure!(named && message.contains(&format!("PE {n} does not exist")), "{message}");
        }
        other => return Err(format!("a put to PE n gave {other:?}").into()),
    }
    rt.barrier();
    ensure!(array.to_vec_local() == vec![7; 8], "PE {me}: a rejected put changed memory");
    Ok(())
}

fn nonblocking_scope(rt: &Runtime) -> CaseResult {
    const LEN: usize = 1 << 17; // 1 MiB of u64 per direction
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let array = SymArray::<u64>::collective_alloc(rt, "nbi", 2 * LEN)?;
    let own: Vec<u64> = (0..LEN).map(|i| stamp(me, 3, i)).collect();
    array.write_local(LEN, &own)?;
    rt.barrier();
    let forward: Vec<u64> = (0..LEN).map(|i| stamp(me, 4, i)).collect();
    let mut pulled = vec![0u64; LEN];
    rt.nbi_scope(|s| {
        s.put(&array, right, 0, &forward)?;
        s.get(&array, left, LEN, &mut pulled)
    })?;
    ensure!(
        pulled.iter().enumerate().all(|(i, &v)| v == stamp(left, 3, i)),
        "PE {me}: non-blocking get from PE {left}"
    );
    rt.barrier();
    let mut received = vec![0u64; LEN];
    array.read_local(0, &mut received)?;
    ensure!(
        received.iter().enumerate().all(|(i, &v)| v == stamp(left, 4, i)),
        "PE {me}: non-blocking put from PE {left}"
    );
    Ok(())
}

fn direct_access_on_the_node(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let right = (me + 1) % n;
    let array = SymArray::<u64>::collective_alloc(rt, "direct", 64)?;
    let data: Vec<u64> = (0..64).map(|i| stamp(me, 5, i)).collect();
    // Every peer on this PE's node (MPI's shared-memory communicator: all PEs in a
    // single-node run, the PEs of the same emulated node under `pe-run --nodes`) is mapped,
    // and none beyond it: by Open MPI's OSHMEM itself, and under Sandia OpenSHMEM (no XPMEM
    // here) through the heaps the runtime shares, unless ONESIDED_NODE_HEAP=0. So the direct
    // variant must find a mapping exactly there and the library variant (ONESIDED_DIRECT=0)
    // none.
    let node = rt.world().split_shared(me as i32);
    let mut node_members = vec![0i32; node.size() as usize];
    node.all_gather_into(&(me as i32), &mut node_members[..]);
    let same_node = node_members.contains(&(right as i32));
    let node_heap_off = std::env::var(onesided::env::NODE_HEAP).is_ok_and(|v| v == "0");
    let maps_the_node = rt.direct_enabled()
        && node_members.len() > 1
        && !(rt.implementation() == Implementation::Sos && node_heap_off);
    match (maps_the_node, rt.same_node_access(), rt.implementation()) {
        (true, SameNodeAccess::ImplementationMapping, Implementation::Oshmem) => {}
        (true, SameNodeAccess::SharedHeaps, Implementation::Sos) => {}
        (false, SameNodeAccess::LibraryCalls(_), _) => {}
        (_, access, _) => {
            return Err(format!(
                "PE {me} reaches its node's PEs by {access:?}, which this launch should not give"
            )
            .into());
        }
    }
    let expect_mapping = maps_the_node && same_node;
    match array.direct(right)? {
        Some(direct) => {
            ensure!(expect_mapping, "PE {me} got a mapping of PE {right} where none should exist");
            ensure!(direct.pe() == right, "direct access to the wrong PE");
            direct.write(0, &data)?;
            ensure!(matches!(direct.write(60, &data[..8]), Err(Error::OutOfBounds { .. })), "direct bounds");
        }
        None => {
            ensure!(
                !expect_mapping,
                "PE {me} has no mapping of PE {right} on the same node: the direct path is not being tested \
                 (is the shared-memory transport off, e.g. UCX_TLS=tcp?)"
            );
            array.put(right, 0, &data)?
        }
    }
    rt.barrier();
    let left = (me + n - 1) % n;
    let got = array.to_vec_local();
    ensure!(
        got.iter().enumerate().all(|(i, &v)| v == stamp(left, 5, i)),
        "PE {me}: direct write from PE {left}"
    );
    if let Some(direct) = array.direct(left)? {
        let mut mine = vec![0u64; 64];
        direct.read(0, &mut mine)?;
        let left2 = (left + n - 1) % n;
        ensure!(mine.iter().enumerate().all(|(i, &v)| v == stamp(left2, 5, i)), "direct read");
    }
    Ok(())
}

fn atomics(rt: &Runtime) -> CaseResult {
    const ADDS: u64 = 500;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let counters = AtomicArray::<u64>::collective_alloc(rt, "counters", 4)?;
    let signed = AtomicArray::<i64>::collective_alloc(rt, "signed", n)?;
    rt.barrier();
    // Contended fetch_add on PE 0: every previous value is seen exactly once.
    let mut seen = Vec::new();
    for _ in 0..ADDS {
        seen.push(counters.fetch_add(0, 0, 1)?);
    }
    ensure!(seen.windows(2).all(|w| w[0] < w[1]), "fetch_add values not increasing on PE {me}");
    counters.add(0, 1, me as u64 + 1)?;
    rt.barrier();
    let total = counters.fetch(0, 0)?;
    ensure!(total == ADDS * n as u64, "PE {me}: fetch_add total {total}, expected {}", ADDS * n as u64);
    let sum = counters.fetch(0, 1)?;
    ensure!(sum == (n * (n + 1) / 2) as u64, "add total {sum}");
    // Set, fetch and swap on signed words, one word per PE, written by the left neighbour.
    let right = (me + 1) % n;
    signed.set(right, me, -(stamp(me, 6, 0) as i64))?;
    rt.barrier();
    let left = (me + n - 1) % n;
    ensure!(signed.load(left)? == -(stamp(left, 6, 0) as i64), "set from PE {left}");
    rt.barrier();
    let old = signed.swap(right, me, 42)?;
    ensure!(old == -(stamp(me, 6, 0) as i64), "swap returned {old}");
    // Compare-and-swap: exactly one PE wins word 2 of PE n-1.
    rt.barrier();
    let previous = counters.compare_swap(n - 1, 2, 0, me as u64 + 1)?;
    if previous == 0 {
        counters.fetch_add(0, 3, 1)?;
    }
    rt.barrier();
    let winners = counters.fetch(0, 3)?;
    let winner = counters.fetch(n - 1, 2)?;
    ensure!(winners == 1, "{winners} PEs won the compare_swap");
    ensure!((1..=n as u64).contains(&winner), "winner value {winner}");
    ensure!(matches!(counters.fetch(0, 4), Err(Error::OutOfBounds { .. })), "atomic bounds");
    Ok(())
}

fn put_signal_ring(rt: &Runtime) -> CaseResult {
    const LEN: usize = 333;
    const STEPS: u64 = 300;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let inbox = SymArray::<u64>::collective_alloc(rt, "ring inbox", LEN)?;
    let signals = SignalArray::collective_alloc(rt, "ring signals", 2)?;
    const DATA: usize = 0;
    const CONSUMED: usize = 1;
    let mut rng = Rng::new(me as u64 + 11);
    let mut received = vec![0u64; LEN];
    for step in 1..=STEPS {
        // The right neighbour has consumed the previous message before it is overwritten.
        signals.wait_ge(CONSUMED, step - 1)?;
        let message: Vec<u64> = (0..LEN).map(|i| stamp(me, step, i)).collect();
        if step % 2 == 0 {
            inbox.put_signal(right, 0, &message, &signals, DATA, step)?;
        } else {
            rt.nbi_scope(|s| s.put_signal(&inbox, right, 0, &message, &signals, DATA, step))?;
        }
        rng.delay(50);
        let seen = signals.wait_ge(DATA, step)?;
        ensure!(seen == step, "PE {me}: signal jumped to {seen} at step {step}");
        inbox.read_local(0, &mut received)?;
        for (i, &v) in received.iter().enumerate() {
            ensure!(v == stamp(left, step, i), "PE {me} step {step} element {i}: {v:#x}");
        }
        signals.set(left, CONSUMED, step)?;
    }
    ensure!(signals.test_ge(DATA, STEPS)?, "test_ge after the last step");
    ensure!(!signals.test_ge(DATA, STEPS + 1)?, "test_ge beyond the last step");
    signals.wait_ge(CONSUMED, STEPS)?;
    Ok(())
}

fn wait_any_serves_every_sender(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let signals = SignalArray::collective_alloc(rt, "arrivals", n)?;
    if me == 0 {
        let mut waits: Vec<(usize, u64)> = (1..n).map(|pe| (pe, pe as u64 * 10)).collect();
        while !waits.is_empty() {
            let position = signals.wait_any_ge(&waits)?;
            let (pe, value) = waits.remove(position);
            ensure!(signals.value(pe)? >= value, "wait_any returned signal {pe} below {value}");
        }
        ensure!(matches!(signals.wait_any_ge(&[]), Err(Error::InvalidArgument(_))), "empty wait_any");
    } else {
        Rng::new(me as u64).delay(2000);
        signals.set(0, me, me as u64 * 10)?;
    }
    Ok(())
}

fn call_counters_with_random_delays(rt: &Runtime) -> CaseResult {
    const ROUNDS: u64 = 2000;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let mut counters = CallCounters::collective_alloc(rt, "ring counters")?;
    let slots = SymArray::<u64>::collective_alloc(rt, "ring slots", 2)?;
    let mut rng = Rng::new(me as u64 * 31 + 7);
    // A ring: arrive at both neighbours first, then wait for both (waiting for one before
    // arriving at the other would deadlock around the ring).
    let neighbours: Vec<usize> = if right == left { vec![right] } else { vec![right, left] };
    let sync = |counters: &mut CallCounters<'_>| -> onesided::Result<()> {
        for &peer in &neighbours {
            counters.arrive(peer)?;
        }
        for &peer in &neighbours {
            counters.wait(peer)?;
        }
        Ok(())
    };
    for round in 1..=ROUNDS {
        if round % 97 == 0 {
            rng.delay(300);
        }
        // Both neighbours have finished reading the previous round before this PE writes.
        sync(&mut counters)?;
        slots.put_value(right, 0, stamp(me, round, 0))?;
        slots.put_value(left, 1, stamp(me, round, 1))?;
        // Arriving fences: the puts above are delivered before the neighbours see it.
        sync(&mut counters)?;
        let from_left = slots.get_value(me, 0)?;
        let from_right = slots.get_value(me, 1)?;
        ensure!(from_left == stamp(left, round, 0), "round {round}: slot 0 {from_left:#x}");
        ensure!(from_right == stamp(right, round, 1), "round {round}: slot 1 {from_right:#x}");
    }
    ensure!(counters.calls(right)? == 2 * ROUNDS, "calls with right: {}", counters.calls(right)?);
    ensure!(counters.peer_calls(left)? >= 2 * ROUNDS, "left's count {}", counters.peer_calls(left)?);
    Ok(())
}

fn collectives(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    // Many consecutive reductions with no other synchronisation, some longer than a chunk.
    for call in 0..200u64 {
        let len = 1 + (call as usize * 7) % 150;
        let mut values: Vec<u64> = (0..len).map(|i| ((me + i) % n) as u64 * 1000 + call).collect();
        rt.max_u64(&mut values)?;
        for (i, &v) in values.iter().enumerate() {
            let expected = (n as u64 - 1) * 1000 + call;
            ensure!(v == expected, "call {call} element {i}: {v} != {expected} (i={i})");
        }
    }
    ensure!(rt.max_u64_one(me as u64 * 3)? == (n as u64 - 1) * 3, "max_u64_one");
    ensure!(matches!(rt.max_u64(&mut [u64::MAX]), Err(Error::CollectiveArgument(_))), "value above i64::MAX");
    for root in 0..n {
        for len in [1usize, 3, 511, 4096, 10_000] {
            let mut data: Vec<u32> = if me == root {
                (0..len).map(|i| (root * 100_000 + i) as u32).collect()
            } else {
                vec![u32::MAX; len]
            };
            rt.broadcast(root, &mut data)?;
            ensure!(
                data.iter().enumerate().all(|(i, &v)| v == (root * 100_000 + i) as u32),
                "broadcast of {len} from {root}"
            );
            let _ = rt.max_u64_one(len as u64)?;
        }
    }
    Ok(())
}

/// Sums, minima and maxima of every type, one value and slices: integers exact, floating-point
/// sums within rounding of the serial sum and the same bits on every PE (checked by reducing
/// the bits with min and max), and a length mismatch an error on every PE.
fn typed_reductions(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let triangle = (n * (n + 1) / 2) as i64;
    ensure!(rt.all_sum(me as i64 + 1) == triangle, "i64 sum");
    ensure!(rt.all_sum(me as u32 + 1) == triangle as u32, "u32 sum");
    ensure!(rt.all_min(100 - me as i32) == 101 - n as i32, "i32 min");
    ensure!(rt.all_max(me as u64 * 7) == (n as u64 - 1) * 7, "u64 max");
    ensure!(rt.all_min(-(me as f32) - 0.5) == -(n as f32) + 0.5, "f32 min");
    ensure!(rt.all_max(me as f64 + 0.25) == n as f64 - 0.75, "f64 max");
    // Values that round differently in different orders.
    let energy = |pe: usize| 1.0e8 * (pe as f64 + 1.0) + 0.1 / (pe as f64 + 3.0);
    let sum = rt.all_sum(energy(me));
    let serial: f64 = (0..n).map(energy).sum();
    ensure!((sum - serial).abs() <= 1e-6 * serial, "f64 sum {sum} against {serial}");
    let bits = sum.to_bits();
    ensure!(
        rt.all_min(bits) == bits && rt.all_max(bits) == bits,
        "PE {me}: the sum's bits differ between PEs"
    );
    let single = rt.all_sum(energy(me) as f32);
    ensure!(rt.all_min(single.to_bits()) == rt.all_max(single.to_bits()), "f32 sum bits differ");
    // Slices: element i of PE p is p * 1000 + i.
    for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
        let mut values: Vec<i64> = (0..37).map(|i| me as i64 * 1000 + i).collect();
        rt.all_reduce(op, &mut values)?;
        for (i, &v) in values.iter().enumerate() {
            let expected = match op {
                ReduceOp::Sum => 1000 * (triangle - n as i64) + n as i64 * i as i64,
                ReduceOp::Min => i as i64,
                ReduceOp::Max => (n as i64 - 1) * 1000 + i as i64,
            };
            ensure!(v == expected, "{op:?} element {i}: {v} != {expected}");
        }
        let mut reals: Vec<f64> = (0..5).map(|i| me as f64 * 0.5 + i as f64).collect();
        rt.all_reduce(op, &mut reals)?;
        ensure!(
            rt.all_max(reals[4].to_bits()) == rt.all_min(reals[4].to_bits()),
            "{op:?}: f64 slice bits differ"
        );
    }
    // PE 0 passes one element fewer: every PE is told, nothing is reduced, the next works.
    let mut values = vec![me as f32; if me == 0 { 2 } else { 3 }];
    match rt.all_reduce(ReduceOp::Sum, &mut values) {
        Err(e @ Error::CollectiveArgument(_)) => {
            ensure!(e.to_string().contains("2 to 3 elements"), "{e}");
            ensure!(e.scope() == ErrorScope::EveryPe, "a length mismatch is seen by every PE");
        }
        other => return Err(format!("a length mismatch gave {other:?}").into()),
    }
    ensure!(values.iter().all(|&v| v == me as f32), "values changed by a refused reduction");
    ensure!(rt.all_sum(1u64) == n as u64, "a reduction after a refused one");
    Ok(())
}

fn global_max_growth_and_freeze(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let policy = GrowthPolicy { over_allocation: 1.5, freeze_after: Some(3) };
    let mut array = GlobalMaxArray::<u64>::collective_alloc(rt, "halo buffer", 10 * (me + 1), policy)?;
    let expected = (10 * n * 3).div_ceil(2);
    ensure!(array.capacity() == expected, "capacity {} != {expected}", array.capacity());
    let own: Vec<u64> = (0..10).map(|i| stamp(me, 7, i)).collect();
    array.array().write_local(0, &own)?;
    // One PE needs far more: everyone grows, and this PE's elements survive.
    let need = if me == n - 1 { 1000 } else { 5 };
    let growth = array.collective_ensure(need)?;
    ensure!(growth == Growth::Grown { from: expected, to: 1500 }, "growth {growth:?}");
    let mut kept = vec![0u64; 10];
    array.array().read_local(0, &mut kept)?;
    ensure!(kept == own, "PE {me}: contents lost in growth");
    // The new capacity is symmetric: the last element of every PE is reachable.
    array.array().put_value((me + 1) % n, 1499, stamp(me, 8, 1499))?;
    rt.barrier();
    ensure!(array.array().get_value(me, 1499)? == stamp((me + n - 1) % n, 8, 1499), "grown tail");
    for call in 1..=3 {
        ensure!(array.collective_ensure(100)? == Growth::Unchanged, "stable call {call}");
    }
    ensure!(array.is_frozen(), "not frozen after 3 stable calls");
    ensure!(array.collective_ensure(1500)? == Growth::Frozen, "a fitting request once frozen");
    if me == 0 {
        match array.collective_ensure(1501) {
            Err(Error::CapacityFrozen { needed: 1501, capacity: 1500, stable_calls: 3, .. }) => {}
            other => return Err(format!("frozen overflow gave {other:?}").into()),
        }
    }
    let bad = GrowthPolicy { over_allocation: 0.5, freeze_after: None };
    ensure!(
        matches!(
            GlobalMaxArray::<u8>::collective_alloc(rt, "bad", 1, bad),
            Err(Error::CollectiveArgument(_))
        ),
        "over_allocation below 1"
    );
    Ok(())
}

fn heap_exhaustion_names_the_variable(rt: &Runtime) -> CaseResult {
    let variable = match rt.implementation() {
        onesided::Implementation::Oshmem => "SHMEM_SYMMETRIC_HEAP_SIZE",
        onesided::Implementation::Sos => "SHMEM_SYMMETRIC_SIZE",
    };
    let heap = HeapStatus::now();
    ensure!(heap.variable == variable, "{heap:?}");
    let capacity = heap.capacity.ok_or("the heap setting of the test run is a size")?;
    ensure!(heap.in_use > 0 && heap.in_use < capacity, "{heap:?}");
    // Past the capacity: refused before the implementation is asked, with a size that fits.
    let too_big = 1usize << 40;
    match SymArray::<u8>::collective_alloc(rt, "enormous", too_big) {
        Err(e @ Error::HeapTooSmall { .. }) => {
            let message = e.to_string();
            ensure!(
                message.contains(&format!("raise {variable}, for example {variable}=1281G"))
                    && message.contains("'enormous' needs 1048576 MiB more"),
                "{message}"
            );
            // Every PE returns it from the same allocation: the job may end normally.
            ensure!(e.scope() == ErrorScope::EveryPe, "{e} is every PE's");
        }
        other => return Err(format!("a 1 TiB allocation gave {other:?}").into()),
    }
    ensure!(HeapStatus::now().in_use == heap.in_use, "a refused allocation holds nothing");
    // Exactly what is left by the setting: the implementation decides (its own bookkeeping
    // may not leave room), and a failure names the variable too.
    match SymArray::<u8>::collective_alloc(rt, "the rest", capacity - heap.in_use) {
        Ok(_rest) => ensure!(HeapStatus::now().in_use == capacity, "{:?}", HeapStatus::now()),
        Err(e @ Error::HeapExhausted { .. }) => {
            let message = e.to_string();
            ensure!(message.contains(variable) && message.contains("'the rest'"), "{message}");
            ensure!(e.scope() == ErrorScope::EveryPe, "{e} is every PE's");
        }
        Err(other) => return Err(format!("the rest of the heap gave {other:?}").into()),
    }
    // The heap is still usable afterwards.
    let after = SymArray::<u64>::collective_alloc(rt, "after", 16)?;
    after.put_value((rt.my_pe() + 1) % rt.n_pes(), 0, 1)?;
    rt.barrier();
    ensure!(after.get_value(rt.my_pe(), 0)? == 1, "allocation after exhaustion");
    Ok(())
}

fn asymmetric_exact_allocation_is_caught(rt: &Runtime) -> CaseResult {
    match SymArray::<u32>::collective_alloc(rt, "lopsided", 100 + rt.my_pe()) {
        Err(e @ Error::AsymmetricAllocation { pe: 1, .. }) => {
            let message = e.to_string();
            ensure!(
                message.contains("PE 0 asked for 100 elements of 4 bytes")
                    && message.contains("PE 1 asked for 101 elements of 4 bytes")
                    && message.contains("'lopsided'"),
                "{message}"
            );
        }
        other => return Err(format!("asymmetric allocation gave {other:?}").into()),
    }
    // Different element types of the same length are caught too.
    let outcome = if rt.my_pe() == 0 {
        SymArray::<u64>::collective_alloc(rt, "mixed", 10).map(drop)
    } else {
        SymArray::<u32>::collective_alloc(rt, "mixed", 10).map(drop)
    };
    ensure!(
        matches!(outcome, Err(Error::AsymmetricAllocation { pe: 1, .. })),
        "element size mismatch: {outcome:?}"
    );
    // The heap is still symmetric and usable afterwards.
    let after = SymArray::<u64>::collective_alloc(rt, "after asymmetry", 4)?;
    after.put_value((rt.my_pe() + 1) % rt.n_pes(), 0, 9)?;
    Ok(())
}

/// A panic caught on one PE leaks that PE's array (a free is collective): the next allocation
/// sees the heaps differ and fails on every PE instead of handing out mismatched addresses.
fn diverged_heap_is_detected(rt: &Runtime) -> CaseResult {
    // The panic is deliberate: keep the default hook from printing it.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let array = SymArray::<u64>::collective_alloc(rt, "leaked on PE 0", 1000).expect("allocation");
        if rt.my_pe() == 0 {
            panic!("deliberate panic on PE 0 with 'leaked on PE 0' alive");
        }
        drop(array);
    }));
    std::panic::set_hook(hook);
    if rt.my_pe() == 0 {
        ensure!(outcome.is_err(), "the deliberate panic was not caught");
        // The other PEs' shmem_free ends in a barrier; meet them there.
        rt.barrier();
    }
    match SymArray::<u64>::collective_alloc(rt, "after the leak", 16) {
        Err(e @ Error::HeapDiverged { pe: 1, .. }) => {
            let message = e.to_string();
            ensure!(
                message.contains("'after the leak'") && message.contains("different heap offsets"),
                "{message}"
            );
        }
        other => return Err(format!("allocation on a diverged heap gave {other:?}").into()),
    }
    Ok(())
}

fn mismatched_collective_arguments_fail_everywhere(rt: &Runtime) -> CaseResult {
    let me = rt.my_pe();
    let mut values = vec![1u64; if me == 0 { 2 } else { 1 }];
    ensure!(matches!(rt.max_u64(&mut values), Err(Error::CollectiveArgument(_))), "length mismatch");
    let mut values = [if me == 1 { u64::MAX } else { 5 }];
    ensure!(matches!(rt.max_u64(&mut values), Err(Error::CollectiveArgument(_))), "oversized value on PE 1");
    let policy = GrowthPolicy { over_allocation: if me == 1 { f64::NAN } else { 1.5 }, freeze_after: None };
    let outcome = GlobalMaxArray::<u32>::collective_alloc(rt, "bad policy on PE 1", 10, policy).map(drop);
    ensure!(matches!(outcome, Err(Error::CollectiveArgument(_))), "policy invalid on PE 1 only: {outcome:?}");
    ensure!(rt.max_u64_one(me as u64)? == rt.n_pes() as u64 - 1, "collectives still in step");
    Ok(())
}

fn sizes_and_alignment(rt: &Runtime) -> CaseResult {
    #[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
    #[repr(C, align(256))]
    struct Wide {
        words: [u64; 32],
    }
    let wide = SymArray::<Wide>::collective_alloc(rt, "wide", 3)?;
    ensure!((wide.as_ptr() as usize).is_multiple_of(256), "over-aligned element type misaligned");
    let right = (rt.my_pe() + 1) % rt.n_pes();
    wide.put_value(right, 2, Wide { words: [rt.my_pe() as u64; 32] })?;
    let outcome = SymArray::<u64>::collective_alloc(rt, "too long", usize::MAX / 4).map(drop);
    ensure!(matches!(outcome, Err(Error::SizeOverflow { .. })), "overflowing length: {outcome:?}");
    let outcome = SymArray::<u8>::collective_alloc(rt, "longest", usize::MAX).map(drop);
    ensure!(matches!(outcome, Err(Error::SizeOverflow { .. })), "usize::MAX bytes: {outcome:?}");
    let empty = SymArray::<u64>::collective_alloc(rt, "empty", 0)?;
    ensure!(empty.is_empty() && empty.put(right, 0, &[]).is_ok(), "empty array");
    ensure!(matches!(empty.put(right, 0, &[1]), Err(Error::OutOfBounds { .. })), "put into an empty array");
    Ok(())
}

fn unanswered_waits_time_out_with_a_diagnosis(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let signals = SignalArray::collective_alloc(rt, "never set", 1)?;
    let timeout = Duration::from_millis(300);
    match signals.wait_ge_for(0, 5, timeout) {
        Err(e @ Error::WaitTimeout { pe, awaited: 5, seen: 0, waited, .. }) => {
            ensure!(pe == me && waited >= timeout, "timeout context {pe} {waited:?}");
            let message = e.to_string();
            ensure!(
                message.contains(&format!("PE {me} waited")) && message.contains("signal 0 of 'never set'"),
                "{message}"
            );
            ensure!(message.contains("ONESIDED_WAIT_TIMEOUT"), "{message}");
        }
        other => return Err(format!("an unanswered wait gave {other:?}").into()),
    }
    let mut counters = CallCounters::collective_alloc(rt, "lonely counter")?;
    let (peer, left) = ((me + 1) % n, (me + n - 1) % n);
    for neighbour in if peer == left { vec![peer] } else { vec![peer, left] } {
        counters.arrive(neighbour)?;
        counters.arrive(neighbour)?;
    }
    // The peer arrived twice too, so waiting for 2 succeeds; PE 0's third arrival at PE 1
    // is unanswered.
    counters.wait(peer)?;
    if me == 0 {
        counters.arrive(1)?;
        match counters.wait_for(1, timeout) {
            Err(e @ Error::WaitTimeout { awaited: 3, seen: 2, .. }) => {
                let message = e.to_string();
                ensure!(
                    message.contains("call counter 'lonely counter'") && message.contains("updated by PE 1"),
                    "{message}"
                );
            }
            other => return Err(format!("an unanswered counter gave {other:?}").into()),
        }
    }
    rt.barrier();
    Ok(())
}

fn worker_threads_share_the_runtime(rt: &Runtime) -> CaseResult {
    const THREADS: usize = 4;
    const LEN: usize = 4096;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let right = (me + 1) % n;
    let array = SymArray::<u64>::collective_alloc(rt, "threaded", THREADS * LEN)?;
    let counter = AtomicArray::<u64>::collective_alloc(rt, "threaded count", 1)?;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (array, counter) = (&array, &counter);
                scope.spawn(move || -> onesided::Result<()> {
                    let part: Vec<u64> = (0..LEN).map(|i| stamp(me, t as u64, i)).collect();
                    array.put(right, t * LEN, &part)?;
                    counter.fetch_add(right, 0, 1)?;
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("worker thread panicked"))
    })?;
    rt.barrier();
    let left = (me + n - 1) % n;
    let got = array.to_vec_local();
    for t in 0..THREADS {
        for i in 0..LEN {
            ensure!(got[t * LEN + i] == stamp(left, t as u64, i), "thread {t} element {i}");
        }
    }
    ensure!(counter.load(0)? == THREADS as u64, "thread atomics: {}", counter.load(0)?);
    Ok(())
}

fn main() {
    let cases = onesided_suite::cases![TWO_THREE_FOUR =>
        runtime_basics,
        put_get_blocks,
        out_of_bounds_is_rejected_before_sending,
        nonblocking_scope,
        direct_access_on_the_node,
        atomics,
        put_signal_ring,
        wait_any_serves_every_sender,
        call_counters_with_random_delays,
        collectives,
        typed_reductions,
        global_max_growth_and_freeze,
        heap_exhaustion_names_the_variable,
        asymmetric_exact_allocation_is_caught,
        mismatched_collective_arguments_fail_everywhere,
        sizes_and_alignment,
        unanswered_waits_time_out_with_a_diagnosis,
        worker_threads_share_the_runtime,
        // Last: it leaves the heap diverged on purpose.
        diverged_heap_is_detected,
    ];
    pe_test::main_with_variants("core", &cases, pe_test::DIRECT_AND_LIBRARY);
}
