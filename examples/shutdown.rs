//! A graceful shutdown with a deadline: what close keeps, what it drops,
//! and what the deadline cuts short.
//!
//! Run: `cargo run --example shutdown`
//!
//! The pool has two levels. Level 0 ("orders") completes on close: its
//! queued tasks still run. Level 1 ("prefetch") does not: close drops its
//! queued tasks at once. The orders take longer than the deadline allows,
//! so `close_timeout` drops the orders still queued when it passes, and
//! reports how many.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smartpool::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let owned = smartpool::Builder::new().levels(2).threads(2).build()?;
    let pool = owned.pool.clone();
    let done = Arc::new(AtomicUsize::new(0));

    // 40 orders of 20 ms each: about 400 ms of work for two workers.
    let orders: Vec<_> = (0..40)
        .map(|_| {
            let done = done.clone();
            pool.level(0).exec(run(move || {
                std::thread::sleep(Duration::from_millis(20));
                done.fetch_add(1, Ordering::Relaxed);
            }))
        })
        .collect();
    // 1,000 prefetches nobody will miss.
    let prefetches: Vec<_> = (0..1_000)
        .map(|_| {
            pool.level(1)
                .exec(run(|| std::thread::sleep(Duration::from_millis(1))))
        })
        .collect();

    let start = Instant::now();
    drop(pool);
    let report = owned.close_timeout(Duration::from_millis(150)).wait();
    println!("closed after {} ms", start.elapsed().as_millis());
    println!(
        "deadline passed: {}; orders dropped by it: {}",
        report.timed_out(),
        report.aborted()
    );

    let outcome = |handles: Vec<JoinHandle<()>>| {
        let (mut ran, mut dropped) = (0, 0);
        for handle in handles {
            // Closed: every handle is resolved, nothing is left to drive.
            match futures::executor::block_on(handle) {
                Ok(()) => ran += 1,
                Err(e) if e.is_cancelled() => dropped += 1,
                Err(e) => println!("  unexpected: {e}"),
            }
        }
        (ran, dropped)
    };
    let (ran, dropped) = outcome(orders);
    println!(
        "orders:     {ran:>4} ran, {dropped:>4} dropped (completed count: {})",
        done.load(Ordering::Relaxed)
    );
    let (ran, dropped) = outcome(prefetches);
    println!("prefetches: {ran:>4} ran, {dropped:>4} dropped");
    Ok(())
}
