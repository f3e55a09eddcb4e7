//! Dynamic load balancing: domain boundaries that follow the measured load, as GROMACS's DLB
//! moves them (`src/gromacs/domdec/cellsizes.cpp`). What a PE's load is, and how the
//! boundaries move, is [`Dlb`]'s to say; here the measure ([`Balancer`]) and the decision.
//!
//! At each repartition the PEs sum the loads per slab of domains along each split dimension,
//! with the run's load, step time and steps: one reduction of `Nx + Ny + Nz + 3` values, or of
//! `Nx + 3` where rows are staggered (each row's loads then come from its own PEs, `rows.rs`).
//! One maximum of three values follows: the largest load, whether any row is off equal
//! domains, and how far the way back to them may go at once. Every PE then computes the same
//! new boundaries from the same sums (`bounds.rs`); on staggered rows the PEs of a row compute
//! that row from the same row loads, and each PE keeps the rows near its domain.
//!
//! `bounds.rs` holds the rule that moves the boundaries, `rows.rs` the board on which the PEs
//! share their rows' loads and boundaries, `auto.rs` when [`Dlb::Auto`] turns balancing on
//! and off.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use onesided::{Agreement, Collectives, ReduceOp, Runtime};

use crate::error::{Error, Result};
use crate::grid::{DdGrid, equal_bounds};

mod auto;
mod bounds;
mod rows;

use auto::{AutoState, Turn};
use bounds::{balanced_bounds, equal_by, moved_row, share_toward_equal, toward_equal};
pub(crate) use rows::RowBoard;

/// Whether the domain boundaries follow the load, with GROMACS's `-dlb` meanings
/// ([`HaloBuilder::load_balancing`](crate::HaloBuilder::load_balancing)).
///
/// The load of a PE is its step's work outside the exchanges, between two repartitions: the
/// time from each [`Step::move_f`](crate::Step::move_f) returning to the next
/// [`HaloExchange::move_x`](crate::HaloExchange::move_x) (the update), restarted when a
/// repartition returns (so that a search step holds the search but not the repartition's
/// communication), plus the time from that `move_x` returning to the next `move_f` (the force
/// work); in the split step also the work while an exchange is in flight, without the
/// waits in its finish; or what the engine measured itself
/// ([`Step::record_load`](crate::Step::record_load)).
/// GROMACS's balance region also holds the coordinate halo: its wait is a neighbour's lateness
/// (the update of a loaded domain is longer), which would count on the domain that waited, so
/// here it is left out. The loads are summed over the steps with the largest one left out (a
/// step the system or the network held up says nothing of the domain), as GROMACS counts its
/// force cycles.
///
/// At each repartition every PE computes the same boundaries from the summed loads, by
/// GROMACS's rule:
///
/// - a slab's width is scaled by `1 - s (L_i / L̄ - 1)`, with `s` one half (under-relaxation),
///   less where that would change a slab by more than 10 % at once;
/// - no slab gets narrower than [`DdGrid::min_width`] (its pulses must still cover the range),
///   with GROMACS's iterative clamping;
/// - no boundary moves past the middle of either slab it bounded, so an atom changes domain by
///   at most one along a dimension within its row, as migration needs.
///
/// The new grid is taken up once the repartition's checks pass, before atoms migrate. On a
/// grid of one split dimension the boundaries are one set for it. With two or three, as
/// GROMACS does, they are staggered ([`DdGrid::with_rows`]): x's from the x slabs' loads, each
/// x slab's y boundaries from the loads of its (x, y) columns, each column's z boundaries from
/// those of its own domains, which balances loads that vary across a slab as well. Each row
/// then moves towards where its loads want it as far as its neighbouring rows' boundaries
/// allow, and an atom that crosses into a neighbouring row may find itself one domain further
/// off there, which migration allows too. A PE's grid then holds only the rows near its domain
/// ([`DdGrid::near`]): what a repartition sends and what a PE keeps grow with the domains along
/// a dimension and with the neighbourhood, not with the PE count
/// ([`collective_whole_grid`] gathers every row, for output). [`collective_load_report`] gives
/// the balance in GROMACS's terms.
///
/// [`collective_whole_grid`]: crate::HaloExchange::collective_whole_grid
/// [`collective_load_report`]: crate::HaloExchange::collective_load_report
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dlb {
    /// Equal domains throughout; the load imbalance is still measured and reported.
    #[default]
    No,
    /// Boundaries move at every repartition from the start.
    Yes,
    /// Boundaries start moving once the imbalance has cost 2 % of the run time or more
    /// (GROMACS's `DD_PERF_LOSS_DLB_ON`), judged at each repartition from the third on; as
    /// GROMACS does, balancing turns itself off again when the steps got slower with it (every
    /// 20 repartitions, a running average of the step time under balancing is compared with
    /// the mean step time before it): the boundaries go back to equal domains, each
    /// repartition as far along the straight line to them as the half-slab limit allows, it is
    /// tried again no sooner than 100 repartitions later, and after a second such slowdown
    /// within 1 000 no more.
    Auto,
}

