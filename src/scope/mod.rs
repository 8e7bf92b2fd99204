//! Scoped tasks: tasks that borrow from the caller's stack, run on the
//! pool's channels, and are all finished before [`scope`] returns.
//!
//! # The contract
//!
//! `scope(|s| ..)` runs its body on the calling thread; inside it,
//! [`Scope::exec`] submits futures that may borrow anything that outlives
//! the call to `scope`. `scope` returns only when every task submitted
//! through `s` has *ended*: completed, panicked, or been dropped by its pool
//! (a close, a followup that dropped it). That is what makes the borrows
//! sound without an `unsafe` contract on the user: the pool's task machinery
//! wants `'static` futures, so each scoped future is boxed and its lifetime
//! erased (`erase`), and this module's job is to make sure nothing borrowed
//! is touched after the erased box outlives the scope.
//!
//! # The protocol: one count-down latch per scope (`latch`)
//!
//! * The latch starts at 1, for the body. `exec` adds 1 before the task
//!   exists; it can only be called while the count is above 0 (the body is
//!   still running, or a task of the scope that is running calls it).
//! * A scoped task *ends* exactly once, in `erase::ScopedTask::finish`: when
//!   its future returns `Ready`, panics, or the task is dropped unfinished.
//!   `finish` first drops the user's future, then hands the output to the
//!   join handle's slot and drops its own reference to that slot (which
//!   drops the output if the handle is gone), and only then counts the latch
//!   down. After the count-down the erased box holds nothing borrowed: the
//!   pool may poll it (it returns `Ready` at once) or free it whenever it
//!   likes, for instance when a stray waker clone finally goes.
//! * The body ends (returning or unwinding: its panic is caught), its 1 is
//!   counted down, and the caller waits until the latch is set: the last
//!   count-down acquires the others' (the release sequence they continue)
//!   and releases them all in the set, which the caller's `Acquire` load
//!   sees: everything the tasks did, drops included, happens before
//!   `scope` returns.
//! * Then `scope` resumes the body's panic if it had one, else the first
//!   task panic, else returns the body's value.
//!
//! Invariant: *while the count is above 0, the scope has not returned; when
//! it reaches 0, no erased task holds anything borrowed.* A task that never
//! ends (parked forever, or leaked by a channel that forgets its
//! `RunningTask`) keeps the scope waiting, as a thread that never ends keeps
//! `std::thread::scope` waiting: a hang, never a dangling borrow. The wait
//! itself cannot be left early: it catches panics of the channels it polls,
//! and aborts the process should anything else unwind out of it; the
//! work-first step before it (`claim`) catches what it runs and never
//! drops a panic payload outside that catch.
//!
//! # Waiting without deadlock (`help`)
//!
//! A scope opened inside a pool task must not block its worker: on a
//! 1-thread pool, the scoped tasks could then never run. So a waiter on a
//! worker thread first runs its own not-yet-started tasks, newest first
//! (see `claim`: that keeps recursive divide and conquer as shallow as the
//! recursion), then *helps*: it runs its pool's queued tasks (by the same
//! schedule as the worker loop) until the latch opens, and when there is
//! none it goes through the pool's sleep protocol like an idle worker, with
//! "the latch is open" added to the final check before it blocks. When
//! all its work on the pool went to one channel, and while none of its
//! tasks is parked, the help is isolated instead (see `stack`, "Isolated
//! waits"): a parked task may need the waiter to run it once woken, and
//! makes the wait help again (`ScopeState::idle`,
//! `CountLatch::wait_isolated`). Any other
//! thread parks; so does a worker whose pool terminated (after draining
//! it), and one whose stack is mostly used by nested waits (after moving
//! its LIFO slot's task where other workers see it; an isolated wait
//! leaves that to the slot's watch).
//!
//! # Why the waiter is always woken
//!
//! The waiter registers its wake target once, before it reads the latch's
//! state: its thread, and its worker's sleep slot if it is a worker. The
//! party whose count-down reaches 0 (one party, once) then sets the latch:
//! if the waiter registered, it takes the target first and wakes it after
//! the set; if not, the waiter's registration fails and it does not wait.
//! A thread is unparked (park keeps the token, so an unpark before the
//! park is not lost); a worker is woken through its sleep slot's lock,
//! under which a sleeping worker made its final check, so either that
//! check saw the latch set or the worker was already blocked and the wake
//! finds it. A wake that finds the waiter awake, or already gone, is
//! harmless. The setter touches nothing of the latch after the set, so a
//! spawned job holds its scope by a plain pointer (see `latch`).
//! `loom_model` checks the latch with both kinds of waiter, on the real
//! `Sleep` with a minimal helper (the worker's real helping loop,
//! `pool::worker`, is exercised by `tests/scope.rs`).

