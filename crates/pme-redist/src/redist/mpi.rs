//! The MPI paths: counts, then data, with `MPI_Sendrecv` between pairs in GROMACS's partner
//! order (+1, -1, +2, -2, ...), or `MPI_Alltoall` of the counts and `MPI_Alltoallv` of the data,
//! on a private duplicate of the world communicator whose errors return codes. Every call is
//! blocking, so no request outlives it.

use std::ffi::c_int;
use std::mem::{MaybeUninit, size_of};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use onesided::Runtime;

use super::plan::{ERROR, Plan};
use super::{Buffers, Forces, Particle, Transport};
use crate::RVec;
use crate::error::{Error, Result};

/// The MPI transport: its communicator, and whether it uses the collectives.
pub(super) struct Mpi {
    comm: SimpleCommunicator,
    alltoallv: bool,
}

impl Mpi {
    /// # Collective
    /// Duplicates the world communicator.
    pub(super) fn collective_new(rt: &Runtime, alltoallv: bool) -> Result<Self> {
        Ok(Mpi { comm: onesided::collective_error_returning_world(rt)?, alltoallv })
    }

    /// One u64 from every PE to every PE (zero where nothing is meant).
    fn counts(&self, rt: &Runtime, out: &[u64], into: &mut [u64]) -> Result<()> {
        let (comm, alltoallv) = (&self.comm, &self.alltoallv);
        let (me, n) = (rt.my_pe(), rt.n_pes());
        // SAFETY: reading a constant of rsmpi's shim.
        let u64_type = unsafe { ffi::RSMPI_UINT64_T };
        if *alltoallv {
            // SAFETY: both buffers hold n u64; every PE calls MPI_Alltoall.
            let code = unsafe {
                ffi::MPI_Alltoall(
                    out.as_ptr().cast(),
                    1,
                    u64_type,
                    into.as_mut_ptr().cast(),
                    1,
                    u64_type,
                    comm.as_raw(),
                )
            };
            return mpi_check(code, "MPI_Alltoall");
        }
        into[me] = out[me];
        for d in partner_order(n) {
            let (to, from) = ((me + d) % n, (me + n - d) % n);
            let mut value = 0u64;
            // SAFETY: one u64 each way; every PE runs the same sequence of partners, so each
            // send meets its receive; a status is a valid out-pointer.
            let code = unsafe {
                ffi::MPI_Sendrecv(
                    (&out[to] as *const u64).cast(),
                    1,
                    u64_type,
                    to as c_int,
                    0,
                    (&mut value as *mut u64).cast(),
                    1,
                    u64_type,
                    from as c_int,
                    0,
                    comm.as_raw(),
                    MaybeUninit::<ffi::MPI_Status>::uninit().as_mut_ptr(),
                )
            };
            mpi_check(code, "MPI_Sendrecv")?;
            into[from] = value;
        }
        Ok(())
    }

    /// Elements of `size` bytes: `send` holds `counts[p]` for PE `p` at `offsets[p]`, and
    /// `recv` receives `counts[s]` from PE `s` at `offsets[s]`.
    fn data(
        &self,
        rt: &Runtime,
        send: *const u8,
        (send_counts, send_offsets): (&[usize], &[usize]),
        recv: *mut u8,
        (recv_counts, recv_offsets): (&[usize], &[usize]),
        size: usize,
    ) -> Result<()> {
        let (comm, alltoallv) = (&self.comm, &self.alltoallv);
        let (me, n) = (rt.my_pe(), rt.n_pes());
        // SAFETY: reading constants of rsmpi's shim.
        let (bytes, null) = unsafe { (ffi::RSMPI_UINT8_T, ffi::RSMPI_PROC_NULL) };
        let int = |v: usize| {
            c_int::try_from(v * size).map_err(|_| Error::Config(format!("{v} elements exceed an MPI count")))
        };
        if *alltoallv {
            let sc: Vec<c_int> = send_counts.iter().map(|&c| int(c)).collect::<Result<_>>()?;
            let sd: Vec<c_int> = send_offsets.iter().map(|&c| int(c)).collect::<Result<_>>()?;
            let rc: Vec<c_int> = recv_counts.iter().map(|&c| int(c)).collect::<Result<_>>()?;
            let rd: Vec<c_int> = recv_offsets.iter().map(|&c| int(c)).collect::<Result<_>>()?;
            // SAFETY: the buffers hold the counted ranges at their offsets (symmetric arrays
            // sized for the home atoms and for all atoms, or the caller's forces, one per
            // received atom, checked by return_forces_into); no mutable reference to them
            // exists; every PE calls MPI_Alltoallv with matching counts (the counts were
            // exchanged first).
            let code = unsafe {
                ffi::MPI_Alltoallv(
                    send.cast(),
                    sc.as_ptr(),
                    sd.as_ptr(),
                    bytes,
                    recv.cast(),
                    rc.as_ptr(),
                    rd.as_ptr(),
                    bytes,
                    comm.as_raw(),
                )
            };
            return mpi_check(code, "MPI_Alltoallv");
        }
        if send_counts[me] > 0 {
            // SAFETY: the self share: distinct arrays, in bounds.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    send.add(send_offsets[me] * size),
                    recv.add(recv_offsets[me] * size),
                    send_counts[me] * size,
                )
            };
        }
        for d in partner_order(n) {
            let (to, from) = ((me + d) % n, (me + n - d) % n);
            let (s, r) = (send_counts[to], recv_counts[from]);
            // SAFETY: as for MPI_Alltoallv; a side with nothing to move talks to
            // MPI_PROC_NULL, which both partners know from the counts.
            let code = unsafe {
                ffi::MPI_Sendrecv(
                    send.add(send_offsets[to] * size).cast(),
                    int(s)?,
                    bytes,
                    if s > 0 { to as c_int } else { null },
                    1,
                    recv.add(recv_offsets[from] * size).cast(),
                    int(r)?,
                    bytes,
                    if r > 0 { from as c_int } else { null },
                    1,
                    comm.as_raw(),
                    MaybeUninit::<ffi::MPI_Status>::uninit().as_mut_ptr(),
                )
            };
            mpi_check(code, "MPI_Sendrecv")?;
        }
        Ok(())
    }
}

