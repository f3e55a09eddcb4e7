//! PME redistribution under the launcher with 2, 3 and 4 PEs, with PME on every PE and on a
//! subset of them, on every path (onesided get and put, MPI pairs and Alltoallv): every atom
//! on exactly the PME rank that owns its slab, in the documented order (by source PE, then
//! the source's home order); every force back at its atom; spread slabs and gathered forces
//! against the serial computation, bit-identical across paths; an atom that moved too far
//! reported by every PE, and the step after it working; bad input failing cleanly.

use std::time::Duration;

use md_halo::{DdGrid, RVec, System, kind, motion, verify::fingerprint};
use onesided::{Path, Runtime};
use onesided_suite::ensure;
use onesided_suite::launch;
use onesided_suite::pe_test::{self, CaseResult, TWO_THREE_FOUR};
use pme_redist::{
    Error, Particle, PmeGrid, RedistPath, Redistribution, SlabGrid, serial_gather, serial_spread,
};

fn water(copies: [usize; 3]) -> System {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro");
    System::read_gro(std::path::Path::new(path)).expect("data/spc216.gro").replicate(copies).expect("copies")
}

/// Grid spacing in nm: 32 x 16 x 16 points on two water boxes side by side.
const SPACING: f32 = 0.12;

/// The PME PEs of each layout a job of `n` PEs is tested with: every PE, the last one, and
/// (with four) the last two.
fn layouts(n: usize) -> Vec<Vec<usize>> {
    let mut layouts = vec![(0..n).collect::<Vec<_>>(), vec![n - 1]];
    if n >= 4 {
        layouts.push(vec![n - 2, n - 1]);
    }
    layouts
}

/// Every PE's home atoms, as every PE computes them: the particle PEs (all PEs, or those that
/// are not PME ranks) split the box like a domain decomposition.
fn homes(
    rt: &Runtime,
    system: &System,
    pme: &[usize],
) -> Result<Vec<Vec<Particle>>, Box<dyn std::error::Error>> {
    let n = rt.n_pes();
    let particle_pes = if pme.len() == n { n } else { n - pme.len() };
    let domains = DdGrid::choose(particle_pes, system.box_size, 1e-3)?;
    let mut homes = vec![Vec::new(); n];
    for (g, &x) in system.positions.iter().enumerate() {
        let pe = domains.pe_of(domains.cell_of_position(x));
        homes[pe].push(Particle { x, q: kind(system.kinds[g]).charge, global: g as u32 });
    }
    Ok(homes)
}

/// What PME rank `rank` must hold: every source's atoms of that slab, by source PE, each
/// source's in its home order.
fn expected_on(grid: &PmeGrid, homes: &[Vec<Particle>], rank: usize) -> Vec<Particle> {
    homes.iter().flatten().filter(|p| grid.rank_of(p.x) == rank).copied().collect()
}

/// A force that says where it was made: the atom, the PME rank and step, and the atom's
/// position in that rank's received list.
fn stamp(global: u32, rank: usize, step: u64, index: usize) -> RVec {
    [global as f32, (rank * 1000 + step as usize) as f32, index as f32]
}

fn moves(homes: &mut [Vec<Particle>], step: u64) {
    for p in homes.iter_mut().flatten() {
        p.x = motion::displaced(p.global, step, p.x);
    }
}

