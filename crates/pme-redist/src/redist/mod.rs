//! Redistribution of coordinates and charges from the particle PEs to the PME ranks, and of
//! forces back, between partners only, on five paths that leave the same bytes in the same
//! places.
//!
//! **Partners from the plan** ([`Redistribution::collective_plan`], which every PE calls at
//! each repartition): each home atom may reach the PME ranks whose slabs lie within the
//! displacement margin of where it is ([`RedistBuilder::displacement_margin`]; by default the
//! slab, or pencil row and column, either side of its own). A particle PE sends, every step, to those PME ranks alone
//! (its targets), and at most as many atoms to each as can reach it (its bound). At the plan
//! each PME rank learns who its sources are and their bounds (`partners.rs`: a remote
//! fetch-add per target and two barriers, nothing of the size of the job), and its receive
//! and force buffers are sized by the sum of those bounds, about its share of the atoms, not
//! by the system. An atom found outside its reach withholds its PE's atoms for that step and
//! is reported by every PE at the step's end: the PME ranks agree on the smallest error
//! (`vote.rs`) and return it to their sources with the status, so that no count travels
//! between PEs that are not partners.
//!
//! - **onesided-get** (the 2013 SHMEM port of GROMACS's design): each particle PE packs its
//!   atoms by target into its symmetric send buffer and announces to each target, in one put
//!   with a signal, its count and where the atoms lie; the PME rank gets them straight from
//!   there and adds one to the source's `taken` counter (monotonic over the calls, never
//!   reset). Forces come back the same way in reverse, read where they lie on the node.
//! - **onesided-put**: the same announcement, then each PME rank offers each source where its
//!   atoms go and the source writes them there, packed straight into place through the
//!   mapping of a same-node PME rank, so each atom is written once, where it is needed.
//! - **mpi**: one `MPI_Isend` per target; each PME rank probes its sources in source order
//!   (`MPI_Mprobe`, which gives the count) and receives into place (`MPI_Mrecv`).
//! - **mpi-alltoallv**, the reference over every rank: `MPI_Alltoall` of the counts, then
//!   `MPI_Alltoallv` of the data.
//! - **mpi-neighbor**: MPI's neighbourhood collectives on distributed graphs of the partners,
//!   made at each plan: `MPI_Neighbor_alltoall` of the counts, `MPI_Neighbor_alltoallv` of
//!   the data.
//! - **auto**: per pair of PEs, the path its link class was measured or set fastest on
//!   (`onesided`'s links, [`RedistLinks`]): on one node the same-node class's path; across
//!   nodes, where one class took MPI and the other a one-sided path, each pair its own
//!   (`mixed.rs`: the MPI part posted around the one-sided part, MPI's vote), else the
//!   other-node class's path for every pair.
//!
//! **Relay** ([`RedistBuilder::relay`], PME on a subset of the PEs): as in GROMACS, each
//! particle PE sends all its atoms to one PME rank, its relay ([`PmeGrid::relay_rank`]: one
//! under its domain, as many domains per PME rank as any other), which passes each on to its
//! own PME rank. Both hops are redistributions as above on the same path: the first with one
//! target per particle PE and no vote (no atom can be too far for it), the second among the
//! PME ranks, whose home atoms are what the relay received, with the margin, the partners and
//! the vote; the forces come back through the second hop, then the first. On pencils the
//! second hop runs in two stages, as GROMACS's does: along y within the relay's row (each
//! atom checked against its whole reach), then along x within each column, planned from the
//! counts per row the first stage's agreement carries, with the vote (`plan::Stage`). A
//! particle PE then sends one message each way per step; the price is that the atoms outside
//! their relay's pencil travel twice or three times (the scale model tabulates both
//! routings).
//!
//! Each transport is one file behind the `Transport` trait (`get.rs`, `put.rs`, `mpi.rs`,
//! `neighbor.rs`, and `mixed.rs` of one-sided and MPI parts; the one-sided paths' lines and
//! counters in `lines.rs`), handed the plan and the buffers;
//! `path.rs` names the paths and links and settles `auto`; `plan.rs` holds what every path
//! shares (the layout of a step, the counts, the errors a step carries), `place.rs` where each atom goes, and `by_rank.rs` the packing and
//! unpacking: a step reads the home atoms twice (placement, with the counts per rank and
//! where each run of atoms of one rank starts, then packing, a copy per run); on the put path
//! to a mapped PME rank it writes each atom once, into place. Forces are unpacked into home
//! order in one pass, by the same runs.
//!
//! A PME rank lays out what it receives by source PE, so the layout, and everything computed
//! from it, is the same on every path. The forces on a PME rank's atoms go back to their
//! sources with the same plan in reverse and land in the sources' original (home) order.

use std::fmt;
use std::ops::Deref;
use std::rc::Rc;

use onesided::{Collectives, GrowthPolicy, Runtime};

use crate::RVec;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;

mod by_rank;
mod get;
mod lines;
mod mixed;
mod mpi;
mod neighbor;
mod partners;
mod path;
mod place;
mod plan;
mod put;
mod store;
mod vote;

use partners::{Agreement, Margin};
pub use partners::{StageTarget, planned_stage_targets, planned_targets};
pub use path::{RedistLinks, RedistPath};
use place::place;
use plan::Pairs;
use plan::{Plan, Stage, agree_home};
use store::{Bank, RELAY_BANKS, Role, Store};

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

/// Below this many atoms, finding destinations and packing run on the calling thread:
/// handing a few microseconds of work to the thread pool costs more than it saves.
const PARALLEL_MIN: usize = 4096;

/// How the buffers sized by the home atoms grow: to the most any PE holds, plus a fifth.
pub const GROWTH_FACTOR: f64 = 1.2;
const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: GROWTH_FACTOR, freeze_after: None };

/// Words per slot of the get path's tables: one cache line.
const LINE: usize = 8;

