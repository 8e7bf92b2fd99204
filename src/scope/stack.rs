//! `join` on a seat of the channel's pool: `b` is a job on the caller's
//! stack (rayon's `StackJob`), not a task.
//!
//! The rule: the caller publishes `b` on its seat's job deque, runs `a`,
//! then takes `b` back and runs it, unless a thief stole it; then it waits
//! for `b`'s latch. Nothing is allocated, nothing is counted towards close.
//!
//! Why the job's memory outlives every use: the job lives in `join_on`'s
//! frame, and `join_on` returns only after the job ran, on the caller
//! (taken back) or on its thief (latch set). The thief copies what it
//! needs to wake the caller before it sets the latch, and touches nothing
//! of the job after.
//!
//! Why the caller finds `b` if nobody stole it: between the push and the
//! pop, `a` runs on this thread, and every `join` inside it takes its own
//! job off the deque before it returns. So `b` is on top, or gone.
//!
//! # The latch
//!
//! A `latch::OnceLatch` whose target is the owner's thread: `UNSET →
//! WAITING` by the owner, once, after it wrote its thread into the latch;
//! `→ SET` by the thief, once. A thief that finds `UNSET` sets the latch
//! in one exchange and wakes nobody: the owner's own exchange then fails,
//! and it does not wait. A thief that finds `WAITING` takes the owner's
//! thread first (the owner cannot leave before `SET`), then stores `SET`,
//! then unparks the owner. `loom_model` checks it.
//!
//! # Isolated waits
//!
//! The rule: a waiting owner runs only work of a level strictly above its
//! channel's, and jobs of `b`'s subtree that other seats published (its
//! own deque holds the frames below it, whose owners take them back). It
//! never starts a task of its own level or a lower one, nor a job of
//! another subtree, so a job waiting for a short half does not stall
//! behind an unrelated long one (rayon #957).
//!
//! How a job's subtree is known: every job has a [`Node`], whose parent is
//! the node of the job its publisher was running (null: none). A stack
//! job's node is in the job; a scope's spawned jobs share the scope's
//! node, whose parent is the job running where the scope was opened. A
//! job belongs to `b`'s subtree if `b`'s node is on its chain of parents.
//! The waiter steals, and a job of another subtree goes to the channel's
//! injector (see `core::job::steal_within`), where an idle worker or its
//! own owner, for whom it is its own `b`, still finds it.
//!
//! A task polled inside a job (a scope's wait helping, or work of a
//! higher level in this wait) is no part of the job: the worker's tag is
//! cleared while it runs (`WorkerLocal::outside_jobs`), so the jobs it
//! publishes are roots of their own.
//!
//! Why every node on the chain is alive when it is read: the chain is read
//! only for a job that was taken and has not run. Its publisher's frame
//! waits for it, inside the run of the parent job (or inside the scope
//! whose node it is), which therefore has not returned; and so on up the
//! chain. A spawned job has no node of its own, since it may finish before
//! the jobs it spawned: they name the scope, which outlives them all.
//!
//! Why the wait still makes progress: the thief runs `b`, or, if a waiter
//! moved `b` to the injector before anyone ran it, the owner finds it
//! there and runs it (see `core::job`: even when it may not help).
//! Between rounds that found nothing it parks, a timed wait (1 µs
//! doubling to 100 µs, then up to a tenth of the time it found nothing,
//! at most 1 ms), so it looks again for urgent work, for jobs of `b`'s
//! subtree and for `b` at least that often; the thief unparks it at once
//! when `b` is done. The owner is not one of the sleep protocol's
//! idle workers meanwhile: no post counts on it.
//!
//! Patience: a stolen `b` may block without helping (a plain channel
//! receive, a wait on another pool, a worker deep in nested waits) on
//! work that only the owner is free to run. So after [`PATIENCE`] (a
//! second in a row with nothing to run), the owner runs
//! any work of its pool for the rest of the wait, as rayon's does (and
//! still looks for `b`). Where helping would not deadlock, isolation
//! delays such a wait by that second (oneTBB's `isolate` deadlocks). On
//! a terminated pool a round drains the channels, as `help_until` does.
//!
//! A scope's wait is isolated the same way when all the scope's work on
//! the waiter's pool went to one channel, its node the root (see
//! `ScopeState::wait`), and `ScopedJoinHandle::join` too (it runs none of
//! its channel's jobs then). Both run the scope's claimed tasks first (see `claim`), and
//! both are isolated only while none of the scope's tasks is parked: once
//! woken, such a task may need the waiter to run it. A task of another
//! pool counts as parked until it ends: its poll may wait for the
//! waiter's pool.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::thread::Result as ThreadResult;