impl Dlb {
    /// `no`, `yes` or `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Dlb::No => "no",
            Dlb::Yes => "yes",
            Dlb::Auto => "auto",
        }
    }
}

impl fmt::Display for Dlb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dlb {
    type Err = Error;

    fn from_str(s: &str) -> Result<Dlb> {
        match s {
            "no" => Ok(Dlb::No),
            "yes" => Ok(Dlb::Yes),
            "auto" => Ok(Dlb::Auto),
            other => Err(Error::Config(format!("dynamic load balancing '{other}': use auto, yes or no"))),
        }
    }
}

/// The load balance of a run so far, the same on every PE, in GROMACS's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadReport {
    /// GROMACS's "average load imbalance": the summed largest load over the summed mean
    /// load, less one (0.25: the slowest PE computed 25 % longer than the average).
    pub imbalance: f64,
    /// GROMACS's "part of the total run time spent waiting due to load imbalance": the summed
    /// difference between the largest and the mean load over the summed mean step time.
    pub waiting: f64,
    /// Whether the boundaries were moving at the end.
    pub balancing: bool,
    /// Repartitions that moved the boundaries.
    pub moves: u64,
    /// Of those, how many had some slab held at its narrowest ([`DdGrid::min_width`]) or a
    /// boundary held at the middle of a slab it bounded, or staggered rows held short of
    /// their loads' boundaries by the limits between neighbouring rows.
    pub limited: u64,
    /// Under [`Dlb::Auto`]: how often balancing was turned off because the steps were slower
    /// with it, over the whole run (a report reset keeps it).
    pub turned_off: u64,
    /// Under [`Dlb::Auto`]: whether balancing will no longer be tried (it slowed the run twice,
    /// or equal domains leave it no room).
    pub off_for_good: bool,
    /// Steps measured.
    pub steps: u64,
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "average load imbalance {:.1} %, part of the run time waiting for it {:.1} %, dynamic \
             load balancing {} ({} moves, {} limited)",
            100.0 * self.imbalance,
            100.0 * self.waiting,
            if self.balancing { "on" } else { "off" },
            self.moves,
            self.limited
        )?;
        if self.turned_off > 0 {
            write!(f, ", turned off {} time(s) for slowing the steps", self.turned_off)?;
        }
        if self.off_for_good {
            f.write_str(", no longer tried")?;
        }
        Ok(())
    }
}

/// A slab is kept this much wider than its least width, against rounding.
const MARGIN: f64 = 1.0001;
/// Under [`Dlb::Auto`], balancing is not tried where equal domains are less than this much
/// wider than the least width (GROMACS's 1.05 in `turn_on_dlb`): there is no room to move.
const ROOM_TO_BALANCE: f64 = 1.05;

