//! Schedulers: HighestFirst never starts a lower-level task while a higher
//! level holds one; RoundRobin serves every level and runs every thread.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{Gate, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

/// Blocks every worker with a gate, queues low then high tasks, opens the
/// gate, and returns the order in which the queued tasks ran.
fn order_after_gate(threads: usize) -> Vec<&'static str> {
    let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let started = Arc::new(Barrier::new(threads + 1));
    let blockers: Vec<_> = (0..threads)
        .map(|_| {
            let (gate, started) = (gate.clone(), started.clone());
            pool.high.exec(run(move || {
                started.wait();
                gate.wait();
            }))
        })
        .collect();
    started.wait(); // every worker is now held by the gate
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for (channel, name) in [(&pool.low, "low"), (&pool.high, "high")] {
        for _ in 0..50 {
            let order = order.clone();
            handles.push(channel.exec(run(move || order.lock().unwrap().push(name))));
        }
    }
    gate.open();
    for h in blockers.into_iter().chain(handles) {
        block_on(h).unwrap();
    }
    block_on(owned.close());
    let order = order.lock().unwrap().clone();
    order
}

#[test]
fn highest_first_runs_every_high_task_before_any_low_one() {
    let order = order_after_gate(1);
    assert_eq!(order.len(), 100);
    assert!(order[..50].iter().all(|&n| n == "high"), "{order:?}");
}

#[test]
fn highest_first_on_two_threads_starts_no_low_task_while_high_ones_wait() {
    // With two workers, a low task can only start once the high channel is
    // empty: so at most one high task (the other worker's last) can be
    // recorded after the first low one.
    let order = order_after_gate(2);
    let first_low = order.iter().position(|&n| n == "low").unwrap();
    let late_high = order[first_low..].iter().filter(|&&n| n == "high").count();
    assert!(
        late_high <= 1,
        "{late_high} high tasks after the first low: {order:?}"
    );
}

#[test]
fn round_robin_serves_a_low_level_under_a_perpetual_high_flood() {
    let slices = vec![Duration::from_millis(2), Duration::from_millis(2)];
    let owned = OwnedPool::new(TwoLevels::with(
        1,
        ScheduleAlgorithm::RoundRobin(slices),
        (false, false),
    ))
    .unwrap();
    let pool = owned.pool.clone();
    let stop = Arc::new(AtomicBool::new(false));

    // Each flood task re-submits itself until `stop`: the high level is
    // never empty, which would starve the low level under HighestFirst.
    fn flood(pool: Arc<Pool<TwoLevels>>, stop: Arc<AtomicBool>) {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let next = pool.clone();
        let s = stop.clone();
        drop(pool.high.exec(run(move || flood(next, s))));
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_micros(50) {}
    }
    flood(pool.clone(), stop.clone());

    let low_ran = Gate::new();
    let l = low_ran.clone();
    let s = stop.clone();
    drop(pool.low.exec(run(move || {
        s.store(true, Ordering::SeqCst);
        l.open();
    })));
    assert!(low_ran.wait_for(FAILSAFE), "the low level was starved");
    block_on(owned.close());
}

#[test]
fn round_robin_runs_every_configured_thread() {
    let slices = vec![Duration::from_millis(1), Duration::from_millis(1)];
    let owned = OwnedPool::new(TwoLevels::with(
        2,
        ScheduleAlgorithm::RoundRobin(slices),
        (true, true),
    ))
    .unwrap();
    // Two tasks that can only finish together: needs two running workers.
    let both = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let both = both.clone();
            owned.pool.low.exec(run(move || {
                both.wait();
            }))
        })
        .collect();
    let done = Gate::new();
    let d = done.clone();
    std::thread::spawn(move || {
        for h in handles {
            block_on(h).unwrap();
        }
        d.open();
    });
    assert!(done.wait_for(FAILSAFE), "only one worker thread runs");
    block_on(owned.close());
}
