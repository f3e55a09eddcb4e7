//! The halo exchange under the launcher with 2, 3, 4 and 8 PEs, driven through its public
//! engine API: grids split along x, y, z and in two and three dimensions, one and two pulses
//! along each dimension, a rectangular box, a triclinic box and an inhomogeneous slab with
//! empty domains. After construction and after every repartition the halo sets are checked
//! against a brute-force search; at the last step the forces and the virial against a serial
//! computation; every step one-sided and MPI must be bit-identical. Per-atom state of several
//! types migrates with the atoms and per-atom fields travel along the plan, with values that
//! encode where they came from. Misuse and bad input fail cleanly on every PE.

use std::time::Duration;

use md_demo::cluster::PairList;
use md_demo::force::{ForceField, Topology, domain_forces};
use md_demo::types::TypeTable;
use md_demo::{Structure, motion, verify};
use md_halo::{DdGrid, Dlb, Error, HaloExchange, PbcBox, PeriodicImages, RVec};
use onesided::{Collectives, Links, Path, Runtime, Transport};
use onesided_suite::ensure;
use onesided_suite::pe_test::{self, CaseResult, TWO_THREE_FOUR};

const NSTLIST: usize = 4;

fn water(copies: [usize; 3]) -> Structure {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/spc216.gro");
    Structure::read_gro(std::path::Path::new(path))
        .expect("data/spc216.gro")
        .replicate(copies)
        .expect("copies")
}

/// The kinds of system the grids are tested on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    /// SPC water, 2x2x2 boxes: 5 184 atoms in a 3.72 nm cube.
    Cube,
    /// The same liquid in a triclinic cell of the same lattice (b and c lean by half a box
    /// along x, and c along y): a periodic liquid without seams.
    Triclinic,
    /// 2x2x1 boxes of water in a box three times as tall: a slab with vacuum above, so that
    /// domains along z are empty or hold everything.
    Slab,
}

fn system(shape: Shape) -> Structure {
    match shape {
        Shape::Cube => water([2, 2, 2]),
        Shape::Triclinic => {
            let mut s = water([2, 2, 2]);
            let l = s.pbc.diagonal()[0];
            s.pbc =
                PbcBox::new([[l, 0.0, 0.0], [l / 2.0, l, 0.0], [l / 2.0, l / 2.0, l]]).expect("valid box");
            s.positions = s.positions.iter().map(|&x| s.pbc.wrap(x)).collect();
            s
        }
        Shape::Slab => {
            let mut s = water([2, 2, 1]);
            let [lx, ly, lz] = s.pbc.diagonal();
            s.pbc = PbcBox::rectangular([lx, ly, 3.0 * lz]).expect("valid box");
            s
        }
    }
}

/// The grids each PE count is tested on, with a cutoff and a system: every dimension split,
/// one and two pulses along each, 2-D and 3-D grids.
fn grids(n: usize) -> Vec<([usize; 3], f32, Shape)> {
    match n {
        2 => vec![
            ([2, 1, 1], 0.9, Shape::Cube),
            ([1, 2, 1], 0.9, Shape::Triclinic),
            ([1, 1, 2], 0.9, Shape::Slab),
        ],
        3 => vec![
            ([3, 1, 1], 1.3, Shape::Cube),
            ([1, 3, 1], 1.3, Shape::Triclinic),
            ([1, 1, 3], 0.9, Shape::Slab),
        ],
        4 => vec![
            ([2, 2, 1], 0.9, Shape::Cube),
            ([4, 1, 1], 1.0, Shape::Triclinic),
            ([1, 2, 2], 0.9, Shape::Triclinic),
            ([1, 1, 4], 1.0, Shape::Cube),
            ([1, 2, 2], 0.9, Shape::Slab),
        ],
        8 => vec![([2, 2, 2], 0.8, Shape::Cube), ([2, 2, 2], 0.8, Shape::Triclinic)],
        _ => Vec::new(),
    }
}

fn topology(s: &Structure) -> Result<Topology, Box<dyn std::error::Error>> {
    Ok(Topology::new(s, &TypeTable::builtin(), &s.title)?)
}

/// A tag that says which atom an entry belongs to, in a type of odd size.
fn tag(global: u32) -> [u8; 3] {
    [global as u8, (global >> 8) as u8, (global >> 16) as u8]
}

/// Checks that the engine's per-atom state followed its atoms, and that fields spread along
/// the plan arrived at every local atom from the atom's home PE.
fn check_state_and_fields(
    halo: &mut HaloExchange<'_>,
    ids: &[u32],
    tags: &[[u8; 3]],
) -> Result<(), Box<dyn std::error::Error>> {
    let me = halo.grid().pe_of(halo.cell());
    let n_home = halo.home_count();
    ensure!(ids.len() == n_home && tags.len() == n_home, "state arrays of {} and {}", ids.len(), tags.len());
    for i in 0..n_home {
        let g = halo.global_indices()[i];
        ensure!(
            ids[i] == g && tags[i] == tag(g),
            "home atom {i} is {g} but its state says {} {:?}",
            ids[i],
            tags[i]
        );
    }
    // Each home atom's global index and its PE, sent to every domain that holds it.
    let origin: Vec<[u32; 2]> = halo.global_indices()[..n_home].iter().map(|&g| [g, me as u32]).collect();
    let spread = halo.collective_spread(&origin)?;
    ensure!(
        spread.len() == halo.local_count(),
        "{} spread entries for {} local atoms",
        spread.len(),
        halo.local_count()
    );
    let grid = halo.grid().clone();
    for (i, (&[g, pe], s)) in spread.iter().zip(halo.reference_fractions()).enumerate() {
        let home = grid.pe_of(grid.cell_of_fraction(s.map(|c| c - c.floor())));
        ensure!(
            g == halo.global_indices()[i] && pe as usize == home,
            "local atom {i} ({}) got the field of atom {g} from PE {pe}, expected from PE {home}",
            halo.global_indices()[i]
        );
    }
    Ok(())
}

/// How many halo atoms lie in the Verlet-buffer band along some dimension: beyond the cutoff
/// from the domain's upper face, within the range (cutoff plus buffer).
fn buffer_band(halo: &HaloExchange<'_>, cutoff: f32) -> usize {
    let grid = halo.grid();
    let upper = grid.upper(halo.cell());
    halo.reference_fractions()[halo.home_count()..]
        .iter()
        .filter(|s| {
            (0..3).any(|d| {
                let beyond = s[d] - upper[d];
                beyond >= cutoff as f64 / grid.pbc().height(d) && beyond < grid.reach(d)
            })
        })
        .count()
}

/// Runs `steps` MD steps on `path` through the engine API and returns per-step fingerprints
/// of the coordinates after move_x and of the home forces after move_f, after checking the
/// halo (at the start and after every repartition), the state and fields, and the forces and
/// virial (last step).
fn run(
    rt: &Runtime,
    s: &Structure,
    grid: &DdGrid,
    field: &ForceField,
    (path, images): (Path, PeriodicImages),
    steps: u64,
    parallel_min: usize,
) -> Result<Vec<(u64, u64)>, Box<dyn std::error::Error>> {
    run_with(rt, s, grid, field, (path, images, Dlb::No), steps, parallel_min).map(|(prints, _)| prints)
}

/// Per step, fingerprints of the coordinates after move_x and of the home forces after move_f.
type Prints = Vec<(u64, u64)>;

/// A load that makes domains unequal whatever the system: each home atom costs a microsecond
/// more per step of the domain's index sum, so the boundaries of a balanced run move even on
/// uniform water (the same on every path and every run: no clock in it).
fn skewed_load(halo: &HaloExchange<'_>) -> Duration {
    let [i, j, k] = halo.cell();
    Duration::from_nanos(halo.home_count() as u64 * 1000 * (1 + 2 * (i + j + k) as u64))
}

