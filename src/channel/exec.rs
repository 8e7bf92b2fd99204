//! The entry points that put tasks into channels: `exec` for new work,
//! `submit` for a task handed back by followup.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{Channel, ChannelLink, Spawner};
use crate::task::{self, CancelReason, JoinHandle, RunningTask, SchedulerRef};

/// Runs futures on a channel. Implemented for every [`Channel`].
pub trait Exec {
    /// Runs `future` on the pool through this channel and returns a handle to
    /// its output. For a closure, wrap it: `exec(run(|| ..))`.
    ///
    /// If the pool is closing or closed, the future is dropped and the handle
    /// resolves to a cancellation [`JoinError`](crate::JoinError); use
    /// [`Exec::try_exec`] to get the future back instead.
    fn exec<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_exec(future)
            .unwrap_or_else(|rejected| JoinHandle::rejected(rejected.reason))
    }

    /// Runs every future of `futures` on the pool through this channel, as
    /// a batch: stored, then announced together (64 at a time), with the
    /// status bit marked once and up to as many sleeping workers woken as
    /// there are tasks (fewer if idle workers are awake to take them;
    /// EMPER's notify-n), each told where the work is. One announcement
    /// instead of one a task, and the woken workers start together. A
    /// batch never goes into a worker's LIFO slot. `futures` is collected
    /// before the first task is stored (a panic there stores nothing).
    /// Returns the handles in order; a future the pool refuses (closing,
    /// or the channel attached to no pool) is dropped and its handle
    /// resolves to a cancellation, as with `exec`.
    fn exec_batch<I>(&self, futures: I) -> Vec<JoinHandle<<I::Item as Future>::Output>>
    where
        I: IntoIterator,
        I::Item: Future + Send + 'static,
        <I::Item as Future>::Output: Send + 'static,
    {
        futures
            .into_iter()
            .map(|future| self.exec(future))
            .collect()
    }

    /// Like [`Exec::exec`], but gives the future back if the pool no longer
    /// accepts tasks (or the channel was never attached to a pool).
    ///
    /// On a `complete_on_close` channel, an accepted task runs: close waits
    /// for it (unless its followup later moves it to a dropping channel). On
    /// another channel, a task accepted in the very instant close begins is
    /// dropped by that close like every queued task of the channel, and its
    /// handle says it was cancelled.
    fn try_exec<F>(&self, future: F) -> Result<JoinHandle<F::Output>, Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;

    /// Runs `future` on the pool through this channel with no handle:
    /// fire and forget, as rayon's `spawn` or async-executor's `detach`.
    /// The task runs as one whose [`JoinHandle`] was dropped at once: its
    /// output is dropped on the worker as it finishes, a panic goes to the
    /// behavior's [`task_panicked`](crate::PoolBehavior::task_panicked)
    /// (and is logged), and close treats it as any task of its channel.
    /// Cheaper than `exec` and a dropped handle: the task has one
    /// reference, not two, and the submitting thread writes nothing to it
    /// after queueing it (no handle to make, no detach store, no count to
    /// decrement).
    ///
    /// Gives the future back if the pool no longer accepts tasks (or the
    /// channel was never attached to a pool), as [`Exec::try_exec`] does.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use smartpool::prelude::*;
    ///
    /// let owned = smartpool::Builder::new().threads(1).build()?;
    /// let (tx, rx) = mpsc::channel();
    /// owned.pool.level(0).exec_detached(run(move || tx.send(42).unwrap()))?;
    /// assert_eq!(rx.recv()?, 42);
    /// owned.close().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn exec_detached<F>(&self, future: F) -> Result<(), Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_exec(future).map(drop)
    }

    /// This channel as a [`Spawn`](futures_task::Spawn), for code written
    /// against the futures crate's executor traits (see [`Spawner`]).
    ///
    /// ```
    /// use futures::task::SpawnExt;
    /// use smartpool::prelude::*;
    ///
    /// let owned = smartpool::Builder::new().levels(2).threads(1).build()?;
    /// let spawner = owned.pool.level(0).spawner();
    /// let done = spawner.spawn_with_handle(async { 6 * 7 })?;
    /// assert_eq!(owned.block_on(done), 42);
    /// owned.close().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn spawner(&self) -> Spawner<'_, Self> {
        Spawner(self)
    }
}

