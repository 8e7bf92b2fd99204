//! Fork-join rows, smartpool against rayon, interleaved rep by rep (the
//! fork-join issue's targets):
//!
//! * **F1 join**: fib(30) by `join`, sequential below 10 (28,656 joins),
//!   on 1 and on 2 threads; the time a join. Target ≤ 1.5 × rayon.
//! * **F2 frame**: one scope of 1,000 spawned closures of about 0.2 µs,
//!   200 frames; the time a frame, with the scope opened from outside the
//!   pool (plainly, and inside `smartpool::install`; rayon's
//!   `ThreadPool::scope`) and from inside a pool task (rayon: inside
//!   `install`). Target ≤ 1.1 × rayon.
//! * **F3 frame of 2 µs tasks**: the same with tasks of about 2 µs.
//!   Target ≤ 1.05 ×.
//! * **F4 quicksort**: 10⁶ `u32`, sequential below 32. Target ≤ 1.2 ×.
//! * **F5 parallel loop**: `par::for_each_mut` over 10⁶ `f64` from
//!   outside the pool, against rayon's `par_iter_mut` (no issue target;
//!   1.1 × as the frame's).
//!
//! `cargo bench -p smartpool-bench --bench forkjoin`; `ROWS=F1,F4` for
//! some; `SMARTPOOL_BENCH_QUICK=1` for CI sizes.

use std::time::{Duration, Instant};

use smartpool::prelude::*;
use smartpool_bench::median;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
struct Work;

/// One level, one channel that completes on close: what a fork-join
/// user builds.
struct Flat {
    work: VecDequeChannel,
    threads: usize,
}

impl PoolBehavior for Flat {
    type ChannelKey = Work;
    fn config(&self) -> PoolConfig<Work> {
        PoolConfig {
            threads: self.threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Work,
                complete_on_close: true,
            }]],
        }
    }
    fn channel(&self, _: Work) -> &dyn Channel {
        &self.work
    }
    fn followup(&self, _: Work, task: RunningTask) {
        self.work.submit(task);
    }
}

fn ours(threads: usize) -> OwnedPool<Flat> {
    OwnedPool::new(Flat {
        work: VecDequeChannel::new(),
        threads,
    })
    .expect("pool")
}

fn rayon_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool")
}

const FIB_N: u32 = 30;
const FIB_CUTOFF: u32 = 10;

