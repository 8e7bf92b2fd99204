//! Fixtures shared by the integration tests: a two-level behavior, a gate
//! that blocks a worker until released, and drop counters.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use smartpool::prelude::*;
use smartpool::LevelOptions;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
pub enum Lv {
    High,
    Low,
}

/// Two FIFO channels on two levels.
pub struct TwoLevels {
    pub high: VecDequeChannel,
    pub low: VecDequeChannel,
    threads: usize,
    schedule: ScheduleAlgorithm,
    coc: (bool, bool),
    options: Vec<LevelOptions>,
    /// Followup calls, by the channel the task came from.
    pub followups: [AtomicUsize; 2],
}

impl TwoLevels {
    pub fn new(threads: usize) -> TwoLevels {
        TwoLevels::with(threads, ScheduleAlgorithm::HighestFirst, (true, false))
    }

    /// Both channels with the LIFO slot (the default), scheduled
    /// highest-first.
    pub fn lifo(threads: usize, coc: (bool, bool)) -> TwoLevels {
        TwoLevels::with(threads, ScheduleAlgorithm::HighestFirst, coc)
    }

    pub fn with(threads: usize, schedule: ScheduleAlgorithm, coc: (bool, bool)) -> TwoLevels {
        TwoLevels {
            high: VecDequeChannel::new(),
            low: VecDequeChannel::new(),
            threads,
            schedule,
            coc,
            options: Vec::new(),
            followups: [AtomicUsize::new(0), AtomicUsize::new(0)],
        }
    }

    /// The same, with these level options.
    pub fn with_options(mut self, options: Vec<LevelOptions>) -> TwoLevels {
        self.options = options;
        self
    }
}

impl PoolBehavior for TwoLevels {
    type ChannelKey = Lv;

    fn config(&self) -> PoolConfig<Lv> {
        PoolConfig {
            threads: self.threads,
            schedule: self.schedule.clone(),
            levels: vec![
                vec![ChannelParams {
                    key: Lv::High,
                    complete_on_close: self.coc.0,
                }],
                vec![ChannelParams {
                    key: Lv::Low,
                    complete_on_close: self.coc.1,
                }],
            ],
        }
    }

    fn channel(&self, key: Lv) -> &dyn Channel {
        match key {
            Lv::High => &self.high,
            Lv::Low => &self.low,
        }
    }

    fn followup(&self, from: Lv, task: RunningTask) {
        self.followups[from as usize].fetch_add(1, Ordering::SeqCst);
        self.channel(from).submit(task);
    }

    fn level_options(&self) -> Vec<LevelOptions> {
        self.options.clone()
    }
}

/// A one-shot latch: `wait` blocks until `open`.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    pub fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }

    /// Waits at most `limit` (a fail-safe so a broken pool fails the test
    /// instead of hanging it); returns whether the gate opened.
    pub fn wait_for(&self, limit: Duration) -> bool {
        let (open, _) = self
            .0
             .1
            .wait_timeout_while(self.0 .0.lock().unwrap(), limit, |open| !*open)
            .unwrap();
        *open
    }

    pub fn is_open(&self) -> bool {
        *self.0 .0.lock().unwrap()
    }
}

/// Counts drops of the values it hands out.
#[derive(Clone, Default)]
pub struct DropCounter(Arc<AtomicUsize>);

