//! The user model: behavior, prelude, `Arc<Pool>` deref, exec of closures
//! and futures, `JoinHandle`, detaching.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{scaled, Gate, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn closures_and_futures_run_and_return_their_output() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool: Arc<Pool<TwoLevels>> = owned.pool.clone();
    assert_eq!(pool.threads(), 2);
    let closure = pool.high.exec(run(|| 40 + 2));
    let future = pool.low.exec(async { String::from("done") });
    let fallible = pool.low.exec(try_run(|| "7".parse::<u8>()));
    assert_eq!(block_on(closure).unwrap(), 42);
    assert_eq!(block_on(future).unwrap(), "done");
    assert_eq!(block_on(fallible).unwrap(), Ok(7));
    block_on(owned.close());
}

#[test]
fn a_task_can_await_another_tasks_handle() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let inner_pool = pool.clone();
    let outer = pool.low.exec(async move {
        let inner = inner_pool.high.exec(run(|| 5));
        inner.await.unwrap() * 2
    });
    assert_eq!(block_on(outer).unwrap(), 10);
    block_on(owned.close());
}

#[test]
fn dropping_the_handle_detaches_the_task() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let done = Gate::new();
    let d = done.clone();
    drop(owned.pool.high.exec(run(move || d.open())));
    assert!(done.wait_for(FAILSAFE), "a detached task still runs");
    block_on(owned.close());
}

#[test]
fn many_tasks_from_many_threads_all_run_once() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..4)
        .map(|_| {
            let pool = owned.pool.clone();
            let count = count.clone();
            std::thread::spawn(move || {
                let handles: Vec<_> = (0..scaled(5_000))
                    .map(|i| {
                        let count = count.clone();
                        let run_it = run(move || count.fetch_add(1, Ordering::Relaxed));
                        if i % 2 == 0 {
                            pool.high.exec(run_it)
                        } else {
                            pool.low.exec(run_it)
                        }
                    })
                    .collect();
                for h in handles {
                    block_on(h).unwrap();
                }
            })
        })
        .collect();
    for s in submitters {
        s.join().unwrap();
    }
    assert_eq!(count.load(Ordering::SeqCst), 4 * scaled(5_000));
    block_on(owned.close());
}

#[test]
fn tasks_spawned_inside_the_pool_run() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let root = pool.clone().low.exec(async move {
        let handles: Vec<_> = (0..scaled(10_000))
            .map(|_| {
                let c = c.clone();
                pool.low
                    .exec(run(move || c.fetch_add(1, Ordering::Relaxed)))
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    block_on(root).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), scaled(10_000));
    block_on(owned.close());
}
