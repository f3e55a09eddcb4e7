//! Smoke test of the raw bindings: 2 PEs put and get through shmem-sys alone, without the
//! safe layer. Started by cargo, it launches itself with 2 PEs through scripts/pe-run.

use std::ffi::c_void;

use onesided_suite::launch;

const PES: usize = 2;
const LEN: usize = 16;

fn main() {
    if !launch::under_launcher() {
        println!("shmem_sys_smoke: launching {PES} PEs: {}", launch::PE_RUN);
        let status = launch::relaunch_self(PES).expect("start scripts/pe-run");
        assert!(status.success(), "the {PES}-PE run failed: {status}");
        println!("shmem_sys_smoke: {PES} PEs ok");
        return;
    }
    // SAFETY: a straight-line OpenSHMEM program: init, symmetric allocation, puts and gets of
    // in-bounds ranges between barriers, free, finalize.
    unsafe {
        shmem_sys::shmem_init();
        let me = shmem_sys::shmem_my_pe();
        let n = shmem_sys::shmem_n_pes();
        assert_eq!(n as usize, PES, "this test needs exactly {PES} PEs");
        let other = 1 - me;
        let inbox = shmem_sys::shmem_malloc(LEN * 8).cast::<u64>();
        assert!(!inbox.is_null());
        for i in 0..LEN {
            inbox.add(i).write(u64::MAX);
        }
        shmem_sys::shmem_barrier_all();

        // Value = sender PE * 1000 + index, so a misplaced element is caught.
        let outgoing: Vec<u64> = (0..LEN as u64).map(|i| me as u64 * 1000 + i).collect();
        shmem_sys::shmem_putmem(inbox.cast::<c_void>(), outgoing.as_ptr().cast(), LEN * 8, other);
        shmem_sys::shmem_barrier_all();
        for i in 0..LEN {
            assert_eq!(inbox.add(i).read(), other as u64 * 1000 + i as u64, "PE {me} element {i}");
        }

        let mut fetched = vec![0u64; LEN];
        shmem_sys::shmem_getmem(fetched.as_mut_ptr().cast(), inbox.cast::<c_void>(), LEN * 8, other);
        let expected: Vec<u64> = (0..LEN as u64).map(|i| me as u64 * 1000 + i).collect();
        assert_eq!(fetched, expected, "PE {me} got back what it put into PE {other}");

        shmem_sys::shmem_barrier_all();
        shmem_sys::shmem_free(inbox.cast());
        println!("PE {me}: put and get through the raw bindings ok");
        shmem_sys::shmem_finalize();
    }
}
