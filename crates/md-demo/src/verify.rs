//! Built-in verification: the halo against a brute-force search, the parallel forces and
//! virial against a serial computation, and fingerprints to compare paths bit for bit.

use md_halo::{DdGrid, HaloExchange, RVec, ShiftForces};
use mpi::datatype::PartitionMut;
use mpi::traits::{Communicator, CommunicatorCollectives};
use onesided::{Collectives, Fnv1a, Runtime};

use crate::error::{Error, Result};
use crate::force::{ForceField, Topology, serial_forces};

/// One atom as a domain must hold it: global index, position of the image, the fractions
/// of that image and its zone's bits (the dimensions it arrived along, which decide pair
/// ownership).
pub type HaloAtom = (u32, RVec, [f64; 3], u8);

/// An atom on its way to a domain, dimension by dimension: the domain holding it, its
/// fractions with the shifts so far, its zone's bits, and along which dimensions it crossed
/// the periodic boundary.
#[derive(Clone, Copy)]
struct Journey {
    holder: [usize; 3],
    fraction: [f64; 3],
    zone: u8,
    shifted: [bool; 3],
}

/// The halo domain `cell` must hold, found by brute force over every atom of the system at
/// `positions` (global order): each image that reaches it along the pulses, not a home atom.
/// The atom is followed from its home domain down to the receiver hop by hop along each
/// dimension in exchange order, each hop judged by the limits of the holder and the atom's
/// zone there ([`DdGrid::send_limits`]: the range above the lower face, or above the rows a
/// staggered grid's corners need), so that an atom exactly on a boundary is judged the same
/// way by both. On a grid without staggering this is the region `[lower, upper + reach)` of
/// fractions in every dimension.
pub fn expected_halo(positions: &[RVec], grid: &DdGrid, cell: [usize; 3]) -> Vec<HaloAtom> {
    let pbc = grid.pbc();
    let mut halo = Vec::new();
    for (g, &x) in positions.iter().enumerate() {
        let (x, s) = pbc.put_in_box(x);
        let home = grid.cell_of_fraction(s);
        let mut journeys = vec![Journey { holder: home, fraction: s, zone: 0, shifted: [false; 3] }];
        for d in grid.exchange_order() {
            journeys = journeys.into_iter().flat_map(|j| along(grid, j, cell, d)).collect();
        }
        for j in journeys.into_iter().filter(|j| j.zone != 0) {
            // Shifts as the pulses apply them, in exchange order: one at a time along split
            // dimensions; along dimensions of one domain, where the image is made from its
            // stored atom, summed first and added at once.
            let mut image = x;
            let mut periodic: Option<RVec> = None;
            for d in grid.exchange_order() {
                if grid.dims()[d] > 1 {
                    image = if j.shifted[d] { pbc.image(image, d) } else { add_zero(image) };
                } else if j.shifted[d] {
                    let v = pbc.vectors()[d];
                    let sum = periodic.unwrap_or([0.0; 3]);
                    periodic = Some(std::array::from_fn(|c| sum[c] + v[c]));
                }
            }
            if let Some(v) = periodic {
                image = std::array::from_fn(|c| image[c] + v[c]);
            }
            halo.push((g as u32, image, j.fraction, j.zone));
        }
    }
    halo
}

/// `x + 0` as a pulse without a shift computes it (a negative zero becomes positive).
fn add_zero(x: RVec) -> RVec {
    x.map(|c| c + 0.0)
}

/// The ways the atom on `journey` reaches `cell` along `d`: where it already lies at `cell`'s
/// index, as it is; and where the pulses bring it (or, with one domain, an image of it), as
/// it arrives.
fn along(grid: &DdGrid, journey: Journey, cell: [usize; 3], d: usize) -> Vec<Journey> {
    let n = grid.dims()[d];
    let mut ways = Vec::with_capacity(2);
    if journey.holder[d] == cell[d] {
        ways.push(journey);
    }
    // Hops from the holder down to the receiver; with one domain, one hop to itself.
    let hops = if n == 1 { 1 } else { (journey.holder[d] + n - cell[d]) % n };
    if hops >= 1 && hops <= grid.pulses()[d] {
        let mut j = journey;
        for _ in 0..hops {
            if j.fraction[d] >= grid.send_limits(j.holder, d)[j.zone as usize] {
                return ways;
            }
            if j.holder[d] == 0 {
                j.fraction[d] += 1.0;
                j.shifted[d] = true;
            }
            j.holder = grid.neighbour(j.holder, d, false);
            j.zone |= 1 << d;
        }
        ways.push(j);
    }
    ways
}

