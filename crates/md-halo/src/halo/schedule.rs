//! Which parts of a step's exchanges can travel while the kernel computes, from the plan
//! alone ([`Schedule`]): no runtime, no communication.
//!
//! Coordinates: a pulse can leave before the kernel when it crosses between PEs and sends
//! home atoms only; pulses that forward atoms an earlier pulse brought (the later pulses of a
//! dimension, the first pulse of a later dimension on a grid of several) wait for those. So
//! the leading pulses start, the rest run when the kernel is done with the home pairs.
//!
//! Forces, in reverse: a pulse's halo forces are final once the kernel has written them and
//! every later pulse that sends some of its atoms on has added the forces returned for them.
//! A pulse no later pulse forwards from can leave at once; the others go, in reverse order,
//! as the finish adds what they wait for. Every return is added in the blocking order (pulse
//! by pulse in reverse), so the forces are the same bits either way.
//!
//! A home atom in no send list gets no force back: its total is known when the kernel is done
//! ([`Schedule::settled`]); the others' come with the finish ([`Schedule::returning`]).

/// What one pulse of the plan says about the overlap: where it sends and what it sends and
/// receives.
#[derive(Clone, Copy, Debug)]
pub(super) struct PulseShape<'a> {
    /// Whether the pulse crosses between PEs (else it makes periodic images here).
    pub exchanged: bool,
    /// Local indices of the atoms it sends, increasing.
    pub send: &'a [u32],
    /// Where its received atoms land, and how many.
    pub offset: usize,
    pub count: usize,
}

/// The parts of a step's exchanges that travel while the kernel computes (module docs).
#[derive(Debug, Default)]
pub(super) struct Schedule {
    /// The leading pulses whose coordinates leave when the exchange starts.
    pub x_early: usize,
    /// Per pulse: whether its forces leave when the force exchange starts.
    pub f_early: Vec<bool>,
    /// Per pulse: where the forces returned to it land in the force scratch (each pulse its
    /// own region, since several may be in flight at once).
    pub scratch_at: Vec<usize>,
    /// The scratch all pulses' returns need.
    pub scratch_len: usize,
    /// Home atoms in no send list, increasing: their forces are final after the kernel.
    pub settled: Vec<u32>,
    /// Home atoms in some send list, increasing: their forces are final after the finish.
    pub returning: Vec<u32>,
}

impl Schedule {
    /// The schedule of the pulses a step runs, in plan order, for `n_home` home atoms.
    pub fn of(pulses: &[PulseShape<'_>], n_home: usize) -> Self {
        let home_only = |p: &PulseShape<'_>| p.send.last().is_none_or(|&i| (i as usize) < n_home);
        let x_early = pulses.iter().take_while(|p| p.exchanged && home_only(p)).count();
        let f_early = (0..pulses.len())
            .map(|q| {
                let region = pulses[q].offset..pulses[q].offset + pulses[q].count;
                let forwarded = pulses[q + 1..].iter().any(|later| {
                    let at = later.send.partition_point(|&i| (i as usize) < region.start);
                    later.send.get(at).is_some_and(|&i| region.contains(&(i as usize)))
                });
                pulses[q].exchanged && !forwarded
            })
            .collect();
        let mut scratch_at = Vec::with_capacity(pulses.len());
        let mut scratch_len = 0;
        for p in pulses {
            scratch_at.push(scratch_len);
            scratch_len += p.send.len();
        }
        let mut sent = vec![false; n_home];
        for &i in pulses.iter().flat_map(|p| p.send) {
            if let Some(flag) = sent.get_mut(i as usize) {
                *flag = true;
            }
        }
        let (mut settled, mut returning) = (Vec::new(), Vec::new());
        for (i, &s) in sent.iter().enumerate() {
            if s { &mut returning } else { &mut settled }.push(i as u32);
        }
        Schedule { x_early, f_early, scratch_at, scratch_len, settled, returning }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(exchanged: bool, send: &[u32], offset: usize, count: usize) -> PulseShape<'_> {
        PulseShape { exchanged, send, offset, count }
    }

    #[test]
    fn one_pulse_starts_both_ways() {
        let send = [1, 3];
        let s = Schedule::of(&[shape(true, &send, 5, 2)], 5);
        assert_eq!((s.x_early, s.f_early.clone()), (1, vec![true]));
        assert_eq!((s.settled, s.returning), (vec![0, 2, 4], vec![1, 3]));
        assert_eq!((s.scratch_at, s.scratch_len), (vec![0], 2));
    }

    #[test]
    fn forwarding_pulses_wait() {
        // Home atoms 0..4; pulse 0 brings 4..6, pulse 1 (the next dimension) sends home atom 2
        // and atom 5 of pulse 0's region on, and brings 6..9; pulse 2 makes images of 0 and 7.
        let (s0, s1, s2) = ([0, 1], [2, 5], [0, 7]);
        let pulses = [shape(true, &s0, 4, 2), shape(true, &s1, 6, 3), shape(false, &s2, 9, 2)];
        let s = Schedule::of(&pulses, 4);
        assert_eq!(s.x_early, 1, "pulse 1 forwards pulse 0's atoms");
        // Pulse 0's region is forwarded by pulse 1, pulse 1's by the images; pulse 2 is local.
        assert_eq!(s.f_early, vec![false, false, false]);
        assert_eq!((s.settled, s.returning), (vec![3], vec![0, 1, 2]));
        assert_eq!((s.scratch_at, s.scratch_len), (vec![0, 2, 4], 6));
        // Without the images, pulse 1 is forwarded by none.
        let s = Schedule::of(&pulses[..2], 4);
        assert_eq!(s.f_early, vec![false, true]);
    }
}
