//! [`ThreadConfig`]: how a pool's worker threads are named, how large
//! their stacks are, and what runs as each starts and stops.

use std::fmt;
use std::sync::Arc;

/// A function of a worker's index (0 to `threads - 1`).
type PerWorker<T> = Arc<dyn Fn(usize) -> T + Send + Sync>;

/// The smallest stack a worker thread may be given (see
/// [`ThreadConfig::stack_size`]).
pub const MIN_STACK_SIZE: usize = 64 << 10;

/// Settings of a pool's worker threads: see
/// [`PoolBehavior::thread_config`](crate::PoolBehavior::thread_config), or
/// the [`Builder`](crate::Builder)'s setters.
///
/// ```
/// use smartpool::ThreadConfig;
///
/// let config = ThreadConfig::new()
///     .name(|index| format!("game-worker-{index}"))
///     .stack_size(8 << 20)
///     .on_start(|index| eprintln!("worker {index} up"))
///     .on_stop(|index| eprintln!("worker {index} down"));
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct ThreadConfig {
    pub(crate) name: PerWorker<String>,
    pub(crate) stack_size: usize,
    pub(crate) on_start: Option<PerWorker<()>>,
    pub(crate) on_stop: Option<PerWorker<()>>,
}

impl Default for ThreadConfig {
    /// Threads named `smartpool-worker-{index}`, stacks of 4 MiB (twice
    /// std's default: a worker waiting inside a task runs other tasks on
    /// top of it), no hooks.
    fn default() -> ThreadConfig {
        ThreadConfig {
            name: Arc::new(|index| format!("smartpool-worker-{index}")),
            stack_size: 4 << 20,
            on_start: None,
            on_stop: None,
        }
    }
}

impl ThreadConfig {
    /// The defaults (see [`ThreadConfig::default`]).
    pub fn new() -> ThreadConfig {
        ThreadConfig::default()
    }

    /// Names worker `index`'s thread `name(index)` (what debuggers,
    /// profilers and panic messages show).
    pub fn name(mut self, name: impl Fn(usize) -> String + Send + Sync + 'static) -> ThreadConfig {
        self.name = Arc::new(name);
        self
    }

    /// Gives each worker thread a stack of `bytes`, at least
    /// [`MIN_STACK_SIZE`] (a pool with less is refused with
    /// [`ConfigError::StackSize`](crate::ConfigError::StackSize)). The
    /// pool's blocking threads get the same: a stand-in serves a worker's
    /// place. A worker that waits inside a task (a `scope`, a `block_on`)
    /// runs other tasks on top of it while at most three quarters of its
    /// stack is in use; past that it only waits.
    pub fn stack_size(mut self, bytes: usize) -> ThreadConfig {
        self.stack_size = bytes;
        self
    }

    /// Calls `hook(index)` on each worker thread as it starts, before it
    /// runs any task. A panic in it is logged and the worker goes on.
    pub fn on_start(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> ThreadConfig {
        self.on_start = Some(Arc::new(hook));
        self
    }

    /// Calls `hook(index)` on each worker thread as it stops, once the pool
    /// has closed, after its last task. A panic in it is logged.
    pub fn on_stop(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> ThreadConfig {
        self.on_stop = Some(Arc::new(hook));
        self
    }

    /// Runs `hook` (an `on_start` or `on_stop`) for worker `index`,
    /// catching and logging its panic.
    pub(crate) fn call(hook: &Option<PerWorker<()>>, index: usize, what: &str) {
        let Some(hook) = hook else { return };
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(index)));
        if let Err(panic) = called {
            log::warn!(
                "smartpool: worker {index}: the {what} hook panicked: {}; the worker goes on",
                crate::task::panic_message(&*panic)
            );
        }
    }
}

impl fmt::Debug for ThreadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadConfig")
            .field("name(0)", &(self.name)(0))
            .field("stack_size", &self.stack_size)
            .field("on_start", &self.on_start.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .finish()
    }
}
