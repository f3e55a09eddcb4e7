//! The halo exchange: a plan built at (re)partition, and `move_x` / `move_f` every step.
//!
//! GROMACS's scheme with the half-shell convention: dimension by dimension (x, then y, then
//! z), each domain receives from its neighbour above the atoms within the halo range beyond
//! its upper face, and sends to its neighbour below the atoms within that range above its own
//! lower face. Atoms received in earlier dimensions are forwarded in later ones, which covers
//! edges and corners; when the range exceeds a domain's width, further pulses forward the
//! atoms received in the previous pulse, one domain further each time. An atom sent across
//! the periodic boundary (from the first domain of a dimension to the last) is shifted by the
//! box length there. Received atoms land in place, behind the home atoms, in one symmetric
//! coordinate array.
//!
//! Every transfer is an [`Exchange`] on the chosen [`Path`]: the one-sided offset swap or MPI
//! two-sided. The plan (who sends which atoms to whom, and where they land) is built once per
//! partition; `move_x` then sends coordinates along it and `move_f` sends the forces on halo
//! atoms back the same way in reverse, where their owners add them up.

use onesided::{Exchange, GlobalMaxArray, GrowthPolicy, Incoming, Outgoing, Path, Runtime, SymArray};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::grid::DdGrid;
use crate::system::{RVec, System, wrap};

/// An atom moving to another domain at repartition.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C)]
struct Migrant {
    global: u32,
    x: RVec,
}

/// One pulse of the plan: along `dim`, send to the neighbour below, receive from the one above.
struct Pulse<'rt> {
    dim: usize,
    /// The PE below (receives what this PE sends).
    to: usize,
    /// The PE above (sends what this PE receives).
    from: usize,
    /// Local indices of the atoms this PE sends, in order.
    send: Vec<u32>,
    /// Added to coordinate `dim` of sent atoms: the box length when this PE is the first
    /// domain along `dim` (the atoms cross the periodic boundary), else 0.
    shift: f32,
    /// Where the received atoms land in the local arrays.
    offset: usize,
    /// How many atoms this PE receives.
    count: usize,
    x: Exchange<'rt, RVec>,
    f: Exchange<'rt, RVec>,
}

/// A domain's atoms and the plan that keeps their halo up to date.
pub struct HaloExchange<'rt> {
    rt: &'rt Runtime,
    grid: DdGrid,
    cell: [usize; 3],
    path: Path,
    /// Home atoms, then halo atoms: current positions (home positions are not wrapped between
    /// repartitions, so that the plan's periodic shifts stay valid).
    coords: GlobalMaxArray<'rt, RVec>,
    /// Below this many atoms, packing and unpacking run on the calling thread.
    parallel_min: usize,
    /// Global indices of the local atoms, in the same order.
    ids: GlobalMaxArray<'rt, u32>,
    /// Positions of the local atoms when the plan was built, which decide pair ownership.
    reference: Vec<RVec>,
    n_home: usize,
    n_local: usize,
    pulses: Vec<Pulse<'rt>>,
    force_scratch: GlobalMaxArray<'rt, RVec>,
    counts: Exchange<'rt, u64>,
    count_buffer: SymArray<'rt, u64>,
    id_exchange: Exchange<'rt, u32>,
    migration: Exchange<'rt, Migrant>,
    migrants: GlobalMaxArray<'rt, Migrant>,
}

/// Below this many atoms, packing and unpacking run on the calling thread: handing a few
/// microseconds of work to the thread pool costs more than it saves.
const PARALLEL_MIN: usize = 4096;

/// Buffers grow by a fifth beyond the largest need, and keep checking every repartition.
const GROWTH: GrowthPolicy = GrowthPolicy { over_allocation: 1.2, freeze_after: None };

/// A raw pointer that threads of a scoped parallel loop write through at distinct indices.
#[derive(Clone, Copy)]
struct Scatter(*mut RVec);
impl Scatter {
    /// The address of element `i` (a method, so that closures capture the whole wrapper).
    fn at(self, i: usize) -> *mut RVec {
        self.0.wrapping_add(i)
    }
}

// SAFETY: used only by `scatter_add`, whose callers guarantee distinct indices, so no two
// threads touch the same element.
unsafe impl Send for Scatter {}
// SAFETY: as above.
unsafe impl Sync for Scatter {}

