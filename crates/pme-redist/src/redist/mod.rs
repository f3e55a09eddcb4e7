//! Redistribution of coordinates and charges from the particle PEs to the PME ranks, and of
//! forces back, on four paths that leave the same bytes in the same places:
//!
//! - **onesided-get** (the 2013 SHMEM port of GROMACS's design): each particle PE packs its
//!   atoms by destination into its symmetric send buffer, publishes per-destination counts
//!   and offsets in a symmetric table and raises a signal at every PME rank with its call
//!   number. Each PME rank polls its sources round-robin, reads each source's entry as soon as
//!   it is published, gets the atoms straight from the sources' send buffers, and adds one to
//!   each source's `taken` counter; a source reuses its buffer only when every PME rank has
//!   taken its share (`taken` reaches the number of PME ranks times the call number: the
//!   monotonic form of the 2013 `used` counter, which never needs resetting). Forces come back
//!   the same way in reverse.
//! - **onesided-put**: counts go to the PME ranks first; each PME rank announces where every
//!   source's atoms go and the sources write them there ([`onesided::Exchange`], offset
//!   swap): packed straight into the receivers' buffers through the mapping of a same-node
//!   PE ([`onesided::Outgoing::Packed`]), so each atom is written once, where it is needed.
//! - **mpi**: counts, then data, with `MPI_Sendrecv` between pairs in GROMACS's partner order
//!   (+1, -1, +2, -2, ...).
//! - **mpi-alltoallv**: `MPI_Alltoall` of the counts, then `MPI_Alltoallv` of the data.
//!
//! The plan ([`Redistribution::collective_plan`], which every PE calls at each repartition)
//! records the PME rank of each home atom, and grows the buffers sized by the home atoms
//! (symmetric, so sized by the most home atoms of any PE: [`onesided::GlobalMaxArray`]) when
//! the new home sets need more; the buffers for received atoms and forces hold the whole
//! system.
//!
//! Each transport is one file behind the `Transport` trait (`get.rs`, `put.rs`, `mpi.rs`),
//! handed the plan and the buffers; `plan.rs` holds what every path shares (the layout of a
//! step, the counts, the errors a step carries), `place.rs` where each atom goes, and
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
use std::ops::Deref;
use std::str::FromStr;

use onesided::{GlobalMaxArray, GrowthPolicy, Runtime, SymArray};

use crate::RVec;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

mod by_rank;
mod get;
mod mpi;
mod place;
mod plan;
mod put;

use place::place;
use plan::{Plan, agree_home};

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

/// Below this many atoms, finding destinations and packing run on the calling thread:
/// handing a few microseconds of work to the thread pool costs more than it saves.
const PARALLEL_MIN: usize = 4096;

/// How the buffers sized by the home atoms grow: to the most any PE holds, plus a fifth.
const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: 1.2, freeze_after: None };

/// Words per slot of the get path's tables: one cache line.
const LINE: usize = 8;

/// One transport's protocol for the two halves of a step, once every home atom's PME rank
/// and the counts are known: each implementation reads top to bottom in its own file and
/// holds its own state; it is handed the plan, which it reads and completes (the counts it
/// receives, the errors it hears of), and the buffers, which it moves data between.
trait Transport<'rt> {
    /// Counts and the `home` atoms to the PME ranks (packed by [`Plan::pack`]).
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()>;

    /// Status and `forces` (one per received atom, on PME ranks) back to the atoms' PEs, into
    /// their force receive buffers, by PME rank; or, where the transport can, unpacked
    /// straight into `home_forces` (then it returns `true`, and `false` otherwise).
    fn backward(
        &mut self,
        plan: &mut Plan<'rt>,
        buffers: &Buffers<'rt>,
        forces: Forces<'_>,
        home_forces: &mut [RVec],
    ) -> Result<bool>;

    /// Waits until no PE reads this PE's force staging buffer any more, so that it may be
    /// written: on the get path, until every PE has taken the forces of the last return.
    fn forces_free(&mut self, _plan: &Plan<'rt>) -> Result<()> {
        Ok(())
    }
}

