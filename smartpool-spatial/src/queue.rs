//! `SpatialQueue`: items placed at points, taken nearest to a query point
//! first. The index inside [`SpatialChannel`](crate::SpatialChannel), public
//! as a building block (and to benchmark it alone).
//!
//! # Two stores
//!
//! * The tree: an R*-tree (rstar) with one leaf per item. It answers a
//!   nearest-neighbour query for any query point, so the focus may move on
//!   every pop at no cost: nothing there is ordered by it.
//! * The batch (`batch`): items already taken out of the tree, in a
//!   min-heap on their distance to one focus, with a squared distance
//!   `bound` between them: every batch item is at most `bound` from that
//!   focus, every tree item at least `bound`.
//!
//! A pop under the batch's focus takes the heap's top; under another focus
//! it first puts the batch back into the tree. When the heap is empty, a
//! refill takes the `k` items nearest the focus out of the tree in one
//! search and one drain, `k` doubling while the focus stays put. Why: an
//! exact nearest-neighbour search over bounding boxes opens every node whose
//! box comes nearer than the answer, and once pops have hollowed out an
//! empty ball around a focus that stays put, that is every node along the
//! ball's surface (about √n in 2-D, n^⅔ in 3-D). No tree shape avoids it;
//! a batch pays it once per `k` pops instead of once per pop. The batch
//! module documents the sizes and what they cost.
//!
//! # Why the order stays exact
//!
//! All distances are squared distances to the batch's focus, computed by
//! `point::distance_2` from tamed points, so never NaN: a total order.
//!
//! The separation (batch ≤ `bound` ≤ tree) holds after a refill. A refill
//! cuts at a radius `r`: the drain removes every tree item strictly nearer
//! than `r` and a given number `t` of those exactly at `r`, so afterwards
//! every drained item is at most `r` away and every tree item at least `r`;
//! `bound` becomes `r`. (The batch was empty; the drain finds every item it
//! selects, see `Within` in `batch`.) The cut is chosen so that the drain
//! takes exactly the items a first pass saw: either rstar's best-first
//! iterator lists the `k` nearest in nondecreasing order, `r` is the last
//! one's distance and `t` the number listed at `r` (every item nearer than
//! `r` was listed before it); or a depth-first walk lists every item within
//! a guessed radius `g`, and `r` is `g` (everything within it goes) or the
//! `k`-th smallest distance listed, with `t` the number of the `k` nearest
//! at `r` (every item nearer than `r ≤ g` was listed). A push keeps the
//! separation: an item nearer than `bound` joins the heap, any other the
//! tree. A pop keeps it (removing an item breaks neither inequality), and
//! so does a refocus, which empties the batch and sets `bound` to zero.
//!
//! So while the focus is the batch's, the heap's top is at most as far as
//! every other item of either store: the nearest of the queue, as an
//! item-by-item search would have found (up to the order among equal
//! distances, which is unspecified). Items never get lost or duplicated:
//! each is in exactly one store, and a drain or refocus moves it whole.

//! Removals from the tree select the leaf by distance (the drain) or by
//! address (rstar's `pop_nearest_neighbor`), so items need no equality and
//! equal points never get confused.

use std::fmt;

use rstar::{PointDistance, RTree, RTreeObject, AABB};

use crate::batch::Batch;
use crate::point::{self, SpatialPoint};

