//! `yield_now`, `Pool::current` and `Pool::current_key`: a task gives its
//! worker up once and the level's waiting tasks run first; a task finds its
//! pool and the channel it came from, to submit children at its own level.
//! Then the task-control issue's bad input: aborts from many threads, a
//! `JoinSet` dropped on a worker or inside its own task, `current()` on a
//! foreign thread and during close, `join` and `scope` nested.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{close_within, Flat, Lv, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

/// A task submits two children from inside, then yields: both run before
/// it continues (with and without the LIFO slot: a yield never takes it).
#[test]
fn yield_now_lets_the_level_run_before_the_task_continues() {
    for lifo in [true, false] {
        let owned = OwnedPool::new(Flat::with(1, lifo, true)).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let handle = owned.pool.work.exec(async move {
            let pool = Pool::<Flat>::current().expect("inside a task");
            let children: Vec<_> = ["b", "c"]
                .into_iter()
                .map(|name| {
                    let o = o.clone();
                    pool.work.exec(run(move || o.lock().unwrap().push(name)))
                })
                .collect();
            o.lock().unwrap().push("a: yields");
            smartpool::yield_now().await;
            o.lock().unwrap().push("a: continues");
            for child in children {
                child.await.unwrap();
            }
        });
        block_on(handle).unwrap();
        let order = order.lock().unwrap().clone();
        assert_eq!(order.len(), 4, "{order:?}");
        assert_eq!(order[0], "a: yields");
        assert_eq!(order[3], "a: continues", "lifo {lifo}: {order:?}");
        assert!(close_within(owned, FAILSAFE));
    }
}

/// A `yield_now` loop on the only worker does not starve a task submitted
/// from outside (the Core v2 fairness rule): the outside task sets the flag
/// the loop waits for.
#[test]
fn a_yield_now_loop_lets_outside_work_in() {
    let owned = OwnedPool::new(Flat::with(1, true, true)).unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let (f, started) = (flag.clone(), common::Gate::new());
    let s = started.clone();
    let looping = owned.pool.work.exec(async move {
        s.open();
        let mut yields = 0u64;
        while !f.load(Ordering::SeqCst) {
            smartpool::yield_now().await;
            yields += 1;
        }
        yields
    });
    started.wait();
    let f = flag.clone();
    let setter = owned
        .pool
        .work
        .exec(run(move || f.store(true, Ordering::SeqCst)));
    block_on(setter).unwrap();
    assert!(block_on(looping).unwrap() >= 1);
    assert!(close_within(owned, FAILSAFE));
}

/// Off a pool, `yield_now` is a plain yield to whatever executor polls it.
#[test]
fn yield_now_off_a_pool_completes() {
    block_on(async {
        smartpool::yield_now().await;
        smartpool::yield_now().await;
    });
}

#[test]
fn current_is_the_pool_of_the_running_task() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    assert!(Pool::<TwoLevels>::current().is_none(), "not in a task");
    assert!(owned.pool.current_key().is_none(), "not in a task");
    let pool = owned.pool.clone();
    let same = owned.pool.low.exec(run(move || {
        let current = Pool::<TwoLevels>::current().expect("in a closure task");
        Arc::ptr_eq(&current, &pool)
    }));
    assert!(block_on(same).unwrap());
    let other_type = owned
        .pool
        .high
        .exec(async { Pool::<Flat>::current().is_none() });
    assert!(block_on(other_type).unwrap(), "another behavior type: None");
    assert!(close_within(owned, FAILSAFE));
}