mod claim;
mod erase;
mod handle;
mod help;
mod join;
mod latch;
pub mod par;
mod stack;

pub use handle::ScopedJoinHandle;
pub use join::{install, join};

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::channel::{Channel, Exec, Rejected};
use crate::core::context::{self, Allowed};
use crate::core::job::JobRef;
use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use latch::CountLatch;

/// The shared part of a scope: its latch, its first task panic, and the
/// claims its waiter may run itself (see `claim`).
struct ScopeState {
    latch: CountLatch,
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
    /// The pool whose worker opened the scope (and so waits for it), if
    /// one did: tasks on that pool's channels are claimed.
    waiter_pool: Option<usize>,
    /// Claims of tasks submitted to `waiter_pool`, newest last.
    pending: Mutex<Vec<Arc<claim::Claim>>>,
    /// The channel of the waiter's pool that the body's last `spawn` went
    /// to, plus one (0: none): the waiter runs its jobs first.
    spawned_on: AtomicUsize,
    /// The queues of `spawn_fifo`, one per pool and channel, each oldest
    /// first: each published job stands for "run the oldest" of its queue
    /// (see `stack`).
    fifo: Mutex<Vec<Arc<stack::Fifo>>>,
    /// The node of the scope's spawned jobs (see `stack`, "Isolated
    /// waits").
    node: stack::Node,
    /// What the waiter may wait on in isolation: 0 before any work went to
    /// the waiter's pool; `c + 1` while all of it went to channel `c`
    /// (spawned jobs, tasks); [`MANY`] once some went to another channel.
    wait_on: AtomicUsize,
    /// The scope's tasks that wait for a worker: on the waiter's pool,
    /// parked (from before its poll returns until it is polled again); on
    /// another pool, until it ends (its poll may wait for the waiter's
    /// pool). A task still in its claim is not counted: an isolated wait
    /// runs the claims itself (`run_claim`), and one it could not run
    /// counts for good. The waiter helps its pool while a task waits (see
    /// `wait`). A hint: a stale read costs a round of isolation or help.
    idle: AtomicUsize,
}

/// See `ScopeState::wait_on`.
const MANY: usize = usize::MAX;

impl ScopeState {
    /// The state of a scope opened on the calling thread: its latch counts
    /// the body.
    fn new() -> ScopeState {
        let local = context::current();
        ScopeState {
            latch: CountLatch::new(1),
            panic: Mutex::new(None),
            waiter_pool: local.as_ref().map(|local| local.pool_id),
            pending: Mutex::new(Vec::new()),
            spawned_on: AtomicUsize::new(0),
            fifo: Mutex::new(Vec::new()),
            node: stack::Node::here(local.as_deref()),
            wait_on: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
        }
    }

    /// The work-first part of the wait (see `claim`): on a worker, runs
    /// this scope's pending tasks, newest first, until none is left or the
    /// latch opens. Never unwinds (the wait that follows must happen): a
    /// panic here (a channel's, in a nested wait) is logged.
    fn run_own(&self) {
        let Some(local) = context::current() else {
            return;
        };
        let run = catch_unwind(AssertUnwindSafe(|| {
            while !self.latch.is_open() && self.run_claim(&local) {}
        }));
        if let Err(panic) = run {
            crate::contain::log_panic(panic, |message| {
                log::error!("smartpool: a panic while a scope ran its own tasks: {message}")
            });
        }
    }

