//! [`Pool::metrics`]: a snapshot of what a pool did, per channel, and of
//! what its workers are doing. The counts come from `core::meters`: each
//! thread counts in a block of its own, without read-modify-writes, and the
//! snapshot sums the blocks. They are exact once the pool is quiet, and
//! approximate while it runs.

use std::fmt;
use std::time::Duration;

use super::Pool;
use crate::behavior::PoolBehavior;

/// A snapshot of a pool's counts: see [`Pool::metrics`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Metrics<K> {
    /// One entry per channel, highest level first (the config's order).
    pub channels: Vec<ChannelMetrics<K>>,
    /// One entry per level, highest first.
    pub levels: Vec<LevelMetrics>,
    /// One entry per worker thread, by index.
    pub workers: Vec<WorkerMetrics>,
}

/// What one channel's tasks came to.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChannelMetrics<K> {
    /// The channel.
    pub key: K,
    /// Its level (0 is the highest).
    pub level: usize,
    /// New tasks admitted to it (`exec` and its kin).
    pub submitted: u64,
    /// Tasks polled for the first time from it.
    pub started: u64,
    /// Tasks that returned their output, last run from it.
    pub completed: u64,
    /// Tasks that panicked, last run from it.
    pub panicked: u64,
    /// Tasks dropped unfinished: aborted, or dropped by close, by the
    /// channel, or by the followup (as they were queued in it, or last ran
    /// from it).
    pub cancelled: u64,
    /// Tasks in it now: entries (new, woken, yielding, moved) less those
    /// taken out and those dropped there (approximate while the pool runs;
    /// an entry a move left behind counts until a worker takes or drops
    /// it).
    pub queued: u64,
    /// How long its tasks waited in the queue, from submission to their
    /// first poll: one new task in 64 (per submitting thread) is measured.
    pub queue_wait: QueueWait,
    /// Polls of the channel's tasks that ran past the pool's stall
    /// threshold while tasks waited at their level or above (see
    /// [`PoolBehavior::stall_threshold`](crate::PoolBehavior::stall_threshold)).
    pub stalls: u64,
}

/// Sampled queue waits of a channel's tasks (see
/// [`ChannelMetrics::queue_wait`]), in log-scale buckets: each quantile is
/// the upper bound of its bucket, at most twice the wait it stands for and
/// at least one microsecond.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct QueueWait {
    /// Tasks measured.
    pub samples: u64,
    /// The median (`None` before the first sample).
    pub p50: Option<Duration>,
    /// The 99th percentile.
    pub p99: Option<Duration>,
    /// The longest wait measured (exact, to the microsecond).
    pub max: Option<Duration>,
    /// Per bucket `b`: the waits measured below `2^b` µs (and at least
    /// `2^(b-1)` µs); the last bucket holds the longer ones too.
    pub buckets: Vec<u64>,
}

impl QueueWait {
    fn from_buckets(buckets: &[u64], max_micros: u64) -> QueueWait {
        let samples: u64 = buckets.iter().sum();
        // Only once measured: a quantile of no sample is `None`.
        let quantile = |q: f64| {
            (samples > 0).then(|| {
                let rank = ((samples as f64) * q).ceil().max(1.0) as u64;
                let mut seen = 0;
                let bucket = buckets
                    .iter()
                    .position(|&n| {
                        seen += n;
                        seen >= rank
                    })
                    .unwrap_or(buckets.len() - 1);
                // The bucket's upper bound, but no more than the longest wait.
                Duration::from_micros((1u64 << bucket).min(max_micros.max(1)))
            })
        };
        QueueWait {
            samples,
            p50: quantile(0.5),
            p99: quantile(0.99),
            max: (samples > 0).then(|| Duration::from_micros(max_micros)),
            buckets: buckets.to_vec(),
        }
    }
}

/// What one level's workers did.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LevelMetrics {
    /// The time workers spent running its tasks, summed over the workers
    /// (and guests driving the pool); a worker's current task counts up
    /// to now.
    pub busy: Duration,
}

/// What a worker thread is doing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Activity {
    /// Running a task of this level (or between two of them).
    Running {
        /// The level (0 is the highest).
        level: usize,
    },
    /// Looking for work.
    Searching,
    /// Asleep until work comes (or waiting, with a timeout, for another
    /// worker's LIFO slot to be taken).
    Asleep,
}

