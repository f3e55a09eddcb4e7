//! The distributed real-to-complex 3-D FFT of the PME grid ([`MeshFft`]): in slabs (one
//! transpose each way, [`slab`]) or in pencils (a row and a column transpose each way,
//! [`pencil`]), as the grid is decomposed.
//!
//! Backward transforms are not normalised (a forward and backward pass multiply by
//! `Kx · Ky · Kz`), as smooth PME wants them: the convolution of the charge grid with the
//! influence function is the backward transform of their product, with no factor. The 1-D
//! transforms come from `rustfft` and `realfft`: pure Rust, AVX chosen at run time, plans for
//! any length (mixed radix for products of small primes, Rader and Bluestein for the rest),
//! and no native library to find at build time.
//!
//! The transposes go over whichever all-to-all algorithm the FFT was built with (ordered
//! one-sided, node-aware, ordered MPI, `MPI_Alltoall`, and for slabs the `shmem` baseline);
//! every one leaves the same bytes, so the spectrum and everything computed from it is bit for
//! bit the same on each. Each transpose block ends with one element more, the PME ranks' ballot
//! in the redistribution's vote on a step's error (the smallest wins), so that a step through
//! the mesh needs no vote of its own.

mod blocks;
mod pencil;
mod slab;
#[cfg(test)]
mod tests;
mod transform;

pub use blocks::Complex32;
pub use transform::MeshFft;
