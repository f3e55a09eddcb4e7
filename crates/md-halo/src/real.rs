//! The real types an engine keeps its positions and forces in: `f32` (GROMACS's mixed
//! precision, the default) or `f64`.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul, Sub};

use bytemuck::Pod;

/// `f32` or `f64`: the element type of an exchange's coordinates and forces
/// ([`HaloExchange`](crate::HaloExchange)`<'rt, R>`). Every decision of the decomposition is
/// made in `f64` fractions of the positions, whichever the type, so an `f64` exchange of
/// positions that are `f32` values makes the same plan as the `f32` exchange; the arrays, the
/// messages and the arithmetic on positions and forces (periodic shifts, sums of forces) are
/// the type's own. The box keeps GROMACS's `f32` vectors ([`PbcBox`](crate::PbcBox)): an
/// `f64` engine's periodic shifts are those of that box, exactly, and its own box must be the
/// same. Sealed.
pub trait Real:
    sealed::Sealed
    + Pod
    + Default
    + PartialEq
    + PartialOrd
    + Debug
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + AddAssign
{
    /// Zero.
    const ZERO: Self;
    /// The value as an `f64` (exact).
    fn to_f64(self) -> f64;
    /// The nearest value to `v`.
    fn from_f64(v: f64) -> Self;
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}
