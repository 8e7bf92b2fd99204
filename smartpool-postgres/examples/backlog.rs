//! Two pools drain one backlog in PostgreSQL while urgent jobs arrive.
//!
//! `cargo run --release -p smartpool-postgres --example backlog`
//!
//! Starts a throwaway server of its own (needs PostgreSQL's programs:
//! `initdb`, `postgres`, as Debian's `postgresql` package installs them;
//! or set `SMARTPOOL_PG_URL` to a database of yours: it adds jobs to its
//! `smartpool_jobs` table). Then, twice: 4,000 background jobs
//! of 200 µs, and a third of the way in, 20 urgent jobs; first on a level
//! above the backlog, then on the backlog's own level. Prints who ran
//! what and how long the urgent jobs waited.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smartpool_postgres::{NewJob, Queue, Registry, ServeOptions, TempCluster, Worker};

const BACKGROUND: usize = 4_000;
const URGENT: usize = 20;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// One pool: its name, its counts of background and urgent jobs run.
struct Pool {
    owned: smartpool::OwnedPool<smartpool::Leveled>,
    worker: Worker,
    background: Arc<AtomicUsize>,
    urgent: Arc<AtomicUsize>,
}

fn pool(url: &str, waits: &Arc<Mutex<Vec<u64>>>) -> Result<Pool, Box<dyn std::error::Error>> {
    let (background, urgent) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (b, u, w) = (background.clone(), urgent.clone(), waits.clone());
    let registry = Registry::new()
        .handle("batch", move |_| {
            let until = Instant::now() + Duration::from_micros(200);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            b.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        })
        .handle("urgent", move |job| {
            let enqueued = u64::from_le_bytes(job.payload().try_into().unwrap());
            w.lock().unwrap().push(now_us().saturating_sub(enqueued));
            u.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        });
    let owned = smartpool::Builder::new().levels(2).threads(2).build()?;
    let worker = Worker::serve(
        url,
        &owned.pool,
        |level| level as usize,
        registry,
        ServeOptions::new([0, 1]),
    )?;
    Ok(Pool {
        owned,
        worker,
        background,
        urgent,
    })
}

fn run(url: &str, queue: &Queue, urgent_level: i32) -> Result<(), Box<dyn std::error::Error>> {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let pools = [pool(url, &waits)?, pool(url, &waits)?];
    let started = Instant::now();
    queue.enqueue_many(
        (0..BACKGROUND)
            .map(|_| NewJob::new("batch", vec![]).level(1))
            .collect(),
    )?;
    while pools
        .iter()
        .map(|p| p.background.load(Ordering::Relaxed))
        .sum::<usize>()
        < BACKGROUND / 3
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    queue.enqueue_many(
        (0..URGENT)
            .map(|_| NewJob::new("urgent", now_us().to_le_bytes().to_vec()).level(urgent_level))
            .collect(),
    )?;
    while pools
        .iter()
        .map(|p| p.background.load(Ordering::Relaxed) + p.urgent.load(Ordering::Relaxed))
        .sum::<usize>()
        < BACKGROUND + URGENT
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let elapsed = started.elapsed();
    for (name, p) in ["pool A", "pool B"].iter().zip(&pools) {
        println!(
            "  {name}: {} background jobs, {} urgent jobs",
            p.background.load(Ordering::Relaxed),
            p.urgent.load(Ordering::Relaxed)
        );
    }
    let mut waits = waits.lock().unwrap().clone();
    waits.sort();
    println!(
        "  urgent waits, enqueue to start: p50 {:.1} ms, max {:.1} ms; {} jobs in {:.2} s ({:.0} jobs/s)",
        waits[waits.len() / 2] as f64 / 1e3,
        waits[waits.len() - 1] as f64 / 1e3,
        BACKGROUND + URGENT,
        elapsed.as_secs_f64(),
        (BACKGROUND + URGENT) as f64 / elapsed.as_secs_f64()
    );
    for p in pools {
        p.worker.close().wait();
        p.owned.close().wait();
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cluster;
    let url = match std::env::var("SMARTPOOL_PG_URL") {
        Ok(url) => url,
        Err(_) => {
            println!("starting a throwaway PostgreSQL server (initdb, a unix socket in a temporary directory)");
            cluster = TempCluster::start()?;
            cluster.url()
        }
    };
    let queue = Queue::connect(&url)?;
    println!("{BACKGROUND} background jobs of 200 µs on level 1, two pools of 2 threads; {URGENT} urgent jobs a third of the way in");
    println!("urgent jobs on level 0, above the backlog:");
    run(&url, &queue, 0)?;
    println!("urgent jobs on level 1, the backlog's own:");
    run(&url, &queue, 1)?;
    println!("(each pool claims only what it can start now, so an urgent job waits for a running job to end, not for the backlog)");
    Ok(())
}
