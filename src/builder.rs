//! [`Builder`]: a pool of N levels of FIFO channels in one line, for the
//! common case. The [`PoolBehavior`] trait stays for custom channels,
//! several channels to a level, and a followup of your own; a [`Leveled`]
//! pool is one such behavior, written for you.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::behavior::{
    ChannelParams, ConfigError, LevelOptions, PoolBehavior, PoolConfig, ScheduleAlgorithm,
};
use crate::blocking::BlockingConfig;
use crate::channel::{Channel, VecDequeChannel};
use crate::core::blocked::DeadlockReport;
use crate::pool::OwnedPool;
use crate::thread_config::ThreadConfig;

/// Builds a pool of N levels, one FIFO channel ([`VecDequeChannel`]) each,
/// level 0 the highest:
///
/// ```
/// use smartpool::prelude::*;
///
/// let owned = smartpool::Builder::new().levels(3).threads(2).build()?;
/// let pool = &owned.pool;
/// let urgent = pool.level(0).exec(run(|| 2 + 2));
/// let batch = pool.level(2).exec(async { "done" });
/// assert_eq!(owned.block_on(urgent)?, 4);
/// assert_eq!(owned.block_on(batch)?, "done");
/// owned.close().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Defaults: one level; one worker thread per core (`std::thread::available_parallelism`);
/// [`ScheduleAlgorithm::HighestFirst`]; a woken future continues at its
/// own level; on close, every level but the lowest completes (its tasks
/// run to the end) and the lowest, the background, is dropped; a pool of
/// one level completes it (as rayon finishes what was spawned). Each
/// setter says what it changes; [`Builder::build`] validates the whole (a
/// level index past the levels is a [`ConfigError`], not a panic).
#[derive(Clone, Debug)]
pub struct Builder {
    levels: usize,
    threads: Option<usize>,
    schedule: ScheduleAlgorithm,
    /// Per level, if set: whether it completes on close.
    complete_on_close: Vec<(usize, bool)>,
    /// Per level, if set: its options.
    options: Vec<(usize, LevelOptions)>,
    /// The rest, handed to the [`Leveled`] as they are.
    settings: Settings,
}

/// What a [`Leveled`] answers as the [`Builder`] was told, beyond its
/// channels and levels.
#[derive(Clone)]
struct Settings {
    threads: ThreadConfig,
    blocking: BlockingConfig,
    stall_threshold: Option<Duration>,
    panic_handler: Option<PanicHandler>,
    deadlock_handler: Option<DeadlockHandler>,
}

/// What [`Builder::panic_handler`] keeps.
type PanicHandler = Arc<dyn Fn(Option<usize>, &(dyn Any + Send)) + Send + Sync>;

