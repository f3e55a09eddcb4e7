//! Redistribution of coordinates and charges from the particle PEs to the PME ranks, and of
//! forces back, on four paths that leave the same bytes in the same places:
//!
//! - **onesided-get** (the 2013 design, DESIGN §5): each particle PE packs its atoms by
//!   destination into its symmetric send buffer, publishes per-destination counts and offsets
//!   in a symmetric table and raises a signal at every PME rank with its call number. Each PME
//!   rank polls its sources round-robin, reads each source's entry as soon as it is published,
//!   gets the atoms straight from the sources' send buffers, and adds one to each source's
//!   `taken` counter; a source reuses its buffer only when every PME rank has taken its share
//!   (`taken` reaches the number of PME ranks times the call number: the monotonic form of
//!   the 2013 `used` counter, which never needs resetting). Forces come back the same way in
//!   reverse.
//! - **onesided-put**: counts go to the PME ranks first; each PME rank announces where every
//!   source's atoms go and the sources write them there ([`onesided::Exchange`], offset swap):
//!   packed straight into the receivers' buffers through the mapping of a same-node PE
//!   ([`onesided::Exchange::exchange_packed`]), so each atom is written once, where it is
//!   needed. Forces go back from the caller's own array, with no staging copy.
//! - **mpi**: counts, then data, with `MPI_Sendrecv` between pairs in GROMACS's partner order
//!   (+1, -1, +2, -2, ...); forces go back from the caller's array, as MPI codes send them.
//! - **mpi-alltoallv**: `MPI_Alltoall` of the counts, then `MPI_Alltoallv` of the data.
//!
//! The plan ([`Redistribution::collective_plan`], which every PE calls at each repartition)
//! records the PME rank of each home atom, and grows the buffers sized by the home atoms
//! (symmetric, so sized by the most home atoms of any PE: [`onesided::GlobalMaxArray`]) when the
//! new home sets need more; the buffers for received atoms and forces hold the whole system.
//!
//! Each transport is one file behind the `Transport` trait (`get.rs`, `put.rs`, `mpi.rs`);
//! this file holds the interface, the plan and the placement every path shares, and
//! `by_rank.rs` the packing and unpacking: a step reads the home atoms twice (placement, with
//! the counts per rank and where each run of atoms of one rank starts, then packing, a copy
//! per run); on the put path to a mapped PME rank it writes each atom once, into place.
//! Forces are unpacked into home order in one pass, by the same runs.
//!
//! A PME rank lays out what it receives by source PE, so the layout, and everything computed
//! from it, is the same on every path. The forces on a PME rank's atoms go back to their
//! sources with the same plan in reverse and land in the sources' original (home) order.
//!
//! Counts travel every step from every particle PE to every PME rank and back to every PE,
//! even when zero: they also carry errors (an atom that moved too far for the plan), so that
//! a problem one PE finds is reported by every PE at the end of the step, never a hang.

use std::fmt;
use std::str::FromStr;

use onesided::{GlobalMaxArray, GrowthPolicy, Runtime, SymArray};
use rayon::prelude::*;

use crate::RVec;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

mod by_rank;
mod get;
mod mpi;
mod put;

/// An atom as it travels to its PME rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C)]
pub struct Particle {
    /// Position in nm.
    pub x: RVec,
    /// Charge in e.
    pub q: f32,
    /// Global index.
    pub global: u32,
}

/// Which transport a [`Redistribution`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedistPath {
    /// One-sided, receivers get from the senders' buffers.
    OneSidedGet,
    /// One-sided, senders put where the receivers announced.
    OneSidedPut,
    /// MPI `Sendrecv` between pairs.
    Mpi,
    /// MPI `Alltoall` and `Alltoallv`.
    MpiAlltoallv,
}

impl RedistPath {
    /// Every path, in the order reports list them.
    pub const ALL: [RedistPath; 4] =
        [RedistPath::OneSidedGet, RedistPath::OneSidedPut, RedistPath::Mpi, RedistPath::MpiAlltoallv];

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            RedistPath::OneSidedGet => "onesided-get",
            RedistPath::OneSidedPut => "onesided-put",
            RedistPath::Mpi => "mpi",
            RedistPath::MpiAlltoallv => "mpi-alltoallv",
        }
    }
}

