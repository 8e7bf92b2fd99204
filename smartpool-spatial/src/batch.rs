//! The batch: items already taken out of the tree, nearest to one focus
//! first, so that a focus that stays put pays the tree's search once per
//! batch instead of once per pop.
//!
//! # State
//!
//! * `focus`: the (tamed) point the batch is ordered for.
//! * `heap`: the batch's items, a min-heap on their squared distance to
//!   `focus`.
//! * `bound`: a squared distance with every batch item at most `bound` from
//!   `focus` and every tree item at least `bound` from it: the separation
//!   that makes popping the heap exact (see `SpatialQueue`'s module doc).
//!   Zero after a focus change (the batch is empty then, and no distance is
//!   below zero).
//! * `shell`: what the last refill took: how many items, and the `bound`
//!   before it (the current `bound` is the shell's outer edge). The density
//!   that guesses the next refill's radius.
//! * `served`: pops served under `focus` so far; `next`: how many items the
//!   next refill takes.
//!
//! # Transitions
//!
//! * [`Batch::offer`] (a push): an item nearer than `bound` joins the heap;
//!   any other goes back to the caller, for the tree. Either way the
//!   separation holds.
//! * [`Batch::refocus`] (a pop under a new focus): every batch item goes
//!   back into the tree, `bound` drops to zero, and `next` restarts at the
//!   number of pops the old focus served (at least 1, at most [`TAKE`]).
//! * [`Batch::refill`] (a pop that finds the heap empty) takes the `next`
//!   items nearest the focus out of the tree, in two passes: one that finds
//!   where to cut (a squared radius, and how many items exactly at it to
//!   take), and one drain that removes exactly those. `bound` becomes the
//!   cut's radius, `next` doubles.
//!
//! # Finding the cut
//!
//! With one item to take, the refill is rstar's `pop_nearest_neighbor` (a
//! pruned search, then a removal along the paths whose boxes contain it).
//! Otherwise it first guesses a radius from the last shell's density (the
//! volume of a ball grows as r^D) and lists the distances within it, a
//! plain depth-first walk: if it finds between 1 and `4 × next` items, a
//! selection gives the cut (or, under `next`, the guess itself is the cut:
//! everything within it goes). A guess that finds nothing or too much, or
//! no guess (after a focus change, or a shell all at one distance), falls
//! back to rstar's best-first nearest-neighbour iterator. Both are exact;
//! the walk is cheaper per item than the iterator, whose heap of open
//! nodes grows with a hollow's surface.
//!
//! # Why those sizes
//!
//! A refill costs one search, which is what one pop cost without a batch
//! (O(log n) among items, the surface of the emptied ball inside a hollow),
//! plus O(log n) per item taken. Doubling under one focus makes the number
//! of searches logarithmic in the pops that focus serves, and a drain
//! around a fixed focus pays the hollow's surface once per batch. Up to
//! [`TAKE`] items a batch; beyond, only while the drain opened more than
//! [`HOLLOW`] nodes per item taken (a drain without a hollow opens a few),
//! up to [`TAKE_IN_HOLLOW`]:
//! the batch grows with the surface, until the surface costs about as much
//! per pop as taking the item does. The price is the longest pop, a refill
//! under the channel's lock: see `SpatialQueue`'s cost notes for measured
//! numbers. A larger [`HOLLOW`] trades amortised cost for shorter refills.
//!
//! A new focus restarts at what the previous one served: a focus that moves
//! on every pop (the benchmark's Lissajous walk) refills one item at a
//! time, a plain nearest-neighbour pop, and one that serves about `m` pops
//! per move pays about one search per move. What a refocus puts back is at
//! most the last refill, which took at most the pops served under the old
//! focus plus those served under the focus before it (doubling from the
//! latter), and the items pushes offered: each pop and each push pays for
//! at most two re-insertions, O(log n) each.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use num_traits::{Float, NumCast};
use rstar::{RTree, SelectionFunction, AABB};

