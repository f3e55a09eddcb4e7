//! The halo exchange: a plan built at (re)partition, and `move_x` / `move_f` every step.
//!
//! GROMACS's scheme with the half-shell convention, in fractional coordinates: dimension by
//! dimension (x, then y, then z), each domain receives from its neighbour above the atoms
//! within the halo range beyond its upper face, and sends to its neighbour below the atoms
//! within that range above its own lower face. Atoms received in earlier dimensions are
//! forwarded in later ones, which covers edges and corners; when the range exceeds a domain's
//! width, further pulses forward the atoms received in the previous pulse, one domain further
//! each time. An atom sent across the periodic boundary (from the first domain of a dimension
//! to the last) is shifted by that dimension's box vector on the way. Received atoms land in
//! place, behind the home atoms, in one symmetric coordinate array.
//!
//! Every transfer is an [`Exchange`] on the chosen [`Path`]: the one-sided offset swap or MPI
//! two-sided. The plan (who sends which atoms to whom, and where they land) is built once per
//! partition; `move_x` then sends coordinates along it and `move_f` sends the forces on halo
//! atoms back the same way in reverse, where their owners add them up.

use std::mem::size_of;

use bytemuck::Pod;
use onesided::{Exchange, GlobalMaxArray, GrowthPolicy, Incoming, Outgoing, Path, Runtime, SymArray};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::grid::DdGrid;
use crate::pbc::{PbcBox, RVec};

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

/// The forces that came back across the periodic boundaries in one
/// [`move_f`](HaloExchange::move_f): what GROMACS's `dd_move_f` adds to its shift forces.
///
/// The virial of the pair forces then needs only home atoms:
/// `Ξ = -½ (Σ_home x ⊗ f + Σ_d vector_d ⊗ along(d))`, summed over all PEs, with `x` the home
/// positions of the step and `f` the total forces after `move_f`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShiftForces {
    along: [[f64; 3]; 3],
}

impl ShiftForces {
    /// The total force on halo images shifted by box vector `d` that this PE received back.
    pub fn along(&self, d: usize) -> [f64; 3] {
        self.along[d]
    }

    /// This PE's shift term of the virial, `-½ Σ_d vector_d ⊗ along(d)`, as `[row][column]`.
    pub fn virial(&self, pbc: &PbcBox) -> [[f64; 3]; 3] {
        let v = pbc.vectors();
        std::array::from_fn(|r| {
            std::array::from_fn(|c| -0.5 * (0..3).map(|d| v[d][r] as f64 * self.along[d][c]).sum::<f64>())
        })
    }
}

/// Which pairs of local atoms a domain computes: see [`HaloExchange::owns_pair`].
#[derive(Clone, Copy, Debug)]
pub struct PairOwner<'a> {
    reference: &'a [[f64; 3]],
    lower: [f64; 3],
    upper: [f64; 3],
}

impl PairOwner<'_> {
    /// Whether the domain computes the interaction of local atoms `i` and `j`.
    #[inline]
    pub fn owns(&self, i: usize, j: usize) -> bool {
        let (a, b) = (&self.reference[i], &self.reference[j]);
        (0..3).all(|d| {
            let corner = a[d].min(b[d]);
            self.lower[d] <= corner && corner < self.upper[d]
        })
    }
}

/// What the plan sends about each halo atom once: its global index and the fractions of its
/// position (with the image shifts), which decide pair ownership.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C)]
struct HaloRecord {
    global: u32,
    padding: u32,
    fraction: [f64; 3],
}

/// One pulse of the plan: along `dim`, send to the neighbour below, receive from the one above.
struct Pulse<'rt> {
    dim: usize,
    /// The PE below (receives what this PE sends).
    to: usize,
    /// The PE above (sends what this PE receives).
    from: usize,
    /// Local indices of the atoms this PE sends, in order.
    send: Vec<u32>,
    /// Added to sent positions: box vector `dim` when this PE is the first domain along
    /// `dim` (the atoms cross the periodic boundary), else zero.
    shift: RVec,
    /// Whether this PE's sent atoms cross the periodic boundary (`shift` is nonzero).
    sends_shifted: bool,
    /// Whether the atoms this PE receives were shifted (it is the last domain along `dim`).
    receives_shifted: bool,
    /// Where the received atoms land in the local arrays.
    offset: usize,
    /// How many atoms this PE receives.
    count: usize,
    x: Exchange<'rt, RVec>,
    f: Exchange<'rt, RVec>,
}

/// A domain's atoms and the plan that keeps their halo up to date.
///
/// An engine builds it from its atoms ([`collective_from_global`](Self::collective_from_global)
/// or [`collective_new`](Self::collective_new)) and then, every step: writes its home
/// coordinates ([`home_coordinates_mut`](Self::home_coordinates_mut)), calls
/// [`move_x`](Self::move_x), computes forces on home and halo atoms
/// ([`coordinates`](Self::coordinates), [`owns_pair`](Self::owns_pair)) and calls
/// [`move_f`](Self::move_f). Every few steps it calls
/// [`collective_repartition`](Self::collective_repartition) with its per-atom state, which
/// moves with the atoms.
pub struct HaloExchange<'rt> {
    rt: &'rt Runtime,
    grid: DdGrid,
    cell: [usize; 3],
    /// This domain's corners in fractions.
    lower: [f64; 3],
    upper: [f64; 3],
    path: Path,
    /// Home atoms, then halo atoms: current positions (home positions are not wrapped between
    /// repartitions, so that the plan's periodic shifts stay valid).
    coords: GlobalMaxArray<'rt, RVec>,
    /// Below this many atoms, packing and unpacking run on the calling thread.
    parallel_min: usize,
    /// Global indices of the local atoms, in the same order.
    ids: Vec<u32>,
    /// Fractions of the local atoms' positions when the plan was built (home atoms in the
    /// unit cell, halo atoms with their image shifts), which decide pair ownership.
    reference: Vec<[f64; 3]>,
    n_home: usize,
    n_local: usize,
    pulses: Vec<Pulse<'rt>>,
    force_scratch: GlobalMaxArray<'rt, RVec>,
    counts: Exchange<'rt, u64>,
    count_buffer: SymArray<'rt, u64>,
    /// Per-atom fields along the plan, and migrating atoms.
    bytes: Exchange<'rt, u8>,
    byte_buffer: GlobalMaxArray<'rt, u8>,
    /// An exchange returned an error: a neighbour may still write the halo region, so only
    /// the home atoms are handed out and no further exchange is started.
    failed: bool,
}

