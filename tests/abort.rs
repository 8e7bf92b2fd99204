//! `JoinHandle::abort` and `AbortHandle`, with tokio's semantics: a queued
//! task is dropped unpolled, a parked one promptly without a wake, a
//! running one right after its current poll; the handle resolves to a
//! cancellation that says "aborted"; aborting a finished task or twice does
//! nothing; an aborted `complete_on_close` task stops holding close.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};

use common::{close_within, hold_worker, Counted, DropCounter, Flat, Gate, FAILSAFE};
use futures::channel::oneshot;
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool::AbortHandle;

/// Counts its polls, holds a drop token, and never completes by itself
/// (it parks without keeping a way to be woken, unless told to yield).
struct Counting {
    polls: Arc<AtomicUsize>,
    yields: bool,
    _token: Counted,
}

impl Future for Counting {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.yields {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

fn assert_aborted<T: std::fmt::Debug>(result: Result<T, JoinError>) {
    let error = result.unwrap_err();
    assert!(error.is_cancelled());
    assert_eq!(error.cancel_reason(), Some(CancelReason::Aborted));
    assert!(error.to_string().contains("aborted"), "{error}");
}

#[test]
fn a_queued_task_is_dropped_without_being_polled() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let (gate, held) = hold_worker(&owned.pool.work);
    let (polls, drops) = (Arc::new(AtomicUsize::new(0)), DropCounter::new());
    let handle = owned.pool.work.exec(Counting {
        polls: polls.clone(),
        yields: false,
        _token: drops.token(),
    });
    handle.abort();
    gate.open();
    assert_aborted(block_on(handle));
    assert_eq!(polls.load(Ordering::SeqCst), 0, "never polled");
    assert_eq!(drops.drops(), 1);
    block_on(held).unwrap();
    assert!(close_within(owned, FAILSAFE));
}

/// The parked future's waker sits in a channel nobody sends on: nothing
/// but the abort can end it (tokio's `test_abort_wakes_task_3964`, with
/// the handle dropped first: the abort handle alone reaches the task).
#[test]
fn a_parked_task_is_dropped_without_a_wake() {
    for threads in [1, 4] {
        let owned = OwnedPool::new(Flat::new(threads)).unwrap();
        let dropped = Gate::new();
        let d = dropped.clone();
        let (tx, rx) = oneshot::channel::<()>();
        // The sender keeps the parked task's waker (and so the task) alive.
        let (_never, parked_on) = oneshot::channel::<()>();
        let handle = owned.pool.work.exec(async move {
            let _signal = OnDrop(Some(Box::new(move || d.open())));
            tx.send(()).unwrap();
            let _ = parked_on.await;
        });
        block_on(rx).unwrap();
        let abort = handle.abort_handle();
        drop(handle);
        abort.abort();
        assert!(dropped.wait_for(FAILSAFE), "the abort dropped the future");
        assert!(close_within(owned, FAILSAFE));
    }
}

/// The running poll finishes; the future is dropped after it, not polled
/// again although it woke itself.
#[test]
fn a_running_task_is_dropped_after_its_current_poll() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let (polling, release) = (Arc::new(Barrier::new(2)), Gate::new());
    let (p, r) = (polling.clone(), release.clone());
    let polls = Arc::new(AtomicUsize::new(0));
    let drops = DropCounter::new();
    let (c, token) = (polls.clone(), drops.token());
    let handle = owned.pool.work.exec(futures::future::poll_fn(move |cx| {
        let _keep = &token;
        c.fetch_add(1, Ordering::SeqCst);
        p.wait();
        r.wait();
        cx.waker().wake_by_ref();
        Poll::<()>::Pending
    }));
    polling.wait();
    handle.abort();
    assert_eq!(drops.drops(), 0, "not dropped during its poll");
    release.open();
    assert_aborted(block_on(handle));
    assert_eq!(polls.load(Ordering::SeqCst), 1, "not polled again");
    assert_eq!(drops.drops(), 1);
    assert!(close_within(owned, FAILSAFE));
}

