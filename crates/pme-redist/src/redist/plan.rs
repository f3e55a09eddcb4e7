//! What every path of the redistribution shares: who sends to whom (the partners of the
//! plan), each home atom's reach and PME rank in this step, the counts and offsets per target
//! and per source that lay out every message, and the errors a step carries to every PE.
//!
//! An atom found outside its reach does not stop the step, which would leave PEs waiting: its
//! PE withholds all its atoms and announces, in place of each count, a marker (the [`ERROR`]
//! bit, the PE that holds the atom and its global index). The PME ranks agree on the smallest
//! marker any of them heard of and return it with the statuses, so every PE reports the same
//! atom, and no count travels between PEs that are not partners. The agreement rides in the
//! mesh's forward transposes when the step's [`Mesh`](crate::Mesh) goes through
//! [`Pme::collective_step`](crate::Pme::collective_step) over the same PME ranks; otherwise
//! the transport votes (`vote.rs` on the one-sided paths, an `MPI_Iallreduce` on the MPI and
//! mixed ones). It starts that vote once the counts are in, so that it travels while the mesh
//! works, unless the last step's mesh carried the vote (this one's most likely does too), and
//! at the return where the mesh did not ([`Plan::take_mesh_vote`]).

use onesided::{Collectives, Runtime};

use super::agreement::{Agreed, Source};
use super::by_rank;
use super::store::Store;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;
use crate::model::{Margin, Reach, place};
use crate::particle::{Particle, RVec, pes_fingerprint};
use crate::threads::PARALLEL_MIN;

/// A count with this bit set reports an error instead: an atom (low 32 bits) on a PE (the
/// next 31 bits) moved too far for the plan.
pub(super) const ERROR: u64 = 1 << 63;
const PE_MASK: u64 = (1 << 31) - 1;

/// The stages of a relay's second hop on a pencil grid, as GROMACS runs them: along y (the
/// minor dimension) within the relay's row, then along x within each column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// A hop of its own: directly to the atoms' PME ranks, or a relay's first hop.
    Whole,
    /// From the relay in row `row` to the ranks of that row in the atoms' columns; checks each
    /// atom against its whole reach.
    AlongY { row: usize },
    /// From there to the atoms' rows; its home atoms change every step, its targets and bounds
    /// come from the stage along y's agreement.
    AlongX,
}

/// Which pairs of PEs a transport serves in a step: every pair, or, in a redistribution
/// whose links take different paths ([`super::mixed`]), the pairs on one node or those across
/// nodes. A pair is of one class from both ends, so both ends agree on its transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pairs {
    /// Every pair.
    All,
    /// Pairs whose PEs share a node.
    SameNode,
    /// Pairs whose PEs are on different nodes.
    OtherNode,
}

impl Pairs {
    /// Whether the pair of this PE and `pe` is served.
    pub fn serves(self, rt: &Runtime, pe: usize) -> bool {
        match self {
            Pairs::All => true,
            Pairs::SameNode => rt.same_node(pe),
            Pairs::OtherNode => !rt.same_node(pe),
        }
    }
}

