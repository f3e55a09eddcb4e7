//! PME redistribution under the launcher with 2, 3 and 4 PEs, with PME on every PE and on a
//! subset of them, on every path (onesided get and put, MPI pairs and Alltoallv) and on links
//! that mix MPI with a one-sided path per link class: every atom
//! on exactly the PME rank that owns its slab, in the documented order (by source PE, then
//! the source's home order); every force back at its atom; in a rectangular and in a triclinic
//! box; with home sets that grow and shrink from one plan to the next; spread slabs and
//! gathered forces against the serial computation, bit-identical across paths; an atom that
//! moved too far reported by every PE, and the step after it working; with a displacement
//! margin, partners as the atoms reach (against a search) and buffers smaller than the
//! system; bad input failing cleanly; the same on several threads per PE.

use std::time::Duration;

use md_demo::types::TypeTable;
use md_demo::{Structure, motion, verify::fingerprint};
use md_halo::{DdGrid, PbcBox};
use onesided::{Links, Path, Runtime, Transport};
use onesided_suite::ensure;
use onesided_suite::launch;
use onesided_suite::pe_test::{self, CaseResult, TWO_THREE_FOUR};
use onesided_suite::route::Route;
use pme_redist::reference::{serial_gather, serial_spread};
use pme_redist::{Error, Particle, PmeGrid, RVec, Redistribution, SlabGrid};

const WATER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro");

fn water(copies: [usize; 3]) -> Structure {
    Structure::read_gro(std::path::Path::new(WATER))
        .expect("data/spc216.gro")
        .replicate(copies)
        .expect("copies")
}

/// Two water boxes side by side (3.724 x 1.862 x 1.862 nm) with b and c leaning: b by 0.4 nm
/// along x, c by -0.6 nm along x and 0.5 nm along y (within GROMACS's limits); the same atoms,
/// wrapped into the skewed box.
fn skewed_water() -> Structure {
    let water = water([2, 1, 1]);
    let [lx, ly, lz] = water.pbc.diagonal();
    let pbc = PbcBox::new([[lx, 0.0, 0.0], [0.4, ly, 0.0], [-0.6, 0.5, lz]]).expect("a box GROMACS accepts");
    let positions = water.positions.iter().map(|&x| pbc.wrap(x)).collect();
    Structure { title: format!("{} (skewed)", water.title), pbc, positions, ..water }
}

/// The charge of every atom, from the built-in table.
fn charges(structure: &Structure) -> md_demo::Result<Vec<f32>> {
    Ok(TypeTable::builtin().assign(&structure.atoms, WATER)?.iter().map(|p| p.charge).collect())
}

/// Grid spacing in nm: 32 x 16 x 16 points on two water boxes side by side.
const SPACING: f32 = 0.12;

/// Links that mix MPI with a one-sided path. On one node every pair takes the same-node path;
/// on 2 emulated nodes (scripts/test-nodes) pairs of both classes take different transports in
/// the same step.
fn mixed() -> [Route; 3] {
    [
        Route::mixed(Transport::Put, Transport::Mpi),
        Route::mixed(Transport::Get, Transport::Mpi),
        Route::mixed(Transport::Mpi, Transport::Put),
    ]
}

/// Every path for every pair, then every mix of [`mixed`].
fn routes() -> impl Iterator<Item = Route> {
    Route::all().into_iter().chain(mixed())
}

/// The PME PEs of each layout a job of `n` PEs is tested with: every PE, the last one, and
/// (with four) the last two.
fn layouts(n: usize) -> Vec<Vec<usize>> {
    let mut layouts = vec![(0..n).collect::<Vec<_>>(), vec![n - 1]];
    if n >= 4 {
        layouts.push(vec![n - 2, n - 1]);
    }
    layouts
}

/// The PEs that hold atoms, `0..particle_pes`: all PEs, or those that are not PME ranks.
fn particle_pes(n: usize, pme: &[usize]) -> usize {
    if pme.len() == n { n } else { n - pme.len() }
}

