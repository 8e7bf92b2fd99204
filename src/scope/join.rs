//! `join`: rayon's fork-join of two closures, on a channel of a pool.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::channel::Channel;
use crate::run::run;

/// Runs `a` and `b`, potentially in parallel, and returns both results
/// (rayon's `join`). `a` runs on the calling thread; then, if no worker
/// has taken `b`, the caller runs it itself, else it waits for it.
///
/// * On a worker thread of `channel`'s pool, `b` is a job on the caller's
///   stack, published on the worker's deque for `channel`: an idle worker
///   looking at `channel` steals it and runs it at `channel`'s level.
///   Nothing is allocated. Recursive `join` (divide and conquer) completes
///   on any number of threads, 1 included, and nests no deeper than the
///   recursion.
/// * The wait is isolated: while a thief runs `b`, the caller runs only
///   work of a level above `channel`'s, and the jobs that `b` spawns or
///   `join`s in turn, never an unrelated job or task of `channel`'s level
///   or a lower one (which rayon's waiting thread may start, stalling the
///   caller behind it, rayon #957). A wait that found nothing to run for a
///   second in a row runs any work of the pool from then on: a stolen `b`
///   may be blocked on work that only the caller is free to run.
/// * Anywhere else (the main thread, another pool's worker), `b` is a task
///   of `channel`: the caller runs `a`, then blocks until a worker of
///   `channel`'s pool has run `b`.
/// * If `a` or `b` panics, the panic is resumed after both finished (`a`'s
///   if both did, as rayon does).
/// * If the pool refuses `b` (it is closing) or drops it unrun (a close of
///   a channel that is not `complete_on_close`), the caller runs `b`
///   itself after `a`: `join` always runs both.
///
/// ```
/// # use smartpool::prelude::*;
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
/// fn fib(pool: &Pool<B>, n: u64) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     let (a, b) = smartpool::join(&pool.work, || fib(pool, n - 1), || fib(pool, n - 2));
///     a + b
/// }
/// assert_eq!(fib(&owned.pool, 20), 6765);
/// ```
pub fn join<C, A, B, RA, RB>(channel: &C, a: A, b: B) -> (RA, RB)
where
    C: Channel + ?Sized,
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    if let Some(link) = channel.link() {
        if let Some(local) = crate::core::context::current_of(link.pool_id()) {
            return super::stack::join_on(&local, &link.shared, link.index(), a, b);
        }
    }
    join_queued(channel, a, b)
}

/// `join` from a thread that is not a seat of the channel's pool: `b` is
/// a task.
fn join_queued<C, A, B, RA, RB>(channel: &C, a: A, b: B) -> (RA, RB)
where
    C: Channel + ?Sized,
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // `b` waits here until a task takes it: if the pool refuses or drops
    // the task, `b` is still here for the caller.
    let b = Mutex::new(Some(b));
    let mut rb = None;
    let mut ra = None;
    // The scope unwinds only with `b`'s panic: `a`'s is caught inside, so
    // that `b` still runs below if the pool did not run it.
    let scoped = catch_unwind(AssertUnwindSafe(|| {
        super::scope(|s| {
            let task = run(|| {
                let b = b.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(b) = b {
                    rb = Some(b());
                }
            });
            // Refused: the task (and the borrow of `b`) comes back and drops.
            let _ = s.try_exec(channel, task);
            ra = Some(catch_unwind(AssertUnwindSafe(a)));
        })
    }));
    let b = b.into_inner().unwrap_or_else(|p| p.into_inner());
    let rb = match (rb, scoped) {
        (Some(rb), _) => Ok(rb),
        (None, Err(panic)) => Err(panic),
        (None, Ok(())) => {
            let b = b.expect("b either ran in its task or is still here");
            catch_unwind(AssertUnwindSafe(b))
        }
    };
    // `a`'s panic if both panicked, as rayon.
    let ra = ra.expect("the scope ran its body");
    let ra = ra.unwrap_or_else(|panic| resume_unwind(panic));
    (ra, rb.unwrap_or_else(|panic| resume_unwind(panic)))
}

/// Runs `f` on a worker of `channel`'s pool, at `channel`'s level, and
/// returns its result (rayon's `ThreadPool::install`). Inside `f`, `join`,
/// [`Scope::spawn`](crate::Scope::spawn) and [`par`](crate::par) loops on
/// that pool publish their jobs on the worker's own deque: a frame of
/// scoped closures opened from outside the pool runs as fast as one
/// opened inside it.
///
/// On a worker of the pool, `f` runs here. From any other thread, `f` is a
/// job on `channel`, and the caller waits, parked, until a worker ran it;
/// a panic in `f` is resumed here. If the pool is closing, has no worker
/// thread (a zero-thread pool), or `channel` belongs to no pool, `f` runs
/// on the caller.
///
/// ```
/// # use smartpool::prelude::*;
/// # let owned = smartpool::Builder::new().threads(2).levels(2).build().unwrap();
/// let level = owned.pool.level(0);
/// let mut cells = vec![0u32; 100];
/// smartpool::install(level, || {
///     smartpool::scope(|s| {
///         for (i, cell) in cells.iter_mut().enumerate() {
///             s.spawn(level, move || *cell = i as u32 * 2);
///         }
///     })
/// });
/// assert_eq!(cells[99], 198);
/// ```
pub fn install<C, F, R>(channel: &C, f: F) -> R
where
    C: Channel + ?Sized,
    F: FnOnce() -> R + Send,
    R: Send,
{
    let Some(link) = channel.link() else {
        return f();
    };
    if crate::core::context::current_of(link.pool_id()).is_some() {
        return f();
    }
    super::stack::install_from_outside(&link.shared, link.index(), f)
}
