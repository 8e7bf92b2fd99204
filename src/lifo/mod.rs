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
//! every cache line the tasks touch moves with them, several times slower
//! (the suite's W4 and W5 without the slot). tokio keeps such work on its core with a LIFO slot;
//! this is ours.
//!
//! # Rules
//!
//! * Each worker has one slot ([`slot::Slot`], in the pool's shared state,
//!   indexed by worker). Its worker fills it and takes from it; another
//!   worker may steal from it, but only a task that sat there for
//!   [`watch::STEAL_DELAY`] (Go's `runnext`, which thieves leave alone for a
//!   few microseconds, is the model). The worker-only state (the streak,
//!   whether submissions may use the slot) lives in the thread's
//!   `WorkerLocal`: no atomics.
//! * `exec` and `submit` into a channel that allows it
//!   ([`Channel::lifo_slot`](crate::Channel::lifo_slot)) and is in the
//!   pool's lowest level put the task in the slot if the caller is a worker
//!   thread of the task's pool, the slot is
//!   empty, the pool has not terminated, and the worker is neither
//!   re-queuing a task woken during its own poll (a yield, or a wake from
//!   elsewhere then: it goes through its channel, to the worker's local
//!   queue) nor moving the slot's task out. The task
//!   is accounted for close like any submission, but not pushed to its
//!   channel: no status bit. Its filler announces it to the sleep protocol
//!   as one job (`Sleep::slot_filled`), which wakes a sleeper only if no
//!   other worker is awake and idle.
//! * Why the lowest level only: a busy worker looks at the slots only when
//!   it goes idle. A higher-level task in a slot would be invisible to a
//!   worker busy with a backlog of lower-level tasks, which would serve
//!   them first; a lowest-level task has nothing below it to lose to.
//!   Under RoundRobin every level is owed its slice, which a slot task
//!   would escape in the same way, so there only a pool of one level uses
//!   the slot.
//! * The worker looks at its slot first in every search (`pool::worker`).
//!   A slot task counts towards its channel's fairness tick like a popped
//!   one (`core::context::FairTick`). At the tick's turn, the worker puts
//!   the task back in the slot and searches the channels, whose next pop
//!   looks at the injector first: work submitted or woken from outside
//!   waits at most one interval of the worker's runs, slot tasks included.
//!   Otherwise it runs the task if the schedule would serve the task's
//!   level now and either fewer than [`MAX_STREAK`] slot tasks ran in a
//!   row or no channel has queued work (asked of the channels,
//!   `Channel::may_have_tasks`: a status bit can outlive the last task);
//!   else it submits the task to its channel behind the work queued on
//!   this worker (as tokio does), where other workers can steal it, and
//!   searches the channels.
//! * An idle worker looks at the other workers' slots after the channels
//!   (`watch`). It steals a task that has sat in one slot for
//!   [`watch::STEAL_DELAY`] and submits it to its channel, where the
//!   schedule serves it like any queued task. It does not sleep while it
//!   sees a full slot: it searches again while the task is younger than the
//!   delay, and *watches* (a timed wait, counted as awake and idle) while
//!   the slots keep changing, which means their workers come back for them.
//! * At exit the worker drops what its slot holds, like its local deques.
//!
//! # Invariant: no task is stranded
//!
//! A slot task is taken by its worker (which may put it back at the
//! fairness turn: a fill like any other, announced the same way), moved
//! to its channel, stolen (and moved to its channel), or dropped at exit (which happens only once the
//! pool terminated, when close drops such tasks anyway: a task that counts
//! towards close keeps the pool from terminating). If its worker does not
//! come back for it (the task that filled it goes on computing, or blocks,
//! even waiting for this very task), some idle worker steals it, if any
//! worker is or becomes idle (a worker of the sleep protocol's common
//! domain: a worker reserved for higher levels neither fills a slot nor
//! watches one, and the counters below are the common domain's; see
//! `sleep`'s "Domains"):
//!
//! * The filler stores the task, runs the fill fence (a `SeqCst` fence,
//!   see `sleep`), then reads the sleep counters. If no worker but itself
//!   was awake and idle, it wakes a sleeper, which searches and sees the
//!   slot. (If that sleeper turned watcher meanwhile, the wake finds nobody
//!   asleep; the watcher counts as awake and idle, and the next point
//!   covers it.)
//! * If some other worker W was awake and idle in the value the filler
//!   read, W's later changes of the counters come later in their
//!   modification order. W cannot sleep without first counting itself
//!   asleep (such a change), then running the sleep fence before its final
//!   look. Nor can it leave idle as the last awake idle worker with
//!   sleepers left without counting itself active (such a change), then
//!   running `work_found`'s fence before it looks for work to hand on.
//!   Either fence comes after the fill fence in the SeqCst order (the
//!   filler's read of the counters would otherwise have seen W's change),
//!   so the look sees the task, or a later state of the slot: its worker
//!   took it, or a thief did. In its final check W then does not sleep;
//!   leaving idle, W wakes a sleeper, as it does for queued jobs; if other
//!   workers are still awake and idle, the same argument applies to the
//!   last of them. That last one may be the filler itself (an idle worker
//!   refills its own slot at the fairness turn, then finds a queued task):
//!   its look covers its own slot too.
//! * A watcher counts as awake and idle. Every watch ends with another
//!   final check (counted asleep, fence, look), so a watcher sees the task
//!   too, one watch period (plus the OS timer's slack) later at the
//!   latest.
//! * Seeing the task, a worker searches again or watches, but never
//!   sleeps; it steals the task once it has seen it in the same slot (same
//!   generation) for the delay. The generation changes on every fill, so a
//!   worker that comes back for its slot within the delay is not robbed
//!   (one that the OS preempts for longer may be).
//!
//! The argument trusts the awake idle count, as the sleep protocol does
//! for queued jobs: a worker counted idle that blocks inside a channel's
//! `pop` (for instance in a scope's wait, which then runs tasks from its
//! idle search) looks at the slots only between the tasks it runs there.
//!
//! A 1-thread pool has no thief: there a task that blocks waiting for one
//! it put in the slot waits forever, as it would for one in its local deque.
//!
//! # The cost
//!
//! A slot task that its worker does not come back for waits up to the
//! steal delay (up to about 120 µs, if the idle workers were watching: the
//! delay, a watch period and the OS timer's slack) before an idle worker
//! starts it; while every other worker is busy, it waits for one to go
//! idle. A task that must start at once on
//! any free worker belongs on a channel without the slot
//! ([`VecDequeChannel::without_lifo_slot`](crate::VecDequeChannel::without_lifo_slot)).