impl<'rt> HaloExchange<'rt> {
    /// Partitions `system` over the grid (each PE keeps the atoms in its domain) and builds
    /// the plan.
    ///
    /// # Collective
    /// Every PE must call it with the same system, grid and path.
    pub fn collective_new(rt: &'rt Runtime, system: &System, grid: DdGrid, path: Path) -> Result<Self> {
        if grid.len() != rt.n_pes() {
            return Err(Error::Config(format!(
                "the grid has {} domains but the job has {} PEs",
                grid.len(),
                rt.n_pes()
            )));
        }
        if path.needs_reserve() {
            return Err(Error::Config(format!(
                "the halo exchange runs on the onesided-put or the MPI path, not {path}: its \
                 messages change size with every repartition, which the staging buffers of {path} \
                 would have to follow"
            )));
        }
        let cell = grid.cell_of(rt.my_pe());
        let home: Vec<(u32, RVec)> = system
            .positions
            .iter()
            .enumerate()
            .filter(|(_, x)| grid.cell_of_position(**x) == cell)
            .map(|(g, x)| (g as u32, *x))
            .collect();
        let name = |what: &str| format!("halo {}: {what}", path.name());
        let coords = GlobalMaxArray::collective_alloc(rt, &name("coordinates"), home.len(), GROWTH)?;
        let ids = GlobalMaxArray::collective_alloc(rt, &name("global indices"), home.len(), GROWTH)?;
        let mut pulses = Vec::new();
        for dim in 0..3 {
            for pulse in 0..grid.pulses()[dim] {
                let to = grid.pe_of(grid.neighbour(cell, dim, false));
                let from = grid.pe_of(grid.neighbour(cell, dim, true));
                let shift = if cell[dim] == 0 { grid.box_size()[dim] } else { 0.0 };
                let label = |what: &str| name(&format!("{what} {} pulse {pulse}", ["x", "y", "z"][dim]));
                pulses.push(Pulse {
                    dim,
                    to,
                    from,
                    send: Vec::new(),
                    shift,
                    offset: 0,
                    count: 0,
                    x: Exchange::collective_new(rt, &label("coordinates"), path)?,
                    f: Exchange::collective_new(rt, &label("forces"), path)?,
                });
            }
        }
        let mut halo = HaloExchange {
            rt,
            grid,
            cell,
            path,
            coords,
            parallel_min: PARALLEL_MIN,
            ids,
            reference: Vec::new(),
            n_home: 0,
            n_local: 0,
            pulses,
            force_scratch: GlobalMaxArray::collective_alloc(rt, &name("force scratch"), 0, GROWTH)?,
            counts: Exchange::collective_new(rt, &name("counts"), path)?,
            count_buffer: SymArray::collective_alloc(rt, &name("count buffer"), 2)?,
            id_exchange: Exchange::collective_new(rt, &name("indices"), path)?,
            migration: Exchange::collective_new(rt, &name("migration"), path)?,
            migrants: GlobalMaxArray::collective_alloc(rt, &name("migrants"), 0, GROWTH)?,
        };
        halo.set_home(&home)?;
        halo.collective_build_plan()?;
        Ok(halo)
    }

    /// Sets below how many atoms a pulse's packing and unpacking stay on the calling thread
    /// (default 4096: handing less work to the thread pool costs more than it saves).
    pub fn set_parallel_min(&mut self, atoms: usize) {
        self.parallel_min = atoms;
    }

    /// The grid.
    pub fn grid(&self) -> &DdGrid {
        &self.grid
    }

    /// This PE's domain.
    pub fn cell(&self) -> [usize; 3] {
        self.cell
    }

    /// The communication path.
    pub fn path(&self) -> Path {
        self.path
    }

    /// The number of home atoms.
    pub fn home_count(&self) -> usize {
        self.n_home
    }

    /// The number of local atoms: home and halo.
    pub fn local_count(&self) -> usize {
        self.n_local
    }

    /// Pulses per dimension.
    pub fn pulses(&self) -> [usize; 3] {
        self.grid.pulses()
    }

    /// Elements this PE sends per step, over all pulses.
    pub fn send_count(&self) -> usize {
        self.pulses.iter().map(|p| p.send.len()).sum()
    }