    /// On the waiter's seat: runs the jobs left on its deque of the
    /// channel the body spawned on, newest first, until the scope's count
    /// reaches 0 or the deque is empty (a job of an enclosing `join` found
    /// there runs too: it is a job like any, and its owner finds it done).
    fn run_spawned(&self) {
        let Some(channel) = self.spawned_on.load(Ordering::Relaxed).checked_sub(1) else {
            return;
        };
        let Some(local) = context::current() else {
            return;
        };
        while !self.latch.is_open() {
            let Some(job) = local.jobs.pop(channel) else {
                break;
            };
            local.run_job(job);
        }
    }

    /// Work of this scope (a spawned job, or a task) went to channel
    /// `channel` of the waiter's pool.
    fn went_to(&self, channel: usize) {
        let on = channel + 1;
        let _ = self
            .wait_on
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| match now {
                0 => Some(on),
                now if now == on || now == MANY => None,
                _ => Some(MANY),
            });
    }

    /// Runs the scope's newest pending claim on `local` (see `claim`), if
    /// there is one: an isolated wait's own work.
    fn run_claim(&self, local: &crate::core::context::WorkerLocal) -> bool {
        let Some(claim) = lock(&self.pending).pop() else {
            return false;
        };
        local.run_now(claim.channel, &mut || claim.take());
        if claim.is_held() {
            // Refused (a deep stack, a closing pool): the task is left to
            // its shell in the queue, which only help reaches. For good.
            self.idle.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// The channel whose work the waiter may wait on in isolation, if all
    /// the scope's work on the waiter's pool went to one channel.
    fn isolated_channel(&self) -> Option<usize> {
        match self.wait_on.load(Ordering::Relaxed) {
            0 | MANY => None,
            on => Some(on - 1),
        }
    }

    /// The scope's wait, after the body. On a worker of the pool where the
    /// scope's work all went to one channel, it is isolated (see `stack`,
    /// "Isolated waits") while none of its tasks waits: the worker
    /// runs the scope's jobs from its own deque, newest first, then what
    /// `help_once` allows: work of a higher level, and jobs of the scope's
    /// subtree. Otherwise it helps as any waiting worker does, since a
    /// scoped task queued or woken on the waiter's pool may need the
    /// waiter to run it.
    fn wait(&self) {
        let Some(local) = self.isolated_channel().and_then(|_| context::current()) else {
            return self.latch.wait();
        };
        // SAFETY: `pop_job_if` and `help_once` call the filter with jobs
        // taken and not run.
        let within = |job: &JobRef| unsafe { stack::within(job.tag(), &self.node) };
        let isolated =
            || self.idle.load(Ordering::Relaxed) == 0 && self.isolated_channel().is_some();
        self.latch.wait_isolated(isolated, |patient| {
            let Some(channel) = self.isolated_channel() else {
                return false;
            };
            if let Some(job) = local.pop_job_if(channel, &within) {
                local.run_job(job);
                return true;
            }
            if self.run_claim(&local) {
                return true;
            }
            let allowed = Allowed::Subtree(self.node.tag(), &within);
            local.help_once(channel, allowed.while_patient(patient))
        })
    }

    /// Runs `f`, user code; a panic in it goes to `record_panic`.
    fn run_caught(&self, f: impl FnOnce()) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(f)) {
            self.record_panic(panic);
        }
    }

    /// Keeps the first panic of a task; later ones are logged and dropped.
    /// Never unwinds (the logger and the payload's drop are user code), so
    /// a task's `finish` always fills its slot.
    pub(super) fn record_panic(&self, payload: Box<dyn Any + Send + 'static>) {
        let mut first = lock(&self.panic);
        if first.is_none() {
            *first = Some(payload);
            return;
        }
        drop(first);
        crate::contain::log_panic(payload, |message| {
            log::error!("smartpool: another scoped task panicked: {message}")
        });
    }
}

