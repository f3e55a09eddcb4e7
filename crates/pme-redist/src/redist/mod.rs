//! Redistribution of coordinates and charges from the particle PEs to the PME ranks, and of
//! forces back, between partners only ([`Redistribution`]), on paths that leave the same bytes
//! in the same places.
//!
//! At each plan every home atom gets a reach, the PME ranks it may reach before the next plan
//! ([`crate::model`]); a particle PE sends only to the union of its atoms' reaches (its
//! targets), and each target learns its sources and their bounds (`agreement.rs`), which size
//! its buffers (`buffers.rs`, `store.rs`). A step places and packs the home atoms
//! (`model/place.rs`, `by_rank.rs`) and moves them on one transport per class of link, each
//! one file behind the `Protocol` trait, handed the plan and the buffers: `get.rs` and
//! `put.rs` (the one-sided paths, on the slots of `lines.rs`), `mpi.rs`, `neighbor.rs` (a
//! baseline), and `mixed.rs` (MPI for one class of link, one-sided for the other); `path.rs`
//! settles an engine's [`Path`](onesided::Path) or [`Links`](onesided::Links) into the wire of
//! each class. `plan.rs` holds what every path shares: the layout of a step, its counts, and
//! the error an atom too far carries to every PE by the PME ranks' vote (`vote.rs`, MPI's, or
//! the mesh's transposes). `step.rs` is a step's view, `redistribution.rs` the hops of a
//! direct or relayed redistribution, `builder.rs` the choices every PE agrees on.
//!
//! A PME rank lays out what it receives by source PE, then each source's home order, so the
//! layout, and everything computed from it, is the same on every path and mix; the forces go
//! back with the same plan in reverse and land in home order. Why partners from the plan, and
//! what the design costs at scale: docs/design/PME-AT-SCALE.md.

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
