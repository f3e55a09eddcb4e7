//! The periodic box as GROMACS defines it: three box vectors a = (ax, 0, 0), b = (bx, by, 0),
//! c = (cx, cy, cz), rectangular when the off-diagonal elements are zero, and the fractional
//! coordinates of positions through the reciprocal box (GROMACS's `calc_recipbox`).

use crate::error::{Error, Result};
use crate::real::Real;

/// A position, velocity or force, in nm, nm/ps or kJ mol⁻¹ nm⁻¹ (GROMACS's `rvec` of floats).
pub type RVec = [f32; 3];

/// GROMACS's tolerance on the skew limits (`BOX_MARGIN` in its `pbc.cpp`).
const BOX_MARGIN: f64 = 1.0010;

const AXES: [&str; 3] = ["x", "y", "z"];
const VECTORS: [&str; 3] = ["a", "b", "c"];

/// A periodic box: its vectors and the reciprocal box that turns positions into fractions.
///
/// The domain decomposition, the halo ranges and the periodic shifts all work in those
/// fractions: domains are slices of the unit cell along each fraction ([`DdGrid`]), a range
/// `r` reaches `r / height(d)` in fraction `d` ([`height`](Self::height)), and an atom
/// crossing the periodic boundary along `d` is shifted by box vector `d`. So a triclinic box
/// needs no special case anywhere else. One placement decides an atom's home domain:
/// [`put_in_box`](Self::put_in_box).
///
/// The vectors are `f32`, as GROMACS's `matrix box` is in its mixed precision, whatever the
/// exchange's real type: an `f64` exchange shifts its images by the `f32` vectors widened,
/// so an `f64` engine gives its box `f32`-representable lengths (or accepts images one `f32`
/// ulp of the box from where its own `f64` box would put them). Energies, virials and the
/// Ewald parameters are `f64` throughout (docs/design/ENGINE.md).
///
/// [`DdGrid`]: crate::DdGrid
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PbcBox {
    vectors: [RVec; 3],
    /// `recip[k][d]`: fraction `d` is `Σ_k x[k] * recip[k][d]` (upper-triangular inverse).
    recip: [[f64; 3]; 3],
    /// The distance between the two faces of the box not crossed by vector `d`'s direction
    /// alone: between the planes of fraction `d` = 0 and 1.
    heights: [f64; 3],
}

impl PbcBox {
    /// A rectangular box with edges `lengths`.
    ///
    /// # Errors
    /// [`Error::Config`] when a length is not positive and finite.
    pub fn rectangular(lengths: RVec) -> Result<PbcBox> {
        PbcBox::new([[lengths[0], 0.0, 0.0], [0.0, lengths[1], 0.0], [0.0, 0.0, lengths[2]]])
    }