/// The forces a PME rank returns: one per received atom, in the caller's array or already in
/// the force staging buffer (`in_place`, where a step's [`Mesh`] handed them out; `data` is
/// then a view of it).
#[derive(Clone, Copy)]
struct Forces<'a> {
    data: &'a [RVec],
    in_place: bool,
}

/// The symmetric buffers the transports move data between.
struct Buffers<'rt> {
    /// This PE's atoms packed by destination, on the get and MPI paths (the put path packs
    /// straight into the PME ranks' `recv`); as large as the most home atoms of any PE at
    /// the last plan, and grown by each plan that needs more.
    send: GlobalMaxArray<'rt, Particle>,
    /// Room for every atom of the system.
    recv: SymArray<'rt, Particle>,
    /// Room for the forces of every atom of the system, where a PME rank's forces are
    /// written ([`Step::mesh`]) or staged, and where the PEs take them from on the get path.
    force_send: SymArray<'rt, RVec>,
    /// This PE's home forces, by destination; sized as `send`.
    force_recv: GlobalMaxArray<'rt, RVec>,
}

/// The redistribution of one set of home atoms to the PME ranks, and of their forces back.
///
/// Built once ([`builder`](Self::builder)), planned at every repartition
/// ([`collective_plan`](Self::collective_plan)), and every step:
/// [`redistribute`](Self::redistribute), which returns the step's view; on PME ranks, the
/// mesh reads the atoms and writes their forces ([`Step::mesh`]); then
/// [`Step::return_forces`] brings every PE its home atoms' forces in home order.
pub struct Redistribution<'rt> {
    path: RedistPath,
    plan: Plan<'rt>,
    buffers: Buffers<'rt>,
    transport: Box<dyn Transport<'rt> + 'rt>,
}

impl fmt::Debug for Redistribution<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redistribution")
            .field("path", &self.path)
            .field("pme_rank", &self.plan.my_rank)
            .field("pme_ranks", &self.plan.grid.ranks())
            .field("home_count", &self.plan.home_count())
            .field("received", &self.plan.received)
            .finish_non_exhaustive()
    }
}

/// The choices a [`Redistribution`] is built with ([`Redistribution::builder`]).
#[derive(Clone, Debug)]
pub struct RedistBuilder<'rt> {
    rt: &'rt Runtime,
    grid: PmeGrid,
    path: RedistPath,
}

impl<'rt> RedistBuilder<'rt> {
    /// The transport ([`RedistPath::OneSidedPut`] by default).
    pub fn path(self, path: RedistPath) -> Self {
        RedistBuilder { path, ..self }
    }

    /// Sets up the redistribution of this PE's `home` atoms (empty on PME-only PEs) over
    /// the grid's PME ranks, for a system of `total_atoms`, and builds the plan.
    ///
    /// When every PE is a PME rank, every PE also holds atoms; otherwise the PEs that are not
    /// PME ranks hold them and the PME ranks only receive.
    ///
    /// # Collective
    /// Every PE must call it, with a builder of the same grid and path and the same total.
    ///
    /// # Errors
    /// On every PE: [`Error::Config`] when the PME ranks do not fit the job or a PME-only PE
    /// is given home atoms; [`Error::Comm`] when the symmetric heap cannot hold the buffers.
    pub fn collective_build(self, home: &[Particle], total_atoms: usize) -> Result<Redistribution<'rt>> {
        let RedistBuilder { rt, grid, path } = self;
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
        let buffers = Buffers {
            send: GlobalMaxArray::collective_alloc(rt, &name("send"), most_home, GROWTH)?,
            recv: SymArray::collective_alloc(rt, &name("receive"), total_atoms)?,
            force_send: SymArray::collective_alloc(rt, &name("forces out"), total_atoms)?,
            force_recv: GlobalMaxArray::collective_alloc(rt, &name("forces in"), most_home, GROWTH)?,
        };
        let plan = Plan::new(rt, grid, is_particle, home);
        Ok(Redistribution { path, plan, buffers, transport })
    }
}