impl fmt::Display for RedistPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RedistPath {
    type Err = Error;

    fn from_str(s: &str) -> Result<RedistPath> {
        RedistPath::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            Error::Config(format!(
                "unknown redistribution path {s:?}: expected onesided-get, onesided-put, mpi or mpi-alltoallv"
            ))
        })
    }
}

/// A count with this bit set reports an error instead: an atom (low 32 bits) on a PE (the
/// next 31 bits) moved too far for the plan.
const ERROR: u64 = 1 << 63;
const PE_MASK: u64 = (1 << 31) - 1;

fn marker(atom: u32, pe: usize) -> u64 {
    ERROR | (pe as u64 & PE_MASK) << 32 | atom as u64
}

/// Notes an error heard of in this step. Of several, every PE keeps the smallest marker, so
/// that every PE reports the same atom.
fn note_error(pending: &mut Option<u64>, value: u64) {
    *pending = Some(pending.map_or(value, |p| p.min(value)));
}

/// The first atom more than one slab from its planned rank (around the ring of `m` slabs,
/// with no division), if any. On a ring of three slabs or fewer no rank is further than one
/// from any other.
fn first_too_far(dest: &[u32], planned: &[u32], m: usize) -> Option<usize> {
    if m <= 3 {
        return None;
    }
    let ring = m as u32;
    let too_far = |(&now, &then): (&u32, &u32)| {
        let ahead = now.wrapping_sub(then).wrapping_add(ring);
        let apart = if ahead >= ring { ahead - ring } else { ahead };
        u32::from(apart > 1 && apart < ring - 1)
    };
    // A branch-free, vectorised sweep first (the largest flag of all): an atom too far is
    // the rare case.
    let any = dest.iter().zip(planned).map(too_far).fold(0, u32::max) > 0;
    if any { dest.iter().zip(planned).position(|pair| too_far(pair) > 0) } else { None }
}

fn decode(marked: u64) -> Error {
    Error::MovedTooFar { atom: marked as u32, pe: ((marked >> 32) & PE_MASK) as usize }
}

/// Below this many atoms, finding destinations and packing run on the calling thread:
/// handing a few microseconds of work to the thread pool costs more than it saves.
const PARALLEL_MIN: usize = 4096;

/// How the buffers sized by the home atoms grow: to the most any PE holds, plus a fifth.
const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: 1.2, freeze_after: None };

/// Words per slot of the get path's tables: one cache line.
const LINE: usize = 8;

/// One transport's protocol for the two halves of a step, once every home atom's PME rank
/// and the counts are known: each implementation reads top to bottom in its own file.
trait Transport<'rt> {
    /// Counts and the `home` atoms to the PME ranks (packed by [`Redistribution::pack`]).
    fn forward(&mut self, this: &mut Redistribution<'rt>, home: &[Particle]) -> Result<()>;

    /// Status and `forces` (one per received atom, on PME ranks) back to the atoms' PEs, into
    /// their force receive buffers, by PME rank; or, where the transport can, unpacked
    /// straight into `home_forces` (then it returns `true`, and `false` otherwise).
    fn backward(
        &mut self,
        this: &mut Redistribution<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool>;

    /// Waits until no PE reads this PE's force staging buffer any more, so that it may be
    /// written: on the get path, until every PE has taken the forces of the last return.
    fn forces_free(&mut self, _this: &Redistribution<'rt>) -> Result<()> {
        Ok(())
    }
}

/// The forces a PME rank returns: one per received atom, in the caller's array or already in
/// the force staging buffer (`in_place`, where [`Redistribution::forces_mut`] handed them
/// out; `data` is then a view of it).
#[derive(Clone, Copy)]
struct Forces<'a> {
    data: &'a [RVec],
    in_place: bool,
}

