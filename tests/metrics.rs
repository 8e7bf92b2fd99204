//! `Pool::metrics`: per channel, tasks submitted, started, completed,
//! panicked, cancelled and queued, and their sampled queue waits; per
//! level, busy time; per worker, what it is doing, the tasks it ran and
//! its steals. The counts are exact once the pool is quiet.
#![cfg(feature = "metrics")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{hold_worker, Lv, TwoLevels};
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool::{Activity, ChannelMetrics};

/// A snapshot with every count of the workers in it: taken after one that
/// shows them all idle (a task's completion is counted after its handle
/// wakes).
fn quiet(pool: &Pool<TwoLevels>) -> smartpool::Metrics<Lv> {
    loop {
        let metrics = pool.metrics();
        if metrics
            .workers
            .iter()
            .all(|w| !matches!(w.activity, Activity::Running { .. }))
        {
            return pool.metrics();
        }
        std::thread::yield_now();
    }
}

fn channel(metrics: &smartpool::Metrics<Lv>, key: Lv) -> ChannelMetrics<Lv> {
    metrics
        .channels
        .iter()
        .find(|c| c.key == key)
        .expect("every channel is listed")
        .clone()
}

#[test]
fn counts_what_the_tasks_came_to() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = &owned.pool;
    let done: Vec<_> = (0..10).map(|i| pool.high.exec(run(move || i))).collect();
    let panics: Vec<_> = (0..3)
        .map(|_| pool.low.exec(run(|| panic!("counted"))))
        .collect();
    let yields: Vec<_> = (0..4)
        .map(|_| {
            pool.low.exec(async {
                smartpool::yield_now().await;
                smartpool::yield_now().await;
            })
        })
        .collect();
    for h in done {
        block_on(h).unwrap();
    }
    for h in panics {
        assert!(block_on(h).unwrap_err().is_panic());
    }
    for h in yields {
        block_on(h).unwrap();
    }
    let metrics = quiet(pool);
    let high = channel(&metrics, Lv::High);
    assert_eq!(
        (high.level, high.submitted, high.started, high.completed),
        (0, 10, 10, 10)
    );
    assert_eq!((high.panicked, high.cancelled, high.queued), (0, 0, 0));
    let low = channel(&metrics, Lv::Low);
    assert_eq!(low.submitted, 7);
    assert_eq!(low.started, 7, "a yield is not a second start");
    assert_eq!((low.completed, low.panicked), (4, 3));
    assert_eq!(low.queued, 0);
    // 10 + 3 + 4 × 3 polls.
    let ran: u64 = metrics.workers.iter().map(|w| w.tasks).sum();
    assert_eq!(ran, 25);
    assert_eq!(metrics.workers.len(), 2);
    let table = metrics.to_string();
    assert!(
        table.contains("submitted") && table.contains("worker 1"),
        "{table}"
    );
    block_on(owned.close());
}

#[test]
fn counts_queued_and_cancelled_tasks_and_what_workers_do() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.low);
    let queued: Vec<_> = (0..5).map(|_| pool.low.exec(run(|| ()))).collect();
    let aborted = pool.low.exec(run(|| ()));
    aborted.abort();
    let metrics = pool.metrics();
    // (Asserted once the worker is let go: a failure must not hang it.)
    gate.open();
    let low = channel(&metrics, Lv::Low);
    assert_eq!(low.submitted, 7, "the holder, five, the aborted one");
    assert_eq!(low.queued, 6);
    assert_eq!(
        metrics.workers[0].activity,
        Activity::Running { level: 1 },
        "held by a low task"
    );
    block_on(held).unwrap();
    for h in queued {
        block_on(h).unwrap();
    }
    assert!(block_on(aborted).unwrap_err().is_cancelled());
    let low = channel(&quiet(pool), Lv::Low);
    assert_eq!((low.started, low.completed, low.cancelled), (6, 6, 1));
    assert_eq!(low.queued, 0);
    // The worker goes idle, then to sleep.
    loop {
        match pool.metrics().workers[0].activity {
            Activity::Asleep => break,
            Activity::Searching | Activity::Running { .. } => std::thread::yield_now(),
            other => panic!("{other:?}"),
        }
    }
    block_on(owned.close());
}

/// Tasks dropped from a channel that does not complete on close count as
/// cancelled, not queued, once the pool closed.
#[test]
fn close_drops_count_as_cancelled() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let (gate, held) = hold_worker(&pool.high);
    let dropped: Vec<_> = (0..4).map(|_| pool.low.exec(run(|| ()))).collect();
    let closing = owned.close();
    gate.open();
    block_on(closing);
    block_on(held).unwrap();
    for h in dropped {
        assert!(block_on(h).unwrap_err().is_cancelled());
    }
    let low = channel(&pool.metrics(), Lv::Low);
    assert_eq!((low.submitted, low.started, low.cancelled), (4, 0, 4));
    assert_eq!(low.queued, 0);
}