/// Below this many atoms, packing and unpacking run on the calling thread: handing a few
/// microseconds of work to the thread pool costs more than it saves.
const PARALLEL_MIN: usize = 4096;

/// Buffers grow by a fifth beyond the largest need, and keep checking every repartition.
const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: 1.2, freeze_after: None };

/// Bytes of a migrating atom before its state: global index and position.
const MIGRANT_HEADER: usize = 16;

/// A raw pointer that threads of a scoped parallel loop write through at distinct indices.
#[derive(Clone, Copy)]
struct Scatter(*mut RVec);
impl Scatter {
    /// The address of element `i` (a method, so that closures capture the whole wrapper).
    fn at(self, i: usize) -> *mut RVec {
        self.0.wrapping_add(i)
    }
}

// SAFETY: used only by `scatter_add`, which checks that its targets are distinct, so no two
// threads touch the same element.
unsafe impl Send for Scatter {}
// SAFETY: as above.
unsafe impl Sync for Scatter {}

impl<'rt> HaloExchange<'rt> {
    /// Partitions a whole system, given as the positions of all atoms in global index order
    /// (the same on every PE), over the grid: each PE keeps the atoms whose home is its
    /// domain, in global order, and builds the plan.
    ///
    /// # Collective
    /// Every PE must call it with the same positions, grid and path.
    ///
    /// # Errors
    /// On every PE: [`Error::Config`] when the PEs pass different numbers of atoms, different
    /// grids or paths, the grid does not match the job, or the path cannot serve a halo
    /// exchange; [`Error::NotFinite`] naming an atom whose position is not finite.
    pub fn collective_from_global(
        rt: &'rt Runtime,
        grid: DdGrid,
        path: Path,
        positions: &[RVec],
    ) -> Result<Self> {
        let n = positions.len() as u64;
        let (least, most) = min_max(rt, n)?;
        if least != most {
            return Err(Error::Config(format!(
                "the PEs pass between {least} and {most} atoms to collective_from_global: every PE must \
                 pass the whole system"
            )));
        }
        if n > u32::MAX as u64 {
            return Err(Error::Config(format!("{n} atoms exceed the {} a global index can name", u32::MAX)));
        }
        // Every PE sees the same positions, so this error is the same everywhere.
        if let Some(atom) = positions.iter().position(|x| x.iter().any(|c| !c.is_finite())) {
            return Err(Error::NotFinite { atom, pe: None });
        }
        let me = rt.my_pe();
        let pbc = *grid.pbc();
        let home: Vec<(u32, RVec)> = positions
            .iter()
            .enumerate()
            .filter_map(|(g, &x)| {
                let (w, s) = pbc.put_in_box(x);
                (grid.pe_of(grid.cell_of_fraction(s)) == me).then_some((g as u32, w))
            })
            .collect();
        Self::collective_setup(rt, grid, path, home)
    }

    /// Builds the exchange from each PE's own home atoms: their positions and global
    /// indices, in the engine's order, which the home atoms keep until the first
    /// repartition. Every atom must lie in this PE's domain ([`DdGrid::pe_of_position`]);
    /// positions are put into the box ([`PbcBox::put_in_box`]).
    ///
    /// # Collective
    /// Every PE must call it with the same grid and path.
    ///
    /// # Errors
    /// On every PE: [`Error::Config`] when a PE passes positions and indices of different
    /// lengths, or the PEs pass different grids or paths, or the grid or path do not fit;
    /// [`Error::NotFinite`] or [`Error::NotHome`] naming an atom whose position is not finite
    /// or lies outside its PE's domain.
    pub fn collective_new(
        rt: &'rt Runtime,
        grid: DdGrid,
        path: Path,
        home_positions: &[RVec],
        home_globals: &[u32],
    ) -> Result<Self> {
        let me = rt.my_pe();
        let mismatched = home_positions.len() != home_globals.len();
        let bad = rt.max_u64_one(if mismatched { me as u64 + 1 } else { 0 })?;
        if bad > 0 {
            return Err(Error::Config(format!(
                "PE {} passes home positions and global indices of different lengths to collective_new",
                bad - 1
            )));
        }
        let broken = home_globals.iter().zip(home_positions).find(|(_, x)| x.iter().any(|c| !c.is_finite()));
        if let Some((atom, pe, _)) = report_atom(rt, broken.map(|(&g, _)| (g, me)))? {
            return Err(Error::NotFinite { atom, pe: Some(pe) });
        }
        let pbc = *grid.pbc();
        let mut stray = None;
        let mut home = Vec::with_capacity(home_positions.len());
        for (&g, &x) in home_globals.iter().zip(home_positions) {
            let (w, s) = pbc.put_in_box(x);
            let pe = grid.pe_of(grid.cell_of_fraction(s));
            if pe != me && stray.is_none() {
                stray = Some((g, pe));
            }
            home.push((g, w));
        }
        if let Some((atom, pe, belongs)) = report_atom(rt, stray)? {
            return Err(Error::NotHome {
                atom,
                pe,
                domain: grid.cell_of(pe),
                belongs: grid.cell_of(belongs),
            });
        }
        Self::collective_setup(rt, grid, path, home)
    }