/// The plan and the current step's layout: everything a transport reads and writes besides
/// the buffers.
pub(super) struct Plan<'rt> {
    pub rt: &'rt Runtime,
    pub grid: PmeGrid,
    pub my_rank: Option<usize>,
    /// Whether this PE holds home atoms (sends).
    pub particle: bool,
    margin: Margin,
    /// The one PME rank every home atom goes to, when this is the first hop of a relay: no
    /// atom then moves too far, whatever its position.
    relay: Option<usize>,
    /// Which stage of a relay's second hop on a pencil grid this is, if one.
    pub stage: Stage,
    /// An error the stage before found or heard of in this step, which this stage carries
    /// (set before each step of the stage along x).
    pub inherited: Option<u64>,
    /// Whether the PME ranks vote on each step's error: not on the first hop of a relay,
    /// where no atom can be too far and the second hop's vote has made every PME rank agree
    /// before the return.
    pub votes: bool,
    /// Whether the transport votes in this step, where the hop votes: unless the last step's
    /// mesh carried the vote (as then every PME rank's did, or none), in which case this
    /// step's mesh most likely does too; turned on at the return where it did not.
    pub own_vote: bool,
    /// Whether the last step's mesh carried the vote.
    mesh_voted: bool,
    /// The vote the mesh's forward transposes carried in this step, if they did.
    pub mesh_agreed: Option<u64>,
    /// The PME ranks' PEs, as a fingerprint ([`pes_fingerprint`]): a mesh carries the vote
    /// only over the same PEs.
    pub pme_pes: u64,
    /// On the second hop of a relay, where the home atoms came from in this step: `(first
    /// atom, particle PE)` by first atom, so that an atom too far is reported on the PE that
    /// holds it (empty: this PE).
    pub origins: Vec<(usize, usize)>,
    /// Each home atom's reach at the plan, and this PE's targets and bounds.
    pub reach: Reach,
    /// What the agreement at the plan said: this PE's slot at each target and, on a PME rank,
    /// its sources.
    pub agreed: Agreed,
    /// PME rank of each home atom in this step.
    pub dest: Vec<u32>,
    /// Where each run of home atoms of one PME rank starts in this step.
    runs: Vec<u32>,
    /// The same for each chunk of [`PARALLEL_MIN`] home atoms placed on the thread pool.
    chunk_runs: Vec<Vec<u32>>,
    /// Home atoms of each PME rank per chunk of [`PARALLEL_MIN`] home atoms (`[c * m + r]`),
    /// or for all of them when placement stays on the calling thread: counting scratch of one
    /// word per PME rank, which no message carries.
    chunk_counts: Vec<usize>,
    /// Home atoms per PME rank in this step, and where each rank's start in the packed order.
    pub dest_counts: Vec<usize>,
    pub dest_offsets: Vec<usize>,
    /// On a PME rank, per source (in the order of `agreed.sources`): the atoms it sent in this
    /// step and where they start.
    pub src_counts: Vec<usize>,
    pub src_offsets: Vec<usize>,
    /// Atoms this PME rank received in this step.
    pub received: usize,
    /// An error this PE found or heard of during the step, reported at its end.
    pub pending: Option<u64>,
    /// This PE found an atom too far in this step and sends its PME ranks the error in place
    /// of its count, and no atoms.
    withheld: bool,
    /// Steps so far.
    pub calls: u64,
}

impl<'rt> Plan<'rt> {
    /// A plan with no home atoms yet: [`replace`](Self::replace) gives it its partners. A
    /// particle PE with a `relay` sends every atom there.
    pub fn new(
        rt: &'rt Runtime,
        grid: PmeGrid,
        particle: bool,
        margin: Margin,
        relay: Option<usize>,
        votes: bool,
    ) -> Self {
        let m = grid.ranks();
        let pme_pes = pes_fingerprint((0..m).map(|r| grid.pe_of(r)));
        Plan {
            rt,
            my_rank: grid.rank_of_pe(rt.my_pe()),
            grid,
            particle,
            margin,
            relay,
            stage: Stage::Whole,
            inherited: None,
            votes,
            own_vote: votes,
            mesh_voted: false,
            mesh_agreed: None,
            pme_pes,
            origins: Vec::new(),
            reach: Reach::default(),
            agreed: Agreed::default(),
            dest: Vec::new(),
            runs: Vec::new(),
            chunk_runs: Vec::new(),
            chunk_counts: Vec::new(),
            dest_counts: vec![0; m],
            dest_offsets: vec![0; m],
            src_counts: Vec::new(),
            src_offsets: Vec::new(),
            received: 0,
            pending: None,
            withheld: false,
            calls: 0,
        }
    }

    /// The number of home atoms the plan is for.
    pub fn home_count(&self) -> usize {
        self.reach.atoms
    }

    /// Where each of the `home` atoms may go before the next plan, and this PE's targets: to
    /// agree on ([`replace`](Self::replace) takes it once agreed).
    pub fn reach(&mut self, home: &[Particle]) -> Reach {
        if !self.particle {
            // A PME-only PE sends nothing, and hears of errors through the vote.
            return Reach::default();
        }
        if let Some(r) = self.relay {
            return Reach::all_to(&self.grid, home.len(), r);
        }
        let mut planned = vec![0u32; home.len()];
        let (mut counts, mut runs) = (Vec::new(), Vec::new());
        place(&self.grid, home, &mut planned, &mut counts, &mut runs, &mut self.chunk_runs);
        if let Stage::AlongY { row } = self.stage {
            return Reach::along_y(&self.grid, self.margin, home, &planned, row);
        }
        // A PE without atoms names its own PME rank if it is one, to hear of the errors.
        Reach::new(&self.grid, self.margin, home, &planned, self.my_rank.unwrap_or(self.rt.my_pe()))
    }

