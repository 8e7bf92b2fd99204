//! Soak: random mixes of closures and futures across levels and channels,
//! random yields (plain, and `yield_if_needed`), children spawned from
//! inside (one by one and in batches), wakes from a foreign thread
//! and from timers, random panics, and a close at a random moment while two
//! threads keep submitting; some tasks are aborted right after submission,
//! and each submitter also keeps a `JoinSet` of futures, drained or
//! dropped (aborting what is left) at the end of the round. Some tasks are
//! moved to the other channel of their kind right after submission
//! (`move_to`), and some futures await a child queued on the backlog
//! (priority inheritance moves it up). The pool has a worker reserved for
//! the urgent level and a starvation bound on the backlog. Every task is
//! accounted for:
//!
//! * its owned state is dropped exactly once (never both run and dropped
//!   unrun, never neither);
//! * its handle's outcome matches what happened: `Ok(id)` iff its body
//!   finished, `Panicked` iff it panicked, `Cancelled` otherwise;
//! * a task accepted by a `complete_on_close` channel completes unless it
//!   was aborted (followup here never moves a task between the two kinds
//!   of channel);
//! * every future given to a `JoinSet` is dropped exactly once;
//! * a task refused after close comes back intact.
//!
//! The CI-sized run is `soak_ci`; `soak_long` (10^7 tasks) runs with
//! `cargo test --release --test soak -- --ignored`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::executor::block_on;
use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Urgent,  // level 0, coc
    Normal,  // level 1, not coc
    Sharded, // level 1, coc, 3 shards
    Backlog, // level 2, not coc
}

const CHANNELS: [Ch; 4] = [Ch::Urgent, Ch::Normal, Ch::Sharded, Ch::Backlog];

fn is_coc(ch: Ch) -> bool {
    matches!(ch, Ch::Urgent | Ch::Sharded)
}

struct Soak {
    urgent: VecDequeChannel,
    normal: VecDequeChannel,
    sharded: MultiChannel<VecDequeChannel>,
    backlog: VecDequeChannel,
}

impl PoolBehavior for Soak {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        let p = |key| ChannelParams {
            key,
            complete_on_close: is_coc(key),
        };
        PoolConfig {
            threads: 3,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![p(Ch::Urgent)],
                vec![p(Ch::Normal), p(Ch::Sharded)],
                vec![p(Ch::Backlog)],
            ],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Urgent => &self.urgent,
            Ch::Normal => &self.normal,
            Ch::Sharded => &self.sharded,
            Ch::Backlog => &self.backlog,
        }
    }
    fn level_options(&self) -> Vec<smartpool::LevelOptions> {
        vec![
            smartpool::LevelOptions::new().reserve(1),
            smartpool::LevelOptions::new(),
            smartpool::LevelOptions::new().max_wait(Duration::from_millis(2)),
        ]
    }
    // Woken tasks are promoted, but never across the coc line.
    fn followup(&self, from: Ch, task: RunningTask) {
        match from {
            Ch::Urgent | Ch::Sharded => self.urgent.submit(task),
            Ch::Normal | Ch::Backlog => self.normal.submit(task),
        }
    }
}

/// xorshift64*: a seeded, reproducible stream of choices.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A foreign thread that wakes every registered waker, over and over.
#[derive(Clone, Default)]
struct Reactor {
    wakers: Arc<Mutex<Vec<Waker>>>,
    stop: Arc<AtomicBool>,
}

