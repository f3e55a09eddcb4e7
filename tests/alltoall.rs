//! PE groups and the all-to-all under the launcher with 2, 3 and 4 PEs: rank translation,
//! the MPI communicator of the same members, and every all-to-all path (ordered and
//! node-aware one-sided, ordered MPI, MPI_Alltoall, shmem_alltoall) giving the same bytes,
//! over all PEs and over a subset.

use std::time::Duration;

use mpi::traits::Communicator;
use onesided::{Alltoall, AlltoallAlgorithm, Error, Path, PeGroup, Runtime, SymArray};
use onesided_suite::ensure;
use onesided_suite::pe_test::{self, CaseResult, TWO_THREE_FOUR};

/// The value rank `from` sends to rank `to` as element `i` in call `call` (elements past 4095
/// mix their high bits in, so every element of a large block differs from its neighbours').
fn stamp(from: usize, to: usize, call: u64, i: usize) -> u32 {
    (((from as u32) << 28) | ((to as u32) << 24) | ((call as u32 & 0xfff) << 12) | (i as u32 & 0xfff))
        ^ ((i >> 12) as u32).wrapping_mul(0x9e37_79b9)
}

fn groups_translate_ranks(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    // Members in reverse order: rank r is PE n-1-r.
    let reversed: Vec<usize> = (0..n).rev().collect();
    let group = PeGroup::collective_new(rt, "reversed", &reversed)?;
    ensure!(group.len() == n && group.my_rank() == Some(n - 1 - me), "my rank {:?}", group.my_rank());
    for rank in 0..n {
        ensure!(group.pe_of(rank)? == n - 1 - rank, "pe_of({rank})");
        ensure!(group.rank_of(n - 1 - rank) == Some(rank), "rank_of");
    }
    ensure!(group.pe_of(n).is_err() && group.rank_of(n).is_none(), "out of range");
    let comm = group.communicator().ok_or("a member without a communicator")?;
    ensure!(comm.rank() as usize == n - 1 - me && comm.size() as usize == n, "communicator ranks");
    ensure!(n == 1 || group.active_set().is_none(), "a reversed list is no active set");

    // The PEs after PE 0: an active set of stride 1; PE 0 is outside.
    let tail: Vec<usize> = (1..n).collect();
    let tail = PeGroup::collective_new(rt, "tail", &tail)?;
    ensure!(tail.contains(me) == (me > 0) && tail.my_rank() == me.checked_sub(1), "tail membership");
    ensure!(tail.communicator().is_some() == (me > 0), "communicator on members only");
    ensure!(tail.active_set() == Some((1, 0, n - 1)), "active set {:?}", tail.active_set());

    // Even PEs: stride 2.
    let evens: Vec<usize> = (0..n).step_by(2).collect();
    let evens = PeGroup::collective_new(rt, "evens", &evens)?;
    let expected = if evens.len() > 1 { Some((0, 1, evens.len())) } else { Some((0, 0, 1)) };
    ensure!(evens.active_set() == expected, "evens {:?}", evens.active_set());
    Ok(())
}

fn bad_groups_fail_on_every_pe(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    for (what, members) in [("empty", vec![]), ("repeated", vec![0, 0]), ("out of range", vec![0, n])] {
        let outcome = PeGroup::collective_new(rt, what, &members).map(drop);
        ensure!(matches!(outcome, Err(Error::CollectiveArgument(_))), "{what}: {outcome:?}");
    }
    // Only PE 1 passes a wrong list: every PE must fail, none may hang.
    let members: Vec<usize> = if me == 1 { vec![1, 0] } else { vec![0, 1] };
    let outcome = PeGroup::collective_new(rt, "disagreeing", &members).map(drop);
    ensure!(
        matches!(outcome, Err(Error::CollectiveArgument(ref m)) if m.contains("different member lists")),
        "{outcome:?}"
    );
    let members: Vec<usize> = if me == 1 { vec![n] } else { vec![0] };
    let outcome = PeGroup::collective_new(rt, "invalid on PE 1", &members).map(drop);
    ensure!(matches!(outcome, Err(Error::CollectiveArgument(_))), "{outcome:?}");
    Ok(())
}

/// Fills the send buffer with rank `me`'s stamps of call `call`, block `to` for rank `to`.
fn fill_send_buffer(alltoall: &mut Alltoall<'_, '_, u32>, me: usize, call: u64) {
    let block = alltoall.block();
    for (to, out) in alltoall.send_buffer().chunks_exact_mut(block.max(1)).enumerate() {
        for (i, v) in out.iter_mut().enumerate() {
            *v = stamp(me, to, call, i);
        }
    }
}

