//! Building a halo exchange: the choices an engine makes once ([`HaloBuilder`]: the path,
//! who makes the periodic images, when packing goes parallel), the PEs' agreement on what
//! they must share, and the allocation and first plan.

use onesided::agree::TOP;
use onesided::{Agreement, Exchange, GlobalMaxArray, Links, Path, Runtime, SymArray, Transport};

use super::agree::{report_atom, setup_hash};
use super::exchange::{GROWTH, HaloExchange, PARALLEL_MIN, Pulse};
use super::step::force_transport;
use crate::dlb::{Balancer, Dlb, RowBoard};
use crate::error::{Error, Result};
use crate::grid::DdGrid;
use crate::real::Real;
use crate::zone::PeriodicImages;

/// The choices a [`HaloExchange`] is built with, made once, before any PE has allocated
/// anything ([`HaloExchange::builder`]); the build then agrees across PEs on what they must
/// share (the grid, the box, the range, the path), so that a mismatch is an error on every
/// PE at set-up, never one discovered later by a step.
///
/// ```no_run
/// # fn main() -> md_halo::Result<()> {
/// # let rt = onesided::Runtime::init()?;
/// # let pbc = md_halo::PbcBox::rectangular([6.0, 6.0, 6.0])?;
/// # let positions = vec![[3.0f32; 3]; 10];
/// use md_halo::{DdGrid, HaloExchange, PeriodicImages};
/// use onesided::Path;
///
/// let grid = DdGrid::choose(rt.n_pes(), pbc, 1.0)?;
/// let halo = HaloExchange::builder(&rt, grid)
///     .path(Path::Mpi)
///     .periodic_images(PeriodicImages::Kernel)
///     .collective_from_global(&positions)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct HaloBuilder<'rt, R: Real = f32> {
    rt: &'rt Runtime,
    grid: DdGrid,
    path: Path,
    links: Option<Links>,
    images: PeriodicImages,
    parallel_min: usize,
    buffer: Option<f32>,
    dlb: Dlb,
    real: std::marker::PhantomData<fn() -> R>,
}

impl<'rt> HaloExchange<'rt> {
    /// Starts building a halo exchange over `grid` (one domain per PE): the one-sided path,
    /// periodic images made by the exchange, packing on the thread pool above 4096 atoms,
    /// unless the builder says otherwise. Positions and forces are `f32` unless the builder
    /// picks another real type ([`HaloBuilder::real`]).
    pub fn builder(rt: &'rt Runtime, grid: DdGrid) -> HaloBuilder<'rt> {
        HaloBuilder {
            rt,
            grid,
            path: Path::OneSided,
            links: None,
            images: PeriodicImages::Halo,
            parallel_min: PARALLEL_MIN,
            buffer: None,
            dlb: Dlb::No,
            real: std::marker::PhantomData,
        }
    }
}

impl<'rt, R: Real> HaloBuilder<'rt, R> {
    /// The real type of the positions and forces the exchange holds and sends: `f32` (the
    /// default) or `f64`, for an engine that keeps its state in double precision; the
    /// exchange then works on the engine's `f64` arrays with no copy, and sends twice the
    /// bytes. Part of what the PEs agree on at the build.
    pub fn real<S: Real>(self) -> HaloBuilder<'rt, S> {
        let HaloBuilder { rt, grid, path, links, images, parallel_min, buffer, dlb, .. } = self;
        HaloBuilder {
            rt,
            grid,
            path,
            links,
            images,
            parallel_min,
            buffer,
            dlb,
            real: std::marker::PhantomData,
        }
    }

    /// The communication path: [`Path::OneSided`] (the default: the coordinates by the
    /// one-sided offset swap, the forces back as pulls), [`Path::Mpi`] (two-sided), or
    /// [`Path::Auto`] (per neighbour, the transport of its link,
    /// [`Runtime::collective_links`]: one-sided where the link takes the put or the get
    /// transport, MPI where it takes MPI, per size of message where the links say so).
    pub fn path(self, path: Path) -> Self {
        HaloBuilder { path, links: None, ..self }
    }

    /// The transport to each class of neighbour given, per size of message where `links`
    /// says so, rather than the runtime's: for benchmarks and tests of one transport (the
    /// halo's path is then [`Path::Auto`]). Where a link takes the get transport the
    /// coordinates go by the put.
    pub fn links(self, links: Links) -> Self {
        HaloBuilder { path: Path::Auto, links: Some(links), ..self }
    }