    /// Current positions of the local atoms, home first, then halo in plan order. Valid until
    /// the next call that takes `&mut self`.
    pub fn coordinates(&self) -> &[RVec] {
        // SAFETY: other PEs write this array only inside exchanges this PE takes part in (its
        // announcements open its receive regions, and they happen in move_x, the plan build
        // and repartition, which take &mut self); `&self` excludes those while the slice lives.
        unsafe { &self.coords.array().local_slice()[..self.n_local] }
    }

    /// Global indices of the local atoms, in the order of [`coordinates`](Self::coordinates).
    pub fn global_indices(&self) -> &[u32] {
        // SAFETY: as for coordinates.
        unsafe { &self.ids.array().local_slice()[..self.n_local] }
    }

    /// Positions of the local atoms when the plan was built; they decide which domain computes
    /// a pair, so that every pair within the cutoff is computed exactly once.
    pub fn reference_positions(&self) -> &[RVec] {
        &self.reference
    }

    /// The home box `[lower, upper)`; the owner of a pair is the domain whose home box holds
    /// the corner of the pair's reference positions.
    pub fn home_box(&self) -> (RVec, RVec) {
        (self.grid.lower(self.cell), self.grid.upper(self.cell))
    }

    /// Moves every home atom: `x ← f(global index, x)`, without wrapping.
    pub fn displace_home(&mut self, f: impl Fn(u32, RVec) -> RVec + Sync) -> Result<()> {
        let (ids, coords) = (self.home_ids(), self.home_positions());
        let moved: Vec<RVec> = ids.par_iter().zip(coords.par_iter()).map(|(&g, &x)| f(g, x)).collect();
        self.coords.array().write_local(0, &moved)?;
        Ok(())
    }

    fn home_ids(&self) -> Vec<u32> {
        self.global_indices()[..self.n_home].to_vec()
    }

    fn home_positions(&self) -> Vec<RVec> {
        self.coordinates()[..self.n_home].to_vec()
    }

    /// Sends the coordinates of this PE's halo atoms to the domains that need them and
    /// receives its own halo, in place, with periodic shifts applied.
    pub fn move_x(&mut self) -> Result<()> {
        for q in 0..self.pulses.len() {
            self.move_x_pulse(q)?;
        }
        Ok(())
    }

    /// Sends the forces on this PE's halo atoms back to their home domains, pulse by pulse in
    /// reverse, and adds the forces it receives to the atoms it had sent. Afterwards the home
    /// part of `forces` holds the total force on each home atom.
    pub fn move_f(&mut self, forces: &mut [RVec]) -> Result<()> {
        if forces.len() != self.n_local {
            return Err(Error::Config(format!(
                "move_f needs one force per local atom ({}), got {}",
                self.n_local,
                forces.len()
            )));
        }
        let me = self.rt.my_pe();
        for q in (0..self.pulses.len()).rev() {
            let pulse = &mut self.pulses[q];
            if pulse.to == me {
                // The periodic image along a dimension with one domain: the forces on the
                // images are added to their atoms here, with no message. Every sent atom lies
                // before this pulse's region (send lists are built from earlier atoms).
                let (atoms, images) = forces.split_at_mut(pulse.offset);
                scatter_add(atoms, &pulse.send, &images[..pulse.count], self.parallel_min);
                continue;
            }
            let incoming = Incoming { from: pulse.to, buffer: 0, offset: 0, room: pulse.send.len() };
            let outgoing =
                Outgoing { to: pulse.from, data: &forces[pulse.offset..pulse.offset + pulse.count] };
            let received = pulse.f.sendrecv(&[self.force_scratch.array()], outgoing, incoming)?;
            check_count(received, pulse.send.len(), pulse.to, "forces")?;
            // SAFETY: the scratch region was filled by this pulse's exchange, which has
            // completed; no PE writes it again before this PE's next exchange.
            let returned = unsafe { &self.force_scratch.array().local_slice()[..received] };
            scatter_add(forces, &pulse.send, returned, self.parallel_min);
        }
        Ok(())
    }

