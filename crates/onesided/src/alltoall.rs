//! All-to-all within a PE group: every member sends one block to every member.
//!
//! Five paths give the same bytes:
//! - **ordered one-sided**, Kutzner et al.'s ordered all-to-all: in phase `i` a member sends
//!   to rank `(me + i) mod n` and receives from rank `(me - i) mod n`, and phases are
//!   separated by pairwise call counters (each member tells its source it is ready, waits for
//!   its destination to be ready, puts, and waits for its source's data) instead of barriers;
//! - **node-aware one-sided**: the same with the phases looping over nodes first and then over
//!   the members of a node, so a node's members talk to one other node at a time (with
//!   unequal node sizes it falls back to the plain order);
//! - **ordered MPI**: the same phases as `MPI_Sendrecv`;
//! - **MPI**: `MPI_Alltoall` on the group's communicator;
//! - **shmem**: `shmem_alltoall64` (or `32`) on the group as an active set, after a barrier
//!   that keeps a fast member from writing into a slow one's result while it is still read.
//!
//! Each member packs its outgoing blocks into [`Alltoall::send_buffer`] (block `r` goes to
//! rank `r`) and reads the result, block `r` from rank `r`, from what
//! [`Alltoall::collective_run`] returns. Both are symmetric arrays, so no path copies more
//! than it must.

use std::ffi::{c_int, c_long};
use std::fmt;
use std::mem::{MaybeUninit, size_of};
use std::ptr::NonNull;
use std::str::FromStr;

use bytemuck::Pod;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::error::{Error, Result};
use crate::group::PeGroup;
use crate::heap::SymArray;
use crate::signal::SignalArray;

/// The smallest block, in bytes, that [`Alltoall::collective_run_packed`] packs straight into
/// a mapped receiver. Below it, packing into the local send buffer and copying the block over
/// is faster: the block is still in this core's cache, and one bulk copy writes whole cache
/// lines where packing writes into another core's lines piece by piece (measured on the PME
/// FFT's transposes between 2 PEs: packing straight in costs more at 115 KiB blocks, 48³, and
/// saves the copy's time at 0.9 and 2.1 MiB, 96³ and 128³).
pub const DIRECT_PACK_MIN: usize = 512 * 1024;

/// Timed calls per candidate when [`AlltoallPath::Auto`] calibrates, after a warm-up call.
const CALIBRATION_CALLS: usize = 5;

/// The most buffer bytes [`AlltoallPath::Auto`]'s candidates may hold at once to be timed
/// in interleaved rounds; beyond it they are timed one after another.
const INTERLEAVED_BYTES: usize = 64 << 20;

/// Which algorithm an [`Alltoall`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlltoallPath {
    /// Ordered phases, one-sided puts, pairwise call counters.
    OrderedOneSided,
    /// Ordered over nodes, then over the members of a node; one-sided.
    NodeAwareOneSided,
    /// Ordered phases of `MPI_Sendrecv`.
    OrderedMpi,
    /// `MPI_Alltoall`.
    Mpi,
    /// `shmem_alltoall64` / `shmem_alltoall32` on the group as an active set.
    Shmem,
    /// The path measured fastest for this group size and block on this job's nodes: each
    /// candidate makes a few calls at creation, interleaved with the others' where their
    /// buffers fit together, the median call (each timed as its slowest member's) decides,
    /// and the choice is cached like the exchanges' links ([`crate::links`]); an all-to-all created
    /// so reports the path it took ([`Alltoall::path`]).
    Auto,
}

impl AlltoallPath {
    /// Every path, in the order reports list them.
    pub const ALL: [AlltoallPath; 5] = [
        AlltoallPath::OrderedOneSided,
        AlltoallPath::NodeAwareOneSided,
        AlltoallPath::OrderedMpi,
        AlltoallPath::Mpi,
        AlltoallPath::Shmem,
    ];

    /// The path's place in [`ALL`](Self::ALL) (`None` for `Auto`).
    fn index(self) -> Option<usize> {
        AlltoallPath::ALL.iter().position(|&q| q == self)
    }

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            AlltoallPath::OrderedOneSided => "ordered-onesided",
            AlltoallPath::NodeAwareOneSided => "node-aware-onesided",
            AlltoallPath::OrderedMpi => "ordered-mpi",
            AlltoallPath::Mpi => "mpi",
            AlltoallPath::Shmem => "shmem",
            AlltoallPath::Auto => "auto",
        }
    }
}

