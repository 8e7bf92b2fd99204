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

use super::{exec::enqueue, Channel};
use crate::task::{AbortHandle, Control, JoinHandle, MoveError, RunningTask};

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
    claim: impl FnOnce(usize) -> Result<RunningTask, MoveError>,
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
    enqueue(channel, link, task, lifo, false, C::push);
    Ok(())
}
