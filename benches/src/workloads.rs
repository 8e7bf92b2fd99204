//! The workloads of the suite, each generic over a peer's [`Spawner`].
//! Throughput rows (W1–W5, W11) return the wall time of one run; latency rows
//! (W6, W7) return histograms in nanoseconds; cost rows (W8, W9) return CPU
//! time per second of wall time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;

use crate::peers::{Peer, Spawner};
use crate::{process_cpu, spin, thread_ids, threads_cpu, Latch};

/// W1: `n` trivial tasks submitted from outside the pool; wait for all.
pub fn spawn_outside<S: Spawner>(s: &S, n: usize) -> Duration {
    let latch = Latch::new(n);
    let start = Instant::now();
    for _ in 0..n {
        let latch = latch.clone();
        s.spawn(move || latch.done());
    }
    latch.wait();
    start.elapsed()
}

/// W2: one task inside the pool submits `n` trivial tasks.
pub fn spawn_inside<S: Spawner>(s: &S, n: usize) -> Duration {
    let latch = Latch::new(n);
    let start = Instant::now();
    let (inner, l) = (s.clone(), latch.clone());
    s.spawn(move || {
        for _ in 0..n {
            let l = l.clone();
            inner.spawn(move || l.done());
        }
    });
    latch.wait();
    start.elapsed()
}

/// W3: `tasks` futures, each yielding `yields` times through the queue.
pub fn yields<S: Spawner>(s: &S, tasks: usize, yields: usize) -> Duration {
    let latch = Latch::new(tasks);
    let start = Instant::now();
    for _ in 0..tasks {
        let (inner, l) = (s.clone(), latch.clone());
        s.spawn_future(async move {
            for _ in 0..yields {
                inner.yield_now().await;
            }
            l.done();
        });
    }
    latch.wait();
    start.elapsed()
}

/// W4: two tasks exchange a message `rounds` times over channels.
pub fn ping_pong<S: Spawner>(s: &S, rounds: usize) -> Duration {
    ping_pong_pairs(s, 1, rounds)
}

/// W11: `pairs` pairs of tasks (one per worker, in the suite), each pair
/// exchanging a message `rounds` times over channels of its own, all at
/// once. Where every worker runs message passing of its own: per-worker
/// state written on every wake must not share cache lines between workers.
pub fn ping_pong_pairs<S: Spawner>(s: &S, pairs: usize, rounds: usize) -> Duration {
    let latch = Latch::new(pairs);
    let start = Instant::now();
    for _ in 0..pairs {
        let (mut to_pong, mut pong_rx) = futures::channel::mpsc::channel::<usize>(1);
        let (mut to_ping, mut ping_rx) = futures::channel::mpsc::channel::<usize>(1);
        s.spawn_future(async move {
            while let Some(i) = pong_rx.next().await {
                if to_ping.send(i).await.is_err() {
                    break;
                }
            }
        });
        let l = latch.clone();
        s.spawn_future(async move {
            for i in 0..rounds {
                to_pong.send(i).await.expect("pong alive");
                ping_rx.next().await.expect("pong replies");
            }
            l.done();
        });
    }
    latch.wait();
    start.elapsed()
}

fn hop<S: Spawner>(s: S, left: usize, latch: Latch) {
    if left == 0 {
        latch.done();
        return;
    }
    let next = s.clone();
    s.spawn(move || hop(next, left - 1, latch));
}

/// W5: a chain of `n` tasks, each submitting the next.
pub fn chain<S: Spawner>(s: &S, n: usize) -> Duration {
    let latch = Latch::new(1);
    let start = Instant::now();
    hop(s.clone(), n, latch.clone());
    latch.wait();
    start.elapsed()
}

/// An empty histogram with the bounds of every latency row (1 ns to 60 s,
/// three significant digits).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds")
}

/// W6: an idle pool; one submission every `every`; submit-to-start latency.
pub fn wake_latency<S: Spawner>(s: &S, samples: usize, every: Duration) -> Histogram<u64> {
    let hist = Arc::new(Mutex::new(histogram()));
    let latch = Latch::new(samples);
    for _ in 0..samples {
        let (h, l) = (hist.clone(), latch.clone());
        let submitted = Instant::now();
        s.spawn(move || {
            let waited = submitted.elapsed().as_nanos() as u64;
            h.lock().unwrap().record(waited.max(1)).expect("in bounds");
            l.done();
        });
        std::thread::sleep(every);
    }
    latch.wait();
    let hist = hist.lock().unwrap().clone();
    hist
}

