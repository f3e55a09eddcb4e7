//! What both FFTs share: the spectrum's element, the 1-D plans, the split of a dimension over
//! ranks, and the ballot a transpose block carries.

use std::sync::Arc;

use num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftPlanner};

use crate::error::Error;

/// A single-precision complex number, the element of the spectrum.
pub type Complex32 = Complex<f32>;

/// A ballot of the PME ranks' vote (the smallest wins) as the element a transpose block
/// carries after its data: the `u64`'s bits, never used as a number.
pub(super) fn ballot_element(ballot: u64) -> Complex32 {
    bytemuck::cast(ballot)
}

/// The ballot an element made by [`ballot_element`] carries.
pub(super) fn ballot_of(element: Complex32) -> u64 {
    bytemuck::cast(element)
}

/// `r * n / m` for `r` in `0..=m`: the split of `n` items over `m` ranks that
/// [`PmeGrid`](crate::PmeGrid) uses for its slabs.
pub(super) fn split(n: usize, m: usize) -> Vec<usize> {
    (0..=m).map(|r| r * n / m).collect()
}

/// The most items of any rank in a split's `bounds`.
pub(super) fn widest(bounds: &[usize]) -> usize {
    bounds.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
}

/// A failed 1-D transform as the crate's error.
pub(super) fn fft_failed(e: realfft::FftError) -> Error {
    Error::Config(format!("a 1-D transform of the PME FFT failed: {e}"))
}

/// The 1-D transforms a rank needs, planned once: along z real to complex and back, along y
/// and x complex both ways.
pub(super) struct Plans {
    pub(super) r2c: Arc<dyn RealToComplex<f32>>,
    pub(super) c2r: Arc<dyn ComplexToReal<f32>>,
    pub(super) y: Arc<dyn Fft<f32>>,
    pub(super) y_inverse: Arc<dyn Fft<f32>>,
    pub(super) x: Arc<dyn Fft<f32>>,
    pub(super) x_inverse: Arc<dyn Fft<f32>>,
}

impl Plans {
    pub(super) fn new(k: [usize; 3]) -> Plans {
        let mut real = RealFftPlanner::<f32>::new();
        let mut complex = FftPlanner::<f32>::new();
        Plans {
            r2c: real.plan_fft_forward(k[2]),
            c2r: real.plan_fft_inverse(k[2]),
            y: complex.plan_fft_forward(k[1]),
            y_inverse: complex.plan_fft_inverse(k[1]),
            x: complex.plan_fft_forward(k[0]),
            x_inverse: complex.plan_fft_inverse(k[0]),
        }
    }

    /// Scratch enough for any of the transforms.
    pub(super) fn scratch_len(&self) -> usize {
        [
            self.r2c.get_scratch_len(),
            self.c2r.get_scratch_len(),
            self.y.get_inplace_scratch_len(),
            self.y_inverse.get_inplace_scratch_len(),
            self.x.get_inplace_scratch_len(),
            self.x_inverse.get_inplace_scratch_len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}
