//! The Verlet buffer rule: how much range beyond the cutoff a halo needs so that, between two
//! repartitions, no pair comes within the cutoff unseen.

/// Boltzmann's constant in kJ/(mol K), GROMACS's units.
pub const BOLTZMANN: f64 = 0.008_314_462_618;

/// How many standard deviations of the thermal speed along one direction the buffer allows
/// an atom. The chance that a given atom's speed exceeds it in one repartition interval is
/// about 1.4e-15 (the tail of the Maxwell distribution of speeds, `sqrt(2/pi) s e^(-s^2/2)`
/// at s = 8.5), so that ten million atoms repartitioned a hundred thousand times expect 1e-3
/// such atoms; the displacement check of
/// [`HaloBuilder::verlet_buffer`](crate::HaloBuilder::verlet_buffer) reports any.
pub const SPEED_DEVIATIONS: f64 = 8.5;

/// The Verlet buffer, in nm, for atoms at `temperature` (K), the lightest of which that
/// moves has `lightest_mass` (u, g/mol), repartitioned every `interval` ps (steps between
/// repartitions times the time step): two atoms approaching each other head-on, each at
/// [`SPEED_DEVIATIONS`] times its thermal speed along one direction, `sqrt(kT/m)`, for the
/// whole interval. The halo's range ([`DdGrid`](crate::DdGrid)) is then the cutoff plus
/// this buffer, and [`HaloBuilder::verlet_buffer`](crate::HaloBuilder::verlet_buffer) with
/// it checks every repartition that no atom moved more than half of it.
///
/// Ballistic motion over the interval is the worst case while the interval is short beside
/// the time between collisions (picoseconds in liquids), as it is at 10 to 100 steps of
/// 1 or 2 fs. Constrained hydrogens move with their heavy atom: pass the heavy atom's mass.
///
/// For argon (39.948 u) at 94 K repartitioned every 10 steps of 2 fs, 0.048 nm.
pub fn verlet_buffer(temperature: f64, lightest_mass: f64, interval: f64) -> f32 {
    let speed = (BOLTZMANN * temperature / lightest_mass).sqrt();
    (2.0 * SPEED_DEVIATIONS * speed * interval) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argon_buffer_matches_the_documented_figure() {
        let buffer = verlet_buffer(94.0, 39.948, 10.0 * 0.002);
        assert!((buffer - 0.0476).abs() < 0.0005, "{buffer}");
        // Twice the interval, twice the buffer; four times the mass, half.
        assert!((verlet_buffer(94.0, 39.948, 0.04) - 2.0 * buffer).abs() < 1e-6);
        assert!((verlet_buffer(94.0, 4.0 * 39.948, 0.02) - 0.5 * buffer).abs() < 1e-6);
    }
}