use std::sync::Arc;

use super::ScopeState;
use crate::core::context::{Allowed, WorkerLocal};
use crate::core::job::{JobRef, Tag};
use crate::core::Shared;
use std::time::{Duration, Instant};

use super::latch::{CountLatch, OnceLatch};
use crate::sync::{park, park_timeout, thread_current, Thread, UnsafeCell};

/// The first and the longest park of a waiting owner that found nothing
/// to run: it looks again for work it may run (a job of `b`'s channel, a
/// task of a higher level) at least this often. Past a millisecond with
/// nothing to run, a park may last a tenth of that time, up to
/// [`MAX_LONG_PAUSE`]: a long wait costs about 1% of a core, not 12%.
const MIN_PAUSE: Duration = Duration::from_micros(1);
const MAX_PAUSE: Duration = Duration::from_micros(100);
const MAX_LONG_PAUSE: Duration = Duration::from_millis(1);

/// How long an isolated wait finds nothing to run, in a row, before it
/// runs any work of its pool (see "Isolated waits").
const PATIENCE: Duration = Duration::from_secs(1);

/// The pause after a round that panicked: a channel that always panics
/// costs little and logs at most a hundred times a second.
const PANIC_PAUSE: Duration = Duration::from_millis(10);

/// What a stolen job's owner waits on: the owner's thread is the target
/// (see `latch::OnceLatch`), and the thief sets it.
pub(super) type JobLatch = OnceLatch<Thread>;

impl JobLatch {
    /// The owner's wait: registers, then calls `help_once` until the
    /// latch is set (see [`help_until`]).
    pub(super) fn wait(&self, mut help_once: impl FnMut(bool) -> bool) {
        if self.register(thread_current) {
            help_until(
                || self.is_set(),
                |isolated| Some(help_once(isolated)),
                "a join's caller",
            );
        }
    }

    /// The wait of an owner that cannot help (a thread outside the pool):
    /// parked until the thief unparks it.
    pub(super) fn wait_parked(&self) {
        while self.register(thread_current) && !self.is_set() {
            park();
        }
    }
}

/// An isolated wait's loop: calls `round` until `done()`, parking (a
/// timed wait, doubling from [`MIN_PAUSE`] up to [`MAX_PAUSE`]) after a
/// round that ran nothing. `round(true)` runs only what isolation allows;
/// after [`PATIENCE`] in a row with nothing run, `round(false)` may run
/// any work of the pool, for the rest of the wait. What unwinds out of a
/// round (a behavior's `channel`, polled while helping) must not end the
/// wait while others may still write what it waits for: it is logged,
/// and the wait goes on after [`PANIC_PAUSE`]. Returns `false` if a round
/// said stop (`None`) before `done()`.
pub(super) fn help_until(
    done: impl Fn() -> bool,
    mut round: impl FnMut(bool) -> Option<bool>,
    waiter: &str,
) -> bool {
    let mut pause = MIN_PAUSE;
    // Since when the rounds found nothing to run (`None`: the last ran
    // something), and whether the wait ran out of patience (for good).
    let mut idle_since: Option<Instant> = None;
    let mut isolated = true;
    while !done() {
        match catch_unwind(AssertUnwindSafe(|| round(isolated))) {
            Ok(Some(true)) => {
                pause = MIN_PAUSE;
                idle_since = None;
                continue;
            }
            Ok(Some(false)) => {}
            Ok(None) => return false,
            Err(panic) => {
                crate::contain::log_panic(panic, |message| {
                    log::error!(
                        "smartpool: a panic while {waiter} helped its pool: {message}; waiting on"
                    )
                });
                park_timeout(PANIC_PAUSE);
            }
        }
        if done() {
            break;
        }
        park_timeout(pause);
        let idle = idle_since.get_or_insert_with(Instant::now).elapsed();
        isolated &= idle < PATIENCE;
        pause = (pause * 2).min((idle / 10).clamp(MAX_PAUSE, MAX_LONG_PAUSE));
    }
    true
}

