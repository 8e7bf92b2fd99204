//! Moving queued tasks (`JoinHandle::move_to`, `AbortHandle::move_to`) and
//! priority inheritance (a task awaited by a higher level moves up): a
//! queued task runs once, from whichever channel reaches it first; a move
//! that cannot be done says why and leaves the task as it was; the entry
//! left behind in the old queue is skipped, holds close only until a
//! worker reaches it, and loses nothing.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{hold_worker, DropCounter, TwoLevels};
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool::{CancelReason, MoveError};

/// Records the order in which tasks ran.
#[derive(Clone, Default)]
struct Order(Arc<Mutex<Vec<&'static str>>>);

impl Order {
    fn push(&self, name: &'static str) {
        self.0.lock().unwrap().push(name);
    }
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// `n` low tasks that record "backlog" in `order`.
fn backlog(pool: &TwoLevels, order: &Order, n: usize) -> Vec<JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let order = order.clone();
            pool.low.exec(run(move || order.push("backlog")))
        })
        .collect()
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for handle in handles {
        block_on(handle).unwrap();
    }
}

/// One worker, held by a low task while `setup` queues work; then let go.
fn with_held_worker(
    owned: &OwnedPool<TwoLevels>,
    setup: impl FnOnce(&TwoLevels),
) -> JoinHandle<()> {
    let (gate, held) = hold_worker(&owned.pool.low);
    setup(&owned.pool);
    gate.open();
    held
}

#[test]
fn a_moved_task_runs_once_from_its_new_channel_before_the_backlog() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let order = Order::default();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    let mut target = None;
    let held = with_held_worker(&owned, |pool| {
        handles = backlog(pool, &order, 20);
        let (order, runs) = (order.clone(), runs.clone());
        let asset = pool.low.exec(run(move || {
            runs.fetch_add(1, Ordering::SeqCst);
            order.push("asset");
        }));
        asset.move_to(&pool.high).expect("queued: moved");
        target = Some(asset);
    });
    block_on(held).unwrap();
    block_on(target.unwrap()).unwrap();
    join_all(handles);
    block_on(owned.close());
    let order = order.take();
    assert_eq!(order[0], "asset", "the moved task ran first: {order:?}");
    assert_eq!(order.len(), 21);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "it ran once");
}

#[test]
fn moves_say_why_they_did_nothing() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let other = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;

    // Running: it holds the worker.
    let (gate, held) = hold_worker(&pool.low);
    assert_eq!(held.move_to(&pool.high), Err(MoveError::Running));

    // Of another pool, or a channel of none: refused before anything else.
    let queued = pool.low.exec(run(|| 7));
    assert_eq!(queued.move_to(&other.pool.high), Err(MoveError::OtherPool));
    let unattached = VecDequeChannel::new();
    assert_eq!(queued.move_to(&unattached), Err(MoveError::NotAttached));

    // Aborted while queued: the abort wins.
    let aborted = pool.low.exec(run(|| ()));
    aborted.abort();
    assert_eq!(aborted.move_to(&pool.high), Err(MoveError::Aborted));

    // Parked: waiting for a wake-up that only this test gives.
    let (tx, rx) = futures::channel::oneshot::channel::<u8>();
    let parked = pool.high.exec(async move { rx.await.unwrap() });
    gate.open();
    block_on(held).unwrap();
    assert_eq!(block_on(queued).unwrap(), 7, "refused moves left it be");
    let err = block_on(aborted).unwrap_err();
    assert_eq!(err.cancel_reason(), Some(CancelReason::Aborted));
    // The parked task polled once (the pool is idle once the low task ran
    // and the high one parked): wait for that by a task queued behind it.
    block_on(pool.high.exec(run(|| ()))).unwrap();
    assert_eq!(parked.move_to(&pool.low), Err(MoveError::Parked));
    tx.send(3).unwrap();
    let abort = parked.abort_handle();
    assert_eq!(block_on(parked).unwrap(), 3);

    // Finished: nothing to move, through either handle.
    assert_eq!(abort.move_to(&pool.low), Err(MoveError::Finished));
    let done = pool.low.exec(run(|| ()));
    while !done.is_finished() {
        std::thread::yield_now();
    }
    assert_eq!(done.move_to(&pool.high), Err(MoveError::Finished));
    assert!(MoveError::Parked.to_string().contains("parked"));
    block_on(done).unwrap();
    block_on(owned.close());
    block_on(other.close());
}