    /// Wraps home positions into the box, moves atoms that left this domain to their new home
    /// and rebuilds the plan.
    ///
    /// # Collective
    /// Every PE must call it.
    ///
    /// # Errors
    /// [`Error::MovedTooFar`] on every PE when some atom moved more than one domain along a
    /// dimension since the last repartition.
    pub fn collective_repartition(&mut self) -> Result<()> {
        let box_size = self.grid.box_size();
        let mut home: Vec<Migrant> = self
            .home_ids()
            .into_iter()
            .zip(self.home_positions())
            .map(|(global, x)| Migrant { global, x: wrap(x, box_size) })
            .collect();
        let too_far = home.iter().find(|m| {
            let to = self.grid.cell_of_position(m.x);
            (0..3).any(|d| self.grid.steps(self.cell, to, d) > 1)
        });
        // One value names the atom and its PE, so that every PE reports the same pair.
        let flag = too_far.map_or(0, |m| (m.global as u64 + 1) << PE_BITS | self.rt.my_pe() as u64);
        let flag = self.rt.max_u64_one(flag)?;
        if flag > 0 {
            let atom = (flag >> PE_BITS) as usize - 1;
            let pe = (flag & ((1 << PE_BITS) - 1)) as usize;
            // Its new domain, from the PE that found it (an error path: one more reduction).
            let to = match too_far {
                Some(m) if pe == self.rt.my_pe() => {
                    self.grid.pe_of(self.grid.cell_of_position(m.x)) as u64 + 1
                }
                _ => 0,
            };
            let to = self.rt.max_u64_one(to)? as usize - 1;
            return Err(Error::MovedTooFar { atom, from: self.grid.cell_of(pe), to: self.grid.cell_of(to) });
        }
        for dim in 0..3 {
            if self.grid.dims()[dim] == 1 {
                continue;
            }
            home = self.collective_migrate(dim, home)?;
        }
        home.sort_unstable_by_key(|m| m.global);
        let home: Vec<(u32, RVec)> = home.into_iter().map(|m| (m.global, m.x)).collect();
        self.set_home(&home)?;
        self.collective_build_plan()
    }

    /// Sends the atoms whose new domain lies below or above along `dim` to those neighbours
    /// and takes in what they send.
    fn collective_migrate(&mut self, dim: usize, home: Vec<Migrant>) -> Result<Vec<Migrant>> {
        let (down, up) =
            (self.grid.neighbour(self.cell, dim, false), self.grid.neighbour(self.cell, dim, true));
        let (mut stay, mut to_down, mut to_up) = (Vec::new(), Vec::new(), Vec::new());
        for m in home {
            let target = self.grid.cell_of_position(m.x)[dim];
            if target == self.cell[dim] {
                stay.push(m);
            } else if target == down[dim] {
                to_down.push(m);
            } else {
                to_up.push(m);
            }
        }
        let (down, up) = (self.grid.pe_of(down), self.grid.pe_of(up));
        let counts = self.exchange_counts([(down, to_down.len()), (up, to_up.len())], [up, down])?;
        self.migrants.collective_ensure(counts[0] + counts[1])?;
        let mut received = [0; 2];
        self.migration.exchange(
            &[self.migrants.array()],
            &[Outgoing { to: down, data: &to_down }, Outgoing { to: up, data: &to_up }],
            &[
                Incoming { from: up, buffer: 0, offset: 0, room: counts[0] },
                Incoming { from: down, buffer: 0, offset: counts[0], room: counts[1] },
            ],
            &mut received,
        )?;
        check_count(received[0], counts[0], up, "migrating atoms")?;
        check_count(received[1], counts[1], down, "migrating atoms")?;
        let mut arrived = vec![Migrant { global: 0, x: [0.0; 3] }; counts[0] + counts[1]];
        self.migrants.array().read_local(0, &mut arrived)?;
        stay.extend(arrived);
        Ok(stay)
    }

    /// Sends one count to each of `sends` and receives one from each of `from`.
    fn exchange_counts(&mut self, sends: [(usize, usize); 2], from: [usize; 2]) -> Result<[usize; 2]> {
        let values = [sends[0].1 as u64, sends[1].1 as u64];
        let mut received = [0; 2];
        self.counts.exchange(
            &[&self.count_buffer],
            &[
                Outgoing { to: sends[0].0, data: &values[..1] },
                Outgoing { to: sends[1].0, data: &values[1..] },
            ],
            &[
                Incoming { from: from[0], buffer: 0, offset: 0, room: 1 },
                Incoming { from: from[1], buffer: 0, offset: 1, room: 1 },
            ],
            &mut received,
        )?;
        let mut counts = [0u64; 2];
        self.count_buffer.read_local(0, &mut counts)?;
        Ok([counts[0] as usize, counts[1] as usize])
    }

