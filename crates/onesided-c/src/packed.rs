//! Messages the host packs where they go and unpacks where they landed
//! (`onesided_exchange_call_packed`): the host's pack function writes each message straight
//! into the receiver's inbox where the path allows it (the one-sided path to a PE on the
//! node), and its unpack function reads each received message in the inbox, so a halo's
//! message is written once by the sender's packing and read once by the receiver's
//! unpacking, with no buffer of the host's and no copy of the library's between.

use std::ffi::c_void;

use onesided::Outgoing;

use crate::exchange::{
    ByteExchange, EXCHANGE, Routes, messages, onesided_exchange, repeats_of, routes, write_counts,
};
use crate::memory::{pe_of, values_in};
use crate::registry;
use crate::status::{Failure, guard, onesided_status};

/// One message of `onesided_exchange_call_packed`: to or from PE `pe` (a partner, or this PE),
/// `bytes` long: for a send the bytes the pack function writes, for a receive the room.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct onesided_message {
    /// The bytes a send packs, or the room of a receive.
    pub bytes: usize,
    /// The PE it goes to or comes from.
    pub pe: i32,
}

/// The host's packing: writes all `bytes` bytes of send number `send` at `data` (in the
/// receiver's inbox, or in a buffer of the library's). It must not call the library.
#[allow(non_camel_case_types)]
pub type onesided_pack_fn =
    Option<unsafe extern "C" fn(context: *mut c_void, send: usize, data: *mut c_void, bytes: usize)>;

/// The host's unpacking: reads the `bytes` bytes of receive number `receive` at `data`, which
/// stay valid until it returns. It must not call the library.
#[allow(non_camel_case_types)]
pub type onesided_unpack_fn =
    Option<unsafe extern "C" fn(context: *mut c_void, receive: usize, data: *const c_void, bytes: usize)>;

/// As `onesided_exchange_call`, with the host packing and unpacking the messages itself:
/// `pack(context, s, data, bytes)` writes send `s` at `data` (`sends[s].bytes` bytes; on the
/// one-sided path to a PE of this node `data` is the receiver's inbox), and
/// `unpack(context, r, data, bytes)` reads receive `r` where it landed, for every receive in
/// the order of `receives`, after every message of the call has arrived. The `k`-th
/// message to a PE meets the `k`-th that PE receives from this one; messages to this PE itself
/// are packed into a buffer of the library's and unpacked from it, in the same pairing.
/// `flags` is 0 or `ONESIDED_CALL_REPEATS` (announced after the last unpack). `context` is
/// passed through; `received` (may be null) gets the bytes of each receive.
///
/// # Collective
/// Pairwise, as `onesided_exchange_call`, with which it may alternate on one exchange.
///
/// # Errors
/// As `onesided_exchange_call`, and `ONESIDED_ERROR_ARGUMENT` for a null `pack` with sends
/// or a null `unpack` with receives. A message its receiver has no room for is not unpacked.
///
/// # Safety
/// `sends` points to `n_sends` messages and `receives` to `n_receives` (either may be null
/// with none); `pack` writes exactly the bytes it is given and `unpack` reads no more; both
/// return normally (no `longjmp`) and call nothing of the library's; `received` is null or
/// points to writable memory for `n_receives` values.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn onesided_exchange_call_packed(
    exchange: onesided_exchange,
    sends: *const onesided_message,
    n_sends: usize,
    pack: onesided_pack_fn,
    receives: *const onesided_message,
    n_receives: usize,
    unpack: onesided_unpack_fn,
    context: *mut c_void,
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
        let pack = match pack {
            Some(pack) => pack,
            None if sends.is_empty() => no_pack,
            None => {
                return Err(Failure::argument(format!(
                    "pack is null with {} to send: pass the function that packs them",
                    messages(n_sends)
                )));
            }
        };
        let unpack = match unpack {
            Some(unpack) => unpack,
            None if receives.is_empty() => no_unpack,
            None => {
                return Err(Failure::argument(format!(
                    "unpack is null with {} to receive: pass the function that unpacks them",
                    messages(n_receives)
                )));
            }
        };
        let host = Host { pack, unpack, context };
        let counts = call_packed(&ex, sends, receives, &host, repeats)?;
        // SAFETY: as this function's contract: room for `n_receives` values, one per count.
        unsafe { write_counts(received, &counts) }
    })
}