    /// Allocates everything and builds the plan for `home` (positions put into the box).
    fn collective_setup(rt: &'rt Runtime, grid: DdGrid, path: Path, home: Vec<(u32, RVec)>) -> Result<Self> {
        // The checks below are then the same on every PE.
        let (least, most) = min_max(rt, setup_hash(&grid, path))?;
        if least != most {
            return Err(Error::Config(
                "the PEs pass different grids, boxes, ranges or paths: every PE must build the halo \
                 exchange with the same ones"
                    .to_string(),
            ));
        }
        if grid.len() != rt.n_pes() {
            return Err(Error::Config(format!(
                "the grid has {} domains but the job has {} PEs",
                grid.len(),
                rt.n_pes()
            )));
        }
        if path.needs_reserve() {
            return Err(Error::Config(format!(
                "the halo exchange runs on the onesided-put or the MPI path, not {path}: its \
                 messages change size with every repartition, which the staging buffers of {path} \
                 would have to follow"
            )));
        }
        let cell = grid.cell_of(rt.my_pe());
        let name = |what: &str| format!("halo {}: {what}", path.name());
        let coords = GlobalMaxArray::collective_alloc(rt, &name("coordinates"), home.len(), GROWTH)?;
        // The face neighbours (this PE itself along a dimension of one domain): every PE this
        // one exchanges with, so the exchanges' memory grows with them, not with the job.
        let neighbours: Vec<usize> =
            (0..3).flat_map(|d| [false, true].map(|up| grid.pe_of(grid.neighbour(cell, d, up)))).collect();
        let mut pulses = Vec::new();
        let dims = grid.dims();
        for dim in 0..3 {
            for pulse in 0..grid.pulses()[dim] {
                let to = grid.pe_of(grid.neighbour(cell, dim, false));
                let from = grid.pe_of(grid.neighbour(cell, dim, true));
                let sends_shifted = cell[dim] == 0;
                let shift = if sends_shifted { grid.pbc().vectors()[dim] } else { [0.0; 3] };
                let label = |what: &str| name(&format!("{what} {} pulse {pulse}", ["x", "y", "z"][dim]));
                pulses.push(Pulse {
                    dim,
                    to,
                    from,
                    send: Vec::new(),
                    shift,
                    sends_shifted,
                    receives_shifted: cell[dim] + 1 == dims[dim],
                    offset: 0,
                    count: 0,
                    x: Exchange::collective_with_partners(rt, &label("coordinates"), path, &[to, from])?,
                    f: Exchange::collective_with_partners(rt, &label("forces"), path, &[to, from])?,
                });
            }
        }
        let mut halo = HaloExchange {
            rt,
            lower: grid.lower(cell),
            upper: grid.upper(cell),
            grid,
            cell,
            path,
            coords,
            parallel_min: PARALLEL_MIN,
            ids: Vec::new(),
            reference: Vec::new(),
            n_home: 0,
            n_local: 0,
            pulses,
            force_scratch: GlobalMaxArray::collective_alloc(rt, &name("force scratch"), 0, GROWTH)?,
            counts: Exchange::collective_with_partners(rt, &name("counts"), path, &neighbours)?,
            count_buffer: SymArray::collective_alloc(rt, &name("count buffer"), 2)?,
            bytes: Exchange::collective_with_partners(rt, &name("per-atom fields"), path, &neighbours)?,
            byte_buffer: GlobalMaxArray::collective_alloc(rt, &name("per-atom field buffer"), 0, GROWTH)?,
            failed: false,
        };
        halo.set_home(home.iter().map(|h| h.0), home.iter().map(|h| h.1))?;
        halo.collective_build_plan()?;
        Ok(halo)
    }

    /// Sets below how many atoms a pulse's packing and unpacking stay on the calling thread
    /// (default 4096: handing less work to the thread pool costs more than it saves).
    pub fn set_parallel_min(&mut self, atoms: usize) {
        self.parallel_min = atoms;
    }

    /// The grid.
    pub fn grid(&self) -> &DdGrid {
        &self.grid
    }

    /// The periodic box.
    pub fn pbc(&self) -> &PbcBox {
        self.grid.pbc()
    }

    /// This PE's domain.
    pub fn cell(&self) -> [usize; 3] {
        self.cell
    }

    /// The communication path.
    pub fn path(&self) -> Path {
        self.path
    }

    /// The number of home atoms.
    pub fn home_count(&self) -> usize {
        self.n_home
    }

    /// The number of local atoms: home and halo.
    pub fn local_count(&self) -> usize {
        self.n_local
    }

    /// Pulses per dimension.
    pub fn pulses(&self) -> [usize; 3] {
        self.grid.pulses()
    }

    /// Atoms this PE sends per step, over all pulses.
    pub fn send_count(&self) -> usize {
        self.pulses.iter().map(|p| p.send.len()).sum()
    }

