//! Every value a user can pass is checked: a config that cannot be served is
//! an `Err`, never a panic, a hang, an abort or a lost task (the Hardening
//! issue, section 4). Each test here failed before its fix.

mod common;

use std::time::Duration;

use common::{close_within, FAILSAFE};
use smartpool::prelude::*;
use smartpool::{BlockingConfig, ConfigError, LevelOptions};

/// An idle blocking thread with an endless keep-alive waits for ever; it
/// does not overflow `Instant + Duration` and die counted as idle (which
/// stranded the next job, promised to it).
#[test]
fn an_endless_keep_alive_keeps_blocking_threads_serving() {
    let owned = smartpool::Builder::new()
        .threads(1)
        .blocking(BlockingConfig {
            keep_alive: Duration::MAX,
            ..BlockingConfig::default()
        })
        .build()
        .unwrap();
    let pool = owned.pool.clone();
    for i in 0..3 {
        let h = pool.spawn_blocking(move || i * 2);
        assert_eq!(owned.block_on(h).unwrap(), i * 2);
    }
    assert!(close_within(owned, FAILSAFE));
}

/// A RoundRobin slice of `Duration::MAX` serves its level for ever (a
/// slice end past what `Instant` holds), and cancels nothing.
#[test]
fn an_endless_round_robin_slice_runs_every_task() {
    let owned = smartpool::Builder::new()
        .levels(2)
        .threads(2)
        .schedule(ScheduleAlgorithm::RoundRobin(vec![
            Duration::MAX,
            Duration::from_millis(1),
        ]))
        .build()
        .unwrap();
    let pool = &owned.pool;
    let handles: Vec<_> = (0..100)
        .map(|i| pool.level(i % 2).exec(run(move || i)))
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(owned.block_on(h).unwrap(), i);
    }
    assert!(close_within(owned, FAILSAFE));
}

/// More levels than a pool can have channels is an `Err`, however many.
#[test]
fn too_many_levels_is_an_error_not_a_panic() {
    for levels in [smartpool::MAX_CHANNELS + 1, usize::MAX / 2, usize::MAX] {
        match smartpool::Builder::new().levels(levels).threads(1).build() {
            Err(ConfigError::TooManyChannels { channels }) => assert_eq!(channels, levels),
            Err(other) => panic!("levels({levels}): {other}"),
            Ok(_) => panic!("levels({levels}) built a pool"),
        }
    }
}

/// Reservations whose sum overflows `usize` are refused (the overflow
/// wrapped to a small sum in release builds, which passed validation).
#[test]
fn reservations_whose_sum_overflows_are_refused() {
    let built = smartpool::Builder::new()
        .levels(3)
        .threads(4)
        .level_options(0, LevelOptions::new().reserve(usize::MAX))
        .level_options(1, LevelOptions::new().reserve(2))
        .build();
    match built {
        Err(ConfigError::Reservations { reserved, threads }) => {
            assert_eq!((reserved, threads), (usize::MAX, 4));
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => panic!("an overflowing reservation built a pool"),
    }
}

/// A pool of 100,000 levels starts, serves its highest and lowest level,
/// and closes (start-up was cubic in levels: hours for this one).
#[test]
fn a_pool_of_a_hundred_thousand_levels_starts_and_serves() {
    let levels = 100_000;
    let owned = smartpool::Builder::new()
        .levels(levels)
        .threads(2)
        .build()
        .unwrap();
    let pool = &owned.pool;
    let top = pool.level(0).exec(run(|| "top"));
    let bottom = pool.level(levels - 1).exec(run(|| "bottom"));
    assert_eq!(owned.block_on(top).unwrap(), "top");
    assert_eq!(owned.block_on(bottom).unwrap(), "bottom");
    assert!(close_within(owned, FAILSAFE));
}

/// `join` runs both halves even when `a` panics on a closed pool (where
/// `b` comes back to the caller), then resumes `a`'s panic.
#[test]
fn join_runs_b_when_a_panics_on_a_closed_pool() {
    let owned = smartpool::Builder::new().threads(1).build().unwrap();
    let pool = owned.pool.clone();
    assert!(close_within(owned, FAILSAFE));
    let ran_b = std::sync::atomic::AtomicBool::new(false);
    let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        smartpool::join(
            pool.level(0),
            || panic!("a panics"),
            || ran_b.store(true, std::sync::atomic::Ordering::SeqCst),
        )
    }));
    assert!(joined.is_err(), "a's panic goes on to the caller");
    assert!(ran_b.load(std::sync::atomic::Ordering::SeqCst), "b ran");
}