    /// Takes the reach and agreement of a new plan, and returns the old ones.
    pub fn replace(&mut self, reach: Reach, agreed: Agreed) -> (Reach, Agreed) {
        let sources = agreed.sources.len();
        let old = (std::mem::replace(&mut self.reach, reach), std::mem::replace(&mut self.agreed, agreed));
        self.src_counts = vec![0; sources];
        self.src_offsets = vec![0; sources];
        old
    }

    /// This PE's targets, with its slot at each: `(index, PME rank, slot)`.
    pub fn targets(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        self.reach.targets.iter().zip(&self.agreed.slots).enumerate().map(|(i, (&r, &slot))| (i, r, slot))
    }

    /// This PME rank's sources by PE.
    pub fn sources(&self) -> &[Source] {
        &self.agreed.sources
    }

    /// The [`targets`](Self::targets) whose pairs `pairs` serves.
    pub fn targets_of(&self, pairs: Pairs) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        self.targets().filter(move |&(_, r, _)| pairs.serves(self.rt, self.grid.pe_of(r)))
    }

    /// The [`sources`](Self::sources) whose pairs `pairs` serves, by index.
    pub fn sources_of(&self, pairs: Pairs) -> impl Iterator<Item = (usize, Source)> + '_ {
        self.sources().iter().copied().enumerate().filter(move |(_, s)| pairs.serves(self.rt, s.pe))
    }

    /// Starts a step: places every home atom, counts the atoms per PME rank and lays them out
    /// by rank, and checks them against the plan (an atom outside its reach is carried as this
    /// PE's error, reported at the end of the step).
    pub fn begin_step(&mut self, home: &[Particle]) {
        let me = self.rt.my_pe();
        self.calls += 1;
        self.pending = self.inherited.take();
        self.own_vote = self.votes && !self.mesh_voted;
        self.mesh_agreed = None;
        let m = self.grid.ranks();
        // Kept between steps: a fresh vector of this size would be new pages every step.
        let mut dest = std::mem::take(&mut self.dest);
        dest.resize(home.len(), 0);
        if let Some(r) = self.relay {
            // Every atom to the relay, in one run.
            dest.fill(r as u32);
            self.chunk_counts.clear();
            self.chunk_counts.resize(m, 0);
            self.chunk_counts[r] = home.len();
            self.runs.clear();
            self.runs.extend((!home.is_empty()).then_some(0));
        } else {
            place(&self.grid, home, &mut dest, &mut self.chunk_counts, &mut self.runs, &mut self.chunk_runs);
        }
        let mut far = None;
        if let Stage::AlongY { row } = self.stage {
            // Checked where each atom belongs, then sent to this row's rank in its column.
            far = self.reach.first_outside(&dest, m);
            let py = self.grid.dims()[1] as u32;
            for d in dest.iter_mut() {
                *d = row as u32 * py + *d % py;
            }
            recount(&dest, m, &mut self.chunk_counts, &mut self.runs);
        }
        self.dest_counts.fill(0);
        for chunk in self.chunk_counts.chunks_exact(m) {
            for (total, &count) in self.dest_counts.iter_mut().zip(chunk) {
                *total += count;
            }
        }
        // Every atom of a relay's first hop goes to the relay, its whole reach; the stage
        // along x has no per-atom reach (the stage along y checked it), only targets.
        match self.stage {
            _ if self.relay.is_some() => {}
            Stage::AlongY { .. } => {}
            Stage::AlongX => {
                far = (0..m)
                    .find(|&r| self.dest_counts[r] > 0 && self.reach.target_index(r).is_none())
                    .and_then(|r| dest.iter().position(|&d| d as usize == r));
            }
            Stage::Whole => far = self.reach.first_outside(&dest, m),
        }
        self.dest = dest;
        if let Some(i) = far {
            let holder = match self.origins.partition_point(|&(first, _)| first <= i) {
                0 => me,
                k => self.origins[k - 1].1,
            };
            self.note_error(marker(home[i].global, holder));
        }
        // An error inherited from the stage before withholds this stage's atoms too: the step
        // is lost, and the buffers hold only what a step without error sends.
        self.withheld = far.is_some() || self.pending.is_some();
        // Only targets have atoms (an atom elsewhere is an error, and then none are sent).
        let mut next = 0;
        for &r in &self.reach.targets {
            self.dest_offsets[r] = next;
            next += self.dest_counts[r];
        }
    }

    /// How the home atoms were cut when they were placed.
    pub fn chunks(&self) -> by_rank::Chunks<'_> {
        let m = self.grid.ranks();
        let parallel = self.chunk_counts.len() > m;
        let chunk = if parallel { PARALLEL_MIN } else { self.dest.len().max(1) };
        by_rank::Chunks { chunk, ranks: m, counts: &self.chunk_counts, parallel, runs: &self.runs }
    }

    /// The home atoms' layout by PME rank: `(offset, count)` of each rank's atoms.
    fn layout(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.grid.ranks()).map(|r| {
            if self.reach.target_index(r).is_some() {
                (self.dest_offsets[r], self.dest_counts[r])
            } else {
                (0, 0)
            }
        })
    }

    /// The counts per PME rank that cut the packed home atoms: each target's, zero elsewhere.
    pub fn rank_counts(&self) -> Vec<usize> {
        self.layout().map(|(_, count)| count).collect()
    }

    /// Writes the `home` atoms into `out`, one slice per PME rank (`dest_counts[r]` long for a
    /// target, empty elsewhere), in home order: the layout every path sends. Nothing, when
    /// this PE withholds its atoms.
    pub fn pack(&self, home: &[Particle], out: Vec<&mut [Particle]>) {
        if !self.withheld {
            by_rank::pack(&self.dest, home, out, &self.chunks());
        }
    }

    /// Packs the `home` atoms into `send`, by PME rank from `dest_offsets`.
    ///
    /// # Safety
    /// No PE reads this PE's `send` now (the get path's readers of the previous call are
    /// done).
    pub unsafe fn pack_into(&self, home: &[Particle], send: &Store<'rt, Particle>) {
        if self.withheld {
            return;
        }
        // SAFETY: no PE writes this PE's send buffer, and no PE reads it now (the caller's
        // promise); the range holds the home atoms (redistribute checked the capacity).
        let packed = unsafe { send.local_range_mut(0..home.len()) };
        self.pack(home, by_rank::split(packed, &self.rank_counts()));
    }

    /// The forces that arrived by PME rank (`arrived`, laid out as the atoms went), into
    /// `home_forces` in home order.
    pub fn unpack(&self, arrived: Vec<&[RVec]>, home_forces: &mut [RVec]) {
        by_rank::unpack(&self.dest, arrived, home_forces, &self.chunks());
    }

    /// Whether this PE withholds its atoms in this step (it found one outside its reach).
    pub fn withheld(&self) -> bool {
        self.withheld
    }

    /// How many atoms this PE sends to PME rank `r` in this step (none when it reports an
    /// error instead).
    pub fn send_count(&self, r: usize) -> usize {
        if self.withheld { 0 } else { self.dest_counts[r] }
    }

    /// The forward count this PE sends to PME rank `r` (a target), with its error if it has
    /// one.
    pub fn count_to(&self, r: usize) -> u64 {
        self.pending.unwrap_or(self.dest_counts[r] as u64)
    }

    /// The status this PME rank returns to its source `j` with its forces: the count, or the
    /// error.
    pub fn status_to(&self, j: usize) -> u64 {
        self.pending.unwrap_or(self.src_counts[j] as u64)
    }

    /// Notes the counts (or errors) its sources announced (`raw[j]` from source `j`): offsets
    /// in source order.
    pub fn take_source_counts(&mut self, raw: &[u64]) {
        let mut next = 0;
        for (j, &value) in raw.iter().enumerate() {
            let count = if value & ERROR != 0 {
                self.note_error(value);
                0
            } else {
                value as usize
            };
            self.src_counts[j] = count;
            self.src_offsets[j] = next;
            next += count;
        }
        self.received = next;
    }

    /// Notes the status target PME rank `r` returned: an error, or the count, checked against
    /// what this PE sent it.
    pub fn take_status(&mut self, r: usize, value: u64) -> Result<()> {
        if value & ERROR != 0 {
            self.note_error(value);
            Ok(())
        } else {
            check_count(value as usize, self.dest_counts[r], self.grid.pe_of(r))
        }
    }

    /// Notes an error heard of in this step. Of several, every PE keeps the smallest marker,
    /// so that every PE reports the same atom.
    pub fn note_error(&mut self, value: u64) {
        self.pending = Some(self.pending.map_or(value, |p| p.min(value)));
    }

    /// The value this PE brings to the PME ranks' vote: its error, or none.
    pub fn ballot(&self) -> u64 {
        self.pending.unwrap_or(u64::MAX)
    }

    /// At the return, on a PME rank of a hop that votes: takes the vote the mesh carried,
    /// or, where it did not, has the transport vote.
    pub fn take_mesh_vote(&mut self) {
        if !self.votes || self.my_rank.is_none() {
            return;
        }
        let agreed = self.mesh_agreed.take();
        self.mesh_voted = agreed.is_some();
        match agreed {
            Some(agreed) => self.take_vote(agreed),
            None => self.own_vote = true,
        }
    }

    /// Takes the vote's outcome.
    pub fn take_vote(&mut self, agreed: u64) {
        if agreed != u64::MAX {
            self.note_error(agreed);
        }
    }

    /// The error of this step, if any PE found one.
    pub fn outcome(&self) -> Result<()> {
        match self.pending {
            Some(marked) => Err(decode(marked)),
            None => Ok(()),
        }
    }
}

