//! The grid's sizes, decomposition and placement.

use super::build::{nice_size, reciprocal_box};
use super::pme_grid::floor;
use super::*;
use crate::error::Error;
use crate::particle::RVec;

#[test]
fn fast_floor_is_floor_below_two_to_the_63() {
    let mut values = vec![0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5e15, -2.5e15, 1e300, -1e300, f64::MIN_POSITIVE];
    values.extend([f64::INFINITY, f64::NEG_INFINITY, 4503599627370495.5, -4503599627370495.5]);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..100_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        values.push(((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 200.0);
        values.push(f64::from_bits(state));
    }
    for v in values {
        let (fast, exact) = (floor(v), v.floor());
        if v.is_nan() {
            assert_eq!(fast, 0.0, "NaN gives 0");
        } else if v.abs() < 9.2e18 {
            // Equal values; a zero may lose its sign.
            assert!(fast == exact, "{v:e}: {fast} {exact}");
        }
    }
}

/// Every domain of `domains` with its relay on pencils `dims` of a 128 × 128 × 16 grid.
fn relays(domains: [usize; 3], dims: [usize; 2]) -> (PmeGrid, Vec<([usize; 3], usize)>) {
    let pes: Vec<usize> = (0..dims[0] * dims[1]).collect();
    let g = PmeGrid::builder(rectangular([4.0, 4.0, 4.0]), &pes)
        .sizes([128, 128, 16])
        .pencils(dims)
        .build()
        .unwrap();
    let mut out = Vec::new();
    for x in 0..domains[0] {
        for y in 0..domains[1] {
            for z in 0..domains[2] {
                out.push(([x, y, z], g.relay_rank(domains, [x, y, z]).unwrap()));
            }
        }
    }
    (g, out)
}

#[test]
fn relays_are_shared_evenly_and_lie_near_their_domains() {
    for (domains, dims) in
        [([16, 16, 12], [32, 32]), ([8, 8, 6], [16, 8]), ([3, 2, 2], [4, 1]), ([4, 4, 3], [2, 2])]
    {
        let (g, relays) = relays(domains, dims);
        let mut count = vec![0usize; g.ranks()];
        for &(cell, r) in &relays {
            count[r] += 1;
            // The relay's row and column overlap the domain's extent, or lie beside it.
            let near = |c: usize, d: usize, line: usize, p: usize| {
                let (lo, hi) = (c as f64 / d as f64, (c + 1) as f64 / d as f64);
                let (a, b) = (line as f64 / p as f64, (line + 1) as f64 / p as f64);
                let step = 1.0 / p as f64;
                a < hi + step && b > lo - step
            };
            assert!(
                near(cell[0], domains[0], r / dims[1], dims[0]),
                "{domains:?} on {dims:?}: {cell:?} -> {r}"
            );
            assert!(
                near(cell[1], domains[1], r % dims[1], dims[1]),
                "{domains:?} on {dims:?}: {cell:?} -> {r}"
            );
        }
        let (least, most) = (count.iter().min().unwrap(), count.iter().max().unwrap());
        assert!(most - least <= 1, "{domains:?} on {dims:?}: {count:?}");
    }
    // Fewer domains than PME ranks: each under its centre.
    let (_, relays) = relays([2, 8, 1], [4, 4]);
    assert!(relays.iter().all(|&([x, y, _], r)| r / 4 / 2 == x && r % 4 == y / 2), "{relays:?}");
    let g = relays_grid();
    assert!(matches!(g.relay_rank([2, 2, 0], [0, 0, 0]), Err(Error::Config(_))));
    assert!(matches!(g.relay_rank([2, 2, 2], [0, 2, 0]), Err(Error::Config(_))));
}

fn relays_grid() -> PmeGrid {
    relays([1, 1, 1], [2, 2]).0
}

/// A rectangular box of extents `l`.
fn rectangular(l: RVec) -> [RVec; 3] {
    [[l[0], 0.0, 0.0], [0.0, l[1], 0.0], [0.0, 0.0, l[2]]]
}

/// A triclinic box with every lower element set.
const TRICLINIC: [RVec; 3] = [[3.0, 0.0, 0.0], [1.0, 2.8, 0.0], [-1.2, 1.1, 2.6]];

#[test]
fn sizes_slabs_and_ranks() {
    let grid = PmeGrid::new(rectangular([3.72412; 3]), 0.12, &[0, 1, 2]).expect("fits");
    assert_eq!(grid.sizes(), [32; 3], "ceil(31.03) = 32 = 2^5");
    assert_eq!(grid.slab(0), (0, 10));
    assert_eq!(grid.slab(2), (21, 32));
    assert_eq!(grid.rank_of([0.0, 0.0, 0.0]), 0);
    assert_eq!(grid.rank_of([3.72, 1.0, 1.0]), 2);
    assert_eq!(grid.rank_of([-0.01, 1.0, 1.0]), 2, "wrapped");
    assert_eq!(grid.rank_of_plane(10), 1);
    assert_eq!(grid.box_vectors(), rectangular([3.72412; 3]));
    assert_eq!(nice_size(31), 32);
    assert_eq!(nice_size(11), 12);
    assert_eq!(nice_size(13), 14);
    let grid = PmeGrid::new(TRICLINIC, 0.25, &[0]).expect("fits");
    // From the vector lengths, as GROMACS: 3, 2.97 and 3.07 nm over 0.25 nm: 12, 12, 13 -> 14.
    assert_eq!(grid.sizes(), [12, 12, 14]);
}

#[test]
fn bad_decompositions_are_explained() {
    let cube = rectangular([3.72412; 3]);
    let coarse = PmeGrid::new(cube, 0.6, &[0]).expect_err("7 points").to_string();
    assert!(coarse.contains("too coarse for interpolation order 4"), "{coarse}");
    // Nine PME ranks on 32 planes: slabs of 3 are too thin, GROMACS's rule (PmeGrid::new's)
    // takes 3 x 3 pencils.
    let nine: Vec<usize> = (0..9).collect();
    let slabs = PmeGrid::builder(cube, &nine).decomposition(PmeDecomposition::Slab).build();
    let thin = slabs.expect_err("thin").to_string();
    assert!(thin.contains("too coarse for the interpolation order on this many PME ranks"), "{thin}");
    assert!(thin.contains("PmeDecomposition::Auto"), "{thin}");
    assert_eq!(PmeGrid::new(cube, 0.12, &nine).expect("pencils").dims(), [3, 3]);
    // A prime count has no pencils: slabs, too thin.
    let many: Vec<usize> = (0..37).collect();
    let thin = PmeGrid::new(cube, 0.12, &many).expect_err("no pencils").to_string();
    assert!(thin.contains("use at most 8 PME ranks along x"), "{thin}");
    assert!(PmeGrid::new(rectangular([1.0; 3]), 0.0, &[0]).is_err());
    assert!(PmeGrid::new(rectangular([1.0; 3]), 0.1, &[]).is_err());
}

#[test]
fn boxes_of_another_shape_are_refused_naming_the_element() {
    let cases: [((usize, usize), f32, &str); 7] = [
        ((0, 1), 0.5, "box[0][1] (a_y) is 0.5, not 0"),
        ((0, 2), -1.0, "box[0][2] (a_z) is -1, not 0"),
        ((1, 2), 0.1, "box[1][2] (b_z) is 0.1, not 0"),
        ((0, 0), 0.0, "box[0][0] (a_x), the box's extent along x, is 0, not a positive length"),
        ((1, 1), -2.0, "box[1][1] (b_y), the box's extent along y, is -2, not a positive length"),
        ((2, 2), f32::INFINITY, "box[2][2] (c_z), the box's extent along z, is inf"),
        ((2, 0), f32::NAN, "box[2][0] (c_x) is NaN, not a finite length"),
    ];
    for ((i, j), value, expected) in cases {
        let mut box_vectors = TRICLINIC;
        box_vectors[i][j] = value;
        for outcome in [
            PmeGrid::new(box_vectors, 0.25, &[0]),
            PmeGrid::builder(box_vectors, &[0]).sizes([12, 12, 12]).build(),
        ] {
            match outcome {
                Err(Error::Config(m)) => {
                    assert!(m.contains(expected), "{m}");
                    assert!(m.contains("a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz)"), "{m}");
                }
                other => panic!("box[{i}][{j}] = {value}: {other:?}"),
            }
        }
    }
}

#[test]
fn reciprocal_box_inverts_the_box() {
    for box_vectors in
        [TRICLINIC, rectangular([3.0, 2.5, 4.0]), [[2.0, 0.0, 0.0], [1.0, 1.7, 0.0], [1.0, 0.6, 1.6]]]
    {
        let recip = reciprocal_box(&box_vectors);
        let product: [[f64; 3]; 3] = std::array::from_fn(|i| {
            std::array::from_fn(|j| (0..3).map(|e| box_vectors[i][e] as f64 * recip[e][j]).sum())
        });
        for (i, row) in product.iter().enumerate() {
            for (j, &value) in row.iter().enumerate() {
                let identity = if i == j { 1.0 } else { 0.0 };
                assert!((value - identity).abs() < 1e-15, "{box_vectors:?}: [{i}][{j}] = {value}");
            }
        }
    }
}

#[test]
fn rectangular_boxes_place_at_x_times_one_over_length() {
    let l = [3.72412f32, 2.9, 4.1];
    let grid = PmeGrid::builder(rectangular(l), &[0, 1]).sizes([32, 24, 36]).build().expect("fits");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..20_000 {
        let x: RVec = std::array::from_fn(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.25) * 2.0 * l[0]
        });
        let (index, fraction) = grid.locate(x);
        for d in 0..3 {
            let mut f = x[d] as f64 * (1.0 / l[d] as f64);
            f -= floor(f);
            let u = f * grid.k[d] as f64;
            let i = (floor(u) as usize).min(grid.k[d] - 1);
            assert_eq!(index[d], i, "{x:?} along {d}");
            assert_eq!(fraction[d].to_bits(), (u - i as f64).clamp(0.0, 1.0).to_bits(), "{x:?} along {d}");
        }
    }
}