/// Items at points; [`SpatialQueue::pop_nearest`] takes the one nearest to
/// any point you give it.
///
/// Items at equal distances come out in an unspecified order, none lost.
/// Coordinates are clamped to a quarter of the scalar type's range (NaN
/// counts as far away), which keeps the index's arithmetic finite; see
/// [`SpatialPoint`].
///
/// ```
/// use smartpool_spatial::SpatialQueue;
///
/// let mut chunks = SpatialQueue::new();
/// chunks.push([0.0, 0.0], "spawn");
/// chunks.push([5.0, 0.0], "village");
/// chunks.push([9.0, 9.0], "mountain");
///
/// let player = [6.0, 1.0];
/// assert_eq!(chunks.pop_nearest(player), Some(([5.0, 0.0], "village")));
/// let player = [1.0, 1.0];
/// assert_eq!(chunks.pop_nearest(player), Some(([0.0, 0.0], "spawn")));
/// assert_eq!(chunks.len(), 1);
/// ```
///
/// # Cost
///
/// A push is O(log n): one root-to-leaf path of a balanced tree (or, for an
/// item nearer the focus than the queue's current batch, a heap push).
///
/// A pop is O(log n), amortised over the pops made while the focus stays
/// put:
///
/// * A focus that moves before every pop costs one exact nearest-neighbour
///   search and one removal per pop, O(log n) where items lie around the
///   focus: the `spatial` benchmark's moving focus measures the same as a
///   bare rstar tree.
/// * A focus that stays put is served from a batch: the queue takes the
///   items nearest to it out of the tree in one search, twice as many on
///   each refill (up to 4096, more if the search was mostly hollow space),
///   and pops them in order. That matters once pops have hollowed out an
///   empty ball around the focus (a queue drained nearest-first with
///   nothing new nearby: a player standing still while chunks load outward
///   in rings). An exact search from inside the ball opens every node along
///   its surface (about √n in 2-D, n^⅔ in 3-D), a limit of nearest-neighbour
///   search over bounding boxes, not of rstar alone; the batch pays it once
///   per batch. Draining a queue around a fixed focus then costs a pop
///   what a bare rstar tree's costs, growing only as the tree outgrows the
///   caches; without the batch, a pop inside the hollow grows with the
///   hollow's surface (BENCHMARKS.md, "Other benchmarks").
/// * A focus that moves every `m` pops starts each new batch at about `m`
///   items, so it pays about one search per move.
///
/// What the batch does not remove: the first pop after the focus moves puts
/// the old batch back into the tree (up to its size of re-insertions,
/// under the lock in a channel); the pop that refills it waits for the
/// whole refill (the longest pop of a drain, growing with the queue; in a
/// [`SpatialChannel`](crate::SpatialChannel), under its lock); and a focus
/// that moves on every pop inside a hollow pays the surface on every pop,
/// as any exact search would.
///
/// Use a point type with as many dimensions as the data: 2-D points stored
/// as 3-D ones make flat boxes, whose zero volumes blind the R* insertion
/// heuristics (draining such a tree is orders of magnitude slower).
pub struct SpatialQueue<T, P: SpatialPoint = [f32; 3]> {
    tree: RTree<Entry<T, P>>,
    batch: Batch<T, P>,
}

/// One item at its (tamed) point: a leaf of the tree, or a batch item.
pub(crate) struct Entry<T, P> {
    pub(crate) at: P,
    pub(crate) item: T,
}

impl<T, P: SpatialPoint> RTreeObject for Entry<T, P> {
    type Envelope = AABB<P>;

    fn envelope(&self) -> AABB<P> {
        AABB::from_point(self.at)
    }
}

impl<T, P: SpatialPoint> PointDistance for Entry<T, P> {
    fn distance_2(&self, query: &P) -> P::Scalar {
        point::distance_2(&self.at, query)
    }
}

impl<T, P: SpatialPoint> SpatialQueue<T, P> {
    /// An empty queue.
    pub fn new() -> SpatialQueue<T, P> {
        SpatialQueue {
            tree: RTree::new(),
            batch: Batch::new(),
        }
    }

    /// Places `item` at `at`. O(log n).
    pub fn push(&mut self, at: P, item: T) {
        let entry = Entry {
            at: point::tame(at),
            item,
        };
        if let Err(entry) = self.batch.offer(entry) {
            self.tree.insert(entry);
        }
    }

    /// Removes and returns the item nearest to `focus`, with its point (as
    /// stored: clamped, see [`SpatialPoint`]); `None` if the queue is empty.
    /// O(log n), amortised over the pops made while the focus stays put
    /// (see the type's cost notes).
    pub fn pop_nearest(&mut self, focus: P) -> Option<(P, T)> {
        let focus = point::tame(focus);
        if !self.batch.is_for(&focus) {
            self.batch.refocus(focus, &mut self.tree);
        }
        if self.batch.len() == 0 {
            self.batch.refill(&mut self.tree);
        }
        self.batch.pop().map(|entry| (entry.at, entry.item))
    }