impl<'rt> Redistribution<'rt> {
    /// Starts building a redistribution over `grid`'s PME ranks, on the one-sided put path
    /// unless the builder says otherwise.
    pub fn builder(rt: &'rt Runtime, grid: PmeGrid) -> RedistBuilder<'rt> {
        RedistBuilder { rt, grid, path: RedistPath::OneSidedPut }
    }

    /// The path.
    pub fn path(&self) -> RedistPath {
        self.path
    }

    /// This PE's PME rank, if it is one.
    pub fn pme_rank(&self) -> Option<usize> {
        self.plan.my_rank
    }

    /// The PME grid.
    pub fn grid(&self) -> &PmeGrid {
        &self.plan.grid
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
        let most_home = agree_home(self.plan.rt, &self.plan.is_particle, home)?;
        self.buffers.send.collective_ensure(most_home)?;
        self.buffers.force_recv.collective_ensure(most_home)?;
        self.plan.record(home);
        Ok(())
    }

    /// Sends every home atom (in the order of the plan's home atoms) to its PME rank and
    /// returns the step's view: on a PME rank, its atoms by source PE ([`Step::mesh`]).
    ///
    /// An atom that moved too far for the plan is not an error yet: the step goes on, so that
    /// no PE is left waiting, and [`Step::return_forces`] reports it on every PE.
    ///
    /// # Collective
    /// Every PE must call it.
    ///
    /// # Errors
    /// [`Error::Config`] when `home` is not the plan's number of home atoms (on this PE
    /// only); what the transport reports.
    pub fn redistribute(&mut self, home: &[Particle]) -> Result<Step<'_, 'rt>> {
        if home.len() != self.plan.home_count() || home.len() > self.buffers.send.capacity() {
            return Err(Error::Config(format!(
                "PE {} redistributes {} home atoms, but the plan is for {}; after a repartition, \
                 every PE calls collective_plan with its new home atoms",
                self.plan.rt.my_pe(),
                home.len(),
                self.plan.home_count()
            )));
        }
        self.plan.begin_step(home);
        self.transport.forward(&mut self.plan, &self.buffers, home)?;
        // The PEs' reads of the last step's forces end before the mesh writes them.
        self.transport.forces_free(&self.plan)?;
        Ok(Step { redist: self })
    }
}

/// Brings every PE its home forces, from `forces` (in place or the caller's), on `transport`.
fn return_with<'rt>(
    plan: &mut Plan<'rt>,
    buffers: &Buffers<'rt>,
    transport: &mut (dyn Transport<'rt> + 'rt),
    forces: Forces<'_>,
    home_forces: &mut [RVec],
) -> Result<()> {
    let n_home = plan.dest.len();
    if forces.data.len() != plan.received || home_forces.len() != n_home {
        return Err(Error::Config(format!(
            "PE {} returns {} forces for {} received atoms into room for {} home forces (needs {n_home})",
            plan.rt.my_pe(),
            forces.data.len(),
            plan.received,
            home_forces.len()
        )));
    }
    let unpacked = transport.backward(plan, buffers, forces, home_forces)?;
    plan.outcome()?;
    if !unpacked {
        // SAFETY: the forces for this step have all arrived (backward returned); no PE writes
        // this PE's force receive buffer before the next return.
        let arrived = unsafe { buffers.force_recv.array().local_range(0..n_home) };
        plan.unpack(by_rank::split(arrived, &plan.dest_counts), home_forces);
    }
    Ok(())
}

/// One step of the redistribution, from [`Redistribution::redistribute`] to
/// [`return_forces`](Self::return_forces): on a PME rank, the atoms it received and the forces
/// on them ([`mesh`](Self::mesh)). It derefs to the [`Redistribution`].
///
/// A step dropped without returning forces returns none; every PE must then skip the return
/// alike.
#[must_use = "the forces go back only with return_forces"]
pub struct Step<'r, 'rt> {
    redist: &'r mut Redistribution<'rt>,
}

/// A PME rank's share of one step: the atoms it received, by source PE, and the forces on
/// them, in the redistribution's own symmetric memory (empty on PEs that are not PME ranks).
pub struct Mesh<'a> {
    /// The atoms, by source PE, each source's in its home order.
    pub atoms: &'a [Particle],
    /// One force per atom, for the mesh's gather to write
    /// ([`SlabGrid::gather_into`](crate::SlabGrid::gather_into)): on the one-sided paths the
    /// PEs read them where they lie and unpack them into home order in the same pass, with no
    /// staging copy. What they hold before they are written is left from the last step.
    pub forces: &'a mut [RVec],
}

