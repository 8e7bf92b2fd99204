//! Tests ported from tokio's `tokio/tests/task_join_set.rs` and
//! `tokio/tests/task_abort.rs` (tokio-rs/tokio at commit
//! ea91b33ca57ff0581b38e735cc108f831bccbdaa), rewritten against
//! smartpool's API: one level, one `VecDequeChannel`, a woken task going
//! back to it (`common::Flat`), on 1 and 4 workers as tokio's current- and
//! multi-thread flavours.
//!
//! How smartpool differs, throughout:
//! * `set.spawn(fut)` is `set.exec(&pool.work, fut)`: a task goes to a
//!   channel, never to an ambient runtime.
//! * tokio's paused clock (`start_paused`, `sleep`) orders the tasks of
//!   several tests; here they wait on channels that the test completes in
//!   the order it needs, which asserts the same outcome without a clock.
//! * A future whose `Drop` panics when aborted: tokio's handle reports
//!   that panic; smartpool's reports the abort (the panic is caught and
//!   logged on the pool). See `JoinHandle::abort`.
//!
//! Not ported, with the reason:
//! * `join_set_coop`: tokio's cooperative budget; smartpool has none.
//! * `try_join_next_with_id`, and the `spawn_local`/`LocalSet` tests: no
//!   task ids, no local tasks.
//! * `extend`: no `FromIterator`/`Extend` for `JoinSet` (a `JoinSet` needs
//!   a channel for each task).
//! * `test_abort_without_panic_3662`, `remote_abort_local_set_3929`: about
//!   tokio's current-thread deferred cleanup and `LocalSet`'s thread
//!   affinity; smartpool's tasks are `Send` and run on any worker.
//! * `test_join_error_display`, `test_join_error_debug`: the text of a
//!   panic's `JoinError` is checked in `tests/panics.rs`.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::{close_within, Flat, Gate, FAILSAFE};
use futures::channel::oneshot;
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool::JoinSet;

const THREADS: [usize; 2] = [1, 4];

fn new_pool(threads: usize) -> OwnedPool<Flat> {
    OwnedPool::new(Flat::new(threads)).unwrap()
}

fn close(owned: OwnedPool<Flat>) {
    assert!(close_within(owned, FAILSAFE), "close did not finish");
}

/// `test_with_sleep`: `len` counts submitted tasks, `detach_all` empties
/// the set, and every output comes back once, twice over. (Completion
/// order is checked in `join_next_returns_in_completion_order`.)
#[test]
fn with_sleep() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set = JoinSet::new();
        for i in 0..10 {
            set.exec(&owned.pool.work, async move { i });
            assert_eq!(set.len(), 1 + i);
        }
        set.detach_all();
        assert_eq!(set.len(), 0);
        assert!(block_on(set.join_next()).is_none());
        for _round in 0..2 {
            for i in 0..10 {
                set.exec(&owned.pool.work, async move {
                    smartpool::yield_now().await;
                    i
                });
                assert_eq!(set.len(), 1 + i);
            }
            let mut seen = [false; 10];
            while let Some(i) = block_on(set.join_next()).transpose().unwrap() {
                seen[i] = true;
            }
            assert!(seen.iter().all(|&s| s));
            assert!(block_on(set.join_next()).is_none());
        }
        close(owned);
    }
}

/// `join_next` returns outputs in the order the tasks finish: each task
/// waits for its own signal, which the test sends in reverse order.
#[test]
fn join_next_returns_in_completion_order() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set = JoinSet::new();
        let senders: Vec<_> = (0..5)
            .map(|i| {
                let (tx, rx) = oneshot::channel::<()>();
                set.exec(&owned.pool.work, async move {
                    rx.await.unwrap();
                    i
                });
                tx
            })
            .collect();
        for (i, tx) in senders.into_iter().enumerate().rev() {
            tx.send(()).unwrap();
            assert_eq!(block_on(set.join_next()).unwrap().unwrap(), i);
        }
        close(owned);
    }
}

