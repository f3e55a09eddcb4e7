//! The loads and boundaries of staggered rows, shared among the PEs that need them: each PE
//! reads the loads of its own rows and the new boundaries of the rows near it from its
//! neighbours' symmetric boards, so that a repartition's messages and a PE's grid grow with
//! the rows (a dimension's domain count) and the neighbourhood, never with the PE count.
//!
//! A row moves by its own loads and its neighbouring rows' old boundaries alone
//! (`bounds::moved_row`), so it is the business of its PEs and their neighbours, as with
//! GROMACS's row roots and `dd_move_cellx`. Rather than one root per row, every PE of the row
//! computes it from the same loads: each PE reads the loads of its column's domains and of
//! its slab's columns, moves its own y and z rows, and reads the other rows near its domain
//! from a PE of each; its grid then holds those rows alone ([`DdGrid::near`]).

use std::collections::BTreeMap;

use onesided::{Runtime, SymArray};

use crate::error::Result;
use crate::grid::DdGrid;

/// The symmetric arrays through which the PEs of a grid of staggered rows share their loads
/// and their rows' new boundaries at a repartition. Each PE writes only its own copy; the
/// others read it with gets between two barriers, and the next writes come after a
/// reduction every PE enters only once its reads are complete.
pub(crate) struct RowBoard<'rt> {
    /// This PE's load, and its (x, y) column's summed load.
    loads: SymArray<'rt, u64>,
    /// The new boundaries of this PE's y row (`Ny + 1`), then of its z row (`Nz + 1`).
    rows: SymArray<'rt, f64>,
}

impl<'rt> RowBoard<'rt> {
    /// The board of `grid`'s PEs.
    ///
    /// # Collective
    /// Every PE calls it with the same grid.
    pub(crate) fn collective_new(rt: &'rt Runtime, name: &str, grid: &DdGrid) -> Result<RowBoard<'rt>> {
        let [_, ny, nz] = grid.dims();
        Ok(RowBoard {
            loads: SymArray::collective_alloc(rt, &format!("{name} row loads"), 2)?,
            rows: SymArray::collective_alloc(rt, &format!("{name} row boundaries"), ny + nz + 2)?,
        })
    }

    /// The loads of this PE's rows, from every PE's `load`: along y the summed load of each
    /// (x, y) column of its x slab, along z the load of each domain of its column (empty
    /// where the dimension has one domain). `Nz + Ny` values read, in two rounds.
    ///
    /// # Collective
    /// Every PE calls it.
    pub(crate) fn collective_row_loads(
        &self,
        rt: &Runtime,
        grid: &DdGrid,
        cell: [usize; 3],
        load: u64,
    ) -> Result<[Vec<u64>; 2]> {
        let [x, y, _] = cell;
        let [_, ny, nz] = grid.dims();
        self.loads.write_local(0, &[load])?;
        rt.barrier();
        let mut column = vec![0u64; nz];
        rt.nbi_scope(|s| {
            column
                .iter_mut()
                .enumerate()
                .try_for_each(|(k, l)| s.get(&self.loads, grid.pe_of([x, y, k]), 0, std::slice::from_mut(l)))
        })?;
        self.loads.write_local(1, &[column.iter().sum::<u64>()])?;
        rt.barrier();
        let mut slab = vec![0u64; ny];
        rt.nbi_scope(|s| {
            slab.iter_mut()
                .enumerate()
                .try_for_each(|(j, l)| s.get(&self.loads, grid.pe_of([x, j, 0]), 1, std::slice::from_mut(l)))
        })?;
        let split = |n: usize, loads: Vec<u64>| if n > 1 { loads } else { Vec::new() };
        Ok([split(ny, slab), split(nz, column)])
    }

    /// Publishes this PE's new y and z rows (`own`, as [`DdGrid::bounds`] orders them; `None`
    /// along a dimension of one domain) and reads those of the rows near it
    /// ([`DdGrid::view_rows`]) from a PE of each: its own rows' neighbours computed theirs
    /// from the same loads and boundaries, so any PE of a row holds the same.
    ///
    /// # Collective
    /// Every PE calls it.
    pub(crate) fn collective_near_rows(
        &self,
        rt: &Runtime,
        grid: &DdGrid,
        cell: [usize; 3],
        own: [Option<Vec<f64>>; 2],
    ) -> Result<[BTreeMap<usize, Vec<f64>>; 2]> {
        let [_, ny, _] = grid.dims();
        let offsets = [0, ny + 1];
        for (row, &offset) in own.iter().zip(&offsets) {
            if let Some(row) = row {
                self.rows.write_local(offset, row)?;
            }
        }
        rt.barrier();
        let mut near: [BTreeMap<usize, Vec<f64>>; 2] = Default::default();
        // Per dimension, the rows to read and the PE of each that holds it.
        let mut wanted: Vec<(usize, usize, usize, Vec<f64>)> = Vec::new();
        for (i, d) in [1, 2].into_iter().enumerate() {
            let Some(mine) = &own[i] else { continue };
            for r in grid.view_rows(d, cell) {
                if r == grid.row(d, cell) {
                    near[i].insert(r, mine.clone());
                    continue;
                }
                let mut holder = grid.row_cell(d, r);
                holder[d..].copy_from_slice(&cell[d..]);
                wanted.push((i, r, grid.pe_of(holder), vec![0.0; mine.len()]));
            }
        }
        rt.nbi_scope(|s| {
            wanted.iter_mut().try_for_each(|(i, _, pe, row)| s.get(&self.rows, *pe, offsets[*i], row))
        })?;
        for (i, r, _, row) in wanted {
            near[i].insert(r, row);
        }
        Ok(near)
    }
}
