//! The PME redistribution of a water box replicated to about 20 000 and 100 000 atoms, on
//! every path in the same run, between 2 PEs that are both particle PEs and PME ranks:
//! `pme_redist/{onesided-get,onesided-put,mpi,mpi-alltoallv,mpi-neighbor}/<atoms>` times the
//! round trip of a step (coordinates and charges to the PME ranks, forces back), from a
//! barrier on, as the time PE 0 takes to finish it; the last two are MPI's collective
//! baselines ([`RedistBaseline`]). `pme_redistribute/.../<atoms>` and
//! `pme_return_forces/.../<atoms>` time the two halves alone: each iteration is still a whole
//! step, with a barrier (not timed) before each half, so that a partner's lag from the half
//! before is not counted. `pme_redist/copy/<atoms>` is the memory floor: one copy of PE 0's
//! home atoms (coordinates, charge and index), from a barrier on.
//! Forces are returned from the caller's array (`return_forces_from`) on every path;
//! `onesided-get-in-place` and `onesided-put-in-place` write the PME ranks' forces into the
//! redistribution's own buffer (the step's `mesh`, as a gather writes them; the writing is
//! not timed) and return them from there (`return_forces`): no staging copy, and each PE
//! reads its forces where they lie and unpacks them in the same pass (on the put path too:
//! the atoms go out by put, the forces come back by pull). `auto` is
//! [`Path::Auto`](onesided::Path::Auto): per link class the path measured or cached fastest (on one node
//! the same-node link's; across emulated nodes each pair its class's where one class took MPI
//! and the other a one-sided path, else the other-node link's), forces returned in place
//! where it took a one-sided path for some pairs.
//!
//! `cargo bench --bench pme` launches 2 PEs through scripts/pe-run, one thread each.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use md_demo::types::TypeTable;
use md_halo::DdGrid;
use onesided::{Links, Runtime, Transport};
use onesided_suite::bench::{self, Bench};
use onesided_suite::route::Route;
use pme_redist::{Particle, PmeGrid, RVec, RedistBaseline, Redistribution};

const SPACING: f32 = 0.12;

fn main() {
    bench::main(2, run);
}

/// One path's redistribution with this PE's atoms and the forces it returns.
struct Step<'rt> {
    redist: Redistribution<'rt>,
    home: Vec<Particle>,
    forces: Vec<RVec>,
    home_forces: Vec<RVec>,
    /// The forces are written into the redistribution's buffer and returned from there.
    in_place: bool,
}

impl Step<'_> {
    /// A whole step, timing what `timed` says. Each timed part starts after a barrier (not
    /// timed), so that its time is the exchange's and not a partner's lag from before.
    fn run(&mut self, rt: &Runtime, timed: Timed) -> pme_redist::Result<Duration> {
        rt.barrier();
        let start = Instant::now();
        let mut delivered = self.redist.redistribute(&self.home)?;
        let forward = start.elapsed();
        // The PME ranks' forces: one per received atom, the same every step.
        self.forces.resize(delivered.received().len(), [0.5, -0.25, 1.0]);
        if timed != Timed::RoundTrip {
            rt.barrier();
        }
        let mut backward_start = Instant::now();
        // The gather's writes of the forces in place are not timed, as the other paths'
        // forces are ready before the return.
        let mut untimed = Duration::ZERO;
        if self.in_place {
            let writing = Instant::now();
            delivered.mesh().forces.copy_from_slice(&self.forces);
            untimed = writing.elapsed();
            backward_start = Instant::now();
            delivered.return_forces(&mut self.home_forces)?;
        } else {
            delivered.return_forces_from(&self.forces, &mut self.home_forces)?;
        }
        Ok(match timed {
            Timed::RoundTrip => start.elapsed() - untimed,
            Timed::Forward => forward,
            Timed::Backward => backward_start.elapsed(),
        })
    }
}

