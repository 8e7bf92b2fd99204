//! Blocking sections: `block_in_place` keeps the pool's parallelism,
//! `spawn_blocking` runs on bounded blocking threads, and a pool whose
//! every worker is blocked while tasks wait reports a deadlock.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{Flat, Only};
use smartpool::prelude::*;
use smartpool::{block_in_place, BlockingConfig, DeadlockReport, WorkerState};

/// On a one-thread pool, a task that blocks in `block_in_place` on a
/// value that a task queued behind it sends: the stand-in runs that task.
#[test]
fn block_in_place_keeps_a_one_thread_pool_running() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = mpsc::channel::<u32>();
    let waiter = pool
        .work
        .exec(run(move || block_in_place(|| rx.recv().unwrap())));
    let sender = pool.work.exec(run(move || tx.send(7).unwrap()));
    assert_eq!(futures::executor::block_on(waiter).unwrap(), 7);
    futures::executor::block_on(sender).unwrap();
    // Many sections in a row, each with work queued behind it.
    for i in 0..50 {
        let (tx, rx) = mpsc::channel::<u32>();
        let waiter = pool
            .work
            .exec(run(move || block_in_place(|| rx.recv().unwrap())));
        let _detached = pool.work.exec(run(move || tx.send(i).unwrap()));
        assert_eq!(futures::executor::block_on(waiter).unwrap(), i);
    }
}

/// Off a worker, in a driver's seat, nested, inside a scope: the closure
/// just runs, and nothing hangs.
#[test]
fn block_in_place_anywhere_just_runs() {
    assert_eq!(block_in_place(|| 1), 1, "off any pool");
    let zero = OwnedPool::new(Flat::new(0)).unwrap();
    let h = zero
        .pool
        .work
        .exec(run(|| block_in_place(|| block_in_place(|| 2))));
    assert_eq!(zero.block_on(h).unwrap(), 2, "a zero-thread pool's driver");

    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let nested = pool.work.exec(run(|| {
        block_in_place(|| {
            let pool = Pool::<Flat>::current();
            assert!(pool.is_some(), "still inside the task");
            block_in_place(|| 3)
        })
    }));
    assert_eq!(futures::executor::block_on(nested).unwrap(), 3);
    let in_block_on = pool.work.exec(run(|| {
        let pool = Pool::<Flat>::current().unwrap();
        let child = pool.work.exec(run(|| block_in_place(|| 4)));
        pool.block_on(async move { block_in_place(|| 1) + child.await.unwrap() })
    }));
    assert_eq!(futures::executor::block_on(in_block_on).unwrap(), 5);
    let in_scope = pool.work.exec(run(|| {
        let total = AtomicUsize::new(0);
        let pool = Pool::<Flat>::current().unwrap();
        smartpool::scope(|s| {
            for _ in 0..4 {
                let _detached = s.exec(&pool.work, async {
                    block_in_place(|| total.fetch_add(1, Ordering::SeqCst));
                });
            }
        });
        total.load(Ordering::SeqCst)
    }));
    assert_eq!(futures::executor::block_on(in_scope).unwrap(), 4);
}

/// A panic in the closure unwinds to the task (caught as its panic), and
/// the worker goes on serving.
#[test]
fn a_panicking_section_leaves_the_worker_whole() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let pool = owned.pool.clone();
    let h = pool
        .work
        .exec(run(|| block_in_place(|| panic!("inside the section"))));
    assert!(futures::executor::block_on(h).unwrap_err().is_panic());
    let after = pool.work.exec(run(|| 5));
    assert_eq!(futures::executor::block_on(after).unwrap(), 5);
}

