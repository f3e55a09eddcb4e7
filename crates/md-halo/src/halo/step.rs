//! The views of one step of the halo exchange: [`HaloExchange::move_x`] (or the split
//! step's finish, `overlap.rs`) sends the coordinates along the plan and hands out a
//! [`Step`], the view a force kernel works from ([`Local`]: coordinates, forces, pair
//! ownership, periodic images), and [`Step::move_f`] sends the forces on halo atoms back in
//! reverse, where their owners add them up. Afterwards [`HaloExchange::home_mut`] gives the
//! home atoms' positions to move and their total forces ([`Home`]). The force exchange's
//! arithmetic (the scatter-add of returned forces, the shift forces) lives here.
//!
//! The forces leave from where the kernel wrote them, in the exchange's own symmetric array,
//! with no staging copy into a buffer the neighbour read the step before: in launches where
//! overwriting memory another PE has just read was slow (docs/bench/README.md), a staged
//! return took 0.69-1.06x MPI's time and the offered one 0.15-0.48x. The region a pulse offers
//! must then stay unwritten until the neighbour has taken it: `move_x` returns only once every
//! neighbour has taken the last step's forces (`wait_taken`), and in the reverse loop of
//! `move_f` each region is offered after the later pulses' adds into it are done.

use std::fmt;

use onesided::Transport;
use rayon::prelude::*;

use super::exchange::HaloExchange;
use crate::error::{Error, Result};
use crate::real::Real;
use crate::zone::{PairOwner, PeriodicImage, PeriodicImages, ShiftForces};

/// The view of one step between [`HaloExchange::move_x`] and [`move_f`](Self::move_f): the
/// local atoms' coordinates, this domain's forces on them, which pairs it owns and the
/// periodic images a kernel makes itself ([`local`](Self::local)); the [`HaloExchange`] for
/// everything else the plan knows (global indices, the grid, counts) is [`halo`](Self::halo).
///
/// A step dropped without `move_f` sends no forces; every PE must then skip `move_f` alike
/// (a benchmark of `move_x` alone does).
#[must_use = "the forces go back only with move_f"]
pub struct Step<'h, 'rt, R: Real = f32> {
    pub(super) halo: &'h mut HaloExchange<'rt, R>,
}

/// What a force kernel reads and writes in one step, for the stored local atoms
/// ([`HaloExchange::stored_count`]: home atoms, then halo atoms in plan order, then under
/// [`PeriodicImages::Halo`] the periodic images).
pub struct Local<'a, R: Real = f32> {
    /// Current positions of the stored local atoms.
    pub coordinates: &'a [[R; 3]],
    /// The forces on them, in the exchange's own symmetric memory, which
    /// [`Step::move_f`] sends from without a copy. What they hold before the kernel writes
    /// them is left from the last step (or zero): a kernel that accumulates clears them first.
    /// In the split step the home part holds what the kernel wrote into the home view
    /// ([`XInFlight::home`](crate::XInFlight::home)) while the coordinates travelled.
    pub forces: &'a mut [[R; 3]],
    /// Which pairs of local atoms this domain computes.
    pub owner: PairOwner<'a>,
    /// The images the kernel makes under [`PeriodicImages::Kernel`] (local atom
    /// `coordinates.len() + k` is `images[k]`); empty under [`PeriodicImages::Halo`].
    pub images: &'a [PeriodicImage<R>],
}

/// The home atoms between steps: their positions, to move, and the total forces on them that
/// the last [`Step::move_f`] left.
///
/// # Where other forces meet the halo's
/// [`forces`](Self::forces) is the engine's place for every other force on its home atoms:
/// after `move_f` it holds the short-range totals, and the engine adds to it what else acts
/// on each home atom (PME's reciprocal forces, which the redistribution hands back in home
/// order, bonded or external forces) before it integrates. These totals are the ones
/// [`collective_repartition`](HaloExchange::collective_repartition) moves with the atoms, so
/// an integrator's next half-kick finds them wherever the atom went. The home region is
/// never offered to a neighbour, so it may be written while neighbours still read the halo
/// regions of the last `move_f`.
///
/// A step with PME on every PE:
///
/// 1. write the new positions into [`coordinates`](Self::coordinates) (the first half of the
///    step's update);
/// 2. `move_x`, the kernel on [`Step::local`], `move_f`: the short-range forces, summed;
/// 3. the PME step over the same home positions (pme-redist's `Redistribution::redistribute`,
///    `Pme::collective_step`, `Step::return_forces` into a buffer in home order) and the
///    buffer added to [`forces`](Self::forces);
/// 4. integrate from `forces`.
///
/// With separate PME PEs the particle PEs do 1, 2 and 3's redistribution and return, the PME
/// PEs the mesh step between them (with no home atoms of their own); the order of 2 and 3
/// is free on particle PEs, since neither reads what the other writes until step 4.
pub struct Home<'a, R: Real = f32> {
    /// Positions of the home atoms, to write before [`HaloExchange::move_x`]. They need not
    /// stay in the box between repartitions (the plan's periodic shifts assume they do not
    /// jump by box vectors).
    pub coordinates: &'a mut [[R; 3]],
    /// The total force on each home atom after the last `move_f` (before the first, zero or
    /// what a kernel wrote), to which the engine adds its other forces.
    pub forces: &'a mut [[R; 3]],
    /// The home atoms (increasing indices) in some neighbour's halo, whose forces the force
    /// exchange's finish completes ([`HaloExchange::returning`]): an engine that moved the
    /// others while the forces travelled ([`FInFlight::home`](crate::FInFlight::home)) moves
    /// these now.
    pub returning: &'a [u32],
}