    /// The box with vectors `vectors` = [a, b, c], the rows of GROMACS's `matrix box`.
    ///
    /// # Errors
    /// [`Error::Config`] naming the element and the limit for a box GROMACS would refuse:
    /// a non-finite element; a nonzero ay, az or bz (GROMACS's box vectors are lower
    /// triangular: rotate the system so that they are); a diagonal element that is not
    /// positive; or a box "too skewed": |bx| or |cx| more than half of ax, or |cy| more than
    /// half of by (with GROMACS's margin of 0.1 %). A box beyond those limits has a shorter
    /// equivalent, which `gmx editconf` or `gmx trjconv -pbc` produce.
    pub fn new(vectors: [RVec; 3]) -> Result<PbcBox> {
        for (v, vector) in vectors.iter().enumerate() {
            for (d, &value) in vector.iter().enumerate() {
                if !value.is_finite() {
                    return Err(Error::Config(format!(
                        "box vector {} has a non-finite {} component ({value})",
                        VECTORS[v], AXES[d]
                    )));
                }
            }
        }
        for (v, d) in [(0, 1), (0, 2), (1, 2)] {
            if vectors[v][d] != 0.0 {
                return Err(Error::Config(format!(
                    "box vector {} has a {} component of {}, but GROMACS's box vectors have \
                     a = (ax, 0, 0), b = (bx, by, 0), c = (cx, cy, cz); rotate the system (gmx editconf \
                     -princ or -rotate) so that they do",
                    VECTORS[v], AXES[d], vectors[v][d]
                )));
            }
        }
        for d in 0..3 {
            if vectors[d][d] <= 0.0 {
                return Err(Error::Config(format!(
                    "box vector {} has {} component {}: the diagonal of the box must be positive",
                    VECTORS[d], AXES[d], vectors[d][d]
                )));
            }
        }
        let m: [[f64; 3]; 3] = vectors.map(|v| v.map(f64::from));
        for (v, d, limit) in [(1, 0, 0), (2, 0, 0), (2, 1, 1)] {
            let half = 0.5 * m[limit][limit] * BOX_MARGIN;
            if m[v][d].abs() > half {
                return Err(Error::Config(format!(
                    "the box is too skewed: |{}{}| = {:.4} nm is more than half of {}{} ({:.4} nm), \
                     the limit GROMACS also applies; use the equivalent box with the shortest \
                     vectors (gmx editconf or gmx trjconv -pbc)",
                    VECTORS[v],
                    AXES[d],
                    m[v][d].abs(),
                    VECTORS[limit],
                    AXES[limit],
                    0.5 * m[limit][limit]
                )));
            }
        }
        // GROMACS's calc_recipbox.
        let mut recip = [[0.0f64; 3]; 3];
        recip[0][0] = 1.0 / m[0][0];
        recip[1][1] = 1.0 / m[1][1];
        recip[2][2] = 1.0 / m[2][2];
        recip[1][0] = -m[1][0] / (m[0][0] * m[1][1]);
        recip[2][1] = -m[2][1] / (m[1][1] * m[2][2]);
        recip[2][0] = (m[1][0] * m[2][1] - m[1][1] * m[2][0]) / (m[0][0] * m[1][1] * m[2][2]);
        // Fraction d grows along the gradient (recip[0][d], recip[1][d], recip[2][d]); one
        // period of it spans 1 / |gradient|.
        let heights = std::array::from_fn(|d| {
            let g2: f64 = (0..3).map(|k| recip[k][d] * recip[k][d]).sum();
            1.0 / g2.sqrt()
        });
        Ok(PbcBox { vectors, recip, heights })
    }

    /// The box vectors [a, b, c].
    pub fn vectors(&self) -> [RVec; 3] {
        self.vectors
    }

    /// Whether every off-diagonal element is zero.
    pub fn is_rectangular(&self) -> bool {
        self.vectors[1][0] == 0.0 && self.vectors[2][0] == 0.0 && self.vectors[2][1] == 0.0
    }

    /// The diagonal elements (ax, by, cz): the edge lengths of a rectangular box.
    pub fn diagonal(&self) -> RVec {
        [self.vectors[0][0], self.vectors[1][1], self.vectors[2][2]]
    }

    /// The distance between the two box faces that fraction `d` crosses (for a rectangular
    /// box, the edge length along `d`). A sphere of radius `r` around a point reaches
    /// `r / height(d)` in fraction `d`, and no further.
    pub fn height(&self, d: usize) -> f64 {
        self.heights[d]
    }

    /// The unit normal of the faces that fraction `d` crosses, pointing towards growing
    /// fraction `d`: the distance of a point from such a face changes by `normal · Δx` when
    /// the point moves by `Δx`.
    pub fn face_normal(&self, d: usize) -> [f64; 3] {
        std::array::from_fn(|k| self.recip[k][d] * self.heights[d])
    }

    /// The volume in nm³.
    pub fn volume(&self) -> f64 {
        self.vectors.iter().enumerate().map(|(d, v)| v[d] as f64).product()
    }

    /// The fractional coordinates of `x`: `x = Σ_d s[d] * vector d`.
    #[inline]
    pub fn fraction(&self, x: RVec) -> [f64; 3] {
        self.fraction_real(x)
    }

    /// [`fraction`](Self::fraction) of a position of either real type.
    #[inline]
    pub fn fraction_real<R: Real>(&self, x: [R; 3]) -> [f64; 3] {
        self.fraction_f64(x.map(R::to_f64))
    }

    /// Box vector `d` in the real type `R`.
    #[inline]
    pub fn vector_real<R: Real>(&self, d: usize) -> [R; 3] {
        self.vectors[d].map(|c| R::from_f64(f64::from(c)))
    }

    /// `x` moved into the unit cell ([`wrap`](Self::wrap)) and the fractions of the moved
    /// point, clamped into `[0, 1)`: the one placement that decides an atom's home, so that
    /// its stored position and its domain always agree (the fractions of a wrapped point may
    /// round to 1, or just outside the cell in a skewed box; the clamp keeps the point on the
    /// face where it lies).
    #[inline]
    pub fn put_in_box(&self, x: RVec) -> (RVec, [f64; 3]) {
        self.put_in_box_real(x)
    }

