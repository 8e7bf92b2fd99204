//! `OwnedPool`: starts a pool and closes it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use super::{worker, Pool};
use crate::behavior::{ConfigError, PoolBehavior};
use crate::blocking::Blocking;
use crate::channel::ChannelLink;
use crate::core::blocked::Blocked;
use crate::core::context::{self, WorkerLocal};
use crate::core::{ChannelInfo, ChannelOptions, CloseState, Parked, Seats, Shared};
use crate::lifo::slot::Slot;
use crate::lifo::watch::Watch;
use crate::schedule::{Levels, Seating};
use crate::sleep::Sleep;
use crate::status::{Bit, Status};
use crate::task::{Schedule, SchedulerRef};

static NEXT_POOL_ID: AtomicUsize = AtomicUsize::new(1);

/// Ownership of a pool: the one value that can close it.
///
/// Share `pool` (an `Arc<Pool<B>>`, which derefs to your behavior) to
/// submit work. Call [`OwnedPool::close`] to shut down gracefully.
///
/// **Dropping an `OwnedPool` without calling `close` closes the pool the
/// same way and blocks the dropping thread until that is done**, as dropping
/// a tokio runtime does. (If the drop happens on one of the pool's own
/// worker threads, it cannot wait for itself: it starts the close and
/// returns.)
pub struct OwnedPool<B: PoolBehavior> {
    /// The shared handle to the pool.
    pub pool: Arc<Pool<B>>,
    /// What its close waits for; `None` once close began (`close`, or
    /// `Drop` without it).
    close: Option<Close>,
}

