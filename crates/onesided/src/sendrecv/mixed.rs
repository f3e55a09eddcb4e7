//! An exchange whose partners on this node and on other nodes go by different paths
//! ([`Links`](crate::Links)): each call is split by the receiver's or sender's node into two
//! parts, each run by its own transport on the same channel. Where one part is MPI, its
//! receives and sends are posted first and completed last, so that both parts are in flight
//! together; otherwise the same-node part runs first, then the other. Either way no PE waits
//! on a part its partner has not reached: a pair of PEs is of one class from both ends, so
//! each part depends only on the same part of other PEs.
//!
//! Packed messages are staged for both parts when a call has both, so a same-node receiver
//! is no longer packed into in place in such a call (one copy more on the node, none across).

use bytemuck::Pod;

use super::channel::Channel;
use super::job::{Job, direct_data};
use super::message::{Incoming, Outgoing};
use super::mpi::Mpi;
use super::partners::Lane;
use super::protocol::Protocol;
use crate::error::Result;

/// One part of a mixed exchange.
pub(super) enum Part<'rt, T: Pod> {
    /// MPI two-sided, started before the other part and completed after it.
    Mpi(Mpi),
    /// A one-sided transport, run whole.
    OneSided(Box<dyn Protocol<'rt, T> + 'rt>),
}

impl<'rt, T: Pod> Part<'rt, T> {
    fn transport(&mut self) -> &mut dyn Protocol<'rt, T> {
        match self {
            Part::Mpi(mpi) => mpi,
            Part::OneSided(t) => t.as_mut(),
        }
    }

    fn transport_ref(&self) -> &dyn Protocol<'rt, T> {
        match self {
            Part::Mpi(mpi) => mpi,
            Part::OneSided(t) => t.as_ref(),
        }
    }
}

/// The transport of an exchange with one path to the PEs of this node and another to the
/// rest.
pub(super) struct Mixed<'rt, T: Pod> {
    /// To and from PEs on this node.
    pub near: Part<'rt, T>,
    /// To and from PEs on other nodes.
    pub far: Part<'rt, T>,
    /// The part a started call of one class is in flight on (`true`: near).
    pub started: Option<bool>,
}

/// One part's messages (`inc`: the indices of its incoming messages in the whole call), and
/// what the part's job borrows.
struct Split<'c, T> {
    inc: Vec<usize>,
    outgoing: Vec<Outgoing<'c, T>>,
    incoming: Vec<Incoming>,
    out_lanes: Vec<Lane>,
    in_lanes: Vec<Lane>,
    received: Vec<usize>,
    /// The part's pack buffer, never used: its messages are copies or offers.
    spare: Vec<T>,
    nothing_to_pack: fn(&mut [&mut [T]]),
}

/// Runs `$body` with `$job`, the job of part `$split` of the call, whose incoming messages go
/// to the call's consuming function `$consume` (an `Option`) by their indices in the call.
macro_rules! with_part_job {
    ($buffers:expr, $split:expr, $consume:expr, |$job:ident| $body:expr) => {{
        let Split { inc, outgoing, incoming, out_lanes, in_lanes, received, spare, nothing_to_pack } =
            &mut $split;
        let consumes = $consume.is_some();
        let mut by_call_index = |j: usize, data: &[T]| {
            if let Some(consume) = $consume.as_mut() {
                consume(inc[j], data)
            }
        };
        let mut $job = Job {
            buffers: $buffers,
            outgoing,
            incoming,
            out_lanes,
            in_lanes,
            received,
            pack: nothing_to_pack,
            consume: if consumes { Some(&mut by_call_index) } else { None },
            pack_buffer: spare,
        };
        $body
    }};
}

impl<'rt, T: Pod> Protocol<'rt, T> for Mixed<'rt, T> {
    fn exchange(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        let rt = chan.rt;
        let near_out = job.outgoing.iter().filter(|o| rt.same_node(o.to())).count();
        let near_in = job.incoming.iter().filter(|i| rt.same_node(i.from)).count();
        if near_out == job.outgoing.len() && near_in == job.incoming.len() {
            return self.near.transport().exchange(chan, job);
        }
        if near_out == 0 && near_in == 0 {
            return self.far.transport().exchange(chan, job);
        }
        // Both classes in one call: packed messages are staged once for both parts, and every
        // message becomes a copy of its data (or stays an offer, which the get path reads in
        // place).
        job.stage_packed();
        let staged = std::mem::take(job.pack_buffer);
        let outcome = self.run_split(chan, job, &staged);
        *job.pack_buffer = staged;
        outcome
    }

    /// A call whose messages are all of one class starts on that class's transport; a call
    /// of both classes runs whole here (its parts already overlap each other).
    fn start(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<bool> {
        let rt = chan.rt;
        let near = |pe: usize| rt.same_node(pe);
        let class = |near_class: bool| {
            job.outgoing.iter().all(|o| near(o.to()) == near_class)
                && job.incoming.iter().all(|i| near(i.from) == near_class)
        };
        let part = if class(true) {
            true
        } else if class(false) {
            false
        } else {
            return self.exchange(chan, job).map(|()| false);
        };
        let split = if part { self.near.transport() } else { self.far.transport() }.start(chan, job)?;
        self.started = split.then_some(part);
        Ok(split)
    }

    fn finish(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>) -> Result<()> {
        match self.started.take() {
            Some(true) => self.near.transport().finish(chan, job),
            Some(false) => self.far.transport().finish(chan, job),
            None => Ok(()),
        }
    }

    fn abandon(&mut self) {
        match self.started.take() {
            Some(true) => self.near.transport().abandon(),
            Some(false) => self.far.transport().abandon(),
            None => {}
        }
    }

    fn post(&mut self, chan: &mut Channel<'rt>, incoming: &Incoming, lane: &Lane) -> Result<()> {
        if chan.rt.same_node(incoming.from) {
            self.near.transport().post(chan, incoming, lane)
        } else {
            self.far.transport().post(chan, incoming, lane)
        }
    }

    fn settle(&mut self, chan: &mut Channel<'rt>) -> Result<()> {
        self.near.transport().settle(chan)?;
        self.far.transport().settle(chan)
    }

    fn collective_reserve(&mut self, chan: &mut Channel<'rt>, largest: usize) -> Result<()> {
        self.near.transport().collective_reserve(chan, largest)?;
        self.far.transport().collective_reserve(chan, largest)
    }

    fn reserved(&self) -> Option<Option<usize>> {
        // Every message is checked against the reservation of a part that stages, whichever
        // part it goes by: the reservation is agreed for the exchange as a whole.
        self.near.transport_ref().reserved().or_else(|| self.far.transport_ref().reserved())
    }

    fn stages_offers(&self) -> bool {
        self.near.transport_ref().stages_offers() || self.far.transport_ref().stages_offers()
    }

    fn symmetric_bytes(&self) -> usize {
        self.near.transport_ref().symmetric_bytes() + self.far.transport_ref().symmetric_bytes()
    }

    #[cfg(feature = "fault-injection")]
    fn fail_isend(&mut self, index: usize) {
        self.near.transport().fail_isend(index);
        self.far.transport().fail_isend(index);
    }
}

