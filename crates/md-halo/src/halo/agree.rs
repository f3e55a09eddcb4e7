//! Agreements across PEs: what every PE must see alike before anything moves (so that a
//! problem one PE finds is an error on every PE, never a hang), and the check that a
//! neighbour's message matches the plan.

use onesided::{Agreement, Fnv1a, Path, Runtime, agree::TOP};

use crate::dlb::Dlb;
use crate::error::{Error, Result};
use crate::grid::DdGrid;

/// A hash of what every PE must agree on to build one halo exchange: the grid and its
/// boundaries, the box, the range, the path, the Verlet buffer, the size of the real type and
/// the load balancing (at most [`TOP`]).
pub(super) fn setup_hash(grid: &DdGrid, path: Path, buffer: Option<f32>, real_bytes: usize, dlb: Dlb) -> u64 {
    let mut words: Vec<u64> = grid.dims().iter().map(|&n| n as u64).collect();
    words.extend(grid.pbc().vectors().iter().flatten().map(|c| c.to_bits() as u64));
    words.push(grid.range().to_bits() as u64);
    words.extend(
        (0..3).flat_map(|d| {
            grid.rows_of_bounds(d).into_iter().flat_map(|(_, b)| b.iter().map(|b| b.to_bits()))
        }),
    );
    words.extend(path.name().bytes().map(u64::from));
    words.push(buffer.map_or(u64::MAX, |b| b.to_bits() as u64));
    words.push(real_bytes as u64);
    words.extend(dlb.name().bytes().map(u64::from));
    Fnv1a::new().words(words).finish() & TOP
}

/// Agrees on one atom that some PE found a problem with (`found`: the atom's global index and
/// the PE it belongs to): returns, on every PE alike, `(atom, PE that found it, PE it
/// belongs to)` for one such atom (the largest index found, and of those the highest PE),
/// or `None`.
///
/// # Collective
/// Every PE must call it.
pub(super) fn report_atom(
    rt: &Runtime,
    found: Option<(u32, usize)>,
) -> Result<Option<(usize, usize, usize)>> {
    let mut agreement = Agreement::new();
    let atom = agreement.max_with_pe(found.map(|(atom, _)| u64::from(atom)));
    let Some((atom, pe)) = agreement.collective_run(rt)?.get(atom) else { return Ok(None) };
    // Where it belongs, from the PE that found it (an error path: one more reduction).
    let mut agreement = Agreement::new();
    let target = agreement.max(match found {
        Some((_, target)) if pe == rt.my_pe() => target as u64,
        _ => 0,
    });
    let target = agreement.collective_run(rt)?.get(target) as usize;
    Ok(Some((atom as usize, pe, target)))
}

/// A neighbour sent a different number of elements than the plan says.
pub(super) fn check_count(received: usize, expected: usize, from: usize, what: &str) -> Result<()> {
    if received == expected {
        Ok(())
    } else {
        Err(Error::PlanMismatch(format!(
            "PE {from} sent {received} {what} where the plan expects {expected}; the PEs' plans disagree"
        )))
    }
}
