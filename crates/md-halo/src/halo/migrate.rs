//! Repartition: atoms that left a domain move to their new home, one dimension at a time, to
//! the neighbour below or above, as byte records (global index, position, force, then each
//! per-atom state array's entry), and the plan is rebuilt. Along a dimension of staggered rows
//! an atom that crossed into another row may need a further step, which migration takes while
//! any PE has such atoms.

use std::mem::size_of;

use bytemuck::Pod;
use onesided::{Agreement, Incoming, Outgoing};

use super::agree::{check_count, report_atom};
use super::exchange::HaloExchange;
use crate::error::{Error, Result};
use crate::grid::DdGrid;
use crate::real::Real;

/// Per-atom data an engine keeps for its home atoms (velocities, charges, type ids, ...),
/// which [`HaloExchange::collective_repartition`] moves with the atoms to their new domains.
///
/// Implemented for `Vec<T>` of any plain-old-data `T`; an engine with other containers can
/// implement it for them.
pub trait AtomState {
    /// The bytes one atom's entry takes.
    fn bytes_per_atom(&self) -> usize;
    /// The number of atoms held.
    fn atom_count(&self) -> usize;
    /// The bytes of atom `i`'s entry (`bytes_per_atom` of them).
    fn atom_bytes(&self, i: usize) -> &[u8];
    /// Replaces the contents by the entries `atoms` yields, in order (each `bytes_per_atom`
    /// long).
    fn rebuild(&mut self, atoms: &mut dyn Iterator<Item = &[u8]>);
}

impl<T: Pod> AtomState for Vec<T> {
    fn bytes_per_atom(&self) -> usize {
        size_of::<T>()
    }

    fn atom_count(&self) -> usize {
        self.len()
    }

    fn atom_bytes(&self, i: usize) -> &[u8] {
        bytemuck::bytes_of(&self[i])
    }

    fn rebuild(&mut self, atoms: &mut dyn Iterator<Item = &[u8]>) {
        self.clear();
        self.extend(atoms.map(bytemuck::pod_read_unaligned::<T>));
    }
}

/// Bytes of a migrating atom before its state: global index (4), position and force.
fn migrant_header<R: Real>() -> usize {
    4 + 6 * size_of::<R>()
}

/// Where a migrant record holds its position and its force.
fn position_bytes<R: Real>() -> std::ops::Range<usize> {
    4..4 + 3 * size_of::<R>()
}

fn force_bytes<R: Real>() -> std::ops::Range<usize> {
    4 + 3 * size_of::<R>()..migrant_header::<R>()
}

impl<'rt, R: Real> HaloExchange<'rt, R> {
    /// Wraps home positions into the box, moves atoms that left this domain to their new home
    /// together with their forces (the home forces of the last [`Step::move_f`](super::Step::move_f),
    /// for an integrator's next half-kick) and their entries in `state` (each array one entry
    /// per home atom, in home order), and rebuilds the plan. Afterwards the home atoms are in
    /// ascending global order, and the forces and every array in `state` hold their entries
    /// in that order. Under [load balancing](super::HaloBuilder::load_balancing) it first
    /// computes the boundaries the loads since the last repartition ask for; the new grid is
    /// taken up once the checks below pass, before any atom moves.
    ///
    /// With a [Verlet buffer](super::HaloBuilder::verlet_buffer) set, it also checks that no
    /// home atom moved more than half the buffer since the last repartition: beyond that, a
    /// pair may have come within the cutoff unseen by the halo. The repartition is made either
    /// way; the error says that the steps before it may have missed pairs, and an engine that
    /// accepts that may go on.
    ///
    /// # Collective
    /// Every PE must call it, with the same kinds of state arrays in the same order.
    ///
    /// # Errors
    /// On every PE: [`Error::BufferExceeded`] naming the atom that moved farthest, when it
    /// moved more than half the Verlet buffer (after the repartition was made: the exchange
    /// goes on from the new partition); [`Error::MovedTooFar`] when some atom moved
    /// more than one domain along a dimension since the last repartition (along a dimension
    /// of staggered rows, one more for each split dimension before it);
    /// [`Error::NotFinite`] naming an atom whose position is not finite;
    /// [`Error::CollectiveConfig`] when the PEs' state arrays differ in size per atom, or an
    /// array's length is not its PE's home atom count. After such an error nothing has moved
    /// and the exchange can go on; after an error of the communication layer, as for
    /// [`move_x`](Self::move_x).
    pub fn collective_repartition(&mut self, state: &mut [&mut dyn AtomState]) -> Result<()> {
        self.usable()?;
        let outcome = self.repartition(state);
        self.balancer.reopen();
        self.note(outcome)
    }

