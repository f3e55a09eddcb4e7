//! The halo plan of every domain at once, in one process and without a runtime: the same
//! pulses, the same send lists and counts as [`HaloExchange`](crate::HaloExchange) builds
//! collectively, for scale models and capacity planning (how many messages of what size a
//! rank sends at 4096 ranks) on one machine.
//!
//! The plan is built as the exchange builds it: dimension by dimension in the grid's
//! [exchange order](crate::DdGrid::exchange_order) (split dimensions first), each
//! domain sends down every local atom (home and received so far) whose reference fraction
//! along the dimension lies within the range above its lower face (on a staggered grid, above
//! the lower face its zone's rows need); a second pulse forwards what the first brought; the
//! receiver shifts the fractions of atoms that crossed the periodic boundary by one and notes
//! the dimension in their zone. Here every domain's local fractions are kept side by side and
//! each pulse delivers to all domains before the next starts.

use rayon::prelude::*;

use crate::grid::DdGrid;
use crate::pbc::RVec;
use crate::zone::{Zone, sends};

/// One pulse of one domain's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PulseTraffic {
    /// The dimension, 0 to 2 for x to z.
    pub dim: usize,
    /// The pulse within the dimension (0, or 1 for a range wider than a domain).
    pub pulse: usize,
    /// The PE this domain sends to (the domain below; itself with one domain along `dim`).
    pub to: usize,
    /// The atoms it sends.
    pub sent: usize,
    /// The atoms it receives from the domain above.
    pub received: usize,
}

/// One domain's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainTraffic {
    /// The domain's PE.
    pub pe: usize,
    /// Its home atoms.
    pub home: usize,
    /// Its pulses, in the order the exchange runs them.
    pub pulses: Vec<PulseTraffic>,
}

impl DomainTraffic {
    /// Home and halo atoms: the length of the domain's coordinate array.
    pub fn local(&self) -> usize {
        self.home + self.pulses.iter().map(|p| p.received).sum::<usize>()
    }
}

/// What load balancing ([`crate::Dlb`]) costs one domain at a repartition that moves the
/// boundaries, and what its grid holds, in values (8 bytes each), as the balancer does it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BalanceTraffic {
    /// Values in the sum-reduction over every PE: the slab loads of each split dimension (of
    /// x alone where rows are staggered) and the run's totals.
    pub reduced: usize,
    /// Values in the maximum over every PE.
    pub maxed: usize,
    /// Values this domain reads from other PEs: where rows are staggered, the loads of its
    /// column and its slab's columns, and the new rows near it.
    pub read: usize,
    /// Boundaries its grid holds afterwards.
    pub held: usize,
}

/// [`BalanceTraffic`] of domain `cell` of `grid`: from the same rows the balancer reads and a
/// balanced grid keeps ([`DdGrid::near`]), so that it grows with what the balancer's does.
pub fn balance_traffic(grid: &DdGrid, cell: [usize; 3]) -> BalanceTraffic {
    let dims = grid.dims();
    if !grid.staggers() {
        return BalanceTraffic {
            reduced: dims.iter().sum::<usize>() + 3,
            maxed: 3,
            read: 0,
            held: dims.iter().map(|n| n + 1).sum(),
        };
    }
    let (mut read, mut held) = (dims[1] + dims[2], dims[0] + 1);
    for (d, &n) in dims.iter().enumerate().skip(1) {
        if n == 1 {
            held += 2;
            continue;
        }
        let rows = grid.view_rows(d, cell).len();
        read += (rows - 1) * (n + 1);
        held += rows * (n + 1);
    }
    BalanceTraffic { reduced: dims[0] + 3, maxed: 3, read, held }
}