/// A task that woke itself sits re-queued (its state word still reads
/// running until its next start: the task module's "Re-queued running")
/// when another task on the same worker aborts it: its next start finds
/// the abort, so it is never polled again, its future is dropped once,
/// and its handle says aborted.
#[test]
fn a_yielding_task_aborted_in_its_queue_is_not_polled_again() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let (polls, at_abort) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let handed = Arc::new(std::sync::Mutex::new(None::<AbortHandle>));
    let (ready, drops) = (Gate::new(), DropCounter::new());
    let (p, a, h, r) = (
        polls.clone(),
        at_abort.clone(),
        handed.clone(),
        ready.clone(),
    );
    let (pool, token) = (owned.pool.clone(), drops.token());
    let handle = owned.pool.work.exec(futures::future::poll_fn(move |cx| {
        let _keep = &token;
        if p.fetch_add(1, Ordering::SeqCst) == 0 {
            // First poll: submit the aborter (on the worker, to its LIFO
            // slot: it runs before this task's re-queued token).
            r.wait();
            let abort = h.lock().unwrap().take().unwrap();
            let (p, a) = (p.clone(), a.clone());
            pool.work
                .exec_detached(async move {
                    // One worker: the yielding task is queued, not running.
                    a.store(p.load(Ordering::SeqCst), Ordering::SeqCst);
                    abort.abort();
                })
                .unwrap();
        }
        cx.waker().wake_by_ref();
        Poll::<()>::Pending
    }));
    *handed.lock().unwrap() = Some(handle.abort_handle());
    ready.open();
    assert_aborted(block_on(handle));
    let polled = polls.load(Ordering::SeqCst);
    assert!(polled >= 1);
    assert_eq!(
        polled,
        at_abort.load(Ordering::SeqCst),
        "not polled after the abort"
    );
    assert_eq!(drops.drops(), 1);
    assert!(close_within(owned, FAILSAFE));
}

/// A task that aborts itself through its own handle stops at its next
/// `Pending`, and its `Drop` runs.
#[test]
fn a_task_can_abort_itself() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let (tx, rx) = oneshot::channel::<AbortHandle>();
    let after = Arc::new(AtomicUsize::new(0));
    let a = after.clone();
    let handle = owned.pool.work.exec(async move {
        rx.await.unwrap().abort();
        common::yield_once().await;
        a.fetch_add(1, Ordering::SeqCst);
    });
    tx.send(handle.abort_handle()).unwrap();
    assert_aborted(block_on(handle));
    assert_eq!(after.load(Ordering::SeqCst), 0, "never resumed");
    assert!(close_within(owned, FAILSAFE));
}

#[test]
fn aborting_a_finished_task_or_twice_does_nothing() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let handle = owned.pool.work.exec(async { 5 });
    let abort = handle.abort_handle();
    while !handle.is_finished() {
        std::thread::yield_now();
    }
    assert!(abort.is_finished());
    handle.abort();
    abort.abort();
    assert_eq!(block_on(handle).unwrap(), 5, "the output is still there");
    abort.abort();

    let (gate, held) = hold_worker(&owned.pool.work);
    let drops = DropCounter::new();
    let token = drops.token();
    let handle = owned.pool.work.exec(async move { drop(token) });
    let abort = handle.abort_handle();
    assert!(!abort.is_finished());
    abort.abort();
    abort.clone().abort();
    handle.abort();
    gate.open();
    assert_aborted(block_on(handle));
    assert_eq!(drops.drops(), 1, "dropped once");
    assert!(abort.is_finished());
    block_on(held).unwrap();
    assert!(close_within(owned, FAILSAFE));
}

/// A parked future of a `complete_on_close` channel holds close until it
/// is aborted.
#[test]
fn an_aborted_task_stops_holding_close() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    let (tx, rx) = oneshot::channel::<()>();
    let handle = owned.pool.work.exec(async move {
        let _token = token;
        tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    block_on(rx).unwrap();
    let pool = owned.pool.clone();
    let closing = std::thread::spawn(move || block_on(owned.close()));
    while !pool.is_closing() {
        std::thread::yield_now();
    }
    assert!(!handle.is_finished(), "close waits for the parked task");
    handle.abort();
    assert_aborted(block_on(handle));
    closing.join().unwrap();
    assert_eq!(drops.drops(), 1);
}

/// An `AbortHandle` holds its task weakly: a parked task nobody can wake
/// (no waker kept, its `JoinHandle` dropped) is freed all the same, and
/// does not hold close.
#[test]
fn an_abort_handle_does_not_keep_an_abandoned_task_alive() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    let (tx, rx) = oneshot::channel::<()>();
    let handle = owned.pool.work.exec(async move {
        let _token = token;
        tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    block_on(rx).unwrap();
    let abort = handle.abort_handle();
    drop(handle);
    assert!(close_within(owned, FAILSAFE), "the abandoned task is freed");
    assert_eq!(drops.drops(), 1);
    assert!(abort.is_finished(), "gone counts as finished");
    abort.abort();
}

/// A refused task's handle has nothing to abort.
#[test]
fn aborting_a_refused_task_does_nothing() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    block_on(owned.close());
    let handle = pool.work.exec(async { 1 });
    let abort = handle.abort_handle();
    assert!(abort.is_finished());
    abort.abort();
    handle.abort();
    let error = block_on(handle).unwrap_err();
    assert_eq!(error.cancel_reason(), Some(CancelReason::PoolClosed));
}

/// Runs its closure when dropped.
struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