    /// [`put_in_box`](Self::put_in_box) of a position of either real type.
    #[inline]
    pub fn put_in_box_real<R: Real>(&self, x: [R; 3]) -> ([R; 3], [f64; 3]) {
        let w = self.wrap_real(x);
        (w, self.clamped_fraction_real(w))
    }

    /// The fractions of `x` put into the box: those of [`put_in_box`](Self::put_in_box), every
    /// component in `[0, 1)`.
    #[inline]
    pub fn unit_fraction(&self, x: RVec) -> [f64; 3] {
        self.put_in_box(x).1
    }

    /// The fractions of a point already in the box (the position
    /// [`put_in_box`](Self::put_in_box) returned), clamped into `[0, 1)`: no wrapping, which a
    /// point exactly on the upper face would not survive.
    #[inline]
    pub fn clamped_fraction(&self, w: RVec) -> [f64; 3] {
        self.clamped_fraction_real(w)
    }

    /// [`clamped_fraction`](Self::clamped_fraction) of a position of either real type.
    #[inline]
    pub fn clamped_fraction_real<R: Real>(&self, w: [R; 3]) -> [f64; 3] {
        self.fraction_real(w).map(|s| if s < 1.0 { s.max(0.0) } else { ONE_BELOW })
    }

    /// `x` moved into the unit cell by whole box vectors, as GROMACS's `put_atoms_in_box`
    /// does for a triclinic box.
    pub fn wrap(&self, x: RVec) -> RVec {
        self.wrap_real(x)
    }

    /// [`wrap`](Self::wrap) of a position of either real type: the shift in `f64`, rounded
    /// once to `R`.
    pub fn wrap_real<R: Real>(&self, x: [R; 3]) -> [R; 3] {
        let s = self.fraction_real(x);
        let mut w = x.map(R::to_f64);
        for (d, v) in self.vectors.iter().enumerate() {
            let n = s[d].floor();
            if n != 0.0 {
                for k in 0..3 {
                    w[k] -= n * v[k] as f64;
                }
            }
        }
        // Adding zero turns a negative zero into the positive zero that every shifted image
        // (x + 0) has.
        w.map(|c| R::from_f64(c + 0.0))
    }

    /// `x` shifted by box vector `d` (`x + vector d`), in the arithmetic every image uses.
    #[inline]
    pub fn image(&self, x: RVec, d: usize) -> RVec {
        let v = self.vectors[d];
        [x[0] + v[0], x[1] + v[1], x[2] + v[2]]
    }

    /// The minimum-image displacement `xi - xj` (the shortest among the differences to
    /// `xj`'s images), for points closer than half the smallest height.
    pub fn minimum_image(&self, xi: RVec, xj: RVec) -> [f64; 3] {
        let mut r: [f64; 3] = std::array::from_fn(|k| xi[k] as f64 - xj[k] as f64);
        // Reduce along c, then b, then a (each reduction leaves the later components alone),
        // then try the neighbouring images, which a skewed box needs.
        for d in (0..3).rev() {
            let s = self.fraction_f64(r)[d];
            let n = s.round();
            for (component, &v) in r.iter_mut().zip(&self.vectors[d]) {
                *component -= n * v as f64;
            }
        }
        let mut best = r;
        let mut best2 = norm2(r);
        for i in -1i32..=1 {
            for j in -1i32..=1 {
                for k in -1i32..=1 {
                    let t = [i as f64, j as f64, k as f64];
                    let candidate: [f64; 3] = std::array::from_fn(|c| {
                        r[c] + (0..3).map(|d| t[d] * self.vectors[d][c] as f64).sum::<f64>()
                    });
                    let c2 = norm2(candidate);
                    if c2 < best2 {
                        (best, best2) = (candidate, c2);
                    }
                }
            }
        }
        best
    }

    fn fraction_f64(&self, x: [f64; 3]) -> [f64; 3] {
        let r = &self.recip;
        [x[0] * r[0][0] + x[1] * r[1][0] + x[2] * r[2][0], x[1] * r[1][1] + x[2] * r[2][1], x[2] * r[2][2]]
    }
}

/// The largest `f64` below 1.
const ONE_BELOW: f64 = 1.0 - f64::EPSILON / 2.0;