/// [`run`] with load balancing `dlb`: every step records [`skewed_load`]. Returns the grid
/// the run ended on as well.
fn run_with(
    rt: &Runtime,
    s: &Structure,
    grid: &DdGrid,
    field: &ForceField,
    (path, images, dlb): (Path, PeriodicImages, Dlb),
    steps: u64,
    parallel_min: usize,
) -> Result<(Prints, DdGrid), Box<dyn std::error::Error>> {
    let cutoff = field.cutoff as f32;
    let topology = topology(s)?;
    let mut halo = HaloExchange::builder(rt, grid.clone())
        .path(path)
        .periodic_images(images)
        .parallel_min(parallel_min)
        .load_balancing(dlb)
        .collective_from_global(&s.positions)?;
    // Every PE checks, the result agreed, so that none goes on alone into the next collective.
    let undivided = grid.dims().contains(&1);
    let images_made = rt.max_u64_one(halo.images().len() as u64)? > 0;
    ensure!(
        (images == PeriodicImages::Kernel && undivided) == images_made
            && (images == PeriodicImages::Kernel || halo.stored_count() == halo.local_count())
            && halo.images().len() == halo.local_count() - halo.stored_count()
            && halo.coordinates().len() == halo.stored_count(),
        "{images:?} on {:?}: {} stored of {} local atoms, {} images",
        grid.dims(),
        halo.stored_count(),
        halo.local_count(),
        halo.images().len()
    );
    verify::collective_check_halo(&halo, &s.positions)?;
    // The brute-force comparison covers the buffer band, not only pairs within the cutoff.
    let band = rt.max_u64_one(buffer_band(&halo, cutoff) as u64)?;
    ensure!(
        band > 0,
        "no halo atom in the Verlet-buffer band on any PE: the check would not see one missing"
    );
    let mut velocities = vec![[0.0f32; 3]; halo.home_count()];
    let mut ids: Vec<u32> = halo.global_indices()[..halo.home_count()].to_vec();
    let mut tags: Vec<[u8; 3]> = ids.iter().map(|&g| tag(g)).collect();
    let mut prints = Vec::new();
    let (mut list, mut stale): (Option<PairList>, bool) = (None, false);
    for step in 0..steps {
        if step > 0 && step % NSTLIST as u64 == 0 {
            let before = verify::gather_positions(rt, &halo, s.len())?;
            halo.collective_repartition(&mut [&mut velocities, &mut ids, &mut tags])?;
            verify::collective_check_halo(&halo, &before)?;
            check_state_and_fields(&mut halo, &ids, &tags)?;
            stale = true;
        }
        let mut view = halo.move_x()?;
        // After a repartition the list is searched again into its own buffers, as the
        // example does.
        let list = match &mut list {
            Some(list) if !stale => list,
            _ => PairList::search_into(&mut list, view.halo(), &topology, field)?,
        };
        stale = false;
        if step + 1 == steps {
            // The plain cell-list loop, from both ends of every pair, agrees on this domain
            // (over the images made as the halo makes them, then folded back); the pair-list
            // kernel overwrites its forces below.
            let (all, _) = domain_forces(view.halo(), &topology, field);
            let mut local = view.local();
            local.fold_forces(&all)?;
            let plain = local.forces.to_vec();
            list.forces_into(local.coordinates, local.forces)?;
            let largest = plain.iter().flatten().fold(0f32, |m, f| m.max(f.abs()));
            let worst = plain
                .iter()
                .flatten()
                .zip(local.forces.iter().flatten())
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            ensure!(
                worst <= 1e-5 * largest,
                "{path} on {:?}: the pair-list kernel and the plain loop differ by {worst} (largest force {largest})",
                grid.dims()
            );
        } else {
            let local = view.local();
            list.forces_into(local.coordinates, local.forces)?;
        }
        let x_print = verify::fingerprint(view.halo().coordinates());
        if dlb != Dlb::No {
            let load = skewed_load(view.halo());
            view.record_load(load);
        }
        let mut shift_forces = view.move_f()?;
        shift_forces += list.shift_forces();
        let forces = halo.home_mut().forces.to_vec();
        prints.push((x_print, verify::fingerprint(&forces)));
        if step + 1 == steps {
            let deviation = verify::deviation(rt, &halo, &forces, &shift_forces, &topology, field)?;
            ensure!(
                deviation.force < 1e-4 && deviation.virial < 1e-4,
                "{path} with {images:?} images on {:?}: forces and virial deviate {:.2e} and {:.2e} from the serial computation",
                grid.dims(),
                deviation.force,
                deviation.virial
            );
        }
        let home_ids = halo.global_indices()[..halo.home_count()].to_vec();
        for ((x, v), &g) in halo.home_mut().coordinates.iter_mut().zip(&mut velocities).zip(&home_ids) {
            motion::advance(g, step, x, v);
        }
    }
    let whole = check_near_rows(&halo)?;
    let staggers = grid.dims().iter().filter(|&&n| n > 1).count() >= 2;
    ensure!(
        dlb == Dlb::No || !staggers || whole == *grid || halo.grid().near().is_some(),
        "balancing moved the staggered rows of {:?}, but PE {} holds the whole grid",
        grid.dims(),
        rt.my_pe()
    );
    Ok((prints, whole))
}

/// The whole grid, where balancing left each PE only the rows near its domain
/// ([`DdGrid::near`]) checked against them: every row a PE holds is the whole grid's, and it
/// holds the rows of every domain its halo reaches (within the pulses along each dimension).
fn check_near_rows(halo: &HaloExchange<'_>) -> Result<DdGrid, Box<dyn std::error::Error>> {
    let whole = halo.collective_whole_grid()?;
    let near = halo.grid();
    let Some(centre) = near.near() else { return Ok(whole) };
    ensure!(
        centre == halo.cell(),
        "PE's grid holds the rows near {centre:?}, its domain is {:?}",
        halo.cell()
    );
    let (dims, pulses) = (whole.dims(), whole.pulses());
    for pe in 0..whole.len() {
        let cell = whole.cell_of(pe);
        let reached = (0..3).all(|d| whole.steps(centre, cell, d) <= pulses[d]);
        for d in 0..3 {
            ensure!(
                !reached || near.holds(d, cell),
                "domain {centre:?} does not hold the row along {d} of {cell:?}, which its halo reaches"
            );
            if near.holds(d, cell) {
                ensure!(
                    near.bounds(d, cell) == whole.bounds(d, cell),
                    "domain {centre:?} holds {:?} along {d} for {cell:?}, the whole grid {:?} (dims {dims:?})",
                    near.bounds(d, cell),
                    whole.bounds(d, cell)
                );
            }
        }
    }
    Ok(whole)
}

fn grid_for(
    s: &Structure,
    dims: [usize; 3],
    cutoff: f32,
    n: usize,
) -> Result<DdGrid, Box<dyn std::error::Error>> {
    Ok(DdGrid::new(dims, s.pbc, cutoff + motion::buffer_for(NSTLIST, &s.pbc), n)?)
}

/// [`run`] on the one-sided and the MPI path, which must leave the same bits; returns MPI's.
fn paths_agree(
    rt: &Runtime,
    s: &Structure,
    grid: &DdGrid,
    field: &ForceField,
    images: PeriodicImages,
) -> Result<Prints, Box<dyn std::error::Error>> {
    let onesided = run(rt, s, grid, field, (Path::OneSided, images), 9, 4096)?;
    let mpi = run(rt, s, grid, field, (Path::Mpi, images), 9, 4096)?;
    ensure!(
        onesided == mpi,
        "one-sided and MPI differ on {:?} (staggered: {}) with cutoff {}, images by {images:?}",
        grid.dims(),
        grid.is_staggered(),
        field.cutoff
    );
    Ok(mpi)
}

fn grids_halos_forces_and_paths_agree(rt: &Runtime) -> CaseResult {
    // Per link class, the path of an `Auto` halo, alternating between grids: on 2 emulated
    // nodes (scripts/test-nodes) a PE's neighbours are of both classes, so its pulses mix the
    // one-sided and the MPI paths (on one node, the same-node path serves every pulse).
    // The third and fifth differ with the size of message, so that pulses of one halo take
    // different links, and a pulse's coordinates others than its forces.
    let mixed: [Links; 6] = [
        Links::new(Transport::Put, Transport::Mpi),
        Links::new(Transport::MpiRma, Transport::Get),
        "same-node=mpi,other-node=put; from 4k: same-node=put,other-node=mpi; from 12k: get".parse()?,
        Links::new(Transport::Mpi, Transport::Get),
        "same-node=put,other-node=mpi; from 512: mpi; from 6k: same-node=put,other-node=put".parse()?,
        Links::new(Transport::Put, Transport::MpiRma),
    ];
    for (g, (dims, cutoff, shape)) in grids(rt.n_pes()).into_iter().enumerate() {
        let s = system(shape);
        let grid = grid_for(&s, dims, cutoff, rt.n_pes())?;
        let field = ForceField::new(cutoff as f64);
        for images in [PeriodicImages::Halo, PeriodicImages::Kernel] {
            let mpi = paths_agree(rt, &s, &grid, &field, images)?;
            if images == PeriodicImages::Halo {
                let links = &mixed[g % mixed.len()];
                rt.collective_set_links(links.clone())?;
                let auto = run(rt, &s, &grid, &field, (Path::Auto, images), 9, 4096)?;
                ensure!(auto == mpi, "{links} and MPI differ on {dims:?} ({shape:?}) with cutoff {cutoff}");
            }
        }
        if rt.my_pe() == 0 {
            println!(
                "  {shape:?}, grid {dims:?}, cutoff {cutoff} nm, pulses {:?}: halo, state, fields, forces, \
                 virial and paths agree, images by the halo and by the kernel",
                grid.pulses()
            );
        }
    }
    Ok(())
}