/// Every PE's home atoms, as every PE computes them: the particle PEs split the box like a
/// domain decomposition.
fn homes(
    rt: &Runtime,
    structure: &Structure,
    pme: &[usize],
) -> Result<Vec<Vec<Particle>>, Box<dyn std::error::Error>> {
    let n = rt.n_pes();
    let domains = DdGrid::choose(particle_pes(n, pme), structure.pbc, 1e-3)?;
    let charges = charges(structure)?;
    let mut homes = vec![Vec::new(); n];
    for (g, &x) in structure.positions.iter().enumerate() {
        homes[domains.pe_of_position(x)].push(Particle { x, q: charges[g], global: g as u32 });
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

/// One step of `redist` (over `grid`) with every PE's home atoms `homes`, this PE passing
/// its own: this PME rank's received atoms and counts checked exactly, then each received
/// atom answered with its [`stamp`] (on odd steps written into the redistribution's own
/// buffer and returned in place), and this PE's returned forces checked exactly against the
/// stamps of its home atoms. `context` starts every failure message.
fn checked_step(
    redist: &mut Redistribution<'_>,
    grid: &PmeGrid,
    homes: &[Vec<Particle>],
    me: usize,
    step: u64,
    context: &str,
) -> CaseResult {
    checked_step_via(redist, grid, homes, None, me, step, context)
}

/// What PME rank `rank` must hold when the particle PEs relay (`relays[pe]`, the relay PME
/// rank of each particle PE): by relay PE, each relay's atoms by particle PE, each in its
/// home order; and how many came from each PE (indexed by PE). On a pencil grid of two rows
/// or more and two columns or more the relays pass the atoms on in two stages, along y within
/// their row, then along x within the atoms' column: by the PE of the rank of this column in
/// each row, then by relay PE within that row, by particle PE, in home order; counted from
/// the ranks of this column.
fn expected_relayed(
    grid: &PmeGrid,
    homes: &[Vec<Particle>],
    relays: &[Option<usize>],
    rank: usize,
) -> (Vec<Particle>, Vec<usize>) {
    let [px, py] = grid.dims();
    let by_pe = |ranks: Vec<usize>| {
        let mut ranks = ranks;
        ranks.sort_by_key(|&q| grid.pe_of(q));
        ranks
    };
    let (mut list, mut counts) = (Vec::new(), vec![0; homes.len()]);
    let mut take = |q: usize, from: usize, list: &mut Vec<Particle>| {
        for (home, _) in homes.iter().zip(relays).filter(|(_, relay)| **relay == Some(q)) {
            for p in home.iter().filter(|p| grid.rank_of(p.x) == rank) {
                list.push(*p);
                counts[grid.pe_of(from)] += 1;
            }
        }
    };
    if px > 1 && py > 1 {
        let column = rank % py;
        for stage_x in by_pe((0..px).map(|a| a * py + column).collect()) {
            let row = stage_x / py;
            for relay in by_pe((0..py).map(|b| row * py + b).collect()) {
                take(relay, stage_x, &mut list);
            }
        }
    } else {
        for q in by_pe((0..grid.ranks()).collect()) {
            take(q, q, &mut list);
        }
    }
    (list, counts)
}

/// [`checked_step`], the atoms relayed as `relays` says (`None`: sent directly).
fn checked_step_via(
    redist: &mut Redistribution<'_>,
    grid: &PmeGrid,
    homes: &[Vec<Particle>],
    relays: Option<&[Option<usize>]>,
    me: usize,
    step: u64,
    context: &str,
) -> CaseResult {
    let mut delivered = redist.redistribute(&homes[me])?;
    // Every PME rank's list and the counts from each PE, and each atom's rank and place in it.
    let (expected, expected_counts): (Vec<Vec<Particle>>, Vec<Vec<usize>>) = (0..grid.ranks())
        .map(|r| match relays {
            Some(relays) => expected_relayed(grid, homes, relays, r),
            None => (
                expected_on(grid, homes, r),
                homes.iter().map(|h| h.iter().filter(|p| grid.rank_of(p.x) == r).count()).collect(),
            ),
        })
        .unzip();
    let atoms = homes.iter().flatten().map(|p| p.global as usize + 1).max().unwrap_or(0);
    let mut place = vec![None; atoms];
    for (rank, list) in expected.iter().enumerate() {
        for (index, p) in list.iter().enumerate() {
            place[p.global as usize] = Some((rank, index));
        }
    }
    let mut forces = Vec::new();
    if let Some(rank) = delivered.redistribution().pme_rank() {
        let expected = &expected[rank];
        ensure!(
            delivered.received() == expected.as_slice(),
            "{context}: PME rank {rank} received {} atoms (first {:?}), expected {} (first {:?})",
            delivered.received().len(),
            delivered.received().first(),
            expected.len(),
            expected.first()
        );
        // Every PE with atoms for this rank is one of its sources, with the right count.
        let counts = &expected_counts[rank];
        let mut heard = vec![0; counts.len()];
        for (pe, count) in delivered.received_counts() {
            heard[pe] = count;
        }
        ensure!(
            &heard == counts,
            "{context}: counts {:?} from sources {:?}, expected {counts:?}",
            delivered.received_counts(),
            delivered.redistribution().sources()
        );
        forces = expected.iter().enumerate().map(|(i, p)| stamp(p.global, rank, step, i)).collect();
    } else {
        ensure!(delivered.received().is_empty(), "{context}: PE {me} is no PME rank but received atoms");
    }
    // On odd steps the forces are written into the redistribution's own buffer and returned
    // from there: the same bits must arrive.
    let mut home_forces = vec![[f32::NAN; 3]; homes[me].len()];
    if step % 2 == 1 {
        delivered.mesh().forces.copy_from_slice(&forces);
        delivered.return_forces(&mut home_forces)?;
    } else {
        delivered.return_forces_from(&forces, &mut home_forces)?;
    }
    ensure!(
        home_forces.len() == homes[me].len(),
        "{context}: {} home forces for {} home atoms",
        home_forces.len(),
        homes[me].len()
    );
    for (p, f) in homes[me].iter().zip(&home_forces) {
        let (rank, index) = place[p.global as usize].unwrap_or((usize::MAX, usize::MAX));
        let want = stamp(p.global, rank, step, index);
        ensure!(*f == want, "{context}: atom {} got force {f:?}, expected {want:?}", p.global);
    }
    Ok(())
}

/// Each layout and path on `structure`: every step's received atoms and returned forces
/// checked exactly, with a new plan every four steps.
fn every_atom_reaches_its_rank_in(rt: &Runtime, structure: &Structure) -> CaseResult {
    let me = rt.my_pe();
    for pme in layouts(rt.n_pes()) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        for links in routes() {
            let mut homes = homes(rt, structure, &pme)?;
            let mut redist =
                links.apply(Redistribution::builder(rt, grid.clone())).collective_build(&homes[me])?;
            for step in 0..9u64 {
                if step % 4 == 3 {
                    redist.collective_plan(&homes[me])?;
                }
                let context = format!("{links}, PME on {pme:?}, step {step}");
                checked_step(&mut redist, &grid, &homes, me, step, &context)?;
                moves(&mut homes, step);
            }
        }
        if me == 0 {
            println!("  PME on PEs {pme:?}: every path placed every atom and returned every force");
        }
    }
    Ok(())
}

/// `auto` takes per link class the path the job's links say (on one node this node's for
/// every pair; across nodes each class its own where one is MPI and the other one-sided,
/// else the other-node class's for every pair), the same on every PE, and then places every
/// atom and returns every force exactly, as those paths do.
fn auto_takes_the_path_of_each_link(rt: &Runtime) -> CaseResult {
    let structure = water([2, 2, 2]);
    let me = rt.my_pe();
    let links = rt.collective_links()?;
    // The redistribution has no MPI one-sided transport: MPI's two-sided stands in.
    let of = |t: Transport| match t {
        Transport::Get => Transport::Get,
        Transport::Mpi | Transport::MpiRma => Transport::Mpi,
        _ => Transport::Put,
    };
    let (same_node, other_node) = (of(links.same_node), of(links.other_node));
    let want = if rt.node_pes().len() == rt.n_pes() {
        Links::uniform(same_node)
    } else if (same_node == Transport::Mpi) != (other_node == Transport::Mpi) {
        Links::new(same_node, other_node)
    } else {
        Links::uniform(other_node)
    };
    for pme in layouts(rt.n_pes()) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        let mut homes = homes(rt, &structure, &pme)?;
        let mut redist =
            Redistribution::builder(rt, grid.clone()).path(Path::Auto).collective_build(&homes[me])?;
        ensure!(redist.links() == want, "auto took {}, the links say {want} ({links:?})", redist.links());
        for step in 0..5u64 {
            if step == 3 {
                redist.collective_plan(&homes[me])?;
            }
            let context = format!("auto ({want}), PME on {pme:?}, step {step}");
            checked_step(&mut redist, &grid, &homes, me, step, &context)?;
            moves(&mut homes, step);
        }
    }
    if me == 0 {
        println!("  auto took {want} for these links ({links:?})");
    }
    Ok(())
}

