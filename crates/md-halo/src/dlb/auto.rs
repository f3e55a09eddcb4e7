//! When `Dlb::Auto` turns balancing on and off: GROMACS's rules, as a state machine every
//! PE runs on the same figures.

/// The imbalance cost that turns balancing on under `Dlb::Auto`.
const LOSS_TO_TURN_ON: f64 = 0.02;
/// Under `Dlb::Auto`, the measured intervals before the first judgement.
const INTERVALS_BEFORE_AUTO: u64 = 2;
/// Under `Dlb::Auto`, intervals with balancing on between checks that it still helps
/// (GROMACS's `c_checkTurnDlbOffInterval`).
const CHECK_OFF_INTERVAL: u64 = 20;
/// Under `Dlb::Auto`, after balancing was turned off: intervals before it may be turned on
/// again (GROMACS's `c_checkTurnDlbOnInterval`), and the span within which a second slowdown
/// turns it off for good (ten such intervals, as GROMACS counts).
const RETRY_INTERVAL: u64 = 100;
/// The weight of the newest interval in the running average of the step time with balancing.
const AVERAGE_FACTOR: f64 = 0.1;

/// What [`AutoState::after_interval`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    Stay,
    On,
    Off,
}

/// When `Dlb::Auto` turns balancing on and off, GROMACS's rules (`dd_partition_system`,
/// `turn_on_dlb`, `turn_off_dlb` in its `domdec/partition.cpp`), from figures every PE has
/// alike:
///
/// - **On** when the imbalance has cost 2 % of the run time, judged at each interval from the
///   third on (GROMACS judges every 100 partitionings, to spare the communication; here the
///   figures come with the repartition's reduction anyway), unless equal domains are within
///   5 % of the least width, where balancing has no room and is not tried again.
/// - The mean step time before (over the intervals without balancing) is kept; with balancing
///   on, a running average of the step time (weight 0.1 for the newest interval). Every 20
///   intervals, if the average exceeds the time before, balancing is turned **off** and the
///   boundaries go back to equal domains.
/// - Once they are back, the first interval is left out (the search and caches settle) and
///   the second compared with the average under balancing: if it is faster, balancing slowed
///   the run; a second such finding within 1 000 intervals turns balancing off **for good**,
///   and after one, it is tried again no sooner than 100 intervals on.
#[derive(Clone, Debug, Default)]
pub(crate) struct AutoState {
    /// Intervals seen.
    intervals: u64,
    on: bool,
    /// Intervals since balancing was turned on.
    on_for: u64,
    /// Step time without balancing: summed over intervals, and their count.
    off_time: f64,
    off_intervals: u64,
    /// The mean step time before balancing was turned on.
    before: f64,
    /// The running average of the step time with balancing on.
    average: Option<f64>,
    /// Balancing was turned off; the intervals since the boundaries were back at equal domains.
    turned_off: bool,
    back_for: Option<u64>,
    /// The interval of the last finding that balancing slowed the run.
    slower_at: Option<u64>,
    /// No turning on before this interval.
    not_before: u64,
    pub(super) off_for_good: bool,
    pub(super) times_off: u64,
}

impl AutoState {
    /// Whether the boundaries should go back to equal domains: balancing was turned off.
    pub(crate) fn wants_equal(&self) -> bool {
        !self.on && self.times_off > 0
    }

