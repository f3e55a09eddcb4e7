//! MPI's constants as rsmpi's shim gives them, and the checks every raw MPI call of the crate
//! makes on its return code and its counts: one place for what the MPI paths share.

use std::ffi::c_int;

use mpi::ffi;

use crate::error::{Error, Result};

/// The datatype bytes travel as.
pub(crate) fn bytes_type() -> ffi::MPI_Datatype {
    // SAFETY: reading a constant of rsmpi's shim, set before main.
    unsafe { ffi::RSMPI_UINT8_T }
}

/// The datatype of a `u64`.
pub(crate) fn u64_type() -> ffi::MPI_Datatype {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_UINT64_T }
}

/// `MPI_MIN`.
pub(crate) fn min_op() -> ffi::MPI_Op {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_MIN }
}

/// `MPI_ANY_TAG`.
pub(crate) fn any_tag() -> c_int {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_ANY_TAG }
}

/// `MPI_STATUS_IGNORE`.
pub(crate) fn status_ignore() -> *mut ffi::MPI_Status {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_STATUS_IGNORE }
}

/// `MPI_STATUSES_IGNORE`.
pub(crate) fn statuses_ignore() -> *mut ffi::MPI_Status {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_STATUSES_IGNORE }
}

/// `MPI_REQUEST_NULL`.
pub(crate) fn request_null() -> ffi::MPI_Request {
    // SAFETY: as for bytes_type.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// An MPI return code as a result.
pub(crate) fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == 0 { Ok(()) } else { Err(Error::Mpi { call, code }) }
}

/// A byte count as an MPI count.
pub(crate) fn count_of(bytes: usize) -> Result<c_int> {
    c_int::try_from(bytes).map_err(|_| {
        Error::InvalidArgument(format!(
            "{bytes} bytes exceed what one MPI message can count (i32::MAX): split the message"
        ))
    })
}
