//! # smartpool
//!
//! A priority-aware, future-aware thread pool. One pool, several **levels**
//! of **channels**: workers always know where the work is (a status bit per
//! channel), serve the levels by a **schedule** you choose, steal work from
//! each other, and sleep (0% CPU) when there is none.
//!
//! ## The model
//!
//! * A **channel** holds tasks: [`VecDequeChannel`] (first in, first out),
//!   [`MultiChannel`] (sharded), or your own [`Channel`].
//! * A **level** groups channels of the same priority; levels are listed
//!   highest first. [`ScheduleAlgorithm::HighestFirst`] always serves the
//!   highest level that has work; [`ScheduleAlgorithm::RoundRobin`] gives
//!   each level a time slice.
//! * Your [`PoolBehavior`] owns the channels, names them with an enum, and
//!   says where a woken future goes next (**followup**). For the common
//!   case, N levels of one FIFO channel each, [`Builder`] writes it for
//!   you: `Builder::new().levels(3).build()?`, then
//!   `pool.level(0).exec(..)`. Worker threads' names, stack size and
//!   start/stop hooks are a [`ThreadConfig`] (or the builder's setters).
//! * Each channel is `complete_on_close` or not: [`OwnedPool::close`] runs
//!   the first kind's tasks to completion, parked ones included, and drops
//!   the rest.
//!
//! ```
//! use smartpool::prelude::*;
//!
//! #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
//! enum Ch { Frame, Assets }
//!
//! struct Game { frame: VecDequeChannel, assets: VecDequeChannel }
//!
//! impl PoolBehavior for Game {
//!     type ChannelKey = Ch;
//!     fn config(&self) -> PoolConfig<Ch> {
//!         PoolConfig {
//!             threads: 2,
//!             schedule: ScheduleAlgorithm::HighestFirst,
//!             levels: vec![
//!                 vec![ChannelParams { key: Ch::Frame, complete_on_close: true }],
//!                 vec![ChannelParams { key: Ch::Assets, complete_on_close: false }],
//!             ],
//!         }
//!     }
//!     fn channel(&self, key: Ch) -> &dyn Channel {
//!         match key { Ch::Frame => &self.frame, Ch::Assets => &self.assets }
//!     }
//!     // A woken asset-loading future continues at frame priority: finish
//!     // what was started before starting more.
//!     fn followup(&self, _from: Ch, task: RunningTask) {
//!         self.frame.submit(task);
//!     }
//! }
//!
//! let owned = OwnedPool::new(Game { frame: VecDequeChannel::new(), assets: VecDequeChannel::new() })?;
//! let pool = owned.pool.clone();
//!
//! // Closures run through `run`; futures run as they are.
//! let physics = pool.frame.exec(run(|| 2 + 2));
//! let asset = pool.assets.exec(async { "texture.png".len() });
//!
//! futures::executor::block_on(async {
//!     assert_eq!(physics.await.unwrap(), 4);
//!     assert_eq!(asset.await.unwrap(), 11);
//! });
//!
//! // Graceful shutdown: frame tasks finish, queued asset tasks are dropped.
//! futures::executor::block_on(owned.close());
//! assert!(pool.frame.exec(run(|| ())).is_finished(), "refused after close");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Failure modes
//!
//! * A bad config is an `Err(`[`ConfigError`]`)` from [`OwnedPool::new`].
//! * A panicking task is caught; its [`JoinHandle`] yields a [`JoinError`]
//!   carrying the panic, and the worker goes on.
//! * A task submitted after close is not run: [`Exec::try_exec`] gives it
//!   back, [`Exec::exec`]'s handle resolves to a cancellation.
//! * Every worker blocked while tasks wait: [`PoolBehavior::deadlock`] is
//!   called with a [`DeadlockReport`].
//!
//! ## Blocking, and pools driven by their caller
//!
//! [`Pool::spawn_blocking`] runs blocking closures on a bounded set of
//! blocking threads; [`block_in_place`] lets a task block in the middle of
//! its work while a stand-in thread serves its worker's place;
//! [`Pool::block_on`] waits for a future on the calling thread, running
//! the pool's tasks meanwhile (inside a task it helps instead of
//! blocking). A pool with `threads: 0` starts no thread: it runs only while
//! driven ([`Pool::block_on`], [`Pool::run_until_stalled`], its close).
//!
//! ## What the pool did
//!
//! `Pool::metrics` returns a snapshot per channel (tasks submitted,
//! started, completed, panicked, cancelled, queued; sampled queue waits),
//! per level (busy time) and per worker (activity, tasks, steals). It is
//! there with the `metrics` cargo feature, on by default; turned off
//! (`default-features = false`), every count compiles to nothing.
//!
//! ## Inside
//!
//! Each concurrent part is one module whose documentation states its protocol
//! and invariant: `status` (the bitfield), `sleep` (rayon's jobs event
//! counter protocol), `task` (responsibility transfer), `core::close` (the
//! close accounting), `context` and `core::context` (the crate's one thread-local,
//! and the worker context on it), `lifo` (the stealable slot), `scope::claim` (work-first
//! waits), `core::seats` (guest seats for driving threads and stand-ins),
//! `pool::blocking` (the hand-over of `block_in_place`), `blocking` (the
//! blocking threads), `core::blocked` (the deadlock check), `core::meters` (the counts).
//! Modules import downward only: `context`, `sync`, `status`,
//! `task`, `lifo`, `sleep`, then `core`, the queues (`steal`), `channel`,
//! `behavior` and `schedule`, `pool`, and the extras (`scope`, `time`).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    clippy::undocumented_unsafe_blocks
)]

