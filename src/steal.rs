//! Work stealing: per-worker local queues, a shared injector, and stealing
//! between workers, for channels that want them.
//!
//! Every channel index has one local FIFO deque per worker, owned by that
//! worker's thread (crossbeam `Worker`), and a row of `Stealer`s in the pool
//! that any thread may use. A [`WorkQueue`] is a channel's shared injector
//! plus the rules for using these: a task submitted on a worker thread of the
//! same pool goes to that worker's local deque (no shared write, and it is
//! likely hot in that core's cache); from anywhere else, or while the worker
//! moves its LIFO slot's task out (see `lifo`), it goes to the injector. A
//! worker pops its own deque first, then takes a batch from the injector,
//! then steals a batch from the other workers, starting with its right-hand
//! neighbour so that thieves spread out.
//!
//! The injector is a `VecDeque` behind a mutex, with its length mirrored in
//! an atomic so that a look at an empty injector takes no lock. A queue in
//! steady use allocates nothing (a drained queue gives back a buffer grown
//! past [`KEEP_CAPACITY`], so that a burst does not pin its memory for
//! good): a queue that allocates blocks on the pushing thread makes glibc
//! consolidate the chunks the workers freed, on that thread (why it is not
//! crossbeam's `Injector`: the suite's W7 tail). A push holds the lock for one `push_back`; a batch for at most
//! [`MAX_BATCH`] moves.
//!
//! # Fairness
//!
//! A worker serves its own deque first, and a task that yields or is woken
//! on a worker goes back to that worker's deque: left at that, a yield loop
//! (or two futures waking each other) would keep the deque non-empty for
//! ever, and work submitted or woken from outside, which waits in the
//! injector, would never run. So a worker's fairness tick for the channel
//! (`core::context::FairTick`) counts the channel's tasks it runs, popped
//! or from its LIFO slot, and at each turn its next pop looks at the
//! injector before its deque. A turn comes every 2 to 61 runs, about every
//! 200 µs of the worker's time (tokio's adaptive global queue interval).
//! The bound: the task at the head of the injector is taken within 61 runs
//! of its channel's tasks by any one worker that keeps running them.
//!
//! A task re-queued by its own poll (a yield) goes behind the injector's
//! tasks: they move to the worker's empty deque ahead of it, or, if the
//! deque holds work, the worker's next pop takes the injector's head first
//! (see [`WorkQueue::push`]). So a yield lets the tasks queued at the
//! channel before it run first, as tokio's and async-executor's do.
//!
//! Invariant: every task in a deque or the injector was put there by a push
//! that marked the channel's status bit afterwards (see `status`). A batch
//! steal moves tasks into the thief's local deque, where they sit invisible
//! to others for a moment (crossbeam takes them from the source before they
//! appear in the destination), so a worker that looked then may clear the
//! bit: the thief therefore announces the move as a push (marks the bit, and
//! lets the sleep protocol wake a helper if no idle worker will find the
//! rest). (A batch from the injector moves under its lock, but the moved
//! tasks are still invisible to others until the thief's deque shows them,
//! so the same announcement covers it.) `pop` returns `None` only after
//! finding every source empty (crossbeam's transient `Retry` between
//! deques makes it go round again); a task in flight during that look is
//! covered by the announcement that follows its move. The injector's
//! mirrored length is written under its lock after every change; it can
//! read 0 while the queue holds a task only between a pusher's `push_back`
//! and its store, before that pusher's status fence. So a look at it after
//! a worker's fence sees every push whose pusher fenced first (fence to
//! fence, see `status`).

use std::collections::VecDeque;
use std::fmt;
// Plain std, as crossbeam's deques: no loom model runs a `WorkQueue`.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_deque::{Steal, Worker};

use crate::core::context::WorkerContext;
use crate::core::link::ChannelLink;
use crate::sync::lock_std;
use crate::task::RunningTask;

/// A work-stealing FIFO: the building block of
/// [`VecDequeChannel`](crate::VecDequeChannel), usable in channels of your
/// own.
#[derive(Default)]
// Its fields are the injector: tasks submitted from outside the pool, first
// in, first out (see the module doc for why a lock). On 128-byte lines of
// its own: its lock and length change with every push and batch taken, and
// must not share a line with what the channel around it keeps read-mostly,
// its link to the pool, which every submission reads (W1 slowed when a
// smaller link shifted it onto the injector's line).
#[repr(align(128))]
pub struct WorkQueue {
    queue: Mutex<VecDeque<RunningTask>>,
    /// The queue's length, written under the lock after every change.
    len: AtomicUsize,
}

/// The most tasks one batch takes from the injector (about crossbeam's,
/// which takes up to 33): half of what is queued, up to this many, so that
/// the other workers find the rest there rather than in one worker's deque.
const MAX_BATCH: usize = 32;

/// The capacity (in tasks) a drained injector keeps: 16 KiB of buffer.
/// Past it, draining the queue frees the buffer.
const KEEP_CAPACITY: usize = 1024;

impl WorkQueue {
    /// An empty queue.
    pub fn new() -> WorkQueue {
        WorkQueue::default()
    }

    /// Stores `task` in the injector.
    fn inject(&self, task: RunningTask) {
        let mut queue = lock_std(&self.queue);
        queue.push_back(task);
        self.len.store(queue.len(), Ordering::Relaxed);
    }

