//! The periodic images a pair list makes itself.

use md_halo::PeriodicImage;

/// The images a [`PairList`] makes: what each is, and per stored atom its images, so that
/// the pass that writes an atom's force adds its images' forces in the same read.
///
/// [`PairList`]: super::PairList
#[derive(Clone, Debug, Default)]
pub(super) struct Images {
    pub(super) table: Vec<PeriodicImage>,
    /// The images of stored atom `a` are `of_atom[first[a]..first[a + 1]]` (empty when there
    /// are no images at all).
    pub(super) first: Vec<u32>,
    pub(super) of_atom: Vec<u32>,
}

impl Images {
    pub(super) fn new(table: &[PeriodicImage], stored: usize) -> Images {
        if table.is_empty() {
            return Images::default();
        }
        let mut first = vec![0u32; stored + 1];
        for image in table {
            first[image.atom as usize + 1] += 1;
        }
        for a in 0..stored {
            first[a + 1] += first[a];
        }
        let mut fill = first.clone();
        let mut of_atom = vec![0u32; table.len()];
        for (k, image) in table.iter().enumerate() {
            of_atom[fill[image.atom as usize] as usize] = k as u32;
            fill[image.atom as usize] += 1;
        }
        Images { table: table.to_vec(), first, of_atom }
    }

    /// Local atom `atom`: the stored atom its force goes to, and the image it is, if one.
    #[inline]
    pub(super) fn resolve(&self, atom: usize, stored: usize) -> (usize, Option<&PeriodicImage>) {
        match atom.checked_sub(stored) {
            Some(k) => (self.table[k].atom as usize, Some(&self.table[k])),
            None => (atom, None),
        }
    }
}