/// Enough atoms that every PE holds several chunks of the library's parallel placement and
/// packing (4 096 atoms each): each layout and path, with three threads per PE, every step
/// checked exactly as on one thread (the layout does not depend on the thread count).
fn threads_place_and_pack_alike(rt: &Runtime) -> CaseResult {
    let structure = water([4, 4, 2]);
    let me = rt.my_pe();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build()?;
    for pme in layouts(rt.n_pes()) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        let mut homes = homes(rt, &structure, &pme)?;
        let chunks = homes[me].len().div_ceil(4096);
        ensure!(
            chunks > 1 || homes[me].is_empty(),
            "PE {me} holds {} atoms: one chunk tests no parallel packing",
            homes[me].len()
        );
        for path in Route::all() {
            // The whole run inside the pool; its error crosses back as its message (a boxed
            // error is not Send).
            let mut run = || -> CaseResult {
                let mut redist =
                    path.apply(Redistribution::builder(rt, grid.clone())).collective_build(&homes[me])?;
                for step in 0..3u64 {
                    let context = format!("{path} on 3 threads, PME on {pme:?}, step {step}");
                    checked_step(&mut redist, &grid, &homes, me, step, &context)?;
                    moves(&mut homes, step);
                }
                Ok(())
            };
            pool.install(|| run().map_err(|e| e.to_string()))?;
            homes = self::homes(rt, &structure, &pme)?;
        }
    }
    Ok(())
}

/// Two water boxes side by side: each layout and path, every step checked exactly.
fn every_atom_reaches_its_rank_and_every_force_returns(rt: &Runtime) -> CaseResult {
    every_atom_reaches_its_rank_in(rt, &water([2, 1, 1]))
}

/// The same atoms in a triclinic box: the grid places them by the box vectors, as md-halo's
/// box computes their fractions (and differently from a rectangular box of the same
/// diagonal); then the exact checks of every path, and spreading and gathering against the
/// serial computation.
fn a_triclinic_box_works_on_every_path(rt: &Runtime) -> CaseResult {
    let structure = skewed_water();
    let pbc = structure.pbc;
    ensure!(!pbc.is_rectangular(), "the test box is triclinic");
    let grid = PmeGrid::new(pbc.vectors(), SPACING, &[0])?;
    let upright = PmeGrid::new(PbcBox::rectangular(pbc.diagonal())?.vectors(), SPACING, &[0])?;
    let kx = grid.sizes()[0];
    ensure!(upright.sizes()[0] == kx, "x sizes {kx} and {}", upright.sizes()[0]);
    let kx = kx as f64;
    let mut leaning = 0;
    for (g, &x) in structure.positions.iter().enumerate() {
        let plane = grid.locate(x).0[0];
        leaning += usize::from(plane != upright.locate(x).0[0]);
        // The x plane from md-halo's fractions, where rounding cannot tip it over a line.
        let u = pbc.fraction(x)[0].rem_euclid(1.0) * kx;
        if (u - u.round()).abs() > 1e-6 {
            ensure!(plane == u.floor() as usize, "atom {g} at {x:?}: plane {plane}, fraction {u}");
        }
    }
    ensure!(
        leaning > structure.len() / 10,
        "only {leaning} atoms change x plane with the skew: the box does not test it"
    );
    every_atom_reaches_its_rank_in(rt, &structure)?;
    spread_and_gather_match_serial_in(rt, &structure)
}

/// Moves and reassigns every atom at repartition `phase` (1, 2 or 3) over `particle_pes`
/// PEs. 1: every atom moves half a box along a (two slabs or more with four PME ranks: the
/// old plan would report it), and PE 0 takes nine atoms in ten, in descending global order.
/// 2: PE 0 keeps one atom in twenty and the other particle PEs share the rest. 3: half a box
/// along a again, and a domain decomposition. With one particle PE, PE 0 holds every atom.
fn repartition(homes: &mut [Vec<Particle>], particle_pes: usize, phase: u64, pbc: &PbcBox) -> CaseResult {
    let mut all: Vec<Particle> = homes.iter_mut().flat_map(std::mem::take).collect();
    all.sort_unstable_by_key(|p| p.global);
    let others = particle_pes - 1;
    let half_a = pbc.vectors()[0].map(|c| c / 2.0);
    let shift = |p: &mut Particle| p.x = std::array::from_fn(|k| p.x[k] + half_a[k]);
    match phase {
        1 => {
            all.iter_mut().for_each(shift);
            for p in all.into_iter().rev() {
                let g = p.global as usize;
                let pe = if others == 0 || !g.is_multiple_of(10) { 0 } else { 1 + (g / 10) % others };
                homes[pe].push(p);
            }
        }
        2 => {
            for p in all {
                let g = p.global as usize;
                let pe = if others == 0 || g.is_multiple_of(20) { 0 } else { 1 + g % others };
                homes[pe].push(p);
            }
        }
        _ => {
            all.iter_mut().for_each(shift);
            let domains = DdGrid::choose(particle_pes, *pbc, 1e-3)?;
            for p in all {
                homes[domains.pe_of_position(p.x)].push(p);
            }
        }
    }
    Ok(())
}

