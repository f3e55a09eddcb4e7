//! The layout of the atoms: columns over the x-y plane, slots in clusters, bounding boxes,
//! and the coordinates and parameters in slot order.

use md_halo::{PeriodicImage, RVec};

use super::chunk::{J_CLUSTER, PADDING, keep_room};
use crate::force::bucket;

/// An axis-aligned bounding box; empty (lower above upper) when it holds no atom.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    pub(super) lower: [f32; 3],
    pub(super) upper: [f32; 3],
}

impl Bounds {
    pub(super) const EMPTY: Bounds = Bounds { lower: [f32::INFINITY; 3], upper: [f32::NEG_INFINITY; 3] };

    pub(super) fn add(&mut self, x: [f32; 3]) {
        for ((lower, upper), c) in self.lower.iter_mut().zip(&mut self.upper).zip(x) {
            *lower = lower.min(c);
            *upper = upper.max(c);
        }
    }

    /// The box around all of `boxes`.
    pub(super) fn union(boxes: &[Bounds]) -> Bounds {
        let mut all = Bounds::EMPTY;
        for b in boxes.iter().filter(|b| !b.is_empty()) {
            all.add(b.lower);
            all.add(b.upper);
        }
        all
    }

    pub(super) fn is_empty(&self) -> bool {
        self.lower[0] > self.upper[0]
    }

    /// Squared distance between two boxes along the dimensions `dims`.
    pub(super) fn distance2(&self, other: &Bounds, dims: std::ops::Range<usize>) -> f32 {
        dims.map(|d| {
            let gap = (other.lower[d] - self.upper[d]).max(self.lower[d] - other.upper[d]).max(0.0);
            gap * gap
        })
        .sum()
    }
}

/// Atom data in slot order.
#[derive(Clone, Debug, Default)]
pub(super) struct Slots {
    pub(super) x: Vec<f32>,
    pub(super) y: Vec<f32>,
    pub(super) z: Vec<f32>,
    /// Charge times √(1/4πε₀): the product of two is the Coulomb prefactor.
    pub(super) charge: Vec<f32>,
    /// √(6 C6) and √(12 C12): the product of two is the geometric combination, times the
    /// factors of the force.
    pub(super) sqrt_c6: Vec<f32>,
    pub(super) sqrt_c12: Vec<f32>,
}

/// Where padding in `slot` sits: far from every atom and from all other padding, so that
/// the pair search finds nothing near it (the kernel ignores it by its mask bits).
fn far(slot: usize) -> f32 {
    1e9 + 1e6 * slot as f32
}

/// Copies the coordinates into slot order; padding keeps its place [far] away.
pub(super) fn gather(atom_of_slot: &[u32], positions: &[RVec], images: &[PeriodicImage], slots: &mut Slots) {
    let n = atom_of_slot.len();
    if slots.x.len() != n {
        for v in [&mut slots.x, &mut slots.y, &mut slots.z] {
            v.clear();
            v.extend((0..n).map(far));
        }
    }
    let stored = positions.len();
    for (((&atom, x), y), z) in atom_of_slot.iter().zip(&mut slots.x).zip(&mut slots.y).zip(&mut slots.z) {
        if let Some(p) = positions.get(atom as usize) {
            (*x, *y, *z) = (p[0], p[1], p[2]);
        } else if let Some(image) = (atom as usize).checked_sub(stored).and_then(|k| images.get(k)) {
            // As the halo makes an image: its atom's position plus the whole shift.
            let p = image.position(positions[image.atom as usize]);
            (*x, *y, *z) = (p[0], p[1], p[2]);
        }
    }
}

/// Columns over the x-y plane of the atoms' bounding box, each about as wide as a j-cluster
/// of atoms is tall.
#[derive(Clone, Debug, Default)]
pub(super) struct Columns {
    pub(super) lower: [f32; 2],
    pub(super) width: [f32; 2],
    pub(super) dims: [usize; 2],
    /// Slots of column `c` are `first[c]..first[c + 1]`; its atoms fill the first `atoms[c]`.
    pub(super) first: Vec<usize>,
    pub(super) atoms: Vec<usize>,
    /// The x-y bounding box of each column's atoms.
    pub(super) bounds: Vec<Bounds>,
}

impl Columns {
    /// Sets the columns for `positions`; the buffers keep their capacity (see
    /// [`slots`](Self::slots)).
    pub(super) fn fit(&mut self, positions: &[RVec], rlist: f32) {
        let mut all = Bounds::EMPTY;
        for &x in positions {
            all.add(x);
        }
        let (lower, extent) = if positions.is_empty() {
            ([0.0; 3], [1.0; 3])
        } else {
            (all.lower, std::array::from_fn(|d| (all.upper[d] - all.lower[d]).max(1e-3)))
        };
        // About J_CLUSTER atoms per cube of the column's width at the average density, and
        // no wider than the list radius.
        let density = positions.len().max(1) as f32 / (extent[0] * extent[1] * extent[2]);
        let side = (J_CLUSTER as f32 / density).cbrt().min(rlist.max(1e-3));
        let dims: [usize; 2] =
            std::array::from_fn(|d| ((extent[d] / side).round() as usize).clamp(1, 1 << 12));
        self.lower = [lower[0], lower[1]];
        self.width = std::array::from_fn(|d| extent[d] / dims[d] as f32);
        self.dims = dims;
    }

    fn column_of(&self, x: RVec) -> [usize; 2] {
        std::array::from_fn(|d| {
            (((x[d] - self.lower[d]) / self.width[d]).max(0.0) as usize).min(self.dims[d] - 1)
        })
    }

    fn count(&self) -> usize {
        self.dims[0] * self.dims[1]
    }

    /// Sorts the atoms into the columns (by z within each, ties by index) and writes the atom
    /// of every slot to `atom_of_slot`; fills `first`, `atoms` and `bounds`.
    pub(super) fn slots(&mut self, positions: &[RVec], atom_of_slot: &mut Vec<u32>) {
        let n_columns = self.count();
        let column: Vec<usize> = positions
            .iter()
            .map(|&x| {
                let [i, j] = self.column_of(x);
                i * self.dims[1] + j
            })
            .collect();
        let (mut members, start) = bucket(&column, n_columns);
        self.first.clear();
        self.atoms.clear();
        self.bounds.clear();
        atom_of_slot.clear();
        for c in 0..n_columns {
            let list = &mut members[start[c]..start[c + 1]];
            list.sort_by(|&a, &b| {
                positions[a as usize][2].total_cmp(&positions[b as usize][2]).then(a.cmp(&b))
            });
            let mut b = Bounds::EMPTY;
            for &a in list.iter() {
                b.add(positions[a as usize]);
            }
            self.first.push(atom_of_slot.len());
            self.atoms.push(list.len());
            self.bounds.push(b);
            atom_of_slot.extend_from_slice(list);
            atom_of_slot.resize(atom_of_slot.len().next_multiple_of(J_CLUSTER), PADDING);
        }
        self.first.push(atom_of_slot.len());
        keep_room(&mut self.first);
        keep_room(&mut self.atoms);
        keep_room(&mut self.bounds);
    }
}

/// The `N` values of `v` from `first` on: a cluster's slots as one array, so that loops over
/// it vectorise without bounds checks.
#[inline(always)]
pub(super) fn cluster<T: Copy, const N: usize>(v: &[T], first: usize) -> [T; N] {
    v[first..first + N].try_into().expect("a cluster lies within the slots")
}
