//! The halo exchange: a plan built at (re)partition, and `move_x` / `move_f` every step.
//!
//! GROMACS's scheme with the half-shell convention, in fractional coordinates: dimension by
//! dimension (in [`DdGrid::exchange_order`]: split dimensions in x, y, z order, then those of
//! one domain, whose pulses only make periodic images), each domain receives from its neighbour above the atoms
//! within the halo range beyond its upper face, and sends to its neighbour below the atoms
//! within that range above its own lower face. Atoms received in earlier dimensions are
//! forwarded in later ones, which covers edges and corners; when the range exceeds a domain's
//! width, further pulses forward the atoms received in the previous pulse, one domain further
//! each time. An atom sent across the periodic boundary (from the first domain of a dimension
//! to the last) is shifted by that dimension's box vector on the way. Received atoms land in
//! place, behind the home atoms, in one symmetric coordinate array.
//!
//! Every transfer is an [`Exchange`] on the chosen [`ExchangePath`]: the one-sided offset swap or MPI
//! two-sided; on the one-sided path the forces go back as pulls instead, so that their owner
//! adds them up where they lie in the neighbour's memory ([`Exchange::sendrecv_consumed`]). The plan (who sends which atoms to whom, and where they land) is built once per
//! partition; `move_x` then sends coordinates along it and `move_f` sends the forces on halo
//! atoms back the same way in reverse, where their owners add them up.

use onesided::{
    Exchange, ExchangePath, GlobalMaxArray, GrowthPolicy, Incoming, Offer, Outgoing, Runtime, SymArray,
};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::grid::DdGrid;
use crate::pbc::{PbcBox, RVec};

mod agree;
mod migrate;
mod plan;

use agree::{check_count, min_max, report_atom, setup_hash};
pub use migrate::AtomState;
pub(crate) use plan::sends;

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

    /// Adds the force on a periodic image the kernel made ([`PeriodicImages::Kernel`]), once
    /// per box vector it is shifted by: how a force kernel that makes the images itself sums
    /// the shift forces it returns beside [`HaloExchange::move_f`]'s.
    #[inline]
    pub fn add_image(&mut self, image: &PeriodicImage, force: [f64; 3]) {
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
    /// The halo exchange: [`HaloExchange::move_x`] copies the images, shifted, behind the
    /// halo atoms, and [`HaloExchange::move_f`] adds their forces to their atoms. Any force
    /// kernel that takes plain coordinates works.
    #[default]
    Halo,
    /// The force kernel, as GROMACS's does with shift vectors: the halo exchange moves only
    /// what crosses between PEs, and [`HaloExchange::images`] lists each image as an atom and
    /// a shift. The kernel adds the shift where it loads the atom
    /// ([`PeriodicImage::position`]) and adds the image's force to the atom's, and returns the
    /// shift forces ([`ShiftForces::add_image`]); no pass over the images is left in the
    /// exchange.
    Kernel,
}

/// A periodic image of a stored local atom that the force kernel makes
/// ([`PeriodicImages::Kernel`]): local atom `stored_count() + k` is `atom` shifted by
/// `vector`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicImage {
    /// The stored local atom (home or halo) it is an image of.
    pub atom: u32,
    /// How many times each box vector is added: 0 or 1, and 1 only along dimensions of one
    /// domain (the range is below half the box, so each such dimension has one pulse).
    pub cells: [u32; 3],
    /// The shift, `Σ_d cells[d] · box vector d`.
    pub vector: RVec,
}

