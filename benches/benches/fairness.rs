//! The Hardening issue's fairness rows:
//!
//! * **W13, a wake from outside behind chains**: a one-level pool of two
//!   workers runs 50 chains of 2 ms jobs, each job submitting its
//!   successor from inside; a plain thread wakes one task (a futures
//!   `mpsc` receiver) every 20 ms. The wake-to-poll time goes into a
//!   histogram, for smartpool and for tokio (2 workers, `tokio::spawn`),
//!   alternating rep by rep in one run. Target: smartpool's p50 ≤ tokio's.
//! * **W10 lanes, urgent wait under self-spawning cooperative tasks**: as
//!   the priority bench's W10 (2 workers, two levels, one urgent task a
//!   millisecond from outside), but the background is 4 lanes, each task
//!   1,000 steps of ~1 µs with `yield_if_needed().await` after each, and
//!   each task submitting its lane's next from inside as it ends. Targets:
//!   urgent p50 ≤ 3 µs, p99 ≤ 10 µs.
//!
//! Full run: `cargo bench -p smartpool-bench --bench fairness`
//! CI size:  `SMARTPOOL_BENCH_QUICK=1 cargo bench -p smartpool-bench --bench fairness`

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hdrhistogram::Histogram;

use smartpool::prelude::*;
use smartpool_bench::peers::ours::TwoLevels;
use smartpool_bench::{machine_gaps, spin, wait_histogram};

/// W13's shape.
const CHAINS: usize = 50;
const JOB: Duration = Duration::from_millis(2);
const WAKE_EVERY: Duration = Duration::from_millis(20);

/// Sends the time of each wake every [`WAKE_EVERY`] for `run`, from a plain
/// thread; the receiving task records wake-to-poll into `waits`.
fn waker_thread(
    tx: futures::channel::mpsc::UnboundedSender<Instant>,
    run: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let end = Instant::now() + run;
        while Instant::now() < end {
            std::thread::sleep(WAKE_EVERY);
            if tx.unbounded_send(Instant::now()).is_err() {
                return;
            }
        }
    })
}

/// The receiving task: records each wake's wait until the sender ends.
async fn receive(
    mut rx: futures::channel::mpsc::UnboundedReceiver<Instant>,
    waits: Arc<Mutex<Histogram<u64>>>,
) {
    while let Some(sent) = rx.next().await {
        let waited = sent.elapsed().as_nanos() as u64;
        waits
            .lock()
            .unwrap()
            .record(waited.max(1))
            .expect("in bounds");
    }
}

/// W13 on smartpool, one rep of `length`.
fn w13_ours(length: Duration, waits: &Arc<Mutex<Histogram<u64>>>) {
    let owned = smartpool::Builder::new()
        .levels(1)
        .threads(2)
        .build()
        .expect("pool");
    let stop = Arc::new(AtomicBool::new(false));
    fn link(pool: Arc<Pool<smartpool::Leveled>>, stop: Arc<AtomicBool>) {
        let next = pool.clone();
        let _ = pool.level(0).exec_detached(run(move || {
            spin(JOB);
            if !stop.load(Ordering::Relaxed) {
                link(next, stop);
            }
        }));
    }
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let receiver = owned.pool.level(0).exec(receive(rx, waits.clone()));
    for _ in 0..CHAINS {
        link(owned.pool.clone(), stop.clone());
    }
    waker_thread(tx, length).join().unwrap();
    owned.block_on(receiver).unwrap();
    stop.store(true, Ordering::Relaxed);
    owned.close().wait();
}

