//! The first-in, first-out channel.

use super::{Channel, ChannelLink, LinkSlot, WorkQueue, WorkerContext};
use crate::task::RunningTask;

/// A first-in, first-out channel with work stealing.
///
/// Tasks submitted from outside the pool wait in one shared queue, in
/// submission order. Tasks submitted from a worker thread (a task spawning
/// another, a woken future re-queued) go to that worker's local queue, which
/// it serves first and other workers steal from, as in tokio and rayon: order
/// is first-in, first-out per submitting thread. So that a worker's own
/// tasks (a yield loop, futures waking each other, chains through the LIFO
/// slot) cannot keep outside work waiting, a worker takes from the shared
/// queue first every 2 to 61 of the channel's tasks it runs (about every
/// 200 µs of its time, as tokio's adaptive interval): a task submitted or
/// woken from outside the pool waits at most 61 of its channel's tasks on
/// each worker, and a few when tasks are long. A task that yields goes
/// behind the shared queue's tasks: a yield lets every task queued before
/// it run first.
///
/// In the pool's lowest level (or its only one), a task submitted from a
/// worker thread whose LIFO slot is free runs next on that worker, ahead of
/// the local queue, unless the fairness turn comes first (then the shared
/// queue's head or the local queue's runs first), its worker does not come
/// back for it within the steal delay (then an idle worker steals it) or
/// the channel is built
/// [`without_lifo_slot`](VecDequeChannel::without_lifo_slot) (see
/// [`Channel::lifo_slot`]).
///
/// (The name is the original smartpool's, whose channel was a `VecDeque`
/// behind a mutex.)
#[derive(Debug, Default)]
pub struct VecDequeChannel {
    queue: WorkQueue,
    link: LinkSlot,
    /// Built [`without_lifo_slot`](VecDequeChannel::without_lifo_slot).
    without_lifo: bool,
}

impl VecDequeChannel {
    /// An empty channel, to be attached to a pool.
    pub fn new() -> VecDequeChannel {
        VecDequeChannel::default()
    }

    /// An empty channel whose tasks never use the LIFO slot (see
    /// [`Channel::lifo_slot`]): every task submitted from a worker thread is
    /// at once visible to the other workers. For tasks that must start on
    /// any free worker while the task that submitted them goes on running,
    /// without the slot's steal delay (20 to about 120 µs); chains of tasks
    /// and message passing then bounce between cores, several times slower
    /// (the suite's W4 and W5).
    pub fn without_lifo_slot() -> VecDequeChannel {
        VecDequeChannel {
            without_lifo: true,
            ..VecDequeChannel::new()
        }
    }
}

impl Channel for VecDequeChannel {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }

    fn push(&self, task: RunningTask, link: &ChannelLink) {
        self.queue.push(task, link);
    }

    fn pop(&self, worker: &WorkerContext<'_>) -> Option<RunningTask> {
        self.queue.pop(self.link.get()?, worker)
    }

    fn lifo_slot(&self) -> bool {
        !self.without_lifo
    }

    fn may_have_tasks(&self) -> bool {
        // Never attached: nothing was ever pushed.
        self.link
            .get()
            .is_some_and(|link| self.queue.may_have_tasks(link))
    }
}
