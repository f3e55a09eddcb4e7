//! The step's exchanges in two halves, so that the halo travels while the kernel computes.
//!
//! [`HaloExchange::start_x`] sends the coordinates of the pulses that need no halo atom (the
//! plan's [`Schedule`](super::schedule)) and returns an [`XInFlight`], whose
//! [`home`](XInFlight::home) view holds the home atoms, all of whose pairs this domain owns:
//! the kernel computes them while the halo travels. [`XInFlight::finish`] receives those
//! pulses, runs the rest and gives today's [`Step`]. [`Step::start_f`] sends back the halo
//! forces no later pulse adds to and returns an [`FInFlight`], whose
//! [`home`](FInFlight::home) view names the home atoms whose forces are final
//! ([`Settled::atoms`]: those in no neighbour's halo), to integrate while the rest arrive;
//! [`FInFlight::finish`] adds the returned forces, pulse by pulse in reverse as the blocking
//! exchange does, and gives the shift forces. `move_x` and `move_f` are the two halves back
//! to back, so the split step gives the blocking step's bits whenever the kernel sums in the
//! same order.
//!
//! What travels meanwhile depends on the path: the one-sided start leaves the coordinates in
//! the neighbour's memory (puts with a signal) and offers the forces where the kernel wrote
//! them (the neighbour pulls them), with no work of the neighbour's; the MPI start posts
//! `MPI_Irecv` and `MPI_Isend`, which travel while the kernel computes as far as MPI
//! progresses them on its own. Across nodes (UCX over TCP, Open MPI's TCP transport) both
//! move a message only while its PEs call into the library: a kernel calls
//! [`Runtime::progress`](onesided::Runtime::progress) between chunks of its pairs. Where the
//! transfer is work of the same cores (copies on a node, a software TCP stack) the overlap
//! hides the waiting, not that work (docs/bench/README.md, the step with the halo in flight).
//!
//! A view dropped without its finish finishes on drop (the forces added, the shift forces
//! lost), so no call stays in flight; an exchange whose view was leaked refuses every
//! further exchange and hands out the home coordinates only.

use std::fmt;

use onesided::{Incoming, Offer, Outgoing};

use super::agree::check_count;
use super::exchange::HaloExchange;
use super::step::{Local, Step, scatter_add};
use crate::error::Result;
use crate::real::Real;
use crate::zone::{PairOwner, ShiftForces};

/// The coordinate exchange of a step in flight, from [`HaloExchange::start_x`] to
/// [`finish`](Self::finish): the kernel computes the home atoms' pairs
/// ([`home`](Self::home)) meanwhile.
#[must_use = "finish gives the step; a view dropped unfinished finishes the exchange there"]
pub struct XInFlight<'h, 'rt, R: Real = f32> {
    halo: Option<&'h mut HaloExchange<'rt, R>>,
}

/// The force exchange of a step in flight, from [`Step::start_f`] to
/// [`finish`](Self::finish): the engine integrates the home atoms whose forces are final
/// ([`home`](Self::home)) meanwhile.
#[must_use = "finish adds the returned forces; a view dropped unfinished adds them there"]
pub struct FInFlight<'h, 'rt, R: Real = f32> {
    halo: Option<&'h mut HaloExchange<'rt, R>>,
}

/// The home atoms while their halo forces travel ([`FInFlight::home`]): their positions and
/// forces, and which of them have their total force already.
pub struct Settled<'a, R: Real = f32> {
    /// Positions of the home atoms, to move (the halo's copies left with the coordinates).
    pub coordinates: &'a mut [[R; 3]],
    /// Forces on the home atoms: final for [`atoms`](Self::atoms), still to be added to for
    /// the others ([`HaloExchange::returning`]), which [`FInFlight::finish`] completes.
    pub forces: &'a mut [[R; 3]],
    /// The home atoms (increasing indices) in no neighbour's halo, whose forces are final.
    pub atoms: &'a [u32],
}

impl<R: Real> fmt::Debug for XInFlight<'_, '_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XInFlight").field("halo", &self.halo).finish()
    }
}

impl<R: Real> fmt::Debug for FInFlight<'_, '_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FInFlight").field("halo", &self.halo).finish()
    }
}

impl<R: Real> fmt::Debug for Settled<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settled")
            .field("home", &self.coordinates.len())
            .field("settled", &self.atoms.len())
            .finish_non_exhaustive()
    }
}

