//! The C types of the halo exchange: precision, image and balancing choices, the options,
//! the handle, the step's view, the home atoms and the host's per-atom fields.

use crate::exchange::onesided_path;

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
    /// The home atoms (increasing indices) in some neighbour's halo, whose forces
    /// `onesided_halo_finish_f` completes: a host that moved the others while the forces
    /// travelled (`onesided_halo_settled`) moves these now. Valid until the next repartition.
    pub returning: *const u32,
    /// The number of them.
    pub n_returning: usize,
}

/// The home atoms while their halo forces travel, between `onesided_halo_start_f` and
/// `onesided_halo_finish_f`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_halo_settled {
    /// `count` coordinate triples of the home atoms, to move.
    pub coordinates: *mut core::ffi::c_void,
    /// `count` force triples: final for `atoms`, still to be added to for the others.
    pub forces: *mut core::ffi::c_void,
    /// The number of home atoms.
    pub count: usize,
    /// The home atoms (increasing indices) in no neighbour's halo, whose forces are final.
    pub atoms: *const u32,
    /// The number of them.
    pub n_atoms: usize,
}

/// One array of the host's per-atom state in home order, which a repartition moves with the
/// atoms: `bytes_per_atom` bytes per atom, `stride` bytes apart, room for `capacity` atoms.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_atom_field {
    /// The first atom's entry.
    pub data: *mut core::ffi::c_void,
    /// The bytes of one atom's entry.
    pub bytes_per_atom: usize,
    /// The bytes from one atom's entry to the next: 0 (or `bytes_per_atom`) for a contiguous
    /// array, more for a member of an array of structs (`sizeof` the struct).
    pub stride: usize,
    /// How many atoms' entries fit.
    pub capacity: usize,
}

impl onesided_atom_field {
    /// The step from one entry to the next.
    pub(crate) fn step(&self) -> usize {
        if self.stride == 0 { self.bytes_per_atom } else { self.stride }
    }

    /// The bytes `atoms` entries span, from `data`.
    pub(crate) fn span(&self, atoms: usize) -> usize {
        if atoms == 0 { 0 } else { (atoms - 1) * self.step() + self.bytes_per_atom }
    }
}