/// A job's place in the tree of jobs (see "Isolated waits").
pub(super) struct Node {
    parent: *const Node,
}

// SAFETY: the parent is only read by `within`, under its contract.
unsafe impl Send for Node {}
// SAFETY: as above; nothing writes it after it is made.
unsafe impl Sync for Node {}

impl Node {
    /// The node of a job published now by the calling thread, `local` if
    /// it is a worker: its parent is the job that the worker runs.
    pub(super) fn here(local: Option<&WorkerLocal>) -> Node {
        Node {
            parent: local.map_or(std::ptr::null(), |local| local.job_tag().0.cast()),
        }
    }

    /// The tag of jobs at this node.
    pub(super) fn tag(&self) -> Tag {
        Tag(std::ptr::from_ref(self).cast())
    }
}

/// Whether the job tagged `tag` belongs to `root`'s subtree: `root` is on
/// its chain of parents.
///
/// # Safety
///
/// `tag` is the tag of a job that was taken and has not run.
pub(super) unsafe fn within(tag: Tag, root: &Node) -> bool {
    let mut node = tag.0.cast::<Node>();
    while !node.is_null() {
        if std::ptr::eq(node, root) {
            return true;
        }
        // SAFETY: alive, by the contract ("Isolated waits": every node on
        // a pending job's chain is).
        node = unsafe { (*node).parent };
    }
    false
}

/// `b`, its result, the latch its owner waits on, and its node.
struct StackJob<F, R> {
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<ThreadResult<R>>>,
    latch: JobLatch,
    node: Node,
}

impl<F, R> StackJob<F, R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    /// Runs the job at `data` on a thief.
    ///
    /// # Safety
    ///
    /// `data` points to a live `StackJob<F, R>` that its owner published
    /// and did not take back: the thief is the only party touching its
    /// closure and result until the latch is set.
    unsafe fn run_stolen(data: *const ()) {
        let job = data.cast::<StackJob<F, R>>();
        // SAFETY: the thief alone touches the closure and the result, and
        // the job is alive until its latch is set.
        let func = unsafe { (*job).func.with_mut(|func| (*func).take()) };
        let result = catch_unwind(AssertUnwindSafe(func.expect("a job runs once")));
        // SAFETY: as above; the owner reads it after the latch's acquire.
        unsafe { (*job).result.with_mut(|slot| *slot = Some(result)) };
        // SAFETY: the latch is live until set; after it, only the clone of
        // the owner's thread is used.
        if let Some(owner) = unsafe { JobLatch::set(std::ptr::addr_of!((*job).latch)) } {
            owner.unpark();
        }
    }

    /// [`StackJob::run_stolen`], for a job whose closure has no name.
    fn run_fn(&self) -> unsafe fn(*const ()) {
        Self::run_stolen
    }
}

