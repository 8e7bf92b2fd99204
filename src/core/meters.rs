//! Counters of what a pool did, summed by `Pool::metrics`.
//!
//! # Who writes what
//!
//! A count written by many threads (one read-modify-write on a shared line)
//! costs about as much as the whole budget of the counts. So every count a task's path makes has one writer:
//!
//! * each seat (a worker thread's, or a guest's: `seats`) has a block of
//!   its own, written only by the thread that holds the seat (successive
//!   holders of a guest seat are ordered by its hand-over). Per channel it
//!   counts the new tasks submitted to it from this seat, the other entries
//!   (woken, yielding, moved tasks), the tokens the seat took from it, and
//!   of those the tasks it started, completed, saw panic or found aborted,
//!   and the sampled queue waits (below); per level, the time the seat
//!   spent running its tasks; and its steals, and what it is doing. A new
//!   task's path makes four counts: submitted, taken, started, completed;
//! * every other thread (a submitter from outside, a waker) counts in a
//!   block of its own, made and registered with the pool at its first
//!   count. A thread finds its block through its context (`crate::context`:
//!   one read when it counts for the same pool as last time), which
//!   forgets it whenever the thread's seat changes: it never names a seat
//!   the thread left. Pool ids are never reused, so a remembered id names
//!   this pool's block. A thread that comes back to a pool finds its own
//!   block again in the list (under its lock: once per switch between
//!   pools). A block whose thread let go of it (the thread ended, or counts
//!   for another pool now) is folded into `retired` by a snapshot, or as a
//!   new block is registered: the list holds at most one block per thread
//!   that counted since;
//! * tokens dropped unrun (tasks cancelled, stale tokens dropped), rare,
//!   are counted by a read-modify-write per channel, from any thread.
//!
//! Every block's counts are on cache lines of their own.
//!
//! # What `queued` is
//!
//! A channel's queued tokens are its entries (new, woken, yielding, moved,
//! resubmitted) less the tokens that left it: taken by a worker (to run,
//! or to submit elsewhere: a LIFO slot's task flushed to its queue, a
//! seat's queues emptied as it is given back), or dropped in it (the
//! token's cancel code still unset: drained by close, dropped by the
//! channel or its panic; and stale tokens). A token a followup drops, or
//! a parked task close drops, was in no queue: cancelled, but no exit.
//!
//! # Nested runs
//!
//! A task that waits may run other tasks on its seat (`help_until`,
//! `run_now`, `run_until_stalled` from inside a task): those save the
//! seat's activity and restore it as they return, so that the rest of the
//! outer task's time counts for its level, and a seat shows idle only
//! when no task of it runs (the quiet rule of `Pool::metrics`). A guest
//! seat given back, and a worker that exits, show idle.
//!
//! A one-writer count is a [`Counter`]: a relaxed load, then a relaxed
//! store of one more (no read-modify-write). A snapshot sums the blocks
//! with relaxed loads: exact once the pool is quiet, approximate while it
//! runs (it may see one count and miss an earlier one of another block).
//! Nothing here orders or guards anything else: the counts are facts after
//! the fact, read by nobody that decides.
//!
//! # Queue waits
//!
//! One new task in [`SAMPLE`] submitted from a block is stamped with the
//! time (microseconds since the pool's epoch, 31 bits: waits up to 35
//! minutes are told apart) in its header's spare word before it is queued;
//! its first start takes the stamp out, and the worker that started it
//! adds the wait to its seat's log-scale buckets for the channel it came
//! from. So two clock reads per sampled task, and none for the others.
//!
//! # Busy time
//!
//! A seat reads the clock only when the level it runs changes (including
//! from and to idle), and adds the time since the last change to the level
//! it leaves. A snapshot adds the running interval of a seat that is busy.
//!
//! With the `metrics` feature off (it is on by default), every count is a
//! no-op, and `Pool::metrics` is not there.

// Without the feature, nothing reads the counts.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use std::any::Any;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;

use crate::sync::{lock, AtomicU32, AtomicU64, Mutex, Ordering};
use crate::task::STAMP;

/// Whether counts are kept (the `metrics` feature).
pub(crate) const ENABLED: bool = cfg!(feature = "metrics");

/// One new task in this many (per block) has its queue wait measured.
pub(crate) const SAMPLE: u64 = 64;

/// Log-scale buckets of a queue wait in microseconds: bucket `b` holds the
/// waits below `2^b` µs (and at least `2^(b-1)`), the last one the rest.
pub(crate) const BUCKETS: usize = 32;