    /// Current positions of the local atoms, home first, then halo in plan order (each halo
    /// atom as the image, shifted by box vectors, that lies next to this domain). Valid until
    /// the next call that takes `&mut self`.
    ///
    /// After an exchange returned an error, only the home atoms: a neighbour may still be
    /// writing the halo region.
    pub fn coordinates(&self) -> &[RVec] {
        let len = if self.failed { self.n_home } else { self.n_local };
        // SAFETY: other PEs write this array only in the receive regions this PE announces
        // (behind the home atoms), inside exchanges this PE takes part in: move_x, the plan
        // build and repartition, which take &mut self, so `&self` excludes them while the
        // slice lives. When one of them failed, an announced region may still be written
        // later; then the slice covers the home atoms only.
        unsafe { &self.coords.array().local_slice()[..len] }
    }

    /// The positions of the home atoms, to write before [`move_x`](Self::move_x): an engine
    /// integrates its equations of motion here. Positions need not stay in the box between
    /// repartitions (the plan's periodic shifts assume they do not jump by box vectors).
    pub fn home_coordinates_mut(&mut self) -> &mut [RVec] {
        // SAFETY: other PEs write this array only in the receive regions this PE announces,
        // which lie behind the home atoms, and only inside exchanges this PE takes part in;
        // `&mut self` excludes those while the slice lives, and nothing else refers to the
        // home region.
        unsafe { &mut self.coords.array().local_slice_mut()[..self.n_home] }
    }

    /// Global indices of the local atoms, in the order of [`coordinates`](Self::coordinates).
    pub fn global_indices(&self) -> &[u32] {
        &self.ids
    }

    /// Whether this domain computes the interaction of local atoms `i` and `j`: it does when
    /// the corner of the pair (the componentwise minimum of their fractions when the plan was
    /// built) lies in its home cell. Across all domains every pair within the interaction
    /// range is owned exactly once, in whichever images the domains hold it.
    #[inline]
    pub fn owns_pair(&self, i: usize, j: usize) -> bool {
        self.pair_owner().owns(i, j)
    }