/// One transport's protocol for the two halves of a step, once every home atom's PME rank
/// and the counts are known: each implementation reads top to bottom in its own file and
/// holds its own state; it is handed the plan, which it reads and completes (the counts it
/// receives, the errors it hears of), and the buffers, which it moves data between.
trait Transport<'rt> {
    /// Fits the transport's own state to a new plan's partners.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    fn collective_replan(&mut self, _plan: &Plan<'rt>) -> Result<()> {
        Ok(())
    }

    /// Symmetric bytes the transport holds of its own.
    fn symmetric_bytes(&self) -> usize {
        0
    }

    /// Counts and the `home` atoms to the PME ranks (packed by [`Plan::pack`]).
    fn forward(&mut self, plan: &mut Plan<'rt>, buffers: &Buffers<'rt>, home: &[Particle]) -> Result<()>;

    /// The PME ranks' vote on the step's error, then status and `forces` (one per received
    /// atom, on PME ranks) back to the atoms' PEs, into
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
    /// written: on the one-sided paths, until every PE has taken the forces of the last
    /// return that left them to be read.
    fn forces_free(&mut self, _plan: &Plan<'rt>) -> Result<()> {
        Ok(())
    }
}

/// The forces a PME rank returns: one per received atom, in the caller's array, or already in
/// the force staging buffer (`data` is then a view of it): `in_place` where the sources are
/// to read them there (a step's [`Mesh`] handed them out, or a relay's second hop brought
/// them on the get and MPI paths), not where a put relay pushes them from it.
#[derive(Clone, Copy)]
struct Forces<'a> {
    data: &'a [RVec],
    in_place: bool,
}

/// The buffers the transports move data between, each symmetric where other PEs read or
/// write it and local otherwise ([`store`]).
///
/// When no PE is both a particle PE and a PME rank (PME on a subset of the PEs), each PE uses
/// only one side of each pair, so the receive side shares the send side's memory where both
/// live alike: one array as large as the larger need, not two.
struct Buffers<'rt> {
    /// This PE's atoms packed by destination, on the get and MPI paths (the put path packs
    /// straight into the PME ranks' receive buffer where it can); room for its home atoms
    /// (symmetric: the most of any PE at the last plan), grown by each plan that needs more.
    send: Store<'rt, Particle>,
    /// Room for the atoms a PME rank may receive: the sum of its sources' bounds (symmetric:
    /// the most of any PME rank at the last plan); `None`: `send` serves.
    recv: Option<Store<'rt, Particle>>,
    /// Room for the forces on them, where a PME rank's forces are written ([`Step::mesh`]) or
    /// staged, and where the PEs take them from on the one-sided paths; sized as the receive
    /// buffer; `None`: `force_recv` serves.
    force_send: Option<Store<'rt, RVec>>,
    /// This PE's home forces, by destination; sized as `send`.
    force_recv: Store<'rt, RVec>,
}

impl<'rt> Buffers<'rt> {
    /// The buffers of `path` for `home` home atoms on this PE (`most_home` on any), each pair
    /// shared unless some PE has `both` roles or its two sides live apart.
    ///
    /// # Collective
    /// Every PE calls it alike.
    fn collective_new(
        rt: &'rt Runtime,
        name: &dyn Fn(&str) -> String,
        path: RedistPath,
        (home, most_home): (usize, usize),
        both: bool,
        banks: Option<[&Rc<Bank>; 4]>,
    ) -> Result<Self> {
        let need = |role: Role| if role.symmetric_on(path) { most_home } else { home };
        let separate = |a: Role, b: Role| both || a.symmetric_on(path) != b.symmetric_on(path);
        let bank = |role: Role| banks.map(|b| b[role as usize]);
        let new_atoms = |what: &str, role: Role, need: usize| {
            Store::<Particle>::collective_new(rt, &name(what), (role, path), need, GROWTH, bank(role))
        };
        let new_forces = |what: &str, role: Role, need: usize| {
            Store::<RVec>::collective_new(rt, &name(what), (role, path), need, GROWTH, bank(role))
        };
        Ok(Buffers {
            send: new_atoms("send", Role::Send, need(Role::Send))?,
            recv: separate(Role::Send, Role::Receive)
                .then(|| new_atoms("receive", Role::Receive, 0))
                .transpose()?,
            force_send: separate(Role::ForcesIn, Role::ForcesOut)
                .then(|| new_forces("forces out", Role::ForcesOut, 0))
                .transpose()?,
            force_recv: new_forces("forces in", Role::ForcesIn, need(Role::ForcesIn))?,
        })
    }

    fn send(&self) -> &Store<'rt, Particle> {
        &self.send
    }

    fn recv(&self) -> &Store<'rt, Particle> {
        self.recv.as_ref().unwrap_or(&self.send)
    }

    fn force_send(&self) -> &Store<'rt, RVec> {
        self.force_send.as_ref().unwrap_or(&self.force_recv)
    }

    fn force_recv(&self) -> &Store<'rt, RVec> {
        &self.force_recv
    }

    /// Room for `home` atoms to send and, on PME ranks, `share` to receive (a symmetric
    /// buffer: every PE's request, the largest of each served).
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    ///
    /// # Safety
    /// No view of any buffer of the redistribution lives (as [`Store::collective_ensure`]).
    unsafe fn collective_fit(&mut self, home: usize, share: usize) -> Result<()> {
        // SAFETY: the caller's promise, for every buffer.
        unsafe {
            match &mut self.recv {
                Some(recv) => {
                    self.send.collective_ensure(home, GROWTH)?;
                    recv.collective_ensure(share, GROWTH)?;
                }
                None => self.send.collective_ensure(home.max(share), GROWTH)?,
            }
            match &mut self.force_send {
                Some(force_send) => {
                    self.force_recv.collective_ensure(home, GROWTH)?;
                    force_send.collective_ensure(share, GROWTH)?;
                }
                None => self.force_recv.collective_ensure(home.max(share), GROWTH)?,
            }
        }
        Ok(())
    }

    /// Bytes held: (symmetric, local), banks apart.
    fn bytes(&self) -> (usize, usize) {
        let atoms = [Some(&self.send), self.recv.as_ref()].into_iter().flatten().map(Store::bytes);
        let forces =
            [Some(&self.force_recv), self.force_send.as_ref()].into_iter().flatten().map(Store::bytes);
        atoms.chain(forces).fold((0, 0), |(s, l), (ds, dl)| (s + ds, l + dl))
    }
}

