//! Cardinal B-splines, the interpolation of smooth PME (Essmann et al. 1995), of any order
//! GROMACS's `pme-order` takes.
//!
//! A spline of order `n` spreads a charge over `n` grid lines along each dimension (cubic
//! interpolation at order 4); a higher order buys accuracy at the same grid spacing at
//! `n³` points per charge, as GROMACS's and LAMMPS's higher orders at 0.12 nm do.

use std::ops::RangeInclusive;

/// The interpolation order unless told otherwise (GROMACS's default, `pme-order = 4`).
pub const DEFAULT_ORDER: usize = 4;

/// The interpolation orders the mesh takes, GROMACS's `pme-order` range.
pub const ORDERS: RangeInclusive<usize> = 3..=12;

/// The weights `θ_j` and their derivatives `dθ_j/du` of a charge at fractional grid distance
/// `dr ∈ [0, 1)` past a grid line, for the `N` grid lines `j = 0..N` that lead up to and
/// include that line (j = N - 1 is the line itself), for a spline of order `N`.
///
/// These are the values of the cardinal B-spline `M_N` at `dr + N - 1 - j`. Order 4 is
/// written out as the polynomials it is, a handful of multiplications where the recursion
/// takes dozens, for a function that runs once per charge per step; every other order
/// follows GROMACS's `make_bsplines` recursion,
/// `M_n(u) = (u M_{n-1}(u) + (n - u) M_{n-1}(u - 1)) / (n - 1)`, with the derivatives taken
/// from order `N - 1` as it takes them. An `N` outside [`ORDERS`] does not compile.
#[inline]
pub fn weights<const N: usize>(dr: f64) -> ([f64; N], [f64; N]) {
    const { assert!(N >= 3 && N <= 12, "interpolation orders run from 3 to 12") };
    let (mut w, mut dw) = ([0.0; N], [0.0; N]);
    if N == 4 {
        let (c, d) = cubic(dr);
        w.copy_from_slice(&c);
        dw.copy_from_slice(&d);
    } else {
        recursion(dr, &mut w, &mut dw);
    }
    (w, dw)
}

/// [`weights`] of the order `w.len()` (which `dw` must share), into the slices given: for
/// code that holds the order as a value.
///
/// # Panics
/// When the lengths differ or lie outside [`ORDERS`].
pub fn weights_into(dr: f64, w: &mut [f64], dw: &mut [f64]) {
    assert!(ORDERS.contains(&w.len()) && w.len() == dw.len(), "weights of an order in 3..=12");
    if w.len() == 4 {
        let (c, d) = cubic(dr);
        w.copy_from_slice(&c);
        dw.copy_from_slice(&d);
    } else {
        recursion(dr, w, dw);
    }
}

/// The cubic B-spline `M₄` and its derivative, written out.
#[inline]
fn cubic(dr: f64) -> ([f64; 4], [f64; 4]) {
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

/// GROMACS's `make_bsplines` for one dimension: the spline of order `w.len()` by its
/// recursion from order 2, the derivatives from order `w.len() - 1`.
fn recursion(dr: f64, w: &mut [f64], dw: &mut [f64]) {
    let n = w.len();
    w.fill(0.0);
    w[1] = dr;
    w[0] = 1.0 - dr;
    let raise = |w: &mut [f64], k: usize| {
        let div = 1.0 / (k as f64 - 1.0);
        w[k - 1] = div * dr * w[k - 2];
        for l in 1..(k - 1) {
            w[k - l - 1] = div * ((dr + l as f64) * w[k - l - 2] + (k as f64 - l as f64 - dr) * w[k - l - 1]);
        }
        w[0] *= div * (1.0 - dr);
    };
    for k in 3..n {
        raise(w, k);
    }
    dw[0] = -w[0];
    for k in 1..n {
        dw[k] = w[k - 1] - w[k];
    }
    raise(w, n);
}

/// Runs `$body` with the const `$n` set to the order `$order` (one of [`ORDERS`]), so that
/// code generic over a spline's order runs on arrays of that length: each order is its own
/// monomorphised copy, and the default order's code is what a constant order made.
macro_rules! with_order {
    ($order:expr, $n:ident => $body:expr) => {
        match $order {
            3 => {
                const $n: usize = 3;
                $body
            }
            4 => {
                const $n: usize = 4;
                $body
            }
            5 => {
                const $n: usize = 5;
                $body
            }
            6 => {
                const $n: usize = 6;
                $body
            }
            7 => {
                const $n: usize = 7;
                $body
            }
            8 => {
                const $n: usize = 8;
                $body
            }
            9 => {
                const $n: usize = 9;
                $body
            }
            10 => {
                const $n: usize = 10;
                $body
            }
            11 => {
                const $n: usize = 11;
                $body
            }
            12 => {
                const $n: usize = 12;
                $body
            }
            order => unreachable!("interpolation order {order}: grids are built with orders 3 to 12"),
        }
    };
}
pub(crate) use with_order;

#[cfg(test)]
mod tests;