    /// How many items are queued.
    pub fn len(&self) -> usize {
        self.tree.size() + self.batch.len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T, P: SpatialPoint> Default for SpatialQueue<T, P> {
    fn default() -> Self {
        SpatialQueue::new()
    }
}

impl<T, P: SpatialPoint> fmt::Debug for SpatialQueue<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpatialQueue")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use num_traits::Float;

    use super::*;

    /// A deterministic stream of pseudo-random numbers in [0, 1).
    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn pops_in_the_order_a_full_scan_would() {
        let mut seed = 7;
        let mut q = SpatialQueue::<usize, [f64; 3]>::new();
        let mut all = Vec::new();
        for i in 0..2_000 {
            // A coarse grid: many equal points and equal distances.
            let p = [(); 3].map(|_| (lcg(&mut seed) * 8.0).floor());
            q.push(p, i);
            all.push(Some(p));
        }
        for step in 0..2_000 {
            let focus = [(); 3].map(|_| lcg(&mut seed) * 8.0);
            let (at, i) = q.pop_nearest(focus).unwrap();
            assert_eq!(all[i], Some(at), "item {i} popped once, with its point");
            let best = all
                .iter()
                .flatten()
                .map(|p| point::distance_2(p, &focus))
                .fold(f64::INFINITY, f64::min);
            assert_eq!(point::distance_2(&at, &focus), best, "pop {step}");
            all[i] = None;
        }
        assert!(q.is_empty());
        assert_eq!(q.pop_nearest([0.0; 3]), None);
    }

    /// A point of `P` from `f` per coordinate.
    fn at<P: SpatialPoint>(mut f: impl FnMut() -> f64) -> P {
        P::generate(|_| num_traits::cast(f()).unwrap())
    }

    /// Pushes, pops and focus moves in random phases, every pop checked
    /// against a linear scan of what is queued: fixed-focus drains (the
    /// batch), a focus moving on every pop, bursts of pushes far away, on a
    /// coarse grid (equal distances), and at or near the focus (into the
    /// batch).
    fn matches_a_linear_scan<P: SpatialPoint>(seed: u64, pops: usize) {
        let mut seed = seed;
        let mut q = SpatialQueue::<usize, P>::new();
        // What is queued, by a linear scan's lights: (point as stored, id).
        let mut queued: Vec<(P, usize)> = Vec::new();
        let mut ids = 0..;
        let mut focus: P = at(|| 4.0);
        let mut push = |q: &mut SpatialQueue<usize, P>, queued: &mut Vec<(P, usize)>, p: P| {
            let id = ids.next().unwrap();
            q.push(p, id);
            queued.push((point::tame(p), id));
        };
        for _ in 0..2_000 {
            let p = at(|| (lcg(&mut seed) * 8.0).floor());
            push(&mut q, &mut queued, p);
        }
        let mut popped = 0;
        while popped < pops {
            let phase = lcg(&mut seed);
            let (moving, len) = if phase < 0.25 {
                // A burst of pushes, then on to the pops.
                for _ in 0..(lcg(&mut seed) * 200.0) as usize {
                    let p = if lcg(&mut seed) < 0.5 {
                        at(|| (lcg(&mut seed) * 8.0).floor())
                    } else {
                        at(|| lcg(&mut seed) * 8.0)
                    };
                    push(&mut q, &mut queued, p);
                }
                (false, 0)
            } else if phase < 0.7 {
                (false, (lcg(&mut seed) * 600.0) as usize)
            } else {
                (true, (lcg(&mut seed) * 50.0) as usize)
            };
            if lcg(&mut seed) < 0.7 {
                focus = if lcg(&mut seed) < 0.3 {
                    at(|| (lcg(&mut seed) * 8.0).floor())
                } else {
                    at(|| lcg(&mut seed) * 8.0)
                };
            }
            for _ in 0..len {
                if moving {
                    focus = at(|| lcg(&mut seed) * 8.0);
                }
                if lcg(&mut seed) < 0.1 {
                    // Near the focus (maybe nearer than what the batch
                    // holds), exactly at it, or anywhere.
                    let r = lcg(&mut seed);
                    let p = if r < 0.4 {
                        P::generate(|i| {
                            let jiggle = (lcg(&mut seed) - 0.5) * 0.5;
                            focus.nth(i) + num_traits::cast(jiggle).unwrap()
                        })
                    } else if r < 0.6 {
                        focus
                    } else {
                        at(|| lcg(&mut seed) * 8.0)
                    };
                    push(&mut q, &mut queued, p);
                }
                let got = q.pop_nearest(focus);
                let Some((p, id)) = got else {
                    assert!(queued.is_empty(), "pop {popped}: none, but some queued");
                    break;
                };
                let best = queued
                    .iter()
                    .map(|(p, _)| point::distance_2(p, &focus))
                    .fold(P::Scalar::infinity(), |a, b| a.min(b));
                assert!(
                    point::distance_2(&p, &focus) == best,
                    "pop {popped}: not the nearest"
                );
                let i = queued
                    .iter()
                    .position(|&(_, i)| i == id)
                    .expect("popped once, and what was pushed");
                assert!(queued.swap_remove(i).0 == p, "item {id} with its point");
                assert_eq!(q.len(), queued.len());
                popped += 1;
            }
        }
        let stats = q.batch.stats;
        assert!(
            stats.popped > 0 && stats.guessed > 0 && stats.listed > 0,
            "{stats:?}"
        );
    }

    #[test]
    fn matches_a_linear_scan_in_3d_f64() {
        matches_a_linear_scan::<[f64; 3]>(11, 20_000);
    }

    #[test]
    fn matches_a_linear_scan_in_2d_f32() {
        matches_a_linear_scan::<[f32; 2]>(12, 20_000);
    }

    #[test]
    fn a_fixed_focus_drain_comes_out_sorted_by_distance() {
        // Enough items for batches of the largest size, guessed radii and
        // ties (a tenth of the points on a coarse grid).
        let mut seed = 3;
        let mut q = SpatialQueue::<u32, [f32; 3]>::new();
        let mut all = Vec::new();
        for i in 0..30_000 {
            let p = if i % 10 == 0 {
                [(); 3].map(|_| (lcg(&mut seed) * 10.0).floor() as f32)
            } else {
                [(); 3].map(|_| lcg(&mut seed) as f32 * 10.0)
            };
            q.push(p, i);
            all.push(p);
        }
        let focus = [5.0, 5.0, 5.0];
        let mut expected: Vec<f32> = all.iter().map(|p| point::distance_2(p, &focus)).collect();
        expected.sort_by(f32::total_cmp);
        let mut seen = vec![false; all.len()];
        let mut got = Vec::new();
        while let Some((p, i)) = q.pop_nearest(focus) {
            assert!(!seen[i as usize] && all[i as usize] == p);
            seen[i as usize] = true;
            got.push(point::distance_2(&p, &focus));
        }
        assert!(got == expected, "pops in order of distance, each once");
        assert_eq!(q.batch.next_take(), 4096);
        assert!(q.batch.stats.guessed > 0, "{:?}", q.batch.stats);
    }

    #[test]
    fn a_focus_moving_on_every_pop_takes_one_item_at_a_time() {
        let mut seed = 5;
        let mut q = SpatialQueue::<u32, [f64; 2]>::new();
        for i in 0..1_000 {
            q.push([lcg(&mut seed), lcg(&mut seed)], i);
        }
        for _ in 0..500 {
            q.pop_nearest([lcg(&mut seed), lcg(&mut seed)]).unwrap();
            assert_eq!(q.batch.len(), 0, "nothing held back for the old focus");
        }
        let stats = q.batch.stats;
        assert_eq!((stats.popped, stats.guessed, stats.listed), (500, 0, 0));
    }

    #[test]
    fn a_new_focus_starts_with_what_the_old_one_served() {
        let mut q = SpatialQueue::<u32, [f64; 2]>::new();
        for i in 0..1_000 {
            q.push([f64::from(i), 0.0], i);
        }
        for i in 0..10 {
            assert_eq!(q.pop_nearest([0.0, 0.0]).unwrap().1, i);
        }
        let held = q.batch.len();
        assert!(held > 0 && q.len() == 990);
        // What the batch held goes back; the new focus takes 10 at once.
        assert_eq!(q.pop_nearest([500.2, 0.0]).unwrap().1, 500);
        assert_eq!((q.batch.len(), q.batch.next_take()), (9, 20));
        assert_eq!(q.pop_nearest([500.2, 0.0]).unwrap().1, 501);
        // Back at the start, nothing was lost.
        assert_eq!(q.pop_nearest([0.0, 0.0]).unwrap().1, 10);
        assert_eq!(q.len(), 987);
    }

    #[test]
    fn a_push_nearer_than_the_batch_edge_comes_out_next() {
        let mut q = SpatialQueue::<&str, [f32; 2]>::new();
        for x in 1..=100 {
            q.push([x as f32, 0.0], "far");
        }
        let mut popped = 0;
        while q.batch.len() == 0 {
            q.pop_nearest([0.0, 0.0]).unwrap();
            popped += 1;
        }
        let held = q.batch.len();
        q.push([0.5, 0.0], "near");
        assert_eq!(q.batch.len(), held + 1, "into the batch, not the tree");
        assert_eq!(q.pop_nearest([0.0, 0.0]), Some(([0.5, 0.0], "near")));
        // One beyond the batch's edge goes to the tree, and waits its turn.
        q.push([1000.0, 0.0], "farthest");
        assert_eq!(q.batch.len(), held);
        let order: Vec<_> = std::iter::from_fn(|| q.pop_nearest([0.0, 0.0])).collect();
        assert_eq!(order.len(), 101 - popped);
        assert_eq!(order[0].0, [popped as f32 + 1.0, 0.0]);
        assert_eq!(order[100 - popped], ([1000.0, 0.0], "farthest"));
    }

    #[test]
    fn items_at_one_point_all_come_out() {
        let mut q = SpatialQueue::<u32, [f32; 2]>::new();
        for i in 0..500 {
            q.push([1.0, 1.0], i);
        }
        let mut got: Vec<u32> = std::iter::from_fn(|| q.pop_nearest([0.0, 0.0]))
            .map(|(_, i)| i)
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..500).collect::<Vec<_>>());
    }

    #[test]
    fn hostile_coordinates_neither_panic_nor_lose_items() {
        let mut q = SpatialQueue::<usize, [f32; 3]>::new();
        let odd = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            -f32::MAX,
            0.0,
        ];
        let mut n = 0;
        for &a in &odd {
            for &b in &odd {
                for &c in &odd {
                    q.push([a, b, c], n);
                    n += 1;
                }
            }
        }
        let mut seen = vec![false; n];
        let mut k = 0;
        while let Some((_, i)) = q.pop_nearest([odd[k % 6], odd[(k / 6) % 6], 1.0]) {
            assert!(!seen[i]);
            seen[i] = true;
            k += 1;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn nan_coordinates_count_as_far_away() {
        let mut q = SpatialQueue::<&str, [f64; 2]>::new();
        q.push([f64::NAN, 0.0], "lost");
        q.push([1e6, 1e6], "far");
        q.push([1.0, 0.0], "near");
        let order: Vec<_> = std::iter::from_fn(|| q.pop_nearest([0.0, 0.0]))
            .map(|(_, s)| s)
            .collect();
        assert_eq!(order, ["near", "far", "lost"]);
    }

    /// Alone in the queue, a task at an infinite squared distance (a NaN
    /// coordinate, clamped far away) is still found by a plain pop.
    #[test]
    fn a_lone_task_at_infinite_distance_is_found() {
        let mut q = SpatialQueue::<&str, [f32; 2]>::new();
        q.push([f32::NAN, 0.0], "lost");
        assert_eq!(q.pop_nearest([0.0, 0.0]).map(|(_, s)| s), Some("lost"));
        assert_eq!(q.len(), 0);
        q.push([f32::MAX, f32::MAX], "far");
        assert_eq!(q.pop_nearest([-1e30, -1e30]).map(|(_, s)| s), Some("far"));
    }
}
