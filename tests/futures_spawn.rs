//! `futures::task::Spawn` on channels: `SpawnExt::spawn` and
//! `spawn_with_handle` run futures at the channel's level; a pool that
//! refuses work says `shutdown`.

mod common;

use common::{hold_worker, TwoLevels};
use futures::executor::block_on;
use futures::task::{Spawn, SpawnExt};
use smartpool::prelude::*;

#[test]
fn spawned_futures_run_on_the_channel() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let (tx, rx) = std::sync::mpsc::channel();
    pool.high
        .spawn(async move { tx.send(Pool::<TwoLevels>::current().is_some()).unwrap() })
        .unwrap();
    assert!(rx.recv().unwrap(), "ran on the pool");
    // MultiChannel, and any channel through `spawner()`, the same way.
    let multi = MultiChannel::new(2, VecDequeChannel::new);
    let unattached = multi.spawn_with_handle(async {});
    assert!(unattached.unwrap_err().is_shutdown(), "attached to no pool");
    let low: &dyn Channel = &pool.low;
    let handle = low.spawner().spawn_with_handle(async { 7 }).unwrap();
    assert_eq!(block_on(handle), 7);
    block_on(owned.close());
}

/// Spawning keeps the channel's level: a held worker runs the high future
/// before the low one queued first.
#[test]
fn spawned_futures_keep_their_level() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.high);
    let (tx, rx) = std::sync::mpsc::channel();
    let tx2 = tx.clone();
    pool.low
        .spawn(async move { tx.send("low").unwrap() })
        .unwrap();
    pool.high
        .spawn(async move { tx2.send("high").unwrap() })
        .unwrap();
    gate.open();
    block_on(held).unwrap();
    let order: Vec<_> = rx.iter().take(2).collect();
    assert_eq!(order, ["high", "low"]);
    block_on(owned.close());
}

#[test]
fn a_closed_pool_refuses_with_shutdown() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    assert!(pool.high.status().is_ok());
    block_on(owned.close());
    let refused = pool.high.spawn(async {});
    assert!(refused.unwrap_err().is_shutdown());
}
