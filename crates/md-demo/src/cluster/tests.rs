use md_halo::{RVec, Zone};

use super::kernel::{Isa, erfc_and_gaussian, exp_nonpositive};
use super::list::PairList;
use crate::Structure;
use crate::error::Error;
use crate::force::{ForceField, Topology};
use crate::types::TypeTable;

fn water(replicate: [usize; 3]) -> (Structure, Topology) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
    let s = Structure::read_gro(std::path::Path::new(&format!("{dir}/spc216.gro")))
        .expect("spc216")
        .replicate(replicate)
        .expect("replicable");
    let topology = Topology::new(&s, &TypeTable::builtin(), "spc216.gro").expect("SPC names");
    (s, topology)
}

/// Every pair once, in double precision: forces and energy (under Ewald with the exclusion
/// corrections of the pairs within a molecule).
fn brute_force(x: &[RVec], topology: &Topology, field: &ForceField, zones: &[Zone]) -> (Vec<[f64; 3]>, f64) {
    let mut forces = vec![[0.0f64; 3]; x.len()];
    let mut energy = 0.0;
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            if !zones[i].pairs_with(zones[j]) {
                continue;
            }
            let r: [f64; 3] = std::array::from_fn(|d| x[i][d] as f64 - x[j][d] as f64);
            let r2 = r.iter().map(|c| c * c).sum::<f64>();
            if r2 < field.cutoff * field.cutoff {
                let (pi, pj) = (&topology.params[i], &topology.params[j]);
                let (f, v) = if topology.excluded(i as u32, j as u32) {
                    field.exclusion(pi, pj, r2)
                } else {
                    field.pair(pi, pj, r2)
                };
                for d in 0..3 {
                    forces[i][d] += f * r[d];
                    forces[j][d] -= f * r[d];
                }
                energy += v;
            }
        }
    }
    (forces, energy)
}

fn ids(n: usize) -> Vec<u32> {
    (0..n as u32).collect()
}

fn home(n: usize) -> Vec<Zone> {
    vec![Zone::HOME; n]
}

/// Zones of every kind, varied along the atoms.
fn mixed_zones(n: usize) -> Vec<Zone> {
    (0..n).map(|i| Zone::from_bits(if i % 3 == 0 { 0 } else { (i * 37 % 64) as u8 })).collect()
}

/// Largest deviation relative to the largest force.
fn worst(want: &[[f64; 3]], got: &[RVec]) -> f64 {
    let largest = want.iter().flatten().fold(0f64, |m, v| m.max(v.abs()));
    want.iter()
        .zip(got)
        .flat_map(|(w, g)| (0..3).map(move |d| (w[d] - g[d] as f64).abs()))
        .fold(0.0, f64::max)
        / largest
}

#[test]
fn forces_and_energy_match_a_double_precision_sum_over_every_pair() {
    let (s, topology) = water([1, 1, 1]);
    let field = ForceField::new(0.8);
    let zones = mixed_zones(s.len());
    for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512].into_iter().filter(|isa| isa.available()) {
        let mut list =
            PairList::build(&s.positions, &ids(s.len()), &zones, &topology, &field, 0.9, isa).expect("valid");
        let mut forces = Vec::new();
        let energy = list.forces_and_energy(&s.positions, &mut forces).expect("same atoms");
        let (want, want_energy) = brute_force(&s.positions, &topology, &field, &zones);
        assert!(worst(&want, &forces) < 2e-5, "{isa}: forces off by {:e}", worst(&want, &forces));
        assert!(
            (energy - want_energy).abs() < 1e-5 * want_energy.abs(),
            "{isa}: energy {energy} vs {want_energy}"
        );
    }
}

/// The splitting coefficient of GROMACS's `ewald-rtol = 1e-5` at a 0.8 nm cutoff.
const BETA_08: f64 = 3.905_2;

