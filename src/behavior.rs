//! The user's declaration of a pool: its channels, their levels, how levels
//! are scheduled, and where woken futures go.

use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::blocking::BlockingConfig;
use crate::channel::{Channel, Submit};
use crate::core::blocked::DeadlockReport;
use crate::task::RunningTask;
use crate::thread_config::{ThreadConfig, MIN_STACK_SIZE};

/// What a pool is: implement it on a struct that owns your channels.
///
/// ```
/// use smartpool::prelude::*;
///
/// #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
/// enum Ch { Urgent, Background }
///
/// struct App { urgent: VecDequeChannel, background: VecDequeChannel }
///
/// impl PoolBehavior for App {
///     type ChannelKey = Ch;
///     fn config(&self) -> PoolConfig<Ch> {
///         PoolConfig {
///             threads: 2,
///             schedule: ScheduleAlgorithm::HighestFirst,
///             levels: vec![
///                 vec![ChannelParams { key: Ch::Urgent, complete_on_close: true }],
///                 vec![ChannelParams { key: Ch::Background, complete_on_close: false }],
///             ],
///         }
///     }
///     fn channel(&self, key: Ch) -> &dyn Channel {
///         match key { Ch::Urgent => &self.urgent, Ch::Background => &self.background }
///     }
/// }
///
/// let owned = OwnedPool::new(App { urgent: VecDequeChannel::new(), background: VecDequeChannel::new() })?;
/// let answer = owned.pool.urgent.exec(run(|| 6 * 7));
/// assert_eq!(futures::executor::block_on(answer)?, 42);
/// futures::executor::block_on(owned.close());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait PoolBehavior: Send + Sync + Sized + 'static {
    /// Names a channel: usually a fieldless enum.
    type ChannelKey: Copy + Eq + Hash + fmt::Debug + Send + Sync + 'static;

    /// The pool's shape. Asked once, by [`OwnedPool::new`](crate::OwnedPool::new),
    /// which validates it.
    fn config(&self) -> PoolConfig<Self::ChannelKey>;

    /// The channel a key names. Each key of the config must name a distinct
    /// channel.
    fn channel(&self, key: Self::ChannelKey) -> &dyn Channel;

    /// Where a future taken from channel `from` goes once it is woken after
    /// returning `Pending`: submit `task` to a channel. The default sends it
    /// back to `from`. Sending it to a higher level makes the pool finish
    /// what it started before starting more. Dropping `task` cancels it.
    fn followup(&self, from: Self::ChannelKey, task: RunningTask) {
        self.channel(from).submit(task);
    }

    /// How the pool's blocking threads are bounded: those that run
    /// [`Pool::spawn_blocking`](crate::Pool::spawn_blocking) closures, and
    /// the stand-ins of workers inside
    /// [`block_in_place`](crate::block_in_place). Asked once, when the pool
    /// starts. Default: [`BlockingConfig::default`].
    fn blocking(&self) -> BlockingConfig {
        BlockingConfig::default()
    }

    /// How long one poll may run while tasks wait at its level or above
    /// before the pool reports it: a `warn` log naming the channel, and a
    /// count in the channel's metrics (`ChannelMetrics::stalls`). `None`
    /// turns the report off. Asked once, when the pool starts; a value
    /// under a millisecond is taken as one. Needs the `metrics` feature.
    /// Default: [`DEFAULT_STALL_THRESHOLD`].
    fn stall_threshold(&self) -> Option<Duration> {
        Some(DEFAULT_STALL_THRESHOLD)
    }

    /// Called when every worker thread of the pool is blocked (in
    /// [`block_in_place`](crate::block_in_place) with no stand-in, or in a
    /// wait that cannot help) while tasks wait to run: nothing will run
    /// them until one unblocks (rayon's deadlock handler). Called once per
    /// such episode, on the thread that saw it (a worker about to block,
    /// or a thread that submitted a task), after the pool logged the
    /// report as an error; a panic in it is caught and logged. Default:
    /// nothing more.
    fn deadlock(&self, report: &DeadlockReport) {
        let _ = report;
    }

    /// Options of each level beyond the config, highest level first (a
    /// shorter list leaves the other levels at [`LevelOptions::default`]):
    /// workers reserved for a level, a bound on how long a level's tasks
    /// wait. Asked once, when the pool starts, and validated with the
    /// config. Default: none.
    fn level_options(&self) -> Vec<LevelOptions> {
        Vec::new()
    }

    /// A task panicked while nobody held its [`JoinHandle`](crate::JoinHandle)
    /// (it was detached: dropped, or never kept), so the panic would go
    /// unseen (rayon's `panic_handler`). `from` is the channel it was
    /// polled from (`None` for a blocking task); `panic` the payload (a
    /// `&str` or a `String` for a `panic!` with a message). Called on the
    /// thread that polled it; the worker goes on. Every task panic is also
    /// logged (a warning, with the channel's key). A panic here is caught
    /// and logged. Default: nothing more.
    ///
    /// ```
    /// use std::any::Any;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use smartpool::prelude::*;
    /// use smartpool::ThreadConfig;
    ///
    /// struct Game { frame: VecDequeChannel, panics: AtomicUsize }
    ///
    /// impl PoolBehavior for Game {
    ///     type ChannelKey = ();
    ///     fn config(&self) -> PoolConfig<()> {
    ///         PoolConfig {
    ///             threads: 1,
    ///             schedule: ScheduleAlgorithm::HighestFirst,
    ///             levels: vec![vec![ChannelParams { key: (), complete_on_close: true }]],
    ///         }
    ///     }
    ///     fn channel(&self, _: ()) -> &dyn Channel {
    ///         &self.frame
    ///     }
    ///     fn thread_config(&self) -> ThreadConfig {
    ///         ThreadConfig::new().name(|index| format!("frame-{index}"))
    ///     }
    ///     fn task_panicked(&self, from: Option<()>, _panic: &(dyn Any + Send)) {
    ///         assert_eq!(from, Some(()));
    ///         self.panics.fetch_add(1, Ordering::SeqCst);
    ///     }
    /// }
    ///
    /// let owned = OwnedPool::new(Game { frame: VecDequeChannel::new(), panics: AtomicUsize::new(0) })?;
    /// let pool = owned.pool.clone();
    /// drop(pool.frame.exec(run(|| panic!("detached"))));
    /// let name = pool.frame.exec(run(|| std::thread::current().name().map(str::to_owned)));
    /// assert_eq!(futures::executor::block_on(name)?.as_deref(), Some("frame-0"));
    /// // One thread, first in, first out: the panic came first.
    /// assert_eq!(pool.panics.load(Ordering::SeqCst), 1);
    /// owned.close().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn task_panicked(&self, from: Option<Self::ChannelKey>, panic: &(dyn Any + Send)) {
        let _ = (from, panic);
    }

    /// How the pool's worker threads are named, their stack size, and
    /// hooks run as each starts and stops. Asked once, when the pool
    /// starts. Default: [`ThreadConfig::default`]. (Example: under
    /// [`task_panicked`](PoolBehavior::task_panicked).)
    fn thread_config(&self) -> ThreadConfig {
        ThreadConfig::default()
    }
}

