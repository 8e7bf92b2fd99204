//! The first-in, first-out channel.

use super::{AlreadyAttached, Channel, ChannelLink, LinkSlot};
use crate::steal::{WorkQueue, WorkerContext};
use crate::task::RunningTask;

/// A first-in, first-out channel with work stealing.
///
/// Tasks submitted from outside the pool wait in one shared queue, in
/// submission order. Tasks submitted from a worker thread (a task spawning
/// another, a woken future re-queued) go to that worker's local queue, which
/// it serves first and other workers steal from, as in tokio and rayon: order
/// is first-in, first-out per submitting thread.
///
/// (The name is the original smartpool's, whose channel was a `VecDeque`
/// behind a mutex.)
#[derive(Debug, Default)]
pub struct VecDequeChannel {
    queue: WorkQueue,
    link: LinkSlot,
}

impl VecDequeChannel {
    /// An empty channel, to be attached to a pool.
    pub fn new() -> VecDequeChannel {
        VecDequeChannel::default()
    }
}

impl Channel for VecDequeChannel {
    fn attach(&self, link: ChannelLink) -> Result<(), AlreadyAttached> {
        self.link.set(link)
    }

    fn link(&self) -> Option<&ChannelLink> {
        self.link.get()
    }

    fn push(&self, task: RunningTask, link: &ChannelLink) {
        self.queue.push(task, link);
    }

    fn pop(&self, worker: &WorkerContext<'_>) -> Option<RunningTask> {
        self.queue.pop(self.link.get()?, worker)
    }
}