    /// Who makes the periodic images along the dimensions of the grid with one domain
    /// ([`PeriodicImages::Halo`] by default). Local to each PE: nothing any PE sends depends
    /// on it.
    pub fn periodic_images(self, images: PeriodicImages) -> Self {
        HaloBuilder { images, ..self }
    }

    /// Below how many atoms a pulse's packing and unpacking stay on the calling thread
    /// (default 4096: handing less work to the thread pool costs more than it saves).
    pub fn parallel_min(self, atoms: usize) -> Self {
        HaloBuilder { parallel_min: atoms, ..self }
    }

    /// The Verlet buffer: the part of the grid's range beyond the interaction cutoff, in nm
    /// (see [`verlet_buffer`](crate::verlet_buffer) for a rule). With it set, every
    /// [`collective_repartition`](HaloExchange::collective_repartition) checks that no atom
    /// moved more than half the buffer since the last one, and fails on every PE when one
    /// did ([`Error::BufferExceeded`]): beyond that, a pair may have come within the cutoff
    /// unseen by the halo. The check is one pass over the home atoms per repartition, from
    /// their positions when the plan was built; the largest displacement travels in the
    /// reduction the repartition makes anyway. Part of what the PEs agree on at the build.
    pub fn verlet_buffer(self, buffer: f32) -> Self {
        HaloBuilder { buffer: Some(buffer), ..self }
    }

    /// Dynamic load balancing ([`Dlb::No`] by default): whether the domain boundaries follow
    /// each PE's force time at [`collective_repartition`](HaloExchange::collective_repartition),
    /// as GROMACS's `-dlb` (see [`Dlb`] and [`HaloExchange::collective_load_report`]). Part
    /// of what the PEs agree on at the build.
    pub fn load_balancing(self, dlb: Dlb) -> Self {
        HaloBuilder { dlb, ..self }
    }

