//! The runtime from C: started alone (`onesided_init`) or inside a host that initialised MPI
//! (`onesided_attach`), its PE and PE count, barrier, quiet, abort, and its end.

use std::ffi::{c_char, c_void};

use onesided::Runtime;

use crate::registry;
use crate::status::{Failure, guard, onesided_status};

/// A runtime: MPI and OpenSHMEM for this process. Made by `onesided_init` or
/// `onesided_attach`, ended by `onesided_runtime_free`; `{0}` is no runtime.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_runtime {
    /// The handle's number (never reused; 0 for none).
    pub id: u64,
}

/// Writes `value` through `out`, refused when `out` is null.
pub(crate) fn write_out<T>(out: *mut T, what: &str, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::argument(format!("{what} is a null pointer: pass where to write it")));
    }
    // SAFETY: not null; the caller passes a pointer to writable memory for one `T`, as the
    // header documents for every out-parameter.
    unsafe { out.write(value) };
    Ok(())
}

/// The runtime a handle names, refused for a null pointer to it.
pub(crate) fn runtime_of(rt: onesided_runtime) -> Result<&'static Runtime, Failure> {
    registry::runtime(rt.id)
}

/// Starts MPI and OpenSHMEM, both with `MPI_THREAD_MULTIPLE`, for a program that has not
/// started MPI: the runtime finalises both when freed.
///
/// # Collective
/// Every process of the job calls it.
///
/// # Errors
/// `ONESIDED_ERROR_INIT` when MPI is initialised already (use `onesided_attach`), when the
/// libraries lack thread support, or the launch, settings or environment are wrong (the
/// message says which and what to do).
///
/// # Safety
/// `out` points to writable memory for one `onesided_runtime`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_init(out: *mut onesided_runtime) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_runtime { id: 0 })?;
        let id = registry::start(Runtime::init()?)?;
        write_out(out, "out", onesided_runtime { id })
    })
}

/// Joins a program that initialised MPI itself with `MPI_THREAD_MULTIPLE`, as MD codes do
/// before anything else: starts OpenSHMEM on its ranks and leaves MPI to it. Free the runtime
/// before `MPI_Finalize`; the program finalises MPI as it always does (under Open MPI,
/// OpenSHMEM ends inside that `MPI_Finalize`).
///
/// `comm` points to the program's `MPI_Comm` (of the MPI this library was built with), or is
/// null for `MPI_COMM_WORLD`. OpenSHMEM's PEs are the world's ranks, so the communicator
/// must span the world (`MPI_COMM_WORLD` or a duplicate of it): a sub-communicator is
/// refused.
///
/// # Collective
/// Every rank of the program's `MPI_COMM_WORLD` calls it.
///
/// # Errors
/// `ONESIDED_ERROR_INIT` when MPI is not initialised, was initialised with less than
/// `MPI_THREAD_MULTIPLE` (call `MPI_Init_thread` with it), or as for `onesided_init`;
/// `ONESIDED_ERROR_ARGUMENT` for a communicator other than the world.
///
/// # Safety
/// `out` points to writable memory for one `onesided_runtime`; `comm` is null or points to
/// a valid `MPI_Comm`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_attach(comm: *const c_void, out: *mut onesided_runtime) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_runtime { id: 0 })?;
        if !comm.is_null() {
            // SAFETY: the caller passes a pointer to a valid `MPI_Comm` of this MPI.
            let comm = unsafe { *(comm as *const mpi::ffi::MPI_Comm) };
            spans_world(comm)?;
        }
        let id = registry::start(Runtime::attach()?)?;
        write_out(out, "out", onesided_runtime { id })
    })
}

/// Refuses a communicator that is not the world's ranks in the world's order.
fn spans_world(comm: mpi::ffi::MPI_Comm) -> Result<(), Failure> {
    let mut initialised = 0;
    // SAFETY: `MPI_Initialized` may be called at any time; the out-pointer is valid.
    unsafe { mpi::ffi::MPI_Initialized(&mut initialised) };
    if initialised == 0 {
        return Err(onesided::Error::MpiNotInitialized.into());
    }
    let mut result = 0;
    // SAFETY: MPI is initialised; `comm` is the host's communicator and the world's handle is
    // MPI's own; the out-pointer is valid.
    let code = unsafe { mpi::ffi::MPI_Comm_compare(comm, mpi::ffi::RSMPI_COMM_WORLD, &mut result) };
    let (ident, congruent) = (mpi::ffi::MPI_IDENT as i32, mpi::ffi::MPI_CONGRUENT as i32);
    if code != 0 || (result != ident && result != congruent) {
        return Err(Failure::argument(
            "the communicator passed to onesided_attach is not MPI_COMM_WORLD or a duplicate of \
             it: OpenSHMEM's PEs are the world's ranks; pass NULL or &MPI_COMM_WORLD",
        ));
    }
    Ok(())
}

