//! The redistribution's builder: its path or links, the displacement margin, the routing (direct,
//! or through a relay), agreed by every PE before anything is allocated; and the hops it builds.

use std::rc::Rc;

use onesided::{Collectives, Links, Path, Runtime};

use super::agreement::Agreement;
use super::buffers::Buffers;
#[cfg(feature = "baselines")]
use super::neighbor;
#[cfg(feature = "baselines")]
use super::path::RedistBaseline;
use super::path::{Choice, Wire, Wires, collective_auto};
use super::plan::{Pairs, Plan, Stage, agree_home};
use super::protocol::Protocol;
use super::redistribution::{Onward, Redistribution};
use super::store::{Bank, RELAY_BANKS, Role};
use super::{get, mixed, mpi, put};
use crate::error::{Error, Result};
use crate::grid::PmeGrid;
use crate::model::Margin;
use crate::particle::Particle;

/// The choices a [`Redistribution`] is built with ([`Redistribution::builder`]).
#[derive(Clone, Debug)]
pub struct RedistBuilder<'rt> {
    rt: &'rt Runtime,
    grid: PmeGrid,
    choice: Choice,
    margin: Margin,
    routing: Routing,
}

/// Whether a particle PE sends to the PME ranks directly or through its relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routing {
    Direct,
    /// This PE's relay PME rank (`None` on PME-only PEs).
    Relay(Option<usize>),
}

impl<'rt> Redistribution<'rt> {
    /// Starts building a redistribution over `grid`'s PME ranks, on [`Path::OneSided`]
    /// unless the builder says otherwise.
    pub fn builder(rt: &'rt Runtime, grid: PmeGrid) -> RedistBuilder<'rt> {
        RedistBuilder {
            rt,
            grid,
            choice: Choice::Path(Path::OneSided),
            margin: Margin::Slab,
            routing: Routing::Direct,
        }
    }
}

impl<'rt> RedistBuilder<'rt> {
    /// The path: [`Path::OneSided`] (the default: senders put where the PME ranks announced),
    /// [`Path::Mpi`] (point to point between partners: `Isend`, `Mprobe`, `Mrecv`), or
    /// [`Path::Auto`] (per class of link, the transport the job's links took,
    /// [`Runtime::collective_links`]; [`Redistribution::links`] says which).
    pub fn path(self, path: Path) -> Self {
        RedistBuilder { choice: Choice::Path(path), ..self }
    }

    /// A transport per class of link: each pair of PEs on one node takes `links.same_node`,
    /// each pair across nodes `links.other_node`, of [`Transport::Put`](onesided::Transport::Put),
    /// [`Get`](onesided::Transport::Get) (receivers get from the senders' buffers) and
    /// [`Mpi`](onesided::Transport::Mpi). The classes may differ where one takes MPI and the
    /// other a one-sided transport; [`collective_build`](Self::collective_build) refuses
    /// other mixes. The transports of no stated size serve every message (a step's messages
    /// are of every size at once).
    pub fn links(self, links: Links) -> Self {
        RedistBuilder { choice: Choice::Links(links), ..self }
    }

    /// One of MPI's collective baselines for every pair, for benchmarks against the paths
    /// (with the `baselines` feature).
    #[cfg(feature = "baselines")]
    pub fn baseline(self, baseline: RedistBaseline) -> Self {
        RedistBuilder { choice: Choice::Baseline(baseline), ..self }
    }

    /// How far an atom may move, in nm in any direction, between two plans: each particle PE
    /// then sends only to the PME ranks its atoms can reach within that distance, and the
    /// buffers hold only what can reach each PME rank (about the PE's share when the margin
    /// is small against a slab or pencil). An atom that moves further and leaves the slabs or
    /// pencils it could reach is reported on every PE ([`Error::MovedTooFar`]). Without it,
    /// an atom may reach the slab either side of its own (with pencils, the row and column
    /// either side).
    ///
    /// The margin is one atom's displacement. An engine that plans at each repartition and
    /// sets md-halo's `HaloBuilder::verlet_buffer` passes **half** the Verlet buffer: the
    /// buffer covers two atoms approaching each other, and the halo's check allows each atom
    /// half of it between repartitions. The halo checks at the repartition and this margin
    /// every step, so an atom that wanders past half the buffer and back within an interval
    /// is reported here and not there. Planning less often than repartitioning, pass what one atom moves between two
    /// plans (the buffer's rule, `md_halo::verlet_buffer`, over the longer interval, halved).
    ///
    /// Every PE must pass the same margin.
    pub fn displacement_margin(self, nm: f32) -> Self {
        RedistBuilder { margin: Margin::Distance(nm), ..self }
    }

