//! The send-receive from C (`onesided_exchange`): `MPI_Sendrecv`'s shape, one message out
//! and one in per call, on the one-sided offset swap, MPI, or what the links measured
//! fastest. A code whose messages all go through one send-receive wrapper (CoMD's
//! `sendReceiveParallel`, the 2013 GROMACS port's) switches by calling it there.
//!
//! Each exchange keeps a symmetric inbox as large as the largest message any PE said it
//! would receive: the sender puts straight into the receiver's inbox (the offset swap: the
//! receiver announces it free, the sender writes, a signal says it landed), and the receiver
//! copies out into the host's buffer. A message from this PE to itself is a copy.

use std::cell::RefCell;
use std::ffi::{c_char, c_void};

use onesided::{Collectives, Exchange, Incoming, Outgoing, Path, SymArray};

use crate::memory::{bytes_in, bytes_out, name_of, pe_of, values_in};
use crate::registry;
use crate::runtime::{onesided_runtime, runtime_of, write_out};
use crate::status::{Failure, guard, onesided_status};

/// How an exchange travels: `ONESIDED_PATH_ONESIDED`, `ONESIDED_PATH_MPI` or
/// `ONESIDED_PATH_AUTO` (an `int`, so that any value a C program holds is safe to pass).
#[allow(non_camel_case_types)]
pub type onesided_path = i32;

/// OpenSHMEM: the offset swap's puts.
pub const ONESIDED_PATH_ONESIDED: onesided_path = 0;
/// MPI two-sided, the reference.
pub const ONESIDED_PATH_MPI: onesided_path = 1;
/// Per partner, the transport its link was measured fastest on (calibrated at the first
/// exchange of a job that asks, or named by `ONESIDED_TRANSPORT`).
pub const ONESIDED_PATH_AUTO: onesided_path = 2;

/// A send-receive channel between this PE and its partners: made by
/// `onesided_exchange_new`, freed by `onesided_exchange_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_exchange {
    /// The handle's number (never reused; 0 for none).
    pub id: u64,
}

const EXCHANGE: &str = "onesided_exchange";

/// The exchange and its inbox (dropped in this order: both collectively).
struct ByteExchange {
    exchange: RefCell<Exchange<'static, u8>>,
    inbox: SymArray<'static, u8>,
}

/// The path a C value names.
pub(crate) fn path_of(path: onesided_path) -> Result<Path, Failure> {
    match path {
        ONESIDED_PATH_ONESIDED => Ok(Path::OneSided),
        ONESIDED_PATH_MPI => Ok(Path::Mpi),
        ONESIDED_PATH_AUTO => Ok(Path::Auto),
        other => Err(Failure::argument(format!(
            "path {other} is none: pass ONESIDED_PATH_ONESIDED, ONESIDED_PATH_MPI or ONESIDED_PATH_AUTO"
        ))),
    }
}

/// The path named `name` (`"onesided"`, `"mpi"` or `"auto"`, as on the Rust examples'
/// command lines), through `path`: for a host that takes the path from its own options or
/// environment.
///
/// # Errors
/// `ONESIDED_ERROR_ARGUMENT` for any other name.
///
/// # Safety
/// `name` is a NUL-terminated string; `path` points to writable memory for one value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_path_from_name(
    name: *const c_char,
    path: *mut onesided_path,
) -> onesided_status {
    guard(|| {
        // SAFETY: as this function's contract.
        let name = unsafe { name_of(name) }?;
        let value = match name.parse::<Path>()? {
            Path::OneSided => ONESIDED_PATH_ONESIDED,
            Path::Mpi => ONESIDED_PATH_MPI,
            Path::Auto => ONESIDED_PATH_AUTO,
        };
        write_out(path, "path", value)
    })
}

/// Makes an exchange named `name` on `path` between this PE and `partners` (the PEs it
/// sends to or receives from, in any order; this PE itself and repeats are left out), for
/// messages of at most `max_message` bytes to this PE. Its symmetric memory grows with the
/// partners of the PE that names most, and with the largest `max_message` of any PE.
///
/// # Collective
/// Every PE calls it, with the same path, in the same order as its other collectives;
/// partnership is mutual (when PE p names q, q names p).
///
/// # Errors
/// On every PE: `ONESIDED_ERROR_ARGUMENT` for a partner that is no PE, a bad path;
/// `ONESIDED_ERROR_COLLECTIVE` when a partner does not name this PE back;
/// `ONESIDED_ERROR_HEAP` when the heap cannot hold the inbox.
///
/// # Safety
/// `name` is a NUL-terminated string; `partners` points to `n_partners` values (or is null
/// with none); `out` points to writable memory for one handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_exchange_new(
    rt: onesided_runtime,
    name: *const c_char,
    path: onesided_path,
    partners: *const i32,
    n_partners: usize,
    max_message: usize,
    out: *mut onesided_exchange,
) -> onesided_status {
    guard(|| {
        write_out(out, "out", onesided_exchange { id: 0 })?;
        let rt = runtime_of(rt)?;
        // SAFETY: as this function's contract.
        let name = unsafe { name_of(name) }?;
        let path = path_of(path)?;
        // SAFETY: as this function's contract.
        let listed = unsafe { values_in(partners, n_partners, "partners") }?;
        let mut others = Vec::with_capacity(n_partners);
        for &partner in listed {
            let pe = pe_of(partner, "partner")?;
            if pe != rt.my_pe() {
                others.push(pe);
            }
        }
        let room = rt.max_u64_one(max_message as u64)? as usize;
        let mut exchange =
            Exchange::<u8>::builder(rt, &name).path(path).partners(&others).collective_build()?;
        exchange.collective_reserve(room)?;
        let inbox = SymArray::<u8>::collective_alloc(rt, &format!("{name} inbox"), room)?;
        let id = registry::insert(EXCHANGE, ByteExchange { exchange: RefCell::new(exchange), inbox })?;
        write_out(out, "out", onesided_exchange { id })
    })
}

