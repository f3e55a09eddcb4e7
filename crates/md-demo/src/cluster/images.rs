//! The periodic images a pair list makes itself.

use md_halo::PeriodicImage;

use super::chunk::keep_room;

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
    /// Indexes `table`, the images of `stored` atoms, in place: the buffers keep their
    /// capacity from one pair search to the next.
    pub(super) fn fill(&mut self, table: &[PeriodicImage], stored: usize) {
        for v in [&mut self.first, &mut self.of_atom] {
            v.clear();
        }
        self.table.clear();
        if table.is_empty() {
            return;
        }
        self.table.extend_from_slice(table);
        self.first.resize(stored + 1, 0);
        for image in table {
            self.first[image.atom as usize + 1] += 1;
        }
        for a in 0..stored {
            self.first[a + 1] += self.first[a];
        }
        self.of_atom.resize(table.len(), 0);
        // The next free place of each atom's images, counted down from the end of its run.
        for (k, image) in table.iter().enumerate().rev() {
            let end = &mut self.first[image.atom as usize + 1];
            *end -= 1;
            self.of_atom[*end as usize] = k as u32;
        }
        // Entry a + 1 now holds the start of atom a's run: move every entry down by one.
        self.first.rotate_left(1);
        self.first[stored] = table.len() as u32;
        keep_room(&mut self.table);
        keep_room(&mut self.first);
        keep_room(&mut self.of_atom);
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
