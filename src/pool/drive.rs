//! Driving a pool from the calling thread: `Pool::block_on`,
//! `Pool::run_until_stalled`, and the close of a zero-thread pool.
//!
//! A thread that is not one of the pool's workers drives it from a guest
//! seat (see `core::seats`): it takes the seat, is that worker (the same
//! loop, levels and schedule as the pool's threads) until it stops
//! driving, then empties the seat into the channels and gives it back. A
//! worker of the pool (its own thread, or a guest already) drives from the
//! seat it has: a wait inside a task helps instead of blocking.
//!
//! # A wait that helps (`block_on`)
//!
//! The future is polled with a waker that sets a flag, rouses the seat the
//! thread drives from (`Sleep::rouse`, as a scope's wait does) and unparks
//! the thread. Between polls the thread runs the pool's tasks until the
//! flag is set (`help_until`, whose sleep has the flag in its final check,
//! so a wake between the check and the sleep is not lost: it rouses the
//! seat). The flag is cleared before each poll, so a wake during the poll
//! ends the next help at once. When the thread cannot help (no free seat,
//! the pool terminated, or its stack too deep in nested waits), it parks
//! until the flag is set; a thread waiting for a seat is also woken when
//! one is given back, and tries again.
//!
//! # Zero threads
//!
//! With no worker threads, tasks run only while some thread drives. A
//! zero-thread pool has one guest seat, so at most one thread drives at a
//! time, and the run order is the schedule's alone: deterministic for a
//! given order of submissions and wakes. Close is driven by whoever polls
//! its future: it drives until the pool terminates, then does what the last
//! worker out does (drains the channels, signals the close).

use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use super::worker::{self, execute, find};
use super::Pool;
use crate::behavior::PoolBehavior;
use crate::channel::Submit;
use crate::core::blocked::WorkerState;
use crate::core::context::{self, WorkerContext, WorkerLocal};
use crate::core::Shared;

/// Tasks a `block_on` runs between two polls of a root that woke itself
/// (tokio's event interval).
const ROOT_INTERVAL: usize = 61;

/// Stack a guest may have used below the frame that took its seat and
/// still start helping: the caller's thread may be std's default 2 MiB, so
/// a guest keeps half of that for the tasks it runs on top.
const GUEST_STACK_BUDGET: usize = 1 << 20;

impl<B: PoolBehavior> Pool<B> {
    /// Runs `future` to completion on the calling thread, running the
    /// pool's tasks while it waits (rayon's `install`, marl's `bind`), and
    /// returns its output.
    ///
    /// * From a thread that is not one of the pool's workers (a program's
    ///   main thread), the thread is a worker of the pool while it waits:
    ///   it takes a guest seat, and serves the levels by the pool's
    ///   schedule like the pool's own threads. If every guest seat is taken
    ///   (a pool has one per worker thread, plus one), it just waits, and
    ///   takes a seat as soon as one is free.
    /// * On one of the pool's own workers (inside a task), it helps rather
    ///   than blocks: a task that blocks on the handle of a task it
    ///   spawned runs that task meanwhile, also on a one-thread pool.
    /// * On a zero-thread pool, this (with [`Pool::run_until_stalled`]) is
    ///   how tasks run at all.
    ///
    /// Calls nest: `block_on` inside a task run by `block_on` helps again.
    /// The future itself is not a task of the pool: it runs on the calling
    /// thread only, and need not be `Send`.
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
    /// # }
    /// let owned = OwnedPool::new(B { work: VecDequeChannel::new() })?;
    /// let pool = owned.pool.clone();
    /// // A task that waits for a child it spawned, on a one-thread pool:
    /// // the wait runs the child.
    /// let parent = pool.work.exec(async {
    ///     let pool = Pool::<B>::current().unwrap();
    ///     let child = pool.work.exec(async { 21 });
    ///     pool.block_on(child).unwrap() * 2
    /// });
    /// assert_eq!(pool.block_on(parent).unwrap(), 42);
    /// # Ok::<(), smartpool::ConfigError>(())
    /// ```
    pub fn block_on<F: Future>(self: &Arc<Self>, future: F) -> F::Output {
        let mut future = pin!(future);
        let signal = Arc::new(Signal {
            woken: AtomicBool::new(false),
            seat: AtomicUsize::new(NO_SEAT),
            shared: self.shared.clone(),
            thread: thread::current(),
        });
        let waker = Waker::from(signal.clone());
        let mut cx = Context::from_waker(&waker);
        // A foreign thread is the pool's worker from the first poll on: a
        // scope or `join` in that poll then waits as a worker that helps
        // (on a zero-thread pool, nobody else would run its tasks).
        let foreign = context::current_of(self.shared.id).is_none();
        let mut guest = foreign.then(|| Guest::take(self, Some(&waker))).flatten();
        loop {
            signal.woken.store(false, Ordering::SeqCst);
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            self.until_woken(&signal, &waker, &mut guest);
        }
    }