impl<C: Channel + ?Sized> Exec for C {
    fn try_exec<F>(&self, future: F) -> Result<JoinHandle<F::Output>, Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        try_exec_with(self, future, self.lifo_slot(), task::spawn, C::push)
    }

    fn exec_detached<F>(&self, future: F) -> Result<(), Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let detached = |future, scheduler| (task::spawn_detached(future, scheduler), ());
        try_exec_with(self, future, self.lifo_slot(), detached, C::push)
    }

    fn exec_batch<I>(&self, futures: I) -> Vec<JoinHandle<<I::Item as Future>::Output>>
    where
        I: IntoIterator,
        I::Item: Future + Send + 'static,
        <I::Item as Future>::Output: Send + 'static,
    {
        // The caller's iterator runs first, before anything is stored: it
        // may panic, or wait for the batch's own tasks, with none of them
        // stored unannounced.
        let futures: Vec<_> = futures.into_iter().collect();
        let Some(link) = self.link() else {
            let reason = CancelReason::ChannelNotAttached;
            return futures
                .iter()
                .map(|_| JoinHandle::rejected(reason))
                .collect();
        };
        let shared = &link.shared;
        let mut handles = Vec::with_capacity(futures.len());
        // Announces what is stored as it drops: at each chunk's end, and if
        // a refused future's `Drop` (user code) unwinds through here.
        let mut stored = Unannounced {
            channel: self,
            link,
            n: 0,
        };
        for future in futures {
            let Ok(count) = shared.admit(link.index) else {
                handles.push(JoinHandle::rejected(CancelReason::PoolClosed));
                drop(future);
                continue;
            };
            let (task, handle) = task::spawn(future, link.scheduler.clone());
            if let Some(count) = count {
                count.hand_to(&task);
            }
            shared.account(&task, link.index, true);
            // As in `enqueue`: a panicking push may have stored the task or
            // dropped it (which cancels it); the bit is marked all the same,
            // at the announcement.
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.push(task, link))) {
                push_panicked(shared, link.index, panic);
            }
            handles.push(handle);
            stored.n += 1;
            if stored.n == BATCH_CHUNK {
                stored.announce();
            }
        }
        stored.announce();
        handles
    }
}

/// A channel that takes a parameter with each task: a deadline, a position.
/// Implement [`ExecParam::push_param`]; the pool provides the rest.
/// ([`Channel::push`] still receives tasks without a parameter, those a
/// followup submits and those of [`Exec::exec`] and [`Exec::exec_batch`]:
/// choose a default for them.)
pub trait ExecParam: Channel {
    /// What comes with each task.
    type Param;

    /// Stores a task with its parameter. Called by
    /// [`ExecParam::exec_param`], which notifies the pool afterwards; do not
    /// call it directly.
    fn push_param(&self, task: RunningTask, param: Self::Param, link: &ChannelLink);

    /// Runs `future` through this channel with `param`; as [`Exec::exec`]
    /// otherwise (the same admission, close and error behaviour).
    fn exec_param<F>(&self, future: F, param: Self::Param) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_exec_param(future, param)
            .unwrap_or_else(|rejected| JoinHandle::rejected(rejected.reason))
    }

    /// Like [`ExecParam::exec_param`], but gives the future back if the pool
    /// no longer accepts tasks; as [`Exec::try_exec`] otherwise.
    fn try_exec_param<F>(
        &self,
        future: F,
        param: Self::Param,
    ) -> Result<JoinHandle<F::Output>, Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // The parameter orders the task: it must reach the channel.
        try_exec_with(self, future, false, task::spawn, |channel, task, link| {
            channel.push_param(task, param, link)
        })
    }
}

/// Admits a new task (see `core::close`), makes it with `make` (which
/// returns its token and its handle, if any), and submits it with `push`:
/// the one way new work enters a pool.
fn try_exec_with<C: Channel + ?Sized, F, H>(
    channel: &C,
    future: F,
    lifo: bool,
    make: impl FnOnce(F, SchedulerRef) -> (RunningTask, H),
    push: impl FnOnce(&C, RunningTask, &ChannelLink),
) -> Result<H, Rejected<F>> {
    let Some(link) = channel.link() else {
        let reason = CancelReason::ChannelNotAttached;
        return Err(Rejected { future, reason });
    };
    let Ok(count) = link.shared.admit(link.index) else {
        let reason = CancelReason::PoolClosed;
        return Err(Rejected { future, reason });
    };
    let (task, handle) = make(future, link.scheduler.clone());
    if let Some(count) = count {
        count.hand_to(&task);
    }
    // Made with this link's scheduler: it belongs to this pool.
    enqueue(channel, link, task, lifo, true, push);
    Ok(handle)
}

/// Queues a task handed over by followup. Implemented for every [`Channel`].
pub trait Submit {
    /// Queues `task` on this channel. Called from a behavior's `followup`.
    /// After the pool closed, on a channel of no pool, or on a channel of
    /// another pool than the task's, the task is dropped, which cancels it.
    fn submit(&self, task: RunningTask);
}

impl<C: Channel + ?Sized> Submit for C {
    // Checks that the channel belongs to the task's pool, then enqueues
    // the task.
    fn submit(&self, task: RunningTask) {
        let lifo = self.lifo_slot();
        let (reason, whose) = match self.link() {
            Some(link) if task.belongs_to(&link.scheduler) => {
                return enqueue(self, link, task, lifo, false, C::push);
            }
            // Its close accounting is its own pool's: dropping it here
            // releases it there.
            Some(_) => (CancelReason::OtherPool, "another"),
            None => (CancelReason::ChannelNotAttached, "no"),
        };
        log::warn!("smartpool: task submitted to a channel of {whose} pool; dropped");
        task.set_cancel_reason(Some(reason));
    }
}

