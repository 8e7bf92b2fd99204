//! async-executor's tests, ported to smartpool.
//!
//! Origin: smol-rs/async-executor at commit
//! 071235715a5b69dd87bdffded3fcfd4b566915fe, files `tests/drop.rs`,
//! `tests/panic_prop.rs`, `tests/spawn_many.rs`, `tests/larger_tasks.rs`,
//! `tests/different_executors.rs`, `tests/local_queue.rs`, plus three
//! workloads of `benches/executor.rs` (`spawn_recursively`, `yield_now`,
//! `channels`) restated as correctness tests. Each test restates the
//! original's intent against smartpool's API (nothing is copied), and a
//! comment above it names its origin.
//!
//! The models differ. An async-executor `Executor` is a queue that the
//! caller's threads drive (`run`, `tick`). A smartpool `OwnedPool` owns
//! and joins its worker threads. So here "the executor" is a pool of
//! `common::TwoLevels` (`high` completes on close, `low` does not),
//! "running the executor" is its workers, and "dropping the executor" is
//! dropping the `OwnedPool`. That closes the pool: it drops the tasks of
//! `low`, queued or parked, waits for the tasks of `high`, and joins the
//! workers.
//!
//! Not ported:
//! * `drop.rs` `leaked_executor_leaks_everything`: leaking an `OwnedPool`
//!   leaks running worker threads that are never joined. That is not a
//!   behaviour to pin down, and the CI's valgrind run would flag it.
//! * `spawn_many.rs` `spawn_many_local`: `LocalExecutor` runs `!Send`
//!   futures on the calling thread. smartpool runs only `Send` futures on
//!   its workers.
//! * `local_queue.rs` `two_queues`: it covers a `run` future's local queue
//!   when that runner is dropped mid-run. smartpool has no runner futures
//!   (a worker's local queues live and die with its thread).
//! * `larger_tasks.rs` test modes 2 and 4 (a `tick` loop): smartpool has
//!   no `tick`. Modes 1 and 3 are ported in `do_run`.
//! * `benches/executor.rs` `create`, `spawn_one`, `spawn_batch`,
//!   `spawn_many_local`, `web_server`: these are timings, and their
//!   behaviour is already covered by `spawn_many` and the ports below.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use common::{scaled, yield_once, CountDown, DropCounter, Gate, Lv, TwoLevels, FAILSAFE};
use futures::channel::oneshot;
use futures::executor::block_on;
use futures::future::{BoxFuture, FutureExt};
use futures::{SinkExt, StreamExt};
use smartpool::prelude::*;

/// Drives `future` to its end on a plain thread. Returns `None` if it did
/// not end within the fail-safe (hung, or panicked on that thread).
fn within<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(block_on(future));
    });
    rx.recv_timeout(FAILSAFE).ok()
}

/// Fails the test without dropping `owned`: dropping a stuck pool would
/// wait for it forever.
fn hung<B: PoolBehavior>(owned: OwnedPool<B>, what: &str) -> ! {
    std::mem::forget(owned);
    panic!("{what}: no progress within the fail-safe");
}

/// A pool task on `low` that parks on its first poll and leaves its waker
/// in the returned slot. Its future holds a `DropCounter` token.
fn parked_task(
    pool: &Pool<TwoLevels>,
    drops: &DropCounter,
) -> (JoinHandle<()>, Arc<Mutex<Option<Waker>>>) {
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    let polled = Gate::new();
    let (token, keep, p) = (drops.token(), kept.clone(), polled.clone());
    let task = pool.low.exec(async move {
        let _token = token;
        futures::future::poll_fn(|cx| {
            *keep.lock().unwrap() = Some(cx.waker().clone());
            p.open();
            Poll::<()>::Pending
        })
        .await;
    });
    assert!(polled.wait_for(FAILSAFE), "the task was polled");
    // One worker: once a later task has run, the first one's poll has
    // returned, so it is parked.
    block_on(pool.low.exec(run(|| ()))).unwrap();
    (task, kept)
}

// ---------------------------------------------------------------------
// tests/drop.rs
// ---------------------------------------------------------------------

// async-executor tests/drop.rs: executor_cancels_everything
// As async-executor: dropping the pool drops the parked future (close
// sweeps the parked tasks of its dropping channels), once, though its
// waker is still held; the handle reports the closed pool, and a later
// wake does nothing.
#[test]
fn executor_cancels_everything() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let drops = DropCounter::new();
    let (task, kept) = parked_task(&owned.pool, &drops);
    assert_eq!(drops.drops(), 0);
    drop(owned); // closes the pool and joins its workers
    assert_eq!(drops.drops(), 1, "dropped by close, its waker still held");
    let error = block_on(task).unwrap_err();
    assert_eq!(error.cancel_reason(), Some(CancelReason::PoolClosed));
    let waker = kept.lock().unwrap().take().expect("the task left a waker");
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert_eq!(drops.drops(), 1, "exactly once");
}

