//! Cooperative preemption: `should_yield` and `yield_if_needed`.
//!
//! A pool picks a level only between tasks: an urgent task waits for the
//! running one to end. A long task that asks `should_yield()` now and then
//! (it costs a thread-local read and one or two loads) lets urgent work in
//! as soon as there is some, by stopping early (a closure resubmits the
//! rest) or yielding (a future: `yield_if_needed().await`).
//!
//! What it reads, all state the pool keeps anyway: the status bits of the
//! channels the running task's level gives way to (under HighestFirst, the
//! levels above it; under RoundRobin, every other level), and then, under
//! HighestFirst, whether any worker that serves every level is awake and
//! searching (the sleep counters: if one is, it takes the urgent task at
//! once, and the running task need not yield; one asleep or watching would
//! take a wake-up first, so the task yields; a worker reserved for some
//! levels is not counted, see `Sleep::none_searching`); under RoundRobin,
//! whether the worker's slice is over (a clock
//! read, only when another level has work). A status bit may be stale (set
//! after the last task was taken, until a search clears it): then a task
//! yields once for nothing, which costs a trip through its channel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Whether the task running on the calling thread should give its worker
/// up now: a task of a level above its own (under
/// [`ScheduleAlgorithm::HighestFirst`](crate::ScheduleAlgorithm)) waits and
/// no worker is searching to take it at once (one asleep would need a
/// wake-up first), or (under `RoundRobin`) its level's time
/// slice is over and another level has work. `false` off a pool's worker,
/// and outside a task.
///
/// For a long computation split into steps: check it between steps, and
/// when it says so, stop and resubmit the rest (a closure) or
/// [`yield_if_needed`] (a future).
///
/// ```
/// # use smartpool::prelude::*;
/// # #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)] enum Lv { Urgent, Batch }
/// # struct B { urgent: VecDequeChannel, batch: VecDequeChannel }
/// # impl PoolBehavior for B {
/// #     type ChannelKey = Lv;
/// #     fn config(&self) -> PoolConfig<Lv> { PoolConfig { threads: 1,
/// #         schedule: ScheduleAlgorithm::HighestFirst,
/// #         levels: vec![vec![ChannelParams { key: Lv::Urgent, complete_on_close: true }],
/// #                      vec![ChannelParams { key: Lv::Batch, complete_on_close: true }]] } }
/// #     fn channel(&self, k: Lv) -> &dyn Channel { match k { Lv::Urgent => &self.urgent, Lv::Batch => &self.batch } }
/// # }
/// # let owned = OwnedPool::new(B { urgent: VecDequeChannel::new(), batch: VecDequeChannel::new() }).unwrap();
/// use std::sync::Arc;
///
/// /// Sums `from..to`, giving way to urgent work: the rest goes back to
/// /// the batch level as a new task.
/// fn sum(pool: Arc<Pool<B>>, from: u64, to: u64, acc: u64) -> JoinHandle<u64> {
///     let p = pool.clone();
///     pool.batch.exec(async move {
///         let mut acc = acc;
///         for i in from..to {
///             acc += i;
///             if i % 1024 == 0 && smartpool::should_yield() {
///                 return sum(p, i + 1, to, acc).await.unwrap();
///             }
///         }
///         acc
///     })
/// }
/// let total = sum(owned.pool.clone(), 0, 1 << 20, 0);
/// assert_eq!(owned.pool.block_on(total).unwrap(), (1u64 << 20) * ((1 << 20) - 1) / 2);
/// ```
pub fn should_yield() -> bool {
    crate::task::with_polling_task(|scheduler, from| {
        from.is_some_and(|from| {
            crate::core::context::should_yield(scheduler.as_ptr().cast::<()>(), from)
        })
    })
    .unwrap_or_else(crate::core::context::job_should_yield)
}

/// Yields once if [`should_yield`] says so, else completes at once
/// (glommio's `yield_if_needed`): put it in a long future's loop.
pub fn yield_if_needed() -> YieldIfNeeded {
    YieldIfNeeded(crate::yield_now())
}

/// The future of [`yield_if_needed`].
#[must_use = "yield_if_needed does nothing unless awaited"]
#[derive(Debug)]
pub struct YieldIfNeeded(crate::YieldNow);

impl Future for YieldIfNeeded {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The yield, once it is needed.
        if !self.0.yielded && !should_yield() {
            return Poll::Ready(());
        }
        Pin::new(&mut self.0).poll(cx)
    }
}