pub(crate) mod slot;
pub(crate) mod watch;

#[cfg(all(test, loom))]
mod loom_model;

use std::cell::Cell;

use crate::task::RunningTask;
use slot::Slot;

/// Slot tasks a worker may run in a row before it looks at its channels
/// (so that a ping-pong pair cannot keep a worker from queued work).
pub(crate) const MAX_STREAK: u32 = 16;

/// Whether submissions from the worker's thread may use the slot.
#[derive(Copy, Clone, Default, PartialEq, Eq)]
enum Access {
    #[default]
    Open,
    /// The slot's task is moved to its channel: not into the slot, and not
    /// into the worker's local queue either, which the worker serves first,
    /// but behind the work queued from outside.
    Flushing,
    /// The slot's task goes behind the channel's queued work: not into
    /// the slot, but into the worker's local queue, as any task it submits.
    Closed,
}

/// The task a worker's slot holds, with its channel's index.
pub(crate) type SlotTask = (usize, RunningTask);

/// A worker's own state about its slot. Owned by the worker's thread.
#[derive(Default)]
pub(crate) struct LifoSlot {
    /// Slot tasks run in a row.
    streak: Cell<u32>,
    access: Cell<Access>,
}

impl LifoSlot {
    /// Puts `task` (of channel `index`) in `slot`, the worker's, if the
    /// rules allow it; gives it back otherwise. The caller announces the
    /// fill (`Sleep::slot_filled`).
    pub(crate) fn offer(
        &self,
        slot: &Slot<SlotTask>,
        index: usize,
        task: RunningTask,
    ) -> Result<(), RunningTask> {
        if self.access.get() != Access::Open {
            return Err(task);
        }
        slot.fill((index, task)).map_err(|(_, task)| task)
    }

    /// Counts one more slot task run in a row; `false` once the streak is
    /// at its limit (the streak then restarts).
    pub(crate) fn extend_streak(&self) -> bool {
        let streak = self.streak.get();
        let extended = streak < MAX_STREAK;
        self.streak.set(if extended { streak + 1 } else { 0 });
        extended
    }

    /// A task came from a channel: the streak ends.
    pub(crate) fn end_streak(&self) {
        self.streak.set(0);
    }

    /// Runs `f` (the slot task's move to its channel) with the slot and the
    /// worker's local queues closed to submissions.
    pub(crate) fn flushing_during<T>(&self, f: impl FnOnce() -> T) -> T {
        let _restore = crate::sync::Restore::set(&self.access, Access::Flushing);
        f()
    }

    /// Runs `f` (the slot task's move behind its channel's work, at the
    /// fairness tick's turn or the end of a streak) with the slot closed
    /// to submissions.
    pub(crate) fn closed_during<T>(&self, f: impl FnOnce() -> T) -> T {
        let _restore = crate::sync::Restore::set(&self.access, Access::Closed);
        f()
    }

    /// Whether submissions must skip the worker's local queues now.
    pub(crate) fn is_flushing(&self) -> bool {
        self.access.get() == Access::Flushing
    }
}