impl Reactor {
    fn start(&self) -> std::thread::JoinHandle<()> {
        let this = self.clone();
        std::thread::spawn(move || {
            while !this.stop.load(Ordering::SeqCst) {
                let wakers = std::mem::take(&mut *this.wakers.lock().unwrap());
                for w in wakers {
                    w.wake();
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            // Wake the stragglers once more, then let wakers drop.
            for w in std::mem::take(&mut *this.wakers.lock().unwrap()) {
                w.wake();
            }
        })
    }
}

/// Per-task accounting.
#[derive(Default)]
struct Ledger {
    drops: AtomicUsize,
    finished: AtomicBool,
}

struct Guard(Arc<Ledger>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Steps a future takes before finishing.
#[derive(Clone, Copy, Debug)]
enum Step {
    Yield,
    /// `yield_if_needed`: a yield only if higher work waits.
    YieldIfNeeded,
    Reactor,
    Timer(u64),
    /// Spawns a trivial child on the backlog and awaits its handle (from a
    /// higher level, inheritance moves it to this task's channel).
    AwaitChild,
}

struct Script {
    id: u64,
    steps: Vec<Step>,
    at: usize,
    waiting: Option<futures_timer::Delay>,
    child: Option<JoinHandle<()>>,
    registered: bool,
    reactor: Reactor,
    panic_at_end: bool,
    ledger: Arc<Ledger>,
    _guard: Guard,
}

impl Future for Script {
    type Output = u64;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        loop {
            if let Some(delay) = self.waiting.as_mut() {
                match Pin::new(delay).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => self.waiting = None,
                }
            }
            if let Some(child) = self.child.as_mut() {
                match Pin::new(child).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    // Ran, or dropped by a close: either way it ended.
                    Poll::Ready(_) => self.child = None,
                }
            }
            if self.registered {
                self.registered = false; // woken by the reactor
            }
            let Some(&step) = self.steps.get(self.at) else {
                break;
            };
            self.at += 1;
            match step {
                Step::Yield => {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Step::YieldIfNeeded => {
                    if smartpool::should_yield() {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Step::Reactor => {
                    self.registered = true;
                    self.reactor.wakers.lock().unwrap().push(cx.waker().clone());
                    return Poll::Pending;
                }
                Step::Timer(us) => {
                    self.waiting = Some(futures_timer::Delay::new(Duration::from_micros(us)));
                }
                Step::AwaitChild => {
                    let pool = Pool::<Soak>::current().expect("polled on the pool");
                    self.child = Some(pool.backlog.exec(run(|| ())));
                }
            }
        }
        if self.panic_at_end {
            panic!("soak panic {}", self.id);
        }
        self.ledger.finished.store(true, Ordering::SeqCst);
        Poll::Ready(self.id)
    }
}

struct Submitted {
    ledger: Arc<Ledger>,
    channel: Ch,
    panics: bool,
    aborted: bool,
    handle: Option<JoinHandle<u64>>,
    id: u64,
}

/// Makes task `id` and submits it to a random channel; `None` if refused
/// (after checking the refused future came back intact).
fn submit(pool: &Arc<Pool<Soak>>, rng: &mut Rng, id: u64, reactor: &Reactor) -> Option<Submitted> {
    let channel = CHANNELS[rng.below(4) as usize];
    let ledger = Arc::new(Ledger::default());
    let guard = Guard(ledger.clone());
    let panics = rng.below(10) == 0;
    let detach = rng.below(4) == 0;
    let chan = pool.channel(channel);
    let result = if rng.below(2) == 0 {
        // A closure; sometimes it spawns a child from inside the pool.
        let (l, p2) = (ledger.clone(), pool.clone());
        let child = rng.below(5) == 0;
        chan.try_exec(run(move || {
            let _guard = guard;
            if child {
                if id % 2 == 0 {
                    drop(p2.backlog.exec(run(|| ())));
                } else {
                    drop(p2.normal.exec_batch((0..3).map(|_| run(|| ()))));
                }
            }
            if panics {
                panic!("soak panic {id}");
            }
            l.finished.store(true, Ordering::SeqCst);
            id
        }))
        .map_err(|refused| drop(refused.into_inner()))
    } else {
        let steps = (0..rng.below(4))
            .map(|_| match rng.below(5) {
                0 => Step::Yield,
                1 => Step::Reactor,
                2 => Step::YieldIfNeeded,
                3 => Step::AwaitChild,
                _ => Step::Timer(rng.below(300)),
            })
            .collect();
        chan.try_exec(Script {
            id,
            steps,
            at: 0,
            waiting: None,
            child: None,
            registered: false,
            reactor: reactor.clone(),
            panic_at_end: panics,
            ledger: ledger.clone(),
            _guard: guard,
        })
        .map_err(|refused| {
            let script = refused.into_inner();
            assert_eq!(script.id, id, "the refused future came back intact");
        })
    };
    let aborted = rng.below(8) == 0;
    let moved = rng.below(6) == 0;
    match result {
        Ok(handle) => {
            if moved {
                // To the other channel of the same kind (the checks below
                // know a task's close promise by its channel).
                let other = match channel {
                    Ch::Urgent => Ch::Sharded,
                    Ch::Sharded => Ch::Urgent,
                    Ch::Normal => Ch::Backlog,
                    Ch::Backlog => Ch::Normal,
                };
                match handle.move_to(pool.channel(other)) {
                    Ok(())
                    | Err(
                        smartpool::MoveError::Running
                        | smartpool::MoveError::Started
                        | smartpool::MoveError::Parked
                        | smartpool::MoveError::Finished
                        | smartpool::MoveError::Closed,
                    ) => {}
                    Err(other) => panic!("move of task {id}: {other}"),
                }
            }
            if aborted {
                handle.abort_handle().abort();
            }
            Some(Submitted {
                ledger,
                channel,
                panics,
                aborted,
                handle: (!detach).then_some(handle),
                id,
            })
        }
        Err(()) => {
            assert_eq!(
                ledger.drops.load(Ordering::SeqCst),
                1,
                "a refused task is dropped once"
            );
            None
        }
    }
}

/// What the tasks of a run came to.
#[derive(Default, Debug)]
struct Tally {
    offered: u64,
    refused: u64,
    completed: u64,
    panicked: u64,
    cancelled: u64,
    detached: u64,
    aborted: u64,
    in_sets: u64,
}

fn check(task: Submitted, tally: &mut Tally) {
    let Submitted {
        ledger,
        channel,
        panics,
        aborted,
        handle,
        id,
    } = task;
    if let Some(handle) = handle {
        match block_on(handle) {
            Ok(out) => {
                assert_eq!(out, id);
                assert!(ledger.finished.load(Ordering::SeqCst));
                tally.completed += 1;
            }
            Err(e) if e.is_panic() => {
                assert!(panics, "task {id} panicked unasked");
                tally.panicked += 1;
            }
            Err(e) => {
                assert!(e.is_cancelled());
                assert!(
                    !is_coc(channel) || aborted,
                    "coc task {id} was cancelled unaborted"
                );
                assert!(!ledger.finished.load(Ordering::SeqCst));
                tally.cancelled += 1;
            }
        }
    } else {
        tally.detached += 1;
    }
    if aborted {
        tally.aborted += 1;
    }
    if is_coc(channel) && !panics && !aborted {
        assert!(
            ledger.finished.load(Ordering::SeqCst),
            "coc task {id} did not complete"
        );
    }
    assert_eq!(
        ledger.drops.load(Ordering::SeqCst),
        1,
        "task {id} dropped once"
    );
}

/// One round: two submitters, a close at a random moment.
fn round(seed: u64, tasks: u64, tally: &mut Tally) {
    let owned = OwnedPool::new(Soak {
        urgent: VecDequeChannel::new(),
        normal: VecDequeChannel::new(),
        sharded: MultiChannel::new(3, VecDequeChannel::new),
        backlog: VecDequeChannel::new(),
    })
    .unwrap();
    let pool = owned.pool.clone();
    let reactor = Reactor::default();
    let reactor_thread = reactor.start();
    // Close once this many tasks were offered, somewhere in the middle half
    // of the round, while both submitters go on.
    let close_at = tasks / 4 + Rng(seed ^ 0xC105E).below(tasks / 2 + 1);
    let offered = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..2u64)
        .map(|s| {
            let (pool, reactor, offered) = (pool.clone(), reactor.clone(), offered.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(s + 1) | 1);
                // A JoinSet of yielding futures beside the ledgered tasks.
                let mut set = smartpool::JoinSet::new();
                let set_drops = Arc::new(Ledger::default());
                let accepted = (0..tasks / 2)
                    .filter_map(|i| {
                        offered.fetch_add(1, Ordering::SeqCst);
                        if rng.below(16) == 0 {
                            let guard = Guard(set_drops.clone());
                            set.exec(pool.channel(CHANNELS[rng.below(4) as usize]), async move {
                                let _guard = guard;
                                smartpool::yield_now().await;
                            });
                        }
                        submit(&pool, &mut rng, s * tasks + i, &reactor)
                    })
                    .collect::<Vec<_>>();
                let in_set = set.len();
                if rng.below(2) == 0 {
                    drop(set); // aborts what is left
                } else {
                    while let Some(outcome) = block_on(set.join_next()) {
                        assert!(outcome.is_ok() || outcome.unwrap_err().is_cancelled());
                    }
                }
                (accepted, in_set, set_drops)
            })
        })
        .collect();
    while (offered.load(Ordering::SeqCst) as u64) < close_at {
        std::thread::yield_now();
    }
    let closed = std::thread::spawn(move || block_on(owned.close()));
    let mut accepted: Vec<Submitted> = Vec::new();
    let mut sets = Vec::new();
    for submitter in submitters {
        let (tasks, in_set, set_drops) = submitter.join().unwrap();
        accepted.extend(tasks);
        sets.push((in_set, set_drops));
    }
    closed.join().unwrap();
    for (in_set, set_drops) in sets {
        assert_eq!(
            set_drops.drops.load(Ordering::SeqCst),
            in_set,
            "every JoinSet future dropped once"
        );
        tally.in_sets += in_set as u64;
    }
    reactor.stop.store(true, Ordering::SeqCst);
    reactor_thread.join().unwrap();
    tally.offered += tasks;
    tally.refused += tasks - accepted.len() as u64;
    for task in accepted {
        check(task, tally);
    }
}

