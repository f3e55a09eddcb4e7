//! The symmetric heap: typed symmetric arrays, exact and grow-to-global-max.
//!
//! Symmetric memory is memory other PEs write without this process's knowledge. The safe
//! accessors therefore only copy (a race between a remote put and a local copy of the same
//! elements gives unspecified, possibly torn values, never a reference to changing memory);
//! a slice view is `unsafe` and its contract is that no PE writes the array while the view
//! lives. Higher-level types that know their protocol (the send-receive channels) hand out
//! safe views.

mod array;
mod global_max;

pub use crate::raw::SYMMETRIC_ALIGN;
pub use array::SymArray;
pub use global_max::{GlobalMaxArray, Growth, GrowthPolicy};
