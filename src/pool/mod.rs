//! The pool: `Pool` (shared, derefs to the behavior), `OwnedPool` (start
//! and close), the worker loop, and the close protocol.

mod blocking;
mod drive;
#[cfg(feature = "metrics-export")]
mod export;
#[cfg(feature = "metrics")]
mod metrics;
mod owned;
mod stall;
mod worker;

pub use blocking::block_in_place;
#[cfg(feature = "metrics")]
pub use metrics::{Activity, ChannelMetrics, LevelMetrics, Metrics, QueueWait, WorkerMetrics};
pub use owned::{Close, CloseReport, CloseTimeout, OwnedPool};

use std::fmt;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::behavior::PoolBehavior;
use crate::channel::Channel;
use crate::core::context::WorkerContext;
use crate::core::Shared;
use crate::schedule::Levels;
use crate::task::{Event, ParkedRegistry, RunningTask, Schedule};

/// The future of [`Pool::closing`]: resolves once the pool's close has
/// begun. It holds the pool's shared state, not the pool.
#[must_use = "futures do nothing unless polled"]
pub struct Closing {
    shared: Arc<Shared>,
    /// Its waker's key, once registered (see `core::closing`).
    key: Option<u64>,
}

impl std::future::Future for Closing {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let Closing { shared, key } = &mut *self;
        let is_closing = || shared.close.is_closing();
        if shared.closing.register(key, cx.waker(), is_closing) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.closing.forget(key);
        }
    }
}

impl fmt::Debug for Closing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Closing")
            .field("closing", &self.shared.close.is_closing())
            .finish_non_exhaustive()
    }
}

/// A running pool, shared as `Arc<Pool<B>>`. Derefs to the behavior, so
/// `pool.my_channel.exec(..)` reaches a channel field directly.
// Over-aligned so that the `Arc`'s reference counts, which every task's
// `Weak` to its pool writes as the task is made and freed, sit on lines of
// their own, apart from the fields every worker reads.
#[repr(align(128))]
pub struct Pool<B: PoolBehavior> {
    behavior: B,
    pub(crate) shared: Arc<Shared>,
    /// Channel index → key (levels flattened, highest first).
    keys: Box<[B::ChannelKey]>,
    levels: Levels,
    threads: usize,
    /// The threads of `spawn_blocking` and of stand-ins.
    blocking: crate::blocking::Blocking,
    /// Whether a worker in `block_in_place` hands its place to a stand-in.
    stand_ins: bool,
    /// The pool's own `Weak`, as its tasks hold it.
    pub(crate) scheduler: crate::task::SchedulerRef,
}

impl<B: PoolBehavior> Pool<B> {
    /// The number of worker threads (0 for a pool driven by its caller,
    /// see [`PoolConfig::threads`](crate::PoolConfig::threads)).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether close has begun: new tasks are refused.
    pub fn is_closing(&self) -> bool {
        self.shared.close.is_closing()
    }

    /// A future that resolves once close has begun (at once if it has):
    /// what a server's accept loop selects on, to stop accepting and shut
    /// its connections down gracefully while close waits for their
    /// `complete_on_close` work.
    ///
    /// ```
    /// let owned = smartpool::Builder::new().threads(1).build()?;
    /// let closing = owned.pool.closing();
    /// let closed = owned.close();
    /// futures::executor::block_on(closing);
    /// closed.wait();
    /// # Ok::<(), smartpool::ConfigError>(())
    /// ```
    pub fn closing(&self) -> Closing {
        Closing {
            shared: self.shared.clone(),
            key: None,
        }
    }