    /// The pair-ownership rule of [`owns_pair`](Self::owns_pair) as a small value that
    /// threads of a force kernel can share.
    pub fn pair_owner(&self) -> PairOwner<'_> {
        PairOwner { reference: &self.reference, lower: self.lower, upper: self.upper }
    }

    /// Fractions of the local atoms' positions when the plan was built, with halo atoms'
    /// image shifts (a halo atom shifted by box vector `d` has fraction `d` at least 1):
    /// what [`owns_pair`](Self::owns_pair) compares.
    pub fn reference_fractions(&self) -> &[[f64; 3]] {
        &self.reference
    }

    /// Sends the coordinates of this PE's halo atoms to the domains that need them and
    /// receives its own halo, in place, with periodic shifts applied. The neighbours along
    /// each pulse must call it too (every PE does, once per step).
    ///
    /// # Errors
    /// What the exchanges report (a neighbour that does not take part times out, naming it);
    /// after any error, this and every further exchange call fails (end the job with
    /// [`Runtime::abort`]).
    pub fn move_x(&mut self) -> Result<()> {
        self.usable()?;
        for q in 0..self.pulses.len() {
            let outcome = self.move_x_pulse(q);
            self.note(outcome)?;
        }
        Ok(())
    }

    /// Fails when an earlier exchange failed.
    fn usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Config(
                "an earlier exchange of this halo failed, and a neighbour may still write into its \
                 buffers: end the job (Runtime::abort)"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Passes `outcome` on, remembering a failure of the communication. Refusals agreed
    /// before anything moved (wrong lengths, an atom too far) leave the exchange usable.
    fn note<T>(&mut self, outcome: Result<T>) -> Result<T> {
        self.failed |= matches!(outcome, Err(Error::Comm(_) | Error::PlanMismatch(_)));
        outcome
    }

    /// Sends the forces on this PE's halo atoms back to their home domains, pulse by pulse in
    /// reverse, and adds the forces it receives to the atoms it had sent. Afterwards the home
    /// part of `forces` holds the total force on each home atom. Returns the forces that
    /// crossed the periodic boundaries, which the virial needs. The neighbours must call it
    /// too.
    ///
    /// # Errors
    /// [`Error::Config`] when `forces` is not one force per local atom (on this PE only: its
    /// neighbours then time out waiting for it); otherwise as [`move_x`](Self::move_x).
    pub fn move_f(&mut self, forces: &mut [RVec]) -> Result<ShiftForces> {
        self.usable()?;
        let outcome = self.move_f_pulses(forces);
        self.note(outcome)
    }

    fn move_f_pulses(&mut self, forces: &mut [RVec]) -> Result<ShiftForces> {
        if forces.len() != self.n_local {
            return Err(Error::Config(format!(
                "move_f needs one force per local atom ({}), got {}",
                self.n_local,
                forces.len()
            )));
        }
        let me = self.rt.my_pe();
        let mut shift_forces = ShiftForces::default();
        for q in (0..self.pulses.len()).rev() {
            let pulse = &mut self.pulses[q];
            if pulse.to == me {
                // The periodic image along a dimension with one domain: the forces on the
                // images are added to their atoms here, with no message. Every sent atom lies
                // before this pulse's region (send lists are built from earlier atoms).
                let (atoms, images) = forces.split_at_mut(pulse.offset);
                let images = &images[..pulse.count];
                accumulate(&mut shift_forces.along[pulse.dim], images);
                scatter_add(atoms, &pulse.send, images, self.parallel_min);
                continue;
            }
            let incoming = Incoming { from: pulse.to, buffer: 0, offset: 0, room: pulse.send.len() };
            let outgoing =
                Outgoing { to: pulse.from, data: &forces[pulse.offset..pulse.offset + pulse.count] };
            let received = pulse.f.sendrecv(&[self.force_scratch.array()], outgoing, incoming)?;
            check_count(received, pulse.send.len(), pulse.to, "forces")?;
            // SAFETY: the scratch region was filled by this pulse's exchange, which has
            // completed; no PE writes it again before this PE's next exchange.
            let returned = unsafe { &self.force_scratch.array().local_slice()[..received] };
            if pulse.sends_shifted {
                accumulate(&mut shift_forces.along[pulse.dim], returned);
            }
            scatter_add(forces, &pulse.send, returned, self.parallel_min);
        }
        Ok(shift_forces)
    }

    /// Sends a per-atom field of the home atoms (`home[i]` for home atom `i`: charges, type
    /// ids, any plain-old-data value) along the current plan, and returns it for every local
    /// atom, in the order of [`coordinates`](Self::coordinates).
    ///
    /// # Collective
    /// Every PE must call it, with a field of the same type.
    ///
    /// # Errors
    /// [`Error::Config`] on every PE when some PE passes a field whose length is not its home
    /// atom count.
    pub fn collective_spread<T: Pod>(&mut self, home: &[T]) -> Result<Vec<T>> {
        self.usable()?;
        let outcome = self.spread(home);
        self.note(outcome)
    }

    fn spread<T: Pod>(&mut self, home: &[T]) -> Result<Vec<T>> {
        let me = self.rt.my_pe();
        let width = size_of::<T>() as u64;
        let mut agreed = [width, TOP - width, if home.len() != self.n_home { me as u64 + 1 } else { 0 }];
        self.rt.max_u64(&mut agreed)?;
        if agreed[2] > 0 {
            return Err(Error::Config(format!(
                "PE {} passes collective_spread a field whose length is not its number of home atoms",
                agreed[2] - 1
            )));
        }
        if agreed[0] != TOP - agreed[1] || width == 0 {
            return Err(Error::Config(format!(
                "the PEs pass collective_spread fields of {} to {} bytes per atom: every PE must pass \
                 a field of the same type, of nonzero size",
                TOP - agreed[1],
                agreed[0]
            )));
        }
        let mut values = home.to_vec();
        values.reserve(self.n_local - self.n_home);
        for q in 0..self.pulses.len() {
            let count = self.pulses[q].count;
            self.field_pulse(q, count, &mut values)?;
        }
        Ok(values)
    }

    /// Wraps home positions into the box, moves atoms that left this domain to their new home
    /// together with their entries in `state` (each array one entry per home atom, in home
    /// order), and rebuilds the plan. Afterwards the home atoms are in ascending global order,
    /// and every array in `state` holds their entries in that order.
    ///
    /// # Collective
    /// Every PE must call it, with the same kinds of state arrays in the same order.
    ///
    /// # Errors
    /// On every PE: [`Error::MovedTooFar`] when some atom moved more than one domain along a
    /// dimension since the last repartition; [`Error::NotFinite`] naming an atom whose
    /// position is not finite; [`Error::Config`] when the PEs' state arrays differ in size
    /// per atom, or an array's length is not its PE's home atom count. After such an error
    /// nothing has moved and the exchange can go on; after an error of the communication
    /// layer, as for [`move_x`](Self::move_x).
    pub fn collective_repartition(&mut self, state: &mut [&mut dyn AtomState]) -> Result<()> {
        self.usable()?;
        let outcome = self.repartition(state);
        self.note(outcome)
    }

    fn repartition(&mut self, state: &mut [&mut dyn AtomState]) -> Result<()> {
        let me = self.rt.my_pe();
        let record = MIGRANT_HEADER + state.iter().map(|s| s.bytes_per_atom()).sum::<usize>();
        let short = state.iter().any(|s| s.atom_count() != self.n_home);
        let mut agreed = [record as u64, TOP - record as u64, if short { me as u64 + 1 } else { 0 }];
        self.rt.max_u64(&mut agreed)?;
        if agreed[2] > 0 {
            return Err(Error::Config(format!(
                "PE {} passes per-atom state to collective_repartition with an array whose length \
                 is not its number of home atoms",
                agreed[2] - 1
            )));
        }
        if agreed[0] != TOP - agreed[1] {
            return Err(Error::Config(format!(
                "the PEs pass per-atom state of {} to {} bytes per atom to collective_repartition: \
                 every PE must pass the same kinds of arrays, in the same order",
                TOP - agreed[1] - MIGRANT_HEADER as u64,
                agreed[0] - MIGRANT_HEADER as u64
            )));
        }
        let home = &self.coordinates()[..self.n_home];
        let broken = home.iter().zip(&self.ids).find(|(x, _)| x.iter().any(|c| !c.is_finite()));
        if let Some((atom, pe, _)) = report_atom(self.rt, broken.map(|(_, &g)| (g, me)))? {
            return Err(Error::NotFinite { atom, pe: Some(pe) });
        }
        let pbc = *self.grid.pbc();
        let placed: Vec<(RVec, [f64; 3])> = home.iter().map(|&x| pbc.put_in_box(x)).collect();
        let wrapped: Vec<RVec> = placed.iter().map(|p| p.0).collect();
        let too_far = placed.iter().zip(&self.ids).find_map(|(&(_, s), &g)| {
            let to = self.grid.cell_of_fraction(s);
            (0..3).any(|d| self.grid.steps(self.cell, to, d) > 1).then(|| (g, self.grid.pe_of(to)))
        });
        if let Some((atom, pe, to)) = report_atom(self.rt, too_far)? {
            return Err(Error::MovedTooFar { atom, from: self.grid.cell_of(pe), to: self.grid.cell_of(to) });
        }
        let mut records = vec![0u8; self.n_home * record];
        for (i, bytes) in records.chunks_exact_mut(record).enumerate() {
            bytes[..4].copy_from_slice(&self.ids[i].to_le_bytes());
            bytes[4..16].copy_from_slice(bytemuck::bytes_of(&wrapped[i]));
            let mut at = MIGRANT_HEADER;
            for s in state.iter() {
                let entry = s.atom_bytes(i);
                bytes[at..at + entry.len()].copy_from_slice(entry);
                at += entry.len();
            }
        }
        for dim in 0..3 {
            if self.grid.dims()[dim] > 1 {
                records = self.collective_migrate(dim, records, record)?;
            }
        }
        let mut order: Vec<&[u8]> = records.chunks_exact(record).collect();
        order.sort_unstable_by_key(|r| global_of(r));
        let position = |r: &[u8]| bytemuck::pod_read_unaligned::<RVec>(&r[4..16]);
        self.set_home(order.iter().map(|r| global_of(r)), order.iter().map(|r| position(r)))?;
        let mut at = MIGRANT_HEADER;
        for s in state.iter_mut() {
            let width = s.bytes_per_atom();
            s.rebuild(&mut order.iter().map(|r| &r[at..at + width]));
            at += width;
        }
        self.collective_build_plan()
    }

    /// Sends the records (one per atom, `record` bytes, position at bytes 4..16) whose new
    /// domain lies below or above along `dim` to those neighbours and takes in what they send.
    fn collective_migrate(&mut self, dim: usize, records: Vec<u8>, record: usize) -> Result<Vec<u8>> {
        let (down, up) =
            (self.grid.neighbour(self.cell, dim, false), self.grid.neighbour(self.cell, dim, true));
        let (mut stay, mut to_down, mut to_up) = (Vec::new(), Vec::new(), Vec::new());
        for r in records.chunks_exact(record) {
            let x = bytemuck::pod_read_unaligned::<RVec>(&r[4..16]);
            let target = self.grid.cell_of_fraction(self.grid.pbc().clamped_fraction(x))[dim];
            if target == self.cell[dim] {
                stay.extend_from_slice(r);
            } else if target == down[dim] {
                to_down.extend_from_slice(r);
            } else {
                to_up.extend_from_slice(r);
            }
        }
        let (down, up) = (self.grid.pe_of(down), self.grid.pe_of(up));
        let counts = self.exchange_counts([(down, to_down.len()), (up, to_up.len())], [up, down])?;
        self.byte_buffer.collective_ensure(counts[0] + counts[1])?;
        let mut received = [0; 2];
        self.bytes.exchange(
            &[self.byte_buffer.array()],
            &[Outgoing { to: down, data: &to_down }, Outgoing { to: up, data: &to_up }],
            &[
                Incoming { from: up, buffer: 0, offset: 0, room: counts[0] },
                Incoming { from: down, buffer: 0, offset: counts[0], room: counts[1] },
            ],
            &mut received,
        )?;
        check_count(received[0], counts[0], up, "bytes of migrating atoms")?;
        check_count(received[1], counts[1], down, "bytes of migrating atoms")?;
        let start = stay.len();
        stay.resize(start + counts[0] + counts[1], 0);
        self.byte_buffer.array().read_local(0, &mut stay[start..])?;
        Ok(stay)
    }

    /// Sends one count to each of `sends` and receives one from each of `from`.
    fn exchange_counts(&mut self, sends: [(usize, usize); 2], from: [usize; 2]) -> Result<[usize; 2]> {
        let values = [sends[0].1 as u64, sends[1].1 as u64];
        let mut received = [0; 2];
        self.counts.exchange(
            &[&self.count_buffer],
            &[
                Outgoing { to: sends[0].0, data: &values[..1] },
                Outgoing { to: sends[1].0, data: &values[1..] },
            ],
            &[
                Incoming { from: from[0], buffer: 0, offset: 0, room: 1 },
                Incoming { from: from[1], buffer: 0, offset: 1, room: 1 },
            ],
            &mut received,
        )?;
        let mut counts = [0u64; 2];
        self.count_buffer.read_local(0, &mut counts)?;
        Ok([counts[0] as usize, counts[1] as usize])
    }

    /// Sends `count` to `to` and returns the count received from `from`.
    fn exchange_count(&mut self, to: usize, count: usize, from: usize) -> Result<usize> {
        let incoming = Incoming { from, buffer: 0, offset: 0, room: 1 };
        self.counts.sendrecv(&[&self.count_buffer], Outgoing { to, data: &[count as u64] }, incoming)?;
        Ok(self.count_buffer.get_value(self.rt.my_pe(), 0)? as usize)
    }

    /// Makes the atoms `ids` at (wrapped) `positions` the home atoms.
    fn set_home(
        &mut self,
        ids: impl ExactSizeIterator<Item = u32>,
        positions: impl ExactSizeIterator<Item = RVec>,
    ) -> Result<()> {
        let n = ids.len();
        self.coords.collective_ensure(n)?;
        self.ids.clear();
        self.ids.extend(ids);
        let positions: Vec<RVec> = positions.collect();
        self.coords.array().write_local(0, &positions)?;
        self.n_home = n;
        self.n_local = n;
        Ok(())
    }

    /// Builds the plan from the current positions: for every pulse, which atoms this PE sends
    /// and how many it receives; the atoms' global indices and fractions travel once, so
    /// every PE knows its halo's indices and reference fractions.
    ///
    /// # Collective
    /// Every PE builds the same sequence of pulses.
    fn collective_build_plan(&mut self) -> Result<()> {
        self.n_local = self.n_home;
        self.ids.truncate(self.n_home);
        let pbc = *self.grid.pbc();
        self.reference = self.coordinates()[..self.n_home].iter().map(|&x| pbc.clamped_fraction(x)).collect();
        for q in 0..self.pulses.len() {
            let (dim, first) = (self.pulses[q].dim, q == 0 || self.pulses[q - 1].dim != self.pulses[q].dim);
            // The first pulse of a dimension considers every local atom so far (home and the
            // halos of earlier dimensions); later pulses forward what the previous one brought.
            let candidates = if first {
                0..self.n_local
            } else {
                let previous = &self.pulses[q - 1];
                previous.offset..previous.offset + previous.count
            };
            let limit = self.lower[dim] + self.grid.reach(dim);
            let send: Vec<u32> =
                candidates.filter(|&i| self.reference[i][dim] < limit).map(|i| i as u32).collect();
            let (to, from) = (self.pulses[q].to, self.pulses[q].from);
            let count = self.exchange_count(to, send.len(), from)?;
            self.coords.collective_ensure(self.n_local + count)?;
            let offset = self.n_local;
            self.pulses[q].send = send;
            let mut records: Vec<HaloRecord> = (0..self.n_local)
                .map(|i| HaloRecord { global: self.ids[i], padding: 0, fraction: self.reference[i] })
                .collect();
            self.field_pulse(q, count, &mut records)?;
            let receives_shifted = self.pulses[q].receives_shifted;
            for r in &records[offset..] {
                self.ids.push(r.global);
                let mut fraction = r.fraction;
                if receives_shifted {
                    fraction[dim] += 1.0;
                }
                self.reference.push(fraction);
            }
            let pulse = &mut self.pulses[q];
            pulse.offset = offset;
            pulse.count = count;
            self.n_local += count;
            // The first move_x brings the positions.
            self.move_x_pulse(q)?;
        }
        let largest = self.pulses.iter().map(|p| p.send.len()).max().unwrap_or(0);
        self.force_scratch.collective_ensure(largest)?;
        Ok(())
    }

    /// Pulse `q` of a per-atom field: sends the entries of the pulse's send list and appends
    /// the `count` entries received.
    fn field_pulse<T: Pod>(&mut self, q: usize, count: usize, values: &mut Vec<T>) -> Result<()> {
        let width = size_of::<T>();
        self.byte_buffer.collective_ensure(count * width)?;
        let pulse = &self.pulses[q];
        let packed: Vec<T> = pulse.send.iter().map(|&i| values[i as usize]).collect();
        if pulse.to == self.rt.my_pe() {
            check_count(packed.len(), count, pulse.from, "entries of a per-atom field")?;
            values.extend(packed);
            return Ok(());
        }
        let (to, from) = (pulse.to, pulse.from);
        let incoming = Incoming { from, buffer: 0, offset: 0, room: count * width };
        let outgoing = Outgoing { to, data: bytemuck::cast_slice::<T, u8>(&packed) };
        let received = self.bytes.sendrecv(&[self.byte_buffer.array()], outgoing, incoming)?;
        check_count(received, count * width, from, "bytes of a per-atom field")?;
        let mut arrived = vec![0u8; received];
        self.byte_buffer.array().read_local(0, &mut arrived)?;
        values.extend(arrived.chunks_exact(width).map(bytemuck::pod_read_unaligned::<T>));
        Ok(())
    }

    /// One pulse of move_x: the shifted coordinates of the send list are packed straight into
    /// the receiver's coordinate array where the path allows it (one-sided, same node), or
    /// into a buffer that is then sent.
    fn move_x_pulse(&mut self, q: usize) -> Result<()> {
        let coords = self.coords.array();
        let parallel_min = self.parallel_min;
        let pulse = &mut self.pulses[q];
        // SAFETY: the prefix up to this pulse's receive region holds home atoms and atoms
        // received in earlier pulses of this call: no PE writes it until this PE announces
        // its receive regions again in the next move_x. The destination a packing function
        // gets is this pulse's receive region on another PE (or, with one domain along the
        // dimension, this PE's own region beyond the prefix): never the prefix.
        let prefix = unsafe { &coords.local_slice()[..pulse.offset] };
        // The shift is a whole vector, added in registers and stored at once.
        let delta = pulse.shift;
        let send = &pulse.send;
        let pack = |(out, &i): (&mut RVec, &u32)| {
            let x = prefix[i as usize];
            *out = [x[0] + delta[0], x[1] + delta[1], x[2] + delta[2]];
        };
        let fill = |dest: &mut [RVec]| {
            if !parallel(send.len(), parallel_min) {
                dest.iter_mut().zip(send).for_each(pack);
            } else {
                dest.par_iter_mut().zip(send.par_iter()).for_each(pack);
            }
        };
        if pulse.to == self.rt.my_pe() {
            // The periodic image along a dimension with one domain: packed into place here,
            // with no message, on every path.
            check_count(send.len(), pulse.count, pulse.from, "coordinates")?;
            // SAFETY: this pulse's receive region follows the prefix; with this PE its own
            // partner, no other PE writes the region in this pulse (nobody else sends to it),
            // and nothing else refers to it while it is filled.
            let region =
                unsafe { std::slice::from_raw_parts_mut(coords.as_ptr().add(pulse.offset), pulse.count) };
            fill(region);
            return Ok(());
        }
        let incoming = Incoming { from: pulse.from, buffer: 0, offset: pulse.offset, room: pulse.count };
        let received = pulse.x.sendrecv_packed(&[coords], pulse.to, send.len(), fill, incoming)?;
        check_count(received, pulse.count, pulse.from, "coordinates")
    }
}