/// Submissions from many outside threads are all counted (each counts in
/// a block of its own).
#[test]
fn outside_submitters_are_all_counted() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let go = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (pool, go) = (pool.clone(), go.clone());
            std::thread::spawn(move || {
                while !go.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                let handles: Vec<_> = (0..250).map(|_| pool.low.exec(run(|| ()))).collect();
                for h in handles {
                    block_on(h).unwrap();
                }
            })
        })
        .collect();
    go.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let low = channel(&quiet(&pool), Lv::Low);
    assert_eq!(
        (low.submitted, low.started, low.completed),
        (1000, 1000, 1000)
    );
    drop(pool);
    block_on(owned.close());
}

/// The first new task a thread submits to a channel has its queue wait
/// measured (one in 64 after it): a task held behind a busy worker for at
/// least 5 ms reports at least that.
#[test]
fn measures_the_queue_wait_of_sampled_tasks() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.low);
    let waiting: Vec<_> = (0..65).map(|_| pool.high.exec(run(|| ()))).collect();
    // The wait this test measures: more than 5 ms, however the machine
    // runs (the stamps are whole microseconds).
    let submitted = Instant::now();
    while submitted.elapsed() < Duration::from_millis(6) {
        std::thread::sleep(Duration::from_millis(1));
    }
    gate.open();
    block_on(held).unwrap();
    for h in waiting {
        block_on(h).unwrap();
    }
    let high = channel(&quiet(pool), Lv::High);
    let wait = &high.queue_wait;
    assert_eq!(wait.samples, 2, "the first task and the 65th");
    let at_least = Duration::from_millis(5);
    assert!(wait.max.unwrap() >= at_least, "{wait:?}");
    assert!(wait.p99.unwrap() >= at_least, "{wait:?}");
    assert!(wait.p50.unwrap() <= wait.max.unwrap(), "{wait:?}");
    assert_eq!(wait.buckets.iter().sum::<u64>(), 2);
    // A channel no task was measured in has none.
    let unused = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let none = channel(&unused.pool.metrics(), Lv::High).queue_wait;
    assert_eq!((none.samples, none.p50, none.max), (0, None, None));
    block_on(unused.close());
    block_on(owned.close());
}

/// A level's busy time covers the time its tasks ran.
#[test]
fn counts_busy_time_per_level() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let ran = pool.low.exec(run(|| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(5) {
            std::hint::spin_loop();
        }
    }));
    block_on(ran).unwrap();
    let metrics = quiet(pool);
    assert_eq!(metrics.levels.len(), 2);
    assert!(
        metrics.levels[1].busy >= Duration::from_millis(5),
        "{:?}",
        metrics.levels
    );
    assert_eq!(metrics.levels[0].busy, Duration::ZERO, "no high task ran");
    block_on(owned.close());
}

/// Tasks a blocked worker queued locally run on the other one, which
/// steals them: its steals are counted.
#[test]
fn counts_steals() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let gate = common::Gate::new();
    let (spawned_tx, spawned_rx) = std::sync::mpsc::channel();
    let p = pool.clone();
    let g = gate.clone();
    let blocked = pool.low.exec(run(move || {
        // Queued on this worker (its LIFO slot and local deque): only the
        // other worker can run them while this one waits.
        let handles: Vec<_> = (0..100).map(|_| p.low.exec(run(|| ()))).collect();
        spawned_tx.send(handles).unwrap();
        g.wait();
    }));
    let handles = spawned_rx.recv().unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    gate.open();
    block_on(blocked).unwrap();
    let metrics = quiet(&pool);
    let steals: u64 = metrics.workers.iter().map(|w| w.steals).sum();
    assert!(steals >= 1, "{metrics}");
    drop(pool);
    block_on(owned.close());
}

/// Tasks that spawn tasks go through LIFO slots, local deques and steals,
/// and scoped tasks may be run by their waiter: every task is counted
/// once, and nothing stays counted as queued.
#[test]
fn tasks_spawning_tasks_leave_nothing_queued() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let outer: Vec<_> = (0..20)
        .map(|i| {
            let (p, tx) = (pool.clone(), tx.clone());
            pool.low.exec(run(move || {
                let inner: Vec<_> = (0..50)
                    .map(|j| {
                        let channel = if (i + j) % 2 == 0 { &p.low } else { &p.high };
                        channel.exec(run(|| ()))
                    })
                    .collect();
                tx.send(inner).unwrap();
                // Scoped tasks, which the waiting task may run itself.
                smartpool::scope(|s| {
                    for _ in 0..10 {
                        s.exec(&p.low, run(|| ()));
                    }
                });
            }))
        })
        .collect();
    drop(tx);
    for inner in rx {
        for h in inner {
            block_on(h).unwrap();
        }
    }
    for h in outer {
        block_on(h).unwrap();
    }
    let metrics = quiet(&pool);
    let (low, high) = (channel(&metrics, Lv::Low), channel(&metrics, Lv::High));
    assert_eq!(high.submitted, 500, "{metrics}");
    assert_eq!(low.submitted, 20 + 500 + 200, "{metrics}");
    for c in [&low, &high] {
        assert_eq!(c.started, c.submitted, "{metrics}");
        assert_eq!(c.completed, c.submitted, "{metrics}");
        assert_eq!(c.queued, 0, "{metrics}");
    }
    drop(pool);
    block_on(owned.close());
}