    /// The pool whose task is running on the calling thread (tokio's
    /// `Handle::try_current`): `Some` inside a task (future or closure) of
    /// a pool of behavior `B`, `None` elsewhere, for a pool of another
    /// behavior type, or while the pool is being dropped. With
    /// [`Pool::current_key`], a task submits children at its own level:
    ///
    /// ```
    /// # use smartpool::prelude::*;
    /// # #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)] struct Only;
    /// # struct B { work: VecDequeChannel }
    /// # impl PoolBehavior for B {
    /// #     type ChannelKey = Only;
    /// #     fn config(&self) -> PoolConfig<Only> { PoolConfig { threads: 1,
    /// #         schedule: ScheduleAlgorithm::HighestFirst,
    /// #         levels: vec![vec![ChannelParams { key: Only, complete_on_close: true }]] } }
    /// #     fn channel(&self, _: Only) -> &dyn Channel { &self.work }
    /// #     fn followup(&self, from: Only, task: RunningTask) { self.channel(from).submit(task) }
    /// # }
    /// # let owned = OwnedPool::new(B { work: VecDequeChannel::new() }).unwrap();
    /// let child = owned.pool.work.exec(async {
    ///     let pool = Pool::<B>::current().expect("on the pool");
    ///     let key = pool.current_key().expect("a task of this pool");
    ///     pool.channel(key).exec(async { 2 }).await.unwrap()
    /// });
    /// assert_eq!(futures::executor::block_on(child).unwrap(), 2);
    /// assert!(Pool::<B>::current().is_none(), "not inside a task");
    /// ```
    pub fn current() -> Option<Arc<Pool<B>>> {
        let pool: Arc<dyn std::any::Any + Send + Sync> =
            crate::task::with_polling_task(|scheduler, _| scheduler.upgrade())??;
        pool.downcast::<Pool<B>>().ok()
    }

    /// The key of the channel the task running on the calling thread was
    /// taken from, if that task is one of this pool's (else `None`; also
    /// for a blocking task, which runs from no channel). For a future woken
    /// since it was submitted, that is where its behavior's followup last
    /// sent it.
    pub fn current_key(&self) -> Option<B::ChannelKey> {
        let me = (self as *const Pool<B>).cast::<()>();
        crate::task::with_polling_task(|scheduler, from| {
            std::ptr::addr_eq(scheduler.as_ptr(), me).then(|| from.map(|from| self.keys[from]))
        })??
    }

    fn channel_at(&self, index: usize) -> &dyn Channel {
        self.behavior.channel(self.keys[index])
    }

    /// Hands a woken task to the behavior's followup. A panicking followup
    /// is caught (the task it held is dropped, which cancels it).
    fn followup(&self, task: RunningTask) {
        let from = self.keys[task.to_followup()];
        crate::contain::catch(
            || self.behavior.followup(from, task),
            |message| {
                log::error!(
                    "smartpool: followup from {from:?} panicked: {message}; its task is dropped"
                )
            },
        );
    }

    /// Takes a task from channel `index` for `worker`, keeping the status
    /// bit protocol: clear on empty, then look once more. A `pop` that
    /// panics is logged and counts as no task from this channel now: the
    /// search goes on to the other channels, and the worker leaves this one
    /// alone for a back-off (see `WorkerLocal::fault`). The task comes back
    /// with `index` recorded as where it came from (`RunningTask::from`).
    fn take(&self, worker: &WorkerContext<'_>, index: usize) -> Option<RunningTask> {
        let status = &self.shared.status;
        let bit = self.shared.channels[index].bit;
        if !status.is_set(bit)
            || worker
                .local()
                .is_some_and(|l| l.skips(index) || l.holds_job())
        {
            return None;
        }
        // Jobs first: they finish work already started (a join's other
        // half, a scope's closures, whose caller waits), and a job spawned
        // from outside has no owner to run it if a stream of tasks kept
        // the worker busy.
        if self.steal_job(worker, index) {
            return None;
        }
        let mut panicked = false;
        if let Some(task) = self.pop(worker, index, &mut panicked) {
            return Some(self.running(worker, index, task));
        }
        if panicked {
            return None;
        }
        status.clear(bit);
        // A pusher whose fence came first counts on this second look; if the
        // channel panics in it, set the bit again (a stale set bit is
        // harmless).
        let task = self.pop(worker, index, &mut panicked);
        if panicked {
            status.set(bit);
            return None;
        }
        if task.is_none() && !self.steal_job(worker, index) {
            return None;
        }
        // Announce, not just set: while the bit was clear, a worker leaving
        // idle may have judged "no work remains" from it (see
        // `Sleep::work_found`) although more than this one task was pushed
        // in that window, counting on it. The announcement's fence and
        // counter read pair with that worker's: either it sees the bit, or
        // we see it left idle and wake a sleeper. Only on this race path.
        self.shared.pushed(index);
        Some(self.running(worker, index, task?))
    }

