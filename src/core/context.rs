//! The worker context: what a worker thread is, for the layers above.
//!
//! A worker thread owns a [`WorkerLocal`]: its index, one local deque per
//! channel (see `steal`), its LIFO slot state (see `lifo`), its back-offs
//! from panicking channels, and the pool's [`PoolHooks`] (helping in a
//! wait, running a claimed scoped task). When its thread starts, the worker
//! enters the crate's one thread-local (`crate::context`) with it and its
//! pool's address; everything that asks "am I a worker, of which pool"
//! asks that thread-local: the task layer for the pool address alone (a
//! wake on a worker of the task's pool reschedules through it), this
//! module for the rest ([`current`], [`is_own_worker_of`], and the local pushes
//! [`offer_lifo`] and [`push_local`]).
//!
//! [`WorkerContext`] is the same worker as a channel's `pop` sees it, or
//! "no worker" for a thread draining a closed pool.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crossbeam_deque::{Stealer, Worker};

use super::Shared;
use crate::context::Entered;
use crate::lifo::{LifoSlot, SlotTask};
use crate::task::RunningTask;

/// The deques a worker thread owns, one per channel index.
pub(crate) struct WorkerLocal {
    pub(crate) pool_id: usize,
    pub(crate) index: usize,
    /// Per channel: the worker's deque and counts (see [`LocalChannel`]).
    pub(crate) channels: Box<[LocalChannel]>,
    /// Whether any channel's `fault` leaves it alone: one load on the hot
    /// path (cleared when the last back-off is seen to run out).
    faulted: Cell<bool>,
    /// The worker's own state about its LIFO slot (see `lifo`).
    pub(crate) lifo: LifoSlot,
    /// The seat's job deques (see `job`).
    pub(crate) jobs: super::job::Jobs,
    /// A job the worker's search took, to run next (see `Pool::take`), and
    /// whether there is one (one load to check on the search's path).
    stolen: Cell<Option<super::job::JobRef>>,
    holding: Cell<bool>,
    /// The channel of the job this worker runs outside any task's poll, if
    /// it runs one (for `should_yield` inside it).
    job_channel: Cell<Option<usize>>,
    /// The tag of that job (null: none; see `job`).
    job_tag: Cell<super::job::Tag>,
    /// The worker ran a job since its last idle spell (see
    /// `sleep::IdleState::linger`).
    pub(crate) ran_job: Cell<bool>,
    /// Where the worker's next search round looks at the other workers'
    /// slots (see `lifo::watch::Watch::observe_window`).
    pub(crate) watch_from: Cell<usize>,
    /// Whether the worker holds its idle state (searching or asleep).
    pub(crate) idle: Cell<bool>,
    /// An address near the top of the worker thread's stack (for a guest:
    /// of the frame that took the seat).
    pub(crate) stack_base: usize,
    /// How much stack below `stack_base` the worker may have used and still
    /// start helping in a wait (see `pool::worker`).
    pub(crate) stack_budget: usize,
    /// Whether this is a guest seat (see `seats`), not a worker thread's.
    pub(crate) guest: bool,
    /// The lowest level this seat serves: the last, unless the seat is a
    /// worker reserved for a higher level (see `schedule::Seating`).
    pub(crate) floor: usize,
    /// Whether the seat is a reserved worker's (`floor` above the lowest
    /// level).
    pub(crate) reserved: bool,
    /// The pool's shared state while a thread is this worker (for
    /// `should_yield`; taken out as it leaves, so that a free guest seat
    /// does not hold its own pool).
    shared: Option<std::sync::Arc<Shared>>,
    /// Under RoundRobin: when the slice of the level this worker serves
    /// ends (set by the schedule's search; a nested search, in a wait that
    /// helps, restores the outer one's as it returns).
    pub(crate) slice_end: Cell<Option<Instant>>,
    /// What the pool does for this worker (see [`PoolHooks`]): set while
    /// a thread is this worker, which is when anything asks for them.
    hooks: Option<Box<dyn PoolHooks + Send>>,
}

