//! The PME decomposition: a charge grid `Kx × Ky × Kz` over a rectangular or triclinic box,
//! split over the PME ranks into slabs along its first axis or into pencils along x and y
//! (`Px × Py` ranks, rank `a · Py + b` holding x planes of row `a` and y lines of column
//! `b`, every z), and where an atom sits on it.
//!
//! The box is given as GROMACS gives it: three box vectors, the rows of its `matrix box`,
//! a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz). An atom is placed by its fractional
//! coordinates through the reciprocal box, as GROMACS's `calc_interpolation_idx` does:
//! s_x = x·rxx + y·ryx + z·rzx, s_y = y·ryy + z·rzy, s_z = z·rzz, each wrapped into [0, 1)
//! and scaled by the grid size. Grid plane `i` along x is therefore the plane s_x = i / Kx,
//! parallel to b and c; the slabs are stacks of such planes. One function computes an atom's
//! grid line from its position, so that every placement agrees to the bit; the eight-wide
//! placement of the redistribution (`model/place.rs`) hands it the atoms it cannot place
//! exactly.
//!
//! A grid made from a spacing has along each dimension at least the length of that box vector
//! over the spacing, rounded up to a product of 2, 3, 5 and 7, as GROMACS's `calcFftGrid`
//! sizes it. [`PmeDecomposition::Auto`] keeps slabs while each holds `2 (order - 1)` planes,
//! as GROMACS decides, and pencils beyond; every slab or pencil is at least the interpolation
//! order thick.

mod build;
mod pme_grid;
#[cfg(test)]
mod tests;

pub use build::{PmeDecomposition, PmeGridBuilder};
pub use pme_grid::PmeGrid;