impl<'rt, R: Real> HaloExchange<'rt, R> {
    /// Starts the step's coordinate exchange: sends the coordinates of every pulse that
    /// needs no halo atom (on a grid split along one dimension, all of them) and returns at
    /// once with the view of the home atoms, for the kernel to compute their pairs while the
    /// halo travels. [`XInFlight::finish`] completes it and gives the step. The neighbours
    /// along each pulse must start too (every PE does, once per step, as with
    /// [`move_x`](Self::move_x), which is this and the finish back to back).
    ///
    /// # Errors
    /// As [`move_x`](Self::move_x).
    pub fn start_x(&mut self) -> Result<XInFlight<'_, 'rt, R>> {
        self.usable()?;
        self.balancer.x_starts();
        let outcome = (0..self.schedule.x_early).try_for_each(|q| self.move_x_pulse(q, true));
        self.note(outcome)?;
        self.balancer.resumes();
        Ok(XInFlight { halo: Some(self) })
    }

    /// Sends the coordinates of this PE's halo atoms to the domains that need them and
    /// receives its own halo, in place, with periodic shifts applied, and returns the step's
    /// view for the force kernel. The neighbours along each pulse must call it too (every PE
    /// does, once per step). Each pulse between PEs is one packed message, packed straight
    /// into the neighbour's coordinate array where the path allows it (one-sided, on the
    /// node). It returns once every neighbour has taken the forces of the last
    /// [`Step::move_f`], so that the kernel may write the view's forces. It is
    /// [`start_x`](Self::start_x) and its finish back to back.
    ///
    /// # Errors
    /// What the exchanges report (a neighbour that does not take part times out, naming it);
    /// after any error, this and every further exchange call fails (end the job with
    /// [`onesided::Runtime::abort`]).
    pub fn move_x(&mut self) -> Result<Step<'_, 'rt, R>> {
        self.start_x()?.finish()
    }

    /// The home atoms (increasing indices) in some neighbour's halo: their forces are final
    /// only after [`FInFlight::finish`] (the others are [`Settled::atoms`]). The same until
    /// the next repartition.
    pub fn returning(&self) -> &[u32] {
        &self.schedule.returning
    }

    /// Receives the started pulses' coordinates and runs the other pulses, then waits until
    /// the neighbours have taken the last step's forces.
    fn finish_x_pulses(&mut self) -> Result<()> {
        for q in 0..self.pulses_run() {
            if q < self.schedule.x_early {
                let pulse = &mut self.pulses[q];
                let received = pulse.x.finish(&[self.coords.array()])?[0];
                check_count(received, pulse.count, pulse.from, "coordinates")?;
            } else {
                self.move_x_pulse(q, false)?;
            }
        }
        // The neighbours' reads of the last step's forces end before the kernel writes them.
        self.forces_taken()
    }

    /// Offers the halo forces of the pulses no later pulse adds to, and starts their calls.
    fn start_f_pulses(&mut self) -> Result<()> {
        for q in (0..self.pulses_run()).rev() {
            if !self.schedule.f_early[q] {
                continue;
            }
            let pulse = &mut self.pulses[q];
            let at = self.schedule.scratch_at[q];
            // SAFETY: nobody writes this region until the neighbour has taken it: other PEs
            // never write the force array; this PE writes it only through a step's view
            // (gone: the step was consumed) and the finish, which adds only at the atoms
            // later pulses send, none of which lies here (no later pulse sends this pulse's
            // atoms on: the schedule started it for that), and the next step's view comes
            // after move_x awaited the taken signal.
            let offer = unsafe { Offer::new(pulse.from, 1, pulse.offset..pulse.offset + pulse.count) };
            let buffers = [self.force_scratch.array(), self.forces.array()];
            let outgoing = [Outgoing::Offered(offer)];
            let incoming = [Incoming { from: pulse.to, buffer: 0, offset: at, room: pulse.send.len() }];
            let call = pulse.f.call(&buffers).send(&outgoing).receive(&incoming);
            // SAFETY: both arrays are fields of the exchange, which finishes or abandons every
            // call in flight before it frees them (its Drop); the receive region is this
            // pulse's own in the scratch, which nothing else reads or writes until the
            // finish; the offered region stays unwritten (above); the message is an offer,
            // no data of the caller's.
            unsafe { call.start()? };
        }
        Ok(())
    }

