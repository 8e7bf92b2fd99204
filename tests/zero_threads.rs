//! Zero-thread pools and the helping `block_on`: tasks run on the thread
//! that drives the pool, by the same levels and schedule.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{DropCounter, Flat, TwoLevels};
use smartpool::prelude::*;

/// Nothing runs until the pool is driven; then the exact order is the
/// schedule's: the high level first, each level first in, first out,
/// and a yield behind every task queued before it, those submitted from
/// outside included: the shared queue's head first, as the seat's own
/// queue holds the child (see `yield_now`).
#[test]
fn run_order_is_the_schedules() {
    let owned = OwnedPool::new(TwoLevels::new(0)).unwrap();
    let pool = owned.pool.clone();
    assert_eq!(pool.threads(), 0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let note = |name: &'static str| {
        let log = log.clone();
        move || log.lock().unwrap().push(name)
    };
    let (l1, l2, h1, h2) = (note("l1"), note("l2"), note("h1"), note("h2"));
    let _detached = pool.low.exec(run(l1));
    let _detached = pool.low.exec(run(l2));
    let _detached = pool.high.exec(run(h1));
    let spawner = {
        let log = log.clone();
        let child = note("child");
        async move {
            log.lock().unwrap().push("spawner");
            let pool = Pool::<TwoLevels>::current().unwrap();
            let _detached = pool.high.exec(run(child));
            smartpool::yield_now().await;
            log.lock().unwrap().push("spawner-after-yield");
        }
    };
    let _detached = pool.high.exec(spawner);
    let _detached = pool.high.exec(run(h2));
    assert!(
        log.lock().unwrap().is_empty(),
        "no thread runs a zero-thread pool"
    );
    // 6 tasks, one of which is polled twice.
    assert_eq!(owned.run_until_stalled(), 7);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "h1",
            "spawner",
            "h2",
            "child",
            "spawner-after-yield",
            "l1",
            "l2"
        ]
    );
    assert_eq!(owned.run_until_stalled(), 0, "stalled");
}

/// `block_on` runs the pool's tasks until its future is ready; a future
/// woken from another thread runs at the next drive.
#[test]
fn block_on_drives_and_outside_wakes_run_at_the_next_drive() {
    let owned = OwnedPool::new(Flat::new(0)).unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let waiting = pool.work.exec(async move { rx.await.unwrap() + 1 });
    assert_eq!(owned.run_until_stalled(), 1, "polled once, parked");
    std::thread::spawn(move || tx.send(41).unwrap())
        .join()
        .unwrap();
    assert!(
        !waiting.is_finished(),
        "woken, queued, not run: nobody drives"
    );
    assert_eq!(owned.block_on(waiting).unwrap(), 42);

    // A chain of tasks, each spawning the next, run by `block_on`.
    let count = Arc::new(AtomicUsize::new(0));
    fn chain(pool: Arc<Pool<Flat>>, left: usize, count: Arc<AtomicUsize>) {
        count.fetch_add(1, Ordering::SeqCst);
        if left > 0 {
            let next = pool.clone();
            let _detached = pool.work.exec(run(move || chain(next, left - 1, count)));
        }
    }
    let (p, c) = (pool.clone(), count.clone());
    let first = pool.work.exec(run(move || chain(p, 999, c)));
    owned.block_on(first).unwrap();
    owned.run_until_stalled();
    assert_eq!(count.load(Ordering::SeqCst), 1000);
}

/// Close is driven by whoever polls its future: complete_on_close tasks
/// run to completion, a parked one woken from another thread included;
/// the others are dropped.
#[test]
fn close_is_driven_by_its_poller() {
    let owned = OwnedPool::new(TwoLevels::new(0)).unwrap();
    let pool = owned.pool.clone();
    let drops = DropCounter::new();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let parked = pool.high.exec(async move {
        let v = rx.await.unwrap();
        f.fetch_add(1, Ordering::SeqCst);
        v
    });
    let token = drops.token();
    let dropped = pool.low.exec(async move {
        let _token = token;
        futures::future::pending::<()>().await
    });
    owned.run_until_stalled();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.send(7).unwrap();
    });
    futures::executor::block_on(owned.close());
    sender.join().unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!(futures::executor::block_on(parked).unwrap(), 7);
    assert_eq!(drops.drops(), 1);
    assert!(futures::executor::block_on(dropped).is_err());
    assert!(
        pool.high.exec(run(|| ())).is_finished(),
        "refused after close"
    );
}

/// Dropping a zero-thread pool closes it by driving it on the dropping
/// thread: queued complete_on_close tasks run, parked others are dropped.
#[test]
fn dropping_drives_the_close() {
    let owned = OwnedPool::new(TwoLevels::new(0)).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let drops = DropCounter::new();
    for _ in 0..10 {
        let ran = ran.clone();
        let _detached = owned.pool.high.exec(run(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }));
    }
    let token = drops.token();
    let _detached = owned.pool.low.exec(async move {
        let _token = token;
        futures::future::pending::<()>().await
    });
    drop(owned);
    assert_eq!(ran.load(Ordering::SeqCst), 10);
    assert_eq!(drops.drops(), 1);
}