    pub(super) fn repartition(&mut self, state: &mut [&mut dyn AtomState]) -> Result<()> {
        let me = self.rt.my_pe();
        // The load since the last repartition, and the boundaries it asks for: taken up below
        // once the checks have passed.
        let balanced =
            self.balancer.collective_interval(self.rt, &self.grid, self.cell, true, self.board.as_ref())?;
        let grid = balanced.as_ref().unwrap_or(&self.grid);
        let record = migrant_header::<R>() + state.iter().map(|s| s.bytes_per_atom()).sum::<usize>();
        let short = state.iter().any(|s| s.atom_count() != self.n_home);
        // The pass over the home atoms only where a buffer is checked.
        let (farthest, moved) = match self.displacement_limit {
            Some(_) => self.farthest_since_repartition(),
            None => (0, 0.0),
        };
        let mut agreement = Agreement::new();
        let records = agreement.extent(record as u64);
        let short = agreement.lowest_pe(short);
        let most_moved = agreement.max_f64(moved);
        let agreed = agreement.collective_run(self.rt)?;
        // Agreed, so every PE makes the report at the end alike.
        let most_moved = agreed.get(most_moved);
        let outran =
            self.displacement_limit.filter(|&limit| most_moved > f64::from(limit) * f64::from(limit));
        let farthest_atom = (outran.is_some() && most_moved == moved).then(|| (self.ids[farthest], me));
        if let Some(pe) = agreed.get(short) {
            return Err(Error::CollectiveConfig(format!(
                "PE {pe} passes per-atom state to collective_repartition with an array whose length \
                 is not its number of home atoms"
            )));
        }
        let (least, most) = agreed.get(records);
        if least != most {
            return Err(Error::CollectiveConfig(format!(
                "the PEs pass per-atom state of {} to {} bytes per atom to collective_repartition: \
                 every PE must pass the same kinds of arrays, in the same order",
                least - migrant_header::<R>() as u64,
                most - migrant_header::<R>() as u64
            )));
        }
        let home = &self.coordinates()[..self.n_home];
        let broken = home.iter().zip(&self.ids).find(|(x, _)| x.iter().any(|c| !c.is_finite()));
        if let Some((atom, pe, _)) = report_atom(self.rt, broken.map(|(_, &g)| (g, me)))? {
            return Err(Error::NotFinite { atom, pe: Some(pe) });
        }
        let pbc = *self.grid.pbc();
        let placed: Vec<([R; 3], [f64; 3])> = home.iter().map(|&x| pbc.put_in_box_real(x)).collect();
        let wrapped: Vec<[R; 3]> = placed.iter().map(|p| p.0).collect();
        let too_far = placed.iter().zip(&self.ids).find_map(|(&(_, s), &g)| {
            let to = grid.cell_of_fraction(s);
            // Where rows are staggered, an atom crossing into another row may find its index
            // along a later dimension one further off for each earlier split dimension it
            // crossed along (DdGrid::with_rows allows a step between neighbouring rows).
            let most = |d: usize| most_steps(grid, d);
            (0..3).any(|d| grid.steps(self.cell, to, d) > most(d)).then(|| (g, grid.pe_of(to)))
        });
        if let Some((atom, pe, to)) = report_atom(self.rt, too_far)? {
            return Err(Error::MovedTooFar { atom, from: grid.cell_of(pe), to: grid.cell_of(to) });
        }
        if let Some(grid) = balanced {
            self.grid = grid;
        }
        let forces = self.home_mut().forces.to_vec();
        let mut records = vec![0u8; self.n_home * record];
        for (i, bytes) in records.chunks_exact_mut(record).enumerate() {
            bytes[..4].copy_from_slice(&self.ids[i].to_le_bytes());
            bytes[position_bytes::<R>()].copy_from_slice(bytemuck::bytes_of(&wrapped[i]));
            bytes[force_bytes::<R>()].copy_from_slice(bytemuck::bytes_of(&forces[i]));
            let mut at = migrant_header::<R>();
            for s in state.iter() {
                let entry = s.atom_bytes(i);
                bytes[at..at + entry.len()].copy_from_slice(entry);
                at += entry.len();
            }
        }
        for dim in 0..3 {
            if self.grid.dims()[dim] > 1 {
                records = self.collective_migrate(dim, records, record)?;
                // Along a staggered dimension some may need further steps.
                for _ in 1..most_steps(&self.grid, dim) {
                    let left =
                        records.chunks_exact(record).any(|r| self.target_along(dim, r) != self.cell[dim]);
                    let mut agreement = Agreement::new();
                    let any_left = agreement.any(left);
                    if !agreement.collective_run(self.rt)?.get(any_left) {
                        break;
                    }
                    records = self.collective_migrate(dim, records, record)?;
                }
            }
        }
        let mut order: Vec<&[u8]> = records.chunks_exact(record).collect();
        order.sort_unstable_by_key(|r| global_of(r));
        let position = |r: &[u8]| bytemuck::pod_read_unaligned::<[R; 3]>(&r[position_bytes::<R>()]);
        self.set_home(order.iter().map(|r| global_of(r)), order.iter().map(|r| position(r)))?;
        let mut at = migrant_header::<R>();
        for s in state.iter_mut() {
            let width = s.bytes_per_atom();
            s.rebuild(&mut order.iter().map(|r| &r[at..at + width]));
            at += width;
        }
        self.collective_build_plan()?;
        let forces: Vec<[R; 3]> =
            order.iter().map(|r| bytemuck::pod_read_unaligned(&r[force_bytes::<R>()])).collect();
        // Only this PE writes its force array, and its neighbours read only the halo regions
        // behind the home atoms.
        self.forces.array().write_local(0, &forces)?;
        // The repartition is made; what is left is to say that the steps before it may have
        // missed pairs.
        if let Some(limit) = outran
            && let Some((atom, pe, _)) = report_atom(self.rt, farthest_atom)?
        {
            let displacement = most_moved.sqrt() as f32;
            return Err(Error::BufferExceeded { atom, pe, displacement, buffer: 2.0 * limit });
        }
        Ok(())
    }

