//! Reserved workers (`LevelOptions::reserve`): a level's reserved workers
//! serve only it and the levels above it, so its work finds an idle worker
//! while the lower levels keep the others busy; the other workers still
//! serve every level, and nothing is stranded.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::{hold_worker, CountDown, Gate, TwoLevels, FAILSAFE};
use smartpool::prelude::*;
use smartpool::{ConfigError, LevelOptions};

fn reserving(threads: usize, high: usize) -> TwoLevels {
    TwoLevels::new(threads).with_options(vec![LevelOptions::new().reserve(high)])
}

#[test]
fn reservations_must_leave_a_worker_for_the_lowest_level() {
    for (threads, reserved) in [(2, 2), (1, 1), (0, 1), (3, 5)] {
        match OwnedPool::new(reserving(threads, reserved)) {
            Err(ConfigError::Reservations {
                reserved: r,
                threads: t,
            }) => {
                assert_eq!((r, t), (reserved, threads));
            }
            other => panic!("{threads} threads, {reserved} reserved: {:?}", other.err()),
        }
    }
    let Err(err) = OwnedPool::new(TwoLevels::new(2).with_options(vec![LevelOptions::new(); 3]))
    else {
        panic!("three entries for two levels")
    };
    assert!(matches!(
        err,
        ConfigError::LevelOptionCount {
            levels: 2,
            options: 3
        }
    ));
    assert!(err.to_string().contains("3 entries for 2 levels"), "{err}");
    // The lowest level's reservation changes nothing: not counted.
    let owned = OwnedPool::new(
        TwoLevels::new(1).with_options(vec![LevelOptions::new(), LevelOptions::new().reserve(1)]),
    )
    .expect("a reservation of the lowest level is no reservation");
    futures::executor::block_on(owned.close());
}

/// One of two workers is reserved for the high level; the other is held
/// by a low task. A low task queued behind it is not taken by the
/// reserved worker, while a high task submitted after it runs at once.
#[test]
fn the_reserved_worker_takes_high_work_and_leaves_low_work() {
    let owned = OwnedPool::new(reserving(2, 1)).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.low);
    let low_started = Arc::new(AtomicBool::new(false));
    let flag = low_started.clone();
    let low = pool
        .low
        .exec(run(move || flag.store(true, Ordering::SeqCst)));
    let seen = low_started.clone();
    let high = pool.high.exec(run(move || seen.load(Ordering::SeqCst)));
    let low_ran_before_high = futures::executor::block_on(high).unwrap();
    assert!(!low_ran_before_high, "the reserved worker took a low task");
    assert!(!low_started.load(Ordering::SeqCst));
    gate.open();
    futures::executor::block_on(held).unwrap();
    futures::executor::block_on(low).unwrap();
    futures::executor::block_on(owned.close());
}

/// The reserved worker is busy (held by a high task): a second high task
/// goes to the common worker, which serves every level.
#[test]
fn high_work_falls_back_to_the_common_workers() {
    let owned = OwnedPool::new(reserving(2, 1)).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.high);
    let second = pool.high.exec(run(|| 7));
    assert_eq!(futures::executor::block_on(second).unwrap(), 7);
    assert!(
        !gate.is_open(),
        "ran while the first high task still held its worker"
    );
    gate.open();
    futures::executor::block_on(held).unwrap();
    futures::executor::block_on(owned.close());
}

/// Bursts of low tasks, posted from outside and from inside, while the
/// common worker sleeps between them: every one runs (none is left to the
/// reserved worker alone), and so does high work mixed in.
#[test]
fn nothing_is_stranded_under_reservation() {
    let owned = OwnedPool::new(reserving(3, 2)).unwrap();
    let pool = owned.pool.clone();
    for round in 0..200 {
        let n = 1 + round % 7;
        let done = CountDown::new(2 * n);
        for _ in 0..n {
            let d = done.clone();
            let p = pool.clone();
            drop(pool.low.exec(run(move || {
                let d2 = d.clone();
                drop(p.low.exec(run(move || d2.tick())));
                d.tick();
            })));
        }
        drop(pool.high.exec(run(|| ())));
        assert!(
            done.wait_for(FAILSAFE),
            "round {round}: a low task was stranded"
        );
    }
    drop(pool);
    futures::executor::block_on(owned.close());
}

/// Under RoundRobin too, the reserved worker serves only its levels.
#[test]
fn reservation_under_round_robin() {
    let schedule = ScheduleAlgorithm::RoundRobin(vec![
        std::time::Duration::from_millis(1),
        std::time::Duration::from_millis(1),
    ]);
    let behavior = TwoLevels::with(2, schedule, (true, false))
        .with_options(vec![LevelOptions::new().reserve(1)]);
    let owned = OwnedPool::new(behavior).unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(&pool.low);
    let low_started = Arc::new(AtomicBool::new(false));
    let flag = low_started.clone();
    let low = pool
        .low
        .exec(run(move || flag.store(true, Ordering::SeqCst)));
    let seen = low_started.clone();
    let high = pool.high.exec(run(move || seen.load(Ordering::SeqCst)));
    assert!(!futures::executor::block_on(high).unwrap());
    gate.open();
    futures::executor::block_on(held).unwrap();
    futures::executor::block_on(low).unwrap();
    futures::executor::block_on(owned.close());
}