/// Inside a task, `block_on` helps: on a one-thread pool, a task that
/// blocks on a handle of a task it spawned runs it meanwhile.
#[test]
fn block_on_in_a_task_helps_on_one_thread() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let parent = pool.work.exec(run(|| {
        let pool = Pool::<Flat>::current().unwrap();
        let children: Vec<_> = (0..10).map(|i| pool.work.exec(run(move || i))).collect();
        children
            .into_iter()
            .map(|child| pool.block_on(child).unwrap())
            .sum::<i32>()
    }));
    assert_eq!(futures::executor::block_on(parent).unwrap(), 45);
    // Nested: a block_on inside a task run by a block_on.
    let nested = pool.block_on(pool.work.exec(run(|| {
        let pool = Pool::<Flat>::current().unwrap();
        pool.block_on(pool.work.exec(run(|| {
            let pool = Pool::<Flat>::current().unwrap();
            pool.block_on(pool.work.exec(run(|| 3)))
        })))
    })));
    assert_eq!(nested.unwrap().unwrap().unwrap(), 3);
}

/// From outside, `block_on` makes the caller a worker while it waits: with
/// the pool's only worker held, the caller runs the tasks.
#[test]
fn block_on_from_outside_runs_tasks_on_the_caller() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let (gate, held) = common::hold_worker(&pool.work);
    let me = std::thread::current().id();
    let ran_here = pool
        .work
        .exec(run(move || std::thread::current().id() == me));
    assert!(pool.block_on(ran_here).unwrap(), "the caller ran it");
    gate.open();
    pool.block_on(held).unwrap();
}

/// With every guest seat taken, a `block_on` waits and takes a seat as
/// soon as one is free: two threads driving one zero-thread pool.
#[test]
fn two_drivers_share_the_one_seat() {
    let owned = Arc::new(OwnedPool::new(Flat::new(0)).unwrap());
    let drivers: Vec<_> = (0..2)
        .map(|_| {
            let owned = owned.clone();
            std::thread::spawn(move || {
                let mut sum = 0;
                for i in 0..200u64 {
                    sum += owned
                        .block_on(owned.pool.work.exec(run(move || i)))
                        .unwrap();
                }
                sum
            })
        })
        .collect();
    for driver in drivers {
        assert_eq!(driver.join().unwrap(), 199 * 100);
    }
}

/// A close with a deadline on a zero-thread pool: the poll that drives the
/// pool stops at the deadline (it would wait for ever: the parked task is
/// never woken) and abandons what is left.
#[test]
fn close_timeout_drives_until_the_deadline() {
    let owned = OwnedPool::new(TwoLevels::new(0)).unwrap();
    let never = owned.pool.high.exec(futures::future::pending::<()>());
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let done = owned
        .pool
        .high
        .exec(run(move || r.fetch_add(1, Ordering::SeqCst)));
    // The queued task runs now; the other parks. (Had the close run it,
    // whether it came before the deadline would be a matter of timing.)
    assert_eq!(owned.run_until_stalled(), 2);
    let report = futures::executor::block_on(owned.close_timeout(Duration::from_millis(30)));
    assert!(report.timed_out());
    assert_eq!(report.aborted(), 1, "the parked task");
    assert_eq!(futures::executor::block_on(done).unwrap(), 0);
    let e = futures::executor::block_on(never).unwrap_err();
    assert_eq!(e.cancel_reason(), Some(CancelReason::CloseTimedOut));
}

/// A `join` (a scope) in `block_on`'s first poll, on a zero-thread pool:
/// the driving thread is the pool's worker from the first poll on, so the
/// scope's wait runs `b` (it waited for ever as a foreign thread, with
/// nobody to run it).
#[test]
fn join_in_block_ons_first_poll_runs_on_a_zero_thread_pool() {
    let owned = smartpool::Builder::new().threads(0).build().unwrap();
    let pool = owned.pool.clone();
    let joined = common::within(common::FAILSAFE, move || {
        let (a, b) = owned.block_on(async { smartpool::join(pool.level(0), || 1, || 2) });
        owned.close().wait();
        (a, b)
    });
    assert_eq!(joined, Some((1, 2)));
}

/// A root future that wakes itself and returns `Pending` until a queued
/// task has run (tokio's `block_on(yield_now())` tick, a polling loop):
/// `block_on` runs the queued tasks between the root's polls (it polled
/// the root for ever at full CPU).
#[test]
fn block_on_runs_queued_tasks_between_polls_of_a_self_waking_root() {
    let owned = smartpool::Builder::new().threads(0).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let _task = owned.pool.level(0).exec(run(move || {
        r.fetch_add(1, Ordering::SeqCst);
    }));
    let done = common::within(common::FAILSAFE, move || {
        let mut polls = 0u64;
        owned.block_on(futures::future::poll_fn(|cx| {
            polls += 1;
            if ran.load(Ordering::SeqCst) == 1 || polls > 10_000_000 {
                return std::task::Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }));
        owned.close().wait();
        polls
    });
    let polls = done.expect("block_on returned");
    assert!(polls <= 3, "the root was polled {polls} times first");
}

/// `futures::executor::block_on(handle)` inside a task is not the way to
/// wait on a pool (it blocks the worker); `pool.block_on` is, even on a
/// pool of one thread: its wait runs the awaited task.
#[test]
fn pool_block_on_inside_a_task_runs_the_awaited_task_on_one_thread() {
    let owned = smartpool::Builder::new().threads(1).build().unwrap();
    let pool = owned.pool.clone();
    let outer = owned.pool.level(0).exec(async move {
        let inner = pool.level(0).exec(run(|| 21));
        pool.block_on(inner).unwrap() * 2
    });
    assert_eq!(owned.block_on(outer).unwrap(), 42);
    owned.close().wait();
}
