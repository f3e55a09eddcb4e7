//! The symmetric heap: typed symmetric arrays, exact ([`SymArray`], whose documentation holds
//! the memory model) and grown to the global maximum ([`GlobalMaxArray`]), on the untyped
//! blocks of `raw.rs`.

mod array;
mod global_max;

pub use crate::raw::SYMMETRIC_ALIGN;
pub use array::SymArray;
pub use global_max::{GlobalMaxArray, Growth, GrowthPolicy};