/// The redistribution of one set of home atoms to the PME ranks, and of their forces back.
pub struct Redistribution<'rt> {
    rt: &'rt Runtime,
    grid: PmeGrid,
    path: RedistPath,
    my_rank: Option<usize>,
    /// Whether each PE holds home atoms (sends) .
    is_particle: Vec<bool>,
    /// PME rank of each home atom when the plan was built.
    planned: Vec<u32>,
    /// PME rank of each home atom in this step.
    dest: Vec<u32>,
    /// Where each run of home atoms of one PME rank starts in this step.
    runs: Vec<u32>,
    /// The same for each chunk of [`PARALLEL_MIN`] home atoms placed on the thread pool.
    chunk_runs: Vec<Vec<u32>>,
    /// Home atoms of each PME rank per chunk of [`PARALLEL_MIN`] home atoms (`[c * m + r]`),
    /// or for all of them when placement stays on the calling thread.
    chunk_counts: Vec<usize>,
    dest_counts: Vec<usize>,
    dest_offsets: Vec<usize>,
    src_counts: Vec<usize>,
    src_offsets: Vec<usize>,
    received: usize,
    /// An error this PE found or heard of during the step, reported at its end.
    pending: Option<u64>,
    /// This PE found an atom too far in this step and sends its PME ranks the error in place
    /// of its count, and no atoms.
    withheld: bool,
    calls: u64,
    /// This PE's atoms packed by destination, on the get and MPI paths (the put path packs
    /// straight into the PME ranks' `recv`); as large as the most home atoms of any PE at
    /// the last plan, and grown by each plan that needs more.
    send: GlobalMaxArray<'rt, Particle>,
    /// Room for every atom of the system.
    recv: SymArray<'rt, Particle>,
    /// Room for the forces of every atom of the system, staged where the PEs take them from
    /// on the get path (the others send from the caller's array), or written there by the
    /// caller ([`forces_mut`](Redistribution::forces_mut)).
    force_send: SymArray<'rt, RVec>,
    /// This PE's home forces, by destination; sized as `send`.
    force_recv: GlobalMaxArray<'rt, RVec>,
    /// Taken out while it runs a half of the step on the rest of the state.
    transport: Option<Box<dyn Transport<'rt> + 'rt>>,
}

impl<'rt> Redistribution<'rt> {
    /// Sets up the redistribution of this PE's `home` atoms (empty on PME-only PEs) over
    /// `grid`'s PME ranks, on `path`, for a system of `total_atoms`, and builds the plan.
    ///
    /// When every PE is a PME rank, every PE also holds atoms; otherwise the PEs that are not
    /// PME ranks hold them and the PME ranks only receive.
    ///
    /// # Collective
    /// Every PE must call it with the same grid, path and total.
    pub fn collective_new(
        rt: &'rt Runtime,
        grid: PmeGrid,
        path: RedistPath,
        home: &[Particle],
        total_atoms: usize,
    ) -> Result<Self> {
        let n = rt.n_pes();
        let m = grid.ranks();
        if m > n || (0..m).any(|r| grid.pe_of(r) >= n) {
            return Err(Error::Config(format!(
                "{m} PME ranks on PEs {:?} do not fit a job of {n} PEs",
                (0..m).map(|r| grid.pe_of(r)).collect::<Vec<_>>()
            )));
        }
        let all_pme = m == n;
        let is_particle: Vec<bool> = (0..n).map(|pe| all_pme || grid.rank_of_pe(pe).is_none()).collect();
        // Agreed before anything is allocated, so that a wrong call fails on every PE alike.
        let most_home = agree_home(rt, &is_particle, home)?;
        let name = |what: &str| format!("pme {}: {what}", path.name());
        let transport: Box<dyn Transport<'rt> + 'rt> = match path {
            RedistPath::OneSidedGet => Box::new(get::Get::collective_new(rt, &name, m)?),
            RedistPath::OneSidedPut => Box::new(put::Put::collective_new(rt, &name, m)?),
            RedistPath::Mpi => Box::new(mpi::Mpi::collective_new(rt, false)?),
            RedistPath::MpiAlltoallv => Box::new(mpi::Mpi::collective_new(rt, true)?),
        };
        let mut redistribution = Redistribution {
            rt,
            my_rank: grid.rank_of_pe(rt.my_pe()),
            path,
            is_particle,
            planned: Vec::new(),
            dest: Vec::new(),
            runs: Vec::new(),
            chunk_runs: Vec::new(),
            chunk_counts: Vec::new(),
            dest_counts: vec![0; m],
            dest_offsets: vec![0; m],
            src_counts: vec![0; n],
            src_offsets: vec![0; n],
            received: 0,
            pending: None,
            withheld: false,
            calls: 0,
            send: GlobalMaxArray::collective_alloc(rt, &name("send"), most_home, GROWTH)?,
            recv: SymArray::collective_alloc(rt, &name("receive"), total_atoms)?,
            force_send: SymArray::collective_alloc(rt, &name("forces out"), total_atoms)?,
            force_recv: GlobalMaxArray::collective_alloc(rt, &name("forces in"), most_home, GROWTH)?,
            transport: Some(transport),
            grid,
        };
        redistribution.record_plan(home);
        Ok(redistribution)
    }

