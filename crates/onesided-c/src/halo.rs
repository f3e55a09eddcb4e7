//! md-halo's halo exchange from C ([`onesided_halo`]): built once from the whole system or
//! each PE's home atoms, then every step `onesided_halo_move_x` (the step's local view:
//! coordinates, forces, pair ownership), the host's force kernel, `onesided_halo_move_f`
//! (the halo forces summed back, the shift forces), and between steps the home atoms
//! (`onesided_halo_home_atoms`), a repartition that carries the host's per-atom state, and a spread
//! of per-atom values to the halo.
//!
//! Coordinates and forces are `float` or `double` triples (`onesided_halo_options.real`).
//! Between `move_x` and `move_f` the halo is in a step: only the step's calls are allowed,
//! as in Rust, where the step borrows the exchange.

use std::cell::RefCell;

use md_halo::{AtomState, DdGrid, Dlb, HaloExchange, PbcBox, PeriodicImages, Real, Step, Zone};

use crate::exchange::{ONESIDED_PATH_ONESIDED, onesided_path, path_of};
use crate::memory::{bytes_in, bytes_out};
use crate::registry;
use crate::runtime::{onesided_runtime, runtime_of, write_out};
use crate::status::{Failure, guard, onesided_status};

/// The precision of coordinates and forces: `ONESIDED_REAL_F32` (`float`) or
/// `ONESIDED_REAL_F64` (`double`).
#[allow(non_camel_case_types)]
pub type onesided_real = i32;
/// `float` coordinates and forces (GROMACS's mixed precision).
pub const ONESIDED_REAL_F32: onesided_real = 0;
/// `double` coordinates and forces.
pub const ONESIDED_REAL_F64: onesided_real = 1;

/// Where periodic images of local atoms come from: `ONESIDED_IMAGES_HALO` or
/// `ONESIDED_IMAGES_KERNEL`.
#[allow(non_camel_case_types)]
pub type onesided_images = i32;
/// The halo writes each image behind the halo atoms; `move_f` adds their forces back. Any
/// kernel on plain coordinates works.
pub const ONESIDED_IMAGES_HALO: onesided_images = 0;
/// The kernel makes the images from `onesided_halo_local.images` (shift vectors, as
/// GROMACS's kernel does); only the pulses between PEs travel.
pub const ONESIDED_IMAGES_KERNEL: onesided_images = 1;

/// Dynamic load balancing: `ONESIDED_DLB_NO`, `ONESIDED_DLB_YES` or `ONESIDED_DLB_AUTO`.
#[allow(non_camel_case_types)]
pub type onesided_dlb = i32;
/// Equal domains throughout (the imbalance is still measured).
pub const ONESIDED_DLB_NO: onesided_dlb = 0;
/// Boundaries move at every repartition.
pub const ONESIDED_DLB_YES: onesided_dlb = 1;
/// Boundaries start moving once the imbalance costs 2 % of the run (GROMACS's rule).
pub const ONESIDED_DLB_AUTO: onesided_dlb = 2;

/// How a halo exchange is built; `onesided_halo_options_default` fills the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_halo_options {
    /// The precision of coordinates and forces (default `ONESIDED_REAL_F32`).
    pub real: onesided_real,
    /// The path (default `ONESIDED_PATH_ONESIDED`).
    pub path: onesided_path,
    /// Where periodic images come from (default `ONESIDED_IMAGES_HALO`).
    pub periodic_images: onesided_images,
    /// Load balancing (default `ONESIDED_DLB_NO`).
    pub load_balancing: onesided_dlb,
    /// The Verlet buffer in nm: the part of the range beyond the interaction cutoff; when
    /// positive, every repartition checks that no atom moved more than half of it (default
    /// 0: no check).
    pub verlet_buffer: f32,
    /// Domains along x, y, z; `{0, 0, 0}` (the default) chooses them for the PE count as
    /// GROMACS does.
    pub grid: [i32; 3],
}

/// A halo exchange: made by `onesided_halo_from_global` or `onesided_halo_from_home`,
/// freed by `onesided_halo_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_halo {
    /// The handle's number (never reused; 0 for none).
    pub id: u64,
}