impl WorkerLocal {
    /// Creates a worker's deques and returns the matching stealers. The
    /// worker gets its hooks when its thread starts ([`WorkerLocal::enter`]).
    pub(crate) fn new(
        pool_id: usize,
        index: usize,
        channels: usize,
        guest: bool,
        floor: usize,
        reserved: bool,
    ) -> (WorkerLocal, Vec<Stealer<RunningTask>>) {
        let jobs = super::job::Jobs::new(channels);
        let channels: Box<[LocalChannel]> = (0..channels)
            .map(|_| LocalChannel {
                deque: Worker::new_fifo(),
                tick: FairTick::new(),
                fault: Cell::new(Fault::NONE),
            })
            .collect();
        let stealers = channels.iter().map(|c| c.deque.stealer()).collect();
        (
            WorkerLocal {
                pool_id,
                index,
                channels,
                faulted: Cell::new(false),
                lifo: LifoSlot::default(),
                jobs,
                stolen: Cell::new(None),
                holding: Cell::new(false),
                job_channel: Cell::new(None),
                job_tag: Cell::new(super::job::Tag::NONE),
                ran_job: Cell::new(false),
                watch_from: Cell::new(index + 1),
                idle: Cell::new(false),
                stack_base: 0,
                stack_budget: 0,
                guest,
                floor,
                reserved,
                shared: None,
                slice_end: Cell::new(None),
                hooks: None,
            },
            stealers,
        )
    }

    /// Whether this worker leaves `channel` alone for now: its `pop`
    /// panicked less than the back-off ago.
    #[inline]
    pub(crate) fn skips(&self, channel: usize) -> bool {
        self.faulted.get()
            && self.channels[channel]
                .fault
                .get()
                .until()
                .is_some_and(|until| Instant::now() < until)
    }

    /// `channel`'s `pop` panicked: leave it alone for a back-off that
    /// doubles with each panic in a row (a panic within [`Fault::LONGEST`]
    /// times 4 of the last), from 1 ms up to 100 ms, so that a channel that
    /// always panics costs a bounded share of the worker.
    pub(crate) fn fault(&self, channel: usize) {
        let now = Instant::now();
        let fault = self.channels[channel].fault.get();
        let prior = match fault.last {
            Some(last) if now.duration_since(last) < Fault::LONGEST * 4 => fault.backoff,
            _ => Duration::ZERO, // not in a row
        };
        let backoff = (prior * 2).clamp(Fault::FIRST, Fault::LONGEST);
        let last = Some(now);
        self.channels[channel].fault.set(Fault { last, backoff });
        self.faulted.set(true);
    }

    /// `channel`'s `pop` returned: its back-off starts over.
    #[inline]
    pub(crate) fn recovered(&self, channel: usize) {
        if self.faulted.get() {
            self.channels[channel].fault.set(Fault::NONE);
            self.next_retry();
        }
    }

    /// When the first channel this worker leaves alone is due again, if
    /// any is left alone now (once every back-off ran out, `skips` reads
    /// no clock until the next fault).
    pub(crate) fn next_retry(&self) -> Option<Instant> {
        if !self.faulted.get() {
            return None;
        }
        let now = Instant::now();
        let until = self.channels.iter().filter_map(|c| c.fault.get().until());
        let next = until.filter(|&until| until > now).min();
        self.faulted.set(next.is_some());
        next
    }