/// Boundaries that follow the load ([`skewed_load`]) on every grid: after each repartition the
/// halo equals the brute-force search on the uneven cells, state and fields follow their
/// atoms, the forces and virial at the end match the serial computation, and one-sided and
/// MPI leave the same bits; every PE ends on the same boundaries, moved along every split
/// dimension, none narrower than the grid's least width.
fn load_balancing_on_every_grid(rt: &Runtime) -> CaseResult {
    let mut staggered = 0;
    for (dims, cutoff, shape) in grids(rt.n_pes()) {
        let s = system(shape);
        let grid = grid_for(&s, dims, cutoff, rt.n_pes())?;
        let field = ForceField::new(cutoff as f64);
        let images = PeriodicImages::Kernel;
        let (onesided, moved) = run_with(rt, &s, &grid, &field, (Path::OneSided, images, Dlb::Yes), 9, 4096)?;
        let (mpi, moved_mpi) = run_with(rt, &s, &grid, &field, (Path::Mpi, images, Dlb::Yes), 9, 4096)?;
        ensure!(onesided == mpi, "one-sided and MPI differ under load balancing on {dims:?} ({shape:?})");
        ensure!(moved == moved_mpi, "the paths ended on different boundaries on {dims:?}");
        staggered += usize::from(check_boundaries(rt, &grid, &moved)?);
        if rt.my_pe() == 0 {
            println!(
                "  {shape:?}, grid {dims:?}: boundaries moved to {:?} / {:?} / {:?}; halo, forces and paths agree",
                rows_only(&moved, 0),
                rows_only(&moved, 1),
                rows_only(&moved, 2)
            );
        }
    }
    // Loads that differ from row to row stagger the 2-D and 3-D grids' rows.
    let two_d = grids(rt.n_pes()).iter().any(|(dims, ..)| dims.iter().filter(|&&n| n > 1).count() >= 2);
    ensure!(staggered > 0 || !two_d, "no grid of {} PEs ended with staggered rows", rt.n_pes());
    Ok(())
}

/// The rows of boundaries along `d` a grid holds, without their indices.
fn rows_only(grid: &DdGrid, d: usize) -> Vec<&[f64]> {
    grid.rows_of_bounds(d).into_iter().map(|(_, b)| b).collect()
}

/// Every PE holds the same boundaries, they moved from `before` along every split dimension,
/// and no domain is narrower than the least width.
/// Returns whether the rows ended staggered.
fn check_boundaries(
    rt: &Runtime,
    before: &DdGrid,
    moved: &DdGrid,
) -> Result<bool, Box<dyn std::error::Error>> {
    let bounds: Vec<f64> =
        (0..3).flat_map(|d| moved.rows_of_bounds(d).into_iter().flat_map(|(_, b)| b.to_vec())).collect();
    let hash = verify::fingerprint(&bounds) >> 1;
    let mut agreed = [hash, (i64::MAX as u64) - hash];
    rt.max_u64(&mut agreed)?;
    ensure!(agreed[0] == (i64::MAX as u64) - agreed[1], "the PEs ended on different boundaries");
    for d in (0..3).filter(|&d| before.dims()[d] > 1) {
        let rows = moved.rows_of_bounds(d);
        ensure!(rows != before.rows_of_bounds(d), "the boundaries along {d} did not move: {rows:?}");
        let narrowest = rows.iter().flat_map(|(_, b)| b.windows(2).map(|w| w[1] - w[0])).fold(1.0, f64::min);
        ensure!(
            narrowest >= moved.min_width(d),
            "a domain along {d} is {narrowest} wide, below the least width {}",
            moved.min_width(d)
        );
    }
    // Rows of their own (staggered) need two split dimensions.
    let split = before.dims().iter().filter(|&&n| n > 1).count();
    ensure!(split >= 2 || !moved.is_staggered(), "{:?}: the boundaries ended staggered", before.dims());
    Ok(moved.is_staggered())
}

/// A slab beside vacuum on domains along its normal, some empty: balanced on the atoms alone
/// (the measured time of an engine is noise to a test), the loaded domains shrink, with three
/// or more until held at their least width, the empty ones grow; the halo and the forces stay
/// right throughout and the report counts the limited moves. The same with room provisioned
/// for balancing (`DdGrid::with_balancing_room`: with three or more domains a second pulse,
/// and domains narrower than the range).
fn load_balancing_to_the_limits(rt: &Runtime) -> CaseResult {
    let s = system(Shape::Slab);
    let n = rt.n_pes();
    let grid = grid_for(&s, [1, 1, n], 0.9, n)?;
    balance_to_the_limits(rt, &s, &grid, false)?;
    let roomy = grid.with_balancing_room(0.3)?;
    ensure!(n < 3 || roomy.pulses()[2] == 2, "room for {n} domains: pulses {:?}", roomy.pulses());
    balance_to_the_limits(rt, &s, &roomy, true)
}

fn balance_to_the_limits(rt: &Runtime, s: &Structure, grid: &DdGrid, room: bool) -> CaseResult {
    let n = rt.n_pes();
    let field = ForceField::new(0.9);
    let topology = topology(s)?;
    let mut halo = HaloExchange::builder(rt, grid.clone())
        .periodic_images(PeriodicImages::Kernel)
        .load_balancing(Dlb::Yes)
        .collective_from_global(&s.positions)?;
    let first = rt.max_u64_one(halo.home_count() as u64)?;
    let mut velocities = vec![[0.0f32; 3]; halo.home_count()];
    let steps = 4 * 30;
    for step in 0..steps {
        if step > 0 && step % NSTLIST == 0 {
            let before = verify::gather_positions(rt, &halo, s.len())?;
            halo.collective_repartition(&mut [&mut velocities])?;
            verify::collective_check_halo(&halo, &before)?;
        }
        let mut view = halo.move_x()?;
        let mut list = PairList::for_domain(view.halo(), &topology, &field)?;
        let local = view.local();
        list.forces_into(local.coordinates, local.forces)?;
        let load = Duration::from_micros(view.halo().home_count() as u64);
        view.record_load(load);
        let mut shift = view.move_f()?;
        shift += list.shift_forces();
        if step + 1 == steps {
            let forces = halo.home_mut().forces.to_vec();
            let deviation = verify::deviation(rt, &halo, &forces, &shift, &topology, &field)?;
            ensure!(
                deviation.force < 1e-4 && deviation.virial < 1e-4,
                "on the balanced slab: forces and virial deviate {:.2e} and {:.2e} from the serial computation",
                deviation.force,
                deviation.virial
            );
            break;
        }
        let ids = halo.global_indices()[..halo.home_count()].to_vec();
        for ((x, v), &g) in halo.home_mut().coordinates.iter_mut().zip(&mut velocities).zip(&ids) {
            motion::advance(g, step as u64, x, v);
        }
    }
    let report = halo.collective_load_report()?;
    let largest = rt.max_u64_one(halo.home_count() as u64)?;
    check_boundaries(rt, grid, halo.grid())?;
    let widths: Vec<f64> = halo.grid().bounds(2, [0; 3]).windows(2).map(|w| w[1] - w[0]).collect();
    let least = halo.grid().min_width(2);
    ensure!(report.balancing && report.moves > 0, "with {n} domains along a slab: {report}");
    // Two domains can halve the slab; with more, the slab's share of each is narrower than
    // the least width of one pulse, which a second pulse lets them pass.
    let at_limit = report.limited > 0 && widths.iter().any(|&w| w < least * 1.01);
    let past_one_pulse = widths.iter().any(|&w| w < 2.0 * least * 0.99);
    ensure!(
        if n == 2 {
            10 * largest <= 6 * first
        } else {
            (if room { past_one_pulse } else { at_limit }) && largest < first
        },
        "with {n} domains along a slab: widths {widths:?} (least {least}), {} limited moves, the \
         fullest domain {first} atoms at the start and {largest} at the end",
        report.limited
    );
    ensure!(report.steps == (steps * n) as u64, "{} steps measured of {}", report.steps, steps * n);
    if rt.my_pe() == 0 {
        let pulses = grid.pulses()[2];
        println!(
            "  slab on {n} domains along z, {pulses} pulse(s): widths {widths:?} (least {least:.4}); {report}"
        );
    }
    Ok(())
}