/// `test_abort_on_drop`: dropping the set aborts its tasks, parked ones
/// included: each one's future is dropped (its sender with it).
#[test]
fn abort_on_drop() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set = JoinSet::new();
        let mut receivers = Vec::new();
        for _ in 0..16 {
            let (send, recv) = oneshot::channel::<()>();
            receivers.push(recv);
            set.exec(&owned.pool.work, async move {
                std::future::pending::<()>().await;
                drop(send);
            });
        }
        drop(set);
        for recv in receivers {
            assert!(block_on(recv).is_err(), "the future was dropped");
        }
        close(owned);
    }
}

/// `alternating`.
#[test]
fn alternating() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set = JoinSet::new();
        assert_eq!(set.len(), 0);
        set.exec(&owned.pool.work, async {});
        assert_eq!(set.len(), 1);
        set.exec(&owned.pool.work, async {});
        assert_eq!(set.len(), 2);
        for _ in 0..16 {
            block_on(set.join_next()).unwrap().unwrap();
            assert_eq!(set.len(), 1);
            set.exec(&owned.pool.work, async {});
            assert_eq!(set.len(), 2);
        }
        close(owned);
    }
}

/// `abort_tasks`: the odd tasks are aborted through the handle `exec`
/// returned, before they could finish (they wait for a signal sent after
/// the aborts).
#[test]
fn abort_tasks() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set = JoinSet::new();
        let mut senders = Vec::new();
        for i in 0..16 {
            let (tx, rx) = oneshot::channel::<()>();
            senders.push(tx);
            let abort = set.exec(&owned.pool.work, async move {
                let _ = rx.await;
                i
            });
            if i % 2 != 0 {
                abort.abort();
            }
        }
        for tx in senders {
            let _ = tx.send(());
        }
        let (mut cancelled, mut completed) = (0, 0);
        while let Some(outcome) = block_on(set.join_next()) {
            match outcome {
                Ok(i) => {
                    completed += 1;
                    assert_eq!(i % 2, 0);
                }
                Err(e) => {
                    assert!(e.is_cancelled());
                    cancelled += 1;
                }
            }
        }
        assert_eq!((cancelled, completed), (8, 8));
        close(owned);
    }
}

/// `runtime_gone`: the pool closes (dropping what it holds) while the set
/// still has a task of it; `join_next` says it was cancelled.
#[test]
fn runtime_gone() {
    let mut set = JoinSet::new();
    {
        let owned = OwnedPool::new(Flat::with(1, true, false)).unwrap();
        let (gate, held) = common::hold_worker(&owned.pool.work);
        set.exec(&owned.pool.work, async { 1 });
        let pool = owned.pool.clone();
        let closing = std::thread::spawn(move || drop(owned));
        while !pool.is_closing() {
            std::thread::yield_now();
        }
        gate.open();
        closing.join().unwrap();
        block_on(held).unwrap();
    }
    assert!(block_on(set.join_next())
        .unwrap()
        .unwrap_err()
        .is_cancelled());
}

/// `join_all`.
#[test]
fn join_all() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set: JoinSet<i32> = JoinSet::new();
        for _ in 0..5 {
            set.exec(&owned.pool.work, async { 1 });
        }
        let outputs = block_on(set.join_all());
        assert_eq!(outputs, vec![1; 5]);
        close(owned);
    }
}

/// `task_panics`: `join_all` resumes the first task's panic and aborts the
/// rest (the other task never sends).
#[test]
fn task_panics() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set: JoinSet<()> = JoinSet::new();
        let (tx, mut rx) = oneshot::channel::<()>();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        set.exec(&owned.pool.work, async move {
            let _ = go_rx.await;
            let _ = tx.send(());
        });
        set.exec(&owned.pool.work, async { panic!("boom") });
        assert_eq!(set.len(), 2);
        let panic =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| block_on(set.join_all())))
                .unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"boom"));
        let _ = go_tx.send(());
        assert!(matches!(rx.try_recv(), Err(_) | Ok(None)));
        close(owned);
    }
}