fn norm2(r: [f64; 3]) -> f64 {
    r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rhombic dodecahedron (xy-square) of image distance 4, as `gmx editconf -bt
    /// dodecahedron` writes it.
    fn dodecahedron() -> PbcBox {
        let d = 4.0f32;
        PbcBox::new([[d, 0.0, 0.0], [0.0, d, 0.0], [d / 2.0, d / 2.0, d * std::f32::consts::FRAC_1_SQRT_2]])
            .expect("a valid box")
    }

    #[test]
    fn fractions_invert_the_box() {
        let pbc = PbcBox::new([[3.0, 0.0, 0.0], [1.0, 2.8, 0.0], [-1.2, 1.1, 2.6]]).expect("valid");
        let s = [0.25, 0.5, 0.75];
        let v = pbc.vectors();
        let x: RVec = std::array::from_fn(|k| (0..3).map(|d| s[d] * v[d][k] as f64).sum::<f64>() as f32);
        let back = pbc.fraction(x);
        for d in 0..3 {
            assert!((back[d] - s[d]).abs() < 1e-6, "{back:?}");
        }
        // Heights: c's height is cz; a's is the volume over |b x c|.
        assert!((pbc.height(2) - 2.6).abs() < 1e-6);
        let bxc = [2.8 * 2.6, -(1.0 * 2.6), 1.0 * 1.1 - 2.8 * -1.2];
        let area: f64 = bxc[0] * bxc[0] + bxc[1] * bxc[1] + bxc[2] * bxc[2];
        assert!((pbc.height(0) - pbc.volume() / area.sqrt()).abs() < 1e-5, "{}", pbc.height(0));
    }

    #[test]
    fn wrapping_lands_in_the_unit_cell() {
        let pbc = dodecahedron();
        let mut state = 0x9E37_79B9u64;
        for _ in 0..10_000 {
            let x: RVec = std::array::from_fn(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 20.0
            });
            let s = pbc.fraction(pbc.wrap(x));
            assert!(s.iter().all(|&c| (-1e-6..1.0 + 1e-6).contains(&c)), "{x:?} -> {s:?}");
            let (w, u) = pbc.put_in_box(x);
            assert!(u.iter().all(|&c| (0.0..1.0).contains(&c)), "{u:?}");
            assert_eq!(u, pbc.clamped_fraction(w), "the fractions are those of the stored point");
        }
    }

    #[test]
    fn a_point_that_wraps_onto_the_upper_face_stays_there() {
        // -5e-8 nm wraps to exactly 3.0 in f32, whose fraction is 1: the point lies on the
        // upper face, so its fraction is the largest below 1, not 0.
        let pbc = PbcBox::rectangular([3.0; 3]).expect("valid");
        let (w, s) = pbc.put_in_box([-5e-8, 1.0, 1.0]);
        assert_eq!(w[0], 3.0);
        assert_eq!(s[0], ONE_BELOW);
    }

    #[test]
    fn minimum_image_is_the_shortest() {
        let pbc = dodecahedron();
        let (xi, xj) = ([0.1, 0.1, 0.1], [3.9, 3.9, 2.7]);
        let r = pbc.minimum_image(xi, xj);
        let v = pbc.vectors();
        for i in -2i32..=2 {
            for j in -2i32..=2 {
                for k in -2i32..=2 {
                    let t = [i, j, k].map(f64::from);
                    let c: [f64; 3] = std::array::from_fn(|m| {
                        xi[m] as f64 - xj[m] as f64 + (0..3).map(|d| t[d] * v[d][m] as f64).sum::<f64>()
                    });
                    assert!(norm2(r) <= norm2(c) + 1e-9, "{r:?} longer than {c:?}");
                }
            }
        }
    }

    #[test]
    fn boxes_gromacs_refuses_are_explained() {
        let skewed = PbcBox::new([[3.0, 0.0, 0.0], [1.6, 3.0, 0.0], [0.0, 0.0, 3.0]]).expect_err("bx > ax/2");
        assert!(
            skewed.to_string().contains("too skewed: |bx| = 1.6000 nm is more than half of ax"),
            "{skewed}"
        );
        let rotated = PbcBox::new([[3.0, 0.1, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]]).expect_err("ay");
        assert!(rotated.to_string().contains("box vector a has a y component"), "{rotated}");
        assert!(PbcBox::rectangular([1.0, -1.0, 1.0]).is_err());
        assert!(PbcBox::rectangular([1.0, f32::NAN, 1.0]).is_err());
        assert!(!dodecahedron().is_rectangular() && PbcBox::rectangular([1.0; 3]).unwrap().is_rectangular());
    }
}
