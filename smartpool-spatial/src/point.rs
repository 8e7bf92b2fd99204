//! The points a spatial channel orders by, and the one rule that keeps the
//! index safe to use under a lock: every coordinate is tamed before rstar
//! sees it.
//!
//! # Why tame
//!
//! rstar orders distances and coordinates with `partial_cmp(..).unwrap()`,
//! so a NaN anywhere in its arithmetic panics in the middle of an insertion
//! or a removal: under the queue's lock, on a worker thread, with the tree
//! half-modified and tasks lost. A NaN arises from a NaN coordinate, and
//! from finite ones too: box centres are `(lower + upper) / 2`, and at
//! `f32::MAX` the sum overflows to infinity, and `inf - inf` is NaN.
//!
//! # The invariant
//!
//! Every point that enters a [`SpatialQueue`](crate::SpatialQueue), and
//! every query point, has coordinates in `[-LIMIT, LIMIT]` with `LIMIT =
//! MAX / 4` of its scalar type. Then sums of two coordinates, differences of
//! two centres and box extents stay finite; squared distances may overflow
//! to infinity (points that far apart compare equal, which loses no task),
//! but no subtraction of two infinities can happen in the comparisons rstar
//! unwraps. Taming maps a NaN to `+LIMIT` (a task with no meaningful
//! position runs after the well-placed ones) and clamps the rest; real
//! coordinates (anything below about 10³⁷ in `f32`) pass unchanged.

use num_traits::{Float, Zero};

/// A point type a [`SpatialChannel`](crate::SpatialChannel) can order tasks
/// by: an [`rstar::Point`] with floating-point coordinates, `Copy` (the
/// focus lives in an atomic cell), `Send + Sync`, whose scalar is
/// `Send + Sync` too (the queue keeps distances beside its items).
///
/// Implemented for every such type, among them `[f32; 2]`, `[f32; 3]`,
/// `[f64; 2]` and `[f64; 3]`. Your own point type qualifies once it
/// implements [`rstar::Point`] and `Copy`; its accessors (`nth`, `generate`) run under
/// the channel's lock and must not panic.
///
/// ```
/// use smartpool_spatial::{rstar, SpatialPoint};
///
/// #[derive(Clone, Copy, PartialEq, Debug)]
/// struct Tile {
///     x: f32,
///     y: f32,
/// }
///
/// impl rstar::Point for Tile {
///     type Scalar = f32;
///     const DIMENSIONS: usize = 2;
///
///     fn generate(mut f: impl FnMut(usize) -> f32) -> Tile {
///         Tile { x: f(0), y: f(1) }
///     }
///     fn nth(&self, index: usize) -> f32 {
///         if index == 0 { self.x } else { self.y }
///     }
///     fn nth_mut(&mut self, index: usize) -> &mut f32 {
///         if index == 0 { &mut self.x } else { &mut self.y }
///     }
/// }
///
/// fn spatial<P: SpatialPoint>() {}
/// spatial::<Tile>();
/// // Two `f32`: the focus is one native atomic word.
/// assert!(smartpool_spatial::SpatialChannel::<Tile>::focus_is_lock_free());
/// ```
pub trait SpatialPoint:
    rstar::Point<Scalar: Float + Send + Sync> + Copy + Send + Sync + 'static
{
}

impl<P> SpatialPoint for P where
    P: rstar::Point<Scalar: Float + Send + Sync> + Copy + Send + Sync + 'static
{
}

/// The largest coordinate magnitude the index holds (see the module doc).
fn limit<S: Float>() -> S {
    let two = S::one() + S::one();
    S::max_value() / (two * two)
}

/// `p` with every coordinate in `[-LIMIT, LIMIT]`; NaN becomes `+LIMIT`.
pub(crate) fn tame<P: SpatialPoint>(p: P) -> P {
    let limit = limit::<P::Scalar>();
    P::generate(|i| {
        let c = p.nth(i);
        if c.is_nan() {
            limit
        } else {
            c.max(-limit).min(limit)
        }
    })
}

/// The origin: where a new channel's focus starts.
pub(crate) fn origin<P: SpatialPoint>() -> P {
    P::generate(|_| P::Scalar::zero())
}

/// The squared Euclidean distance between `a` and `b`.
pub(crate) fn distance_2<P: SpatialPoint>(a: &P, b: &P) -> P::Scalar {
    (0..P::DIMENSIONS).fold(P::Scalar::zero(), |sum, i| {
        let d = a.nth(i) - b.nth(i);
        sum + d * d
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_coordinates_pass_unchanged() {
        let p = [1.5f32, -2e30, 0.0];
        assert_eq!(tame(p), p);
        let q = [-7.25f64, 1e300];
        assert_eq!(tame(q), q);
    }

    #[test]
    fn nan_goes_far_and_infinities_are_clamped() {
        let l = f32::MAX / 4.0;
        assert_eq!(
            tame([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
            [l, l, -l]
        );
        assert_eq!(tame([f32::MAX, -f32::MAX]), [l, -l]);
    }

    #[test]
    fn distances_are_squared() {
        assert_eq!(distance_2(&[0.0f64, 0.0], &[3.0, 4.0]), 25.0);
        assert_eq!(distance_2(&[1.0f32, 1.0, 1.0], &[1.0, 1.0, 1.0]), 0.0);
    }
}
