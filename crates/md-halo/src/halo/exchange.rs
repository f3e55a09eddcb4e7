//! The exchange's state: the domain's atoms (home, then halo), the plan's pulses with their
//! exchanges, the forces where a kernel writes them, and what load balancing keeps.

use std::fmt;

use onesided::{Collectives, Exchange, GlobalMaxArray, GrowthPolicy, Path, Runtime, SymArray};

use super::schedule::Schedule;
use crate::dlb::{Balancer, Dlb, LoadReport, RowBoard};
use crate::error::{Error, Result};
use crate::grid::DdGrid;
use crate::real::Real;
use crate::zone::{PairOwner, PeriodicImage, PeriodicImages, Zone};

/// One pulse of the plan: along `dim`, send to the neighbour below, receive from the one above.
pub(super) struct Pulse<'rt, R: Real> {
    pub(super) dim: usize,
    /// The PE below (receives what this PE sends).
    pub(super) to: usize,
    /// The PE above (sends what this PE receives).
    pub(super) from: usize,
    /// Local indices of the atoms this PE sends, in order.
    pub(super) send: Vec<u32>,
    /// Added to sent positions: box vector `dim` when this PE is the first domain along
    /// `dim` (the atoms cross the periodic boundary), else zero.
    pub(super) shift: [R; 3],
    /// Whether this PE's sent atoms cross the periodic boundary (`shift` is nonzero).
    pub(super) sends_shifted: bool,
    /// Whether the atoms this PE receives were shifted (it is the last domain along `dim`).
    pub(super) receives_shifted: bool,
    /// Where the received atoms land in the local arrays.
    pub(super) offset: usize,
    /// How many atoms this PE receives.
    pub(super) count: usize,
    pub(super) x: Exchange<'rt, [R; 3]>,
    pub(super) f: Exchange<'rt, [R; 3]>,
}