impl fmt::Display for AlltoallPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AlltoallPath {
    type Err = Error;

    fn from_str(s: &str) -> Result<AlltoallPath> {
        AlltoallPath::ALL.into_iter().chain([AlltoallPath::Auto]).find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<&str> = AlltoallPath::ALL.iter().map(|p| p.name()).collect();
            Error::InvalidArgument(format!(
                "unknown all-to-all path {s:?}: expected one of {} or auto",
                names.join(", ")
            ))
        })
    }
}

/// Where one member's data for a destination goes in the one-sided protocol.
enum Delivery<'a, T, U> {
    /// Straight into the destination's target array, mapped at this address.
    Mapped(NonNull<U>),
    /// Into this block of the send buffer, which a put then carries.
    Packed(&'a mut [T]),
}

/// An all-to-all of `block` elements per pair of members of a [`PeGroup`].
pub struct Alltoall<'g, 'rt, T: Pod> {
    group: GroupRef<'g, 'rt>,
    name: String,
    path: AlltoallPath,
    block: usize,
    send: SymArray<'rt, T>,
    recv: SymArray<'rt, T>,
    /// Signal `r`: rank `r` is ready for this member's block of the current call.
    ready: SignalArray<'rt>,
    /// Signal `r`: rank `r`'s block of the current call is in place.
    arrived: SignalArray<'rt>,
    /// (destination rank, source rank) per phase, for this member.
    phases: Vec<(usize, usize)>,
    calls: u64,
    /// Shmem path: two alternating (barrier, all-to-all) pSync pairs.
    psync: Option<SymArray<'rt, c_long>>,
    psync_len: usize,
    parity: usize,
}

impl<'g, 'rt, T: Pod> Alltoall<'g, 'rt, T> {
    /// Creates the all-to-all with symmetric send and receive buffers of `block` elements per
    /// member.
    ///
    /// # Collective
    /// Every PE of the job (members or not) must call it with the same arguments.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on the shmem path when the group is not an active set or a
    /// block is not a whole number of 32-bit words.
    pub fn collective_new(
        group: &'g PeGroup<'rt>,
        name: &str,
        block: usize,
        path: AlltoallPath,
    ) -> Result<Self> {
        Self::collective_with(GroupRef::Borrowed(group), name, block, path)
    }

    /// [`collective_new`](Self::collective_new) on a group the all-to-all keeps (one of
    /// [`PeGroup::collective_split`]'s, say, made for it alone).
    ///
    /// # Collective
    /// As [`collective_new`](Self::collective_new): every PE calls it, each with its own part
    /// of the same split.
    ///
    /// # Errors
    /// As [`collective_new`](Self::collective_new).
    pub fn collective_owning(
        group: PeGroup<'rt>,
        name: &str,
        block: usize,
        path: AlltoallPath,
    ) -> Result<Self> {
        Self::collective_with(GroupRef::Owned(Box::new(group)), name, block, path)
    }