    /// Takes the injector's oldest task and, into `local`, up to half of
    /// the rest (at most [`MAX_BATCH`] in all).
    fn steal(&self, local: Option<&Worker<RunningTask>>) -> Option<RunningTask> {
        if self.is_empty() {
            return None;
        }
        let mut queue = lock_std(&self.queue);
        let first = queue.pop_front();
        if let Some(local) = local {
            let more = (queue.len() / 2).min(MAX_BATCH - 1);
            for task in queue.drain(..more) {
                local.push(task);
            }
        }
        self.len.store(queue.len(), Ordering::Relaxed);
        if queue.is_empty() && queue.capacity() > KEEP_CAPACITY {
            // A free, not an allocation: the next push starts small again.
            *queue = VecDeque::new();
        }
        first
    }

    /// Moves every task of the injector into `local`, oldest first.
    #[cold]
    fn drain_into(&self, local: &Worker<RunningTask>) {
        let mut queue = lock_std(&self.queue);
        for task in queue.drain(..) {
            local.push(task);
        }
        self.len.store(0, Ordering::Relaxed);
        if queue.capacity() > KEEP_CAPACITY {
            *queue = VecDeque::new();
        }
    }

    fn is_empty(&self) -> bool {
        self.len.load(Ordering::Relaxed) == 0
    }

    /// Stores `task`: on the calling worker's local deque if the caller is a
    /// worker of `link`'s pool, else on the shared injector.
    ///
    /// A task re-queued by the end of its own poll (a yield, or a wake
    /// during the poll) goes behind the work queued from outside too. If
    /// the worker's deque is empty, the injector's tasks move there first,
    /// ahead of it: every task queued at the channel runs before it (those
    /// in other workers' deques are theirs to run). Else the worker's next
    /// pop looks at the injector first: its head runs before the yielder,
    /// and no outside task waits behind the deque longer than the bound.
    /// Either way the injector empties, rather than cycling the yielders
    /// through its lock.
    #[inline]
    pub fn push(&self, task: RunningTask, link: &ChannelLink) {
        let pushed = if task.is_requeued() && !self.is_empty() {
            // Outside work goes ahead of the yielder, on the deque or first.
            crate::core::context::push_local(&link.shared, link.index, task, |mine| {
                if mine.deque.is_empty() {
                    self.drain_into(&mine.deque);
                } else {
                    mine.tick.owe();
                }
            })
        } else {
            link.push_local(task)
        };
        if let Err(task) = pushed {
            self.inject(task);
        }
    }

    /// Takes a task: local deque, then injector, then the other workers'
    /// deques; at its fairness tick's turn (see the module doc), the
    /// injector before the local deque. `None` only if it found
    /// every source empty.
    #[inline]
    pub fn pop(&self, link: &ChannelLink, worker: &WorkerContext<'_>) -> Option<RunningTask> {
        let channel = link.index;
        let local = worker.local().map(|l| &l.channels[channel].deque);
        // Counts the pop on the fairness tick: at its turn, the injector
        // first (see the module doc).
        if worker
            .local()
            .is_some_and(|l| l.channels[channel].tick.pop())
        {
            if let Some(task) = self.steal(local) {
                return Some(moved(task, local, link));
            }
        }
        if let Some(task) = local.and_then(Worker::pop) {
            return Some(task);
        }
        let stealers = &worker.shared().stealers;
        let workers = stealers.len();
        let me = worker.local().map_or(0, |l| l.index);
        loop {
            let mut retry = false;
            if let Some(task) = self.steal(local) {
                return Some(moved(task, local, link));
            }
            for k in 1..=workers {
                let victim = (me + k) % workers;
                if Some(victim) == worker.local().map(|l| l.index) {
                    continue;
                }
                let stealer = &stealers[victim][channel];
                let stolen = match local {
                    Some(local) => stealer.steal_batch_and_pop(local),
                    None => stealer.steal(),
                };
                match stolen {
                    Steal::Success(task) => {
                        worker.stole();
                        return Some(moved(task, local, link));
                    }
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            if !retry {
                return None;
            }
        }
    }

    /// Whether a task may be queued: in the injector or in any worker's
    /// local deque for `link`'s channel. Loads only; a push that completed
    /// before the call (and whose pusher fenced, as every push through the
    /// pool does) is seen; a task in flight between deques during a batch
    /// steal may not be, but its thief announces it afterwards (see the
    /// module doc).
    pub fn may_have_tasks(&self, link: &ChannelLink) -> bool {
        !self.is_empty()
            || link
                .shared
                .stealers
                .iter()
                .any(|row| !row[link.index].is_empty())
    }
}

/// After a batch steal into `local`: the rest of the batch was moved there,
/// so announce it as a push (see the module doc). Returns `task`, the one the
/// thief runs now.
fn moved(
    task: RunningTask,
    local: Option<&Worker<RunningTask>>,
    link: &ChannelLink,
) -> RunningTask {
    if local.is_some_and(|local| !local.is_empty()) {
        link.announce();
    }
    task
}

impl fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("injected", &self.len.load(Ordering::Relaxed))
            .finish()
    }
}