/// The halo plan of every domain of `grid` for the atoms at `positions` (all of them, any
/// positions: they are put into the box first), indexed by PE. The counts are those the
/// exchange's own plan has for the same atoms ([`HaloExchange::pulse_counts`]).
///
/// Memory: three `f64` and a byte per local atom of every domain, so about 25 bytes times the atoms
/// plus their halo copies; 10 million atoms over 4096 domains with a 1 nm range take a few
/// GiB.
///
/// # Panics
/// Where `grid` holds only the rows near one domain, as a balanced exchange's grid does
/// ([`DdGrid::near`]): the model places every atom, so it takes the whole grid
/// ([`HaloExchange::collective_whole_grid`]).
///
/// [`HaloExchange::pulse_counts`]: crate::HaloExchange::pulse_counts
/// [`HaloExchange::collective_whole_grid`]: crate::HaloExchange::collective_whole_grid
pub fn halo_traffic(grid: &DdGrid, positions: &[RVec]) -> Vec<DomainTraffic> {
    let pbc = *grid.pbc();
    let n = grid.len();
    let dims = grid.dims();
    // Each domain's local reference fractions and zones, home atoms first.
    let mut local: Vec<Vec<[f64; 3]>> = vec![Vec::new(); n];
    for &x in positions {
        let s = pbc.unit_fraction(x);
        local[grid.pe_of(grid.cell_of_fraction(s))].push(s);
    }
    let mut zones: Vec<Vec<Zone>> = local.iter().map(|l| vec![Zone::HOME; l.len()]).collect();
    let mut traffic: Vec<DomainTraffic> = local
        .iter()
        .enumerate()
        .map(|(pe, l)| DomainTraffic { pe, home: l.len(), pulses: Vec::new() })
        .collect();
    // Where the previous pulse's received atoms start, per domain.
    let mut previous = vec![0..0; n];
    for dim in grid.exchange_order() {
        let limits: Vec<[f64; 8]> = (0..n).map(|pe| grid.send_limits(grid.cell_of(pe), dim)).collect();
        for pulse in 0..grid.pulses()[dim] {
            // What every domain sends in this pulse.
            let sent: Vec<Vec<([f64; 3], Zone)>> = (0..n)
                .into_par_iter()
                .map(|pe| {
                    let candidates = if pulse == 0 { 0..local[pe].len() } else { previous[pe].clone() };
                    sends(&local[pe], &zones[pe], candidates, dim, limits[pe])
                        .map(|i| (local[pe][i as usize], zones[pe][i as usize]))
                        .collect()
                })
                .collect();
            // Delivered to the domain below, which shifts atoms that crossed the boundary.
            for pe in 0..n {
                let cell = grid.cell_of(pe);
                let to = grid.pe_of(grid.neighbour(cell, dim, false));
                let from = grid.pe_of(grid.neighbour(cell, dim, true));
                let receives_shifted = cell[dim] + 1 == dims[dim];
                let start = local[pe].len();
                local[pe].extend(sent[from].iter().map(|&(s, _)| {
                    let mut s = s;
                    if receives_shifted {
                        s[dim] += 1.0;
                    }
                    s
                }));
                zones[pe].extend(sent[from].iter().map(|&(_, zone)| zone.received_along(dim)));
                previous[pe] = start..local[pe].len();
                traffic[pe].pulses.push(PulseTraffic {
                    dim,
                    pulse,
                    to,
                    sent: sent[pe].len(),
                    received: sent[from].len(),
                });
            }
        }
    }
    traffic
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pbc::PbcBox;

    #[test]
    fn balancing_traffic_grows_with_the_rows_not_the_domains() {
        let cube = PbcBox::rectangular([20.0; 3]).expect("valid");
        let grid = |dims: [usize; 3]| DdGrid::new(dims, cube, 1.0, dims.iter().product()).expect("fits");
        let (small, large) = (grid([8, 8, 8]), grid([16, 8, 8]));
        let (a, b) = (balance_traffic(&small, [3, 3, 3]), balance_traffic(&large, [3, 3, 3]));
        // Twice the domains: the x slabs' loads and the x row grow by 8, nothing else.
        assert_eq!(
            (b.reduced - a.reduced, b.maxed, b.read, b.held - a.held),
            (8, 3, a.read, 8),
            "{a:?} {b:?}"
        );
        // One slab either side along x and two columns either side along y: 3 y rows and 15 z
        // rows held, of which the own two are not read; plus the column's and slab's loads.
        assert_eq!(a.held, 9 + 3 * 9 + 15 * 9);
        assert_eq!(a.read, 8 + 8 + 2 * 9 + 14 * 9);
        // One split dimension: the slab loads of every dimension, no rows.
        let slabs = balance_traffic(&grid([8, 1, 1]), [0; 3]);
        assert_eq!((slabs.reduced, slabs.read, slabs.held), (8 + 1 + 1 + 3, 0, 9 + 2 + 2));
    }
}
