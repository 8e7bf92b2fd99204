//! Tests ported from tokio (tokio-rs/tokio at commit
//! ea91b33ca57ff0581b38e735cc108f831bccbdaa) that apply to smartpool's
//! blocking sections (`block_in_place`, `spawn_blocking`) and to its
//! caller-driven pools (`block_on`, `run_until_stalled`, zero worker
//! threads), plus marl's documented single-threaded mode (google/marl at
//! commit b8406ab0a82524170ead6dd6c371b579bbc28b3e).
//!
//! Sources: `tokio/tests/task_blocking.rs`, `tokio/tests/rt_threaded.rs`,
//! `tokio/tests/rt_common.rs`, `tokio/tests/rt_basic.rs`,
//! `tokio/tests/rt_handle_block_on.rs`; marl's `include/marl/scheduler.h`
//! (a scheduler is "initially constructed in single-threaded mode": with no
//! worker thread, tasks run on a bound thread when it waits, and `unbind`
//! flushes the tasks still queued) and `src/scheduler_test.cpp`, whose
//! suite is instantiated with `SchedulerParams{0}` ("Single-threaded mode
//! test") in `src/marl_test.cpp`.
//!
//! Each test was rewritten against smartpool's API; none is copied. What
//! maps to what:
//! * tokio's current-thread runtime is a zero-thread pool here (tasks run
//!   only on a thread that drives it); its multi-thread runtime is a pool
//!   of 1 or 2 worker threads (the machine this runs on has 2 cores).
//! * `Runtime::block_on` is `OwnedPool::block_on` / `Pool::block_on`;
//!   `tokio::spawn` inside a task is `Pool::<B>::current()` then
//!   `pool.work.exec(..)`; elsewhere the test captures the pool.
//! * Where tokio sleeps to let something happen "meanwhile", these tests
//!   use a latch instead (a channel, a barrier, a gate).
//!
//! Deliberate differences, each noted beside its test:
//! * `block_in_place` never panics: on a zero-thread pool (tokio's
//!   current-thread runtime), in a driver's seat, nested, off any pool, the
//!   closure just runs.
//! * `block_on` nests: inside a task, or inside another pool's `block_on`,
//!   it helps instead of panicking ("Cannot start a runtime from within a
//!   runtime").
//! * `BlockingConfig::max_threads: 0` is taken as 1 (tokio panics).
//! * A detached task parked with no waker left is freed at once (tokio
//!   keeps it until shutdown): see `acquire_mutex_in_drop`.
//! * `yield_now` wakes at once (no deferral to the driver's park), so a
//!   test that ticks the scheduler with `block_on(yield_now())` ticks it
//!   with `run_until_stalled` here.
//!
//! Not ported, with the reason: `coop_and_block_in_place`,
//! `coop_disabled_in_block_in_place` (no cooperative budget; the
//! `in_block_on` variant is kept, since it also checks that a foreign
//! executor may run inside a section), `blocking_when_paused` and the
//! other paused-time tests (no paused clock), the fs, socket and timer
//! tests of `rt_handle_block_on.rs` (no IO driver), `sleep_from_blocking`
//! (the timer is covered by `tests/time.rs`), `drop_tasks_in_context`
//! (smartpool makes no promise about `Pool::current()` inside a dropped
//! future's `Drop`), and
//! `issue_8056_regression_test` (`tests/blocking.rs` already covers the
//! blocking set's queueing; its race is tokio's own atomics).

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::{DropCounter, Flat, Gate, FAILSAFE};
use futures::channel::oneshot;
use futures::future::{Either, FutureExt};
use futures::StreamExt;
use smartpool::prelude::*;
use smartpool::{block_in_place, yield_now};

/// Blocks on `future` with `futures`' executor (no pool context); fails
/// the test instead of hanging it if it is not done within the fail-safe.
fn wait<F: Future>(future: F) -> F::Output {
    let failsafe = Box::pin(TimeScheduler::new().after(FAILSAFE));
    match futures::executor::block_on(futures::future::select(Box::pin(future), failsafe)) {
        Either::Left((output, _)) => output,
        Either::Right(((), _)) => panic!("not done within {FAILSAFE:?}"),
    }
}

/// Runs `f` on a new thread; fails the test if it does not return within
/// the fail-safe (so a hang in a driven pool fails instead of hanging).
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(FAILSAFE) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("not done within {FAILSAFE:?}"),
    }
}

fn is_blocking_thread() -> bool {
    thread::current().name() == Some("smartpool-block")
}