use crate::point::{self, SpatialPoint};
use crate::queue::Entry;

/// The most items a refill takes, unless the tree is hollow around the
/// focus.
const TAKE: usize = 4096;
/// The most items a refill takes when it is.
const TAKE_IN_HOLLOW: usize = 1 << 16;
/// Nodes opened per item taken above which a refill counts as hollow.
const HOLLOW: usize = 4;
/// A guessed radius is used when it holds at most this many times the items
/// wanted.
const OVERSHOOT: usize = 4;

/// Items out of the tree, nearest to `focus` first (see the module doc).
pub(crate) struct Batch<T, P: SpatialPoint> {
    focus: P,
    bound: P::Scalar,
    heap: BinaryHeap<Near<T, P>>,
    shell: Shell<P::Scalar>,
    served: usize,
    next: usize,
    /// Distances listed by a guessed radius; kept to reuse the allocation.
    scratch: Vec<P::Scalar>,
    #[cfg(test)]
    pub(crate) stats: Stats,
}

/// What the last refill took: `count` items between `inner` and `bound`.
#[derive(Copy, Clone)]
struct Shell<S> {
    inner: S,
    count: usize,
}

/// How each refill found its cut (for tests).
#[cfg(test)]
#[derive(Copy, Clone, Default, Debug)]
pub(crate) struct Stats {
    pub(crate) popped: usize,
    pub(crate) guessed: usize,
    pub(crate) listed: usize,
}

/// Where a refill cuts: every item strictly nearer than `radius` (squared)
/// goes, and at most `ties` exactly at it: `count` items in all.
struct Cut<S> {
    radius: S,
    ties: usize,
    count: usize,
}

impl<T, P: SpatialPoint> Batch<T, P> {
    /// An empty batch for the origin, whose first refill takes one item.
    pub(crate) fn new() -> Batch<T, P> {
        Batch {
            focus: point::origin(),
            bound: zero::<P>(),
            heap: BinaryHeap::new(),
            shell: Shell {
                inner: zero::<P>(),
                count: 0,
            },
            served: 0,
            next: 1,
            scratch: Vec::new(),
            #[cfg(test)]
            stats: Stats::default(),
        }
    }

    /// How many items the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether the batch is ordered for `focus` (tamed, like every point
    /// here). Compares coordinates, so `-0.0` and `0.0` are one focus.
    pub(crate) fn is_for(&self, focus: &P) -> bool {
        (0..P::DIMENSIONS).all(|i| self.focus.nth(i) == focus.nth(i))
    }

    /// Takes `entry` if it is nearer to the focus than every tree item can
    /// be; otherwise gives it back, for the tree.
    pub(crate) fn offer(&mut self, entry: Entry<T, P>) -> Result<(), Entry<T, P>> {
        let d = point::distance_2(&entry.at, &self.focus);
        if d < self.bound {
            self.heap.push(Near { d, entry });
            Ok(())
        } else {
            Err(entry)
        }
    }

    /// The nearest batch item, if any: the nearest of the whole queue (see
    /// `SpatialQueue`'s module doc).
    pub(crate) fn pop(&mut self) -> Option<Entry<T, P>> {
        let near = self.heap.pop()?;
        self.served += 1;
        Some(near.entry)
    }

    /// Orders the batch for `focus` from now on: every batch item goes back
    /// into `tree`.
    pub(crate) fn refocus(&mut self, focus: P, tree: &mut RTree<Entry<T, P>>) {
        for near in self.heap.drain() {
            tree.insert(near.entry);
        }
        self.focus = focus;
        self.bound = zero::<P>();
        self.shell = Shell {
            inner: zero::<P>(),
            count: 0,
        };
        self.next = self.served.clamp(1, TAKE);
        self.served = 0;
    }

