//! The all-to-all's state: its group, its algorithm's order of phases, its symmetric buffers
//! and signals.

use std::ffi::c_int;
#[cfg(feature = "baselines")]
use std::ffi::c_long;
use std::mem::size_of;
use std::ptr::NonNull;

use bytemuck::Pod;
use mpi::topology::Communicator;
use mpi::traits::CommunicatorCollectives;

use super::algorithm::AlltoallAlgorithm;
#[cfg(feature = "baselines")]
use crate::agree::Agreement;
use crate::error::{Error, Result};
use crate::group::PeGroup;
use crate::heap::SymArray;
use crate::signal::SignalArray;

/// Where one member's data for a destination goes in the one-sided protocol.
pub(super) enum Delivery<'a, T, U> {
    /// Straight into the destination's target array, mapped at this address.
    Mapped(NonNull<U>),
    /// Into this block of the send buffer, which a put then carries.
    Packed(&'a mut [T]),
}

/// An all-to-all of `block` elements per pair of members of a [`PeGroup`]: every member sends
/// one block to every member. Built by [`Alltoall::builder`]; each member fills its outgoing
/// blocks ([`send_buffer`](Self::send_buffer), block `r` for rank `r`, or a
/// [`pack`](crate::AlltoallCall::pack)ing function), and a [`call`](Self::call) returns the
/// incoming blocks, block `r` from rank `r`.
pub struct Alltoall<'g, 'rt, T: Pod> {
    pub(super) group: GroupRef<'g, 'rt>,
    pub(super) name: String,
    pub(super) algorithm: AlltoallAlgorithm,
    pub(super) block: usize,
    pub(super) send: SymArray<'rt, T>,
    pub(super) recv: SymArray<'rt, T>,
    /// Signal `r`: rank `r` is ready for this member's block of the current call.
    pub(super) ready: SignalArray<'rt>,
    /// Signal `r`: rank `r`'s block of the current call is in place.
    pub(super) arrived: SignalArray<'rt>,
    /// (destination rank, source rank) per phase, for this member.
    pub(super) phases: Vec<(usize, usize)>,
    pub(super) calls: u64,
    /// The shmem baseline's synchronisation arrays.
    #[cfg(feature = "baselines")]
    pub(super) shmem: Option<ShmemSync<'rt>>,
}

impl<'g, 'rt, T: Pod> Alltoall<'g, 'rt, T> {
    /// The all-to-all on `algorithm`, with symmetric send and receive buffers of `block`
    /// elements per member.
    ///
    /// # Collective
    /// Every PE of the job (members or not) calls it with the same arguments.
    pub(super) fn collective_with(
        group: GroupRef<'g, 'rt>,
        name: &str,
        block: usize,
        algorithm: AlltoallAlgorithm,
    ) -> Result<Self> {
        let rt = group.runtime();
        let n = group.len();
        let len = n.checked_mul(block).ok_or_else(|| Error::SizeOverflow {
            array: format!("{name}: buffers"),
            len: block,
            elem_size: size_of::<T>(),
        })?;
        #[cfg(feature = "baselines")]
        let shmem = ShmemSync::collective_new(&group, name, block * size_of::<T>(), algorithm)?;
        let phases = match (group.my_rank(), algorithm) {
            (Some(me), AlltoallAlgorithm::NodeAware) => {
                crate::watchdog::watch("MPI_Allgather (the node-aware all-to-all's nodes)", None, || {
                    node_aware_phases(&group, me)
                })?
            }
            (Some(me), _) => (0..n).map(|i| ((me + i) % n, (me + n - i) % n)).collect(),
            (None, _) => Vec::new(),
        };
        Ok(Alltoall {
            group,
            name: name.to_string(),
            algorithm,
            block,
            send: SymArray::collective_alloc(rt, &format!("{name}: send"), len)?,
            recv: SymArray::collective_alloc(rt, &format!("{name}: receive"), len)?,
            ready: SignalArray::collective_alloc(rt, &format!("{name}: ready"), n)?,
            arrived: SignalArray::collective_alloc(rt, &format!("{name}: arrived"), n)?,
            phases,
            calls: 0,
            #[cfg(feature = "baselines")]
            shmem,
        })
    }

    /// The algorithm it runs (for one built on [`Path::Auto`](crate::Path::Auto), the one
    /// measured fastest).
    pub fn algorithm(&self) -> AlltoallAlgorithm {
        self.algorithm
    }

    /// Elements per block.
    pub fn block(&self) -> usize {
        self.block
    }

    /// The order in which this member meets the others: (destination rank, source rank) per
    /// phase (empty on non-members).
    pub fn phases(&self) -> &[(usize, usize)] {
        &self.phases
    }

    /// The outgoing blocks, block `r` for rank `r`, to fill before each call.
    pub fn send_buffer(&mut self) -> &mut [T] {
        // SAFETY: no PE writes this member's send array, and no PE reads it outside a call
        // (puts and sends read it locally; shmem_alltoall has copied it out when the call
        // returns); `&mut self` excludes a call while the slice lives.
        unsafe { self.send.local_slice_mut() }
    }
}

