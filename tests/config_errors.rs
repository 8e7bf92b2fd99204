//! A bad configuration is an error with a clear message, never a panic.

mod common;

use std::time::Duration;

use common::{Lv, TwoLevels};
use smartpool::prelude::*;
use smartpool::ConfigError;

struct Configured(PoolConfig<Lv>, VecDequeChannel);

impl PoolBehavior for Configured {
    type ChannelKey = Lv;
    fn config(&self) -> PoolConfig<Lv> {
        self.0.clone()
    }
    fn channel(&self, _key: Lv) -> &dyn Channel {
        &self.1
    }
}

fn params(key: Lv) -> ChannelParams<Lv> {
    ChannelParams {
        key,
        complete_on_close: false,
    }
}

fn error_of(config: PoolConfig<Lv>) -> ConfigError {
    OwnedPool::new(Configured(config, VecDequeChannel::new())).expect_err("config must be refused")
}

#[test]
fn no_levels() {
    let e = error_of(PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![],
    });
    assert!(matches!(e, ConfigError::NoLevels));
    assert_eq!(e.to_string(), "invalid pool config: no levels");
}

#[test]
fn empty_level() {
    let e = error_of(PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![vec![params(Lv::High)], vec![]],
    });
    assert!(matches!(e, ConfigError::EmptyLevel { level: 1 }));
    assert!(e.to_string().contains("level 1 has no channel"), "{e}");
}

#[test]
fn duplicate_key() {
    let e = error_of(PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![vec![params(Lv::High)], vec![params(Lv::High)]],
    });
    assert!(matches!(e, ConfigError::DuplicateKey { .. }));
    assert!(e.to_string().contains("High appears more than once"), "{e}");
}

#[test]
fn zero_threads_is_valid() {
    // A zero-thread pool is driven by its caller (tests/zero_threads.rs).
    let config = PoolConfig {
        threads: 0,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![vec![params(Lv::High)]],
    };
    assert!(config.validate().is_ok());
}

#[test]
fn round_robin_slices_must_match_levels() {
    let e = error_of(PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::RoundRobin(vec![Duration::from_millis(1)]),
        levels: vec![vec![params(Lv::High)], vec![params(Lv::Low)]],
    });
    assert!(matches!(
        e,
        ConfigError::SliceCount {
            levels: 2,
            slices: 1
        }
    ));
    let e = error_of(PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::RoundRobin(vec![Duration::ZERO]),
        levels: vec![vec![params(Lv::High)]],
    });
    assert!(matches!(e, ConfigError::ZeroSlice { level: 0 }));
}

#[test]
fn two_keys_naming_one_channel_are_refused() {
    // `Configured::channel` returns the same channel for every key.
    let e = error_of(PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![vec![params(Lv::High)], vec![params(Lv::Low)]],
    });
    assert!(matches!(e, ConfigError::ChannelAttached { .. }), "{e}");
}

#[test]
fn a_good_config_still_starts_after_errors() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    assert_eq!(
        futures::executor::block_on(owned.pool.high.exec(run(|| 1))).unwrap(),
        1
    );
}

/// The limit is one the pool really supports: a pool of `MAX_THREADS`
/// starts, runs a task on every worker, and closes. (Under valgrind and
/// miri, which run threads one at a time, a smaller pool.)
#[test]
fn a_pool_of_max_threads_starts_and_one_more_is_an_error() {
    let e = error_of(PoolConfig {
        threads: smartpool::MAX_THREADS + 1,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![vec![params(Lv::High)]],
    });
    assert!(matches!(e, ConfigError::TooManyThreads { .. }));
    assert!(e.to_string().contains("at most 4096"), "{e}");

    let shrunk = cfg!(miri) || std::env::var_os("SMARTPOOL_UNDER_VALGRIND").is_some();
    let threads = if shrunk { 64 } else { smartpool::MAX_THREADS };
    let owned = OwnedPool::new(Configured(
        PoolConfig {
            threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Lv::High,
                complete_on_close: true,
            }]],
        },
        VecDequeChannel::new(),
    ))
    .expect("a pool of MAX_THREADS starts");
    assert_eq!(owned.pool.threads(), threads);
    // A barrier of every worker: each task waits until all have started,
    // so every worker runs one.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let barrier = barrier.clone();
            owned.pool.1.exec(run(move || {
                barrier.wait();
            }))
        })
        .collect();
    for handle in handles {
        futures::executor::block_on(handle).unwrap();
    }
    futures::executor::block_on(owned.close());
}

/// A task records its channel in 24 bits of one word: a config with more
/// channels than that is refused with an error naming the limit (checked
/// before the keys are, so one key repeated will do).
#[test]
fn more_than_max_channels_is_an_error() {
    let one = ChannelParams {
        key: 0u8,
        complete_on_close: false,
    };
    let e = PoolConfig {
        threads: 1,
        schedule: ScheduleAlgorithm::HighestFirst,
        levels: vec![vec![one], vec![one; smartpool::MAX_CHANNELS]],
    }
    .validate()
    .unwrap_err();
    assert!(
        matches!(e, ConfigError::TooManyChannels { channels } if channels == smartpool::MAX_CHANNELS + 1)
    );
    assert!(e.to_string().contains("at most 16777216"), "{e}");
}
