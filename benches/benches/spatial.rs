//! The spatial channel's index: what taking the item nearest to a focus
//! costs as the queue grows, from 10³ to 10⁶ items, in the two cases that
//! matter. An R*-tree nearest-neighbour pop opens the few nodes whose boxes
//! come nearer than the answer, so the cost should grow with log n where
//! items lie around the focus: from 10³ to 10⁶ items, about 2× (log 10⁶ / log 10³),
//! where a scan would be 1000×. Expect somewhat more at 10⁵ and 10⁶: the
//! tree no longer fits the caches there, and each level of a descent costs
//! a cache miss.
//!
//! **A moving focus.** Each step pops the item nearest to the focus and
//! pushes one back at a fresh random point, so the size stays constant.
//! Between pops the focus moves along a Lissajous curve through the cube of
//! points, by about one item spacing per pop (`SIDE / n^⅓`), so the
//! workload has the same shape at every size and stays stationary: a focus
//! that crawled much slower would dig an ever deeper empty tunnel along its
//! path (each pop takes the nearest item, the uniform pushes barely refill
//! it), and the cost would grow with the length of the run rather than with
//! n. Only the pops are timed (in batches of 32, their pushes after each
//! batch); the pushes are reported beside them. The same workload on a bare
//! rstar tree (`pop_nearest_neighbor`, what `SpatialQueue` does for a focus
//! that moves on every pop) shows what the queue adds.
//!
//! **A fixed focus, drained.** A queue of n random items, drained to empty
//! nearest-first around the cube's centre: a player standing still while
//! chunks load outward in rings. Pops hollow out a growing empty ball, and
//! an exact nearest-neighbour search from it opens every tree node along
//! the ball's surface; `SpatialQueue` takes items out in batches so that
//! the surface is paid once per batch (see its cost notes). Reported: ns per
//! pop over the whole drain and over its second half (the hollow at its
//! widest), medians of several drains; and the longest single pop (a batch
//! refill), from one more drain that times every pop.
//!
//! Full run: `cargo bench -p smartpool-bench --bench spatial`
//! CI size:  `SMARTPOOL_BENCH_QUICK=1 cargo bench -p smartpool-bench --bench spatial`
//!           (10³ and 10⁴ items only, a few seconds)

use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use smartpool_spatial::rstar::{PointDistance, RTree, RTreeObject, AABB};
use smartpool_spatial::SpatialQueue;

/// Pops timed together: a batch amortises the clock, and keeps the size
/// within 32 of n.
const BATCH: u64 = 32;
/// Points fill a cube this wide.
const SIDE: f32 = 1000.0;
/// The focus's curve spans this much either side of the cube's centre.
const AMPLITUDE: f64 = 0.45 * SIDE as f64;

/// A deterministic stream of pseudo-random points.
struct Points(u64);

impl Points {
    fn unit(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }

    fn next(&mut self) -> [f32; 3] {
        [self.unit() * SIDE, self.unit() * SIDE, self.unit() * SIDE]
    }
}

/// What the moving-focus workload runs on.
trait Store {
    fn new() -> Self;
    fn push(&mut self, at: [f32; 3], item: u64);
    fn pop(&mut self, focus: [f32; 3]) -> Option<u64>;
    fn len(&self) -> usize;
}

impl Store for SpatialQueue<u64, [f32; 3]> {
    fn new() -> Self {
        SpatialQueue::new()
    }
    fn push(&mut self, at: [f32; 3], item: u64) {
        SpatialQueue::push(self, at, item)
    }
    fn pop(&mut self, focus: [f32; 3]) -> Option<u64> {
        self.pop_nearest(focus).map(|(_, item)| item)
    }
    fn len(&self) -> usize {
        SpatialQueue::len(self)
    }
}

/// A leaf of the bare rstar tree.
struct Leaf {
    at: [f32; 3],
    item: u64,
}

impl RTreeObject for Leaf {
    type Envelope = AABB<[f32; 3]>;
    fn envelope(&self) -> AABB<[f32; 3]> {
        AABB::from_point(self.at)
    }
}