impl<'rt> Transport<'rt> for Mpi {
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()> {
        let (me, n) = (plan.rt.my_pe(), plan.rt.n_pes());
        if plan.is_particle[me] {
            // SAFETY: on plan path no PE reads or writes another's send buffer.
            unsafe { plan.pack_into(home, &buffers.send) };
        }
        // Counts to every PME rank (zero to the others).
        let counts_out: Vec<u64> = (0..n)
            .map(|pe| match plan.grid.rank_of_pe(pe) {
                Some(r) if plan.is_particle[me] => plan.count_to(r),
                _ => 0,
            })
            .collect();
        let mut counts_in = vec![0u64; n];
        self.counts(plan.rt, &counts_out, &mut counts_in)?;
        if plan.my_rank.is_none() {
            counts_in.fill(0);
        }
        for (count, &particle) in counts_in.iter_mut().zip(&plan.is_particle) {
            if !particle {
                *count = 0;
            }
        }
        plan.take_source_counts(&counts_in);
        let particle = size_of::<Particle>();
        let send_counts: Vec<usize> = (0..n)
            .map(|pe| match plan.grid.rank_of_pe(pe) {
                Some(r) if plan.is_particle[me] => plan.send_count(r),
                _ => 0,
            })
            .collect();
        let send_offsets: Vec<usize> =
            (0..n).map(|pe| plan.grid.rank_of_pe(pe).map_or(0, |r| plan.dest_offsets[r])).collect();
        let (recv_counts, recv_offsets) = (plan.src_counts.clone(), plan.src_offsets.clone());
        self.data(
            plan.rt,
            buffers.send.array().as_ptr().cast(),
            (&send_counts, &send_offsets),
            buffers.recv.as_ptr().cast(),
            (&recv_counts, &recv_offsets),
            particle,
        )
    }

    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        _home_forces: &mut [RVec],
    ) -> Result<bool> {
        // Sent from wherever they are, the caller's array or the staging buffer alike.
        let forces = forces.data;
        let (me, n) = (plan.rt.my_pe(), plan.rt.n_pes());
        let status_out: Vec<u64> =
            (0..n).map(|p| if plan.my_rank.is_some() { plan.status_to(p) } else { 0 }).collect();
        let mut status_in = vec![0u64; n];
        self.counts(plan.rt, &status_out, &mut status_in)?;
        // An error status goes without forces: the counts both sides use say so.
        let failed_here = plan.my_rank.is_some() && plan.pending.is_some();
        let mut recv_counts = vec![0usize; n];
        for r in 0..plan.grid.ranks() {
            let (pe, value) = (plan.grid.pe_of(r), status_in[plan.grid.pe_of(r)]);
            plan.take_status(r, value)?;
            if value & ERROR == 0 && plan.is_particle[me] {
                recv_counts[pe] = plan.dest_counts[r];
            }
        }
        let send_counts: Vec<usize> = (0..n)
            .map(|p| {
                if plan.my_rank.is_some() && plan.is_particle[p] && !failed_here {
                    plan.src_counts[p]
                } else {
                    0
                }
            })
            .collect();
        let send_offsets = plan.src_offsets.clone();
        let recv_offsets: Vec<usize> =
            (0..n).map(|pe| plan.grid.rank_of_pe(pe).map_or(0, |r| plan.dest_offsets[r])).collect();
        // Straight from the caller's forces, as MPI codes send them.
        self.data(
            plan.rt,
            forces.as_ptr().cast(),
            (&send_counts, &send_offsets),
            buffers.force_recv.array().as_ptr().cast(),
            (&recv_counts, &recv_offsets),
            size_of::<RVec>(),
        )?;
        Ok(false)
    }
}

/// GROMACS's partner order: +1, -1, +2, -2, ..., each other PE once.
pub(super) fn partner_order(n: usize) -> Vec<usize> {
    let mut order = Vec::with_capacity(n.saturating_sub(1));
    for k in 1..=n / 2 {
        order.push(k);
        if n - k != k {
            order.push(n - k);
        }
    }
    order
}

/// An MPI return code as a result.
fn mpi_check(code: c_int, call: &'static str) -> Result<()> {
    if code == 0 { Ok(()) } else { Err(Error::Comm(onesided::Error::Mpi { call, code })) }
}