/// Runs rounds until `total` tasks were offered. At full sizes it also
/// checks that every kind of outcome occurred, so that the run exercised
/// what it claims to (shrunk runs, as under valgrind, may not).
fn soak(total: u64, per_round: u64) -> Tally {
    // The soak's own panics are expected: keep them out of the output, so
    // that a real failure's message is not buried.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let expected = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|m| m.starts_with("soak panic"));
        if !expected {
            default_hook(info);
        }
    }));
    let mut tally = Tally::default();
    let mut seed = 1;
    while tally.offered < total {
        round(seed, per_round, &mut tally);
        seed += 1;
    }
    eprintln!("soak: {seed} rounds, {tally:?}");
    if total < 1_000_000 {
        return tally;
    }
    assert!(tally.refused > 0, "no submission raced close: {tally:?}");
    assert!(
        tally.cancelled > 0,
        "no task was cancelled by close: {tally:?}"
    );
    assert!(tally.completed > 0 && tally.panicked > 0, "{tally:?}");
    tally
}

#[test]
fn soak_ci() {
    let total = std::env::var("SOAK_TASKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000_000);
    soak(total, 4_000.min(total));
}

#[test]
#[ignore = "long: 10^7 tasks; run with --release -- --ignored"]
fn soak_long() {
    soak(10_000_000, 20_000);
}