impl<B: PoolBehavior> OwnedPool<B> {
    /// Validates `behavior.config()`, attaches the channels and starts the
    /// worker threads. Fails on an invalid config (see [`ConfigError`]), a
    /// channel that already belongs to a pool, or a thread that could not
    /// be started; never panics on bad input.
    pub fn new(behavior: B) -> Result<OwnedPool<B>, ConfigError> {
        let config = behavior.config();
        config.validate()?;
        let options = behavior.level_options();
        config.validate_options(&options)?;
        let thread_config = behavior.thread_config();
        // The thread settings first (the names are user code): a panic or
        // a name std refuses is an error before any channel is attached or
        // thread started.
        let names = thread_config.check(config.threads)?;
        let (pool, locals) = make_pool(behavior, &config, &options, &thread_config)?;
        // A thread for each worker. If one cannot be started, the pool
        // aborts and the threads started are joined.
        let mut threads = Vec::with_capacity(locals.len());
        for (local, name) in locals.into_iter().zip(names) {
            let (worker_pool, hooks, settings) =
                (pool.clone(), pool.clone(), thread_config.clone());
            let spawned = thread::Builder::new()
                .name(name)
                .stack_size(thread_config.stack_size)
                .spawn(move || worker::run(worker_pool, hooks, local, &settings));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => {
                    abort(&pool.shared, threads.len(), pool.threads);
                    for handle in threads {
                        let _ = handle.join();
                    }
                    return Err(ConfigError::Spawn(e));
                }
            }
        }
        Ok(OwnedPool {
            close: Some(Close {
                shared: pool.shared.clone(),
                pool: Arc::as_ptr(&pool).cast::<()>() as usize,
                watcher: super::stall::Watcher::start(&pool),
                threads,
                // Zero threads: the close's poll drives the pool (see `drive`).
                driver: (pool.threads == 0).then(|| -> Driver {
                    let pool = pool.clone();
                    Box::new(move |waker: &Waker, stop_at| pool.drive_close(waker, stop_at))
                }),
                stop_at: None,
            }),
            pool,
        })
    }

    /// As [`Pool::block_on`]: runs `future` on the calling thread, running
    /// the pool's tasks while it waits. On a zero-thread pool, the way to
    /// run its tasks until a result is in.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.pool.block_on(future)
    }

    /// As [`Pool::run_until_stalled`]: runs the pool's tasks on the calling
    /// thread until none is ready, and returns how many ran.
    pub fn run_until_stalled(&self) -> usize {
        self.pool.run_until_stalled()
    }

    /// Closes the pool. From this call on, new tasks are refused (`exec`
    /// returns a handle that resolves to a cancellation, `try_exec` gives the
    /// future back). The returned future resolves once every task of the
    /// `complete_on_close` channels has completed, queued, running or parked
    /// (a parked one is run when it is woken), every task of the other
    /// channels has been dropped, queued or parked (their futures' `Drop`
    /// has run, their handles resolve as cancelled; a running one once its
    /// poll returns), and every worker thread has exited. (To reach parked
    /// tasks, this call wakes every task that ever parked: a task of a
    /// `complete_on_close` channel sees one spurious wake.)
    ///
    /// Closing happens whether or not the future is awaited; dropping it
    /// just stops waiting.
    ///
    /// # Panics
    ///
    /// Polling the returned future on one of the pool's own worker threads
    /// (blocking on it, or awaiting it, inside one of the pool's tasks)
    /// panics: the pool would wait for that task, and the task for the
    /// pool. The close goes on all the same; the panic, caught like any
    /// task's, ends the task. Drop the `OwnedPool` there instead, which
    /// closes without waiting, or close from outside the pool.
    ///
    /// On a zero-thread pool, polling the future drives the pool (see
    /// [`Pool::block_on`]): the poll runs the tasks close waits for, on the
    /// polling thread, and returns when the pool has closed (or at once,
    /// `Pending`, while another thread drives it).
    pub fn close(mut self) -> Close {
        self.begin_close().expect("an OwnedPool closes once")
    }

    /// Begins the close, once (`close`, or `Drop` without it): what is
    /// left to wait for.
    fn begin_close(&mut self) -> Option<Close> {
        let close = self.close.take()?;
        self.pool.shared.begin_close();
        Some(close)
    }

    /// Closes the pool as [`OwnedPool::close`] does, but stops waiting for
    /// the `complete_on_close` tasks when `timeout` has passed (tokio's
    /// `shutdown_timeout`): the tasks still unfinished are then dropped,
    /// queued ones as the workers take them, parked ones at once (on the
    /// thread that polls this future), running ones as soon as their
    /// current poll returns `Pending`; their handles resolve to a
    /// cancellation with
    /// [`CancelReason::CloseTimedOut`](crate::CancelReason::CloseTimedOut).
    /// The future resolves once the pool has closed, to a report that says
    /// how many tasks were dropped that way.
    ///
    /// What the deadline cannot cut short: a poll in progress (never
    /// interrupted), work a poll does inline (a [`scope`](crate::scope) or
    /// [`join`](crate::join) runs its own halves on the waiting thread
    /// when the pool drops their tasks), and what any `close` waits for (a
    /// followup that keeps a task outside the channels, a channel that
    /// does not hand its tasks out).
    ///
    /// Like [`OwnedPool::close`], awaiting it on one of the pool's own
    /// workers panics. The deadline is acted on when the future is polled:
    /// `futures-timer`'s timer thread wakes it then, and a poll after the
    /// deadline acts at once (so a zero timeout abandons in the first
    /// poll). Dropping the future before a poll sees the deadline just
    /// closes, without one.
    pub fn close_timeout(self, timeout: Duration) -> CloseTimeout {
        let at = Instant::now().checked_add(timeout);
        CloseTimeout {
            close: self.close(),
            deadline: Some((at, futures_timer::Delay::new(timeout))),
        }
    }
}

