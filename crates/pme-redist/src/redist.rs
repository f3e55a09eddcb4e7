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
//!   source's atoms go and the sources put them there ([`onesided::Exchange`], offset swap).
//! - **mpi**: counts, then data, with `MPI_Sendrecv` between pairs in GROMACS's partner order
//!   (+1, -1, +2, -2, ...).
//! - **mpi-alltoallv**: `MPI_Alltoall` of the counts, then `MPI_Alltoallv` of the data.
//!
//! The plan ([`Redistribution::collective_plan`], which every PE calls at each repartition)
//! records the PME rank of each home atom, and grows the buffers sized by the home atoms
//! (symmetric, so sized by the most home atoms of any PE: [`onesided::GlobalMaxArray`]) when the
//! new home sets need more; the buffers for received atoms and forces hold the whole system.
//!
//! A PME rank lays out what it receives by source PE, so the layout, and everything computed
//! from it, is the same on every path. The forces on a PME rank's atoms go back to their
//! sources with the same plan in reverse and land in the sources' original (home) order.
//!
//! Counts travel every step from every particle PE to every PME rank and back to every PE,
//! even when zero: they also carry errors (an atom that moved too far for the plan), so that
//! a problem one PE finds is reported by every PE at the end of the step, never a hang.

use std::ffi::c_int;
use std::fmt;
use std::mem::{MaybeUninit, size_of};
use std::str::FromStr;

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use onesided::{
    Exchange, GlobalMaxArray, GrowthPolicy, Incoming, Outgoing, Path, Runtime, SignalArray, SymArray,
};
use rayon::prelude::*;

use crate::RVec;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

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