/// Runs `body` with a [`Scope`] through which it can submit tasks that
/// borrow from the surrounding stack, and returns once every one of those
/// tasks has finished (or was dropped by its pool).
///
/// Like [`std::thread::scope`] and `rayon::scope`, but the tasks are futures
/// on your pool's channels, each queued by its channel's priority:
///
/// ```
/// # use smartpool::prelude::*;
/// # use std::sync::atomic::{AtomicUsize, Ordering};
/// # #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)] struct Only;
/// # struct One { work: VecDequeChannel }
/// # impl PoolBehavior for One {
/// #     type ChannelKey = Only;
/// #     fn config(&self) -> PoolConfig<Only> { PoolConfig { threads: 2,
/// #         schedule: ScheduleAlgorithm::HighestFirst,
/// #         levels: vec![vec![ChannelParams { key: Only, complete_on_close: true }]] } }
/// #     fn channel(&self, _: Only) -> &dyn Channel { &self.work }
/// #     fn followup(&self, _: Only, task: RunningTask) { self.work.submit(task) }
/// # }
/// # let owned = OwnedPool::new(One { work: VecDequeChannel::new() }).unwrap();
/// # let pool = owned.pool.clone();
/// let mut words = vec!["scoped".to_string(), "tasks".to_string()];
/// let total = AtomicUsize::new(0);
/// smartpool::scope(|s| {
///     for word in &mut words {
///         // Borrows `word` mutably and `total` shared: no `'static` needed.
///         s.exec(&pool.work, run(|| {
///             word.make_ascii_uppercase();
///             total.fetch_add(word.len(), Ordering::Relaxed);
///         }));
///     }
/// });
/// assert_eq!(words, ["SCOPED", "TASKS"]);
/// assert_eq!(total.into_inner(), 11);
/// ```
///
/// # Panics
///
/// If the body panics, or a task does, `scope` still waits for every task,
/// then resumes the panic: the body's if it panicked, else the first task's.
///
/// # Blocking
///
/// `scope` blocks its thread until the tasks finish. On a worker thread of
/// a pool, it runs that pool's queued tasks meanwhile, so a scope opened
/// inside a task does not deadlock waiting for its own tasks, even on a
/// 1-thread pool; inside an `async` task it still blocks that task's poll,
/// as a `rayon::scope` would. A task that never finishes (a future never
/// woken) keeps `scope` waiting.
///
/// A waiting worker first runs the scope's own tasks that no worker has
/// started yet, newest first, on its own stack, whatever their channel's
/// level (rayon's work-first order: recursive divide and conquer nests no
/// deeper than its recursion, so it completes on one thread too).
///
/// Then, if the scope's work on the waiter's pool all went to one channel
/// (a frame of [`Scope::spawn`]ed closures, say), the wait is isolated
/// while none of the scope's tasks is parked (a task on another pool:
/// until it ends): the worker runs the scope's tasks and closures that no
/// worker started (newest first), closures they spawn or `join` in turn, and
/// work of a level above that channel's, never an unrelated closure or
/// task of its level or below (rayon's waiting thread may start one and
/// stall its caller behind it, rayon #957). After a second in a row with
/// nothing to run, it runs any work of its pool, as below: what it waits
/// for may be blocked on work only this worker is free to run.
///
/// Otherwise the queued tasks it runs may be any of its pool's, as in
/// rayon (a scoped task that waits may need it), with the same hazards: the
/// waiting task resumes only after the
/// task the worker picked returns (a long low-priority task delays it); a
/// task it picked that waits for something only the waiting task will do
/// later deadlocks both; and a lock or `RefCell` borrow held across `scope`
/// is still held while those tasks run. A worker nests waits on its stack
/// (4 MiB by default, see [`ThreadConfig::stack_size`](crate::ThreadConfig::stack_size));
/// with three quarters of it in use, a wait stops helping and only blocks,
/// which on a 1-thread pool deadlocks rather than overflow the stack.
///
/// Tasks cannot outlive what they borrow; this does not compile:
///
/// ```compile_fail
/// # use smartpool::prelude::*;
/// let channel = VecDequeChannel::new();
/// smartpool::scope(|s| {
///     let local = vec![1, 2, 3];
///     // `local` is dropped at the end of the body, before the task must end.
///     s.exec(&channel, run(|| local.len()));
/// });
/// ```
///
/// Nor can a handle escape the scope:
///
/// ```compile_fail
/// # use smartpool::prelude::*;
/// let channel = VecDequeChannel::new();
/// let handle = smartpool::scope(|s| s.exec(&channel, run(|| 1)));
/// ```
///
/// Tasks run on other threads, so what they capture must be `Send`:
///
/// ```compile_fail
/// # use smartpool::prelude::*;
/// let channel = VecDequeChannel::new();
/// let counter = std::rc::Rc::new(5);
/// smartpool::scope(|s| {
///     s.exec(&channel, run(|| *counter + 1)); // `Rc` is not `Sync`
/// });
/// ```
///
/// And a task's borrows follow the usual rules, against the body too:
///
/// ```compile_fail
/// # use smartpool::prelude::*;
/// let channel = VecDequeChannel::new();
/// let mut list = vec![1];
/// smartpool::scope(|s| {
///     s.exec(&channel, run(|| list.push(2)));
///     list.push(3); // `list` is mutably borrowed by the task
/// });
/// ```
pub fn scope<'env, F, T>(body: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        state: Arc::new(ScopeState::new()),
        scope: PhantomData,
        env: PhantomData,
    };
    let result = catch_unwind(AssertUnwindSafe(|| body(&scope)));
    scope.state.latch.count_down();
    scope.state.run_spawned();
    scope.state.run_own();
    scope.state.wait();
    // Every task has ended: the panic slot is final.
    let task_panic = lock(&scope.state.panic).take();
    let value = result.unwrap_or_else(|panic| resume_unwind(panic));
    task_panic.map_or(value, |panic| resume_unwind(panic))
}