/// The one path by which tasks enter a channel of their pool, `push`
/// storing them (`Channel::push`, or `ExecParam::push_param` with the
/// task's parameter); or, if `lifo` allows it, the calling worker's LIFO
/// slot. `new`: a task just made (counted as submitted, see
/// `core::meters`).
///
/// Always inlined: each caller passes constant flags, and a spawn is
/// on the hot path (the compiler stopped inlining it on its own).
#[inline(always)]
pub(super) fn enqueue<C: Channel + ?Sized>(
    channel: &C,
    link: &ChannelLink,
    mut task: RunningTask,
    lifo: bool,
    new: bool,
    push: impl FnOnce(&C, RunningTask, &ChannelLink),
) {
    let shared = &link.shared;
    // A yield goes behind the queued work, not into the slot.
    let requeued = shared.account(&task, link.index, new);
    let lifo = lifo && !requeued && shared.channels[link.index].uses_slot;
    if lifo && !shared.close.is_terminated() {
        // The slot's worker runs it next: no bit; a sleeper is woken only
        // if no other worker is awake and idle to steal it (see `lifo`).
        match crate::core::context::offer_lifo(shared, link.index, task) {
            Ok(filler_idle) => return shared.sleep.slot_filled(filler_idle),
            Err(back) => task = back,
        }
    }
    // A channel of the user's may panic, having stored the task or not:
    // mark the bit all the same (a stale set bit is harmless; a clear one
    // over a stored task would strand it). A task it did not store was
    // dropped in the unwinding, which cancels it.
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| push(channel, task, link))) {
        push_panicked(shared, link.index, panic);
    }
    // Marks the status bit (post fence, and set fence if it set it), then
    // wakes a sleeper.
    shared.pushed(link.index);
    if shared.close.is_terminated() {
        // The pool finished closing while we pushed, and its final drain may
        // have missed our task (see `core::close`): drain it ourselves.
        super::drain(channel, shared);
    }
}

/// Tasks of a batch stored before they are announced together: the
/// workers start on a long batch while the rest is still being stored.
const BATCH_CHUNK: usize = 64;

/// Tasks of a batch stored in `channel` and not yet announced (see
/// `Exec::exec_batch`): announced by [`Unannounced::announce`], or as it
/// drops (also in an unwind), so that none is left with its bit clear.
struct Unannounced<'a, C: Channel + ?Sized> {
    channel: &'a C,
    link: &'a ChannelLink,
    n: usize,
}

impl<C: Channel + ?Sized> Unannounced<'_, C> {
    fn announce(&mut self) {
        if self.n == 0 {
            return;
        }
        let shared = &self.link.shared;
        shared.pushed_many(self.link.index, std::mem::take(&mut self.n));
        if shared.close.is_terminated() {
            // As in `enqueue`: the final drain may have missed the batch.
            super::drain(self.channel, shared);
        }
    }
}

impl<C: Channel + ?Sized> Drop for Unannounced<'_, C> {
    fn drop(&mut self) {
        self.announce();
    }
}

/// Logs a panic of channel `index`'s `push`.
#[cold]
#[inline(never)]
fn push_panicked(shared: &crate::core::Shared, index: usize, panic: Box<dyn std::any::Any + Send>) {
    log::error!(
        "smartpool: channel {} panicked in push: {}",
        shared.channels[index].name,
        crate::contain::panic_message(&*panic)
    );
}

/// A future the pool did not accept, given back to the caller.
pub struct Rejected<F> {
    future: F,
    /// `PoolClosed` or `ChannelNotAttached`.
    reason: CancelReason,
}

impl<F> Rejected<F> {
    /// Gives `future` back if `channel` would refuse it now: it belongs to
    /// no pool, or its pool is no longer open.
    pub(crate) fn check<C: Channel + ?Sized>(channel: &C, future: F) -> Result<F, Rejected<F>> {
        let reason = match channel.link() {
            None => CancelReason::ChannelNotAttached,
            Some(link) if !link.is_open() => CancelReason::PoolClosed,
            Some(_) => return Ok(future),
        };
        Err(Rejected { future, reason })
    }

    /// The future that was not run.
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F> fmt::Display for Rejected<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.reason {
            CancelReason::PoolClosed => "task rejected: the pool is closing or closed",
            _ => {
                "task rejected: the channel is attached to no pool (is it missing from the config?)"
            }
        })
    }
}

impl<F> fmt::Debug for Rejected<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The two reasons under the names `Debug` has always shown.
        let reason = match self.reason {
            CancelReason::PoolClosed => "Closed",
            _ => "Unattached",
        };
        f.debug_struct("Rejected")
            .field("reason", &format_args!("{reason}"))
            .finish_non_exhaustive()
    }
}

impl<F> std::error::Error for Rejected<F> {}
