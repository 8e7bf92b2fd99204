//! Close: refused submissions come back, complete_on_close tasks finish
//! (queued, running, parked), the others are dropped exactly once, worker
//! threads are joined, and dropping an OwnedPool closes it the same way.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{DropCounter, Gate, TwoLevels};
use futures::channel::oneshot;
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn a_submission_after_close_comes_back_or_is_cancelled() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    block_on(owned.close());
    assert!(pool.is_closing());
    let rejected = pool.high.try_exec(async { 5 }).unwrap_err();
    assert!(rejected.to_string().contains("closing or closed"));
    assert_eq!(
        block_on(rejected.into_inner()),
        5,
        "the future comes back intact"
    );
    let drops = DropCounter::new();
    let token = drops.token();
    let h = pool.high.exec(run(move || drop(token)));
    assert!(block_on(h).unwrap_err().is_cancelled());
    assert_eq!(
        drops.drops(),
        1,
        "the refused closure was dropped, not run or leaked"
    );
}

/// Holds the single worker, queues work on both levels, and closes.
#[test]
fn queued_complete_on_close_tasks_run_and_the_others_are_dropped_once() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let started = Arc::new(Barrier::new(2));
    let (g, s) = (gate.clone(), started.clone());
    // A low (dropping) task that is running when close starts finishes.
    let running = pool.low.exec(run(move || {
        s.wait();
        g.wait();
        "finished"
    }));
    started.wait();
    let ran = Arc::new(AtomicUsize::new(0));
    let drops = DropCounter::new();
    let high: Vec<_> = (0..100)
        .map(|_| {
            let ran = ran.clone();
            pool.high
                .exec(run(move || ran.fetch_add(1, Ordering::SeqCst)))
        })
        .collect();
    let low: Vec<_> = (0..100)
        .map(|_| {
            let (ran, token) = (ran.clone(), drops.token());
            pool.low.exec(run(move || {
                let _token = token;
                ran.fetch_add(1000, Ordering::SeqCst);
            }))
        })
        .collect();
    let close = owned.close();
    gate.open();
    block_on(close);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        100,
        "all high tasks, no low task ran"
    );
    assert_eq!(drops.drops(), 100, "every low task dropped exactly once");
    assert_eq!(block_on(running).unwrap(), "finished");
    for h in high {
        block_on(h).unwrap();
    }
    for h in low {
        assert!(block_on(h).unwrap_err().is_cancelled());
    }
}

#[test]
fn close_waits_for_a_parked_complete_on_close_future() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let (tx, rx) = oneshot::channel::<u32>();
    let parked = owned.pool.high.exec(async move { rx.await.unwrap() * 2 });
    let close_started = Gate::new();
    let cs = close_started.clone();
    let sender = std::thread::spawn(move || {
        cs.wait();
        std::thread::sleep(Duration::from_millis(200));
        tx.send(21).unwrap();
    });
    let close = owned.close();
    close_started.open();
    block_on(close);
    assert!(
        parked.is_finished(),
        "close resolved before the parked task finished"
    );
    assert_eq!(block_on(parked).unwrap(), 42);
    sender.join().unwrap();
}

/// A parked task of a dropping channel is dropped by close (its future's
/// `Drop` has run when close resolves), though its waker is still held.
#[test]
fn close_drops_a_parked_task_of_a_dropping_channel() {
    for threads in [1, 3] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let drops = DropCounter::new();
        let token = drops.token();
        let (_tx, rx) = oneshot::channel::<()>();
        let (polled_tx, polled) = oneshot::channel::<()>();
        let parked = owned.pool.low.exec(async move {
            let _token = token;
            polled_tx.send(()).unwrap();
            let _ = rx.await;
        });
        block_on(polled).unwrap();
        block_on(owned.close());
        assert_eq!(drops.drops(), 1, "dropped when close resolved");
        let error = block_on(parked).unwrap_err();
        assert_eq!(error.cancel_reason(), Some(CancelReason::PoolClosed));
    }
}