/// One of the values a setting takes in [`extreme_pools`]: the edges of
/// its type and of its valid range.
fn pick<T: Copy>(u: &mut arbitrary::Unstructured<'_>, values: &[T]) -> arbitrary::Result<T> {
    Ok(*u.choose(values)?)
}

/// Property: a pool built from extreme values of every setting of the
/// `Builder` (levels, threads, schedule, complete_on_close, level options,
/// thread, blocking and stall settings) either is an `Err`, or serves a task on
/// its highest and lowest level and a `spawn_blocking`, and closes. Never
/// a panic, a hang or an abort.
#[test]
fn extreme_pools_build_or_refuse_and_close() {
    use smartpool::{MAX_CHANNELS, MAX_THREADS, MIN_STACK_SIZE};
    let durations = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_millis(1),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ];
    let mut built = 0;
    let mut refused = 0;
    arbtest::arbtest(|u| {
        let levels = pick(u, &[0, 1, 2, 3, 65, MAX_CHANNELS + 1, usize::MAX])?;
        let threads = pick(u, &[0, 1, 2, 3, MAX_THREADS + 1, usize::MAX])?;
        let mut b = smartpool::Builder::new().levels(levels).threads(threads);
        if u.arbitrary()? {
            let n = pick(u, &[0, 1, levels.min(65), levels.min(66)])?;
            let slices: Vec<Duration> = (0..n)
                .map(|_| pick(u, &durations))
                .collect::<arbitrary::Result<_>>()?;
            b = b.schedule(ScheduleAlgorithm::RoundRobin(slices));
        }
        for _ in 0..u.int_in_range(0..=3)? {
            let level = pick(u, &[0, 1, 2, 64, usize::MAX])?;
            b = b.complete_on_close(level, u.arbitrary()?);
        }
        for _ in 0..u.int_in_range(0..=3)? {
            let level = pick(u, &[0, 1, 2, 64, usize::MAX])?;
            let mut options = LevelOptions::new().reserve(pick(u, &[0, 1, 2, usize::MAX])?);
            if u.arbitrary()? {
                options = options.max_wait(pick(u, &durations)?);
            }
            b = b.level_options(level, options);
        }
        if u.arbitrary()? {
            b = b.stack_size(pick(u, &[0, MIN_STACK_SIZE - 1, MIN_STACK_SIZE, 8 << 20])?);
        }
        let stall = [
            None,
            Some(Duration::ZERO),
            Some(Duration::from_nanos(1)),
            Some(Duration::MAX),
        ];
        b = b.stall_threshold(pick(u, &stall)?);
        b = b.blocking(BlockingConfig {
            max_threads: pick(u, &[0, 1, usize::MAX])?,
            keep_alive: pick(u, &durations)?,
            stand_ins: u.arbitrary()?,
        });
        let Ok(owned) = b.build() else {
            refused += 1;
            return Ok(());
        };
        built += 1;
        let pool = owned.pool.clone();
        let lowest = pool.levels() - 1;
        let top = pool.level(0).exec(run(|| 1));
        let bottom = pool.level(lowest).exec(run(|| 2));
        let blocking = pool.spawn_blocking(|| 3);
        if threads > 0 {
            // A zero-thread pool runs its tasks while `block_on` drives it.
            assert_eq!(owned.block_on(top).unwrap(), 1);
            assert_eq!(owned.block_on(bottom).unwrap(), 2);
        } else {
            assert_eq!(
                owned
                    .block_on(async { (top.await, bottom.await) })
                    .0
                    .unwrap(),
                1
            );
        }
        assert_eq!(owned.block_on(blocking).unwrap(), 3);
        assert!(close_within(owned, FAILSAFE), "close hung");
        Ok(())
    })
    .budget_ms(4_000);
    // The generator covers both outcomes: about 3% of its cases build. In
    // 4 s under valgrind it draws about 130 cases, so none builds in about
    // one run of 70 there: the check is for native runs.
    if !common::under_valgrind() {
        assert!(built > 0 && refused > 0, "built {built}, refused {refused}");
    }
}
