//! The values of the installed header's macros that differ between implementations, read
//! once from the shim (never Rust literals: `SHMEM_CMP_GE`, `SHMEM_SYNC_VALUE` and the sync
//! sizes are not the same in Open MPI's OSHMEM and Sandia OpenSHMEM).

use std::ffi::{c_int, c_long};

/// Values of the installed header's macros, read once from the shim.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Constants {
    pub cmp_ge: c_int,
    pub sync_value: c_long,
    pub psync_len: usize,
    pub reduce_min_wrkdata: usize,
    #[cfg_attr(not(shmem_spec_1_5), allow(dead_code))]
    pub signal_set: c_int,
}

impl Constants {
    pub(crate) fn read() -> Self {
        // SAFETY: the shim's statics are constants initialised at load time and never written.
        unsafe {
            Constants {
                cmp_ge: shmem_sys::shmem_sys_cmp_ge,
                sync_value: shmem_sys::shmem_sys_sync_value,
                // One pSync array serves reductions and broadcasts; Sandia OpenSHMEM defines
                // some sync sizes as 0 on LP64 targets, hence the floor of 1.
                psync_len: shmem_sys::shmem_sys_reduce_sync_size
                    .max(shmem_sys::shmem_sys_bcast_sync_size)
                    .max(shmem_sys::shmem_sys_barrier_sync_size)
                    .max(1),
                reduce_min_wrkdata: shmem_sys::shmem_sys_reduce_min_wrkdata_size.max(1),
                #[cfg(shmem_spec_1_5)]
                signal_set: shmem_sys::shmem_sys_signal_set,
                #[cfg(not(shmem_spec_1_5))]
                signal_set: 0,
            }
        }
    }
}