/// One PE's load measure and the run's totals (the totals are the same on every PE).
#[derive(Clone, Debug, Default)]
pub(crate) struct Balancer {
    mode: Dlb,
    on: bool,
    /// Under [`Dlb::Auto`]: when to turn balancing on and off.
    auto: AutoState,
    /// When the last move_x started.
    step_start: Option<Instant>,
    /// When the step's work last resumed: a move_f, a repartition or a move_x returned.
    opened: Option<Instant>,
    /// The step's work so far outside the exchanges' waits: the update since the last move_f
    /// or repartition, and the work while a split step's exchange was in flight.
    before_x: Duration,
    /// The engine's own measure of this step's load.
    recorded: Option<Duration>,
    /// This PE's load a report gathered since the last repartition (0 when none did), which
    /// the next repartition balances with its own.
    carried: u64,
    /// This interval: summed and largest load, step time, steps.
    load: Duration,
    largest: Duration,
    step_time: Duration,
    steps: u64,
    /// The run so far, in seconds, summed over intervals.
    total_max: f64,
    total_mean: f64,
    total_step: f64,
    moves: u64,
    limited: u64,
    total_steps: u64,
}

impl Balancer {
    pub(crate) fn new(mode: Dlb) -> Balancer {
        Balancer { mode, on: mode == Dlb::Yes, ..Balancer::default() }
    }

    /// Whether equal domains leave balancing room along every split dimension.
    fn room(grid: &DdGrid) -> bool {
        (0..3).all(|d| {
            grid.dims()[d] == 1 || 1.0 / grid.dims()[d] as f64 >= ROOM_TO_BALANCE * grid.min_width(d)
        })
    }

    pub(crate) fn mode(&self) -> Dlb {
        self.mode
    }

    /// A move_x starts: the time since the last one is a step.
    pub(crate) fn x_starts(&mut self) {
        let now = Instant::now();
        if let Some(start) = self.step_start.replace(now) {
            self.step_time += now - start;
        }
        self.before_x += self.opened.take().map_or(Duration::ZERO, |opened| now - opened);
    }

    /// A move_x returned: the force work starts.
    pub(crate) fn x_done(&mut self) {
        self.opened = Some(Instant::now());
    }

    /// A move_f or a repartition returned: the step's work (the update) starts again; a
    /// repartition restarts it, so that the search step holds the search and not the
    /// repartition's communication.
    pub(crate) fn reopen(&mut self) {
        self.opened = Some(Instant::now());
        self.before_x = Duration::ZERO;
    }

    /// A finish of an exchange in flight starts: its wait is not the PE's load, the work
    /// since the start was.
    pub(crate) fn pauses(&mut self) {
        if let Some(opened) = self.opened.take() {
            self.before_x += opened.elapsed();
        }
    }

    /// A start of an exchange in flight, or its finish, returned: the work goes on.
    pub(crate) fn resumes(&mut self) {
        self.opened = Some(Instant::now());
    }

    /// The engine's own measure of this step's load, replacing the work timed here.
    pub(crate) fn record(&mut self, load: Duration) {
        self.recorded = Some(load);
    }

    /// A move_f starts: the step's load is known.
    pub(crate) fn f_starts(&mut self) {
        let load = match (self.recorded.take(), self.opened.take()) {
            (Some(load), _) => load,
            (None, Some(opened)) => std::mem::take(&mut self.before_x) + opened.elapsed(),
            (None, None) => return,
        };
        self.load += load;
        self.largest = self.largest.max(load);
        self.steps += 1;
    }

    /// This interval's load: the sum with the largest step left out (where there are two or
    /// more), in nanoseconds.
    fn interval_load(&self) -> u64 {
        nanos(if self.steps > 1 { self.load - self.largest } else { self.load })
    }