    /// Sends `count` to `to` and returns the count received from `from`.
    fn exchange_count(&mut self, to: usize, count: usize, from: usize) -> Result<usize> {
        let incoming = Incoming { from, buffer: 0, offset: 0, room: 1 };
        self.counts.sendrecv(&[&self.count_buffer], Outgoing { to, data: &[count as u64] }, incoming)?;
        Ok(self.count_buffer.get_value(self.rt.my_pe(), 0)? as usize)
    }

    /// Makes `home` (global index, position) the home atoms.
    fn set_home(&mut self, home: &[(u32, RVec)]) -> Result<()> {
        self.coords.collective_ensure(home.len())?;
        self.ids.collective_ensure(home.len())?;
        let ids: Vec<u32> = home.iter().map(|h| h.0).collect();
        let positions: Vec<RVec> = home.iter().map(|h| h.1).collect();
        self.ids.array().write_local(0, &ids)?;
        self.coords.array().write_local(0, &positions)?;
        self.n_home = home.len();
        self.n_local = home.len();
        Ok(())
    }

    /// Builds the plan from the current positions: for every pulse, which atoms this PE sends
    /// and how many it receives; the atoms' indices and positions travel once, so every PE
    /// knows its halo's global indices and reference positions.
    ///
    /// # Collective
    /// Every PE builds the same sequence of pulses.
    fn collective_build_plan(&mut self) -> Result<()> {
        self.n_local = self.n_home;
        self.reference = self.home_positions();
        let lower = self.grid.lower(self.cell);
        let range = self.grid.range();
        for q in 0..self.pulses.len() {
            let (dim, first) = (self.pulses[q].dim, q == 0 || self.pulses[q - 1].dim != self.pulses[q].dim);
            // The first pulse of a dimension considers every local atom so far (home and the
            // halos of earlier dimensions); later pulses forward what the previous one brought.
            let candidates = if first {
                0..self.n_local
            } else {
                let previous = &self.pulses[q - 1];
                previous.offset..previous.offset + previous.count
            };
            let limit = lower[dim] + range;
            let send: Vec<u32> =
                candidates.filter(|&i| self.reference[i][dim] < limit).map(|i| i as u32).collect();
            let (to, from) = (self.pulses[q].to, self.pulses[q].from);
            let count = self.exchange_count(to, send.len(), from)?;
            let need = self.n_local + count;
            self.coords.collective_ensure(need)?;
            self.ids.collective_ensure(need)?;
            let offset = self.n_local;
            let incoming = Incoming { from, buffer: 0, offset, room: count };
            let send_ids: Vec<u32> = {
                let ids = self.global_indices();
                send.iter().map(|&i| ids[i as usize]).collect()
            };
            let received =
                self.id_exchange.sendrecv(&[self.ids.array()], Outgoing { to, data: &send_ids }, incoming)?;
            check_count(received, count, from, "global indices")?;
            let pulse = &mut self.pulses[q];
            pulse.send = send;
            pulse.offset = offset;
            pulse.count = count;
            self.n_local += count;
            // The first move_x brings the positions; they are also the reference positions.
            self.move_x_pulse(q)?;
            let arrived = self.coordinates()[offset..offset + count].to_vec();
            self.reference.extend(arrived);
        }
        let largest = self.pulses.iter().map(|p| p.send.len()).max().unwrap_or(0);
        self.force_scratch.collective_ensure(largest)?;
        Ok(())
    }