/// Home sets whose sizes change at every repartition (PE 0's grows far past its first size,
/// shrinks below it, and comes back), with `collective_plan` at each: every step's received
/// atoms and returned forces checked exactly, on every layout and path.
fn home_counts_grow_and_shrink_across_plans(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 1, 1]);
    for pme in layouts(n) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        let particle_pes = particle_pes(n, &pme);
        let mut sizes = Vec::new();
        for path in Route::all() {
            let mut homes = homes(rt, &structure, &pme)?;
            sizes = vec![homes[0].len()];
            let mut redist =
                path.apply(Redistribution::builder(rt, grid.clone())).collective_build(&homes[me])?;
            for step in 0..12u64 {
                if step > 0 && step % 3 == 0 {
                    repartition(&mut homes, particle_pes, step / 3, &structure.pbc)?;
                    redist.collective_plan(&homes[me])?;
                    sizes.push(homes[0].len());
                }
                let context = format!("{path}, PME on {pme:?}, step {step}, PE 0 home sizes {sizes:?}");
                checked_step(&mut redist, &grid, &homes, me, step, &context)?;
                moves(&mut homes, step);
            }
            if particle_pes > 1 {
                ensure!(
                    sizes[1] > sizes[0] * 3 / 2 && sizes[2] < sizes[0] / 2,
                    "PE 0's home sizes {sizes:?} do not grow and shrink enough to test anything"
                );
            }
        }
        if me == 0 {
            println!("  PME on PEs {pme:?}: PE 0 held {sizes:?} atoms at the four plans; every path exact");
        }
    }
    Ok(())
}

/// Spreading, the overlap exchanges and the gather on `structure` against the serial
/// computation, and the slabs and forces bit-identical across the five paths (the one-sided
/// ones gathering into the redistribution's own buffer and returning in place).
fn spread_and_gather_match_serial_in(rt: &Runtime, structure: &Structure) -> CaseResult {
    let me = rt.my_pe();
    let charges = charges(structure)?;
    for pme in layouts(rt.n_pes()) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        let serial = serial_spread(&grid, &structure.positions, &charges);
        let mut prints = Vec::new();
        for path in routes() {
            let homes = homes(rt, structure, &pme)?;
            let overlap = if path.is_mpi() { Path::Mpi } else { Path::OneSided };
            let mut redist =
                path.apply(Redistribution::builder(rt, grid.clone())).collective_build(&homes[me])?;
            let mut slab = SlabGrid::collective_new(rt, &grid, overlap)?;
            let mut delivered = redist.redistribute(&homes[me])?;
            slab.spread(delivered.received());
            slab.collective_reduce_overlap()?;
            if delivered.redistribution().pme_rank().is_some() {
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
            // The one-sided paths (and mixes) gather straight into the redistribution's buffer
            // and return from there; the MPI paths from the gather's vector. The bits must
            // agree.
            let mut home_forces = vec![[0.0; 3]; homes[me].len()];
            if !path.is_mpi() {
                let mesh = delivered.mesh();
                slab.gather_into(mesh.atoms, mesh.forces);
                delivered.return_forces(&mut home_forces)?;
            } else {
                let forces = slab.gather(delivered.received());
                delivered.return_forces_from(&forces, &mut home_forces)?;
            }
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
            prints.push((fingerprint(slab.slab()), fingerprint(&home_forces)));
        }
        ensure!(prints.windows(2).all(|w| w[0] == w[1]), "PME on {pme:?}: the paths differ: {prints:?}");
    }
    Ok(())
}

/// Two water boxes side by side: spreading and gathering on every path against the serial
/// computation.
fn spread_and_gather_match_serial_on_every_path(rt: &Runtime) -> CaseResult {
    spread_and_gather_match_serial_in(rt, &water([2, 1, 1]))
}

/// An atom that jumps half the box between two plans is reported by every PE, the same atom
/// everywhere (with four PME ranks; with fewer, one slab away is every slab, and the jump is
/// fine); the step after a new plan works.
fn moved_too_far_is_reported_everywhere(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 1, 1]);
    let pme: Vec<usize> = (0..n).collect();
    let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
    let lx = structure.pbc.diagonal()[0];
    let jump = lx / 2.0;
    for path in routes() {
        let mut homes = homes(rt, &structure, &pme)?;
        let mut redist =
            path.apply(Redistribution::builder(rt, grid.clone())).collective_build(&homes[me])?;
        // Two atoms on different PEs jump: the report names the one on the lower PE.
        let jumpers: Vec<(usize, usize)> = [0, n - 1].iter().map(|&pe| (pe, homes[pe].len() / 2)).collect();
        for &(pe, i) in &jumpers {
            homes[pe][i].x[0] = (homes[pe][i].x[0] + jump) % lx;
        }
        let delivered = redist.redistribute(&homes[me])?;
        let forces = vec![[0.0; 3]; delivered.received().len()];
        let mut home_forces = vec![[0.0; 3]; homes[me].len()];
        let outcome = delivered.return_forces_from(&forces, &mut home_forces);
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
        redist.collective_plan(&homes[me])?;
        let delivered = redist.redistribute(&homes[me])?;
        if let Some(rank) = delivered.redistribution().pme_rank() {
            ensure!(
                delivered.received() == expected_on(&grid, &homes, rank).as_slice(),
                "{path}: after a new plan"
            );
        }
        let forces = vec![[0.0; 3]; delivered.received().len()];
        delivered.return_forces_from(&forces, &mut home_forces)?;
    }
    Ok(())
}

