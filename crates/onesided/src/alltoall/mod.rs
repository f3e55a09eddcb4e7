//! All-to-all within a PE group: every member sends one block to every member.
//!
//! Every algorithm gives the same bytes:
//! - **ordered one-sided**, Kutzner et al.'s ordered all-to-all: in phase `i` a member sends
//!   to rank `(me + i) mod n` and receives from rank `(me - i) mod n`, and phases are
//!   separated by pairwise signals that carry the call number, as call counters do (each
//!   member tells its source it is ready, waits for its destination to be ready, puts with a
//!   signal, and waits for its source's data), instead of barriers;
//! - **node-aware one-sided**: the same with the phases looping over nodes first and then over
//!   the members of a node, so a node's members talk to one other node at a time (with
//!   unequal node sizes it falls back to the plain order);
//! - **ordered MPI**: the same phases as `MPI_Sendrecv`;
//! - **MPI**: `MPI_Alltoall` on the group's communicator;
//! - **shmem** (a baseline, with the `baselines` feature): `shmem_alltoall64` (or `32`) on
//!   the group as an active set, after a barrier that keeps a fast member from writing into a
//!   slow one's result while it is still read.
//!
//! Each member packs its outgoing blocks into [`Alltoall::send_buffer`] (block `r` goes to
//! rank `r`), or hands a call a packing function, and reads the result, block `r` from rank
//! `r`, from what [`AlltoallCall::run`] returns. Both are symmetric arrays, so no algorithm
//! copies more than it must. `algorithm.rs` names the algorithms, `state.rs` holds the
//! buffers and phases, `call.rs` a call and the protocols, `calibrate.rs` what
//! [`Path::Auto`](crate::Path::Auto) measures, `builder.rs` the construction.

mod algorithm;
mod builder;
mod calibrate;
mod call;
mod state;

pub use algorithm::AlltoallAlgorithm;
pub use builder::AlltoallBuilder;
pub use call::{AlltoallCall, DIRECT_PACK_MIN, FusedCall};
pub use state::Alltoall;