impl PointDistance for Leaf {
    fn distance_2(&self, q: &[f32; 3]) -> f32 {
        (0..3).fold(0.0, |sum, i| {
            let d = self.at[i] - q[i];
            sum + d * d
        })
    }
}

impl Store for RTree<Leaf> {
    fn new() -> Self {
        RTree::new()
    }
    fn push(&mut self, at: [f32; 3], item: u64) {
        self.insert(Leaf { at, item })
    }
    fn pop(&mut self, focus: [f32; 3]) -> Option<u64> {
        self.pop_nearest_neighbor(&focus).map(|leaf| leaf.item)
    }
    fn len(&self) -> usize {
        self.size()
    }
}

/// A store of `n` items at random points, a moving focus, and the timings.
struct Moving<S> {
    store: S,
    points: Points,
    /// The focus's position along its curve, and its step per pop.
    t: f64,
    dt: f64,
    /// ns per pop and per push, one pair per criterion sample.
    samples: Vec<(f64, f64)>,
}

impl<S: Store> Moving<S> {
    fn new(n: usize) -> Moving<S> {
        let mut points = Points(n as u64);
        let mut store = S::new();
        for i in 0..n as u64 {
            store.push(points.next(), i);
        }
        // The curve's speed is about AMPLITUDE × 1.7 per unit of t.
        let spacing = SIDE as f64 / (n as f64).cbrt();
        Moving {
            store,
            points,
            t: 0.0,
            dt: spacing / (AMPLITUDE * 1.7),
            samples: Vec::new(),
        }
    }

    /// The focus for the next pop: a step along a Lissajous curve whose
    /// frequencies (1, √2, √3) never repeat, so it sweeps the whole cube.
    fn focus(&mut self) -> [f32; 3] {
        self.t += self.dt;
        let t = self.t;
        let at = |phase: f64| (SIDE as f64 / 2.0 + AMPLITUDE * phase.sin()) as f32;
        [at(t), at(t * 2f64.sqrt() + 1.0), at(t * 3f64.sqrt() + 2.0)]
    }

    /// `iters` pops (and as many pushes); returns the time of the pops.
    fn run(&mut self, iters: u64) -> Duration {
        let (mut pops, mut pushes) = (Duration::ZERO, Duration::ZERO);
        let mut popped = [0u64; BATCH as usize];
        let (mut focuses, mut fresh) = ([[0.0; 3]; BATCH as usize], [[0.0; 3]; BATCH as usize]);
        let mut left = iters;
        while left > 0 {
            let k = left.min(BATCH) as usize;
            for (f, p) in focuses[..k].iter_mut().zip(&mut fresh[..k]) {
                *f = self.focus();
                *p = self.points.next();
            }
            let start = Instant::now();
            for (slot, focus) in popped[..k].iter_mut().zip(&focuses) {
                *slot = black_box(self.store.pop(*focus)).expect("never empty");
            }
            pops += start.elapsed();
            let start = Instant::now();
            for (&item, &at) in popped[..k].iter().zip(&fresh) {
                self.store.push(at, item);
            }
            pushes += start.elapsed();
            left -= k as u64;
        }
        let per = |d: Duration| d.as_nanos() as f64 / iters as f64;
        self.samples.push((per(pops), per(pushes)));
        pops
    }

    /// Median ns per pop and per push over the samples.
    fn medians(&self) -> (f64, f64) {
        let mut pops: Vec<f64> = self.samples.iter().map(|s| s.0).collect();
        let mut pushes: Vec<f64> = self.samples.iter().map(|s| s.1).collect();
        (median(&mut pops), median(&mut pushes))
    }
}

/// A queue of `n` items at random points from `seed`.
fn filled(n: usize, seed: u64) -> SpatialQueue<u64, [f32; 3]> {
    let mut points = Points(seed);
    let mut queue = SpatialQueue::new();
    for i in 0..n as u64 {
        queue.push(points.next(), i);
    }
    queue
}

