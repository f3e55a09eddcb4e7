//! The send-receive from C (`onesided_exchange`): `MPI_Sendrecv`'s shape, one message out
//! and one in per call, on the one-sided offset swap, MPI, or what the links measured
//! fastest. A code whose messages all go through one send-receive wrapper (CoMD's
//! `sendReceiveParallel`, the 2013 GROMACS port's) switches by calling it there.
//!
//! Each exchange keeps a symmetric inbox as large as the largest message any PE said it
//! would receive: the sender puts straight into the receiver's inbox (the offset swap: the
//! receiver announces it free, the sender writes, a signal says it landed), and the receiver
//! copies out into the host's buffer. A message from this PE to itself is a copy.

use std::cell::{RefCell, RefMut};
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

pub(crate) const EXCHANGE: &str = "onesided_exchange";

/// The exchange and its inbox (dropped in this order: both collectively), and the receives
/// the last call announced for the next (`ONESIDED_CALL_REPEATS`).
pub(crate) struct ByteExchange {
    pub(crate) exchange: RefCell<Exchange<'static, u8>>,
    pub(crate) inbox: SymArray<'static, u8>,
    pub(crate) announced: RefCell<Option<Vec<Incoming>>>,
    /// Where messages to this PE itself are packed (`onesided_exchange_call_packed`).
    pub(crate) scratch: RefCell<Vec<u8>>,
}

impl ByteExchange {
    /// The exchange, for one call at a time.
    pub(crate) fn lock(&self) -> Result<RefMut<'_, Exchange<'static, u8>>, Failure> {
        self.exchange
            .try_borrow_mut()
            .map_err(|_| Failure::argument("the exchange is in use by another call"))
    }

    /// After a call that received `incoming` from other PEs: with `repeats`, announces the
    /// same receives for the next call now; otherwise forgets any announcement.
    pub(crate) fn announce(
        &self,
        exchange: &mut Exchange<'static, u8>,
        incoming: Vec<Incoming>,
        repeats: bool,
    ) -> Result<(), Failure> {
        *self.announced.borrow_mut() = None;
        if repeats && !incoming.is_empty() {
            exchange.post_receives(&[&self.inbox], &incoming)?;
            *self.announced.borrow_mut() = Some(incoming);
        }
        Ok(())
    }

    /// Refuses a call whose remote receives differ from the ones the previous call announced.
    pub(crate) fn check_announced(&self, name: &str, incoming: &[Incoming]) -> Result<(), Failure> {
        match &*self.announced.borrow() {
            Some(announced) if announced.as_slice() != incoming => {
                let list = |r: &[Incoming]| {
                    let each: Vec<String> =
                        r.iter().map(|i| format!("{} bytes from PE {}", i.room, i.from)).collect();
                    if each.is_empty() { "none".to_string() } else { each.join(", ") }
                };
                Err(Failure::argument(format!(
                    "exchange '{name}': the previous call announced its receives for this one \
                     (ONESIDED_CALL_REPEATS: {}), this call receives {}: pass the same receives, or \
                     make the call before a change without the flag",
                    list(announced),
                    list(incoming)
                )))
            }
            _ => Ok(()),
        }
    }
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
        let id = registry::insert(
            EXCHANGE,
            ByteExchange {
                exchange: RefCell::new(exchange),
                inbox,
                announced: RefCell::new(None),
                scratch: RefCell::new(Vec::new()),
            },
        )?;
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
    let mut exchange = ex.lock()?;
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
    let incoming = [Incoming { from: source, buffer: 0, offset: 0, room }];
    ex.check_announced(exchange.name(), &incoming)?;
    let counts = exchange
        .call(&[&ex.inbox])
        .send(&[Outgoing::Copy { to: dest, data: send }])
        .receive(&incoming)
        .run()?;
    *ex.announced.borrow_mut() = None;
    let count = counts[0];
    ex.inbox.read_local(0, &mut recv[..count])?;
    Ok(count)
}