/// A task of a dropping channel that was running when close began (and
/// its sweep ran) and parks afterwards is dropped too: its poller drops it
/// on parking.
#[test]
fn a_dropping_task_that_parks_during_close_is_dropped() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    let (gate, started) = (Gate::new(), Gate::new());
    let (g, s) = (gate.clone(), started.clone());
    let (_tx, rx) = oneshot::channel::<()>();
    let task = owned.pool.low.exec(async move {
        let _token = token;
        s.open();
        g.wait();
        let _ = rx.await;
    });
    started.wait();
    let close = owned.close(); // the sweep has run: the task was running
    gate.open();
    block_on(close);
    assert_eq!(drops.drops(), 1, "dropped when close resolved");
    let error = block_on(task).unwrap_err();
    assert_eq!(error.cancel_reason(), Some(CancelReason::PoolClosed));
}

/// A parked task of a `complete_on_close` channel is only woken by the
/// sweep (one spurious poll): close still waits for it.
#[test]
fn the_sweep_leaves_complete_on_close_tasks_running() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let (tx, mut rx) = oneshot::channel::<u32>();
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let parked = owned.pool.high.exec(futures::future::poll_fn(move |cx| {
        p.fetch_add(1, Ordering::SeqCst);
        futures::FutureExt::poll_unpin(&mut rx, cx).map(Result::unwrap)
    }));
    while polls.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // One worker: once a later task ran, the first poll has returned.
    block_on(owned.pool.high.exec(run(|| ()))).unwrap();
    let close = owned.close();
    while polls.load(Ordering::SeqCst) < 2 {
        std::thread::yield_now(); // the sweep's spurious wake
    }
    assert!(!parked.is_finished(), "close waits for it");
    tx.send(7).unwrap();
    assert_eq!(block_on(parked).unwrap(), 7);
    block_on(close);
}

#[test]
fn close_joins_every_worker_thread() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    // `owned.pool`, our clone, and two per worker thread (its loop's and
    // its hooks', both made before the thread starts).
    assert_eq!(Arc::strong_count(&pool), 6);
    block_on(owned.close());
    assert_eq!(
        Arc::strong_count(&pool),
        1,
        "every worker exited and released the pool"
    );
}

#[test]
fn dropping_an_owned_pool_closes_it_and_blocks_until_done() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let g = gate.clone();
    let slow = pool.high.exec(run(move || g.wait()));
    let done = pool.high.exec(run(|| 1));
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        gate.open();
    });
    drop(owned);
    assert!(
        slow.is_finished() && done.is_finished(),
        "drop returned before close finished"
    );
    assert_eq!(Arc::strong_count(&pool), 1);
    opener.join().unwrap();
}

#[test]
fn an_abandoned_parked_task_does_not_hold_close() {
    // A complete_on_close future that parks and keeps no waker: once its
    // handle is dropped nothing can ever wake it, and it is freed.
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    let polled = Gate::new();
    let p = polled.clone();
    let handle = owned.pool.high.exec(futures::future::poll_fn(move |_cx| {
        let _keep = &token;
        p.open();
        std::task::Poll::<()>::Pending
    }));
    assert!(polled.wait_for(common::FAILSAFE));
    // The worker may still hold it for an instant after the poll.
    block_on(owned.pool.high.exec(run(|| ()))).unwrap();
    drop(handle);
    assert_eq!(drops.drops(), 1, "freed with its last reference");
    assert!(
        common::close_within(owned, common::FAILSAFE),
        "close waited for it"
    );
}

/// Its destructor is slow and records that it finished.
struct SlowDrop(Arc<AtomicUsize>);

