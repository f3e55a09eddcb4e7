//! The bound signatures and type layouts the safe layer relies on, checked against what the C
//! compiler sees through the installed header (the shim records `sizeof` values and macro
//! values at build time). No OpenSHMEM runtime is started: only link-time symbols are read.

use core::ffi::{c_int, c_long, c_longlong, c_ulonglong, c_void};
use core::mem::size_of;

use shmem_sys::*;

#[test]
fn c_type_sizes_match_the_header() {
    // SAFETY: the statics are initialised constants in the shim, never written.
    unsafe {
        assert_eq!(size_of::<shmem_ctx_t>(), shmem_sys_sizeof_ctx);
        assert_eq!(size_of::<c_long>(), shmem_sys_sizeof_long);
        assert_eq!(size_of::<c_longlong>(), shmem_sys_sizeof_long_long);
        assert_eq!(size_of::<usize>(), shmem_sys_sizeof_size_t);
        assert_eq!(size_of::<isize>(), shmem_sys_sizeof_ptrdiff_t);
        // The safe layer's 64-bit atomics and signals use `long long` routines.
        assert_eq!(shmem_sys_sizeof_long_long, 8);
    }
}

#[test]
fn shim_constants_agree_with_the_bound_header() {
    // SAFETY: as above.
    unsafe {
        assert_eq!((shmem_sys_major_version as u32, shmem_sys_minor_version as u32), SPEC_VERSION);
        assert_eq!(SPEC_VERSION, (SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION));
        let cmps = [
            shmem_sys_cmp_eq,
            shmem_sys_cmp_ne,
            shmem_sys_cmp_gt,
            shmem_sys_cmp_ge,
            shmem_sys_cmp_lt,
            shmem_sys_cmp_le,
        ];
        for (i, a) in cmps.iter().enumerate() {
            for b in &cmps[i + 1..] {
                assert_ne!(a, b, "comparison constants must be distinct");
            }
        }
        assert!(shmem_sys_thread_multiple > shmem_sys_thread_single);
        assert!(shmem_sys_reduce_sync_size >= 1);
        assert!(shmem_sys_reduce_min_wrkdata_size >= 1);
        assert!(shmem_sys_sync_value == 0 || shmem_sys_sync_value == -1);
    }
}

#[cfg(shmem_oshmem)]
#[test]
fn oshmem_values_are_those_of_its_header() {
    // Open MPI's shmem.h: `enum shmem_wait_ops { SHMEM_CMP_EQ, ... SHMEM_CMP_GE }` and
    // `#define _SHMEM_SYNC_VALUE (-1)`.
    // SAFETY: as above.
    unsafe {
        assert_eq!(shmem_sys_cmp_eq, 0);
        assert_eq!(shmem_sys_cmp_ge, 5);
        assert_eq!(shmem_sys_sync_value, -1);
        assert_eq!(IMPLEMENTATION, "oshmem");
    }
}

#[cfg(shmem_spec_1_5)]
#[test]
fn team_config_layout() {
    // SAFETY: as above.
    unsafe {
        assert_eq!(size_of::<shmem_team_t>(), shmem_sys_sizeof_team);
        assert_eq!(size_of::<shmem_team_config_t>(), shmem_sys_sizeof_team_config);
        assert_eq!(
            core::mem::offset_of!(shmem_team_config_t, num_contexts),
            shmem_sys_offsetof_team_config_num_contexts
        );
    }
}

/// The signatures the safe layer calls, as function-pointer types: a binding that changes
/// shape fails to compile here rather than misbehave at run time.
#[test]
fn signatures_the_safe_layer_calls() {
    let _: unsafe extern "C" fn(c_int, *mut c_int) -> c_int = shmem_init_thread;
    let _: unsafe extern "C" fn() = shmem_finalize;
    let _: unsafe extern "C" fn() -> c_int = shmem_my_pe;
    let _: unsafe extern "C" fn() -> c_int = shmem_n_pes;
    let _: unsafe extern "C" fn(usize, usize) -> *mut c_void = shmem_align;
    let _: unsafe extern "C" fn(*mut c_void) = shmem_free;
    let _: unsafe extern "C" fn(*const c_void, c_int) -> *mut c_void = shmem_ptr;
    let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) = shmem_putmem;
    let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) = shmem_getmem;
    let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) = shmem_putmem_nbi;
    let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) = shmem_getmem_nbi;
    let _: unsafe extern "C" fn() = shmem_fence;
    let _: unsafe extern "C" fn() = shmem_quiet;
    let _: unsafe extern "C" fn() = shmem_barrier_all;
    let _: unsafe extern "C" fn(*mut c_ulonglong, c_ulonglong, c_int) -> c_ulonglong =
        shmem_ulonglong_atomic_fetch_add;
    let _: unsafe extern "C" fn(*mut c_ulonglong, c_ulonglong, c_ulonglong, c_int) -> c_ulonglong =
        shmem_ulonglong_atomic_compare_swap;
    let _: unsafe extern "C" fn(*mut c_ulonglong, c_ulonglong, c_int) = shmem_ulonglong_atomic_set;
    let _: unsafe extern "C" fn(*mut c_longlong, c_longlong, c_int) -> c_longlong =
        shmem_longlong_atomic_fetch_add;
    let _: unsafe extern "C" fn(*mut c_ulonglong, c_int, c_ulonglong) -> c_int = shmem_ulonglong_test;
    let _: unsafe extern "C" fn(
        *mut c_longlong,
        *const c_longlong,
        c_int,
        c_int,
        c_int,
        c_int,
        *mut c_longlong,
        *mut c_long,
    ) = shmem_longlong_max_to_all;
    let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, c_int, c_int, c_int, *mut c_long) =
        shmem_broadcast64;
    let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, c_int, c_int, *mut c_long) =
        shmem_alltoall64;
    #[cfg(shmem_spec_1_5)]
    {
        let _: unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut u64, u64, c_int, c_int) =
            shmem_putmem_signal;
    }
}