/// One message this PE sends in an `onesided_exchange_call`: `bytes` bytes at `data` to PE
/// `pe`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_send {
    /// The bytes (read during the call only; may be null with none).
    pub data: *const c_void,
    /// How many.
    pub bytes: usize,
    /// The receiving PE: a partner, or this PE (a copy).
    pub pe: i32,
}

/// One message this PE receives in an `onesided_exchange_call`: from PE `pe`, into `room`
/// bytes at `data`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_receive {
    /// Where the message goes (written during the call only; may be null with no room).
    pub data: *mut c_void,
    /// The room there, in bytes.
    pub room: usize,
    /// The sending PE: a partner, or this PE (a copy).
    pub pe: i32,
}

/// A flag of `onesided_exchange_call`: the next call on this exchange receives the same
/// messages (the same PEs, in the same order, with the same rooms), so this call announces
/// them to their senders as it returns, and those senders then write without waiting for the
/// receiver. The one-sided path's steady state for a halo that repeats every step: a message
/// costs a put and a signal, no round trip. A next call with other receives is refused
/// (`ONESIDED_ERROR_ARGUMENT`, on this PE); the MPI path accepts the flag and ignores it.
pub const ONESIDED_CALL_REPEATS: u32 = 1;

/// Sends every message of `sends` and receives every message of `receives` in one step:
/// the messages of a halo's faces at once (CoMD's two faces of an axis, say), where
/// `onesided_exchange_sendrecv` takes one each way. The `k`-th message this PE sends to a PE
/// meets the `k`-th message that PE receives from this one (at most 2 per pair and call:
/// a neighbour on both sides); messages to this PE itself are copies, the `k`-th sent to
/// the `k`-th received. The bytes each receive got go to `received[i]` (`received` may be
/// null). As `MPI_Sendrecv`: when it returns, every send buffer may be reused and every
/// receive buffer holds its message.
///
/// The receives land in the exchange's inbox one after another before they are copied out,
/// so their rooms from other PEs add up to at most the exchange's `max_message` (the
/// largest any PE gave). `flags` is 0 or `ONESIDED_CALL_REPEATS`.
///
/// # Collective
/// Pairwise: every PE this one sends to makes the matching call receiving from it, every PE
/// it receives from the one sending to it, in the same order as their other calls on this
/// exchange.
///
/// # Errors
/// `ONESIDED_ERROR_ARGUMENT` on both sides when a message exceeds its receiver's room, with
/// it not written (the call's other messages are delivered; the receive buffers' contents
/// are then unspecified); on this PE for a PE that is not a partner, more than 2 messages
/// between one pair, rooms that exceed the inbox, messages to itself that do not pair up or
/// do not fit, buffers that overlap, null buffers with bytes, an unknown flag, or receives
/// other than the ones a `ONESIDED_CALL_REPEATS` call announced;
/// `ONESIDED_ERROR_TIMEOUT` when a partner does not take part in time.
///
/// # Safety
/// `sends` points to `n_sends` messages (or is null with none), each `data` to `bytes`
/// readable bytes; `receives` to `n_receives` (or null with none), each `data` to `room`
/// writable bytes; `received` is null or points to writable memory for `n_receives` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onesided_exchange_call(
    exchange: onesided_exchange,
    sends: *const onesided_send,
    n_sends: usize,
    receives: *const onesided_receive,
    n_receives: usize,
    flags: u32,
    received: *mut usize,
) -> onesided_status {
    guard(|| {
        let ex = registry::get::<ByteExchange>(EXCHANGE, exchange.id)?;
        let repeats = repeats_of(flags)?;
        // SAFETY: as this function's contract.
        let sends = unsafe { values_in(sends, n_sends, "sends") }?;
        // SAFETY: as this function's contract.
        let receives = unsafe { values_in(receives, n_receives, "receives") }?;
        disjoint(sends, receives)?;
        let mut outs = Vec::with_capacity(sends.len());
        for (i, s) in sends.iter().enumerate() {
            // SAFETY: as this function's contract: `bytes` readable bytes at `data`.
            let data = unsafe { bytes_in(s.data, s.bytes, &format!("sends[{i}].data")) }?;
            outs.push((pe_of(s.pe, &format!("sends[{i}].pe"))?, data));
        }
        let mut ins = Vec::with_capacity(receives.len());
        for (i, r) in receives.iter().enumerate() {
            // SAFETY: as this function's contract: `room` writable bytes at `data`, none of
            // them in another receive's or a send's buffer (checked by `disjoint`).
            let data = unsafe { bytes_out(r.data, r.room, &format!("receives[{i}].data")) }?;
            ins.push((pe_of(r.pe, &format!("receives[{i}].pe"))?, data));
        }
        let counts = call(&ex, &outs, &mut ins, repeats)?;
        // SAFETY: as this function's contract: room for `n_receives` values, one per count.
        unsafe { write_counts(received, &counts) }
    })
}