    /// The path.
    pub fn path(&self) -> RedistPath {
        self.path
    }

    /// This PE's PME rank, if it is one.
    pub fn pme_rank(&self) -> Option<usize> {
        self.my_rank
    }

    /// The PME grid.
    pub fn grid(&self) -> &PmeGrid {
        &self.grid
    }

    /// Builds the plan for a new set of home atoms: records where each of this PE's `home`
    /// atoms belongs now (later steps accept an atom one slab away from there, and report one
    /// further as having moved too far), and grows the buffers for the home atoms to the most
    /// any PE now holds (over-allocated by a fifth, so that small changes in the home counts
    /// cost no reallocation). Call it whenever the home atoms are (re)partitioned; the
    /// following steps must pass the same home atoms (positions may change, their number and
    /// order may not).
    ///
    /// # Collective
    /// Every PE must call it, each with its own home atoms (none on PME-only PEs).
    ///
    /// # Errors
    /// On every PE, the plan left as it was: [`Error::Config`] when a PME-only PE is given
    /// home atoms; [`Error::Comm`] when the symmetric heap cannot hold the grown buffers
    /// (naming the variable that raises its size).
    pub fn collective_plan(&mut self, home: &[Particle]) -> Result<()> {
        let most_home = agree_home(self.rt, &self.is_particle, home)?;
        self.send.collective_ensure(most_home)?;
        self.force_recv.collective_ensure(most_home)?;
        self.record_plan(home);
        Ok(())
    }

    /// Records the PME rank of each home atom, as the plan.
    fn record_plan(&mut self, home: &[Particle]) {
        self.planned.resize(home.len(), 0);
        let (mut counts, mut runs) = (Vec::new(), Vec::new());
        place(&self.grid, home, &mut self.planned, &mut counts, &mut runs, &mut self.chunk_runs);
    }