/// One worker thread.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// What it is doing.
    pub activity: Activity,
    /// The tasks it ran (each poll of a task counts, and each entry a move
    /// left behind that it skipped).
    pub tasks: u64,
    /// The times it took work from another worker's queue or LIFO slot.
    pub steals: u64,
}

impl<B: PoolBehavior> Pool<B> {
    /// A snapshot of what the pool did and is doing: per channel, the
    /// tasks submitted, started, completed, panicked, cancelled and queued
    /// now, and how long they waited in the queue (sampled); per level,
    /// the time its tasks ran; per worker thread, what it is doing, how
    /// many tasks it ran and stole. `Display` prints it as a table.
    ///
    /// Counting costs no lock and no shared write on a task's path: each
    /// thread counts in a block of its own. A
    /// thread outside the pool takes a lock when it first counts for it
    /// (and again after counting for another pool); the snapshot locks the
    /// list of those threads' blocks.
    /// With the crate's `metrics` feature off (it is on by default), the
    /// counts compile to nothing and this method is not there.
    ///
    /// The counts are exact once the pool is quiet: a snapshot taken after
    /// one that shows every worker idle (searching or asleep), while no
    /// other thread drives the pool (`block_on`, `run_until_stalled`), has
    /// all of their counts. While the pool runs each count is a little behind (a
    /// task's completion is counted after its `JoinHandle` wakes; a count
    /// may be seen before an earlier one of another thread). Tasks of
    /// [`Pool::spawn_blocking`] run from no channel and are not counted.
    pub fn metrics(&self) -> Metrics<B::ChannelKey> {
        let meters = &self.shared.meters;
        Metrics {
            channels: self
                .keys
                .iter()
                .enumerate()
                .map(|(index, &key)| {
                    let sum = meters.sum(index);
                    ChannelMetrics {
                        key,
                        level: self.shared.channels[index].level,
                        submitted: sum.submitted,
                        started: sum.started,
                        completed: sum.completed,
                        panicked: sum.panicked,
                        cancelled: sum.cancelled + sum.aborted,
                        queued: (sum.submitted + sum.reentered)
                            .saturating_sub(sum.taken + sum.dropped),
                        queue_wait: QueueWait::from_buckets(&sum.waits.0, sum.max_wait),
                        stalls: meters.stalls[index].get(),
                    }
                })
                .collect(),
            levels: (0..=self.levels.lowest())
                .map(|level| LevelMetrics {
                    busy: Duration::from_nanos(meters.busy(level)),
                })
                .collect(),
            workers: (0..self.threads)
                .map(|index| {
                    let seat = &meters.seats[index];
                    let activity = match seat.running_now() {
                        Some(channel) => Activity::Running {
                            level: self.shared.channels[channel].level,
                        },
                        None if self.shared.sleep.is_asleep(index) => Activity::Asleep,
                        None => Activity::Searching,
                    };
                    WorkerMetrics {
                        activity,
                        tasks: seat.channels.iter().map(|c| c.taken.get()).sum(),
                        steals: seat.steals.get(),
                    }
                })
                .collect(),
        }
    }
}

impl<K: fmt::Debug> fmt::Display for Metrics<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Padded as the rows below are.
        f.write_str(
            "channel      level  submitted    started  completed panicked cancelled  queued   wait p50  wait p99  wait max\n",
        )?;
        let time = |d: Option<Duration>| d.map_or_else(|| "-".to_string(), |d| format!("{d:.0?}"));
        for c in &self.channels {
            writeln!(
                f,
                "{:<12} {:>5} {:>10} {:>10} {:>10} {:>8} {:>9} {:>7}  {:>9} {:>9} {:>9}",
                format!("{:?}", c.key),
                c.level,
                c.submitted,
                c.started,
                c.completed,
                c.panicked,
                c.cancelled,
                c.queued,
                time(c.queue_wait.p50),
                time(c.queue_wait.p99),
                time(c.queue_wait.max),
            )?;
        }
        for (level, l) in self.levels.iter().enumerate() {
            writeln!(f, "level {level:<6} busy {:.1?}", l.busy)?;
        }
        for (index, w) in self.workers.iter().enumerate() {
            let activity = match w.activity {
                Activity::Running { level } => format!("running level {level}"),
                Activity::Searching => "searching".into(),
                Activity::Asleep => "asleep".into(),
            };
            writeln!(
                f,
                "worker {index:<5} {activity:<16} {:>10} tasks {:>8} steals",
                w.tasks, w.steals
            )?;
        }
        Ok(())
    }
}
