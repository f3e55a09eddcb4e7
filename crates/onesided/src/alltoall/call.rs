//! One call of an all-to-all, in the shape of an exchange's ([`AlltoallCall`]): the blocks
//! from the send buffer, or written by a packing function, or fused into their final places;
//! and the algorithms' protocols that run it.

use std::ffi::c_int;
use std::mem::{MaybeUninit, size_of};
use std::ptr::NonNull;

use bytemuck::Pod;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::algorithm::AlltoallAlgorithm;
use super::state::{Alltoall, Delivery};
use crate::error::{Error, Result};
use crate::heap::SymArray;
use crate::mpi_raw::bytes_type;

/// The smallest block, in bytes, that [`AlltoallCall::pack`] packs straight into
/// a mapped receiver. Below it, packing into the local send buffer and copying the block over
/// is faster: the block is still in this core's cache, and one bulk copy writes whole cache
/// lines where packing writes into another core's lines piece by piece (measured on the PME
/// FFT's transposes between 2 PEs: packing straight in costs more at 115 KiB blocks, 48³, and
/// saves the copy's time at 0.9 and 2.1 MiB, 96³ and 128³).
pub const DIRECT_PACK_MIN: usize = 512 * 1024;

/// The packing function of a call without one.
type NoPack<T> = fn(usize, &mut [T]);

/// One call of an [`Alltoall`] ([`Alltoall::call`]): nothing moves until
/// [`run`](Self::run).
#[must_use = "a call moves nothing until it is run"]
pub struct AlltoallCall<'a, 'g, 'rt, T: Pod, P = NoPack<T>> {
    alltoall: &'a mut Alltoall<'g, 'rt, T>,
    pack: Option<P>,
}

/// A call whose blocks go straight to their final places ([`AlltoallCall::fuse`]).
#[must_use = "a call moves nothing until it is run"]
pub struct FusedCall<'a, 'g, 'rt, 't, T: Pod, U: Pod, P, D, Q> {
    call: AlltoallCall<'a, 'g, 'rt, T, P>,
    target: &'a SymArray<'t, U>,
    direct: D,
    unpack: Q,
}