impl<R: Real> fmt::Debug for Step<'_, '_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step").field("halo", &*self.halo).finish()
    }
}

impl<R: Real> fmt::Debug for Local<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local")
            .field("stored", &self.coordinates.len())
            .field("images", &self.images.len())
            .finish_non_exhaustive()
    }
}

impl<R: Real> fmt::Debug for Home<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Home").field("atoms", &self.coordinates.len()).finish_non_exhaustive()
    }
}

impl<'rt, R: Real> Step<'_, 'rt, R> {
    /// The halo exchange the step belongs to: what it says of the partition (counts, global
    /// indices, the grid, pair ownership) while the step holds it.
    pub fn halo(&self) -> &HaloExchange<'rt, R> {
        self.halo
    }

    /// This PE's load in this step as the engine measured it (its update and force
    /// computation, say), for the load balance ([`crate::Dlb`]), in place of the time from
    /// the last [`move_f`](Self::move_f) (or repartition) to [`move_x`](HaloExchange::move_x)
    /// and from `move_x` to this `move_f`: for an engine that does other work or waits in
    /// between (a barrier, a global reduction, a check) that the boundaries should not follow.
    pub fn record_load(&mut self, load: std::time::Duration) {
        self.halo.balancer.record(load);
    }

    /// The coordinates and forces of the stored local atoms, pair ownership and the periodic
    /// images, for a force kernel.
    pub fn local(&mut self) -> Local<'_, R> {
        let halo = &mut *self.halo;
        let stored = halo.stored_count();
        // SAFETY: other PEs never write the force array; they read it only between this PE's
        // offer in move_f and their taken signal, which move_x awaited for every pulse before
        // this step was made. The step's `&mut` keeps move_f, and any other view, away while
        // the slice lives.
        let forces = unsafe { halo.forces.array().local_range_mut(0..stored) };
        // SAFETY: other PEs write the coordinates only in the regions this PE announces,
        // inside exchanges that take `&mut` of the halo, which none does while the slice
        // lives; the step exists only after a move_x that succeeded.
        let coordinates = unsafe { halo.coords.array().local_range(0..stored) };
        let owner = PairOwner { zones: &halo.zones };
        Local { coordinates, forces, owner, images: halo.images() }
    }
}

impl<R: Real> Local<'_, R> {
    /// Writes the forces of a kernel that computed every local atom, the periodic images it
    /// makes included (`all`, one force per position of
    /// [`HaloExchange::positions_with_images`]), into [`forces`](Self::forces): each image's
    /// force is added to its atom's. Returns the forces the images carried across the
    /// periodic boundaries, for the virial. Under [`PeriodicImages::Halo`] it copies `all`.
    ///
    /// # Errors
    /// [`Error::Config`] when `all` is not one force per local atom.
    pub fn fold_forces(&mut self, all: &[[R; 3]]) -> Result<ShiftForces> {
        let stored = self.forces.len();
        if all.len() != stored + self.images.len() {
            return Err(Error::Config(format!(
                "fold_forces needs one force per local atom ({}), got {}",
                stored + self.images.len(),
                all.len()
            )));
        }
        self.forces.copy_from_slice(&all[..stored]);
        let mut shift_forces = ShiftForces::default();
        for (k, image) in self.images.iter().enumerate().rev() {
            let f = all[stored + k];
            shift_forces.add_image(image, f.map(R::to_f64));
            let target = &mut self.forces[image.atom as usize];
            for c in 0..3 {
                target[c] += f[c];
            }
        }
        Ok(shift_forces)
    }
}