/// A periodic image the kernel makes (`ONESIDED_IMAGES_KERNEL`): local atom `stored + k` is
/// image `k`, at its atom's position plus `vector`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_halo_image {
    /// The stored local atom it is an image of.
    pub atom: u32,
    /// How many times each box vector is added (0 or 1).
    pub cells: [u32; 3],
    /// The shift in nm, `Σ_d cells[d] · box vector d`.
    pub vector: [f64; 3],
}

/// What a force kernel reads and writes in one step, between `onesided_halo_move_x` and
/// `onesided_halo_move_f`: `stored` local atoms, home atoms first, then halo atoms (then,
/// under `ONESIDED_IMAGES_HALO`, the periodic images).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_halo_local {
    /// `stored` coordinate triples (`float` or `double`), read-only.
    pub coordinates: *const core::ffi::c_void,
    /// `stored` force triples, in the exchange's own memory, which `move_f` sends from: what
    /// they hold before the kernel writes them is left from the last step.
    pub forces: *mut core::ffi::c_void,
    /// The number of stored local atoms.
    pub stored: usize,
    /// The number of home atoms (the first `home` of them).
    pub home: usize,
    /// The number of home and halo atoms (`stored` less the periodic images behind them).
    pub local: usize,
    /// `stored` zone bytes: the domain computes pair (i, j) when
    /// `onesided_halo_owns(zones[i], zones[j])`, i.e. `(zones[i] & zones[j] & 7) == 0`.
    pub zones: *const u8,
    /// Under `ONESIDED_IMAGES_KERNEL`, the images the kernel makes; null otherwise.
    pub images: *const onesided_halo_image,
    /// The number of images.
    pub n_images: usize,
}

/// The home atoms between steps.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_halo_home {
    /// `count` coordinate triples, to write before `move_x`.
    pub coordinates: *mut core::ffi::c_void,
    /// `count` force triples: the totals the last `move_f` left, to which the host adds its
    /// other forces before it integrates.
    pub forces: *mut core::ffi::c_void,
    /// `count` global indices, in home order.
    pub globals: *const u32,
    /// The number of home atoms.
    pub count: usize,
    /// The number of home and halo atoms in the steps until the next repartition.
    pub local: usize,
}

/// One array of the host's per-atom state in home order, which a repartition moves with the
/// atoms: `bytes_per_atom` bytes per atom, contiguous, room for `capacity` atoms.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_atom_field {
    /// The array.
    pub data: *mut core::ffi::c_void,
    /// The bytes of one atom's entry.
    pub bytes_per_atom: usize,
    /// How many atoms' entries fit.
    pub capacity: usize,
}

const HALO: &str = "onesided_halo";

/// The exchange of one precision, and the step under way, which borrows it.
struct Halo<R: Real> {
    rt: &'static onesided::Runtime,
    /// From `Box::into_raw`; given back in `Drop`.
    exchange: *mut HaloExchange<'static, R>,
    step: Option<Step<'static, 'static, R>>,
    /// The state of the last repartition that did not fit the host's fields.
    pending: Option<Vec<Vec<u8>>>,
    /// The step's images and zone bytes, where the C view points.
    images: Vec<onesided_halo_image>,
    zones: Vec<u8>,
}

impl<R: Real> Halo<R> {
    fn new(rt: &'static onesided::Runtime, exchange: HaloExchange<'static, R>) -> Self {
        Halo {
            rt,
            exchange: Box::into_raw(Box::new(exchange)),
            step: None,
            pending: None,
            images: Vec::new(),
            zones: Vec::new(),
        }
    }

