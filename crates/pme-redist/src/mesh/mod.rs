//! Smooth PME's mesh on the PME ranks (Essmann et al. 1995): the charges spread onto the
//! grid, the overlap planes exchanged, the distributed 3-D FFT, the solve, the FFT back and the
//! forces gathered ([`Pme`], one step per call). It needs nothing of the redistribution but the
//! share of a step it is handed ([`Mesh`](crate::Mesh)).

mod fft;
mod pme;
mod solve;
mod spread;

pub use fft::{Complex32, MeshFft};
pub use pme::{Pme, PmeBuilder, PmeTimes};
pub(crate) use solve::Influence;
pub use solve::{ONE_4PI_EPS0, ewald_coefficient};
pub use spread::SlabGrid;
