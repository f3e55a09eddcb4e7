//! Building a halo exchange from C: the options' defaults, the box and grid checked, the
//! builder of either precision, from the whole system or from each PE's home atoms; its free.

use md_halo::{DdGrid, Dlb, HaloExchange, PbcBox, PeriodicImages, Real};

use super::state::{AnyHalo, HALO, Halo, Shared, keep};
use super::types::*;
use crate::exchange::{ONESIDED_PATH_ONESIDED, path_of};
use crate::memory::{box_of, bytes_in, values_in};
use crate::registry;
use crate::runtime::{onesided_runtime, runtime_of, write_out};
use crate::status::{Failure, guard, onesided_status};

/// Fills `options` with the defaults.
///
/// # Safety
/// `options` points to writable memory for one `onesided_halo_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_options_default(
    options: *mut onesided_halo_options,
) -> onesided_status {
    guard(|| write_out(options, "options", defaults()))
}

/// The options' defaults.
fn defaults() -> onesided_halo_options {
    onesided_halo_options {
        real: ONESIDED_REAL_F32,
        path: ONESIDED_PATH_ONESIDED,
        periodic_images: ONESIDED_IMAGES_HALO,
        load_balancing: ONESIDED_DLB_NO,
        verlet_buffer: 0.0,
        grid: [0; 3],
    }
}

/// The box (three vectors of three components, nm, rows), range and options, checked.
struct Setup {
    grid: DdGrid,
    options: onesided_halo_options,
}

/// # Safety
/// `box_vectors` points to 9 doubles; `options` is null or points to options.
unsafe fn setup(
    rt: &onesided::Runtime,
    box_vectors: *const f64,
    range: f64,
    options: *const onesided_halo_options,
) -> Result<Setup, Failure> {
    // SAFETY: as this function's contract.
    let pbc = PbcBox::new(unsafe { box_of(box_vectors) }?)?;
    // SAFETY: not null; the caller passes options.
    let options = if options.is_null() { defaults() } else { unsafe { *options } };
    let range = range as f32;
    let grid = match options.grid {
        [0, 0, 0] => DdGrid::choose(rt.n_pes(), pbc, range)?,
        dims if dims.iter().all(|&d| d > 0) => DdGrid::new(dims.map(|d| d as usize), pbc, range, rt.n_pes())?,
        dims => {
            return Err(Failure::argument(format!(
                "grid {dims:?}: give three positive counts, or {{0, 0, 0}}"
            )));
        }
    };
    Ok(Setup { grid, options })
}

/// The builder for a setup, in precision `R`.
fn builder<R: Real>(
    rt: &'static onesided::Runtime,
    s: &Setup,
) -> Result<md_halo::HaloBuilder<'static, R>, Failure> {
    let o = &s.options;
    let images = match o.periodic_images {
        ONESIDED_IMAGES_HALO => PeriodicImages::Halo,
        ONESIDED_IMAGES_KERNEL => PeriodicImages::Kernel,
        other => {
            return Err(Failure::argument(format!(
                "periodic_images {other}: ONESIDED_IMAGES_HALO or _KERNEL"
            )));
        }
    };
    let dlb = match o.load_balancing {
        ONESIDED_DLB_NO => Dlb::No,
        ONESIDED_DLB_YES => Dlb::Yes,
        ONESIDED_DLB_AUTO => Dlb::Auto,
        other => {
            return Err(Failure::argument(format!("load_balancing {other}: ONESIDED_DLB_NO, _YES or _AUTO")));
        }
    };
    let builder = HaloExchange::builder(rt, s.grid.clone())
        .real::<R>()
        .path(path_of(o.path)?)
        .periodic_images(images)
        .load_balancing(dlb);
    Ok(if o.verlet_buffer != 0.0 { builder.verlet_buffer(o.verlet_buffer) } else { builder })
}