    /// Takes a job of channel `index` into the worker's hands (see
    /// `core::job` and `WorkerLocal::stolen`): the newest of its own seat (a
    /// scope's spawn it left, or a `join`'s of a frame below: it then runs
    /// nested, as rayon's waits do), else the oldest of another seat's.
    /// Returns whether it did. (A job is not counted as a task taken: it
    /// was never submitted.) The task paths return a task in registers;
    /// the job, rarer, goes aside.
    fn steal_job(&self, worker: &WorkerContext<'_>, index: usize) -> bool {
        if !crate::core::job::used(&self.shared, index) {
            return false;
        }
        let Some(local) = worker.local() else {
            return false;
        };
        let job = local
            .jobs
            .pop(index)
            .or_else(|| crate::core::job::steal(&self.shared, local.index, index));
        job.map(|job| local.hold_job(job)).is_some()
    }

    /// The worker took `task` out of channel `index` to run it: records
    /// where it came from, counts it, and records the worker's activity
    /// and busy time (see `core::meters`).
    #[inline(always)]
    pub(super) fn running(
        &self,
        worker: &WorkerContext<'_>,
        index: usize,
        task: RunningTask,
    ) -> RunningTask {
        task.set_from(index);
        if let Some(local) = worker.local() {
            self.shared.meters.took(local.index, index);
        }
        task
    }

    /// Channel `index`'s `pop`. Its panic is caught, logged and recorded as
    /// the worker's fault, and sets `panicked`. (An out flag, not a
    /// `Result`: an `Option<RunningTask>` comes back in registers.)
    fn pop(
        &self,
        worker: &WorkerContext<'_>,
        index: usize,
        panicked: &mut bool,
    ) -> Option<RunningTask> {
        let channel = self.channel_at(index);
        match catch_unwind(AssertUnwindSafe(|| channel.pop(worker))) {
            Ok(task) => {
                if let Some(local) = worker.local() {
                    local.recovered(index);
                }
                task
            }
            Err(panic) => {
                self.pop_panicked(worker, index, panic);
                *panicked = true;
                None
            }
        }
    }

    /// Logs a panic of channel `index`'s `pop` and records the fault.
    #[cold]
    #[inline(never)]
    fn pop_panicked(
        &self,
        worker: &WorkerContext<'_>,
        index: usize,
        panic: Box<dyn std::any::Any + Send>,
    ) {
        log::error!(
            "smartpool: channel {} panicked in pop: {}; the worker leaves it alone for a while",
            self.shared.channels[index].name,
            crate::contain::panic_message(&*panic)
        );
        if let Some(local) = worker.local() {
            local.fault(index);
        }
    }

    /// Whether any channel whose status bit is set may still hold a task:
    /// asked by a worker that leaves idle with a task, after its fence (see
    /// `Sleep::work_found`). A channel that panics counts as holding one
    /// (waking a worker for nothing is the safe mistake).
    fn work_remains(&self) -> bool {
        self.channel_may_hold(0..self.keys.len())
    }

    /// Whether any of `channels` has its bit set and may hold a task.
    pub(crate) fn channel_may_hold(&self, mut channels: impl Iterator<Item = usize>) -> bool {
        let status = &self.shared.status;
        channels.any(|index| {
            status.is_set(self.shared.channels[index].bit)
                && (crate::core::job::any(&self.shared, index)
                    || crate::contain::catch(
                        || self.channel_at(index).may_have_tasks(),
                        |message| {
                            let name = &self.shared.channels[index].name;
                            log::error!("smartpool: channel {name} panicked in may_have_tasks: {message}; taken as yes")
                        },
                    )
                    .unwrap_or(true))
        })
    }