    /// The home atom (its local index) that moved farthest since the last repartition, and
    /// the square of that distance.
    pub(super) fn farthest_since_repartition(&self) -> (usize, f64) {
        let home = &self.coordinates()[..self.n_home];
        let squared =
            |(x, a): (&[R; 3], &[R; 3])| (0..3).map(|d| (x[d].to_f64() - a[d].to_f64()).powi(2)).sum::<f64>();
        // A position that is not finite is NotFinite's to report.
        let distances =
            home.iter().zip(&self.anchors).map(squared).map(|d| if d.is_finite() { d } else { 0.0 });
        distances.enumerate().fold((0, 0.0), |best, (i, d)| if d > best.1 { (i, d) } else { best })
    }

    /// How far the home atom that moved farthest since the last repartition (or the build)
    /// has moved, in nm: a pair of atoms can come closer by at most twice this than it was
    /// when the halo was chosen. Local to this PE; a pass over the home atoms.
    pub fn max_displacement(&self) -> f32 {
        self.farthest_since_repartition().1.sqrt() as f32
    }

    /// Sends the records (one per atom, `record` bytes, position after the 4-byte index) whose new
    /// domain lies below or above along `dim` to those neighbours and takes in what they send.
    pub(super) fn collective_migrate(
        &mut self,
        dim: usize,
        records: Vec<u8>,
        record: usize,
    ) -> Result<Vec<u8>> {
        let (down, up) =
            (self.grid.neighbour(self.cell, dim, false), self.grid.neighbour(self.cell, dim, true));
        let (mut stay, mut to_down, mut to_up) = (Vec::new(), Vec::new(), Vec::new());
        let n = self.grid.dims()[dim];
        for r in records.chunks_exact(record) {
            let target = self.target_along(dim, r);
            if target == self.cell[dim] {
                stay.extend_from_slice(r);
            } else if target == down[dim] || (target + n - self.cell[dim]) % n > n / 2 {
                to_down.extend_from_slice(r);
            } else {
                to_up.extend_from_slice(r);
            }
        }
        let (down, up) = (self.grid.pe_of(down), self.grid.pe_of(up));
        let counts = self.exchange_counts([(down, to_down.len()), (up, to_up.len())], [up, down])?;
        self.byte_buffer.collective_ensure(counts[0] + counts[1])?;
        let received = self
            .bytes
            .call(&[self.byte_buffer.array()])
            .send(&[Outgoing::Copy { to: down, data: &to_down }, Outgoing::Copy { to: up, data: &to_up }])
            .receive(&[
                Incoming { from: up, buffer: 0, offset: 0, room: counts[0] },
                Incoming { from: down, buffer: 0, offset: counts[0], room: counts[1] },
            ])
            .run()?;
        check_count(received[0], counts[0], up, "bytes of migrating atoms")?;
        check_count(received[1], counts[1], down, "bytes of migrating atoms")?;
        let start = stay.len();
        stay.resize(start + counts[0] + counts[1], 0);
        self.byte_buffer.array().read_local(0, &mut stay[start..])?;
        Ok(stay)
    }