/// What [`Builder::deadlock_handler`] keeps.
type DeadlockHandler = Arc<dyn Fn(&DeadlockReport) + Send + Sync>;

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// One level, a thread per core, highest level first (see the type's
    /// doc for every default).
    pub fn new() -> Builder {
        Builder {
            levels: 1,
            threads: None,
            schedule: ScheduleAlgorithm::HighestFirst,
            complete_on_close: Vec::new(),
            options: Vec::new(),
            settings: Settings {
                threads: ThreadConfig::default(),
                blocking: BlockingConfig::default(),
                stall_threshold: Some(crate::DEFAULT_STALL_THRESHOLD),
                panic_handler: None,
                deadlock_handler: None,
            },
        }
    }

    /// `levels` levels, 0 the highest (zero is refused by
    /// [`Builder::build`]).
    pub fn levels(mut self, levels: usize) -> Builder {
        self.levels = levels;
        self
    }

    /// `threads` worker threads instead of one per core.
    ///
    /// Zero is not "automatic" (as rayon's `num_threads(0)` is): it makes
    /// a pool with no worker thread, whose tasks run only while a thread
    /// drives it ([`OwnedPool::block_on`], [`OwnedPool::run_until_stalled`],
    /// [`Close::wait`](crate::Close::wait); see [`PoolConfig::threads`]).
    pub fn threads(mut self, threads: usize) -> Builder {
        self.threads = Some(threads);
        self
    }

    /// How workers choose a level (see [`ScheduleAlgorithm`]).
    pub fn schedule(mut self, schedule: ScheduleAlgorithm) -> Builder {
        self.schedule = schedule;
        self
    }

    /// Whether close runs level `level`'s tasks to the end (`true`) or
    /// drops those not started (see [`ChannelParams::complete_on_close`]).
    pub fn complete_on_close(mut self, level: usize, complete: bool) -> Builder {
        self.complete_on_close.push((level, complete));
        self
    }

    /// Level `level`'s options: workers reserved for it, a bound on how
    /// long it waits (see [`LevelOptions`]).
    pub fn level_options(mut self, level: usize, options: LevelOptions) -> Builder {
        self.options.push((level, options));
        self
    }

    /// Names worker `index`'s thread `name(index)` (see
    /// [`ThreadConfig::name`]; default `smartpool-w{index}`).
    ///
    /// With the other thread settings:
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use smartpool::prelude::*;
    ///
    /// let (up, down) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    /// let (u, d) = (up.clone(), down.clone());
    /// let owned = smartpool::Builder::new()
    ///     .threads(2)
    ///     .thread_name(|index| format!("game-{index}"))
    ///     .stack_size(8 << 20)
    ///     .on_thread_start(move |_index| { u.fetch_add(1, Ordering::SeqCst); })
    ///     .on_thread_stop(move |_index| { d.fetch_add(1, Ordering::SeqCst); })
    ///     .build()?;
    /// let name = owned.pool.level(0).exec(run(|| {
    ///     std::thread::current().name().map(str::to_owned)
    /// }));
    /// let name = futures::executor::block_on(name)?.unwrap();
    /// assert!(name == "game-0" || name == "game-1");
    /// owned.close().wait();
    /// // Close resolves after every worker's stop hook.
    /// assert_eq!((up.load(Ordering::SeqCst), down.load(Ordering::SeqCst)), (2, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn thread_name(
        mut self,
        name: impl Fn(usize) -> String + Send + Sync + 'static,
    ) -> Builder {
        self.settings.threads = self.settings.threads.name(name);
        self
    }

    /// Worker threads get stacks of `bytes` (see
    /// [`ThreadConfig::stack_size`]; default 4 MiB).
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.settings.threads = self.settings.threads.stack_size(bytes);
        self
    }

    /// Calls `hook(index)` on each worker thread as it starts (see
    /// [`ThreadConfig::on_start`]).
    pub fn on_thread_start(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> Builder {
        self.settings.threads = self.settings.threads.on_start(hook);
        self
    }

    /// Calls `hook(index)` on each worker thread as it stops (see
    /// [`ThreadConfig::on_stop`]).
    pub fn on_thread_stop(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> Builder {
        self.settings.threads = self.settings.threads.on_stop(hook);
        self
    }

    /// How the pool's blocking threads are bounded (default:
    /// [`BlockingConfig::default`]; see [`PoolBehavior::blocking`]).
    pub fn blocking(mut self, config: BlockingConfig) -> Builder {
        self.settings.blocking = config;
        self
    }

    /// Reports a poll that runs longer than `threshold` while tasks wait at
    /// its level or above; `None` turns the report off (default:
    /// [`DEFAULT_STALL_THRESHOLD`](crate::DEFAULT_STALL_THRESHOLD); see
    /// [`PoolBehavior::stall_threshold`]).
    pub fn stall_threshold(mut self, threshold: Option<Duration>) -> Builder {
        self.settings.stall_threshold = threshold;
        self
    }

    /// Calls `handler(level, payload)` when a task panics while nobody
    /// holds its `JoinHandle` (rayon's `panic_handler`; see
    /// [`PoolBehavior::task_panicked`]). `level` is `None` for a blocking
    /// task. Every task panic is logged either way.
    ///
    /// ```
    /// use std::sync::{mpsc, Mutex};
    /// use smartpool::prelude::*;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let tx = Mutex::new(tx);
    /// let owned = smartpool::Builder::new()
    ///     .levels(2)
    ///     .panic_handler(move |level, payload| {
    ///         let message = payload.downcast_ref::<&str>().copied().unwrap_or("?");
    ///         let _ = tx.lock().unwrap().send((level, message.to_owned()));
    ///     })
    ///     .build()?;
    /// // Detached: the handle is dropped at once.
    /// drop(owned.pool.level(1).exec(run(|| panic!("out of coffee"))));
    /// assert_eq!(rx.recv()?, (Some(1), "out of coffee".to_owned()));
    /// owned.close().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn panic_handler(
        mut self,
        handler: impl Fn(Option<usize>, &(dyn Any + Send)) + Send + Sync + 'static,
    ) -> Builder {
        self.settings.panic_handler = Some(Arc::new(handler));
        self
    }

    /// Calls `handler(report)` when every worker thread is blocked while
    /// tasks wait to run (rayon's `deadlock_handler`; see
    /// [`PoolBehavior::deadlock`]). The report is logged as an error either
    /// way.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use smartpool::prelude::*;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let tx = std::sync::Mutex::new(tx);
    /// let owned = smartpool::Builder::new()
    ///     .threads(1)
    ///     // No stand-in for a worker inside `block_in_place`.
    ///     .blocking(smartpool::BlockingConfig { stand_ins: false, ..Default::default() })
    ///     .deadlock_handler(move |report| {
    ///         let _ = tx.lock().unwrap().send(report.queued_channels().to_vec());
    ///     })
    ///     .build()?;
    /// let pool = &owned.pool;
    /// // The only worker blocks without a stand-in until the queued task
    /// // has run: nothing can run it.
    /// let (go, wait) = mpsc::channel::<()>();
    /// pool.level(0).exec(run(move || {
    ///     smartpool::block_in_place(|| wait.recv().ok());
    /// }));
    /// pool.level(0).exec(run(|| ()));
    /// assert_eq!(rx.recv()?, vec!["0".to_string()]);
    /// drop(go);
    /// owned.close().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn deadlock_handler(
        mut self,
        handler: impl Fn(&DeadlockReport) + Send + Sync + 'static,
    ) -> Builder {
        self.settings.deadlock_handler = Some(Arc::new(handler));
        self
    }

    /// Starts the pool, or says what in the settings is wrong.
    // Inline, as a generic is: the pool's generic engine is compiled for
    // `Leveled` in the crate that builds one, not in smartpool's own
    // build for every user (a quarter of its machine code).
    #[inline]
    pub fn build(self) -> Result<OwnedPool<Leveled>, ConfigError> {
        let levels = self.levels;
        // Before anything is sized by the count: a level is a channel.
        crate::behavior::check_counts(levels, levels)?;
        // Every level completes but the lowest; a lone level too.
        let mut levels_params: Vec<Vec<ChannelParams<usize>>> = (0..levels)
            .map(|key| {
                let complete_on_close = key + 1 < levels || levels == 1;
                vec![ChannelParams {
                    key,
                    complete_on_close,
                }]
            })
            .collect();
        let mut options = vec![LevelOptions::default(); levels];
        // A setting of a level the pool lacks: the first such is the error.
        let lacks = |level| ConfigError::NoSuchLevel { level, levels };
        for (level, complete) in self.complete_on_close {
            levels_params.get_mut(level).ok_or(lacks(level))?[0].complete_on_close = complete;
        }
        for (level, set) in self.options {
            *options.get_mut(level).ok_or(lacks(level))? = set;
        }
        let config = PoolConfig {
            // One per core; 1 when the platform cannot tell.
            threads: self
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            schedule: self.schedule,
            levels: levels_params,
        };
        OwnedPool::new(Leveled {
            channels: (0..levels).map(|_| VecDequeChannel::new()).collect(),
            config,
            options,
            settings: self.settings,
        })
    }
}

