//! pme-redist's PME from C ([`onesided_pme`]): the redistribution of the home atoms to the
//! PME ranks and the mesh (spread, distributed FFT, solve, gather), as one handle. Each step
//! `onesided_pme_step` sends the home atoms, runs the mesh on the PME ranks, brings the
//! reciprocal forces back in home order and gives the energy and virial; after a repartition
//! (or every few steps) `onesided_pme_plan` rebuilds the redistribution's plan.
//!
//! Positions, charges and forces are `float` (the Rust API's precision for PME); energies
//! and virials `double`.

use std::cell::RefCell;

use onesided::Runtime;
use pme_redist::{Particle, Pme, PmeGrid, Redistribution};

use crate::exchange::{ONESIDED_PATH_ONESIDED, onesided_path, path_of};
use crate::memory::{box_of, bytes_in, bytes_out, pe_of, values_in};
use crate::registry;
use crate::runtime::{onesided_runtime, runtime_of, write_out};
use crate::status::{Failure, guard, onesided_status};

/// An atom as the PME sees it: position (nm), charge (e), global index. The layout of
/// pme-redist's `Particle`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_particle {
    /// Position in nm.
    pub x: [f32; 3],
    /// Charge in e.
    pub q: f32,
    /// Global index.
    pub global: u32,
}

const _: () = assert!(size_of::<onesided_particle>() == size_of::<Particle>());

/// How the PME is built; `onesided_pme_options_default` fills the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_pme_options {
    /// The path of the redistribution, the overlaps between slabs and the FFT's transposes
    /// (default `ONESIDED_PATH_ONESIDED`).
    pub path: onesided_path,
    /// The mesh spacing in nm, from which the sizes follow as GROMACS's `fourierspacing`
    /// (default 0.12).
    pub spacing: f32,
    /// The mesh sizes along x, y, z; `{0, 0, 0}` (the default) takes them from `spacing`.
    pub sizes: [i32; 3],
    /// The B-spline interpolation order, 3 to 12 (default 4).
    pub order: i32,
    /// The Ewald coefficient in 1/nm; 0 (the default) derives it from `cutoff` and
    /// `ewald_rtol` as GROMACS does.
    pub beta: f64,
    /// The real-space cutoff in nm (default 0.9), for `beta`.
    pub cutoff: f64,
    /// GROMACS's `ewald-rtol` (default 1e-5), for `beta`.
    pub ewald_rtol: f64,
    /// The PME ranks, `n_pme_pes` of them (GROMACS's `-npme`); null (the default) for every
    /// PE.
    pub pme_pes: *const i32,
    /// The number of PME ranks listed.
    pub n_pme_pes: usize,
}

/// The energy of a step: the reciprocal energy (kJ/mol, without the self energy and the
/// net-charge correction) and its virial tensor (rows, kJ/mol), the same on every PE.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct onesided_pme_energy {
    /// The reciprocal energy.
    pub energy: f64,
    /// The reciprocal virial, row by row.
    pub virial: [f64; 9],
}

/// The PME: made by `onesided_pme_new`, freed by `onesided_pme_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_pme {
    /// The handle's number (never reused; 0 for none).
    pub id: u64,
}

const PME: &str = "onesided_pme";

/// The redistribution and the mesh (dropped in this order: both collectively).
struct PmeState {
    redistribution: Redistribution<'static>,
    mesh: Pme<'static>,
}

type Shared = RefCell<PmeState>;

/// Fills `options` with the defaults.
///
/// # Safety
/// `options` points to writable memory for one `onesided_pme_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_pme_options_default(options: *mut onesided_pme_options) -> onesided_status {
    guard(|| write_out(options, "options", defaults()))
}

/// The options' defaults.
fn defaults() -> onesided_pme_options {
    onesided_pme_options {
        path: ONESIDED_PATH_ONESIDED,
        spacing: 0.12,
        sizes: [0; 3],
        order: 4,
        beta: 0.0,
        cutoff: 0.9,
        ewald_rtol: 1e-5,
        pme_pes: std::ptr::null(),
        n_pme_pes: 0,
    }
}

