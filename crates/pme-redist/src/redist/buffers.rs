//! The buffers a redistribution's transports move data between, each symmetric where other
//! PEs read or write it and local otherwise (`store.rs`), and how they grow.

use std::rc::Rc;

use onesided::{GrowthPolicy, Runtime};

use super::path::Wire;
use super::store::{Bank, Role, Store};
use crate::error::Result;
use crate::particle::{Particle, RVec};

/// How the buffers sized by the home atoms grow: to the most any PE holds, plus a fifth.
pub const GROWTH_FACTOR: f64 = 1.2;
pub(crate) const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: GROWTH_FACTOR, freeze_after: None };

/// The forces a PME rank returns: one per received atom, in the caller's array, or already in
/// the force staging buffer (`data` is then a view of it): `in_place` where the sources are
/// to read them there (a step's [`Mesh`](crate::Mesh) handed them out, or a relay's second
/// hop brought them on the get and MPI paths), not where a put relay pushes them from it.
#[derive(Clone, Copy)]
pub(super) struct Forces<'a> {
    pub(super) data: &'a [RVec],
    pub(super) in_place: bool,
}

/// The buffers the transports move data between, each symmetric where other PEs read or
/// write it and local otherwise ([`store`](super::store)).
///
/// When no PE is both a particle PE and a PME rank (PME on a subset of the PEs), each PE uses
/// only one side of each pair, so the receive side shares the send side's memory where both
/// live alike: one array as large as the larger need, not two.
pub(super) struct Buffers<'rt> {
    /// This PE's atoms packed by destination, on the get and MPI paths (the put path packs
    /// straight into the PME ranks' receive buffer where it can); room for its home atoms
    /// (symmetric: the most of any PE at the last plan), grown by each plan that needs more.
    pub(super) send: Store<'rt, Particle>,
    /// Room for the atoms a PME rank may receive: the sum of its sources' bounds (symmetric:
    /// the most of any PME rank at the last plan); `None`: `send` serves.
    pub(super) recv: Option<Store<'rt, Particle>>,
    /// Room for the forces on them, where a PME rank's forces are written
    /// ([`Step::mesh`](super::Step::mesh)) or staged, and where the PEs take them from on the
    /// one-sided paths; sized as the receive buffer; `None`: `force_recv` serves.
    pub(super) force_send: Option<Store<'rt, RVec>>,
    /// This PE's home forces, by destination; sized as `send`.
    pub(super) force_recv: Store<'rt, RVec>,
}

impl<'rt> Buffers<'rt> {
    /// The buffers of `path` for `home` home atoms on this PE (`most_home` on any), each pair
    /// shared unless some PE has `both` roles or its two sides live apart.
    ///
    /// # Collective
    /// Every PE calls it alike.
    pub(super) fn collective_new(
        rt: &'rt Runtime,
        name: &dyn Fn(&str) -> String,
        path: Wire,
        (home, most_home): (usize, usize),
        both: bool,
        banks: Option<[&Rc<Bank>; 4]>,
    ) -> Result<Self> {
        let need = |role: Role| if role.symmetric_on(path) { most_home } else { home };
        let separate = |a: Role, b: Role| both || a.symmetric_on(path) != b.symmetric_on(path);
        let bank = |role: Role| banks.map(|b| b[role as usize]);
        let new_atoms = |what: &str, role: Role, need: usize| {
            Store::<Particle>::collective_new(rt, &name(what), (role, path), need, GROWTH, bank(role))
        };
        let new_forces = |what: &str, role: Role, need: usize| {
            Store::<RVec>::collective_new(rt, &name(what), (role, path), need, GROWTH, bank(role))
        };
        Ok(Buffers {
            send: new_atoms("send", Role::Send, need(Role::Send))?,
            recv: separate(Role::Send, Role::Receive)
                .then(|| new_atoms("receive", Role::Receive, 0))
                .transpose()?,
            force_send: separate(Role::ForcesIn, Role::ForcesOut)
                .then(|| new_forces("forces out", Role::ForcesOut, 0))
                .transpose()?,
            force_recv: new_forces("forces in", Role::ForcesIn, need(Role::ForcesIn))?,
        })
    }

    pub(super) fn send(&self) -> &Store<'rt, Particle> {
        &self.send
    }

    pub(super) fn recv(&self) -> &Store<'rt, Particle> {
        self.recv.as_ref().unwrap_or(&self.send)
    }

    pub(super) fn force_send(&self) -> &Store<'rt, RVec> {
        self.force_send.as_ref().unwrap_or(&self.force_recv)
    }

    pub(super) fn force_recv(&self) -> &Store<'rt, RVec> {
        &self.force_recv
    }

    /// Room for `home` atoms to send and, on PME ranks, `share` to receive (a symmetric
    /// buffer: every PE's request, the largest of each served).
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    ///
    /// # Safety
    /// No view of any buffer of the redistribution lives (as [`Store::collective_ensure`]).
    pub(super) unsafe fn collective_fit(&mut self, home: usize, share: usize) -> Result<()> {
        // SAFETY: the caller's promise, for every buffer.
        unsafe {
            match &mut self.recv {
                Some(recv) => {
                    self.send.collective_ensure(home, GROWTH)?;
                    recv.collective_ensure(share, GROWTH)?;
                }
                None => self.send.collective_ensure(home.max(share), GROWTH)?,
            }
            match &mut self.force_send {
                Some(force_send) => {
                    self.force_recv.collective_ensure(home, GROWTH)?;
                    force_send.collective_ensure(share, GROWTH)?;
                }
                None => self.force_recv.collective_ensure(home.max(share), GROWTH)?,
            }
        }
        Ok(())
    }

    /// Bytes held: (symmetric, local), banks apart.
    pub(super) fn bytes(&self) -> (usize, usize) {
        let atoms = [Some(&self.send), self.recv.as_ref()].into_iter().flatten().map(Store::bytes);
        let forces =
            [Some(&self.force_recv), self.force_send.as_ref()].into_iter().flatten().map(Store::bytes);
        atoms.chain(forces).fold((0, 0), |(s, l), (ds, dl)| (s + ds, l + dl))
    }
}
