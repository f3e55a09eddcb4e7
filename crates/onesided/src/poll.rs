//! The polling wait under every wait of the crate (signals, call counters, the MPI window's
//! flags): spin, then yield the core, or nap where PEs outnumber the cores, until a condition
//! holds or a deadline passes.

use std::hint::spin_loop;
use std::time::{Duration, Instant};

/// Polls before a wait starts yielding its core to other processes.
const SPIN_POLLS: u64 = 4096;
/// Polls between two looks at the clock.
const POLLS_PER_CLOCK: u64 = 64;

/// Polls before a wait starts yielding when the node has more PEs than cores: a waiter that
/// spins holds a core that the PE it waits for may need, and a PE that yields to another
/// waiter on its core hands it the core for that waiter's whole spin. With 512 polls (tens of
/// microseconds) one launch in five of the oversubscribed send-receive benchmark took 4-9x
/// MPI's time, each exchange waiting out such spins; with 32, at most 2x.
const OVERSUBSCRIBED_SPIN_POLLS: u64 = 32;

/// Yields after the spin when the node has more PEs than cores, before the naps: a PE that
/// waits for one runnable on its own core hands it the core at once.
const OVERSUBSCRIBED_YIELDS: u64 = 32;

/// How long a wait sleeps between polls, once it has spun, when the node has more PEs than
/// cores: long enough for the scheduler to run a PE that shares the core (the partner a wait
/// is usually for), short beside a time slice.
const OVERSUBSCRIBED_NAP: Duration = Duration::from_micros(20);

/// The timer slack of a thread that naps in waits: the kernel's default (50 µs) would
/// stretch every 20 µs nap to about 70.
const NAP_TIMER_SLACK_NS: libc::c_ulong = 1000;

thread_local! {
    /// Whether this thread's timer slack has been set for naps.
    static NAP_SLACK_SET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sleeps [`OVERSUBSCRIBED_NAP`], with this thread's timer slack lowered the first time.
fn nap() {
    NAP_SLACK_SET.with(|set| {
        if !set.get() {
            // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only the
            // calling thread; a failure leaves the default slack, which is merely slower.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, NAP_TIMER_SLACK_NS) };
            set.set(true);
        }
    });
    std::thread::sleep(OVERSUBSCRIBED_NAP);
}

/// Calls `ready` until it returns true or `timeout` has passed (then returns the time waited).
/// Spins first, then yields the core; where PEs outnumber the node's cores (`oversubscribed`)
/// it sleeps instead, since a yield does not make the scheduler run the PE that shares the
/// core, and a spinning waiter would hold it until its time slice ends.
pub(crate) fn poll_until(
    timeout: Duration,
    oversubscribed: bool,
    mut ready: impl FnMut() -> bool,
) -> Result<(), Duration> {
    // The clock is read only once a wait has lasted a few dozen polls, so short waits (the
    // common case) cost no system call; the timeout counts from that first reading.
    let mut start: Option<Instant> = None;
    let mut polls: u64 = 0;
    loop {
        if ready() {
            return Ok(());
        }
        polls += 1;
        if oversubscribed {
            if polls < OVERSUBSCRIBED_SPIN_POLLS {
                spin_loop()
            } else if polls < OVERSUBSCRIBED_SPIN_POLLS + OVERSUBSCRIBED_YIELDS {
                std::thread::yield_now()
            } else {
                nap()
            }
        } else if polls < SPIN_POLLS {
            spin_loop();
        } else {
            std::thread::yield_now();
        }
        if polls.is_multiple_of(POLLS_PER_CLOCK) {
            let waited = start.get_or_insert_with(Instant::now).elapsed();
            if waited >= timeout {
                return Err(waited);
            }
        }
    }
}