/// The redistribution of one set of home atoms to the PME ranks, and of their forces back.
///
/// Built once ([`builder`](Self::builder)), planned at every repartition
/// ([`collective_plan`](Self::collective_plan)), and every step:
/// [`redistribute`](Self::redistribute), which returns the step's view; on PME ranks, the
/// mesh reads the atoms and writes their forces ([`Step::mesh`]); then
/// [`Step::return_forces`] brings every PE its home atoms' forces in home order.
pub struct Redistribution<'rt> {
    links: RedistLinks,
    plan: Plan<'rt>,
    buffers: Buffers<'rt>,
    agreement: Agreement<'rt>,
    transport: Box<dyn Transport<'rt> + 'rt>,
    /// With a relay ([`RedistBuilder::relay`]), the second hop: from each relay PME rank,
    /// whose received atoms are its home atoms, to the atoms' own PME ranks.
    onward: Option<Box<Onward<'rt>>>,
    /// With a relay on the MPI paths, the banks its hops' buffers take turns in (held by the
    /// first hop).
    banks: Vec<Rc<Bank>>,
}

/// The second hop of a relay (the forces it brings back to the relay PME rank land in the
/// first hop's force buffer, from which the first hop returns them).
struct Onward<'rt> {
    hop: Redistribution<'rt>,
}

impl fmt::Debug for Redistribution<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redistribution")
            .field("links", &self.links)
            .field("pme_rank", &self.plan.my_rank)
            .field("pme_ranks", &self.plan.grid.ranks())
            .field("home_count", &self.plan.home_count())
            .field("received", &self.last_hop().plan.received)
            .finish_non_exhaustive()
    }
}

/// The choices a [`Redistribution`] is built with ([`Redistribution::builder`]).
#[derive(Clone, Debug)]
pub struct RedistBuilder<'rt> {
    rt: &'rt Runtime,
    grid: PmeGrid,
    links: RedistLinks,
    margin: Margin,
    routing: Routing,
    mesh_votes: bool,
}

/// Whether a particle PE sends to the PME ranks directly or through its relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routing {
    Direct,
    /// This PE's relay PME rank (`None` on PME-only PEs).
    Relay(Option<usize>),
}

impl<'rt> RedistBuilder<'rt> {
    /// The transport for every pair ([`RedistPath::OneSidedPut`] by default;
    /// [`RedistPath::Auto`] per link class).
    pub fn path(self, path: RedistPath) -> Self {
        RedistBuilder { links: RedistLinks::uniform(path), ..self }
    }

    /// A transport per link class: each pair of PEs on one node takes `links.same_node`, each
    /// pair across nodes `links.other_node` ([`RedistLinks`] says which mixes one
    /// redistribution can take; [`collective_build`](Self::collective_build) refuses others).
    pub fn links(self, links: RedistLinks) -> Self {
        RedistBuilder { links, ..self }
    }

    /// How far an atom may move, in nm in any direction, between two plans: each particle PE
    /// then sends only to the PME ranks its atoms can reach within that distance, and the
    /// buffers hold only what can reach each PME rank (about the PE's share when the margin
    /// is small against a slab or pencil). An atom that moves further and leaves the slabs or
    /// pencils it could reach is reported on every PE ([`Error::MovedTooFar`]). Engines pass
    /// what their neighbour search allows (the Verlet buffer, say). Without it, an atom may
    /// reach the slab either side of its own (with pencils, the row and column either side).
    ///
    /// Every PE must pass the same margin.
    pub fn displacement_margin(self, nm: f32) -> Self {
        RedistBuilder { margin: Margin::Distance(nm), ..self }
    }

    /// Leaves the PME ranks' vote on each step's error to the PME mesh: the ballots ride in the
    /// forward FFT transposes ([`Pme::collective_step`](crate::Pme::collective_step) with the
    /// step's [`Step::mesh`]), so the vote costs no message of its own (otherwise ⌈log₂ M⌉
    /// rounds each way on the one-sided paths, an `MPI_Iallreduce` on MPI's). Every step
    /// must then go through the mesh before its forces return; one that does not ends with
    /// an error on every PE.
    pub fn vote_in_mesh(self) -> Self {
        RedistBuilder { mesh_votes: true, ..self }
    }

    /// Relays the atoms, as GROMACS does with separate PME ranks: each particle PE sends all
    /// its atoms, every step, to one PME rank (its relay, `relay_of(pe)` for particle PE
    /// `pe`), which passes each on to its own PME rank (a second redistribution, among the
    /// PME ranks, with the displacement margin, in two stages on pencils of two rows and two
    /// columns or more: along y, then along x; the forces come back the same way). A
    /// particle PE then sends one message each way per step whatever the decomposition, and
    /// a PME rank hears from the particle PEs it relays for and from the PME ranks near it.
    /// [`PmeGrid::relay_rank`] gives each domain of a domain grid a relay under it, an even
    /// number of domains per PME rank.
    ///
    /// Needs PME on a subset of the PEs ([`Error::Config`] otherwise: where every PE does
    /// PME, each sends to its partners directly). Every PE must pass the same `relay_of`, PME
    /// ranks included (they never call it).
    pub fn relay(self, relay_of: impl Fn(usize) -> usize) -> Self {
        let me = self.rt.my_pe();
        let particle = self.grid.rank_of_pe(me).is_none();
        RedistBuilder { routing: Routing::Relay(particle.then(|| relay_of(me))), ..self }
    }

