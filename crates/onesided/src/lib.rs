//! Safe one-sided (PGAS) communication over OpenSHMEM, for molecular-dynamics codes.
//!
//! - [`Runtime`]: MPI and OpenSHMEM initialised together with full thread support; one per
//!   process; PE number and count, barrier, fence, quiet, MPI's world communicator for
//!   two-sided reference paths.
//! - [`SymArray`]: typed symmetric arrays of plain-old-data elements, allocated collectively
//!   ([`SymArray::collective_alloc`], exact; [`GlobalMaxArray`], grow to the global maximum),
//!   with bounds-checked [`put`](SymArray::put) and [`get`](SymArray::get), non-blocking
//!   transfers in a [scope](Runtime::nbi_scope), and [direct access](SymArray::direct) to PEs
//!   on the same node.
//! - [`AtomicArray`]: 64-bit remote atomics.
//! - [`SignalArray`]: monotonic signals, [put-with-signal](SymArray::put_signal), waits that
//!   time out with a diagnosis instead of hanging.
//! - [`CallCounters`]: pairwise synchronisation without barriers.
//! - Collectives: sums, minima and maxima of floating-point and integer values, one value
//!   ([`Runtime::all_sum`], [`Runtime::all_min`], [`Runtime::all_max`]) or a slice
//!   ([`Runtime::all_reduce`]), the same bits on every PE; [`Runtime::max_u64`],
//!   [`Runtime::broadcast`], [`Runtime::barrier`].
//!
//! - [`launch`]: an engine's own binary started as PEs on one node
//!   ([`launch::ensure_launched`]), without a script.
//! - [`doctor`]: the start-up failures users hit (a launch that starts each process alone,
//!   PEs with different libraries or settings, address randomisation under CMA, a heap too
//!   small), refused on every PE by [`Runtime::init`] and the allocations with the fix; the
//!   report of what each node got ([`StartReport::collective_gather`]), which the
//!   `onesided-doctor` program prints under the launcher.
//!
//! Operations that every PE must call are named `collective_*` or say so under
//! **Collective** in their documentation. Dropping a symmetric object frees it and is
//! collective too: every PE drops its copy, from the thread that issues its collectives
//! (symmetric objects are `Sync` but not `Send`). Allocation checks that every PE asked for
//! the same size and that the heap has the same layout everywhere, and fails on every PE
//! alike when not, so a mistake becomes an error rather than a hang or a stray write.
//!
//! # When one PE fails
//! [`Error::scope`] says which PEs see an error. One that every PE returns from the same
//! collective call ([`ErrorScope::EveryPe`]: PEs that disagree on a length or a group, a
//! heap that diverged) lets the PEs end normally together. One that only this PE sees
//! ([`ErrorScope::ThisPe`]: a wait that timed out, a message refused, a frozen capacity
//! exceeded) leaves the others waiting for it: end the job with [`Runtime::abort`] rather
//! than returning, as the examples do. A PE that panics ends the job by itself. A call into
//! OpenSHMEM or MPI that blocks on a peer past `ONESIDED_WAIT_TIMEOUT` (a node or link down,
//! a PE stopped) ends the job too, with a message naming the call and the peer: see
//! [`watchdog`].
//!
//! ```no_run
//! use onesided::{Runtime, SignalArray, SymArray};
//!
//! fn main() -> onesided::Result<()> {
//!     let rt = Runtime::init()?;
//!     let (me, n) = (rt.my_pe(), rt.n_pes());
//!     let inbox = SymArray::<u64>::collective_alloc(&rt, "inbox", 4)?;
//!     let arrived = SignalArray::collective_alloc(&rt, "arrived", 1)?;
//!     let right = (me + 1) % n;
//!     let message = [me as u64; 4];
//!     inbox.put_signal(right, 0, &message, &arrived, 0, 1)?;
//!     arrived.wait_ge(0, 1)?;
//!     println!("PE {me} received {:?}", inbox.to_vec_local());
//!     Ok(())
//! }
//! ```
#![deny(missing_docs)]

pub mod agree;
mod alltoall;
mod any_error;
mod atomic;
mod cache;
mod collective;
mod constants;
mod counter;
pub mod doctor;
pub mod env;
mod error;
mod gather;
mod group;
mod heap;
mod host;
pub mod launch;
mod layout;
pub mod links;
mod mpi_raw;
mod mpi_window;
mod node_heap;
mod path;
mod poll;
mod raw;
mod reduce;
mod rma;
mod runtime;
mod scratch;
mod sendrecv;
mod signal;
mod startup;
pub mod twosided;
pub mod watchdog;

pub use agree::{Agreed, Agreement, Fnv1a};
pub use alltoall::{Alltoall, AlltoallAlgorithm, AlltoallBuilder, AlltoallCall, DIRECT_PACK_MIN, FusedCall};
pub use any_error::{AnyError, ScopedError};
pub use atomic::{AtomicArray, AtomicInt};
pub use collective::Collectives;
pub use counter::CallCounters;
pub use doctor::{NodeReport, StartReport};
pub use error::{Error, ErrorScope, ExchangeProblem, Result};
pub use group::PeGroup;
pub use heap::{GlobalMaxArray, Growth, GrowthPolicy, SYMMETRIC_ALIGN, SymArray};
pub use layout::SameNodeAccess;
pub use links::{Links, LinksSource, Measured};
/// The MPI bindings (rsmpi) this crate is built on, for an engine's own two-sided
/// communication on [`Runtime::world`] with the same version.
pub use mpi;
pub use path::{Path, Transport};
pub use raw::HeapStatus;
pub use reduce::{ReduceOp, Reducible};
pub use rma::{DirectAccess, NbiScope};
pub use runtime::{Implementation, Runtime};
pub use sendrecv::{Call, Exchange, ExchangeBuilder, Incoming, LANES, Offer, Outgoing};
pub use signal::SignalArray;
