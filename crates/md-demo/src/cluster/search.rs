//! Building the pair list: the pair search over the columns, the masks of the entries, and
//! the excluded pairs under Ewald.

use md_halo::{HaloExchange, RVec, ShiftForces, Zone};
use rayon::prelude::*;

use super::chunk::{CHUNK_CLUSTERS, Chunk, I_CLUSTER, J_CLUSTER, PADDING, keep_room};
use super::images::Images;
use super::kernel::{Constants, Isa};
use super::layout::{Bounds, Columns, Slots, cluster, gather};
use super::list::PairList;
use super::scratch::{Scratch, Summary};
use crate::error::{Error, Result};
use crate::force::{Electrostatics, ForceField, ONE_4PI_EPS0, Topology};

impl PairList {
    /// The pair list of a domain's local atoms (home and halo, as [`HaloExchange::move_x`]
    /// left them) with the domain's pair ownership, at the list radius of the halo plan (the
    /// cutoff plus the Verlet buffer), for the [best](Isa::detect) instruction set.
    ///
    /// Under [`PeriodicImages::Kernel`](md_halo::PeriodicImages::Kernel) the list makes the
    /// halo's periodic images itself: [`forces`](Self::forces) then takes the stored
    /// coordinates ([`HaloExchange::coordinates`]), adds each image's shift where its per-step
    /// gather loads the image's slot, adds each image's force to its atom's in the pass that
    /// writes the atoms' forces (one force per stored atom), and keeps the forces the images
    /// carried across the boundaries ([`shift_forces`](Self::shift_forces)).
    ///
    /// # Errors
    /// As [`PairList::build`].
    pub fn for_domain(halo: &HaloExchange<'_>, topology: &Topology, field: &ForceField) -> Result<PairList> {
        let mut list = PairList::empty(field);
        list.rebuild_for_domain(halo, topology, field)?;
        Ok(list)
    }