/// Each particle PE's relay ([`PmeGrid::relay_rank`] of its domain in `domains`), `None` on
/// PME-only PEs.
fn relays_of(grid: &PmeGrid, domains: &DdGrid, n: usize) -> Result<Vec<Option<usize>>, pme_redist::Error> {
    (0..n)
        .map(|pe| {
            (pe < domains.len()).then(|| grid.relay_rank(domains.dims(), domains.cell_of(pe))).transpose()
        })
        .collect()
}

/// PME on one, two or (on 6 PEs and more) four of the PEs, in slabs and in pencils (1x2 and
/// 2x2), each particle PE
/// relaying through the PME rank under its domain: on every path, every atom on its own PME
/// rank in the relayed order (by relay PE, then by particle PE, each in home order), every
/// force back at its atom, through new plans as the atoms move; each particle PE sends to its
/// relay alone, and a relay hears from the particle PEs it relays for.
fn relayed_atoms_reach_their_ranks_on_every_path(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 2, 1]);
    let mut subsets: Vec<Vec<usize>> = layouts(n).into_iter().filter(|l| l.len() < n).collect();
    if n >= 6 {
        subsets.push((n - 4..n).collect());
    }
    for pme in subsets {
        let domains = DdGrid::choose(particle_pes(n, &pme), structure.pbc, 1e-3)?;
        let slabs = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        let mut grids = vec![slabs.clone()];
        match pme.len() {
            2 => grids.push(
                PmeGrid::builder(structure.pbc.vectors(), &pme).spacing(SPACING).pencils([1, 2]).build()?,
            ),
            4 => grids.push(
                PmeGrid::builder(structure.pbc.vectors(), &pme).spacing(SPACING).pencils([2, 2]).build()?,
            ),
            _ => {}
        }
        for grid in grids {
            let relays = relays_of(&grid, &domains, n)?;
            for path in routes() {
                let mut homes = homes(rt, &structure, &pme)?;
                let mut redist = path
                    .apply(Redistribution::builder(rt, grid.clone()))
                    .relay(|pe| relays[pe].unwrap_or(usize::MAX))
                    .collective_build(&homes[me])?;
                let dims = grid.dims();
                if let Some(relay) = relays[me] {
                    ensure!(
                        redist.targets() == [relay],
                        "{path}, {dims:?}: PE {me} sends to {:?}",
                        redist.targets()
                    );
                } else {
                    let rank = redist.pme_rank().ok_or("a PME-only PE is a PME rank")?;
                    let mine: Vec<usize> = (0..n).filter(|&pe| relays[pe] == Some(rank)).collect();
                    ensure!(
                        redist.relayed_for() == mine,
                        "{path}, {dims:?}: relays for {:?}, not {mine:?}",
                        redist.relayed_for()
                    );
                }
                for step in 0..9u64 {
                    if step % 4 == 3 {
                        redist.collective_plan(&homes[me])?;
                    }
                    let context = format!("{path} relayed, PME on {pme:?} in {dims:?}, step {step}");
                    checked_step_via(&mut redist, &grid, &homes, Some(&relays), me, step, &context)?;
                    moves(&mut homes, step);
                }
                // On the MPI paths every buffer is the PE's own, and the hops' buffers take
                // turns in four banks: a particle PE's atoms out and forces back share one,
                // as large as the atoms (20 bytes each, a fifth over) and no more.
                if path.is_mpi() {
                    let (symmetric, local) = (redist.symmetric_bytes(), redist.local_bytes());
                    let home = homes[me].len();
                    let atoms = size_of::<Particle>() * (home + home.div_ceil(5)) + 8;
                    ensure!(
                        symmetric <= 16 * 1024 && (relays[me].is_none() || local <= atoms),
                        "{path} relayed, PME on {pme:?} in {dims:?}: {symmetric} symmetric and {local} local \
                         bytes on PE {me} for {home} home atoms (at most {atoms} local)"
                    );
                }
            }
            if me == 0 {
                println!("  relayed, PME on PEs {pme:?} in {:?}: every path placed every atom", grid.dims());
            }
        }
    }
    Ok(())
}

/// With a relay and a small margin, an atom moved past it is found on its relay and reported
/// on every PE as held by its particle PE; after a new plan the step goes on. Relaying with
/// PME on every PE, or on some PEs and not others, fails on every PE.
fn a_relayed_atom_past_its_margin_is_reported_everywhere(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 1, 1]);
    let lx = structure.pbc.diagonal()[0];
    let pme = vec![n - 2, n - 1];
    let slabs = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
    // With six PEs, 2 x 2 pencils on the last four instead (slabs ran with three and four):
    // the stage along y finds the atom (its row is past its reach) and the stage along x's
    // vote tells every PME rank.
    let grids = if n >= 6 {
        let four: Vec<usize> = (n - 4..n).collect();
        vec![(
            four.clone(),
            PmeGrid::builder(structure.pbc.vectors(), &four).spacing(SPACING).pencils([2, 2]).build()?,
        )]
    } else {
        vec![(pme.clone(), slabs.clone())]
    };
    for (pme, grid) in grids {
        let domains = DdGrid::choose(particle_pes(n, &pme), structure.pbc, 1e-3)?;
        let relays = relays_of(&grid, &domains, n)?;
        for path in routes() {
            let mut homes = homes(rt, &structure, &pme)?;
            let mut redist = path
                .apply(Redistribution::builder(rt, grid.clone()))
                .displacement_margin(0.05)
                .relay(|pe| relays[pe].unwrap_or(usize::MAX))
                .collective_build(&homes[me])?;
            let pe = particle_pes(n, &pme) - 1;
            let context = format!("{path} relayed, PME in {:?}", grid.dims());
            jump_is_reported(&mut redist, &mut homes, Some(&relays), me, pe, 0.5 * lx, &context)?;
        }
    }
    let grid = slabs;
    let domains = DdGrid::choose(particle_pes(n, &pme), structure.pbc, 1e-3)?;
    let relays = relays_of(&grid, &domains, n)?;
    // Relaying needs PME on a subset, and every PE alike.
    let all: Vec<usize> = (0..n).collect();
    let everywhere = PmeGrid::new(structure.pbc.vectors(), SPACING, &all)?;
    let homes = homes(rt, &structure, &all)?;
    let outcome = Redistribution::builder(rt, everywhere).relay(|_| 0).collective_build(&homes[me]);
    ensure!(
        matches!(&outcome, Err(Error::Config(m)) if m.contains("subset")),
        "relaying with PME on every PE: {outcome:?}"
    );
    let homes = self::homes(rt, &structure, &pme)?;
    let builder = Redistribution::builder(rt, grid.clone());
    let builder = if me == 0 { builder } else { builder.relay(|pe| relays[pe].unwrap_or(0)) };
    let outcome = builder.collective_build(&homes[me]);
    ensure!(
        matches!(&outcome, Err(Error::CollectiveConfig(m)) if m.contains("some PEs relay")),
        "PE 0 alone not relaying: {outcome:?}"
    );
    let outcome = Redistribution::builder(rt, grid).relay(|_| 7).collective_build(&homes[me]);
    ensure!(
        matches!(&outcome, Err(Error::CollectiveConfig(m)) if m.contains("outside the grid's 2 PME ranks")),
        "a relay outside the grid: {outcome:?}"
    );
    Ok(())
}

