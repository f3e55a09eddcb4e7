//! What a force kernel needs of the halo beside the coordinates: which pairs a domain owns
//! ([`PairOwner`], [`Zone`]), the periodic images it may make itself ([`PeriodicImages`],
//! [`PeriodicImage`]), and the forces that crossed the periodic boundaries, for the virial
//! ([`ShiftForces`]); and the one rule of the plan, which atoms a pulse sends by their zones
//! ([`sends`]), shared by the exchange and the scale model. Plain values: no runtime.

use crate::pbc::PbcBox;
use crate::real::Real;

/// The forces that came back across the periodic boundaries in one
/// [`move_f`](crate::Step::move_f): what GROMACS's `dd_move_f` adds to its shift forces.
///
/// The virial of the pair forces then needs only home atoms:
/// `Ξ = -½ (Σ_home x ⊗ f + Σ_d vector_d ⊗ along(d))`, summed over all PEs, with `x` the home
/// positions of the step and `f` the total forces after `move_f`. The exchange sums them in
/// double precision, in the pass that adds the returned forces to their atoms, in an order
/// fixed by the send lists: the same bits for any thread count.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShiftForces {
    pub(crate) along: [[f64; 3]; 3],
}

impl ShiftForces {
    /// The total force on halo images shifted by box vector `d` that this PE received back.
    pub fn along(&self, d: usize) -> [f64; 3] {
        self.along[d]
    }

    /// Adds the force on a periodic image the kernel made ([`PeriodicImages::Kernel`]), once
    /// per box vector it is shifted by: how a force kernel that makes the images itself sums
    /// the shift forces it returns beside [`Step::move_f`](crate::Step::move_f)'s.
    #[inline]
    pub fn add_image<R: Real>(&mut self, image: &PeriodicImage<R>, force: [f64; 3]) {
        for (along, &cells) in self.along.iter_mut().zip(&image.cells) {
            if cells > 0 {
                for (sum, f) in along.iter_mut().zip(force) {
                    *sum += cells as f64 * f;
                }
            }
        }
    }

    /// This PE's shift term of the virial, `-½ Σ_d vector_d ⊗ along(d)`, as `[row][column]`.
    pub fn virial(&self, pbc: &PbcBox) -> [[f64; 3]; 3] {
        let v = pbc.vectors();
        std::array::from_fn(|r| {
            std::array::from_fn(|c| -0.5 * (0..3).map(|d| v[d][r] as f64 * self.along[d][c]).sum::<f64>())
        })
    }
}

impl std::ops::AddAssign for ShiftForces {
    fn add_assign(&mut self, other: ShiftForces) {
        for (mine, theirs) in self.along.iter_mut().zip(other.along) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
    }
}

/// Who makes the periodic images along the dimensions of the grid with one domain, where a
/// domain is its own neighbour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PeriodicImages {
    /// The halo exchange: [`HaloExchange::move_x`](crate::HaloExchange::move_x) writes each
    /// image behind the halo atoms from its stored atom plus its whole shift, and
    /// [`Step::move_f`](crate::Step::move_f) adds their forces back to their atoms, pulse by
    /// pulse. Any force kernel that takes plain coordinates works.
    #[default]
    Halo,
    /// The force kernel, as GROMACS's does with shift vectors: the halo exchange runs only the
    /// pulses between PEs, the step's coordinates and forces cover the
    /// [`stored_count`](crate::HaloExchange::stored_count) atoms, and
    /// [`HaloExchange::images`](crate::HaloExchange::images) lists each image as an atom and a
    /// shift. The kernel adds the shift where it loads the atom ([`PeriodicImage::position`])
    /// and adds the image's force to the atom's, and returns the shift forces
    /// ([`ShiftForces::add_image`]); no pass over the images is left in the exchange. On 20 736
    /// atoms over 2 PEs (grid 1x2x1) the images are two of the three pulses, and under `Halo`
    /// each costs 3-6 µs of gather in `move_x` and as much of scatter-add in `move_f`, on
    /// either path, about half of each exchange.
    Kernel,
}

/// A periodic image of a stored local atom that the force kernel makes
/// ([`PeriodicImages::Kernel`]): local atom `stored_count() + k` is `atom` shifted by
/// `vector`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicImage<R: Real = f32> {
    /// The stored local atom (home or halo) it is an image of.
    pub atom: u32,
    /// How many times each box vector is added: 0 or 1, and 1 only along dimensions of one
    /// domain (the range is below half the box, so each such dimension has one pulse).
    pub cells: [u32; 3],
    /// The shift, `Σ_d cells[d] · box vector d`.
    pub vector: [R; 3],
}