/// The transport's state; one per [`Redistribution`], built once and never moved in a step,
/// so the difference in size between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
enum Transport<'rt> {
    Get {
        /// Slot `r`: (count, offset) of this PE's atoms for PME rank `r`.
        table: SymArray<'rt, [u64; LINE]>,
        /// Signal `s` on a PME rank: source `s` published call `k`.
        published: SignalArray<'rt>,
        /// On a source: how many PME rank shares have been taken, over all calls.
        taken: SignalArray<'rt>,
        /// Slot `p` on a PME rank: (count, offset) of PE `p`'s forces.
        back_table: SymArray<'rt, [u64; LINE]>,
        /// Signal `r` on a PE: PME rank `r` published its forces of call `k`.
        back_published: SignalArray<'rt>,
        /// On a PME rank: how many PEs have taken their forces, over all calls.
        back_taken: SignalArray<'rt>,
    },
    Put {
        counts: Exchange<'rt, u64>,
        /// Forward counts (slot per source PE) and backward counts (slot per PME rank).
        count_buffers: [SymArray<'rt, u64>; 2],
        data: Exchange<'rt, Particle>,
        forces: Exchange<'rt, RVec>,
    },
    Mpi {
        comm: SimpleCommunicator,
        alltoallv: bool,
    },
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
    /// Home indices in send order (by destination, stable).
    order: Vec<u32>,
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
    /// This PE's atoms packed by destination; as large as the most home atoms of any PE at
    /// the last plan, and grown by each plan that needs more.
    send: GlobalMaxArray<'rt, Particle>,
    /// Room for every atom of the system.
    recv: SymArray<'rt, Particle>,
    /// Room for the forces of every atom of the system.
    force_send: SymArray<'rt, RVec>,
    /// This PE's home forces, by destination; sized as `send`.
    force_recv: GlobalMaxArray<'rt, RVec>,
    transport: Transport<'rt>,
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
        let transport = match path {
            RedistPath::OneSidedGet => Transport::Get {
                table: SymArray::collective_alloc(rt, &name("table"), m)?,
                published: SignalArray::collective_alloc(rt, &name("published"), n)?,
                taken: SignalArray::collective_alloc(rt, &name("taken"), 1)?,
                back_table: SymArray::collective_alloc(rt, &name("force table"), n)?,
                back_published: SignalArray::collective_alloc(rt, &name("forces published"), m)?,
                back_taken: SignalArray::collective_alloc(rt, &name("forces taken"), 1)?,
            },
            RedistPath::OneSidedPut => Transport::Put {
                counts: Exchange::collective_new(rt, &name("counts"), Path::Put)?,
                count_buffers: [
                    SymArray::collective_alloc(rt, &name("counts in"), n)?,
                    SymArray::collective_alloc(rt, &name("counts back"), m)?,
                ],
                data: Exchange::collective_new(rt, &name("atoms"), Path::Put)?,
                forces: Exchange::collective_new(rt, &name("forces"), Path::Put)?,
            },
            RedistPath::Mpi | RedistPath::MpiAlltoallv => {
                let comm = rt.world().duplicate();
                // SAFETY: the communicator is valid; MPI_ERRORS_RETURN is predefined.
                let code = unsafe { ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN) };
                mpi_check(code, "MPI_Comm_set_errhandler")?;
                Transport::Mpi { comm, alltoallv: path == RedistPath::MpiAlltoallv }
            }
        };
        let mut redistribution = Redistribution {
            rt,
            my_rank: grid.rank_of_pe(rt.my_pe()),
            path,
            is_particle,
            planned: Vec::new(),
            dest: Vec::new(),
            order: Vec::new(),
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
            transport,
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
        let grid = &self.grid;
        self.planned.clear();
        if !crate::parallel(home.len(), PARALLEL_MIN) {
            self.planned.extend(home.iter().map(|p| grid.rank_of(p.x) as u32));
        } else {
            home.par_iter().map(|p| grid.rank_of(p.x) as u32).collect_into_vec(&mut self.planned);
        }
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
        let grid = &self.grid;
        // Kept between steps: a fresh vector of this size would be new pages every step.
        let mut dest = std::mem::take(&mut self.dest);
        dest.resize(home.len(), 0);
        if !crate::parallel(home.len(), PARALLEL_MIN) {
            dest.iter_mut().zip(home).for_each(|(d, p)| *d = grid.rank_of(p.x) as u32);
        } else {
            dest.par_iter_mut().zip(home.par_iter()).for_each(|(d, p)| *d = grid.rank_of(p.x) as u32);
        }
        let far = dest.iter().zip(&self.planned).position(|(&now, &then)| {
            let apart = (now as usize + m - then as usize) % m;
            apart.min(m - apart) > 1
        });
        if let Some(i) = far {
            self.pending = Some(marker(home[i].global, me));
        }
        self.withheld = far.is_some();
        // Stable counting sort by destination.
        self.dest_counts.fill(0);
        for &d in &dest {
            self.dest_counts[d as usize] += 1;
        }
        let mut next = 0;
        for r in 0..m {
            self.dest_offsets[r] = next;
            next += self.dest_counts[r];
        }
        let mut fill = self.dest_offsets.clone();
        self.order.resize(home.len(), 0);
        for (i, &d) in dest.iter().enumerate() {
            self.order[fill[d as usize]] = i as u32;
            fill[d as usize] += 1;
        }
        self.dest = dest;
        self.transport_wait_send_free()?;
        // SAFETY: no PE writes this PE's send buffer; the get path's readers of the previous
        // call are done (awaited just above), and nobody else reads it.
        let packed = unsafe { &mut self.send.array().local_slice_mut()[..home.len()] };
        if !crate::parallel(home.len(), PARALLEL_MIN) {
            packed.iter_mut().zip(&self.order).for_each(|(out, &i)| *out = home[i as usize]);
        } else {
            packed.par_iter_mut().zip(self.order.par_iter()).for_each(|(out, &i)| *out = home[i as usize]);
        }
        self.forward()?;
        Ok(())
    }

    /// The atoms this PME rank received in the last [`redistribute`](Self::redistribute), by
    /// source PE (empty elsewhere). Valid until the next call that takes `&mut self`.
    pub fn received(&self) -> &[Particle] {
        // SAFETY: other PEs write this PE's receive buffer only inside redistribute (which
        // takes &mut self), and on the get path nobody but this PE writes it at all.
        unsafe { &self.recv.local_slice()[..self.received] }
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
        let mut home_forces = vec![[0.0f32; 3]; self.order.len()];
        self.return_forces_into(forces, &mut home_forces)?;
        Ok(home_forces)
    }

    /// [`return_forces`](Self::return_forces) into `home_forces` (one per home atom), which an
    /// MD loop keeps from step to step instead of allocating a new vector each time. After an
    /// error, `home_forces` is unchanged.
    ///
    /// # Collective
    /// As [`return_forces`](Self::return_forces).
    pub fn return_forces_into(&mut self, forces: &[RVec], home_forces: &mut [RVec]) -> Result<()> {
        let me = self.rt.my_pe();
        let n_home = self.order.len();
        if forces.len() != self.received || home_forces.len() != n_home {
            return Err(Error::Config(format!(
                "PE {me} returns {} forces for {} received atoms into room for {} home forces (needs {n_home})",
                forces.len(),
                self.received,
                home_forces.len()
            )));
        }
        self.transport_wait_forces_free()?;
        self.force_send.write_local(0, forces)?;
        self.backward()?;
        if let Some(marked) = self.pending {
            return Err(decode(marked));
        }
        // SAFETY: the forces for this step have all arrived (backward returned); no PE writes
        // this PE's force receive buffer before the next return_forces.
        let arrived = unsafe { &self.force_recv.array().local_slice()[..n_home] };
        for (&i, f) in self.order.iter().zip(arrived) {
            home_forces[i as usize] = *f;
        }
        Ok(())
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

    fn transport_wait_send_free(&self) -> Result<()> {
        // Only particle PEs have a send buffer that PME ranks read.
        if let Transport::Get { taken, .. } = &self.transport
            && self.is_particle[self.rt.my_pe()]
        {
            let m = self.grid.ranks() as u64;
            taken.wait_ge(0, m * (self.calls - 1))?;
        }
        Ok(())
    }

    fn transport_wait_forces_free(&self) -> Result<()> {
        if let Transport::Get { back_taken, .. } = &self.transport
            && self.my_rank.is_some()
        {
            let n = self.rt.n_pes() as u64;
            back_taken.wait_ge(0, n * (self.calls - 1))?;
        }
        Ok(())
    }

    fn forward(&mut self) -> Result<()> {
        match self.path {
            RedistPath::OneSidedGet => self.forward_get(),
            RedistPath::OneSidedPut => self.forward_put(),
            RedistPath::Mpi | RedistPath::MpiAlltoallv => self.forward_mpi(),
        }
    }

    fn backward(&mut self) -> Result<()> {
        match self.path {
            RedistPath::OneSidedGet => self.backward_get(),
            RedistPath::OneSidedPut => self.backward_put(),
            RedistPath::Mpi | RedistPath::MpiAlltoallv => self.backward_mpi(),
        }
    }

    fn forward_get(&mut self) -> Result<()> {
        let (me, n, m, k) = (self.rt.my_pe(), self.rt.n_pes(), self.grid.ranks(), self.calls);
        let sources: Vec<usize> = (0..n).filter(|&s| self.is_particle[s]).collect();
        let mut raw = vec![0u64; n];
        let mut offsets = vec![0u64; n];
        {
            let Transport::Get { table, published, .. } = &self.transport else { unreachable!() };
            if self.is_particle[me] {
                let entries: Vec<[u64; LINE]> = (0..m)
                    .map(|r| {
                        let mut line = [0u64; LINE];
                        line[0] = self.count_to(r);
                        line[1] = self.dest_offsets[r] as u64;
                        line
                    })
                    .collect();
                table.write_local(0, &entries)?;
                for r in 0..m {
                    published.set(self.grid.pe_of(r), me, k)?;
                }
            }
            let Some(rank) = self.my_rank else { return Ok(()) };
            // Read each source's entry as soon as it is published, whichever comes first.
            let mut pending: Vec<usize> = sources.clone();
            while !pending.is_empty() {
                let waits: Vec<(usize, u64)> = pending.iter().map(|&s| (s, k)).collect();
                let s = pending.swap_remove(published.wait_any_ge(&waits)?);
                let mut line = [[0u64; LINE]];
                table.get(s, rank, &mut line)?;
                raw[s] = line[0][0];
                offsets[s] = line[0][1];
            }
        }
        self.take_source_counts(&raw);
        let Transport::Get { taken, .. } = &self.transport else { unreachable!() };
        for &s in &sources {
            let (count, at) = (self.src_counts[s], self.src_offsets[s]);
            if count > 0 {
                // SAFETY: on the get path only this PE writes its receive buffer, and nothing
                // reads it during the copy; the range lies inside it (counts sum to at most
                // the total number of atoms, its length).
                let dst = unsafe { &mut self.recv.local_slice_mut()[at..at + count] };
                self.send.array().get(s, offsets[s] as usize, dst)?;
            }
            taken.add(s, 0, 1)?;
        }
        Ok(())
    }

    fn backward_get(&mut self) -> Result<()> {
        let (me, n, m, k) = (self.rt.my_pe(), self.rt.n_pes(), self.grid.ranks(), self.calls);
        let Transport::Get { back_table, back_published, back_taken, .. } = &self.transport else {
            unreachable!()
        };
        if let Some(rank) = self.my_rank {
            let entries: Vec<[u64; LINE]> = (0..n)
                .map(|p| {
                    let mut line = [0u64; LINE];
                    line[0] = self.pending.unwrap_or(self.src_counts[p] as u64);
                    line[1] = self.src_offsets[p] as u64;
                    line
                })
                .collect();
            back_table.write_local(0, &entries)?;
            for p in 0..n {
                back_published.set(p, rank, k)?;
            }
        }
        let mut pending: Vec<usize> = (0..m).collect();
        while !pending.is_empty() {
            let waits: Vec<(usize, u64)> = pending.iter().map(|&r| (r, k)).collect();
            let r = pending.swap_remove(back_published.wait_any_ge(&waits)?);
            let pe = self.grid.pe_of(r);
            let mut line = [[0u64; LINE]];
            back_table.get(pe, me, &mut line)?;
            let (value, offset) = (line[0][0], line[0][1] as usize);
            if value & ERROR != 0 {
                note_error(&mut self.pending, value);
            } else if self.is_particle[me] {
                let count = self.dest_counts[r];
                check_count(value as usize, count, pe)?;
                if count > 0 {
                    let at = self.dest_offsets[r];
                    // SAFETY: on the get path only this PE writes its force receive buffer;
                    // the range lies inside it (dest offsets and counts cover the home atoms).
                    let dst = unsafe { &mut self.force_recv.array().local_slice_mut()[at..at + count] };
                    self.force_send.get(pe, offset, dst)?;
                }
            }
            back_taken.add(pe, 0, 1)?;
        }
        Ok(())
    }

    fn forward_put(&mut self) -> Result<()> {
        let (me, n, m) = (self.rt.my_pe(), self.rt.n_pes(), self.grid.ranks());
        let count_values: Vec<u64> = (0..m).map(|r| self.count_to(r)).collect();
        let sources: Vec<usize> = (0..n).filter(|&s| self.is_particle[s]).collect();
        let mut raw = vec![0u64; n];
        {
            let Transport::Put { counts, count_buffers, .. } = &mut self.transport else { unreachable!() };
            let mut outgoing = Vec::new();
            if self.is_particle[me] {
                for (r, value) in count_values.iter().enumerate() {
                    outgoing.push(Outgoing { to: self.grid.pe_of(r), data: std::slice::from_ref(value) });
                }
            }
            let incoming: Vec<Incoming> = if self.my_rank.is_some() {
                sources.iter().map(|&s| Incoming { from: s, buffer: 0, offset: s, room: 1 }).collect()
            } else {
                Vec::new()
            };
            let mut received = vec![0; incoming.len()];
            let buffers = [&count_buffers[0], &count_buffers[1]];
            counts.exchange(&buffers, &outgoing, &incoming, &mut received)?;
            if self.my_rank.is_some() {
                count_buffers[0].read_local(0, &mut raw)?;
                for (s, value) in raw.iter_mut().enumerate() {
                    if !self.is_particle[s] {
                        *value = 0;
                    }
                }
            }
        }
        self.take_source_counts(&raw);
        let Transport::Put { data, .. } = &mut self.transport else { unreachable!() };
        // SAFETY: no PE writes this PE's send buffer; it was packed by redistribute.
        let packed = unsafe { &self.send.array().local_slice()[..self.order.len()] };
        let mut outgoing = Vec::new();
        if self.is_particle[me] {
            for r in 0..m {
                let count = if self.withheld { 0 } else { self.dest_counts[r] };
                let at = self.dest_offsets[r];
                outgoing.push(Outgoing { to: self.grid.pe_of(r), data: &packed[at..at + count] });
            }
        }
        let incoming: Vec<Incoming> = if self.my_rank.is_some() {
            sources
                .iter()
                .map(|&s| Incoming {
                    from: s,
                    buffer: 0,
                    offset: self.src_offsets[s],
                    room: self.src_counts[s],
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut received = vec![0; incoming.len()];
        data.exchange(&[&self.recv], &outgoing, &incoming, &mut received)?;
        Ok(())
    }

    fn backward_put(&mut self) -> Result<()> {
        let (me, n, m) = (self.rt.my_pe(), self.rt.n_pes(), self.grid.ranks());
        let Transport::Put { counts, count_buffers, forces, .. } = &mut self.transport else {
            unreachable!()
        };
        // Status (and count) from every PME rank to every PE.
        let values: Vec<u64> = (0..n).map(|p| self.pending.unwrap_or(self.src_counts[p] as u64)).collect();
        let mut outgoing = Vec::new();
        if self.my_rank.is_some() {
            for p in 0..n {
                outgoing.push(Outgoing { to: p, data: &values[p..p + 1] });
            }
        }
        let incoming: Vec<Incoming> =
            (0..m).map(|r| Incoming { from: self.grid.pe_of(r), buffer: 1, offset: r, room: 1 }).collect();
        let mut received = vec![0; m];
        let buffers = [&count_buffers[0], &count_buffers[1]];
        counts.exchange(&buffers, &outgoing, &incoming, &mut received)?;
        let mut statuses = vec![0u64; m];
        count_buffers[1].read_local(0, &mut statuses)?;
        for (r, &value) in statuses.iter().enumerate() {
            if value & ERROR != 0 {
                note_error(&mut self.pending, value);
            } else if self.is_particle[me] {
                check_count(value as usize, self.dest_counts[r], self.grid.pe_of(r))?;
            }
        }
        // SAFETY: this PE's outgoing forces were written above and no PE writes them.
        let out = unsafe { &self.force_send.local_slice()[..self.received] };
        let mut outgoing = Vec::new();
        if self.my_rank.is_some() {
            // An error status goes without forces.
            let failed = self.pending.is_some();
            for p in (0..n).filter(|&p| self.is_particle[p]) {
                let (at, count) = (self.src_offsets[p], if failed { 0 } else { self.src_counts[p] });
                outgoing.push(Outgoing { to: p, data: &out[at..at + count] });
            }
        }
        let incoming: Vec<Incoming> = if self.is_particle[me] {
            (0..m)
                .map(|r| Incoming {
                    from: self.grid.pe_of(r),
                    buffer: 0,
                    offset: self.dest_offsets[r],
                    room: self.dest_counts[r],
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut received = vec![0; incoming.len()];
        forces.exchange(&[self.force_recv.array()], &outgoing, &incoming, &mut received)?;
        Ok(())
    }

    fn forward_mpi(&mut self) -> Result<()> {
        let (me, n) = (self.rt.my_pe(), self.rt.n_pes());
        // Counts to every PME rank (zero to the others).
        let counts_out: Vec<u64> = (0..n)
            .map(|pe| match self.grid.rank_of_pe(pe) {
                Some(r) if self.is_particle[me] => self.count_to(r),
                _ => 0,
            })
            .collect();
        let mut counts_in = vec![0u64; n];
        self.mpi_counts(&counts_out, &mut counts_in)?;
        if self.my_rank.is_none() {
            counts_in.fill(0);
        }
        for (count, &particle) in counts_in.iter_mut().zip(&self.is_particle) {
            if !particle {
                *count = 0;
            }
        }
        self.take_source_counts(&counts_in);
        let particle = size_of::<Particle>();
        let send_counts: Vec<usize> = (0..n)
            .map(|pe| match self.grid.rank_of_pe(pe) {
                Some(r) if self.is_particle[me] => self.send_count(r),
                _ => 0,
            })
            .collect();
        let send_offsets: Vec<usize> =
            (0..n).map(|pe| self.grid.rank_of_pe(pe).map_or(0, |r| self.dest_offsets[r])).collect();
        let (recv_counts, recv_offsets) = (self.src_counts.clone(), self.src_offsets.clone());
        self.mpi_data(
            self.send.array().as_ptr().cast(),
            (&send_counts, &send_offsets),
            self.recv.as_ptr().cast(),
            (&recv_counts, &recv_offsets),
            particle,
        )
    }

    fn backward_mpi(&mut self) -> Result<()> {
        let (me, n) = (self.rt.my_pe(), self.rt.n_pes());
        let status_out: Vec<u64> =
            (0..n)
                .map(|p| {
                    if self.my_rank.is_some() { self.pending.unwrap_or(self.src_counts[p] as u64) } else { 0 }
                })
                .collect();
        let mut status_in = vec![0u64; n];
        self.mpi_counts(&status_out, &mut status_in)?;
        // An error status goes without forces: the counts both sides use say so.
        let failed_here = self.my_rank.is_some() && self.pending.is_some();
        let mut recv_counts = vec![0usize; n];
        for r in 0..self.grid.ranks() {
            let (pe, value) = (self.grid.pe_of(r), status_in[self.grid.pe_of(r)]);
            if value & ERROR != 0 {
                note_error(&mut self.pending, value);
            } else if self.is_particle[me] {
                check_count(value as usize, self.dest_counts[r], pe)?;
                recv_counts[pe] = self.dest_counts[r];
            }
        }
        let send_counts: Vec<usize> = (0..n)
            .map(|p| {
                if self.my_rank.is_some() && self.is_particle[p] && !failed_here {
                    self.src_counts[p]
                } else {
                    0
                }
            })
            .collect();
        let send_offsets = self.src_offsets.clone();
        let recv_offsets: Vec<usize> =
            (0..n).map(|pe| self.grid.rank_of_pe(pe).map_or(0, |r| self.dest_offsets[r])).collect();
        self.mpi_data(
            self.force_send.as_ptr().cast(),
            (&send_counts, &send_offsets),
            self.force_recv.array().as_ptr().cast(),
            (&recv_counts, &recv_offsets),
            size_of::<RVec>(),
        )
    }

    /// One u64 from every PE to every PE (zero where nothing is meant).
    fn mpi_counts(&self, out: &[u64], into: &mut [u64]) -> Result<()> {
        let Transport::Mpi { comm, alltoallv } = &self.transport else { unreachable!() };
        let (me, n) = (self.rt.my_pe(), self.rt.n_pes());
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
    fn mpi_data(
        &self,
        send: *const u8,
        (send_counts, send_offsets): (&[usize], &[usize]),
        recv: *mut u8,
        (recv_counts, recv_offsets): (&[usize], &[usize]),
        size: usize,
    ) -> Result<()> {
        let Transport::Mpi { comm, alltoallv } = &self.transport else { unreachable!() };
        let (me, n) = (self.rt.my_pe(), self.rt.n_pes());
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
            // sized for the home atoms and for all atoms); no reference to them exists; every
            // PE calls MPI_Alltoallv with matching counts (the counts were exchanged first).
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

/// GROMACS's partner order: +1, -1, +2, -2, ..., each other PE once.
fn partner_order(n: usize) -> Vec<usize> {
    let mut order = Vec::with_capacity(n.saturating_sub(1));
    for k in 1..=n / 2 {
        order.push(k);
        if n - k != k {
            order.push(n - k);
        }
    }
    order
}

fn check_count(got: usize, expected: usize, from: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "PE {from} returns {got} forces for the {expected} atoms it was sent"
        )))
    }
}

fn mpi_check(code: c_int, call: &'static str) -> Result<()> {
    if code == 0 { Ok(()) } else { Err(Error::Comm(onesided::Error::Mpi { call, code })) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partner_order_meets_everyone_once() {
        for n in 1..10 {
            let mut order = partner_order(n);
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