/// Close drains a pool with reservations, the reserved workers exiting
/// like the others.
#[test]
fn close_with_reservations() {
    let owned = OwnedPool::new(reserving(3, 1)).unwrap();
    let gate = Gate::new();
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let g = gate.clone();
            owned.pool.high.exec(run(move || {
                g.wait();
                i
            }))
        })
        .collect();
    let opener = {
        let g = gate.clone();
        thread::spawn(move || g.open())
    };
    assert!(common::close_within(owned, FAILSAFE));
    opener.join().unwrap();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(futures::executor::block_on(h).unwrap(), i);
    }
}

/// Two levels on two threads, one reserved for the high level, without
/// stand-ins; the deadlock handler records the report and sends 99 to the
/// rescue channel, if set.
struct Reporting {
    high: VecDequeChannel,
    low: VecDequeChannel,
    reports: std::sync::Mutex<Vec<smartpool::DeadlockReport>>,
    rescue: std::sync::Mutex<Option<std::sync::mpsc::Sender<u32>>>,
}

impl PoolBehavior for Reporting {
    type ChannelKey = common::Lv;

    fn config(&self) -> PoolConfig<common::Lv> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: common::Lv::High,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: common::Lv::Low,
                    complete_on_close: true,
                }],
            ],
        }
    }

    fn channel(&self, key: common::Lv) -> &dyn Channel {
        match key {
            common::Lv::High => &self.high,
            common::Lv::Low => &self.low,
        }
    }

    fn level_options(&self) -> Vec<LevelOptions> {
        vec![LevelOptions::new().reserve(1)]
    }

    fn blocking(&self) -> smartpool::BlockingConfig {
        smartpool::BlockingConfig {
            stand_ins: false,
            ..Default::default()
        }
    }

    fn deadlock(&self, report: &smartpool::DeadlockReport) {
        self.reports.lock().unwrap().push(report.clone());
        if let Some(tx) = self.rescue.lock().unwrap().take() {
            let _ = tx.send(99);
        }
    }
}

/// The common worker blocks, waiting for a low task queued behind it that
/// only it could run: a deadlock, although the reserved worker is idle
/// (it does not serve the low level). It is reported, naming the low
/// channel only.
#[test]
fn a_deadlock_of_the_common_workers_is_reported() {
    let owned = OwnedPool::new(Reporting {
        high: VecDequeChannel::new(),
        low: VecDequeChannel::new(),
        reports: Default::default(),
        rescue: Default::default(),
    })
    .unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    *pool.rescue.lock().unwrap() = Some(tx.clone());
    let waiter = pool.low.exec(run(move || {
        smartpool::block_in_place(|| rx.recv().unwrap())
    }));
    let _behind = pool.low.exec(run(move || tx.send(1).unwrap()));
    assert_eq!(
        futures::executor::block_on(waiter).unwrap(),
        99,
        "the handler's value"
    );
    let reports = pool.reports.lock().unwrap();
    assert_eq!(reports.len(), 1, "reported once");
    assert_eq!(reports[0].queued_channels(), &["Low".to_string()]);
    drop(reports);
    drop(pool);
    futures::executor::block_on(owned.close());
}

/// The common worker takes the only low task (the low bit stays set
/// after it), which submits a high task and blocks until that runs: the
/// reserved worker runs it, so this is no deadlock, and none is reported
/// (the stale low bit is confirmed against the channel).
#[test]
fn a_stale_bit_is_no_deadlock() {
    let owned = OwnedPool::new(Reporting {
        high: VecDequeChannel::new(),
        low: VecDequeChannel::new(),
        reports: Default::default(),
        rescue: Default::default(),
    })
    .unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    *pool.rescue.lock().unwrap() = Some(tx.clone());
    let p = pool.clone();
    let waiter = pool.low.exec(run(move || {
        drop(p.high.exec(run(move || tx.send(1).unwrap())));
        smartpool::block_in_place(|| rx.recv().unwrap())
    }));
    assert_eq!(
        futures::executor::block_on(waiter).unwrap(),
        1,
        "the high task's value"
    );
    assert!(
        pool.reports.lock().unwrap().is_empty(),
        "no deadlock was reported"
    );
    drop(pool);
    futures::executor::block_on(owned.close());
}

/// Jobs keep to their level: a low task's `join` on two workers, one of
/// them reserved for the high level, runs both halves on the common
/// worker (the reserved one never steals a low job), while the same join
/// on the high level has its second half stolen by the other worker.
#[test]
fn a_reserved_worker_steals_only_jobs_of_its_levels() {
    let owned = OwnedPool::new(reserving(2, 1)).unwrap();
    let pool = owned.pool.clone();
    let on = |channel: fn(&Pool<TwoLevels>) -> &VecDequeChannel, wait: std::time::Duration| {
        let pool2 = pool.clone();
        let task = channel(&pool).exec(run(move || {
            let chan = channel(&pool2);
            let (to_a, from_b) = std::sync::mpsc::channel();
            let (a, b) = smartpool::join(
                chan,
                // `a` gives `b` up to `wait` to be stolen, then goes on.
                move || {
                    let _ = from_b.recv_timeout(wait);
                    thread::current().id()
                },
                move || {
                    let _ = to_a.send(());
                    thread::current().id()
                },
            );
            a == b
        }));
        futures::executor::block_on(task).unwrap()
    };
    let short = std::time::Duration::from_millis(100);
    assert!(on(|p| &p.low, short), "the reserved worker stole a low job");
    assert!(!on(|p| &p.high, FAILSAFE), "the high job was not stolen");
    futures::executor::block_on(owned.close());
}