impl PeriodicImage {
    /// The image's position, given its atom's position `x`: `x + vector`, as the halo makes
    /// it under [`PeriodicImages::Halo`].
    #[inline]
    pub fn position(&self, x: RVec) -> RVec {
        let v = self.vector;
        [x[0] + v[0], x[1] + v[1], x[2] + v[2]]
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

    /// The zone of local atom `i`: where its reference fractions lie against the domain, per
    /// dimension, so that [`Zone::pairs_with`] answers [`owns`](Self::owns) from two bytes.
    pub fn zone(&self, i: usize) -> Zone {
        let mut bits = 0u8;
        for (d, &s) in self.reference[i].iter().enumerate() {
            bits |= u8::from(s < self.lower[d]) << d | u8::from(s >= self.upper[d]) << (d + 3);
        }
        Zone(bits)
    }

    /// The zones of all local atoms, in local order.
    pub fn zones(&self) -> Vec<Zone> {
        (0..self.reference.len()).map(|i| self.zone(i)).collect()
    }
}

/// Where a local atom lies against its domain, per dimension: below the domain's lower
/// boundary, within it, or at or above its upper boundary (a halo atom from above). A domain
/// computes a pair when, along every dimension, the lower of the two atoms lies within the
/// domain: neither is below, and not both are above. Home atoms are [`Zone::HOME`]. A force
/// kernel keeps one byte per atom and decides ownership with two bit operations, for any
/// number of atoms at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Zone(u8);

impl Zone {
    /// Within the domain along every dimension.
    pub const HOME: Zone = Zone(0);
    /// Bits `0..3`: below the domain along dimension `d`.
    pub const BELOW: u8 = 0b000_111;
    /// Bits `3..6`: at or above the domain's upper boundary along dimension `d - 3`.
    pub const ABOVE: u8 = 0b111_000;

    /// The zone with these bits ([`BELOW`](Self::BELOW) and [`ABOVE`](Self::ABOVE)); other bits
    /// are dropped.
    pub fn from_bits(bits: u8) -> Zone {
        Zone(bits & (Self::BELOW | Self::ABOVE))
    }