/// The pool's shared state, from a validated config: its channels in
/// level order, their keys, the levels, and the seats' local state (the
/// worker threads' first, then the guest seats', which `Shared` keeps).
fn build_shared<K: Copy + std::fmt::Debug>(
    config: &crate::PoolConfig<K>,
    options: &[crate::LevelOptions],
) -> (Arc<Shared>, Vec<WorkerLocal>, Vec<K>, Levels) {
    let threads = config.threads;
    let params: Vec<_> = config.levels.iter().flatten().collect();
    let keys: Vec<K> = params.iter().map(|channel| channel.key).collect();
    let sizes: Vec<usize> = config.levels.iter().map(Vec::len).collect();
    let levels = Levels::new(&sizes, &config.schedule, options);
    // Seats `0..threads` are the worker threads', the rest guest seats
    // (see `core::seats`): one per worker (a stand-in for it while it
    // blocks) and one for a driving thread.
    let seats = threads * 2 + 1;
    let seating = Seating::new(&levels, options, threads, seats);
    let channels: Vec<ChannelInfo> = params
        .iter()
        .enumerate()
        .map(|(index, channel)| ChannelInfo {
            name: format!("{:?}", channel.key).into(),
            bit: Bit::new(index),
            complete_on_close: channel.complete_on_close,
            uses_slot: levels.uses_slot(index),
            level: levels.level_of(index),
            options: ChannelOptions::of(seating.wakes[index].clone(), levels.clock_of(index)),
        })
        .collect();
    // Never reused (a thread's context remembers a pool by its id, see
    // `core::meters`): on 32-bit targets, 2^31 pools is the end.
    let id = NEXT_POOL_ID
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| {
            id.checked_add(1).filter(|&next| next < usize::MAX / 2)
        })
        .expect("smartpool: pool ids exhausted");
    let (mut locals, stealers): (Vec<_>, Vec<_>) = (0..seats)
        .map(|index| {
            let (floor, reserved) = (seating.floor[index], index < seating.reserved);
            WorkerLocal::new(id, index, keys.len(), index >= threads, floor, reserved)
        })
        .unzip();
    let guests = locals.split_off(threads);
    let level_of: Vec<usize> = channels.iter().map(|c| c.level).collect();
    let shared = Arc::new(Shared {
        id,
        status: Status::new(keys.len()),
        sleep: Sleep::with_domains(seating.domain.clone()),
        close: CloseState::new(threads),
        channels: channels.into(),
        stealers: stealers.into_iter().map(Vec::into_boxed_slice).collect(),
        job_stealers: (0..seats).map(|_| defaults(keys.len())).collect(),
        job_injectors: defaults(keys.len()),
        job_used: defaults(keys.len()),
        lifo: (0..seats).map(|_| Slot::new()).collect(),
        watch: Watch::new(seats),
        parked: Parked::new(),
        seats: Seats::new(guests),
        yield_masks: levels.yield_masks(),
        round_robin: matches!(config.schedule, crate::ScheduleAlgorithm::RoundRobin(_)),
        blocked: Blocked::new(&seating.domain[..threads]),
        on_deadlock: std::sync::OnceLock::new(),
        channel_holds: std::sync::OnceLock::new(),
        meters: crate::core::meters::Meters::new(id, seats, &level_of),
        bell: Default::default(),
        closing: Default::default(),
    });
    (shared, locals, keys, levels)
}

/// `n` default values (empty cells, clear flags).
fn defaults<T: Default>(n: usize) -> Box<[T]> {
    std::iter::repeat_with(T::default).take(n).collect()
}

/// The pool of a validated config (see `build_shared`), with the hooks its
/// shared state calls back through (whether a channel may hold a task; the
/// deadlock handler) and its channels attached, and its worker threads'
/// local state. Fails if a channel belongs to another pool.
fn make_pool<B: PoolBehavior>(
    behavior: B,
    config: &crate::PoolConfig<B::ChannelKey>,
    options: &[crate::LevelOptions],
    thread_config: &crate::ThreadConfig,
) -> Result<(Arc<Pool<B>>, Vec<WorkerLocal>), ConfigError> {
    let (shared, locals, keys, levels) = build_shared(config, options);
    let blocking_config = behavior.blocking();
    let pool = Arc::new_cyclic(|pool: &Weak<Pool<B>>| Pool {
        scheduler: SchedulerRef::new(pool.clone() as Weak<dyn Schedule>),
        blocking: Blocking::new(
            &blocking_config,
            "smartpool-block".into(),
            thread_config.blocking_stack_size(),
        ),
        stand_ins: blocking_config.stand_ins,
        behavior,
        shared: shared.clone(),
        keys: keys.into(),
        levels,
        threads: config.threads,
    });
    let (holds, weak) = (Arc::downgrade(&pool), Arc::downgrade(&pool));
    let _ = shared.channel_holds.set(Box::new(move |index| {
        holds
            .upgrade()
            .is_none_or(|pool| pool.channel_may_hold(index..index + 1))
    }));
    let _ = shared.on_deadlock.set(Box::new(move |report| {
        let Some(pool) = weak.upgrade() else { return };
        crate::contain::catch(
            || pool.behavior.deadlock(report),
            |message| {
                log::error!(
                    "smartpool: the deadlock handler panicked: {message}; the report was: {report}"
                )
            },
        );
    }));
    // A channel that belongs to another pool: the pool stops accepting
    // work (channels attached so far must refuse it: no worker will ever
    // serve them).
    for (index, &key) in pool.keys.iter().enumerate() {
        let link = ChannelLink {
            shared: pool.shared.clone(),
            scheduler: pool.scheduler.clone(),
            index,
        };
        if pool.behavior.channel(key).attach(link).is_err() {
            abort(&pool.shared, 0, pool.threads);
            let key = format!("{key:?}");
            return Err(ConfigError::ChannelAttached { key });
        }
    }
    Ok((pool, locals))
}