/// The shmem baseline's synchronisation: two alternating (barrier, all-to-all) pSync pairs.
#[cfg(feature = "baselines")]
pub(super) struct ShmemSync<'rt> {
    pub(super) psync: SymArray<'rt, c_long>,
    pub(super) psync_len: usize,
    pub(super) parity: usize,
}

#[cfg(feature = "baselines")]
impl<'rt> ShmemSync<'rt> {
    /// The arrays where `algorithm` is the shmem baseline, checked to serve (`bytes` a block).
    ///
    /// # Collective
    /// Every PE of the job calls it alike.
    fn collective_new(
        group: &PeGroup<'rt>,
        name: &str,
        bytes: usize,
        algorithm: AlltoallAlgorithm,
    ) -> Result<Option<ShmemSync<'rt>>> {
        let rt = group.runtime();
        if algorithm != AlltoallAlgorithm::Shmem {
            return Ok(None);
        }
        // Split groups differ from PE to PE: every PE learns whether any cannot serve.
        let unfit = group.active_set().is_none() || !bytes.is_multiple_of(4);
        let mut agreement = Agreement::new();
        let any = agreement.any(unfit);
        let any_unfit = agreement.collective_run(rt)?.get(any);
        if group.active_set().is_none() || any_unfit && !unfit {
            return Err(Error::InvalidArgument(format!(
                "all-to-all '{name}': the shmem path needs the group to be an active set \
                 (ascending PEs with a power-of-two stride) on every PE; group '{}' is {:?} here",
                group.name(),
                group.members()
            )));
        }
        if !bytes.is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "all-to-all '{name}': shmem_alltoall moves whole 32-bit words, and a block of \
                 {bytes} bytes is not"
            )));
        }
        let psync_len = {
            // SAFETY: reading shim constants.
            let (alltoall, barrier) =
                unsafe { (shmem_sys::shmem_sys_alltoall_sync_size, shmem_sys::shmem_sys_barrier_sync_size) };
            alltoall.max(barrier).max(1)
        };
        let sync_value = rt.constants().sync_value;
        let psync = SymArray::collective_alloc_with(rt, &format!("{name}: pSync"), 4 * psync_len, |p| {
            p.fill(sync_value)
        })?;
        Ok(Some(ShmemSync { psync, psync_len, parity: 0 }))
    }
}

/// The group of an all-to-all: the caller's, or its own.
pub(super) enum GroupRef<'g, 'rt> {
    Borrowed(&'g PeGroup<'rt>),
    Owned(Box<PeGroup<'rt>>),
}

impl<'rt> std::ops::Deref for GroupRef<'_, 'rt> {
    type Target = PeGroup<'rt>;

    fn deref(&self) -> &PeGroup<'rt> {
        match self {
            GroupRef::Borrowed(group) => group,
            GroupRef::Owned(group) => group,
        }
    }
}

/// Phases that visit the nodes in order and, within each, its members in order: member `l`
/// of node `j` meets member `(l + b) mod m` of node `(j + a) mod nodes` in phase `(a, b)`.
/// Falls back to the plain order when nodes have different member counts.
fn node_aware_phases(group: &PeGroup<'_>, me: usize) -> Result<Vec<(usize, usize)>> {
    let n = group.len();
    let comm = group.communicator().expect("members have the group's communicator");
    // Each member learns the lowest group rank on its node: that is the node's name.
    let node_comm = comm.split_shared(me as c_int);
    let mut leader = [me as u64];
    let local: Vec<u64> = {
        let mut all = vec![0u64; node_comm.size() as usize];
        node_comm.all_gather_into(&leader[..], &mut all[..]);
        all
    };
    leader[0] = *local.iter().min().expect("a node has this member");
    let mut leaders = vec![0u64; n];
    comm.all_gather_into(&leader[..], &mut leaders[..]);
    let mut nodes: Vec<Vec<usize>> = Vec::new();
    let mut names: Vec<u64> = leaders.clone();
    names.sort_unstable();
    names.dedup();
    for name in &names {
        nodes.push((0..n).filter(|&r| leaders[r] == *name).collect());
    }
    let per_node = nodes[0].len();
    if nodes.iter().any(|node| node.len() != per_node) {
        return Ok((0..n).map(|i| ((me + i) % n, (me + n - i) % n)).collect());
    }
    let my_node = names.iter().position(|&name| name == leaders[me]).expect("own node");
    let my_local = nodes[my_node].iter().position(|&r| r == me).expect("own rank");
    let count = nodes.len();
    let mut phases = Vec::with_capacity(n);
    for a in 0..count {
        for b in 0..per_node {
            let dest = nodes[(my_node + a) % count][(my_local + b) % per_node];
            let src = nodes[(my_node + count - a) % count][(my_local + per_node - b) % per_node];
            phases.push((dest, src));
        }
    }
    Ok(phases)
}

impl<T: Pod> std::fmt::Debug for Alltoall<'_, '_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alltoall")
            .field("name", &self.name)
            .field("group", &self.group.name())
            .field("algorithm", &self.algorithm)
            .field("block", &self.block)
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}