/// A task learns the channel it came from, and submits a child there; a
/// woken future reports where its followup sent it (here: back home).
#[test]
fn current_key_names_the_channel_a_task_came_from() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    for (key, name) in [(Lv::High, "high"), (Lv::Low, "low")] {
        let pool = owned.pool.clone();
        let handle = pool.channel(key).exec(async move {
            let pool = Pool::<TwoLevels>::current().unwrap();
            let before = pool.current_key();
            smartpool::yield_now().await;
            let after = pool.current_key();
            let child = pool
                .channel(pool.current_key().unwrap())
                .exec(async { Pool::<TwoLevels>::current().unwrap().current_key() });
            (before, after, child.await.unwrap())
        });
        let (before, after, child) = block_on(handle).unwrap();
        assert_eq!(before, Some(key), "{name}");
        assert_eq!(after, Some(key), "{name}: after a wake");
        assert_eq!(child, Some(key), "{name}: the child runs at its level");
    }
    assert!(close_within(owned, FAILSAFE));
}

/// Two pools of one behavior type: each task finds its own, and the other
/// pool does not claim it.
#[test]
fn current_tells_two_pools_of_one_type_apart() {
    let (a, b) = (
        OwnedPool::new(TwoLevels::new(1)).unwrap(),
        OwnedPool::new(TwoLevels::new(1)).unwrap(),
    );
    let (pa, pb) = (a.pool.clone(), b.pool.clone());
    let seen = b.pool.high.exec(run(move || {
        let current = Pool::<TwoLevels>::current().unwrap();
        (
            Arc::ptr_eq(&current, &pb),
            pa.current_key(),
            pb.current_key(),
        )
    }));
    assert_eq!(block_on(seen).unwrap(), (true, None, Some(Lv::High)));
    assert!(close_within(a, FAILSAFE));
    assert!(close_within(b, FAILSAFE));
}

// ---------------------------------------------------------------------
// Bad input: each does the documented thing, never a hang or a double drop.
// ---------------------------------------------------------------------