/// Whether a call's `flags` ask for `ONESIDED_CALL_REPEATS`; an error for any other bit.
pub(crate) fn repeats_of(flags: u32) -> Result<bool, Failure> {
    if flags & !ONESIDED_CALL_REPEATS != 0 {
        return Err(Failure::argument(format!(
            "flags {flags:#x} name no flag: pass 0 or ONESIDED_CALL_REPEATS"
        )));
    }
    Ok(flags & ONESIDED_CALL_REPEATS != 0)
}

/// Refuses buffers of a call that overlap where one of them is written (receive with
/// receive, receive with send), before any slice of them is made.
fn disjoint(sends: &[onesided_send], receives: &[onesided_receive]) -> Result<(), Failure> {
    let span = |data: usize, bytes: usize| data..data.saturating_add(bytes);
    let written: Vec<_> = receives.iter().map(|r| span(r.data as usize, r.room)).collect();
    let read = sends.iter().map(|s| span(s.data as usize, s.bytes));
    for (i, a) in written.iter().enumerate() {
        let clash = written[i + 1..].iter().position(|b| a.start < b.end && b.start < a.end);
        if let Some(j) = clash {
            return Err(Failure::argument(format!(
                "receives[{i}] and receives[{}] overlap: give each receive its own buffer",
                i + 1 + j
            )));
        }
        if let Some(j) = read.clone().position(|b| a.start < b.end && b.start < a.end) {
            return Err(Failure::argument(format!(
                "receives[{i}] overlaps sends[{j}]: a receive buffer may not hold a message sent \
                 in the same call"
            )));
        }
    }
    Ok(())
}

/// "1 message", "2 messages".
pub(crate) fn messages(n: usize) -> String {
    format!("{n} message{}", if n == 1 { "" } else { "s" })
}

/// Where the messages of one call go: the sends to this PE itself and the receives they meet
/// (pairwise, in order), and the receives from other PEs, one after another in the inbox
/// (`incoming[j]` is receive `remote[j]`).
pub(crate) struct Routes {
    pub(crate) to_me: Vec<usize>,
    pub(crate) from_me: Vec<usize>,
    pub(crate) incoming: Vec<Incoming>,
    pub(crate) remote: Vec<usize>,
}

