//! `Builder`: a pool of N FIFO levels in one line, with the documented
//! defaults (highest level first, every level but the lowest completing on
//! close) and clear errors for settings that name no level.

mod common;

use std::sync::{Arc, Mutex};

use common::hold_worker;
use smartpool::prelude::*;
use smartpool::{Builder, ConfigError, LevelOptions};

#[test]
fn levels_run_their_tasks_highest_first() {
    let owned = Builder::new().levels(3).threads(1).build().unwrap();
    let pool = &owned.pool;
    assert_eq!((pool.levels(), pool.threads()), (3, 1));
    let order = Arc::new(Mutex::new(Vec::new()));
    let (gate, held) = hold_worker(pool.level(0));
    let handles: Vec<_> = [2, 1, 0, 2, 1, 0]
        .into_iter()
        .map(|level| {
            let order = order.clone();
            pool.level(level)
                .exec(run(move || order.lock().unwrap().push(level)))
        })
        .collect();
    gate.open();
    // Waited for with a plain executor: `owned.block_on` would run the
    // pool's tasks on this thread too, a second runner beside the worker,
    // whose pushes to `order` could then interleave with the worker's
    // (each runner still takes highest first; 2 runs in 300 failed so).
    futures::executor::block_on(held).unwrap();
    for h in handles {
        futures::executor::block_on(h).unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 0, 1, 1, 2, 2]);
    owned.close().wait();
}

/// By default every level but the lowest completes on close; the lowest's
/// queued tasks are dropped.
#[test]
fn close_completes_every_level_but_the_lowest() {
    let owned = Builder::new().levels(2).threads(1).build().unwrap();
    let pool = owned.pool.clone();
    let (gate, held) = hold_worker(pool.level(0));
    let kept = pool.level(0).exec(run(|| "kept"));
    let dropped = pool.level(1).exec(run(|| "dropped"));
    let closing = owned.close();
    gate.open();
    closing.wait();
    futures::executor::block_on(held).unwrap();
    assert_eq!(futures::executor::block_on(kept).unwrap(), "kept");
    assert!(futures::executor::block_on(dropped)
        .unwrap_err()
        .is_cancelled());
}

/// `complete_on_close` and `level_options` change one level each.
#[test]
fn settings_change_the_level_they_name() {
    let owned = Builder::new()
        .levels(2)
        .threads(2)
        .complete_on_close(1, true)
        .complete_on_close(0, false)
        .level_options(0, LevelOptions::new().reserve(1))
        .build()
        .unwrap();
    let pool = owned.pool.clone();
    let (gate, held) = hold_worker(pool.level(1));
    let low = pool.level(1).exec(run(|| "low"));
    let closing = owned.close();
    gate.open();
    closing.wait();
    futures::executor::block_on(held).unwrap();
    assert_eq!(futures::executor::block_on(low).unwrap(), "low");
}

#[test]
fn settings_that_name_no_level_are_errors() {
    let err = Builder::new().levels(0).build().unwrap_err();
    assert!(matches!(err, ConfigError::NoLevels), "{err}");
    let err = Builder::new()
        .levels(3)
        .complete_on_close(3, true)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::NoSuchLevel {
                level: 3,
                levels: 3
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("no level 3"), "{err}");
    let err = Builder::new()
        .levels(1)
        .level_options(1, LevelOptions::new())
        .build()
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::NoSuchLevel { level: 1, .. }),
        "{err}"
    );
    // What the config validation refuses is refused here too.
    let err = Builder::new()
        .levels(2)
        .threads(1)
        .level_options(0, LevelOptions::new().reserve(1))
        .build()
        .unwrap_err();
    assert!(matches!(err, ConfigError::Reservations { .. }), "{err}");
}

#[test]
#[should_panic(expected = "no level 5: the pool has 2")]
fn a_level_past_the_last_panics_with_its_index() {
    let owned = Builder::new().levels(2).threads(1).build().unwrap();
    let _ = owned.pool.level(5);
}

/// With no thread count, one worker a core; with zero, the caller drives
/// the pool (here `Close::wait` runs the task close waits for).
#[test]
fn thread_counts_default_to_the_cores_and_zero_is_caller_driven() {
    let owned = Builder::new().build().unwrap();
    assert!(owned.pool.threads() >= 1);
    assert_eq!(owned.pool.levels(), 1);
    owned.close().wait();
    // A lone level completes on close (as rayon finishes what was spawned).
    let owned = Builder::new().threads(0).build().unwrap();
    let task = owned.pool.level(0).exec(run(|| 3));
    owned.close().wait();
    assert_eq!(futures::executor::block_on(task).unwrap(), 3);
    let owned = Builder::new().levels(2).threads(0).build().unwrap();
    let task = owned.pool.level(0).exec(run(|| 7));
    owned.close().wait();
    assert_eq!(futures::executor::block_on(task).unwrap(), 7);
}

/// A detached task's panic reaches the panic handler with its level; a
/// panic whose handle is held goes to the handle only.
#[test]
fn a_detached_panic_reaches_the_handler() {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    let owned = Builder::new()
        .levels(2)
        .threads(1)
        .panic_handler(move |level, payload| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .unwrap_or_default();
            tx.lock().unwrap().send((level, message)).unwrap();
        })
        .build()
        .unwrap();
    let pool = &owned.pool;
    let held = pool.level(0).exec(run(|| panic!("seen by the handle")));
    assert!(futures::executor::block_on(held).unwrap_err().is_panic());
    // Detached before it can run: the one worker is held meanwhile.
    let (gate, holder) = hold_worker(pool.level(0));
    drop(pool.level(1).exec(run(|| panic!("nobody holds me"))));
    gate.open();
    futures::executor::block_on(holder).unwrap();
    assert_eq!(rx.recv().unwrap(), (Some(1), "nobody holds me".to_string()));
    owned.close().wait();
    assert!(rx.try_recv().is_err(), "the held one was not handed over");
}
