//! Work stealing: a task a busy worker submitted, in its LIFO slot or its
//! local queue, is found by another worker, which the submission wakes if
//! it sleeps.

mod common;

use common::{scaled, Gate, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn tasks_of_a_blocked_worker_are_stolen() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    for round in 0..scaled(100) {
        let inner_pool = pool.clone();
        // Spawned from a worker: the first goes to its LIFO slot, the
        // second to its local queue; it serves neither while it waits.
        let outer = pool.low.exec(run(move || {
            let gates = [Gate::new(), Gate::new()];
            for gate in &gates {
                let g = gate.clone();
                drop(inner_pool.low.exec(run(move || g.open())));
            }
            gates.iter().all(|gate| gate.wait_for(FAILSAFE))
        }));
        assert!(
            block_on(outer).unwrap(),
            "round {round}: a task of the blocked worker was never stolen"
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