/// W7 outcome: the urgent tasks' waits and the backlog's drain time.
pub struct Priority {
    pub urgent: Histogram<u64>,
    pub drained: Duration,
}

/// W7: `backlog` tasks of `work` CPU each saturate the pool; one urgent task
/// every `every` meanwhile (on a higher level where the peer has levels).
pub fn priority<S: Spawner>(s: &S, backlog: usize, work: Duration, every: Duration) -> Priority {
    let hist = Arc::new(Mutex::new(histogram()));
    let drained_latch = Latch::new(backlog);
    let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(backlog));
    let start = Instant::now();
    for _ in 0..backlog {
        let (l, r) = (drained_latch.clone(), remaining.clone());
        s.spawn(move || {
            spin(work);
            r.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            l.done();
        });
    }
    let mut urgent = 0;
    let urgent_latch = Latch::new(usize::MAX);
    while remaining.load(std::sync::atomic::Ordering::Relaxed) > 0 {
        let (h, l) = (hist.clone(), urgent_latch.clone());
        let submitted = Instant::now();
        s.spawn_urgent(move || {
            let waited = submitted.elapsed().as_nanos() as u64;
            h.lock().unwrap().record(waited.max(1)).expect("in bounds");
            l.done();
        });
        urgent += 1;
        std::thread::sleep(every);
    }
    drained_latch.wait();
    let drained = start.elapsed();
    // Wait for the urgent tasks still queued behind the end of the backlog.
    while (hist.lock().unwrap().len() as usize) < urgent {
        std::thread::sleep(Duration::from_millis(1));
    }
    let urgent = hist.lock().unwrap().clone();
    Priority { urgent, drained }
}

/// W8: CPU used per second by an idle pool's own threads (those that
/// appeared when it started), after some work.
pub fn idle_cost<P: Peer>(threads: usize, measure: Duration) -> Duration {
    let existing = thread_ids();
    let peer = P::start(threads);
    let s = peer.spawner();
    let latch = Latch::new(100);
    for _ in 0..100 {
        let l = latch.clone();
        s.spawn(move || l.done());
    }
    latch.wait();
    std::thread::sleep(Duration::from_millis(100)); // spinning ends
    let pool: Vec<u64> = thread_ids()
        .into_iter()
        .filter(|id| !existing.contains(id))
        .collect();
    let before = threads_cpu(&pool);
    eprintln!(
        "W8 {}: {} threads started by the pool, {:?} of CPU so far",
        P::NAME,
        pool.len(),
        before
    );
    std::thread::sleep(measure);
    let used = threads_cpu(&pool) - before;
    drop(peer);
    used.div_f64(measure.as_secs_f64())
}

/// W9: one trivial task from outside every `every`, for `total`: CPU of the
/// whole process per second of wall time.
pub fn sparse_cost<S: Spawner>(s: &S, total: Duration, every: Duration) -> Duration {
    let before = process_cpu();
    let start = Instant::now();
    let mut sent = 0;
    let latch = Latch::new(usize::MAX);
    while start.elapsed() < total {
        let l = latch.clone();
        s.spawn(move || l.done());
        sent += 1;
        std::thread::sleep(every);
    }
    let _ = sent;
    let used = process_cpu() - before;
    used.div_f64(start.elapsed().as_secs_f64())
}

/// The process's resident memory now, in bytes (Linux `statm`).
pub fn resident_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// W10: bytes of resident memory per queued trivial task. Every worker is
/// blocked first (one task each, waiting on a gate), then `n` tasks are
/// submitted from outside and the resident memory read before and after;
/// then the gate opens and everything runs. Run it in a fresh process: a
/// heap that earlier rows grew would absorb the queue without new pages.
pub fn queued_memory<S: Spawner>(s: &S, threads: usize, n: usize) -> f64 {
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let blocked = Latch::new(threads);
    for _ in 0..threads {
        let (gate, blocked) = (gate.clone(), blocked.clone());
        s.spawn(move || {
            blocked.done();
            let mut open = gate.0.lock().unwrap();
            while !*open {
                open = gate.1.wait(open).unwrap();
            }
        });
    }
    blocked.wait();
    let latch = Latch::new(n);
    let before = resident_bytes();
    for _ in 0..n {
        let latch = latch.clone();
        s.spawn(move || latch.done());
    }
    let after = resident_bytes();
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    latch.wait();
    after.saturating_sub(before) as f64 / n as f64
}
