//! Close with a spatial channel: a submission after close comes back; queued
//! tasks (placed or not) all run on a `complete_on_close` channel and are
//! all dropped, each exactly once, on another.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{hold, world, DropCounter};
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn a_spatial_task_after_close_comes_back() {
    let owned = world::<[f64; 2]>(1, true);
    let pool = owned.pool.clone();
    block_on(owned.close());
    let refused = pool.spatial.try_exec(async { 3 }, [1.0, 2.0]).unwrap_err();
    assert!(refused.to_string().contains("closing or closed"));
    assert_eq!(block_on(refused.into_inner()), 3);
    assert!(block_on(pool.spatial.exec(async { 4 }, [0.0, 0.0]))
        .unwrap_err()
        .is_cancelled());
    assert!(pool.spatial.is_empty());
}

/// Holds the only worker, queues 100 placed and 10 unplaced tasks that
/// each count their run and the drop of a token, begins close, releases the
/// worker and waits for close. Returns (runs, drops, cancelled handles).
fn close_with_queued_tasks(complete_on_close: bool) -> (usize, usize, usize) {
    let owned = world::<[f32; 3]>(1, complete_on_close);
    let pool = owned.pool.clone();
    let (gate, held) = hold(&owned);
    let ran = Arc::new(AtomicUsize::new(0));
    let drops = DropCounter::new();
    let task = || {
        let (ran, token) = (ran.clone(), drops.token());
        run(move || {
            let _token = token;
            ran.fetch_add(1, Ordering::SeqCst);
        })
    };
    let mut handles: Vec<_> = (0..100)
        .map(|i| pool.spatial.exec(task(), [i as f32, 0.0, 0.0]))
        .collect();
    handles.extend((0..10).map(|_| Exec::exec(&pool.spatial, task())));
    assert_eq!(pool.spatial.len(), 110);
    let close = owned.close();
    gate.open();
    block_on(close);
    block_on(held).unwrap();
    let mut cancelled = 0;
    for h in handles {
        assert!(h.is_finished(), "close resolved with a task unsettled");
        if block_on(h).is_err_and(|e| e.is_cancelled()) {
            cancelled += 1;
        }
    }
    assert!(pool.spatial.is_empty());
    (ran.load(Ordering::SeqCst), drops.drops(), cancelled)
}

#[test]
fn close_runs_every_queued_task_of_a_complete_on_close_spatial_channel() {
    assert_eq!(close_with_queued_tasks(true), (110, 110, 0));
}

#[test]
fn close_drops_every_queued_task_of_another_spatial_channel_once() {
    assert_eq!(close_with_queued_tasks(false), (0, 110, 110));
}
