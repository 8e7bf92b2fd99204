//! Work stealing: a task queued on a busy worker's local queue is found by
//! another worker, which the push wakes.

mod common;

use common::{scaled, Gate, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn a_task_on_a_blocked_workers_local_queue_is_stolen() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    for round in 0..scaled(100) {
        let inner_pool = pool.clone();
        // Spawned from a worker: goes to that worker's local queue, which
        // that worker cannot serve while it waits for the task.
        let outer = pool.low.exec(run(move || {
            let stolen = Gate::new();
            let s = stolen.clone();
            drop(inner_pool.low.exec(run(move || s.open())));
            stolen.wait_for(FAILSAFE)
        }));
        assert!(
            block_on(outer).unwrap(),
            "round {round}: the local task was never stolen"
        );
    }
    block_on(owned.close());
}

#[test]
fn a_high_task_spawned_inside_runs_while_its_spawner_is_busy() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let inner_pool = pool.clone();
    let outer = pool.low.exec(run(move || {
        let ran = Gate::new();
        let r = ran.clone();
        drop(inner_pool.high.exec(run(move || r.open())));
        ran.wait_for(FAILSAFE)
    }));
    assert!(block_on(outer).unwrap());
    block_on(owned.close());
}