/// Options of one level (see [`PoolBehavior::level_options`]). Build it
/// with [`LevelOptions::new`] and its setters.
///
/// ```
/// use smartpool::LevelOptions;
/// // Level 0 keeps one worker for itself; level 1 has no option.
/// let options = vec![LevelOptions::new().reserve(1)];
/// # assert_eq!(options[0].reserved_workers, 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelOptions {
    /// Worker threads that serve only this level and the levels above it
    /// (Perséphone's reserved cores): work of these levels finds an idle
    /// worker at once although lower levels keep the others busy. They
    /// come out of [`PoolConfig::threads`]; the reservations of all levels
    /// but the lowest must leave at least one worker thread that serves
    /// every level. A reservation of the lowest level changes nothing (its
    /// workers would serve every level anyway). A reserved worker inside
    /// [`block_in_place`](crate::block_in_place) hands its place to a
    /// stand-in that serves every level: the reservation lapses while it
    /// blocks. A reserved worker that waits inside a task (a `scope`, a
    /// `block_on`) runs that wait's own scoped tasks, whatever their level,
    /// as any waiting worker does. Under `RoundRobin`, its tasks yield
    /// ([`should_yield`](crate::should_yield)) at the end of its slice when
    /// any other level has work, also one it does not serve. Default 0.
    pub reserved_workers: usize,
    /// Under [`ScheduleAlgorithm::HighestFirst`]: the longest this level's
    /// work waits while the levels above it keep the workers busy. Once it
    /// has waited this long (counted from the push, or from when higher
    /// work began to pass it over), the next worker to search that serves
    /// the level takes a task from it before any higher level's; then the
    /// level's next task waits its own bound. So the level is served at
    /// least once per bound: its first waiting task starts within the bound
    /// plus the rest of the task each worker is running (tokio#4051). Not
    /// a per-task deadline: `n` tasks queued in the level start within
    /// about `n` bounds. A task started this way still sees
    /// [`should_yield`](crate::should_yield) say `true` while the higher
    /// levels wait, and a cooperative task that yields then waits another
    /// bound: check `should_yield` only after a first stretch of work.
    /// Costs a clock read in a search that sees the level waiting, and in
    /// a push to it while a higher level has work; nothing while no higher
    /// level has work. Default `None` (strict priority). Zero, or any bound
    /// under `RoundRobin` (whose slices already serve every level), is
    /// refused.
    pub max_wait: Option<Duration>,
}