/// `Dlb::Auto` leaves equal domains while the loads are even, turns on once the imbalance
/// costs 2 % of the run time, and then moves the boundaries; `Dlb::No` measures and reports
/// the same imbalance and never moves them.
fn automatic_balancing_waits_for_a_cost(rt: &Runtime) -> CaseResult {
    let s = system(Shape::Cube);
    let n = rt.n_pes();
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    for mode in [Dlb::Auto, Dlb::No] {
        let mut halo = HaloExchange::builder(rt, grid.clone())
            .load_balancing(mode)
            .collective_from_global(&s.positions)?;
        ensure!(halo.load_balancing() == mode, "built with {mode}, reports {}", halo.load_balancing());
        let mut moved_at = None;
        for step in 1..=12 * NSTLIST {
            // Even loads for six repartitions, then PE 0 takes twice the others'.
            let heavy = step > 6 * NSTLIST && rt.my_pe() == 0;
            let mut view = halo.move_x()?;
            // Recorded loads far above the real step time, so that the waiting they imply
            // is clear of a busy machine's slow steps.
            view.record_load(Duration::from_millis(if heavy { 2000 } else { 1000 }));
            view.move_f()?;
            if step % NSTLIST == 0 {
                halo.collective_repartition(&mut [])?;
                if moved_at.is_none() && !halo.grid().is_uniform() {
                    moved_at = Some(step / NSTLIST);
                }
            }
        }
        let report = halo.collective_load_report()?;
        match mode {
            Dlb::Auto => ensure!(
                moved_at.is_some_and(|r| r >= 7) && report.balancing,
                "auto: boundaries first moved at repartition {moved_at:?} (loads uneven in the 7th interval): {report}"
            ),
            _ => ensure!(moved_at.is_none() && !report.balancing, "no: the boundaries moved: {report}"),
        }
        ensure!(
            report.imbalance > 0.05 && report.waiting > 0.02,
            "{mode}: the imbalance went unseen: {report}"
        );
    }
    Ok(())
}

/// A load report between two repartitions (GROMACS's `-resethway` takes one mid-run) leaves
/// the next repartition the loads of its whole interval: with a report before every
/// repartition the boundaries move as they do without one (to rounding), and the report
/// counts every step once.
fn reports_between_repartitions_keep_the_loads(rt: &Runtime) -> CaseResult {
    let s = system(Shape::Cube);
    let n = rt.n_pes();
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    let (mut bounds, mut moves) = (Vec::new(), Vec::new());
    for report_first in [false, true] {
        let mut halo = HaloExchange::builder(rt, grid.clone())
            .load_balancing(Dlb::Yes)
            .collective_from_global(&s.positions)?;
        let mut reported_steps = 0;
        for step in 1..=3 * NSTLIST {
            let mut view = halo.move_x()?;
            // PE p's load grows with p: the boundaries must move toward the last PE.
            view.record_load(Duration::from_millis(1000 + 500 * rt.my_pe() as u64));
            view.move_f()?;
            if step % NSTLIST == 0 {
                if report_first {
                    reported_steps = halo.collective_load_report()?.steps;
                }
                halo.collective_repartition(&mut [])?;
            }
        }
        let report = halo.collective_load_report()?;
        ensure!(
            report.moves >= 1 && report.steps == (3 * NSTLIST * n) as u64,
            "report before each repartition {report_first}: {report}"
        );
        moves.push(report.moves);
        ensure!(
            !report_first || reported_steps == (3 * NSTLIST * n) as u64,
            "the last report before a repartition counted {reported_steps} steps"
        );
        bounds.push(halo.grid().bounds(0, [0; 3]).to_vec());
    }
    let first = &bounds[0];
    ensure!(first[n - 1] > (n - 1) as f64 / n as f64, "the last domain did not shrink: {first:?}");
    ensure!(
        moves[0] == moves[1] && first.iter().zip(&bounds[1]).all(|(a, b)| (a - b).abs() < 1e-9),
        "without reports {} moves to {first:?}, with a report before each repartition {} to {:?}",
        moves[0],
        moves[1],
        bounds[1]
    );
    Ok(())
}

/// Under `--dlb auto`, balancing that makes the steps slower is turned off again and the
/// boundaries go back to equal domains, as GROMACS does: PE 0 records twice the others' load
/// from the start (far above the real step time, as in the test above), so balancing turns
/// on at the third repartition; from then on every step sleeps 30 ms (slower than before),
/// and it must be off again within 20 intervals, the grid uniform a few repartitions later,
/// and stay so (the steps without it are faster again). On a 1-D grid, and with 4 or 8 PEs
/// on a grid of staggered rows too, whose way back every PE takes on the rows it holds.
fn automatic_balancing_turns_off_when_slower(rt: &Runtime) -> CaseResult {
    let s = system(Shape::Cube);
    let n = rt.n_pes();
    let mut grids = vec![[n, 1, 1]];
    if n.is_multiple_of(4) {
        grids.push([2, 2, n / 4]);
    }
    for dims in grids {
        let grid = grid_for(&s, dims, 0.9, n)?;
        turns_off_when_slower(rt, &s, grid)?;
    }
    Ok(())
}

fn turns_off_when_slower(rt: &Runtime, s: &Structure, grid: DdGrid) -> CaseResult {
    let dims = grid.dims();
    let mut halo =
        HaloExchange::builder(rt, grid).load_balancing(Dlb::Auto).collective_from_global(&s.positions)?;
    let (mut on_at, mut off_at, mut uniform_at, mut staggered) = (None, None, None, false);
    for repartition in 1..=40 {
        let slow = on_at.is_some() && off_at.is_none();
        for _ in 0..NSTLIST {
            let mut view = halo.move_x()?;
            view.record_load(Duration::from_millis(if rt.my_pe() == 0 { 2000 } else { 1000 }));
            if slow {
                std::thread::sleep(Duration::from_millis(30));
            }
            view.move_f()?;
        }
        halo.collective_repartition(&mut [])?;
        // The whole grid, the same on every PE (each holds the rows near it on a staggered one).
        let whole = check_near_rows(&halo)?;
        let uniform = whole.is_uniform();
        staggered |= whole.is_staggered();
        if on_at.is_none() && !uniform {
            on_at = Some(repartition);
        }
        if on_at.is_some() && off_at.is_none() && halo.collective_load_report()?.turned_off > 0 {
            off_at = Some(repartition);
        }
        if off_at.is_some() && uniform_at.is_none() && uniform {
            uniform_at = Some(repartition);
            ensure!(halo.grid().near().is_none(), "{dims:?}: back at equal domains, PE holds rows near it");
        }
        ensure!(
            uniform_at.is_none() || uniform,
            "{dims:?}, repartition {repartition}: balancing came back on"
        );
    }
    let report = halo.collective_load_report()?;
    ensure!(
        on_at == Some(3),
        "{dims:?}: balancing first moved the boundaries at repartition {on_at:?}, not 3: {report}"
    );
    let (on, off) = (on_at.unwrap_or(0), off_at.unwrap_or(u64::MAX));
    ensure!(off > on && off <= on + 20, "{dims:?}: turned on at {on}, off at {off_at:?}: {report}");
    ensure!(
        uniform_at.is_some_and(|u| u <= off + 15),
        "{dims:?}: back to equal domains at {uniform_at:?}: {report}"
    );
    ensure!(report.turned_off == 1 && !report.balancing && !report.off_for_good, "{dims:?}: {report}");
    let split = dims.iter().filter(|&&d| d > 1).count();
    ensure!(staggered == (split >= 2), "{dims:?}: rows staggered on the way: {staggered}");
    if rt.my_pe() == 0 {
        println!("  grid {dims:?}: on at {on}, off at {off}, equal domains again at {uniform_at:?}");
    }
    Ok(())
}

/// The real-space part of Ewald electrostatics (PME's, GROMACS's `ewald-rtol` 1e-5) on every
/// grid: the clustered kernel with its exclusion corrections against the plain loop on each
/// domain, and the forces and virial after move_f against the serial computation (with the
/// corrections of the pairs within each molecule); one-sided and MPI the same bits.
fn ewald_real_space_on_every_grid(rt: &Runtime) -> CaseResult {
    for (dims, cutoff, shape) in grids(rt.n_pes()) {
        let s = system(shape);
        let grid = grid_for(&s, dims, cutoff, rt.n_pes())?;
        let field = ForceField::ewald(cutoff as f64, pme_redist::ewald_coefficient(cutoff as f64, 1e-5)?);
        // Images by the kernel: their exclusion corrections go through the image table.
        let kernel = PeriodicImages::Kernel;
        let onesided = run(rt, &s, &grid, &field, (Path::OneSided, kernel), 4, 4096)?;
        let mpi = run(rt, &s, &grid, &field, (Path::Mpi, kernel), 4, 4096)?;
        ensure!(onesided == mpi, "one-sided and MPI differ under Ewald on {dims:?} ({shape:?})");
        if rt.my_pe() == 0 {
            println!(
                "  {shape:?}, grid {dims:?}, cutoff {cutoff} nm: Ewald real-space forces and virial agree"
            );
        }
    }
    Ok(())
}