/// The PME ranks an atom at `x` can reach by moving at most `margin` nm along x (the only
/// direction that changes its slab in a rectangular box), by sampling.
fn reachable(grid: &PmeGrid, x: RVec, margin: f32) -> Vec<usize> {
    let mut ranks: Vec<usize> =
        (-100..=100).map(|i| grid.rank_of([x[0] + margin * i as f32 / 100.0, x[1], x[2]])).collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// With a displacement margin, each PE sends to exactly the PME ranks its atoms can reach
/// within it (against a search by sampling), each PME rank hears from exactly the PEs that
/// can reach it, the buffers hold far less than the system, and steps whose atoms move less
/// than the margin are exact on every path, across plans.
fn partners_follow_the_margin(rt: &Runtime) -> CaseResult {
    const MARGIN: f32 = 0.05;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 1, 1]);
    for pme in layouts(n) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        for path in Route::all() {
            let mut homes = homes(rt, &structure, &pme)?;
            let mut redist = path
                .apply(Redistribution::builder(rt, grid.clone()))
                .displacement_margin(MARGIN)
                .collective_build(&homes[me])?;
            for step in 0..5u64 {
                if step % 4 == 3 {
                    redist.collective_plan(&homes[me])?;
                }
                if step % 4 == 0 || step % 4 == 3 {
                    // Partners as planned, against the search, for every PE.
                    let reached: Vec<Vec<usize>> = homes
                        .iter()
                        .map(|h| {
                            let mut ranks: Vec<usize> =
                                h.iter().flat_map(|p| reachable(&grid, p.x, MARGIN)).collect();
                            ranks.sort_unstable();
                            ranks.dedup();
                            ranks
                        })
                        .collect();
                    let particle = particle_pes(n, &pme);
                    if me < particle && !homes[me].is_empty() {
                        ensure!(
                            redist.targets() == reached[me].as_slice(),
                            "{path}, PME on {pme:?}, step {step}: PE {me} sends to {:?}, its atoms reach {:?}",
                            redist.targets(),
                            reached[me]
                        );
                    }
                    if let Some(rank) = redist.pme_rank() {
                        let want: Vec<usize> = (0..particle)
                            .filter(|&p| {
                                reached[p].contains(&rank)
                                    || (homes[p].is_empty() && p % grid.ranks() == rank)
                            })
                            .collect();
                        ensure!(
                            redist.sources() == want,
                            "{path}, PME on {pme:?}, step {step}: rank {rank} hears from {:?}, expected {want:?}",
                            redist.sources()
                        );
                    }
                }
                let context = format!("{path}, PME on {pme:?}, margin {MARGIN} nm, step {step}");
                checked_step(&mut redist, &grid, &homes, me, step, &context)?;
                moves(&mut homes, step);
            }
            // Buffers by the share, not the system: at most four times the bytes (out and
            // back) of the atoms this PE holds, as a particle PE or as a PME rank, plus the
            // transport's slots.
            let held = homes[me].len().max(
                redist
                    .pme_rank()
                    .map_or(0, |r| homes.iter().flatten().filter(|p| grid.rank_of(p.x) == r).count()),
            );
            let share = held * (size_of::<Particle>() + size_of::<RVec>());
            let (symmetric, local) = (redist.symmetric_bytes(), redist.local_bytes());
            ensure!(
                symmetric + local <= 4 * share + 16 * 1024,
                "{path}, PME on {pme:?}: {symmetric} symmetric and {local} local bytes on PE {me}, more \
                 than four times its share of {share}"
            );
            // The MPI paths keep every buffer in the PE's own memory: symmetric only the
            // agreement's lines.
            let one_sided = path.is_one_sided();
            ensure!(
                one_sided || (symmetric <= 16 * 1024 && local >= share),
                "{path}, PME on {pme:?}: {symmetric} symmetric and {local} local bytes on PE {me} for a \
                 share of {share}: the MPI paths' buffers belong in local memory"
            );
        }
        if me == 0 {
            println!("  PME on PEs {pme:?}: partners as the margin reaches, every path exact");
        }
    }
    Ok(())
}