/// The global index at the start of a migrating atom's record.
fn global_of(record: &[u8]) -> u32 {
    u32::from_le_bytes([record[0], record[1], record[2], record[3]])
}

/// Adds `forces` to `total`, in order, in double precision.
fn accumulate(total: &mut [f64; 3], forces: &[RVec]) {
    for f in forces {
        for d in 0..3 {
            total[d] += f[d] as f64;
        }
    }
}

/// The largest value the runtime's max-reduction takes.
const TOP: u64 = i64::MAX as u64;

/// The least and the largest of every PE's `value` (at most [`TOP`]), on every PE.
///
/// # Collective
/// Every PE must call it.
fn min_max(rt: &Runtime, value: u64) -> Result<(u64, u64)> {
    let mut agreed = [value.min(TOP), TOP - value.min(TOP)];
    rt.max_u64(&mut agreed)?;
    Ok((TOP - agreed[1], agreed[0]))
}

/// A hash of what every PE must agree on to build one halo exchange: the grid, the box, the
/// range and the path (at most [`TOP`]).
fn setup_hash(grid: &DdGrid, path: Path) -> u64 {
    let mut words: Vec<u64> = grid.dims().iter().map(|&n| n as u64).collect();
    words.extend(grid.pbc().vectors().iter().flatten().map(|c| c.to_bits() as u64));
    words.push(grid.range().to_bits() as u64);
    words.extend(path.name().bytes().map(u64::from));
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for word in words {
        hash ^= word;
        hash = hash.wrapping_mul(0x100_0000_01b3);
    }
    hash & TOP
}

