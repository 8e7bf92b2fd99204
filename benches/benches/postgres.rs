//! smartpool-postgres on this machine: jobs per second claimed and
//! completed by one and by two pools, and how long an urgent job waits
//! while a backlog drains, against a throwaway PostgreSQL server
//! (`TempCluster`; or `SMARTPOOL_PG_URL`).
//!
//! * **P1, throughput**: `n` empty jobs, enqueued in one statement, then
//!   drained by one pool of 2 threads holding 2, 4 (the default) or 16
//!   jobs at once, and by two pools holding 2 each (in this process).
//!   Jobs per second, enqueue excluded; medians. Each rep begins from
//!   `VACUUM ANALYZE` (untimed).
//! * **P3, against a bare loop**: P1's one pool at its default capacity,
//!   interleaved rep by rep with the loop a user would write without the
//!   crate: two connections, each claiming one job (`UPDATE … FOR UPDATE
//!   SKIP LOCKED … RETURNING`), then deleting it, prepared statements.
//!   Then two pools against two such loops on two threads (the issue's
//!   "2 processes", in this one). Target: ≥ 1.0 × the loop.
//! * **P2, urgent wait**: two pools of 2 threads drain a backlog of jobs
//!   of 200 µs on level 1 while 20 urgent jobs arrive on level 0, one
//!   every 10 ms: enqueue to start, p50 and max; with each pool's
//!   capacity at 2, 4 (the default) and 16.
//!
//! Full run: `cargo bench -p smartpool-bench --bench postgres`
//! CI size:  `SMARTPOOL_BENCH_QUICK=1 cargo bench -p smartpool-bench --bench postgres`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smartpool_bench::median;

#[path = "../src/pg_bare_loop.rs"]
mod pg_bare_loop;
use smartpool_postgres::{NewJob, Queue, Registry, ServeOptions, TempCluster, Worker};

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A pool serving levels 0 and 1 with `capacity`; counts jobs run.
struct Server {
    owned: smartpool::OwnedPool<smartpool::Leveled>,
    worker: Worker,
}

fn server(
    url: &str,
    capacity: usize,
    ran: &Arc<AtomicUsize>,
    waits: &Arc<Mutex<Vec<u64>>>,
) -> Server {
    let (r, r2, w) = (ran.clone(), ran.clone(), waits.clone());
    let registry = Registry::new()
        .handle("empty", move |_| {
            r.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        })
        .handle("cpu", move |_| {
            let until = Instant::now() + Duration::from_micros(200);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            r2.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        })
        .handle("urgent", move |job| {
            let enqueued = u64::from_le_bytes(job.payload().try_into().unwrap());
            w.lock().unwrap().push(now_us().saturating_sub(enqueued));
            async { Ok(()) }
        });
    let owned = smartpool::Builder::new()
        .levels(2)
        .threads(2)
        .build()
        .unwrap();
    let worker = Worker::serve(
        url,
        &owned.pool,
        |level| level as usize,
        registry,
        ServeOptions::new([0, 1]).capacity(capacity),
    )
    .unwrap();
    Server { owned, worker }
}

fn close(servers: Vec<Server>) {
    for s in servers {
        s.worker.close().wait();
        s.owned.close().wait();
    }
}

