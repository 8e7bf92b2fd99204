//! smartpool-postgres beside apalis-postgres 1.0 (apalis's PostgreSQL
//! backend, sqlx 0.9), on one throwaway PostgreSQL server, peers
//! interleaved rep by rep.
//!
//! * **P1**: 5,000 empty jobs, enqueued in one statement, drained by one
//!   consumer of 2 threads: jobs per second. smartpool: a pool of 2
//!   threads at capacity 4 (its default) and 16. apalis: a worker on a
//!   tokio runtime of 2 threads, its tasks spawned in parallel, fetching
//!   batches of 10 (its default) and of 2, woken by its pubsub listener.
//!   And P3's bare loop (see `--bench postgres`): two tokio-postgres
//!   connections, each claiming one job, then deleting it. Each rep
//!   begins from `VACUUM ANALYZE` (untimed).
//! * **P2**: 3,000 jobs of 200 µs drained by two consumers of 2 threads
//!   each while 20 urgent jobs arrive one every 10 ms, at a higher
//!   priority (smartpool: level 0 over level 1; apalis: priority 10 over
//!   0): enqueue to start, p50 and max.
//!
//! `cargo run --release --manifest-path benches/apalis/Cargo.toml`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apalis::prelude::*;
use apalis_postgres::{Config, PgConnectOptions, PgPool, PostgresStorage};
use smartpool_postgres::{NewJob, Queue, Registry, ServeOptions, TempCluster, Worker};

#[path = "../../src/pg_bare_loop.rs"]
mod pg_bare_loop;

