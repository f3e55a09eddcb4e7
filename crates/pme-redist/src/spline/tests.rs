use super::*;

/// Weights of every order at `dr`, through the slice form.
fn of_order(n: usize, dr: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut w, mut dw) = (vec![0.0; n], vec![0.0; n]);
    weights_into(dr, &mut w, &mut dw);
    (w, dw)
}

#[test]
fn weights_partition_unity_and_derivatives_sum_to_zero() {
    for n in ORDERS {
        for i in 0..=20 {
            let dr = i as f64 / 20.0 * 0.999;
            let (w, d) = of_order(n, dr);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "order {n}: sum of weights at {dr}");
            assert!(d.iter().sum::<f64>().abs() < 1e-12, "order {n}: sum of derivatives at {dr}");
            assert!(w.iter().all(|&v| v >= 0.0), "order {n}: non-negative at {dr}");
        }
    }
    // The cubic B-spline at the centre: 1/6, 2/3, 1/6, 0.
    let (w, _) = weights::<4>(0.0);
    assert!((w[0] - 1.0 / 6.0).abs() < 1e-12 && (w[1] - 2.0 / 3.0).abs() < 1e-12);
    assert!((w[2] - 1.0 / 6.0).abs() < 1e-12 && w[3].abs() < 1e-12);
    // The quartic (order 5) one: 1/24, 11/24, 11/24, 1/24, 0.
    let (w, _) = weights::<5>(0.0);
    for (v, want) in w.iter().zip([1.0, 11.0, 11.0, 1.0, 0.0]) {
        assert!((v - want / 24.0).abs() < 1e-15, "order 5 at 0: {w:?}");
    }
}

#[test]
fn closed_form_matches_the_recursion() {
    for i in 0..=100 {
        let dr = i as f64 / 100.0 * 0.9999;
        let (w, d) = cubic(dr);
        let (mut rw, mut rd) = ([0.0; 4], [0.0; 4]);
        recursion(dr, &mut rw, &mut rd);
        for j in 0..4 {
            assert!((w[j] - rw[j]).abs() < 1e-15, "dr {dr} j {j}: {} against {}", w[j], rw[j]);
            assert!((d[j] - rd[j]).abs() < 1e-15, "dr {dr} j {j}: {} against {}", d[j], rd[j]);
        }
    }
}

#[test]
fn array_and_slice_forms_agree_to_the_bit() {
    fn check<const N: usize>(dr: f64) {
        let (w, d) = weights::<N>(dr);
        let (sw, sd) = of_order(N, dr);
        assert_eq!(w.map(f64::to_bits).to_vec(), sw.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        assert_eq!(d.map(f64::to_bits).to_vec(), sd.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    for dr in [0.0, 0.123, 0.5, 0.987] {
        check::<3>(dr);
        check::<4>(dr);
        check::<6>(dr);
        check::<12>(dr);
    }
}

#[test]
fn derivatives_match_finite_differences() {
    // Moving the charge by du along the grid shifts the weights: w_j(dr + h) - w_j(dr).
    let (h, dr) = (1e-6, 0.37);
    for n in ORDERS {
        let (w0, d) = of_order(n, dr);
        let (w1, _) = of_order(n, dr + h);
        for j in 0..n {
            assert!(((w1[j] - w0[j]) / h - d[j]).abs() < 1e-5, "order {n} j={j}");
        }
    }
}

#[test]
fn a_spline_of_one_order_is_the_next_lower_one_smoothed() {
    // M_n(u) = ∫ M_{n-1}(u - t) dt over t in [0, 1): the convolution that defines the
    // cardinal B-splines, checked by the midpoint rule at one point per order.
    let dr = 0.3;
    for n in 4..=12usize {
        let (w, _) = of_order(n, dr);
        let steps = 4000;
        let mut integral = vec![0.0; n];
        for s in 0..steps {
            let t = (s as f64 + 0.5) / steps as f64;
            // u - t = dr - t + n - 1 - j: past the same line at dr - t, or past the line
            // below at dr - t + 1.
            let (shift, frac) = if dr - t >= 0.0 { (0, dr - t) } else { (1, dr - t + 1.0) };
            let (lower, _) = of_order(n - 1, frac);
            for (j, sum) in integral.iter_mut().enumerate() {
                // The lower order's weight i is M_{n-1}(frac + n - 2 - i): i = j - 1 + shift.
                let i = j as isize + shift as isize - 1;
                if (0..(n - 1) as isize).contains(&i) {
                    *sum += lower[i as usize] / steps as f64;
                }
            }
        }
        for j in 0..n {
            assert!((w[j] - integral[j]).abs() < 1e-6, "order {n} j {j}: {} against {}", w[j], integral[j]);
        }
    }
}