    /// Relays the atoms, as GROMACS does with separate PME ranks: each particle PE sends all
    /// its atoms, every step, to one PME rank (its relay, `relay_of(pe)` for particle PE
    /// `pe`), which passes each on to its own PME rank (a second redistribution, among the
    /// PME ranks, with the displacement margin, in two stages on pencils of two rows and two
    /// columns or more: along y, then along x; the forces come back the same way). A
    /// particle PE then sends one message each way per step whatever the decomposition, and
    /// a PME rank hears from the particle PEs it relays for and from the PME ranks near it.
    /// The price is that the atoms outside their relay's slab or pencil travel two hops, on
    /// pencils up to three (`examples/scale_model.rs` tabulates both routings at scale).
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
    /// the grid's PME ranks and builds the plan (its buffers follow the plan's bounds, never
    /// more than the system).
    ///
    /// When every PE is a PME rank, every PE also holds atoms; otherwise the PEs that are not
    /// PME ranks hold them and the PME ranks receive (with a relay, they also pass the atoms
    /// on among themselves).
    ///
    /// # Collective
    /// Every PE must call it, with a builder of the same grid, path and routing.
    ///
    /// # Errors
    /// On every PE: [`Error::Config`] when the PME ranks do not fit the job, a PME-only PE is
    /// given home atoms, a relay is asked for with PME on every PE, or the links name a
    /// transport the redistribution has not or mix two it cannot ([`links`](Self::links));
    /// [`Error::CollectiveConfig`] when the PEs were given different paths, when some PEs
    /// relay and some do not, or a particle PE names a relay outside the grid; [`Error::Comm`]
    /// when the symmetric heap cannot hold the buffers.
    pub fn collective_build(self, home: &[Particle]) -> Result<Redistribution<'rt>> {
        let RedistBuilder { rt, grid, choice, margin, routing } = self;
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
        let fixed = choice.fixed();
        // The largest code and the smallest (as CODES less the largest of CODES less each).
        const INVALID: u64 = 64;
        const CODES: u64 = 128;
        let code = fixed.as_ref().map_or(INVALID, |wires| choice.code(*wires));
        let mut agreed = [code, CODES - code];
        rt.max_u64(&mut agreed)?;
        let fixed = fixed?;
        if agreed[0] == INVALID {
            return Err(Error::Config(format!(
                "another PE was given redistribution links one redistribution cannot take (this PE: {choice})"
            )));
        }
        if agreed[0] != CODES - agreed[1] {
            return Err(Error::CollectiveConfig(format!(
                "the PEs were given different redistribution paths (this PE: {choice}): every PE must \
                 build its redistribution with the same path or links"
            )));
        }
        let links = match fixed {
            Some(wires) => wires,
            None => collective_auto(rt)?,
        };
        let hop = Hop { rt, grid: &grid, links, margin };
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
    links: Wires,
    margin: Margin,
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
    pub(super) fn collective_build(
        &self,
        home: &[Particle],
        particle: bool,
        both: bool,
        relay: Option<usize>,
        votes: bool,
        (stage, banks): (Stage, Option<[&Rc<Bank>; 4]>),
    ) -> Result<Redistribution<'rt>> {
        let Hop { rt, grid, links, margin } = *self;
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
        let transport: Box<dyn Protocol<'rt> + 'rt> = match links.same_node {
            _ if !links.is_uniform() => Box::new(mixed::Mixed::collective_new(rt, &name, m, my_rank, links)?),
            Wire::Get => Box::new(get::Get::collective_new(rt, &name, m, all)?),
            Wire::Put => Box::new(put::Put::collective_new(rt, &name, m, all)?),
            Wire::Mpi => Box::new(mpi::Mpi::collective_new(rt, my_rank, false, all)?),
            #[cfg(feature = "baselines")]
            Wire::MpiAlltoallv => Box::new(mpi::Mpi::collective_new(rt, my_rank, true, all)?),
            #[cfg(feature = "baselines")]
            Wire::MpiNeighbor => Box::new(neighbor::Neighbor::collective_new(rt, my_rank)?),
        };
        let own_home = if particle { home.len() } else { 0 };
        let buffers =
            Buffers::collective_new(rt, &name, links.storage(), (own_home, most_home), both, banks)?;
        let agreement = Agreement::collective_new(rt, &name)?;
        let mut plan = Plan::new(rt, grid.clone(), particle, margin, relay, votes);
        plan.stage = stage;
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