    /// The bits of the zone.
    pub fn bits(self) -> u8 {
        self.0
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
        ((a | b) & Self::BELOW) == 0 && (a & b & Self::ABOVE) == 0
    }
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
/// [`move_f`](Self::move_f). A kernel that can write into memory it is handed writes the
/// forces straight into the exchange's own array instead
/// ([`coordinates_and_forces_mut`](Self::coordinates_and_forces_mut)) and calls
/// [`move_f_in_place`](Self::move_f_in_place): on the one-sided path the halo forces then
/// leave without a copy. Every few steps it calls
/// [`collective_repartition`](Self::collective_repartition) with its per-atom state, which
/// moves with the atoms.
pub struct HaloExchange<'rt> {
    rt: &'rt Runtime,
    grid: DdGrid,
    cell: [usize; 3],
    /// This domain's corners in fractions.
    lower: [f64; 3],
    upper: [f64; 3],
    path: ExchangePath,
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
    /// Forces on the stored atoms where a kernel writes them for
    /// [`move_f_in_place`](HaloExchange::move_f_in_place): neighbours read the halo atoms'
    /// forces from here, and nobody but this PE writes it.
    forces: GlobalMaxArray<'rt, RVec>,
    counts: Exchange<'rt, u64>,
    count_buffer: SymArray<'rt, u64>,
    /// Per-atom fields along the plan, and migrating atoms.
    bytes: Exchange<'rt, u8>,
    byte_buffer: GlobalMaxArray<'rt, u8>,
    /// Who makes the images along dimensions of one domain.
    images: PeriodicImages,
    /// The local atoms that are such images, in local order from `n_stored`: their pulses
    /// come last.
    image_table: Vec<PeriodicImage>,
    /// The pulses that cross between PEs come first; the rest make images.
    exchanged_pulses: usize,
    /// An exchange returned an error: a neighbour may still write the halo region, so only
    /// the home atoms are handed out and no further exchange is started.
    failed: bool,
}

/// Below this many atoms, packing and unpacking run on the calling thread: handing a few
/// microseconds of work to the thread pool costs more than it saves.
const PARALLEL_MIN: usize = 4096;

/// Buffers grow by a fifth beyond the largest need, and keep checking every repartition.
const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: 1.2, freeze_after: None };

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
        path: ExchangePath,
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
        path: ExchangePath,
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
    fn collective_setup(
        rt: &'rt Runtime,
        grid: DdGrid,
        path: ExchangePath,
        home: Vec<(u32, RVec)>,
    ) -> Result<Self> {
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
        for dim in grid.exchange_order() {
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
                    f: Exchange::collective_with_partners(
                        rt,
                        &label("forces"),
                        force_path(path),
                        &[to, from],
                    )?,
                });
            }
        }
        // The exchange order puts the dimensions of one domain, where a PE is its own
        // neighbour, last.
        let exchanged_pulses = pulses.iter().take_while(|p| p.to != rt.my_pe()).count();
        debug_assert!(pulses[exchanged_pulses..].iter().all(|p| p.to == rt.my_pe()));
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
            forces: GlobalMaxArray::collective_alloc(rt, &name("forces"), 0, GROWTH)?,
            counts: Exchange::collective_with_partners(rt, &name("counts"), path, &neighbours)?,
            count_buffer: SymArray::collective_alloc(rt, &name("count buffer"), 2)?,
            bytes: Exchange::collective_with_partners(rt, &name("per-atom fields"), path, &neighbours)?,
            byte_buffer: GlobalMaxArray::collective_alloc(rt, &name("per-atom field buffer"), 0, GROWTH)?,
            images: PeriodicImages::Halo,
            image_table: Vec::new(),
            exchanged_pulses,
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
    pub fn path(&self) -> ExchangePath {
        self.path
    }

    /// The number of home atoms.
    pub fn home_count(&self) -> usize {
        self.n_home
    }

    /// The number of local atoms: home and halo, with the periodic images along dimensions
    /// of one domain (stored or not: [`PeriodicImages`]). [`global_indices`](Self::global_indices),
    /// [`reference_fractions`](Self::reference_fractions) and [`collective_spread`](Self::collective_spread)
    /// cover them all.
    pub fn local_count(&self) -> usize {
        self.n_local
    }

    /// The number of local atoms whose coordinates the exchange holds
    /// ([`coordinates`](Self::coordinates)) and whose forces [`move_f`](Self::move_f) takes:
    /// all local atoms under [`PeriodicImages::Halo`], all but the images under
    /// [`PeriodicImages::Kernel`].
    pub fn stored_count(&self) -> usize {
        match self.images {
            PeriodicImages::Halo => self.n_local,
            PeriodicImages::Kernel => self.n_local - self.image_table.len(),
        }
    }

    /// Who makes the periodic images along dimensions of one domain.
    pub fn periodic_images(&self) -> PeriodicImages {
        self.images
    }

    /// Chooses who makes the periodic images along dimensions of one domain (the default is
    /// [`PeriodicImages::Halo`]). Local to this PE: nothing any PE sends depends on it. It
    /// holds across repartitions; under [`PeriodicImages::Kernel`], coordinates and forces
    /// cover [`stored_count`](Self::stored_count) atoms from the next call on. Switch between
    /// steps (after `move_f`): a switch to [`PeriodicImages::Halo`] makes the images from the
    /// current coordinates at once, so that [`coordinates`](Self::coordinates) holds them, but
    /// a pair list built under the other choice must be built again.
    ///
    /// # Errors
    /// As [`move_x`](Self::move_x) when the exchange has failed before.
    pub fn set_periodic_images(&mut self, images: PeriodicImages) -> Result<()> {
        self.usable()?;
        let was = std::mem::replace(&mut self.images, images);
        if was == PeriodicImages::Kernel && images == PeriodicImages::Halo {
            // The images were last written at the plan build or under Halo: bring them up to
            // date (no messages: every such pulse is this PE's own).
            for q in self.exchanged_pulses..self.pulses.len() {
                let outcome = self.move_x_pulse(q);
                self.note(outcome)?;
            }
        }
        Ok(())
    }

    /// The images the force kernel makes under [`PeriodicImages::Kernel`]: local atom
    /// `stored_count() + k` is `images()[k]`. Empty under [`PeriodicImages::Halo`] (the images
    /// are then stored atoms), and after an exchange failed (when
    /// [`coordinates`](Self::coordinates) holds the home atoms only).
    pub fn images(&self) -> &[PeriodicImage] {
        match self.images {
            PeriodicImages::Kernel if !self.failed => &self.image_table,
            _ => &[],
        }
    }

    /// The positions of all local atoms: [`coordinates`](Self::coordinates) followed by the
    /// images the kernel makes ([`images`](Self::images)), each its atom's position plus its
    /// shift. What `coordinates` holds under [`PeriodicImages::Halo`], for a kernel that
    /// wants plain coordinates (a reference computation, say).
    pub fn positions_with_images(&self) -> Vec<RVec> {
        let stored = self.coordinates();
        let mut all = stored.to_vec();
        // Empty after a failure, when `stored` holds the home atoms only.
        all.extend(self.images().iter().map(|image| image.position(stored[image.atom as usize])));
        all
    }

    /// Adds the forces on the images the kernel makes ([`images`](Self::images)), the last
    /// entries of `forces` (one per local atom), to their atoms, truncates `forces` to the
    /// stored atoms and returns the forces the images carried across the periodic
    /// boundaries, for the virial: the companion of
    /// [`positions_with_images`](Self::positions_with_images). Nothing to do under
    /// [`PeriodicImages::Halo`], where [`move_f`](Self::move_f) does it.
    ///
    /// # Errors
    /// [`Error::Config`] when `forces` is not one force per local atom.
    pub fn fold_image_forces(&self, forces: &mut Vec<RVec>) -> Result<ShiftForces> {
        let (stored, images) = (self.stored_count(), self.images());
        if forces.len() != stored + images.len() {
            return Err(Error::Config(format!(
                "fold_image_forces needs one force per local atom ({}), got {}",
                stored + images.len(),
                forces.len()
            )));
        }
        let mut shift_forces = ShiftForces::default();
        for (k, image) in images.iter().enumerate().rev() {
            let f = forces[stored + k];
            shift_forces.add_image(image, f.map(f64::from));
            let target = &mut forces[image.atom as usize];
            for c in 0..3 {
                target[c] += f[c];
            }
        }
        forces.truncate(stored);
        Ok(shift_forces)
    }

    /// Pulses per dimension.
    pub fn pulses(&self) -> [usize; 3] {
        self.grid.pulses()
    }

    /// Per pulse, in the order the exchange runs them: how many atoms this PE sends and how
    /// many it receives (what [`crate::model::halo_traffic`] computes without a runtime).
    pub fn pulse_counts(&self) -> Vec<(usize, usize)> {
        self.pulses.iter().map(|p| (p.send.len(), p.count)).collect()
    }

    /// Atoms this PE sends per step, over all pulses.
    pub fn send_count(&self) -> usize {
        self.pulses.iter().map(|p| p.send.len()).sum()
    }

    /// Current positions of the stored local atoms ([`stored_count`](Self::stored_count) of
    /// them: all local atoms, or all but the images under [`PeriodicImages::Kernel`]), home
    /// first, then halo in plan order (each halo atom as the image, shifted by box vectors,
    /// that lies next to this domain). Local atom `i` here is local atom `i` of
    /// [`global_indices`](Self::global_indices) and
    /// [`reference_fractions`](Self::reference_fractions), which go on over the images the
    /// kernel makes. Valid until the next call that takes `&mut self`.
    ///
    /// After an exchange returned an error, only the home atoms: a neighbour may still be
    /// writing the halo region.
    pub fn coordinates(&self) -> &[RVec] {
        let len = if self.failed { self.n_home } else { self.stored_count() };
        // SAFETY: other PEs write this array only in the receive regions this PE announces
        // (behind the home atoms), inside exchanges this PE takes part in: move_x, the plan
        // build and repartition, which take &mut self, so `&self` excludes them while the
        // slice lives. When one of them failed, an announced region may still be written
        // later; then the slice covers the home atoms only.
        unsafe { self.coords.array().local_range(0..len) }
    }

    /// The positions of the home atoms, to write before [`move_x`](Self::move_x): an engine
    /// integrates its equations of motion here. Positions need not stay in the box between
    /// repartitions (the plan's periodic shifts assume they do not jump by box vectors).
    pub fn home_coordinates_mut(&mut self) -> &mut [RVec] {
        // SAFETY: other PEs write this array only in the receive regions this PE announces,
        // which lie behind the home atoms, and only inside exchanges this PE takes part in;
        // `&mut self` excludes those while the slice lives, and nothing else refers to the
        // home region.
        unsafe { self.coords.array().local_range_mut(0..self.n_home) }
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
        for q in 0..self.pulses_run() {
            let outcome = self.move_x_pulse(q);
            self.note(outcome)?;
        }
        Ok(())
    }

    /// How many pulses move_x and move_f run: all, or under [`PeriodicImages::Kernel`] those
    /// that cross between PEs.
    fn pulses_run(&self) -> usize {
        match self.images {
            PeriodicImages::Halo => self.pulses.len(),
            PeriodicImages::Kernel => self.exchanged_pulses,
        }
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
    /// too. Under [`PeriodicImages::Kernel`], `forces` covers the stored atoms
    /// ([`stored_count`](Self::stored_count)), the kernel having added the images' forces to
    /// their atoms, and the shift forces returned are those of the exchanged pulses alone.
    ///
    /// # Errors
    /// [`Error::Config`] when `forces` is not one force per stored local atom (on this PE only: its
    /// neighbours then time out waiting for it); otherwise as [`move_x`](Self::move_x).
    pub fn move_f(&mut self, forces: &mut [RVec]) -> Result<ShiftForces> {
        self.usable()?;
        let outcome = self.move_f_pulses(Some(forces));
        self.note(outcome)
    }

    /// The forces on the stored atoms ([`stored_count`](Self::stored_count) of them, in the
    /// order of [`coordinates`](Self::coordinates)) in this exchange's own symmetric memory,
    /// for a force kernel to write before [`move_f_in_place`](Self::move_f_in_place), and to
    /// read the home atoms' total forces from after it. What the array holds before a kernel
    /// writes it is left from the last step (or zero); a kernel that accumulates clears it
    /// first. Call [`coordinates_and_forces_mut`](Self::coordinates_and_forces_mut) for both
    /// at once.
    ///
    /// # Errors
    /// After an exchange failed, as [`move_x`](Self::move_x); a neighbour that does not take
    /// the forces of the last `move_f_in_place` times out, naming it.
    pub fn forces_mut(&mut self) -> Result<&mut [RVec]> {
        Ok(self.coordinates_and_forces_mut()?.1)
    }

    /// [`coordinates`](Self::coordinates) and [`forces_mut`](Self::forces_mut) together, as a
    /// force kernel needs them.
    ///
    /// # Errors
    /// As [`forces_mut`](Self::forces_mut).
    pub fn coordinates_and_forces_mut(&mut self) -> Result<(&[RVec], &mut [RVec])> {
        self.usable()?;
        let outcome = self.forces_taken();
        self.note(outcome)?;
        let stored = self.stored_count();
        // SAFETY: other PEs never write this array; they read it only between this PE's offer
        // in move_f_in_place and their taken signal, which every pulse has now received
        // (above). `&mut self` keeps move_f_in_place, and any other view, away while the
        // slice lives.
        let forces = unsafe { self.forces.array().local_range_mut(0..stored) };
        // SAFETY: as for `coordinates`: other PEs write the coordinates only in the regions
        // this PE announces, inside exchanges that take `&mut self`, which none does while
        // the slice lives; no exchange failed (checked above).
        let coordinates = unsafe { self.coords.array().local_range(0..stored) };
        Ok((coordinates, forces))
    }

    /// [`move_f`](Self::move_f) on the forces a kernel wrote into this exchange's own array
    /// ([`forces_mut`](Self::forces_mut)): afterwards its home part holds the total force on
    /// each home atom. On the one-sided path the halo atoms' forces are not copied before they
    /// leave: each neighbour reads them where the kernel wrote them and adds them to its
    /// atoms (`move_f` first copies them into a staging buffer). The results are the same
    /// bits as `move_f`'s. Every PE calls the same one of the two in a step.
    ///
    /// # Errors
    /// As [`move_x`](Self::move_x); a neighbour that called `move_f` instead is refused, on
    /// the one-sided path, as an [`onesided::ExchangeProblem::OfferMismatch`].
    pub fn move_f_in_place(&mut self) -> Result<ShiftForces> {
        self.usable()?;
        let outcome = self.move_f_pulses(None);
        self.note(outcome)
    }

    /// Waits until every neighbour has taken the halo forces this PE last offered in
    /// [`move_f_in_place`](Self::move_f_in_place) (at once when it offered none).
    fn forces_taken(&mut self) -> Result<()> {
        for pulse in &mut self.pulses {
            pulse.f.wait_taken()?;
        }
        Ok(())
    }

    /// The pulses of `move_f` in reverse, on the caller's `forces`, or on the exchange's own
    /// array (`None`).
    fn move_f_pulses(&mut self, mut caller: Option<&mut [RVec]>) -> Result<ShiftForces> {
        let stored = self.stored_count();
        if let Some(forces) = &caller
            && forces.len() != stored
        {
            return Err(Error::Config(format!(
                "move_f needs one force per stored local atom ({stored}), got {}",
                forces.len()
            )));
        }
        let in_place = caller.is_none();
        if in_place {
            // The neighbours' reads of the last step's offers end before any force changes.
            self.forces_taken()?;
        }
        let me = self.rt.my_pe();
        let mut shift_forces = ShiftForces::default();
        for q in (0..self.pulses_run()).rev() {
            let pulse = &mut self.pulses[q];
            let (offset, count) = (pulse.offset, pulse.count);
            // The forces up to the end of this pulse's region. Of the exchange's own array, the
            // regions offered so far in this call (those of the later pulses, read by the
            // neighbours now) lie beyond it: the later a pulse, the further its region.
            let forces: &mut [RVec] = match caller.as_deref_mut() {
                Some(forces) => &mut forces[..offset + count],
                // SAFETY: other PEs never write this array, and read only the regions this PE
                // offered and they have not yet taken: those of the later pulses of this call
                // (the earlier calls' were awaited above), which lie beyond this range.
                // `&mut self` keeps every other view of the array away.
                None => unsafe { self.forces.array().local_range_mut(0..offset + count) },
            };
            // The atoms sent lie before the region received, so the two halves are apart.
            let (atoms, images) = forces.split_at_mut(offset);
            if pulse.to == me {
                // The periodic image along a dimension with one domain: the forces on the
                // images are added to their atoms here, with no message. Every sent atom lies
                // before this pulse's region (send lists are built from earlier atoms).
                let along = Some(&mut shift_forces.along[pulse.dim]);
                scatter_add(atoms, &pulse.send, images, along, self.parallel_min);
                continue;
            }
            // The forces on this pulse's halo atoms go back to their owner; the forces on the
            // atoms this PE sent come back and are added where they lie (in the neighbour's
            // memory on the one-sided path).
            let (send, parallel_min) = (&pulse.send, self.parallel_min);
            let mut along = pulse.sends_shifted.then_some(&mut shift_forces.along[pulse.dim]);
            let consume = |_: usize, returned: &[RVec]| {
                if returned.len() == send.len() {
                    scatter_add(atoms, send, returned, along.as_deref_mut(), parallel_min);
                }
            };
            let outgoing = if !in_place {
                Outgoing::Copy { to: pulse.from, data: images }
            } else {
                // SAFETY: nobody writes this region until the neighbour has taken it: other PEs
                // never write this array, and this PE writes it only through `forces_mut` and
                // this function, which both wait for every pulse's taken signal first (the
                // later pulses of this call write below this region).
                Outgoing::Offered(unsafe { Offer::new(pulse.from, 1, offset..offset + count) })
            };
            let received = pulse
                .f
                .call(&[self.force_scratch.array(), self.forces.array()])
                .send(&[outgoing])
                .receive(&[Incoming { from: pulse.to, buffer: 0, offset: 0, room: send.len() }])
                .consume(consume)
                .run()?[0];
            check_count(received, pulse.send.len(), pulse.to, "forces")?;
        }
        Ok(shift_forces)
    }
}