/// `grid` with its inner boundaries moved alternately up and down by a tenth of a domain (on
/// uneven cells, as load balancing leaves them), or `None` where that is too narrow for its
/// pulses.
fn uneven(grid: &DdGrid) -> Option<DdGrid> {
    let bounds = std::array::from_fn(|d| {
        let n = grid.dims()[d];
        (0..=n)
            .map(|c| {
                let shift = if c == 0 || c == n {
                    0.0
                } else if c % 2 == 1 {
                    0.1
                } else {
                    -0.1
                };
                (c as f64 + shift) / n as f64
            })
            .collect()
    });
    grid.with_bounds(bounds).ok()
}

/// `grid` with staggered boundaries, as GROMACS's load balancing leaves them: each row of
/// domains along y (per x slab) and along z (per x, y column) with its inner boundaries moved
/// up or down by a share of a domain, alternating from row to row and boundary to
/// boundary, so that neighbouring rows differ; the largest share of 0.2, 0.1 and 0.05 the
/// grid allows, or `None` where it has one split dimension or none fits.
fn staggered(grid: &DdGrid) -> Option<DdGrid> {
    let dims = grid.dims();
    if dims.iter().filter(|&&n| n > 1).count() < 2 {
        return None;
    }
    [0.2, 0.1, 0.05].into_iter().find_map(|share| {
        let rows: [Vec<Vec<f64>>; 3] = std::array::from_fn(|d| {
            let n = dims[d];
            let count: usize = dims[..d].iter().product();
            (0..count)
                .map(|r| {
                    (0..=n)
                        .map(|c| {
                            // The row's indices summed: a checkerboard over the columns.
                            let indices = if d == 2 { r / dims[1] + r % dims[1] } else { r };
                            let sign = if (indices + c) % 2 == 0 { 1.0 } else { -1.0 };
                            let shift = if c == 0 || c == n || d == 0 { 0.0 } else { share * sign };
                            (c as f64 + shift) / n as f64
                        })
                        .collect()
                })
                .collect()
        });
        grid.with_rows(rows).ok().filter(DdGrid::is_staggered)
    })
}

/// Staggered boundaries (each row of domains with its own, [`staggered`]) on the 2-D and 3-D
/// grids: the halo equals the brute-force search after every repartition (atoms migrating
/// between rows), the forces and virial match the serial computation with pairs owned by the
/// zones the atoms arrived along, one-sided and MPI leave the same bits, images by the halo
/// and by the kernel; and load balancing from the staggered rows, each moving by its loads.
fn staggered_grids_halos_forces_and_paths_agree(rt: &Runtime) -> CaseResult {
    for (dims, cutoff, shape) in staggered_grids(rt.n_pes()) {
        let s = system(shape);
        let grid = grid_for(&s, dims, cutoff, rt.n_pes())?;
        let grid = staggered(&grid).ok_or_else(|| format!("{dims:?} ({shape:?}) could not be staggered"))?;
        let field = ForceField::new(cutoff as f64);
        for images in [PeriodicImages::Halo, PeriodicImages::Kernel] {
            paths_agree(rt, &s, &grid, &field, images)?;
        }
        // Load balancing from staggered rows: each row moves by its own loads.
        let balanced = (PeriodicImages::Kernel, Dlb::Yes);
        let (onesided, moved) =
            run_with(rt, &s, &grid, &field, (Path::OneSided, balanced.0, balanced.1), 9, 4096)?;
        let (mpi, moved_mpi) = run_with(rt, &s, &grid, &field, (Path::Mpi, balanced.0, balanced.1), 9, 4096)?;
        ensure!(
            onesided == mpi && moved == moved_mpi,
            "one-sided and MPI differ under load balancing from staggered {dims:?} ({shape:?})"
        );
        check_boundaries(rt, &grid, &moved)?;
        if rt.my_pe() == 0 {
            println!(
                "  {shape:?}, grid {dims:?}, pulses {:?}, staggered rows y {:?} z {:?}: halo, forces and \
                 paths agree",
                grid.pulses(),
                rows_only(&grid, 1),
                rows_only(&grid, 2)
            );
        }
    }
    Ok(())
}

/// The grids the staggered cases run on: those of [`grids`] with two split dimensions or
/// more, and with 8 PEs also rows of 4 domains: along y with 2 pulses (so the corner limits
/// take rows 2 pulses above, and the wrap is not the neighbour below), and with 1 pulse
/// along x and along y (so some rows are not neighbours of each other).
fn staggered_grids(n: usize) -> Vec<([usize; 3], f32, Shape)> {
    let mut list: Vec<_> =
        grids(n).into_iter().filter(|(dims, ..)| dims.iter().filter(|&&d| d > 1).count() >= 2).collect();
    if n == 8 {
        list.extend([
            ([2, 4, 1], 1.0, Shape::Cube),
            ([4, 2, 1], 0.6, Shape::Cube),
            ([1, 4, 2], 0.6, Shape::Cube),
        ]);
    }
    list
}

/// The plan every domain builds collectively, against `md_halo::model`, which computes every
/// domain's plan in one process without a runtime: the same pulses, the same counts, on
/// equal domains, on uneven ones and on staggered ones.
fn model_matches_the_plan(rt: &Runtime) -> CaseResult {
    let equal = grids(rt.n_pes()).into_iter().map(|(dims, cutoff, shape)| (dims, cutoff, shape, 0));
    let moved = grids(rt.n_pes()).into_iter().map(|(dims, cutoff, shape)| (dims, cutoff, shape, 1));
    let stagger =
        staggered_grids(rt.n_pes()).into_iter().map(|(dims, cutoff, shape)| (dims, cutoff, shape, 2));
    let mut uneven_grids = 0;
    for (dims, cutoff, shape, kind) in equal.chain(moved).chain(stagger) {
        let s = system(shape);
        let grid = grid_for(&s, dims, cutoff, rt.n_pes())?;
        let grids = match kind {
            0 => vec![grid],
            1 => {
                uneven_grids += usize::from(uneven(&grid).is_some());
                uneven(&grid).into_iter().collect()
            }
            _ => vec![staggered(&grid).ok_or_else(|| format!("{dims:?} could not be staggered"))?],
        };
        for grid in grids {
            let halo = HaloExchange::builder(rt, grid.clone()).collective_from_global(&s.positions)?;
            let model = md_halo::model::halo_traffic(&grid, &s.positions);
            let mine = &model[rt.my_pe()];
            let counts: Vec<(usize, usize)> = mine.pulses.iter().map(|p| (p.sent, p.received)).collect();
            ensure!(
                mine.home == halo.home_count() && mine.local() == halo.local_count(),
                "{dims:?} ({shape:?}): the model has {} home and {} local atoms, the plan {} and {}",
                mine.home,
                mine.local(),
                halo.home_count(),
                halo.local_count()
            );
            ensure!(
                counts == halo.pulse_counts(),
                "{dims:?} ({shape:?}): the model's pulses {counts:?} against the plan's {:?}",
                halo.pulse_counts()
            );
            let to: Vec<usize> = mine.pulses.iter().map(|p| p.to).collect();
            let expected: Vec<usize> = grid
                .exchange_order()
                .into_iter()
                .flat_map(|d| {
                    let below = grid.pe_of(grid.neighbour(grid.cell_of(rt.my_pe()), d, false));
                    std::iter::repeat_n(below, grid.pulses()[d])
                })
                .collect();
            ensure!(to == expected, "{dims:?}: the model sends to {to:?}, the plan to {expected:?}");
        }
    }
    ensure!(uneven_grids > 0, "no grid of {} PEs took uneven domains", rt.n_pes());
    Ok(())
}

fn thread_count_does_not_change_results(rt: &Runtime) -> CaseResult {
    let (dims, cutoff, shape) = grids(rt.n_pes())[0];
    let s = system(shape);
    let grid = grid_for(&s, dims, cutoff, rt.n_pes())?;
    for images in [PeriodicImages::Halo, PeriodicImages::Kernel] {
        let mut results = Vec::new();
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
            // A parallel threshold of one atom sends every pulse's packing and unpacking
            // through the pool, not only the force kernel.
            let prints = pool.install(|| {
                let field = ForceField::new(cutoff as f64);
                run(rt, &s, &grid, &field, (Path::OneSided, images), 6, 1).map_err(|e| e.to_string())
            })?;
            results.push(prints);
        }
        ensure!(
            results.iter().all(|r| *r == results[0]),
            "1 and 2 threads gave different bits, images by {images:?}"
        );
    }
    Ok(())
}