    /// Partitions a whole system, given as the positions of all atoms in global index order
    /// (the same on every PE), over the grid: each PE keeps the atoms whose home is its
    /// domain, in global order, and builds the plan.
    ///
    /// # Collective
    /// Every PE must call it with the same positions, and a builder of the same grid and path.
    ///
    /// # Errors
    /// On every PE: [`Error::CollectiveConfig`] when the PEs pass different numbers of atoms, different
    /// grids or paths, the grid does not match the job, or the path cannot serve a halo
    /// exchange; [`Error::NotFinite`] naming an atom whose position is not finite.
    pub fn collective_from_global(self, positions: &[[R; 3]]) -> Result<HaloExchange<'rt, R>> {
        let (rt, grid) = (self.rt, &self.grid);
        let n = positions.len() as u64;
        let mut agreement = Agreement::new();
        let count = agreement.extent(n);
        let (least, most) = agreement.collective_run(rt)?.get(count);
        if least != most {
            return Err(Error::CollectiveConfig(format!(
                "the PEs pass between {least} and {most} atoms to collective_from_global: every PE must \
                 pass the whole system"
            )));
        }
        if n > u32::MAX as u64 {
            return Err(Error::CollectiveConfig(format!(
                "{n} atoms exceed the {} a global index can name",
                u32::MAX
            )));
        }
        // Agreed, so that a PE given other positions than the rest cannot leave them waiting.
        let me = rt.my_pe();
        let broken = positions.iter().position(|x| x.iter().any(|c| !c.is_finite()));
        if let Some((atom, _, _)) = report_atom(rt, broken.map(|atom| (atom as u32, me)))? {
            return Err(Error::NotFinite { atom, pe: None });
        }
        let pbc = *grid.pbc();
        let home: Vec<(u32, [R; 3])> = positions
            .iter()
            .enumerate()
            .filter_map(|(g, &x)| {
                let (w, s) = pbc.put_in_box_real(x);
                (grid.pe_of(grid.cell_of_fraction(s)) == me).then_some((g as u32, w))
            })
            .collect();
        self.collective_setup(home)
    }

    /// Builds the exchange from each PE's own home atoms: their positions and global
    /// indices, in the engine's order, which the home atoms keep until the first
    /// repartition. Every atom must lie in this PE's domain ([`DdGrid::pe_of_position`]);
    /// positions are put into the box ([`PbcBox::put_in_box`](crate::PbcBox::put_in_box)).
    ///
    /// # Collective
    /// Every PE must call it, with a builder of the same grid and path.
    ///
    /// # Errors
    /// On every PE: [`Error::CollectiveConfig`] when a PE passes positions and indices of different
    /// lengths, or the PEs pass different grids or paths, or the grid or path do not fit;
    /// [`Error::NotFinite`] or [`Error::NotHome`] naming an atom whose position is not finite
    /// or lies outside its PE's domain.
    pub fn collective_build(
        self,
        home_positions: &[[R; 3]],
        home_globals: &[u32],
    ) -> Result<HaloExchange<'rt, R>> {
        let (rt, grid) = (self.rt, &self.grid);
        let me = rt.my_pe();
        let mut agreement = Agreement::new();
        let mismatched = agreement.lowest_pe(home_positions.len() != home_globals.len());
        if let Some(pe) = agreement.collective_run(rt)?.get(mismatched) {
            return Err(Error::CollectiveConfig(format!(
                "PE {pe} passes home positions and global indices of different lengths to collective_build"
            )));
        }
        let broken = home_globals.iter().zip(home_positions).find(|(_, x)| x.iter().any(|c| !c.is_finite()));
        if let Some((atom, pe, _)) = report_atom(rt, broken.map(|(&g, _)| (g, me)))? {
            return Err(Error::NotFinite { atom, pe: Some(pe) });
        }
        let pbc = *grid.pbc();
        let mut stray = None;
        let mut home = Vec::with_capacity(home_positions.len());
        for (&g, &x) in home_globals.iter().zip(home_positions) {
            let (w, s) = pbc.put_in_box_real(x);
            let pe = grid.pe_of(grid.cell_of_fraction(s));
            if pe != me && stray.is_none() {
                stray = Some((g, pe));
            }
            home.push((g, w));
        }
        if let Some((atom, pe, belongs)) = report_atom(rt, stray)? {
            return Err(Error::NotHome {
                atom,
                pe,
                domain: grid.cell_of(pe),
                belongs: grid.cell_of(belongs),
            });
        }
        self.collective_setup(home)
    }

    /// Allocates everything and builds the plan for `home` (positions put into the box).
    fn collective_setup(self, home: Vec<(u32, [R; 3])>) -> Result<HaloExchange<'rt, R>> {
        let HaloBuilder { rt, grid, path, links, images, parallel_min, buffer, dlb, .. } = self;
        // The checks below are then the same on every PE. A grid of the rows near one domain
        // differs from PE to PE by design: all such grids hash alike here, and are refused.
        let hash = if grid.near().is_some() {
            TOP
        } else {
            setup_hash(&grid, path, buffer, std::mem::size_of::<R>(), dlb)
        };
        let mut agreement = Agreement::new();
        let hashes = agreement.extent(hash);
        let (least, most) = agreement.collective_run(rt)?.get(hashes);
        if least == TOP && grid.near().is_some() {
            return Err(Error::CollectiveConfig(
                "the grid holds only the rows of boundaries near each PE's domain, as a balanced \
                 exchange's grid does (DdGrid::near): build from the whole grid, which \
                 HaloExchange::collective_whole_grid gathers"
                    .to_string(),
            ));
        }
        if least != most {
            return Err(Error::CollectiveConfig(
                "the PEs pass different grids, boxes, ranges, paths, Verlet buffers, real types or \
                 load balancing: every PE must build the halo exchange with the same ones"
                    .to_string(),
            ));
        }
        if grid.len() != rt.n_pes() {
            return Err(Error::CollectiveConfig(format!(
                "the grid has {} domains but the job has {} PEs",
                grid.len(),
                rt.n_pes()
            )));
        }
        if let Some(b) = buffer.filter(|&b| !(b.is_finite() && b > 0.0 && b <= grid.range())) {
            return Err(Error::CollectiveConfig(format!(
                "a Verlet buffer of {b} nm: it must be positive and part of the grid's range of {} nm \
                 (the cutoff plus the buffer)",
                grid.range()
            )));
        }
        // The coordinates go by the one-sided put on a one-sided link, the forces come back
        // by the pull; MPI links stay MPI.
        // Per size of message where the links' paths differ with it: each pulse takes those
        // of its messages at every plan.
        // (The get transport stages every message in buffers sized ahead, which the halo's
        // messages, changing size at every repartition, would have to follow.)
        let coordinate_links = match (Transport::of(path), links) {
            (Some(transport), _) => Links::uniform(transport),
            (None, Some(links)) => links,
            (None, None) => rt.collective_links()?,
        }
        .map(|t| if t == Transport::Get { Transport::Put } else { t });
        let force_links = coordinate_links.map(force_transport);
        // The counts and per-atom fields go at repartitions alone, by the links of no size.
        let plain_links = coordinate_links.plain();
        let cell = grid.cell_of(rt.my_pe());
        let name = |what: &str| format!("halo {}: {what}", path.name());
        let coords = GlobalMaxArray::collective_alloc(rt, &name("coordinates"), home.len(), GROWTH)?;
        // The face neighbours (this PE itself along a dimension of one domain): every PE this
        // one exchanges with, so the exchanges' memory grows with them, not with the job.
        let neighbours: Vec<usize> =
            (0..3).flat_map(|d| [false, true].map(|up| grid.pe_of(grid.neighbour(cell, d, up)))).collect();
        let mut pulses = Vec::new();
        let dims = grid.dims();
        for dim in grid.exchange_order() {
            for pulse in 0..grid.pulses()[dim] {
                let to = grid.pe_of(grid.neighbour(cell, dim, false));
                let from = grid.pe_of(grid.neighbour(cell, dim, true));
                let sends_shifted = cell[dim] == 0;
                let shift = if sends_shifted { grid.pbc().vector_real(dim) } else { [R::ZERO; 3] };
                let label = |what: &str| name(&format!("{what} {} pulse {pulse}", ["x", "y", "z"][dim]));
                pulses.push(Pulse {
                    dim,
                    to,
                    from,
                    send: Vec::new(),
                    shift,
                    sends_shifted,
                    receives_shifted: cell[dim] + 1 == dims[dim],
                    offset: 0,
                    count: 0,
                    x: Exchange::builder(rt, &label("coordinates"))
                        .links(coordinate_links.clone())
                        .partners(&[to, from])
                        .collective_build()?,
                    f: Exchange::builder(rt, &label("forces"))
                        .links(force_links.clone())
                        .partners(&[to, from])
                        .collective_build()?,
                });
            }
        }
        // The exchange order puts the dimensions of one domain, where a PE is its own
        // neighbour, last.
        let exchanged_pulses = pulses.iter().take_while(|p| p.to != rt.my_pe()).count();
        debug_assert!(pulses[exchanged_pulses..].iter().all(|p| p.to == rt.my_pe()));
        let board = if dlb != Dlb::No && grid.staggers() {
            Some(RowBoard::collective_new(rt, &name("load balancing"), &grid)?)
        } else {
            None
        };
        let mut halo = HaloExchange {
            rt,
            grid,
            cell,
            path,
            coords,
            parallel_min,
            ids: Vec::new(),
            reference: Vec::new(),
            zones: Vec::new(),
            n_home: 0,
            n_local: 0,
            pulses,
            force_scratch: GlobalMaxArray::collective_alloc(rt, &name("force scratch"), 0, GROWTH)?,
            forces: GlobalMaxArray::collective_alloc(rt, &name("forces"), 0, GROWTH)?,
            counts: Exchange::builder(rt, &name("counts"))
                .links(plain_links.clone())
                .partners(&neighbours)
                .collective_build()?,
            count_buffer: SymArray::collective_alloc(rt, &name("count buffer"), 2)?,
            bytes: Exchange::builder(rt, &name("per-atom fields"))
                .links(plain_links)
                .partners(&neighbours)
                .collective_build()?,
            byte_buffer: GlobalMaxArray::collective_alloc(rt, &name("per-atom field buffer"), 0, GROWTH)?,
            images,
            image_table: Vec::new(),
            exchanged_pulses,
            schedule: Default::default(),
            failed: false,
            anchors: Vec::new(),
            displacement_limit: buffer.map(|b| b / 2.0),
            balancer: Balancer::new(dlb),
            board,
        };
        halo.set_home(home.iter().map(|h| h.0), home.iter().map(|h| h.1))?;
        halo.collective_build_plan()?;
        Ok(halo)
    }
}
