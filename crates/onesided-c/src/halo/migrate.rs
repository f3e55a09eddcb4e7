//! The host's per-atom state across a repartition, and per-atom values spread to the halo.

use md_halo::AtomState;

use super::state::{Field, agreed, either, with_halo};
use super::types::{onesided_atom_field, onesided_halo};
use crate::memory::{bytes_in, bytes_out};
use crate::status::{Failure, guard, onesided_status};

/// Repartitions the atoms over the domains (and, with load balancing, moves the boundaries):
/// atoms that left this domain go to their new PE with their entries in `fields` (the host's
/// per-atom state in home order, `n_fields` arrays), which then hold the new home atoms'.
/// The new home count is `onesided_halo_home_atoms`'s. When a field has too little room for the
/// new home atoms, the call fails on this PE with the room needed and keeps the new state:
/// grow the fields and call `onesided_halo_take_fields`.
///
/// # Collective
/// Every PE calls it at the same step, with the same number of fields and entry sizes.
///
/// # Safety
/// `fields` points to `n_fields` fields, each `data` to `capacity` entries `stride` apart.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_repartition(
    halo: onesided_halo,
    fields: *mut onesided_atom_field,
    n_fields: usize,
) -> onesided_status {
    guard(|| {
        // SAFETY: as this function's contract.
        let list = unsafe { field_list(fields, n_fields) }?;
        with_halo(halo, |any| {
            either!(any, h => {
                let home = h.idle()?.home_count();
                let problem = list.iter().enumerate().find_map(|(k, f)| {
                    (f.bytes_per_atom == 0 || f.step() < f.bytes_per_atom || f.capacity < home).then(|| {
                        format!(
                            "field {k}: {} bytes per atom, {} apart, room for {} atoms, for {home} home \
                             atoms: give entries of at least a byte, a stride of 0 or at least the entry, \
                             and room for the home atoms",
                            f.bytes_per_atom,
                            f.step(),
                            f.capacity
                        )
                    })
                });
                let shape = list.iter().fold(onesided::Fnv1a::new().word(list.len() as u64), |h, f| {
                    h.word(f.bytes_per_atom as u64)
                });
                agreed(h.rt, problem, shape.finish(), "onesided_halo_repartition", "fields or entry sizes")?;
                let mut state = Vec::with_capacity(list.len());
                for f in &list {
                    // SAFETY: as this function's contract; home <= capacity (checked).
                    let span = unsafe { bytes_in(f.data, f.span(home), "field data") }?;
                    let mut bytes = Vec::with_capacity(home * f.bytes_per_atom);
                    for i in 0..home {
                        bytes.extend_from_slice(&span[i * f.step()..][..f.bytes_per_atom]);
                    }
                    state.push(Field { bytes, per_atom: f.bytes_per_atom });
                }
                let mut dyns: Vec<&mut dyn AtomState> = state.iter_mut().map(|f| f as &mut dyn AtomState).collect();
                h.idle()?.collective_repartition(&mut dyns)?;
                h.pending = Some(state.into_iter().map(|f| f.bytes).collect());
                h.take_into(&list)
            })
        })
    })
}

/// Copies the new state of the last repartition into `fields` (after a repartition that
/// found too little room in them).
///
/// # Safety
/// As `onesided_halo_repartition`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_take_fields(
    halo: onesided_halo,
    fields: *mut onesided_atom_field,
    n_fields: usize,
) -> onesided_status {
    guard(|| {
        // SAFETY: as this function's contract.
        let list = unsafe { field_list(fields, n_fields) }?;
        with_halo(halo, |any| either!(any, h => h.take_into(&list)))
    })
}

/// # Safety
/// `fields` is null with none or points to `n` fields.
pub(super) unsafe fn field_list(
    fields: *mut onesided_atom_field,
    n: usize,
) -> Result<Vec<onesided_atom_field>, Failure> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if fields.is_null() {
        return Err(Failure::argument(format!("fields is a null pointer with {n} fields")));
    }
    // SAFETY: not null; the caller passes `n` fields.
    Ok(unsafe { std::slice::from_raw_parts(fields, n) }.to_vec())
}

/// Gives every local atom (home and halo, in local order) the value of its home atom on its
/// home PE: `values` holds `bytes_per_atom` bytes per home atom, `local` gets them for
/// `onesided_halo_local.stored` atoms (room for `capacity` atoms). For per-atom parameters a
/// kernel needs on halo atoms (charges, types).
///
/// # Collective
/// Pairwise with the neighbours; every PE calls it with the same `bytes_per_atom`, outside a
/// step.
///
/// # Safety
/// `values` points to home-count entries, `local` to `capacity` writable ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_spread(
    halo: onesided_halo,
    values: *const core::ffi::c_void,
    bytes_per_atom: usize,
    local: *mut core::ffi::c_void,
    capacity: usize,
) -> onesided_status {
    guard(|| {
        with_halo(halo, |any| {
            either!(any, h => {
                let exchange = h.idle()?;
                let (home, stored) = (exchange.home_count(), exchange.stored_count());
                let problem = (stored > capacity || bytes_per_atom == 0).then(|| {
                    format!("local has room for {capacity} atoms of {bytes_per_atom} bytes, for {stored} local atoms")
                });
                agreed(h.rt, problem, bytes_per_atom as u64, "onesided_halo_spread", "bytes_per_atom")?;
                let exchange = h.idle()?;
                // SAFETY: as this function's contract.
                let input = unsafe { bytes_in(values, home * bytes_per_atom, "values") }?;
                // SAFETY: as this function's contract; stored <= capacity (checked).
                let output = unsafe { bytes_out(local, stored * bytes_per_atom, "local") }?;
                // One spread per 4-byte lane (per byte when the entry is not a multiple of 4).
                let lane = if bytes_per_atom.is_multiple_of(4) { 4 } else { 1 };
                for l in (0..bytes_per_atom).step_by(lane) {
                    if lane == 4 {
                        let mine: Vec<u32> = (0..home)
                            .map(|i| u32::from_ne_bytes(input[i * bytes_per_atom + l..][..4].try_into().expect("4")))
                            .collect();
                        let spread = exchange.collective_spread(&mine)?;
                        for (i, v) in spread.iter().enumerate() {
                            output[i * bytes_per_atom + l..][..4].copy_from_slice(&v.to_ne_bytes());
                        }
                    } else {
                        let mine: Vec<u8> = (0..home).map(|i| input[i * bytes_per_atom + l]).collect();
                        let spread = exchange.collective_spread(&mine)?;
                        for (i, v) in spread.iter().enumerate() {
                            output[i * bytes_per_atom + l] = *v;
                        }
                    }
                }
                Ok(())
            })
        })
    })
}