/// A domain's atoms and the plan that keeps their halo up to date.
///
/// An engine builds it from its atoms ([`builder`](Self::builder), then
/// [`collective_from_global`](crate::HaloBuilder::collective_from_global) or
/// [`collective_build`](crate::HaloBuilder::collective_build)) and then, every step: moves
/// its home atoms ([`home_mut`](Self::home_mut)), calls [`move_x`](Self::move_x), which
/// returns the step's view, computes the forces of the pairs it owns into the view's forces
/// ([`Step::local`](crate::Step::local)) and calls [`Step::move_f`](crate::Step::move_f);
/// or, to compute while the halo travels, the same step in halves
/// ([`start_x`](Self::start_x), [`Step::start_f`](crate::Step::start_f)).
/// Every few steps it calls [`collective_repartition`](Self::collective_repartition) with its
/// per-atom state, which moves with the atoms.
///
/// Misuse that one PE sees (state arrays of the wrong length or of different sizes on
/// different PEs, fields of different types, non-finite positions, different grids or paths
/// at construction) is agreed by a reduction before anything moves, so it is an error on every
/// PE, never a hang, and leaves the exchange usable. A failure of the communication itself (a
/// neighbour that timed out, a message that does not match the plan) marks the exchange
/// failed: an announced receive region may still be written later, so
/// [`coordinates`](Self::coordinates) then hands out the home atoms only and every further
/// exchange call refuses; the program should end the job
/// ([`Runtime::abort`](onesided::Runtime::abort)).
pub struct HaloExchange<'rt, R: Real = f32> {
    pub(super) rt: &'rt Runtime,
    pub(super) grid: DdGrid,
    pub(super) cell: [usize; 3],
    pub(super) path: Path,
    /// Home atoms, then halo atoms: current positions (home positions are not wrapped between
    /// repartitions, so that the plan's periodic shifts stay valid).
    pub(super) coords: GlobalMaxArray<'rt, [R; 3]>,
    /// Below this many atoms, packing and unpacking run on the calling thread.
    pub(super) parallel_min: usize,
    /// Global indices of the local atoms, in the same order.
    pub(super) ids: Vec<u32>,
    /// Fractions of the local atoms' positions when the plan was built (home atoms in the
    /// unit cell, halo atoms with their image shifts), which decide what the plan sends.
    pub(super) reference: Vec<[f64; 3]>,
    /// The dimensions each local atom was received along, which decide pair ownership.
    pub(super) zones: Vec<Zone>,
    pub(super) n_home: usize,
    pub(super) n_local: usize,
    pub(super) pulses: Vec<Pulse<'rt, R>>,
    pub(super) force_scratch: GlobalMaxArray<'rt, [R; 3]>,
    /// Forces on the stored atoms, where a kernel writes them
    /// ([`Step::local`](crate::Step::local)): neighbours read the halo atoms' forces from
    /// here, and nobody but this PE writes it.
    pub(super) forces: GlobalMaxArray<'rt, [R; 3]>,
    pub(super) counts: Exchange<'rt, u64>,
    pub(super) count_buffer: SymArray<'rt, u64>,
    /// Per-atom fields along the plan, and migrating atoms.
    pub(super) bytes: Exchange<'rt, u8>,
    pub(super) byte_buffer: GlobalMaxArray<'rt, u8>,
    /// Who makes the images along dimensions of one domain.
    pub(super) images: PeriodicImages,
    /// The local atoms that are such images, in local order from `n_stored`: their pulses
    /// come last.
    pub(super) image_table: Vec<PeriodicImage<R>>,
    /// The pulses that cross between PEs come first; the rest make images.
    pub(super) exchanged_pulses: usize,
    /// What of the step's exchanges travels while the kernel computes.
    pub(super) schedule: Schedule,
    /// An exchange returned an error: a neighbour may still write the halo region, so only
    /// the home atoms are handed out and no further exchange is started.
    pub(super) failed: bool,
    /// The home atoms' positions when the plan was built, which displacements are measured
    /// from.
    pub(super) anchors: Vec<[R; 3]>,
    /// Half the Verlet buffer, the farthest an atom may move between repartitions.
    pub(super) displacement_limit: Option<f32>,
    /// The load measure, and the boundaries' moves under dynamic load balancing.
    pub(super) balancer: Balancer,
    /// Where balancing may stagger the rows: the board the PEs share their rows' loads and
    /// boundaries on.
    pub(super) board: Option<RowBoard<'rt>>,
}

/// Below this many atoms, packing and unpacking run on the calling thread: handing a few
/// microseconds of work to the thread pool costs more than it saves.
pub(super) const PARALLEL_MIN: usize = 4096;

/// Buffers grow by a fifth beyond the largest need, and keep checking every repartition.
pub(super) const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: 1.2, freeze_after: None };