/// Runs `calls` all-to-alls on `group` with every path and checks each result, every other
/// call with the blocks written by a packing function (`AlltoallCall::pack`); returns the last result of every
/// path.
/// The all-to-all of `algorithm` on `group` (`None`: [`Path::Auto`]).
fn build<'g, 'rt>(
    group: &'g PeGroup<'rt>,
    name: &str,
    block: usize,
    algorithm: Option<AlltoallAlgorithm>,
) -> onesided::Result<Alltoall<'g, 'rt, u32>> {
    let builder = Alltoall::builder(name, block).path(Path::Auto);
    match algorithm {
        Some(algorithm) => builder.algorithm(algorithm),
        None => builder,
    }
    .collective_build(group)
}

/// The name of an algorithm, or `auto`.
fn label(algorithm: Option<AlltoallAlgorithm>) -> &'static str {
    algorithm.map_or("auto", AlltoallAlgorithm::name)
}

fn run_all_paths(
    rt: &Runtime,
    group: &PeGroup<'_>,
    block: usize,
    calls: u64,
) -> Result<Vec<Vec<u32>>, Box<dyn std::error::Error>> {
    let mut results = Vec::new();
    // Then Auto, which times every path that serves and takes the fastest.
    for algorithm in AlltoallAlgorithm::ALL.into_iter().map(Some).chain([None]) {
        let path = label(algorithm);
        if algorithm == Some(AlltoallAlgorithm::Shmem) && group.active_set().is_none() {
            let outcome = build(group, "not an active set", block, algorithm).map(drop);
            ensure!(
                matches!(outcome, Err(Error::InvalidArgument(_))),
                "shmem on a non-active set: {outcome:?}"
            );
            continue;
        }
        let mut alltoall = build(group, &format!("a2a {path}"), block, algorithm)?;
        if algorithm.is_none() {
            let took = alltoall.algorithm();
            ensure!(
                took != AlltoallAlgorithm::Shmem,
                "auto took the {took} baseline on group {:?}",
                group.members()
            );
        }
        let Some(me) = group.my_rank() else {
            ensure!(alltoall.call().run().is_err(), "a non-member ran the all-to-all");
            continue;
        };
        let n = group.len();
        let phases = alltoall.phases().to_vec();
        let mut dests: Vec<usize> = phases.iter().map(|p| p.0).collect();
        let mut srcs: Vec<usize> = phases.iter().map(|p| p.1).collect();
        dests.sort_unstable();
        srcs.sort_unstable();
        let all: Vec<usize> = (0..n).collect();
        ensure!(dests == all && srcs == all, "{path}: phases {phases:?} are not permutations");
        let mut last = Vec::new();
        for call in 1..=calls {
            if call % 37 == 0 {
                std::thread::sleep(Duration::from_micros((rt.my_pe() as u64 * 131 + call) % 400));
            }
            let received = if call % 2 == 0 {
                let mut packed = vec![false; n];
                let received = alltoall
                    .call()
                    .pack(|to, out| {
                        packed[to] = out.len() == block;
                        for (i, v) in out.iter_mut().enumerate() {
                            *v = stamp(me, to, call, i);
                        }
                    })
                    .run()?;
                ensure!(
                    packed.iter().all(|&p| p),
                    "{path} call {call}: not every block was packed once: {packed:?}"
                );
                received
            } else {
                fill_send_buffer(&mut alltoall, me, call);
                alltoall.call().run()?
            };
            for from in 0..n {
                for i in 0..block {
                    let got = received[from * block + i];
                    ensure!(
                        got == stamp(from, me, call, i),
                        "{path} call {call}: block from rank {from} element {i} is {got:#x}"
                    );
                }
            }
            last = received.to_vec();
        }
        results.push(last);
    }
    Ok(results)
}

fn every_path_gives_the_same_bytes(rt: &Runtime) -> CaseResult {
    let world = PeGroup::collective_world(rt)?;
    for block in [1usize, 2, 5, 1000] {
        let results = run_all_paths(rt, &world, block, if block > 100 { 20 } else { 200 })?;
        ensure!(results.windows(2).all(|w| w[0] == w[1]), "paths differ for blocks of {block}");
    }
    Ok(())
}

/// Blocks large enough that the one-sided paths pack straight into mapped receivers
/// ([`onesided::DIRECT_PACK_MIN`]), alternating with calls that copy: the same bytes on every
/// path, no call seeing another's data.
fn large_packed_blocks_give_the_same_bytes(rt: &Runtime) -> CaseResult {
    let world = PeGroup::collective_world(rt)?;
    let block = onesided::DIRECT_PACK_MIN / size_of::<u32>() + 3;
    let results = run_all_paths(rt, &world, block, 6)?;
    ensure!(results.windows(2).all(|w| w[0] == w[1]), "paths differ for blocks of {block}");
    Ok(())
}