#[test]
fn a_task_moved_back_and_forth_runs_once() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut task = None;
    let held = with_held_worker(&owned, |pool| {
        let runs = runs.clone();
        let handle = pool
            .low
            .exec(run(move || runs.fetch_add(1, Ordering::SeqCst)));
        let abort = handle.abort_handle();
        for _ in 0..5 {
            handle.move_to(&pool.high).unwrap();
            abort.move_to(&pool.low).unwrap();
        }
        task = Some(handle);
    });
    block_on(held).unwrap();
    assert_eq!(block_on(task.unwrap()).unwrap(), 0);
    block_on(owned.close());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// An abort after a move reaches the moved token: the task is dropped
/// unpolled, its future's drop runs once, and close does not wait for it.
#[test]
fn a_moved_task_can_still_be_aborted() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let drops = DropCounter::new();
    let mut task = None;
    let held = with_held_worker(&owned, |pool| {
        let token = drops.token();
        let handle = pool.low.exec(async move {
            let _token = token;
            unreachable!("aborted before it started")
        });
        handle.move_to(&pool.high).unwrap();
        handle.abort();
        task = Some(handle);
    });
    block_on(held).unwrap();
    let err = block_on(task.unwrap()).unwrap_err();
    assert_eq!(err.cancel_reason(), Some(CancelReason::Aborted));
    assert_eq!(drops.drops(), 1);
    block_on(owned.close());
}

/// A moved future that parks and is woken keeps running in its new line:
/// its later tokens are the line's, and the old entry stays stale.
#[test]
fn a_moved_future_parks_and_wakes_in_its_new_line() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let mut task = None;
    let polls = Arc::new(AtomicUsize::new(0));
    let held = with_held_worker(&owned, |pool| {
        let polls = polls.clone();
        let handle = pool.low.exec(async move {
            polls.fetch_add(1, Ordering::SeqCst);
            let v = rx.await.unwrap();
            smartpool::yield_now().await;
            polls.fetch_add(1, Ordering::SeqCst);
            v + 1
        });
        handle.move_to(&pool.high).unwrap();
        task = Some(handle);
    });
    block_on(held).unwrap();
    // Let it park, then wake it.
    block_on(owned.pool.low.exec(run(|| ()))).unwrap();
    tx.send(41).unwrap();
    assert_eq!(block_on(task.unwrap()).unwrap(), 42);
    assert_eq!(polls.load(Ordering::SeqCst), 2);
    block_on(owned.close());
}