pub struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl DropCounter {
    pub fn new() -> DropCounter {
        DropCounter::default()
    }

    pub fn token(&self) -> Counted {
        Counted(self.0.clone())
    }

    pub fn drops(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Occupies one worker with a closure on `channel` that waits for the
/// returned gate, and returns once it has started: on a one-worker pool,
/// tasks submitted next stay queued until the gate opens.
pub fn hold_worker<C: Channel + ?Sized>(channel: &C) -> (Gate, JoinHandle<()>) {
    let (gate, started) = (Gate::new(), Gate::new());
    let (g, s) = (gate.clone(), started.clone());
    let held = channel.exec(run(move || {
        s.open();
        g.wait();
    }));
    assert!(started.wait_for(FAILSAFE), "the holding task never started");
    (gate, held)
}

/// Generous fail-safe for waits that should end at once.
pub const FAILSAFE: Duration = Duration::from_secs(20);

/// Closes `owned` on another thread; returns whether close resolved within
/// `limit` (so that a hang fails the test instead of hanging it).
pub fn close_within<B: PoolBehavior>(owned: OwnedPool<B>, limit: Duration) -> bool {
    let done = Gate::new();
    let d = done.clone();
    std::thread::spawn(move || {
        futures::executor::block_on(owned.close());
        d.open();
    });
    done.wait_for(limit)
}

/// Counts down to zero, then opens its gate.
#[derive(Clone)]
pub struct CountDown(Arc<AtomicUsize>, Gate);

impl CountDown {
    pub fn new(n: usize) -> CountDown {
        let gate = Gate::new();
        if n == 0 {
            gate.open();
        }
        CountDown(Arc::new(AtomicUsize::new(n)), gate)
    }

    pub fn tick(&self) {
        if self.0.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.1.open();
        }
    }

    pub fn wait_for(&self, limit: Duration) -> bool {
        self.1.wait_for(limit)
    }
}

/// Whether the tests run under valgrind (`.ci/valgrind` says so).
pub fn under_valgrind() -> bool {
    std::env::var_os("SMARTPOOL_UNDER_VALGRIND").is_some()
}

/// `n`, or a hundredth of it (at least 2) under miri, which is ~1000x
/// slower, or a tenth under valgrind: the same paths, fewer times.
pub fn scaled(n: usize) -> usize {
    if cfg!(miri) {
        (n / 100).max(2)
    } else if under_valgrind() {
        // Memcheck runs ~50× slower: a tenth keeps the fail-safes far
        // (a million-element quicksort came near 60 s on a loaded machine).
        (n / 10).max(2)
    } else {
        n
    }
}

/// A future that wakes itself and returns `Pending` once: a yield that
/// goes back through the task's channel.
pub fn yield_once() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    futures::future::poll_fn(move |cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
}

/// The key of [`Flat`]'s one channel.
#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
pub struct Only;

/// One level, one FIFO channel (`work`); a woken task goes back to it.
pub struct Flat {
    pub work: VecDequeChannel,
    threads: usize,
    complete_on_close: bool,
    blocking: smartpool::BlockingConfig,
}

impl Flat {
    /// `threads` workers, a `complete_on_close` channel with the LIFO slot.
    pub fn new(threads: usize) -> Flat {
        Flat::with(threads, true, true)
    }

    /// With or without the LIFO slot, `complete_on_close` or not.
    pub fn with(threads: usize, lifo: bool, complete_on_close: bool) -> Flat {
        Flat {
            work: if lifo {
                VecDequeChannel::new()
            } else {
                VecDequeChannel::without_lifo_slot()
            },
            threads,
            complete_on_close,
            blocking: smartpool::BlockingConfig::default(),
        }
    }

    /// [`Flat::new`], with at most `max_threads` blocking threads.
    pub fn with_blocking_threads(threads: usize, max_threads: usize) -> Flat {
        Flat {
            blocking: smartpool::BlockingConfig {
                max_threads,
                ..smartpool::BlockingConfig::default()
            },
            ..Flat::new(threads)
        }
    }
}

impl PoolBehavior for Flat {
    type ChannelKey = Only;
    fn config(&self) -> PoolConfig<Only> {
        PoolConfig {
            threads: self.threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Only,
                complete_on_close: self.complete_on_close,
            }]],
        }
    }
    fn channel(&self, _: Only) -> &dyn Channel {
        &self.work
    }
    fn blocking(&self) -> smartpool::BlockingConfig {
        self.blocking.clone()
    }
    fn followup(&self, _: Only, task: RunningTask) {
        self.work.submit(task);
    }
}

/// Runs `f` on a thread of its own; its result if it returns within
/// `limit`, `None` if not (a hang fails the test instead of hanging it;
/// the thread is left behind).
pub fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}
