//! The halo behind a handle: the exchange of one precision, the phase of the step that
//! borrows it (coordinates in flight, the step's view, forces in flight), the state of a
//! repartition that did not fit, and the agreement that refuses a collective some PE cannot
//! make.

use std::cell::RefCell;

use md_halo::{AtomState, FInFlight, HaloExchange, Local, Real, Step, XInFlight};

use super::types::{
    onesided_atom_field, onesided_halo, onesided_halo_image, onesided_halo_local, onesided_halo_settled,
};
use crate::memory::bytes_out;
use crate::registry;
use crate::runtime::write_out;
use crate::status::Failure;

pub(super) const HALO: &str = "onesided_halo";

/// Where a step stands; every phase but `Idle` borrows the exchange.
pub(super) enum Phase<R: Real> {
    /// Between steps.
    Idle,
    /// The coordinates in flight (`onesided_halo_start_x`).
    X(XInFlight<'static, 'static, R>),
    /// The step's view, between the coordinates and the forces.
    Step(Step<'static, 'static, R>),
    /// The forces in flight (`onesided_halo_start_f`).
    F(FInFlight<'static, 'static, R>),
}

/// The exchange of one precision, and the phase of the step under way, which borrows it.
pub(super) struct Halo<R: Real> {
    pub(super) rt: &'static onesided::Runtime,
    /// From `Box::into_raw`; given back in `Drop`.
    pub(super) exchange: *mut HaloExchange<'static, R>,
    pub(super) phase: Phase<R>,
    /// The state of the last repartition that did not fit the host's fields.
    pub(super) pending: Option<Vec<Vec<u8>>>,
    /// The step's images and zone bytes, where the C view points.
    pub(super) images: Vec<onesided_halo_image>,
    pub(super) zones: Vec<u8>,
}

impl<R: Real> Halo<R> {
    pub(super) fn new(rt: &'static onesided::Runtime, exchange: HaloExchange<'static, R>) -> Self {
        Halo {
            rt,
            exchange: Box::into_raw(Box::new(exchange)),
            phase: Phase::Idle,
            pending: None,
            images: Vec::new(),
            zones: Vec::new(),
        }
    }