    /// The index along `dim` of the domain a migrating atom's record (position after the
    /// 4-byte index) belongs to.
    fn target_along(&self, dim: usize, record: &[u8]) -> usize {
        let x = bytemuck::pod_read_unaligned::<[R; 3]>(&record[position_bytes::<R>()]);
        self.grid.cell_of_fraction(self.grid.pbc().clamped_fraction_real(x))[dim]
    }

    /// Sends one count to each of `sends` and receives one from each of `from`.
    pub(super) fn exchange_counts(
        &mut self,
        sends: [(usize, usize); 2],
        from: [usize; 2],
    ) -> Result<[usize; 2]> {
        let values = [sends[0].1 as u64, sends[1].1 as u64];
        self.counts
            .call(&[&self.count_buffer])
            .send(&[
                Outgoing::Copy { to: sends[0].0, data: &values[..1] },
                Outgoing::Copy { to: sends[1].0, data: &values[1..] },
            ])
            .receive(&[
                Incoming { from: from[0], buffer: 0, offset: 0, room: 1 },
                Incoming { from: from[1], buffer: 0, offset: 1, room: 1 },
            ])
            .run()?;
        let mut counts = [0u64; 2];
        self.count_buffer.read_local(0, &mut counts)?;
        Ok([counts[0] as usize, counts[1] as usize])
    }
}

/// The most domains an atom may change along `d` between two repartitions: one, and where
/// `grid`'s rows along `d` are staggered, one more for each split dimension before `d` (an
/// atom that crossed into a neighbouring row finds its index there up to one off).
fn most_steps(grid: &DdGrid, d: usize) -> usize {
    let earlier = grid.dims()[..d].iter().filter(|&&n| n > 1).count();
    if grid.has_rows_along(d) { 1 + earlier } else { 1 }
}

/// The global index at the start of a migrating atom's record.
fn global_of(record: &[u8]) -> u32 {
    u32::from_le_bytes([record[0], record[1], record[2], record[3]])
}