/// Each layout and path: every step's received atoms and returned forces checked exactly.
fn every_atom_reaches_its_rank_and_every_force_returns(rt: &Runtime) -> CaseResult {
    let me = rt.my_pe();
    let system = water([2, 1, 1]);
    for pme in layouts(rt.n_pes()) {
        let grid = PmeGrid::new(system.box_size, SPACING, &pme)?;
        for path in RedistPath::ALL {
            let mut homes = homes(rt, &system, &pme)?;
            let mut redist =
                Redistribution::collective_new(rt, grid.clone(), path, &homes[me], system.len())?;
            for step in 0..9u64 {
                if step % 4 == 3 {
                    redist.plan(&homes[me]);
                }
                redist.redistribute(&homes[me])?;
                let mut forces = Vec::new();
                if let Some(rank) = redist.pme_rank() {
                    let expected = expected_on(&grid, &homes, rank);
                    ensure!(
                        redist.received() == expected.as_slice(),
                        "{path}, PME on {pme:?}, step {step}: PME rank {rank} received {} atoms (first \
                         {:?}), expected {} (first {:?})",
                        redist.received().len(),
                        redist.received().first(),
                        expected.len(),
                        expected.first()
                    );
                    let counts: Vec<usize> = homes
                        .iter()
                        .map(|h| h.iter().filter(|p| grid.rank_of(p.x) == rank).count())
                        .collect();
                    ensure!(
                        redist.received_counts() == counts,
                        "{path}: counts {:?}",
                        redist.received_counts()
                    );
                    forces =
                        expected.iter().enumerate().map(|(i, p)| stamp(p.global, rank, step, i)).collect();
                } else {
                    ensure!(
                        redist.received().is_empty(),
                        "{path}: PE {me} is no PME rank but received atoms"
                    );
                }
                let home_forces = redist.return_forces(&forces)?;
                ensure!(home_forces.len() == homes[me].len(), "{path}: {} home forces", home_forces.len());
                for (p, f) in homes[me].iter().zip(&home_forces) {
                    let rank = grid.rank_of(p.x);
                    let index = expected_on(&grid, &homes, rank).iter().position(|q| q.global == p.global);
                    let want = stamp(p.global, rank, step, index.unwrap_or(usize::MAX));
                    ensure!(
                        *f == want,
                        "{path}, step {step}: atom {} got force {f:?}, expected {want:?}",
                        p.global
                    );
                }
                moves(&mut homes, step);
            }
        }
        if me == 0 {
            println!("  PME on PEs {pme:?}: every path placed every atom and returned every force");
        }
    }
    Ok(())
}

/// Spreading, the overlap exchanges and the gather against the serial computation, and the
/// slabs and forces bit-identical across the four paths.
fn spread_and_gather_match_serial_on_every_path(rt: &Runtime) -> CaseResult {
    let me = rt.my_pe();
    let system = water([2, 1, 1]);
    let charges: Vec<f32> = system.kinds.iter().map(|&k| kind(k).charge).collect();
    for pme in layouts(rt.n_pes()) {
        let grid = PmeGrid::new(system.box_size, SPACING, &pme)?;
        let serial = serial_spread(&grid, &system.positions, &charges);
        let mut prints = Vec::new();
        for path in RedistPath::ALL {
            let homes = homes(rt, &system, &pme)?;
            let overlap = if matches!(path, RedistPath::Mpi | RedistPath::MpiAlltoallv) {
                Path::Mpi
            } else {
                Path::Put
            };
            let mut redist =
                Redistribution::collective_new(rt, grid.clone(), path, &homes[me], system.len())?;
            let mut slab = SlabGrid::collective_new(rt, &grid, overlap)?;
            redist.redistribute(&homes[me])?;
            slab.spread(redist.received());
            slab.collective_reduce_overlap()?;
            if redist.pme_rank().is_some() {
                let [_, ky, kz] = grid.sizes();
                let (lo, hi) = slab.planes();
                let reference = &serial[lo * ky * kz..hi * ky * kz];
                let largest = reference.iter().fold(0f64, |m, v| m.max(v.abs()));
                let worst = reference
                    .iter()
                    .zip(slab.slab())
                    .map(|(s, v)| (s - *v as f64).abs())
                    .fold(0f64, f64::max);
                ensure!(
                    slab.slab().len() == reference.len() && worst <= 1e-5 * largest,
                    "{path}, PME on {pme:?}: slab planes {lo}..{hi} deviate {worst:.3e} (largest {largest:.3e})"
                );
            } else {
                ensure!(slab.slab().is_empty(), "{path}: PE {me} has no slab but holds values");
            }
            slab.collective_return_overlap()?;
            let forces = slab.gather(redist.received());
            let home_forces = redist.return_forces(&forces)?;
            let reference: Vec<[f64; 3]> =
                homes[me].iter().map(|p| serial_gather(&grid, &serial, p.x, p.q)).collect();
            let largest = reference.iter().flatten().fold(0f64, |m, v| m.max(v.abs()));
            for (p, (f, s)) in homes[me].iter().zip(home_forces.iter().zip(&reference)) {
                let worst = (0..3).map(|d| (f[d] as f64 - s[d]).abs()).fold(0f64, f64::max);
                ensure!(
                    worst <= 1e-4 * largest.max(1e-12),
                    "{path}: atom {} force {f:?} against serial {s:?}",
                    p.global
                );
            }
            let slab_print: Vec<RVec> = slab.slab().iter().map(|&v| [v, 0.0, 0.0]).collect();
            prints.push((fingerprint(&slab_print), fingerprint(&home_forces)));
        }
        ensure!(prints.windows(2).all(|w| w[0] == w[1]), "PME on {pme:?}: the paths differ: {prints:?}");
    }
    Ok(())
}

