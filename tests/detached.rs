//! `Exec::exec_detached`: tasks without a handle run like tasks whose
//! handle was dropped at once; a refused one comes back to the caller.

mod common;

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Poll, Waker};

use common::{hold_worker, CountDown, DropCounter, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

/// The output of a detached task is dropped once it finished, on the pool:
/// nobody can take it.
#[test]
fn a_detached_task_runs_and_its_output_is_dropped() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = &owned.pool;
    let outputs = DropCounter::new();
    let done = CountDown::new(100);
    for _ in 0..100 {
        let (token, done) = (outputs.token(), done.clone());
        pool.low
            .exec_detached(run(move || {
                done.tick();
                token
            }))
            .unwrap();
    }
    assert!(done.wait_for(FAILSAFE), "every detached task ran");
    block_on(owned.close());
    assert_eq!(outputs.drops(), 100, "every output dropped");
}

/// The output goes as the task finishes, on the worker, even while a
/// waker the task left behind keeps its allocation alive.
#[test]
fn a_detached_output_is_dropped_as_the_task_finishes() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let outputs = DropCounter::new();
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    let (mut token, slot) = (Some(outputs.token()), kept.clone());
    pool.low
        .exec_detached(futures::future::poll_fn(move |cx| {
            *slot.lock().unwrap() = Some(cx.waker().clone());
            Poll::Ready(token.take())
        }))
        .unwrap();
    // One worker, one channel, first in, first out: this runs after it.
    block_on(pool.low.exec(async {})).unwrap();
    assert!(kept.lock().unwrap().is_some(), "the task left its waker");
    assert_eq!(outputs.drops(), 1, "its output is already gone");
    block_on(owned.close());
}

/// Detached futures are polled, woken and re-polled like any other.
#[test]
fn a_detached_future_is_woken_and_finishes() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let (tx, rx) = mpsc::channel();
    let (wake_tx, wake_rx) = futures::channel::oneshot::channel::<u32>();
    owned
        .pool
        .high
        .exec_detached(async move {
            let value = wake_rx.await.unwrap();
            tx.send(value).unwrap();
        })
        .unwrap();
    wake_tx.send(7).unwrap();
    assert_eq!(rx.recv_timeout(FAILSAFE).unwrap(), 7);
    block_on(owned.close());
}

/// A pool that no longer accepts work gives the future back, unpolled,
/// and says why; so does a channel of no pool.
#[test]
fn a_refused_detached_task_comes_back_to_the_caller() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    block_on(owned.close());
    let refused = pool.high.exec_detached(async { 41 + 1 }).unwrap_err();
    assert!(
        refused.to_string().contains("closing or closed"),
        "{refused}"
    );
    assert_eq!(
        block_on(refused.into_inner()),
        42,
        "the future came back whole"
    );

    let unattached = VecDequeChannel::new();
    let refused = unattached.exec_detached(async {}).unwrap_err();
    assert!(
        refused.to_string().contains("attached to no pool"),
        "{refused}"
    );
}

/// On a `complete_on_close` channel, close waits for a detached task as
/// for any other.
#[test]
fn close_waits_for_a_detached_task_on_a_complete_on_close_channel() {
    // `high` completes on close (TwoLevels::new).
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let (gate, held) = hold_worker(&owned.pool.high);
    let ran = DropCounter::new();
    let token = ran.token();
    owned
        .pool
        .high
        .exec_detached(run(move || drop(token)))
        .unwrap();
    let pool = owned.pool.clone();
    let close = std::thread::spawn(move || block_on(owned.close()));
    // Closing, the pool refuses new work but keeps what it accepted.
    while pool.high.exec_detached(async {}).is_ok() {
        std::thread::yield_now();
    }
    assert_eq!(ran.drops(), 0, "still queued behind the held worker");
    gate.open();
    close.join().unwrap();
    block_on(held).unwrap();
    assert_eq!(ran.drops(), 1, "close ran the detached task first");
}

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
struct Only;

/// One FIFO channel that counts the panics the pool reports.
struct Counting {
    channel: VecDequeChannel,
    panics: AtomicUsize,
}

impl PoolBehavior for Counting {
    type ChannelKey = Only;

    fn config(&self) -> PoolConfig<Only> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Only,
                complete_on_close: true,
            }]],
        }
    }

    fn channel(&self, _: Only) -> &dyn Channel {
        &self.channel
    }

    fn task_panicked(&self, from: Option<Only>, _panic: &(dyn Any + Send)) {
        assert_eq!(from, Some(Only));
        self.panics.fetch_add(1, Ordering::SeqCst);
    }
}

/// A detached task that panics goes to the behavior's `task_panicked`, as
/// a task whose handle was dropped does, and the worker goes on.
#[test]
fn a_detached_panic_goes_to_the_behavior() {
    let owned = OwnedPool::new(Counting {
        channel: VecDequeChannel::new(),
        panics: AtomicUsize::new(0),
    })
    .unwrap();
    let pool = owned.pool.clone();
    pool.channel
        .exec_detached(run(|| panic!("detached and panicking")))
        .unwrap();
    // One worker, first in, first out: this runs after the panic.
    let after = pool.channel.exec(run(|| "still serving"));
    assert_eq!(block_on(after).unwrap(), "still serving");
    assert_eq!(pool.panics.load(Ordering::SeqCst), 1);
    block_on(owned.close());
}