    fn collective_with(
        group: GroupRef<'g, 'rt>,
        name: &str,
        block: usize,
        path: AlltoallPath,
    ) -> Result<Self> {
        if path == AlltoallPath::Auto {
            let chosen = Self::collective_calibrate(&group, name, block)?;
            return Self::collective_with(group, name, block, chosen);
        }
        let rt = group.runtime();
        let n = group.len();
        let len = n.checked_mul(block).ok_or_else(|| Error::SizeOverflow {
            array: format!("{name}: buffers"),
            len: block,
            elem_size: size_of::<T>(),
        })?;
        if path == AlltoallPath::Shmem {
            // Split groups differ from PE to PE: every PE learns whether any cannot serve.
            let unfit = group.active_set().is_none() || !(block * size_of::<T>()).is_multiple_of(4);
            let any_unfit = rt.max_u64_one(u64::from(unfit))? > 0;
            if group.active_set().is_none() || any_unfit && !unfit {
                return Err(Error::InvalidArgument(format!(
                    "all-to-all '{name}': the shmem path needs the group to be an active set \
                     (ascending PEs with a power-of-two stride) on every PE; group '{}' is {:?} here",
                    group.name(),
                    group.members()
                )));
            }
            if !(block * size_of::<T>()).is_multiple_of(4) {
                return Err(Error::InvalidArgument(format!(
                    "all-to-all '{name}': shmem_alltoall moves whole 32-bit words, and a block of \
                     {block} elements of {} bytes is not",
                    size_of::<T>()
                )));
            }
        }
        let psync_len = {
            // SAFETY: reading shim constants.
            let (alltoall, barrier) =
                unsafe { (shmem_sys::shmem_sys_alltoall_sync_size, shmem_sys::shmem_sys_barrier_sync_size) };
            alltoall.max(barrier).max(1)
        };
        let psync = if path == AlltoallPath::Shmem {
            let sync_value = rt.constants().sync_value;
            Some(SymArray::collective_alloc_with(rt, &format!("{name}: pSync"), 4 * psync_len, |p| {
                p.fill(sync_value)
            })?)
        } else {
            None
        };
        let phases = match (group.my_rank(), path) {
            (Some(me), AlltoallPath::NodeAwareOneSided) => {
                crate::watchdog::watch("MPI_Allgather (the node-aware all-to-all's nodes)", None, || {
                    node_aware_phases(&group, me)
                })?
            }
            (Some(me), _) => (0..n).map(|i| ((me + i) % n, (me + n - i) % n)).collect(),
            (None, _) => Vec::new(),
        };
        Ok(Alltoall {
            group,
            name: name.to_string(),
            path,
            block,
            send: SymArray::collective_alloc(rt, &format!("{name}: send"), len)?,
            recv: SymArray::collective_alloc(rt, &format!("{name}: receive"), len)?,
            ready: SignalArray::collective_alloc(rt, &format!("{name}: ready"), n)?,
            arrived: SignalArray::collective_alloc(rt, &format!("{name}: arrived"), n)?,
            phases,
            calls: 0,
            psync,
            psync_len,
            parity: 0,
        })
    }

    /// The path (for one created on [`AlltoallPath::Auto`], the path it took).
    pub fn path(&self) -> AlltoallPath {
        self.path
    }

