//! Agreements across PEs: what every PE must see alike before anything moves (so that a
//! problem one PE finds is an error on every PE, never a hang), and the check that a
//! neighbour's message matches the plan.

use onesided::{ExchangePath, Runtime};

use crate::dlb::Dlb;
use crate::error::{Error, Result};
use crate::grid::DdGrid;

/// The largest value the runtime's max-reduction takes.
pub(crate) const TOP: u64 = i64::MAX as u64;

/// The least and the largest of every PE's `value` (at most [`TOP`]), on every PE.
///
/// # Collective
/// Every PE must call it.
pub(super) fn min_max(rt: &Runtime, value: u64) -> Result<(u64, u64)> {
    let mut agreed = [value.min(TOP), TOP - value.min(TOP)];
    rt.max_u64(&mut agreed)?;
    Ok((TOP - agreed[1], agreed[0]))
}

/// A hash of what every PE must agree on to build one halo exchange: the grid and its
/// boundaries, the box, the range, the path, the Verlet buffer, the size of the real type and
/// the load balancing (at most [`TOP`]).
pub(super) fn setup_hash(
    grid: &DdGrid,
    path: ExchangePath,
    buffer: Option<f32>,
    real_bytes: usize,
    dlb: Dlb,
) -> u64 {
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
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for word in words {
        hash ^= word;
        hash = hash.wrapping_mul(0x100_0000_01b3);
    }
    hash & TOP
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
    let me = rt.my_pe();
    // One value names the atom and its PE, so that every PE reports the same pair.
    let flag = found.map_or(0, |(atom, _)| (atom as u64 + 1) << PE_BITS | me as u64);
    let flag = rt.max_u64_one(flag)?;
    if flag == 0 {
        return Ok(None);
    }
    let atom = (flag >> PE_BITS) as usize - 1;
    let pe = (flag & ((1 << PE_BITS) - 1)) as usize;
    // Where it belongs, from the PE that found it (an error path: one more reduction).
    let target = match found {
        Some((_, target)) if pe == me => target as u64 + 1,
        _ => 0,
    };
    let target = rt.max_u64_one(target)? as usize - 1;
    Ok(Some((atom, pe, target)))
}

/// Bits for the PE in the value that names an atom to every PE (the atom above): up to 2^24 PEs.
const PE_BITS: u32 = 24;

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