    /// Sets up the redistribution of this PE's `home` atoms (empty on PME-only PEs) over
    /// the grid's PME ranks, for a system of `total_atoms`, and builds the plan.
    ///
    /// When every PE is a PME rank, every PE also holds atoms; otherwise the PEs that are not
    /// PME ranks hold them and the PME ranks receive (with a relay, they also pass the atoms
    /// on among themselves).
    ///
    /// # Collective
    /// Every PE must call it, with a builder of the same grid, path and routing and the same
    /// total.
    ///
    /// # Errors
    /// On every PE: [`Error::Config`] when the PME ranks do not fit the job, a PME-only PE is
    /// given home atoms, a relay is asked for with PME on every PE, or the links mix paths
    /// one redistribution cannot ([`RedistLinks`]); [`Error::CollectiveConfig`] when the PEs
    /// were given different paths;
    /// [`Error::CollectiveConfig`] when some PEs relay and some do not, or a particle PE names
    /// a relay outside the grid; [`Error::Comm`] when the symmetric heap cannot hold the
    /// buffers.
    pub fn collective_build(self, home: &[Particle], total_atoms: usize) -> Result<Redistribution<'rt>> {
        // The buffers follow the bounds of the plan, never more than the system.
        let _ = total_atoms;
        let RedistBuilder { rt, grid, links, margin, routing, mesh_votes } = self;
        let n = rt.n_pes();
        let m = grid.ranks();
        if m > n || (0..m).any(|r| grid.pe_of(r) >= n) {
            return Err(Error::Config(format!(
                "{m} PME ranks on PEs {:?} do not fit a job of {n} PEs",
                (0..m).map(|r| grid.pe_of(r)).collect::<Vec<_>>()
            )));
        }
        if let Margin::Distance(nm) = margin
            && !(nm >= 0.0 && nm.is_finite())
        {
            return Err(Error::Config(format!(
                "a displacement margin of {nm} nm: it must be a finite distance of at least 0"
            )));
        }
        let my_rank = grid.rank_of_pe(rt.my_pe());
        let valid = links.check();
        // The largest code and the smallest (as CODES less the largest of CODES less each).
        const INVALID: u64 = 64;
        const CODES: u64 = 128;
        let code = if valid.is_ok() { links.code() } else { INVALID };
        let mut agreed = [u64::from(mesh_votes), u64::from(!mesh_votes), code, CODES - code];
        rt.max_u64(&mut agreed)?;
        if agreed[..2] == [1, 1] {
            return Err(Error::CollectiveConfig(
                "some PEs leave the vote to the PME mesh and some do not: every PE must build its \
                 redistribution with the same vote_in_mesh"
                    .to_string(),
            ));
        }
        valid?;
        if agreed[2] == INVALID {
            return Err(Error::Config(format!(
                "another PE was given redistribution links one redistribution cannot take (this PE: {links})"
            )));
        }
        if agreed[2] != CODES - agreed[3] {
            return Err(Error::CollectiveConfig(format!(
                "the PEs were given different redistribution paths (this PE: {links}): every PE must \
                 build its redistribution with the same path or links"
            )));
        }
        let links = if links == RedistLinks::uniform(RedistPath::Auto) {
            RedistPath::Auto.collective_links(rt)?
        } else {
            links
        };
        let hop = Hop { rt, grid: &grid, links, margin, mesh_votes };
        match agree_routing(rt, &grid, routing)? {
            None => hop.collective_build(
                home,
                m == n || my_rank.is_none(),
                m == n,
                None,
                true,
                (Stage::Whole, None),
            ),
            Some(via) => {
                // Where no buffer is symmetric, the hops' buffers take turns in four banks.
                let all = [Role::Send, Role::Receive, Role::ForcesOut, Role::ForcesIn];
                let banks: Vec<Rc<Bank>> = if all.iter().any(|r| r.symmetric_on(links.storage())) {
                    Vec::new()
                } else {
                    (0..4).map(|_| Rc::new(Bank::default())).collect()
                };
                let banked = |hop: usize| (!banks.is_empty()).then(|| RELAY_BANKS[hop].map(|b| &banks[b]));
                // The first hop never finds an atom too far, and the second's vote has made
                // every PME rank agree on the step's error before the first returns.
                let mut first = hop.collective_build(
                    home,
                    my_rank.is_none(),
                    false,
                    via,
                    false,
                    (Stage::Whole, banked(0)),
                )?;
                let received = first.collective_round_trip(home)?;
                let [px, py] = grid.dims();
                let onward = if px > 1 && py > 1 {
                    // Pencils: the second hop in two stages, along y within the relay's row,
                    // then along x within each column, each with a few partners; the second
                    // votes, carrying what the first found.
                    let pme = my_rank.is_some();
                    let row = Stage::AlongY { row: my_rank.map_or(0, |r| r / py) };
                    let mut along_y =
                        hop.collective_build(&received, pme, true, None, false, (row, banked(1)))?;
                    let along_x =
                        hop.collective_build(&[], pme, true, None, true, (Stage::AlongX, banked(2)))?;
                    along_y.onward = Some(Box::new(Onward { hop: along_x }));
                    along_y.collective_plan_along_x()?;
                    along_y
                } else {
                    hop.collective_build(
                        &received,
                        my_rank.is_some(),
                        true,
                        None,
                        true,
                        (Stage::Whole, banked(1)),
                    )?
                };
                first.onward = Some(Box::new(Onward { hop: onward }));
                first.banks = banks;
                Ok(first)
            }
        }
    }
}

/// What both hops of a relay, or the one direct hop, are built with.
struct Hop<'a, 'rt> {
    rt: &'rt Runtime,
    grid: &'a PmeGrid,
    links: RedistLinks,
    margin: Margin,
    /// The hop that votes leaves it to the mesh.
    mesh_votes: bool,
}