    /// Takes the task in the worker's LIFO slot at once, then, as it is
    /// iterated, those in its local deques, each with its channel: what
    /// a thread leaving the seat drops or moves out (`Pool::move_out`).
    pub(crate) fn take_all<'a>(&'a self, shared: &Shared) -> impl Iterator<Item = SlotTask> + 'a {
        let channels = self.channels.iter().enumerate();
        let deques = channels.flat_map(|(channel, mine)| {
            std::iter::from_fn(|| mine.deque.pop()).map(move |task| (channel, task))
        });
        shared.lifo[self.index].take().into_iter().chain(deques)
    }

    /// Makes the calling thread this worker, of the pool at `pool` (which
    /// the caller keeps alive until the guard drops), served by `hooks`.
    pub(crate) fn enter(
        mut self,
        pool: *const (),
        shared: std::sync::Arc<Shared>,
        hooks: Box<dyn PoolHooks + Send>,
    ) -> (Rc<WorkerLocal>, Entered) {
        self.hooks = Some(hooks);
        self.shared = Some(shared);
        let worker = Rc::new(self);
        let guard = crate::context::enter(pool, worker.clone());
        (worker, guard)
    }

    /// Undoes [`WorkerLocal::enter`]: the thread is what it was before, and
    /// the worker comes back without hooks (a guest seat's hooks would hold
    /// its pool alive from inside it). Every other reference to `worker`
    /// must be gone (they live for one call on this thread).
    pub(crate) fn leave(worker: Rc<WorkerLocal>, entered: Entered) -> WorkerLocal {
        drop(entered);
        let Ok(mut local) = Rc::try_unwrap(worker) else {
            unreachable!("a worker is shared only for calls on its thread, which returned")
        };
        local.hooks = None;
        local.shared = None;
        local.slice_end.set(None);
        local.idle.set(false);
        local
    }

    /// Whether the worker's search took a job it has not run yet.
    #[inline]
    pub(crate) fn holds_job(&self) -> bool {
        self.holding.get()
    }

    /// Puts `job` in the worker's hands, to run once its search returns.
    pub(crate) fn hold_job(&self, job: super::job::JobRef) {
        debug_assert!(!self.holding.get(), "a worker holds one job at most");
        self.stolen.set(Some(job));
        self.holding.set(true);
    }

    /// Runs the job the worker's search took, if any; returns whether
    /// there was one. A job runs whatever the pool's state: its owner
    /// waits for it.
    pub(crate) fn run_stolen(&self) -> bool {
        let job = self.holding.replace(false).then(|| self.stolen.take());
        job.flatten().map(|job| self.run_job(job)).is_some()
    }

    /// Runs `job` on this worker: `should_yield` inside it answers for the
    /// job's channel (a task polled inside it answers for its own).
    pub(crate) fn run_job(&self, job: super::job::JobRef) {
        let outer = self.job_channel.replace(Some(job.channel()));
        // Restored in an unwind too: a stale tag would name a node that
        // is gone (though a job catches its own panics).
        let _tag = crate::sync::Restore::set(&self.job_tag, job.tag());
        job.run();
        self.job_channel.set(outer);
        // After the run: a wait inside the job (a nested idle search)
        // must not use the flag up.
        self.ran_job.set(true);
    }

    /// Takes the newest job of `channel` back from this seat's deque if
    /// `accept` accepts it; else pushes it back on top, announced again (a
    /// thief may have found the deque empty meanwhile).
    pub(crate) fn pop_job_if(
        &self,
        channel: usize,
        accept: &dyn Fn(&super::job::JobRef) -> bool,
    ) -> Option<super::job::JobRef> {
        let shared = self.shared.as_deref()?;
        let job = self.jobs.pop(channel)?;
        if accept(&job) {
            return Some(job);
        }
        self.jobs.push(shared, self.index, job);
        None
    }

    /// Clears the job tag for the guard's life: tasks this worker polls
    /// meanwhile (helping in a wait) are no part of the job it runs, and
    /// the jobs they publish must not pass for its subtree's.
    pub(crate) fn outside_jobs(&self) -> crate::sync::Restore<'_, super::job::Tag> {
        crate::sync::Restore::set(&self.job_tag, super::job::Tag::NONE)
    }

    /// The tag of the job this worker runs outside any task's poll (null:
    /// none).
    pub(crate) fn job_tag(&self) -> super::job::Tag {
        self.job_tag.get()
    }

    /// The pool's hooks: a worker is asked for them only while a thread
    /// is it (reached through the thread's context, or held by it).
    fn hooks(&self) -> &dyn PoolHooks {
        self.hooks
            .as_deref()
            .expect("a worker has hooks while a thread is it")
    }

    /// As [`PoolHooks::help_until`].
    pub(crate) fn help_until(&self, done: &dyn Fn() -> bool) -> bool {
        self.hooks().help_until(self, done)
    }

    /// As [`PoolHooks::help_once`].
    pub(crate) fn help_once(&self, channel: usize, allowed: Allowed<'_>) -> bool {
        self.hooks().help_once(self, channel, allowed)
    }

    /// Wakes this worker from any thread if it sleeps in its slot (asked
    /// only while a thread is it).
    pub(crate) fn waker(&self) -> Box<dyn Fn() + Send + Sync> {
        let shared = self.shared.clone().expect("a thread is this worker");
        let index = self.index;
        Box::new(move || shared.sleep.rouse(index))
    }

    /// As [`PoolHooks::block_in_place`].
    pub(crate) fn block_in_place(&self, f: &mut dyn FnMut()) {
        self.hooks().block_in_place(self, f)
    }

    /// As [`PoolHooks::run_now`].
    pub(crate) fn run_now(&self, channel: usize, take: &mut dyn FnMut() -> Option<LocalTask>) {
        self.hooks().run_now(self, channel, take)
    }

    /// Whether a task of channel `channel` running on this worker should
    /// yield now (see `crate::should_yield`): a task of the channels its
    /// level gives way to waits (a status bit; a hint), and, under
    /// HighestFirst, no worker is idle or asleep to take it (one more
    /// load); under RoundRobin, the slice is over (a clock read, only when
    /// another level has work).
    #[inline]
    pub(crate) fn should_yield(&self, channel: usize) -> bool {
        let Some(shared) = self.shared.as_deref() else {
            return false;
        };
        if !shared.status.any_in_set(&shared.yield_masks[channel]) {
            return false;
        }
        if !shared.round_robin {
            return shared.sleep.none_searching();
        }
        // Before its first search a worker has no slice: not over.
        self.slice_end
            .get()
            .is_some_and(|end| Instant::now() >= end)
    }
}