impl fmt::Debug for Step<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step").field("redist", &*self.redist).finish()
    }
}

impl fmt::Debug for Mesh<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mesh").field("atoms", &self.atoms.len()).finish_non_exhaustive()
    }
}

impl<'rt> Deref for Step<'_, 'rt> {
    type Target = Redistribution<'rt>;

    fn deref(&self) -> &Redistribution<'rt> {
        self.redist
    }
}

impl Step<'_, '_> {
    /// The atoms this PME rank received, by source PE (empty elsewhere).
    pub fn received(&self) -> &[Particle] {
        // SAFETY: other PEs write this PE's receive buffer only inside redistribute (which
        // takes &mut of the redistribution, held by this step), and on the get path nobody but
        // this PE writes it at all.
        unsafe { self.redist.buffers.recv.local_range(0..self.redist.plan.received) }
    }

    /// How many atoms this PME rank received from each PE.
    pub fn received_counts(&self) -> &[usize] {
        &self.redist.plan.src_counts
    }

    /// The atoms this PME rank received and the forces on them, for the mesh.
    pub fn mesh(&mut self) -> Mesh<'_> {
        let (buffers, received) = (&self.redist.buffers, self.redist.plan.received);
        // SAFETY: as in received.
        let atoms = unsafe { buffers.recv.local_range(0..received) };
        // SAFETY: other PEs never write the force buffer; on the get path they read it only
        // between this PE's publication and their taken signals, which redistribute awaited
        // for every return so far; on the other paths only this PE reads it. This step's
        // `&mut` keeps every other view of it away while the slice lives, and it is another
        // allocation than the receive buffer, so the two views do not overlap.
        let forces = unsafe { buffers.force_send.local_range_mut(0..received) };
        Mesh { atoms, forces }
    }

    /// Sends the forces the mesh wrote ([`mesh`](Self::mesh)) back to the atoms' PEs, and
    /// writes this PE's home forces into `home_forces` (one per home atom, in home order).
    /// Nothing is staged on the PME rank; on the one-sided paths each PE reads its forces
    /// where they lie.
    ///
    /// # Collective
    /// Every PE must call it, or [`return_forces_from`](Self::return_forces_from).
    ///
    /// # Errors
    /// [`Error::MovedTooFar`] on every PE when any PE found an atom too far from its planned
    /// slab in this step, naming the same atom everywhere; that step's forces are not
    /// delivered and `home_forces` is unchanged. Rebuild the plan
    /// ([`Redistribution::collective_plan`]) and go on. [`Error::Config`] when `home_forces`
    /// is not one per home atom (on this PE only).
    pub fn return_forces(self, home_forces: &mut [RVec]) -> Result<()> {
        let redist = self.redist;
        // SAFETY: nobody writes the force buffer during the return: other PEs never write it,
        // and this PE writes it only through a step's mesh, which this call has consumed.
        let forces = unsafe { redist.buffers.force_send.local_range(0..redist.plan.received) };
        let forces = Forces { data: forces, in_place: true };
        // The view borrows the buffers only, beside which the return takes the plan and the
        // transport.
        let (plan, buffers, transport) = (&mut redist.plan, &redist.buffers, &mut redist.transport);
        return_with(plan, buffers, transport.as_mut(), forces, home_forces)
    }

    /// [`return_forces`](Self::return_forces) of `forces` from the caller's array (one per
    /// received atom, in their order; empty on PEs that are not PME ranks), staged first where
    /// the path reads forces at their source.
    ///
    /// # Collective
    /// As [`return_forces`](Self::return_forces).
    ///
    /// # Errors
    /// As [`return_forces`](Self::return_forces), and [`Error::Config`] when `forces` is not
    /// one per received atom.
    pub fn return_forces_from(self, forces: &[RVec], home_forces: &mut [RVec]) -> Result<()> {
        let redist = self.redist;
        let forces = Forces { data: forces, in_place: false };
        return_with(&mut redist.plan, &redist.buffers, redist.transport.as_mut(), forces, home_forces)
    }
}