impl<'rt> Hop<'_, 'rt> {
    /// One hop: from the PEs that hold `home` atoms (`particle`) to the PME ranks, each PE
    /// with both roles when `both` does, every atom to `relay` when it is given, with a vote
    /// on each step's error when `votes`; `stage` says which stage of a relay's second hop on
    /// pencils it is (the stage along x is planned by the caller, from the stage before), and
    /// `banks` by [`Role`] where its local buffers take turns with other hops'.
    ///
    /// # Collective
    /// Every PE calls it alike.
    fn collective_build(
        &self,
        home: &[Particle],
        particle: bool,
        both: bool,
        relay: Option<usize>,
        votes: bool,
        (stage, banks): (Stage, Option<[&Rc<Bank>; 4]>),
    ) -> Result<Redistribution<'rt>> {
        let Hop { rt, grid, links, margin, mesh_votes } = *self;
        let my_rank = grid.rank_of_pe(rt.my_pe());
        let m = grid.ranks();
        // Agreed before anything is allocated, so that a wrong call fails on every PE alike.
        let most_home = agree_home(rt, particle, home)?;
        // Only a relay's first hop and a stage along y do not vote.
        let hop = match stage {
            Stage::AlongY { .. } => "along y ",
            Stage::AlongX => "along x ",
            Stage::Whole if votes => "",
            Stage::Whole => "relay ",
        };
        let name = |what: &str| format!("pme {links}: {hop}{what}");
        let all = Pairs::All;
        let transport: Box<dyn Transport<'rt> + 'rt> = match links.same_node {
            _ if !links.is_uniform() => Box::new(mixed::Mixed::collective_new(rt, &name, m, my_rank, links)?),
            RedistPath::OneSidedGet => Box::new(get::Get::collective_new(rt, &name, m, all)?),
            RedistPath::OneSidedPut => Box::new(put::Put::collective_new(rt, &name, m, all)?),
            RedistPath::Mpi => Box::new(mpi::Mpi::collective_new(rt, my_rank, false, all)?),
            RedistPath::MpiAlltoallv => Box::new(mpi::Mpi::collective_new(rt, my_rank, true, all)?),
            RedistPath::MpiNeighbor => Box::new(neighbor::Neighbor::collective_new(rt, my_rank)?),
            RedistPath::Auto => unreachable!("the builder resolves the automatic path first"),
        };
        let own_home = if particle { home.len() } else { 0 };
        let buffers =
            Buffers::collective_new(rt, &name, links.storage(), (own_home, most_home), both, banks)?;
        let agreement = Agreement::collective_new(rt, &name)?;
        let mut plan = Plan::new(rt, grid.clone(), particle, margin, relay, votes && !mesh_votes);
        plan.stage = stage;
        plan.mesh_votes = votes && mesh_votes;
        let mut redist =
            Redistribution { links, plan, buffers, agreement, transport, onward: None, banks: Vec::new() };
        if stage != Stage::AlongX {
            redist.collective_partners(home)?;
        }
        Ok(redist)
    }
}

/// Whether the PEs relay, every PE agreeing, and this PE's relay if it is a particle PE:
/// `None` for direct routing.
///
/// # Collective
/// One max-reduction.
fn agree_routing(rt: &Runtime, grid: &PmeGrid, routing: Routing) -> Result<Option<Option<usize>>> {
    let (me, m) = (rt.my_pe(), grid.ranks());
    let bad = match routing {
        Routing::Relay(Some(r)) if r >= m => me as u64 + 1,
        _ => 0,
    };
    let relaying = matches!(routing, Routing::Relay(_));
    let mut agreed = [u64::from(relaying), u64::from(!relaying), bad];
    rt.max_u64(&mut agreed)?;
    if agreed[0] == 1 && agreed[1] == 1 {
        return Err(Error::CollectiveConfig(
            "some PEs relay the PME atoms and some do not: every PE must build its redistribution \
             with the same relay"
                .to_string(),
        ));
    }
    if agreed[2] > 0 {
        return Err(Error::CollectiveConfig(format!(
            "particle PE {} names a relay outside the grid's {m} PME ranks",
            agreed[2] - 1
        )));
    }
    let via = match routing {
        Routing::Direct => return Ok(None),
        Routing::Relay(via) => via,
    };
    if m == rt.n_pes() {
        return Err(Error::Config(format!(
            "a relay needs PME on a subset of the PEs, but all {m} PEs are PME ranks: each \
             already sends to its partners directly"
        )));
    }
    Ok(Some(via))
}