/// Submits tasks that may borrow from outside the [`scope`] call; given to
/// the scope's body (and can be captured by its tasks to submit more).
pub struct Scope<'scope, 'env: 'scope> {
    state: Arc<ScopeState>,
    // Invariant in both lifetimes, as `std::thread::Scope` is: neither may
    // be shrunk or stretched by variance to smuggle a borrow past the end.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

impl<'scope> Scope<'scope, '_> {
    /// Runs `future` on `channel`'s pool; it may borrow anything that
    /// outlives the scope. For a closure, wrap it: `s.exec(ch, run(|| ..))`.
    ///
    /// The handle resolves to the output, or to a
    /// [`JoinError`](crate::JoinError) if the task panicked or was
    /// cancelled: the pool closed before it ran, or the channel belongs to
    /// no pool. A panic's payload goes to the scope, which resumes it; the
    /// handle's error carries its message only. Use [`Scope::try_exec`] to
    /// get the future back instead when the pool is closed.
    ///
    /// The task goes through `channel` as a one-argument `exec` would: a
    /// channel with a parameter (a deadline) gives it its default.
    pub fn exec<C, F>(&'scope self, channel: &C, future: F) -> ScopedJoinHandle<'scope, F::Output>
    where
        C: Channel + ?Sized,
        F: Future + Send + 'scope,
        F::Output: Send + 'scope,
    {
        self.state.latch.add();
        let link = channel.link();
        let near = link.is_some_and(|link| self.state.waiter_pool == Some(link.pool_id()));
        let (task, handle) = erase::ScopedTask::erase(future, self.state.clone(), near);
        // A refused task is dropped here (or its shell is, taking it along),
        // which ends it: the handle reports the cancellation and the latch
        // is counted down.
        match link {
            Some(link) if near => {
                self.state.went_to(link.index());
                let claim = Arc::new(claim::Claim::new(task, link.index()));
                let _detached = channel.exec(claim::Shell::new(claim.clone()));
                lock(&self.state.pending).push(claim.clone());
                handle.claimed(claim, link.pool_id(), &self.state)
            }
            _ => {
                let _detached = channel.exec(task);
                handle
            }
        }
    }

    /// Runs `func` on `channel`, as rayon's `Scope::spawn` does: no
    /// handle, and no task. On a worker of `channel`'s pool (inside one of
    /// its tasks, or a `join`), `func` is a job on that worker's deque,
    /// which idle workers steal and the scope's waiter runs itself; from
    /// any other thread it is a job on the channel's injector. Either way
    /// it runs at `channel`'s level, ahead of the channel's queued tasks,
    /// and close waits for it. A panic in `func` is resumed by [`scope`]
    /// once every task ended. If the pool is closing, or `channel`
    /// belongs to no pool, `func` runs on the caller.
    ///
    /// ```
    /// # use smartpool::prelude::*;
    /// # #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)] struct Only;
    /// # struct B { work: VecDequeChannel }
    /// # impl PoolBehavior for B {
    /// #     type ChannelKey = Only;
    /// #     fn config(&self) -> PoolConfig<Only> { PoolConfig { threads: 2,
    /// #         schedule: ScheduleAlgorithm::HighestFirst,
    /// #         levels: vec![vec![ChannelParams { key: Only, complete_on_close: true }]] } }
    /// #     fn channel(&self, _: Only) -> &dyn Channel { &self.work }
    /// #     fn followup(&self, from: Only, task: RunningTask) { self.channel(from).submit(task) }
    /// # }
    /// # let owned = OwnedPool::new(B { work: VecDequeChannel::new() }).unwrap();
    /// # let pool = &owned.pool;
    /// let mut parts = [0u64; 4];
    /// smartpool::scope(|s| {
    ///     for (i, part) in parts.iter_mut().enumerate() {
    ///         s.spawn(&pool.work, move || *part = i as u64 * 10);
    ///     }
    /// });
    /// assert_eq!(parts, [0, 10, 20, 30]);
    /// ```
    pub fn spawn<C, F>(&'scope self, channel: &C, func: F)
    where
        C: Channel + ?Sized,
        F: FnOnce() + Send + 'scope,
    {
        self.spawn_with(channel, func, false);
    }

    /// [`Scope::spawn`], in FIFO order (rayon's `spawn_fifo`): the
    /// closures this scope spawns this way run oldest first, where
    /// `spawn`'s run newest first on the worker that spawned them. (A
    /// thief still takes whichever it steals.)
    ///
    /// ```
    /// # use smartpool::prelude::*;
    /// # let owned = smartpool::Builder::new().threads(1).levels(1).build().unwrap();
    /// let pool = owned.pool.clone();
    /// let order = owned.block_on(owned.pool.level(0).exec(run(move || {
    ///     let order = std::sync::Mutex::new(Vec::new());
    ///     let level = pool.level(0);
    ///     smartpool::scope(|s| {
    ///         for i in 0..4 {
    ///             let order = &order;
    ///             s.spawn_fifo(level, move || order.lock().unwrap().push(i));
    ///         }
    ///     });
    ///     order.into_inner().unwrap()
    /// })))
    /// .unwrap();
    /// assert_eq!(order, [0, 1, 2, 3]);
    /// ```
    pub fn spawn_fifo<C, F>(&'scope self, channel: &C, func: F)
    where
        C: Channel + ?Sized,
        F: FnOnce() + Send + 'scope,
    {
        self.spawn_with(channel, func, true);
    }

    fn spawn_with<C, F>(&'scope self, channel: &C, func: F, fifo: bool)
    where
        C: Channel + ?Sized,
        F: FnOnce() + Send + 'scope,
    {
        self.state.latch.add();
        let Some(link) = channel.link() else {
            // A channel of no pool: `func` runs here.
            return stack::run_here(&self.state, func);
        };
        let local = context::current_of(link.pool_id());
        if self.state.waiter_pool == Some(link.pool_id()) {
            self.state.went_to(link.index());
            let on = link.index() + 1;
            if local.is_some() && self.state.spawned_on.load(Ordering::Relaxed) != on {
                self.state.spawned_on.store(on, Ordering::Relaxed);
            }
        }
        let (shared, index) = (&link.shared, link.index());
        stack::spawn_on(local.as_deref(), shared, index, &self.state, func, fifo);
    }

    /// Like [`Scope::exec`], but gives the future back if the pool is
    /// closing or closed (or the channel belongs to no pool) at the time of
    /// the call. A close that begins during the call still cancels the task,
    /// and its handle says so.
    pub fn try_exec<C, F>(
        &'scope self,
        channel: &C,
        future: F,
    ) -> Result<ScopedJoinHandle<'scope, F::Output>, Rejected<F>>
    where
        C: Channel + ?Sized,
        F: Future + Send + 'scope,
        F::Output: Send + 'scope,
    {
        // The future is erased, so it cannot come back once submitted:
        // decide before.
        let future = Rejected::check(channel, future)?;
        Ok(self.exec(channel, future))
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("unfinished", &self.state.latch.count())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, loom))]
mod loom_model;
#[cfg(all(test, not(loom)))]
mod test;
