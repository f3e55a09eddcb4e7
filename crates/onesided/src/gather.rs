//! Per-atom data in global order on one PE ([`Collectives::gather_by_index`]): for
//! trajectories, checkpoints and checks, with the whole system's memory on that PE alone.
//!
//! Two MPI gathers to the root (each PE's count, then its indices and values as bytes) with
//! a broadcast between them of whether the whole fits MPI's int counts (2 GiB), the root's
//! check that every index of `0..total` came exactly once, and one broadcast of the verdict,
//! so that a bad call is an error on every PE. The root holds O(total + PEs); every
//! other PE only what it sent.
//!
//! [`Collectives::gather_by_index`]: crate::Collectives::gather_by_index

use bytemuck::Pod;
use mpi::collective::Root;
use mpi::datatype::PartitionMut;
use mpi::topology::Communicator;

use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// What the root found wrong, as the verdict it broadcasts: 0 when nothing.
const FINE: u64 = 0;
const OUT_OF_RANGE: u64 = 1;
const TWICE: u64 = 2;
const MISSING: u64 = 3;
const LENGTHS: u64 = 4;
const TOO_LARGE: u64 = 5;

/// [`Collectives::gather_by_index`] for [`Runtime`].
pub(crate) fn gather_by_index<T: Pod>(
    rt: &Runtime,
    root: usize,
    total: usize,
    indices: &[u32],
    values: &[T],
) -> Result<Option<Vec<T>>> {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if root >= n {
        // Every PE passes the same root, so every PE finds this alike.
        return Err(Error::CollectiveArgument(format!(
            "gather_by_index to PE {root}: there is no such PE in a job of {n}; pass a root below {n}"
        )));
    }
    // A length mismatch on one PE must not leave the others in a gather: it rides in the
    // count as u64::MAX and fails everywhere with the verdict.
    let count: u64 = if indices.len() == values.len() { indices.len() as u64 } else { u64::MAX };
    let world = rt.world();
    let at_root = world.process_at_rank(root as i32);
    let width = std::mem::size_of::<T>();
    let mine: Vec<u8> = if count == u64::MAX {
        Vec::new()
    } else {
        let mut bytes = Vec::with_capacity(indices.len() * (4 + width));
        bytes.extend_from_slice(bytemuck::cast_slice(indices));
        bytes.extend_from_slice(bytemuck::cast_slice(values));
        bytes
    };
    let mut verdict = [FINE, 0, 0];
    let mut gathered = None;
    if me == root {
        let mut counts = vec![0u64; n];
        crate::watchdog::watch("MPI_Gather (counts)", None, || {
            at_root.gather_into_root(&count, &mut counts[..])
        });
        let bad_length = counts.iter().position(|&c| c == u64::MAX);
        let sizes: Vec<u64> =
            counts.iter().map(|&c| if c == u64::MAX { 0 } else { c * (4 + width) as u64 }).collect();
        // MPI counts and displacements are ints: the whole gather must stay below 2 GiB.
        let fits = sizes.iter().sum::<u64>() <= i32::MAX as u64;
        let mut go = [u8::from(fits)];
        crate::watchdog::watch("MPI_Bcast (gather size)", None, || at_root.broadcast_into(&mut go[..]));
        let sizes: Vec<i32> = sizes.iter().map(|&s| if fits { s as i32 } else { 0 }).collect();
        let mut displs = Vec::with_capacity(n);
        let mut at = 0i32;
        for &s in &sizes {
            displs.push(at);
            at += s;
        }
        let mut bytes = vec![0u8; at as usize];
        if fits {
            let mut partition = PartitionMut::new(&mut bytes[..], &sizes[..], &displs[..]);
            crate::watchdog::watch("MPI_Gatherv (values)", None, || {
                at_root.gather_varcount_into_root(&mine[..], &mut partition)
            });
        }
        if !fits {
            verdict = [TOO_LARGE, 0, counts.iter().filter(|&&c| c != u64::MAX).sum::<u64>()];
        } else if let Some(pe) = bad_length {
            verdict = [LENGTHS, pe as u64, 0];
        } else {
            let mut all = vec![T::zeroed(); total];
            let mut seen = vec![false; total];
            'pes: for (pe, (&c, &start)) in counts.iter().zip(&displs).enumerate() {
                let c = c as usize;
                let start = start as usize;
                let idx: &[u8] = &bytes[start..start + 4 * c];
                let vals: &[u8] = &bytes[start + 4 * c..start + c * (4 + width)];
                for k in 0..c {
                    let i = u32::from_ne_bytes(idx[4 * k..4 * k + 4].try_into().expect("4 bytes")) as usize;
                    if i >= total {
                        verdict = [OUT_OF_RANGE, pe as u64, i as u64];
                        break 'pes;
                    }
                    if seen[i] {
                        verdict = [TWICE, pe as u64, i as u64];
                        break 'pes;
                    }
                    seen[i] = true;
                    all[i] = bytemuck::pod_read_unaligned(&vals[k * width..(k + 1) * width]);
                }
            }
            if verdict[0] == FINE
                && let Some(i) = seen.iter().position(|&s| !s)
            {
                verdict = [MISSING, 0, i as u64];
            }
            gathered = Some(all);
        }
    } else {
        crate::watchdog::watch("MPI_Gather (counts)", Some(root), || at_root.gather_into(&count));
        let mut go = [0u8];
        crate::watchdog::watch("MPI_Bcast (gather size)", Some(root), || at_root.broadcast_into(&mut go[..]));
        if go[0] == 1 {
            crate::watchdog::watch("MPI_Gatherv (values)", Some(root), || {
                at_root.gather_varcount_into(&mine[..])
            });
        }
    }
    crate::watchdog::watch("MPI_Bcast (gather verdict)", Some(root), || {
        at_root.broadcast_into(&mut verdict[..])
    });
    let [what, pe, index] = verdict;
    let problem = match what {
        FINE => return Ok(gathered),
        OUT_OF_RANGE => format!("PE {pe} gave index {index}, beyond the {total} entries"),
        TWICE => format!("index {index} came twice (the second time from PE {pe})"),
        MISSING => format!("no PE gave index {index} of the {total}"),
        LENGTHS => format!("PE {pe} gave indices and values of different lengths"),
        TOO_LARGE => format!(
            "{index} values of {width} bytes and their indices are more than MPI's 2 GiB in one gather; \
             gather in parts (a range of atoms at a time)"
        ),
        other => unreachable!("verdict {other}"),
    };
    Err(Error::CollectiveArgument(format!(
        "gather_by_index to PE {root}: {problem}; every index of 0..{total} must come from exactly one PE, \
         one value per index"
    )))
}