/// An atom that jumps half the box between two plans is reported by every PE, the same atom
/// everywhere (with four PME ranks; with fewer, one slab away is every slab, and the jump is
/// fine); the step after a new plan works.
fn moved_too_far_is_reported_everywhere(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let system = water([2, 1, 1]);
    let pme: Vec<usize> = (0..n).collect();
    let grid = PmeGrid::new(system.box_size, SPACING, &pme)?;
    let jump = system.box_size[0] / 2.0;
    for path in RedistPath::ALL {
        let mut homes = homes(rt, &system, &pme)?;
        let mut redist = Redistribution::collective_new(rt, grid.clone(), path, &homes[me], system.len())?;
        // Two atoms on different PEs jump: the report names the one on the lower PE.
        let jumpers: Vec<(usize, usize)> = [0, n - 1].iter().map(|&pe| (pe, homes[pe].len() / 2)).collect();
        for &(pe, i) in &jumpers {
            homes[pe][i].x[0] = (homes[pe][i].x[0] + jump) % system.box_size[0];
        }
        redist.redistribute(&homes[me])?;
        let forces = vec![[0.0; 3]; redist.received().len()];
        let outcome = redist.return_forces(&forces);
        if n >= 4 {
            let (pe, i) = jumpers[0];
            let atom = homes[pe][i].global;
            ensure!(
                matches!(outcome, Err(Error::MovedTooFar { atom: a, pe: p }) if a == atom && p == pe),
                "{path}: PE {me} reported {outcome:?}, expected atom {atom} on PE {pe}"
            );
            let message = outcome.expect_err("checked").to_string();
            ensure!(message.contains("rebuild the plan more often"), "{message}");
        } else {
            outcome?;
        }
        // With a new plan the same positions are fine, and the atoms reach their new ranks.
        redist.plan(&homes[me]);
        redist.redistribute(&homes[me])?;
        if let Some(rank) = redist.pme_rank() {
            ensure!(
                redist.received() == expected_on(&grid, &homes, rank).as_slice(),
                "{path}: after a new plan"
            );
        }
        let forces = vec![[0.0; 3]; redist.received().len()];
        redist.return_forces(&forces)?;
    }
    Ok(())
}