    /// How the home atoms were cut when they were placed.
    fn chunks(&self) -> by_rank::Chunks<'_> {
        let m = self.grid.ranks();
        let parallel = self.chunk_counts.len() > m;
        let chunk = if parallel { PARALLEL_MIN } else { self.dest.len().max(1) };
        by_rank::Chunks { chunk, ranks: m, counts: &self.chunk_counts, parallel, runs: &self.runs }
    }

    /// Writes the `home` atoms into `out`, one slice per PME rank (`dest_counts[r]` long), in
    /// home order: the layout every path sends.
    fn pack(&self, home: &[Particle], out: Vec<&mut [Particle]>) {
        by_rank::pack(&self.dest, home, out, &self.chunks());
    }

    /// Packs the `home` atoms into the send buffer, by PME rank from `dest_offsets`.
    ///
    /// # Safety
    /// No PE reads this PE's send buffer now (the get path's readers of the previous call are
    /// done).
    unsafe fn pack_send_buffer(&self, home: &[Particle]) {
        // SAFETY: no PE writes this PE's send buffer, and no PE reads it now (the caller's
        // promise); the range holds the home atoms (redistribute checked the capacity).
        let packed = unsafe { self.send.array().local_range_mut(0..home.len()) };
        self.pack(home, by_rank::split(packed, &self.dest_counts));
    }

    /// Sends every home atom (in the order of the plan's home atoms) to its PME rank; on a PME
    /// rank, [`received`](Self::received) then holds its atoms, by source PE.
    ///
    /// An atom that moved too far for the plan is not an error yet: the step goes on, so that
    /// no PE is left waiting, and [`return_forces`](Self::return_forces) reports it on every
    /// PE.
    ///
    /// # Collective
    /// Every PE must call it.
    pub fn redistribute(&mut self, home: &[Particle]) -> Result<()> {
        let me = self.rt.my_pe();
        if home.len() != self.planned.len() || home.len() > self.send.capacity() {
            return Err(Error::Config(format!(
                "PE {me} redistributes {} home atoms, but the plan is for {}; after a repartition, \
                 every PE calls collective_plan with its new home atoms",
                home.len(),
                self.planned.len()
            )));
        }
        self.calls += 1;
        self.pending = None;
        let m = self.grid.ranks();
        // Kept between steps: a fresh vector of this size would be new pages every step.
        let mut dest = std::mem::take(&mut self.dest);
        dest.resize(home.len(), 0);
        place(&self.grid, home, &mut dest, &mut self.chunk_counts, &mut self.runs, &mut self.chunk_runs);
        self.dest_counts.fill(0);
        for chunk in self.chunk_counts.chunks_exact(m) {
            for (total, &count) in self.dest_counts.iter_mut().zip(chunk) {
                *total += count;
            }
        }
        // The check against the plan.
        let far = first_too_far(&dest, &self.planned, m);
        self.dest = dest;
        if let Some(i) = far {
            self.pending = Some(marker(home[i].global, me));
        }
        self.withheld = far.is_some();
        let mut next = 0;
        for r in 0..m {
            self.dest_offsets[r] = next;
            next += self.dest_counts[r];
        }
        self.with_transport(|t, this| t.forward(this, home))
    }

    /// The atoms this PME rank received in the last [`redistribute`](Self::redistribute), by
    /// source PE (empty elsewhere). Valid until the next call that takes `&mut self`.
    pub fn received(&self) -> &[Particle] {
        // SAFETY: other PEs write this PE's receive buffer only inside redistribute (which
        // takes &mut self), and on the get path nobody but this PE writes it at all.
        unsafe { self.recv.local_range(0..self.received) }
    }

    /// How many atoms this PME rank received from each PE in the last step.
    pub fn received_counts(&self) -> &[usize] {
        &self.src_counts
    }

    /// Sends `forces` (one per [`received`](Self::received) atom, on PME ranks; empty
    /// elsewhere) back to the atoms' PEs, and returns this PE's home forces in the order of its
    /// home atoms.
    ///
    /// # Collective
    /// Every PE must call it, after [`redistribute`](Self::redistribute).
    ///
    /// # Errors
    /// [`Error::MovedTooFar`] on every PE when any PE found an atom too far from its planned
    /// slab in this step, naming the same atom everywhere; that step's forces are not
    /// delivered. Rebuild the plan ([`collective_plan`](Self::collective_plan)) and go on.
    pub fn return_forces(&mut self, forces: &[RVec]) -> Result<Vec<RVec>> {
        let mut home_forces = vec![[0.0f32; 3]; self.dest.len()];
        self.return_forces_into(forces, &mut home_forces)?;
        Ok(home_forces)
    }

    /// [`return_forces`](Self::return_forces) into `home_forces` (one per home atom), which an
    /// MD loop keeps from step to step instead of allocating a new vector each time. After an
    /// error that every PE reports (an atom that moved too far) or a wrong call,
    /// `home_forces` is unchanged.
    ///
    /// # Collective
    /// As [`return_forces`](Self::return_forces).
    pub fn return_forces_into(&mut self, forces: &[RVec], home_forces: &mut [RVec]) -> Result<()> {
        self.return_forces_from(Forces { data: forces, in_place: false }, home_forces)
    }

    /// The forces on this PME rank's received atoms (one per [`received`](Self::received)
    /// atom, in its order; empty on other PEs) in the redistribution's own symmetric memory,
    /// for the gather to write before [`return_forces_in_place`](Self::return_forces_in_place).
    /// On the get path the PEs then read them where they lie and unpack them into home order
    /// in the same pass, with no staging copy on the PME rank. What the slice holds before it
    /// is written is left from the last step.
    ///
    /// # Errors
    /// On the get path, a PE that does not take the forces of the last return times out,
    /// naming it.
    pub fn forces_mut(&mut self) -> Result<&mut [RVec]> {
        Ok(self.received_and_forces_mut()?.1)
    }

    /// The [`received`](Self::received) atoms and [`forces_mut`](Self::forces_mut) at once, for
    /// a gather that reads the one and writes the other
    /// ([`SlabGrid::gather_into`](crate::SlabGrid::gather_into)).
    ///
    /// # Errors
    /// As [`forces_mut`](Self::forces_mut).
    pub fn received_and_forces_mut(&mut self) -> Result<(&[Particle], &mut [RVec])> {
        self.with_transport(|t, this| t.forces_free(this))?;
        // SAFETY: as in received: other PEs write the receive buffer only inside
        // redistribute, which takes &mut self.
        let received = unsafe { self.recv.local_range(0..self.received) };
        // SAFETY: other PEs never write the force buffer; on the get path they read it only
        // between this PE's publication and their taken signals, which forces_free awaited
        // for every return so far; on the other paths only this PE reads it. `&mut self`
        // keeps every other view of it away while the slice lives, and it is another
        // allocation than the receive buffer, so the two views do not overlap.
        let forces = unsafe { self.force_send.local_range_mut(0..self.received) };
        Ok((received, forces))
    }

    /// [`return_forces_into`](Self::return_forces_into) with the forces this PME rank wrote
    /// through [`forces_mut`](Self::forces_mut).
    ///
    /// # Collective
    /// As [`return_forces`](Self::return_forces); every PE calls the same one of the two.
    ///
    /// # Errors
    /// As [`return_forces`](Self::return_forces).
    pub fn return_forces_in_place(&mut self, home_forces: &mut [RVec]) -> Result<()> {
        // SAFETY: nobody writes the staging buffer during the return: other PEs never write
        // it, and this PE writes it only through forces_mut (which needs `&mut self`) or when
        // it stages forces from the caller's array, which an in-place return skips. The
        // buffer is allocated once, with the redistribution, so the view cannot dangle while
        // the call runs; the borrow is detached from `self` only so that the transport may
        // take `&mut self` beside it.
        let forces: &[RVec] = unsafe { &*std::ptr::from_ref(self.force_send.local_range(0..self.received)) };
        self.return_forces_from(Forces { data: forces, in_place: true }, home_forces)
    }

    fn return_forces_from(&mut self, forces: Forces<'_>, home_forces: &mut [RVec]) -> Result<()> {
        let me = self.rt.my_pe();
        let n_home = self.dest.len();
        if forces.data.len() != self.received || home_forces.len() != n_home {
            return Err(Error::Config(format!(
                "PE {me} returns {} forces for {} received atoms into room for {} home forces (needs {n_home})",
                forces.data.len(),
                self.received,
                home_forces.len()
            )));
        }
        let unpacked = self.with_transport(|t, this| t.backward(this, forces, home_forces))?;
        if let Some(marked) = self.pending {
            return Err(decode(marked));
        }
        if !unpacked {
            // SAFETY: the forces for this step have all arrived (backward returned); no PE
            // writes this PE's force receive buffer before the next return_forces.
            let arrived = unsafe { self.force_recv.array().local_range(0..n_home) };
            by_rank::unpack(
                &self.dest,
                by_rank::split(arrived, &self.dest_counts),
                home_forces,
                &self.chunks(),
            );
        }
        Ok(())
    }

    /// Runs `half` with the transport on the rest of the state.
    fn with_transport<R>(
        &mut self,
        half: impl FnOnce(&mut (dyn Transport<'rt> + 'rt), &mut Self) -> Result<R>,
    ) -> Result<R> {
        let mut transport = self.transport.take().expect("the transport is put back after every half");
        let outcome = half(transport.as_mut(), self);
        self.transport = Some(transport);
        outcome
    }

    /// How many atoms this PE sends to PME rank `r` in this step (none when it reports an
    /// error instead).
    fn send_count(&self, r: usize) -> usize {
        if self.withheld { 0 } else { self.dest_counts[r] }
    }

    /// The forward count this PE sends to PME rank `r`, with its error if it has one.
    fn count_to(&self, r: usize) -> u64 {
        self.pending.unwrap_or(self.dest_counts[r] as u64)
    }

    /// Notes the counts received from the sources: errors, offsets by source order.
    fn take_source_counts(&mut self, raw: &[u64]) {
        let mut next = 0;
        for (s, &value) in raw.iter().enumerate() {
            let count = if value & ERROR != 0 {
                note_error(&mut self.pending, value);
                0
            } else {
                value as usize
            };
            self.src_counts[s] = count;
            self.src_offsets[s] = next;
            next += count;
        }
        self.received = next;
    }
}

