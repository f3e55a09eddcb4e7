//! The symmetric heap as this process sees it, owned by the runtime: the base every
//! allocation's offset is measured from, and how the heaps of the other PEs on this node are
//! mapped into this process (the implementation's `shmem_ptr`, the heaps this library shares,
//! or nothing).

use std::ffi::c_void;
use std::ptr::NonNull;

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::env::NodeHeapSetting;
use crate::error::{Error, Result};
use crate::node_heap::{self, NodeHeap};

/// The symmetric heap as this process sees it, owned by the runtime: the address every
/// allocation's offset is measured from (the first block allocated, the same on every PE
/// relative to each PE's heap), how the heaps of the other PEs on this node are mapped into
/// this process, and whether every PE's is.
pub(crate) struct HeapLayout {
    base: usize,
    mapping: Mapping,
    access: SameNodeAccess,
    all_mapped: bool,
    /// The PEs of this node (MPI's shared-memory split of the world), this one included,
    /// in increasing order: as many as the node runs, whatever the job's size.
    node_pes: Vec<usize>,
}

/// Where the addresses of other PEs' heaps come from.
enum Mapping {
    /// The direct path is off: nothing is mapped.
    Off,
    /// The implementation's `shmem_ptr`.
    Implementation,
    /// The heaps this library shared on the node ([`crate::node_heap`]).
    Node(NodeHeap),
}

/// How this PE reaches the symmetric memory of the other PEs on its node
/// ([`Runtime::same_node_access`](crate::Runtime::same_node_access)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SameNodeAccess {
    /// Loads and stores through the implementation's own mapping (`shmem_ptr`): Open MPI's
    /// OSHMEM over shared memory, Sandia OpenSHMEM with XPMEM.
    ImplementationMapping,
    /// Loads and stores through the heaps this library shares between the node's PEs where the
    /// implementation maps none (Sandia OpenSHMEM without XPMEM; see
    /// [`env::NODE_HEAP`](crate::env::NODE_HEAP)).
    SharedHeaps,
    /// Library calls only, for the reason given (the direct path is off, there is no other
    /// PE on the node, the implementation maps none and the heaps could not be shared).
    LibraryCalls(String),
}

impl std::fmt::Display for SameNodeAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SameNodeAccess::ImplementationMapping => {
                f.write_str("loads and stores through the implementation's mapping")
            }
            SameNodeAccess::SharedHeaps => f.write_str("loads and stores through the heaps onesided shares"),
            SameNodeAccess::LibraryCalls(why) => write!(f, "library calls ({why})"),
        }
    }
}

impl HeapLayout {
    /// Finds out how the heaps of this node's PEs can be reached, and shares them where the
    /// implementation maps none and the `setting` allows it. `first_block` is the job's first
    /// symmetric block; `direct` is whether transfers may go through a mapping at all.
    ///
    /// # Collective
    /// Every PE calls it during [`Runtime::init`](crate::Runtime::init), before any transfer
    /// into symmetric memory.
    pub(crate) fn collective_new(
        world: &SimpleCommunicator,
        first_block: usize,
        direct: bool,
        setting: NodeHeapSetting,
    ) -> Result<HeapLayout> {
        let n_pes = world.size() as usize;
        let (mapping, shared_reason) = if !direct {
            (Mapping::Off, Some(format!("{}=0", crate::env::DIRECT)))
        } else if cfg!(shmem_sos) {
            match node_heap::collective_map(world, setting, first_block, sos_heap_bounds) {
                Ok(node_heap::Outcome::Mapped(heap)) => (Mapping::Node(heap), None),
                Ok(node_heap::Outcome::Implementation) => (Mapping::Implementation, None),
                Ok(node_heap::Outcome::NotMapped(why)) => {
                    (Mapping::Off, Some(format!("the node's heaps are not shared: {why}")))
                }
                Err(problem) => {
                    return Err(Error::NodeHeap { pe: world.rank() as usize, problem });
                }
            }
        } else {
            (Mapping::Implementation, None)
        };
        let me = world.rank() as usize;
        let node_pes: Vec<usize> = {
            let node = world.split_shared(0);
            let mut ranks = vec![0i32; node.size() as usize];
            node.all_gather_into(&world.rank(), &mut ranks[..]);
            let mut pes: Vec<usize> = ranks.into_iter().map(|r| r as usize).collect();
            pes.sort_unstable();
            pes
        };
        let node_peers: Vec<usize> = node_pes.iter().copied().filter(|&pe| pe != me).collect();
        let mut layout = HeapLayout {
            base: first_block,
            mapping,
            access: SameNodeAccess::ImplementationMapping,
            all_mapped: false,
            node_pes,
        };
        layout.all_mapped = (0..n_pes).all(|pe| layout.remote(first_block, pe).is_some());
        layout.access = match (&layout.mapping, shared_reason) {
            (_, Some(why)) => SameNodeAccess::LibraryCalls(why),
            _ if node_peers.is_empty() => {
                SameNodeAccess::LibraryCalls("no other PE runs on this node".to_string())
            }
            _ if node_peers.iter().any(|&pe| layout.remote(first_block, pe).is_none()) => {
                SameNodeAccess::LibraryCalls("the implementation maps no other PE of this node".to_string())
            }
            (Mapping::Node(_), None) => SameNodeAccess::SharedHeaps,
            _ => SameNodeAccess::ImplementationMapping,
        };
        Ok(layout)
    }