    /// The force pulses in reverse: the started ones finished, adding what comes back, the
    /// others run whole; the shift forces of the step.
    fn finish_f_pulses(&mut self) -> Result<ShiftForces> {
        let me = self.rt.my_pe();
        let parallel_min = self.parallel_min;
        let mut shift_forces = ShiftForces::default();
        for q in (0..self.pulses_run()).rev() {
            let pulse = &mut self.pulses[q];
            let (offset, count) = (pulse.offset, pulse.count);
            if pulse.to == me {
                // The periodic image along a dimension with one domain: the forces on the
                // images are added to their atoms here, with no message. Every sent atom lies
                // before this pulse's region (send lists are built from earlier atoms).
                // SAFETY: other PEs never write this array, and read only the regions this PE
                // offered and they have not yet taken: of the pulses started early (none
                // forwarded by this one, so none is written here) and of the later pulses
                // (the earlier calls' were awaited in move_x), which lie beyond this range.
                // `&mut self` keeps every other view of the array away.
                let forces = unsafe { self.forces.array().local_range_mut(0..offset + count) };
                let (atoms, images) = forces.split_at_mut(offset);
                let along = Some(&mut shift_forces.along[pulse.dim]);
                scatter_add(atoms, &pulse.send, images, along, parallel_min);
                continue;
            }
            // The forces on this pulse's halo atoms go back to their owner, read where they
            // lie on the one-sided path; the forces on the atoms this PE sent come back and
            // are added where they lie (in the neighbour's memory on the one-sided path).
            // SAFETY: as above; the atoms sent lie before this pulse's region, which is the
            // one offered, and none lies in a region started early and still offered.
            let atoms = unsafe { self.forces.array().local_range_mut(0..offset) };
            let send = &pulse.send;
            let mut along = pulse.sends_shifted.then_some(&mut shift_forces.along[pulse.dim]);
            let consume = |_: usize, returned: &[[R; 3]]| {
                if returned.len() == send.len() {
                    scatter_add(atoms, send, returned, along.as_deref_mut(), parallel_min);
                }
            };
            let buffers = [self.force_scratch.array(), self.forces.array()];
            let received = if self.schedule.f_early[q] {
                pulse.f.finish_consuming(&buffers, consume)?[0]
            } else {
                let at = self.schedule.scratch_at[q];
                // SAFETY: nobody writes this region until the neighbour has taken it: other
                // PEs never write this array, and this PE writes it only through a step's view
                // and this function, after move_x has awaited every pulse's taken signal (the
                // later pulses of this call write below this region).
                let offer = unsafe { Offer::new(pulse.from, 1, offset..offset + count) };
                pulse
                    .f
                    .call(&buffers)
                    .send(&[Outgoing::Offered(offer)])
                    .receive(&[Incoming { from: pulse.to, buffer: 0, offset: at, room: send.len() }])
                    .consume(consume)
                    .run()?[0]
            };
            check_count(received, pulse.send.len(), pulse.to, "forces")?;
        }
        Ok(shift_forces)
    }
}

impl<'h, 'rt, R: Real> XInFlight<'h, 'rt, R> {
    fn exchange(&mut self) -> &mut HaloExchange<'rt, R> {
        self.halo.as_deref_mut().expect("a view in flight holds its exchange until its finish")
    }

    /// The halo exchange the step belongs to, for what it says of the partition.
    pub fn halo(&self) -> &HaloExchange<'rt, R> {
        self.halo.as_deref().expect("a view in flight holds its exchange until its finish")
    }

    /// The home atoms, for the kernel's home pairs while the halo travels: their
    /// coordinates, their forces (in the exchange's force array, as [`Step::local`] gives
    /// them later, so what the kernel writes here is there for the halo pairs to add to),
    /// and pair ownership; every pair of home atoms is this domain's, and no periodic image
    /// is made here. What the forces hold before the kernel writes them is left from the
    /// last step.
    pub fn home(&mut self) -> Local<'_, R> {
        let halo = self.exchange();
        let n_home = halo.n_home;
        // SAFETY: other PEs write the coordinates only in the receive regions, behind the
        // home atoms; the view's `&mut` keeps this PE's own writers away while it lives.
        let coordinates = unsafe { halo.coords.array().local_range(0..n_home) };
        // SAFETY: other PEs never write the force array and read only the halo regions
        // offered, behind the home atoms; the view's `&mut` keeps every other view away.
        let forces = unsafe { halo.forces.array().local_range_mut(0..n_home) };
        Local { coordinates, forces, owner: PairOwner { zones: &halo.zones[..n_home] }, images: &[] }
    }

    /// Receives the halo: completes the started pulses, runs the others, and waits until the
    /// neighbours have taken the last step's forces; then the step's view, as
    /// [`HaloExchange::move_x`] gives it.
    ///
    /// # Errors
    /// As [`HaloExchange::move_x`].
    pub fn finish(mut self) -> Result<Step<'h, 'rt, R>> {
        let halo = self.halo.take().expect("a view in flight holds its exchange until its finish");
        halo.balancer.pauses();
        let outcome = halo.finish_x_pulses();
        halo.note(outcome)?;
        halo.balancer.x_done();
        Ok(Step { halo })
    }
}

