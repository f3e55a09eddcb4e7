//! Cardinal B-splines, the interpolation of smooth PME (Essmann et al. 1995).

/// The interpolation order (GROMACS's default, `pme-order = 4`).
pub const ORDER: usize = 4;

/// The weights `θ_j` and their derivatives `dθ_j/du` of a charge at fractional grid distance
/// `dr ∈ [0, 1)` past a grid line, for the `ORDER` grid lines `j = 0..ORDER` that lead up to
/// and include that line (j = ORDER - 1 is the line itself).
pub fn weights(dr: f64) -> ([f64; ORDER], [f64; ORDER]) {
    // M_2, then the recursion M_n(u) = (u M_{n-1}(u) + (n - u) M_{n-1}(u - 1)) / (n - 1),
    // evaluated at the ORDER points dr + ORDER - 1 - j, as GROMACS's make_bsplines does.
    let mut data = [0.0f64; ORDER];
    data[ORDER - 1] = 0.0;
    data[1] = dr;
    data[0] = 1.0 - dr;
    for k in 3..ORDER {
        let div = 1.0 / (k as f64 - 1.0);
        data[k - 1] = div * dr * data[k - 2];
        for l in 1..(k - 1) {
            data[k - l - 1] =
                div * ((dr + l as f64) * data[k - l - 2] + (k as f64 - l as f64 - dr) * data[k - l - 1]);
        }
        data[0] *= div * (1.0 - dr);
    }
    // Derivatives from the order ORDER - 1 values.
    let mut derivative = [0.0f64; ORDER];
    derivative[0] = -data[0];
    for k in 1..ORDER {
        derivative[k] = data[k - 1] - data[k];
    }
    // The last step of the recursion.
    let div = 1.0 / (ORDER as f64 - 1.0);
    data[ORDER - 1] = div * dr * data[ORDER - 2];
    for l in 1..(ORDER - 1) {
        data[ORDER - l - 1] = div
            * ((dr + l as f64) * data[ORDER - l - 2] + (ORDER as f64 - l as f64 - dr) * data[ORDER - l - 1]);
    }
    data[0] *= div * (1.0 - dr);
    (data, derivative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_partition_unity_and_derivatives_sum_to_zero() {
        for i in 0..=20 {
            let dr = i as f64 / 20.0 * 0.999;
            let (w, d) = weights(dr);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "sum of weights at {dr}");
            assert!(d.iter().sum::<f64>().abs() < 1e-12, "sum of derivatives at {dr}");
            assert!(w.iter().all(|&v| v >= 0.0), "non-negative at {dr}");
        }
        // The cubic B-spline at the centre: 1/6, 2/3, 1/6, 0.
        let (w, _) = weights(0.0);
        assert!((w[0] - 1.0 / 6.0).abs() < 1e-12 && (w[1] - 2.0 / 3.0).abs() < 1e-12);
        assert!((w[2] - 1.0 / 6.0).abs() < 1e-12 && w[3].abs() < 1e-12);
    }

    #[test]
    fn derivatives_match_finite_differences() {
        // Moving the charge by du along the grid shifts the weights: w_j(dr + h) - w_j(dr).
        let (h, dr) = (1e-6, 0.37);
        let (w0, d) = weights(dr);
        let (w1, _) = weights(dr + h);
        for j in 0..ORDER {
            assert!(((w1[j] - w0[j]) / h - d[j]).abs() < 1e-5, "j={j}");
        }
    }
}