/// The pool of `threads` workers failed to start, with `spawned` of them
/// running: they exit, and the waiters of `closing()` are woken.
fn abort(shared: &Shared, spawned: usize, threads: usize) {
    shared.close.abort(spawned, threads);
    shared.closing.wake_all();
    shared.sleep.wake_all();
}

impl<B: PoolBehavior> Drop for OwnedPool<B> {
    fn drop(&mut self) {
        let Some(mut close) = self.begin_close() else {
            return; // closed already
        };
        if close.inside(true) {
            log::warn!("smartpool: OwnedPool dropped inside its own pool; closing without waiting");
            return;
        }
        if self.pool.threads == 0 {
            // Zero threads: the dropping thread drives the close, unless
            // its thread-locals are being destroyed (then it cannot be a
            // worker): the pool gives up on what is left, dropping it.
            if crate::context::available() {
                return self.pool.block_on(close);
            }
            log::warn!(
                "smartpool: a zero-thread OwnedPool dropped in a thread-local destructor; \
                 its tasks are dropped, not run"
            );
            self.pool.shared.abandon();
            self.pool.drain_all(None);
            return self.pool.shared.close.finish();
        }
        // Waits by joining the workers rather than through `Close` and an
        // executor: the last worker signals close only on its way out, so
        // when every thread has ended, close is done. A join needs no
        // thread-local of ours or an executor's, so this works in a
        // thread-local destructor too (where `futures::executor::block_on`
        // aborts the process: its own thread-local may be gone).
        close.join();
    }
}

impl<B: PoolBehavior> fmt::Debug for OwnedPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPool")
            .field("pool", &self.pool)
            .finish()
    }
}

/// The future returned by [`OwnedPool::close`]: resolves when the pool has
/// closed (see there).
#[must_use = "close proceeds anyway; await this to know when it is done"]
pub struct Close {
    shared: Arc<Shared>,
    /// The pool's address, to tell its tasks.
    pool: usize,
    threads: Vec<thread::JoinHandle<()>>,
    /// The stall watcher, stopped once the pool closed.
    watcher: Option<super::stall::Watcher>,
    /// For a zero-thread pool: what drives it (see `drive`).
    driver: Option<Driver>,
    /// For a zero-thread pool: when a poll stops driving and returns
    /// (`close_timeout`'s deadline), if ever.
    stop_at: Option<Instant>,
}

/// What drives a zero-thread pool's close: `true` once closed; `false` if
/// another thread holds the seat, or at the given instant.
type Driver = Box<dyn Fn(&Waker, Option<Instant>) -> bool + Send + Sync>;

impl Future for Close {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.shared.close.poll_finished(cx.waker()) {
            // A zero-thread pool's close may be driven from a guest seat
            // (a `block_on` of the close), not from inside a task.
            if self.inside(self.driver.is_none()) {
                panic!(
                    "smartpool: OwnedPool::close() awaited on one of the pool's own worker \
                     threads or inside one of its tasks, which would wait for itself; close the \
                     pool from outside it, or drop the OwnedPool there (it closes without waiting)"
                );
            }
            match &self.driver {
                Some(drive) if drive(cx.waker(), self.stop_at) => {}
                _ => return Poll::Pending,
            }
        }
        // Every worker has left its loop; joining only waits for the last
        // one to return from the function that signalled us.
        self.join();
        Poll::Ready(())
    }
}

impl Close {
    /// Whether the calling thread is inside the pool: polling one of its
    /// tasks (innermost), or, if `seats`, on one of its seats.
    fn inside(&self, seats: bool) -> bool {
        (seats && context::is_own_worker_of(self.shared.id))
            || crate::task::with_polling_task(|scheduler, _| {
                scheduler.as_ptr().cast::<()>() as usize == self.pool
            })
            .unwrap_or(false)
    }

    /// Joins the worker threads, then stops the stall watcher, which
    /// reports a stall until the pool has closed.
    fn join(&mut self) {
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
        if let Some(watcher) = self.watcher.take() {
            watcher.stop();
        }
    }