    /// The exchange, outside a step.
    fn idle(&mut self) -> Result<&mut HaloExchange<'static, R>, Failure> {
        if self.step.is_some() {
            return Err(Failure::argument(
                "a step is under way (onesided_halo_move_x was called): call onesided_halo_move_f first",
            ));
        }
        // SAFETY: the pointer came from Box::into_raw and is freed only in Drop; with no step
        // alive nothing else borrows the exchange, and `&mut self` makes this the only borrow.
        Ok(unsafe { &mut *self.exchange })
    }

    fn move_x(&mut self) -> Result<onesided_halo_local, Failure> {
        self.idle()?;
        // SAFETY: as in `idle`; the step keeps this borrow until `move_f` or Drop ends it, and
        // meanwhile `idle` refuses every other borrow.
        let exchange: &'static mut HaloExchange<'static, R> = unsafe { &mut *self.exchange };
        let mut step = exchange.move_x()?;
        let local = step.local();
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
        let view = onesided_halo_local {
            coordinates: local.coordinates.as_ptr().cast(),
            forces: local.forces.as_mut_ptr().cast(),
            stored: local.coordinates.len(),
            home: step.halo().home_count(),
            local: step.halo().local_count(),
            zones: self.zones.as_ptr(),
            images: if self.images.is_empty() { std::ptr::null() } else { self.images.as_ptr() },
            n_images: self.images.len(),
        };
        self.step = Some(step);
        Ok(view)
    }

    fn move_f(&mut self) -> Result<[[f64; 3]; 3], Failure> {
        let step = self
            .step
            .take()
            .ok_or_else(|| Failure::argument("no step is under way: call onesided_halo_move_x first"))?;
        let shift = step.move_f()?;
        Ok([shift.along(0), shift.along(1), shift.along(2)])
    }
}

impl<R: Real> Drop for Halo<R> {
    fn drop(&mut self) {
        // The step's borrow ends before the exchange it borrows goes.
        self.step = None;
        // SAFETY: from Box::into_raw in `new`, given back once; the step that borrowed it is
        // gone.
        drop(unsafe { Box::from_raw(self.exchange) });
    }
}

/// A halo of either precision.
enum AnyHalo {
    F32(Halo<f32>),
    F64(Halo<f64>),
}

/// Runs `$body` with `$h` bound to the halo of whichever precision.
macro_rules! either {
    ($any:expr, $h:ident => $body:expr) => {
        match $any {
            AnyHalo::F32($h) => $body,
            AnyHalo::F64($h) => $body,
        }
    };
}

type Shared = RefCell<AnyHalo>;

/// Fills `options` with the defaults.
///
/// # Safety
/// `options` points to writable memory for one `onesided_halo_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_halo_options_default(
    options: *mut onesided_halo_options,
) -> onesided_status {
    guard(|| {
        let defaults = onesided_halo_options {
            real: ONESIDED_REAL_F32,
            path: ONESIDED_PATH_ONESIDED,
            periodic_images: ONESIDED_IMAGES_HALO,
            load_balancing: ONESIDED_DLB_NO,
            verlet_buffer: 0.0,
            grid: [0; 3],
        };
        write_out(options, "options", defaults)
    })
}

/// Whether the domain computes the pair of local atoms with zone bytes `a` and `b`
/// (GROMACS's eighth-shell rule): 1 or 0.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_halo_owns(a: u8, b: u8) -> i32 {
    Zone::pair_bits(a, b) as i32
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
    let raw = unsafe { bytes_in(box_vectors.cast(), 9 * size_of::<f64>(), "box") }?;
    let v: Vec<f64> =
        raw.chunks_exact(8).map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes"))).collect();
    let vectors = [0, 1, 2].map(|d| [v[3 * d] as f32, v[3 * d + 1] as f32, v[3 * d + 2] as f32]);
    let pbc = PbcBox::new(vectors)?;
    let options = if options.is_null() {
        let mut o = std::mem::MaybeUninit::uninit();
        // SAFETY: a valid out-pointer.
        unsafe { onesided_halo_options_default(o.as_mut_ptr()) };
        // SAFETY: just written.
        unsafe { o.assume_init() }
    } else {
        // SAFETY: not null; the caller passes options.
        unsafe { *options }
    };
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