impl<R: Real> Drop for XInFlight<'_, '_, R> {
    fn drop(&mut self) {
        if let Some(halo) = self.halo.take() {
            let outcome = halo.finish_x_pulses();
            // A failure is remembered; every further exchange call reports it.
            let _ = halo.note(outcome);
        }
    }
}

impl<'h, 'rt, R: Real> Step<'h, 'rt, R> {
    /// Starts sending the forces on this PE's halo atoms back: offers those of every pulse
    /// no later pulse adds to (on a grid split along one dimension, all of them) and returns
    /// at once with the view of the home atoms, whose forces are final for those in no
    /// neighbour's halo ([`Settled::atoms`]): the engine integrates them while the rest
    /// arrive. [`FInFlight::finish`] adds the returned forces. The neighbours must start too.
    ///
    /// # Errors
    /// As [`HaloExchange::move_x`].
    pub fn start_f(self) -> Result<FInFlight<'h, 'rt, R>> {
        let halo = self.halo;
        halo.balancer.f_starts();
        let outcome = halo.start_f_pulses();
        halo.note(outcome)?;
        halo.balancer.reopen();
        Ok(FInFlight { halo: Some(halo) })
    }

    /// Sends the forces on this PE's halo atoms back to their home domains, pulse by pulse in
    /// reverse, and adds the forces it receives to the atoms it had sent: afterwards the home
    /// part of the forces ([`HaloExchange::home_mut`]) holds the total force on each home atom.
    /// Returns the forces that crossed the periodic boundaries, which the virial needs. The
    /// neighbours must call it too. On the one-sided path the halo atoms' forces are not
    /// copied before they leave: each neighbour reads them where the kernel wrote them and
    /// adds them to its atoms. Under [`PeriodicImages::Kernel`](crate::PeriodicImages::Kernel)
    /// the kernel has added the images' forces to their atoms, and the shift forces returned
    /// are those of the exchanged pulses alone. It is [`start_f`](Self::start_f) and its
    /// finish back to back.
    ///
    /// # Errors
    /// As [`HaloExchange::move_x`].
    pub fn move_f(self) -> Result<ShiftForces> {
        self.start_f()?.finish()
    }
}

impl<'rt, R: Real> FInFlight<'_, 'rt, R> {
    /// The halo exchange the step belongs to.
    pub fn halo(&self) -> &HaloExchange<'rt, R> {
        self.halo.as_deref().expect("a view in flight holds its exchange until its finish")
    }

    /// The home atoms while the halo forces travel: positions to move, forces (final for
    /// [`Settled::atoms`]), and which atoms those are.
    pub fn home(&mut self) -> Settled<'_, R> {
        let halo = self.halo.as_deref_mut().expect("a view in flight holds its exchange until its finish");
        let n_home = halo.n_home;
        // SAFETY: other PEs write the coordinates only in the receive regions, behind the
        // home atoms, and only inside exchanges of move_x and repartitions, which need the
        // exchange this view holds.
        let coordinates = unsafe { halo.coords.array().local_range_mut(0..n_home) };
        // SAFETY: other PEs never write the force array and read only the halo regions
        // offered, behind the home atoms; the finish, which adds into home atoms, needs the
        // view gone.
        let forces = unsafe { halo.forces.array().local_range_mut(0..n_home) };
        Settled { coordinates, forces, atoms: &halo.schedule.settled }
    }

    /// Adds the returned forces (each pulse's when it arrives, in the blocking order),
    /// sends those of the pulses that waited for them, and returns the shift forces, as
    /// [`Step::move_f`] does.
    ///
    /// # Errors
    /// As [`HaloExchange::move_x`].
    pub fn finish(mut self) -> Result<ShiftForces> {
        let halo = self.halo.take().expect("a view in flight holds its exchange until its finish");
        halo.balancer.pauses();
        let outcome = halo.finish_f_pulses();
        halo.balancer.resumes();
        halo.note(outcome)
    }
}

impl<R: Real> Drop for FInFlight<'_, '_, R> {
    fn drop(&mut self) {
        if let Some(halo) = self.halo.take() {
            let outcome = halo.finish_f_pulses();
            let _ = halo.note(outcome);
        }
    }
}

impl<R: Real> Drop for HaloExchange<'_, R> {
    fn drop(&mut self) {
        // The exchanges first: each cancels what a leaked view left in flight before the
        // arrays it reads and writes are freed.
        drop(std::mem::take(&mut self.pulses));
    }
}