    /// A `block_on` between two polls (not generic over the future): runs
    /// the pool's tasks until `signal` is set, else parks until it is.
    fn until_woken<'a>(
        self: &'a Arc<Self>,
        signal: &Signal,
        waker: &Waker,
        guest: &mut Option<Guest<'a, B>>,
    ) {
        let worker = context::current_of(self.shared.id).or_else(|| {
            if guest.is_none() {
                *guest = Guest::take(self, Some(waker));
            }
            guest.as_ref().map(|g| g.worker().clone())
        });
        if let Some(worker) = &worker {
            if signal.woken.load(Ordering::SeqCst) {
                // Woken during its poll (it woke itself: a yield, a polling
                // loop): queued tasks run first, up to a fairness interval,
                // as tokio's `block_on` does, or the root would spin with
                // nothing else running.
                self.run_ready(worker, ROOT_INTERVAL);
                return;
            }
            signal.seat.store(worker.index, Ordering::SeqCst);
            let done = worker.help_until(&|| signal.woken.load(Ordering::SeqCst));
            signal.seat.store(NO_SEAT, Ordering::SeqCst);
            if done {
                return;
            }
        }
        // One of the pool's threads that waits without running tasks
        // counts for the deadlock check.
        let state = WorkerState::WaitingWithoutHelping;
        let _blocked = worker
            .filter(|worker| !worker.guest && !self.shared.close.is_terminated())
            .map(|worker| self.shared.block(worker.index, state));
        while !signal.woken.load(Ordering::SeqCst) {
            thread::park();
        }
    }

    /// Runs the pool's tasks on the calling thread until none is ready to
    /// run (every channel empty, or holding only tasks the schedule does
    /// not serve now), and returns how many it ran. Tasks woken from other
    /// threads meanwhile run too; those woken later run at the next drive.
    /// The way to drive a zero-thread pool step by step (a game's main
    /// loop, a test); on a threaded pool the calling thread helps the
    /// workers. Returns 0 at once if every guest seat is taken (another
    /// thread drives).
    pub fn run_until_stalled(self: &Arc<Self>) -> usize {
        if let Some(worker) = context::current_of(self.shared.id) {
            return self.run_ready(&worker, usize::MAX);
        }
        Guest::take(self, None).map_or(0, |guest| self.run_ready(guest.worker(), usize::MAX))
    }

    /// Runs up to `most` ready tasks as `worker` (stopping early when
    /// none is ready, or at once if its stack is past its budget: each
    /// task may nest another wait); how many it ran.
    fn run_ready(self: &Arc<Self>, worker: &WorkerLocal, most: usize) -> usize {
        if worker::over_stack_budget(worker) {
            return 0;
        }
        let context = WorkerContext::worker(&self.shared, worker);
        let mut cursor = self.levels.cursor(worker.floor);
        let seat = &self.shared.meters.seats[worker.index];
        let _outer = worker::Nested::save(&self.shared, worker);
        let mut ran = 0;
        while ran < most {
            let Some(task) = find(self, &context, &mut cursor) else {
                // A search that took a job returns none: it runs here.
                if worker.run_stolen() {
                    ran += 1;
                    continue;
                }
                break;
            };
            if ran == 0 {
                // The seat turns busy (see `stall`).
                self.shared.bell.ring();
            }
            // (A stale token a move left behind is not a task run.)
            ran += usize::from(execute(self, Some(seat), task));
        }
        ran
    }

    /// Drives the close of a zero-thread pool (see the module doc):
    /// `true` once it is done; `false` if another thread holds the seat
    /// (`waker` is woken when it is free, or when the pool terminates), or
    /// at `stop_at` (whoever set it rouses the seat then).
    pub(super) fn drive_close(self: &Arc<Self>, waker: &Waker, stop_at: Option<Instant>) -> bool {
        let shared = &*self.shared;
        let terminated = || shared.close.is_terminated();
        let stop = || terminated() || stop_at.is_some_and(|at| Instant::now() >= at);
        if !terminated() {
            let current = context::current_of(shared.id);
            let guest = current.is_none().then(|| Guest::take(self, Some(waker)));
            let guest = guest.flatten();
            if let Some(worker) = current.or_else(|| guest.as_ref().map(|g| g.worker().clone())) {
                while !stop() {
                    if !worker.help_until(&stop) && !stop() {
                        // Too deep in nested waits to help: wait for
                        // another thread to end the close.
                        thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
            }
            // Stopped at `stop_at`, or no seat was free: unless the pool
            // terminated meanwhile (the seat's holder ran the last task),
            // then none is needed.
            if !terminated() {
                return false;
            }
        }
        // What the last worker out does (see `close`): drain, signal. The
        // driving seat's slot too: a task a last one put there is dropped
        // before close is signalled.
        self.drain_all(context::current_of(shared.id).map(|worker| worker.index));
        shared.close.finish();
        true
    }

    /// Moves the tasks in `local`'s LIFO slot and deques to their channels,
    /// which mark their status bits and let the sleep protocol wake a
    /// worker. The calling thread must no longer be `local`'s worker (else
    /// the submissions would come back to it): a guest giving its seat
    /// back, a worker entering `block_in_place`.
    pub(super) fn move_out(&self, local: &WorkerLocal) {
        for (channel, task) in local.take_all(&self.shared) {
            self.shared.meters.moved_out(local.index, channel);
            self.channel_at(channel).submit(task);
        }
    }
}

const NO_SEAT: usize = usize::MAX;

/// The waker of a `block_on`: see the module doc.
struct Signal {
    woken: AtomicBool,
    /// The seat the waiting thread helps from, or [`NO_SEAT`].
    seat: AtomicUsize,
    shared: Arc<Shared>,
    thread: Thread,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        let seat = self.seat.load(Ordering::SeqCst);
        if seat != NO_SEAT {
            self.shared.sleep.rouse(seat);
        }
        self.thread.unpark();
    }
}