    /// Gathers this interval's loads (every PE alike), adds them to the run's totals and
    /// starts a new interval; returns the grid with boundaries moved by the loads where
    /// `may_move`, balancing is on and something moved. On a grid whose rows it staggers
    /// (`board`: where balancing may move them), the returned grid holds the rows near `cell`
    /// ([`DdGrid::near`]).
    ///
    /// # Collective
    /// Every PE calls it with its own cell, its grid (the same, or the rows near its cell of
    /// the same, as the last call returned them), and the same `may_move`.
    pub(crate) fn collective_interval(
        &mut self,
        rt: &Runtime,
        grid: &DdGrid,
        cell: [usize; 3],
        may_move: bool,
        board: Option<&RowBoard<'_>>,
    ) -> Result<Option<DdGrid>> {
        let dims = grid.dims();
        let load = self.interval_load();
        // What balances: this interval's load and a report's since the last repartition.
        let balance = load + self.carried;
        self.carried = if may_move { 0 } else { balance };
        // Per slab along each dimension (along x only where rows are staggered: each row's
        // loads come from its own PEs), then the whole load, the step time and the steps.
        let staggers = grid.staggers();
        let split = if staggers { 1 } else { 3 };
        let slabs: usize = dims[..split].iter().sum();
        let mut sums = vec![0u64; slabs + 3];
        let mut at = 0;
        for d in 0..split {
            sums[at + cell[d]] = balance;
            at += dims[d];
        }
        sums[at] = load;
        sums[at + 1] = nanos(self.step_time);
        sums[at + 2] = self.steps;
        rt.all_reduce(ReduceOp::Sum, &mut sums)?;
        // The largest load; whether any row is off equal domains, and how far the way back
        // may go at once (the smallest share any row's half-slab limit allows): every row is
        // some PE's own, so the extremes over the PEs are those over the rows.
        let own: Vec<&[f64]> = (0..3).map(|d| grid.bounds(d, cell)).collect();
        let uneven = own.iter().enumerate().any(|(d, b)| *b != equal_bounds(dims[d]));
        let back = own.iter().map(|b| share_toward_equal(b)).fold(1.0, f64::min);
        let mut agreement = Agreement::new();
        let (largest, uneven, back) = (agreement.max(load), agreement.any(uneven), agreement.min_f64(back));
        let agreed = agreement.collective_run(rt)?;
        let (largest, uniform, back) = (agreed.get(largest), !agreed.get(uneven), agreed.get(back));
        let n = rt.n_pes() as f64;
        let (total, step_time, steps) = (sums[at] as f64 * 1e-9, sums[at + 1] as f64 * 1e-9, sums[at + 2]);
        self.load = Duration::ZERO;
        self.largest = Duration::ZERO;
        self.step_time = Duration::ZERO;
        self.steps = 0;
        if steps > 0 {
            self.total_max += largest as f64 * 1e-9;
            self.total_mean += total / n;
            self.total_step += step_time / n;
            self.total_steps += steps;
        }
        if steps > 0 && self.mode == Dlb::Auto {
            let step = step_time / steps as f64;
            match self.auto.after_interval(step, self.report().waiting, Balancer::room(grid), uniform) {
                Turn::On => self.on = true,
                Turn::Off => self.on = false,
                Turn::Stay => {}
            }
        }
        // After balancing was turned off, the boundaries go back to equal domains; decided
        // from the grid itself, so that a repartition that failed after this call leaves
        // nothing half done.
        let returning = self.mode == Dlb::Auto && self.auto.wants_equal() && !uniform;
        if !may_move || !(self.on || returning) {
            return Ok(None);
        }
        if staggers {
            let Some(board) = board else { return Ok(None) };
            return if returning {
                collective_back_near(rt, grid, cell, back)
            } else if sums[..slabs].iter().sum::<u64>() == 0 {
                Ok(None)
            } else {
                let moved = self.collective_balance_rows(rt, grid, cell, &sums[..slabs], balance, board)?;
                self.moves += u64::from(moved.is_some());
                Ok(moved)
            };
        }
        if returning {
            let bounds: [Vec<f64>; 3] = std::array::from_fn(|d| toward_equal(grid.bounds(d, cell)));
            return Ok(Some(grid.with_bounds(bounds)?));
        }
        // The loads to balance by: this interval's and a report's since the last repartition.
        if sums[..slabs].iter().sum::<u64>() == 0 {
            return Ok(None);
        }
        let mut bounds: [Vec<f64>; 3] = std::array::from_fn(|d| grid.bounds(d, cell).to_vec());
        let mut limited = false;
        let mut at = 0;
        for d in 0..3 {
            if dims[d] > 1 {
                let loads: Vec<f64> = sums[at..at + dims[d]].iter().map(|&l| l as f64).collect();
                let (moved, held) = balanced_bounds(grid.bounds(d, cell), &loads, grid.min_width(d) * MARGIN);
                bounds[d] = moved;
                limited |= held;
            }
            at += dims[d];
        }
        if (0..3).all(|d| bounds[d] == grid.bounds(d, cell)) {
            return Ok(None);
        }
        self.moves += 1;
        self.limited += u64::from(limited);
        Ok(Some(grid.with_bounds(bounds)?))
    }