impl<'g, 'rt, T: Pod> Alltoall<'g, 'rt, T> {
    /// Starts a call: its blocks are the send buffer's ([`send_buffer`](Self::send_buffer))
    /// unless it is given a packing function ([`pack`](AlltoallCall::pack)).
    pub fn call(&mut self) -> AlltoallCall<'_, 'g, 'rt, T> {
        AlltoallCall { alltoall: self, pack: None }
    }

    /// The all-to-all of the blocks in the send buffer.
    ///
    /// # Collective
    /// Every member of the group calls it; other PEs get an error.
    fn run_plain(&mut self) -> Result<&[T]> {
        let Some(me) = self.group.my_rank() else {
            return Err(Error::InvalidArgument(format!(
                "all-to-all '{}': PE {} is not a member of group '{}'",
                self.name,
                self.group.runtime().my_pe(),
                self.group.name()
            )));
        };
        self.calls += 1;
        match self.algorithm {
            AlltoallAlgorithm::Ordered | AlltoallAlgorithm::NodeAware => self.run_one_sided(me)?,
            AlltoallAlgorithm::OrderedMpi => self.run_ordered_mpi()?,
            AlltoallAlgorithm::Mpi => self.run_mpi()?,
            #[cfg(feature = "baselines")]
            AlltoallAlgorithm::Shmem => self.run_shmem(),
        }
        // SAFETY: after the call, no PE writes this member's receive array until this member
        // enters the next call: one-sided writers wait for its ready signal of that call, MPI
        // receives are local, and the shmem path starts with a barrier. `&self` borrowed by
        // the result excludes that next call while the slice lives.
        Ok(unsafe { self.recv.local_slice() })
    }

    /// The all-to-all of the blocks `pack` writes ([`AlltoallCall::pack`]).
    ///
    /// # Collective
    /// As [`run_plain`](Self::run_plain).
    fn run_packed(&mut self, mut pack: impl FnMut(usize, &mut [T])) -> Result<&[T]> {
        let Some(me) = self.group.my_rank() else {
            return self.run_plain();
        };
        let one_sided = self.algorithm.one_sided();
        if !one_sided || self.block * size_of::<T>() < DIRECT_PACK_MIN {
            let block = self.block;
            for (r, out) in self.send_buffer().chunks_exact_mut(block.max(1)).enumerate() {
                pack(r, out);
            }
            return self.run_plain();
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
        // SAFETY: as in run_plain.
        Ok(unsafe { self.recv.local_slice() })
    }

    /// The all-to-all of [`AlltoallCall::fuse`].
    ///
    /// # Collective
    /// As [`run_plain`](Self::run_plain).
    ///
    /// # Safety
    /// As [`AlltoallCall::fuse`].
    unsafe fn run_fused<U: Pod>(
        &mut self,
        target: &SymArray<'_, U>,
        mut direct: impl FnMut(usize, NonNull<U>),
        mut pack: impl FnMut(usize, &mut [T]),
        mut unpack: impl FnMut(usize, &[T]),
    ) -> Result<()> {
        let Some(me) = self.group.my_rank() else {
            return self.run_plain().map(|_| ());
        };
        let one_sided = self.algorithm.one_sided();
        let block = self.block;
        if !one_sided {
            for (r, out) in self.send_buffer().chunks_exact_mut(block.max(1)).enumerate() {
                pack(r, out);
            }
            let received = self.run_plain()?;
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

    /// The one-sided protocol of [`run_packed`](Self::run_packed) and
    /// [`run_fused`](Self::run_fused), for call `self.calls`: this
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
        let bytes_type = bytes_type();
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
        let bytes_type = bytes_type();
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

    #[cfg(feature = "baselines")]
    fn run_shmem(&mut self) {
        let (start, log_stride, size) = self.group.active_set().expect("checked at creation");
        let sync = self.shmem.as_mut().expect("the shmem baseline has its pSync");
        let set = sync.parity;
        sync.parity ^= 1;
        let barrier_sync = sync.psync.element_ptr(2 * set * sync.psync_len);
        let alltoall_sync = sync.psync.element_ptr((2 * set + 1) * sync.psync_len);
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

impl<'a, 'g, 'rt, T: Pod, P: FnMut(usize, &mut [T])> AlltoallCall<'a, 'g, 'rt, T, P> {
    /// The function that writes the outgoing blocks: called once per rank `r` with the `block`
    /// elements to fill for it (all of them). On the one-sided algorithms, with blocks of at
    /// least [`DIRECT_PACK_MIN`] bytes, to a rank whose memory is
    /// mapped into this process (the same node), it writes straight into that rank's receive
    /// buffer once the rank is ready, so the block is copied once, by the packing, instead of
    /// packed and then copied; other blocks, and every block on the other algorithms, are
    /// packed into the send buffer and sent.
    pub fn pack<F: FnMut(usize, &mut [T])>(self, pack: F) -> AlltoallCall<'a, 'g, 'rt, T, F> {
        AlltoallCall { alltoall: self.alltoall, pack: Some(pack) }
    }

    /// Makes the call's blocks go straight to their final places in the members' `target`
    /// arrays: to a member whose memory is mapped into this process, on the one-sided
    /// algorithms (whatever the block size: unlike [`pack`](Self::pack), which saves only the
    /// copy out of the send buffer, this saves the unpacking as well), `direct(rank, base)`
    /// writes this member's elements into that rank's copy of `target` (its element 0 at
    /// `base`) once the rank is ready, so each element is copied once, packing, moving and
    /// unpacking in one pass. To every other rank, and on every other algorithm, the block
    /// is packed (by the call's packing function, or taken from the send buffer), travels as
    /// in a plain call, and `unpack(rank, block)` is called on the receiver for each block
    /// that came that way, to place it in `target`.
    ///
    /// For a transpose between two distributed layouts (the slabs of a 3-D FFT), `direct` is
    /// the pack and unpack fused: it reads this member's data and writes each element where
    /// the receiver's `unpack` would have put it.
    ///
    /// # Safety
    /// - `direct(rank, base)` writes only elements of `rank`'s copy of `target` that no
    ///   other member writes in this call and that `rank` does not access during the call,
    ///   within the array's length, through `base` only, and is done when it returns.
    /// - No member accesses its own `target` from entering the call until it returns, apart
    ///   from what `unpack` does, and `unpack` writes only what no member's `direct` writes.
    /// - Every member fuses its call alike, with the same `target`.
    pub unsafe fn fuse<'t, U: Pod, D: FnMut(usize, NonNull<U>), Q: FnMut(usize, &[T])>(
        self,
        target: &'a SymArray<'t, U>,
        direct: D,
        unpack: Q,
    ) -> FusedCall<'a, 'g, 'rt, 't, T, U, P, D, Q> {
        FusedCall { call: self, target, direct, unpack }
    }

    /// Runs the all-to-all and returns the incoming blocks, block `r` from rank `r`, valid
    /// until the next call.
    ///
    /// # Collective
    /// Every member of the group must call it, in the same order as its other calls; other
    /// PEs must not (they get an error).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on a PE that is not a member, or a block too large for one
    /// MPI message on the MPI algorithms; [`Error::WaitTimeout`] when a member does not take
    /// part; [`Error::Mpi`] when MPI refuses a call.
    pub fn run(self) -> Result<&'a [T]> {
        let AlltoallCall { alltoall, pack } = self;
        match pack {
            None => alltoall.run_plain(),
            Some(pack) => alltoall.run_packed(pack),
        }
    }
}

impl<T: Pod, U: Pod, P, D, Q> FusedCall<'_, '_, '_, '_, T, U, P, D, Q>
where
    P: FnMut(usize, &mut [T]),
    D: FnMut(usize, NonNull<U>),
    Q: FnMut(usize, &[T]),
{
    /// Runs the all-to-all: afterwards every member's `target` holds its incoming blocks
    /// where `direct` and `unpack` put them.
    ///
    /// # Collective
    /// As [`AlltoallCall::run`].
    ///
    /// # Errors
    /// As [`AlltoallCall::run`].
    pub fn run(self) -> Result<()> {
        let FusedCall { call, target, direct, unpack } = self;
        let AlltoallCall { alltoall, pack } = call;
        // Without a packing function the send buffer holds the blocks already.
        let mut pack = pack;
        let pack = |rank: usize, out: &mut [T]| {
            if let Some(pack) = pack.as_mut() {
                pack(rank, out);
            }
        };
        // SAFETY: the caller's promise in `fuse`.
        unsafe { alltoall.run_fused(target, direct, pack, unpack) }
    }
}