impl<'rt, R: Real> HaloExchange<'rt, R> {
    /// The home atoms' positions, to move, and the total forces on them after the last
    /// [`Step::move_f`].
    pub fn home_mut(&mut self) -> Home<'_, R> {
        let n_home = self.n_home;
        // SAFETY: other PEs write the coordinates only in the receive regions this PE
        // announces, which lie behind the home atoms, and only inside exchanges this PE takes
        // part in; `&mut self` excludes those while the slice lives, and nothing else refers
        // to the home region.
        let coordinates = unsafe { self.coords.array().local_range_mut(0..n_home) };
        // SAFETY: other PEs never write the force array, and read only the halo regions this
        // PE offers in move_f, which lie behind the home atoms (so they may still be reading
        // them while this slice is written); `&mut self` keeps this PE's own writers (a step)
        // and readers (move_f, a repartition) away while the slice lives.
        let forces = unsafe { self.forces.array().local_range_mut(0..n_home) };
        Home { coordinates, forces, returning: &self.schedule.returning }
    }

    /// How many pulses move_x and move_f run: all, or under [`PeriodicImages::Kernel`] those
    /// that cross between PEs.
    pub(super) fn pulses_run(&self) -> usize {
        match self.images {
            PeriodicImages::Halo => self.pulses.len(),
            PeriodicImages::Kernel => self.exchanged_pulses,
        }
    }

    /// Fails when an earlier exchange failed.
    pub(super) fn usable(&self) -> Result<()> {
        if self.in_flight() {
            return Err(Error::Config(
                "a step's exchange is still in flight: a view of the split step (XInFlight, FInFlight) \
                 was leaked instead of finished or dropped; finish each view"
                    .to_string(),
            ));
        }
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
    pub(super) fn note<T>(&mut self, outcome: Result<T>) -> Result<T> {
        self.failed |= matches!(outcome, Err(Error::Comm(_) | Error::PlanMismatch(_)));
        outcome
    }

    /// Waits until every neighbour has taken the halo forces this PE last offered in
    /// [`Step::move_f`] (at once when it offered none).
    pub(super) fn forces_taken(&mut self) -> Result<()> {
        for pulse in &mut self.pulses {
            pulse.f.wait_taken()?;
        }
        Ok(())
    }
}

/// The path of the force exchanges: the pull where the halo is one-sided, so that the forces
/// coming back are added up where they lie in the neighbour's memory
/// ([`onesided::Call::consume`]) instead of being copied into this PE's first.
pub(super) fn force_transport(transport: Transport) -> Transport {
    if transport == Transport::Put { Transport::Get } else { transport }
}

/// A raw pointer that threads of a scoped parallel loop write through at distinct indices.
#[derive(Clone, Copy)]
struct Scatter<R>(*mut [R; 3]);
impl<R> Scatter<R> {
    /// The address of element `i` (a method, so that closures capture the whole wrapper).
    fn at(self, i: usize) -> *mut [R; 3] {
        self.0.wrapping_add(i)
    }
}

// SAFETY: used only by `scatter_add`, which checks that its targets are distinct, so no two
// threads touch the same element.
unsafe impl<R> Send for Scatter<R> {}
// SAFETY: as above.
unsafe impl<R> Sync for Scatter<R> {}

/// Double-precision sums of forces in four lanes, force `i` in lane `i % 4`, combined at the
/// end: one running sum would wait on the latency of each addition before the next, which
/// made the sum as slow as the scatter-add it goes with. The order is fixed, so the result
/// does not depend on how the forces are scattered.
#[derive(Default)]
struct LaneSum([[f64; 3]; 4]);

impl LaneSum {
    #[inline(always)]
    fn add<R: Real>(&mut self, lane: usize, f: &[R; 3]) {
        for (sum, &component) in self.0[lane].iter_mut().zip(f) {
            *sum += component.to_f64();
        }
    }

    /// Adds every force in `forces`, the first in lane 0.
    fn add_all<R: Real>(&mut self, forces: &[[R; 3]]) {
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
pub(super) fn scatter_add<R: Real>(
    forces: &mut [[R; 3]],
    targets: &[u32],
    values: &[[R; 3]],
    along: Option<&mut [f64; 3]>,
    parallel_min: usize,
) {
    assert_eq!(targets.len(), values.len(), "one returned force per sent atom");
    let add = |forces: &mut [[R; 3]], t: u32, v: &[R; 3]| {
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
    use crate::pbc::RVec;

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
}