/// The halo exchange of the options' precision over `n` positions: the whole system, or with
/// `globals` this PE's home atoms.
///
/// # Safety
/// `positions` is null or points to `n` triples of that precision.
unsafe fn build(
    rt: &'static onesided::Runtime,
    s: &Setup,
    positions: *const core::ffi::c_void,
    n: usize,
    globals: Option<&[u32]>,
) -> Result<AnyHalo, Failure> {
    /// # Safety
    /// As `build`'s, for `R`.
    unsafe fn of<R: Real>(
        rt: &'static onesided::Runtime,
        s: &Setup,
        positions: *const core::ffi::c_void,
        n: usize,
        globals: Option<&[u32]>,
    ) -> Result<Halo<R>, Failure> {
        // SAFETY: as this function's contract.
        let x = unsafe { triples::<R>(positions, n, "positions") }?;
        let builder = builder::<R>(rt, s)?;
        let exchange = match globals {
            None => builder.collective_from_global(x)?,
            Some(globals) => builder.collective_build(x, globals)?,
        };
        Ok(Halo::new(rt, exchange))
    }
    Ok(match s.options.real {
        // SAFETY: as this function's contract.
        ONESIDED_REAL_F32 => AnyHalo::F32(unsafe { of(rt, s, positions, n, globals) }?),
        // SAFETY: as this function's contract.
        ONESIDED_REAL_F64 => AnyHalo::F64(unsafe { of(rt, s, positions, n, globals) }?),
        other => return Err(Failure::argument(format!("real {other}: ONESIDED_REAL_F32 or _F64"))),
    })
}

/// Triples of `R` from C.
///
/// # Safety
/// `ptr` is null or points to `n` triples of `R`.
unsafe fn triples<'a, R: Real>(
    ptr: *const core::ffi::c_void,
    n: usize,
    what: &str,
) -> Result<&'a [[R; 3]], Failure> {
    // SAFETY: as this function's contract.
    let bytes = unsafe { bytes_in(ptr, n * 3 * size_of::<R>(), what) }?;
    if bytes.is_empty() {
        return Ok(&[]);
    }
    if !(ptr as usize).is_multiple_of(align_of::<R>()) {
        return Err(Failure::argument(format!("{what} is not aligned for its precision")));
    }
    // SAFETY: aligned, `n` triples long (checked above).
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<[R; 3]>(), n) })
}

/// Builds the halo exchange from the whole system: `n_atoms` positions in global order (the
/// same on every PE), each PE keeping the atoms of its domain. `box_vectors` are the box's
/// three vectors (rows, nm; a rectangular box has only the diagonal), `range` the
/// interaction range in nm (the cutoff plus the Verlet buffer); `options` null for the
/// defaults.
///
/// # Collective
/// Every PE calls it with the same system and options.
///
/// # Errors
/// On every PE: `ONESIDED_ERROR_ARGUMENT` for a bad box, grid, option, or a position that is
/// not finite; `ONESIDED_ERROR_COLLECTIVE` when the PEs pass different systems or options.
///
/// # Safety
/// `box_vectors` points to 9 doubles; `positions` to `n_atoms` triples of the options'
/// precision; `options` is null or points to options; `out` to writable memory for a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_from_global(
    rt: onesided_runtime,
    box_vectors: *const f64,
    range: f64,
    positions: *const core::ffi::c_void,
    n_atoms: usize,
    options: *const onesided_halo_options,
    out: *mut onesided_halo,
) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_halo { id: 0 })?;
        let rt = runtime_of(rt)?;
        // SAFETY: as this function's contract.
        let s = unsafe { setup(rt, box_vectors, range, options) }?;
        // SAFETY: as this function's contract.
        keep(unsafe { build(rt, &s, positions, n_atoms, None) }?, out)
    })
}

/// Builds the halo exchange from each PE's own `n_home` home atoms (positions and global
/// indices, in the host's order, kept until the first repartition); every atom must lie in
/// its PE's domain. Box, range and options as for `onesided_halo_from_global`.
///
/// # Collective
/// Every PE calls it with the same box, range and options.
///
/// # Safety
/// As `onesided_halo_from_global`; `globals` points to `n_home` indices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_from_home(
    rt: onesided_runtime,
    box_vectors: *const f64,
    range: f64,
    positions: *const core::ffi::c_void,
    globals: *const u32,
    n_home: usize,
    options: *const onesided_halo_options,
    out: *mut onesided_halo,
) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_halo { id: 0 })?;
        let rt = runtime_of(rt)?;
        // SAFETY: as this function's contract.
        let s = unsafe { setup(rt, box_vectors, range, options) }?;
        // SAFETY: as this function's contract.
        let globals = unsafe { values_in(globals, n_home, "globals") }?;
        // SAFETY: as this function's contract.
        keep(unsafe { build(rt, &s, positions, n_home, Some(globals)) }?, out)
    })
}

/// Frees a halo exchange (a step under way is dropped: no forces go back) and sets `*halo`
/// to `{0}`.
///
/// # Collective
/// Every PE frees it, in the same order as its other frees.
///
/// # Safety
/// `halo` points to a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_free(halo: *mut onesided_halo) -> onesided_status {
    // SAFETY: as this function's contract; the handle is a repr(C) struct of one u64.
    guard(|| unsafe { registry::free::<Shared>(halo.cast(), HALO, "halo") })
}