    /// Staggered boundaries from the loads, GROMACS's way: x's from the x slabs' summed loads
    /// (`slabs`, every PE alike); from every PE's `load`, this PE's x slab's y boundaries from
    /// its (x, y) columns' loads and its column's z boundaries from its domains' loads, each row by
    /// [`balanced_bounds`] and then as far as its neighbouring rows allow ([`moved_row`]);
    /// the rows near this PE from the PEs that computed them ([`RowBoard`]). Returns the grid
    /// of those rows where anything moved anywhere, after every PE agreed that its rows keep
    /// the limits.
    ///
    /// # Collective
    /// Every PE calls it.
    fn collective_balance_rows(
        &mut self,
        rt: &Runtime,
        grid: &DdGrid,
        cell: [usize; 3],
        slabs: &[u64],
        load: u64,
        board: &RowBoard<'_>,
    ) -> Result<Option<DdGrid>> {
        let dims = grid.dims();
        let row_loads = board.collective_row_loads(rt, grid, cell, load)?;
        let as_f64 = |loads: &[u64]| loads.iter().map(|&l| l as f64).collect::<Vec<f64>>();
        let (x, mut limited) = if dims[0] > 1 {
            balanced_bounds(grid.bounds(0, cell), &as_f64(slabs), grid.min_width(0) * MARGIN)
        } else {
            (grid.bounds(0, cell).to_vec(), false)
        };
        let mut changed = x != grid.bounds(0, cell);
        let mut own: [Option<Vec<f64>>; 2] = [None, None];
        for (i, d) in [1, 2].into_iter().enumerate() {
            if dims[d] == 1 {
                continue;
            }
            let (old, least) = (grid.bounds(d, cell), grid.min_width(d) * MARGIN);
            let (target, held) = balanced_bounds(old, &as_f64(&row_loads[i]), least);
            let (row, short) = moved_row(grid, d, cell, &target, least);
            limited |= held || short;
            changed |= row != old;
            own[i] = Some(row);
        }
        let near = board.collective_near_rows(rt, grid, cell, own)?;
        let moved = grid.with_near_rows(cell, x, near);
        let mut agreement = Agreement::new();
        let failed = agreement.lowest_pe(moved.is_err());
        let (limited, changed) = (agreement.any(limited), agreement.any(changed));
        let agreed = agreement.collective_run(rt)?;
        let moved = agree_rows(rt.my_pe(), moved, agreed.get(failed))?;
        if !agreed.get(changed) {
            return Ok(None);
        }
        self.limited += u64::from(agreed.get(limited));
        Ok(Some(moved))
    }

