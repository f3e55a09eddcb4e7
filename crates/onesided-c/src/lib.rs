//! The C ABI of onesided: what a code in C, C++ or Fortran calls, through `onesided.h`.
//!
//! Every object is an opaque handle (a struct holding a number, never a pointer): a handle
//! freed, never made, of another kind or from another thread is refused with
//! `ONESIDED_ERROR_HANDLE`, never followed. Every call returns an [`onesided_status`]; on an
//! error, [`onesided_last_error`] gives a message naming the PE, what went wrong and what to
//! do, and [`onesided_last_error_every_pe`] says whether every PE got it from the same
//! collective call (end normally) or possibly this PE alone (end the job with
//! [`onesided_abort`]). No panic crosses into C: one becomes `ONESIDED_ERROR_INTERNAL`.
//!
//! Calls come from the thread that started the runtime. Collective calls (those whose
//! documentation says **Collective**) are made by every PE in the same order; one that some
//! PEs skip ends the job at `ONESIDED_WAIT_TIMEOUT` with a message naming the call, never a
//! silent hang.
//!
//! - [`runtime`]: start ([`onesided_init`]) or join a host's MPI ([`onesided_attach`]), PE
//!   and count, barrier, quiet, abort, end.
//! - [`memory`]: symmetric bytes, put, get, put with signal, signals and their waits.
//! - [`exchange`]: the send-receive in `MPI_Sendrecv`'s shape, on any path.
//! - [`packed`]: the same messages packed by the host where they go and unpacked where they
//!   landed.
//! - [`halo`]: md-halo's halo exchange: build, `move_x`, the step's view, `move_f` with shift
//!   forces, the home atoms, repartition with the host's per-atom state, spread.
//! - [`pme`]: pme-redist's PME: the redistribution and the mesh, a step with its forces,
//!   energy and virial, the plan rebuilt.
//!
//! [`onesided_last_error`]: status::onesided_last_error
//! [`onesided_last_error_every_pe`]: status::onesided_last_error_every_pe
//! [`onesided_abort`]: runtime::onesided_abort
//! [`onesided_init`]: runtime::onesided_init
//! [`onesided_attach`]: runtime::onesided_attach
//! [`onesided_status`]: status::onesided_status
#![deny(missing_docs)]

pub mod exchange;
pub mod halo;
pub mod memory;
pub mod packed;
pub mod pme;
mod registry;
pub mod runtime;
pub mod status;