impl<'rt> Redistribution<'rt> {
    /// Starts building a redistribution over `grid`'s PME ranks, on the one-sided put path
    /// unless the builder says otherwise.
    pub fn builder(rt: &'rt Runtime, grid: PmeGrid) -> RedistBuilder<'rt> {
        RedistBuilder {
            rt,
            grid,
            links: RedistLinks::uniform(RedistPath::OneSidedPut),
            margin: Margin::Slab,
            routing: Routing::Direct,
            mesh_votes: false,
        }
    }

    /// The path: with links that differ per class ([`links`](Self::links)), that of the pairs
    /// across nodes.
    pub fn path(&self) -> RedistPath {
        self.links.other_node
    }

    /// The path of each class of link ([`RedistPath::Auto`] made concrete).
    pub fn links(&self) -> RedistLinks {
        self.links
    }

    /// This PE's PME rank, if it is one.
    pub fn pme_rank(&self) -> Option<usize> {
        self.plan.my_rank
    }

    /// The PME grid.
    pub fn grid(&self) -> &PmeGrid {
        &self.plan.grid
    }

    /// Builds the plan for a new set of home atoms: records which PME ranks each of this PE's
    /// `home` atoms may reach from where it is now (later steps report an atom found beyond
    /// them as having moved too far), agrees with those PME ranks that this PE will send to
    /// them, and grows the buffers to the most any PE now needs (over-allocated by a fifth, so
    /// that small changes cost no reallocation): for the home atoms, and on PME ranks for
    /// what their sources can send. Call it whenever the home atoms are (re)partitioned; the
    /// following steps must pass the same home atoms (positions may change, their number and
    /// order may not).
    ///
    /// # Collective
    /// Every PE must call it, each with its own home atoms (none on PME-only PEs).
    ///
    /// With a relay, the relay PME ranks learn where the atoms are now with one round trip
    /// of the first hop, and the second hop is planned from there.
    ///
    /// # Errors
    /// On every PE, the plan left as it was: [`Error::Config`] when a PME-only PE is given
    /// home atoms; [`Error::Comm`] when the symmetric heap cannot hold the grown buffers
    /// (naming the variable that raises its size). With a relay, an error of a later hop's
    /// plan (the second hop, or on pencils either of its stages) leaves the hops before it
    /// planned anew and the rest as they were: plan again before the next step.
    pub fn collective_plan(&mut self, home: &[Particle]) -> Result<()> {
        agree_home(self.plan.rt, self.plan.particle, home)?;
        self.collective_partners(home)?;
        if self.plan.stage != Stage::Whole {
            self.collective_plan_along_x()?;
        } else if self.onward.is_some() {
            let received = self.collective_round_trip(home)?;
            if let Some(onward) = &mut self.onward {
                onward.hop.collective_plan(&received)?;
            }
        }
        Ok(())
    }

    /// On the stage along y of a relay's second hop, plans its onward stage along x: the
    /// targets and bounds this stage agreed (`(rank, bound)`), for up to what this stage can
    /// receive a step.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    fn collective_plan_along_x(&mut self) -> Result<()> {
        let Redistribution { plan, onward, .. } = self;
        let capacity = plan.sources().iter().map(|s| s.bound).sum();
        match onward {
            Some(onward) => onward.hop.collective_plan_given(&plan.agreed.along_x, capacity),
            None => Ok(()),
        }
    }

    /// The plan of the stage along x of a relay's second hop from the targets and bounds the
    /// stage along y agreed (`(rank, bound)`), for up to `capacity` atoms a step.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    fn collective_plan_given(&mut self, along_x: &[(usize, usize)], capacity: usize) -> Result<()> {
        let reach = if self.plan.particle {
            let (mut targets, mut bounds): (Vec<usize>, Vec<usize>) = along_x.iter().copied().unzip();
            if targets.is_empty() {
                // Nothing may come here: one target all the same, this rank, to hear of errors.
                targets.push(self.plan.my_rank.unwrap_or(0));
                bounds.push(0);
            }
            partners::Reach::given(&self.plan.grid, targets, bounds, capacity)
        } else {
            partners::Reach::default()
        };
        self.collective_partners_with(reach, capacity)
    }

    /// One step of this hop alone, with no forces: the atoms this PME rank receives from
    /// `home` (on every PE, the first hop of a relay at each plan).
    ///
    /// # Collective
    /// Every PE calls it.
    fn collective_round_trip(&mut self, home: &[Particle]) -> Result<Vec<Particle>> {
        let onward = self.onward.take();
        let result = (|| {
            let step = self.redistribute(home)?;
            let received = step.received().to_vec();
            let mut home_forces = vec![[0.0; 3]; home.len()];
            step.return_forces_from(&vec![[0.0; 3]; received.len()], &mut home_forces)?;
            Ok(received)
        })();
        self.onward = onward;
        result
    }

    /// The hop whose PME ranks hold the atoms for the mesh: the second of a relay, or this.
    fn last_hop(&self) -> &Redistribution<'rt> {
        self.onward.as_ref().map_or(self, |o| o.hop.last_hop())
    }

    /// [`last_hop`](Self::last_hop), to change.
    fn last_hop_mut(&mut self) -> &mut Redistribution<'rt> {
        match self.onward {
            Some(ref mut onward) => onward.hop.last_hop_mut(),
            None => self,
        }
    }

    /// The partners of the plan for `home`: the reach of each atom, the agreement with the
    /// targets, the receive buffers grown to the bounds, and the transport fitted.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    fn collective_partners(&mut self, home: &[Particle]) -> Result<()> {
        let reach = self.plan.reach(home);
        self.collective_partners_with(reach, home.len())
    }

    /// [`collective_partners`](Self::collective_partners) for a reach already made, for up to
    /// `home` home atoms.
    ///
    /// # Collective
    /// Every PE calls it at each plan.
    fn collective_partners_with(&mut self, reach: partners::Reach, home: usize) -> Result<()> {
        let plan = &mut self.plan;
        let agreed = self.agreement.collective_agree(
            plan.rt,
            &plan.grid,
            plan.my_rank,
            &reach.targets,
            &reach.bounds,
            &reach.rows,
        )?;
        // Each source sends at most its bound, so this is never more than the system.
        let share = agreed.sources.iter().map(|s| s.bound).sum::<usize>();
        // SAFETY: plans are made under `&mut` of the first hop (builds, collective_plan), when
        // no step, and so no view of any buffer, lives.
        unsafe { self.buffers.collective_fit(home, share)? };
        let old = plan.replace(reach, agreed);
        // A transport that cannot follow (no memory for its slots, on every PE alike) leaves
        // the old plan in place, whose slots it still has.
        if let Err(e) = self.transport.collective_replan(&self.plan) {
            self.plan.replace(old.0, old.1);
            return Err(e);
        }
        Ok(())
    }

    /// The atoms this PME rank received for its mesh in the last step (zero elsewhere).
    pub fn last_received(&self) -> usize {
        self.last_hop().plan.received
    }

    /// The PME ranks this PE sends to under the current plan: a particle PE's targets (its
    /// relay alone, with a relay), and with a relay a PME rank's targets in the last hop (on
    /// pencils, the second stage's: ranks of its column); none elsewhere.
    pub fn targets(&self) -> &[usize] {
        let hop = if self.plan.particle { self } else { self.last_hop() };
        if hop.plan.particle { &hop.plan.reach.targets } else { &[] }
    }

    /// The PEs whose atoms this PME rank's mesh receives under the current plan (none
    /// elsewhere), ascending: particle PEs, or with a relay the PME ranks of the last hop (the
    /// relays, or on pencils the ranks of this column that passed the atoms on).
    pub fn sources(&self) -> Vec<usize> {
        self.last_hop().plan.sources().iter().map(|s| s.pe).collect()
    }

    /// With a relay, the particle PEs this PME rank relays for, ascending (none elsewhere,
    /// and without a relay).
    pub fn relayed_for(&self) -> Vec<usize> {
        if self.onward.is_some() { self.plan.sources().iter().map(|s| s.pe).collect() } else { Vec::new() }
    }

    /// With a relay, the atoms this PME rank received in the last step from the particle PEs
    /// it relays for (zero elsewhere, and without a relay).
    pub fn last_relayed(&self) -> usize {
        if self.onward.is_some() { self.plan.received } else { 0 }
    }

    /// The symmetric memory this redistribution holds on each PE, in bytes (the same on every
    /// PE): the buffers other PEs read or write, sized by the most any PE's home atoms or any
    /// PME rank's bounds need, and its transport's slots; with a relay, of every hop. None of
    /// the buffers on the MPI paths.
    pub fn symmetric_bytes(&self) -> usize {
        let own =
            self.buffers.bytes().0 + self.agreement.symmetric_bytes() + self.transport.symmetric_bytes();
        own + self.onward.as_ref().map_or(0, |o| o.hop.symmetric_bytes())
    }

    /// The memory of this PE's own that the redistribution's buffers hold, in bytes: those no
    /// other PE reads or writes (every buffer on the MPI paths, the receive sides on the get
    /// path, the send side on the put path), sized by this PE's own home atoms and bounds;
    /// with a relay, of every hop.
    pub fn local_bytes(&self) -> usize {
        let banks: usize = self.banks.iter().map(|b| b.bytes()).sum();
        banks + self.buffers.bytes().1 + self.onward.as_ref().map_or(0, |o| o.hop.local_bytes())
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
        // The stage along x takes what the stage along y brought, up to its plan's count.
        let fits = match self.plan.stage {
            Stage::AlongX => home.len() <= self.plan.home_count(),
            _ => home.len() == self.plan.home_count(),
        };
        if !fits || home.len() > self.buffers.send().capacity() {
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
        // The PEs' reads of the last step's forces end before the mesh, or with a relay the
        // second hop's return, writes them.
        self.transport.forces_free(&self.plan)?;
        if let Some(onward) = &mut self.onward {
            // SAFETY: the first hop's atoms have all arrived (forward returned); no other PE
            // writes this PE's receive buffer again before the next step's forward, and this
            // PE writes it (or, on an MPI relay, a buffer sharing its bank) only in the
            // return, after this view's last use; the second hop only reads them, into
            // buffers of other banks (RELAY_BANKS).
            let relayed = unsafe { self.buffers.recv().local_range(0..self.plan.received) };
            let origins = &mut onward.hop.plan.origins;
            origins.clear();
            origins.extend(self.plan.src_offsets.iter().zip(self.plan.sources()).map(|(&at, s)| (at, s.pe)));
            // An error the stage along y found or heard of goes on with the stage along x,
            // whose vote tells every PME rank.
            if self.plan.stage != Stage::Whole {
                onward.hop.plan.inherited = self.plan.pending;
            }
            drop(onward.hop.redistribute(relayed)?);
        }
        Ok(Step { redist: self })
    }
}