    /// One pulse of move_x: the shifted coordinates of the send list are packed straight into
    /// the receiver's coordinate array where the path allows it (one-sided, same node), or
    /// into a buffer that is then sent.
    fn move_x_pulse(&mut self, q: usize) -> Result<()> {
        let coords = self.coords.array();
        let parallel_min = self.parallel_min;
        let pulse = &mut self.pulses[q];
        // SAFETY: the prefix up to this pulse's receive region holds home atoms and atoms
        // received in earlier pulses of this call: no PE writes it until this PE announces
        // its receive regions again in the next move_x. The destination a packing function
        // gets is this pulse's receive region on another PE (or, with one domain along the
        // dimension, this PE's own region beyond the prefix): never the prefix.
        let prefix = unsafe { &coords.local_slice()[..pulse.offset] };
        // The shift is a whole vector, added in registers and stored at once: indexing one
        // coordinate by `dim` would go through memory and read back part of a just-written
        // element, which stalls the store buffer.
        let delta: RVec = std::array::from_fn(|d| if d == pulse.dim { pulse.shift } else { 0.0 });
        let send = &pulse.send;
        let pack = |(out, &i): (&mut RVec, &u32)| {
            let x = prefix[i as usize];
            *out = [x[0] + delta[0], x[1] + delta[1], x[2] + delta[2]];
        };
        let fill = |dest: &mut [RVec]| {
            if !parallel(send.len(), parallel_min) {
                dest.iter_mut().zip(send).for_each(pack);
            } else {
                dest.par_iter_mut().zip(send.par_iter()).for_each(pack);
            }
        };
        if pulse.to == self.rt.my_pe() {
            // The periodic image along a dimension with one domain: packed into place here,
            // with no message, on every path.
            check_count(send.len(), pulse.count, pulse.from, "coordinates")?;
            // SAFETY: this pulse's receive region follows the prefix; with this PE its own
            // partner, no other PE writes the region in this pulse (nobody else sends to it),
            // and nothing else refers to it while it is filled.
            let region =
                unsafe { std::slice::from_raw_parts_mut(coords.as_ptr().add(pulse.offset), pulse.count) };
            fill(region);
            return Ok(());
        }
        let incoming = Incoming { from: pulse.from, buffer: 0, offset: pulse.offset, room: pulse.count };
        let received = pulse.x.sendrecv_packed(&[coords], pulse.to, send.len(), fill, incoming)?;
        check_count(received, pulse.count, pulse.from, "coordinates")
    }
}

/// Whether a loop over `len` items is worth rayon's thread pool: at least `parallel_min` of
/// them, and more than one thread to share them. With one thread, a parallel loop only adds
/// the hand-over to the pool's thread and back (a sleep and a wake-up, tens of microseconds).
pub fn parallel(len: usize, parallel_min: usize) -> bool {
    len >= parallel_min && rayon::current_num_threads() > 1
}

/// Bits for the PE in the value that reports an atom that moved too far (the atom above).
const PE_BITS: u32 = 24;

/// A neighbour sent a different number of elements than the plan says.
fn check_count(received: usize, expected: usize, from: usize, what: &str) -> Result<()> {
    if received == expected {
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "PE {from} sent {received} {what} where the plan expects {expected}; the PEs' plans disagree"
        )))
    }
}

/// `forces[targets[i]] += values[i]` for every `i`, in parallel. The targets of one pulse are
/// distinct (a send list names each atom once), so no two threads add to the same force.
fn scatter_add(forces: &mut [RVec], targets: &[u32], values: &[RVec], parallel_min: usize) {
    assert_eq!(targets.len(), values.len(), "one returned force per sent atom");
    if !parallel(targets.len(), parallel_min) {
        for (&t, v) in targets.iter().zip(values) {
            let f = &mut forces[t as usize];
            for d in 0..3 {
                f[d] += v[d];
            }
        }
        return;
    }
    // The parallel writes below rely on these; large lists only, where the check is a small
    // part of the work.
    assert!(targets.iter().all(|&t| (t as usize) < forces.len()), "send lists index local atoms");
    debug_assert!(
        {
            let mut sorted = targets.to_vec();
            sorted.sort_unstable();
            sorted.windows(2).all(|w| w[0] != w[1])
        },
        "send list entries are distinct"
    );
    let base = Scatter(forces.as_mut_ptr());
    targets.par_iter().zip(values.par_iter()).for_each(|(&t, v)| {
        // SAFETY: t is in bounds (asserted) and distinct across iterations (send lists name
        // each atom once), so this is the only access to that element during the loop.
        let f = unsafe { &mut *base.at(t as usize) };
        for d in 0..3 {
            f[d] += v[d];
        }
    });
}
