//! What every call returns (`onesided_status`), the message of the last error on the calling
//! thread (`onesided_last_error`), which PEs see it (`onesided_last_error_every_pe`), and
//! the guard every entry point runs its body in, so that no panic crosses into C.

use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use onesided::{AnyError, ErrorScope};

/// What a call of the C ABI returns. Every value but `ONESIDED_OK` leaves a message naming the
/// PE, what went wrong and what to do in `onesided_last_error`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum onesided_status {
    /// The call did what it says.
    ONESIDED_OK = 0,
    /// An argument is wrong: a null pointer, a size that does not match, a PE out of range,
    /// a name that is not UTF-8, a message larger than its room.
    ONESIDED_ERROR_ARGUMENT = 1,
    /// A handle that is null, already freed, of another kind, or made on another thread.
    ONESIDED_ERROR_HANDLE = 2,
    /// The PEs called a collective differently (sizes, partners or paths that differ), or
    /// not all of them took part in time.
    ONESIDED_ERROR_COLLECTIVE = 3,
    /// Starting the runtime failed: MPI missing or with too little thread support, the
    /// launch, the settings, the environment.
    ONESIDED_ERROR_INIT = 4,
    /// The symmetric heap is too small or was used differently on different PEs.
    ONESIDED_ERROR_HEAP = 5,
    /// A wait passed its deadline (`ONESIDED_WAIT_TIMEOUT`): a partner did not take part.
    ONESIDED_ERROR_TIMEOUT = 6,
    /// MPI or OpenSHMEM reported an error.
    ONESIDED_ERROR_LIBRARY = 7,
    /// A defect inside the library (a panic caught at the boundary): please report it with
    /// the message.
    ONESIDED_ERROR_INTERNAL = 8,
}

thread_local! {
    /// The last error on this thread: its message, and whether every PE sees it.
    static LAST: RefCell<Option<(CString, bool)>> = const { RefCell::new(None) };
    /// This thread's PE while a runtime is alive on it, for messages.
    static PE: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Records this thread's PE when its runtime starts (`None` when it ends).
pub(crate) fn set_pe(pe: Option<usize>) {
    PE.with(|cell| cell.set(pe));
}

/// This thread's PE while a runtime is alive on it; before one starts (or after it ended),
/// the process's rank in MPI's world while MPI runs, which will be its PE.
pub(crate) fn current_pe() -> Option<usize> {
    PE.with(Cell::get).or_else(|| {
        let (mut initialised, mut finalised) = (0, 0);
        // SAFETY: both may be called at any time; the out-pointers are valid.
        unsafe {
            mpi::ffi::MPI_Initialized(&mut initialised);
            mpi::ffi::MPI_Finalized(&mut finalised);
        }
        if initialised == 0 || finalised != 0 {
            return None;
        }
        let mut rank = 0;
        // SAFETY: MPI runs; the world is MPI's own handle; the out-pointer is valid.
        let code = unsafe { mpi::ffi::MPI_Comm_rank(mpi::ffi::RSMPI_COMM_WORLD, &mut rank) };
        (code == 0).then_some(rank as usize)
    })
}

/// An error of a call, on its way to C: the status and what `AnyError` says.
pub(crate) struct Failure {
    pub(crate) status: onesided_status,
    pub(crate) message: String,
    pub(crate) every_pe: bool,
}

impl Failure {
    /// A mistake in the arguments of a call, seen by this PE.
    pub(crate) fn argument(message: impl Into<String>) -> Failure {
        Failure { status: onesided_status::ONESIDED_ERROR_ARGUMENT, message: message.into(), every_pe: false }
    }

    /// A bad handle, seen by this PE.
    pub(crate) fn handle(message: impl Into<String>) -> Failure {
        Failure { status: onesided_status::ONESIDED_ERROR_HANDLE, message: message.into(), every_pe: false }
    }
}

impl From<AnyError> for Failure {
    fn from(error: AnyError) -> Failure {
        let status = match error.downcast_ref::<onesided::Error>() {
            Some(e) => status_of(e),
            None => onesided_status::ONESIDED_ERROR_ARGUMENT,
        };
        Failure { status, message: error.to_string(), every_pe: error.scope() == ErrorScope::EveryPe }
    }
}

impl From<md_halo::Error> for Failure {
    fn from(error: md_halo::Error) -> Failure {
        let status = match &error {
            md_halo::Error::Comm(inner) => status_of(inner),
            md_halo::Error::CollectiveConfig(_) | md_halo::Error::PlanMismatch(_) => {
                onesided_status::ONESIDED_ERROR_COLLECTIVE
            }
            _ => onesided_status::ONESIDED_ERROR_ARGUMENT,
        };
        Failure { status, ..AnyError::from(error).into() }
    }
}

impl From<pme_redist::Error> for Failure {
    fn from(error: pme_redist::Error) -> Failure {
        let status = match &error {
            pme_redist::Error::Comm(inner) => status_of(inner),
            pme_redist::Error::CollectiveConfig(_) => onesided_status::ONESIDED_ERROR_COLLECTIVE,
            _ => onesided_status::ONESIDED_ERROR_ARGUMENT,
        };
        Failure { status, ..AnyError::from(error).into() }
    }
}

impl From<onesided::Error> for Failure {
    fn from(error: onesided::Error) -> Failure {
        AnyError::from(error).into()
    }
}

/// The status of one of onesided's errors.
fn status_of(error: &onesided::Error) -> onesided_status {
    use onesided::Error as E;
    use onesided_status as S;
    match error {
        E::AlreadyInitialized
        | E::MpiAlreadyInitialized
        | E::MpiNotInitialized
        | E::HostThreadLevel { .. }
        | E::HostMpiUntested { .. }
        | E::ThreadSupport { .. }
        | E::InitFailed { .. }
        | E::Environment { .. }
        | E::NodeHeap { .. }
        | E::Launch { .. }
        | E::SettingsDiffer { .. }
        | E::AddressRandomisation { .. } => S::ONESIDED_ERROR_INIT,
        E::HeapExhausted { .. }
        | E::HeapTooSmall { .. }
        | E::HeapDiverged { .. }
        | E::AsymmetricAllocation { .. }
        | E::CapacityFrozen { .. } => S::ONESIDED_ERROR_HEAP,
        E::WaitTimeout { .. } => S::ONESIDED_ERROR_TIMEOUT,
        E::Mpi { .. } => S::ONESIDED_ERROR_LIBRARY,
        E::CollectiveArgument(_) => S::ONESIDED_ERROR_COLLECTIVE,
        E::Exchange { .. } if error.scope() == ErrorScope::EveryPe => S::ONESIDED_ERROR_COLLECTIVE,
        _ => S::ONESIDED_ERROR_ARGUMENT,
    }
}

/// Runs the body of an entry point: its error, or a panic inside it, becomes a status and the
/// thread's last error (prefixed with the PE when a runtime is alive on this thread).
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> onesided_status {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Err(Failure {
            status: onesided_status::ONESIDED_ERROR_INTERNAL,
            message: format!("internal error in onesided ({what}); please report it with this message"),
            every_pe: false,
        })
    });
    match outcome {
        Ok(()) => onesided_status::ONESIDED_OK,
        Err(Failure { status, message, every_pe }) => {
            let text = match current_pe() {
                Some(pe) if !message.starts_with("PE ") => format!("PE {pe}: {message}"),
                _ => message,
            };
            // A message with a NUL inside keeps what comes before it.
            let text = CString::new(text).unwrap_or_else(|e| {
                let end = e.nul_position();
                CString::new(&e.into_vec()[..end]).unwrap_or_default()
            });
            LAST.with(|last| *last.borrow_mut() = Some((text, every_pe)));
            status
        }
    }
}

