//! Redistribution of coordinates and charges from the particle PEs to the PME ranks, and of
//! forces back, between partners only, on five paths that leave the same bytes in the same
//! places.
//!
//! **Partners from the plan** ([`Redistribution::collective_plan`], which every PE calls at
//! each repartition): each home atom may reach the PME ranks whose slabs lie within the
//! displacement margin of where it is ([`RedistBuilder::displacement_margin`]; by default the
//! slab, or pencil row and column, either side of its own). A particle PE sends, every step, to those PME ranks alone
//! (its targets), and at most as many atoms to each as can reach it (its bound). At the plan
//! each PME rank learns who its sources are and their bounds (`partners.rs`: a remote
//! fetch-add per target and two barriers, nothing of the size of the job), and its receive
//! and force buffers are sized by the sum of those bounds, about its share of the atoms, not
//! by the system. An atom found outside its reach withholds its PE's atoms for that step and
//! is reported by every PE at the step's end: the PME ranks agree on the smallest error
//! (`vote.rs`) and return it to their sources with the status, so that no count travels
//! between PEs that are not partners.
//!
//! - **onesided-get** (the 2013 SHMEM port of GROMACS's design): each particle PE packs its
//!   atoms by target into its symmetric send buffer and announces to each target, in one put
//!   with a signal, its count and where the atoms lie; the PME rank gets them straight from
//!   there and adds one to the source's `taken` counter (monotonic over the calls, never
//!   reset). Forces come back the same way in reverse, read where they lie on the node.
//! - **onesided-put**: the same announcement, then each PME rank offers each source where its
//!   atoms go and the source writes them there, packed straight into place through the
//!   mapping of a same-node PME rank, so each atom is written once, where it is needed.
//! - **mpi**: one `MPI_Isend` per target; each PME rank probes its sources in source order
//!   (`MPI_Mprobe`, which gives the count) and receives into place (`MPI_Mrecv`).
//! - **mpi-alltoallv**, the reference over every rank: `MPI_Alltoall` of the counts, then
//!   `MPI_Alltoallv` of the data.
//! - **mpi-neighbor**: MPI's neighbourhood collectives on distributed graphs of the partners,
//!   made at each plan: `MPI_Neighbor_alltoall` of the counts, `MPI_Neighbor_alltoallv` of
//!   the data.
//! - **auto**: per pair of PEs, the path its link class was measured or set fastest on
//!   (`onesided`'s links, [`RedistLinks`]): on one node the same-node class's path; across
//!   nodes, where one class took MPI and the other a one-sided path, each pair its own
//!   (`mixed.rs`: the MPI part posted around the one-sided part, MPI's vote), else the
//!   other-node class's path for every pair.
//!
//! **Relay** ([`RedistBuilder::relay`], PME on a subset of the PEs): as in GROMACS, each
//! particle PE sends all its atoms to one PME rank, its relay ([`PmeGrid::relay_rank`]: one
//! under its domain, as many domains per PME rank as any other), which passes each on to its
//! own PME rank. Both hops are redistributions as above on the same path: the first with one
//! target per particle PE and no vote (no atom can be too far for it), the second among the
//! PME ranks, whose home atoms are what the relay received, with the margin, the partners and
//! the vote; the forces come back through the second hop, then the first. On pencils the
//! second hop runs in two stages, as GROMACS's does: along y within the relay's row (each
//! atom checked against its whole reach), then along x within each column, planned from the
//! counts per row the first stage's agreement carries, with the vote (`plan::Stage`). A
//! particle PE then sends one message each way per step; the price is that the atoms outside
//! their relay's pencil travel twice or three times (the scale model tabulates both
//! routings).
//!
//! Each transport is one file behind the `Transport` trait (`get.rs`, `put.rs`, `mpi.rs`,
//! `neighbor.rs`, and `mixed.rs` of one-sided and MPI parts; the one-sided paths' lines and
//! counters in `lines.rs`), handed the plan and the buffers;
//! `path.rs` names the paths and links and settles `auto`; `plan.rs` holds what every path
//! shares (the layout of a step, the counts, the errors a step carries), `place.rs` where each atom goes, and `by_rank.rs` the packing and
//! unpacking: a step reads the home atoms twice (placement, with the counts per rank and
//! where each run of atoms of one rank starts, then packing, a copy per run); on the put path
//! to a mapped PME rank it writes each atom once, into place. Forces are unpacked into home
//! order in one pass, by the same runs.
//!
//! A PME rank lays out what it receives by source PE, so the layout, and everything computed
//! from it, is the same on every path. The forces on a PME rank's atoms go back to their
//! sources with the same plan in reverse and land in the sources' original (home) order.

mod agreement;
mod buffers;
mod builder;
mod by_rank;
mod get;
mod lines;
mod mixed;
mod mpi;
#[cfg(feature = "baselines")]
mod neighbor;
mod path;
mod plan;
mod protocol;
mod put;
mod redistribution;
mod step;
mod store;
mod vote;

pub use buffers::GROWTH_FACTOR;
pub use builder::RedistBuilder;
#[cfg(feature = "baselines")]
pub use path::RedistBaseline;
pub use redistribution::Redistribution;
pub use step::Step;