    /// Forgets the run's totals (the boundaries and whether they move stay).
    pub(crate) fn reset_report(&mut self) {
        self.total_max = 0.0;
        self.total_mean = 0.0;
        self.total_step = 0.0;
        self.moves = 0;
        self.limited = 0;
        self.total_steps = 0;
    }

    /// The run's totals.
    pub(crate) fn report(&self) -> LoadReport {
        let (imbalance, waiting) = if self.total_mean > 0.0 {
            (
                self.total_max / self.total_mean - 1.0,
                (self.total_max - self.total_mean) / self.total_step.max(1e-12),
            )
        } else {
            (0.0, 0.0)
        };
        LoadReport {
            imbalance,
            waiting: waiting.clamp(0.0, 1.0),
            balancing: self.on,
            moves: self.moves,
            limited: self.limited,
            turned_off: self.auto.times_off,
            off_for_good: self.auto.off_for_good,
            steps: self.total_steps,
        }
    }
}

/// The boundaries one step back towards equal domains, every row `share` of its way (the
/// agreed smallest share any row's half-slab limit allows, so that no limit between rows
/// breaks and the way ends exactly at equal domains): x and the rows near `cell`, or equal
/// domains at a share of 1. Each PE moves the rows it holds itself; the PEs then agree that
/// theirs keep the limits, and where some PE's do not, all stay (`None`).
///
/// # Collective
/// Every PE calls it with the same `share`.
fn collective_back_near(rt: &Runtime, grid: &DdGrid, cell: [usize; 3], share: f64) -> Result<Option<DdGrid>> {
    if share >= 1.0 {
        return Ok(Some(grid.with_bounds(grid.dims().map(equal_bounds))?));
    }
    let moved = back_near(grid, cell, share);
    // Both ends of the line keep the limits, so this is not expected to fail; where a
    // rounding made some PE's rows fail, every PE keeps its boundaries (valid, and balanced)
    // rather than return an error at every repartition from here on.
    let mut agreement = Agreement::new();
    let failed = agreement.any(moved.is_err());
    Ok(if agreement.collective_run(rt)?.get(failed) { None } else { moved.ok() })
}

/// x and the rows near `cell`, each `share` of its way back to equal domains.
pub(super) fn back_near(grid: &DdGrid, cell: [usize; 3], share: f64) -> Result<DdGrid> {
    let dims = grid.dims();
    let x = equal_by(grid.bounds(0, cell), share);
    let near = [1, 2].map(|d| {
        let rows = if dims[d] > 1 { grid.view_rows(d, cell) } else { Vec::new() };
        rows.into_iter().map(|r| (r, equal_by(grid.bounds(d, grid.row_cell(d, r)), share))).collect()
    });
    grid.with_near_rows(cell, x, near)
}

/// This PE's grid of balanced rows where every PE's kept the limits (`failed`: the largest
/// failing PE plus one, 0 where none failed); otherwise the same kind of error on every PE,
/// the boundaries staying as they were.
fn agree_rows(me: usize, moved: Result<DdGrid>, failed: Option<usize>) -> Result<DdGrid> {
    match moved {
        Err(e) => Err(Error::CollectiveConfig(format!(
            "PE {me}: load balancing made boundaries that break a limit, so they stay as they were: {e}"
        ))),
        Ok(_) if let Some(pe) = failed => Err(Error::CollectiveConfig(format!(
            "PE {pe}: load balancing made boundaries that break a limit, so they stay as they were"
        ))),
        Ok(grid) => Ok(grid),
    }
}

/// A time in nanoseconds, capped well inside what the sums over PEs hold.
fn nanos(time: Duration) -> u64 {
    time.as_nanos().min(u64::MAX as u128 / 4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        for mode in [Dlb::No, Dlb::Yes, Dlb::Auto] {
            assert_eq!(mode.name().parse::<Dlb>().expect("parses"), mode);
        }
        let message = "sometimes".parse::<Dlb>().expect_err("bad").to_string();
        assert!(message.contains("use auto, yes or no"), "{message}");
    }
}