const P1_JOBS: usize = 5_000;
const P2_BACKLOG: usize = 3_000;
const URGENT: usize = 20;
const REPS: usize = 3;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn spin(us: u64) {
    let until = Instant::now() + Duration::from_micros(us);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

fn wait_for(count: &AtomicUsize, n: usize) {
    while count.load(Ordering::Relaxed) < n {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// What both peers count: jobs run, urgent waits.
#[derive(Clone, Default)]
struct Counts {
    ran: Arc<AtomicUsize>,
    waits: Arc<Mutex<Vec<u64>>>,
}

// ---- smartpool-postgres ----

fn sp_pool(
    url: &str,
    capacity: usize,
    counts: &Counts,
) -> (smartpool::OwnedPool<smartpool::Leveled>, Worker) {
    let (c1, c2, c3) = (counts.clone(), counts.clone(), counts.clone());
    let registry = Registry::new()
        .handle("empty", move |_| {
            c1.ran.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        })
        .handle("cpu", move |_| {
            spin(200);
            c2.ran.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        })
        .handle("urgent", move |job| {
            let enqueued = u64::from_le_bytes(job.payload().try_into().unwrap());
            c3.waits
                .lock()
                .unwrap()
                .push(now_us().saturating_sub(enqueued));
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
    (owned, worker)
}

fn sp_close(pools: Vec<(smartpool::OwnedPool<smartpool::Leveled>, Worker)>) {
    for (owned, worker) in pools {
        worker.close().wait();
        owned.close().wait();
    }
}

/// Enqueues P1's jobs for smartpool-postgres, then settles the database.
fn sp_enqueue(url: &str, queue: &Queue) {
    queue
        .enqueue_many(
            (0..P1_JOBS)
                .map(|_| NewJob::new("empty", vec![]).level(1))
                .collect(),
        )
        .unwrap();
    settle(url);
}

/// `VACUUM ANALYZE` of the whole database, untimed: every rep starts from
/// the same state, whatever the reps before it left.
fn settle(url: &str) {
    pg_bare_loop::execute(url, "VACUUM ANALYZE");
}

/// P3's bare loop on P1's jobs (see `pg_bare_loop`); jobs per second.
fn bare_p1(url: &str, queue: &Queue) -> f64 {
    sp_enqueue(url, queue);
    pg_bare_loop::drain(url, P1_JOBS)
}

fn sp_p1(url: &str, queue: &Queue, capacity: usize) -> f64 {
    sp_enqueue(url, queue);
    let counts = Counts::default();
    let start = Instant::now();
    let pool = sp_pool(url, capacity, &counts);
    wait_for(&counts.ran, P1_JOBS);
    let rate = P1_JOBS as f64 / start.elapsed().as_secs_f64();
    sp_close(vec![pool]);
    rate
}

fn sp_p2(url: &str, queue: &Queue) -> Vec<u64> {
    queue
        .enqueue_many(
            (0..P2_BACKLOG)
                .map(|_| NewJob::new("cpu", vec![]).level(1))
                .collect(),
        )
        .unwrap();
    let counts = Counts::default();
    let pools = vec![sp_pool(url, 4, &counts), sp_pool(url, 4, &counts)];
    wait_for(&counts.ran, P2_BACKLOG / 10);
    for _ in 0..URGENT {
        queue
            .enqueue(NewJob::new("urgent", now_us().to_le_bytes().to_vec()).level(0))
            .unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_for(&counts.ran, P2_BACKLOG);
    while counts.waits.lock().unwrap().len() < URGENT {
        std::thread::sleep(Duration::from_millis(1));
    }
    sp_close(pools);
    let mut waits = counts.waits.lock().unwrap().clone();
    waits.sort();
    waits
}

// ---- apalis ----

/// A job's arguments: (0 empty, 1 cpu, 2 urgent; its enqueue time in µs).
type Args = (u8, u64);

fn apalis_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn apalis_push(pool: &PgPool, queue: &str, jobs: Vec<(Args, usize)>) {
    let mut conn = pool.acquire().await.unwrap().detach();
    for chunk in jobs.chunks(1000) {
        let tasks = chunk
            .iter()
            .map(|(args, priority)| {
                let bytes = serde_json::to_vec(args).unwrap();
                TaskBuilder::new(bytes).priority(*priority).build()
            })
            .collect();
        apalis_postgres::queries::push_tasks(&mut conn, queue, tasks)
            .await
            .unwrap();
    }
}

/// Runs an apalis worker (fetching `batch` at a time) on its own runtime
/// of 2 threads, with its own connection pool (sqlx's connections belong
/// to the runtime that made them), until `done` says so.
fn apalis_worker(
    options: PgConnectOptions,
    queue: &'static str,
    batch: usize,
    counts: Counts,
    done: Arc<AtomicUsize>,
    target: usize,
    name: String,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = apalis_runtime();
        runtime.block_on(async move {
            let pool = PgPool::connect_with(options).await.unwrap();
            let config = Config::default().queue(queue).batch_size(batch);
            let backend = PostgresStorage::<Args>::new(&pool)
                .with_config(config)
                .with_pubsub();
            let c = counts.clone();
            let handler = move |args: Args, _wrk: WorkerContext| {
                let c = c.clone();
                async move {
                    match args.0 {
                        0 => {
                            c.ran.fetch_add(1, Ordering::Relaxed);
                        }
                        1 => {
                            spin(200);
                            c.ran.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => c
                            .waits
                            .lock()
                            .unwrap()
                            .push(now_us().saturating_sub(args.1)),
                    }
                    Ok::<(), BoxDynError>(())
                }
            };
            let worker = WorkerBuilder::new(name)
                .backend(backend)
                .parallelize(tokio::spawn)
                .build(handler);
            let stop = async move {
                while done.load(Ordering::Relaxed) < target {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok::<(), std::io::Error>(())
            };
            worker.run_until(stop).await.unwrap();
            pool.close().await;
        });
    })
}

fn ap_p1(
    url: &str,
    pool: &PgPool,
    options: &PgConnectOptions,
    rt: &tokio::runtime::Runtime,
    batch: usize,
    rep: usize,
) -> f64 {
    let queue: &'static str = Box::leak(format!("p1-{batch}-{rep}").into_boxed_str());
    rt.block_on(apalis_push(
        pool,
        queue,
        (0..P1_JOBS).map(|_| ((0, 0), 0)).collect(),
    ));
    settle(url);
    let counts = Counts::default();
    let start = Instant::now();
    let w = apalis_worker(
        options.clone(),
        queue,
        batch,
        counts.clone(),
        counts.ran.clone(),
        P1_JOBS,
        format!("w-{queue}"),
    );
    wait_for(&counts.ran, P1_JOBS);
    let rate = P1_JOBS as f64 / start.elapsed().as_secs_f64();
    w.join().unwrap();
    rate
}

fn ap_p2(
    pool: &PgPool,
    options: &PgConnectOptions,
    rt: &tokio::runtime::Runtime,
    rep: usize,
) -> Vec<u64> {
    let queue: &'static str = Box::leak(format!("p2-{rep}").into_boxed_str());
    rt.block_on(apalis_push(
        pool,
        queue,
        (0..P2_BACKLOG).map(|_| ((1, 0), 0)).collect(),
    ));
    let counts = Counts::default();
    let ws: Vec<_> = (0..2)
        .map(|i| {
            apalis_worker(
                options.clone(),
                queue,
                10,
                counts.clone(),
                counts.ran.clone(),
                P2_BACKLOG,
                format!("w{i}-{queue}"),
            )
        })
        .collect();
    wait_for(&counts.ran, P2_BACKLOG / 10);
    for _ in 0..URGENT {
        rt.block_on(apalis_push(pool, queue, vec![((2, now_us()), 10)]));
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_for(&counts.ran, P2_BACKLOG);
    while counts.waits.lock().unwrap().len() < URGENT {
        std::thread::sleep(Duration::from_millis(1));
    }
    for w in ws {
        w.join().unwrap();
    }
    let mut waits = counts.waits.lock().unwrap().clone();
    waits.sort();
    waits
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let cluster = TempCluster::start().expect("a throwaway PostgreSQL server");
    let url = cluster.url();
    let host = url
        .split(' ')
        .find_map(|kv| kv.strip_prefix("host="))
        .unwrap()
        .to_owned();
    let queue = Queue::connect(&url).unwrap();
    let rt = apalis_runtime();
    let options = PgConnectOptions::new()
        .socket(&host)
        .username("postgres")
        .database("postgres");
    let pool = rt.block_on(async {
        let pool = PgPool::connect_with(options.clone()).await.unwrap();
        PostgresStorage::setup(&pool).await.unwrap();
        pool
    });
    let mut p1: Vec<(&str, Vec<f64>)> = vec![
        ("smartpool-postgres, capacity 4 (its default)", vec![]),
        ("smartpool-postgres, capacity 16", vec![]),
        ("apalis-postgres, batch 10 (its default)", vec![]),
        ("apalis-postgres, batch 2", vec![]),
        (
            "a bare loop: 2 connections, claim one job, delete it",
            vec![],
        ),
    ];
    let mut p2: Vec<(&str, Vec<u64>, Vec<u64>)> = vec![
        (
            "smartpool-postgres, capacity 4 (its default)",
            vec![],
            vec![],
        ),
        ("apalis-postgres, batch 10", vec![], vec![]),
    ];
    for rep in 0..REPS {
        p1[0].1.push(sp_p1(&url, &queue, 4));
        p1[2].1.push(ap_p1(&url, &pool, &options, &rt, 10, rep));
        p1[4].1.push(bare_p1(&url, &queue));
        p1[1].1.push(sp_p1(&url, &queue, 16));
        p1[3].1.push(ap_p1(&url, &pool, &options, &rt, 2, rep));
        let w = sp_p2(&url, &queue);
        p2[0].1.push(w[w.len() / 2]);
        p2[0].2.push(w[w.len() - 1]);
        let w = ap_p2(&pool, &options, &rt, rep);
        p2[1].1.push(w[w.len() / 2]);
        p2[1].2.push(w[w.len() - 1]);
        eprintln!("rep {} done", rep + 1);
    }
    println!(
        "P1: {P1_JOBS} empty jobs, one consumer of 2 threads, medians of {REPS} interleaved reps"
    );
    println!("| peer | jobs/s |");
    println!("|---|---|");
    for (name, rates) in p1 {
        println!("| {name} | {:.0} |", median(rates));
    }
    println!();
    println!("P2: {URGENT} urgent jobs, one every 10 ms, while two consumers of 2 threads drain {P2_BACKLOG} jobs of 200 µs");
    println!("| peer | urgent wait p50 | max |");
    println!("|---|---|---|");
    for (name, p50, max) in p2 {
        let m = |v: Vec<u64>| median(v.into_iter().map(|x| x as f64).collect()) / 1e3;
        println!("| {name} | {:.2} ms | {:.2} ms |", m(p50), m(max));
    }
}