/// The Ewald coefficient (1/nm) for a real-space `cutoff` (nm) and GROMACS's `ewald-rtol`,
/// through `beta`.
///
/// # Safety
/// `beta` points to writable memory for one double.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_ewald_coefficient(
    cutoff: f64,
    rtol: f64,
    beta: *mut f64,
) -> onesided_status {
    guard(|| write_out(beta, "beta", pme_redist::ewald_coefficient(cutoff, rtol)?))
}

/// The home atoms from C, as pme-redist's particles.
///
/// # Safety
/// `home` is null with none or points to `n` particles.
unsafe fn particles<'a>(home: *const onesided_particle, n: usize) -> Result<&'a [Particle], Failure> {
    // SAFETY: as this function's contract.
    let bytes = unsafe { bytes_in(home.cast(), n * size_of::<Particle>(), "home") }?;
    if bytes.is_empty() {
        return Ok(&[]);
    }
    // SAFETY: `onesided_particle` is `Particle`'s layout (repr(C), the same fields and size,
    // asserted above), and the pointer is the caller's array of them, so aligned for it.
    Ok(unsafe { std::slice::from_raw_parts(home.cast::<Particle>(), n) })
}

/// Builds the PME over `box_vectors` (three vectors, rows, nm) for this PE's `n_home` home
/// atoms; `options` null for the defaults.
///
/// # Collective
/// Every PE calls it with the same box and options.
///
/// # Errors
/// On every PE: `ONESIDED_ERROR_ARGUMENT` for a box, spacing, sizes, order, beta or PME
/// ranks that cannot serve; `ONESIDED_ERROR_COLLECTIVE` when the PEs pass different ones.
///
/// # Safety
/// `box_vectors` points to 9 doubles; `home` to `n_home` particles (or is null with none);
/// `options` is null or points to options (and its `pme_pes` to `n_pme_pes` values); `out`
/// to writable memory for a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_pme_new(
    rt: onesided_runtime,
    box_vectors: *const f64,
    home: *const onesided_particle,
    n_home: usize,
    options: *const onesided_pme_options,
    out: *mut onesided_pme,
) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_pme { id: 0 })?;
        let rt: &'static Runtime = runtime_of(rt)?;
        // SAFETY: not null; the caller passes options.
        let o = if options.is_null() { defaults() } else { unsafe { *options } };
        // SAFETY: as this function's contract.
        let vectors = unsafe { box_of(box_vectors) }?;
        let pes: Vec<usize> = if o.pme_pes.is_null() {
            (0..rt.n_pes()).collect()
        } else {
            // SAFETY: as this function's contract.
            let listed = unsafe { values_in(o.pme_pes, o.n_pme_pes, "pme_pes") }?;
            listed.iter().map(|&pe| pe_of(pe, "PME PE")).collect::<Result<_, _>>()?
        };
        let order = usize::try_from(o.order).map_err(|_| Failure::argument(format!("order {}", o.order)))?;
        let mut grid = PmeGrid::builder(vectors, &pes).order(order);
        grid = match o.sizes {
            [0, 0, 0] => grid.spacing(o.spacing),
            k if k.iter().all(|&s| s > 0) => grid.sizes(k.map(|s| s as usize)),
            k => return Err(Failure::argument(format!("sizes {k:?}: three positive sizes, or {{0, 0, 0}}"))),
        };
        let grid = grid.build()?;
        let beta = if o.beta > 0.0 { o.beta } else { pme_redist::ewald_coefficient(o.cutoff, o.ewald_rtol)? };
        let path = path_of(o.path)?;
        // SAFETY: as this function's contract.
        let home = unsafe { particles(home, n_home) }?;
        let mesh = Pme::builder(rt, &grid, beta).path(path).collective_build()?;
        let redistribution = Redistribution::builder(rt, grid).path(path).collective_build(home)?;
        let id = registry::insert(PME, RefCell::new(PmeState { redistribution, mesh }))?;
        write_out(out, "out", onesided_pme { id })
    })
}