/// The most home atoms any PE holds, agreed by every PE, and an error on every PE when a PE
/// that only does PME (not a particle PE) was given home atoms.
///
/// # Collective
/// One max-reduction.
fn agree_home(rt: &Runtime, is_particle: &[bool], home: &[Particle]) -> Result<usize> {
    let me = rt.my_pe();
    let misplaced = if is_particle[me] || home.is_empty() { 0 } else { me as u64 + 1 };
    let mut agreed = [home.len() as u64, misplaced];
    rt.max_u64(&mut agreed)?;
    if agreed[1] > 0 {
        let pe = agreed[1] - 1;
        return Err(Error::Config(format!(
            "PE {pe} is a PME-only rank but was given home atoms; with a subset of PEs doing \
             PME, the atoms belong to the other PEs"
        )));
    }
    Ok(agreed[0] as usize)
}

/// The PME rank of each of the `home` atoms into `ranks`, counted per rank and chunk of
/// [`PARALLEL_MIN`] atoms into `chunk_counts` (`[c * m + r]`), or for all atoms in one row
/// when placement stays on the calling thread; and the first atom of each run of one rank
/// into `runs` (on the thread pool each chunk starts a run).
fn place(
    grid: &PmeGrid,
    home: &[Particle],
    ranks: &mut [u32],
    chunk_counts: &mut Vec<usize>,
    runs: &mut Vec<u32>,
    chunk_runs: &mut Vec<Vec<u32>>,
) {
    let m = grid.ranks();
    chunk_counts.clear();
    runs.clear();
    if !crate::parallel(home.len(), PARALLEL_MIN) {
        chunk_counts.resize(m, 0);
        grid.ranks_of(home, ranks, chunk_counts, runs);
    } else {
        let chunks = home.len().div_ceil(PARALLEL_MIN);
        chunk_counts.resize(chunks * m, 0);
        chunk_runs.resize_with(chunks, Vec::new);
        chunk_counts
            .par_chunks_mut(m)
            .zip(ranks.par_chunks_mut(PARALLEL_MIN))
            .zip(home.par_chunks(PARALLEL_MIN))
            .zip(chunk_runs.par_iter_mut())
            .for_each(|(((counts, r), h), chunk_runs)| {
                chunk_runs.clear();
                grid.ranks_of(h, r, counts, chunk_runs);
            });
        for (c, chunk) in chunk_runs.iter().enumerate() {
            runs.extend(chunk.iter().map(|&start| (c * PARALLEL_MIN) as u32 + start));
        }
    }
}

/// A PE returned a different number of forces than it was sent atoms.
fn check_count(got: usize, expected: usize, from: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "PE {from} returns {got} forces for the {expected} atoms it was sent"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partner_order_meets_everyone_once() {
        for n in 1..10 {
            let mut order = super::mpi::partner_order(n);
            assert_eq!(order.len(), n - 1);
            if n > 2 {
                assert_eq!(&order[..2], &[1, n - 1], "+1, then -1");
            }
            order.sort_unstable();
            assert_eq!(order, (1..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn markers_round_trip() {
        assert_eq!(decode(marker(12345, 3)), Error::MovedTooFar { atom: 12345, pe: 3 });
        assert_eq!(decode(marker(u32::MAX, 1 << 20)), Error::MovedTooFar { atom: u32::MAX, pe: 1 << 20 });
        assert!(marker(0, 0) & ERROR != 0);
    }
}