impl Drop for SlowDrop {
    fn drop(&mut self) {
        // Widens the window in which a too-early close would be seen.
        std::thread::sleep(Duration::from_millis(100));
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn close_resolves_only_after_an_abandoned_tasks_destructor_ran() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = SlowDrop(dropped.clone());
    let polled = Gate::new();
    let p = polled.clone();
    let handle = owned.pool.high.exec(futures::future::poll_fn(move |_cx| {
        let _keep = &guard;
        p.open();
        std::task::Poll::<()>::Pending
    }));
    assert!(polled.wait_for(common::FAILSAFE));
    block_on(owned.pool.high.exec(run(|| ()))).unwrap();
    // Close waits for the parked counted task; dropping its last reference
    // frees it here, on this thread, and its destructor takes a while.
    let seen_at_close = Arc::new(AtomicUsize::new(usize::MAX));
    let (seen, d) = (seen_at_close.clone(), dropped.clone());
    let closer = std::thread::spawn(move || {
        block_on(owned.close());
        seen.store(d.load(Ordering::SeqCst), Ordering::SeqCst);
    });
    drop(handle);
    closer.join().unwrap();
    assert_eq!(
        seen_at_close.load(Ordering::SeqCst),
        1,
        "close resolved before the destructor ran"
    );
}

/// Dropping an `OwnedPool` inside a thread-local destructor closes it and
/// waits (it used to abort the process: close went through
/// `futures::executor::block_on`, whose own thread-local may be gone by
/// then). Ported from tokio's `runtime_in_thread_local` (tests/rt_common.rs).
#[test]
fn dropping_an_owned_pool_in_a_thread_local_destructor_closes_it() {
    use std::cell::RefCell;
    thread_local! {
        static POOL: RefCell<Option<OwnedPool<TwoLevels>>> = const { RefCell::new(None) };
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    std::thread::spawn(move || {
        // Ours is registered before futures' executor thread-local, so
        // destructors (run in reverse) destroy futures' first: the order the
        // process aborted in.
        POOL.with(|_| ());
        block_on(async {});
        let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        drop(owned.pool.high.exec(run(move || {
            g.wait();
            r.fetch_add(1, Ordering::SeqCst);
        })));
        POOL.with(|p| *p.borrow_mut() = Some(owned));
        gate.open();
    })
    .join()
    .unwrap();
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the drop waited for the complete_on_close task"
    );
}

/// Awaiting close on one of the pool's own workers would wait for itself:
/// it panics, naming the misuse, and the close goes on.
#[test]
fn awaiting_close_on_its_own_worker_panics_instead_of_hanging() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    tx.send(owned).unwrap();
    let inside = pool.low.exec(run(move || {
        let owned = rx.recv().unwrap();
        block_on(owned.close());
    }));
    let error = block_on(inside).unwrap_err();
    assert!(error.is_panic(), "{error}");
    assert!(
        error.to_string().contains("own worker"),
        "the message names the misuse: {error}"
    );
    assert!(pool.is_closing());
    assert!(pool.high.try_exec(async {}).is_err());
}