/// Moves one atom of PE `pe` (a third of the way into its home atoms) by `jump` nm along x, on
/// every PE's copy of `homes`: the step must report it as moved too far on every PE, naming
/// that atom and PE; then a new plan, and the next step checked exactly (relayed as `relays`
/// says, or sent directly).
fn jump_is_reported(
    redist: &mut Redistribution<'_>,
    homes: &mut [Vec<Particle>],
    relays: Option<&[Option<usize>]>,
    me: usize,
    pe: usize,
    jump: f32,
    context: &str,
) -> CaseResult {
    let grid = redist.grid().clone();
    let lx = grid.box_vectors()[0][0];
    let i = homes[pe].len() / 3;
    homes[pe][i].x[0] = (homes[pe][i].x[0] + jump) % lx;
    let atom = homes[pe][i].global;
    let delivered = redist.redistribute(&homes[me])?;
    let forces = vec![[0.0; 3]; delivered.received().len()];
    let mut home_forces = vec![[0.0; 3]; homes[me].len()];
    let outcome = delivered.return_forces_from(&forces, &mut home_forces);
    ensure!(
        matches!(outcome, Err(Error::MovedTooFar { atom: a, pe: p }) if a == atom && p == pe),
        "{context}: PE {me} reported {outcome:?}, expected atom {atom} on PE {pe}"
    );
    redist.collective_plan(&homes[me])?;
    checked_step_via(redist, &grid, homes, relays, me, 1, &format!("{context}, after a new plan"))
}

/// With a displacement margin, an atom that moves one and a half slabs (past every slab it
/// could reach) is reported by every PE, PME-only PEs included; a new plan goes on.
fn an_atom_past_its_margin_is_reported_everywhere(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 1, 1]);
    let lx = structure.pbc.diagonal()[0];
    for pme in layouts(n).into_iter().filter(|l| l.len() >= 2) {
        let grid = PmeGrid::new(structure.pbc.vectors(), SPACING, &pme)?;
        let slab = lx / grid.ranks() as f32;
        for path in routes() {
            let mut homes = homes(rt, &structure, &pme)?;
            let mut redist = path
                .apply(Redistribution::builder(rt, grid.clone()))
                .displacement_margin(0.05)
                .collective_build(&homes[me])?;
            let pe = particle_pes(n, &pme) - 1;
            let context = format!("{path}, PME on {pme:?}");
            jump_is_reported(&mut redist, &mut homes, None, me, pe, 1.5 * slab, &context)?;
        }
    }
    Ok(())
}

/// Pencils (2 × 2 over every PE, 1 × 2 over the last two): every atom on exactly its rank
/// and every force back on every path, with the default reach and with a margin, and an
/// atom that moves past its margin along y alone reported everywhere.
fn pencils_place_every_atom(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 2, 1]);
    let ly = structure.pbc.diagonal()[1];
    for (pme, dims) in [((0..n).collect::<Vec<_>>(), [2, 2]), (vec![n - 2, n - 1], [1, 2])] {
        let grid = PmeGrid::builder(structure.pbc.vectors(), &pme).spacing(SPACING).pencils(dims).build()?;
        ensure!(grid.is_pencil() && grid.dims() == dims, "{dims:?} pencils");
        for path in Route::all() {
            for margin in [None, Some(0.05)] {
                let mut homes = homes(rt, &structure, &pme)?;
                let builder = path.apply(Redistribution::builder(rt, grid.clone()));
                let builder = match margin {
                    Some(nm) => builder.displacement_margin(nm),
                    None => builder,
                };
                let mut redist = builder.collective_build(&homes[me])?;
                for step in 0..5u64 {
                    if step == 3 {
                        redist.collective_plan(&homes[me])?;
                    }
                    let context =
                        format!("{path}, {dims:?} pencils on {pme:?}, margin {margin:?}, step {step}");
                    checked_step(&mut redist, &grid, &homes, me, step, &context)?;
                    moves(&mut homes, step);
                }
                if margin.is_some() {
                    // Half the box along y: past every column it could reach.
                    let pe = particle_pes(n, &pme) - 1;
                    let i = homes[pe].len() / 2;
                    homes[pe][i].x[1] = (homes[pe][i].x[1] + ly / 2.0) % ly;
                    let atom = homes[pe][i].global;
                    let delivered = redist.redistribute(&homes[me])?;
                    let forces = vec![[0.0; 3]; delivered.received().len()];
                    let mut home_forces = vec![[0.0; 3]; homes[me].len()];
                    let outcome = delivered.return_forces_from(&forces, &mut home_forces);
                    ensure!(
                        matches!(outcome, Err(Error::MovedTooFar { atom: a, pe: p }) if a == atom && p == pe),
                        "{path}, {dims:?} pencils: PE {me} reported {outcome:?}, expected atom {atom} on PE {pe}"
                    );
                }
            }
        }
        if me == 0 {
            println!(
                "  {dims:?} pencils on PEs {pme:?}: every path placed every atom and returned every force"
            );
        }
    }
    Ok(())
}