/// `spawn_blocking` runs the closure on a blocking thread and hands back
/// its result or its panic; over the bound, calls queue; idle threads exit
/// after the keep-alive; after close, the closure does not run.
#[test]
fn spawn_blocking_runs_bounded_and_refuses_after_close() {
    let owned = OwnedPool::new(Limited::new(2, Duration::from_millis(20), true)).unwrap();
    let pool = owned.pool.clone();
    let h = pool.spawn_blocking(|| std::thread::current().name().map(str::to_owned));
    assert_eq!(
        futures::executor::block_on(h).unwrap().as_deref(),
        Some("smartpool-block")
    );
    let panicked = pool.spawn_blocking(|| panic!("in a blocking closure"));
    assert!(futures::executor::block_on(panicked)
        .unwrap_err()
        .is_panic());

    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (running, most) = (running.clone(), most.clone());
            pool.spawn_blocking(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in handles {
        futures::executor::block_on(h).unwrap();
    }
    assert!(
        most.load(Ordering::SeqCst) <= 2,
        "at most max_threads at once"
    );
    assert!(pool.blocking_threads() <= 2);
    // Idle threads exit after the keep-alive (20 ms): wait for it, bounded.
    let start = std::time::Instant::now();
    while pool.blocking_threads() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "idle threads never exited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    futures::executor::block_on(owned.close());
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let refused = pool.spawn_blocking(move || r.fetch_add(1, Ordering::SeqCst));
    let e = futures::executor::block_on(refused).unwrap_err();
    assert_eq!(e.cancel_reason(), Some(CancelReason::PoolClosed));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

/// A one-thread pool with stand-ins off, whose only task waits without
/// helping on a task queued behind it: the deadlock handler is called with
/// the state of the worker and the channel that waits, instead of a silent
/// hang. (Here the handler ends the wait itself.)
#[test]
fn a_pool_whose_every_worker_is_blocked_reports_a_deadlock() {
    let owned = OwnedPool::new(Limited::new(4, Duration::from_secs(1), false)).unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = mpsc::channel::<u32>();
    *pool.rescue.lock().unwrap() = Some(tx.clone());
    let waiter = pool
        .work
        .exec(run(move || block_in_place(|| rx.recv().unwrap())));
    let _behind = pool.work.exec(run(move || tx.send(1).unwrap()));
    assert_eq!(
        futures::executor::block_on(waiter).unwrap(),
        99,
        "the handler's value"
    );
    let reports = pool.reports.lock().unwrap();
    assert_eq!(reports.len(), 1, "reported once");
    assert_eq!(reports[0].workers(), &[WorkerState::BlockedInPlace]);
    assert_eq!(reports[0].queued_channels(), &["Only".to_string()]);
    assert!(reports[0]
        .to_string()
        .contains("worker 0: blocked in block_in_place"));
}

/// One FIFO channel on one thread, with blocking threads bounded as given
/// and a deadlock handler that records the report and sends 99 to the
/// rescue channel, if set.
struct Limited {
    work: VecDequeChannel,
    config: BlockingConfig,
    reports: Mutex<Vec<DeadlockReport>>,
    rescue: Mutex<Option<mpsc::Sender<u32>>>,
}

impl Limited {
    fn new(max_threads: usize, keep_alive: Duration, stand_ins: bool) -> Limited {
        Limited {
            work: VecDequeChannel::new(),
            config: BlockingConfig {
                max_threads,
                keep_alive,
                stand_ins,
            },
            reports: Mutex::new(Vec::new()),
            rescue: Mutex::new(None),
        }
    }
}

impl PoolBehavior for Limited {
    type ChannelKey = Only;
    fn config(&self) -> PoolConfig<Only> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Only,
                complete_on_close: true,
            }]],
        }
    }
    fn channel(&self, _: Only) -> &dyn Channel {
        &self.work
    }
    fn blocking(&self) -> BlockingConfig {
        self.config.clone()
    }
    fn deadlock(&self, report: &DeadlockReport) {
        self.reports.lock().unwrap().push(report.clone());
        if let Some(tx) = self.rescue.lock().unwrap().take() {
            let _ = tx.send(99);
        }
    }
}

/// `block_in_place` inside a stolen half of a `join`: while the half
/// blocks, a stand-in serves its worker's place (the join's caller waits
/// isolated and takes no task of its level), so a task submitted
/// meanwhile runs before the half is let go.
#[test]
fn block_in_place_inside_a_stolen_join_half_keeps_the_pool_running() {
    let owned = OwnedPool::new(Flat::new(2)).unwrap();
    let pool = owned.pool.clone();
    let gate = common::Gate::new();
    let (b_started, b_running) = mpsc::channel();
    let joined = {
        let (pool2, gate) = (pool.clone(), gate.clone());
        pool.work.exec(run(move || {
            let (to_a, from_b) = mpsc::channel();
            smartpool::join(
                &pool2.work,
                move || from_b.recv_timeout(common::FAILSAFE).expect("b started"),
                move || {
                    to_a.send(()).unwrap();
                    b_started.send(()).unwrap();
                    block_in_place(|| gate.wait());
                },
            );
        }))
    };
    b_running
        .recv_timeout(common::FAILSAFE)
        .expect("b was stolen");
    let other = pool.work.exec(run(|| 5));
    let (done, ran) = mpsc::channel();
    std::thread::spawn(move || done.send(futures::executor::block_on(other).unwrap()));
    let ran = ran.recv_timeout(common::FAILSAFE);
    gate.open();
    assert_eq!(ran, Ok(5), "a task ran while the stolen half blocked");
    futures::executor::block_on(joined).unwrap();
    futures::executor::block_on(owned.close());
}