/// A guest seat taken by the calling thread, which is its worker until
/// this drops (also in an unwind): see `core::seats`.
pub(super) struct Guest<'a, B: PoolBehavior> {
    pool: &'a Arc<Pool<B>>,
    /// The seat's worker and the thread's entry as it; taken as it drops.
    seat: Option<(Rc<WorkerLocal>, crate::context::Entered)>,
    /// Whether its thread was told to give it back (a stand-in).
    pub(super) retired: bool,
}

impl<'a, B: PoolBehavior> Guest<'a, B> {
    /// Takes a free guest seat of `pool` and makes the calling thread its
    /// worker; `None` if none is free (then `waker`, if given, is woken
    /// when one is).
    fn take(pool: &'a Arc<Pool<B>>, waker: Option<&Waker>) -> Option<Guest<'a, B>> {
        if !crate::context::available() {
            return None; // the thread's locals are being destroyed
        }
        let local = pool.shared.seats.claim(waker)?;
        Some(Guest::enter(pool, local, GUEST_STACK_BUDGET))
    }

    /// Makes the calling thread the worker of the guest seat `local`,
    /// claimed from `pool`'s seats, helping in waits while it has used
    /// less than `budget` of its stack below this call.
    pub(super) fn enter(pool: &'a Arc<Pool<B>>, local: WorkerLocal, budget: usize) -> Guest<'a, B> {
        let (worker, entered) = worker::enter_seat(pool, pool.clone(), local, budget);
        Guest {
            pool,
            seat: Some((worker, entered)),
            retired: false,
        }
    }

    pub(super) fn worker(&self) -> &Rc<WorkerLocal> {
        &self.seat.as_ref().expect("held until dropped").0
    }
}

impl<B: PoolBehavior> Drop for Guest<'_, B> {
    fn drop(&mut self) {
        let pool = self.pool;
        let (worker, entered) = self.seat.take().expect("held until dropped");
        // The seat shows idle while nobody holds it.
        pool.shared.meters.seats[worker.index].idle(pool.shared.meters.epoch);
        // No longer the seat's worker: what the moves below submit goes to
        // the channels' shared queues, not back into the seat.
        let local = WorkerLocal::leave(worker, entered);
        // The behavior's `channel` is user code: should it panic, the
        // seat is given back all the same (the tasks left in it are then
        // dropped, which cancels them).
        let moved = crate::contain::catch(
            || pool.move_out(&local),
            |message| {
                log::error!("smartpool: a channel panicked as a guest seat was emptied: {message}")
            },
        );
        if moved.is_none() {
            local.take_all(&pool.shared).for_each(drop);
        }
        pool.shared.seats.release(local, self.retired);
    }
}