// async-executor tests/drop.rs: executor_cancels_everything (the waker
// outlives the pool: waking it then finds nothing left to do)
#[test]
fn a_parked_tasks_waker_outliving_its_pool_is_harmless() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let drops = DropCounter::new();
    let (task, kept) = parked_task(&owned.pool, &drops);
    drop(owned);
    let waker = kept.lock().unwrap().take().expect("the task left a waker");
    drop(task);
    assert_eq!(drops.drops(), 1, "dropped by close");
    waker.wake_by_ref();
    drop(waker);
    assert_eq!(drops.drops(), 1, "once");
}

// async-executor tests/drop.rs: await_task_after_dropping_executor
// async-executor's `Executor<'a>` runs futures that borrow. In smartpool
// those are scoped tasks. A finished task's borrowed output stays
// joinable after the pool is dropped.
#[test]
fn await_task_after_dropping_executor() {
    let text = String::from("hello");
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let got = smartpool::scope(|s| {
        let task = s.exec(&pool.low, async { text.as_str() });
        // One worker, FIFO: once a later task ran, the first had finished.
        s.exec(&pool.low, run(|| ())).join().unwrap();
        assert!(task.is_finished());
        drop(owned);
        task.join().unwrap()
    });
    assert_eq!(got, "hello");
    drop(text);
}

// async-executor tests/drop.rs: drop_executor_and_then_drop_finished_task
#[test]
fn drop_executor_and_then_drop_finished_task() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    let task = owned.pool.low.exec(async move { token });
    block_on(owned.pool.low.exec(run(|| ()))).unwrap();
    assert!(task.is_finished());
    assert_eq!(drops.drops(), 0);
    drop(owned);
    assert_eq!(
        drops.drops(),
        0,
        "the output waits in the task for its handle"
    );
    drop(task);
    assert_eq!(drops.drops(), 1);
}

// async-executor tests/drop.rs: drop_finished_task_and_then_drop_executor
#[test]
fn drop_finished_task_and_then_drop_executor() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    let task = owned.pool.low.exec(async move { token });
    // One worker: once a later task ran, the first finished and its worker
    // let go of it, so the handle holds the last reference.
    block_on(owned.pool.low.exec(run(|| ()))).unwrap();
    assert_eq!(drops.drops(), 0);
    drop(task);
    assert_eq!(drops.drops(), 1);
    drop(owned);
    assert_eq!(drops.drops(), 1);
}

// async-executor tests/drop.rs: iterator_panics_mid_run
// smartpool has no `spawn_many(iter, ..)`. The same situation: the code
// producing the futures panics halfway through submitting them. The tasks
// already submitted are detached by the unwinding and still run, and the
// pool goes on.
#[test]
fn iterator_panics_mid_run() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let ran = CountDown::new(25);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut handles = Vec::new();
        handles.extend((0..50).map(|i| {
            if i == 25 {
                panic!("the iterator panicked mid-run");
            }
            let ran = ran.clone();
            pool.low.exec(async move {
                ran.tick();
                i
            })
        }));
        handles
    }));
    assert!(result.is_err());
    assert!(ran.wait_for(FAILSAFE), "the 25 submitted tasks ran");
    assert_eq!(block_on(pool.low.exec(async { 0 })).unwrap(), 0);
    block_on(owned.close());
}

// ---------------------------------------------------------------------
// tests/panic_prop.rs
// ---------------------------------------------------------------------

// async-executor tests/panic_prop.rs: test_panic_propagation
// The worker catches the panic and goes on. The panic reaches whoever
// awaits the handle: as a `JoinError` carrying the payload, which that
// code may resume (async-executor's `Task` resumes it itself).
#[test]
fn test_panic_propagation() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let task = owned
        .pool
        .low
        .exec(async { panic!("should be caught by the task") });
    let error = block_on(task).unwrap_err();
    assert!(error.is_panic());
    assert!(
        error.to_string().contains("should be caught by the task"),
        "{error}"
    );
    let payload = error.try_into_panic().expect("a panic carries its payload");
    let resumed = catch_unwind(AssertUnwindSafe(|| std::panic::resume_unwind(payload)));
    assert!(resumed.is_err(), "awaiting code can resume the panic");
    assert_eq!(
        block_on(owned.pool.low.exec(run(|| "alive"))).unwrap(),
        "alive",
        "running the pool did not panic"
    );
    block_on(owned.close());
}