/// The path of the force exchanges: the pull where the halo is one-sided, so that the forces
/// coming back are added up where they lie in the neighbour's memory
/// ([`Exchange::sendrecv_consumed`]) instead of being copied into this PE's first.
fn force_path(path: ExchangePath) -> ExchangePath {
    if path == ExchangePath::Put { ExchangePath::Get } else { path }
}

/// Double-precision sums of forces in four lanes, force `i` in lane `i % 4`, combined at the
/// end: one running sum would wait on the latency of each addition before the next, which
/// made the sum as slow as the scatter-add it goes with. The order is fixed, so the result
/// does not depend on how the forces are scattered.
#[derive(Default)]
struct LaneSum([[f64; 3]; 4]);

impl LaneSum {
    #[inline(always)]
    fn add(&mut self, lane: usize, f: &RVec) {
        for (sum, &component) in self.0[lane].iter_mut().zip(f) {
            *sum += component as f64;
        }
    }

    /// Adds every force in `forces`, the first in lane 0.
    fn add_all(&mut self, forces: &[RVec]) {
        let chunks = forces.chunks_exact(4);
        let rest = chunks.remainder();
        for chunk in chunks {
            for (lane, f) in chunk.iter().enumerate() {
                self.add(lane, f);
            }
        }
        for (lane, f) in rest.iter().enumerate() {
            self.add(lane, f);
        }
    }