/// The part of a step a benchmark times.
#[derive(Clone, Copy, PartialEq)]
enum Timed {
    /// Coordinates out and forces back, with no barrier between.
    RoundTrip,
    /// Coordinates and charges to the PME ranks.
    Forward,
    /// Forces back to their owners.
    Backward,
}

fn run(rt: &Runtime) -> Result<(), Box<dyn std::error::Error>> {
    let pme: Vec<usize> = (0..rt.n_pes()).collect();
    let table = TypeTable::builtin();
    let mut steps = Vec::new();
    for system in bench::water_systems()? {
        let params = table.assign(&system.atoms, "data/spc216.gro")?;
        let grid = PmeGrid::new(system.pbc.vectors(), SPACING, &pme)?;
        let domains = DdGrid::choose(rt.n_pes(), system.pbc, 1e-3)?;
        let home: Vec<Particle> = (0..system.len())
            .filter(|&g| domains.pe_of_position(system.positions[g]) == rt.my_pe())
            .map(|g| Particle { x: system.positions[g], q: params[g].charge, global: g as u32 })
            .collect();
        for (name, route, in_place) in [
            ("onesided-get", Route::uniform(Transport::Get), false),
            ("onesided-put", Route::uniform(Transport::Put), false),
            ("mpi", Route::uniform(Transport::Mpi), false),
            ("mpi-alltoallv", Route::Baseline(RedistBaseline::MpiAlltoallv), false),
            ("mpi-neighbor", Route::Baseline(RedistBaseline::MpiNeighbor), false),
            ("onesided-get-in-place", Route::uniform(Transport::Get), true),
            ("onesided-put-in-place", Route::uniform(Transport::Put), true),
            ("auto", Route::Auto, true),
        ] {
            let redist = route.apply(Redistribution::builder(rt, grid.clone())).collective_build(&home)?;
            // Auto returns in place where it took a one-sided path, as an engine would.
            let in_place = in_place && redist.links() != Links::uniform(Transport::Mpi);
            let home_forces = vec![[0.0; 3]; home.len()];
            let step = Step { redist, home: home.clone(), forces: Vec::new(), home_forces, in_place };
            steps.push((name, system.len(), RefCell::new(step)));
        }
    }
    let mut benches = Vec::new();
    let groups = [
        ("pme_redist", Timed::RoundTrip),
        ("pme_redistribute", Timed::Forward),
        ("pme_return_forces", Timed::Backward),
    ];
    for (group, timed) in groups {
        if timed == Timed::RoundTrip {
            push_copies(rt, &steps, &mut benches);
        }
        for (name, atoms, step) in &steps {
            benches.push(Bench::sized(group, name, *atoms, move |iters| {
                let mut step = step.borrow_mut();
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += step.run(rt, timed)?;
                }
                Ok(total)
            }));
        }
    }
    bench::run(rt, benches)?;
    Ok(())
}

/// The memory floor the round trip is measured against, in the round trip's group: one copy
/// of PE 0's coordinates and charges (its home atoms) per system, from a barrier on like
/// every step.
fn push_copies<'a>(
    rt: &'a Runtime,
    steps: &[(&str, usize, RefCell<Step<'_>>)],
    benches: &mut Vec<Bench<'a>>,
) {
    let mut copied: Vec<usize> = Vec::new();
    for (_, atoms, step) in steps {
        if copied.contains(atoms) {
            continue;
        }
        copied.push(*atoms);
        let home = step.borrow().home.clone();
        let copy = RefCell::new(vec![Particle::default(); home.len()]);
        benches.push(Bench::sized("pme_redist", "copy", *atoms, move |iters| {
            let mut copy = copy.borrow_mut();
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                rt.barrier();
                let start = Instant::now();
                copy.copy_from_slice(std::hint::black_box(&home));
                std::hint::black_box(&mut *copy);
                total += start.elapsed();
            }
            Ok(total)
        }));
    }
}