    /// The address every symmetric allocation's offset is measured from.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    /// Whether the library maps every PE's heap into this process (and transfers may use it).
    pub(crate) fn all_mapped(&self) -> bool {
        self.all_mapped
    }

    /// The PEs of this node, this one included, in increasing order.
    pub(crate) fn node_pes(&self) -> &[usize] {
        &self.node_pes
    }

    /// How this PE reaches the other PEs of its node.
    pub(crate) fn same_node_access(&self) -> &SameNodeAccess {
        &self.access
    }

    /// Where the symmetric address `local` of PE `pe` (which must exist) is mapped into this
    /// process, if it is and transfers may use the mapping.
    pub(crate) fn remote(&self, local: usize, pe: usize) -> Option<NonNull<u8>> {
        match &self.mapping {
            Mapping::Off => None,
            Mapping::Implementation => {
                // SAFETY: `local` is a symmetric address (callers pass live blocks) and pe exists.
                let mapped = unsafe { shmem_sys::shmem_ptr(local as *const c_void, pe as i32) };
                NonNull::new(mapped.cast::<u8>())
            }
            Mapping::Node(heap) => {
                heap.translate(local, pe).and_then(|address| NonNull::new(address as *mut u8))
            }
        }
    }
}

/// This PE's Sandia OpenSHMEM heap around `first_block`: the anonymous mapping that holds it
/// bounds a bisection with `shmem_addr_accessible`, which is exact for the heap's extent.
fn sos_heap_bounds(first_block: usize) -> std::result::Result<(usize, usize), String> {
    let (start, end) = node_heap::anonymous_mapping_around(first_block)?;
    accessible_extent(first_block, start, end)
}

/// This PE's symmetric heap around `first_block` (its start and length), whatever kind of
/// mapping holds it: the span `shmem_addr_accessible` accepts within that mapping.
pub(crate) fn heap_bounds(first_block: usize) -> std::result::Result<(usize, usize), String> {
    let (start, end) = node_heap::mapping_around(first_block)?;
    accessible_extent(first_block, start, end)
}

/// The span around `first_block` within the mapping `start..end` that `shmem_addr_accessible`
/// accepts, found by bisection, in whole pages.
fn accessible_extent(
    first_block: usize,
    start: usize,
    end: usize,
) -> std::result::Result<(usize, usize), String> {
    // SAFETY: OpenSHMEM is initialised.
    let me = unsafe { shmem_sys::shmem_my_pe() };
    // SAFETY: any address may be asked about.
    let accessible =
        |address: usize| unsafe { shmem_sys::shmem_addr_accessible(address as *const c_void, me) } != 0;
    if !accessible(first_block) {
        return Err(format!("the first symmetric block {first_block:#x} is not accessible"));
    }
    let base = node_heap::lowest(start, first_block, accessible);
    let last = node_heap::highest(first_block, end - 1, accessible);
    let page = node_heap::page_size();
    let len = (last + 1 - base).div_ceil(page) * page;
    if base + len > end {
        return Err(format!("the heap {base:#x}+{len:#x} reaches past its mapping {start:#x}-{end:#x}"));
    }
    Ok((base, len))
}