    /// Adds the sum to `total`.
    fn finish(self, total: &mut [f64; 3]) {
        let l = self.0;
        for d in 0..3 {
            total[d] += (l[0][d] + l[1][d]) + (l[2][d] + l[3][d]);
        }
    }
}

/// Whether a loop over `len` items is worth rayon's thread pool: at least `parallel_min` of
/// them, and more than one thread to share them. With one thread, a parallel loop only adds
/// the hand-over to the pool's thread and back (a sleep and a wake-up, tens of microseconds).
pub(crate) fn parallel(len: usize, parallel_min: usize) -> bool {
    len >= parallel_min && rayon::current_num_threads() > 1
}

/// `forces[targets[i]] += values[i]` for every `i`, in parallel above `parallel_min`, and the
/// double-precision sum of `values` added to `along` when given (the forces across a periodic
/// boundary, for the virial), in the same pass where the loop is serial. Send lists name local
/// atoms in increasing order (each is a filtered range), so the targets are distinct and no two
/// threads add to the same force; the parallel loop checks that order.
fn scatter_add(
    forces: &mut [RVec],
    targets: &[u32],
    values: &[RVec],
    along: Option<&mut [f64; 3]>,
    parallel_min: usize,
) {
    assert_eq!(targets.len(), values.len(), "one returned force per sent atom");
    let add = |forces: &mut [RVec], t: u32, v: &RVec| {
        let f = &mut forces[t as usize];
        for d in 0..3 {
            f[d] += v[d];
        }
    };
    if !parallel(targets.len(), parallel_min) {
        match along {
            None => {
                for (&t, v) in targets.iter().zip(values) {
                    add(forces, t, v);
                }
            }
            Some(total) => {
                // The lanes as LaneSum::add_all fills them, so the sum is the parallel path's.
                let mut sum = LaneSum::default();
                let (targets4, values4) = (targets.chunks_exact(4), values.chunks_exact(4));
                let rest = targets4.remainder().iter().zip(values4.remainder());
                for (ts, vs) in targets4.zip(values4) {
                    for lane in 0..4 {
                        sum.add(lane, &vs[lane]);
                        add(forces, ts[lane], &vs[lane]);
                    }
                }
                for (lane, (&t, v)) in rest.enumerate() {
                    sum.add(lane, v);
                    add(forces, t, v);
                }
                sum.finish(total);
            }
        }
        return;
    }
    if let Some(total) = along {
        let mut sum = LaneSum::default();
        sum.add_all(values);
        sum.finish(total);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_add_sums_as_the_lanes_do() {
        // Lengths around the four lanes; values that tell atom and component apart, with
        // fractions that make the order of the double-precision sum show.
        for len in [0, 1, 3, 4, 5, 8, 1001] {
            let targets: Vec<u32> = (0..len as u32).map(|i| 2 * i + i % 3).collect();
            let values: Vec<RVec> =
                (0..len).map(|i| [i as f32 + 0.1, -(i as f32) * 1e-3, 1e4 + 0.37 * i as f32]).collect();
            let n = targets.last().map_or(0, |&t| t as usize + 1);
            let mut forces = vec![[1.0f32, 2.0, 3.0]; n];
            let mut along = [0.5f64; 3];
            scatter_add(&mut forces, &targets, &values, Some(&mut along), usize::MAX);
            let mut lanes = LaneSum::default();
            lanes.add_all(&values);
            let mut want = [0.5f64; 3];
            lanes.finish(&mut want);
            assert_eq!(along, want, "{len} forces");
            let exact: Vec<f64> =
                (0..3).map(|d| 0.5 + values.iter().map(|v| v[d] as f64).sum::<f64>()).collect();
            for d in 0..3 {
                assert!((along[d] - exact[d]).abs() <= 1e-9 * exact[d].abs().max(1.0), "{len} forces");
            }
            let mut expected = vec![[1.0f32, 2.0, 3.0]; n];
            for (&t, v) in targets.iter().zip(&values) {
                for d in 0..3 {
                    expected[t as usize][d] += v[d];
                }
            }
            assert_eq!(forces, expected, "{len} forces");
        }
    }

    #[test]
    fn zones_decide_ownership_as_the_fractions_do() {
        // Fractions below, on and inside both boundaries, and above, in every combination.
        let values = [0.1, 0.25, 0.3, 0.49999, 0.5, 0.7, 1.2];
        let mut reference = Vec::new();
        for &x in &values {
            for &y in &values {
                for &z in &[0.1, 0.3, 0.6] {
                    reference.push([x, y, z]);
                }
            }
        }
        let owner = PairOwner { reference: &reference, lower: [0.25, 0.25, 0.25], upper: [0.5, 0.5, 0.5] };
        let zones = owner.zones();
        let mut owned = 0;
        for i in 0..reference.len() {
            for j in 0..reference.len() {
                let want = owner.owns(i, j);
                assert_eq!(zones[i].pairs_with(zones[j]), want, "{:?} and {:?}", reference[i], reference[j]);
                owned += usize::from(want);
            }
        }
        assert!(owned > 0 && owned < reference.len() * reference.len());
        assert_eq!(
            owner.zone(reference.iter().position(|r| *r == [0.3, 0.3, 0.3]).expect("inside")),
            Zone::HOME
        );
    }
}
