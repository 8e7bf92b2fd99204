//! Blocking and caller-driven execution: the rows of the blocking issue,
//! each against its own baseline, variants interleaved rep by rep (each rep
//! runs every variant once, in an order rotated each rep), medians
//! reported with their ratios.
//!
//! * **W11, a blocking section on every worker.** A stream of 20 µs tasks
//!   is submitted from outside while one task per worker blocks for 1 ms
//!   at a time in `block_in_place` (a stand-in serves the worker's place),
//!   against the same stream with no blocking task. (Blocking plainly, the
//!   blockers would hold every worker until the stream ends: no
//!   throughput at all.)
//!   Target: the stream's throughput with `block_in_place` ≥ 0.8 × without
//!   blocking.
//! * **W12, `pool.block_on` from the main thread on W1's workload** (spawn
//!   empty tasks from outside, wait for all): waiting in `pool.block_on`
//!   (the caller runs tasks meanwhile) against waiting in
//!   `futures::executor::block_on`. Target: not slower.
//! * **W13, a zero-thread pool's chain.** A chain of tasks, each
//!   submitting the next, on a zero-thread pool driven by
//!   `run_until_stalled`, against a plain loop of boxed closures, each
//!   pushing the next onto a `VecDeque`, on one thread. Target: ≤ 1.2 ×
//!   the loop. tokio's current-thread runtime runs the same chain for
//!   reference.
//!
//! Full run: `cargo bench -p smartpool-bench --bench blocking`
//! CI size:  `SMARTPOOL_BENCH_QUICK=1 cargo bench -p smartpool-bench --bench blocking`
//! Threads:  `SMARTPOOL_BENCH_THREADS=4` (default 2)
//! Some rows: `SMARTPOOL_BENCH_ROWS=W11,W13` (default all)

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smartpool::prelude::*;
use smartpool_bench::median;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
struct Only;

/// One FIFO channel.
struct Flat {
    work: VecDequeChannel,
    threads: usize,
}

impl PoolBehavior for Flat {
    type ChannelKey = Only;
    fn config(&self) -> PoolConfig<Only> {
        PoolConfig {
            threads: self.threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Only,
                complete_on_close: false,
            }]],
        }
    }
    fn channel(&self, _: Only) -> &dyn Channel {
        &self.work
    }
}

fn pool(threads: usize) -> OwnedPool<Flat> {
    OwnedPool::new(Flat {
        work: VecDequeChannel::new(),
        threads,
    })
    .expect("pool")
}

/// Spins for `d` (a CPU-bound task).
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A count-down whose end a future waits for.
struct Countdown {
    left: AtomicUsize,
    done: std::sync::Mutex<Option<futures::channel::oneshot::Sender<()>>>,
}

impl Countdown {
    fn new(n: usize) -> (Arc<Countdown>, futures::channel::oneshot::Receiver<()>) {
        let (tx, rx) = futures::channel::oneshot::channel();
        let countdown = Arc::new(Countdown {
            left: AtomicUsize::new(n),
            done: std::sync::Mutex::new(Some(tx)),
        });
        (countdown, rx)
    }

    fn tick(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(tx) = self.done.lock().unwrap().take() {
                let _ = tx.send(());
            }
        }
    }
}

#[derive(Copy, Clone, PartialEq)]
enum Section {
    None,
    InPlace,
}

/// W11: tasks per second of a stream of `n` 20 µs tasks, with `blockers`
/// tasks blocking 1 ms at a time as `section` says.
fn w11(owned: &OwnedPool<Flat>, n: usize, section: Section) -> f64 {
    let pool = &owned.pool;
    let stop = Arc::new(AtomicBool::new(false));
    let blockers: Vec<_> = if section == Section::None {
        Vec::new()
    } else {
        (0..pool.threads())
            .map(|_| {
                let stop = stop.clone();
                pool.work.exec(run(move || {
                    while !stop.load(Ordering::Relaxed) {
                        smartpool::block_in_place(|| std::thread::sleep(Duration::from_millis(1)));
                    }
                }))
            })
            .collect()
    };
    let (countdown, done) = Countdown::new(n);
    let start = Instant::now();
    for _ in 0..n {
        let countdown = countdown.clone();
        drop(pool.work.exec(run(move || {
            spin(Duration::from_micros(20));
            countdown.tick();
        })));
    }
    futures::executor::block_on(done).unwrap();
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for blocker in blockers {
        futures::executor::block_on(blocker).unwrap();
    }
    n as f64 / elapsed.as_secs_f64()
}

