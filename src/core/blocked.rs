//! Which worker threads are blocked, and the deadlock check.
//!
//! A worker thread is *blocked* while it runs a `block_in_place` closure
//! with no stand-in serving its place, or waits in a `Pool::block_on` that
//! cannot help (its stack is too deep in nested waits). It marks itself
//! blocked before, and unblocked after (a guard, also on unwind).
//!
//! # The check
//!
//! The pool is *deadlocked* when every worker thread is blocked while a
//! task is queued: no worker will take it, and if the blocked ones wait for
//! it, nothing moves (rayon's deadlock handler watches for the same: every
//! thread blocked). It is checked where the state is reached from either
//! side: by the worker that blocks last, after marking itself (if a status
//! bit is set), and by a pusher whose new task found no worker to wake
//! (`Shared::pushed`), after its push (if every worker is blocked). Both
//! read with SeqCst the count the other wrote with SeqCst, so whichever
//! comes second sees the other's write: the state is reported.
//!
//! With reserved workers (see `schedule::Seating`), blocked workers are
//! counted per sleep domain: the *common* workers serve every level, a
//! reserved domain's only its levels. The pool is deadlocked when every
//! common worker is blocked while a task waits that no unblocked worker
//! serves: its channel's reserved domains (`ChannelOptions::wakes`) are all
//! blocked too. `Shared::deadlocked` keeps those channels, and asks each
//! whether it really holds a task (a status bit may be stale, and a
//! reserved worker never clears a lower level's). Each counter is written
//! and read SeqCst, as the one count of the argument above. Without
//! reservations every worker is common: the rule above.
//!
//! A report is made once per episode: the flag is set by the reporter and
//! cleared when a worker unblocks. The check is a report, not a cure: the
//! handler (the behavior's `deadlock`, by default an error in the log)
//! decides what to do, and a wait that the outside world ends (another
//! thread, a timer) ends the episode on its own.

use std::fmt;

use crate::sync::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// What a worker thread is doing, as a deadlock report tells it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerState {
    /// Running tasks, searching for some, or asleep.
    Working = 0,
    /// Inside [`block_in_place`](crate::block_in_place) with no stand-in
    /// thread serving its place.
    BlockedInPlace = 1,
    /// In a [`Pool::block_on`](crate::Pool::block_on) wait that cannot run
    /// tasks (its stack is too deep in nested waits).
    WaitingWithoutHelping = 2,
}

/// The states by their code (`state as u8`), which `Blocked` keeps.
const STATES: [WorkerState; 3] = [
    WorkerState::Working,
    WorkerState::BlockedInPlace,
    WorkerState::WaitingWithoutHelping,
];

/// What the pool looked like when every worker thread that could run the
/// waiting tasks was blocked (every worker thread, unless some are
/// reserved for other levels): given to
/// [`PoolBehavior::deadlock`](crate::PoolBehavior::deadlock).
#[derive(Debug, Clone)]
pub struct DeadlockReport {
    workers: Vec<WorkerState>,
    queued: Vec<String>,
}

impl DeadlockReport {
    /// Each worker thread's state, by index.
    pub fn workers(&self) -> &[WorkerState] {
        &self.workers
    }

    /// The channels (their keys, as `Debug` prints them) whose tasks wait.
    pub fn queued_channels(&self) -> &[String] {
        &self.queued
    }
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "every worker thread is blocked while tasks wait in {}:",
            self.queued.join(", ")
        )?;
        for (index, state) in self.workers.iter().enumerate() {
            let state = match state {
                WorkerState::Working => "working",
                WorkerState::BlockedInPlace => "blocked in block_in_place with no stand-in",
                WorkerState::WaitingWithoutHelping => "waiting in block_on, unable to help",
            };
            write!(f, " worker {index}: {state};")?;
        }
        Ok(())
    }
}

/// The blocked worker threads of one pool.
pub(crate) struct Blocked {
    /// Per sleep domain (0: the common one): its blocked workers.
    counts: Box<[AtomicUsize]>,
    /// Per sleep domain: its worker threads.
    sizes: Box<[usize]>,
    /// Per worker thread: its domain.
    domain_of: Box<[usize]>,
    states: Box<[AtomicU8]>,
    reported: AtomicBool,
}

impl Blocked {
    /// One worker thread per entry of `domain_of`, which names its sleep
    /// domain.
    pub(crate) fn new(domain_of: &[usize]) -> Blocked {
        let domains = domain_of.iter().max().map_or(1, |&d| d + 1);
        let size = |domain| domain_of.iter().filter(|&&d| d == domain).count();
        Blocked {
            counts: (0..domains).map(|_| AtomicUsize::new(0)).collect(),
            sizes: (0..domains).map(size).collect(),
            domain_of: domain_of.into(),
            states: domain_of.iter().map(|_| AtomicU8::new(0)).collect(),
            reported: AtomicBool::new(false),
        }
    }

    /// Worker `index` blocks as `state`; `true` if every common worker
    /// thread is blocked now (the caller checks for queued tasks).
    pub(crate) fn block(&self, index: usize, state: WorkerState) -> bool {
        self.states[index].store(state as u8, Ordering::SeqCst);
        self.counts[self.domain_of[index]].fetch_add(1, Ordering::SeqCst);
        self.all(0)
    }

    /// Worker `index` is working again; a later deadlock is a new episode.
    pub(crate) fn unblock(&self, index: usize) {
        self.states[index].store(WorkerState::Working as u8, Ordering::SeqCst);
        self.counts[self.domain_of[index]].fetch_sub(1, Ordering::SeqCst);
        self.reported.store(false, Ordering::SeqCst);
    }

    /// Whether every worker thread of sleep domain `domain` (0: the common
    /// one) is blocked (a domain of none never is; a reserved one has one
    /// at least).
    #[inline]
    pub(crate) fn all(&self, domain: usize) -> bool {
        let n = self.counts[domain].load(Ordering::SeqCst);
        n != 0 && n == self.sizes[domain]
    }

    /// Claims the report of this episode, with tasks waiting in the
    /// `queued` channels: `Some` once (none while `queued` is empty).
    pub(crate) fn claim_report(&self, queued: Vec<String>) -> Option<DeadlockReport> {
        let first = !queued.is_empty() && !self.reported.swap(true, Ordering::SeqCst);
        let state = |s: &AtomicU8| STATES[usize::from(s.load(Ordering::SeqCst))];
        first.then(|| DeadlockReport {
            workers: self.states.iter().map(state).collect(),
            queued,
        })
    }
}