/// Counts the atoms of each PME rank in `dest` (of `m` ranks) per chunk as `place` cut them
/// (`chunk_counts` has one row of `m` per chunk, or one for all), and where each run of one
/// rank starts (each chunk starting one, as `place` leaves them).
fn recount(dest: &[u32], m: usize, chunk_counts: &mut [usize], runs: &mut Vec<u32>) {
    chunk_counts.fill(0);
    runs.clear();
    let chunks = chunk_counts.len() / m.max(1);
    let chunk = if chunks > 1 { PARALLEL_MIN } else { dest.len().max(1) };
    for (c, (counts, part)) in chunk_counts.chunks_exact_mut(m).zip(dest.chunks(chunk)).enumerate() {
        let start = (c * chunk) as u32;
        for (i, &d) in part.iter().enumerate() {
            counts[d as usize] += 1;
            if i == 0 || part[i - 1] != d {
                runs.push(start + i as u32);
            }
        }
    }
}

/// The most home atoms any PE holds, agreed by every PE, and an error on every PE when a PE
/// that only does PME (not a particle PE) was given home atoms.
///
/// # Collective
/// One max-reduction.
pub(super) fn agree_home(rt: &Runtime, particle: bool, home: &[Particle]) -> Result<usize> {
    let me = rt.my_pe();
    let misplaced = if particle || home.is_empty() { 0 } else { me as u64 + 1 };
    let mut agreed = [home.len() as u64, misplaced];
    rt.max_u64(&mut agreed)?;
    if agreed[1] > 0 {
        let pe = agreed[1] - 1;
        return Err(Error::CollectiveConfig(format!(
            "PE {pe} is a PME-only rank but was given home atoms; with a subset of PEs doing \
             PME, the atoms belong to the other PEs"
        )));
    }
    Ok(agreed[0] as usize)
}