/// A worker's own state for one channel. On cache lines of its own: the
/// pool makes every worker's state on one thread, and an allocator that
/// packs small blocks of one size together (mimalloc, jemalloc) put two
/// workers' fairness counts on one line, written by both at every pop
/// (with mimalloc, a yield took about twice as long).
#[repr(align(128))]
pub(crate) struct LocalChannel {
    /// The worker's own deque (see `steal`).
    pub(crate) deque: Worker<RunningTask>,
    /// When this worker looks at the channel's injector first (see
    /// `steal`'s fairness).
    pub(crate) tick: FairTick,
    /// When this worker looks at the channel again after its `pop`
    /// panicked, and the back-off after the next panic.
    fault: Cell<Fault>,
}

/// A worker's fairness tick for one channel (see `steal`, "Fairness"):
/// it counts the channel's tasks the worker runs, popped or from its LIFO
/// slot, and names the run whose pop looks at the injector first.
///
/// The interval adapts, as tokio's does: at each turn the worker reads
/// the clock once and sets the next interval so that a turn comes about
/// every [`FairTick::TARGET`] of the worker's time, between
/// [`FairTick::MIN`] and [`FairTick::MAX`] runs. Short tasks keep the
/// interval at 61 (one clock read per 61 runs); tasks of a millisecond
/// bring it down to 2, so outside work waits a few tasks, not 61. The
/// first interval comes from the worker's first [`FairTick::PROBE`] runs
/// (two clock reads), so that a new pool's long tasks do not hold outside
/// work for 61 of them.
pub(crate) struct FairTick {
    /// Runs since the last turn.
    runs: Cell<u32>,
    /// Runs from one turn to the next.
    interval: Cell<u32>,
    /// When the last turn came.
    since: Cell<Option<Instant>>,
    /// A slot run reached the turn: the next pop takes it.
    owed: Cell<bool>,
    /// Runs left before the first interval is set (0: set).
    probe: Cell<u32>,
}

impl FairTick {
    /// The time between turns the interval aims at (tokio's).
    const TARGET: Duration = Duration::from_micros(200);
    /// The fewest runs between turns.
    pub(crate) const MIN: u32 = 2;
    /// The most runs between turns (tokio's fixed interval): the bound
    /// the docs state.
    pub(crate) const MAX: u32 = 61;
    /// The runs whose start times set the first interval.
    const PROBE: u32 = 4;

    fn new() -> FairTick {
        FairTick {
            runs: Cell::new(0),
            // Until the probe sets it: tokio's fixed 61.
            interval: Cell::new(FairTick::MAX),
            since: Cell::new(None),
            owed: Cell::new(false),
            probe: Cell::new(FairTick::PROBE),
        }
    }