/// Repartition moves atoms to their new domains; an atom that jumped further than one domain
/// since the last repartition (possible only with four or more domains along a dimension)
/// is an error on every PE.
fn repartition_and_jumps(rt: &Runtime) -> CaseResult {
    let s = water([2, 2, 2]);
    let n = rt.n_pes();
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    let mut halo = HaloExchange::builder(rt, grid.clone()).collective_from_global(&s.positions)?;
    // Atom 5 jumps half the box along x, wherever it is.
    let jump = s.pbc.diagonal()[0] / 2.0;
    let home: Vec<u32> = halo.global_indices()[..halo.home_count()].to_vec();
    for (x, &g) in halo.home_mut().coordinates.iter_mut().zip(&home) {
        if g == 5 {
            x[0] += jump;
        }
    }
    let outcome = halo.collective_repartition(&mut []);
    let landed = grid.cell_of_position([s.positions[5][0] + jump, s.positions[5][1], s.positions[5][2]]);
    if n >= 4 {
        match outcome {
            Err(e @ Error::MovedTooFar { atom: 5, from, to }) => {
                // Every PE names the same domains: where atom 5 lived and where it went.
                let home = grid.cell_of_position(s.positions[5]);
                ensure!(from == home && to == landed, "{from:?} -> {to:?}, expected {home:?} -> {landed:?}");
                ensure!(e.to_string().contains("repartition more often"), "{e}")
            }
            other => return Err(format!("a jump of {n}/2 domains gave {other:?}").into()),
        }
        return Ok(());
    }
    outcome?;
    // The atom now lives where its new position is, and no atom was lost or duplicated.
    let holds = halo.global_indices()[..halo.home_count()].contains(&5);
    ensure!(
        holds == (halo.cell() == landed),
        "atom 5 on PE {} (domain {:?}, its new home {landed:?})",
        rt.my_pe(),
        halo.cell()
    );
    let all = verify::gather_positions(rt, &halo, s.len())?;
    ensure!(all.len() == s.len(), "{} atoms after repartition", all.len());
    Ok(())
}

/// An engine that hands each PE its own home atoms, in its own order, keeps that order; an
/// atom outside its PE's domain, state arrays of the wrong length or of different sizes on
/// different PEs, and a field of the wrong length are errors on every PE.
fn engine_api_and_misuse(rt: &Runtime) -> CaseResult {
    let s = water([2, 2, 2]);
    let n = rt.n_pes();
    let me = rt.my_pe();
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    // Each PE's atoms, in descending global order: the engine's order, kept until repartition.
    let mut mine: Vec<u32> =
        (0..s.len() as u32).filter(|&g| grid.pe_of_position(s.positions[g as usize]) == me).collect();
    mine.reverse();
    let positions: Vec<RVec> = mine.iter().map(|&g| s.positions[g as usize]).collect();
    let mut halo = HaloExchange::builder(rt, grid.clone()).collective_build(&positions, &mine)?;
    ensure!(halo.global_indices()[..halo.home_count()] == mine[..], "the engine's order was not kept");
    verify::collective_check_halo(&halo, &s.positions)?;
    // A stray atom: PE 0 claims an atom of the last domain.
    let stray = (0..s.len() as u32)
        .find(|&g| grid.pe_of_position(s.positions[g as usize]) == n - 1)
        .ok_or("no atom")?;
    let (mut bad_positions, mut bad_ids) = (positions.clone(), mine.clone());
    if me == 0 {
        bad_positions.push(s.positions[stray as usize]);
        bad_ids.push(stray);
    }
    match HaloExchange::builder(rt, grid.clone()).collective_build(&bad_positions, &bad_ids) {
        Err(Error::NotHome { atom, pe: 0, belongs, .. }) if atom == stray as usize => {
            ensure!(belongs == grid.cell_of(n - 1), "atom {atom} said to belong to {belongs:?}")
        }
        other => return Err(format!("a stray atom gave {:?}", other.err()).into()),
    }
    // State arrays: one too short on the last PE; then a different type on PE 0.
    let mut velocities = vec![[0.0f32; 3]; halo.home_count() - usize::from(me == n - 1)];
    let message = halo.collective_repartition(&mut [&mut velocities]).expect_err("short state").to_string();
    ensure!(message.contains(&format!("PE {} passes per-atom state", n - 1)), "{message}");
    velocities.resize(halo.home_count(), [0.0; 3]);
    let mut narrow = vec![0u16; halo.home_count()];
    let mut wide = vec![0u64; halo.home_count()];
    let state: &mut [&mut dyn md_halo::AtomState] =
        if me == 0 { &mut [&mut narrow] } else { &mut [&mut wide] };
    let message = halo.collective_repartition(state).expect_err("different state").to_string();
    ensure!(message.contains("of 2 to 8 bytes per atom"), "{message}");
    // A field of the wrong length on PE 1.
    let field = vec![1.0f32; halo.home_count() + usize::from(me == 1)];
    let message = halo.collective_spread(&field).expect_err("long field").to_string();
    ensure!(message.contains("PE 1 passes collective_spread"), "{message}");
    // Fields of different types on different PEs, and a field of zero-sized entries.
    let (narrow, wide) = (vec![7u32; halo.home_count()], vec![7u64; halo.home_count()]);
    let spread = if me == 0 {
        halo.collective_spread(&narrow).map(|_| ())
    } else {
        halo.collective_spread(&wide).map(|_| ())
    };
    let message = spread.expect_err("different field types").to_string();
    ensure!(message.contains("fields of 4 to 8 bytes per atom"), "{message}");
    let message = halo.collective_spread(&vec![(); halo.home_count()]).expect_err("zero-sized").to_string();
    ensure!(message.contains("of nonzero size"), "{message}");
    // A position that is not finite, at repartition: named on every PE.
    let last_home = halo.global_indices()[halo.home_count() - 1];
    let saved = halo.coordinates()[halo.home_count() - 1];
    if me == n - 1 {
        let count = halo.home_count();
        halo.home_mut().coordinates[count - 1][1] = f32::NAN;
    }
    let blown = rt.max_u64_one(if me == n - 1 { last_home as u64 } else { 0 })?;
    match halo.collective_repartition(&mut [&mut velocities]) {
        Err(Error::NotFinite { atom, pe: Some(pe) }) if atom as u64 == blown && pe == n - 1 => {}
        other => return Err(format!("a NaN position gave {other:?}").into()),
    }
    let count = halo.home_count();
    halo.home_mut().coordinates[count - 1] = saved;
    // Grids that differ between PEs, though both have n domains.
    let other = grid_for(&s, [1, n, 1], 0.9, n)?;
    let mine = if me == 0 { other } else { grid.clone() };
    let message = HaloExchange::builder(rt, mine)
        .collective_from_global(&s.positions)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(message.contains("the PEs pass different grids"), "{message:?}");
    // After refused calls the exchange still works.
    halo.collective_repartition(&mut [&mut velocities])?;
    verify::collective_check_halo(&halo, &s.positions)?;
    // With the images left to the kernel: the fold wants one force per local atom, and an
    // image's force lands on its atom, times its box vectors in the shift forces.
    let mut halo = HaloExchange::builder(rt, grid.clone())
        .periodic_images(PeriodicImages::Kernel)
        .collective_from_global(&s.positions)?;
    ensure!(!halo.images().is_empty(), "a grid of one domain along y and z makes no images");
    let (stored, local_count) = (halo.stored_count(), halo.local_count());
    let mut view = halo.move_x()?;
    let x = view.halo().positions_with_images();
    let mut local = view.local();
    let message = local.fold_forces(&vec![[0.0f32; 3]; stored]).expect_err("too few").to_string();
    ensure!(message.contains(&format!("one force per local atom ({local_count})")), "{message}");
    let k = local.images.len() - 1;
    let image = local.images[k];
    let mut all = vec![[0.0f32; 3]; local_count];
    all[stored + k] = [1.0, 2.0, 4.0];
    let shift = local.fold_forces(&all)?;
    ensure!(local.forces[image.atom as usize] == [1.0, 2.0, 4.0], "fold");
    for d in 0..3 {
        ensure!(shift.along(d) == [1.0, 2.0, 4.0].map(|c| c * image.cells[d] as f64), "shift along {d}");
    }
    let atom = x[image.atom as usize];
    ensure!(x[stored + k] == std::array::from_fn(|c| atom[c] + image.vector[c]), "image position");
    view.move_f()?;
    Ok(())
}