/// While closing, the last counted task's detached output is dropped by
/// the worker, and its destructor wakes a task parked on a dropping channel
/// whose followup moves it into a `complete_on_close` one: close still
/// waits for that task, which runs (the completed task gives its count back
/// only after its output's destructor ran).
#[test]
fn close_drops_a_parked_task_that_its_followup_would_promote() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;
    use std::task::{Poll, Waker};

    /// `high` is complete_on_close, `low` is not; every woken task goes to
    /// `high`.
    struct Upward {
        high: VecDequeChannel,
        low: VecDequeChannel,
    }
    impl PoolBehavior for Upward {
        type ChannelKey = common::Lv;
        fn config(&self) -> PoolConfig<common::Lv> {
            PoolConfig {
                threads: 1,
                schedule: ScheduleAlgorithm::HighestFirst,
                levels: vec![
                    vec![ChannelParams {
                        key: common::Lv::High,
                        complete_on_close: true,
                    }],
                    vec![ChannelParams {
                        key: common::Lv::Low,
                        complete_on_close: false,
                    }],
                ],
            }
        }
        fn channel(&self, key: common::Lv) -> &dyn Channel {
            match key {
                common::Lv::High => &self.high,
                common::Lv::Low => &self.low,
            }
        }
        fn followup(&self, _: common::Lv, task: RunningTask) {
            self.high.submit(task);
        }
    }
    let owned = OwnedPool::new(Upward {
        high: VecDequeChannel::new(),
        low: VecDequeChannel::new(),
    })
    .unwrap();
    let pool = owned.pool.clone();
    let waker: Arc<Mutex<Option<Waker>>> = Arc::default();
    let (parked, woken) = (Gate::new(), Arc::new(AtomicBool::new(false)));

    // P: parks on the dropping channel (not counted) until woken.
    let (w, p, flag) = (waker.clone(), parked.clone(), woken.clone());
    let late = pool.low.exec(futures::future::poll_fn(move |cx| {
        if flag.load(Ordering::SeqCst) {
            return Poll::Ready("ran");
        }
        *w.lock().unwrap() = Some(cx.waker().clone());
        p.open();
        Poll::Pending
    }));
    assert!(parked.wait_for(common::FAILSAFE));

    // T, the one counted task: its detached output's destructor wakes P.
    struct WakeOnDrop(Arc<Mutex<Option<Waker>>>, Arc<AtomicBool>);
    impl Drop for WakeOnDrop {
        fn drop(&mut self) {
            self.1.store(true, Ordering::SeqCst);
            if let Some(waker) = self.0.lock().unwrap().take() {
                waker.wake();
            }
        }
    }
    let (gate, started) = (Gate::new(), Gate::new());
    let (g, s, w, flag) = (gate.clone(), started.clone(), waker.clone(), woken.clone());
    drop(pool.high.exec(run(move || {
        s.open();
        g.wait();
        WakeOnDrop(w, flag)
    })));
    assert!(started.wait_for(common::FAILSAFE));

    // Close sweeps P (parked, not counted) before T's destructor can wake
    // it into `high`: P is dropped, whatever its followup would do, and
    // the destructor's wake finds nothing to run. Close still waits for T,
    // destructor included.
    let close = owned.close();
    let error = block_on(late).expect_err("dropped by close's sweep");
    assert_eq!(error.cancel_reason(), Some(CancelReason::PoolClosed));
    gate.open();
    block_on(close);
    assert!(
        woken.load(Ordering::SeqCst),
        "T's destructor ran before close resolved"
    );
}

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    let waker = futures::task::noop_waker();
    std::pin::Pin::new(future).poll(&mut std::task::Context::from_waker(&waker))
}

/// `close_timeout`: at the deadline the `complete_on_close` tasks still
/// unfinished are dropped: queued (Q) and parking after the poll in
/// progress (R, which is never interrupted); the report counts them and
/// their handles say why.
#[test]
fn close_timeout_drops_queued_and_running_tasks_at_the_deadline() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let drops = DropCounter::new();
    // R: holds the only worker until its gate opens, then parks for ever.
    let (gate, started) = (Gate::new(), Gate::new());
    let (g, s, r_token) = (gate.clone(), started.clone(), drops.token());
    let (_r_tx, r_rx) = oneshot::channel::<()>();
    let r = pool.high.exec(async move {
        let _token = r_token;
        s.open();
        g.wait();
        let _ = r_rx.await;
    });
    started.wait();
    // Q: three queued behind R.
    let q: Vec<_> = (0..3)
        .map(|_| {
            let token = drops.token();
            pool.high.exec(async move { drop(token) })
        })
        .collect();
    let mut closing = owned.close_timeout(Duration::ZERO);
    // The deadline is past: the first poll abandons what is left.
    assert!(poll_once(&mut closing).is_pending(), "R still runs");
    gate.open();
    let report = block_on(closing);
    assert!(report.timed_out());
    assert_eq!(report.aborted(), 4, "R and the three Q");
    for handle in std::iter::once(r).chain(q) {
        let error = block_on(handle).unwrap_err();
        assert_eq!(error.cancel_reason(), Some(CancelReason::CloseTimedOut));
    }
    assert_eq!(drops.drops(), 4, "each future dropped once");
}

