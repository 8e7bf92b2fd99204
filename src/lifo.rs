//! The LIFO slot: a task submitted on a worker thread runs next on that
//! thread.
//!
//! # Why
//!
//! A task that submits another and returns (a chain, a fork whose parent
//! ends), or a future that wakes another and parks (message passing), hands
//! its worker the next piece of work. Through its channel, that work lands
//! in the worker's local deque, where an idle worker steals it before its
//! own worker comes back for it; the pair then bounces between cores and
//! every cache line the tasks touch moves with them (measured on the 2-core
//! machine: a chain of spawns cost ~580 ns a hop with both cores free,
//! ~180 ns with one). tokio keeps such work on its core with a LIFO slot;
//! this is ours.
//!
//! # Rules
//!
//! * Each worker has one slot, which only its own thread touches (it lives
//!   in the thread's `WorkerLocal`): no atomics.
//! * `exec` and `submit` into a channel that allows it
//!   ([`Channel::lifo_slot`](crate::Channel::lifo_slot)) put the task in the
//!   slot if the caller is a worker thread of the task's pool, the slot is
//!   empty, the pool has not terminated, and the worker is neither
//!   re-queuing a task that woke itself (a yield goes through its channel,
//!   to the worker's local queue) nor moving the slot's task out. The task
//!   is accounted for close like any submission, but not pushed to its
//!   channel: no status bit, no wake-up, no other worker sees it.
//! * The worker looks at its slot first in every search (`pool::worker`).
//!   It runs the task if the schedule would serve the task's level now and
//!   either fewer than [`MAX_STREAK`] slot tasks ran in a row or no channel
//!   has queued work (asked of the channels, `Channel::may_have_tasks`: a
//!   status bit can outlive the last task); otherwise it submits the task to its channel (not to
//!   its own local queue, which it serves first, but behind what is queued
//!   there from outside, visible to all) and searches the channels.
//! * At exit the worker drops what its slot holds, like its local deques.
//!
//! # Invariant: no task is stranded
//!
//! Only code running on the worker's own thread fills its slot: a task it
//! runs, a channel it polls, a drop it performs. After each of those the
//! worker searches again before it can go idle or park, and its sleep
//! protocol's final check counts a full slot as work; a wait that will not
//! help (too deep in nested waits) moves the slot's task to its channel
//! before it parks; at exit, or when a waiting worker finds its pool
//! terminated, it drops the slot's task. So a slot task is run, moved to
//! its channel, or dropped with the worker's queues (which happens only
//! once the pool terminated, when close drops such tasks anyway: a task
//! that counts towards close keeps the pool from terminating).
//!
//! # The cost
//!
//! A slot task is invisible to the other workers until its worker's current
//! task returns or parks. If that task goes on computing after it submits,
//! the submitted task waits for it even while other workers idle, as in
//! tokio; if it blocks waiting for the submitted task, it waits forever.
//! That is why the slot is opt-in, per channel
//! ([`VecDequeChannel::with_lifo_slot`](crate::VecDequeChannel::with_lifo_slot)):
//! a priority pool's default is that work submitted anywhere starts on any
//! free worker (a sleeping one is woken for it).

use std::cell::Cell;

use crate::task::RunningTask;

/// Slot tasks a worker may run in a row before it looks at its channels
/// (so that a ping-pong pair cannot keep a worker from queued work).
pub(crate) const MAX_STREAK: u32 = 16;

/// Whether submissions from the worker's thread may use the slot.
#[derive(Copy, Clone, Default, PartialEq, Eq)]
enum Access {
    #[default]
    Open,
    /// A task re-queues itself: not into the slot.
    Closed,
    /// The slot's task is moved to its channel: not into the slot, and not
    /// into the worker's local queue either, which the worker serves first,
    /// but behind the work queued from outside.
    Flushing,
}

/// A worker's slot. Owned by the worker's thread.
#[derive(Default)]
pub(crate) struct LifoSlot {
    task: Cell<Option<(usize, RunningTask)>>,
    /// Slot tasks run in a row.
    streak: Cell<u32>,
    access: Cell<Access>,
}

impl LifoSlot {
    /// Puts `task` (of channel `index`) in the slot if the rules allow it;
    /// gives it back otherwise.
    pub(crate) fn offer(&self, index: usize, task: RunningTask) -> Result<(), RunningTask> {
        if self.access.get() != Access::Open {
            return Err(task);
        }
        match self.task.take() {
            None => {
                self.task.set(Some((index, task)));
                Ok(())
            }
            full => {
                self.task.set(full);
                Err(task)
            }
        }
    }

    /// Takes the slot's task, with its channel index.
    pub(crate) fn take(&self) -> Option<(usize, RunningTask)> {
        self.task.take()
    }

    /// Whether the slot holds a task.
    pub(crate) fn is_full(&self) -> bool {
        let task = self.task.take();
        let full = task.is_some();
        self.task.set(task);
        full
    }

    /// Counts one more slot task run in a row; `false` once the streak is
    /// at its limit (the streak then restarts).
    pub(crate) fn extend_streak(&self) -> bool {
        let streak = self.streak.get();
        if streak >= MAX_STREAK {
            self.streak.set(0);
            return false;
        }
        self.streak.set(streak + 1);
        true
    }

    /// A task came from a channel: the streak ends.
    pub(crate) fn end_streak(&self) {
        self.streak.set(0);
    }

    /// Runs `f` (a task's re-queue) with the slot closed to submissions.
    pub(crate) fn closed_during<T>(&self, f: impl FnOnce() -> T) -> T {
        self.with_access(Access::Closed, f)
    }

    /// Runs `f` (the slot task's move to its channel) with the slot and the
    /// worker's local queues closed to submissions.
    pub(crate) fn flushing_during<T>(&self, f: impl FnOnce() -> T) -> T {
        self.with_access(Access::Flushing, f)
    }

    /// Whether submissions must skip the worker's local queues now.
    pub(crate) fn is_flushing(&self) -> bool {
        self.access.get() == Access::Flushing
    }

    fn with_access<T>(&self, access: Access, f: impl FnOnce() -> T) -> T {
        struct Restore<'a>(&'a Cell<Access>, Access);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.set(self.1);
            }
        }
        let _restore = Restore(&self.access, self.access.replace(access));
        f()
    }
}