impl Redistribution<'_> {
    /// Returns the mesh's `forces` (`None`: where the mesh wrote them, in place) and brings
    /// this PE its home forces, through both hops with a relay.
    ///
    /// # Collective
    /// Every PE calls it once per step.
    fn collective_return(&mut self, forces: Option<&[RVec]>, home_forces: &mut [RVec]) -> Result<()> {
        if let Some(onward) = &mut self.onward {
            // The second hop's forces come to the relay PME rank, and go on from there.
            let received = self.plan.received;
            // SAFETY: this hop's force buffer: no PE reads it now (on the one-sided paths
            // redistribute waited until every source had taken the last return's forces, and
            // this return's statuses go out only below; on MPI only this PE touches it), the
            // put path's sources write their own force buffers, not this one, and no other
            // view of it lives: the mesh's are the last hop's buffers, and on an MPI relay no
            // buffer in use during the later hops' returns shares its bank (RELAY_BANKS).
            let staged = unsafe { self.buffers.force_send().local_range_mut(0..received) };
            let failed = match onward.hop.collective_return(forces, staged) {
                Ok(()) => None,
                // Every PME rank heard of it in the second hop's vote: the first hop's
                // statuses carry it to every particle PE.
                Err(Error::MovedTooFar { atom, pe }) => {
                    self.plan.note_error(plan::marker(atom, pe));
                    None
                }
                // The first hop returns all the same, so that no particle PE waits for this
                // relay; they hear that it failed, and it reports its own error.
                Err(e) => {
                    self.plan.note_error(plan::RELAY_FAILED);
                    Some(e)
                }
            };
            // SAFETY: as above; this PE is done writing it, and it is only read from here on.
            let data = unsafe { self.buffers.force_send().local_range(0..received) };
            // The put path puts them into the sources' force buffers (on one node faster than
            // each source reading them here: pme_relay, docs/bench/PME-SCALE.md); the others
            // return them from where they lie.
            let forces = Forces { data, in_place: self.links.storage() != RedistPath::OneSidedPut };
            let first =
                return_with(&mut self.plan, &self.buffers, self.transport.as_mut(), forces, home_forces);
            return failed.map_or(first, Err);
        }
        let forces = match forces {
            Some(data) => Forces { data, in_place: false },
            None => {
                // SAFETY: nobody writes the force buffer during the return: other PEs never
                // write it, and this PE writes it only through a step's mesh, which the
                // caller's step has consumed.
                let data = unsafe { self.buffers.force_send().local_range(0..self.plan.received) };
                Forces { data, in_place: true }
            }
        };
        return_with(&mut self.plan, &self.buffers, self.transport.as_mut(), forces, home_forces)
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
    if plan.mesh_votes && plan.my_rank.is_some() {
        // The mesh's transposes carried the vote; every PME rank took part, or none did.
        match plan.mesh_agreed.take() {
            Some(agreed) => plan.take_vote(agreed),
            None => plan.note_error(plan::NO_MESH_VOTE),
        }
    }
    let unpacked = transport.backward(plan, buffers, forces, home_forces)?;
    plan.outcome()?;
    if !unpacked {
        // SAFETY: the forces for this step have all arrived (backward returned); no PE writes
        // this PE's force receive buffer before the next return.
        let arrived = unsafe { buffers.force_recv().local_range(0..n_home) };
        plan.unpack(by_rank::split(arrived, &plan.rank_counts()), home_forces);
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
/// them, in the redistribution's own buffers (empty on PEs that are not PME ranks).
pub struct Mesh<'a> {
    /// The atoms, by source PE, each source's in the order it sent them (its home order; with
    /// a relay, the order the source received them in).
    pub atoms: &'a [Particle],
    /// One force per atom, for the mesh's gather to write
    /// ([`SlabGrid::gather_into`](crate::SlabGrid::gather_into)): on the one-sided paths the
    /// PEs read them where they lie and unpack them into home order in the same pass, with no
    /// staging copy. What they hold before they are written is unspecified (left from the
    /// last step, or on an MPI relay other buffers' bytes).
    pub forces: &'a mut [RVec],
    /// This PME rank's part in the vote on the step's error, where the redistribution leaves
    /// it to the mesh ([`RedistBuilder::vote_in_mesh`]); `None` otherwise.
    pub vote: Option<MeshVote<'a>>,
}

impl<'a> Mesh<'a> {
    /// A mesh's share of atoms and their forces with no vote to carry.
    pub fn new(atoms: &'a [Particle], forces: &'a mut [RVec]) -> Mesh<'a> {
        Mesh { atoms, forces, vote: None }
    }
}

