//! The FFT's own pieces: the transposes of a block and the split over the ranks.

use super::blocks::{split, widest};
use super::slab::transpose;
use super::*;
use crate::grid::PmeGrid;

#[test]
fn transpose_moves_every_element_once() {
    let from: Vec<Complex32> = (0..12).map(|i| Complex32::new(i as f32, -(i as f32))).collect();
    let mut to = vec![Complex32::default(); 12];
    transpose(&from, &mut to, 3, 4);
    for r in 0..3 {
        for c in 0..4 {
            assert_eq!(to[c * 3 + r], from[r * 4 + c]);
        }
    }
}

#[test]
fn split_matches_the_slabs_of_the_grid() {
    let grid = PmeGrid::builder([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]], &[0, 1, 2])
        .sizes([25, 9, 8])
        .build()
        .expect("valid grid");
    let bounds = split(25, 3);
    for r in 0..3 {
        assert_eq!(grid.slab(r), (bounds[r], bounds[r + 1]));
    }
    assert_eq!(widest(&bounds), 9);
}
