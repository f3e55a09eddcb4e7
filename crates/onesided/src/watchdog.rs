//! A deadline on every call that can block on another PE.
//!
//! The library's own waits (signals, counters, the all-to-alls' flags) poll and give up with
//! [`Error::WaitTimeout`](crate::Error::WaitTimeout) after
//! [`Runtime::wait_timeout`](crate::Runtime::wait_timeout). The calls into OpenSHMEM and MPI
//! that can block on a peer (a quiet, a blocking put, get or atomic, a barrier or collective,
//! an MPI wait, receive or collective, allocation, initialisation and finalisation) cannot: a
//! PE whose peer's node dropped off the network stays inside the implementation for as long
//! as TCP keeps retrying. Each of those calls is made inside [`watch`], which records it in a
//! slot of the calling thread. A thread started with the [`Runtime`](crate::Runtime) looks at
//! every slot at a twentieth of the deadline (between 10 and 500 ms). A call seen unchanged
//! for half the deadline is reported in one line, so that every PE still blocked when the job
//! ends has said where; one unchanged for the whole deadline ends the job: a line naming the
//! PE, its host, the call and the peer, then [`Runtime::abort`](crate::Runtime::abort)'s route
//! with status [`EXIT_STATUS`]. Where that itself blocks (the launcher behind the same dead
//! link), the process ends itself [`ABORT_GRACE`] later, and the launcher, which sees a PE
//! die, tears the job down. The launcher must notice a lost node too: `scripts/pe-run` in the
//! repository gives Open MPI's daemons TCP keepalives, and `scripts/test-faults` injects such
//! faults (docs/bench/FAULTS.md). Once a wait of the library's own on this PE has run out the
//! deadline (a peer is lost), a blocking call made after it, such as the `shmem_free` of the
//! error's path, gets only [`after_a_timeout`].
//!
//! # What the deadline counts from
//! From the moment the call began, on this PE. Counting from when the peer was last seen alive
//! would need a sign of life that arrives while this PE is blocked inside the implementation,
//! over a channel that does not need the peer's help: OSHMEM over TCP carries a one-sided read
//! as a message the target must progress, so a heartbeat read from a peer that is computing
//! would block like the call it guards. So a PE that computes for longer than the deadline
//! between two calls of the library is a false alarm: `ONESIDED_WAIT_TIMEOUT` (default 60 s)
//! must exceed it, and for a molecular-dynamics step it is milliseconds.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::time::{Duration, Instant};

/// The exit status of a job the watchdog ended.
pub const EXIT_STATUS: i32 = 124;

/// How long the watchdog lets the job's abort run before it ends its own process.
pub const ABORT_GRACE: Duration = Duration::from_secs(3);

/// The most threads of one PE that are watched at once; calls of further threads are not.
const SLOTS: usize = 64;

/// `peer` when the call waits on several PEs (a barrier, a collective).
const MANY: usize = usize::MAX;

/// `Slot::state`'s low bits: the owner is rewriting the fields.
const WRITING: u64 = 1;
/// `Slot::state`'s low bits: the thread is outside every watched call.
const IDLE: u64 = 2;
/// `Slot::state` grows by this at every change, so that no two calls share a state.
const STEP: u64 = 4;

/// One thread's current blocking call, written by that thread alone as a sequence lock.
/// `state` is a count of changes (in steps of [`STEP`]) that only grows, whatever the thread
/// does, with [`WRITING`] set while the thread rewrites the fields and [`IDLE`] while it is
/// outside every watched call. A reader that sees the same state, with neither bit, before
/// and after reading the fields has read one call's fields; a later call always has another
/// state, even when the thread was idle in between (a count that restarted after each call
/// would show a thread that is always in some short call as one call that never ends).
struct Slot {
    claimed: AtomicBool,
    state: AtomicU64,
    call_ptr: AtomicUsize,
    call_len: AtomicUsize,
    peer: AtomicUsize,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            claimed: AtomicBool::new(false),
            state: AtomicU64::new(IDLE),
            call_ptr: AtomicUsize::new(0),
            call_len: AtomicUsize::new(0),
            peer: AtomicUsize::new(MANY),
        }
    }

    /// Records `call` (on `peer`) as the thread's current call; only the owning thread writes.
    fn write(&self, call: &'static str, peer: usize) {
        let next = self.next_state();
        self.state.store(next | WRITING, Ordering::Relaxed);
        fence(Ordering::Release);
        self.call_ptr.store(call.as_ptr() as usize, Ordering::Relaxed);
        self.call_len.store(call.len(), Ordering::Relaxed);
        self.peer.store(peer, Ordering::Relaxed);
        self.state.store(next, Ordering::Release);
    }

    /// Records that the thread is outside every watched call; only the owning thread writes.
    fn leave(&self) {
        self.state.store(self.next_state() | IDLE, Ordering::Release);
    }

    /// The count of the next change, without the low bits.
    fn next_state(&self) -> u64 {
        (self.state.load(Ordering::Relaxed) & !(STEP - 1)) + STEP
    }

    /// The current call as `(state, call, peer)`, or `None` when the thread is outside every
    /// watched call or is changing it.
    fn read(&self) -> Option<(u64, &'static str, usize)> {
        let state = self.state.load(Ordering::Acquire);
        if state & (WRITING | IDLE) != 0 {
            return None;
        }
        let (ptr, len) = (self.call_ptr.load(Ordering::Relaxed), self.call_len.load(Ordering::Relaxed));
        let peer = self.peer.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if self.state.load(Ordering::Relaxed) != state {
            return None;
        }
        // SAFETY: `ptr` and `len` were stored together from one `&'static str` between the
        // two equal loads of a `state` without WRITING (the owner sets WRITING before it
        // changes them and stores the next state without it after), so they describe a whole
        // string with a static lifetime.
        let call =
            unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr as *const u8, len)) };
        Some((state, call, peer))
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// Releases a thread's slot when the thread ends.
struct Claim(Cell<Option<&'static Slot>>);

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(slot) = self.0.get() {
            slot.leave();
            slot.claimed.store(false, Ordering::Release);
        }
    }
}