/// `join` on `local`, a seat of the pool of channel `channel`.
pub(super) fn join_on<A, B, RA, RB>(
    local: &WorkerLocal,
    shared: &Shared,
    channel: usize,
    a: A,
    b: B,
) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let job = StackJob {
        func: UnsafeCell::new(Some(b)),
        result: UnsafeCell::new(None),
        latch: JobLatch::new(),
        node: Node::here(Some(local)),
    };
    let data = std::ptr::addr_of!(job).cast::<()>();
    // SAFETY: `job` lives until this function returns, which it does only
    // once the job ran (taken back below, or its latch set); its closure
    // and result are `Send`.
    let job_ref = unsafe { JobRef::new(data, job.run_fn(), channel, job.node.tag()) };
    local.jobs.push(shared, local.index, job_ref);
    let ra = catch_unwind(AssertUnwindSafe(a));
    let rb = match local.jobs.pop(channel) {
        Some(top) if top.is(data) => {
            // Not stolen: ours again.
            // SAFETY: taken back: nobody else can reach the job.
            let b = job.func.with_mut(|func| unsafe { (*func).take() });
            catch_unwind(AssertUnwindSafe(b.expect("a job runs once")))
        }
        other => {
            // Stolen: an older job, if any, goes back on top, untouched.
            if let Some(older) = other {
                local.jobs.push(shared, local.index, older);
            }
            // SAFETY: `help_once` calls the filter with jobs taken and
            // not run.
            let mine = |j: &JobRef| unsafe { within(j.tag(), &job.node) };
            job.latch.wait(|patient| {
                let allowed = Allowed::Subtree(job.node.tag(), &mine);
                local.help_once(channel, allowed.while_patient(patient))
            });
            // SAFETY: the latch is set (acquire): the thief wrote the
            // result and touches the job no more.
            let rb = job.result.with_mut(|slot| unsafe { (*slot).take() });
            rb.expect("a stolen job ran")
        }
    };
    // `a`'s panic if both panicked, as rayon.
    let ra = ra.unwrap_or_else(|panic| resume_unwind(panic));
    (ra, rb.unwrap_or_else(|panic| resume_unwind(panic)))
}

/// A closure spawned in a scope, on the heap, published as a job: the
/// scope's count and a count towards close come with it, so neither the
/// scope nor close ends before it ran.
struct HeapJob<F> {
    func: F,
    /// The scope's state, alive while the job's count is held: the scope
    /// does not return before its latch opens, which the job's count-down
    /// does at the earliest, and touches nothing after (see `latch`).
    scope: *const ScopeState,
    /// The pool, alive while the job's count is held: released after the
    /// run.
    shared: *const Shared,
}

impl<F: FnOnce() + Send> HeapJob<F> {
    /// Runs the job at `data` and frees it.
    ///
    /// # Safety
    ///
    /// `data` comes from `Box::into_raw` in [`spawn_on`], and runs once.
    unsafe fn run(data: *const ()) {
        // SAFETY: by the contract.
        let job = unsafe { *Box::from_raw(data.cast_mut().cast::<HeapJob<F>>()) };
        // SAFETY: alive while the job's count is held (see `scope`).
        unsafe { (*job.scope).run_caught(job.func) };
        // SAFETY: alive until this count-down opens the latch, at the
        // earliest; the count-down touches nothing after it.
        unsafe { CountLatch::count_down_last(std::ptr::addr_of!((*job.scope).latch)) };
        // SAFETY: the count keeps the pool from terminating, so its shared
        // state alive, until this release.
        unsafe { (*job.shared).release_counted() };
    }
}

/// `Scope::spawn` on channel `channel` of the pool of `shared`, from
/// `local` if it is one of the pool's seats (on its deque), else from
/// outside (on the channel's job injector). The scope's count is already
/// taken. If the pool refuses new work (it is closing), `func` runs here.
pub(super) fn spawn_on<F>(
    local: Option<&WorkerLocal>,
    shared: &Arc<Shared>,
    channel: usize,
    scope: &Arc<ScopeState>,
    func: F,
    fifo: bool,
) where
    F: FnOnce() + Send,
{
    // Counted towards close whatever the channel's close policy: a job
    // cannot be dropped unrun, so close waits for it to run.
    if !shared.close.admit() {
        shared.release_counted();
        return run_here(scope, func);
    }
    let job = Box::new(HeapJob {
        func,
        scope: Arc::as_ptr(scope),
        shared: &**shared,
    });
    let data = Box::into_raw(job).cast_const().cast::<()>();
    let tag = scope.node.tag();
    // SAFETY: the box is freed by its one run. What `func` borrows outlives
    // it: the scope does not return before its count, which the run gives
    // back last but the close count, reaches 0.
    let mut job_ref = unsafe { JobRef::new(data, HeapJob::<F>::run, channel, tag) };
    if fifo {
        let queue = Fifo::of(scope, shared.id, channel);
        crate::sync::lock(&queue.jobs).push_back(job_ref);
        // SAFETY: the queue lives as long as the scope's state, which lives
        // until its count reaches 0; each published "run the oldest" stands
        // for one queued job, which holds a count until it ran: the queue
        // outlives the run below.
        job_ref = unsafe { JobRef::new(Arc::as_ptr(&queue).cast(), run_oldest, channel, tag) };
    }
    match local {
        Some(local) => local.jobs.push(shared, local.index, job_ref),
        None => crate::core::job::inject(shared, job_ref),
    }
}