    /// What the host must call to end the phase under way.
    fn phase_name(&self) -> &'static str {
        match self.phase {
            Phase::Idle => "no step is under way",
            Phase::X(_) => {
                "the coordinates are in flight (onesided_halo_start_x): call onesided_halo_finish_x first"
            }
            Phase::Step(_) => {
                "a step is under way (onesided_halo_move_x was called): call onesided_halo_move_f first \
                 (or onesided_halo_start_f)"
            }
            Phase::F(_) => {
                "the forces are in flight (onesided_halo_start_f): call onesided_halo_finish_f first"
            }
        }
    }

    /// The refusal of `call` in the phase under way: what to call first (`when_idle` between
    /// steps, else what ends the phase).
    fn out_of_phase(&self, call: &str, when_idle: &str) -> Failure {
        match self.phase {
            Phase::Idle => Failure::argument(format!("{call}: no step is under way: {when_idle}")),
            _ => Failure::argument(format!("{call}: {}", self.phase_name())),
        }
    }

    /// The exchange, outside a step.
    pub(super) fn idle(&mut self) -> Result<&mut HaloExchange<'static, R>, Failure> {
        if !matches!(self.phase, Phase::Idle) {
            return Err(Failure::argument(self.phase_name()));
        }
        // SAFETY: the pointer came from Box::into_raw and is freed only in Drop; with no phase
        // alive nothing else borrows the exchange, and `&mut self` makes this the only borrow.
        Ok(unsafe { &mut *self.exchange })
    }

    /// The exchange for a phase that borrows it until its end.
    fn borrow_for_step(&mut self) -> Result<&'static mut HaloExchange<'static, R>, Failure> {
        self.idle()?;
        // SAFETY: as in `idle`; the phase made from this borrow keeps it until the step ends
        // or Drop ends it, and meanwhile `idle` refuses every other borrow.
        Ok(unsafe { &mut *self.exchange })
    }

    /// The C view of `local`: its zone bytes and images kept here, where the view points.
    fn view_of(&mut self, local: Local<'_, R>, home: usize, all: usize) -> onesided_halo_local {
        self.images = local
            .images
            .iter()
            .map(|i| onesided_halo_image {
                atom: i.atom,
                cells: i.cells,
                vector: i.vector.map(|c| c.to_f64()),
            })
            .collect();
        self.zones.clear();
        self.zones.extend(local.owner.zones().iter().map(|z| z.bits()));
        onesided_halo_local {
            coordinates: local.coordinates.as_ptr().cast(),
            forces: local.forces.as_mut_ptr().cast(),
            stored: local.coordinates.len(),
            home,
            local: all,
            zones: self.zones.as_ptr(),
            images: if self.images.is_empty() { std::ptr::null() } else { self.images.as_ptr() },
            n_images: self.images.len(),
        }
    }

    /// The step's view, and the step kept.
    fn enter_step(&mut self, mut step: Step<'static, 'static, R>) -> onesided_halo_local {
        let (home, all) = (step.halo().home_count(), step.halo().local_count());
        let view = self.view_of(step.local(), home, all);
        self.phase = Phase::Step(step);
        view
    }

    pub(super) fn move_x(&mut self) -> Result<onesided_halo_local, Failure> {
        let step = self.borrow_for_step()?.move_x()?;
        Ok(self.enter_step(step))
    }

    /// Starts the coordinates; the home atoms' view while they travel.
    pub(super) fn start_x(&mut self) -> Result<onesided_halo_local, Failure> {
        let mut x = self.borrow_for_step()?.start_x()?;
        let (home, all) = (x.halo().home_count(), x.halo().local_count());
        let view = self.view_of(x.home(), home, all);
        self.phase = Phase::X(x);
        Ok(view)
    }

    pub(super) fn finish_x(&mut self) -> Result<onesided_halo_local, Failure> {
        let x =
            self.take("onesided_halo_finish_x", "call onesided_halo_start_x first", |phase| match phase {
                Phase::X(x) => Ok(x),
                other => Err(other),
            })?;
        let step = x.finish()?;
        Ok(self.enter_step(step))
    }

    /// What `pick` takes out of the phase under way for `call` (the phase is then idle), or,
    /// leaving the phase as it was, the error naming what to call first.
    fn take<T>(
        &mut self,
        call: &str,
        when_idle: &str,
        pick: impl FnOnce(Phase<R>) -> Result<T, Phase<R>>,
    ) -> Result<T, Failure> {
        match pick(std::mem::replace(&mut self.phase, Phase::Idle)) {
            Ok(taken) => Ok(taken),
            Err(other) => {
                self.phase = other;
                Err(self.out_of_phase(call, when_idle))
            }
        }
    }

    /// The step, taken out of its phase for `call`, or the error naming the phase.
    fn take_step(&mut self, call: &str) -> Result<Step<'static, 'static, R>, Failure> {
        let first = "call onesided_halo_move_x first (or onesided_halo_start_x and onesided_halo_finish_x)";
        self.take(call, first, |phase| match phase {
            Phase::Step(step) => Ok(step),
            other => Err(other),
        })
    }

    pub(super) fn move_f(&mut self) -> Result<[[f64; 3]; 3], Failure> {
        let shift = self.take_step("onesided_halo_move_f")?.move_f()?;
        Ok([shift.along(0), shift.along(1), shift.along(2)])
    }

    /// Starts the forces; the home atoms while they travel, with those whose forces are final.
    pub(super) fn start_f(&mut self) -> Result<onesided_halo_settled, Failure> {
        let mut f = self.take_step("onesided_halo_start_f")?.start_f()?;
        let settled = f.home();
        let view = onesided_halo_settled {
            coordinates: settled.coordinates.as_mut_ptr().cast(),
            forces: settled.forces.as_mut_ptr().cast(),
            count: settled.coordinates.len(),
            atoms: settled.atoms.as_ptr(),
            n_atoms: settled.atoms.len(),
        };
        self.phase = Phase::F(f);
        Ok(view)
    }

    pub(super) fn finish_f(&mut self) -> Result<[[f64; 3]; 3], Failure> {
        let f =
            self.take("onesided_halo_finish_f", "call onesided_halo_start_f first", |phase| match phase {
                Phase::F(f) => Ok(f),
                other => Err(other),
            })?;
        let shift = f.finish()?;
        Ok([shift.along(0), shift.along(1), shift.along(2)])
    }
}

impl<R: Real> Drop for Halo<R> {
    fn drop(&mut self) {
        // The step's borrow ends before the exchange it borrows goes (a phase in flight
        // finishes its exchange as it drops).
        self.phase = Phase::Idle;
        // SAFETY: from Box::into_raw in `new`, given back once; the step that borrowed it is
        // gone.
        drop(unsafe { Box::from_raw(self.exchange) });
    }
}