/// Ends the runtime: frees every object still alive that was made from it (the last made
/// first), ends OpenSHMEM, and MPI when `onesided_init` started it; sets `*rt` to `{0}`.
/// A host that attached finalises MPI itself afterwards.
///
/// # Collective
/// Every PE calls it.
///
/// # Errors
/// `ONESIDED_ERROR_HANDLE` for a runtime already ended or never started.
///
/// # Safety
/// `rt` points to a `onesided_runtime`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_runtime_free(rt: *mut onesided_runtime) -> onesided_status {
    guard(|| {
        if rt.is_null() {
            return Err(Failure::argument("rt is a null pointer: pass &runtime"));
        }
        // SAFETY: not null; the caller passes a pointer to a runtime handle.
        let id = unsafe { (*rt).id };
        registry::end(id)?;
        // SAFETY: as above.
        unsafe { (*rt).id = 0 };
        Ok(())
    })
}

/// This PE's number, `0 .. n_pes - 1`, through `pe`.
///
/// # Safety
/// `pe` points to writable memory for one `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_my_pe(rt: onesided_runtime, pe: *mut i32) -> onesided_status {
    guard(|| write_out(pe, "pe", runtime_of(rt)?.my_pe() as i32))
}

/// The number of PEs in the job, through `n`.
///
/// # Safety
/// `n` points to writable memory for one `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_n_pes(rt: onesided_runtime, n: *mut i32) -> onesided_status {
    guard(|| write_out(n, "n", runtime_of(rt)?.n_pes() as i32))
}

/// Waits until every PE has called it, with every put issued before it complete.
///
/// # Collective
/// Every PE calls it.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_barrier(rt: onesided_runtime) -> onesided_status {
    guard(|| {
        runtime_of(rt)?.barrier();
        Ok(())
    })
}

/// Lets OpenSHMEM and MPI move what is in flight, without waiting: a force kernel calls it
/// between chunks of its pairs while a split step's exchange is in flight
/// (`onesided_halo_start_x`, `onesided_halo_start_f`), so that across nodes, where the
/// transports move a message only while its PEs call into them, the data travels during the
/// kernel. About a microsecond.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_progress(rt: onesided_runtime) -> onesided_status {
    guard(|| {
        runtime_of(rt)?.progress();
        Ok(())
    })
}

/// Waits until every put this PE issued is complete at its target.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_quiet(rt: onesided_runtime) -> onesided_status {
    guard(|| {
        runtime_of(rt)?.quiet();
        Ok(())
    })
}

/// Ends the whole job with status `code`, from this PE alone: for an error the other PEs do
/// not see (`onesided_last_error_every_pe`
/// returns 0), which would leave them waiting. Prints `message` (when not null) on stderr
/// first, with the PE. Never returns.
///
/// # Safety
/// `message` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_abort(rt: onesided_runtime, code: i32, message: *const c_char) -> ! {
    if !message.is_null() {
        // SAFETY: not null; the caller passes a NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(message) }.to_string_lossy();
        match crate::status::current_pe() {
            Some(pe) => eprintln!("PE {pe}: {text}"),
            None => eprintln!("{text}"),
        }
    }
    match runtime_of(rt) {
        Ok(rt) => rt.abort(code),
        Err(_) => {
            let mut initialised = 0;
            let mut finalised = 0;
            // SAFETY: both may be called at any time; the out-pointers are valid.
            unsafe {
                mpi::ffi::MPI_Initialized(&mut initialised);
                mpi::ffi::MPI_Finalized(&mut finalised);
            }
            if initialised != 0 && finalised == 0 {
                // SAFETY: MPI is initialised and not finalised; the world is MPI's own handle.
                unsafe { mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, code) };
            }
            std::process::exit(code)
        }
    }
}

/// The library's version, `"0.1.0"`: a static string.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