/// Checks this PE's home atoms and halo (indices, image positions and fractions, to the bit)
/// against the brute-force search on `positions`, the configuration the plan was built from
/// (global order), on the whole grid ([`HaloExchange::collective_whole_grid`]).
///
/// # Collective
/// Every PE must call it.
pub fn collective_check_halo(halo: &HaloExchange<'_>, positions: &[RVec]) -> Result<()> {
    let whole = halo.collective_whole_grid()?;
    let grid = &whole;
    let cell = halo.cell();
    let ids = halo.global_indices();
    let n_home = halo.home_count();
    let expected_home: Vec<u32> = (0..positions.len() as u32)
        .filter(|&g| grid.cell_of_position(positions[g as usize]) == cell)
        .collect();
    let mut home: Vec<u32> = ids[..n_home].to_vec();
    home.sort_unstable();
    if home != expected_home {
        return Err(Error::Verification(format!(
            "domain {cell:?} holds {} home atoms where {} belong to it",
            home.len(),
            expected_home.len()
        )));
    }
    let key = |(g, x, s, z): &HaloAtom| (*g, x.map(f32::to_bits), s.map(f64::to_bits), *z);
    let mut expected = expected_halo(positions, grid, cell);
    expected.sort_unstable_by_key(key);
    let x = halo.positions_with_images();
    let fractions = halo.reference_fractions();
    let owner = halo.pair_owner();
    let mut actual: Vec<HaloAtom> =
        (n_home..halo.local_count()).map(|i| (ids[i], x[i], fractions[i], owner.zone(i).bits())).collect();
    actual.sort_unstable_by_key(key);
    if actual != expected {
        let first = actual
            .iter()
            .zip(&expected)
            .find(|(a, e)| key(a) != key(e))
            .map(|(a, e)| format!("; first difference: received {a:?}, expected {e:?}"))
            .unwrap_or_default();
        return Err(Error::Verification(format!(
            "domain {cell:?} received {} halo atoms where the brute-force search finds {}{first}",
            actual.len(),
            expected.len()
        )));
    }
    Ok(())
}

/// How far the parallel results lie from the serial computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deviation {
    /// The largest deviation of a force component, relative to the largest serial force.
    pub force: f64,
    /// The largest deviation of a virial component (home positions and forces plus the
    /// shift forces), relative to the largest serial component.
    pub virial: f64,
}

/// The deviations of the parallel forces and virial from the serial computation, over all
/// atoms.
///
/// # Collective
/// Every PE passes its home forces after [`Step::move_f`](md_halo::Step::move_f) and the
/// shift forces it returned; the positions and forces of all PEs are gathered (through MPI,
/// outside the paths being measured), PE 0 computes the serial reference, and every PE
/// returns the same values.
pub fn deviation(
    rt: &Runtime,
    halo: &HaloExchange<'_>,
    forces: &[RVec],
    shift_forces: &ShiftForces,
    topology: &Topology,
    field: &ForceField,
) -> Result<Deviation> {
    let n_home = halo.home_count();
    let ids: Vec<u32> = halo.global_indices()[..n_home].to_vec();
    let home_x = &halo.coordinates()[..n_home];
    let positions: Vec<f32> = home_x.iter().flatten().copied().collect();
    let home_f = &forces[..n_home];
    let flat_forces: Vec<f32> = home_f.iter().flatten().copied().collect();
    // This PE's virial: -½ (Σ_home x ⊗ f) plus the shift term.
    let shift = shift_forces.virial(halo.grid().pbc());
    let mut virial = [0.0f64; 9];
    for r in 0..3 {
        for c in 0..3 {
            let sum: f64 = home_x.iter().zip(home_f).map(|(x, f)| x[r] as f64 * f[c] as f64).sum();
            virial[3 * r + c] = -0.5 * sum + shift[r][c];
        }
    }
    let world = rt.world();
    let all_ids = gather_all(&world, &ids);
    let all_positions = gather_all(&world, &positions);
    let all_forces = gather_all(&world, &flat_forces);
    let all_virials = gather_all(&world, &virial);
    let mut result = [0u64; 2];
    if rt.my_pe() == 0 {
        let n = topology.params.len();
        if all_ids.len() != n || all_ids.iter().any(|&g| g as usize >= n) {
            // Reported by every PE after the broadcast, so that none is left waiting.
            result = [MISMATCH, all_ids.len() as u64];
        } else {
            result = compare(&all_ids, &all_positions, &all_forces, &all_virials, halo, topology, field);
        }
    }
    rt.broadcast(0, &mut result)?;
    if result[0] == MISMATCH {
        return Err(Error::Verification(if result[1] == u64::MAX {
            format!("the cutoff {} nm is too long for a serial computation in this box", field.cutoff)
        } else {
            format!("the PEs hold {} home atoms of the {} the topology has", result[1], topology.params.len())
        }));
    }
    Ok(Deviation { force: f64::from_bits(result[0]), virial: f64::from_bits(result[1]) })
}

/// Marks a failed gather in the broadcast of [`deviation`]: no relative deviation has these
/// bits (they are a NaN).
const MISMATCH: u64 = u64::MAX;

