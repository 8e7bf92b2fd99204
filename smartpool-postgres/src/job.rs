//! Jobs: what is enqueued ([`NewJob`]), what a handler gets ([`Job`]),
//! what a handler's failure says ([`JobError`]), and a row as it stands
//! ([`JobRow`]).

use std::fmt;
use std::time::{Duration, SystemTime};

/// A job to enqueue: a kind (which handler runs it) and a payload, at a
/// level (0 the highest; default 0), due now unless delayed, with an
/// optional deadline (earlier deadlines first within a level) and a bound
/// on attempts (default 5).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use smartpool_postgres::NewJob;
///
/// let job = NewJob::new("resize", b"cat.png".to_vec())
///     .level(1)
///     .deadline(SystemTime::now() + Duration::from_secs(30))
///     .max_attempts(3);
/// # let _ = job;
/// ```
#[derive(Debug, Clone)]
pub struct NewJob {
    pub(crate) kind: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) level: i32,
    pub(crate) run_at: Option<SystemTime>,
    pub(crate) deadline: Option<SystemTime>,
    pub(crate) max_attempts: i32,
    pub(crate) unique: Option<String>,
}

impl NewJob {
    /// A job of `kind` carrying `payload`, at level 0, due now.
    pub fn new(kind: impl Into<String>, payload: impl Into<Vec<u8>>) -> NewJob {
        NewJob {
            kind: kind.into(),
            payload: payload.into(),
            level: 0,
            run_at: None,
            deadline: None,
            max_attempts: 5,
            unique: None,
        }
    }

    /// Its level: 0 is the highest.
    pub fn level(mut self, level: i32) -> NewJob {
        self.level = level;
        self
    }

    /// Not claimed before `at`.
    pub fn run_at(mut self, at: SystemTime) -> NewJob {
        self.run_at = Some(at);
        self
    }

    /// Not claimed before `delay` has passed.
    pub fn delay(self, delay: Duration) -> NewJob {
        self.run_at(SystemTime::now() + delay)
    }

    /// Within its level, jobs with earlier deadlines are claimed first
    /// (jobs without one last). A deadline orders; nothing expires.
    pub fn deadline(mut self, deadline: SystemTime) -> NewJob {
        self.deadline = Some(deadline);
        self
    }

    /// After this many failed attempts, the job goes to `dead` (at least 1).
    pub fn max_attempts(mut self, attempts: i32) -> NewJob {
        self.max_attempts = attempts.max(1);
        self
    }

    /// At most one job with this key is queued or running at a time.
    /// Enqueuing another while one is keeps the one there and returns its
    /// id ([`Queue::enqueue`](crate::Queue::enqueue)); once it is done or
    /// dead, the key is free again. (`enqueue_many` refuses unique jobs:
    /// enqueue them one at a time.)
    pub fn unique(mut self, key: impl Into<String>) -> NewJob {
        self.unique = Some(key.into());
        self
    }
}

/// A claimed job, as its handler gets it.
#[derive(Debug, Clone)]
pub struct Job {
    pub(crate) id: i64,
    pub(crate) kind: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) level: i32,
    pub(crate) deadline: Option<SystemTime>,
    pub(crate) attempt: i32,
    pub(crate) max_attempts: i32,
    pub(crate) lease: LeaseSignal,
}

/// Set once when the worker learns that another holds a job's lease
/// (see [`Job::lease_lost`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct LeaseSignal(std::sync::Arc<LeaseState>);

#[derive(Debug, Default)]
struct LeaseState {
    lost: std::sync::atomic::AtomicBool,
    waker: futures::task::AtomicWaker,
}

impl LeaseSignal {
    /// The lease is lost: wakes the handler waiting for it.
    pub(crate) fn lose(&self) {
        self.0.lost.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.waker.wake();
    }
}

/// Resolves when the job's lease is lost: see [`Job::lease_lost`].
#[derive(Debug)]
pub struct LeaseLost(LeaseSignal);

impl std::future::Future for LeaseLost {
    type Output = ();
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let state = &(self.0).0;
        if state.lost.load(std::sync::atomic::Ordering::SeqCst) {
            return std::task::Poll::Ready(());
        }
        state.waker.register(cx.waker());
        // Register, then look again: `lose` sets the flag, then wakes.
        if state.lost.load(std::sync::atomic::Ordering::SeqCst) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

impl Job {
    /// Resolves if this worker learns that it no longer holds the job's
    /// lease: a renewal found the row locked by another worker, or no
    /// longer running (after a partition longer than the lease, another
    /// worker may be running the same job). The handler should stop: its
    /// outcome will not be written. Learned at a renewal, every third of
    /// the lease. (One handler task awaits it at a time.)
    pub fn lease_lost(&self) -> LeaseLost {
        LeaseLost(self.lease.clone())
    }

    /// Its id, as [`Queue::enqueue`](crate::Queue::enqueue) returned it.
    pub fn id(&self) -> i64 {
        self.id
    }
    /// Its kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// Its payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
    /// Its level when claimed.
    pub fn level(&self) -> i32 {
        self.level
    }
    /// Its deadline, if it has one.
    pub fn deadline(&self) -> Option<SystemTime> {
        self.deadline
    }
    /// Which attempt this is: 1 for the first.
    pub fn attempt(&self) -> i32 {
        self.attempt
    }
    /// Its bound on attempts.
    pub fn max_attempts(&self) -> i32 {
        self.max_attempts
    }
}

/// Why a handler failed: kept in the job's row (`last_error`); the job
/// is retried after a backoff, or goes to `dead` after its last attempt.
/// Any error converts into it with `?` (it is therefore not an error type
/// itself, as `anyhow::Error` is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError(pub String);

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(e: E) -> JobError {
        JobError(e.to_string())
    }
}

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting to be claimed (or for its `run_at`).
    Queued,
    /// Claimed, under a lease.
    Running,
    /// Finished, kept ([`ServeOptions::keep_done`](crate::ServeOptions::keep_done)).
    Done,
    /// Failed its last attempt, or no handler knows its kind.
    Dead,
}

impl JobState {
    pub(crate) fn parse(s: &str) -> Option<JobState> {
        Some(match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "done" => JobState::Done,
            "dead" => JobState::Dead,
            _ => return None,
        })
    }
}

/// A job's row as it stands ([`Queue::job`](crate::Queue::job)).
#[derive(Debug, Clone)]
pub struct JobRow {
    /// Its id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its level.
    pub level: i32,
    /// Where it stands.
    pub state: JobState,
    /// Attempts claimed so far.
    pub attempts: i32,
    /// The last failure's text.
    pub last_error: Option<String>,
    /// The worker that holds it, or held it last.
    pub locked_by: Option<String>,
    /// When its lease runs out, while it runs.
    pub locked_until: Option<SystemTime>,
}