/// Wrong calls fail on every PE with an error that says what to do, and leave the
/// redistribution usable.
fn bad_calls_fail_cleanly(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let system = water([2, 1, 1]);
    let config = |outcome: pme_redist::Result<PmeGrid>, expected: &str| -> CaseResult {
        match outcome {
            Err(Error::Config(m)) if m.contains(expected) => Ok(()),
            other => Err(format!("expected a configuration error with {expected:?}, got {other:?}").into()),
        }
    };
    config(PmeGrid::new(system.box_size, 0.0, &[0]), "positive length")?;
    config(PmeGrid::new(system.box_size, f32::NAN, &[0]), "positive length")?;
    config(PmeGrid::new(system.box_size, SPACING, &[]), "at least one PME rank")?;
    config(PmeGrid::with_sizes(system.box_size, [8, 8, 8], &[0, 1, 2]), "use at most 2 PME ranks")?;
    config(PmeGrid::with_sizes(system.box_size, [6, 8, 8], &[0]), "too coarse")?;
    ensure!("onesided-put".parse::<RedistPath>()? == RedistPath::OneSidedPut, "path names");
    ensure!("nonsense".parse::<RedistPath>().is_err(), "an unknown path is an error");

    // A PME-only PE given home atoms: every PE fails, naming it.
    let pme = vec![n - 1];
    let grid = PmeGrid::new(system.box_size, SPACING, &pme)?;
    let mut homes = homes(rt, &system, &pme)?;
    homes[n - 1] = homes[0][..3].to_vec();
    let outcome =
        Redistribution::collective_new(rt, grid.clone(), RedistPath::OneSidedGet, &homes[me], system.len());
    ensure!(
        matches!(outcome, Err(Error::Config(ref m)) if m.contains(&format!("PE {} is a PME-only rank", n - 1))),
        "PE {me}: {:?}",
        outcome.err()
    );
    homes[n - 1].clear();

    for path in RedistPath::ALL {
        let mut redist = Redistribution::collective_new(rt, grid.clone(), path, &homes[me], system.len())?;
        let mut extra = homes[me].clone();
        extra.push(homes[0][0]);
        let outcome = redist.redistribute(&extra);
        ensure!(
            matches!(outcome, Err(Error::Config(ref m)) if m.contains("the plan is for")),
            "{path}: {outcome:?}"
        );
        redist.redistribute(&homes[me])?;
        let mut forces = vec![[1.0; 3]; redist.received().len() + 1];
        let outcome = redist.return_forces(&forces);
        ensure!(
            matches!(outcome, Err(Error::Config(ref m)) if m.contains("forces for")),
            "{path}: {outcome:?}"
        );
        forces.pop();
        let back = redist.return_forces(&forces)?;
        ensure!(
            back.len() == homes[me].len() && back.iter().all(|f| *f == [1.0; 3]),
            "{path}: after the refusals"
        );
    }
    Ok(())
}

/// The example under the launcher with bad options: every PE reports the error and the job
/// fails, within a time limit.
fn example_rejects_bad_options_on_every_pe(rt: &Runtime) -> CaseResult {
    if rt.my_pe() != 0 {
        return Ok(());
    }
    let example = launch::example_binary("pme_redist")?;
    let cases: [(&[&str], &str); 3] = [
        (&["--pme-pes", "3"], "--pme-pes 3 does not fit a job of 2 PEs"),
        (&["--replicate", "1,1,1", "--spacing", "0.5"], "too coarse for interpolation order 4"),
        (&["--gro", "/nonexistent/box.gro"], "cannot read /nonexistent/box.gro"),
    ];
    for (args, expected) in cases {
        let mut command = launch::command(2, &example);
        let output = launch::output_with_timeout(command.args(args), Duration::from_secs(180))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "{args:?} succeeded");
        for pe in 0..2 {
            ensure!(
                stderr.lines().any(|l| l.contains(&format!("PE {pe}:")) && l.contains(expected)),
                "{args:?}: PE {pe} did not report {expected:?}:\n{stderr}"
            );
        }
    }
    Ok(())
}

fn main() {
    let cases = onesided_suite::cases![TWO_THREE_FOUR =>
        every_atom_reaches_its_rank_and_every_force_returns,
        spread_and_gather_match_serial_on_every_path,
        moved_too_far_is_reported_everywhere,
        bad_calls_fail_cleanly,
    ];
    let mut cases = cases.to_vec();
    cases.push(pe_test::Case {
        name: "example_rejects_bad_options_on_every_pe",
        pes: &[2],
        run: example_rejects_bad_options_on_every_pe,
    });
    pe_test::main_with_variants("pme", &cases, pe_test::DIRECT_AND_LIBRARY);
}
