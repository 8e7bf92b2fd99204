//! Fairness within a level: work submitted or woken from outside the pool
//! runs within a bounded number of polls, whatever the workers are doing
//! (yield loops, futures waking each other). The bound: a worker looks at a
//! channel's shared queue first on every 61st pop of that channel, as tokio
//! looks at its global queue every 61 ticks.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use common::{Flat, Gate, FAILSAFE};
use smartpool::prelude::*;

/// The documented bound: pops of one channel by one worker between two
/// looks at the channel's shared queue.
const FAIRNESS_INTERVAL: u64 = 61;

/// A spinner gives up after this many polls, so that a broken pool fails
/// the test instead of hanging it.
const GIVE_UP: u64 = 20_000_000;

/// Wakes itself and returns `Pending` until `stop` is set (or it gave
/// up), counting its polls; opens `started` on its first poll.
struct Spinner {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicU64>,
    started: Gate,
}

impl Future for Spinner {
    type Output = bool;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let polls = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        self.started.open();
        if self.stop.load(Ordering::SeqCst) {
            return Poll::Ready(true);
        }
        if polls > GIVE_UP {
            return Poll::Ready(false);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

struct Fixture {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicU64>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            stop: Arc::new(AtomicBool::new(false)),
            polls: Arc::new(AtomicU64::new(0)),
        }
    }

    fn spinner(&self) -> (Spinner, Gate) {
        let started = Gate::new();
        let spinner = Spinner {
            stop: self.stop.clone(),
            polls: self.polls.clone(),
            started: started.clone(),
        };
        (spinner, started)
    }

    /// A task that stops the spinners and says how many polls they made
    /// since `since`.
    fn stopper(&self, since: u64) -> impl Future<Output = u64> + Send + 'static {
        let (stop, polls) = (self.stop.clone(), self.polls.clone());
        async move {
            stop.store(true, Ordering::SeqCst);
            polls.load(Ordering::SeqCst) - since
        }
    }
}

/// One worker, a yield loop on it, a task from outside: the task runs
/// within the bound.
#[test]
fn a_yield_loop_lets_outside_work_in_within_the_bound() {
    for lifo in [true, false] {
        let owned = OwnedPool::new(Flat::with(1, lifo, true)).unwrap();
        let pool = owned.pool.clone();
        let f = Fixture::new();
        let (spinner, started) = f.spinner();
        let spun = pool.work.exec(spinner);
        assert!(started.wait_for(FAILSAFE));
        // Counted from when the task is queued (`exec` returned), as the
        // bound is: the stopper reports the poll count it ran at.
        let late = pool.work.exec(f.stopper(0));
        let since = f.polls.load(Ordering::SeqCst);
        let late = futures::executor::block_on(late)
            .unwrap()
            .saturating_sub(since);
        assert!(futures::executor::block_on(spun).unwrap(), "starved");
        assert!(
            late <= FAIRNESS_INTERVAL,
            "the outside task waited {late} polls of the yield loop (lifo slot: {lifo})"
        );
        futures::executor::block_on(owned.close());
    }
}

/// Two workers, each with a yield loop: outside work still runs.
#[test]
fn yield_loops_on_every_worker_let_outside_work_in() {
    let owned = OwnedPool::new(Flat::with(2, true, true)).unwrap();
    let pool = owned.pool.clone();
    let f = Fixture::new();
    let (a, a_started) = f.spinner();
    let (b, b_started) = f.spinner();
    let (a, b) = (pool.work.exec(a), pool.work.exec(b));
    assert!(a_started.wait_for(FAILSAFE) && b_started.wait_for(FAILSAFE));
    let late = pool.work.exec(f.stopper(0));
    futures::executor::block_on(late).unwrap();
    assert!(futures::executor::block_on(a).unwrap(), "starved");
    assert!(futures::executor::block_on(b).unwrap(), "starved");
    futures::executor::block_on(owned.close());
}

/// Two futures that wake each other (ping-pong through wakers, never
/// yielding themselves) on one worker, with and without the LIFO slot.
#[test]
fn futures_waking_each_other_let_outside_work_in() {
    for lifo in [false, true] {
        let owned = OwnedPool::new(Flat::with(1, lifo, true)).unwrap();
        let pool = owned.pool.clone();
        let f = Fixture::new();
        let peer: Arc<std::sync::Mutex<[Option<Waker>; 2]>> = Arc::default();
        let started = Gate::new();
        let make = |me: usize| {
            let (stop, polls, peer, started) = (
                f.stop.clone(),
                f.polls.clone(),
                peer.clone(),
                started.clone(),
            );
            futures::future::poll_fn(move |cx| {
                let n = polls.fetch_add(1, Ordering::SeqCst);
                started.open();
                let mut wakers = peer.lock().unwrap();
                wakers[me] = Some(cx.waker().clone());
                if let Some(other) = wakers[1 - me].take() {
                    other.wake();
                }
                if stop.load(Ordering::SeqCst) || n > GIVE_UP {
                    // Wake the other one last time so it sees `stop` too.
                    if let Some(other) = wakers[1 - me].take() {
                        other.wake();
                    }
                    return Poll::Ready(n <= GIVE_UP);
                }
                Poll::Pending
            })
        };
        let (a, b) = (pool.work.exec(make(0)), pool.work.exec(make(1)));
        assert!(started.wait_for(FAILSAFE));
        let late = pool.work.exec(f.stopper(0));
        futures::executor::block_on(late).unwrap();
        assert!(
            futures::executor::block_on(a).unwrap(),
            "starved (lifo: {lifo})"
        );
        assert!(
            futures::executor::block_on(b).unwrap(),
            "starved (lifo: {lifo})"
        );
        futures::executor::block_on(owned.close());
    }
}

/// A future parked on an outside event, woken from outside while the one
/// worker runs a yield loop: it runs within the bound.
#[test]
fn a_future_woken_from_outside_runs_within_the_bound() {
    let owned = OwnedPool::new(Flat::with(1, true, true)).unwrap();
    let pool = owned.pool.clone();
    let f = Fixture::new();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let parked = Gate::new();
    let waiter = {
        let (stop, polls, parked) = (f.stop.clone(), f.polls.clone(), parked.clone());
        let mut rx = rx;
        pool.work.exec(futures::future::poll_fn(move |cx| {
            match Pin::new(&mut rx).poll(cx) {
                Poll::Pending => {
                    parked.open();
                    Poll::Pending
                }
                Poll::Ready(_) => {
                    stop.store(true, Ordering::SeqCst);
                    Poll::Ready(polls.load(Ordering::SeqCst))
                }
            }
        }))
    };
    assert!(parked.wait_for(FAILSAFE));
    let (spinner, started) = f.spinner();
    let spun = pool.work.exec(spinner);
    assert!(started.wait_for(FAILSAFE));
    // The bound counts from the moment the woken future is queued: the
    // send wakes it, and its wake queues it, before `send` returns. (Read
    // before the send, the count would include the wake's own time, on an
    // outside thread whose first count for the pool registers its block.)
    tx.send(()).unwrap();
    let since = f.polls.load(Ordering::SeqCst);
    let at = futures::executor::block_on(waiter).unwrap();
    assert!(futures::executor::block_on(spun).unwrap(), "starved");
    assert!(
        at - since <= FAIRNESS_INTERVAL,
        "the woken future waited {} polls of the yield loop",
        at - since
    );
    futures::executor::block_on(owned.close());
}
