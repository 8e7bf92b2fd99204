//! Worker thread settings (`ThreadConfig`, and the `Builder`'s setters):
//! names, stack size, start and stop hooks, on both ways to build a pool.

mod common;

use std::sync::{Arc, Mutex};

use common::{Lv, TwoLevels};
use smartpool::prelude::*;
use smartpool::{ConfigError, ThreadConfig, MIN_STACK_SIZE};

#[test]
fn builder_names_threads_and_calls_hooks_once_each() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let stopped = Arc::new(Mutex::new(Vec::new()));
    let (s, t) = (started.clone(), stopped.clone());
    let owned = Builder::new()
        .threads(2)
        .thread_name(|index| format!("game-{index}"))
        .stack_size(8 << 20)
        .on_thread_start(move |index| s.lock().unwrap().push(index))
        .on_thread_stop(move |index| t.lock().unwrap().push(index))
        .build()
        .unwrap();
    // (Not `owned.block_on`, whose thread would run the task itself.)
    let name = futures::executor::block_on(
        owned
            .pool
            .level(0)
            .exec(run(|| std::thread::current().name().map(String::from))),
    )
    .unwrap();
    assert!(
        matches!(name.as_deref(), Some("game-0" | "game-1")),
        "{name:?}"
    );
    owned.close().wait();
    // Every worker ran both hooks once by the time close resolved.
    let mut started = started.lock().unwrap().clone();
    let mut stopped = stopped.lock().unwrap().clone();
    started.sort();
    stopped.sort();
    assert_eq!((started, stopped), (vec![0, 1], vec![0, 1]));
}

/// A behavior of one's own sets them through `thread_config`.
struct Named(TwoLevels);

impl PoolBehavior for Named {
    type ChannelKey = Lv;
    fn config(&self) -> PoolConfig<Lv> {
        self.0.config()
    }
    fn channel(&self, key: Lv) -> &dyn Channel {
        self.0.channel(key)
    }
    fn thread_config(&self) -> ThreadConfig {
        ThreadConfig::new().name(|index| format!("named-{index}"))
    }
}

#[test]
fn a_behavior_names_its_threads() {
    let owned = OwnedPool::new(Named(TwoLevels::new(1))).unwrap();
    let name = futures::executor::block_on(
        owned
            .pool
            .0
            .high
            .exec(run(|| std::thread::current().name().map(String::from))),
    )
    .unwrap();
    assert_eq!(name.as_deref(), Some("named-0"));
    owned.close().wait();
}

/// A hook that panics is logged; the worker serves tasks all the same.
#[test]
fn a_panicking_hook_does_not_stop_the_worker() {
    let owned = Builder::new()
        .threads(1)
        .on_thread_start(|_| panic!("start hook fails"))
        .on_thread_stop(|_| panic!("stop hook fails"))
        .build()
        .unwrap();
    let task = owned.pool.level(0).exec(run(|| 5));
    assert_eq!(owned.block_on(task).unwrap(), 5);
    owned.close().wait();
}

#[test]
fn a_stack_too_small_is_refused() {
    let err = Builder::new()
        .stack_size(MIN_STACK_SIZE - 1)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, ConfigError::StackSize { bytes } if bytes == MIN_STACK_SIZE - 1),
        "{err}"
    );
    assert!(err.to_string().contains("worker stack"), "{err}");
    // The smallest allowed runs tasks, also in a scope that helps.
    let owned = Builder::new()
        .threads(2)
        .stack_size(MIN_STACK_SIZE)
        .build()
        .unwrap();
    let pool = owned.pool.clone();
    let sum = owned
        .block_on(owned.pool.level(0).exec(run(move || {
            let mut parts = [0u64; 8];
            smartpool::scope(|s| {
                for (i, part) in parts.iter_mut().enumerate() {
                    s.exec(pool.level(0), run(move || *part = i as u64));
                }
            });
            parts.iter().sum::<u64>()
        })))
        .unwrap();
    assert_eq!(sum, 28);
    owned.close().wait();
}
