//! The production issue's F1: a queue whose statistics say it is empty
//! (analyzed empty, autovacuum off) is given a burst; the drain keeps its
//! pace. Before the worker planned its claims itself, the claim sorted the
//! whole backlog at every call once the statement's generic plan took
//! over, and throughput fell 20-fold for seconds.
//!
//! In a binary of its own: the check reads the drain's rate second by
//! second, which other tests running beside it would disturb.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fresh_db;
use smartpool_postgres::{NewJob, Queue, Registry, ServeOptions};

const JOBS: usize = 50_000;

#[test]
fn a_burst_on_stale_statistics_drains_at_an_even_pace() {
    let url = fresh_db("stale");
    let db = common::db_name("stale");
    let queue = Queue::connect(&url).unwrap();
    common::admin_of(
        &db,
        "ALTER TABLE smartpool_jobs SET (autovacuum_enabled = false); ANALYZE smartpool_jobs",
    );
    queue
        .enqueue_many(
            (0..JOBS)
                .map(|i| NewJob::new("empty", vec![]).level(i as i32 % 3))
                .collect(),
        )
        .unwrap();
    // Jobs done in each second of the drain (a second past the last
    // bucket counts in it).
    let buckets: Arc<Vec<AtomicUsize>> = Arc::new((0..120).map(|_| AtomicUsize::new(0)).collect());
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let registry = {
        let (buckets, done) = (buckets.clone(), done.clone());
        Registry::new().handle("empty", move |_| {
            let second = (start.elapsed().as_secs() as usize).min(buckets.len() - 1);
            buckets[second].fetch_add(1, Ordering::Relaxed);
            done.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        })
    };
    let served = common::serve(&url, 3, 2, registry, ServeOptions::new([0, 1, 2]));
    let failsafe = Instant::now() + Duration::from_secs(110);
    while done.load(Ordering::Relaxed) < JOBS && Instant::now() < failsafe {
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = start.elapsed().as_secs() as usize;
    common::close(served);
    assert_eq!(
        done.load(Ordering::Relaxed),
        JOBS,
        "drained within the fail-safe"
    );
    // The full seconds of the drain: the last one is partial.
    let rates: Vec<usize> = buckets[..seconds.min(buckets.len())]
        .iter()
        .map(|b| b.load(Ordering::Relaxed))
        .collect();
    eprintln!("jobs a second: {rates:?}");
    let mut sorted = rates.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    assert!(
        rates.iter().all(|&rate| rate * 2 >= median),
        "a second of the drain below half its median: {rates:?} jobs a second"
    );
}