/// Repartition carries each home atom's force with it (the force encodes the atom's global
/// index), the kernel's plus what the engine added to the home forces after `move_f` (the
/// meeting point of PME's and other forces), and with a Verlet buffer set, an atom that moved more than half of it is named on
/// every PE after the repartition, and the exchange goes on; a buffer that differs between PEs or
/// exceeds the range is refused on every PE.
fn forces_migrate_and_buffer_is_checked(rt: &Runtime) -> CaseResult {
    let s = water([2, 2, 2]);
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    let force_of = |g: u32| [g as f32, -(g as f32), 0.5 * g as f32];
    let mut halo =
        HaloExchange::builder(rt, grid.clone()).verlet_buffer(0.1).collective_from_global(&s.positions)?;
    ensure!(halo.max_displacement() == 0.0, "displacement right after the build");
    // Forces as move_f leaves them, one per home atom; then every atom moves 0.3 of a domain
    // along x, so that atoms change PEs (0.04 nm: within half the buffer).
    let home: Vec<u32> = halo.global_indices()[..halo.home_count()].to_vec();
    let mut view = halo.move_x()?;
    let local = view.local();
    local.forces.fill([0.0; 3]);
    for (f, &g) in local.forces.iter_mut().zip(&home) {
        *f = force_of(g);
    }
    view.move_f()?;
    // The engine's other forces (PME's, say), added to the totals.
    let other_of = |g: u32| [0.25 * g as f32, 1.0, -2.0];
    for (f, &g) in halo.home_mut().forces.iter_mut().zip(&home) {
        for (c, o) in f.iter_mut().zip(other_of(g)) {
            *c += o;
        }
    }
    let total_of = |g: u32| -> RVec { std::array::from_fn(|d| force_of(g)[d] + other_of(g)[d]) };
    let step = (0.3 * s.pbc.diagonal()[0] / n as f32).min(0.04);
    for x in halo.home_mut().coordinates.iter_mut() {
        x[0] += step;
    }
    ensure!((halo.max_displacement() - step).abs() < 1e-6, "displacement {}", halo.max_displacement());
    let mut velocities: Vec<RVec> =
        halo.global_indices()[..halo.home_count()].iter().map(|&g| force_of(g)).collect();
    halo.collective_repartition(&mut [&mut velocities])?;
    let globals = halo.global_indices()[..halo.home_count()].to_vec();
    let forces = halo.home_mut().forces.to_vec();
    for ((f, v), &g) in forces.iter().zip(&velocities).zip(&globals) {
        ensure!(*f == total_of(g) && *v == force_of(g), "PE {me}: atom {g} has force {f:?}");
    }
    ensure!(halo.max_displacement() == 0.0, "displacement right after the repartition");
    // Atom 7 moves 0.06 nm, more than half the 0.1 nm buffer: named on every PE, after the
    // repartition was made.
    let holder = halo.global_indices()[..halo.home_count()].iter().position(|&g| g == 7);
    if let Some(i) = holder {
        halo.home_mut().coordinates[i][1] += 0.06;
    }
    let pe = rt.max_u64_one(if holder.is_some() { me as u64 } else { 0 })? as usize;
    match halo.collective_repartition(&mut [&mut velocities]) {
        Err(e @ Error::BufferExceeded { atom: 7, .. }) => {
            ensure!(e.scope() == md_halo::ErrorScope::EveryPe, "scope of {e}");
            ensure!(e.to_string().contains(&format!("atom 7 on PE {pe} moved 0.06")), "{e}");
        }
        other => return Err(format!("a move of 0.06 nm with a 0.1 nm buffer gave {other:?}").into()),
    }
    // The exchange goes on from the new partition: nothing moved since, so the next
    // repartition passes, and the halo is that of the moved atoms.
    halo.collective_repartition(&mut [&mut velocities])?;
    let moved: Vec<RVec> = s
        .positions
        .iter()
        .enumerate()
        .map(|(g, &x)| s.pbc.wrap([x[0] + step, x[1] + if g == 7 { 0.06 } else { 0.0 }, x[2]]))
        .collect();
    verify::collective_check_halo(&halo, &moved)?;
    // Buffers that differ between PEs, or exceed the range: refused on every PE.
    let buffer = if me == 0 { 0.1 } else { 0.2 };
    match HaloExchange::builder(rt, grid.clone()).verlet_buffer(buffer).collective_from_global(&s.positions) {
        Err(e @ Error::CollectiveConfig(_)) => ensure!(e.to_string().contains("Verlet buffers"), "{e}"),
        other => return Err(format!("different buffers gave {:?}", other.err()).into()),
    }
    match HaloExchange::builder(rt, grid).verlet_buffer(2.0).collective_from_global(&s.positions) {
        Err(e @ Error::CollectiveConfig(_)) => {
            ensure!(e.to_string().contains("part of the grid's range"), "{e}")
        }
        other => return Err(format!("a buffer beyond the range gave {:?}", other.err()).into()),
    }
    Ok(())
}

/// The exchange in `f64`: the same plan as in `f32` (decisions are made in `f64` fractions of
/// the same values), coordinates that round to the `f32` run's bits, forces summed in `f64`
/// within rounding of the `f32` sums, atoms and forces migrating alike; PEs that disagree on
/// the real type are refused at the build on every PE.
fn double_precision_matches_single(rt: &Runtime) -> CaseResult {
    let s = water([2, 2, 2]);
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    let wide: Vec<[f64; 3]> = s.positions.iter().map(|x| x.map(f64::from)).collect();
    let mut single = HaloExchange::builder(rt, grid.clone()).collective_from_global(&s.positions)?;
    let mut double = HaloExchange::builder(rt, grid.clone()).real::<f64>().collective_from_global(&wide)?;
    // A force on every local atom that encodes its global index, in both precisions.
    let force = |g: u32| [g as f64 + 0.1, -(g as f64) / 3.0, 1.0 + g as f64 * 1e-3];
    for round in 0..2 {
        ensure!(single.global_indices() == double.global_indices(), "round {round}: the plans differ");
        let ids = single.global_indices().to_vec();
        let mut a = single.move_x()?;
        let mut b = double.move_x()?;
        let (la, lb) = (a.local(), b.local());
        for (i, (x, y)) in la.coordinates.iter().zip(lb.coordinates.iter()).enumerate() {
            ensure!(*x == y.map(|c| c as f32), "round {round}: local atom {i} at {x:?} and {y:?}");
        }
        for ((fa, fb), &g) in la.forces.iter_mut().zip(lb.forces.iter_mut()).zip(&ids) {
            *fb = force(g);
            *fa = force(g).map(|c| c as f32);
        }
        a.move_f()?;
        b.move_f()?;
        let (ha, hb) = (single.home_mut().forces.to_vec(), double.home_mut().forces.to_vec());
        for (i, (x, y)) in ha.iter().zip(&hb).enumerate() {
            for d in 0..3 {
                ensure!(
                    (f64::from(x[d]) - y[d]).abs() <= 1e-5 * y[d].abs().max(1.0),
                    "home atom {i}: {x:?} and {y:?}"
                );
            }
        }
        // Every atom moves a tenth of a domain along x, and both repartition.
        let step = s.pbc.diagonal()[0] / n as f32 / 10.0;
        single.home_mut().coordinates.iter_mut().for_each(|x| x[0] += step);
        double.home_mut().coordinates.iter_mut().for_each(|x| x[0] = f64::from(x[0] as f32 + step));
        single.collective_repartition(&mut [])?;
        double.collective_repartition(&mut [])?;
        // The forces moved with their atoms alike in both precisions.
        ensure!(single.global_indices() == double.global_indices(), "PE {me}: the partitions differ");
        let (fa, fb) = (single.home_mut().forces.to_vec(), double.home_mut().forces.to_vec());
        for (i, (x, y)) in fa.iter().zip(&fb).enumerate() {
            let close = (0..3).all(|d| (f64::from(x[d]) - y[d]).abs() <= 1e-5 * y[d].abs().max(1.0));
            ensure!(close, "PE {me}: home atom {i} after the repartition: {x:?} and {y:?}");
        }
    }
    let mismatched = if me == 0 {
        HaloExchange::builder(rt, grid).real::<f64>().collective_from_global(&wide).map(drop)
    } else {
        HaloExchange::builder(rt, grid).collective_from_global(&s.positions).map(drop)
    };
    match mismatched {
        Err(e @ Error::CollectiveConfig(_)) => ensure!(e.to_string().contains("real types"), "{e}"),
        other => return Err(format!("PEs of different real types gave {other:?}").into()),
    }
    Ok(())
}

