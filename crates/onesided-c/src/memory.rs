//! Symmetric memory from C: arrays of bytes on every PE (`onesided_symmetric`), puts and
//! gets into them, and signals (`onesided_signals`) to say that a put has landed.

use std::ffi::{c_char, c_void};

use onesided::{SignalArray, SymArray};

use crate::registry;
use crate::runtime::{onesided_runtime, runtime_of, write_out};
use crate::status::{Failure, guard, onesided_status};

/// An array of bytes with a copy on every PE, at the same offsets: made by
/// `onesided_symmetric_alloc`, freed by `onesided_symmetric_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_symmetric {
    /// The handle's number (never reused; 0 for none).
    pub id: u64,
}

/// An array of 64-bit signals with a copy on every PE: made by `onesided_signals_alloc`,
/// freed by `onesided_signals_free`. Signals only grow: a put with signal sets one, a
/// wait waits until it is at least a value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_signals {
    /// The handle's number (never reused; 0 for none).
    pub id: u64,
}

const SYMMETRIC: &str = "onesided_symmetric";
const SIGNALS: &str = "onesided_signals";

type Bytes = SymArray<'static, u8>;
type Signals = SignalArray<'static>;

/// A name from C: UTF-8, NUL-terminated, not null.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
pub(crate) unsafe fn name_of(name: *const c_char) -> Result<String, Failure> {
    if name.is_null() {
        return Err(Failure::argument("name is a null pointer: pass a name for messages"));
    }
    // SAFETY: not null; the caller passes a NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(name) };
    text.to_str().map(str::to_string).map_err(|_| Failure::argument("name is not UTF-8"))
}

/// `len` bytes from C at `ptr`, refused when null with a length.
///
/// # Safety
/// `ptr` is null or points to `len` readable bytes that stay unchanged during the call.
pub(crate) unsafe fn bytes_in<'a>(ptr: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is a null pointer with {len} bytes")));
    }
    // SAFETY: not null; the caller passes `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// `len` writable bytes from C at `ptr`, refused when null with a length.
///
/// # Safety
/// `ptr` is null or points to `len` writable bytes that nothing else touches during the call.
pub(crate) unsafe fn bytes_out<'a>(
    ptr: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is a null pointer with {len} bytes")));
    }
    // SAFETY: not null; the caller passes `len` writable bytes, unaliased during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// `n` values of `T` from C at `ptr`, refused when null with a length or misaligned.
///
/// # Safety
/// `ptr` is null or points to `n` values of `T` that stay unchanged during the call.
pub(crate) unsafe fn values_in<'a, T>(ptr: *const T, n: usize, what: &str) -> Result<&'a [T], Failure> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::argument(format!("{what} is a null pointer with {n} values")));
    }
    if !(ptr as usize).is_multiple_of(align_of::<T>()) {
        return Err(Failure::argument(format!("{what} is not aligned for its type")));
    }
    // SAFETY: not null, aligned; the caller passes `n` values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// A box from C: three vectors of three doubles, rows, in nm, as the crates take it.
///
/// # Safety
/// `ptr` is null or points to 9 doubles.
pub(crate) unsafe fn box_of(ptr: *const f64) -> Result<[[f32; 3]; 3], Failure> {
    // SAFETY: as this function's contract.
    let v = unsafe { values_in(ptr, 9, "box") }?;
    Ok([0, 1, 2].map(|d| [v[3 * d] as f32, v[3 * d + 1] as f32, v[3 * d + 2] as f32]))
}

/// A PE number from C, refused when negative.
pub(crate) fn pe_of(pe: i32, what: &str) -> Result<usize, Failure> {
    usize::try_from(pe)
        .map_err(|_| Failure::argument(format!("{what} {pe} is not a PE: PEs are 0 .. n_pes - 1")))
}

/// Allocates `bytes` bytes of symmetric memory named `name` (in messages), zeroed, on every
/// PE, aligned to 64 bytes.
///
/// # Collective
/// Every PE calls it with the same `bytes`, in the same order as its other allocations.
///
/// # Errors
/// `ONESIDED_ERROR_HEAP` on every PE when the PEs ask for different sizes or the heap is too
/// small (the message names the setting to raise).
///
/// # Safety
/// `name` is a NUL-terminated string; `out` points to writable memory for one handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_symmetric_alloc(
    rt: onesided_runtime,
    name: *const c_char,
    bytes: usize,
    out: *mut onesided_symmetric,
) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_symmetric { id: 0 })?;
        let rt = runtime_of(rt)?;
        // SAFETY: as this function's contract.
        let name = unsafe { name_of(name) }?;
        let array = Bytes::collective_alloc(rt, &name, bytes)?;
        let id = registry::insert(SYMMETRIC, array)?;
        write_out(out, "out", onesided_symmetric { id })
    })
}

/// Frees symmetric memory and sets `*array` to `{0}`.
///
/// # Collective
/// Every PE frees it, in the same order as its other frees.
///
/// # Safety
/// `array` points to a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_symmetric_free(array: *mut onesided_symmetric) -> onesided_status {
    // SAFETY: as this function's contract; the handle is a repr(C) struct of one u64.
    guard(|| unsafe { registry::free::<Bytes>(array.cast(), SYMMETRIC, "array") })
}

/// This PE's copy of the array: its address (valid until the array is freed) and size in
/// bytes. Other PEs may write into it at any time by puts: read a region only after the
/// signal or barrier that says its put has landed, and through `volatile` or after a compiler
/// barrier where the program polls it.
///
/// # Safety
/// `data` and `bytes` point to writable memory for one value each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_symmetric_local(
    array: onesided_symmetric,
    data: *mut *mut c_void,
    bytes: *mut usize,
) -> onesided_status {
    guard(|| {
        let a = registry::get::<Bytes>(SYMMETRIC, array.id)?;
        write_out(data, "data", a.as_ptr().cast::<c_void>())?;
        write_out(bytes, "bytes", a.len())
    })
}

