//! The protocol each transport of the redistribution implements ([`Protocol`]), one file each.

use super::buffers::{Buffers, Forces};
use super::plan::Plan;
use crate::error::Result;
use crate::particle::{Particle, RVec};

/// One transport's protocol for the two halves of a step, once every home atom's PME rank
/// and the counts are known: each implementation reads top to bottom in its own file and
/// holds its own state; it is handed the plan, which it reads and completes (the counts it
/// receives, the errors it hears of), and the buffers, which it moves data between.
pub(super) trait Protocol<'rt> {
    /// Fits the transport's own state to a new plan's partners.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    fn collective_replan(&mut self, _plan: &Plan<'rt>) -> Result<()> {
        Ok(())
    }

    /// Symmetric bytes the transport holds of its own.
    fn symmetric_bytes(&self) -> usize {
        0
    }

    /// Counts and the `home` atoms to the PME ranks (packed by [`Plan::pack`]).
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()>;

    /// The PME ranks' vote on the step's error, then status and `forces` (one per received
    /// atom, on PME ranks) back to the atoms' PEs, into
    /// their force receive buffers, by PME rank; or, where the transport can, unpacked
    /// straight into `home_forces` (then it returns `true`, and `false` otherwise).
    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool>;

    /// Waits until no PE reads this PE's force staging buffer any more, so that it may be
    /// written: on the one-sided paths, until every PE has taken the forces of the last
    /// return that left them to be read.
    fn forces_free(&mut self, _plan: &Plan<'rt>) -> Result<()> {
        Ok(())
    }
}