// ---------------------------------------------------------------------
// tests/spawn_many.rs
// ---------------------------------------------------------------------

// async-executor tests/spawn_many.rs: spawn_many
// Many ready futures, awaited in order from inside the pool (as
// `ex.run(..)` does) on 1 and 4 threads. async-executor spawns 50,000.
// 10,000 (scaled) keeps this under a second in a debug build.
#[test]
fn spawn_many() {
    let count = scaled(10_000);
    for threads in [1, 4] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let tasks: Vec<_> = (0..count)
            .map(|i| pool.low.exec(futures::future::ready(i)))
            .collect();
        let checker = pool.high.exec(async move {
            for (i, task) in tasks.into_iter().enumerate() {
                assert_eq!(task.await.expect("a ready future completes"), i);
            }
        });
        let Some(checked) = within(checker) else {
            hung(owned, "spawn_many")
        };
        checked.expect("every task gave its own output");
        block_on(owned.close());
    }
}

// ---------------------------------------------------------------------
// tests/larger_tasks.rs
// ---------------------------------------------------------------------

/// async-executor's `do_run`: runs `f` in each way the pool can be
/// driven, on pools of 1, 4 and 16 threads. Mode 1 (`block_on(ex.run(f))`)
/// runs `f` as a task of the pool, on each level. Mode 3 (16 runner
/// threads while the main thread drives `f`) has 16 plain threads each
/// drive an `f` from outside while the pool's workers run what it spawns.
/// The `tick` modes have no counterpart.
fn do_run<Fut>(f: impl Fn(Arc<Pool<TwoLevels>>) -> Fut)
where
    Fut: Future<Output = ()> + Send + 'static,
{
    for threads in [1, 4, 16] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let low = pool.low.exec(f(pool.clone()));
        let high = pool.high.exec(f(pool.clone()));
        let both = async move {
            low.await.expect("f ran as a low task");
            high.await.expect("f ran as a high task");
        };
        if within(both).is_none() {
            hung(owned, "f as a pool task");
        }
        let (done, done_rx) = mpsc::channel();
        for _ in 0..16 {
            let (future, done) = (f(pool.clone()), done.clone());
            std::thread::spawn(move || {
                block_on(future);
                let _ = done.send(());
            });
        }
        for _ in 0..16 {
            if done_rx.recv_timeout(FAILSAFE).is_err() {
                hung(owned, "f driven from 16 threads");
            }
        }
        block_on(owned.close());
    }
}

// async-executor tests/larger_tasks.rs: smoke
#[test]
fn smoke() {
    do_run(|pool| async move { pool.low.exec(async {}).await.expect("ran") });
}

// async-executor tests/larger_tasks.rs: yield_now
#[test]
fn yield_now() {
    do_run(|pool| async move { pool.low.exec(yield_once()).await.expect("ran") });
}

// async-executor tests/larger_tasks.rs: timer
// A task parked on a timer is woken by the timer's thread and goes back
// through its channel.
#[test]
fn timer() {
    let time = TimeScheduler::new();
    do_run(|pool| {
        let time = time.clone();
        async move {
            pool.low
                .exec(time.after(Duration::from_millis(5)))
                .await
                .expect("ran")
        }
    });
}

const BIG: usize = 16 * 1024;

/// A future whose state holds a 16 KiB array across its await points: a
/// yield (requeued through its channel), then a task it spawns and awaits.
async fn big_future(pool: Arc<Pool<TwoLevels>>, seed: u8) -> u64 {
    let mut state = [0u8; BIG];
    for (i, byte) in state.iter_mut().enumerate() {
        *byte = seed.wrapping_add(i as u8);
    }
    yield_once().await;
    let echoed = pool
        .low
        .exec(async move { seed })
        .await
        .expect("the inner task ran");
    assert_eq!(echoed, seed);
    state.iter().map(|&b| u64::from(b)).sum()
}

fn big_sum(seed: u8) -> u64 {
    (0..BIG)
        .map(|i| u64::from(seed.wrapping_add(i as u8)))
        .sum()
}