/// Close accounting follows the task: moved out of a dropping channel into
/// a `complete_on_close` one, close waits for it and it runs; moved the
/// other way, close drops it, and the stale entry left in the counted
/// channel does not keep close waiting.
#[test]
fn close_follows_the_moved_task() {
    // low drops at close, high completes.
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let (gate, held) = hold_worker(&owned.pool.low);
    let flag = ran.clone();
    let up = owned
        .pool
        .low
        .exec(run(move || flag.fetch_add(1, Ordering::SeqCst)));
    up.move_to(&owned.pool.high).unwrap();
    let down = owned.pool.high.exec(run(|| ()));
    down.move_to(&owned.pool.low).unwrap();
    // Close begins as `close` is called, while the worker is still held.
    let closing = owned.close();
    gate.open();
    block_on(closing);
    // (The holding task ran on a dropping channel, but had started.)
    block_on(held).unwrap();
    assert_eq!(
        block_on(up).unwrap(),
        0,
        "moved into the counted channel: run"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let err = block_on(down).unwrap_err();
    assert_eq!(err.cancel_reason(), Some(CancelReason::PoolClosed));
}

/// Many tasks, moved at random by another thread while two workers run
/// them: each runs exactly once, and every future is dropped once.
#[test]
fn moves_racing_the_workers_lose_nothing() {
    let owned = OwnedPool::new(TwoLevels::with(
        2,
        ScheduleAlgorithm::HighestFirst,
        (true, true),
    ))
    .unwrap();
    let pool = owned.pool.clone();
    let drops = DropCounter::new();
    let runs = Arc::new(AtomicUsize::new(0));
    const N: usize = 4000;
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (runs, token) = (runs.clone(), drops.token());
            let channel = if i % 2 == 0 { &pool.low } else { &pool.high };
            channel.exec(async move {
                let _token = token;
                if i % 3 == 0 {
                    smartpool::yield_now().await;
                }
                runs.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let mut moved = 0;
    for round in 0..3 {
        for (i, handle) in handles.iter().enumerate() {
            let to = if (i + round) % 2 == 0 {
                &pool.high
            } else {
                &pool.low
            };
            match handle.move_to(to) {
                Ok(()) => moved += 1,
                Err(
                    MoveError::Running
                    | MoveError::Finished
                    | MoveError::Parked
                    | MoveError::Started,
                ) => {}
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
    }
    join_all(handles);
    block_on(owned.close());
    assert_eq!(
        runs.load(Ordering::SeqCst),
        N,
        "each ran once ({moved} moves)"
    );
    assert_eq!(drops.drops(), N);
}

/// One worker held while 20 low tasks queue, then a low child, then a
/// high waiter that awaits the child (through `without_inheritance` if
/// `inherit` is false): the order in which all 22 ran.
fn high_waits_on_queued_low_child(inherit: bool) -> Vec<&'static str> {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let order = Order::default();
    let mut waiter = None;
    let mut queued = Vec::new();
    let held = with_held_worker(&owned, |pool| {
        queued = backlog(pool, &order, 20);
        let o = order.clone();
        let child = pool.low.exec(run(move || o.push("child")));
        let child = if inherit {
            child
        } else {
            child.without_inheritance()
        };
        let o = order.clone();
        waiter = Some(pool.high.exec(async move {
            child.await.unwrap();
            o.push("waiter");
        }));
    });
    block_on(held).unwrap();
    block_on(waiter.unwrap()).unwrap();
    join_all(queued);
    block_on(owned.close());
    let order = order.take();
    assert_eq!(order.len(), 22, "{order:?}");
    order
}

/// Priority inheritance: a high task awaits a low task still queued behind
/// a backlog; the low task moves to the high channel and runs before the
/// backlog, once.
#[test]
fn a_high_task_awaiting_a_queued_low_task_boosts_it() {
    let order = high_waits_on_queued_low_child(true);
    assert_eq!(&order[..2], ["child", "waiter"], "{order:?}");
}

/// A handle awaited `without_inheritance` leaves its task where it is:
/// the child runs after the backlog queued before it, and its waiter
/// after it (a server's connection task awaiting a batch handler).
#[test]
fn a_wait_without_inheritance_does_not_boost() {
    let order = high_waits_on_queued_low_child(false);
    assert_eq!(&order[20..], ["child", "waiter"], "{order:?}");
}

/// A wait at the same or a lower level boosts nothing: the awaited task
/// keeps its place.
#[test]
fn a_low_waiter_does_not_boost() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let order = Order::default();
    let mut waiter = None;
    let mut urgent = None;
    let held = with_held_worker(&owned, |pool| {
        let o = order.clone();
        let child = pool.high.exec(run(move || o.push("high child")));
        let o = order.clone();
        // Queued first on the low channel, but the worker takes the high
        // work first; the wait on the high child boosts nothing.
        waiter = Some(pool.low.exec(async move {
            child.await.unwrap();
            o.push("low waiter");
        }));
        let o = order.clone();
        urgent = Some(pool.high.exec(run(move || o.push("high"))));
    });
    block_on(held).unwrap();
    block_on(waiter.unwrap()).unwrap();
    block_on(urgent.unwrap()).unwrap();
    block_on(owned.close());
    assert_eq!(order.take(), ["high child", "high", "low waiter"]);
}

/// Inheritance cycles end: A (high) awaits B (low, queued), and B awaits
/// C (low, queued, spawned by A): each boost raises a task once.
#[test]
fn inheritance_through_a_chain_of_waits_ends() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let order = Order::default();
    let mut top = None;
    let mut queued = Vec::new();
    let held = with_held_worker(&owned, |pool| {
        queued = backlog(pool, &order, 10);
        let o = order.clone();
        let c = pool.low.exec(run(move || o.push("c")));
        let o = order.clone();
        let b = pool.low.exec(async move {
            c.await.unwrap();
            o.push("b");
        });
        let o = order.clone();
        top = Some(pool.high.exec(async move {
            b.await.unwrap();
            o.push("a");
        }));
    });
    block_on(held).unwrap();
    block_on(top.unwrap()).unwrap();
    join_all(queued);
    block_on(owned.close());
    let order = order.take();
    assert_eq!(&order[..3], ["c", "b", "a"], "{order:?}");
}

/// A scope opened by a high task runs its own not-yet-started tasks first
/// (the work-first claim): a low scoped task does not wait behind the low
/// backlog either.
#[test]
fn a_high_scope_does_not_wait_behind_the_low_backlog() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let order = Order::default();
    let (gate, held) = hold_worker(&pool.low);
    let queued = backlog(&pool, &order, 10);
    let (o, p) = (order.clone(), pool.clone());
    let waiter = pool.high.exec(run(move || {
        smartpool::scope(|s| {
            s.exec(&p.low, async {
                o.push("scoped");
            });
        });
        o.push("waiter");
    }));
    gate.open();
    block_on(held).unwrap();
    block_on(waiter).unwrap();
    join_all(queued);
    drop(pool);
    block_on(owned.close());
    let order = order.take();
    assert_eq!(&order[..2], ["scoped", "waiter"], "{order:?}");
}

/// Only a task that has not started moves: one that yields in a loop is
/// running or queued again, and refuses either way; so does a blocking
/// task. Neither moves.
#[test]
fn started_and_blocking_tasks_do_not_move() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (polled_tx, polled_rx) = std::sync::mpsc::channel();
    let flag = stop.clone();
    let yielder = pool.high.exec(async move {
        polled_tx.send(()).unwrap();
        while !flag.load(Ordering::SeqCst) {
            smartpool::yield_now().await;
        }
    });
    polled_rx.recv().unwrap();
    for _ in 0..1000 {
        match yielder.move_to(&pool.low) {
            Err(MoveError::Started | MoveError::Running) => {}
            other => panic!("a started task: {other:?}"),
        }
    }
    stop.store(true, Ordering::SeqCst);
    block_on(yielder).unwrap();

    let (gate, held) = hold_worker(&pool.low);
    let open = gate.clone();
    let blocking = pool.spawn_blocking(move || gate.wait());
    match blocking.move_to(&pool.high) {
        Err(MoveError::Started | MoveError::Running) => {}
        other => panic!("a blocking task: {other:?}"),
    }
    open.open();
    block_on(blocking).unwrap();
    block_on(held).unwrap();
    drop(pool);
    block_on(owned.close());
}