/// Sends `send_bytes` bytes from `send` to PE `dest` and receives the message PE `source`
/// sends this PE into `recv` (room for `recv_bytes`); the bytes received through `received`
/// (which may be null). As `MPI_Sendrecv`: when it returns, `send` may be reused and `recv`
/// holds the message. `dest` and `source` are partners, or both this PE (a copy).
///
/// # Collective
/// Pairwise: `dest` makes the matching call receiving from this PE, `source` the one sending
/// to it, in the same order as their other calls on this exchange.
///
/// # Errors
/// `ONESIDED_ERROR_ARGUMENT` on both sides when the message exceeds the receiver's room
/// (`recv_bytes`, at most the largest `max_message`), with nothing written; on this PE for a
/// PE that is not a partner, or a null buffer with bytes;
/// `ONESIDED_ERROR_TIMEOUT` when a partner does not take part in time.
///
/// # Safety
/// `send` points to `send_bytes` readable bytes, `recv` to `recv_bytes` writable ones (not
/// overlapping); `received` is null or points to writable memory for one value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_exchange_sendrecv(
    exchange: onesided_exchange,
    send: *const c_void,
    send_bytes: usize,
    dest: i32,
    recv: *mut c_void,
    recv_bytes: usize,
    source: i32,
    received: *mut usize,
) -> onesided_status {
    guard(|| {
        let ex = registry::get::<ByteExchange>(EXCHANGE, exchange.id)?;
        // SAFETY: as this function's contract.
        let send = unsafe { bytes_in(send, send_bytes, "send") }?;
        // SAFETY: as this function's contract.
        let recv = unsafe { bytes_out(recv, recv_bytes, "recv") }?;
        let (dest, source) = (pe_of(dest, "dest")?, pe_of(source, "source")?);
        let count = sendrecv(&ex, send, dest, recv, source)?;
        if !received.is_null() {
            write_out(received, "received", count)?;
        }
        Ok(())
    })
}

/// One send and one receive on `ex`; the bytes received.
fn sendrecv(
    ex: &ByteExchange,
    send: &[u8],
    dest: usize,
    recv: &mut [u8],
    source: usize,
) -> Result<usize, Failure> {
    let mut exchange = ex
        .exchange
        .try_borrow_mut()
        .map_err(|_| Failure::argument("the exchange is in use by another call"))?;
    let me = exchange.runtime().my_pe();
    if dest == me || source == me {
        if dest != source {
            return Err(Failure::argument(format!(
                "exchange '{}': a message to this PE itself needs dest == source == {me} (dest {dest}, \
                 source {source})",
                exchange.name()
            )));
        }
        if send.len() > recv.len() {
            return Err(Failure::argument(format!(
                "exchange '{}': {} bytes sent to this PE itself, with room for {}",
                exchange.name(),
                send.len(),
                recv.len()
            )));
        }
        recv[..send.len()].copy_from_slice(send);
        return Ok(send.len());
    }
    let room = recv.len().min(ex.inbox.len());
    let counts = exchange
        .call(&[&ex.inbox])
        .send(&[Outgoing::Copy { to: dest, data: send }])
        .receive(&[Incoming { from: source, buffer: 0, offset: 0, room }])
        .run()?;
    let count = counts[0];
    ex.inbox.read_local(0, &mut recv[..count])?;
    Ok(count)
}

/// Frees an exchange and sets `*exchange` to `{0}`.
///
/// # Collective
/// Every PE frees it, in the same order as its other frees.
///
/// # Safety
/// `exchange` points to a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_exchange_free(exchange: *mut onesided_exchange) -> onesided_status {
    // SAFETY: as this function's contract; the handle is a repr(C) struct of one u64.
    guard(|| unsafe { registry::free::<ByteExchange>(exchange.cast(), EXCHANGE, "exchange") })
}