fn fib_seq(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

/// How many joins fib(n) makes with the cutoff.
fn joins(n: u32) -> u64 {
    if n < FIB_CUTOFF {
        0
    } else {
        1 + joins(n - 1) + joins(n - 2)
    }
}

fn fib_ours(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < FIB_CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = smartpool::join(
        &pool.work,
        || fib_ours(pool, n - 1),
        || fib_ours(pool, n - 2),
    );
    a + b
}

fn fib_rayon(n: u32) -> u64 {
    if n < FIB_CUTOFF {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

/// About `d` of work that the optimiser keeps.
fn work(d: Duration) {
    smartpool_bench::spin(d);
}

const TASKS: usize = 1_000;

fn frame_ours(pool: &Pool<Flat>, task: Duration) {
    smartpool::scope(|s| {
        for _ in 0..TASKS {
            s.spawn(&pool.work, move || work(task));
        }
    });
}

fn frame_rayon(task: Duration) {
    rayon::scope(|s| {
        for _ in 0..TASKS {
            s.spawn(move |_| work(task));
        }
    });
}

/// A frame opened from outside `pool`: its body runs in the pool.
fn frame_rayon_on(pool: &rayon::ThreadPool, task: Duration) {
    pool.scope(|s| {
        for _ in 0..TASKS {
            s.spawn(move |_| work(task));
        }
    });
}

fn quicksort_ours<T: Ord + Send>(pool: &Pool<Flat>, v: &mut [T], cutoff: usize) {
    if v.len() <= cutoff {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    smartpool::join(
        &pool.work,
        || quicksort_ours(pool, lo, cutoff),
        || quicksort_ours(pool, &mut hi[1..], cutoff),
    );
}

fn quicksort_rayon<T: Ord + Send>(v: &mut [T], cutoff: usize) {
    if v.len() <= cutoff {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    rayon::join(
        || quicksort_rayon(lo, cutoff),
        || quicksort_rayon(&mut hi[1..], cutoff),
    );
}

/// Lomuto's partition around the middle element; its final index.
fn partition<T: Ord>(v: &mut [T]) -> usize {
    let last = v.len() - 1;
    v.swap(v.len() / 2, last);
    let mut store = 0;
    for i in 0..last {
        if v[i] <= v[last] {
            v.swap(i, store);
            store += 1;
        }
    }
    v.swap(store, last);
    store
}

/// A deterministic shuffle of `n` values (xorshift).
fn shuffled(n: usize) -> Vec<u32> {
    let mut x: u32 = 0x9e37_79b9;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

/// Runs `a` and `b` `reps` times each, interleaved, the order swapped
/// every rep; the median seconds of each.
fn interleave(reps: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let timed = |f: &mut dyn FnMut(), into: &mut Vec<f64>| {
        let start = Instant::now();
        f();
        into.push(start.elapsed().as_secs_f64());
    };
    // A warm-up each.
    a();
    b();
    for rep in 0..reps {
        if rep % 2 == 0 {
            timed(&mut a, &mut ta);
            timed(&mut b, &mut tb);
        } else {
            timed(&mut b, &mut tb);
            timed(&mut a, &mut ta);
        }
    }
    (median(ta), median(tb))
}

fn row(name: &str, unit: &str, ours: f64, rayon: f64, target: f64) {
    let ratio = ours / rayon;
    let verdict = if ratio <= target { "met" } else { "MISSED" };
    println!(
        "| {name} | {ours:.1} {unit} | {rayon:.1} {unit} | {ratio:.2} | ≤ {target} | {verdict} |"
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    let want =
        |row: &str| std::env::var("ROWS").map_or(true, |rows| rows.split(',').any(|r| r == row));
    let reps = if quick { 2 } else { 11 };
    println!("| row | smartpool | rayon | ratio | target | verdict |");
    println!("|---|---|---|---|---|---|");

    for threads in [1, 2] {
        let owned = ours(threads);
        let pool = owned.pool.clone();
        let rayon = rayon_pool(threads);
        if want("F1") {
            let n = if quick { 20 } else { FIB_N };
            let joins = joins(n) as f64;
            let (o, r) = interleave(
                reps,
                || assert_eq!(fib_ours(&pool, n), fib_seq(n)),
                || rayon.install(|| assert_eq!(fib_rayon(n), fib_seq(n))),
            );
            row(
                &format!("F1 fib({n}) by join, {threads} thread(s), a join"),
                "ns",
                o / joins * 1e9,
                r / joins * 1e9,
                1.5,
            );
        }
        if threads == 2 {
            let frames = if quick { 5 } else { 200 };
            for (name, task, target) in [
                (
                    "F2 frame of 1,000 tasks of 0.2 µs",
                    Duration::from_nanos(200),
                    1.1,
                ),
                (
                    "F3 frame of 1,000 tasks of 2 µs",
                    Duration::from_micros(2),
                    1.05,
                ),
            ] {
                let rows = if name.starts_with("F2") { "F2" } else { "F3" };
                if !want(rows) {
                    continue;
                }
                // From outside, a frame at a time: `smartpool::scope` on
                // the calling thread, or inside `install`; rayon's
                // `ThreadPool::scope`, which installs its body.
                let rayon_outside = || (0..frames).for_each(|_| frame_rayon_on(&rayon, task));
                let (o, r) = interleave(
                    reps,
                    || (0..frames).for_each(|_| frame_ours(&pool, task)),
                    rayon_outside,
                );
                row(
                    &format!("{name}, from outside, a frame"),
                    "µs",
                    o / frames as f64 * 1e6,
                    r / frames as f64 * 1e6,
                    target,
                );
                let (o, r) = interleave(
                    reps,
                    || {
                        (0..frames).for_each(|_| {
                            smartpool::install(&pool.work, || frame_ours(&pool, task))
                        })
                    },
                    rayon_outside,
                );
                row(
                    &format!("{name}, from outside by install, a frame"),
                    "µs",
                    o / frames as f64 * 1e6,
                    r / frames as f64 * 1e6,
                    target,
                );
                if rows == "F2" {
                    // The scope opened inside a pool task (rayon: inside
                    // its pool, which `install` already is).
                    let (o, r) = interleave(
                        reps,
                        || {
                            let p = pool.clone();
                            owned
                                .block_on(pool.work.exec(async move {
                                    (0..frames).for_each(|_| frame_ours(&p, task))
                                }))
                                .expect("the frame task");
                        },
                        || rayon.install(|| (0..frames).for_each(|_| frame_rayon(task))),
                    );
                    row(
                        &format!("{name}, inside a pool task, a frame"),
                        "µs",
                        o / frames as f64 * 1e6,
                        r / frames as f64 * 1e6,
                        target,
                    );
                }
            }
            if want("F4") {
                let n = if quick { 10_000 } else { 1_000_000 };
                let data = shuffled(n);
                let (o, r) = interleave(
                    reps,
                    || {
                        let mut v = data.clone();
                        quicksort_ours(&pool, &mut v, 32);
                        assert!(v.windows(2).all(|w| w[0] <= w[1]));
                    },
                    || {
                        let mut v = data.clone();
                        rayon.install(|| quicksort_rayon(&mut v, 32));
                        assert!(v.windows(2).all(|w| w[0] <= w[1]));
                    },
                );
                row(
                    &format!("F4 quicksort of {n} u32, cutoff 32, 2 threads"),
                    "ms",
                    o * 1e3,
                    r * 1e3,
                    1.2,
                );
            }
            if want("F5") {
                // A loop over a slice from outside the pool: `par` (inside
                // `install`) against rayon's `par_iter_mut` in `install`.
                use rayon::prelude::*;
                let n = if quick { 10_000 } else { 1_000_000 };
                let step = |x: &mut f64| *x = (*x * 1.000_1 + 0.5).sqrt();
                let mut ours = vec![1.0f64; n];
                let mut theirs = vec![1.0f64; n];
                let (o, r) = interleave(
                    reps,
                    || smartpool::par::for_each_mut(&pool.work, &mut ours, step),
                    || rayon.install(|| theirs.par_iter_mut().for_each(step)),
                );
                assert_eq!(ours, theirs);
                row(
                    &format!("F5 par for_each_mut over {n} f64, 2 threads"),
                    "ms",
                    o * 1e3,
                    r * 1e3,
                    1.1,
                );
            }
        }
        drop(pool);
        owned.close().wait();
    }
}
