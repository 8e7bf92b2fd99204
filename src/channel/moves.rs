//! Moving a queued task to another channel of its pool: re-prioritising
//! work already submitted ([`JoinHandle::move_to`], [`AbortHandle::move_to`])
//! and priority inheritance (a task awaited by a higher level moves up).
//!
//! The task layer decides whether a task can move and which of its tokens
//! is live (`task`'s "Moves"); this module admits the move as `exec` admits
//! new work and queues the new token through the one path tasks enter a
//! channel by. In order, so that a refused move leaves the task where it
//! was: the channel must be attached to the task's pool, the pool must
//! admit a task on it (it is not closing), then the task's state is claimed
//! (it must be queued). The token left in the old queue is stale: a worker
//! that pops it drops it, and it never runs.

use std::fmt;

use super::exec::enqueue;
use super::Channel;
use crate::task::{AbortHandle, Control, JoinHandle, MoveRefused, RunningTask};

/// Why a move did nothing. The task stays where it was, as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MoveError {
    /// The task is being polled: it is in no queue.
    Running,
    /// The task waits for a wake-up: it is in no queue.
    Parked,
    /// The task finished, was cancelled, or its output was taken.
    Finished,
    /// An abort was asked: the task is dropped wherever it is.
    Aborted,
    /// The task was polled already (it is queued again after a wake-up, or
    /// about to be), or is a blocking task: only a task that has not
    /// started moves.
    Started,
    /// The task moved more times than its state word counts (2^59 on a
    /// 64-bit target).
    TooManyMoves,
    /// The channel is not attached to a pool.
    NotAttached,
    /// The channel belongs to another pool than the task.
    OtherPool,
    /// The pool is closing: it admits no task on the channel.
    Closed,
}

impl fmt::Display for MoveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MoveError::Running => "the task is running",
            MoveError::Parked => "the task is parked, waiting for a wake-up",
            MoveError::Finished => "the task has finished",
            MoveError::Aborted => "the task was aborted",
            MoveError::Started => "the task has started (only a task not yet started moves)",
            MoveError::TooManyMoves => "the task was moved too many times",
            MoveError::NotAttached => "the channel is not attached to a pool",
            MoveError::OtherPool => "the channel belongs to another pool",
            MoveError::Closed => "the pool is closing",
        })
    }
}

impl std::error::Error for MoveError {}

impl From<MoveRefused> for MoveError {
    fn from(refused: MoveRefused) -> MoveError {
        match refused {
            MoveRefused::Running => MoveError::Running,
            MoveRefused::Parked => MoveError::Parked,
            MoveRefused::Finished => MoveError::Finished,
            MoveRefused::Aborted => MoveError::Aborted,
            MoveRefused::Started => MoveError::Started,
            MoveRefused::TooManyMoves => MoveError::TooManyMoves,
        }
    }
}

impl<T> JoinHandle<T> {
    /// Moves the task to `channel`, a channel of the same pool, if it is
    /// queued and has not started (for example, an asset queued as
    /// background work that the user now waits for). It then runs once,
    /// from `channel`, in that channel's order, as if it had been submitted
    /// there (behind the tasks queued there, also when `channel` is the
    /// one it is in); the entry it leaves in its old queue is skipped when
    /// a worker reaches it. Its count towards close follows the new channel
    /// (`complete_on_close`). Once polled, a task goes where its behavior's
    /// `followup` sends it, and moves no more.
    ///
    /// Does nothing and says why otherwise: the task is running, started,
    /// parked or finished, was aborted or refused by the pool, is a
    /// blocking task, or the channel is not attached, is of another pool,
    /// or its pool is closing. A move racing the task's start loses or
    /// wins as a whole: the task runs once either way.
    ///
    /// No other executor moves queued work: tokio, rayon and
    /// async-executor fix a task's queue at spawn.
    pub fn move_to<C: Channel + ?Sized>(&self, channel: &C) -> Result<(), MoveError> {
        move_to(self.control(), channel)
    }
}

impl AbortHandle {
    /// Moves the task to `channel`: see [`JoinHandle::move_to`].
    pub fn move_to<C: Channel + ?Sized>(&self, channel: &C) -> Result<(), MoveError> {
        move_to(self.control(), channel)
    }
}

fn move_to<C: Channel + ?Sized>(
    task: Option<std::sync::Arc<dyn Control>>,
    channel: &C,
) -> Result<(), MoveError> {
    let task = task.ok_or(MoveError::Finished)?;
    let link = channel.link().ok_or(MoveError::NotAttached)?;
    if !task.belongs_to(&link.scheduler) {
        return Err(MoveError::OtherPool);
    }
    move_into(channel, |index| task.claim_move(index))
}

/// Admits a task on `channel` (of the task's pool: the caller checked),
/// claims it with `claim` (given the channel's index), and queues the
/// token. A refusal leaves the task as it was; an admitted count not taken
/// goes back.
pub(crate) fn move_into<C: Channel + ?Sized>(
    channel: &C,
    claim: impl FnOnce(usize) -> Result<RunningTask, MoveRefused>,
) -> Result<(), MoveError> {
    let link = channel.link().ok_or(MoveError::NotAttached)?;
    // Asked before the claim: a panic here leaves the task as it was.
    let lifo = channel.lifo_slot();
    let Ok(count) = link.shared.admit(link.index) else {
        return Err(MoveError::Closed);
    };
    let task = claim(link.index)?;
    if let Some(count) = count {
        count.hand_to(&task);
    }
    enqueue(channel, link, task, lifo, |task, link| {
        channel.push(task, link)
    });
    Ok(())
}