/// The message of the last error on the calling thread: which PE, what went wrong, what to
/// do. An empty string when no call on this thread has failed. The text stays valid until
/// the next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_last_error() -> *const c_char {
    const EMPTY: &std::ffi::CStr = c"";
    LAST.with(|last| match &*last.borrow() {
        Some((text, _)) => text.as_ptr(),
        None => EMPTY.as_ptr(),
    })
}

/// Whether every PE returned the last error on the calling thread from the same collective
/// call (1), so that the PEs can end normally together (free the runtime, finalise MPI, exit
/// with a failure status), or possibly this PE alone (0), which leaves the others waiting:
/// end the job with `onesided_abort`.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_last_error_every_pe() -> i32 {
    LAST.with(|last| last.borrow().as_ref().is_some_and(|(_, every)| *every) as i32)
}

/// The name of a status, as in this header (`"ONESIDED_ERROR_HEAP"`), for messages; a
/// static string, never null (`"not a onesided_status"` for a value that is none). It takes
/// an `int`, so that any value a C program holds is safe to pass.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_status_name(status: i32) -> *const c_char {
    use onesided_status as S;
    const NAMES: [(onesided_status, &std::ffi::CStr); 9] = [
        (S::ONESIDED_OK, c"ONESIDED_OK"),
        (S::ONESIDED_ERROR_ARGUMENT, c"ONESIDED_ERROR_ARGUMENT"),
        (S::ONESIDED_ERROR_HANDLE, c"ONESIDED_ERROR_HANDLE"),
        (S::ONESIDED_ERROR_COLLECTIVE, c"ONESIDED_ERROR_COLLECTIVE"),
        (S::ONESIDED_ERROR_INIT, c"ONESIDED_ERROR_INIT"),
        (S::ONESIDED_ERROR_HEAP, c"ONESIDED_ERROR_HEAP"),
        (S::ONESIDED_ERROR_TIMEOUT, c"ONESIDED_ERROR_TIMEOUT"),
        (S::ONESIDED_ERROR_LIBRARY, c"ONESIDED_ERROR_LIBRARY"),
        (S::ONESIDED_ERROR_INTERNAL, c"ONESIDED_ERROR_INTERNAL"),
    ];
    let name = NAMES.iter().find(|(s, _)| *s as i32 == status).map_or(c"not a onesided_status", |(_, n)| n);
    name.as_ptr()
}