    /// Counts a run; `true` at the turn, which also retunes the interval.
    #[inline]
    fn count(&self) -> bool {
        let n = self.runs.get() + 1;
        // (A turn in the run that set the first interval does not retune
        // it from a window that just began.)
        let calibrated = self.probe.get() != 0 && self.calibrate();
        if n < self.interval.get() {
            self.runs.set(n);
            return false;
        }
        self.runs.set(0);
        if !calibrated {
            self.retune();
        }
        true
    }

    /// One of the first runs: the first reads the clock, the last sets
    /// the interval from the time the runs between them took (and
    /// returns `true`).
    #[cold]
    fn calibrate(&self) -> bool {
        let left = self.probe.get() - 1;
        self.probe.set(left);
        let now = Instant::now();
        if let (0, Some(since)) = (left, self.since.replace(Some(now))) {
            self.set_interval(FairTick::PROBE - 1, since, now);
            return true;
        }
        false
    }

    /// Sets the interval that makes `runs` runs, which took from `since`
    /// to `now`, last about [`FairTick::TARGET`].
    fn set_interval(&self, runs: u32, since: Instant, now: Instant) {
        let took = now.saturating_duration_since(since).as_nanos().max(1);
        let ideal = FairTick::TARGET.as_nanos() * u128::from(runs) / took;
        let ideal = ideal.clamp(u128::from(FairTick::MIN), u128::from(FairTick::MAX));
        self.interval.set(ideal as u32);
    }

    #[cold]
    fn retune(&self) {
        let now = Instant::now();
        if let Some(since) = self.since.replace(Some(now)) {
            self.set_interval(self.interval.get(), since, now);
        }
    }

    /// A pop of the channel: whether it looks at the injector first.
    #[inline]
    pub(crate) fn pop(&self) -> bool {
        // An owed turn is the slot run's, counted there: so the slot's
        // task runs at the next search, whatever the interval.
        self.owed.replace(false) || self.count()
    }

    /// The next pop looks at the injector first (a yield while the
    /// worker's queue holds work: see `steal`).
    pub(crate) fn owe(&self) {
        self.owed.set(true);
    }

    /// A run of the channel's task from the LIFO slot: `false` at the
    /// turn, when the task goes behind the channel's queued work and the
    /// next pop looks at the injector first.
    #[inline]
    pub(crate) fn slot_run(&self) -> bool {
        if self.count() {
            self.owed.set(true);
            return false;
        }
        true
    }
}

/// A worker's back-off from a channel whose `pop` panicked.
#[derive(Copy, Clone, Debug)]
struct Fault {
    /// When it last panicked.
    last: Option<Instant>,
    /// The back-off from then (doubled if the next panic comes in a row).
    backoff: Duration,
}

impl Fault {
    const NONE: Fault = Fault {
        last: None,
        backoff: Duration::ZERO,
    };
    const FIRST: Duration = Duration::from_millis(1);
    const LONGEST: Duration = Duration::from_millis(100);

    /// Until when the channel is left alone (maybe past).
    fn until(self) -> Option<Instant> {
        Some(self.last? + self.backoff)
    }
}

/// What a worker needs its pool to do, implemented by the pool (which
/// knows its behavior's type); each method gets the worker it serves.
pub(crate) trait PoolHooks {
    /// Runs the pool's queued tasks on `worker` until `done()` is true
    /// (see `scope::help::Help::help_until`).
    fn help_until(&self, worker: &WorkerLocal, done: &dyn Fn() -> bool) -> bool;

