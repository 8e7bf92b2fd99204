//! `JoinSet`: a collection of tasks awaited in completion order, aborted
//! together (tokio's `task::JoinSet`).
//!
//! Each task's handle is polled with a waker of its own, which lists the
//! task's index as woken and wakes the set's poller. A poll looks only at
//! the tasks listed, so a set of n tasks costs no n polls a completion.
//! A new task is listed at once, for its first poll. A stale index (a task
//! already returned, its place reused) costs one poll that finds nothing.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::channel::Exec;
use crate::sync::{lock, Mutex, WakerSlot};
use crate::task::{AbortHandle, JoinError, JoinHandle};

/// Tasks submitted to a pool's channels, whose outputs come back in the
/// order the tasks finish. Dropping the set aborts the tasks still in it
/// (see [`JoinHandle::abort`]).
///
/// ```
/// # use smartpool::prelude::*;
/// # use smartpool::JoinSet;
/// # #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)] struct Only;
/// # struct B { work: VecDequeChannel }
/// # impl PoolBehavior for B {
/// #     type ChannelKey = Only;
/// #     fn config(&self) -> PoolConfig<Only> { PoolConfig { threads: 2,
/// #         schedule: ScheduleAlgorithm::HighestFirst,
/// #         levels: vec![vec![ChannelParams { key: Only, complete_on_close: true }]] } }
/// #     fn channel(&self, _: Only) -> &dyn Channel { &self.work }
/// #     fn followup(&self, from: Only, task: RunningTask) { self.channel(from).submit(task) }
/// # }
/// # let owned = OwnedPool::new(B { work: VecDequeChannel::new() }).unwrap();
/// let mut set = JoinSet::new();
/// for i in 0..10u64 {
///     set.exec(&owned.pool.work, run(move || i * i));
/// }
/// let mut sum = 0;
/// futures::executor::block_on(async {
///     while let Some(square) = set.join_next().await {
///         sum += square.unwrap();
///     }
/// });
/// assert_eq!(sum, 285);
/// ```
pub struct JoinSet<T> {
    /// The tasks by index, each with its index's waker, made once; `None`
    /// where one was returned (its index is in `free`).
    tasks: Vec<(Option<JoinHandle<T>>, Waker)>,
    free: Vec<usize>,
    ready: Arc<Ready>,
}

/// The indexes woken since the set last looked, and the set's poller. A
/// wake lists its index, then wakes the poller; a poll registers, then
/// takes the list: either it finds the index, or the wake finds it.
struct Ready {
    woken: Mutex<Vec<usize>>,
    poller: WakerSlot,
}

/// The waker of the task at `index`.
struct Woken {
    index: usize,
    ready: Arc<Ready>,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        lock(&self.ready.woken).push(self.index);
        self.ready.poller.wake();
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            tasks: Vec::new(),
            free: Vec::new(),
            ready: Arc::new(Ready {
                woken: Mutex::new(Vec::new()),
                poller: WakerSlot::new(),
            }),
        }
    }

    /// The number of tasks in the set: submitted and not yet returned by
    /// [`JoinSet::join_next`] (finished ones included).
    pub fn len(&self) -> usize {
        self.tasks.len() - self.free.len()
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Aborts every task in the set. They stay in it: [`JoinSet::join_next`]
    /// returns each one's outcome (a cancellation, or its output if it
    /// finished first).
    pub fn abort_all(&mut self) {
        for task in self.tasks.iter().filter_map(|(task, _)| task.as_ref()) {
            task.abort();
        }
    }

    /// Empties the set without aborting: the tasks run on, detached.
    pub fn detach_all(&mut self) {
        self.tasks.clear();
        self.free.clear();
        lock(&self.ready.woken).clear();
        self.ready.poller.clear();
    }

    /// Polls for the next task to finish: `Ready(None)` when the set is
    /// empty.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_next(Some(cx.waker()))
    }

    /// As [`JoinSet::poll_join_next`]; `poller`, if any, replaces the waker
    /// a task's end wakes (`try_join_next` keeps the one there).
    fn poll_next(&mut self, poller: Option<&Waker>) -> Poll<Option<Result<T, JoinError>>> {
        if self.is_empty() {
            return Poll::Ready(None);
        }
        if let Some(poller) = poller {
            self.ready.poller.register(poller);
        }
        let mut woken = std::mem::take(&mut *lock(&self.ready.woken)).into_iter();
        while let Some(index) = woken.next() {
            let Some((Some(task), waker)) = self.tasks.get_mut(index) else {
                continue;
            };
            if let Poll::Ready(outcome) = Pin::new(task).poll(&mut Context::from_waker(waker)) {
                self.tasks[index].0 = None;
                self.free.push(index);
                // The rest wait for the next call.
                lock(&self.ready.woken).extend(woken);
                return Poll::Ready(Some(outcome));
            }
        }
        Poll::Pending
    }

    /// Takes `handle` into the set, listed for its first poll; returns a
    /// handle that aborts its task.
    fn push(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        let index = self.free.pop().unwrap_or_else(|| {
            let index = self.tasks.len();
            let ready = self.ready.clone();
            let waker = Waker::from(Arc::new(Woken { index, ready }));
            self.tasks.push((None, waker));
            index
        });
        self.tasks[index].0 = Some(handle);
        lock(&self.ready.woken).push(index);
        abort
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Runs `future` on `channel` (any channel of a pool: a field of the
    /// behavior, or `pool.channel(key)`) as a task of the set, and returns
    /// a handle that aborts it. For a closure, wrap it: `run(|| ..)`. If
    /// the pool refuses the task (it is closing), the set still holds it,
    /// and [`JoinSet::join_next`] returns its cancellation.
    pub fn exec<C, F>(&mut self, channel: &C, future: F) -> AbortHandle
    where
        C: Exec + ?Sized,
        F: Future<Output = T> + Send + 'static,
    {
        self.push(channel.exec(future))
    }

    /// Waits for the next task of the set to finish and returns its
    /// outcome, in completion order; `None` once the set is empty.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// The outcome of a task that has finished, if any, without waiting.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        match self.poll_next(None) {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => None,
        }
    }

    /// Waits for every task and returns their outputs in completion order
    /// (tokio's `JoinSet::join_all`). If a task panicked or was cancelled,
    /// the others are aborted and this panics: with the task's own panic
    /// payload if it panicked.
    pub async fn join_all(mut self) -> Vec<T> {
        let mut outputs = Vec::with_capacity(self.len());
        while let Some(outcome) = self.join_next().await {
            match outcome {
                Ok(output) => outputs.push(output),
                Err(error) => {
                    self.abort_all();
                    match error.try_into_panic() {
                        Ok(payload) => std::panic::resume_unwind(payload),
                        Err(error) => panic!("JoinSet::join_all: {error}"),
                    }
                }
            }
        }
        outputs
    }

    /// Aborts every task and waits until all have finished (their futures
    /// dropped), discarding the outcomes.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> JoinSet<T> {
        JoinSet::new()
    }
}

impl<T> Drop for JoinSet<T> {
    /// Aborts the tasks left in the set.
    fn drop(&mut self) {
        self.abort_all();
        // The tasks' wakers outlive the set: they must not keep the
        // poller's waker alive.
        self.ready.poller.clear();
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}