/// Every structure in data/ (water models with virtual sites and lone pairs, methanol, argon,
/// a dodecahedron, an octahedron, a fully triclinic box, slabs beside vacuum), as shipped,
/// on a grid chosen for the PE count: halo sets after every repartition, forces and virial,
/// paths bit-identical.
fn every_shipped_structure(rt: &Runtime) -> CaseResult {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/data");
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gro"))
        .collect();
    files.sort();
    ensure!(files.len() >= 10, "{} structures in data/", files.len());
    let cutoff = 0.7;
    for file in files {
        let s = Structure::read_gro(&file)?;
        let grid = DdGrid::choose(rt.n_pes(), s.pbc, cutoff + motion::buffer_for(NSTLIST, &s.pbc))?;
        let field = ForceField::new(cutoff as f64);
        let kernel = PeriodicImages::Kernel;
        let onesided = run(rt, &s, &grid, &field, (Path::OneSided, kernel), 5, 4096)?;
        let mpi = run(rt, &s, &grid, &field, (Path::Mpi, kernel), 5, 4096)?;
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        ensure!(onesided == mpi, "one-sided and MPI differ on {name}");
        if rt.my_pe() == 0 {
            println!(
                "  {name}: {} atoms, grid {:?}, pulses {:?}: verified",
                s.len(),
                grid.dims(),
                grid.pulses()
            );
        }
    }
    Ok(())
}

/// The example under the launcher with bad input: every PE reports the error and the job
/// fails, within a time limit.
fn bad_input_fails_on_every_pe(rt: &Runtime) -> CaseResult {
    if rt.my_pe() != 0 {
        return Ok(());
    }
    let example = onesided_suite::launch::example_binary("halo_exchange")?;
    let dir = std::env::temp_dir().join(format!("onesided-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let write = |name: &str, text: &str| -> Result<String, Box<dyn std::error::Error>> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path.to_str().ok_or("path")?.to_string())
    };
    let atom = "    1SOL     OW    1    .230    .628    .113\n";
    let malformed = write("malformed.gro", &format!("title\n 2\n{atom}"))?;
    let skewed = write("skewed.gro", &format!("title\n 1\n{atom} 2 2 2 0 0 1.5 0 0 0\n"))?;
    let unknown = write("unknown.gro", "title\n 1\n    1LIG    XQ1    1    .230    .628    .113\n 2 2 2\n")?;
    let cases: [(usize, Vec<&str>, &str); 7] = [
        (2, vec!["--gro", "/nonexistent/box.gro"], "cannot read /nonexistent/box.gro"),
        (2, vec!["--gro", &malformed], "line 4: the file ends after 1 of the 2 atoms"),
        (2, vec!["--gro", &skewed], "too skewed: |bx| = 1.5000 nm is more than half of ax"),
        (2, vec!["--gro", &unknown, "--replicate", "1,1,1"], "--types FILE"),
        (2, vec!["--replicate", "1,1,1", "--cutoff", "0.9"], "not shorter than half the box"),
        (2, vec!["--grid", "2,2,1"], "has 4 domains but the job has 2 PEs"),
        // Five domains of 0.74 nm along x need three pulses for a 1.5 nm cutoff.
        (
            5,
            vec!["--replicate", "2,2,2", "--grid", "5,1,1", "--cutoff", "1.5"],
            "more domains than fit the cutoff",
        ),
    ];
    for (pes, args, expected) in cases {
        let mut command = onesided_suite::launch::command(pes, &example);
        let output =
            onesided_suite::launch::output_with_timeout(command.args(&args), Duration::from_secs(180))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(!output.status.success(), "{args:?} succeeded");
        for pe in 0..pes {
            ensure!(
                stderr.lines().any(|l| l.contains(&format!("PE {pe}:")) && l.contains(expected)),
                "{args:?}: PE {pe} did not report {expected:?}:\n{stderr}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Per-home-atom values in global order on one PE: each atom's value encodes its global
/// index and its home PE; the root (the last PE) gets all of them in order, the others none,
/// after a repartition has mixed the home orders. A PE with the wrong count, an index given
/// twice or missing, and a root out of range are errors on every PE.
fn home_values_gather_in_global_order(rt: &Runtime) -> CaseResult {
    let s = water([2, 2, 2]);
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let grid = grid_for(&s, [n, 1, 1], 0.9, n)?;
    let mut halo = HaloExchange::builder(rt, grid).collective_from_global(&s.positions)?;
    for x in halo.home_mut().coordinates.iter_mut() {
        x[0] += 0.3;
    }
    halo.collective_repartition(&mut [])?;
    let home = halo.global_indices()[..halo.home_count()].to_vec();
    let values: Vec<[u32; 2]> = home.iter().map(|&g| [g, me as u32]).collect();
    let root = n - 1;
    let gathered = halo.collective_gather_home(root, &values)?;
    match gathered {
        Some(all) if me == root => {
            ensure!(all.len() == s.len(), "{} values for {} atoms", all.len(), s.len());
            for (g, v) in all.iter().enumerate() {
                ensure!(v[0] == g as u32, "entry {g} holds atom {}", v[0]);
            }
            let pes: std::collections::BTreeSet<u32> = all.iter().map(|v| v[1]).collect();
            ensure!(pes.len() == n, "values from PEs {pes:?}");
        }
        None if me != root => {}
        other => return Err(format!("PE {me}: gathered {:?}", other.map(|v| v.len())).into()),
    }
    // Misuse, an error on every PE.
    let short = if me == 0 { &values[..values.len().saturating_sub(1)] } else { &values[..] };
    match halo.collective_gather_home(root, short) {
        Err(e @ Error::CollectiveConfig(_)) => {
            ensure!(e.scope() == md_halo::ErrorScope::EveryPe, "scope of {e}");
            ensure!(e.to_string().contains("PE 0 gave another count"), "{e}")
        }
        other => return Err(format!("a short list gave {:?}", other.map(|v| v.is_some())).into()),
    }
    let indices: Vec<u32> = home.iter().map(|&g| if g == 5 { 6 } else { g }).collect();
    match rt.gather_by_index(root, s.len(), &indices, &values) {
        Err(e @ onesided::Error::CollectiveArgument(_)) => {
            ensure!(e.to_string().contains("index 6 came twice"), "{e}")
        }
        other => return Err(format!("a doubled index gave {:?}", other.map(|v| v.is_some())).into()),
    }
    match rt.gather_by_index(root, s.len() + 1, &home, &values) {
        Err(e) => ensure!(e.to_string().contains(&format!("no PE gave index {}", s.len())), "{e}"),
        other => return Err(format!("a missing index gave {:?}", other.map(|v| v.is_some())).into()),
    }
    match rt.gather_by_index(n, s.len(), &home, &values) {
        Err(e @ onesided::Error::CollectiveArgument(_)) => {
            ensure!(e.to_string().contains(&format!("gather_by_index to PE {n}: there is no such PE")), "{e}")
        }
        other => return Err(format!("root {n} gave {:?}", other.map(|v| v.is_some())).into()),
    }
    Ok(())
}

fn main() {
    let mut cases = onesided_suite::cases![TWO_THREE_FOUR =>
        grids_halos_forces_and_paths_agree,
        ewald_real_space_on_every_grid,
        model_matches_the_plan,
        thread_count_does_not_change_results,
        repartition_and_jumps,
        engine_api_and_misuse,
        forces_migrate_and_buffer_is_checked,
        double_precision_matches_single,
        every_shipped_structure,
        load_balancing_on_every_grid,
        load_balancing_to_the_limits,
        automatic_balancing_waits_for_a_cost,
        reports_between_repartitions_keep_the_loads,
        home_values_gather_in_global_order,
    ]
    .to_vec();
    // A 2x2x2 grid: eight PEs on this machine's cores, oversubscribed.
    cases.push(pe_test::Case {
        name: "grids_halos_forces_and_paths_agree",
        pes: &[8],
        run: grids_halos_forces_and_paths_agree,
    });
    cases.push(pe_test::Case { name: "model_matches_the_plan", pes: &[8], run: model_matches_the_plan });
    // Staggering needs two split dimensions: 2x2x1 and 1x2x2 on 4 PEs, 2x2x2 on 8.
    cases.push(pe_test::Case {
        name: "staggered_grids_halos_forces_and_paths_agree",
        pes: &[4, 8],
        run: staggered_grids_halos_forces_and_paths_agree,
    });
    cases.push(pe_test::Case {
        name: "load_balancing_on_every_grid",
        pes: &[8],
        run: load_balancing_on_every_grid,
    });
    cases.push(pe_test::Case {
        name: "automatic_balancing_turns_off_when_slower",
        pes: &[2, 4],
        run: automatic_balancing_turns_off_when_slower,
    });
    cases.push(pe_test::Case {
        name: "bad_input_fails_on_every_pe",
        pes: &[2],
        run: bad_input_fails_on_every_pe,
    });
    pe_test::main_with_variants("halo", &cases, pe_test::DIRECT_AND_LIBRARY);
}