/// A moved task's entry left behind in its old queue is taken (stale) or
/// dropped: neither channel counts it as queued afterwards.
#[test]
fn a_moved_task_leaves_nothing_queued() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.high);
    let asset = pool.low.exec(run(|| ()));
    let moved = asset.move_to(&pool.high);
    gate.open();
    moved.expect("queued: moved");
    block_on(held).unwrap();
    block_on(asset).unwrap();
    let metrics = quiet(pool);
    let (low, high) = (channel(&metrics, Lv::Low), channel(&metrics, Lv::High));
    assert_eq!(
        (low.submitted, low.started, low.queued),
        (1, 0, 0),
        "{metrics}"
    );
    assert_eq!((high.submitted, high.started), (1, 2), "{metrics}");
    assert_eq!((high.completed, high.queued), (2, 0), "{metrics}");
    block_on(owned.close());
}

/// A guest seat (here a zero-thread pool's, driven by the caller) shows
/// idle once given back: its level's busy time stops growing.
#[test]
fn a_seat_given_back_stops_counting_busy_time() {
    let owned = OwnedPool::new(TwoLevels::new(0)).unwrap();
    let done = owned.pool.low.exec(run(|| ()));
    assert_eq!(owned.run_until_stalled(), 1);
    block_on(done).unwrap();
    let before = owned.pool.metrics().levels[1].busy;
    let at = Instant::now();
    while at.elapsed() < Duration::from_millis(1) {
        std::hint::spin_loop();
    }
    assert_eq!(owned.pool.metrics().levels[1].busy, before);
    block_on(owned.close());
}

/// Waits until channel 0 of `pool` counts a stall (failing the test past
/// the fail-safe).
fn wait_for_a_stall(pool: &Pool<smartpool::Leveled>) {
    let start = Instant::now();
    while pool.metrics().channels[0].stalls == 0 {
        assert!(start.elapsed() < common::FAILSAFE, "no stall reported");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A pool of one worker whose watcher calls a poll of 5 ms a stall.
fn watched() -> smartpool::Builder {
    smartpool::Builder::new()
        .threads(1)
        .stall_threshold(Some(Duration::from_millis(5)))
}

/// A poll that blocks (here on a latch, as `futures::executor::block_on`
/// on a handle would) while a task waits at its level is reported once:
/// one stall in the channel's metrics, while the poll still runs.
#[test]
fn a_poll_that_blocks_while_work_waits_is_a_stall() {
    let owned = watched().build().unwrap();
    let pool = owned.pool.clone();
    let (gate, blocker) = hold_worker(pool.level(0));
    let waiting = pool.level(0).exec(run(|| ()));
    wait_for_a_stall(&pool);
    gate.open();
    owned.block_on(blocker).unwrap();
    owned.block_on(waiting).unwrap();
    assert_eq!(pool.metrics().channels[0].stalls, 1, "reported once");
    owned.close().wait();
}

/// The watcher keeps watching while a dropped pool closes: a poll that
/// blocks while a task its close waits for is queued is still a stall.
/// (A hang in close is what the watcher is for.)
#[test]
fn a_stall_while_a_dropped_pool_closes_is_reported() {
    let owned = watched().complete_on_close(0, true).build().unwrap();
    let pool = owned.pool.clone();
    // Both handles dropped: the close waits for the tasks all the same.
    let (gate, blocker) = hold_worker(pool.level(0));
    drop(blocker);
    drop(pool.level(0).exec(run(|| ())));
    // The drop waits for both tasks: on a thread of its own.
    let dropper = std::thread::spawn(move || drop(owned));
    wait_for_a_stall(&pool);
    gate.open();
    dropper.join().unwrap();
    assert_eq!(pool.metrics().channels[0].stalls, 1, "reported once");
}

/// A poll that blocks after it put a task in its worker's LIFO slot (the
/// common mistake: `futures::executor::block_on` on the handle of a task
/// it just spawned) is a stall too: the slot's task waits, with no status
/// bit. Here the poll blocks on a latch, so the test can end it.
#[test]
fn a_poll_that_blocks_over_its_slots_task_is_a_stall() {
    let owned = watched().build().unwrap();
    let pool = owned.pool.clone();
    let (gate, running) = (common::Gate::new(), common::Gate::new());
    let (g, r, p) = (gate.clone(), running.clone(), pool.clone());
    let blocker = pool.level(0).exec(run(move || {
        let child = p.level(0).exec(run(|| 7));
        r.open();
        g.wait();
        child
    }));
    assert!(running.wait_for(common::FAILSAFE));
    wait_for_a_stall(&pool);
    gate.open();
    let child = owned.block_on(blocker).unwrap();
    assert_eq!(owned.block_on(child).unwrap(), 7);
    owned.close().wait();
}