#[test]
fn rectangular_forces_are_the_gradient_times_k_over_length() {
    let l = [3.72412f32, 2.9, 4.1];
    let grid = PmeGrid::builder(rectangular(l), &[0]).sizes([32, 24, 36]).build().expect("fits");
    let (q, gradient) = (-0.82, [0.37, -1.25, 2.5e-3]);
    let force = grid.force(q, gradient);
    for d in 0..3 {
        let scaled = -q * gradient[d] * (grid.k[d] as f64 / l[d] as f64);
        assert!((force[d] - scaled).abs() <= 1e-15 * scaled.abs(), "{d}: {} {scaled}", force[d]);
    }
}

#[test]
fn triclinic_placement_follows_the_box_vectors() {
    let grid = PmeGrid::builder(TRICLINIC, &[0, 1]).sizes([12, 16, 20]).build().expect("fits");
    let k = grid.sizes();
    let at = |s: [f64; 3]| -> RVec {
        std::array::from_fn(|e| (0..3).map(|v| s[v] * TRICLINIC[v][e] as f64).sum::<f64>() as f32)
    };
    // Grid coordinate, modulo the grid size.
    let grid_coordinate = |x: RVec| -> [f64; 3] {
        let (index, fraction) = grid.locate(x);
        std::array::from_fn(|d| index[d] as f64 + fraction[d])
    };
    let periodic_distance = |a: f64, b: f64, kd: usize| {
        let d = (a - b).rem_euclid(kd as f64);
        d.min(kd as f64 - d)
    };
    for s in [[0.1, 0.2, 0.3], [0.95, 0.05, 0.5], [0.51, 0.77, 0.02], [-0.3, 1.4, 2.25]] {
        let x = at(s);
        let u = grid_coordinate(x);
        for d in 0..3 {
            let want = s[d].rem_euclid(1.0) * k[d] as f64;
            assert!(periodic_distance(u[d], want, k[d]) < 1e-4, "{s:?} along {d}: {} not {want}", u[d]);
        }
        assert_eq!(grid.rank_of(x), grid.rank_of_plane(grid.locate(x).0[0]));
        // A whole box vector away is the same place.
        for v in TRICLINIC {
            let shifted: RVec = std::array::from_fn(|e| x[e] + v[e]);
            let w = grid_coordinate(shifted);
            for d in 0..3 {
                assert!(periodic_distance(u[d], w[d], k[d]) < 1e-4, "{s:?} + {v:?} along {d}");
            }
        }
    }
    // The planes of a slab are parallel to b and c: moving along them keeps the x line.
    let x = at([0.4, 0.3, 0.6]);
    for v in [TRICLINIC[1], TRICLINIC[2]] {
        let moved: RVec = std::array::from_fn(|e| x[e] + 0.1 * v[e]);
        assert_eq!(grid.locate(moved).0[0], grid.locate(x).0[0], "along {v:?}");
    }
}
