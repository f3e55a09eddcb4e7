//! One error an engine can `?` across the crates ([`AnyError`]), which keeps what each
//! error says of the PEs that see it ([`ScopedError::scope`]).

use std::fmt;

use crate::error::{Error, ErrorScope};

/// An error that says which PEs see it: onesided's, md-halo's and pme-redist's implement it,
/// and an engine's own error type may, so that [`AnyError`] takes them all.
pub trait ScopedError: std::error::Error + Send + Sync + 'static {
    /// Whether every PE returns this error from the same call ([`ErrorScope::EveryPe`]) or
    /// possibly this PE alone ([`ErrorScope::ThisPe`]: end the job with
    /// [`Runtime::abort`](crate::Runtime::abort)).
    fn scope(&self) -> ErrorScope;
}

impl ScopedError for Error {
    fn scope(&self) -> ErrorScope {
        Error::scope(self)
    }
}

/// Any of the crates' errors, for an engine's step that calls them all: `?` converts
/// onesided's, md-halo's and pme-redist's errors (every [`ScopedError`]) and I/O errors
/// (this PE's) into it, and [`scope`](Self::scope) still says what to do next.
///
/// ```
/// use onesided::{AnyError, ErrorScope};
///
/// fn step() -> Result<(), AnyError> {
///     Err(onesided::Error::InvalidArgument("no such buffer".into()))?;
///     Ok(())
/// }
///
/// let error = step().unwrap_err();
/// assert_eq!(error.scope(), ErrorScope::ThisPe);
/// assert!(error.downcast_ref::<onesided::Error>().is_some());
/// ```
pub struct AnyError(Box<dyn ScopedError>);

impl AnyError {
    /// Whether every PE returns this error from the same call, or possibly this PE alone.
    pub fn scope(&self) -> ErrorScope {
        self.0.scope()
    }

    /// The error as its own type, when it is one (`md_halo::Error`, say), to match on it.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        let error: &(dyn std::error::Error + 'static) = &*self.0;
        error.downcast_ref::<E>()
    }

    /// The error inside, as the one its crate made.
    pub fn inner(&self) -> &(dyn ScopedError + 'static) {
        &*self.0
    }
}

impl<E: ScopedError> From<E> for AnyError {
    fn from(error: E) -> AnyError {
        AnyError(Box::new(error))
    }
}

/// An I/O error, this PE's alone: a file only this PE writes (a trajectory, a checkpoint).
#[derive(Debug)]
struct ThisPeIo(std::io::Error);

impl fmt::Display for ThisPeIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ThisPeIo {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl ScopedError for ThisPeIo {
    fn scope(&self) -> ErrorScope {
        ErrorScope::ThisPe
    }
}

impl From<std::io::Error> for AnyError {
    fn from(error: std::io::Error) -> AnyError {
        AnyError(Box::new(ThisPeIo(error)))
    }
}

impl fmt::Display for AnyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for AnyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::error::Error for AnyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
