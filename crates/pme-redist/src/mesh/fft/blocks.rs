//! What both FFTs share: the spectrum's element, the split of a dimension over ranks, and the
//! ballot a transpose block carries.

use num_complex::Complex;

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
