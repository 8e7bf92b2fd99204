//! The shortest-deadline-first channel.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Instant;

use super::{Channel, ChannelLink, ExecParam, LinkSlot, Rejected, WorkerContext};
use crate::sync::lock_std;
use crate::task::{JoinHandle, RunningTask};

/// Serves the task with the earliest deadline first; tasks with equal
/// deadlines in submission order.
///
/// Submit with a deadline: `pool.deadline.exec(future, deadline)`. A task
/// that comes back through followup (a woken future), or is run with the
/// one-argument `Exec::exec`, gets the deadline "now": after every task that
/// was already due, before every later one.
///
/// One heap behind a mutex: every worker sees one order. For more
/// throughput at the cost of a global order, shard it with
/// [`MultiChannel`](crate::MultiChannel) (each shard keeps its own order).
#[derive(Debug, Default)]
pub struct ShortestDeadlineFirst {
    queue: Mutex<Queue>,
    link: LinkSlot,
}

#[derive(Debug, Default)]
struct Queue {
    heap: BinaryHeap<Entry>,
    /// Submission counter: breaks ties between equal deadlines.
    next: u64,
}

#[derive(Debug)]
struct Entry {
    deadline: Instant,
    seq: u64,
    task: RunningTask,
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> Ordering {
        // BinaryHeap is a max-heap: the earliest deadline, then the earliest
        // submission, must compare greatest.
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl ShortestDeadlineFirst {
    /// An empty channel, to be attached to a pool.
    pub fn new() -> ShortestDeadlineFirst {
        ShortestDeadlineFirst::default()
    }

    /// Runs `future` on the pool with the given deadline. See
    /// [`ExecParam::exec_param`], which this is.
    pub fn exec<F>(&self, future: F, deadline: Instant) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.exec_param(future, deadline)
    }

    /// Like [`ShortestDeadlineFirst::exec`], but gives the future back if
    /// the pool no longer accepts tasks.
    pub fn try_exec<F>(
        &self,
        future: F,
        deadline: Instant,
    ) -> Result<JoinHandle<F::Output>, Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_exec_param(future, deadline)
    }
}

impl Channel for ShortestDeadlineFirst {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }

    fn push(&self, task: RunningTask, link: &ChannelLink) {
        self.push_param(task, Instant::now(), link);
    }

    fn pop(&self, _worker: &WorkerContext<'_>) -> Option<RunningTask> {
        lock_std(&self.queue).heap.pop().map(|entry| entry.task)
    }

    fn may_have_tasks(&self) -> bool {
        !lock_std(&self.queue).heap.is_empty()
    }
}

impl ExecParam for ShortestDeadlineFirst {
    type Param = Instant;

    fn push_param(&self, task: RunningTask, deadline: Instant, _link: &ChannelLink) {
        let mut queue = lock_std(&self.queue);
        let seq = queue.next;
        queue.next += 1;
        queue.heap.push(Entry {
            deadline,
            seq,
            task,
        });
    }
}