/// W12: ns per task to spawn `n` empty tasks from outside and wait for all,
/// waiting in `pool.block_on` (`helping`) or in futures' `block_on`.
fn w12(owned: &OwnedPool<Flat>, n: usize, helping: bool) -> f64 {
    let pool = &owned.pool;
    let (countdown, done) = Countdown::new(n);
    let start = Instant::now();
    let submit = || {
        for _ in 0..n {
            let countdown = countdown.clone();
            drop(pool.work.exec(run(move || countdown.tick())));
        }
    };
    if helping {
        pool.block_on(async {
            submit();
            done.await.unwrap();
        });
    } else {
        submit();
        futures::executor::block_on(done).unwrap();
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// W13: ns per hop of a chain of `n` tasks on a zero-thread pool, driven
/// by `run_until_stalled`.
fn w13_pool(owned: &OwnedPool<Flat>, n: usize) -> f64 {
    fn hop(pool: Arc<Pool<Flat>>, left: usize) {
        if left > 0 {
            let next = pool.clone();
            drop(pool.work.exec(run(move || hop(next, left - 1))));
        }
    }
    let pool = owned.pool.clone();
    let start = Instant::now();
    hop(pool, n);
    let ran = owned.run_until_stalled();
    let elapsed = start.elapsed();
    assert_eq!(ran, n);
    elapsed.as_nanos() as f64 / n as f64
}

/// W13 on a peer: the same chain on tokio's current-thread runtime, driven
/// by its `block_on` (each hop `tokio::spawn`s the next).
fn w13_tokio(rt: &tokio::runtime::Runtime, n: usize) -> f64 {
    fn hop(left: usize, done: futures::channel::oneshot::Sender<()>) {
        if left > 0 {
            drop(tokio::spawn(async move { hop(left - 1, done) }));
        } else {
            let _ = done.send(());
        }
    }
    let start = Instant::now();
    rt.block_on(async {
        let (tx, rx) = futures::channel::oneshot::channel();
        hop(n, tx);
        rx.await.unwrap();
    });
    start.elapsed().as_nanos() as f64 / n as f64
}

/// W13's floor: the same chain as boxed closures on a `VecDeque`.
fn w13_loop(n: usize) -> f64 {
    type Queue = VecDeque<Job>;
    struct Job(Box<dyn FnOnce(&mut Queue)>);
    fn hop(left: usize) -> Job {
        Job(Box::new(move |queue: &mut VecDeque<Job>| {
            if left > 0 {
                queue.push_back(hop(black_box(left - 1)));
            }
        }))
    }
    let mut queue: VecDeque<Job> = VecDeque::new();
    let start = Instant::now();
    queue.push_back(hop(n - 1));
    let mut ran = 0;
    while let Some(job) = queue.pop_front() {
        (job.0)(&mut queue);
        ran += 1;
    }
    let elapsed = start.elapsed();
    assert_eq!(ran, n);
    elapsed.as_nanos() as f64 / n as f64
}

/// Runs each variant once per rep, in an order rotated each rep; returns
/// each variant's median.
fn interleaved<const N: usize>(reps: usize, variants: [&mut dyn FnMut() -> f64; N]) -> [f64; N] {
    let mut samples: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    for rep in 0..reps {
        for k in 0..N {
            let i = (rep + k) % N;
            samples[i].push(variants[i]());
        }
    }
    samples.map(median)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list`: nothing to list
    }
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    let threads: usize = std::env::var("SMARTPOOL_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let (reps, stream, spawns, chain) = if quick {
        (3, 200, 2_000, 2_000)
    } else {
        (15, 4_000, 100_000, 200_000)
    };
    let rows = std::env::var("SMARTPOOL_BENCH_ROWS").unwrap_or_default();
    let row = |name: &str| rows.is_empty() || rows.split(',').any(|r| r == name);
    println!("blocking rows: {threads} workers, {reps} reps, medians (variants interleaved)");
    println!();

    let owned = pool(threads);
    if row("W11") {
        let [none, in_place] = interleaved(
            reps,
            [&mut || w11(&owned, stream, Section::None), &mut || {
                w11(&owned, stream, Section::InPlace)
            }],
        );
        println!("W11 stream of 20 µs tasks, tasks/s, while every worker blocks 1 ms at a time");
        println!("  no blocking task            {none:>10.0}");
        println!(
            "  block_in_place              {in_place:>10.0}   {:.2} × no blocking (target ≥ 0.8)",
            in_place / none
        );
        println!();
    }

    if row("W12") {
        let [outside, helping] = interleaved(
            reps,
            [&mut || w12(&owned, spawns, false), &mut || {
                w12(&owned, spawns, true)
            }],
        );
        println!("W12 spawn {spawns} empty tasks from the main thread and wait, ns/task");
        println!("  wait in futures' block_on   {outside:>10.1}");
        println!(
            "  wait in pool.block_on       {helping:>10.1}   {:.2} × (target ≤ 1.0)",
            helping / outside
        );
        println!();
    }
    drop(owned);

    if row("W13") {
        let zero = pool(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("tokio runtime");
        let [driven, floor, tokio] = interleaved(
            reps,
            [
                &mut || w13_pool(&zero, chain),
                &mut || w13_loop(chain),
                &mut || w13_tokio(&rt, chain),
            ],
        );
        println!("W13 chain of {chain} tasks, each submitting the next, on one thread, ns/hop");
        println!("  boxed closures on a VecDeque {floor:>9.1}");
        println!(
            "  zero-thread pool, run_until_stalled {driven:>2.1}   {:.2} × the loop (target ≤ 1.2)",
            driven / floor
        );
        println!(
            "  tokio current_thread, block_on {tokio:>7.1}   {:.2} × the loop (zero-thread pool: {:.2} × tokio)",
            tokio / floor,
            driven / tokio
        );
    }
}