mod behavior;
mod blocking;
mod builder;
pub mod channel;
pub use scope::par;
mod contain;
mod context;
mod core;
mod join_set;
mod lifo;
mod pool;
mod run;
mod schedule;
mod scope;
mod should_yield;
mod sleep;
mod status;
mod steal;
mod sync;
mod task;
mod thread_config;
mod time;
#[cfg(feature = "tokio")]
mod tokio_io;
mod wait_clock;
mod yield_now;

pub use crate::core::blocked::{DeadlockReport, WorkerState};
pub use behavior::{
    ChannelParams, ConfigError, LevelOptions, PoolBehavior, PoolConfig, ScheduleAlgorithm,
    DEFAULT_STALL_THRESHOLD, MAX_CHANNELS, MAX_THREADS,
};
pub use blocking::BlockingConfig;
pub use builder::{Builder, Leveled};
pub use channel::{
    Channel, Exec, ExecParam, MultiChannel, Rejected, ShortestDeadlineFirst, Submit,
    VecDequeChannel,
};
pub use join_set::JoinSet;
pub use pool::{block_in_place, Close, CloseReport, CloseTimeout, Closing, OwnedPool, Pool};
#[cfg(feature = "metrics")]
pub use pool::{Activity, ChannelMetrics, LevelMetrics, Metrics, QueueWait, WorkerMetrics};
pub use run::{run, try_run, Run};
pub use scope::{install, join, scope, Scope, ScopedJoinHandle};
pub use should_yield::{should_yield, yield_if_needed, YieldIfNeeded};
pub use task::{AbortHandle, CancelReason, JoinError, JoinHandle, MoveError, RunningTask};
pub use thread_config::{ThreadConfig, MIN_STACK_SIZE};
pub use time::{Periodic, Sleep, TimeScheduler};
#[cfg(feature = "tokio")]
pub use tokio_io::{tokio_io, TokioIo};
pub use yield_now::{yield_now, YieldNow};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Everything needed to declare a pool and submit work.
pub mod prelude {
    pub use crate::{
        run, try_run, CancelReason, Channel, ChannelParams, Exec, ExecParam, JoinError, JoinHandle,
        MultiChannel, OwnedPool, Pool, PoolBehavior, PoolConfig, RunningTask, ScheduleAlgorithm,
        ShortestDeadlineFirst, Submit, TimeScheduler, VecDequeChannel,
    };
}