/// A blocking closure that waits for a queued low task boosts nothing: it
/// runs on no channel's level.
#[test]
fn a_blocking_waiter_does_not_boost() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let order = Order::default();
    let (gate, held) = hold_worker(&pool.low);
    let o = order.clone();
    let first = pool.low.exec(run(move || o.push("queued first")));
    let o = order.clone();
    let child = pool.low.exec(run(move || o.push("child")));
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel();
    let waiter = pool.spawn_blocking(move || {
        let mut child = child;
        // Polled once (a boost would happen here) before the worker goes.
        assert!(block_on(async { futures::poll!(&mut child) }).is_pending());
        waiting_tx.send(()).unwrap();
        block_on(child).unwrap();
    });
    waiting_rx.recv().unwrap();
    gate.open();
    block_on(held).unwrap();
    block_on(waiter).unwrap();
    block_on(first).unwrap();
    assert_eq!(order.take(), ["queued first", "child"]);
    drop(pool);
    block_on(owned.close());
}

/// Inheritance never moves a task out of a `complete_on_close` channel
/// into one that is not: close would drop what it promised to complete.
#[test]
fn inheritance_keeps_close_promises() {
    // high drops at close, low completes.
    let owned = OwnedPool::new(TwoLevels::lifo(1, (false, true))).unwrap();
    let order = Order::default();
    let (gate, held) = hold_worker(&owned.pool.low);
    let o = order.clone();
    let first = owned.pool.low.exec(run(move || o.push("queued first")));
    let o = order.clone();
    let child = owned.pool.low.exec(run(move || o.push("child")));
    let o = order.clone();
    let waiter = owned.pool.high.exec(async move {
        child.await.unwrap();
        o.push("waiter");
    });
    gate.open();
    block_on(held).unwrap();
    block_on(waiter).unwrap();
    block_on(first).unwrap();
    block_on(owned.close());
    assert_eq!(order.take(), ["queued first", "child", "waiter"]);
}