impl LevelOptions {
    /// No option: what a level without an entry gets.
    pub fn new() -> LevelOptions {
        LevelOptions::default()
    }

    /// Reserves `workers` worker threads for this level and the levels
    /// above it (see [`LevelOptions::reserved_workers`]).
    pub fn reserve(mut self, workers: usize) -> LevelOptions {
        self.reserved_workers = workers;
        self
    }

    /// Bounds how long the level waits behind the levels above it (see
    /// [`LevelOptions::max_wait`]).
    pub fn max_wait(mut self, wait: Duration) -> LevelOptions {
        self.max_wait = Some(wait);
        self
    }
}

/// The most worker threads a pool takes. Memory and start-up work grow
/// linearly with
/// threads (but for one look at every other worker's LIFO slot before each
/// worker first sleeps). The bound is the kernel's: Linux's default
/// `vm.max_map_count` (65,530) allows about 16,000 threads to a process,
/// each Rust thread taking four mappings (stack, guard page, signal stack
/// and its guard), and past it std aborts the process from inside the new
/// thread, where no error can be returned. 4,096 leaves the rest of the
/// program room.
pub const MAX_THREADS: usize = 4_096;

/// The default of [`PoolBehavior::stall_threshold`]: a poll of 100 ms
/// while work waits behind it is reported.
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(100);

/// The most channels a pool can have, its levels' channels together: a task
/// records the channel it is in within one word beside its flags (2^24,
/// about 16.7 million; see [`ConfigError::TooManyChannels`]).
pub const MAX_CHANNELS: usize = 1 << crate::task::CHANNEL_BITS;

// Each worker thread has a seat and a guest seat, and one guest seat more
// is for a driving thread (see `core::seats`).
const _: () = assert!(MAX_THREADS * 2 < crate::sleep::MAX_WORKERS);

/// The shape of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig<K> {
    /// Worker threads, at most [`MAX_THREADS`]. With 0, the pool starts no
    /// thread: its tasks run only while a thread drives it
    /// ([`Pool::block_on`](crate::Pool::block_on),
    /// [`Pool::run_until_stalled`](crate::Pool::run_until_stalled), or
    /// polling [`OwnedPool::close`](crate::OwnedPool::close)'s future).
    pub threads: usize,
    /// How workers choose a level.
    pub schedule: ScheduleAlgorithm,
    /// Groups of channels, highest priority first. Each level holds at least
    /// one channel, and each key appears once.
    pub levels: Vec<Vec<ChannelParams<K>>>,
}

/// One channel's place in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelParams<K> {
    /// The channel.
    pub key: K,
    /// Whether [`OwnedPool::close`](crate::OwnedPool::close) runs this
    /// channel's tasks to completion (queued, running and parked ones), or
    /// drops the queued and parked ones.
    pub complete_on_close: bool,
}