    /// The path to take for [`AlltoallPath::Auto`]: from the cache, else by timing each
    /// candidate ([`CALIBRATION_CALLS`] calls after a warm-up; a call's time is its slowest
    /// member's, agreed over the job, and the median call decides), written to the cache.
    /// Candidates whose buffers fit [`INTERLEAVED_BYTES`] together are timed in interleaved
    /// rounds, one call of each per round, so that a slow spell of the machine (a peer
    /// descheduled on an oversubscribed node, a burst of other traffic) weighs on every
    /// candidate alike; larger ones one after another. From the second round on, a candidate
    /// whose fastest call took over twice the best median so far makes no more calls.
    ///
    /// # Collective
    /// Every PE of the job, as the creation.
    fn collective_calibrate(group: &PeGroup<'rt>, name: &str, block: usize) -> Result<AlltoallPath> {
        let rt = group.runtime();
        let bytes = block.saturating_mul(size_of::<T>());
        let key = "alltoall";
        let cache = rt.collective_cache_file(&format!("alltoall-{}x{bytes}B", group.len()))?;
        let cached = match &cache {
            Some(file) if rt.my_pe() == 0 => {
                crate::cache::read_choice(file, key).and_then(|v| v.parse().ok())
            }
            _ => None,
        };
        let mut code = [cached.and_then(AlltoallPath::index).map_or(0, |i| i as u64 + 1)];
        rt.broadcast(0, &mut code)?;
        if let Some(&path) = (code[0] as usize).checked_sub(1).and_then(|i| AlltoallPath::ALL.get(i)) {
            return Ok(path);
        }
        // The shmem path only where every PE's group is an active set of whole words.
        let unfit = group.active_set().is_none() || !bytes.is_multiple_of(4);
        let shmem_fits = rt.max_u64_one(u64::from(unfit))? == 0;
        let candidates: Vec<AlltoallPath> =
            AlltoallPath::ALL.into_iter().filter(|&p| p != AlltoallPath::Shmem || shmem_fits).collect();
        // A candidate's send and receive buffers.
        let each = bytes.saturating_mul(group.len()).saturating_mul(2);
        let batches: Vec<Vec<AlltoallPath>> = if each.saturating_mul(candidates.len()) <= INTERLEAVED_BYTES {
            vec![candidates.clone()]
        } else {
            candidates.iter().map(|&p| vec![p]).collect()
        };
        let member = group.my_rank().is_some();
        let mut calls: Vec<Vec<u64>> = vec![Vec::new(); AlltoallPath::ALL.len()];
        let slot = |p: AlltoallPath| p.index().unwrap_or(0);
        let median = |times: &[u64]| {
            let mut sorted = times.to_vec();
            sorted.sort_unstable();
            sorted.get(sorted.len() / 2).copied()
        };
        for batch in batches {
            let mut live = Vec::with_capacity(batch.len());
            for &path in &batch {
                live.push((
                    path,
                    Alltoall::<T>::collective_new(group, &format!("{name}: calibration"), block, path)?,
                ));
            }
            // A warm-up call each (connections, registrations, first touches), not timed.
            if member {
                for (_, alltoall) in &mut live {
                    alltoall.collective_run()?;
                }
            }
            for round in 0..CALIBRATION_CALLS {
                let mut this = vec![0u64; live.len()];
                if member {
                    for ((_, alltoall), time) in live.iter_mut().zip(&mut this) {
                        let start = std::time::Instant::now();
                        alltoall.collective_run()?;
                        *time = (start.elapsed().as_nanos() as u64).min(i64::MAX as u64);
                    }
                }
                rt.max_u64(&mut this)?;
                for ((path, _), time) in live.iter().zip(this) {
                    calls[slot(*path)].push(time);
                }
                if round >= 1 {
                    // Every PE holds the same times, so every PE drops the same candidates
                    // (whose buffers it frees collectively) in the same order.
                    let best = calls.iter().filter_map(|t| median(t)).min().unwrap_or(u64::MAX);
                    live.retain(|(path, _)| {
                        calls[slot(*path)]
                            .iter()
                            .min()
                            .is_some_and(|&fastest| fastest <= best.saturating_mul(2))
                    });
                }
            }
        }
        let medians: Vec<u64> = calls.iter().map(|t| median(t).unwrap_or(u64::MAX)).collect();
        let best = candidates
            .iter()
            .copied()
            .min_by_key(|&p| medians[slot(p)])
            .unwrap_or(AlltoallPath::OrderedOneSided);
        if let Some(file) = cache.filter(|_| rt.my_pe() == 0) {
            let notes: Vec<String> = candidates
                .iter()
                .map(|&p| {
                    let times = &calls[slot(p)];
                    format!(
                        "{p}: {:.2} us, the median of {} calls (each its slowest member's)",
                        medians[slot(p)] as f64 / 1e3,
                        times.len()
                    )
                })
                .collect();
            crate::cache::write_choice(&file, key, best.name(), &notes);
        }
        Ok(best)
    }

    /// Elements per block.
    pub fn block(&self) -> usize {
        self.block
    }

    /// The order in which this member meets the others: (destination rank, source rank) per
    /// phase (empty on non-members).
    pub fn phases(&self) -> &[(usize, usize)] {
        &self.phases
    }

    /// The outgoing blocks, block `r` for rank `r`, to fill before each call.
    pub fn send_buffer(&mut self) -> &mut [T] {
        // SAFETY: no PE writes this member's send array, and no PE reads it outside a call
        // (puts and sends read it locally; shmem_alltoall has copied it out when the call
        // returns); `&mut self` excludes a call while the slice lives.
        unsafe { self.send.local_slice_mut() }
    }