// async-executor tests/larger_tasks.rs (named for large tasks; this checks
// large futures). Futures of over 16 KiB run from outside and from inside
// the pool, on 1 and 4 threads: they are boxed in their task, never
// moved while pinned, and keep their state across parking.
#[test]
fn larger_futures_run_from_outside_and_inside() {
    for threads in [1, 4] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let probe = big_future(pool.clone(), 0);
        assert!(std::mem::size_of_val(&probe) >= BIG, "the future is large");
        drop(probe);
        let from_outside: Vec<_> = (0..32u8)
            .map(|seed| pool.low.exec(big_future(pool.clone(), seed)))
            .collect();
        let p = pool.clone();
        let from_inside = pool.high.exec(async move {
            let handles: Vec<_> = (32..64u8)
                .map(|seed| p.low.exec(big_future(p.clone(), seed)))
                .collect();
            let mut sums = Vec::new();
            for handle in handles {
                sums.push(handle.await.expect("a large future completed"));
            }
            sums
        });
        let all = async move {
            let mut sums = Vec::new();
            for handle in from_outside {
                sums.push(handle.await.expect("a large future completed"));
            }
            sums.extend(from_inside.await.expect("the spawning task completed"));
            sums
        };
        let Some(sums) = within(all) else {
            hung(owned, "large futures")
        };
        assert_eq!(sums, (0..64u8).map(big_sum).collect::<Vec<_>>());
        block_on(owned.close());
    }
}

// ---------------------------------------------------------------------
// tests/different_executors.rs
// ---------------------------------------------------------------------

// async-executor tests/different_executors.rs: shared_queue_slot
// A task submitted to one pool is never run by another pool's worker,
// even while its own pool's only worker is busy and the other pool's
// worker is idle.
#[test]
fn shared_queue_slot() {
    let a = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let b = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let a_worker = block_on(a.pool.low.exec(run(|| std::thread::current().id()))).unwrap();
    // Hold A's only worker.
    let gate = Gate::new();
    let g = gate.clone();
    let (started, started_rx) = mpsc::channel();
    let blocker = a.pool.high.exec(run(move || {
        started.send(()).unwrap();
        g.wait();
    }));
    started_rx
        .recv_timeout(FAILSAFE)
        .expect("A's worker took the blocker");
    let polled = Arc::new(AtomicBool::new(false));
    let p = polled.clone();
    let task = a.pool.low.exec(async move {
        p.store(true, Ordering::SeqCst);
        std::thread::current().id()
    });
    // B's worker runs a task of its own (so it has been through its loop)
    // and leaves A's task alone.
    block_on(b.pool.low.exec(run(|| ()))).unwrap();
    assert!(!polled.load(Ordering::SeqCst), "B's worker ran A's task");
    gate.open();
    block_on(blocker).unwrap();
    assert_eq!(block_on(task).unwrap(), a_worker, "A's task ran on A");
    block_on(a.close());
    block_on(b.close());
}

// async-executor tests/different_executors.rs: shared_queue_slot (for a
// scope). A scope waiting on B's worker for tasks on A's channel does not
// run them itself: it runs its own tasks only when they are on its own
// pool.
#[test]
fn a_scope_waiting_on_another_pools_worker_leaves_its_tasks_to_their_pool() {
    let a = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let b = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let a_worker = block_on(a.pool.low.exec(run(|| std::thread::current().id()))).unwrap();
    let a_pool = a.pool.clone();
    let waiting = b.pool.low.exec(run(move || {
        let mut ran_on = [None; 8];
        smartpool::scope(|s| {
            for slot in ran_on.iter_mut() {
                s.exec(
                    &a_pool.low,
                    run(move || *slot = Some(std::thread::current().id())),
                );
            }
        });
        ran_on
    }));
    let Some(ran_on) = within(waiting) else {
        hung(b, "the waiting scope")
    };
    let ran_on = ran_on.expect("the waiting task completed");
    assert!(
        ran_on.iter().all(|id| *id == Some(a_worker)),
        "every task ran on A's worker: {ran_on:?}"
    );
    block_on(a.close());
    block_on(b.close());
}

// ---------------------------------------------------------------------
// benches/executor.rs workloads, as correctness tests
// ---------------------------------------------------------------------

/// A task that spawns a task that spawns ... `depth` deep, each awaiting
/// its child: returns `depth`.
fn go(pool: Arc<Pool<TwoLevels>>, depth: usize) -> BoxFuture<'static, usize> {
    async move {
        if depth == 0 {
            return 0;
        }
        let child = go(pool.clone(), depth - 1);
        pool.low.exec(child).await.expect("the child ran") + 1
    }
    .boxed()
}

