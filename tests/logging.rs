//! What the pool tells the `log` facade: worker start and stop and close
//! progress at debug, every contained task panic with its channel at warn,
//! a deadlock report at error, even when the behavior has a handler of its
//! own.
//!
//! One logger serves the whole test binary, and tests run in parallel, so
//! each record keeps the name of the thread that logged it, and each test
//! looks only at the records of its own threads (workers named by the
//! test, and the test's own thread, which the harness names after it).

mod common;

use std::sync::{mpsc, Mutex, OnceLock};

use common::hold_worker;
use smartpool::prelude::*;
use smartpool::{block_in_place, BlockingConfig, Builder, DeadlockReport};

/// One record: its level, the thread that logged it, its text.
#[derive(Clone, Debug)]
struct Record {
    level: log::Level,
    thread: String,
    text: String,
}

struct Recorder(Mutex<Vec<Record>>);

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        if !record.target().starts_with("smartpool") {
            return;
        }
        let thread = std::thread::current().name().unwrap_or("").to_string();
        self.0.lock().unwrap().push(Record {
            level: record.level(),
            thread,
            text: record.args().to_string(),
        });
    }
    fn flush(&self) {}
}

/// The binary's logger, installed at first use.
fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<&'static Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder: &'static Recorder = Box::leak(Box::new(Recorder(Mutex::new(Vec::new()))));
        log::set_logger(recorder).expect("the only logger of this binary");
        log::set_max_level(log::LevelFilter::Trace);
        recorder
    })
}

/// The records so far of threads whose name `thread` accepts.
fn records(thread: impl Fn(&str) -> bool) -> Vec<Record> {
    recorder()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|r| thread(&r.thread))
        .cloned()
        .collect()
}

/// This test's thread's name (the harness names it after the test).
fn me() -> String {
    std::thread::current().name().unwrap_or("").to_string()
}

#[test]
fn workers_log_start_and_stop_and_close_logs_its_progress() {
    recorder();
    let owned = Builder::new()
        .threads(2)
        .thread_name(|i| format!("log-lifecycle-{i}"))
        .build()
        .unwrap();
    owned
        .block_on(owned.pool.level(0).exec(run(|| ())))
        .unwrap();
    owned.close().wait();
    let workers = records(|t| t.starts_with("log-lifecycle-"));
    for i in 0..2 {
        for what in ["started", "stopped"] {
            assert!(
                workers.iter().any(|r| r.level == log::Level::Debug
                    && r.thread == format!("log-lifecycle-{i}")
                    && r.text.contains(&format!("worker {i} {what}"))),
                "worker {i} {what}: {workers:#?}"
            );
        }
    }
    // The last worker out says the pool closed; the closer, that it began.
    assert!(workers
        .iter()
        .any(|r| r.level == log::Level::Debug && r.text.contains("closed: every worker exited")));
    let mine = records(|t| t == me());
    assert!(
        mine.iter()
            .any(|r| r.level == log::Level::Debug && r.text.contains("closing")),
        "{mine:#?}"
    );
}

#[test]
fn a_contained_panic_is_logged_as_a_warning_with_its_channel() {
    recorder();
    let owned = Builder::new()
        .levels(3)
        .threads(1)
        .thread_name(|i| format!("log-panic-{i}"))
        .build()
        .unwrap();
    let joined = owned
        .block_on(
            owned
                .pool
                .level(2)
                .exec(run(|| panic!("boom-in-level-two"))),
        )
        .unwrap_err();
    assert!(joined.is_panic());
    // Detached: nobody sees it but the log (and a panic handler).
    drop(owned.pool.level(1).exec(run(|| panic!("boom-detached"))));
    owned.close().wait();
    // `block_on` may run the task on this thread.
    let logged = records(|t| t == "log-panic-0" || t == me());
    for (channel, message) in [("2", "boom-in-level-two"), ("1", "boom-detached")] {
        assert!(
            logged.iter().any(|r| r.level == log::Level::Warn
                && r.text.contains(&format!("channel {channel} panicked"))
                && r.text.contains(message)),
            "{channel}: {logged:#?}"
        );
    }
}

/// A one-thread pool without stand-ins whose only worker blocks until a
/// task queued behind it has run: a deadlock, reported to the handler and
/// logged as an error as well.
#[test]
fn a_deadlock_is_logged_as_an_error_beside_the_handler() {
    recorder();
    let (reported, reports) = mpsc::channel::<DeadlockReport>();
    let reported = Mutex::new(reported);
    let owned = Builder::new()
        .threads(1)
        .thread_name(|i| format!("log-deadlock-{i}"))
        .blocking(BlockingConfig {
            stand_ins: false,
            ..BlockingConfig::default()
        })
        .deadlock_handler(move |report| {
            let _ = reported.lock().unwrap().send(report.clone());
        })
        .build()
        .unwrap();
    let pool = &owned.pool;
    let (gate, held) = hold_worker(pool.level(0));
    let (release, wait) = mpsc::channel::<()>();
    let blocker = pool
        .level(0)
        .exec(run(move || block_in_place(|| wait.recv().ok())));
    let behind = pool.level(0).exec(run(|| "ran"));
    gate.open();
    let report = reports.recv().unwrap();
    assert_eq!(report.queued_channels(), &["0".to_string()]);
    drop(release);
    futures::executor::block_on(held).unwrap();
    futures::executor::block_on(blocker).unwrap();
    assert_eq!(futures::executor::block_on(behind).unwrap(), "ran");
    owned.close().wait();
    // Logged on whichever thread saw it: the worker, about to block, or
    // this one, submitting.
    let logged = records(|t| t == "log-deadlock-0" || t == me());
    assert!(
        logged
            .iter()
            .any(|r| r.level == log::Level::Error
                && r.text.contains("every worker thread is blocked")),
        "{logged:#?}"
    );
}

/// A poll that blocks while work waits at its level is logged at warn by
/// the pool's watcher thread, naming the channel.
#[test]
fn a_stalled_poll_is_logged_as_a_warning_with_its_channel() {
    #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
    struct StallProbe;
    struct Probe(VecDequeChannel);
    impl PoolBehavior for Probe {
        type ChannelKey = StallProbe;
        fn config(&self) -> PoolConfig<StallProbe> {
            PoolConfig {
                threads: 1,
                schedule: ScheduleAlgorithm::HighestFirst,
                levels: vec![vec![ChannelParams {
                    key: StallProbe,
                    complete_on_close: true,
                }]],
            }
        }
        fn channel(&self, _: StallProbe) -> &dyn Channel {
            &self.0
        }
        fn stall_threshold(&self) -> Option<std::time::Duration> {
            Some(std::time::Duration::from_millis(5))
        }
    }
    recorder();
    let owned = OwnedPool::new(Probe(VecDequeChannel::new())).unwrap();
    let (gate, held) = hold_worker(&owned.pool.0);
    let waiting = owned.pool.0.exec(run(|| ()));
    let stalled = |r: &Record| r.level == log::Level::Warn && r.text.contains("StallProbe");
    let start = std::time::Instant::now();
    while !records(|t| t == "smartpool-watch").iter().any(stalled) {
        assert!(start.elapsed() < common::FAILSAFE, "no stall logged");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    gate.open();
    owned.block_on(held).unwrap();
    owned.block_on(waiting).unwrap();
    owned.close().wait();
}
