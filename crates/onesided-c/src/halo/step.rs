//! A step from C: coordinates out (`onesided_halo_move_x`, the kernel's view), forces back
//! (`onesided_halo_move_f`), or each in two halves with the kernel's work in flight between
//! (`onesided_halo_start_x` / `finish_x`, `start_f` / `finish_f`); the home atoms between
//! steps, and the pair-ownership rule.

use md_halo::Zone;

use super::state::{AnyHalo, either, with_halo};
use super::types::{onesided_halo, onesided_halo_home, onesided_halo_local, onesided_halo_settled};
use crate::runtime::write_out;
use crate::status::{Failure, guard, onesided_status};

/// Whether the domain computes the pair of local atoms with zone bytes `a` and `b`
/// (GROMACS's eighth-shell rule): 1 or 0.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_halo_owns(a: u8, b: u8) -> i32 {
    Zone::pair_bits(a, b) as i32
}

/// Sends the home coordinates out and receives the halo's: the step's local view through
/// `local`, valid until `onesided_halo_move_f`.
///
/// # Collective
/// Pairwise with the neighbours; every PE calls it each step.
///
/// # Safety
/// `local` points to writable memory for one `onesided_halo_local`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_move_x(
    halo: onesided_halo,
    local: *mut onesided_halo_local,
) -> onesided_status {
    guard(|| view_out(halo, local, "local", "the view", |any| either!(any, h => h.move_x())))
}

/// Sends the halo atoms' forces back and adds those this PE receives to its home atoms'
/// (under `ONESIDED_IMAGES_HALO` the images' too); the shift forces (the force on halo
/// images shifted by box vector d is `shift_forces[3 d .. 3 d + 3]`, for the virial) through
/// `shift_forces` (9 doubles, or null). Ends the step.
///
/// # Collective
/// Pairwise with the neighbours.
///
/// # Safety
/// `shift_forces` is null or points to 9 writable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_move_f(
    halo: onesided_halo,
    shift_forces: *mut f64,
) -> onesided_status {
    guard(|| {
        let shift = with_halo(halo, |any| either!(any, h => h.move_f()))?;
        // SAFETY: the caller passes null or 9 writable doubles.
        unsafe { write_shift(shift_forces, shift) };
        Ok(())
    })
}

/// Starts the step's coordinates: sends those that need no halo atom and returns at once
/// with the home atoms' view through `home` (`stored` = `home` home atoms, their zone bytes,
/// no images), on which the kernel computes the home pairs (every one this domain's) while
/// the halo travels; across nodes it calls `onesided_progress` between chunks of pairs.
/// `onesided_halo_finish_x` ends it. The same bits as `onesided_halo_move_x` when the kernel
/// sums in the same order.
///
/// # Collective
/// Pairwise with the neighbours; every PE calls it (or `move_x`) each step.
///
/// # Safety
/// `home` points to writable memory for one `onesided_halo_local`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_start_x(
    halo: onesided_halo,
    home: *mut onesided_halo_local,
) -> onesided_status {
    guard(|| view_out(halo, home, "home", "the home view", |any| either!(any, h => h.start_x())))
}

/// Receives the halo the step's `onesided_halo_start_x` started, runs the pulses that
/// forward halo atoms, and gives the step's local view through `local`, as
/// `onesided_halo_move_x` does (the home forces hold what the kernel wrote in the home view).
///
/// # Collective
/// Pairwise with the neighbours.
///
/// # Safety
/// `local` points to writable memory for one `onesided_halo_local`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_finish_x(
    halo: onesided_halo,
    local: *mut onesided_halo_local,
) -> onesided_status {
    guard(|| view_out(halo, local, "local", "the view", |any| either!(any, h => h.finish_x())))
}

/// Starts sending the halo atoms' forces back and returns at once with the home atoms
/// through `settled`, naming those in no neighbour's halo (their forces are final): the host
/// integrates them while the rest arrive; `onesided_halo_finish_f` adds the returned forces
/// (the others are `onesided_halo_home.returning`).
///
/// # Collective
/// Pairwise with the neighbours.
///
/// # Safety
/// `settled` points to writable memory for one `onesided_halo_settled`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_start_f(
    halo: onesided_halo,
    settled: *mut onesided_halo_settled,
) -> onesided_status {
    guard(|| view_out(halo, settled, "settled", "the settled atoms", |any| either!(any, h => h.start_f())))
}

/// Adds the forces returned to the home atoms and gives the shift forces through
/// `shift_forces` (9 doubles, or null), as `onesided_halo_move_f` does. Ends the step.
///
/// # Collective
/// Pairwise with the neighbours.
///
/// # Safety
/// `shift_forces` is null or points to 9 writable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_finish_f(
    halo: onesided_halo,
    shift_forces: *mut f64,
) -> onesided_status {
    guard(|| {
        let shift = with_halo(halo, |any| either!(any, h => h.finish_f()))?;
        // SAFETY: the caller passes null or 9 writable doubles.
        unsafe { write_shift(shift_forces, shift) };
        Ok(())
    })
}

/// Runs `step` on the halo and writes the view it gives through `out` (`what`, which holds
/// `desc`), refused before anything moves when `out` is null.
fn view_out<T>(
    halo: onesided_halo,
    out: *mut T,
    what: &str,
    desc: &str,
    step: impl FnOnce(&mut AnyHalo) -> Result<T, Failure>,
) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::argument(format!("{what} is a null pointer: pass where to write {desc}")));
    }
    let view = with_halo(halo, step)?;
    write_out(out, what, view)
}

/// Writes `shift` into `out` (9 doubles) unless it is null.
///
/// # Safety
/// `out` is null or points to 9 writable doubles.
unsafe fn write_shift(out: *mut f64, shift: [[f64; 3]; 3]) {
    if !out.is_null() {
        // SAFETY: not null; the caller passes 9 writable doubles.
        let out = unsafe { std::slice::from_raw_parts_mut(out, 9) };
        out.copy_from_slice(shift.as_flattened());
    }
}

/// The home atoms through `home`: valid until the next repartition or free.
///
/// # Safety
/// `home` points to writable memory for one `onesided_halo_home`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_home_atoms(
    halo: onesided_halo,
    home: *mut onesided_halo_home,
) -> onesided_status {
    guard(|| {
        let view = with_halo(halo, |any| {
            either!(any, h => {
                let exchange = h.idle()?;
                let globals = exchange.global_indices().as_ptr();
                let local = exchange.local_count();
                let home = exchange.home_mut();
                Ok(onesided_halo_home {
                    coordinates: home.coordinates.as_mut_ptr().cast(),
                    forces: home.forces.as_mut_ptr().cast(),
                    globals,
                    count: home.coordinates.len(),
                    local,
                    returning: home.returning.as_ptr(),
                    n_returning: home.returning.len(),
                })
            })
        })?;
        write_out(home, "home", view)
    })
}