/// A PME rank's part in the vote on a step's error, carried by the mesh's forward FFT
/// transposes ([`Pme::collective_step`](crate::Pme::collective_step)): its ballot in, the
/// smallest of every PME rank's out.
#[derive(Debug)]
pub struct MeshVote<'a> {
    ballot: u64,
    agreed: &'a mut Option<u64>,
}

impl MeshVote<'_> {
    /// This rank's ballot: the smallest error marker it knows of in this step, or `u64::MAX`.
    pub fn ballot(&self) -> u64 {
        self.ballot
    }

    /// Gives the redistribution the smallest ballot of every PME rank.
    pub fn agree(self, smallest: u64) {
        *self.agreed = Some(smallest);
    }
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
        let hop = self.redist.last_hop();
        // SAFETY: other PEs write this PE's receive buffer only inside redistribute (which
        // takes &mut of the redistribution, held by this step), and on the get path nobody but
        // this PE writes it at all.
        unsafe { hop.buffers.recv().local_range(0..hop.plan.received) }
    }

    /// How many atoms this PME rank received from each of its sources in this step:
    /// `(source PE, count)`, by PE (empty elsewhere).
    pub fn received_counts(&self) -> Vec<(usize, usize)> {
        let plan = &self.redist.last_hop().plan;
        plan.sources().iter().zip(&plan.src_counts).map(|(s, &count)| (s.pe, count)).collect()
    }

    /// The atoms this PME rank received and the forces on them, for the mesh.
    pub fn mesh(&mut self) -> Mesh<'_> {
        let Redistribution { buffers, plan, .. } = self.redist.last_hop_mut();
        let received = plan.received;
        // SAFETY: as in received.
        let atoms = unsafe { buffers.recv().local_range(0..received) };
        // SAFETY: other PEs never write this PE's force buffer (the put path's returns write
        // the sources' force receive buffers: another allocation where PEs have both roles,
        // every PE doing PME or a relay's second hop, and otherwise those of PEs that hold no
        // mesh); on the one-sided paths they read it only between this PE's status and their
        // taken signals, which redistribute awaited for every return so far; on the MPI paths
        // only this PE touches it. This step's `&mut` keeps every other view of it away while
        // the slice lives, and the atoms live in another allocation (on an MPI relay another
        // bank, RELAY_BANKS), so the two views do not overlap.
        let forces = unsafe { buffers.force_send().local_range_mut(0..received) };
        let vote = (plan.mesh_votes && plan.my_rank.is_some()).then(|| {
            plan.mesh_agreed = None;
            MeshVote { ballot: plan.ballot(), agreed: &mut plan.mesh_agreed }
        });
        Mesh { atoms, forces, vote }
    }

    /// Sends the forces the mesh wrote ([`mesh`](Self::mesh)) back to the atoms' PEs, and
    /// writes this PE's home forces into `home_forces` (one per home atom, in home order).
    /// Nothing is staged on the PME rank; on the one-sided paths each PE reads its forces
    /// where they lie (with a relay on the put path, the relay puts them to its particle PEs).
    ///
    /// # Collective
    /// Every PE must call it, or [`return_forces_from`](Self::return_forces_from).
    ///
    /// # Errors
    /// [`Error::MovedTooFar`] on every PE when any PE found an atom beyond the slabs or
    /// pencils its plan lets it reach in this step, naming the same atom everywhere; that step's forces are not
    /// delivered and `home_forces` is unchanged. Rebuild the plan
    /// ([`Redistribution::collective_plan`]) and go on. [`Error::Config`] when `home_forces`
    /// is not one per home atom (on this PE only).
    pub fn return_forces(self, home_forces: &mut [RVec]) -> Result<()> {
        self.redist.collective_return(None, home_forces)
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
        self.redist.collective_return(Some(forces), home_forces)
    }
}