thread_local! {
    static MINE: Claim = const { Claim(Cell::new(None)) };
}

/// This thread's slot, claimed at its first watched call; `None` when every slot is taken or
/// the thread is ending.
fn my_slot() -> Option<&'static Slot> {
    MINE.try_with(|mine| {
        if let Some(slot) = mine.0.get() {
            return Some(slot);
        }
        let slot = TABLE.iter().find(|slot| {
            slot.claimed.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        })?;
        mine.0.set(Some(slot));
        Some(slot)
    })
    .ok()
    .flatten()
}

/// Runs `f`, a call that may block on `peer` (or on several PEs, when `None`), under the
/// watchdog: if it has not returned after the deadline, the job ends with a message that
/// names `call` and `peer` (see the [module](self)).
///
/// Calls may nest; the innermost is the one reported, and the deadline of an outer call
/// starts again when an inner one returns (the watchdog never ends a job before a single call
/// has blocked for the whole deadline). Cheap enough for every call: a few stores to memory
/// of this thread's own, no clock read.
///
/// Engines may wrap their own blocking calls (MPI included) in it too. Without a
/// [`Runtime`](crate::Runtime) nothing watches.
pub fn watch<R>(call: &'static str, peer: Option<usize>, f: impl FnOnce() -> R) -> R {
    let Some(slot) = my_slot() else { return f() };
    let saved = slot.read();
    slot.write(call, peer.unwrap_or(MANY));
    let result = f();
    match saved {
        Some((_, call, peer)) => slot.write(call, peer),
        None => slot.leave(),
    }
    result
}

/// Set when a wait of the library's own on this PE ran out the deadline: a peer is lost, and
/// a blocking call made after it (the error path's `shmem_free`, a barrier) gets only
/// [`after_a_timeout`] before the job ends, not a second whole deadline.
static SPENT: AtomicBool = AtomicBool::new(false);

/// How long a call may block once a wait of this PE has run out the deadline: a tenth of the
/// deadline, between half a second and two seconds.
pub fn after_a_timeout(deadline: Duration) -> Duration {
    (deadline / 10).clamp(Duration::from_millis(500), Duration::from_secs(2))
}

/// Records that a wait of the library's own ran out the whole deadline (see [`SPENT`]).
pub(crate) fn deadline_spent() {
    SPENT.store(true, Ordering::Release);
}

/// Set when the runtime is dropped, after finalisation: the watchdog thread then stops.
static STOP: AtomicBool = AtomicBool::new(false);

/// Starts the watchdog thread for this process's PE `pe`.
pub(crate) fn start(pe: usize, deadline: Duration) {
    let tick = (deadline / 20).clamp(Duration::from_millis(10), Duration::from_millis(500));
    let started = std::thread::Builder::new().name("onesided-watchdog".to_string()).spawn(move || {
        // Per slot: the call last seen, since when, and whether it was reported as late.
        let mut seen: [(u64, Instant, bool); SLOTS] = [(0, Instant::now(), false); SLOTS];
        while !STOP.load(Ordering::Acquire) {
            std::thread::sleep(tick);
            let now = Instant::now();
            for (slot, seen) in TABLE.iter().zip(seen.iter_mut()) {
                let Some((state, call, peer)) = slot.read() else {
                    *seen = (0, now, false);
                    continue;
                };
                if seen.0 != state {
                    *seen = (state, now, false);
                    continue;
                }
                let blocked = now - seen.1;
                if STOP.load(Ordering::Acquire) {
                    break;
                }
                let spent = SPENT.load(Ordering::Acquire);
                let limit = if spent { after_a_timeout(deadline) } else { deadline };
                if blocked >= limit {
                    fire(pe, call, peer, blocked, deadline, spent);
                }
                if blocked >= deadline / 2 && !seen.2 {
                    seen.2 = true;
                    warn(pe, call, peer, blocked, deadline);
                }
            }
        }
    });
    if let Err(e) = started {
        crate::launch::say(&format!(
            "onesided: PE {pe}: the watchdog thread did not start ({e}); blocking calls have no deadline"
        ));
    }
}

