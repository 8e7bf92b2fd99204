//! [`ThreadConfig`]: how a pool's worker threads are named, how large
//! their stacks are, and what runs as each starts and stops.

use std::fmt;
use std::sync::Arc;

/// A function of a worker's index (0 to `threads - 1`).
type PerWorker<T> = Arc<dyn Fn(usize) -> T + Send + Sync>;

/// The smallest stack a worker thread may be given (see
/// [`ThreadConfig::stack_size`]).
pub const MIN_STACK_SIZE: usize = 256 << 10;

/// Stack a waiting worker always leaves to the tasks it runs on top of
/// its wait (see [`help_stack_budget`]).
const HELP_STACK_RESERVE: usize = 128 << 10;

/// The least stack of a blocking thread: std's default, for
/// `spawn_blocking` closures, whatever the workers' stack.
const MIN_BLOCKING_STACK: usize = 2 << 20;

/// Stack a worker (or stand-in) with a stack of `stack_size` bytes may
/// have used and still start helping in a wait: all but a quarter, and
/// never less than 128 KiB left (3 MiB of the default 4: twice std's
/// default, because a waiting worker runs other tasks on top of its own
/// frames). Each nested wait runs a task on top of the waiting one, and
/// siblings queued ahead of the awaited tasks nest as deep as the queue
/// is long; the rest is left to the tasks it runs. Past it, a wait only
/// waits.
pub(crate) fn help_stack_budget(stack_size: usize) -> usize {
    stack_size.saturating_sub((stack_size / 4).max(HELP_STACK_RESERVE))
}

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
    /// Threads named `smartpool-w{index}` (within the kernel's 15 bytes), stacks of 4 MiB (twice
    /// std's default: a worker waiting inside a task runs other tasks on
    /// top of it), no hooks.
    fn default() -> ThreadConfig {
        ThreadConfig {
            name: Arc::new(|index| format!("smartpool-w{index}")),
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
    /// profilers and panic messages show). Called once per worker as the
    /// pool starts; a panic, or a name with a NUL byte, is
    /// [`ConfigError::ThreadName`](crate::ConfigError::ThreadName).
    pub fn name(mut self, name: impl Fn(usize) -> String + Send + Sync + 'static) -> ThreadConfig {
        self.name = Arc::new(name);
        self
    }

    /// Gives each worker thread a stack of `bytes`, at least
    /// [`MIN_STACK_SIZE`] (a pool with less is refused with
    /// [`ConfigError::StackSize`](crate::ConfigError::StackSize)). The
    /// pool's blocking threads get the same, but at least 2 MiB (std's
    /// default, for `spawn_blocking` closures): a stand-in serves a
    /// worker's place. A worker that waits inside a task (a `scope`, a
    /// `block_on`) runs other tasks on top of it while it has used at
    /// most three quarters of its stack (and left 128 KiB); past that it
    /// only waits (a `scope` on a one-thread pool then waits for good:
    /// give recursive fork-join enough stack).
    pub fn stack_size(mut self, bytes: usize) -> ThreadConfig {
        self.stack_size = bytes;
        self
    }

    /// Calls `hook(index)` on each worker thread as it starts, before it
    /// runs any task. A panic in it is logged and the worker goes on.
    ///
    /// Worker threads only: the threads that drive the pool
    /// ([`Pool::block_on`](crate::Pool::block_on), a zero-thread pool's
    /// caller) and the pool's blocking threads (`spawn_blocking`, and the
    /// stand-ins that serve a worker's place during
    /// [`block_in_place`](crate::block_in_place), named
    /// `smartpool-block`) also run tasks, without these hooks. A pool
    /// whose start fails after some workers started runs their `on_start`
    /// and `on_stop` before [`OwnedPool::new`](crate::OwnedPool::new)
    /// returns the error (so a hook that waits for all workers to start
    /// would wait for good there).
    pub fn on_start(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> ThreadConfig {
        self.on_start = Some(Arc::new(hook));
        self
    }

    /// Calls `hook(index)` on each worker thread as it stops, once the pool
    /// has closed, after its last task; a pool's close resolves after
    /// every worker's `on_stop` (and waits for them: a deadline of
    /// [`OwnedPool::close_timeout`](crate::OwnedPool::close_timeout) does
    /// not cut them short). A panic in it is logged. Worker threads only,
    /// as [`ThreadConfig::on_start`].
    pub fn on_stop(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> ThreadConfig {
        self.on_stop = Some(Arc::new(hook));
        self
    }

    /// Checks the stack size (see [`ThreadConfig::stack_size`]), then
    /// gives the name of each of `threads` workers, checked (see
    /// [`ThreadConfig::name`]).
    pub(crate) fn check(&self, threads: usize) -> Result<Vec<String>, crate::ConfigError> {
        if self.stack_size < MIN_STACK_SIZE {
            return Err(crate::ConfigError::StackSize {
                bytes: self.stack_size,
            });
        }
        (0..threads)
            .map(|index| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.name)(index)))
                    .ok()
                    .filter(|name| !name.contains('\0'))
                    .ok_or(crate::ConfigError::ThreadName { index })
            })
            .collect()
    }

    /// The stack of the pool's blocking threads (see
    /// [`ThreadConfig::stack_size`]).
    pub(crate) fn blocking_stack_size(&self) -> usize {
        self.stack_size.max(MIN_BLOCKING_STACK)
    }

    /// Runs `hook` (an `on_start` or `on_stop`) for worker `index`,
    /// catching and logging its panic.
    pub(crate) fn call(hook: &Option<PerWorker<()>>, index: usize, what: &str) {
        let Some(hook) = hook else { return };
        crate::contain::catch(
            || hook(index),
            |message| {
                log::warn!("smartpool: worker {index}: the {what} hook panicked: {message}; the worker goes on")
            },
        );
    }
}

impl fmt::Debug for ThreadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadConfig")
            .field("stack_size", &self.stack_size)
            .field("on_start", &self.on_start.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .finish_non_exhaustive()
    }
}