/// Drains `n` items nearest-first around the cube's centre: ns per pop over
/// the whole drain and over its second half.
fn drain(n: usize, seed: u64) -> (f64, f64) {
    let mut queue = filled(n, seed);
    let focus = [SIDE / 2.0; 3];
    let start = Instant::now();
    for _ in 0..n / 2 {
        black_box(queue.pop_nearest(focus));
    }
    let half = start.elapsed();
    while black_box(queue.pop_nearest(focus)).is_some() {}
    let whole = start.elapsed();
    let per = |d: Duration, pops: usize| d.as_nanos() as f64 / pops as f64;
    (per(whole, n), per(whole - half, n - n / 2))
}

/// The same drain with every pop timed: the longest pop, in µs.
fn longest_pop(n: usize, seed: u64) -> f64 {
    let mut queue = filled(n, seed);
    let focus = [SIDE / 2.0; 3];
    let mut longest = Duration::ZERO;
    loop {
        let start = Instant::now();
        let popped = black_box(queue.pop_nearest(focus));
        longest = longest.max(start.elapsed());
        if popped.is_none() {
            break;
        }
    }
    longest.as_nanos() as f64 / 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    let sizes: &[usize] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    eprintln!(
        "spatial: SpatialQueue<u64, [f32; 3]> pop nearest{}",
        if quick { ", quick (CI) sizes" } else { "" }
    );
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(if quick {
            Duration::from_millis(10)
        } else {
            Duration::from_secs(1)
        })
        .measurement_time(if quick {
            Duration::from_millis(50)
        } else {
            Duration::from_secs(3)
        })
        .configure_from_args();

    let mut group = c.benchmark_group("spatial pop nearest, moving focus (ns/pop)");
    let mut moving = Vec::new();
    for &n in sizes {
        let queue = RefCell::new(Moving::<SpatialQueue<u64, [f32; 3]>>::new(n));
        group.bench_function(format!("SpatialQueue, {n} queued"), |b| {
            b.iter_custom(|iters| queue.borrow_mut().run(iters))
        });
        let queue = queue.into_inner();
        assert_eq!(queue.store.len(), n, "the size stayed constant");
        let bare = RefCell::new(Moving::<RTree<Leaf>>::new(n));
        group.bench_function(format!("rstar alone, {n} queued"), |b| {
            b.iter_custom(|iters| bare.borrow_mut().run(iters))
        });
        let (pop, push) = queue.medians();
        let bare = bare.into_inner();
        assert_eq!(bare.store.len(), n, "the size stayed constant");
        let (bare_pop, _) = bare.medians();
        moving.push((n, pop, push, bare_pop));
    }
    group.finish();

    // Several drains per size (fewer as they grow), then one timed pop by
    // pop.
    let mut drains = Vec::new();
    for &n in sizes {
        let rounds = if quick {
            3
        } else {
            (1_000_000 / n).clamp(1, 15)
        };
        let (mut whole, mut second): (Vec<f64>, Vec<f64>) =
            (0..rounds).map(|r| drain(n, r as u64 + 1)).unzip();
        let longest = longest_pop(n, 1);
        eprintln!("spatial: drained {n} items {} times", rounds + 1);
        drains.push((n, median(&mut whole), median(&mut second), longest));
    }

    let (base_n, base_pop, _, _) = moving[0];
    let log_ratio = |n: usize| (n as f64).ln() / (base_n as f64).ln();
    println!("\n## Spatial pop nearest, moving focus (medians; push back beside)\n");
    println!(
        "| queued | ns/pop | ratio to 10³ | log n / log 10³ | ns/push | rstar alone ns/pop | queue / rstar |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &(n, pop, push, bare) in &moving {
        println!(
            "| {n} | {pop:.0} | {:.2} | {:.2} | {push:.0} | {bare:.0} | {:.2} |",
            pop / base_pop,
            log_ratio(n),
            pop / bare,
        );
    }
    let (_, base_drain, _, _) = drains[0];
    println!("\n## Spatial pop nearest, fixed focus drained to empty (medians)\n");
    println!(
        "| queued before the drain | ns/pop | ratio to 10³ | log n / log 10³ | ns/pop, second half | longest pop (µs) |"
    );
    println!("|---|---|---|---|---|---|");
    for &(n, whole, second, longest) in &drains {
        println!(
            "| {n} | {whole:.0} | {:.2} | {:.2} | {second:.0} | {longest:.0} |",
            whole / base_drain,
            log_ratio(n),
        );
    }
}