    /// The pair search into `slot`: [`rebuild_for_domain`](Self::rebuild_for_domain) of the
    /// list a previous search left there, or [`for_domain`](Self::for_domain) into an empty
    /// slot; returns the list.
    ///
    /// # Errors
    /// As [`PairList::build`]; a list in the slot is then unchanged.
    pub fn search_into<'a>(
        slot: &'a mut Option<PairList>,
        halo: &HaloExchange<'_>,
        topology: &Topology,
        field: &ForceField,
    ) -> Result<&'a mut PairList> {
        match slot {
            Some(list) => {
                list.rebuild_for_domain(halo, topology, field)?;
                Ok(list)
            }
            None => Ok(slot.insert(PairList::for_domain(halo, topology, field)?)),
        }
    }

    /// As [`for_domain`](Self::for_domain), in place: the list's buffers keep their capacity
    /// from one pair search to the next, so that a long run's memory stays level once they
    /// have their sizes (a list built afresh every search leaves the allocator a different
    /// set of sizes each time).
    ///
    /// # Errors
    /// As [`PairList::build`]; the list is unchanged on an error.
    pub fn rebuild_for_domain(
        &mut self,
        halo: &HaloExchange<'_>,
        topology: &Topology,
        field: &ForceField,
    ) -> Result<()> {
        self.rebuild(
            &halo.positions_with_images(),
            halo.global_indices(),
            &halo.pair_owner().zones(),
            topology,
            field,
            halo.grid().range() as f64,
            Isa::detect(),
        )?;
        self.images.fill(halo.images(), halo.stored_count());
        Ok(())
    }

    /// The pair list of the atoms at `positions` (global indices `ids`, real-space
    /// coordinates, no periodicity): every pair within `rlist` that is not excluded and whose
    /// [`zones`](Zone) pair with each other, each once. All atoms in [`Zone::HOME`] computes
    /// every pair. Under Ewald electrostatics the excluded pairs whose zones pair are kept
    /// too, for their exclusion correction ([`ForceField::exclusion`]).
    ///
    /// # Errors
    /// [`Error::Config`] when the arrays differ in length, `rlist` is below the cutoff, a
    /// position is not finite, a global index has no entry in `topology`, or the kernel cannot
    /// run on `isa` here.
    pub fn build(
        positions: &[RVec],
        ids: &[u32],
        zones: &[Zone],
        topology: &Topology,
        field: &ForceField,
        rlist: f64,
        isa: Isa,
    ) -> Result<PairList> {
        let mut list = PairList::empty(field);
        list.rebuild(positions, ids, zones, topology, field, rlist, isa)?;
        Ok(list)
    }

    /// A list of no atoms, to be filled by [`rebuild`](Self::rebuild).
    fn empty(field: &ForceField) -> PairList {
        PairList {
            atom_of_slot: Vec::new(),
            slot_of_atom: Vec::new(),
            slots: Slots::default(),
            chunks: Vec::new(),
            constants: Constants::of(field),
            isa: Isa::Baseline,
            pairs: 0,
            total: Vec::new(),
            field: *field,
            exclusions: Vec::new(),
            exclusion_params: Vec::new(),
            images: Images::default(),
            shift_forces: ShiftForces::default(),
            scratch: Scratch::default(),
        }
    }

    /// As [`build`](Self::build), in place, keeping the buffers' capacity (see
    /// [`rebuild_for_domain`](Self::rebuild_for_domain)); the list makes no periodic images
    /// afterwards.
    ///
    /// # Errors
    /// As [`build`](Self::build); the list is unchanged on an error.
    #[allow(clippy::too_many_arguments)]
    pub fn rebuild(
        &mut self,
        positions: &[RVec],
        ids: &[u32],
        zones: &[Zone],
        topology: &Topology,
        field: &ForceField,
        rlist: f64,
        isa: Isa,
    ) -> Result<()> {
        if rlist.is_nan() || rlist < field.cutoff {
            return Err(Error::Config(format!(
                "the pair-list radius {rlist} nm is below the cutoff {} nm: pairs would be missed",
                field.cutoff
            )));
        }
        if !isa.available() {
            return Err(Error::Config(format!(
                "this processor cannot run the {isa} kernel: use Isa::detect()"
            )));
        }
        if positions.len() != ids.len() || zones.len() != ids.len() {
            return Err(Error::Config(format!(
                "{} positions and {} zones for {} global indices",
                positions.len(),
                zones.len(),
                ids.len()
            )));
        }
        if let Some(i) = positions.iter().position(|x| x.iter().any(|c| !c.is_finite())) {
            return Err(Error::Config(format!(
                "local atom {i} (global {}) has a position that is not finite: {:?}",
                ids[i], positions[i]
            )));
        }
        if let Some(&g) = ids.iter().find(|&&g| g as usize >= topology.params.len()) {
            return Err(Error::Config(format!(
                "global index {g} is beyond the topology's {} atoms",
                topology.params.len()
            )));
        }
        let PairList { atom_of_slot, slot_of_atom, slots, scratch, .. } = self;
        let Scratch { columns, molecule, zone, i_bounds, j_bounds, i_summary, j_summary } = scratch;
        columns.fit(positions, rlist as f32);
        columns.slots(positions, atom_of_slot);
        slot_of_atom.clear();
        slot_of_atom.resize(positions.len(), 0);
        keep_room(slot_of_atom);
        keep_room(atom_of_slot);
        for (slot, &atom) in atom_of_slot.iter().enumerate() {
            if atom != PADDING {
                slot_of_atom[atom as usize] = slot as u32;
            }
        }
        let scale = ONE_4PI_EPS0.sqrt();
        let atom_of_slot = &*atom_of_slot;
        let n_slots = atom_of_slot.len();
        let p = &topology.params;
        let per_slot = |v: &mut Vec<f32>, f: &dyn Fn(usize) -> f32| {
            refill(
                v,
                atom_of_slot.iter().map(|&atom| match atom {
                    PADDING => 0.0,
                    atom => f(ids[atom as usize] as usize),
                }),
            )
        };
        per_slot(&mut slots.charge, &|g| (p[g].charge as f64 * scale) as f32);
        per_slot(&mut slots.sqrt_c6, &|g| (6.0 * p[g].c6 as f64).sqrt() as f32);
        per_slot(&mut slots.sqrt_c12, &|g| (12.0 * p[g].c12 as f64).sqrt() as f32);
        refill(
            molecule,
            atom_of_slot
                .iter()
                .map(|&a| if a == PADDING { PADDING } else { topology.molecules[ids[a as usize] as usize] }),
        );
        // Padding must sit far away again: `gather` places it only when the length changes.
        for v in [&mut slots.x, &mut slots.y, &mut slots.z] {
            v.clear();
        }
        gather(atom_of_slot, positions, &[], slots);
        for v in [&mut slots.x, &mut slots.y, &mut slots.z] {
            keep_room(v);
        }
        let bounds = |first: usize, len: usize| {
            let mut b = Bounds::EMPTY;
            for &atom in &atom_of_slot[first..first + len] {
                if let Some(&x) = positions.get(atom as usize) {
                    b.add(x);
                }
            }
            b
        };
        refill(i_bounds, (0..n_slots / I_CLUSTER).map(|c| bounds(c * I_CLUSTER, I_CLUSTER)));
        // A j-cluster is two consecutive i-clusters.
        refill(j_bounds, i_bounds.chunks(J_CLUSTER / I_CLUSTER).map(Bounds::union));
        refill(zone, atom_of_slot.iter().map(|&a| zones.get(a as usize).map_or(0, |z| z.bits())));
        let summaries = |size: usize, into: &mut Vec<Summary>| {
            refill(
                into,
                (0..n_slots / size).map(|c| {
                    let slots = c * size..(c + 1) * size;
                    Summary::of(&atom_of_slot[slots.clone()], &molecule[slots.clone()], &zone[slots])
                }),
            )
        };
        summaries(I_CLUSTER, i_summary);
        summaries(J_CLUSTER, j_summary);
        let search = Search {
            columns,
            i_bounds,
            j_bounds,
            atom_of_slot,
            molecule,
            slots,
            rlist2: (rlist * rlist) as f32,
            // Rounding of the box distances must never drop a pair within rlist.
            bounds_rlist2: ((rlist * (1.0 + 1e-5) + 1e-6).powi(2)) as f32,
            zone,
            i_summary,
            j_summary,
        };
        let n_i = n_slots / I_CLUSTER;
        self.chunks.resize_with(n_i.div_ceil(CHUNK_CLUSTERS), Chunk::default);
        self.chunks.par_iter_mut().enumerate().for_each(|(c, chunk)| {
            let range = c * CHUNK_CLUSTERS..((c + 1) * CHUNK_CLUSTERS).min(n_i);
            match isa {
                // SAFETY: `isa.available()` was checked above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { search_avx512(&search, range, n_slots, chunk) },
                _ => search.chunk(range, n_slots, chunk),
            }
        });
        self.pairs = self.chunks.iter().flat_map(|c| &c.masks).map(|m| m.count_ones() as usize).sum();
        self.constants = Constants::of(field);
        self.isa = isa;
        self.total.clear();
        self.total.resize(3 * n_slots, 0.0);
        keep_room(&mut self.total);
        self.field = *field;
        self.exclusions.clear();
        self.exclusion_params.clear();
        if matches!(field.electrostatics(), Electrostatics::Ewald { beta } if beta > 0.0) {
            self.exclusions.extend(excluded_pairs(ids, zones, topology));
            self.exclusion_params.extend(
                self.exclusions.iter().map(|pair| pair.map(|a| topology.params[ids[a as usize] as usize])),
            );
            keep_room(&mut self.exclusions);
            keep_room(&mut self.exclusion_params);
        }
        self.images.fill(&[], 0);
        self.shift_forces = ShiftForces::default();
        Ok(())
    }
}

