//! Smooth PME's mesh on the PME ranks (Essmann et al. 1995), one step per call of
//! [`Pme::collective_step`] with a step's share ([`Mesh`](crate::Mesh)), whose forces it
//! gathers into the redistribution's own buffer:
//!
//! ```text
//! spread (SlabGrid) ─ overlap to the slab below ─ forward FFT (MeshFft) ─ solve (Reciprocal)
//!    ─ backward FFT ─ overlap back ─ gather (SlabGrid) ─ forces to their owners (Step)
//! ```
//!
//! It needs nothing of the redistribution but that share. The share's vote on the step's error
//! rides in the forward transposes when the mesh's group is the redistribution's PME ranks.

mod fft;
mod pme;
mod solve;
mod spread;

pub use fft::{Complex32, MeshFft};
pub use pme::{Pme, PmeBuilder, PmeTimes};
pub(crate) use solve::{Influence, virial_of};
pub use solve::{ONE_4PI_EPS0, PmeEnergy, ewald_coefficient, ewald_self_energy};
pub use spread::SlabGrid;