#[test]
fn ewald_forces_and_energy_match_a_double_precision_sum_over_every_pair() {
    let (s, topology) = water([1, 1, 1]);
    let field = ForceField::ewald(0.8, BETA_08);
    let zones = mixed_zones(s.len());
    let (want, want_energy) = brute_force(&s.positions, &topology, &field, &zones);
    for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512].into_iter().filter(|isa| isa.available()) {
        let mut list =
            PairList::build(&s.positions, &ids(s.len()), &zones, &topology, &field, 0.9, isa).expect("valid");
        let mut forces = Vec::new();
        let energy = list.forces_and_energy(&s.positions, &mut forces).expect("same atoms");
        assert!(worst(&want, &forces) < 2e-5, "{isa}: forces off by {:e}", worst(&want, &forces));
        assert!(
            (energy - want_energy).abs() < 1e-5 * want_energy.abs(),
            "{isa}: energy {energy} vs {want_energy}"
        );
    }
}

#[test]
fn exp_and_erfc_are_accurate_in_single_precision() {
    for n in 0..=4000 {
        let x = n as f32 * 1e-3;
        let (erfc, gaussian) = erfc_and_gaussian(x);
        // Against the exact exponential of the same single-precision argument -x².
        let want_gaussian = (-f64::from(x * x)).exp();
        assert!(
            (gaussian as f64 - want_gaussian).abs() <= 4e-7 * want_gaussian,
            "exp(-{x}²) = {gaussian}, not {want_gaussian}"
        );
        let want_erfc = libm::erfc(x as f64);
        // The approximation's 1.5e-7, and single-precision rounding where its five terms of
        // about ±1.4 cancel to about 1 (small x): at most 6.4e-7 measured, below x = 1.
        assert!((erfc as f64 - want_erfc).abs() <= 7e-7, "erfc({x}) = {erfc}, not {want_erfc}");
    }
    assert_eq!(exp_nonpositive(0.0), 1.0);
    assert!(exp_nonpositive(-200.0) > 0.0 && exp_nonpositive(-200.0) < 1e-37);
}

#[test]
fn a_list_built_with_a_buffer_stays_right_while_atoms_move_less_than_it() {
    let (s, topology) = water([2, 1, 1]);
    let field = ForceField::new(0.7);
    let mut list =
        PairList::build(&s.positions, &ids(s.len()), &home(s.len()), &topology, &field, 0.8, Isa::detect())
            .expect("valid");
    // Every atom moves up to 0.04 nm (less than half the 0.1 nm buffer), in varied directions.
    let moved: Vec<RVec> = s
        .positions
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let t = i as f32 * 0.7;
            [x[0] + 0.04 * t.sin(), x[1] + 0.04 * t.cos() * 0.6, x[2] - 0.04 * (t * 1.3).sin() * 0.8]
        })
        .collect();
    let mut forces = Vec::new();
    list.forces(&moved, &mut forces).expect("same atoms");
    let (want, _) = brute_force(&moved, &topology, &field, &home(s.len()));
    assert!(worst(&want, &forces) < 2e-5, "forces off by {:e}", worst(&want, &forces));
}

#[test]
fn forces_are_the_same_bits_for_any_thread_count() {
    let (s, topology) = water([2, 2, 1]);
    let zones = mixed_zones(s.len());
    let run = |threads: usize, isa: Isa, field: &ForceField| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
        pool.install(|| {
            let mut list = PairList::build(&s.positions, &ids(s.len()), &zones, &topology, field, 1.0, isa)
                .expect("valid");
            let mut forces = Vec::new();
            let energy = list.forces_and_energy(&s.positions, &mut forces).expect("same atoms");
            (forces.iter().flatten().map(|f| f.to_bits()).collect::<Vec<u32>>(), energy.to_bits())
        })
    };
    for field in [ForceField::new(0.9), ForceField::ewald(0.9, 3.47)] {
        for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512].into_iter().filter(|isa| isa.available()) {
            let reference = run(1, isa, &field);
            assert!(reference.0.len() == 3 * s.len());
            for threads in [2, 3] {
                assert!(run(threads, isa, &field) == reference, "{threads} threads, {isa}: different bits");
            }
        }
    }
}