/// Replaces the contents of `v` by `values`, keeping its capacity; where it must grow, to
/// 19 % more than `values` holds ([`keep_room`]), before filling, so that no doubling comes
/// first.
fn refill<T>(v: &mut Vec<T>, values: impl Iterator<Item = T>) {
    v.clear();
    let n = values.size_hint().0;
    if v.capacity() < n {
        v.reserve_exact(n + n * 19 / 100);
    }
    v.extend(values);
    keep_room(v);
}

/// The pairs `(i, j)`, `i < j`, of local atoms in one molecule whose zones pair: the excluded
/// pairs this domain owns, in the order of their first atom.
fn excluded_pairs(ids: &[u32], zones: &[Zone], topology: &Topology) -> Vec<[u32; 2]> {
    let mut by_molecule: Vec<u32> = (0..ids.len() as u32).collect();
    by_molecule.sort_unstable_by_key(|&a| (topology.molecules[ids[a as usize] as usize], a));
    let mut pairs = Vec::new();
    for molecule in by_molecule.chunk_by(|&a, &b| {
        topology.molecules[ids[a as usize] as usize] == topology.molecules[ids[b as usize] as usize]
    }) {
        for (n, &i) in molecule.iter().enumerate() {
            for &j in &molecule[n + 1..] {
                if zones[i as usize].pairs_with(zones[j as usize]) {
                    pairs.push([i, j]);
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// What the pair search of the chunks shares.
struct Search<'a> {
    columns: &'a Columns,
    i_bounds: &'a [Bounds],
    j_bounds: &'a [Bounds],
    atom_of_slot: &'a [u32],
    molecule: &'a [u32],
    /// Coordinates in slot order.
    slots: &'a Slots,
    rlist2: f32,
    bounds_rlist2: f32,
    /// Zone bits in slot order.
    zone: &'a [u8],
    /// Per i-cluster and per j-cluster: what the fast path of [`Search::mask`] needs.
    i_summary: &'a [Summary],
    j_summary: &'a [Summary],
}

impl Search<'_> {
    /// The entries of i-clusters `range`, and the force buffer they need, into `chunk`
    /// (whose buffers keep their capacity).
    #[inline(always)]
    fn chunk(&self, range: std::ops::Range<usize>, n_slots: usize, chunk: &mut Chunk) {
        for v in [&mut chunk.i_clusters, &mut chunk.starts, &mut chunk.j_clusters, &mut chunk.masks] {
            v.clear();
        }
        chunk.lower = (range.start * I_CLUSTER) / J_CLUSTER * J_CLUSTER;
        let mut upper = (range.end * I_CLUSTER).min(n_slots);
        let columns = self.columns;
        let reach = self.bounds_rlist2.sqrt();
        for ci in range {
            let ib = &self.i_bounds[ci];
            if ib.is_empty() {
                continue;
            }
            let first_entry = chunk.j_clusters.len();
            let own_column = columns.first.partition_point(|&f| f <= ci * I_CLUSTER) - 1;
            let span = |d: usize| {
                let lo =
                    ((ib.lower[d] - reach - columns.lower[d]) / columns.width[d]).floor().max(0.0) as usize;
                let hi = ((ib.upper[d] - columns.lower[d] + reach) / columns.width[d]).max(0.0) as usize;
                lo.min(columns.dims[d] - 1)..=hi.min(columns.dims[d] - 1)
            };
            for cx in span(0) {
                for cy in span(1) {
                    let column = cx * columns.dims[1] + cy;
                    // Each pair once: j slots above some i slot, so no column before this one.
                    if column < own_column || columns.atoms[column] == 0 {
                        continue;
                    }
                    if ib.distance2(&columns.bounds[column], 0..2) >= self.bounds_rlist2 {
                        continue;
                    }
                    let first_j = columns.first[column] / J_CLUSTER;
                    let real_j = columns.atoms[column].div_ceil(J_CLUSTER);
                    let j_range = &self.j_bounds[first_j..first_j + real_j];
                    // Clusters are sorted by z: skip those entirely below the i-cluster.
                    let start = j_range.partition_point(|b| b.upper[2] < ib.lower[2] - reach);
                    for (k, jb) in j_range.iter().enumerate().skip(start) {
                        if jb.lower[2] > ib.upper[2] + reach {
                            break;
                        }
                        let cj = first_j + k;
                        if (cj + 1) * J_CLUSTER <= ci * I_CLUSTER + 1
                            || ib.distance2(jb, 0..3) >= self.bounds_rlist2
                        {
                            continue;
                        }
                        let mask = self.mask(ci, cj);
                        if mask != 0 {
                            chunk.j_clusters.push(cj as u32);
                            chunk.masks.push(mask);
                            upper = upper.max((cj + 1) * J_CLUSTER);
                        }
                    }
                }
            }
            if chunk.j_clusters.len() > first_entry {
                if chunk.starts.is_empty() {
                    chunk.starts.push(first_entry as u32);
                }
                chunk.i_clusters.push(ci as u32);
                chunk.starts.push(chunk.j_clusters.len() as u32);
            }
        }
        chunk.force.clear();
        chunk.force.resize(3 * (upper - chunk.lower), 0.0);
        for v in [&mut chunk.i_clusters, &mut chunk.starts, &mut chunk.j_clusters, &mut chunk.masks] {
            keep_room(v);
        }
        keep_room(&mut chunk.force);
    }

    /// The interacting pairs of an entry; zero when none of them is within `rlist`.
    #[inline(always)]
    fn mask(&self, ci: usize, cj: usize) -> u32 {
        let (si, sj) = (ci * I_CLUSTER, cj * J_CLUSTER);
        let (is, js) = (self.i_summary[ci], self.j_summary[cj]);
        if sj >= si + I_CLUSTER && is.molecules & js.molecules == 0 && Zone::pair_bits(is.zones, js.zones) {
            // Every pair of real atoms interacts: no common molecule, the zones agree, and
            // every j slot lies above every i slot. Padding sits far away (see `gather`).
            let [xj, yj, zj]: [[f32; J_CLUSTER]; 3] =
                [&self.slots.x, &self.slots.y, &self.slots.z].map(|v| cluster(v, sj));
            let [xi, yi, zi]: [[f32; I_CLUSTER]; 3] =
                [&self.slots.x, &self.slots.y, &self.slots.z].map(|v| cluster(v, si));
            let mut closest = [f32::INFINITY; J_CLUSTER];
            for a in 0..I_CLUSTER {
                for b in 0..J_CLUSTER {
                    let (dx, dy, dz) = (xi[a] - xj[b], yi[a] - yj[b], zi[a] - zj[b]);
                    let r2 = dx * dx + dy * dy + dz * dz;
                    closest[b] = if r2 < closest[b] { r2 } else { closest[b] };
                }
            }
            let closest = closest.iter().fold(f32::INFINITY, |m, &r2| if r2 < m { r2 } else { m });
            if closest >= self.rlist2 {
                return 0;
            }
            let rows =
                (0..I_CLUSTER).filter(|a| is.real & (1 << a) != 0).fold(0u32, |m, a| m | 0xFF << (8 * a));
            return rows & (u32::from(js.real) * 0x0101_0101);
        }
        let (mut mask, mut near) = (0u32, 0u32);
        let (molecule_j, atom_j): ([u32; J_CLUSTER], [u32; J_CLUSTER]) =
            (cluster(self.molecule, sj), cluster(self.atom_of_slot, sj));
        let zone_j: [u8; J_CLUSTER] = cluster(self.zone, sj);
        let [xj, yj, zj]: [[f32; J_CLUSTER]; 3] =
            [&self.slots.x, &self.slots.y, &self.slots.z].map(|v| cluster(v, sj));
        for a in 0..I_CLUSTER {
            let si = ci * I_CLUSTER + a;
            let (xi, yi, zi, molecule_i) =
                (self.slots.x[si], self.slots.y[si], self.slots.z[si], self.molecule[si]);
            let (real_i, zone_i) = (self.atom_of_slot[si] != PADDING, self.zone[si]);
            let (mut valid, mut close) = ([false; J_CLUSTER], [false; J_CLUSTER]);
            for b in 0..J_CLUSTER {
                valid[b] = real_i
                    & (sj + b > si)
                    & (atom_j[b] != PADDING)
                    & (molecule_j[b] != molecule_i)
                    & Zone::pair_bits(zone_i, zone_j[b]);
                let (dx, dy, dz) = (xi - xj[b], yi - yj[b], zi - zj[b]);
                close[b] = dx * dx + dy * dy + dz * dz < self.rlist2;
            }
            let row = bits(valid);
            mask |= row << (a * J_CLUSTER);
            near |= row & bits(close);
        }
        if near != 0 { mask } else { 0 }
    }
}

/// The pair search of one chunk with AVX-512 code generation.
///
/// # Safety
/// The processor must have AVX-512F and AVX-512VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512bw")]
unsafe fn search_avx512(
    search: &Search<'_>,
    range: std::ops::Range<usize>,
    n_slots: usize,
    chunk: &mut Chunk,
) {
    search.chunk(range, n_slots, chunk)
}

/// Lane `b` of `lanes` as bit `b`.
#[inline(always)]
fn bits(lanes: [bool; J_CLUSTER]) -> u32 {
    lanes.iter().enumerate().fold(0, |m, (b, &v)| m | (u32::from(v) << b))
}
