//! Worker thread settings (`ThreadConfig`, and the `Builder`'s setters):
//! names, stack size, start and stop hooks, on both ways to build a pool.

mod common;

use std::sync::{Arc, Mutex};

use common::{Lv, TwoLevels};
use smartpool::prelude::*;
use smartpool::{Builder, ConfigError, ThreadConfig, MIN_STACK_SIZE};

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
    // (Not `owned.block_on`, whose thread could run the task itself.)
    let task = owned
        .pool
        .level(0)
        .exec(run(|| std::thread::current().name().map(String::from)));
    let ran_on = futures::executor::block_on(task).unwrap();
    assert_eq!(ran_on.as_deref(), Some("smartpool-w0"));
    owned.close().wait();
}

/// A name function that panics, or gives a name no thread can have, is an
/// error before any thread starts.
#[test]
fn a_bad_thread_name_is_refused() {
    let err = Builder::new()
        .threads(2)
        .thread_name(|index| {
            assert!(index == 0, "no name for {index}");
            "first".into()
        })
        .build()
        .unwrap_err();
    assert!(matches!(err, ConfigError::ThreadName { index: 1 }), "{err}");
    let err = Builder::new()
        .threads(1)
        .thread_name(|_| "nul\0name".into())
        .build()
        .unwrap_err();
    assert!(matches!(err, ConfigError::ThreadName { index: 0 }), "{err}");
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
    // The smallest allowed runs tasks on its workers, also nested scopes
    // whose waits help (a one-thread pool: the worker runs them all) and a
    // panicking task among them.
    let owned = Builder::new()
        .threads(1)
        .stack_size(MIN_STACK_SIZE)
        .build()
        .unwrap();
    let pool = owned.pool.clone();
    fn tree(pool: &smartpool::Pool<smartpool::Leveled>, depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let mut parts = [0u64; 2];
        smartpool::scope(|s| {
            for part in parts.iter_mut() {
                s.exec(pool.level(0), run(move || *part = tree(pool, depth - 1)));
            }
        });
        parts.iter().sum()
    }
    let p = pool.clone();
    let leaves = futures::executor::block_on(pool.level(0).exec(run(move || tree(&p, 3))));
    assert_eq!(leaves.unwrap(), 8);
    let panicked = futures::executor::block_on(pool.level(0).exec(run(|| panic!("contained"))));
    assert!(panicked.unwrap_err().is_panic());
    owned.close().wait();
}