/// Wrong calls fail on every PE with an error that says what to do, and leave the
/// redistribution usable.
fn bad_calls_fail_cleanly(rt: &Runtime) -> CaseResult {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let structure = water([2, 1, 1]);
    let box_vectors = structure.pbc.vectors();
    let config = |outcome: pme_redist::Result<PmeGrid>, expected: &str| -> CaseResult {
        match outcome {
            Err(Error::Config(m)) if m.contains(expected) => Ok(()),
            other => Err(format!("expected a configuration error with {expected:?}, got {other:?}").into()),
        }
    };
    config(PmeGrid::new(box_vectors, 0.0, &[0]), "positive length")?;
    config(PmeGrid::new(box_vectors, f32::NAN, &[0]), "positive length")?;
    config(PmeGrid::new(box_vectors, SPACING, &[]), "at least one PME rank")?;
    let thin = PmeGrid::builder(box_vectors, &[0, 1, 2]).sizes([8, 8, 8]).build();
    ensure!(
        matches!(
            thin,
            Err(Error::TooManyRanks {
                axis: 'x',
                lines: 8,
                ranks: 3,
                thinnest: 2,
                most: 2,
                order: 4,
                pencils: false
            })
        ),
        "8 planes over 3 ranks: {thin:?}"
    );
    ensure!(
        thin.is_err_and(|e| e.to_string().contains("use at most 2 PME ranks")),
        "the message says how many"
    );
    config(PmeGrid::builder(box_vectors, &[0]).sizes([6, 8, 8]).build(), "too coarse")?;
    let mut rotated = box_vectors;
    rotated[0][1] = 0.5;
    config(PmeGrid::new(rotated, SPACING, &[0]), "box[0][1] (a_y) is 0.5, not 0")?;

    // A PME-only PE given home atoms: every PE fails, naming it.
    let pme_only = format!("PE {} is a PME-only rank", n - 1);
    let pme = vec![n - 1];
    let grid = PmeGrid::new(box_vectors, SPACING, &pme)?;
    let mut homes = homes(rt, &structure, &pme)?;
    homes[n - 1] = homes[0][..3].to_vec();
    let outcome = Redistribution::builder(rt, grid.clone())
        .links(Links::uniform(Transport::Get))
        .collective_build(&homes[me]);
    ensure!(
        matches!(outcome, Err(Error::CollectiveConfig(ref m)) if m.contains(&pme_only)),
        "PE {me}: {:?}",
        outcome.err()
    );
    homes[n - 1].clear();

    // Links one redistribution cannot take, on one PE or all, and different paths on
    // different PEs: refused on every PE, naming what to change.
    let two_one_sided = Links::new(Transport::Put, Transport::Get);
    let odd_one = if me == n - 1 { two_one_sided } else { Links::new(Transport::Put, Transport::Mpi) };
    let outcome = Redistribution::builder(rt, grid.clone()).links(odd_one).collective_build(&homes[me]);
    ensure!(
        matches!(outcome, Err(Error::Config(ref m)) if m.contains("cannot take")),
        "PE {me}: {:?}",
        outcome.err()
    );
    // MPI's one-sided transport, which the redistribution has not: refused, naming it.
    let outcome = Redistribution::builder(rt, grid.clone())
        .links(Links::new(Transport::Put, Transport::MpiRma))
        .collective_build(&homes[me]);
    ensure!(
        matches!(outcome, Err(Error::Config(ref m)) if m.contains("no mpi-rma transport")),
        "PE {me}: {:?}",
        outcome.err()
    );
    let path = if me == 0 { Path::Mpi } else { Path::OneSided };
    let outcome = Redistribution::builder(rt, grid.clone()).path(path).collective_build(&homes[me]);
    ensure!(
        matches!(outcome, Err(Error::CollectiveConfig(ref m)) if m.contains("different redistribution paths")),
        "PE {me}: {:?}",
        outcome.err()
    );

    for path in Route::all() {
        let mut redist =
            path.apply(Redistribution::builder(rt, grid.clone())).collective_build(&homes[me])?;
        // A new plan that gives the PME-only PE atoms fails on every PE and keeps the old one.
        let mut misplaced = homes.clone();
        misplaced[n - 1] = homes[0][..3].to_vec();
        let outcome = redist.collective_plan(&misplaced[me]);
        ensure!(
            matches!(outcome, Err(Error::CollectiveConfig(ref m)) if m.contains(&pme_only)),
            "{path}: PE {me}: {outcome:?}"
        );
        let mut extra = homes[me].clone();
        extra.push(homes[0][0]);
        let outcome = redist.redistribute(&extra).map(|_| ());
        ensure!(
            matches!(outcome, Err(Error::PlanOutOfDate { pe, home, planned }) if pe == me && home == planned + 1),
            "{path}: {outcome:?}"
        );
        // Forces that are not one per received atom, on every PE: refused before anything
        // moves; the next step goes on.
        let delivered = redist.redistribute(&homes[me])?;
        let mut forces = vec![[1.0; 3]; delivered.received().len() + 1];
        let mut back = vec![[0.0; 3]; homes[me].len()];
        let outcome = delivered.return_forces_from(&forces, &mut back);
        ensure!(
            matches!(outcome, Err(Error::Config(ref m)) if m.contains("forces for")),
            "{path}: {outcome:?}"
        );
        forces.pop();
        redist.redistribute(&homes[me])?.return_forces_from(&forces, &mut back)?;
        ensure!(back.iter().all(|f| *f == [1.0; 3]), "{path}: after the refusals");
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
    let cases: [(&[&str], &str); 4] = [
        (&["--pme-pes", "3"], "--pme-pes 3 does not fit a job of 2 PEs"),
        (&["--replicate", "1,1,1", "--spacing", "0.5"], "too coarse for interpolation order 4"),
        (&["--gro", "/nonexistent/box.gro"], "cannot read /nonexistent/box.gro"),
        (&["--types", "/nonexistent/types.txt"], "cannot read /nonexistent/types.txt"),
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
        a_triclinic_box_works_on_every_path,
        home_counts_grow_and_shrink_across_plans,
        spread_and_gather_match_serial_on_every_path,
        moved_too_far_is_reported_everywhere,
        partners_follow_the_margin,
        an_atom_past_its_margin_is_reported_everywhere,
        bad_calls_fail_cleanly,
        threads_place_and_pack_alike,
    ];
    let mut cases = cases.to_vec();
    cases.push(pe_test::Case { name: "pencils_place_every_atom", pes: &[4], run: pencils_place_every_atom });
    cases.push(pe_test::Case {
        name: "auto_takes_the_path_of_each_link",
        pes: &[2, 4],
        run: auto_takes_the_path_of_each_link,
    });
    cases.push(pe_test::Case {
        name: "relayed_atoms_reach_their_ranks_on_every_path",
        pes: &[3, 4, 6],
        run: relayed_atoms_reach_their_ranks_on_every_path,
    });
    cases.push(pe_test::Case {
        name: "a_relayed_atom_past_its_margin_is_reported_everywhere",
        pes: &[3, 4, 6],
        run: a_relayed_atom_past_its_margin_is_reported_everywhere,
    });
    cases.push(pe_test::Case {
        name: "example_rejects_bad_options_on_every_pe",
        pes: &[2],
        run: example_rejects_bad_options_on_every_pe,
    });
    pe_test::main_with_variants("pme", &cases, pe_test::DIRECT_AND_LIBRARY);
}