/// The routes of a call on exchange `name` whose sends are `(pe, bytes)` and receives
/// `(pe, room)`, refused before anything moves when the messages to this PE itself do not
/// pair up or fit, or the receives from other PEs do not fit the inbox of `inbox` bytes.
pub(crate) fn routes(
    name: &str,
    me: usize,
    sends: &[(usize, usize)],
    receives: &[(usize, usize)],
    inbox: usize,
) -> Result<Routes, Failure> {
    let to_me: Vec<usize> = (0..sends.len()).filter(|&s| sends[s].0 == me).collect();
    let from_me: Vec<usize> = (0..receives.len()).filter(|&r| receives[r].0 == me).collect();
    if to_me.len() != from_me.len() {
        return Err(Failure::argument(format!(
            "exchange '{name}': {} sent to this PE itself and {} received from it: they pair up in \
             order, so pass as many of each",
            messages(to_me.len()),
            from_me.len()
        )));
    }
    for (k, (&s, &r)) in to_me.iter().zip(&from_me).enumerate() {
        if sends[s].1 > receives[r].1 {
            return Err(Failure::argument(format!(
                "exchange '{name}': message {k} to this PE itself is {} bytes, receives[{r}] has room \
                 for {}",
                sends[s].1, receives[r].1
            )));
        }
    }
    let (mut incoming, mut remote) = (Vec::with_capacity(receives.len()), Vec::with_capacity(receives.len()));
    let mut offset = 0;
    for (r, &(from, room)) in receives.iter().enumerate().filter(|(_, (pe, _))| *pe != me) {
        incoming.push(Incoming { from, buffer: 0, offset, room });
        remote.push(r);
        offset += room;
    }
    if offset > inbox {
        return Err(Failure::argument(format!(
            "exchange '{name}': the receives from other PEs have room for {offset} bytes in all, the \
             exchange's inbox holds {inbox}: make the exchange with max_message at least {offset}, or \
             give smaller rooms"
        )));
    }
    Ok(Routes { to_me, from_me, incoming, remote })
}

/// Writes `counts` to the C array `received` (null: nowhere).
///
/// # Safety
/// `received` is null or points to writable memory for `counts.len()` values.
pub(crate) unsafe fn write_counts(received: *mut usize, counts: &[usize]) -> Result<(), Failure> {
    if received.is_null() {
        return Ok(());
    }
    // SAFETY: as this function's contract.
    let out = unsafe { bytes_out(received.cast(), std::mem::size_of_val(counts), "received") }?;
    for (chunk, count) in out.chunks_exact_mut(size_of::<usize>()).zip(counts) {
        chunk.copy_from_slice(&count.to_ne_bytes());
    }
    Ok(())
}

/// The messages of one call on `ex`: the remote ones through the inbox, then the ones to
/// this PE itself; the bytes each receive got.
fn call(
    ex: &ByteExchange,
    outs: &[(usize, &[u8])],
    ins: &mut [(usize, &mut [u8])],
    repeats: bool,
) -> Result<Vec<usize>, Failure> {
    let mut exchange = ex.lock()?;
    let me = exchange.runtime().my_pe();
    let name = exchange.name().to_string();
    let sizes: Vec<(usize, usize)> = outs.iter().map(|(pe, d)| (*pe, d.len())).collect();
    let rooms: Vec<(usize, usize)> = ins.iter().map(|(pe, b)| (*pe, b.len())).collect();
    let Routes { to_me, from_me, incoming, remote } = routes(&name, me, &sizes, &rooms, ex.inbox.len())?;
    let outgoing: Vec<Outgoing<u8>> =
        outs.iter().filter(|(pe, _)| *pe != me).map(|&(to, data)| Outgoing::Copy { to, data }).collect();
    ex.check_announced(&name, &incoming)?;
    let mut counts = vec![0; ins.len()];
    if !incoming.is_empty() || !outgoing.is_empty() {
        let got = exchange.call(&[&ex.inbox]).send(&outgoing).receive(&incoming).run()?.to_vec();
        for ((&r, inc), count) in remote.iter().zip(&incoming).zip(got) {
            ex.inbox.read_local(inc.offset, &mut ins[r].1[..count])?;
            counts[r] = count;
        }
    }
    ex.announce(&mut exchange, incoming, repeats)?;
    for (&s, &r) in to_me.iter().zip(&from_me) {
        let data = outs[s].1;
        ins[r].1[..data.len()].copy_from_slice(data);
        counts[r] = data.len();
    }
    Ok(counts)
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