impl<'rt, T: Pod> Mixed<'rt, T> {
    /// Runs a call with messages of both classes, its packed messages already in `staged`.
    fn run_split(&mut self, chan: &mut Channel<'rt>, job: &mut Job<'_, 'rt, T>, staged: &[T]) -> Result<()> {
        let rt = chan.rt;
        let buffers = job.buffers;
        let mut at = 0;
        let messages: Vec<Outgoing<'_, T>> = job
            .outgoing
            .iter()
            .map(|o| match direct_data(buffers, o) {
                Some(_) => o.clone(),
                None => {
                    at += o.len();
                    Outgoing::Copy { to: o.to(), data: &staged[at - o.len()..at] }
                }
            })
            .collect();
        let split = |near: bool| {
            let out: Vec<usize> =
                (0..messages.len()).filter(|&i| rt.same_node(messages[i].to()) == near).collect();
            let inc: Vec<usize> =
                (0..job.incoming.len()).filter(|&i| rt.same_node(job.incoming[i].from) == near).collect();
            Split {
                outgoing: out.iter().map(|&i| messages[i].clone()).collect(),
                incoming: inc.iter().map(|&i| job.incoming[i]).collect(),
                out_lanes: out.iter().map(|&i| job.out_lanes[i]).collect(),
                in_lanes: inc.iter().map(|&i| job.in_lanes[i]).collect(),
                received: vec![0; inc.len()],
                inc,
                spare: Vec::new(),
                nothing_to_pack: |_| {},
            }
        };
        let (mut near, mut far) = (split(true), split(false));
        let mut consume = job.consume.take();
        // Whether the MPI part's messages are in, to be handed to the consuming function.
        let mut mpi_done = false;
        let near_is_mpi = matches!(self.near, Part::Mpi(_));
        let outcome = match (&mut self.near, &mut self.far) {
            (Part::Mpi(mpi), Part::OneSided(other)) | (Part::OneSided(other), Part::Mpi(mpi)) => {
                let (by_mpi, by_other) =
                    if near_is_mpi { (&mut near, &mut far) } else { (&mut far, &mut near) };
                // The MPI part's messages go to the consuming function once they are in (below).
                let mut none: Option<super::job::Consume<'_, T>> = None;
                with_part_job!(buffers, *by_mpi, none, |mpi_job| {
                    mpi.post_call(chan, &mut mpi_job)?;
                    let outcome = with_part_job!(buffers, *by_other, consume, |other_job| other
                        .exchange(chan, &mut other_job));
                    match outcome {
                        // Not a refusal, which ends the other part's protocol normally: the
                        // MPI requests are cancelled (the job is to be ended).
                        Err(ref e) if !protocol_completed(e) => {
                            mpi.abandon_call();
                            outcome
                        }
                        _ => {
                            let finished = mpi.complete_call(chan, &mut mpi_job);
                            mpi_done = finished.is_ok();
                            outcome.and(finished)
                        }
                    }
                })
            }
            (near_part, far_part) => {
                // Neither part is MPI (both MPI makes no mixed exchange): the same-node part
                // first, then the other, on every PE.
                let near_outcome =
                    with_part_job!(buffers, near, consume, |j| near_part.transport().exchange(chan, &mut j));
                match near_outcome {
                    Err(e) if !protocol_completed(&e) => Err(e),
                    _ => near_outcome.and(with_part_job!(buffers, far, consume, |j| far_part
                        .transport()
                        .exchange(chan, &mut j))),
                }
            }
        };
        job.consume = consume;
        let mpi_part = match (&self.near, &self.far) {
            (Part::Mpi(_), _) => Some(&near),
            (_, Part::Mpi(_)) => Some(&far),
            _ => None,
        };
        for part in [&near, &far] {
            for (&i, &count) in part.inc.iter().zip(&part.received) {
                job.received[i] = count;
            }
        }
        if mpi_done && let Some(part) = mpi_part {
            for &i in &part.inc {
                job.consume_in_place(i, job.received[i]);
            }
        }
        outcome
    }
}

/// Whether a call that failed with `e` still ran its protocol to the end on this PE (a
/// message refused for its size or its place), so that its partners are not waiting on it.
fn protocol_completed(e: &crate::Error) -> bool {
    matches!(e, crate::Error::MessageTooLarge { .. } | crate::Error::Exchange { .. })
}