/// On PE 0: the relative deviations of the gathered forces and virials from the serial
/// computation, as bits.
fn compare(
    all_ids: &[u32],
    all_positions: &[f32],
    all_forces: &[f32],
    all_virials: &[f64],
    halo: &HaloExchange<'_>,
    topology: &Topology,
    field: &ForceField,
) -> [u64; 2] {
    let n = topology.params.len();
    let mut x = vec![[0f32; 3]; n];
    let mut f = vec![[0f32; 3]; n];
    for (k, &g) in all_ids.iter().enumerate() {
        x[g as usize] = [all_positions[3 * k], all_positions[3 * k + 1], all_positions[3 * k + 2]];
        f[g as usize] = [all_forces[3 * k], all_forces[3 * k + 1], all_forces[3 * k + 2]];
    }
    let Ok(serial) = serial_forces(&x, halo.grid().pbc(), topology, field) else {
        return [MISMATCH, u64::MAX];
    };
    let largest = serial.forces.iter().flatten().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    let worst = serial
        .forces
        .iter()
        .zip(&f)
        .flat_map(|(s, p)| (0..3).map(move |d| (s[d] - p[d] as f64).abs()))
        .fold(0f64, f64::max);
    let total: [f64; 9] = std::array::from_fn(|k| all_virials.iter().skip(k).step_by(9).sum());
    let largest_virial = serial.virial.iter().flatten().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    let worst_virial = (0..9).map(|k| (total[k] - serial.virial[k / 3][k % 3]).abs()).fold(0f64, f64::max);
    [(worst / largest).to_bits(), (worst_virial / largest_virial).to_bits()]
}

/// The current positions of all `n_atoms` atoms (home positions, unwrapped since the last
/// repartition), in global order, on every PE.
///
/// # Collective
/// Every PE must call it; the positions travel through MPI, outside the paths being measured.
///
/// # Errors
/// [`Error::Verification`] on every PE when the home atoms are not each atom exactly once.
pub fn gather_positions(rt: &Runtime, halo: &HaloExchange<'_>, n_atoms: usize) -> Result<Vec<RVec>> {
    let n_home = halo.home_count();
    let world = rt.world();
    let ids = gather_all(&world, &halo.global_indices()[..n_home]);
    let flat: Vec<f32> = halo.coordinates()[..n_home].iter().flatten().copied().collect();
    let all = gather_all(&world, &flat);
    let mut positions = vec![[f32::NAN; 3]; n_atoms];
    let mut seen = vec![false; n_atoms];
    for (k, &g) in ids.iter().enumerate() {
        let g = g as usize;
        if g >= n_atoms || std::mem::replace(&mut seen[g], true) {
            return Err(Error::Verification(format!(
                "atom {g} is home on more than one PE, or out of range"
            )));
        }
        positions[g] = [all[3 * k], all[3 * k + 1], all[3 * k + 2]];
    }
    if let Some(g) = seen.iter().position(|s| !s) {
        return Err(Error::Verification(format!("atom {g} is home on no PE")));
    }
    Ok(positions)
}

/// Every PE's `local` values, concatenated in PE order, on every PE.
fn gather_all<T: mpi::datatype::Equivalence + Copy + Default>(
    world: &mpi::topology::SimpleCommunicator,
    local: &[T],
) -> Vec<T> {
    let mut counts = vec![0i32; world.size() as usize];
    onesided::watchdog::watch("MPI_Allgather (verification)", None, || {
        world.all_gather_into(&(local.len() as i32), &mut counts[..])
    });
    let displacements: Vec<i32> =
        counts.iter().scan(0, |sum, &c| Some(std::mem::replace(sum, *sum + c))).collect();
    let total = counts.iter().sum::<i32>() as usize;
    let mut all = vec![T::default(); total];
    let mut partition = PartitionMut::new(&mut all[..], counts, &displacements[..]);
    onesided::watchdog::watch("MPI_Allgatherv (verification)", None, || {
        world.all_gather_varcount_into(local, &mut partition)
    });
    all
}

/// A 64-bit FNV-1a hash of the bytes of `values`: two paths that left the same bits in the
/// same places give the same fingerprint.
pub fn fingerprint<T: bytemuck::Pod>(values: &[T]) -> u64 {
    Fnv1a::new().bytes(bytemuck::cast_slice::<T, u8>(values)).finish()
}

/// One fingerprint of every PE's `values` together, the same on every PE: what a run
/// produced, to compare with another run of the same job (one node against several, say).
///
/// # Collective
/// Every PE must call it.
///
/// # Errors
/// As [`Collectives::max_u64`].
pub fn job_fingerprint<T: bytemuck::Pod>(rt: &Runtime, values: &[T]) -> onesided::Result<u64> {
    // Each PE's fingerprint in its own slot (63 bits, what the reduction carries).
    let mut per_pe = vec![0u64; rt.n_pes()];
    per_pe[rt.my_pe()] = fingerprint(values) >> 1;
    rt.max_u64(&mut per_pe)?;
    Ok(fingerprint(&per_pe))
}