fn with_pme<T>(pme: onesided_pme, f: impl FnOnce(&mut PmeState) -> Result<T, Failure>) -> Result<T, Failure> {
    let shared = registry::get::<Shared>(PME, pme.id)?;
    let mut state =
        shared.try_borrow_mut().map_err(|_| Failure::argument("the PME is in use by another call"))?;
    f(&mut state)
}

/// One step: sends this PE's `n_home` home atoms to their PME ranks, runs the mesh there,
/// and writes the reciprocal force on each home atom into `forces` (`n_home` triples, home
/// order, kJ mol⁻¹ nm⁻¹) and the step's energy and virial into `energy` (may be null). The
/// home atoms are those the plan was made for, moved by less than its margin
/// (`onesided_pme_plan` after a repartition).
///
/// # Collective
/// Every PE calls it each step.
///
/// # Errors
/// On every PE: an atom that moved too far for the plan, or home atoms other than the
/// plan's (`ONESIDED_ERROR_ARGUMENT`; call `onesided_pme_plan`).
///
/// # Safety
/// `home` points to `n_home` particles; `forces` to `n_home` writable float triples;
/// `energy` is null or points to writable memory for one `onesided_pme_energy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_pme_step(
    pme: onesided_pme,
    home: *const onesided_particle,
    n_home: usize,
    forces: *mut f32,
    energy: *mut onesided_pme_energy,
) -> onesided_status {
    guard(|| {
        // SAFETY: as this function's contract.
        let home = unsafe { particles(home, n_home) }?;
        // SAFETY: as this function's contract.
        let out = unsafe { bytes_out(forces.cast(), n_home * 3 * size_of::<f32>(), "forces") }?;
        if !(forces as usize).is_multiple_of(align_of::<f32>()) {
            return Err(Failure::argument("forces is not aligned for float"));
        }
        let forces: &mut [[f32; 3]] = if out.is_empty() {
            &mut []
        } else {
            // SAFETY: aligned (checked), `n_home` triples of writable floats.
            unsafe { std::slice::from_raw_parts_mut(forces.cast::<[f32; 3]>(), n_home) }
        };
        let total = with_pme(pme, |s| {
            let mut delivered = s.redistribution.redistribute(home)?;
            let share = s.mesh.collective_step(delivered.mesh())?;
            delivered.return_forces(forces)?;
            Ok(s.mesh.collective_energy(share)?)
        })?;
        if !energy.is_null() {
            let flat = total.virial.as_flattened().try_into().expect("nine components");
            write_out(energy, "energy", onesided_pme_energy { energy: total.energy, virial: flat })?;
        }
        Ok(())
    })
}

/// Rebuilds the redistribution's plan for this PE's home atoms now (after a repartition of
/// the host's domains, or every few steps as the atoms drift).
///
/// # Collective
/// Every PE calls it at the same step.
///
/// # Safety
/// `home` points to `n_home` particles (or is null with none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_pme_plan(
    pme: onesided_pme,
    home: *const onesided_particle,
    n_home: usize,
) -> onesided_status {
    guard(|| {
        // SAFETY: as this function's contract.
        let home = unsafe { particles(home, n_home) }?;
        with_pme(pme, |s| Ok(s.redistribution.collective_plan(home)?))
    })
}

/// Frees the PME and sets `*pme` to `{0}`.
///
/// # Collective
/// Every PE frees it, in the same order as its other frees.
///
/// # Safety
/// `pme` points to a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_pme_free(pme: *mut onesided_pme) -> onesided_status {
    // SAFETY: as this function's contract; the handle is a repr(C) struct of one u64.
    guard(|| unsafe { registry::free::<Shared>(pme.cast(), PME, "pme") })
}
