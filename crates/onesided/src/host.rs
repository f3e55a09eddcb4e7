//! A runtime attached to a host's MPI ([`Runtime::attach`](crate::Runtime::attach)): the host
//! initialised MPI and finalises it, so OpenSHMEM must end without ending MPI.
//!
//! Sandia OpenSHMEM leaves MPI alone, and its `shmem_finalize` runs when the runtime is
//! dropped. Open MPI's `shmem_finalize` also calls `ompi_mpi_finalize`, which would end the
//! host's MPI behind its back; skipping it leaves OpenSHMEM's own finalisation for the exit,
//! after MPI is gone, where every PE crashed. So under Open MPI an attached runtime leaves
//! OpenSHMEM running when dropped, and finalises it from inside the host's `MPI_Finalize`:
//! the delete callback of an attribute on `MPI_COMM_SELF`, which MPI runs first, while
//! everything still works. There Open MPI's state is `FINALIZE_STARTED`, which OSHMEM takes
//! for MPI still running; for the call the state reads `FINALIZE_PAST_COMM_SELF_DESTRUCT`,
//! so OSHMEM ends itself and leaves MPI's end to the call already under way (Open MPI 4.1;
//! found by trial: with `FINALIZE_COMPLETED` OSHMEM's own teardown fails).

#[cfg(not(shmem_sos))]
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(not(shmem_sos))]
use mpi::ffi;

use crate::error::{Error, Result};

/// No attached runtime has been made.
const NONE: u8 = 0;
/// An attached runtime is alive: the host must not finalise MPI yet.
const ALIVE: u8 = 1;
/// The attached runtime is gone; OpenSHMEM ends in the host's `MPI_Finalize`.
const DROPPED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(NONE);

/// Arranges OpenSHMEM's end for a runtime about to attach to the host's MPI, before
/// OpenSHMEM starts (so that a refusal leaves nothing to end): under Open MPI, the callback
/// in the host's `MPI_Finalize`, which does nothing until [`started`] says OpenSHMEM runs;
/// nothing under Sandia OpenSHMEM.
///
/// # Errors
/// [`Error::InitFailed`] when MPI refuses the attribute.
pub(crate) fn arrange_end() -> Result<()> {
    #[cfg(not(shmem_sos))]
    register()?;
    Ok(())
}

/// OpenSHMEM started for an attached runtime: from here the host's `MPI_Finalize` must find
/// the runtime gone.
pub(crate) fn started() {
    STATE.store(ALIVE, Ordering::SeqCst);
}

/// Ends OpenSHMEM for a runtime going away: at once, unless it is attached under Open MPI,
/// where the host's `MPI_Finalize` will.
pub(crate) fn end_shmem(attached: bool) {
    if attached {
        STATE.store(DROPPED, Ordering::SeqCst);
        if cfg!(not(shmem_sos)) {
            return;
        }
    }
    // SAFETY: OpenSHMEM is initialised, and its last user (the runtime) is going away.
    unsafe { shmem_sys::shmem_finalize() };
}

/// The error for a host whose MPI cannot carry the runtime: none initialised, too little
/// thread support, or under OSHMEM an Open MPI other than the 4.1 whose finalisation the
/// callback is made for.
pub(crate) fn check_host_mpi() -> Result<()> {
    if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
        return Err(Error::MpiNotInitialized);
    }
    let level = mpi::environment::threading_support();
    if level != mpi::environment::Threading::Multiple {
        return Err(Error::HostThreadLevel { provided: format!("{level:?}") });
    }
    #[cfg(not(shmem_sos))]
    {
        let version = mpi::environment::library_version().unwrap_or_default();
        if !version.contains("Open MPI v4.1") {
            let first = version.lines().next().unwrap_or("an unknown MPI").to_string();
            return Err(Error::HostMpiUntested { version: first });
        }
    }
    Ok(())
}

#[cfg(not(shmem_sos))]
unsafe extern "C" {
    /// Open MPI's progress through initialisation and finalisation (`ompi_mpi_state`,
    /// exported by libmpi).
    static mut ompi_mpi_state: c_int;
}

/// `OMPI_MPI_STATE_FINALIZE_PAST_COMM_SELF_DESTRUCT` in Open MPI 4.1.
#[cfg(not(shmem_sos))]
const PAST_COMM_SELF_DESTRUCT: c_int = 4;

/// Puts the callback on `MPI_COMM_SELF`.
#[cfg(not(shmem_sos))]
fn register() -> Result<()> {
    let mut key: c_int = 0;
    // SAFETY: MPI is initialised (checked at attach); the callbacks are plain extern "C"
    // functions that never unwind.
    let code = unsafe {
        ffi::MPI_Comm_create_keyval(
            Some(never_copied),
            Some(at_host_finalize),
            &mut key,
            std::ptr::null_mut(),
        )
    };
    let code = if code == 0 {
        // SAFETY: as above; the attribute carries no value.
        unsafe { ffi::MPI_Comm_set_attr(ffi::RSMPI_COMM_SELF, key, std::ptr::null_mut()) }
    } else {
        code
    };
    if code != 0 { Err(Error::InitFailed { code }) } else { Ok(()) }
}

#[cfg(not(shmem_sos))]
/// `MPI_COMM_NULL_COPY_FN`: a duplicated communicator does not carry the attribute (Open
/// MPI refuses a null copy function).
unsafe extern "C" fn never_copied(
    _: ffi::MPI_Comm,
    _: c_int,
    _: *mut c_void,
    _: *mut c_void,
    _: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: MPI passes a valid pointer to the flag.
    unsafe { *flag = 0 };
    0
}

#[cfg(not(shmem_sos))]
/// Runs first in the host's `MPI_Finalize`: OpenSHMEM's end, with MPI still working.
unsafe extern "C" fn at_host_finalize(_: ffi::MPI_Comm, _: c_int, _: *mut c_void, _: *mut c_void) -> c_int {
    match STATE.load(Ordering::SeqCst) {
        DROPPED => {
            // SAFETY: the host's MPI_Finalize runs this at its start on the thread that
            // finalises MPI, with no MPI call of the program left (MPI's rule for
            // MPI_Finalize); the state is restored before the finalisation goes on and reads
            // it. OpenSHMEM is initialised and its runtime is gone.
            unsafe {
                let saved = ompi_mpi_state;
                ompi_mpi_state = PAST_COMM_SELF_DESTRUCT;
                shmem_sys::shmem_finalize();
                ompi_mpi_state = saved;
            }
        }
        ALIVE => {
            use std::io::Write;
            // Not eprintln!, which panics when stderr fails: nothing unwinds out of here.
            let _ = writeln!(
                std::io::stderr(),
                "onesided: MPI_Finalize was called while the runtime attached to it is alive: \
                 drop the onesided Runtime (every symmetric object first) before MPI_Finalize"
            );
            // SAFETY: ending the process; nothing runs after.
            unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1) };
        }
        _ => {}
    }
    0
}