/// A halo of either precision.
pub(super) enum AnyHalo {
    F32(Halo<f32>),
    F64(Halo<f64>),
}

/// Runs `$body` with `$h` bound to the halo of whichever precision.
macro_rules! either {
    ($any:expr, $h:ident => $body:expr) => {
        match $any {
            $crate::halo::state::AnyHalo::F32($h) => $body,
            $crate::halo::state::AnyHalo::F64($h) => $body,
        }
    };
}

pub(super) use either;

pub(super) type Shared = RefCell<AnyHalo>;

pub(super) fn keep(halo: AnyHalo, out: *mut onesided_halo) -> Result<(), Failure> {
    let id = registry::insert(HALO, RefCell::new(halo))?;
    write_out(out, "out", onesided_halo { id })
}

pub(super) fn with_halo<T>(
    halo: onesided_halo,
    f: impl FnOnce(&mut AnyHalo) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let shared = registry::get::<Shared>(HALO, halo.id)?;
    let mut any =
        shared.try_borrow_mut().map_err(|_| Failure::argument("the halo is in use by another call"))?;
    f(&mut any)
}

/// A field of the host's per-atom state, as md-halo moves it.
pub(super) struct Field {
    pub(super) bytes: Vec<u8>,
    pub(super) per_atom: usize,
}

impl AtomState for Field {
    fn bytes_per_atom(&self) -> usize {
        self.per_atom
    }
    fn atom_count(&self) -> usize {
        self.bytes.len() / self.per_atom
    }
    fn atom_bytes(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.per_atom..(i + 1) * self.per_atom]
    }
    fn rebuild(&mut self, atoms: &mut dyn Iterator<Item = &[u8]>) {
        let mut bytes = Vec::with_capacity(self.bytes.len());
        atoms.for_each(|a| bytes.extend_from_slice(a));
        self.bytes = bytes;
    }
}

impl<R: Real> Halo<R> {
    /// The pending state into the host's fields, when each has room.
    pub(super) fn take_into(&mut self, list: &[onesided_atom_field]) -> Result<(), Failure> {
        let pending =
            self.pending.as_ref().ok_or_else(|| Failure::argument("no repartition's state is pending"))?;
        if pending.len() != list.len() {
            return Err(Failure::argument(format!(
                "{} fields, for a repartition of {}",
                list.len(),
                pending.len()
            )));
        }
        for (k, (bytes, f)) in pending.iter().zip(list).enumerate() {
            let atoms = bytes.len() / f.bytes_per_atom.max(1);
            if atoms > f.capacity {
                return Err(Failure::argument(format!(
                    "field {k} has room for {} atoms, the home atoms are now {atoms}: the new state is kept; \
                     grow the field and call onesided_halo_take_fields",
                    f.capacity
                )));
            }
        }
        for (bytes, f) in pending.iter().zip(list) {
            let atoms = bytes.len() / f.bytes_per_atom.max(1);
            // SAFETY: room checked above; the caller passes `capacity` entries `stride` apart.
            let out = unsafe { bytes_out(f.data, f.span(atoms), "field data") }?;
            for (i, entry) in bytes.chunks_exact(f.bytes_per_atom).enumerate() {
                out[i * f.step()..][..f.bytes_per_atom].copy_from_slice(entry);
            }
        }
        self.pending = None;
        Ok(())
    }
}

/// Refuses, on every PE alike, a collective call that some PE cannot make (`problem`, this
/// PE's) or that the PEs make with different `shape` (a hash of what must agree), before
/// anything moves, so that no PE is left waiting in it.
pub(super) fn agreed(
    rt: &onesided::Runtime,
    problem: Option<String>,
    shape: u64,
    call: &str,
    what: &str,
) -> Result<(), Failure> {
    let mut agreement = onesided::Agreement::new();
    let bad = agreement.lowest_pe(problem.is_some());
    let same = agreement.same(shape & ((1 << 39) - 1));
    let agreed = agreement.collective_run(rt)?;
    let every_pe = |message: String| Failure { every_pe: true, ..Failure::argument(message) };
    if let Some(pe) = agreed.get(bad) {
        return Err(every_pe(match problem {
            Some(message) => format!("{call}: {message}; no PE went on"),
            None => {
                format!("{call}: PE {pe} was given what it cannot use (its message says what); no PE went on")
            }
        }));
    }
    if !agreed.get(same) {
        return Err(every_pe(format!("{call}: the PEs pass different {what}: every PE passes the same")));
    }
    Ok(())
}