fn all_to_all_within_subsets(rt: &Runtime) -> CaseResult {
    let n = rt.n_pes();
    let tail: Vec<usize> = (1..n).collect();
    let tail = PeGroup::collective_new(rt, "tail", &tail)?;
    run_all_paths(rt, &tail, 3, 100)?;
    let reversed: Vec<usize> = (0..n).rev().collect();
    let reversed = PeGroup::collective_new(rt, "reversed", &reversed)?;
    run_all_paths(rt, &reversed, 4, 100)?;
    Ok(())
}

/// A fused call (`AlltoallCall::fuse`) as a transpose: sender `s`'s element `i` for rank `r` lands at
/// `i * n + s` of `r`'s target (interleaved with every other sender's), written directly
/// where `r` is mapped and packed, sent and unpacked where not; on every path, over calls that
/// alternate with plain runs of the same all-to-all, with the target's guard elements intact.
fn fused_runs_write_the_receivers_layout(rt: &Runtime) -> CaseResult {
    let world = PeGroup::collective_world(rt)?;
    let n = world.len();
    let me = world.my_rank().ok_or("every PE is in the world group")?;
    for block in [3usize, 700] {
        let guard = 5;
        let target = SymArray::<u32>::collective_alloc(rt, "fused target", block * n + guard)?;
        for algorithm in AlltoallAlgorithm::ALL {
            let path = algorithm.name();
            if algorithm == AlltoallAlgorithm::Shmem && world.active_set().is_none() {
                continue;
            }
            let mut alltoall = build(&world, &format!("fused {path}"), block, Some(algorithm))?;
            for call in 1..=40u64 {
                if call % 3 == 0 {
                    fill_send_buffer(&mut alltoall, me, call);
                    let received = alltoall.call().run()?;
                    ensure!(received[0] == stamp(0, me, call, 0), "{path} call {call}: plain run");
                    continue;
                }
                let base = target.as_ptr();
                let (mut packed, mut unpacked) = (vec![0usize; n], vec![0usize; n]);
                let direct = |to: usize, remote: std::ptr::NonNull<u32>| {
                    for i in 0..block {
                        // SAFETY: element i * n + me of `to`'s target: only this PE writes it,
                        // inside the array (i < block, me < n).
                        unsafe { remote.as_ptr().add(i * n + me).write(stamp(me, to, call, i)) };
                    }
                };
                let pack = |to: usize, out: &mut [u32]| {
                    packed[to] += 1;
                    for (i, v) in out.iter_mut().enumerate() {
                        *v = stamp(me, to, call, i);
                    }
                };
                let unpack = |from: usize, incoming: &[u32]| {
                    unpacked[from] += 1;
                    for (i, &v) in incoming.iter().enumerate() {
                        // SAFETY: element i * n + from of this PE's target, which only the
                        // block from `from` fills.
                        unsafe { base.add(i * n + from).write(v) };
                    }
                };
                // SAFETY: `direct` and `unpack` write disjoint elements (sender index me or
                // from), inside the array; no PE reads its target during the call.
                unsafe { alltoall.call().pack(pack).fuse(&target, direct, unpack) }.run()?;
                ensure!(packed == unpacked || path.contains("onesided"), "{path}: packed {packed:?}");
                // SAFETY: the call has returned; no PE writes the target before this PE's next
                // fused call.
                let got = unsafe { target.local_slice() };
                for from in 0..n {
                    for i in 0..block {
                        let v = got[i * n + from];
                        ensure!(
                            v == stamp(from, me, call, i),
                            "{path} call {call}: element {i} from rank {from} is {v:#x}"
                        );
                    }
                }
                ensure!(got[block * n..].iter().all(|&v| v == 0), "{path} call {call}: guard written");
                rt.barrier();
            }
        }
    }
    Ok(())
}

fn path_names(_rt: &Runtime) -> CaseResult {
    for algorithm in AlltoallAlgorithm::ALL {
        ensure!(algorithm.name().parse::<AlltoallAlgorithm>()? == algorithm, "{algorithm}");
    }
    for path in Path::ALL {
        ensure!(path.name().parse::<Path>()? == path, "{path}");
    }
    ensure!("sideways".parse::<AlltoallAlgorithm>().is_err(), "unknown name accepted");
    Ok(())
}

fn main() {
    let cases = onesided_suite::cases![TWO_THREE_FOUR =>
        groups_translate_ranks,
        bad_groups_fail_on_every_pe,
        every_path_gives_the_same_bytes,
        large_packed_blocks_give_the_same_bytes,
        all_to_all_within_subsets,
        fused_runs_write_the_receivers_layout,
        path_names,
    ];
    pe_test::main_with_variants("alltoall", &cases, pe_test::DIRECT_AND_LIBRARY);
}
