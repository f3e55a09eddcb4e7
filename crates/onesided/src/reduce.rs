//! Typed reductions over all PEs: sums, minima and maxima of floating-point and integer
//! values, one value or a slice, through MPI.
//!
//! Every PE gets the same bits. A floating-point sum depends on the order of its additions,
//! and an MPI all-reduce may add in a different order on different ranks (and may take the
//! minimum of +0 and -0, or of a NaN, differently); so floating-point reductions are made on
//! PE 0 and broadcast from there (two collectives of `log P` steps each). Integer reductions
//! are exact and take one all-reduce. A slice's length is agreed first, one more all-reduce.

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::topology::Communicator;

use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// What a reduction computes, element by element over the PEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
}

/// The element types the reductions take: `f32`, `f64`, `i32`, `i64`, `u32` and `u64`.
/// Sealed: the reductions rely on MPI knowing the type.
pub trait Reducible: sealed::Sealed + bytemuck::Pod + std::fmt::Debug {}

mod sealed {
    /// The MPI side of [`Reducible`](super::Reducible): MPI's datatype, and whether its
    /// reductions are exact on any rank (integers) or depend on the order of the operands
    /// (floating point).
    pub trait Sealed: mpi::datatype::Equivalence {
        const EXACT: bool;
    }
}

macro_rules! reducible {
    ($($t:ty: $exact:expr),*) => {$(
        impl sealed::Sealed for $t {
            const EXACT: bool = $exact;
        }
        impl Reducible for $t {}
    )*};
}
reducible!(f32: false, f64: false, i32: true, i64: true, u32: true, u64: true);

/// Reduces `values` element by element over all PEs, in place
/// ([`Collectives::all_reduce`](crate::Collectives::all_reduce)).
///
/// # Collective
/// Every PE calls it with the same `op` and a slice of the same length.
pub(crate) fn all_reduce<T: Reducible>(rt: &Runtime, op: ReduceOp, values: &mut [T]) -> Result<()> {
    if rt.n_pes() == 1 {
        return Ok(());
    }
    // The lengths first, in a reduction of fixed size: a mismatch becomes an error on
    // every PE, not an MPI call of different counts.
    let len = values.len() as i64;
    let mut agreed = [0i64; 2];
    crate::watchdog::watch("MPI_Allreduce (lengths)", None, || {
        rt.world().all_reduce_into(&[len, -len][..], &mut agreed[..], SystemOperation::max())
    });
    let (longest, shortest) = (agreed[0], -agreed[1]);
    if longest != shortest {
        return Err(Error::CollectiveArgument(format!(
            "all_reduce: the PEs passed slices of {shortest} to {longest} elements (PE {} \
             passed {len}); every PE must reduce the same number of values",
            rt.my_pe()
        )));
    }
    let send = values.to_vec();
    reduce_agreed(rt, op, &send, values);
    Ok(())
}

/// One value: the length is one on every PE, so it needs no agreement.
///
/// # Collective
/// Every PE calls it with the same `op`.
pub(crate) fn reduce_one<T: Reducible>(rt: &Runtime, op: ReduceOp, value: T) -> T {
    let mut result = [value];
    if rt.n_pes() > 1 {
        reduce_agreed(rt, op, &[value], &mut result);
    }
    result[0]
}

/// The reduction of `send` into `result` (the same length on every PE).
fn reduce_agreed<T: Reducible>(rt: &Runtime, op: ReduceOp, send: &[T], result: &mut [T]) {
    if send.is_empty() {
        return;
    }
    let world = rt.world();
    let operation = match op {
        ReduceOp::Sum => SystemOperation::sum(),
        ReduceOp::Min => SystemOperation::min(),
        ReduceOp::Max => SystemOperation::max(),
    };
    if T::EXACT {
        crate::watchdog::watch("MPI_Allreduce", None, || world.all_reduce_into(send, result, operation));
        return;
    }
    let root = world.process_at_rank(0);
    crate::watchdog::watch("MPI_Reduce and MPI_Bcast", None, || {
        if rt.my_pe() == 0 {
            root.reduce_into_root(send, result, operation);
        } else {
            root.reduce_into(send, operation);
        }
        root.broadcast_into(result);
    });
}
