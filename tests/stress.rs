//! Races between pushes, batch steals, idle workers and sleep: many small
//! bursts, each of which must complete. A stranded task shows as a burst
//! that does not finish within the fail-safe.

mod common;

use common::{CountDown, TwoLevels, FAILSAFE};
use smartpool::prelude::*;

#[test]
fn bursts_from_outside_and_inside_all_complete() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    for burst in 0..common::scaled(3_000) {
        // Outside submissions land in the injector (batch-stolen by the
        // workers); each spawns two more from inside (local deques).
        let outside = 1 + burst % 4;
        let done = CountDown::new(outside * 3);
        for i in 0..outside {
            let (pool2, done) = (pool.clone(), done.clone());
            let task = run(move || {
                for _ in 0..2 {
                    let done = done.clone();
                    drop(pool2.low.exec(run(move || done.tick())));
                }
                done.tick();
            });
            drop(if i % 2 == 0 {
                pool.high.exec(task)
            } else {
                pool.low.exec(task)
            });
        }
        assert!(
            done.wait_for(FAILSAFE),
            "burst {burst}: a task was stranded"
        );
        // Let the workers go idle or to sleep now and then.
        if burst % 500 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    assert!(common::close_within(owned, FAILSAFE));
}