#[test]
fn a_list_searched_again_in_place_gives_the_bits_of_a_new_one() {
    let (big, topology) = water([2, 2, 1]);
    let (small, _) = water([1, 1, 1]);
    // The same atoms, one of them moved into a neighbouring column: mostly the same slot
    // count, with padding where an atom used to be.
    let moved: Vec<Vec<RVec>> = (0..small.len())
        .step_by(5)
        .map(|k| {
            let mut x = small.positions.clone();
            x[k] = [x[k][0] + 0.3, x[k][1] - 0.2, x[k][2]];
            x
        })
        .collect();
    let bits = |list: &mut PairList, x: &[RVec]| {
        let mut forces = Vec::new();
        let energy = list.forces_and_energy(x, &mut forces).expect("same atoms");
        (forces.iter().flatten().map(|f| f.to_bits()).collect::<Vec<u32>>(), energy.to_bits(), list.pairs())
    };
    for field in [ForceField::new(0.9), ForceField::ewald(0.9, 3.47)] {
        let isa = Isa::detect();
        let mut list = PairList::build(
            &big.positions,
            &ids(big.len()),
            &mixed_zones(big.len()),
            &topology,
            &field,
            1.0,
            isa,
        )
        .expect("valid");
        let first = bits(&mut list, &big.positions);
        for x in std::iter::once(&small.positions).chain(&moved).chain([&small.positions]) {
            let zones = home(x.len());
            let mut fresh =
                PairList::build(x, &ids(x.len()), &zones, &topology, &field, 1.0, isa).expect("valid");
            list.rebuild(x, &ids(x.len()), &zones, &topology, &field, 1.0, isa).expect("valid");
            assert!(
                bits(&mut list, x) == bits(&mut fresh, x),
                "{field:?}: a rebuilt list differs from a new one"
            );
        }
        // Bad input leaves the list as it was.
        let mut bad = small.positions.clone();
        bad[3][0] = f32::NAN;
        let refused = list.rebuild(&bad, &ids(bad.len()), &home(bad.len()), &topology, &field, 1.0, isa);
        assert!(matches!(refused, Err(Error::Config(m)) if m.contains("local atom 3")));
        let mut again = PairList::build(
            &small.positions,
            &ids(small.len()),
            &home(small.len()),
            &topology,
            &field,
            1.0,
            isa,
        )
        .expect("valid");
        assert!(bits(&mut list, &small.positions) == bits(&mut again, &small.positions));
        list.rebuild(&big.positions, &ids(big.len()), &mixed_zones(big.len()), &topology, &field, 1.0, isa)
            .expect("valid");
        assert!(bits(&mut list, &big.positions) == first, "{field:?}: back to the first system, other bits");
    }
}

#[test]
fn tiny_and_empty_systems_work_and_bad_input_is_refused() {
    let (s, topology) = water([1, 1, 1]);
    let field = ForceField::new(0.8);
    for n in [0usize, 1, 2, 3, 5, 9, 17] {
        let x = &s.positions[..n];
        let mut list =
            PairList::build(x, &ids(n), &home(n), &topology, &field, 0.8, Isa::detect()).expect("valid");
        let mut forces = vec![[9.0; 3]; 2];
        list.forces(x, &mut forces).expect("same atoms");
        let (want, _) = brute_force(x, &topology, &field, &home(n));
        assert_eq!(forces.len(), n);
        for (w, g) in want.iter().zip(&forces) {
            for d in 0..3 {
                assert!(
                    (w[d] - g[d] as f64).abs() <= 1e-4 * w[d].abs().max(1.0),
                    "{n} atoms: {w:?} vs {g:?}"
                );
            }
        }
    }
    let x = &s.positions[..10];
    let refused = PairList::build(x, &ids(10), &home(10), &topology, &field, 0.7, Isa::Baseline);
    assert!(matches!(refused, Err(Error::Config(m)) if m.contains("below the cutoff")));
    let mut list =
        PairList::build(x, &ids(10), &home(10), &topology, &field, 0.8, Isa::Baseline).expect("valid");
    let stale = list.forces(&s.positions[..11], &mut Vec::new());
    assert!(matches!(stale, Err(Error::Config(m)) if m.contains("rebuild")));
    let mut bad = x.to_vec();
    bad[3][1] = f32::NAN;
    let refused = PairList::build(&bad, &ids(10), &home(10), &topology, &field, 0.8, Isa::Baseline);
    assert!(matches!(refused, Err(Error::Config(m)) if m.contains("local atom 3")));
    let refused = PairList::build(x, &ids(10), &home(9), &topology, &field, 0.8, Isa::Baseline);
    assert!(matches!(refused, Err(Error::Config(m)) if m.contains("9 zones")));
}