// async-executor benches/executor.rs: spawn_recursively
// Chains of tasks, each awaiting the one it spawned: awaiting parks a task
// rather than blocking its worker, so this completes on one thread.
#[test]
fn spawn_recursively() {
    let (chains, depth) = (scaled(20), scaled(100));
    for threads in [1, 4] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let handles: Vec<_> = (0..chains)
            .map(|_| pool.low.exec(go(pool.clone(), depth)))
            .collect();
        let all = async move {
            let mut depths = Vec::new();
            for handle in handles {
                depths.push(handle.await.expect("the chain ran"));
            }
            depths
        };
        let Some(depths) = within(all) else {
            hung(owned, "spawn_recursively")
        };
        assert_eq!(depths, vec![depth; chains]);
        block_on(owned.close());
    }
}

// async-executor benches/executor.rs: yield_now
// Every yield is one wake during the poll, so one followup. The count of
// followups is exact.
#[test]
fn many_tasks_yielding_many_times() {
    let (tasks, steps) = (scaled(100), scaled(100));
    for threads in [1, 4] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                pool.low.exec(async move {
                    for _ in 0..steps {
                        yield_once().await;
                    }
                })
            })
            .collect();
        let all = async move {
            for handle in handles {
                handle.await.expect("the yielding task completed");
            }
        };
        if within(all).is_none() {
            hung(owned, "yield_now");
        }
        assert_eq!(
            pool.followups[Lv::Low as usize].load(Ordering::SeqCst),
            tasks * steps
        );
        block_on(owned.close());
    }
}

// async-executor benches/executor.rs: channels
// A ring of tasks passing a token through bounded channels. Each task is
// woken by its neighbour's send, from whatever worker (or the driving
// thread) that neighbour runs on.
#[test]
fn channels() {
    let (tasks, steps) = (scaled(50), scaled(50));
    for threads in [1, 4] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let (mut first_tx, first_rx) = futures::channel::mpsc::channel::<()>(0);
        let mut current_rx = first_rx;
        let mut handles = Vec::new();
        for _ in 0..tasks {
            let (mut next_tx, next_rx) = futures::channel::mpsc::channel::<()>(0);
            let mut rx = std::mem::replace(&mut current_rx, next_rx);
            handles.push(pool.low.exec(async move {
                for _ in 0..steps {
                    rx.next().await.expect("the previous task sends");
                    next_tx.send(()).await.expect("the next task receives");
                }
            }));
        }
        let driver = async move {
            for _ in 0..steps {
                first_tx.send(()).await.expect("the first task receives");
                current_rx.next().await.expect("the last task sends");
            }
            for handle in handles {
                handle.await.expect("a ring task completed");
            }
        };
        if within(driver).is_none() {
            hung(owned, "channels");
        }
        block_on(owned.close());
    }
}

// async-executor (tasks woken from other threads, as its runners and
// `larger_tasks.rs`'s timer test do). Tasks park on oneshot channels, and
// the values come from four plain threads. Each task is woken exactly once
// after it parked, so each goes through followup exactly once.
#[test]
fn tasks_woken_from_other_threads() {
    let n = scaled(400);
    for threads in [1, 4] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let parked = CountDown::new(n);
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..n {
            let (tx, mut rx) = oneshot::channel::<usize>();
            senders.push(tx);
            let parked = parked.clone();
            handles.push(pool.low.exec(async move {
                let mut told = false;
                let value = futures::future::poll_fn(|cx| {
                    let polled = Pin::new(&mut rx).poll(cx);
                    if polled.is_pending() && !told {
                        told = true;
                        parked.tick(); // registered: only now may the value come
                    }
                    polled
                })
                .await;
                value.expect("the sender sent") * 2
            }));
        }
        assert!(parked.wait_for(FAILSAFE), "every task parked");
        let mut batches: Vec<Vec<_>> = (0..4).map(|_| Vec::new()).collect();
        for (i, tx) in senders.into_iter().enumerate() {
            batches[i % 4].push((i, tx));
        }
        let wakers: Vec<_> = batches
            .into_iter()
            .map(|batch| {
                std::thread::spawn(move || {
                    for (i, tx) in batch {
                        tx.send(i).expect("the task still waits");
                    }
                })
            })
            .collect();
        for waker in wakers {
            waker.join().unwrap();
        }
        let all = async move {
            let mut values = Vec::new();
            for handle in handles {
                values.push(handle.await.expect("the woken task completed"));
            }
            values
        };
        let Some(values) = within(all) else {
            hung(owned, "tasks woken from other threads")
        };
        assert_eq!(values, (0..n).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(
            pool.followups[Lv::Low as usize].load(Ordering::SeqCst),
            n,
            "one followup per wake"
        );
        block_on(owned.close());
    }
}
