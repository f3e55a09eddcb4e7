//! Domain decomposition: a grid of `Nx × Ny × Nz` domains over a periodic box, one per PE;
//! the PE of domain `(i, j, k)` is `(i*Ny + j)*Nz + k`.
//!
//! Domains are slices of the box in fractional coordinates (GROMACS's skewed coordinates, up
//! to the diagonal scale): domain `i` along `d` holds the fractions `[b_i, b_(i+1))` of that
//! dimension's boundaries `0 = b_0 < b_1 < ... < b_N = 1`, equal slices `b_i = i/N` as
//! [`DdGrid::new`] makes them, or where load balancing moved them
//! ([`DdGrid::with_bounds`], [`crate::Dlb`]). In a rectangular box these are the familiar
//! rectangular domains; in a triclinic box they are parallelepipeds with faces parallel to the
//! box faces. A halo range `r` in real space reaches `r / height(d)` in fraction `d`, the
//! height being the distance between the box faces that fraction `d` crosses.
//!
//! The boundaries may be **staggered**, as GROMACS's load balancing staggers them
//! ([`DdGrid::with_rows`]): each row of domains along `d` (the domains that share their
//! indices along the dimensions before `d`) has boundaries of its own, so that y's
//! boundaries differ from one x slab to the next and z's from one (x, y) column to the next.
//! A domain is still a box in fractions; which domain holds a point is found dimension by
//! dimension (x, then y in that slab's boundaries, then z in that column's). After balancing,
//! a PE's grid holds only the rows near its domain ([`DdGrid::near`]); the rows, their limits
//! and such grids are in `rows.rs`, the grid itself in `domains.rs`.

mod domains;
mod rows;
mod rowset;

pub use domains::{DdGrid, MAX_PULSES};
pub(crate) use rowset::equal_bounds;
