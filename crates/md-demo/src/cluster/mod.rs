//! The fast force kernel: the demo force field (Lennard-Jones plus reaction field, or the
//! real-space part of Ewald summation for PME) on a domain's local atoms through a clustered
//! Verlet pair list, in the manner of GROMACS's nbnxm (Páll and Hess 2013).
//!
//! - **Layout.** The atoms are sorted into columns over the x-y plane and by z within a
//!   column, each column padded to a multiple of [`J_CLUSTER`] slots. Four consecutive slots
//!   form an *i-cluster*, eight a *j-cluster*. Coordinates and parameters live in plain `f32`
//!   arrays in slot order, so the eight atoms of a j-cluster are one vector load.
//! - **Pair list.** Built every `nstlist` steps with the list radius `rlist` (the cutoff plus
//!   the Verlet buffer): for every i-cluster, the j-clusters whose bounding boxes lie within
//!   `rlist`, each with a 32-bit mask of the atom pairs that interact (not padding, not the
//!   same molecule, owned by this domain by their [zones](md_halo::Zone), and each pair once:
//!   slot of i below slot of j).
//!   Between builds the list is reused; the kernel applies the cutoff itself.
//! - **Kernel.** 4 × 8 pairs per list entry, written as loops over the eight j lanes that the
//!   compiler turns into vector instructions. The instruction set is chosen at run time
//!   ([`Isa::detect`]) through `#[target_feature]` copies of one body: AVX-512 on 256-bit
//!   vectors, AVX2, or the baseline (SSE2 on x86-64). Every pair is evaluated once and its
//!   force added to both atoms (Newton's third law).
//! - **Threads.** The i-clusters are cut into chunks of a fixed size; each chunk adds into its
//!   own force buffer and the buffers are summed in chunk order. Chunks depend on the system
//!   only, so the forces are bit for bit the same for any number of threads, and the same on
//!   every instruction set (no fused multiply-add, no approximate reciprocal).
//! - **Ewald.** Under [`Electrostatics::Ewald`] the kernel evaluates `erfc(βr)` in single
//!   precision with the rational approximation of Abramowitz and Stegun (7.1.26, absolute
//!   error below 1.5 × 10⁻⁷) and `exp(−β²r²)` with a polynomial that vectorises, shared by the
//!   potential and the force. Pairs within a molecule, which the mask leaves out, still need
//!   their Ewald exclusion correction (the reciprocal sum counts them): the list keeps those
//!   pairs apart and adds their correction in double precision after the kernel, in a fixed
//!   order.
//!
//! The code is split by concern: `chunk.rs` the clusters' sizes and chunks; `list.rs` the
//! list itself; `scratch.rs` the search's buffers; `layout.rs` sorts the atoms into columns and slots
//! (bounding boxes, coordinates in slot order); `search.rs` builds the list (the pair search,
//! its masks and the Ewald exclusions); `kernel.rs` holds the instruction sets and the kernel
//! over one chunk, with its `#[target_feature]` copies and the Ewald `erfc` and `exp`
//! helpers; `forces.rs` runs the kernel over the chunks, sums their forces and adds the
//! exclusion corrections; `images.rs` indexes the periodic images the list makes; `tests.rs`
//! holds the tests.
//!
//! [`Electrostatics::Ewald`]: crate::force::Electrostatics::Ewald

mod chunk;
mod forces;
mod images;
mod kernel;
mod layout;
mod list;
mod scratch;
mod search;

pub use chunk::{I_CLUSTER, J_CLUSTER};
pub use kernel::Isa;
pub use list::PairList;

#[cfg(test)]
mod tests;
