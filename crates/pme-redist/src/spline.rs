//! Cardinal B-splines, the interpolation of smooth PME (Essmann et al. 1995).

/// The interpolation order (GROMACS's default, `pme-order = 4`).
pub const ORDER: usize = 4;

/// The weights `θ_j` and their derivatives `dθ_j/du` of a charge at fractional grid distance
/// `dr ∈ [0, 1)` past a grid line, for the `ORDER` grid lines `j = 0..ORDER` that lead up to
/// and include that line (j = ORDER - 1 is the line itself).
///
/// These are the values of the cardinal cubic B-spline M₄ that GROMACS's `make_bsplines`
/// builds by its recursion, `θ_j = M₄(dr + ORDER - 1 - j)`, written out as the polynomials
/// they are: a handful of multiplications where the recursion takes dozens, for a function
/// that runs once per charge per step.
#[inline]
pub fn weights(dr: f64) -> ([f64; ORDER], [f64; ORDER]) {
    const { assert!(ORDER == 4, "the closed form is that of order 4") };
    let t = dr;
    let s = 1.0 - t;
    let t2 = t * t;
    let sixth = 1.0 / 6.0;
    let weights = [
        sixth * s * s * s,
        sixth * (3.0 * t2 * t - 6.0 * t2 + 4.0),
        sixth * (-3.0 * t2 * t + 3.0 * t2 + 3.0 * t + 1.0),
        sixth * t2 * t,
    ];
    let derivatives = [-0.5 * s * s, 0.5 * (3.0 * t2 - 4.0 * t), 0.5 * (-3.0 * t2 + 2.0 * t + 1.0), 0.5 * t2];
    (weights, derivatives)
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

    /// GROMACS's `make_bsplines` recursion, M_n(u) = (u M_{n-1}(u) + (n - u) M_{n-1}(u - 1)) /
    /// (n - 1), evaluated at the ORDER points dr + ORDER - 1 - j.
    fn recursion(dr: f64) -> [f64; ORDER] {
        let mut data = [0.0f64; ORDER];
        data[1] = dr;
        data[0] = 1.0 - dr;
        for k in 3..=ORDER {
            let div = 1.0 / (k as f64 - 1.0);
            data[k - 1] = div * dr * data[k - 2];
            for l in 1..(k - 1) {
                data[k - l - 1] =
                    div * ((dr + l as f64) * data[k - l - 2] + (k as f64 - l as f64 - dr) * data[k - l - 1]);
            }
            data[0] *= div * (1.0 - dr);
        }
        data
    }

    #[test]
    fn closed_form_matches_the_recursion() {
        for i in 0..=100 {
            let dr = i as f64 / 100.0 * 0.9999;
            let (w, _) = weights(dr);
            let r = recursion(dr);
            for j in 0..ORDER {
                assert!((w[j] - r[j]).abs() < 1e-15, "dr {dr} j {j}: {} against {}", w[j], r[j]);
            }
        }
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