/// W13 on tokio, one rep of `length`.
fn w13_tokio(length: Duration, waits: &Arc<Mutex<Histogram<u64>>>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let stop = Arc::new(AtomicBool::new(false));
    fn link(stop: Arc<AtomicBool>) {
        tokio::spawn(async move {
            spin(JOB);
            if !stop.load(Ordering::Relaxed) {
                link(stop);
            }
        });
    }
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let receiver = rt.spawn(receive(rx, waits.clone()));
    for _ in 0..CHAINS {
        let stop = stop.clone();
        rt.spawn(async move { link(stop) });
    }
    waker_thread(tx, length).join().unwrap();
    rt.block_on(receiver).unwrap();
    stop.store(true, Ordering::Relaxed);
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// W10 lanes, one rep: urgent waits until `tasks` background tasks ran.
fn w10_lanes(pool: &Arc<Pool<TwoLevels>>, tasks: usize) -> Histogram<u64> {
    const LANES: usize = 4;
    let left = Arc::new(AtomicUsize::new(tasks));
    fn lane(pool: Arc<Pool<TwoLevels>>, todo: usize, left: Arc<AtomicUsize>) {
        if todo == 0 {
            return;
        }
        let next = pool.clone();
        let _ = pool.normal.exec_detached(async move {
            for _ in 0..1000 {
                spin(Duration::from_micros(1));
                smartpool::yield_if_needed().await;
            }
            left.fetch_sub(1, Ordering::AcqRel);
            lane(next, todo - 1, left);
        });
    }
    for _ in 0..LANES {
        lane(pool.clone(), tasks / LANES, left.clone());
    }
    let waits = Arc::new(Mutex::new(wait_histogram()));
    let mut urgent = Vec::new();
    while left.load(Ordering::Acquire) > tasks % LANES {
        std::thread::sleep(Duration::from_millis(1));
        let (waits, submitted) = (waits.clone(), Instant::now());
        urgent.push(pool.urgent.exec(run(move || {
            let waited = submitted.elapsed().as_nanos() as u64;
            waits
                .lock()
                .unwrap()
                .record(waited.max(1))
                .expect("in bounds");
        })));
    }
    for h in urgent {
        futures::executor::block_on(h).unwrap();
    }
    let waits = waits.lock().unwrap().clone();
    waits
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    let want =
        |row: &str| std::env::var("ROWS").map_or(true, |rows| rows.split(',').any(|r| r == row));
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e6;
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;

    if want("W13") {
        let (reps, run) = if quick {
            (1, Duration::from_millis(100))
        } else {
            (6, Duration::from_secs(2))
        };
        let ours = Arc::new(Mutex::new(wait_histogram()));
        let tokio = Arc::new(Mutex::new(wait_histogram()));
        for rep in 0..reps {
            if rep % 2 == 0 {
                w13_ours(run, &ours);
                w13_tokio(run, &tokio);
            } else {
                w13_tokio(run, &tokio);
                w13_ours(run, &ours);
            }
        }
        println!(
            "W13 wake from outside behind {CHAINS} chains of {} ms jobs, 2 workers, {reps} reps of {} s each (interleaved)",
            JOB.as_millis(),
            run.as_secs_f64()
        );
        for (name, h) in [("smartpool", &ours), ("tokio", &tokio)] {
            let h = h.lock().unwrap();
            println!(
                "  {name:<10} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  ({} samples)",
                ms(&h, 0.5),
                ms(&h, 0.99),
                h.max() as f64 / 1e6,
                h.len()
            );
        }
        let (o, t) = (ours.lock().unwrap(), tokio.lock().unwrap());
        println!(
            "  p50 ratio smartpool/tokio {:.2} (target ≤ 1.0)",
            ms(&o, 0.5) / ms(&t, 0.5)
        );
        println!();
    }

    if want("W10L") {
        let (reps, tasks) = if quick { (1, 40) } else { (5, 1_000) };
        let owned = OwnedPool::new(TwoLevels {
            urgent: VecDequeChannel::new(),
            normal: VecDequeChannel::new(),
            threads: 2,
            complete_on_close: false,
            reserved: 0,
        })
        .expect("pool");
        let mut waits = wait_histogram();
        for _ in 0..reps {
            waits
                .add(w10_lanes(&owned.pool, tasks))
                .expect("same bounds");
        }
        println!(
            "W10 lanes: urgent wait under 4 self-spawning lanes of {tasks} tasks of 1 ms in 1 µs steps, {reps} reps"
        );
        println!(
            "  urgent p50 {:>6.1} µs  p99 {:>6.1} µs  max {:>8.1} µs  ({} samples); targets p50 ≤ 3 µs, p99 ≤ 10 µs",
            us(&waits, 0.5),
            us(&waits, 0.99),
            waits.max() as f64 / 1e3,
            waits.len()
        );
        owned.close().wait();
        let gaps = machine_gaps(Duration::from_micros(10), Duration::from_secs(1));
        println!(
            "  this machine takes {:.2}% of a spinning thread's time in pauses ≥ 10 µs (a p99 ≤ 10 µs needs < 1%)",
            gaps * 100.0
        );
    }
}