// ==== tokio/tests/task_blocking.rs ====

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`, `basic_blocking`.
///
/// A task awaits a `spawn_blocking` closure, many times. tokio's closure
/// sleeps 5 ms; here it blocks until a task queued behind its parent, on
/// the pool's only worker, sends it a value: which shows that the closure
/// runs on another thread and does not hold the worker.
#[test]
fn basic_blocking() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    for i in 0..50u32 {
        let (tx, rx) = mpsc::channel::<u32>();
        let parent = pool.work.exec(async move {
            let pool = Pool::<Flat>::current().unwrap();
            let worker = thread::current().id();
            let blocking = pool.spawn_blocking(move || {
                assert!(is_blocking_thread());
                (thread::current().id(), rx.recv().unwrap())
            });
            let _sender = pool.work.exec(run(move || tx.send(i).unwrap()));
            let (ran_on, value) = blocking.await.unwrap();
            assert_ne!(ran_on, worker, "not on the worker");
            value
        });
        assert_eq!(wait(parent).unwrap(), i);
    }
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`, `block_in_blocking`.
///
/// `block_in_place` inside a `spawn_blocking` closure: the blocking thread
/// is no worker, so the section just runs there.
#[test]
fn block_in_blocking() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let pool = owned.pool.clone();
    for _ in 0..50 {
        let out = pool.work.exec(async {
            let pool = Pool::<Flat>::current().unwrap();
            pool.spawn_blocking(|| {
                let outer = thread::current().id();
                block_in_place(|| {
                    assert_eq!(thread::current().id(), outer, "ran in place");
                    assert!(is_blocking_thread());
                });
                "hello"
            })
            .await
            .unwrap()
        });
        assert_eq!(wait(out).unwrap(), "hello");
    }
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`, `block_in_block`.
///
/// Nested `block_in_place` in a task. tokio's inner section sleeps; here it
/// blocks until a task submitted after the outer section began sends a
/// value, on a one-worker pool: the stand-in serving the worker's place
/// runs it, and the inner section (which just runs) does not disturb that.
#[test]
fn block_in_block() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    for i in 0..50u32 {
        let out = pool.work.exec(run(move || {
            block_in_place(|| {
                let pool = Pool::<Flat>::current().unwrap();
                let (tx, rx) = mpsc::channel::<u32>();
                let _sender = pool.work.exec(run(move || tx.send(i).unwrap()));
                let got = block_in_place(|| rx.recv().unwrap());
                (got, "hello")
            })
        }));
        assert_eq!(wait(out).unwrap(), (i, "hello"));
    }
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`,
/// `no_block_in_current_thread_scheduler` and
/// `no_block_in_current_thread_block_on`; also `tokio/tests/rt_threaded.rs`,
/// `test_block_in_place1` and `test_block_in_place3`.
///
/// Deliberate difference: tokio panics when `block_in_place` is called on
/// a current-thread runtime (in a task, or in `block_on`'s future). On a
/// zero-thread pool, smartpool's `block_in_place` just runs the closure on
/// the driving thread, in a task and in `block_on`'s own future alike.
#[test]
fn block_in_place_on_a_zero_thread_pool_just_runs() {
    let owned = OwnedPool::new(Flat::new(0)).unwrap();
    let me = thread::current().id();
    let in_task = owned
        .pool
        .work
        .exec(run(move || block_in_place(|| thread::current().id() == me)));
    assert!(owned.block_on(in_task).unwrap(), "in a task, on the driver");
    let in_future = owned.block_on(async move { block_in_place(|| thread::current().id() == me) });
    assert!(in_future, "in block_on's future");
    assert_eq!(owned.run_until_stalled(), 0, "nothing left behind");
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`,
/// `yes_block_in_threaded_block_on`; also `tokio/tests/rt_threaded.rs`,
/// `test_block_in_place2` and `test_block_in_place4`.
///
/// `block_in_place` in the future of a threaded pool's `block_on`, from
/// outside: the caller drives from a guest seat, so the section just runs
/// on it, and the pool's workers go on meanwhile (a task they run ends the
/// section's wait).
#[test]
fn yes_block_in_threaded_block_on() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let pool = owned.pool.clone();
    let me = thread::current().id();
    let p = pool.clone();
    let ran_here = pool.block_on(async move {
        block_in_place(|| {
            let (tx, rx) = mpsc::channel();
            let _sender = p.work.exec(run(move || tx.send(()).unwrap()));
            rx.recv().unwrap();
            thread::current().id() == me
        })
    });
    assert!(ran_here);
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`,
/// `can_enter_current_thread_rt_from_within_block_in_place`.
///
/// Inside a section, a fresh zero-thread pool is created and driven with
/// `block_on`; from the outer pool's `block_on`, as tokio's, and from a
/// task on a worker.
#[test]
fn can_drive_a_zero_thread_pool_from_within_block_in_place() {
    let outer = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = outer.pool.clone();
    fn inner_pool_round() -> u32 {
        let inner = OwnedPool::new(Flat::new(0)).unwrap();
        let h = inner.pool.work.exec(async { 20 });
        inner.block_on(async { h.await.unwrap() + 1 })
    }
    let from_block_on = pool.block_on(async { block_in_place(inner_pool_round) });
    assert_eq!(from_block_on, 21);
    let from_task = pool.work.exec(run(|| block_in_place(inner_pool_round) * 2));
    assert_eq!(wait(from_task).unwrap(), 42);
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`,
/// `useful_panic_message_when_dropping_rt_in_rt`,
/// `can_shutdown_with_zero_timeout_in_runtime` and
/// `can_shutdown_now_in_runtime`.
///
/// Deliberate difference: tokio panics when a runtime is dropped inside
/// another's `block_on`, and allows only the non-blocking shutdowns there.
/// A zero-thread pool has no threads to join: dropping it inside another
/// pool's task (or `block_on`) closes it by driving it on that thread, and
/// a zero-timeout close there abandons its queued tasks at once.
#[test]
fn close_or_drop_a_zero_thread_pool_inside_another_pool() {
    let outer = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = outer.pool.clone();
    let dropped = pool.work.exec(run(|| {
        let inner = OwnedPool::new(Flat::new(0)).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let ran = ran.clone();
            drop(inner.pool.work.exec(run(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })));
        }
        drop(inner);
        ran.load(Ordering::SeqCst)
    }));
    assert_eq!(wait(dropped).unwrap(), 3, "the drop ran the queued tasks");
    let timed_out = pool.block_on(async {
        let inner = OwnedPool::new(Flat::new(0)).unwrap();
        let queued = inner.pool.work.exec(async { 1 });
        let report = futures::executor::block_on(inner.close_timeout(Duration::ZERO));
        let cancel = futures::executor::block_on(queued)
            .unwrap_err()
            .cancel_reason();
        (report.aborted(), cancel)
    });
    assert_eq!(timed_out, (1, Some(CancelReason::CloseTimedOut)));
}

/// tokio-rs/tokio, `tokio/tests/task_blocking.rs`,
/// `coop_disabled_in_block_in_place_in_block_on`.
///
/// A foreign executor inside a section inside `block_on` drains a stream
/// of 200 ready items. (tokio's point is its budget; smartpool has none:
/// what is kept is that nothing hangs.)
#[test]
fn foreign_executor_in_block_in_place_in_block_on() {
    let got = within(|| {
        let owned = OwnedPool::new(Flat::new(1)).unwrap();
        let (tx, rx) = futures::channel::mpsc::unbounded::<u32>();
        for i in 0..200 {
            tx.unbounded_send(i).unwrap();
        }
        drop(tx);
        owned.block_on(async move {
            block_in_place(move || {
                futures::executor::block_on(rx.fold(0, |n, _| async move { n + 1 }))
            })
        })
    });
    assert_eq!(got, 200);
}

// ==== tokio/tests/rt_threaded.rs ====

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`, `blocking`.
///
/// Every worker blocks in `block_in_place` on a barrier, and 1000 tasks
/// submitted meanwhile all run: the stand-ins serve the workers' places.
/// (tokio has 4 workers; here 2.)
#[test]
fn blocking() {
    const NUM: usize = 1000;
    const WORKERS: usize = 2;
    for _ in 0..5 {
        let owned = OwnedPool::new(Flat::new(WORKERS)).unwrap();
        let pool = owned.pool.clone();
        let barrier = Arc::new(Barrier::new(WORKERS + 1));
        let blocked: Vec<_> = (0..WORKERS)
            .map(|_| {
                let barrier = barrier.clone();
                pool.work.exec(run(move || {
                    block_in_place(|| {
                        barrier.wait();
                        barrier.wait();
                    })
                }))
            })
            .collect();
        // Both workers are inside their sections.
        barrier.wait();
        let count = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        for _ in 0..NUM {
            let (count, tx) = (count.clone(), tx.clone());
            drop(pool.work.exec(async move {
                if count.fetch_add(1, Ordering::SeqCst) + 1 == NUM {
                    tx.send(()).unwrap();
                }
            }));
        }
        rx.recv_timeout(FAILSAFE)
            .expect("the tasks ran while every worker was blocked");
        barrier.wait();
        for h in blocked {
            wait(h).unwrap();
        }
        assert!(common::close_within(owned, FAILSAFE));
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`, `yield_after_block_in_place`.
///
/// On a one-worker pool, a task drives a fresh zero-thread pool inside a
/// section, then yields and completes: the worker is whole again after the
/// section. (Which thread resumes it is not fixed: the section's stand-in
/// retires without being waited for, and until it notices, it may steal
/// the yielded task like any other worker; see `pool::blocking`.)
#[test]
fn yield_after_block_in_place() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let h = pool.work.exec(async {
        block_in_place(|| {
            let inner = OwnedPool::new(Flat::new(0)).unwrap();
            inner.block_on(async {});
        });
        yield_now().await;
        Pool::<Flat>::current().is_some()
    });
    assert!(wait(h).unwrap(), "resumed as a task of the pool");
    assert!(common::close_within(owned, FAILSAFE));
}

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`,
/// `test_nested_block_in_place_with_block_on_between` (tokio#5239).
///
/// One worker, one blocking thread: a task's section drives the pool with
/// `block_on`, whose future holds another section. The section's thread is
/// not a worker then: it drives from a guest seat, where the inner section
/// just runs. Many times, as the original was a race.
#[test]
fn nested_block_in_place_with_block_on_between() {
    let owned = OwnedPool::new(Flat::with_blocking_threads(1, 1)).unwrap();
    let pool = owned.pool.clone();
    for i in 0..100u32 {
        let p = pool.clone();
        let h = pool.block_on(pool.work.exec(run(move || {
            block_in_place(|| p.block_on(async move { block_in_place(|| i) }))
        })));
        assert_eq!(h.unwrap(), i);
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`,
/// `yield_now_in_block_in_place`; also
/// `tokio/tests/rt_handle_block_on.rs`, `yield_in_block_in_place`.
///
/// A section on the only worker blocks on a yield with the pool's
/// `block_on`; from outside, the same inside `block_on`'s own future.
#[test]
fn yield_now_in_block_in_place() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let h = pool.work.exec(run(|| {
        block_in_place(|| {
            let pool = Pool::<Flat>::current().unwrap();
            pool.block_on(yield_now());
            7
        })
    }));
    assert_eq!(wait(h).unwrap(), 7);
    let p = pool.clone();
    pool.block_on(async move { block_in_place(|| p.block_on(yield_now())) });
}

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`, `hang_on_shutdown`.
///
/// Close begins while a task is blocked in a section on a channel whose
/// sender is dropped only after that: the close finishes once the section
/// returns. (tokio uses timers to order this; here close is begun first,
/// then the sender is dropped.)
#[test]
fn hang_on_shutdown() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let pool = owned.pool.clone();
    let (sync_tx, sync_rx) = mpsc::channel::<()>();
    let entered = Gate::new();
    let e = entered.clone();
    let blocked = pool.work.exec(run(move || {
        block_in_place(|| {
            e.open();
            sync_rx.recv().is_err()
        })
    }));
    assert!(entered.wait_for(FAILSAFE));
    let closing = owned.close();
    assert!(pool.is_closing());
    drop(sync_tx);
    wait(closing);
    assert!(wait(blocked).unwrap(), "the section saw the sender gone");
}

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`,
/// `wake_deferred_tasks_before_block_in_place` (tokio#7877).
///
/// tokio defers some wakes to the worker's park, and must flush them before
/// a section. smartpool's counterpart of "work only this worker knows of"
/// is its LIFO slot and local deques: a task spawned from a task goes
/// there, and must be handed to the pool before the section blocks, or
/// the section (which waits for it) would wait forever. One worker, so
/// only the stand-in can run it.
#[test]
fn local_work_is_handed_over_before_block_in_place() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    for _ in 0..50 {
        let h = pool.work.exec(run(|| {
            let pool = Pool::<Flat>::current().unwrap();
            let (tx, rx) = mpsc::channel();
            let worker = thread::current().id();
            // Into this worker's LIFO slot, then its deque.
            let tx2 = tx.clone();
            drop(
                pool.work
                    .exec(run(move || tx.send(thread::current().id()).unwrap())),
            );
            drop(
                pool.work
                    .exec(run(move || tx2.send(thread::current().id()).unwrap())),
            );
            block_in_place(|| {
                let a = rx.recv().unwrap();
                let b = rx.recv().unwrap();
                a != worker && b != worker
            })
        }));
        assert!(wait(h).unwrap(), "the stand-in ran both");
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_threaded.rs`, `max_blocking_threads`
/// and `max_blocking_threads_set_to_zero`.
///
/// One blocking thread: two `spawn_blocking` closures run one after the
/// other, never at once. Deliberate difference: tokio panics on
/// `max_blocking_threads(0)`; smartpool takes 0 as 1.
#[test]
fn max_blocking_threads() {
    for max in [1, 0] {
        let owned = OwnedPool::new(Flat::with_blocking_threads(1, max)).unwrap();
        let pool = owned.pool.clone();
        let (first_in, first_gate) = (Gate::new(), Gate::new());
        let (fi, fg) = (first_in.clone(), first_gate.clone());
        let first = pool.spawn_blocking(move || {
            fi.open();
            assert!(fg.wait_for(FAILSAFE));
            thread::current().id()
        });
        assert!(first_in.wait_for(FAILSAFE));
        let second_ran = Arc::new(AtomicBool::new(false));
        let s = second_ran.clone();
        let second = pool.spawn_blocking(move || {
            s.store(true, Ordering::SeqCst);
            thread::current().id()
        });
        assert_eq!(pool.blocking_threads(), 1, "max_threads {max}");
        assert!(
            !second_ran.load(Ordering::SeqCst),
            "queued behind the first"
        );
        first_gate.open();
        let (a, b) = (wait(first).unwrap(), wait(second).unwrap());
        assert_eq!(a, b, "the one blocking thread ran both");
    }
}

// ==== tokio/tests/rt_common.rs ====

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `block_on_sync`.
///
/// `block_on` of a future that borrows a local mutably (no `Send`, no
/// `'static`), on a zero-thread pool and on a threaded one.
#[test]
fn block_on_sync() {
    for threads in [0, 1] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let mut win = false;
        owned.block_on(async {
            win = true;
        });
        assert!(win);
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `block_on_async` (current
/// thread flavour); also `tokio/tests/rt_basic.rs`, `spawn_remote`.
///
/// A zero-thread pool's `block_on` waits for a value sent from another
/// thread; then a task awaits such a value and `block_on` awaits the task.
/// tokio's sender sleeps first; here the sender waits for a latch opened
/// once the receiver is polled, so the wake really comes from outside.
#[test]
fn block_on_async_and_spawn_remote() {
    let out = within(|| {
        let owned = OwnedPool::new(Flat::new(0)).unwrap();
        let (tx, rx) = oneshot::channel();
        let polled = Gate::new();
        let p = polled.clone();
        let sender = thread::spawn(move || {
            assert!(p.wait_for(FAILSAFE));
            tx.send("ZOMG").unwrap();
        });
        let mut rx = rx;
        let direct = owned.block_on(futures::future::poll_fn(move |cx| {
            let r = rx.poll_unpin(cx);
            polled.open();
            r
        }));
        sender.join().unwrap();

        let handle = owned.pool.work.exec(async {
            let (tx, rx) = oneshot::channel();
            thread::spawn(move || tx.send("ZOMG").unwrap());
            rx.await.unwrap()
        });
        let via_task = owned.block_on(async { handle.await.unwrap() });
        (direct.unwrap(), via_task)
    });
    assert_eq!(out, ("ZOMG", "ZOMG"));
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `spawn_many_from_block_on`
/// (current-thread flavour).
///
/// Inside a zero-thread pool's `block_on`, 200 tasks are spawned, each
/// waiting for its own value sent from another thread; `block_on` collects
/// what they pass on. Every wake comes from outside, and the tasks run on
/// the driving thread.
#[test]
fn spawn_many_from_block_on() {
    const ITER: usize = 200;
    let out = within(|| {
        let owned = OwnedPool::new(Flat::new(0)).unwrap();
        let pool = owned.pool.clone();
        let me = thread::current().id();
        owned.block_on(async move {
            let (done_tx, done_rx) = futures::channel::mpsc::unbounded();
            let txs: Vec<_> = (0..ITER)
                .map(|i| {
                    let (tx, rx) = oneshot::channel::<usize>();
                    let done_tx = done_tx.clone();
                    drop(pool.work.exec(async move {
                        let msg = rx.await.unwrap();
                        assert_eq!(msg, i);
                        assert_eq!(thread::current().id(), me, "on the driver");
                        done_tx.unbounded_send(msg).unwrap();
                    }));
                    tx
                })
                .collect();
            drop(done_tx);
            thread::spawn(move || {
                for (i, tx) in txs.into_iter().enumerate() {
                    tx.send(i).unwrap();
                }
            });
            let mut out: Vec<usize> = done_rx.collect().await;
            out.sort_unstable();
            out
        })
    });
    assert_eq!(out, (0..ITER).collect::<Vec<_>>());
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `spawn_from_blocking`.
///
/// A `spawn_blocking` closure submits a task to the pool and returns its
/// handle; `block_on` awaits both. (tokio's closure finds the runtime in
/// its context; here it captures the pool.)
#[test]
fn spawn_from_blocking() {
    for threads in [0, 1] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let p = pool.clone();
        let out = within(move || {
            owned.block_on(async move {
                let inner = p
                    .spawn_blocking({
                        let p = p.clone();
                        move || p.work.exec(async { "hello" })
                    })
                    .await
                    .unwrap();
                inner.await.unwrap()
            })
        });
        assert_eq!(out, "hello", "{threads} threads");
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `spawn_blocking_from_blocking`.
///
/// A `spawn_blocking` closure calls `spawn_blocking` and returns the
/// handle; it runs on a blocking thread too, on a zero-thread pool as well.
#[test]
fn spawn_blocking_from_blocking() {
    for threads in [0, 1] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let p = owned.pool.clone();
        let out = within(move || {
            owned.block_on(async move {
                let inner = p
                    .spawn_blocking({
                        let p = p.clone();
                        move || p.spawn_blocking(|| (is_blocking_thread(), "hello"))
                    })
                    .await
                    .unwrap();
                inner.await.unwrap()
            })
        });
        assert_eq!(out, (true, "hello"), "{threads} threads");
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `always_active_parker`.
///
/// Two threads call `block_on` on the same zero-thread pool at once, their
/// futures waiting on each other. Only one can hold the pool's one guest
/// seat; the other still gets woken and finishes. (tokio's sleeps are
/// left out: they only widen the race.)
#[test]
fn always_active_parker() {
    within(|| {
        let owned = Arc::new(OwnedPool::new(Flat::new(0)).unwrap());
        let (tx1, rx1) = oneshot::channel::<()>();
        let (tx2, rx2) = oneshot::channel::<()>();
        let a = {
            let owned = owned.clone();
            thread::spawn(move || {
                owned.block_on(async move {
                    rx2.await.unwrap();
                    tx1.send(()).unwrap();
                })
            })
        };
        let b = {
            let owned = owned.clone();
            thread::spawn(move || {
                owned.block_on(async move {
                    tx2.send(()).unwrap();
                    rx1.await.unwrap();
                })
            })
        };
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `panic_in_block_on`.
///
/// A panic in `block_on`'s future reaches the caller (tokio's test only
/// expects the panic). Added: the zero-thread pool is whole after it, and
/// runs a task at its next drive.
#[test]
fn panic_in_block_on() {
    let owned = OwnedPool::new(Flat::new(0)).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        owned.block_on(async {
            yield_now().await;
            panic!("boom")
        })
    }));
    assert!(caught.is_err());
    let h = owned.pool.work.exec(async { 5 });
    assert_eq!(owned.block_on(h).unwrap(), 5);
}

/// tokio-rs/tokio, `tokio/tests/rt_common.rs`, `nested_rt` and
/// `create_rt_in_block_on`; also `tokio/tests/rt_handle_block_on.rs`,
/// `nesting`.
///
/// Deliberate difference: tokio panics when `block_on` is called inside
/// another `block_on`. smartpool's nests: a second pool's `block_on`
/// inside the first's future drives the second pool there, and a pool
/// created inside `block_on` is driven after it.
#[test]
fn nested_block_on() {
    let out = within(|| {
        let rt1 = OwnedPool::new(Flat::new(0)).unwrap();
        let rt2 = OwnedPool::new(Flat::new(0)).unwrap();
        let h = rt2.pool.work.exec(async { "hello" });
        let nested = rt1.block_on(async { rt2.block_on(h).unwrap() });
        let rt3 = rt1.block_on(async { OwnedPool::new(Flat::new(0)).unwrap() });
        let h = rt3.pool.work.exec(async { "ZOMG" });
        (nested, rt3.block_on(h).unwrap())
    });
    assert_eq!(out, ("hello", "ZOMG"));
}

/// tokio-rs/tokio, `tokio/tests/rt_handle_block_on.rs`, `nesting`.
///
/// Deliberate difference: tokio panics when a function called inside
/// `block_on` blocks on the same runtime again. smartpool's `block_on` on
/// the same pool inside its own `block_on` future, after the outer one
/// took the zero-thread pool's only seat, must run the pool's task there.
#[test]
fn nested_block_on_same_pool() {
    let out = within(|| {
        let owned = OwnedPool::new(Flat::new(0)).unwrap();
        let pool = owned.pool.clone();
        owned.block_on(async move {
            // Park once so that the outer call takes its guest seat.
            yield_now().await;
            let h = pool.work.exec(async { 1 });
            pool.block_on(h).unwrap()
        })
    });
    assert_eq!(out, 1);
}

// ==== tokio/tests/rt_basic.rs ====

/// tokio-rs/tokio, `tokio/tests/rt_basic.rs`,
/// `spawned_task_does_not_progress_without_block_on`.
///
/// A zero-thread pool runs nothing until driven. tokio sleeps 50 ms to
/// show that; here no thread exists that could run the task, so the check
/// right away is exact.
#[test]
fn spawned_task_does_not_progress_without_block_on() {
    let owned = OwnedPool::new(Flat::new(0)).unwrap();
    let (tx, mut rx) = oneshot::channel();
    drop(
        owned
            .pool
            .work
            .exec(async move { tx.send("hello").unwrap() }),
    );
    assert_eq!(rx.try_recv(), Ok(None), "not run");
    let out = owned.block_on(async { rx.await.unwrap() });
    assert_eq!(out, "hello");
}

/// tokio-rs/tokio, `tokio/tests/rt_basic.rs`, `no_extra_poll`.
///
/// A task reading a stream is polled exactly as often as needed: once to
/// park, twice for an item (the item, then park), once for the end.
/// Difference: tokio ticks the scheduler with `block_on(yield_now())`,
/// which relies on its yield being deferred until the scheduler has run;
/// smartpool's yield wakes at once, so the tick here is
/// `run_until_stalled`, which also counts the polls.
#[test]
fn no_extra_poll() {
    let owned = OwnedPool::new(Flat::new(0)).unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = futures::channel::mpsc::unbounded::<()>();
    let p = polls.clone();
    let tracked = futures::stream::poll_fn(move |cx| {
        p.fetch_add(1, Ordering::SeqCst);
        rx.poll_next_unpin(cx)
    });
    let reader = owned.pool.work.exec(async move {
        let mut tracked = Box::pin(tracked);
        while tracked.next().await.is_some() {}
    });
    assert_eq!(owned.run_until_stalled(), 1);
    assert_eq!(polls.load(Ordering::SeqCst), 1, "the first poll");
    tx.unbounded_send(()).unwrap();
    assert_eq!(owned.run_until_stalled(), 1);
    assert_eq!(polls.load(Ordering::SeqCst), 1 + 2, "item, then pending");
    drop(tx);
    assert_eq!(owned.run_until_stalled(), 1);
    assert_eq!(polls.load(Ordering::SeqCst), 1 + 2 + 1, "the end");
    assert!(reader.is_finished());
}

/// tokio-rs/tokio, `tokio/tests/rt_basic.rs`, `acquire_mutex_in_drop`.
///
/// Dropping a zero-thread pool whose parked tasks wake each other as they
/// are dropped (a sender's drop wakes its receiver). The channel is not
/// `complete_on_close` (tokio's shutdown drops every task): no task body
/// runs on after the drop began, and each future is dropped once.
///
/// Difference: tokio's tasks are detached. smartpool frees a detached task
/// as soon as it is parked with no waker left (the never-woken one here;
/// its drop then wakes the others, which run on), so this port keeps the
/// handles, which keeps the tasks parked until the pool is dropped.
#[test]
fn acquire_mutex_in_drop() {
    let owned = OwnedPool::new(Flat::with(0, true, false)).unwrap();
    let pool = owned.pool.clone();
    let (tx1, rx1) = oneshot::channel::<()>();
    let (tx2, rx2) = oneshot::channel::<()>();
    let resumed = Arc::new(AtomicUsize::new(0));
    let drops = DropCounter::new();
    let (r, t) = (resumed.clone(), drops.token());
    let first = pool.work.exec(async move {
        let _t = t;
        let _ = rx2.await;
        r.fetch_add(1, Ordering::SeqCst);
    });
    let (r, t) = (resumed.clone(), drops.token());
    let second = pool.work.exec(async move {
        let _t = t;
        let _ = rx1.await;
        let _ = tx2.send(());
        r.fetch_add(1, Ordering::SeqCst);
    });
    let t = drops.token();
    let never = pool.work.exec(async move {
        let _t = t;
        futures::future::pending::<()>().await;
        let _ = tx1.send(());
    });
    // Tick: all three park.
    assert_eq!(owned.run_until_stalled(), 3);
    assert_eq!(drops.drops(), 0);
    within(move || drop(owned));
    assert_eq!(resumed.load(Ordering::SeqCst), 0, "no body ran on");
    assert_eq!(drops.drops(), 3);
    for h in [first, second, never] {
        assert!(wait(h).unwrap_err().cancel_reason().is_some());
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_basic.rs`, `wake_in_drop_after_panic`.
///
/// `block_on`'s future panics ("boom") after a tick; while unwinding, the
/// pool is dropped, and its parked tasks wake each other from their drops.
/// The panic that reaches the test is still "boom".
#[test]
#[should_panic(expected = "boom")]
fn wake_in_drop_after_panic() {
    struct WakeOnDrop(Option<oneshot::Sender<()>>);
    impl Drop for WakeOnDrop {
        fn drop(&mut self) {
            let _ = self.0.take().unwrap().send(());
        }
    }
    let owned = OwnedPool::new(Flat::with(0, true, false)).unwrap();
    let (tx1, rx1) = oneshot::channel::<()>();
    let (tx2, rx2) = oneshot::channel::<()>();
    drop(owned.pool.work.exec(async move {
        let _wake = WakeOnDrop(Some(tx2));
        let _ = rx1.await;
        unreachable!()
    }));
    drop(owned.pool.work.exec(async move {
        let _wake = WakeOnDrop(Some(tx1));
        let _ = rx2.await;
        unreachable!()
    }));
    owned.run_until_stalled();
    owned.block_on(async {
        yield_now().await;
        panic!("boom");
    });
}

/// tokio-rs/tokio, `tokio/tests/rt_basic.rs`, `spawn_two`.
///
/// Inside a zero-thread pool's `block_on`, a task spawns a task that
/// sends; `block_on` awaits the value, having run both tasks.
#[test]
fn spawn_two() {
    let owned = OwnedPool::new(Flat::new(0)).unwrap();
    let pool = owned.pool.clone();
    let out = owned.block_on(async move {
        let (tx, rx) = oneshot::channel();
        drop(pool.work.exec(async move {
            let pool = Pool::<Flat>::current().unwrap();
            drop(pool.work.exec(async move { tx.send("ZOMG").unwrap() }));
        }));
        rx.await.unwrap()
    });
    assert_eq!(out, "ZOMG");
}

// ==== tokio/tests/rt_handle_block_on.rs ====

/// tokio-rs/tokio, `tokio/tests/rt_handle_block_on.rs`,
/// `spawn_blocking_after_shutdown_fails`.
///
/// After close, a `spawn_blocking` closure does not run; its handle
/// resolves to a cancellation (tokio: `is_cancelled`; here the reason is
/// `PoolClosed`).
#[test]
fn spawn_blocking_after_shutdown_fails() {
    for threads in [0, 1] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let pool = owned.pool.clone();
        wait(owned.close());
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let h = pool.spawn_blocking(move || r.store(true, Ordering::SeqCst));
        let e = wait(h).unwrap_err();
        assert_eq!(e.cancel_reason(), Some(CancelReason::PoolClosed));
        assert!(!ran.load(Ordering::SeqCst));
    }
}

/// tokio-rs/tokio, `tokio/tests/rt_handle_block_on.rs`,
/// `spawn_blocking_started_before_shutdown_continues`.
///
/// A `spawn_blocking` closure running when close begins is not waited
/// for, nor cut short: close returns while it still blocks (tokio's
/// closure sleeps 1 s; here it waits on a gate opened after the close),
/// and its handle then yields its value.
#[test]
fn spawn_blocking_started_before_shutdown_continues() {
    for threads in [0, 1] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let (started, release) = (Gate::new(), Gate::new());
        let (s, r) = (started.clone(), release.clone());
        let h = pool.spawn_blocking(move || {
            s.open();
            assert!(r.wait_for(FAILSAFE));
            42
        });
        assert!(started.wait_for(FAILSAFE));
        wait(owned.close());
        assert!(!h.is_finished(), "close did not wait for it");
        release.open();
        assert_eq!(wait(h).unwrap(), 42);
    }
}

// ==== marl ====

/// google/marl, `src/scheduler_test.cpp`, `FibersResumeOnSameThread` and
/// `ScheduleWithArgs`, run with `SchedulerParams{0}` (single-threaded
/// mode, `src/marl_test.cpp`); `include/marl/scheduler.h` (`bind`).
///
/// A scheduler with no worker thread runs its tasks on the thread bound to
/// it, when that thread waits. Here: a zero-thread pool; 1000 tasks wait on
/// one fence, a last task opens it, and the thread that blocks on their
/// completion runs every one of them, each resuming on the thread it
/// started on.
#[test]
fn marl_single_threaded_mode_runs_tasks_on_the_waiting_thread() {
    let (out, driver) = within(|| {
        let owned = OwnedPool::new(Flat::new(0)).unwrap();
        let pool = owned.pool.clone();
        let (fence_tx, fence_rx) = oneshot::channel::<()>();
        let fence = fence_rx.shared();
        let done = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..1000)
            .map(|_| {
                let (fence, done) = (fence.clone(), done.clone());
                pool.work.exec(async move {
                    let before = thread::current().id();
                    fence.await.unwrap();
                    assert_eq!(thread::current().id(), before, "resumed on the same thread");
                    done.fetch_add(1, Ordering::SeqCst);
                    before
                })
            })
            .collect();
        drop(pool.work.exec(async move { fence_tx.send(()).unwrap() }));
        let ran_on = owned.block_on(futures::future::join_all(handles));
        assert_eq!(done.load(Ordering::SeqCst), 1000);
        (ran_on, thread::current().id())
    });
    assert_eq!(out.len(), 1000);
    for id in out {
        assert_eq!(id.unwrap(), driver, "every task ran on the waiting thread");
    }
}

/// google/marl, `src/scheduler_test.cpp`, `DestructWithPendingTasks` and
/// `DestructWithPendingFibers`, with `SchedulerParams{0}`;
/// `include/marl/scheduler.h` (`unbind` "flushes any enqueued tasks on the
/// single-threaded worker").
///
/// Tasks still queued, and tasks parked on an event set by a queued task,
/// when a zero-thread pool is dropped: the drop runs them all to
/// completion, on the dropping thread, before it returns.
#[test]
fn marl_destruct_with_pending_tasks_and_fibers() {
    within(|| {
        let owned = OwnedPool::new(Flat::new(0)).unwrap();
        let me = thread::current().id();
        let counter = Arc::new(AtomicUsize::new(0));
        let elsewhere = Arc::new(Mutex::new(0usize));
        let (event_tx, event_rx) = oneshot::channel::<()>();
        let event = event_rx.shared();
        for i in 0..2000 {
            let (counter, elsewhere, event) = (counter.clone(), elsewhere.clone(), event.clone());
            drop(owned.pool.work.exec(async move {
                if i % 2 == 1 {
                    event.await.unwrap(); // a "fiber" that blocks
                }
                if thread::current().id() != me {
                    *elsewhere.lock().unwrap() += 1;
                }
                counter.fetch_add(1, Ordering::SeqCst);
            }));
        }
        // Queued last: the waiters before it park first (first in,
        // first out), then it wakes them all.
        let tx = event_tx;
        drop(owned.pool.work.exec(async move { tx.send(()).unwrap() }));
        drop(owned);
        assert_eq!(counter.load(Ordering::SeqCst), 2000);
        assert_eq!(*elsewhere.lock().unwrap(), 0, "all on the dropping thread");
    });
}
