//! The redistribution's plan without a runtime, as md-halo's `model` is the halo's: which PME
//! ranks each atom may reach (`reach.rs`) and on which rank each lies now (`place.rs`). The
//! redistribution's collective plan and the scale model compute the same from it.

mod place;
mod reach;

pub(crate) use place::place;
pub(crate) use reach::{MOST_ROWS, Margin, Reach, RowCounts};
pub use reach::{StageTarget, planned_stage_targets, planned_targets};