/// How a worker chooses the level to take its next task from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleAlgorithm {
    /// Always the highest level that holds a task at the moment of choice.
    HighestFirst,
    /// Each worker serves the levels in turn, for the given time slice each
    /// (one per level, in level order), skipping empty levels: every level
    /// gets its share even under a flood of higher-level work.
    RoundRobin(Vec<Duration>),
}

/// Why a config was refused, or the pool could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// `levels` is empty.
    NoLevels,
    /// Level `level` (0 is the highest) holds no channel.
    EmptyLevel {
        /// The level's index.
        level: usize,
    },
    /// A key appears more than once.
    DuplicateKey {
        /// The key, formatted with `Debug`.
        key: String,
    },
    /// `threads` is 0. Not returned any more: a pool of zero threads is
    /// valid, driven by its caller (see [`PoolConfig::threads`]); kept so
    /// that code matching on it still compiles.
    NoThreads,
    /// `threads` exceeds [`MAX_THREADS`].
    TooManyThreads {
        /// The configured count.
        threads: usize,
    },
    /// The levels hold more than [`MAX_CHANNELS`] channels together.
    TooManyChannels {
        /// The configured count.
        channels: usize,
    },
    /// `RoundRobin` gave a number of time slices other than one per level.
    SliceCount {
        /// Levels configured.
        levels: usize,
        /// Slices given.
        slices: usize,
    },
    /// A `RoundRobin` time slice is zero.
    ZeroSlice {
        /// The level whose slice is zero.
        level: usize,
    },
    /// A channel is already attached to another pool, or two keys name the
    /// same channel.
    ChannelAttached {
        /// The key, formatted with `Debug`.
        key: String,
    },
    /// The operating system refused to start a worker thread.
    Spawn(std::io::Error),
    /// [`PoolBehavior::level_options`] gave more entries than there are
    /// levels.
    LevelOptionCount {
        /// Levels configured.
        levels: usize,
        /// Entries given.
        options: usize,
    },
    /// A level's [`LevelOptions::max_wait`] is zero.
    ZeroMaxWait {
        /// The level.
        level: usize,
    },
    /// A level has a [`LevelOptions::max_wait`] under `RoundRobin`.
    MaxWaitNeedsHighestFirst {
        /// The level.
        level: usize,
    },
    /// The levels above the lowest reserve `reserved` workers of `threads`,
    /// which leaves none to serve the lowest level.
    Reservations {
        /// Workers reserved by the levels above the lowest.
        reserved: usize,
        /// The config's threads.
        threads: usize,
    },
    /// [`ThreadConfig::name`] panicked for worker `index`, or gave a name
    /// with a NUL byte (which no thread can have).
    ThreadName {
        /// The worker's index.
        index: usize,
    },
    /// [`ThreadConfig::stack_size`] is below [`MIN_STACK_SIZE`].
    StackSize {
        /// The size asked for.
        bytes: usize,
    },
    /// A [`Builder`](crate::Builder) setting names a level the pool does
    /// not have.
    NoSuchLevel {
        /// The level named.
        level: usize,
        /// The levels the builder has.
        levels: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ConfigError as E;
        // `fmt::write` is one call per message; `write!` would inline
        // `Formatter::write_fmt` into each (the crate's largest function).
        let mut say = |args: fmt::Arguments<'_>| fmt::write(f, args);
        match self {
            E::NoLevels => say(format_args!("invalid pool config: no levels")),
            E::ThreadName { index } => say(format_args!(
                "invalid pool config: the thread name function panicked or gave a name with a NUL byte for worker {index}"
            )),
            E::StackSize { bytes } => say(format_args!(
                "invalid pool config: a worker stack of {bytes} bytes, at least {MIN_STACK_SIZE} are needed"
            )),
            E::NoSuchLevel { level, levels } => say(format_args!(
                "invalid pool config: no level {level}, the builder has {levels} (0 is the highest)"
            )),
            E::EmptyLevel { level } => {
                say(format_args!("invalid pool config: level {level} has no channel"))
            }
            E::DuplicateKey { key } => say(format_args!(
                "invalid pool config: channel key {key} appears more than once"
            )),
            E::NoThreads => say(format_args!("invalid pool config: threads must be at least 1")),
            E::TooManyThreads { threads } => say(format_args!(
                "invalid pool config: {threads} threads, at most {MAX_THREADS} are supported"
            )),
            E::TooManyChannels { channels } => say(format_args!(
                "invalid pool config: {channels} channels, at most {MAX_CHANNELS} are supported"
            )),
            E::SliceCount { levels, slices } => say(format_args!(
                "invalid pool config: RoundRobin needs one time slice per level \
                 ({levels} levels, {slices} slices)"
            )),
            E::ZeroSlice { level } => say(format_args!(
                "invalid pool config: RoundRobin time slice of level {level} is zero"
            )),
            E::ChannelAttached { key } => say(format_args!(
                "channel {key} is already attached to a pool (or another key names the same channel)"
            )),
            E::Spawn(e) => say(format_args!("could not start a worker thread: {e}")),
            E::LevelOptionCount { levels, options } => say(format_args!(
                "invalid level options: {options} entries for {levels} levels"
            )),
            E::ZeroMaxWait { level } => say(format_args!(
                "invalid level options: max_wait of level {level} is zero"
            )),
            E::MaxWaitNeedsHighestFirst { level } => say(format_args!(
                "invalid level options: level {level} has a max_wait, which only HighestFirst \
                 supports (RoundRobin's slices serve every level already)"
            )),
            E::Reservations { reserved, threads } => say(format_args!(
                "invalid level options: {reserved} of {threads} worker threads reserved \
                 by the higher levels leave none for the lowest level"
            )),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// Refuses a pool of no levels, or of more channels than a task can name:
/// `PoolConfig::validate`'s counts, which the [`Builder`](crate::Builder)
/// checks before it sizes anything by them.
pub(crate) fn check_counts(levels: usize, channels: usize) -> Result<(), ConfigError> {
    match levels {
        0 => Err(ConfigError::NoLevels),
        _ if channels > MAX_CHANNELS => Err(ConfigError::TooManyChannels { channels }),
        _ => Ok(()),
    }
}

impl<K: Copy + Eq + Hash + fmt::Debug> PoolConfig<K> {
    /// Checks the config; the pool calls this before starting anything.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let (threads, levels) = (self.threads, self.levels.len());
        let channels = self.levels.iter().map(Vec::len).sum::<usize>();
        if threads > MAX_THREADS {
            return Err(ConfigError::TooManyThreads { threads });
        }
        check_counts(levels, channels)?;
        let mut seen = HashSet::new();
        for (level, channels) in self.levels.iter().enumerate() {
            if channels.is_empty() {
                return Err(ConfigError::EmptyLevel { level });
            }
            if let Some(twice) = channels.iter().find(|params| !seen.insert(params.key)) {
                let key = format!("{:?}", twice.key);
                return Err(ConfigError::DuplicateKey { key });
            }
        }
        if let ScheduleAlgorithm::RoundRobin(slices) = &self.schedule {
            if slices.len() != levels {
                let slices = slices.len();
                return Err(ConfigError::SliceCount { levels, slices });
            }
            if let Some(level) = slices.iter().position(Duration::is_zero) {
                return Err(ConfigError::ZeroSlice { level });
            }
        }
        Ok(())
    }

    /// Checks `options` (see [`PoolBehavior::level_options`]) against the
    /// config; the pool calls this before starting anything.
    pub fn validate_options(&self, options: &[LevelOptions]) -> Result<(), ConfigError> {
        let (threads, levels) = (self.threads, self.levels.len());
        if options.len() > levels {
            let options = options.len();
            return Err(ConfigError::LevelOptionCount { levels, options });
        }
        for (level, option) in options.iter().enumerate() {
            match option.max_wait {
                Some(wait) if wait.is_zero() => return Err(ConfigError::ZeroMaxWait { level }),
                Some(_) if self.schedule != ScheduleAlgorithm::HighestFirst => {
                    return Err(ConfigError::MaxWaitNeedsHighestFirst { level })
                }
                _ => {}
            }
        }
        let reserved: usize = options
            .iter()
            .take(levels.saturating_sub(1))
            .map(|o| o.reserved_workers)
            // Saturating: a sum past `usize::MAX` is refused as that.
            .fold(0, usize::saturating_add);
        if reserved > 0 && reserved >= threads {
            return Err(ConfigError::Reservations { reserved, threads });
        }
        Ok(())
    }
}