/// Stops the watchdog thread (at its next look).
pub(crate) fn stop() {
    STOP.store(true, Ordering::Release);
}

/// The start of both messages: where this PE is, in which call, on whom, for how long.
fn blocked_line(pe: usize, call: &str, peer: usize, blocked: Duration) -> String {
    let host = crate::launch::host_name();
    let on = if peer == MANY { "the other PEs taking part".to_string() } else { format!("PE {peer}") };
    format!("onesided: PE {pe} on {host}: {call} has blocked for {blocked:.1?} waiting for {on}")
}

/// Reports a call blocked for half the deadline: on every PE still blocked when one PE's
/// deadline ends the job, this line says where that PE was, which tells a lost peer (one PE
/// absent from the lines) from calls that do not match (PEs in different calls).
fn warn(pe: usize, call: &str, peer: usize, blocked: Duration, deadline: Duration) {
    let line = blocked_line(pe, call, peer, blocked);
    crate::launch::say(&format!(
        "{line}; the job ends if it still has at {deadline:?} (ONESIDED_WAIT_TIMEOUT)"
    ));
}

/// Ends the job for a call that blocked past the deadline.
fn fire(pe: usize, call: &str, peer: usize, blocked: Duration, deadline: Duration, spent: bool) -> ! {
    let line = blocked_line(pe, call, peer, blocked);
    let spent = if spent { ", which a wait of this PE had already run out" } else { "" };
    crate::launch::say(&format!(
        "{line}, past the deadline of {deadline:?}{spent} (ONESIDED_WAIT_TIMEOUT): a peer is lost (its node or link down), stopped or dead, or is not \
         taking part; ending the job with status {EXIT_STATUS} (raise ONESIDED_WAIT_TIMEOUT, in seconds, if a PE \
         only computes that long between two calls)",
    ));
    // The abort below may block too (the launcher behind the same dead link): end this
    // process then, and the launcher, seeing a PE gone, ends the others.
    let _ = std::thread::Builder::new().name("onesided-exit".to_string()).spawn(move || {
        std::thread::sleep(ABORT_GRACE);
        crate::launch::say(&format!(
            "onesided: PE {pe}: the job's abort did not return within {ABORT_GRACE:?}; ending this process"
        ));
        // SAFETY: `_exit` ends the process at once without running handlers that could
        // block on the peers.
        unsafe { libc::_exit(EXIT_STATUS) }
    });
    crate::launch::end_job(EXIT_STATUS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_call_is_visible_only_while_it_runs() {
        let seen = watch("outer", Some(3), || {
            let slot = my_slot().expect("a slot");
            let outer = slot.read().expect("the outer call");
            let inner = watch("inner", None, || slot.read().expect("the inner call"));
            let restored = slot.read().expect("the outer call again");
            (outer, inner, restored)
        });
        let ((s0, c0, p0), (s1, c1, p1), (s2, c2, p2)) = seen;
        assert_eq!((c0, p0), ("outer", 3));
        assert_eq!((c1, p1), ("inner", MANY));
        assert_eq!((c2, p2), ("outer", 3));
        // Every change is a new call for the watchdog: its deadline starts again.
        assert!(s0 < s1 && s1 < s2, "states {s0} {s1} {s2}");
        assert!(my_slot().expect("a slot").read().is_none());
    }

    #[test]
    fn calls_one_after_the_other_are_different_calls() {
        // A thread that is in some short call whenever the watchdog looks is not blocked:
        // each call must have a state of its own, idle time in between or not.
        let states: Vec<u64> = (0..3)
            .map(|_| watch("short", None, || my_slot().expect("a slot").read().expect("the call").0))
            .collect();
        assert!(states[0] < states[1] && states[1] < states[2], "states {states:?}");
    }

    #[test]
    fn threads_give_their_slots_back() {
        // More threads one after the other than there are slots: each finds one free.
        for _ in 0..2 * SLOTS {
            let watched =
                std::thread::spawn(|| watch("call", Some(1), || my_slot().is_some())).join().unwrap();
            assert!(watched, "a thread found no free slot: ended threads keep theirs");
        }
    }
}