    /// Runs the all-to-all and returns the incoming blocks, block `r` from rank `r`, valid
    /// until the next call.
    ///
    /// # Collective
    /// Every member of the group must call it; other PEs must not.
    pub fn collective_run(&mut self) -> Result<&[T]> {
        let Some(me) = self.group.my_rank() else {
            return Err(Error::InvalidArgument(format!(
                "all-to-all '{}': PE {} is not a member of group '{}'",
                self.name,
                self.group.runtime().my_pe(),
                self.group.name()
            )));
        };
        self.calls += 1;
        match self.path {
            AlltoallPath::OrderedOneSided | AlltoallPath::NodeAwareOneSided => self.run_one_sided(me)?,
            AlltoallPath::OrderedMpi => self.run_ordered_mpi()?,
            AlltoallPath::Mpi => self.run_mpi()?,
            AlltoallPath::Shmem => self.run_shmem(),
            AlltoallPath::Auto => unreachable!("an Auto all-to-all takes a path at creation"),
        }
        // SAFETY: after the call, no PE writes this member's receive array until this member
        // enters the next call: one-sided writers wait for its ready signal of that call, MPI
        // receives are local, and the shmem path starts with a barrier. `&self` borrowed by
        // the result excludes that next call while the slice lives.
        Ok(unsafe { self.recv.local_slice() })
    }