/// A blocking closure that drives the pool (`Pool::block_on`: a guest
/// seat) and waits there for a queued low task boosts nothing either, and
/// its thread reports no channel.
#[test]
fn a_blocking_task_driving_the_pool_does_not_boost() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let order = Order::default();
    let (gate, held) = hold_worker(&pool.low);
    let o = order.clone();
    let first = pool.low.exec(run(move || o.push("queued first")));
    let o = order.clone();
    let second = pool.low.exec(run(move || o.push("queued second")));
    let o = order.clone();
    let child = pool.low.exec(run(move || o.push("child")));
    let p = pool.clone();
    let waiter = pool.spawn_blocking(move || {
        assert_eq!(p.current_key(), None, "a blocking task has no channel");
        assert!(!smartpool::should_yield());
        // Drives the pool as a guest: runs the queued low tasks in order,
        // polling the wait on `child` (queued last) between them.
        p.block_on(async move {
            let (c, f, s) = futures::join!(child, first, second);
            c.unwrap();
            f.unwrap();
            s.unwrap();
        });
    });
    block_on(waiter).unwrap();
    gate.open();
    block_on(held).unwrap();
    drop(pool);
    block_on(owned.close());
    assert_eq!(order.take(), ["queued first", "queued second", "child"]);
}

/// A zero-thread pool driven by the caller: the entry a move leaves behind
/// is skipped, and not counted as a task run.
#[test]
fn a_driven_pool_skips_and_does_not_count_stale_entries() {
    let owned = OwnedPool::new(TwoLevels::new(0)).unwrap();
    let order = Order::default();
    let o = order.clone();
    let first = owned.pool.low.exec(run(move || o.push("low")));
    let o = order.clone();
    let moved = owned.pool.low.exec(run(move || o.push("moved")));
    moved.move_to(&owned.pool.high).unwrap();
    assert_eq!(owned.pool.run_until_stalled(), 2, "two tasks ran");
    assert_eq!(order.take(), ["moved", "low"]);
    block_on(first).unwrap();
    block_on(moved).unwrap();
    block_on(owned.close());
}