    /// One round of an isolated wait on `worker` (see `scope::stack`):
    /// runs one task of a level strictly above channel `channel`'s (of
    /// any level, if `allowed` is `Anything`), or else one job of
    /// `channel` that `allowed` accepts. When the worker must not help
    /// (its stack is deep in nested waits, or the pool terminated), runs
    /// only the owner's own job of a `Subtree`, its `b`, if a waiter
    /// moved it to the channel's injector. Returns whether it ran
    /// something.
    fn help_once(&self, worker: &WorkerLocal, channel: usize, allowed: Allowed<'_>) -> bool;

    /// Runs `f`, which blocks, on `worker`'s thread, with a stand-in
    /// serving the worker's place meanwhile (see `pool::blocking`).
    fn block_in_place(&self, worker: &WorkerLocal, f: &mut dyn FnMut());

    /// Runs a claimed scoped task on `worker` at once, as a fresh task of
    /// channel `channel` (see `scope::claim`).
    fn run_now(
        &self,
        worker: &WorkerLocal,
        channel: usize,
        take: &mut dyn FnMut() -> Option<LocalTask>,
    );
}

/// What a round of an isolated wait may run besides work of a higher
/// level (see [`PoolHooks::help_once`]).
#[derive(Clone, Copy)]
pub(crate) enum Allowed<'a> {
    /// No job.
    NoJob,
    /// The jobs of a subtree: the tag of the owner's own job, and the
    /// filter of the subtree's.
    Subtree(super::job::Tag, &'a dyn Fn(&super::job::JobRef) -> bool),
    /// Any work of the pool: the wait ran out of patience (see
    /// `scope::stack`, "Isolated waits"). The tag of the owner's own job,
    /// if any (`Tag::NONE`: none).
    Anything(super::job::Tag),
}

impl Allowed<'_> {
    /// `self` while the wait is `patient`, else `Anything`, with the same
    /// own job.
    pub(crate) fn while_patient(self, patient: bool) -> Self {
        match self {
            _ if patient => self,
            Allowed::Subtree(own, _) | Allowed::Anything(own) => Allowed::Anything(own),
            Allowed::NoJob => Allowed::Anything(super::job::Tag::NONE),
        }
    }
}

/// A future run on a worker's own stack: a scoped task claimed by its
/// waiter.
pub(crate) type LocalTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Calls `f` with the calling thread's worker, if it is one, and its
/// pool's address: one read of the context, no borrow of it and no
/// downcast (every task's path takes it: the counts of `meters`, a push
/// onto the worker's local deque, a LIFO slot's fill, `should_yield`).
///
/// # Safety
///
/// `f` must not leave or change the thread's context entry. What does: a
/// worker's start and end, a guest seat's entry and exit, and
/// `block_in_place` (`crate::context::leave_for_now`); all of them are on
/// paths that run tasks or user code, so `f` must run neither.
#[inline]
unsafe fn with_local<R>(f: impl FnOnce(&WorkerLocal, *const ()) -> R) -> Option<R> {
    let (pool, address) = crate::context::pool_and_worker_address();
    if address.is_null() {
        return None;
    }
    // SAFETY: a non-null worker address is the address of the `WorkerLocal`
    // inside the `Rc` that the context holds (`context::enter` takes it from
    // that `Rc`, and only `WorkerLocal::enter` enters a context, with an
    // `Rc<WorkerLocal>`); the context keeps the `Rc` until its `Entered`
    // guard drops, which resets the address first (or to the outer
    // worker's, held by the outer entry the same way). Only this thread
    // reaches its context, and the reference lives for `f`, which (the
    // caller's promise) cannot leave the context: the worker is alive, and
    // shared access is what every holder of its `Rc` has.
    Some(f(unsafe { &*address.cast::<WorkerLocal>() }, pool))
}

/// Whether the task of channel `channel` of the pool at `pool`, which the
/// calling thread is polling, should yield (see `WorkerLocal::should_yield`):
/// `false` unless the calling thread is a worker of that pool. No borrow of
/// the context and no downcast: this is `should_yield`'s whole cost.
#[inline]
pub(crate) fn should_yield(pool: *const (), channel: usize) -> bool {
    // SAFETY: `should_yield` reads atomics and the clock; no user code.
    unsafe {
        with_local(|local, current| std::ptr::addr_eq(current, pool) && local.should_yield(channel))
    }
    .unwrap_or(false)
}

/// Whether the job the calling worker runs outside any task's poll should
/// yield (see `WorkerLocal::run_job`): `false` if it runs none.
pub(crate) fn job_should_yield() -> bool {
    current().is_some_and(|local| {
        let channel = local.job_channel.get();
        channel.is_some_and(|channel| local.should_yield(channel))
    })
}

/// The calling thread's worker, if it is one.
pub(crate) fn current() -> Option<Rc<WorkerLocal>> {
    crate::context::worker::<WorkerLocal>()
}

/// Whether the calling thread is one of the pool `pool_id`'s own worker
/// threads (not a guest).
pub(crate) fn is_own_worker_of(pool_id: usize) -> bool {
    current_of(pool_id).is_some_and(|local| !local.guest)
}

