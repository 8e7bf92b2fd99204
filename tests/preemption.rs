//! Cooperative preemption: `should_yield` and `yield_if_needed`.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Flat, Lv, TwoLevels};
use smartpool::prelude::*;
use smartpool::{should_yield, yield_if_needed};

/// A loop bound that only a broken `should_yield` reaches.
const FAILSAFE: Duration = Duration::from_secs(20);

#[test]
fn false_off_a_pool_and_with_nothing_waiting() {
    assert!(!should_yield(), "off any pool");
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let h = owned.pool.low.exec(run(should_yield));
    assert!(!owned.pool.block_on(h).unwrap(), "nothing waits");
    let h = owned.pool.high.exec(run(|| {
        let pool = Pool::<TwoLevels>::current().unwrap();
        drop(pool.low.exec(run(|| ())));
        should_yield()
    }));
    assert!(
        !owned.pool.block_on(h).unwrap(),
        "a lower level never preempts"
    );
}

/// A task that submits a higher-level task itself, on the pool's only
/// worker (or its only driver): it should yield at once.
#[test]
fn true_once_a_higher_level_task_waits_and_no_worker_is_free() {
    for threads in [0, 1] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let h = owned.pool.low.exec(run(|| {
            let pool = Pool::<TwoLevels>::current().unwrap();
            let before = should_yield();
            drop(pool.high.exec(run(|| ())));
            (before, should_yield())
        }));
        // A zero-thread pool runs only while driven; on the threaded one,
        // wait without helping (a helping thread would take the task).
        let answers = if threads == 0 {
            owned.pool.block_on(h)
        } else {
            futures::executor::block_on(h)
        };
        assert_eq!(answers.unwrap(), (false, true), "{threads} threads");
    }
}

/// A long closure on the low level of a one-thread pool stops when an
/// urgent task arrives from outside and resubmits the rest: the urgent
/// task runs in between.
#[test]
fn a_long_closure_gives_way_to_urgent_work() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (started_tx, started) = mpsc::channel();
    let (rest_tx, rest) = mpsc::channel::<JoinHandle<()>>();
    let l = log.clone();
    let long = pool.low.exec(run(move || {
        started_tx.send(()).unwrap();
        let start = Instant::now();
        while !should_yield() {
            assert!(start.elapsed() < FAILSAFE, "never asked to yield");
            std::hint::spin_loop();
        }
        l.lock().unwrap().push("long stops");
        let pool = Pool::<TwoLevels>::current().unwrap();
        let l = l.clone();
        rest_tx
            .send(
                pool.low
                    .exec(run(move || l.lock().unwrap().push("the rest"))),
            )
            .unwrap();
    }));
    started.recv().unwrap();
    let l = log.clone();
    let urgent = pool
        .high
        .exec(run(move || l.lock().unwrap().push("urgent")));
    // Wait without helping (`pool.block_on` would make this thread a
    // worker, which would take the urgent task: no need to yield then).
    futures::executor::block_on(long).unwrap();
    futures::executor::block_on(urgent).unwrap();
    futures::executor::block_on(rest.recv().unwrap()).unwrap();
    assert_eq!(*log.lock().unwrap(), ["long stops", "urgent", "the rest"]);
}

/// A long future yields with `yield_if_needed` only when asked: the
/// urgent task runs, and the future sees it ran.
#[test]
fn a_long_future_yields_only_when_needed() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let urgent_ran = Arc::new(AtomicBool::new(false));
    let (started_tx, started) = mpsc::channel();
    let ran = urgent_ran.clone();
    let long = pool.low.exec(async move {
        started_tx.send(()).unwrap();
        let start = Instant::now();
        let mut polls_without_yield = 0u64;
        while !ran.load(Ordering::SeqCst) {
            assert!(
                start.elapsed() < FAILSAFE,
                "never yielded to the urgent task"
            );
            yield_if_needed().await;
            polls_without_yield += 1;
        }
        polls_without_yield
    });
    started.recv().unwrap();
    let ran = urgent_ran.clone();
    let urgent = pool
        .high
        .exec(run(move || ran.store(true, Ordering::SeqCst)));
    // Waits without helping, as above.
    assert!(futures::executor::block_on(long).unwrap() > 0);
    futures::executor::block_on(urgent).unwrap();
}

/// Under RoundRobin, a task is asked to yield once its level's slice is
/// over and another level has work (and not before: no work elsewhere).
#[test]
fn round_robin_asks_at_the_end_of_the_slice() {
    let owned = OwnedPool::new(TwoLevels::with(
        1,
        ScheduleAlgorithm::RoundRobin(vec![Duration::from_millis(2), Duration::from_millis(2)]),
        (true, true),
    ))
    .unwrap();
    let h = owned.pool.high.exec(run(|| {
        let pool = Pool::<TwoLevels>::current().unwrap();
        let alone = should_yield();
        drop(pool.low.exec(run(|| ())));
        let start = Instant::now();
        while !should_yield() {
            assert!(start.elapsed() < FAILSAFE, "the slice never ended");
            std::hint::spin_loop();
        }
        alone
    }));
    // Wait without helping: a helping thread would take the low task.
    assert!(
        !futures::executor::block_on(h).unwrap(),
        "no other level had work"
    );
}

/// Inside a scope and during close, on a foreign thread: no panic, a plain
/// answer.
#[test]
fn anywhere_it_answers() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let h = pool.work.exec(run(|| {
        let pool = Pool::<Flat>::current().unwrap();
        smartpool::scope(|s| {
            drop(s.exec(&pool.work, async { should_yield() }));
        });
        std::thread::spawn(should_yield).join().unwrap()
    }));
    assert!(!pool.block_on(h).unwrap(), "a foreign thread");
    let (tx, rx) = mpsc::channel();
    let during_close = pool.work.exec(async move {
        let _ = rx.recv();
        should_yield()
    });
    let close = std::thread::spawn(move || futures::executor::block_on(owned.close()));
    tx.send(()).unwrap();
    let _ = futures::executor::block_on(during_close);
    close.join().unwrap();
    let _ = Lv::High;
}