/// Agrees on one atom that some PE found a problem with (`found`: the atom's global index and
/// the PE it belongs to): returns, on every PE alike, `(atom, PE that found it, PE it
/// belongs to)` for one such atom (the largest index found, and of those the highest PE),
/// or `None`.
///
/// # Collective
/// Every PE must call it.
fn report_atom(rt: &Runtime, found: Option<(u32, usize)>) -> Result<Option<(usize, usize, usize)>> {
    let me = rt.my_pe();
    // One value names the atom and its PE, so that every PE reports the same pair.
    let flag = found.map_or(0, |(atom, _)| (atom as u64 + 1) << PE_BITS | me as u64);
    let flag = rt.max_u64_one(flag)?;
    if flag == 0 {
        return Ok(None);
    }
    let atom = (flag >> PE_BITS) as usize - 1;
    let pe = (flag & ((1 << PE_BITS) - 1)) as usize;
    // Where it belongs, from the PE that found it (an error path: one more reduction).
    let target = match found {
        Some((_, target)) if pe == me => target as u64 + 1,
        _ => 0,
    };
    let target = rt.max_u64_one(target)? as usize - 1;
    Ok(Some((atom, pe, target)))
}

/// Whether a loop over `len` items is worth rayon's thread pool: at least `parallel_min` of
/// them, and more than one thread to share them. With one thread, a parallel loop only adds
/// the hand-over to the pool's thread and back (a sleep and a wake-up, tens of microseconds).
pub(crate) fn parallel(len: usize, parallel_min: usize) -> bool {
    len >= parallel_min && rayon::current_num_threads() > 1
}