    /// Moves the items nearest to the focus from `tree` into the (empty)
    /// batch: `next` of them, fewer if the tree holds fewer or a guessed
    /// radius held fewer (never none while the tree holds any).
    pub(crate) fn refill(&mut self, tree: &mut RTree<Entry<T, P>>) {
        debug_assert!(self.heap.is_empty());
        let focus = self.focus;
        if self.next == 1 {
            if let Some(entry) = tree.pop_nearest_neighbor(&focus) {
                let d = point::distance_2(&entry.at, &focus);
                self.heap.push(Near { d, entry });
                self.taken(d, 1);
                self.next = 2;
                #[cfg(test)]
                {
                    self.stats.popped += 1;
                }
            }
            return;
        }
        let cut = match self.guess().and_then(|r| self.cut_within(tree, r)) {
            Some(cut) => {
                #[cfg(test)]
                {
                    self.stats.guessed += 1;
                }
                cut
            }
            None => match cut_listed(tree, &focus, self.next) {
                Some(cut) => {
                    #[cfg(test)]
                    {
                        self.stats.listed += 1;
                    }
                    cut
                }
                None => return,
            },
        };
        let opened = Cell::new(0);
        let within = Within {
            focus,
            radius: cut.radius,
            ties: Cell::new(cut.ties),
            opened: &opened,
        };
        self.heap.extend(
            tree.drain_with_selection_function(within)
                .take(cut.count)
                .map(|entry| Near {
                    d: point::distance_2(&entry.at, &focus),
                    entry,
                }),
        );
        debug_assert_eq!(self.heap.len(), cut.count, "the drain takes the cut");
        self.taken(cut.radius, cut.count);
        let most = if opened.get() > HOLLOW * cut.count {
            TAKE_IN_HOLLOW
        } else {
            TAKE
        };
        self.next = (self.next * 2).min(most).max(self.next);
    }

    /// Records a refill that took `count` items out to `radius`.
    fn taken(&mut self, radius: P::Scalar, count: usize) {
        self.shell = Shell {
            inner: self.bound,
            count,
        };
        self.bound = radius;
    }

    /// A squared radius beyond `bound` that should hold about `next` tree
    /// items, if the last shell says anything: the same density, in volume
    /// (r^D), as the last shell.
    fn guess(&self) -> Option<P::Scalar> {
        if self.shell.count == 0 {
            return None;
        }
        let s = |n: usize| <P::Scalar as NumCast>::from(n);
        let half_dims = s(P::DIMENSIONS)? / s(2)?;
        let volume = |r2: P::Scalar| r2.powf(half_dims);
        let (inner, outer) = (volume(self.shell.inner), volume(self.bound));
        let grow = s(self.next)? / s(self.shell.count)?;
        let radius = (outer + (outer - inner) * grow).powf(half_dims.recip());
        // Equal edges (a shell all at one distance) give no density;
        // overflow gives infinity. Neither is a guess.
        (radius.is_finite() && radius > self.bound).then_some(radius)
    }

    /// The cut for `next` items if `radius` holds between 1 and
    /// `OVERSHOOT × next` tree items: everything within `radius` if that is
    /// at most `next`, else the `next` nearest, found by selection.
    fn cut_within(
        &mut self,
        tree: &RTree<Entry<T, P>>,
        radius: P::Scalar,
    ) -> Option<Cut<P::Scalar>> {
        let (focus, k) = (self.focus, self.next);
        let most = OVERSHOOT * k;
        let ds = &mut self.scratch;
        ds.clear();
        ds.extend(
            tree.locate_within_distance(focus, radius)
                .take(most)
                .map(|entry| point::distance_2(&entry.at, &focus)),
        );
        let cut = match ds.len() {
            0 => None,
            n if n == most => None,
            n if n <= k => Some(Cut {
                radius,
                ties: n,
                count: n,
            }),
            _ => {
                let (nearer, &mut kth, _) = ds.select_nth_unstable_by(k - 1, compare::<P>);
                let nearer = nearer.iter().filter(|&&d| d < kth).count();
                Some(Cut {
                    radius: kth,
                    ties: k - nearer,
                    count: k,
                })
            }
        };
        // A long listing's allocation is not worth keeping.
        if ds.capacity() > 4 * TAKE {
            *ds = Vec::new();
        }
        cut
    }