fn wait_for(count: &AtomicUsize, n: usize) {
    while count.load(Ordering::Relaxed) < n {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Enqueues `n` empty jobs on level 1, in one statement.
fn enqueue_empty(queue: &Queue, n: usize) {
    queue
        .enqueue_many(
            (0..n)
                .map(|_| NewJob::new("empty", vec![]).level(1))
                .collect(),
        )
        .unwrap();
}

/// `VACUUM ANALYZE` of the jobs table, untimed, after an enqueue: every
/// rep starts from the same state, whatever the reps before it left (a
/// bare loop's claim, planned without the worker's settings, slows 5x on
/// a table its deletes bloated and its statistics do not describe).
fn settle_table(url: &str) {
    pg_bare_loop::execute(url, "VACUUM ANALYZE smartpool_jobs");
}

/// P1, one rep: jobs per second for `pools` pools of `capacity`.
fn throughput(url: &str, queue: &Queue, n: usize, pools: usize, capacity: usize) -> f64 {
    enqueue_empty(queue, n);
    settle_table(url);
    let ran = Arc::new(AtomicUsize::new(0));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let servers: Vec<Server> = (0..pools)
        .map(|_| server(url, capacity, &ran, &waits))
        .collect();
    wait_for(&ran, n);
    let rate = n as f64 / start.elapsed().as_secs_f64();
    close(servers);
    rate
}

/// P2, one rep: the urgent jobs' waits (µs), sorted.
fn urgent_waits(url: &str, queue: &Queue, backlog: usize, capacity: usize) -> Vec<u64> {
    queue
        .enqueue_many(
            (0..backlog)
                .map(|_| NewJob::new("cpu", vec![]).level(1))
                .collect(),
        )
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let servers: Vec<Server> = (0..2)
        .map(|_| server(url, capacity, &ran, &waits))
        .collect();
    wait_for(&ran, backlog / 10);
    for _ in 0..20 {
        queue
            .enqueue(NewJob::new("urgent", now_us().to_le_bytes().to_vec()))
            .unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_for(&ran, backlog);
    while waits.lock().unwrap().len() < 20 {
        std::thread::sleep(Duration::from_millis(1));
    }
    close(servers);
    let mut waits = waits.lock().unwrap().clone();
    waits.sort();
    waits
}

/// P3's baseline, one rep: `n` jobs drained by `loops` bare loops at once
/// (each on a thread of its own, with two connections that each claim one
/// job, then delete it); jobs per second.
fn bare_loop(url: &str, queue: &Queue, n: usize, loops: usize) -> f64 {
    enqueue_empty(queue, n);
    settle_table(url);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..loops {
            s.spawn(|| pg_bare_loop::drain(url, n));
        }
    });
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    // `ROWS=P3` runs P3 alone (the rows' names, comma-separated).
    let want =
        |row: &str| std::env::var("ROWS").map_or(true, |rows| rows.split(',').any(|r| r == row));
    // The bench harness passes `--bench`; nothing else to parse.
    let _cluster;
    let url = match std::env::var("SMARTPOOL_PG_URL") {
        Ok(url) => url,
        Err(_) => {
            let cluster = TempCluster::start().expect("a throwaway PostgreSQL server");
            let url = cluster.url();
            _cluster = cluster;
            url
        }
    };
    let queue = Queue::connect(&url).unwrap();
    let (n, reps, backlog) = if quick {
        (300, 1, 200)
    } else {
        (20_000, 3, 6_000)
    };
    println!("smartpool-postgres: {n} empty jobs, {reps} reps, pools of 2 threads");
    println!("| row | jobs/s |");
    println!("|---|---|");
    for (name, pools, capacity) in [
        ("P1 one pool, capacity 2 (its threads)", 1, 2),
        (
            "P1 one pool, capacity 4 (the default: twice its threads)",
            1,
            4,
        ),
        ("P1 two pools, capacity 2 each", 2, 2),
        ("P1 one pool, capacity 16", 1, 16),
    ]
    .into_iter()
    .filter(|_| want("P1"))
    {
        let rates: Vec<f64> = (0..reps)
            .map(|_| throughput(&url, &queue, n, pools, capacity))
            .collect();
        println!("| {name} | {:.0} |", median(rates));
    }
    println!();
    // P3: one pool against one bare loop, then two against two.
    for pools in [1, 2].into_iter().filter(|_| want("P3")) {
        let (mut ours, mut bare) = (Vec::new(), Vec::new());
        for rep in 0..reps.max(3) {
            if rep % 2 == 0 {
                ours.push(throughput(&url, &queue, n, pools, 4));
                bare.push(bare_loop(&url, &queue, n, pools));
            } else {
                bare.push(bare_loop(&url, &queue, n, pools));
                ours.push(throughput(&url, &queue, n, pools, 4));
            }
        }
        let each: Vec<String> = ours
            .iter()
            .zip(&bare)
            .map(|(o, b)| format!("{o:.0}/{b:.0}"))
            .collect();
        let (ours, bare) = (median(ours), median(bare));
        println!("P3: {n} empty jobs, interleaved, {} reps", reps.max(3));
        println!("| row | jobs/s |");
        println!("|---|---|");
        println!("| smartpool-postgres, {pools} pool(s) of 2 threads, capacity 4 (the default) | {ours:.0} |");
        println!("| {pools} bare loop(s) of 2 connections: claim one job, delete it | {bare:.0} |");
        println!(
            "| ratio (target ≥ 1.0) | {:.2} (reps: {}) |",
            ours / bare,
            each.join(", ")
        );
        println!();
    }
    println!("P2: 20 urgent jobs, one every 10 ms, while two pools drain {backlog} jobs of 200 µs");
    println!("| capacity | urgent wait p50 | max |");
    println!("|---|---|---|");
    for capacity in [2, 4, 16].into_iter().filter(|_| want("P2")) {
        let waits = urgent_waits(&url, &queue, backlog, capacity);
        println!(
            "| {capacity} | {:.2} ms | {:.2} ms |",
            waits[waits.len() / 2] as f64 / 1e3,
            waits[waits.len() - 1] as f64 / 1e3
        );
    }
}