    /// The decision after one more interval: `step` its mean step time, `waiting` the run's
    /// share spent waiting for the imbalance so far, `room` whether equal domains leave room to
    /// balance, `back` whether the boundaries are at equal domains.
    pub(crate) fn after_interval(&mut self, step: f64, waiting: f64, room: bool, back: bool) -> Turn {
        self.intervals += 1;
        if self.on {
            self.on_for += 1;
            let average = self.average.map_or(step, |a| (1.0 - AVERAGE_FACTOR) * a + AVERAGE_FACTOR * step);
            self.average = Some(average);
            if self.on_for.is_multiple_of(CHECK_OFF_INTERVAL) && average > self.before {
                self.on = false;
                self.turned_off = true;
                self.back_for = None;
                self.times_off += 1;
                (self.off_time, self.off_intervals) = (0.0, 0);
                return Turn::Off;
            }
            return Turn::Stay;
        }
        // Before balancing was ever turned off the grid is what the exchange was built with,
        // equal or not; after, the boundaries go back to equal domains first.
        if self.off_for_good || (self.times_off > 0 && !back) {
            return Turn::Stay;
        }
        // Without balancing, at equal domains: the first interval is left out.
        let back_for = self.back_for.map_or(0, |b| b + 1);
        self.back_for = Some(back_for);
        if back_for == 0 {
            return Turn::Stay;
        }
        self.off_time += step;
        self.off_intervals += 1;
        if self.turned_off {
            self.turned_off = false;
            if self.average.is_some_and(|a| step < a) {
                if self.slower_at.is_some_and(|at| self.intervals < at + 10 * RETRY_INTERVAL) {
                    self.off_for_good = true;
                }
                self.slower_at = Some(self.intervals);
                self.not_before = self.intervals + RETRY_INTERVAL;
                return Turn::Stay;
            }
        }
        if self.intervals <= INTERVALS_BEFORE_AUTO
            || self.intervals < self.not_before
            || waiting < LOSS_TO_TURN_ON
        {
            return Turn::Stay;
        }
        if !room {
            self.off_for_good = true;
            return Turn::Stay;
        }
        self.on = true;
        self.on_for = 0;
        self.before = self.off_time / self.off_intervals as f64;
        self.average = None;
        Turn::On
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `n` intervals of step time `step` and waiting share `waiting` (room to balance,
    /// domains back at equal widths while balancing is off), and returns the decisions.
    fn feed(auto: &mut AutoState, n: usize, step: f64, waiting: f64) -> Vec<Turn> {
        (0..n).map(|_| auto.after_interval(step, waiting, true, !auto.on)).collect()
    }

    #[test]
    fn auto_turns_on_from_the_third_interval_at_two_percent() {
        let mut auto = AutoState::default();
        assert_eq!(feed(&mut auto, 5, 1.0, 0.019), vec![Turn::Stay; 5]);
        let mut auto = AutoState::default();
        assert_eq!(feed(&mut auto, 3, 1.0, 0.02), vec![Turn::Stay, Turn::Stay, Turn::On]);
        // Equal domains with no room to shrink: never tried.
        let mut cramped = AutoState::default();
        let turns: Vec<Turn> = (0..200).map(|_| cramped.after_interval(1.0, 0.5, false, true)).collect();
        assert!(turns.iter().all(|&t| t == Turn::Stay) && cramped.off_for_good);
    }

    #[test]
    fn auto_keeps_balancing_that_helps() {
        let mut auto = AutoState::default();
        feed(&mut auto, 3, 1.0, 0.1);
        assert!(auto.on);
        assert!(feed(&mut auto, 500, 0.8, 0.1).iter().all(|&t| t == Turn::Stay));
        assert!(auto.on && auto.times_off == 0);
    }

    #[test]
    fn auto_turns_off_balancing_that_slows_the_steps_and_gives_up_on_the_second_time() {
        let mut auto = AutoState::default();
        feed(&mut auto, 3, 1.0, 0.1);
        // Slower with balancing: off at the 20th interval with it, not before.
        let turns = feed(&mut auto, 20, 1.2, 0.1);
        assert_eq!(turns.iter().position(|&t| t == Turn::Off), Some(19), "{turns:?}");
        // Two intervals while the boundaries go back, then one left out and one faster than
        // with balancing: slower with it, so not tried for 100 intervals.
        assert_eq!(auto.after_interval(1.0, 0.1, true, false), Turn::Stay);
        assert_eq!(auto.after_interval(1.0, 0.1, true, false), Turn::Stay);
        let turns = feed(&mut auto, 120, 1.0, 0.1);
        let on = turns.iter().position(|&t| t == Turn::On).expect("tried again");
        assert!((99..=101).contains(&on), "tried again {on} intervals after the finding");
        assert_eq!(auto.times_off, 1);
        assert!(!auto.off_for_good);
        // Slower again: off within 20 intervals, and after the second finding within 1 000
        // intervals, for good.
        let mut slow = 0;
        while auto.on {
            auto.after_interval(1.2, 0.1, true, false);
            slow += 1;
        }
        assert!(slow <= 20 && auto.times_off == 2, "{slow} intervals, {auto:?}");
        let turns = feed(&mut auto, 3000, 1.0, 0.5);
        assert!(turns.iter().all(|&t| t == Turn::Stay), "{auto:?}");
        assert!(auto.off_for_good && !auto.on, "{auto:?}");
    }

    #[test]
    fn auto_tries_again_at_once_when_the_steps_without_balancing_are_no_faster() {
        let mut auto = AutoState::default();
        feed(&mut auto, 3, 1.0, 0.1);
        feed(&mut auto, 20, 1.2, 0.1);
        assert_eq!(auto.times_off, 1);
        // The steps without balancing are slower still (the system changed): back on at the
        // first interval after the one left out.
        let turns = feed(&mut auto, 3, 1.5, 0.1);
        assert_eq!(turns, vec![Turn::Stay, Turn::On, Turn::Stay], "{turns:?}");
    }
}