/// The behavior of a pool made by [`Builder`]: one FIFO channel per
/// level, keyed by the level's index (0 the highest). A pool derefs to it:
/// `pool.level(1).exec(..)`.
///
/// ```
/// use smartpool::prelude::*;
///
/// let owned = smartpool::Builder::new().levels(2).threads(1).build()?;
/// let pool = &owned.pool;
/// assert_eq!(pool.levels(), 2);
/// // Children at the parent's level: `current_key` is the level index.
/// let child = pool.level(1).exec(async {
///     let pool = smartpool::Pool::<smartpool::Leveled>::current().unwrap();
///     let level = pool.current_key().unwrap();
///     pool.level(level).exec(run(move || level)).await
/// });
/// assert_eq!(owned.block_on(child)??, 1);
/// owned.close().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Leveled {
    channels: Box<[VecDequeChannel]>,
    config: PoolConfig<usize>,
    options: Vec<LevelOptions>,
    settings: Settings,
}

impl Leveled {
    /// Level `level`'s channel, to submit tasks to.
    ///
    /// # Panics
    ///
    /// If the pool has no such level (see [`Leveled::levels`]).
    pub fn level(&self, level: usize) -> &VecDequeChannel {
        self.channels.get(level).unwrap_or_else(|| {
            let levels = self.channels.len();
            panic!("smartpool: no level {level}: the pool has {levels} (0 is the highest)")
        })
    }

    /// How many levels the pool has.
    pub fn levels(&self) -> usize {
        self.channels.len()
    }
}

impl PoolBehavior for Leveled {
    type ChannelKey = usize;

    fn config(&self) -> PoolConfig<usize> {
        self.config.clone()
    }

    fn channel(&self, key: usize) -> &dyn Channel {
        self.level(key)
    }

    fn level_options(&self) -> Vec<LevelOptions> {
        self.options.clone()
    }

    fn thread_config(&self) -> ThreadConfig {
        self.settings.threads.clone()
    }

    fn blocking(&self) -> BlockingConfig {
        self.settings.blocking.clone()
    }

    fn stall_threshold(&self) -> Option<Duration> {
        self.settings.stall_threshold
    }

    fn task_panicked(&self, from: Option<usize>, panic: &(dyn Any + Send)) {
        if let Some(handler) = &self.settings.panic_handler {
            handler(from, panic);
        }
    }

    fn deadlock(&self, report: &DeadlockReport) {
        if let Some(handler) = &self.settings.deadlock_handler {
            handler(report);
        }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("thread_config", &self.threads)
            .field("blocking", &self.blocking)
            .field("stall_threshold", &self.stall_threshold)
            .field("panic_handler", &self.panic_handler.is_some())
            .field("deadlock_handler", &self.deadlock_handler.is_some())
            .finish()
    }
}
