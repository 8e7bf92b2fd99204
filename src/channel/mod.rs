//! Channels: where tasks wait to be run, and what a channel's author
//! needs to write one.
//!
//! A pool's user needs [`Channel`]'s built-ins and the [`Exec`] and
//! [`Submit`] methods, which the crate root re-exports. This module adds
//! the plumbing of a channel of your own, as rayon's `iter::plumbing` does
//! for parallel iterators: the [`ChannelLink`] to the pool, kept in a
//! [`LinkSlot`]; the [`WorkerContext`] a `pop` is asked on; and
//! [`WorkQueue`], a work-stealing FIFO to build on.
//!
//! A channel is any `Send + Sync` value implementing [`Channel`]: it stores
//! [`RunningTask`]s and gives them back when a worker asks. The pool calls
//! [`Channel::attach`] once, when the [`OwnedPool`](crate::OwnedPool) is
//! built, handing the channel its [`ChannelLink`]; from then on tasks go in
//! through [`Exec::exec`] (new work) and [`Submit::submit`] (a woken task,
//! from a behavior's followup), and out through [`Channel::pop`].
//!
//! `exec` and `submit` are blanket extension methods rather than trait
//! methods a channel could override, because they keep the pool's
//! invariants: after [`Channel::push`] they mark the channel's status bit and
//! wake a sleeping worker if needed (see `status` and `sleep`), and they do
//! the close accounting. A channel only has to store and hand out tasks, and
//! keep one promise: `pop` finds every task whose push has completed and that
//! nobody else took (see [`Channel::pop`]).
//!
//! The built-ins: [`VecDequeChannel`] (first in, first out, with per-worker
//! local queues and stealing), [`ShortestDeadlineFirst`] (earliest deadline
//! first, a deadline with each task through [`ExecParam`]) and
//! [`MultiChannel`] (several inner channels, submissions spread
//! round-robin).

mod deadline;
mod exec;
mod fifo;
mod moves;
mod multi;
mod spawn;

pub use crate::core::context::WorkerContext;
pub use crate::core::link::{AlreadyAttached, ChannelLink, LinkSlot};
pub use crate::steal::WorkQueue;
pub use deadline::ShortestDeadlineFirst;
pub use exec::{Exec, ExecParam, Rejected, Submit};
pub use fifo::VecDequeChannel;
pub(crate) use moves::move_into;
pub use multi::MultiChannel;
pub use spawn::Spawner;

use crate::core::Shared;
use crate::task::RunningTask;

/// Drops every task `channel` holds (which cancels them), looking from
/// outside any worker: what a closed pool does with what is left.
pub(crate) fn drain<C: Channel + ?Sized>(channel: &C, shared: &Shared) {
    let outside = WorkerContext::outside(shared);
    while channel.pop(&outside).is_some() {}
}

/// A source of tasks for the pool. Implement it to add a prioritisation
/// scheme of your own; use [`WorkQueue`] inside for a
/// work-stealing FIFO, or any structure behind a lock.
///
/// A task handed from `push` to a `pop` on another thread must be handed
/// over with release and acquire ordering, as every safe Rust structure
/// (a lock, a channel, an atomic pointer's publication) does: the next
/// poll of a task re-queued by its own poll relies on it. Only `unsafe`
/// code can get this wrong.
pub trait Channel: Send + Sync {
    /// Where the channel keeps its link to its pool: a [`LinkSlot`] field,
    /// made empty with the channel. The pool fills it once, when the
    /// [`OwnedPool`](crate::OwnedPool) is built.
    fn link_slot(&self) -> &LinkSlot;

    /// Connects the channel to a pool; called once by `OwnedPool::new`.
    /// A channel belongs to one pool only: attaching it again fails.
    /// Override it only to attach inner channels too, as
    /// [`MultiChannel`] does.
    fn attach(&self, link: ChannelLink) -> Result<(), AlreadyAttached> {
        self.link_slot().set(link)
    }

    /// The link given to [`Channel::attach`], or `None` before that.
    fn link(&self) -> Option<&ChannelLink> {
        self.link_slot().get()
    }

    /// Stores a task. Called by `exec` and `submit`, which notify the pool
    /// afterwards; do not call it directly.
    fn push(&self, task: RunningTask, link: &ChannelLink);

    /// Takes the next task to run, on behalf of `worker`.
    ///
    /// Must return `None` only if it found no task: every task whose `push`
    /// completed before this call, and that no other `pop` took, must be
    /// found (retry transient conflicts rather than give up). A channel that
    /// moves tasks between internal queues, where a concurrent `pop` could
    /// miss them in flight, must call [`ChannelLink::announce`] after each
    /// move, as after a push: the pool's status bit for the channel may have
    /// been cleared by a worker that looked during the move.
    fn pop(&self, worker: &WorkerContext<'_>) -> Option<RunningTask>;

    /// Whether a task submitted to this channel from one of its pool's
    /// worker threads may skip the channel and run next on that thread,
    /// in the worker's LIFO slot, as tokio runs a task spawned from inside
    /// its runtime. It keeps chains of tasks and message-passing pairs on
    /// one core, where a queue would let them bounce between cores. Only
    /// channels of the lowest level of a `HighestFirst` pool, or of a pool
    /// of one level, use it (a higher-level task there could wait behind a
    /// busy worker's lower-level tasks; under `RoundRobin`, escape its
    /// level's slice). The cost: if the submitting task goes on running
    /// (or blocks, even waiting for this task), an idle worker steals the
    /// task only after it sat in the slot for a steal delay of 20 µs, or up
    /// to about 120 µs if the idle workers were watching other slots (Go's
    /// `runnext` rule; tokio's slot is never stolen from); while no other
    /// worker is idle, it waits for the submitting task. The slot still respects the
    /// schedule: a worker runs it only when the schedule would serve this
    /// channel's level, and a stolen task goes to this channel.
    /// (A task that wakes itself during its poll, a yield, always goes
    /// through the channel.) Default: `false`, the channel sees every task;
    /// [`VecDequeChannel`] says `true` unless built
    /// [`without_lifo_slot`](VecDequeChannel::without_lifo_slot).
    fn lifo_slot(&self) -> bool {
        false
    }

    /// Whether the channel may still hold a task: it must say `true` if a
    /// task whose push completed before this call (as in
    /// [`Channel::pop`]'s promise) is still there; `true` when unsure is
    /// always correct. A worker that found a task asks this before it
    /// wakes another worker for the rest: its channel's status bit stays
    /// set after the last task is taken, so without it every task of a
    /// sparse load woke a second worker for nothing. Must not block for
    /// long (a short lock is fine). Default: `true`.
    fn may_have_tasks(&self) -> bool {
        true
    }
}