    /// Blocks the calling thread until the pool has closed: the future,
    /// awaited without an executor of your own (on a zero-thread pool, the
    /// calling thread runs the tasks close waits for).
    ///
    /// ```
    /// let owned = smartpool::Builder::new().threads(1).build()?;
    /// owned.close().wait();
    /// # Ok::<(), smartpool::ConfigError>(())
    /// ```
    ///
    /// # Panics
    ///
    /// On one of the pool's own worker threads, as awaiting the future
    /// does (see [`OwnedPool::close`]); and inside a thread-local's
    /// destructor, where the thread's handle is gone.
    pub fn wait(self) {
        crate::sync::block_on(self)
    }
}

impl fmt::Debug for Close {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Close")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

/// The future returned by [`OwnedPool::close_timeout`].
#[must_use = "close proceeds anyway; await this to know when it is done"]
pub struct CloseTimeout {
    close: Close,
    /// When it passes (`None`: never, it is that far), and its timer;
    /// `None` once it passed (and the pool abandoned what was left).
    deadline: Option<(Option<Instant>, futures_timer::Delay)>,
}

/// How a close with a deadline ended: see [`OwnedPool::close_timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseReport {
    timed_out: bool,
    aborted: usize,
}

impl CloseReport {
    /// Whether a poll of the close saw the deadline pass before the pool
    /// had closed (and so abandoned what was left).
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// How many tasks counted towards close (those of `complete_on_close`
    /// channels) were dropped because the deadline passed, their handles
    /// saying [`CancelReason::CloseTimedOut`](crate::CancelReason::CloseTimedOut).
    /// Tasks their users aborted meanwhile are not counted. The pool's own
    /// carrier tasks of [`scope`](crate::scope) and [`join`](crate::join)
    /// are (their work then runs on the waiting thread, or already ran).
    pub fn aborted(&self) -> usize {
        self.aborted
    }
}

impl CloseTimeout {
    /// Blocks the calling thread until the pool has closed, and returns
    /// the report (see [`Close::wait`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use smartpool::prelude::*;
    ///
    /// let owned = smartpool::Builder::new().threads(1).build()?;
    /// let done = owned.pool.level(0).exec(run(|| "done"));
    /// let report = owned.close_timeout(Duration::from_secs(5)).wait();
    /// assert_eq!(report.aborted(), 0);
    /// assert_eq!(futures::executor::block_on(done)?, "done");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(self) -> CloseReport {
        crate::sync::block_on(self)
    }
}

impl Future for CloseTimeout {
    type Output = CloseReport;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CloseReport> {
        let CloseTimeout { close, deadline } = &mut *self;
        if let Some((at, timer)) = deadline.as_mut().filter(|_| close.driver.is_some()) {
            // Zero threads: the close's poll drives the pool, sleeping in
            // the pool's sleep protocol, until it closes or the deadline:
            // the timer, armed first, rouses the driving seat (the pool's
            // one guest seat, 0) as well as our waker.
            let waker = Waker::from(Arc::new(RouseDriver {
                shared: close.shared.clone(),
                outer: cx.waker().clone(),
            }));
            let _ = Pin::new(timer).poll(&mut Context::from_waker(&waker));
            // (No clock reaches a deadline too far to represent.)
            let far = || crate::sync::later(Instant::now(), crate::sync::FAR);
            close.stop_at = Some(at.unwrap_or_else(far));
        }
        loop {
            if Pin::new(&mut *close).poll(cx).is_ready() {
                return Poll::Ready(CloseReport {
                    timed_out: deadline.is_none(),
                    aborted: close.shared.parked.abandoned(),
                });
            }
            // The clock first: a deadline already past is acted on in this
            // poll, whatever the timer thread is doing.
            let passed = deadline.as_mut().is_some_and(|(at, timer)| {
                at.is_some_and(|at| Instant::now() >= at) || Pin::new(timer).poll(cx).is_ready()
            });
            if !passed {
                return Poll::Pending;
            }
            *deadline = None;
            close.stop_at = None;
            close.shared.abandon();
            // Look again: the abandon may have finished the close.
        }
    }
}

/// The waker of a zero-thread pool's close timer: see `CloseTimeout::poll`.
struct RouseDriver {
    shared: Arc<Shared>,
    outer: Waker,
}

impl std::task::Wake for RouseDriver {
    fn wake(self: Arc<Self>) {
        self.shared.sleep.rouse(0);
        self.outer.wake_by_ref();
    }
}

impl fmt::Debug for CloseTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloseTimeout")
            .field("timed_out", &self.deadline.is_none())
            .finish_non_exhaustive()
    }
}