    /// What the last worker out does, having read `TERMINATED`: fences,
    /// then drops seat `seat`'s slot's task, if given, and every queued
    /// task. The fence pairs with the post fence of a push that raced
    /// termination (see `close`): either that pusher sees `TERMINATED`, or
    /// this drain sees its task. A channel that panics is logged and
    /// skipped; the others are still drained.
    fn drain_all(&self, seat: Option<usize>) {
        crate::sync::fence(crate::sync::Ordering::SeqCst);
        if let Some(seat) = seat {
            drop(self.shared.lifo[seat].take());
        }
        for (index, &key) in self.keys.iter().enumerate() {
            let channel = self.channel_at(index);
            crate::contain::catch(
                || crate::channel::drain(channel, &self.shared),
                |message| {
                    log::error!("smartpool: channel {key:?} panicked in the final drain: {message}")
                },
            );
        }
    }

    /// A task of channel `channel` (`None`: a blocking task) panicked:
    /// logged with the channel's key, and handed to the behavior if
    /// `detached` (nobody holds its handle).
    fn task_panicked(
        &self,
        channel: Option<usize>,
        panic: &(dyn std::any::Any + Send),
        detached: bool,
    ) {
        let key = channel.and_then(|index| self.keys.get(index).copied());
        let message = crate::contain::panic_message(panic);
        match key {
            Some(key) => log::warn!("smartpool: a task of channel {key:?} panicked: {message}"),
            None => log::warn!("smartpool: a blocking task panicked: {message}"),
        }
        if detached {
            crate::contain::catch(
                || self.behavior.task_panicked(key, panic),
                |message| {
                    log::error!("smartpool: the behavior's task_panicked panicked: {message}")
                },
            );
        }
    }
}

impl<B: PoolBehavior> Schedule for Pool<B> {
    /// Every runnable-again task goes to the behavior's followup; a yield's
    /// token is marked (its re-queue mark), so that it enters its channel
    /// behind the queued work, not the LIFO slot.
    fn schedule(&self, task: RunningTask) {
        self.followup(task);
    }

    fn report(&self, event: Event<'_>) {
        match event {
            Event::Released => self.shared.release_counted(),
            Event::Panicked {
                channel,
                panic,
                detached,
            } => self.task_panicked(channel, panic, detached),
            Event::Dropped {
                channel,
                cancelled,
                queued,
            } => self.shared.meters.dropped(channel, cancelled, queued),
        }
    }

    fn parked(&self) -> &dyn ParkedRegistry {
        &self.shared.parked
    }

    fn is_closing(&self) -> bool {
        self.shared.close.is_closing()
    }

    /// Inheritance moves the awaited task to the waiter's channel only
    /// when the waiter's level is higher: a wait at the same or a lower
    /// level leaves it where it is. A task moves once at most (a moved or
    /// started task is not offered), so a cycle of waits cannot loop. Not
    /// while closing, and not out of a `complete_on_close` channel into
    /// one that is not: inheritance never makes a task droppable.
    fn boost(
        &self,
        waiter: usize,
        queued: usize,
        claim: &mut dyn FnMut(usize) -> Result<RunningTask, crate::MoveError>,
    ) {
        let channels = &self.shared.channels;
        if self.levels.level_of(waiter) >= self.levels.level_of(queued)
            || (channels[queued].complete_on_close && !channels[waiter].complete_on_close)
            || self.shared.close.is_closing()
        {
            return;
        }
        // A refusal (closing, or the task started meanwhile) leaves it be.
        let _ = crate::channel::move_into(self.channel_at(waiter), claim);
    }
}

impl<B: PoolBehavior> Deref for Pool<B> {
    type Target = B;

    fn deref(&self) -> &B {
        &self.behavior
    }
}

impl<B: PoolBehavior> fmt::Debug for Pool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .field("channels", &self.keys)
            .field("closing", &self.is_closing())
            .finish_non_exhaustive()
    }
}