/// Bits for the PE in the value that names an atom to every PE (the atom above): up to 2^24 PEs.
const PE_BITS: u32 = 24;

/// A neighbour sent a different number of elements than the plan says.
fn check_count(received: usize, expected: usize, from: usize, what: &str) -> Result<()> {
    if received == expected {
        Ok(())
    } else {
        Err(Error::PlanMismatch(format!(
            "PE {from} sent {received} {what} where the plan expects {expected}; the PEs' plans disagree"
        )))
    }
}

/// `forces[targets[i]] += values[i]` for every `i`, in parallel above `parallel_min`. Send
/// lists name local atoms in increasing order (each is a filtered range), so the targets are
/// distinct and no two threads add to the same force; the parallel loop checks that order.
fn scatter_add(forces: &mut [RVec], targets: &[u32], values: &[RVec], parallel_min: usize) {
    assert_eq!(targets.len(), values.len(), "one returned force per sent atom");
    if !parallel(targets.len(), parallel_min) {
        for (&t, v) in targets.iter().zip(values) {
            let f = &mut forces[t as usize];
            for d in 0..3 {
                f[d] += v[d];
            }
        }
        return;
    }
    // The parallel writes below rely on these two facts; one pass over the list, a small part
    // of the work of the lists long enough to get here.
    assert!(
        targets.windows(2).all(|w| w[0] < w[1])
            && targets.last().is_none_or(|&t| (t as usize) < forces.len()),
        "send lists name distinct local atoms in increasing order"
    );
    let base = Scatter(forces.as_mut_ptr());
    targets.par_iter().zip(values.par_iter()).for_each(|(&t, v)| {
        // SAFETY: t is in bounds and distinct across iterations (both asserted above), so this
        // is the only access to that element during the loop.
        let f = unsafe { &mut *base.at(t as usize) };
        for d in 0..3 {
            f[d] += v[d];
        }
    });
}