    /// How many items the next refill takes (for tests).
    #[cfg(test)]
    pub(crate) fn next_take(&self) -> usize {
        self.next
    }
}

/// The cut for the `k` items nearest `focus`, from rstar's best-first
/// iterator (exact whatever the tree's shape); `None` for an empty tree.
fn cut_listed<T, P: SpatialPoint>(
    tree: &RTree<Entry<T, P>>,
    focus: &P,
    k: usize,
) -> Option<Cut<P::Scalar>> {
    // In nondecreasing distance: how many, the farthest distance among
    // them, and how many lie strictly nearer than it.
    let (mut count, mut nearer) = (0, 0);
    let mut farthest = None;
    for (_, d) in tree.nearest_neighbor_iter_with_distance_2(focus).take(k) {
        if farthest != Some(d) {
            nearer = count;
            farthest = Some(d);
        }
        count += 1;
    }
    Some(Cut {
        radius: farthest?,
        ties: count - nearer,
        count,
    })
}

fn zero<P: SpatialPoint>() -> P::Scalar {
    num_traits::Zero::zero()
}

/// Distances in order. Tamed points make no NaN distance (see `point`);
/// were one to appear it would compare equal to everything, which
/// misorders but never panics under the channel's lock.
fn compare<P: SpatialPoint>(a: &P::Scalar, b: &P::Scalar) -> Ordering {
    a.partial_cmp(b).unwrap_or(Ordering::Equal)
}

/// A batch item with its squared distance to the batch's focus, ordered so
/// that `BinaryHeap`, a max-heap, pops the nearest first.
struct Near<T, P: SpatialPoint> {
    d: P::Scalar,
    entry: Entry<T, P>,
}

impl<T, P: SpatialPoint> Ord for Near<T, P> {
    fn cmp(&self, other: &Self) -> Ordering {
        compare::<P>(&other.d, &self.d)
    }
}

impl<T, P: SpatialPoint> PartialOrd for Near<T, P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T, P: SpatialPoint> PartialEq for Near<T, P> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T, P: SpatialPoint> Eq for Near<T, P> {}

/// Selects, for a drain, the items of a [`Cut`]: all those strictly nearer
/// than `radius` (squared) to `focus`, and at most `ties` exactly at it.
/// Counts the nodes it is asked about in `opened`.
///
/// A node is opened if its box comes within `radius`. That finds every
/// selected item: a box's distance is the distance to its point nearest the
/// focus, computed with the same operations in the same order as an item's
/// (`point::distance_2`, rstar's `length_2`), and rounding is monotone, so
/// it never exceeds the distance of an item inside the box. rstar's
/// `locate_within_distance`, which lists a guessed radius, selects with the
/// same two comparisons, so the drain takes exactly the items it listed.
struct Within<'a, P: SpatialPoint> {
    focus: P,
    radius: P::Scalar,
    ties: Cell<usize>,
    opened: &'a Cell<usize>,
}

impl<T, P: SpatialPoint> SelectionFunction<Entry<T, P>> for Within<'_, P> {
    fn should_unpack_parent(&self, envelope: &AABB<P>) -> bool {
        self.opened.set(self.opened.get() + 1);
        envelope.distance_2(&self.focus) <= self.radius
    }

    fn should_unpack_leaf(&self, entry: &Entry<T, P>) -> bool {
        let d = point::distance_2(&entry.at, &self.focus);
        if d < self.radius {
            true
        } else if d == self.radius && self.ties.get() > 0 {
            self.ties.set(self.ties.get() - 1);
            true
        } else {
            false
        }
    }
}
