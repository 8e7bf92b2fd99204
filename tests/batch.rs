//! `Exec::exec_batch`: many tasks, one announcement.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use common::{Flat, TwoLevels, FAILSAFE};
use smartpool::prelude::*;
use smartpool::Run;

#[test]
fn a_batch_runs_every_task_and_keeps_the_order_of_its_handles() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let handles = owned
        .pool
        .work
        .exec_batch((0..1_000u64).map(|i| run(move || i * 2)));
    assert_eq!(handles.len(), 1_000);
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(futures::executor::block_on(h).unwrap(), i as u64 * 2);
    }
    assert!(owned
        .pool
        .work
        .exec_batch(Vec::<Run<fn()>>::new())
        .is_empty());
    futures::executor::block_on(owned.close());
}

/// Two tasks that can only finish together (a barrier of two): the batch
/// must reach both workers, which start asleep.
#[test]
fn a_batch_reaches_every_sleeping_worker() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    for _ in 0..100 {
        let barrier = Arc::new(Barrier::new(2));
        let handles = owned.pool.work.exec_batch((0..2).map(|_| {
            let b = barrier.clone();
            run(move || {
                b.wait();
            })
        }));
        for h in handles {
            futures::executor::block_on(h).unwrap();
        }
    }
    futures::executor::block_on(owned.close());
}

/// From inside a task, and as futures.
#[test]
fn a_batch_from_a_task() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let outer = owned.pool.high.exec(async move {
        let handles = pool.low.exec_batch((0..100).map(|_| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
            }
        }));
        for h in handles {
            h.await.unwrap();
        }
    });
    futures::executor::block_on(outer).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 100);
    futures::executor::block_on(owned.close());
}

/// Refused work comes back as cancellations that say why.
#[test]
fn a_refused_batch_says_why() {
    let unattached = VecDequeChannel::new();
    for h in unattached.exec_batch((0..3).map(|_| run(|| ()))) {
        let err = futures::executor::block_on(h).unwrap_err();
        assert_eq!(err.cancel_reason(), Some(CancelReason::ChannelNotAttached));
    }
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    futures::executor::block_on(owned.close());
    for h in pool.work.exec_batch((0..3).map(|_| run(|| ()))) {
        let err = futures::executor::block_on(h).unwrap_err();
        assert_eq!(err.cancel_reason(), Some(CancelReason::PoolClosed));
    }
}

/// Close waits for a batch on a `complete_on_close` channel.
#[test]
fn close_completes_a_batch() {
    let owned = OwnedPool::new(Flat::with(2, true, true)).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let handles = owned.pool.work.exec_batch((0..500).map(|_| {
        let r = ran.clone();
        run(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
    }));
    drop(handles);
    assert!(common::close_within(owned, FAILSAFE));
    assert_eq!(ran.load(Ordering::SeqCst), 500);
}
