//! `yield_now`, `Pool::current` and `Pool::current_key`: a task gives its
//! worker up once and the level's waiting tasks run first; a task finds its
//! pool and the channel it came from, to submit children at its own level.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{close_within, Flat, Lv, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

/// A task submits two children from inside, then yields: both run before
/// it continues (with and without the LIFO slot: a yield never takes it).
#[test]
fn yield_now_lets_the_level_run_before_the_task_continues() {
    for lifo in [true, false] {
        let owned = OwnedPool::new(Flat::with(1, lifo, true)).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let handle = owned.pool.work.exec(async move {
            let pool = Pool::<Flat>::current().expect("inside a task");
            let children: Vec<_> = ["b", "c"]
                .into_iter()
                .map(|name| {
                    let o = o.clone();
                    pool.work.exec(run(move || o.lock().unwrap().push(name)))
                })
                .collect();
            o.lock().unwrap().push("a: yields");
            smartpool::yield_now().await;
            o.lock().unwrap().push("a: continues");
            for child in children {
                child.await.unwrap();
            }
        });
        block_on(handle).unwrap();
        let order = order.lock().unwrap().clone();
        assert_eq!(order.len(), 4, "{order:?}");
        assert_eq!(order[0], "a: yields");
        assert_eq!(order[3], "a: continues", "lifo {lifo}: {order:?}");
        assert!(close_within(owned, FAILSAFE));
    }
}

/// A `yield_now` loop on the only worker does not starve a task submitted
/// from outside (the Core v2 fairness rule): the outside task sets the flag
/// the loop waits for.
#[test]
fn a_yield_now_loop_lets_outside_work_in() {
    let owned = OwnedPool::new(Flat::with(1, true, true)).unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let (f, started) = (flag.clone(), common::Gate::new());
    let s = started.clone();
    let looping = owned.pool.work.exec(async move {
        s.open();
        let mut yields = 0u64;
        while !f.load(Ordering::SeqCst) {
            smartpool::yield_now().await;
            yields += 1;
        }
        yields
    });
    started.wait();
    let f = flag.clone();
    let setter = owned
        .pool
        .work
        .exec(run(move || f.store(true, Ordering::SeqCst)));
    block_on(setter).unwrap();
    assert!(block_on(looping).unwrap() >= 1);
    assert!(close_within(owned, FAILSAFE));
}

/// Off a pool, `yield_now` is a plain yield to whatever executor polls it.
#[test]
fn yield_now_off_a_pool_completes() {
    block_on(async {
        smartpool::yield_now().await;
        smartpool::yield_now().await;
    });
}

#[test]
fn current_is_the_pool_of_the_running_task() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    assert!(Pool::<TwoLevels>::current().is_none(), "not in a task");
    assert!(owned.pool.current_key().is_none(), "not in a task");
    let pool = owned.pool.clone();
    let same = owned.pool.low.exec(run(move || {
        let current = Pool::<TwoLevels>::current().expect("in a closure task");
        Arc::ptr_eq(&current, &pool)
    }));
    assert!(block_on(same).unwrap());
    let other_type = owned
        .pool
        .high
        .exec(async { Pool::<Flat>::current().is_none() });
    assert!(block_on(other_type).unwrap(), "another behavior type: None");
    assert!(close_within(owned, FAILSAFE));
}

/// A task learns the channel it came from, and submits a child there; a
/// woken future reports where its followup sent it (here: back home).
#[test]
fn current_key_names_the_channel_a_task_came_from() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    for (key, name) in [(Lv::High, "high"), (Lv::Low, "low")] {
        let pool = owned.pool.clone();
        let handle = pool.channel(key).exec(async move {
            let pool = Pool::<TwoLevels>::current().unwrap();
            let before = pool.current_key();
            smartpool::yield_now().await;
            let after = pool.current_key();
            let child = pool
                .channel(pool.current_key().unwrap())
                .exec(async { Pool::<TwoLevels>::current().unwrap().current_key() });
            (before, after, child.await.unwrap())
        });
        let (before, after, child) = block_on(handle).unwrap();
        assert_eq!(before, Some(key), "{name}");
        assert_eq!(after, Some(key), "{name}: after a wake");
        assert_eq!(child, Some(key), "{name}: the child runs at its level");
    }
    assert!(close_within(owned, FAILSAFE));
}

/// Two pools of one behavior type: each task finds its own, and the other
/// pool does not claim it.
#[test]
fn current_tells_two_pools_of_one_type_apart() {
    let (a, b) = (
        OwnedPool::new(TwoLevels::new(1)).unwrap(),
        OwnedPool::new(TwoLevels::new(1)).unwrap(),
    );
    let (pa, pb) = (a.pool.clone(), b.pool.clone());
    let seen = b.pool.high.exec(run(move || {
        let current = Pool::<TwoLevels>::current().unwrap();
        (
            Arc::ptr_eq(&current, &pb),
            pa.current_key(),
            pb.current_key(),
        )
    }));
    assert_eq!(block_on(seen).unwrap(), (true, None, Some(Lv::High)));
    assert!(close_within(a, FAILSAFE));
    assert!(close_within(b, FAILSAFE));
}