/// A count with one writer (see the module doc).
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`: for the count's one writer only.
    #[inline(always)]
    pub(crate) fn add(&self, n: u64) {
        if ENABLED {
            let value = self.0.load(Ordering::Relaxed);
            self.0.store(value.wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Adds one, and returns the count before: for the one writer only
    /// (`Meters::entered`, which returns at once when counts are off).
    #[inline(always)]
    fn bump(&self) -> u64 {
        let value = self.0.load(Ordering::Relaxed);
        self.0.store(value.wrapping_add(1), Ordering::Relaxed);
        value
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One block's counts for one channel (on lines of their own: a block
/// shares none with another thread's); with `u64` counts, every block's
/// counts for one channel summed ([`ChannelSum`]).
#[repr(align(128))]
#[derive(Default, Clone, Copy)]
pub(crate) struct ChannelCounts<C = Counter> {
    /// New tasks admitted to the channel.
    pub(crate) submitted: C,
    /// The other entries into the channel: tasks woken or yielding, moved
    /// ones.
    pub(crate) reentered: C,
    /// Tokens taken out of it by a worker, to run (stale ones a move left
    /// behind included, and those close drops as the worker takes them) or
    /// to move elsewhere (a LIFO slot's task flushed to its channel's
    /// queue, a seat's queues emptied as it is given back): every way a
    /// token leaves the channel but being dropped there.
    pub(crate) taken: C,
    /// Tasks polled for the first time, from it.
    pub(crate) started: C,
    /// Tasks that returned their output, run from it.
    pub(crate) completed: C,
    /// Tasks that panicked, run from it.
    pub(crate) panicked: C,
    /// Tasks dropped as aborted by the worker that took them from it.
    pub(crate) aborted: C,
    /// The sampled queue waits of the tasks started from it, per bucket
    /// (see [`BUCKETS`]), and the longest, in µs: a seat's block only
    /// (see [`SeatMeters::waited`]).
    pub(crate) waits: Buckets<C>,
    pub(crate) max_wait: C,
    /// In a sum only (any thread counts them, in [`Meters`]): tasks
    /// cancelled, and tokens dropped in the channel unrun.
    pub(crate) cancelled: C,
    pub(crate) dropped: C,
}

/// A count per bucket of [`BUCKETS`].
#[derive(Clone, Copy)]
pub(crate) struct Buckets<C>(pub(crate) [C; BUCKETS]);

// By hand: the derived array `Default` makes one call per bucket (32 of
// them, for each type of count); `from_fn` is one loop.
impl<C: Default> Default for Buckets<C> {
    fn default() -> Buckets<C> {
        Buckets(std::array::from_fn(|_| C::default()))
    }
}

/// Every block's counts for one channel, summed.
pub(crate) type ChannelSum = ChannelCounts<u64>;

/// Per channel, one block's counts.
pub(crate) type Block = Box<[ChannelCounts]>;

fn block(channels: usize) -> Block {
    (0..channels).map(|_| ChannelCounts::default()).collect()
}

/// What a seat is doing, as [`SeatMeters::activity`] codes it: idle (0),
/// or running a task of channel `code - 1` (its level is looked up by the
/// snapshot, not on the task's path).
const IDLE: u32 = 0;

/// No level: the seat is idle (see [`SeatMeters::level`]).
const NO_LEVEL: u32 = u32::MAX;

/// A value on cache lines of its own (two, against the adjacent-line
/// prefetcher).
#[repr(align(128))]
pub(crate) struct Lined<T>(pub(crate) T);

/// A seat's counts, on lines of its own.
#[repr(align(128))]
pub(crate) struct SeatMeters {
    pub(crate) channels: Block,
    /// Per level: nanoseconds spent running its tasks, up to `since`.
    /// (A block of its own, made with every other seat's on the thread that
    /// builds the pool: padded, so that an allocator packing small blocks of
    /// one size together cannot put two seats' counts on one line.)
    pub(crate) busy: Box<[Lined<Counter>]>,
    /// Tasks this seat stole from another worker's queue.
    pub(crate) steals: Counter,
    /// Tasks this seat ran inline inside a waiting one (`Pool::run_now`),
    /// which no channel held, and changes of its activity: with the
    /// running channel's `taken`, the seat's progress (see `pool::stall`).
    pub(crate) inline: Counter,
    /// See [`IDLE`].
    activity: AtomicU32,
    /// The level the seat runs, or [`NO_LEVEL`].
    level: AtomicU32,
    /// When it started running `level`, in ns since the pool's epoch.
    since: AtomicU64,
}

impl SeatMeters {
    /// The seat runs a task of channel `channel`.
    #[inline(always)]
    fn running(&self, meters: &Meters, channel: usize) {
        let code = channel as u32 + 1;
        if self.activity.load(Ordering::Relaxed) != code {
            self.switch(meters, code);
        }
    }

    #[cold]
    #[inline(never)]
    fn switch(&self, meters: &Meters, code: u32) {
        self.inline.add(1);
        self.activity.store(code, Ordering::Relaxed);
        let level = meters.level_of[code as usize - 1];
        if self.level.load(Ordering::Relaxed) != level {
            self.close_interval(meters.epoch, level);
        }
    }

    /// Adds the time since `since` to the level the seat ran, if any, and
    /// starts `next`'s interval.
    fn close_interval(&self, epoch: Instant, next: u32) {
        let now = epoch.elapsed().as_nanos() as u64;
        let level = self.level.load(Ordering::Relaxed);
        if let Some(busy) = self.busy.get(level as usize) {
            busy.0
                .add(now.saturating_sub(self.since.load(Ordering::Relaxed)));
        }
        self.since.store(now, Ordering::Relaxed);
        self.level.store(next, Ordering::Relaxed);
    }

    /// What the seat is doing, for [`SeatMeters::restore`].
    pub(crate) fn activity(&self) -> u32 {
        self.activity.load(Ordering::Relaxed)
    }

    /// The seat goes back to doing `activity` (as [`SeatMeters::activity`]
    /// returned it): after a nested search or run inside a task (a wait
    /// that helps), the seat runs that task again, and its time counts for
    /// that task's level.
    pub(crate) fn restore(&self, meters: &Meters, activity: u32) {
        if !ENABLED || self.activity.load(Ordering::Relaxed) == activity {
            return;
        }
        if activity == IDLE {
            self.idle(meters.epoch);
        } else {
            self.switch(meters, activity);
        }
    }

    /// The seat is idle: searching for work, or asleep. Release: a
    /// snapshot that sees it idle sees every count it made before.
    #[inline]
    pub(crate) fn idle(&self, epoch: Instant) {
        if ENABLED && self.activity.load(Ordering::Relaxed) != IDLE {
            self.close_interval(epoch, NO_LEVEL);
            self.activity.store(IDLE, Ordering::Release);
        }
    }

    /// The channel of the task the seat runs, if it runs one (see
    /// [`IDLE`]; acquire: see [`SeatMeters::idle`]).
    pub(crate) fn running_now(&self) -> Option<usize> {
        (self.activity.load(Ordering::Acquire) as usize).checked_sub(1)
    }

    /// A task of channel `channel` started after waiting since `stamp` (a
    /// stamp as [`Meters::entered`] made it).
    #[cold]
    #[inline(never)]
    pub(crate) fn waited(&self, epoch: Instant, channel: usize, stamp: u32) {
        let waited = u64::from(micros(epoch).wrapping_sub(stamp) & !STAMP);
        let bucket = (64 - waited.leading_zeros() as usize).min(BUCKETS - 1);
        if let Some(counts) = self.channels.get(channel) {
            counts.waits.0[bucket].add(1);
            // The longest: raised to `waited` if below.
            counts
                .max_wait
                .add(waited.saturating_sub(counts.max_wait.get()));
        }
    }
}

/// Microseconds since `epoch`, in 31 bits (wrapping), with [`STAMP`] set.
fn micros(epoch: Instant) -> u32 {
    (epoch.elapsed().as_micros() as u32) | STAMP
}

/// The outside blocks, and what retired ones counted.
struct Outside {
    blocks: Vec<(ThreadId, Arc<Block>)>,
    /// Per channel (only the counts a block holds are set).
    retired: Box<[ChannelSum]>,
}

impl Outside {
    /// Folds the blocks whose thread let go of them into `retired`.
    fn retire(&mut self) {
        let retired = &mut self.retired;
        self.blocks.retain_mut(|(_, block)| {
            // `get_mut` (acquire) succeeds only when no thread holds the
            // block any more, and sees every count it made.
            let Some(block) = Arc::get_mut(block) else {
                return true;
            };
            for (into, from) in retired.iter_mut().zip(block.iter()) {
                into.add(from);
            }
            false
        });
    }
}

/// A pool's counters.
pub(crate) struct Meters {
    /// The pool's id (`Shared::id`): what a thread's context remembers.
    pool_id: usize,
    /// The time busy intervals and queue waits are measured from.
    pub(crate) epoch: Instant,
    /// One per seat, as `Shared::lifo`.
    pub(crate) seats: Box<[SeatMeters]>,
    /// Per channel, its level.
    level_of: Box<[u32]>,
    /// The blocks of the threads that are no seat of the pool.
    outside: Mutex<Outside>,
    /// Per channel: tasks cancelled (their live token dropped unrun) as
    /// they were in it, or last ran from it (from any thread).
    cancelled: Box<[AtomicU64]>,
    /// Per channel: tokens dropped in it, unrun (cancelled, or stale).
    dropped: Box<[AtomicU64]>,
    /// Per channel: polls of its tasks the stall watcher reported (its
    /// one writer, see `pool::stall`).
    pub(crate) stalls: Box<[Counter]>,
}

impl Meters {
    /// Counters for a pool of `seats` seats whose channel `c` is of level
    /// `level_of[c]`.
    pub(crate) fn new(pool_id: usize, seats: usize, level_of: &[usize]) -> Meters {
        let channels = level_of.len();
        let levels = level_of.iter().max().map_or(0, |&l| l + 1);
        Meters {
            pool_id,
            level_of: level_of.iter().map(|&l| l as u32).collect(),
            epoch: Instant::now(),
            seats: (0..seats)
                .map(|_| SeatMeters {
                    channels: block(channels),
                    busy: (0..levels).map(|_| Lined(Counter::default())).collect(),
                    steals: Counter::default(),
                    inline: Counter::default(),
                    activity: AtomicU32::new(IDLE),
                    level: AtomicU32::new(NO_LEVEL),
                    since: AtomicU64::new(0),
                })
                .collect(),
            outside: Mutex::new(Outside {
                blocks: Vec::new(),
                retired: vec![ChannelSum::default(); channels].into(),
            }),
            cancelled: (0..channels).map(|_| AtomicU64::new(0)).collect(),
            dropped: (0..channels).map(|_| AtomicU64::new(0)).collect(),
            stalls: (0..channels).map(|_| Counter::default()).collect(),
        }
    }

    /// Seat `seat` (the caller's) took a task out of channel `channel` to
    /// run it: counts it, and records the seat's activity and busy time
    /// (its level looked up only when the channel changes, the clock read
    /// only when the level does).
    #[inline(always)]
    pub(crate) fn took(&self, seat: usize, channel: usize) {
        if let (true, Some(seat)) = (ENABLED, self.seats.get(seat)) {
            if let Some(counts) = seat.channels.get(channel) {
                counts.taken.add(1);
            }
            seat.running(self, channel);
        }
    }

    /// Seat `seat` (the caller's) runs a task of channel `channel` that no
    /// channel held (`Pool::run_now`'s): its activity only.
    #[inline]
    pub(crate) fn running(&self, seat: usize, channel: usize) {
        if let (true, Some(seat)) = (ENABLED, self.seats.get(seat)) {
            seat.inline.add(1);
            seat.running(self, channel);
        }
    }

    /// Seat `seat` (the caller's) took a task out of channel `channel` to
    /// submit it again (see [`ChannelCounts::taken`]).
    pub(crate) fn moved_out(&self, seat: usize, channel: usize) {
        if let Some(counts) = self.seats.get(seat).and_then(|s| s.channels.get(channel)) {
            counts.taken.add(1);
        }
    }

    /// Counts a task entering `channel` (`new`: just made) in the calling
    /// thread's block: its seat's if `seat` names one (the caller's seat of
    /// this pool, asked only when the thread's context does not remember
    /// the block), else the thread's own. Returns the stamp for a sampled
    /// new task (see the module doc), or 0.
    #[inline(always)]
    pub(crate) fn entered(
        &self,
        channel: usize,
        new: bool,
        seat: impl FnOnce() -> Option<usize>,
    ) -> u32 {
        if !ENABLED {
            return 0;
        }
        debug_assert!(channel < self.level_of.len());
        // (A thread whose locals are being destroyed counts nothing.)
        let sampled = crate::context::with_counts(
            self.pool_id,
            || self.resolve(seat()),
            |block| {
                // SAFETY: `block` points to the first of this pool's
                // counts (one per channel) in a block that outlives this
                // call: a seat's (the pool is alive while we submit to it,
                // and the context forgets it when the thread's seat
                // changes) or one the context keeps alive (see
                // `crate::context::with_counts`); `channel` is a channel of
                // the pool. Only shared references to it are made.
                let counts = unsafe { &*block.cast::<ChannelCounts>().add(channel) };
                if new {
                    counts.submitted.bump() % SAMPLE == 0
                } else {
                    counts.reentered.add(1);
                    false
                }
            },
        );
        if sampled == Some(true) {
            micros(self.epoch)
        } else {
            0
        }
    }

    /// The block for a thread: its seat's, or its own outside block (found
    /// again in the list, or made and registered).
    #[cold]
    #[inline(never)]
    fn resolve(&self, seat: Option<usize>) -> (*const (), Option<Arc<dyn Any + Send + Sync>>) {
        if let Some(seat) = seat {
            return (self.seats[seat].channels.as_ptr().cast(), None);
        }
        let me = std::thread::current().id();
        let mut outside = lock(&self.outside);
        // Its own block first: a thread that counts for two pools in turn
        // keeps one in each.
        let block = match outside.blocks.iter().find(|(id, _)| *id == me) {
            Some((_, block)) => block.clone(),
            None => {
                outside.retire();
                let block = Arc::new(block(self.level_of.len()));
                outside.blocks.push((me, block.clone()));
                block
            }
        };
        (block.as_ptr().cast(), Some(block))
    }

    /// A token of `channel` was dropped unrun (any thread): `cancelled`,
    /// its task is cancelled (else the token was stale); `queued`, it was
    /// dropped in the channel's queue.
    pub(crate) fn dropped(&self, channel: usize, cancelled: bool, queued: bool) {
        if !ENABLED {
            return;
        }
        for (yes, counts) in [(cancelled, &self.cancelled), (queued, &self.dropped)] {
            if let (true, Some(count)) = (yes, counts.get(channel)) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sums every block's counts for `channel`.
    pub(crate) fn sum(&self, channel: usize) -> ChannelSum {
        let mut outside = lock(&self.outside);
        outside.retire();
        // The retired blocks' counts, then every live block's.
        let mut sum = ChannelSum {
            cancelled: self.cancelled[channel].load(Ordering::Relaxed),
            dropped: self.dropped[channel].load(Ordering::Relaxed),
            ..outside.retired[channel]
        };
        for seat in self.seats.iter() {
            sum.add(&seat.channels[channel]);
        }
        for (_, block) in outside.blocks.iter() {
            sum.add(&block[channel]);
        }
        sum
    }

    /// Nanoseconds every seat spent running tasks of `level`, up to now.
    pub(crate) fn busy(&self, level: usize) -> u64 {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.seats
            .iter()
            .map(|seat| {
                // Its running interval, if it runs `level` (its level reads
                // `NO_LEVEL` between two of the seat's writes).
                let running = seat.running_now().is_some()
                    && seat.level.load(Ordering::Relaxed) as usize == level;
                let running =
                    running.then(|| now.saturating_sub(seat.since.load(Ordering::Relaxed)));
                seat.busy.get(level).map_or(0, |busy| busy.0.get()) + running.unwrap_or(0)
            })
            .sum()
    }
}

impl ChannelSum {
    /// Adds one block's counts for the channel.
    fn add(&mut self, counts: &ChannelCounts) {
        self.submitted += counts.submitted.get();
        self.reentered += counts.reentered.get();
        self.taken += counts.taken.get();
        self.started += counts.started.get();
        self.completed += counts.completed.get();
        self.panicked += counts.panicked.get();
        self.aborted += counts.aborted.get();
        for (into, from) in self.waits.0.iter_mut().zip(counts.waits.0.iter()) {
            *into += from.get();
        }
        self.max_wait = self.max_wait.max(counts.max_wait.get());
    }
}

/// What the quiet rule of `Pool::metrics` rests on: a seat counts a task,
/// then goes idle, while a snapshot looks; a snapshot that saw the seat
/// run, then idle, has the counts the seat made before. (With `idle`'s
/// store made relaxed, loom 0.7 still passes this model, up to four
/// preemptions: it does not produce that stale read. The release/acquire
/// pair is what the C++ model requires; this model guards the rest.)
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;

    #[test]
    fn a_snapshot_after_idle_sees_the_counts() {
        loom::model(|| {
            let meters = Arc::new(Meters::new(1, 1, &[0]));
            // Set (relaxed: it orders nothing) once the seat is done, so
            // that a snapshot that never saw it run stops looking.
            let done = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let (m, d) = (meters.clone(), done.clone());
            let seat = loom::thread::spawn(move || {
                m.took(0, 0);
                m.seats[0].channels[0].completed.add(1);
                m.seats[0].idle(m.epoch);
                d.store(true, Ordering::Relaxed);
            });
            let mut saw_running = false;
            loop {
                if meters.seats[0].running_now().is_some() {
                    saw_running = true;
                } else if saw_running {
                    let sum = meters.sum(0);
                    assert_eq!((sum.taken, sum.completed), (1, 1));
                    break;
                } else if done.load(Ordering::Relaxed) {
                    break;
                }
                loom::thread::yield_now();
            }
            seat.join().unwrap();
        });
    }
}