    /// [`collective_run`](Self::collective_run) with the outgoing blocks written by `pack`,
    /// called once per rank `r` with the `block` elements to fill for it (all of them). On
    /// the one-sided paths, with blocks of at least [`DIRECT_PACK_MIN`] bytes, to a rank whose
    /// memory is mapped into this process (the same node), `pack` writes straight into that
    /// rank's receive buffer once it is ready, so the block is copied once, by the packing,
    /// instead of packed and then copied; other blocks, and every block on the MPI and shmem
    /// paths, are packed into the send buffer and sent as by `collective_run`.
    ///
    /// # Collective
    /// As [`collective_run`](Self::collective_run).
    ///
    /// # Errors
    /// As [`collective_run`](Self::collective_run).
    pub fn collective_run_packed(&mut self, mut pack: impl FnMut(usize, &mut [T])) -> Result<&[T]> {
        let Some(me) = self.group.my_rank() else {
            return self.collective_run();
        };
        let one_sided = matches!(self.path, AlltoallPath::OrderedOneSided | AlltoallPath::NodeAwareOneSided);
        if !one_sided || self.block * size_of::<T>() < DIRECT_PACK_MIN {
            let block = self.block;
            for (r, out) in self.send_buffer().chunks_exact_mut(block.max(1)).enumerate() {
                pack(r, out);
            }
            return self.collective_run();
        }
        self.calls += 1;
        let block = self.block;
        let deliver = |dest: usize, to: Delivery<'_, T, T>| match to {
            Delivery::Mapped(base) => {
                // SAFETY: `dest` is ready for this call: it has finished with its receive buffer
                // of the last call and reads block `me` of it only after this member's arrived
                // signal; no other member writes block `me`. The range lies inside the array
                // (me < n), which the mapping covers whole. So this slice is the only access to
                // that memory until the signal.
                let target = unsafe { std::slice::from_raw_parts_mut(base.as_ptr().add(me * block), block) };
                pack(dest, target)
            }
            Delivery::Packed(out) => pack(dest, out),
        };
        // The receive buffer is the target: nothing to unpack, the caller reads it.
        self.deliver_one_sided(me, &self.recv, deliver, |_, _| {})?;
        // SAFETY: as in collective_run.
        Ok(unsafe { self.recv.local_slice() })
    }

    /// An all-to-all whose blocks go straight to their final places in the members' `target`
    /// arrays: to a member whose memory is mapped into this process, on the one-sided paths
    /// (whatever the block size: unlike [`collective_run_packed`](Self::collective_run_packed),
    /// which saves only the copy out of the send buffer, this saves the unpacking as well),
    /// `direct(rank, base)` writes this
    /// member's elements into that rank's copy of `target` (its element 0 at `base`) once the
    /// rank is ready, so each element is copied once, packing, moving and unpacking in one
    /// pass. To every other rank, and on every other path, `pack(rank, block)` fills the
    /// block for it, the blocks travel as in [`collective_run`](Self::collective_run), and
    /// `unpack(rank, block)` is called on the receiver for each block that came that way, to
    /// place it in `target`.
    ///
    /// For a transpose between two distributed layouts (the slabs of a 3-D FFT), `direct` is
    /// the pack and unpack fused: it reads this member's data and writes each element where
    /// the receiver's `unpack` would have put it.
    ///
    /// # Collective
    /// As [`collective_run`](Self::collective_run), with the same `target` on every member.
    ///
    /// # Safety
    /// - `direct(rank, base)` writes only elements of `rank`'s copy of `target` that no
    ///   other member writes in this call and that `rank` does not access during the call,
    ///   within the array's length, through `base` only, and is done when it returns.
    /// - No member accesses its own `target` from entering the call until it returns, apart
    ///   from what `unpack` does, and `unpack` writes only what no member's `direct` writes.
    ///
    /// # Errors
    /// As [`collective_run`](Self::collective_run).
    pub unsafe fn collective_run_fused<U: Pod>(
        &mut self,
        target: &SymArray<'_, U>,
        mut direct: impl FnMut(usize, NonNull<U>),
        mut pack: impl FnMut(usize, &mut [T]),
        mut unpack: impl FnMut(usize, &[T]),
    ) -> Result<()> {
        let Some(me) = self.group.my_rank() else {
            return self.collective_run().map(|_| ());
        };
        let one_sided = matches!(self.path, AlltoallPath::OrderedOneSided | AlltoallPath::NodeAwareOneSided);
        let block = self.block;
        if !one_sided {
            for (r, out) in self.send_buffer().chunks_exact_mut(block.max(1)).enumerate() {
                pack(r, out);
            }
            let received = self.collective_run()?;
            for (r, incoming) in received.chunks_exact(block.max(1)).enumerate() {
                unpack(r, incoming);
            }
            return Ok(());
        }
        self.calls += 1;
        let deliver = |dest: usize, to: Delivery<'_, T, U>| match to {
            Delivery::Mapped(base) => direct(dest, base),
            Delivery::Packed(out) => pack(dest, out),
        };
        self.deliver_one_sided(me, target, deliver, unpack)
    }

    /// The one-sided protocol of [`collective_run_packed`](Self::collective_run_packed) and
    /// [`collective_run_fused`](Self::collective_run_fused), for call `self.calls`: this
    /// member tells every source it is ready; then, per phase, once the destination is ready,
    /// `deliver` writes its data straight into the destination's `target` where that is mapped
    /// ([`Delivery::Mapped`]), or packs the block into the send buffer
    /// ([`Delivery::Packed`]), which a put with signal carries to the destination's receive
    /// buffer; last it waits for every source's block and hands those that came by put to
    /// `unpack`.
    ///
    /// Whether a block goes through the mapping is decided on both sides by the mapping
    /// alone, which is mutual: the same node, direct access on in every PE.
    fn deliver_one_sided<U: Pod>(
        &self,
        me: usize,
        target: &SymArray<'_, U>,
        mut deliver: impl FnMut(usize, Delivery<'_, T, U>),
        mut unpack: impl FnMut(usize, &[T]),
    ) -> Result<()> {
        let (k, block) = (self.calls, self.block);
        let timeout = self.group.runtime().wait_timeout();
        // Ready for every source at once: a member that has entered the call is done with its
        // target and receive buffer, and the sooner the others know, the sooner they write.
        for &(_, src) in &self.phases {
            self.ready.set(self.group.pe_of(src)?, me, k)?;
        }
        for &(dest, _) in &self.phases {
            let dest_pe = self.group.pe_of(dest)?;
            self.ready.wait_ge_from(dest, k, Some(dest_pe), timeout)?;
            match target.mapped(dest_pe) {
                Some(base) => {
                    deliver(dest, Delivery::Mapped(base));
                    // The stores above come before the signal: a release store through the
                    // mapping, or a library atomic after this fence.
                    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                    self.arrived.set(dest_pe, me, k)?;
                }
                None => {
                    let range = dest * block..(dest + 1) * block;
                    // SAFETY: as in send_buffer: no PE writes this member's send array, and the
                    // slice ends before the put reads it.
                    deliver(dest, Delivery::Packed(unsafe { self.send.local_range_mut(range.clone()) }));
                    // SAFETY: no PE writes the send array; the shared slice ends with the put.
                    let outgoing = unsafe { self.send.local_range(range) };
                    self.recv.put_signal(dest_pe, me * block, outgoing, &self.arrived, me, k)?;
                }
            }
        }
        for &(_, src) in &self.phases {
            let src_pe = self.group.pe_of(src)?;
            self.arrived.wait_ge_from(src, k, Some(src_pe), timeout)?;
            if target.mapped(src_pe).is_none() {
                // SAFETY: `src` wrote block `src` of the receive buffer before its arrived
                // signal, seen above, and writes it again only after this member's ready
                // signal of the next call.
                unpack(src, unsafe { self.recv.local_range(src * block..(src + 1) * block) });
            }
        }
        Ok(())
    }

    fn run_one_sided(&mut self, me: usize) -> Result<()> {
        let k = self.calls;
        let timeout = self.group.runtime().wait_timeout();
        for &(dest, src) in &self.phases {
            let (dest_pe, src_pe) = (self.group.pe_of(dest)?, self.group.pe_of(src)?);
            self.ready.set(src_pe, me, k)?;
            self.ready.wait_ge_from(dest, k, Some(dest_pe), timeout)?;
            // SAFETY: no PE writes this member's send array (see send_buffer), and the slice
            // ends before this call returns.
            let outgoing = unsafe { self.send.local_range(dest * self.block..(dest + 1) * self.block) };
            self.recv.put_signal(dest_pe, me * self.block, outgoing, &self.arrived, me, k)?;
            self.arrived.wait_ge_from(src, k, Some(src_pe), timeout)?;
        }
        Ok(())
    }

    fn communicator(&self) -> &SimpleCommunicator {
        self.group.communicator().expect("members have the group's communicator")
    }

    fn run_ordered_mpi(&mut self) -> Result<()> {
        let bytes = self.block_bytes()?;
        let comm = self.communicator().as_raw();
        // SAFETY: reading a constant of rsmpi's shim.
        let bytes_type = unsafe { ffi::RSMPI_UINT8_T };
        for &(dest, src) in &self.phases {
            // SAFETY: both blocks lie inside the symmetric buffers (rank < n); the receive
            // block is written only by this call; no reference to either exists.
            let code = crate::watchdog::watch("MPI_Sendrecv (ordered all-to-all)", None, || unsafe {
                ffi::MPI_Sendrecv(
                    self.send.element_ptr(dest * self.block).cast(),
                    bytes,
                    bytes_type,
                    dest as c_int,
                    0,
                    self.recv.element_ptr(src * self.block).cast(),
                    bytes,
                    bytes_type,
                    src as c_int,
                    0,
                    comm,
                    MaybeUninit::<ffi::MPI_Status>::uninit().as_mut_ptr(),
                )
            });
            if code != 0 {
                return Err(Error::Mpi { call: "MPI_Sendrecv", code });
            }
        }
        Ok(())
    }

    fn run_mpi(&mut self) -> Result<()> {
        let bytes = self.block_bytes()?;
        let comm = self.communicator();
        debug_assert_eq!(comm.size() as usize, self.group.len());
        // SAFETY: reading a constant of rsmpi's shim.
        let bytes_type = unsafe { ffi::RSMPI_UINT8_T };
        // SAFETY: send and receive buffers hold n blocks of `bytes` bytes each; no reference
        // to the receive buffer exists during the call.
        let code = crate::watchdog::watch("MPI_Alltoall", None, || unsafe {
            ffi::MPI_Alltoall(
                self.send.as_ptr().cast(),
                bytes,
                bytes_type,
                self.recv.as_ptr().cast(),
                bytes,
                bytes_type,
                comm.as_raw(),
            )
        });
        if code != 0 {
            return Err(Error::Mpi { call: "MPI_Alltoall", code });
        }
        Ok(())
    }

    fn run_shmem(&mut self) {
        let (start, log_stride, size) = self.group.active_set().expect("checked at creation");
        let psync = self.psync.as_ref().expect("the shmem path has its pSync");
        let set = self.parity;
        self.parity ^= 1;
        let barrier_sync = psync.element_ptr(2 * set * self.psync_len);
        let alltoall_sync = psync.element_ptr((2 * set + 1) * self.psync_len);
        let bytes = self.block * size_of::<T>();
        // SAFETY: the pSync arrays are symmetric, initialised to SHMEM_SYNC_VALUE, and this
        // set's previous use ended on every member (the barrier of the call in between); the
        // buffers are symmetric with `size` blocks of `bytes` bytes; every member calls this.
        crate::watchdog::watch("shmem_alltoall64", None, || unsafe {
            shmem_sys::shmem_barrier(start as i32, log_stride as i32, size as i32, barrier_sync);
            let (dest, src) = (self.recv.as_ptr().cast(), self.send.as_ptr().cast());
            if bytes.is_multiple_of(8) {
                shmem_sys::shmem_alltoall64(
                    dest,
                    src,
                    bytes / 8,
                    start as i32,
                    log_stride as i32,
                    size as i32,
                    alltoall_sync,
                );
            } else {
                shmem_sys::shmem_alltoall32(
                    dest,
                    src,
                    bytes / 4,
                    start as i32,
                    log_stride as i32,
                    size as i32,
                    alltoall_sync,
                );
            }
        })
    }

    fn block_bytes(&self) -> Result<c_int> {
        self.block.checked_mul(size_of::<T>()).and_then(|b| c_int::try_from(b).ok()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "all-to-all '{}': a block of {} elements exceeds what one MPI message can count",
                self.name, self.block
            ))
        })
    }
}

