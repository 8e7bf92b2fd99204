//! Starvation bounds (`LevelOptions::max_wait`): under HighestFirst, a
//! level with a bound is served at least once per bound while it has
//! work, whatever floods the levels above it; without one, priority is
//! strict.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{CountDown, TwoLevels, FAILSAFE};
use smartpool::prelude::*;
use smartpool::{ConfigError, LevelOptions};

/// A high task that works for about `spin`, then submits its successor
/// (before it ends: the high level never empties) until `stop`.
fn flood(pool: Arc<Pool<TwoLevels>>, spin: Duration, stop: Arc<AtomicBool>, ran: Arc<AtomicUsize>) {
    let p = pool.clone();
    drop(pool.high.exec(run(move || {
        let start = Instant::now();
        while start.elapsed() < spin {
            std::hint::spin_loop();
        }
        ran.fetch_add(1, Ordering::SeqCst);
        if !stop.load(Ordering::SeqCst) {
            flood(p, spin, stop, ran);
        }
    })));
}

#[test]
fn bad_bounds_are_refused() {
    let zero = TwoLevels::new(1).with_options(vec![
        LevelOptions::new(),
        LevelOptions::new().max_wait(Duration::ZERO),
    ]);
    let Err(err) = OwnedPool::new(zero) else {
        panic!("a zero bound")
    };
    assert!(
        matches!(err, ConfigError::ZeroMaxWait { level: 1 }),
        "{err:?}"
    );
    let round_robin = TwoLevels::with(
        1,
        ScheduleAlgorithm::RoundRobin(vec![Duration::from_millis(1); 2]),
        (true, false),
    )
    .with_options(vec![
        LevelOptions::new(),
        LevelOptions::new().max_wait(Duration::from_millis(5)),
    ]);
    let Err(err) = OwnedPool::new(round_robin) else {
        panic!("a bound under RoundRobin")
    };
    assert!(
        matches!(err, ConfigError::MaxWaitNeedsHighestFirst { level: 1 }),
        "{err:?}"
    );
    assert!(err.to_string().contains("HighestFirst"), "{err}");
}

/// The flood never stops by itself (it stops when the low task ran): the
/// low task starts only because of its bound. The wait is printed; its
/// target (bound plus one task length) is a benchmark row, not asserted.
#[test]
fn a_bounded_level_starts_under_a_flood_that_never_ends() {
    for threads in [1, 2] {
        let bound = Duration::from_millis(5);
        let behavior = TwoLevels::new(threads).with_options(vec![
            LevelOptions::new(),
            LevelOptions::new().max_wait(bound),
        ]);
        let owned = OwnedPool::new(behavior).unwrap();
        let pool = owned.pool.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..threads * 3 {
            flood(
                pool.clone(),
                Duration::from_micros(50),
                stop.clone(),
                ran.clone(),
            );
        }
        // Let the flood fill every worker first.
        while ran.load(Ordering::SeqCst) < 100 {
            std::thread::yield_now();
        }
        let started = CountDown::new(1);
        let (s, st) = (started.clone(), stop.clone());
        let submitted = Instant::now();
        let low = pool.low.exec(run(move || {
            st.store(true, Ordering::SeqCst);
            s.tick();
            submitted.elapsed()
        }));
        assert!(
            started.wait_for(FAILSAFE),
            "{threads} threads: the low task never started"
        );
        let waited = futures::executor::block_on(low).unwrap();
        println!("{threads} threads: the low task waited {waited:?} (bound {bound:?})");
        drop(pool);
        futures::executor::block_on(owned.close());
    }
}

/// Without a bound, priority is strict: the low task starts only once a
/// flood of a fixed number of high tasks is over.
#[test]
fn without_a_bound_priority_is_strict() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..6 {
        flood(
            pool.clone(),
            Duration::from_micros(20),
            stop.clone(),
            ran.clone(),
        );
    }
    while ran.load(Ordering::SeqCst) < 100 {
        std::thread::yield_now();
    }
    let r = ran.clone();
    let low = pool.low.exec(run(move || r.load(Ordering::SeqCst)));
    while ran.load(Ordering::SeqCst) < 2_000 {
        std::thread::yield_now();
    }
    assert!(!low.is_finished(), "the low task ran during the flood");
    stop.store(true, Ordering::SeqCst);
    assert!(futures::executor::block_on(low).unwrap() >= 2_000);
    drop(pool);
    futures::executor::block_on(owned.close());
}

/// A bound on a level whose work is served anyway changes nothing: with no
/// higher work, every low task runs. (Not asserted: the exact order, which
/// the FIFO channel's fairness rule may change for tasks submitted from
/// outside, every 61st pop, bound or not.)
#[test]
fn a_bound_without_contention_serves_in_order() {
    let behavior = TwoLevels::new(1).with_options(vec![
        LevelOptions::new(),
        LevelOptions::new().max_wait(Duration::from_millis(1)),
    ]);
    let owned = OwnedPool::new(behavior).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let o = order.clone();
            owned.pool.low.exec(run(move || o.lock().unwrap().push(i)))
        })
        .collect();
    for h in handles {
        futures::executor::block_on(h).unwrap();
    }
    let mut order = order.lock().unwrap().clone();
    order.sort_unstable();
    assert_eq!(order, (0..100).collect::<Vec<_>>());
    futures::executor::block_on(owned.close());
}