impl<R: Real> PeriodicImage<R> {
    /// The image's position, given its atom's position `x`: `x + vector`, as the halo makes
    /// it under [`PeriodicImages::Halo`].
    #[inline]
    pub fn position(&self, x: [R; 3]) -> [R; 3] {
        let v = self.vector;
        [x[0] + v[0], x[1] + v[1], x[2] + v[2]]
    }
}

/// Which pairs of local atoms a domain computes
/// ([`HaloExchange::pair_owner`](crate::HaloExchange::pair_owner)): GROMACS's eighth-shell
/// rule on the domains the two atoms came from. An atom's home domain lies some
/// pulses above this one along each dimension it was received along (its [`Zone`]); the
/// domain computes a pair when, along every dimension, at least one of the two was not
/// received along it: this domain is the componentwise lowest of their two home domains.
/// Across all domains every pair within the interaction range is owned exactly once, in
/// whichever images the domains hold it, staggered boundaries included. Without staggering
/// it is the pair whose corner (the componentwise minimum of the two atoms' fractions) lies
/// in the domain.
#[derive(Clone, Copy, Debug)]
pub struct PairOwner<'a> {
    pub(crate) zones: &'a [Zone],
}

impl PairOwner<'_> {
    /// Whether the domain computes the interaction of local atoms `i` and `j`.
    #[inline]
    pub fn owns(&self, i: usize, j: usize) -> bool {
        self.zones[i].pairs_with(self.zones[j])
    }

    /// The zone of local atom `i`: the dimensions it was received along, so that
    /// [`Zone::pairs_with`] answers [`owns`](Self::owns) from two bytes.
    pub fn zone(&self, i: usize) -> Zone {
        self.zones[i]
    }

    /// The zones of all local atoms, in local order.
    pub fn zones(&self) -> Vec<Zone> {
        self.zones.to_vec()
    }
}

/// How a local atom reached its domain: bit `d` is set when it was received along dimension
/// `d` (from a domain above, or as a periodic image along a dimension of one domain), which
/// places its home domain above this one along `d`. A domain computes a pair when no
/// dimension has both atoms' bits set. Home atoms are [`Zone::HOME`]. A force kernel keeps
/// one byte per atom and decides ownership with two bit operations, for any number of atoms
/// at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Zone(u8);

impl Zone {
    /// Not received along any dimension: a home atom.
    pub const HOME: Zone = Zone(0);
    /// Bits `0..3`: received along dimension `d`, from above.
    pub const ABOVE: u8 = 0b111;

    /// The zone with these bits ([`ABOVE`](Self::ABOVE)); other bits are dropped.
    pub fn from_bits(bits: u8) -> Zone {
        Zone(bits & Self::ABOVE)
    }

    /// The bits of the zone.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// This zone, received along `d` as well.
    pub(crate) fn received_along(self, d: usize) -> Zone {
        Zone(self.0 | 1 << d)
    }

    /// Whether the domain computes the pair of an atom in zone `self` with one in `other`:
    /// the answer of [`PairOwner::owns`] for the two atoms.
    #[inline]
    pub fn pairs_with(self, other: Zone) -> bool {
        Zone::pair_bits(self.0, other.0)
    }

    /// [`pairs_with`](Self::pairs_with) on raw bits, for vectorised loops.
    #[inline(always)]
    pub fn pair_bits(a: u8, b: u8) -> bool {
        (a & b & Self::ABOVE) == 0
    }
}

/// The local atoms among `candidates` that a pulse along `dim` sends down: those whose
/// reference fraction lies below the limit of their zone (the range above the domain's lower
/// face, or above a higher lower face of a row of domains above it where the grid is
/// staggered: [`DdGrid::send_limits`](crate::DdGrid::send_limits)). The one rule of the plan,
/// shared by the exchange and by [`crate::model`].
pub(crate) fn sends<'a>(
    reference: &'a [[f64; 3]],
    zones: &'a [Zone],
    candidates: std::ops::Range<usize>,
    dim: usize,
    limits: [f64; 8],
) -> impl Iterator<Item = u32> + 'a {
    candidates.filter(move |&i| reference[i][dim] < limits[zones[i].bits() as usize]).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_owned_unless_both_came_along_one_dimension() {
        let zones: Vec<Zone> = (0..8).map(Zone::from_bits).collect();
        let owner = PairOwner { zones: &zones };
        for i in 0..8 {
            for j in 0..8 {
                let shared = (0..3).any(|d| i & j & (1 << d) != 0);
                assert_eq!(owner.owns(i, j), !shared, "zones {i:03b} and {j:03b}");
                assert_eq!(zones[i].pairs_with(zones[j]), !shared);
            }
        }
        assert!(owner.owns(0, 7) && !owner.owns(1, 3) && owner.owns(1, 6));
        assert_eq!(Zone::from_bits(0xff).bits(), 0b111);
        assert_eq!(Zone::HOME.received_along(1).received_along(2).bits(), 0b110);
    }
}