impl<R: Real> fmt::Debug for HaloExchange<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HaloExchange")
            .field("cell", &self.cell)
            .field("path", &self.path)
            .field("images", &self.images)
            .field("home_count", &self.n_home)
            .field("local_count", &self.n_local)
            .field("pulse_counts", &self.pulse_counts())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<'rt, R: Real> HaloExchange<'rt, R> {
    /// The grid, with the boundaries of the last repartition under load balancing. Where
    /// balancing staggered the boundaries, it holds the rows near this PE's domain
    /// ([`DdGrid::near`]); [`collective_whole_grid`](Self::collective_whole_grid) gathers
    /// every row.
    pub fn grid(&self) -> &DdGrid {
        &self.grid
    }

    /// The grid with every row of boundaries, on every PE alike: [`grid`](Self::grid) itself
    /// where it holds every row, else gathered from the PEs (one row from each PE that starts
    /// a row, summed over all PEs). Its size and the gathering grow with the PE count, so it
    /// is for output and checks, not for every repartition.
    ///
    /// # Collective
    /// Every PE must call it.
    ///
    /// # Errors
    /// What the communication layer reports.
    pub fn collective_whole_grid(&self) -> crate::Result<DdGrid> {
        if self.grid.near().is_none() {
            return Ok(self.grid.clone());
        }
        let dims = self.grid.dims();
        // Each dimension's rows, one after another: the PE at the start of a row (index 0
        // along it and after) writes the row, every other PE zeros.
        let count = |d: usize| if dims[d] > 1 { self.grid.rows(d) } else { 0 };
        let mut all = vec![0.0f64; (1..3).map(|d| count(d) * (dims[d] + 1)).sum()];
        let mut at = 0;
        for d in 1..3 {
            if count(d) > 0 && self.cell[d..].iter().all(|&c| c == 0) {
                let r = self.grid.row(d, self.cell);
                all[at + r * (dims[d] + 1)..][..dims[d] + 1].copy_from_slice(self.grid.bounds(d, self.cell));
            }
            at += count(d) * (dims[d] + 1);
        }
        // One non-zero term per element: the sum is that term, exactly.
        onesided::Collectives::all_reduce(self.rt, onesided::ReduceOp::Sum, &mut all)?;
        let mut at = 0;
        let rows: [Vec<Vec<f64>>; 3] = std::array::from_fn(|d| {
            if d == 0 || count(d) == 0 {
                return vec![self.grid.bounds(d, self.cell).to_vec()];
            }
            let width = dims[d] + 1;
            let rows = all[at..at + count(d) * width].chunks_exact(width).map(<[f64]>::to_vec).collect();
            at += count(d) * width;
            rows
        });
        self.grid.with_rows(rows)
    }

    /// The load balancing the exchange was built with
    /// ([`HaloBuilder::load_balancing`](crate::HaloBuilder::load_balancing)).
    pub fn load_balancing(&self) -> Dlb {
        self.balancer.mode()
    }

    /// The load balance of the run so far, in GROMACS's terms, the same on every PE: the
    /// steps since the last repartition are gathered first (they move no boundary).
    ///
    /// # Collective
    /// Every PE must call it, at the same point of the run.
    ///
    /// # Errors
    /// What the communication layer reports.
    pub fn collective_load_report(&mut self) -> crate::Result<LoadReport> {
        self.usable()?;
        let outcome = self.balancer.collective_interval(self.rt, &self.grid, self.cell, false, None);
        self.note(outcome)?;
        Ok(self.balancer.report())
    }

    /// Starts the load report afresh, as GROMACS's `-resethway` does its counters: call it
    /// right after [`collective_load_report`](Self::collective_load_report), at the same step
    /// on every PE, and the next report covers the steps from here on. The boundaries, and
    /// whether they move, stay.
    pub fn reset_load_report(&mut self) {
        self.balancer.reset_report();
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

    /// The number of local atoms: home and halo, with the periodic images along dimensions
    /// of one domain (stored or not: [`PeriodicImages`]). [`global_indices`](Self::global_indices),
    /// [`reference_fractions`](Self::reference_fractions) and [`collective_spread`](Self::collective_spread)
    /// cover them all.
    pub fn local_count(&self) -> usize {
        self.n_local
    }

    /// The number of local atoms whose coordinates the exchange holds
    /// ([`coordinates`](Self::coordinates)) and whose forces [`Step::move_f`](crate::Step::move_f) takes:
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

    /// The images the force kernel makes under [`PeriodicImages::Kernel`]: local atom
    /// `stored_count() + k` is `images()[k]`. Empty under [`PeriodicImages::Halo`] (the images
    /// are then stored atoms), and after an exchange failed (when
    /// [`coordinates`](Self::coordinates) holds the home atoms only).
    pub fn images(&self) -> &[PeriodicImage<R>] {
        match self.images {
            PeriodicImages::Kernel if !self.failed => &self.image_table,
            _ => &[],
        }
    }

    /// The positions of all local atoms: [`coordinates`](Self::coordinates) followed by the
    /// images the kernel makes ([`images`](Self::images)), each its atom's position plus its
    /// shift. What `coordinates` holds under [`PeriodicImages::Halo`], for a kernel that
    /// wants plain coordinates (a reference computation, say).
    pub fn positions_with_images(&self) -> Vec<[R; 3]> {
        let stored = self.coordinates();
        let mut all = stored.to_vec();
        // Empty after a failure, when `stored` holds the home atoms only.
        all.extend(self.images().iter().map(|image| image.position(stored[image.atom as usize])));
        all
    }

    /// Per pulse, in the order the exchange runs them: how many atoms this PE sends and how
    /// many it receives (what [`crate::model::halo_traffic`] computes without a runtime).
    pub fn pulse_counts(&self) -> Vec<(usize, usize)> {
        self.pulses.iter().map(|p| (p.send.len(), p.count)).collect()
    }

    /// Current positions of the stored local atoms ([`stored_count`](Self::stored_count) of
    /// them: all local atoms, or all but the images under [`PeriodicImages::Kernel`]), home
    /// first, then halo in plan order (each halo atom as the image, shifted by box vectors,
    /// that lies next to this domain). Local atom `i` here is local atom `i` of
    /// [`global_indices`](Self::global_indices) and
    /// [`reference_fractions`](Self::reference_fractions), which go on over the images the
    /// kernel makes. Valid until the next call that takes `&mut self`.
    ///
    /// After an exchange returned an error, or with a view of the split step leaked, only the
    /// home atoms: a neighbour may still be writing the halo region.
    pub fn coordinates(&self) -> &[[R; 3]] {
        let len = if self.failed || self.in_flight() { self.n_home } else { self.stored_count() };
        // SAFETY: other PEs write this array only in the receive regions this PE announces
        // (behind the home atoms), inside exchanges this PE takes part in: move_x, the plan
        // build and repartition, which take &mut self, so `&self` excludes them while the
        // slice lives. When one of them failed, an announced region may still be written
        // later; then the slice covers the home atoms only.
        unsafe { self.coords.array().local_range(0..len) }
    }

    /// Whether a call of the step's exchanges is in flight outside a view of the split step
    /// (whose `&mut` excludes every other use): a view was leaked.
    pub(super) fn in_flight(&self) -> bool {
        self.pulses.iter().any(|p| p.x.in_flight() || p.f.in_flight())
    }

    /// Global indices of the local atoms, in the order of [`coordinates`](Self::coordinates).
    pub fn global_indices(&self) -> &[u32] {
        &self.ids
    }

    /// Per-home-atom values (`values[i]` of home atom `i`: a position, a velocity, a force)
    /// in global order on PE `root`, for trajectories, checkpoints and checks: `Some` of
    /// one value per atom of the system on `root`, `None` elsewhere. Only `root` holds the
    /// whole system ([`Collectives::gather_by_index`](onesided::Collectives::gather_by_index)).
    ///
    /// # Collective
    /// Every PE must call it, with the same `root`.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveConfig`] when a PE's `values` is not one per
    /// home atom; [`Error::Comm`] when the gather fails.
    pub fn collective_gather_home<T: bytemuck::Pod>(
        &self,
        root: usize,
        values: &[T],
    ) -> Result<Option<Vec<T>>> {
        let wrong = values.len() != self.n_home;
        let total = self.rt.all_sum(self.n_home as u64) as usize;
        let worst = self.rt.max_u64_one(if wrong { self.rt.my_pe() as u64 + 1 } else { 0 })?;
        if worst > 0 {
            return Err(Error::CollectiveConfig(format!(
                "collective_gather_home needs one value per home atom on every PE; PE {} gave another \
                 count (pass one value for each of halo.home_count() home atoms)",
                worst - 1
            )));
        }
        Ok(self.rt.gather_by_index(root, total, &self.ids[..self.n_home], values)?)
    }

    /// Which pairs of local atoms this domain computes, as a small value that threads of a
    /// force kernel can share ([`PairOwner::owns`], or per atom [`PairOwner::zone`]).
    pub fn pair_owner(&self) -> PairOwner<'_> {
        PairOwner { zones: &self.zones }
    }

    /// Fractions of the local atoms' positions when the plan was built, with halo atoms'
    /// image shifts (a halo atom shifted by box vector `d` has fraction `d` at least 1):
    /// what the plan's send rule compares.
    pub fn reference_fractions(&self) -> &[[f64; 3]] {
        &self.reference
    }
}