/// The host's functions and context, made only by the entry point, whose contract says what
/// the functions do with the bytes they are given.
struct Host {
    pack: unsafe extern "C" fn(*mut c_void, usize, *mut c_void, usize),
    unpack: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize),
    context: *mut c_void,
}

impl Host {
    /// Has the host write send `send` into `data`.
    fn pack(&self, send: usize, data: &mut [u8]) {
        // SAFETY: the entry point's contract: the host's pack writes the bytes it is given.
        unsafe { (self.pack)(self.context, send, data.as_mut_ptr().cast(), data.len()) }
    }

    /// Has the host read receive `receive` from `data`.
    fn unpack(&self, receive: usize, data: &[u8]) {
        // SAFETY: the entry point's contract: the host's unpack reads no more than it is given.
        unsafe { (self.unpack)(self.context, receive, data.as_ptr().cast(), data.len()) }
    }
}

/// The packing of a call without sends (never called).
unsafe extern "C" fn no_pack(_: *mut c_void, _: usize, _: *mut c_void, _: usize) {}

/// The unpacking of a call without receives (never called).
unsafe extern "C" fn no_unpack(_: *mut c_void, _: usize, _: *const c_void, _: usize) {}

/// One packed call on `ex`: the remote messages through the inbox, packed where they go; then
/// the ones to this PE itself through the scratch buffer; then every receive unpacked, in
/// order. The bytes each receive got.
fn call_packed(
    ex: &ByteExchange,
    sends: &[onesided_message],
    receives: &[onesided_message],
    host: &Host,
    repeats: bool,
) -> Result<Vec<usize>, Failure> {
    let mut exchange = ex.lock()?;
    let me = exchange.runtime().my_pe();
    let name = exchange.name().to_string();
    let mut sizes = Vec::with_capacity(sends.len());
    for (s, m) in sends.iter().enumerate() {
        sizes.push((pe_of(m.pe, &format!("sends[{s}].pe"))?, m.bytes));
    }
    let mut rooms = Vec::with_capacity(receives.len());
    for (r, m) in receives.iter().enumerate() {
        rooms.push((pe_of(m.pe, &format!("receives[{r}].pe"))?, m.bytes));
    }
    let Routes { to_me, from_me, incoming, remote } = routes(&name, me, &sizes, &rooms, ex.inbox.len())?;
    ex.check_announced(&name, &incoming)?;
    let remote_sends: Vec<usize> = (0..sends.len()).filter(|&s| sizes[s].0 != me).collect();
    let outgoing: Vec<Outgoing<u8>> =
        remote_sends.iter().map(|&s| Outgoing::Packed { to: sizes[s].0, count: sizes[s].1 }).collect();
    let mut counts = vec![0; receives.len()];
    if !incoming.is_empty() || !outgoing.is_empty() {
        let buffers = [&ex.inbox];
        let got = exchange
            .call(&buffers)
            .send(&outgoing)
            .receive(&incoming)
            .pack(|slices| {
                for (slice, &s) in slices.iter_mut().zip(&remote_sends) {
                    host.pack(s, slice);
                }
            })
            .run()?;
        for (&r, &count) in remote.iter().zip(got) {
            counts[r] = count;
        }
    }
    // The messages to this PE itself, packed one after another into the scratch buffer.
    let mut scratch = ex.scratch.borrow_mut();
    scratch.resize(to_me.iter().map(|&s| sizes[s].1).sum(), 0);
    let mut spans = Vec::with_capacity(to_me.len());
    let mut at = 0;
    for (&s, &r) in to_me.iter().zip(&from_me) {
        let bytes = sizes[s].1;
        host.pack(s, &mut scratch[at..at + bytes]);
        spans.push((r, at..at + bytes));
        counts[r] = bytes;
        at += bytes;
    }
    // Every receive unpacked in the host's order.
    for (r, &count) in counts.iter().enumerate() {
        if let Some((_, span)) = spans.iter().find(|(to, _)| *to == r) {
            host.unpack(r, &scratch[span.clone()]);
        } else if let Some(j) = remote.iter().position(|&to| to == r) {
            let inc = &incoming[j];
            // SAFETY: the call has returned, so this message is in place; other PEs write this
            // PE's inbox only in the regions it announces, and it announces these again only
            // below, after the last unpack, or in its next call: nothing writes the region
            // while the slice lives.
            let data = unsafe { ex.inbox.local_range(inc.offset..inc.offset + count) };
            host.unpack(r, data);
        }
    }
    ex.announce(&mut exchange, incoming, repeats)?;
    Ok(counts)
}