/// The calling thread's worker, if it is a worker of the pool `pool_id`
/// (one of its threads or a guest).
pub(crate) fn current_of(pool_id: usize) -> Option<Rc<WorkerLocal>> {
    current().filter(|local| local.pool_id == pool_id)
}

/// Hands `task` to `keep` with the calling thread's worker, if it is a
/// worker of `shared`'s pool; `keep` gives it back if it does not keep it.
/// Returns the task if nobody kept it.
fn keep_on_worker(
    shared: &Shared,
    channel: usize,
    task: RunningTask,
    keep: impl FnOnce(&WorkerLocal, RunningTask) -> Result<(), RunningTask>,
) -> Result<(), RunningTask> {
    let mut task = Some(task);
    // SAFETY: `keep` puts the task in the worker's deque or slot (the
    // callers below): no user code runs (a task's drop, which could, is
    // the caller's, once this gives the task back).
    unsafe {
        with_local(|local, _| {
            // A reserved worker keeps no task of a level it does not serve:
            // that goes where the other workers look.
            if local.pool_id == shared.id
                && (!local.reserved || shared.channels[channel].level <= local.floor)
            {
                task = keep(local, task.take().expect("kept once")).err();
            }
        })
    };
    task.map_or(Ok(()), Err)
}

/// Offers `task` (of channel `channel`) to the calling worker's LIFO slot,
/// if the caller is a worker of `shared`'s pool; gives it back if not, or if
/// the slot refuses it (see `lifo`). On success, says whether the worker is
/// idle (it then counts among the awake idle workers, but may not come back
/// for the task: it may be helping inside a wait).
pub(crate) fn offer_lifo(
    shared: &Shared,
    channel: usize,
    task: RunningTask,
) -> Result<bool, RunningTask> {
    let mut idle = false;
    keep_on_worker(shared, channel, task, |local, task| {
        idle = local.idle.get();
        local.lifo.offer(&shared.lifo[local.index], channel, task)
    })
    .map(|()| idle)
}

/// Pushes `task` onto the calling worker's local deque for `channel`, if
/// the caller is a worker of `shared`'s pool that is not moving its slot's
/// task out (that goes behind outside work); gives it back if not. Calls
/// `before` with the worker's state for the channel first (no user code
/// may run in it).
#[inline]
pub(crate) fn push_local(
    shared: &Shared,
    channel: usize,
    task: RunningTask,
    before: impl FnOnce(&LocalChannel),
) -> Result<(), RunningTask> {
    keep_on_worker(shared, channel, task, |local, task| {
        if local.lifo.is_flushing() {
            return Err(task);
        }
        let mine = &local.channels[channel];
        before(mine);
        mine.deque.push(task);
        Ok(())
    })
}

/// Who is asking a channel for a task: a worker (with its local deques) or
/// another thread (draining a closed pool). Passed to
/// [`Channel::pop`](crate::Channel::pop).
pub struct WorkerContext<'a> {
    shared: &'a Shared,
    local: Option<&'a WorkerLocal>,
}

impl<'a> WorkerContext<'a> {
    pub(crate) fn worker(shared: &'a Shared, local: &'a WorkerLocal) -> WorkerContext<'a> {
        WorkerContext {
            shared,
            local: Some(local),
        }
    }

    pub(crate) fn outside(shared: &'a Shared) -> WorkerContext<'a> {
        WorkerContext {
            shared,
            local: None,
        }
    }

    pub(crate) fn local(&self) -> Option<&'a WorkerLocal> {
        self.local
    }

    pub(crate) fn shared(&self) -> &'a Shared {
        self.shared
    }

    /// The worker stole from another worker's queue (for its counts).
    pub(crate) fn stole(&self) {
        let seats = &self.shared.meters.seats;
        if let Some(seat) = self.local.and_then(|l| seats.get(l.index)) {
            seat.steals.add(1);
        }
    }

    /// The index of the asking worker, or `None` if it is not a worker.
    pub fn worker_index(&self) -> Option<usize> {
        self.local.map(|l| l.index)
    }
}

impl fmt::Debug for WorkerContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerContext")
            .field("pool", &self.shared.id)
            .field("worker", &self.worker_index())
            .finish()
    }
}
