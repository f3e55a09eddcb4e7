//! The protocol each transport implements ([`Protocol`]), one file each.

use bytemuck::Pod;

use super::channel::Channel;
use super::job::Job;
use super::message::Incoming;
use super::partners::Lane;
use crate::error::Result;

/// One transport's protocol for a whole call, once the call has been validated and its lanes
/// assigned: each implementation reads top to bottom in its own file and holds its own state;
/// what every path shares is the [`Channel`] it is handed.
pub(super) trait Protocol<'rt, T: Pod> {
    /// Sends every outgoing message of `job` and receives every incoming one
    /// (`job.received[i]` the count of message `i`), as [`Call::run`](super::Call::run) describes.
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()>;

    /// Starts a call ([`Call::start`](super::Call::start)): sends what can go without
    /// waiting for any incoming message and returns `true` when the receives are left to
    /// [`finish`](Self::finish). A path with no split form runs the whole call here (its
    /// messages land in place) and returns `false`; the call is then finished already.
    fn start(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<bool> {
        self.exchange(chan, job).map(|()| false)
    }

    /// Completes a call that [`start`](Self::start) left in flight: `job` holds its incoming
    /// messages and lanes (no outgoing ones) and the consuming function given to finish.
    fn finish(&mut self, _chan: &mut Channel<'rt>, _job: &mut Job<'_, 'rt, T>) -> Result<()> {
        Ok(())
    }

    /// Ends a started call that will not be finished (its exchange is dropped with it in
    /// flight): no request of this PE outlives the exchange.
    fn abandon(&mut self) {}

    /// Announces a receive posted ahead of its call
    /// ([`Exchange::post_receives`](super::Exchange::post_receives)), on the paths that
    /// announce.
    fn post(&mut self, _chan: &mut Channel<'rt>, _incoming: &Incoming, _lane: &Lane) -> Result<()> {
        Ok(())
    }

    /// Waits until the receivers of this PE's last messages are done with them at the source.
    fn settle(&mut self, _chan: &mut Channel<'rt>) -> Result<()> {
        Ok(())
    }

    /// Makes room for messages of up to `largest` elements (agreed by every PE), on the paths
    /// that stage them.
    ///
    /// # Collective
    /// Every PE calls it with the same `largest`.
    fn collective_reserve(&mut self, _chan: &mut Channel<'rt>, _largest: usize) -> Result<()> {
        Ok(())
    }

    /// Whether the path stages messages (`None`: it does not), and if so the elements per
    /// message it has room for (`Some(None)`: none reserved yet).
    fn reserved(&self) -> Option<Option<usize>> {
        None
    }

    /// Whether the path stages offered messages too (the others read them in place).
    fn stages_offers(&self) -> bool {
        false
    }

    /// Symmetric bytes the transport holds of its own.
    fn symmetric_bytes(&self) -> usize {
        0
    }

    /// Makes the MPI path's `index`-th `MPI_Isend` from now on fail (see
    /// [`Exchange::fail_mpi_isend`]).
    #[cfg(feature = "fault-injection")]
    fn fail_isend(&mut self, _index: usize) {}
}
