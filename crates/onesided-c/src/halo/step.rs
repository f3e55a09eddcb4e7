//! A step from C: coordinates out (`onesided_halo_move_x`, the kernel's view), forces back
//! (`onesided_halo_move_f`), the home atoms between steps, and the pair-ownership rule.

use md_halo::Zone;

use super::state::{either, with_halo};
use super::types::{onesided_halo, onesided_halo_home, onesided_halo_local};
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
    guard(|| {
        if local.is_null() {
            return Err(Failure::argument("local is a null pointer: pass where to write the view"));
        }
        let view = with_halo(halo, |any| either!(any, h => h.move_x()))?;
        write_out(local, "local", view)
    })
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
        if !shift_forces.is_null() {
            // SAFETY: not null; the caller passes 9 writable doubles.
            let out = unsafe { std::slice::from_raw_parts_mut(shift_forces, 9) };
            out.copy_from_slice(shift.as_flattened());
        }
        Ok(())
    })
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
                })
            })
        })?;
        write_out(home, "home", view)
    })
}
