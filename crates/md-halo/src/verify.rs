//! Built-in verification: the halo against a brute-force search, the parallel forces against
//! a serial computation, and fingerprints to compare paths bit for bit.

use mpi::datatype::PartitionMut;
use mpi::traits::{Communicator, CommunicatorCollectives};
use onesided::Runtime;

use crate::error::{Error, Result};
use crate::force::{ForceField, serial_forces};
use crate::grid::DdGrid;
use crate::halo::HaloExchange;
use crate::system::{KindId, RVec, System};

/// The halo domain `cell` must hold, found by brute force over every atom of `system`
/// (positions wrapped into the box): each image (global index, position in the domain's frame)
/// in the region `[lower, upper + range)` in every dimension that is not a home atom. The
/// per-dimension test follows the atom from its home domain down to the receiver hop by hop,
/// with the same arithmetic as the plan, so that an atom exactly on a boundary is judged the
/// same way by both.
pub fn expected_halo(system: &System, grid: &DdGrid, cell: [usize; 3]) -> Vec<(u32, RVec)> {
    let mut halo = Vec::new();
    for (g, &x) in system.positions.iter().enumerate() {
        let home = grid.cell_of_position(x);
        let options: [Vec<(f32, bool)>; 3] =
            std::array::from_fn(|d| dimension_options(grid, x, home, cell, d));
        for &(x0, h0) in &options[0] {
            for &(x1, h1) in &options[1] {
                for &(x2, h2) in &options[2] {
                    if h0 || h1 || h2 {
                        halo.push((g as u32, [x0, x1, x2]));
                    }
                }
            }
        }
    }
    halo
}

/// The coordinates along `d` under which atom `x` (home domain `home`) appears on domain
/// `cell`: its own, if it is home along `d`, and the image the halo brings, if any.
fn dimension_options(
    grid: &DdGrid,
    x: RVec,
    home: [usize; 3],
    cell: [usize; 3],
    d: usize,
) -> Vec<(f32, bool)> {
    let n = grid.dims()[d];
    let mut options = Vec::with_capacity(2);
    if home[d] == cell[d] {
        options.push((x[d], false));
    }
    // Hops from the home domain down to the receiver; with one domain, one hop to itself.
    let hops = if n == 1 { 1 } else { (home[d] + n - cell[d]) % n };
    if hops >= 1 && hops <= grid.pulses()[d] {
        let (mut coordinate, mut holder) = (x[d], home);
        let mut arrives = true;
        for _ in 0..hops {
            if coordinate >= grid.lower(holder)[d] + grid.range() {
                arrives = false;
                break;
            }
            if holder[d] == 0 {
                coordinate += grid.box_size()[d];
            }
            holder = grid.neighbour(holder, d, false);
        }
        if arrives {
            options.push((coordinate, true));
        }
    }
    options
}

/// Checks this PE's home atoms and halo against the brute-force search on `system` (the
/// configuration the plan was built from).
pub fn check_halo(halo: &HaloExchange<'_>, system: &System) -> Result<()> {
    let grid = halo.grid();
    let cell = halo.cell();
    let ids = halo.global_indices();
    let x = halo.coordinates();
    let n_home = halo.home_count();
    let expected_home: Vec<u32> = (0..system.len() as u32)
        .filter(|&g| grid.cell_of_position(system.positions[g as usize]) == cell)
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
    let key = |(g, x): &(u32, RVec)| (*g, x.map(f32::to_bits));
    let mut expected = expected_halo(system, grid, cell);
    expected.sort_unstable_by_key(key);
    let mut actual: Vec<(u32, RVec)> =
        ids[n_home..].iter().copied().zip(x[n_home..].iter().copied()).collect();
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

/// The largest deviation of the parallel forces from the serial computation, relative to the
/// largest serial force, over all atoms.
///
/// # Collective
/// Every PE passes its home forces; the positions and forces of all PEs are gathered (through
/// MPI, outside the paths being measured), PE 0 computes the serial reference, and every PE
/// returns the same value.
pub fn force_deviation(
    rt: &Runtime,
    halo: &HaloExchange<'_>,
    home_forces: &[RVec],
    kinds: &[KindId],
    field: &ForceField,
) -> Result<f64> {
    let n_home = halo.home_count();
    let ids: Vec<u32> = halo.global_indices()[..n_home].to_vec();
    let positions: Vec<f32> = halo.coordinates()[..n_home].iter().flatten().copied().collect();
    let forces: Vec<f32> = home_forces[..n_home].iter().flatten().copied().collect();
    let world = rt.world();
    let all_ids = gather_all(&world, &ids);
    let all_positions = gather_all(&world, &positions);
    let all_forces = gather_all(&world, &forces);
    let mut deviation = [0u64];
    if rt.my_pe() == 0 {
        let n = kinds.len();
        if all_ids.len() != n {
            return Err(Error::Verification(format!("the PEs hold {} atoms of {n}", all_ids.len())));
        }
        let mut x = vec![[0f32; 3]; n];
        let mut f = vec![[0f32; 3]; n];
        for (k, &g) in all_ids.iter().enumerate() {
            x[g as usize] = [all_positions[3 * k], all_positions[3 * k + 1], all_positions[3 * k + 2]];
            f[g as usize] = [all_forces[3 * k], all_forces[3 * k + 1], all_forces[3 * k + 2]];
        }
        let (serial, _) = serial_forces(&x, kinds, halo.grid().box_size(), field);
        let largest = serial.iter().flatten().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
        let worst = serial
            .iter()
            .zip(&f)
            .flat_map(|(s, p)| (0..3).map(move |d| (s[d] - p[d] as f64).abs()))
            .fold(0f64, f64::max);
        deviation[0] = (worst / largest).to_bits();
    }
    rt.broadcast(0, &mut deviation)?;
    Ok(f64::from_bits(deviation[0]))
}

/// Every PE's `local` values, concatenated in PE order, on every PE.
fn gather_all<T: mpi::datatype::Equivalence + Copy + Default>(
    world: &mpi::topology::SimpleCommunicator,
    local: &[T],
) -> Vec<T> {
    let mut counts = vec![0i32; world.size() as usize];
    world.all_gather_into(&(local.len() as i32), &mut counts[..]);
    let displacements: Vec<i32> =
        counts.iter().scan(0, |sum, &c| Some(std::mem::replace(sum, *sum + c))).collect();
    let total = counts.iter().sum::<i32>() as usize;
    let mut all = vec![T::default(); total];
    let mut partition = PartitionMut::new(&mut all[..], counts, &displacements[..]);
    world.all_gather_varcount_into(local, &mut partition);
    all
}

/// A 64-bit FNV-1a hash of the bytes of `values`: two paths that left the same bits in the
/// same places give the same fingerprint.
pub fn fingerprint(values: &[RVec]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for v in values {
        for c in v {
            for byte in c.to_bits().to_le_bytes() {
                hash ^= byte as u64;
                hash = hash.wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    hash
}