fn keep(halo: AnyHalo, out: *mut onesided_halo) -> Result<(), Failure> {
    let id = registry::insert(HALO, RefCell::new(halo))?;
    write_out(out, "out", onesided_halo { id })
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
        let halo = match s.options.real {
            ONESIDED_REAL_F32 => {
                // SAFETY: as this function's contract.
                let x = unsafe { triples::<f32>(positions, n_atoms, "positions") }?;
                AnyHalo::F32(Halo::new(rt, builder::<f32>(rt, &s)?.collective_from_global(x)?))
            }
            ONESIDED_REAL_F64 => {
                // SAFETY: as this function's contract.
                let x = unsafe { triples::<f64>(positions, n_atoms, "positions") }?;
                AnyHalo::F64(Halo::new(rt, builder::<f64>(rt, &s)?.collective_from_global(x)?))
            }
            other => return Err(Failure::argument(format!("real {other}: ONESIDED_REAL_F32 or _F64"))),
        };
        keep(halo, out)
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
        let g = unsafe { bytes_in(globals.cast(), n_home * 4, "globals") }?;
        let globals: Vec<u32> =
            g.chunks_exact(4).map(|c| u32::from_ne_bytes(c.try_into().expect("4 bytes"))).collect();
        let halo = match s.options.real {
            ONESIDED_REAL_F32 => {
                // SAFETY: as this function's contract.
                let x = unsafe { triples::<f32>(positions, n_home, "positions") }?;
                AnyHalo::F32(Halo::new(rt, builder::<f32>(rt, &s)?.collective_build(x, &globals)?))
            }
            ONESIDED_REAL_F64 => {
                // SAFETY: as this function's contract.
                let x = unsafe { triples::<f64>(positions, n_home, "positions") }?;
                AnyHalo::F64(Halo::new(rt, builder::<f64>(rt, &s)?.collective_build(x, &globals)?))
            }
            other => return Err(Failure::argument(format!("real {other}: ONESIDED_REAL_F32 or _F64"))),
        };
        keep(halo, out)
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
    guard(|| {
        if halo.is_null() {
            return Err(Failure::argument("halo is a null pointer: pass &halo"));
        }
        // SAFETY: not null; the caller passes a pointer to a handle.
        let id = unsafe { (*halo).id };
        drop(registry::remove::<Shared>(HALO, id)?);
        // SAFETY: as above.
        unsafe { (*halo).id = 0 };
        Ok(())
    })
}

fn with_halo<T>(
    halo: onesided_halo,
    f: impl FnOnce(&mut AnyHalo) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let shared = registry::get::<Shared>(HALO, halo.id)?;
    let mut any =
        shared.try_borrow_mut().map_err(|_| Failure::argument("the halo is in use by another call"))?;
    f(&mut any)
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

/// A field of the host's per-atom state, as md-halo moves it.
struct Field {
    bytes: Vec<u8>,
    per_atom: usize,
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
/// `fields` points to `n_fields` fields, each `data` to `capacity * bytes_per_atom` bytes.
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
                    (f.bytes_per_atom == 0 || f.capacity < home).then(|| {
                        format!(
                            "field {k}: {} bytes per atom and room for {} atoms, for {home} home atoms",
                            f.bytes_per_atom, f.capacity
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
                    let bytes = unsafe { bytes_in(f.data, home * f.bytes_per_atom, "field data") }?;
                    state.push(Field { bytes: bytes.to_vec(), per_atom: f.bytes_per_atom });
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

impl<R: Real> Halo<R> {
    /// The pending state into the host's fields, when each has room.
    fn take_into(&mut self, list: &[onesided_atom_field]) -> Result<(), Failure> {
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
            // SAFETY: room checked above; the caller passes `capacity * bytes_per_atom` bytes.
            let out = unsafe { bytes_out(f.data, bytes.len(), "field data") }?;
            out.copy_from_slice(bytes);
        }
        self.pending = None;
        Ok(())
    }
}

/// Refuses, on every PE alike, a collective call that some PE cannot make (`problem`, this
/// PE's) or that the PEs make with different `shape` (a hash of what must agree), before
/// anything moves, so that no PE is left waiting in it.
fn agreed(
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

/// # Safety
/// `fields` is null with none or points to `n` fields.
unsafe fn field_list(
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