/// `close_timeout` drops a parked `complete_on_close` task at the
/// deadline (wherever close's first sweep and its spurious wake left it:
/// parked again, queued or running).
#[test]
fn close_timeout_drops_a_parked_task_at_the_deadline() {
    for threads in [1, 2] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let drops = DropCounter::new();
        let token = drops.token();
        let (_tx, rx) = oneshot::channel::<()>();
        let (polled_tx, polled) = oneshot::channel::<()>();
        let p = owned.pool.high.exec(async move {
            let _token = token;
            let _ = polled_tx.send(());
            let _ = rx.await;
        });
        block_on(polled).unwrap();
        let report = block_on(owned.close_timeout(Duration::ZERO));
        assert!(report.timed_out());
        assert_eq!(report.aborted(), 1, "{threads} threads");
        let error = block_on(p).unwrap_err();
        assert_eq!(error.cancel_reason(), Some(CancelReason::CloseTimedOut));
        assert_eq!(drops.drops(), 1);
    }
}

/// A close that finishes before its deadline reports nothing abandoned.
#[test]
fn close_timeout_within_the_deadline_abandons_nothing() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let done = owned.pool.high.exec(async { 1 });
    let report = block_on(owned.close_timeout(Duration::from_secs(3600)));
    assert_eq!(block_on(done).unwrap(), 1);
    assert!(!report.timed_out());
    assert_eq!(report.aborted(), 0);
}

/// Handles dropped while their tasks finish, from a thread that is no
/// worker: every output is dropped by the time close resolves, whichever
/// of the worker and the handle lets go of the task last. Each
/// handle is dropped just as its task returns, to land between the poll's
/// look at the handle and the worker's look at the cell.
#[test]
fn outputs_of_handles_dropped_at_completion_are_dropped_before_close_resolves() {
    use std::sync::atomic::AtomicBool;
    let rounds = common::scaled(5_000);
    for coc in [true, false] {
        let owned = OwnedPool::new(TwoLevels::lifo(2, (coc, coc))).unwrap();
        let pool = owned.pool.clone();
        let outputs = DropCounter::new();
        for _ in 0..rounds {
            let output = outputs.token();
            let returning = Arc::new(AtomicBool::new(false));
            let r = returning.clone();
            let handle = pool.low.exec(run(move || {
                r.store(true, Ordering::SeqCst);
                output
            }));
            while !returning.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            drop(handle);
        }
        block_on(owned.close());
        if coc {
            assert_eq!(
                outputs.drops(),
                rounds,
                "complete_on_close: every output dropped when close resolves"
            );
        }
        drop(pool);
        assert_eq!(outputs.drops(), rounds, "every output dropped once");
    }
}

/// `Pool::closing` resolves as close begins: a `complete_on_close` task
/// that awaits it (a server's accept loop) ends then, and close, which
/// waits for it, completes. A `closing()` made after close began is
/// ready at once.
#[test]
fn closing_resolves_as_close_begins() {
    let owned = smartpool::Builder::new()
        .threads(1)
        .complete_on_close(0, true)
        .build()
        .unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let closing = owned.pool.closing();
    let waiter = owned.pool.level(0).exec(async move {
        tx.send("waiting").unwrap();
        closing.await;
        "saw the close"
    });
    assert_eq!(rx.recv().unwrap(), "waiting");
    assert!(!pool.is_closing());
    futures::executor::block_on(owned.close());
    assert_eq!(
        futures::executor::block_on(waiter).unwrap(),
        "saw the close"
    );
    futures::executor::block_on(pool.closing());
}