/// A scope's `spawn_fifo` queue for one channel of one pool: its jobs,
/// oldest first.
pub(super) struct Fifo {
    pool: usize,
    channel: usize,
    jobs: crate::sync::Mutex<std::collections::VecDeque<JobRef>>,
}

impl Fifo {
    /// `scope`'s queue for channel `channel` of the pool `pool`, made on
    /// first use.
    fn of(scope: &ScopeState, pool: usize, channel: usize) -> Arc<Fifo> {
        let mut queues = crate::sync::lock(&scope.fifo);
        if let Some(queue) = queues
            .iter()
            .find(|q| q.pool == pool && q.channel == channel)
        {
            return queue.clone();
        }
        let queue = Arc::new(Fifo {
            pool,
            channel,
            jobs: crate::sync::Mutex::new(std::collections::VecDeque::new()),
        });
        queues.push(queue.clone());
        queue
    }
}

/// Runs the oldest job of the `spawn_fifo` queue at `data`.
///
/// # Safety
///
/// `data` is a scope's queue with a job in it for this call.
unsafe fn run_oldest(data: *const ()) {
    // SAFETY: by the contract; the queue is not touched after the run.
    let queue = unsafe { &*data.cast::<Fifo>() };
    let job = crate::sync::lock(&queue.jobs).pop_front();
    job.expect("one queued job a published call").run();
}

/// Runs a spawned closure the pool refused, on the caller.
pub(super) fn run_here<F: FnOnce()>(scope: &ScopeState, func: F) {
    scope.run_caught(func);
    scope.latch.count_down();
}

/// `install` from a thread that is no seat of the pool of `shared`: `f`
/// is a job on channel `channel`'s injector, run by a worker at the
/// channel's level while the caller waits parked. It holds a count
/// towards close, so the pool runs it before it terminates. If the pool
/// refuses new work, or has no worker thread to run it, `f` runs here.
pub(super) fn install_from_outside<F, R>(shared: &Shared, channel: usize, f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    if !shared.close.has_workers() {
        return f();
    }
    if !shared.close.admit() {
        shared.release_counted();
        return f();
    }
    /// Gives the count back once `f` ran or unwound.
    struct Release<'a>(&'a Shared);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.release_counted();
        }
    }
    let release = Release(shared);
    let job = StackJob {
        func: UnsafeCell::new(Some(move || {
            let _release = release;
            f()
        })),
        result: UnsafeCell::new(None),
        latch: JobLatch::new(),
        node: Node::here(None),
    };
    let data = std::ptr::addr_of!(job).cast::<()>();
    // SAFETY: `job` lives until this function returns, which it does only
    // once the job ran (its latch set: nobody else runs it); its closure
    // and result are `Send`.
    let job_ref = unsafe { JobRef::new(data, job.run_fn(), channel, job.node.tag()) };
    crate::core::job::inject(shared, job_ref);
    job.latch.wait_parked();
    // SAFETY: the latch is set (acquire): the thief wrote the result and
    // touches the job no more.
    let result = job.result.with_mut(|slot| unsafe { (*slot).take() });
    let result = result.expect("an installed job ran");
    result.unwrap_or_else(|panic| resume_unwind(panic))
}