pub(super) fn marker(atom: u32, pe: usize) -> u64 {
    ERROR | (pe as u64 & PE_MASK) << 32 | atom as u64
}

/// The marker a relay returns to its particle PEs when the second hop failed on it with
/// another error than an atom too far: no PE names an atom with it.
pub(super) const RELAY_FAILED: u64 = ERROR | PE_MASK << 32 | u32::MAX as u64;

fn decode(marked: u64) -> Error {
    if marked == RELAY_FAILED {
        return Error::Verification(
            "the relay PME rank of this PE failed in the second hop of this step (its own error \
             says why); no forces were delivered"
                .to_string(),
        );
    }
    Error::MovedTooFar { atom: marked as u32, pe: ((marked >> 32) & PE_MASK) as usize }
}

/// A PE returned a different number of forces than it was sent atoms.
pub(super) fn check_count(got: usize, expected: usize, from: usize) -> Result<()> {
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
    fn markers_round_trip() {
        assert_eq!(decode(marker(12345, 3)), Error::MovedTooFar { atom: 12345, pe: 3 });
        assert!(matches!(decode(RELAY_FAILED), Error::Verification(m) if m.contains("relay")));
        assert!(
            marker(u32::MAX, (1 << 31) - 2) < RELAY_FAILED
                && marker(u32::MAX - 1, (1 << 31) - 1) < RELAY_FAILED
        );
        assert_eq!(decode(marker(u32::MAX, 1 << 20)), Error::MovedTooFar { atom: u32::MAX, pe: 1 << 20 });
        assert!(marker(0, 0) & ERROR != 0);
    }
}