/// The group of an all-to-all: the caller's, or its own.
enum GroupRef<'g, 'rt> {
    Borrowed(&'g PeGroup<'rt>),
    Owned(Box<PeGroup<'rt>>),
}

impl<'rt> std::ops::Deref for GroupRef<'_, 'rt> {
    type Target = PeGroup<'rt>;

    fn deref(&self) -> &PeGroup<'rt> {
        match self {
            GroupRef::Borrowed(group) => group,
            GroupRef::Owned(group) => group,
        }
    }
}

/// Phases that visit the nodes in order and, within each, its members in order: member `l`
/// of node `j` meets member `(l + b) mod m` of node `(j + a) mod nodes` in phase `(a, b)`.
/// Falls back to the plain order when nodes have different member counts.
fn node_aware_phases(group: &PeGroup<'_>, me: usize) -> Result<Vec<(usize, usize)>> {
    let n = group.len();
    let comm = group.communicator().expect("members have the group's communicator");
    // Each member learns the lowest group rank on its node: that is the node's name.
    let node_comm = comm.split_shared(me as c_int);
    let mut leader = [me as u64];
    let local: Vec<u64> = {
        let mut all = vec![0u64; node_comm.size() as usize];
        node_comm.all_gather_into(&leader[..], &mut all[..]);
        all
    };
    leader[0] = *local.iter().min().expect("a node has this member");
    let mut leaders = vec![0u64; n];
    comm.all_gather_into(&leader[..], &mut leaders[..]);
    let mut nodes: Vec<Vec<usize>> = Vec::new();
    let mut names: Vec<u64> = leaders.clone();
    names.sort_unstable();
    names.dedup();
    for name in &names {
        nodes.push((0..n).filter(|&r| leaders[r] == *name).collect());
    }
    let per_node = nodes[0].len();
    if nodes.iter().any(|node| node.len() != per_node) {
        return Ok((0..n).map(|i| ((me + i) % n, (me + n - i) % n)).collect());
    }
    let my_node = names.iter().position(|&name| name == leaders[me]).expect("own node");
    let my_local = nodes[my_node].iter().position(|&r| r == me).expect("own rank");
    let count = nodes.len();
    let mut phases = Vec::with_capacity(n);
    for a in 0..count {
        for b in 0..per_node {
            let dest = nodes[(my_node + a) % count][(my_local + b) % per_node];
            let src = nodes[(my_node + count - a) % count][(my_local + per_node - b) % per_node];
            phases.push((dest, src));
        }
    }
    Ok(phases)
}

impl<T: Pod> std::fmt::Debug for Alltoall<'_, '_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alltoall")
            .field("name", &self.name)
            .field("group", &self.group.name())
            .field("path", &self.path)
            .field("block", &self.block)
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}
