//! Blocking threads: a bounded set of threads, apart from the workers, for
//! work that blocks (`spawn_blocking`) and for the stand-ins that serve a
//! worker's place while it blocks (`block_in_place`, see
//! `pool::blocking`).
//!
//! # States of a blocking thread
//!
//! * **running** a job;
//! * **idle**: waiting on the condition variable for a job, for at most
//!   the keep-alive; then it exits.
//!
//! A job is queued under the lock, and then: an idle thread is notified
//! if there is one not already promised a job; else a new thread is
//! started, if the set is under its bound or the job is a stand-in
//! (stand-ins are bounded by the pool's guest seats, not by this set);
//! else the job waits in the queue for the next thread that finishes.
//!
//! # Invariant
//!
//! *Every queued job is taken by a thread, or given back.* Under the lock:
//! each queued job is matched by an idle thread promised to it
//! (`promised`), a thread started for it, or a running thread that will
//! look at the queue when its job ends (only when the set is at its bound,
//! so at least one thread runs). An idle thread whose keep-alive ran out
//! exits only under the lock, seeing the queue empty and no job promised
//! to it. A thread that cannot be started makes its caller look for its
//! own job (by number): gone, a thread took it; still queued, the caller
//! takes it back (`job(false)`) and reports the error, unless a thread is
//! running (started, not starting) that will take it when its job ends. A
//! stand-in's job is always taken back: its worker must not count on a
//! stand-in that is not there.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

// Plain std: no loom model runs a blocking thread (loom's threads cannot
// time out a wait).
use std::sync::{Condvar, Mutex};

use crate::sync::lock_std as lock;

/// A job for a blocking thread: called with `true` to run, or with
/// `false`, by the caller, when no thread could be started to run it (it
/// then gives back what it holds).
pub(crate) type Job = Box<dyn FnOnce(bool) + Send>;

/// How a pool's blocking threads are bounded (see
/// [`PoolBehavior::blocking`](crate::PoolBehavior::blocking)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingConfig {
    /// The most threads that run [`spawn_blocking`](crate::Pool::spawn_blocking)
    /// closures at once; more calls queue. At least 1. Default 512
    /// (tokio's).
    pub max_threads: usize,
    /// How long an idle blocking thread waits for work before it exits.
    /// Default 10 s (tokio's).
    pub keep_alive: Duration,
    /// Whether a worker inside [`block_in_place`](crate::block_in_place)
    /// gets a stand-in thread that serves its place meanwhile (default
    /// `true`). Without, the pool has one worker fewer for as long as the
    /// closure blocks, and the deadlock check may fire.
    pub stand_ins: bool,
}

impl Default for BlockingConfig {
    fn default() -> BlockingConfig {
        BlockingConfig {
            max_threads: 512,
            keep_alive: Duration::from_secs(10),
            stand_ins: true,
        }
    }
}

/// The blocking threads of one pool.
pub(crate) struct Blocking {
    state: Arc<State>,
    name: String,
    /// The threads' stack size, in bytes.
    pub(crate) stack_size: usize,
}

struct State {
    inner: Mutex<Inner>,
    condvar: Condvar,
    max_threads: usize,
    keep_alive: Duration,
}

#[derive(Default)]
struct Inner {
    /// Queued jobs, each with its number (stand-ins first).
    queue: VecDeque<(u64, Job)>,
    /// The next job's number.
    next: u64,
    /// Threads started (or being started) and not exited.
    threads: usize,
    /// Of those, threads whose start has not returned yet.
    starting: usize,
    /// Threads waiting for a job.
    idle: usize,
    /// Idle threads notified for a queued job, not yet woken.
    promised: usize,
}

impl Blocking {
    /// Threads named `name`, with stacks of `stack_size` bytes (a
    /// stand-in runs tasks, so it gets a worker's).
    pub(crate) fn new(config: &BlockingConfig, name: String, stack_size: usize) -> Blocking {
        Blocking {
            state: Arc::new(State {
                inner: Mutex::new(Inner::default()),
                condvar: Condvar::new(),
                max_threads: config.max_threads.max(1),
                keep_alive: config.keep_alive,
            }),
            name,
            stack_size,
        }
    }

    /// Queues `job` for a blocking thread (see the module doc); a stand-in
    /// job may start a thread past the bound. If no thread runs and none
    /// could be started, calls `job(false)` and returns the error.
    pub(crate) fn run(&self, job: Job, stand_in: bool) -> Result<(), std::io::Error> {
        let mut inner = lock(&self.state.inner);
        let id = inner.next;
        inner.next += 1;
        // A stand-in is waited for by a blocked worker: it goes first.
        if stand_in {
            inner.queue.push_front((id, job));
        } else {
            inner.queue.push_back((id, job));
        }
        if inner.idle > inner.promised {
            inner.promised += 1;
            drop(inner);
            self.state.condvar.notify_one();
            return Ok(());
        }
        if inner.threads >= self.state.max_threads && !stand_in {
            return Ok(()); // a running thread takes it when it is done
        }
        inner.threads += 1;
        inner.starting += 1;
        drop(inner);
        let state = self.state.clone();
        let spawned = thread::Builder::new()
            .name(self.name.clone())
            .stack_size(self.stack_size)
            .spawn(move || state.serve());
        let mut inner = lock(&self.state.inner);
        inner.starting -= 1;
        let Err(e) = spawned else {
            return Ok(());
        };
        // If a thread took our job meanwhile, it runs; else we take it
        // back, unless a thread is running (not starting) that will take
        // it when its job ends.
        inner.threads -= 1;
        let later = inner.threads > inner.starting + inner.idle && !stand_in;
        let at = inner.queue.iter().position(|(job, _)| *job == id);
        let Some(at) = at.filter(|_| !later) else {
            return Ok(());
        };
        let (_, job) = inner.queue.remove(at).expect("found above");
        drop(inner);
        job(false);
        Err(e)
    }

    /// Threads started and not exited (for tests and reports).
    pub(crate) fn threads(&self) -> usize {
        lock(&self.state.inner).threads
    }
}

impl State {
    /// A blocking thread's loop: jobs until the keep-alive runs out idle.
    fn serve(&self) {
        let mut inner = lock(&self.inner);
        loop {
            if let Some((_, job)) = inner.queue.pop_front() {
                drop(inner);
                // A job catches its own panics (`pool::blocking`); this
                // catch keeps the thread's count right should one escape.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(true)));
                inner = lock(&self.inner);
                continue;
            }
            inner.idle += 1;
            let deadline = crate::sync::later(Instant::now(), self.keep_alive);
            // Until a submitter promises this thread a job, or the keep-alive
            // time runs out; then it takes the promise, if one came.
            inner = self
                .condvar
                .wait_timeout_while(inner, self.keep_alive, |inner| inner.promised == 0)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            inner.promised = inner.promised.saturating_sub(1);
            inner.idle -= 1;
            if inner.queue.is_empty() && Instant::now() >= deadline {
                inner.threads -= 1;
                return;
            }
        }
    }
}