/// Copies `bytes` bytes from `src` into PE `pe`'s copy of `array` at byte `offset`. When it
/// returns, `src` may be reused; the data is at the target after `onesided_quiet`, a
/// barrier, or a signal set after it (`onesided_put_signal`).
///
/// # Errors
/// `ONESIDED_ERROR_ARGUMENT` for a PE out of range or a region past the array's end.
///
/// # Safety
/// `src` points to `bytes` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_put(
    array: onesided_symmetric,
    pe: i32,
    offset: usize,
    src: *const c_void,
    bytes: usize,
) -> onesided_status {
    guard(|| {
        let a = registry::get::<Bytes>(SYMMETRIC, array.id)?;
        // SAFETY: as this function's contract.
        let src = unsafe { bytes_in(src, bytes, "src") }?;
        Ok(a.put(pe_of(pe, "pe")?, offset, src)?)
    })
}

/// Copies `bytes` bytes of PE `pe`'s copy of `array` from byte `offset` into `dst`; complete
/// when it returns.
///
/// # Errors
/// `ONESIDED_ERROR_ARGUMENT` for a PE out of range or a region past the array's end.
///
/// # Safety
/// `dst` points to `bytes` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_get(
    array: onesided_symmetric,
    pe: i32,
    offset: usize,
    dst: *mut c_void,
    bytes: usize,
) -> onesided_status {
    guard(|| {
        let a = registry::get::<Bytes>(SYMMETRIC, array.id)?;
        // SAFETY: as this function's contract.
        let dst = unsafe { bytes_out(dst, bytes, "dst") }?;
        Ok(a.get(pe_of(pe, "pe")?, offset, dst)?)
    })
}

/// Puts `bytes` bytes from `src` into PE `pe`'s copy of `array` at byte `offset`, then sets
/// PE `pe`'s signal `index` of `signals` to `value`: when the target sees the signal, the
/// data is there. `src` may be reused when it returns.
///
/// # Errors
/// `ONESIDED_ERROR_ARGUMENT` for a PE, region or signal index out of range.
///
/// # Safety
/// `src` points to `bytes` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_put_signal(
    array: onesided_symmetric,
    pe: i32,
    offset: usize,
    src: *const c_void,
    bytes: usize,
    signals: onesided_signals,
    index: usize,
    value: u64,
) -> onesided_status {
    guard(|| {
        let a = registry::get::<Bytes>(SYMMETRIC, array.id)?;
        let s = registry::get::<Signals>(SIGNALS, signals.id)?;
        // SAFETY: as this function's contract.
        let src = unsafe { bytes_in(src, bytes, "src") }?;
        Ok(a.put_signal(pe_of(pe, "pe")?, offset, src, &s, index, value)?)
    })
}

/// Allocates `count` signals named `name`, all 0, on every PE.
///
/// # Collective
/// Every PE calls it with the same `count`, in the same order as its other allocations.
///
/// # Safety
/// `name` is a NUL-terminated string; `out` points to writable memory for one handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_signals_alloc(
    rt: onesided_runtime,
    name: *const c_char,
    count: usize,
    out: *mut onesided_signals,
) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_signals { id: 0 })?;
        let rt = runtime_of(rt)?;
        // SAFETY: as this function's contract.
        let name = unsafe { name_of(name) }?;
        let signals = Signals::collective_alloc(rt, &name, count)?;
        let id = registry::insert(SIGNALS, signals)?;
        write_out(out, "out", onesided_signals { id })
    })
}

/// Frees signals and sets `*signals` to `{0}`.
///
/// # Collective
/// Every PE frees it, in the same order as its other frees.
///
/// # Safety
/// `signals` points to a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_signals_free(signals: *mut onesided_signals) -> onesided_status {
    // SAFETY: as this function's contract; the handle is a repr(C) struct of one u64.
    guard(|| unsafe { registry::free::<Signals>(signals.cast(), SIGNALS, "signals") })
}

/// Waits until this PE's signal `index` is at least `value`; its value then, through `seen`
/// (which may be null).
///
/// # Errors
/// `ONESIDED_ERROR_TIMEOUT` past `ONESIDED_WAIT_TIMEOUT` (the message says which signal
/// waited for what): a PE that did not take part; end the job with `onesided_abort`.
///
/// # Safety
/// `seen` is null or points to writable memory for one value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_signal_wait_ge(
    signals: onesided_signals,
    index: usize,
    value: u64,
    seen: *mut u64,
) -> onesided_status {
    guard(|| {
        let s = registry::get::<Signals>(SIGNALS, signals.id)?;
        let now = s.wait_ge(index, value)?;
        if !seen.is_null() {
            write_out(seen, "seen", now)?;
        }
        Ok(())
    })
}

/// This PE's signal `index` now, through `value`.
///
/// # Safety
/// `value` points to writable memory for one value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_signal_value(
    signals: onesided_signals,
    index: usize,
    value: *mut u64,
) -> onesided_status {
    guard(|| {
        let s = registry::get::<Signals>(SIGNALS, signals.id)?;
        write_out(value, "value", s.value(index)?)
    })
}

/// Adds `delta` to PE `pe`'s signal `index`, atomically.
#[unsafe(no_mangle)]
pub extern "C" fn onesided_signal_add(
    signals: onesided_signals,
    pe: i32,
    index: usize,
    delta: u64,
) -> onesided_status {
    guard(|| {
        let s = registry::get::<Signals>(SIGNALS, signals.id)?;
        Ok(s.add(pe_of(pe, "pe")?, index, delta)?)
    })
}