/// `abort_all`: five tasks parked for ever, five finished; after
/// `abort_all` all ten come back, the parked ones cancelled.
#[test]
fn abort_all() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let mut set: JoinSet<()> = JoinSet::new();
        for _ in 0..5 {
            set.exec(&owned.pool.work, std::future::pending());
        }
        let finished = common::CountDown::new(5);
        for _ in 0..5 {
            let f = finished.clone();
            set.exec(&owned.pool.work, async move { f.tick() });
        }
        assert!(finished.wait_for(FAILSAFE));
        set.abort_all();
        assert_eq!(set.len(), 10);
        let (mut count, mut cancelled) = (0, 0);
        while let Some(outcome) = block_on(set.join_next()) {
            if let Err(error) = outcome {
                assert!(error.is_cancelled());
                cancelled += 1;
            }
            count += 1;
        }
        assert_eq!(count, 10);
        assert!(cancelled >= 5, "the parked five were aborted");
        assert_eq!(set.len(), 0);
        close(owned);
    }
}

/// `try_join_next`: nothing before the tasks can finish; all of them after.
#[test]
fn try_join_next() {
    const TASKS: usize = 1000;
    for threads in THREADS {
        let owned = new_pool(threads);
        let release = Gate::new();
        let done = common::CountDown::new(TASKS);
        let mut set = JoinSet::new();
        for _ in 0..TASKS {
            let (r, d) = (release.clone(), done.clone());
            set.exec(
                &owned.pool.work,
                run(move || {
                    r.wait();
                    d.tick();
                }),
            );
        }
        assert!(set.try_join_next().is_none());
        release.open();
        assert!(done.wait_for(FAILSAFE));
        let mut count = 0;
        // A task counts down just before it completes: wait for the rest.
        while count < TASKS {
            match set.try_join_next() {
                Some(outcome) => {
                    outcome.unwrap();
                    count += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        assert!(set.try_join_next().is_none());
        close(owned);
    }
}

/// task_abort.rs `test_abort_without_panic_3157`: aborting a parked task
/// (here parked on a channel, there on a sleep) and awaiting its handle
/// does not panic; the handle is cancelled.
#[test]
fn abort_without_panic_3157() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let (started_tx, started_rx) = oneshot::channel::<()>();
        let (_never_tx, never_rx) = oneshot::channel::<()>();
        let handle = owned.pool.work.exec(async move {
            started_tx.send(()).unwrap();
            let _ = never_rx.await;
        });
        block_on(started_rx).unwrap();
        handle.abort();
        assert!(block_on(handle).unwrap_err().is_cancelled());
        close(owned);
    }
}

/// task_abort.rs `test_abort_wakes_task_3964`: a parked task whose handle
/// was dropped right after the abort still has its future dropped.
#[test]
fn abort_wakes_task_3964() {
    for threads in THREADS {
        let owned = new_pool(threads);
        let notify_dropped = Arc::new(());
        let weak = Arc::downgrade(&notify_dropped);
        let (started_tx, started_rx) = oneshot::channel::<()>();
        let handle = owned.pool.work.exec(async move {
            let _notify_dropped = notify_dropped;
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
        block_on(started_rx).unwrap();
        handle.abort();
        drop(handle);
        close(owned);
        assert!(weak.upgrade().is_none(), "the future was dropped");
    }
}

/// task_abort.rs `test_abort_task_that_panics_on_drop_contained` and
/// `..._returned`: the panic of the aborted future's `Drop` stays on the
/// pool; the handle resolves (cancelled here, a panic in tokio: see the
/// module doc), and the pool goes on.
#[test]
fn abort_task_that_panics_on_drop() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("Well what did you expect would happen...");
        }
    }
    for threads in THREADS {
        let owned = new_pool(threads);
        let (started_tx, started_rx) = oneshot::channel::<()>();
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let handle = owned.pool.work.exec(async move {
            let _guard = PanicOnDrop;
            let _mark = Mark(d);
            started_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
        block_on(started_rx).unwrap();
        handle.abort();
        assert!(block_on(handle).unwrap_err().is_cancelled());
        assert!(
            dropped.load(Ordering::SeqCst),
            "the rest of the future dropped"
        );
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        block_on(
            owned
                .pool
                .work
                .exec(run(move || r.fetch_add(1, Ordering::SeqCst))),
        )
        .unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1, "the pool goes on");
        close(owned);
    }
}

/// Sets its flag when dropped.
struct Mark(Arc<AtomicBool>);

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