/// Aborts from eight threads, a hundred times each, of one parked task:
/// its future is dropped once.
#[test]
fn aborts_from_many_threads_drop_a_task_once() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let drops = common::DropCounter::new();
    let token = drops.token();
    let (_tx, rx) = futures::channel::oneshot::channel::<()>();
    let (polled_tx, polled) = futures::channel::oneshot::channel::<()>();
    let handle = owned.pool.work.exec(async move {
        let _token = token;
        polled_tx.send(()).unwrap();
        let _ = rx.await;
    });
    block_on(polled).unwrap();
    let abort = handle.abort_handle();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let abort = abort.clone();
            std::thread::spawn(move || {
                for _ in 0..100 {
                    abort.abort();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let error = block_on(handle).unwrap_err();
    assert_eq!(error.cancel_reason(), Some(CancelReason::Aborted));
    assert_eq!(drops.drops(), 1);
    assert!(close_within(owned, FAILSAFE));
}

/// A `JoinSet` sent into one of its own tasks and dropped there: the
/// other tasks are aborted, and the task itself too (right after the poll
/// that dropped the set, which returns `Pending` at its next await).
#[test]
fn a_join_set_dropped_inside_one_of_its_own_tasks() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let drops = common::DropCounter::new();
    let mut set = smartpool::JoinSet::new();
    let (set_tx, set_rx) = futures::channel::oneshot::channel::<smartpool::JoinSet<()>>();
    let (dropped_tx, dropped_rx) = futures::channel::oneshot::channel::<()>();
    let token = drops.token();
    let dropper = set.exec(&owned.pool.work, async move {
        let _token = token;
        drop(set_rx.await.unwrap());
        dropped_tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    for _ in 0..3 {
        let token = drops.token();
        set.exec(&owned.pool.work, async move {
            let _token = token;
            std::future::pending::<()>().await;
        });
    }
    set_tx.send(set).ok().unwrap();
    block_on(dropped_rx).unwrap();
    while !dropper.is_finished() {
        std::thread::yield_now();
    }
    assert!(close_within(owned, FAILSAFE));
    assert_eq!(drops.drops(), 4, "each task dropped once");
}

/// A `JoinSet` dropped in a closure task on a worker aborts its tasks.
#[test]
fn a_join_set_dropped_on_a_worker() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let drops = common::DropCounter::new();
    let mut set = smartpool::JoinSet::new();
    let mut aborts = Vec::new();
    for _ in 0..4 {
        let token = drops.token();
        aborts.push(set.exec(&owned.pool.work, async move {
            let _token = token;
            std::future::pending::<()>().await;
        }));
    }
    block_on(owned.pool.work.exec(run(move || drop(set)))).unwrap();
    for abort in &aborts {
        while !abort.is_finished() {
            std::thread::yield_now();
        }
    }
    assert_eq!(drops.drops(), 4);
    assert!(close_within(owned, FAILSAFE));
}

/// `try_join_next` keeps the waker a pending `join_next` left (as tokio's
/// does): the task's end still wakes that poller.
#[test]
fn try_join_next_keeps_the_pollers_waker() {
    struct Flag(AtomicBool);
    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let gate = common::Gate::new();
    let g = gate.clone();
    let mut set = smartpool::JoinSet::new();
    set.exec(&owned.pool.work, run(move || g.wait()));
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = std::task::Waker::from(flag.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(set.poll_join_next(&mut cx).is_pending());
    assert!(set.try_join_next().is_none());
    gate.open();
    let deadline = std::time::Instant::now() + FAILSAFE;
    while !flag.0.load(Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the poller was not woken"
        );
        std::thread::yield_now();
    }
    assert!(block_on(set.join_next()).unwrap().is_ok());
    assert!(close_within(owned, FAILSAFE));
}

/// `Pool::current()` is `None` on a foreign thread and in a destructor
/// that close runs outside any poll; inside a task running during close
/// it is the pool.
#[test]
fn current_on_a_foreign_thread_and_during_close() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let foreign = std::thread::spawn(|| Pool::<TwoLevels>::current().is_none());
    assert!(foreign.join().unwrap());
    let (gate, started) = (common::Gate::new(), common::Gate::new());
    let (g, s) = (gate.clone(), started.clone());
    let pool = owned.pool.clone();
    let during = owned.pool.high.exec(run(move || {
        s.open();
        g.wait();
        let current = Pool::<TwoLevels>::current().expect("in a task");
        (pool.is_closing(), current.current_key())
    }));
    started.wait();
    // A parked task of the dropping channel whose destructor asks.
    struct Asks(Arc<Mutex<Option<bool>>>);
    impl Drop for Asks {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(Pool::<TwoLevels>::current().is_some());
        }
    }
    let asked = Arc::new(Mutex::new(None));
    let asks = Asks(asked.clone());
    let (_tx, rx) = futures::channel::oneshot::channel::<()>();
    let parked = owned.pool.low.exec(async move {
        let _asks = asks;
        let _ = rx.await;
    });
    let close = owned.close();
    gate.open();
    assert_eq!(block_on(during).unwrap(), (true, Some(Lv::High)));
    block_on(close);
    assert!(block_on(parked).unwrap_err().is_cancelled());
    assert_eq!(*asked.lock().unwrap(), Some(false), "no task polled there");
}

/// `join` inside a scoped task, and a scope inside each half of a `join`.
#[test]
fn join_inside_a_scope_and_scopes_inside_join() {
    for threads in [1, 2] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let total = block_on(owned.pool.work.exec(run(move || {
            let (mut a, mut b) = (0, 0);
            smartpool::scope(|s| {
                s.exec(
                    &pool.work,
                    run(|| a = smartpool::join(&pool.work, || 1, || 2).0 + 10),
                );
                s.exec(&pool.work, run(|| b = 20));
            });
            let (c, d) = smartpool::join(
                &pool.work,
                || {
                    let mut x = 0;
                    smartpool::scope(|s| {
                        s.exec(&pool.work, run(|| x = 100));
                    });
                    x
                },
                || {
                    let mut y = 0;
                    smartpool::scope(|s| {
                        s.exec(&pool.work, run(|| y = 1000));
                    });
                    y
                },
            );
            a + b + c + d
        })))
        .unwrap();
        assert_eq!(total, 1131, "{threads} threads");
        assert!(close_within(owned, FAILSAFE));
    }
}
