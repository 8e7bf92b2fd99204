//! The part of a pool that channels, tasks and workers share, independent of
//! the behavior's type.

use std::fmt;

use crossbeam_deque::{Injector, Stealer};

use super::blocked::{Blocked, DeadlockReport, WorkerState};
use super::close::CloseState;
use super::job::JobRef;
use super::{Parked, Seats};
use crate::lifo::{slot::Slot, watch::Watch, SlotTask};
use crate::sleep::Sleep;
use crate::status::{Bit, BitSet, Status};
use crate::sync::lock_std;
use crate::task::RunningTask;
use crate::wait_clock::WaitClock;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

/// What the pool knows of each channel.
pub(crate) struct ChannelInfo {
    /// The channel's key, as `Debug` prints it: for logs.
    pub(crate) name: Box<str>,
    pub(crate) bit: Bit,
    pub(crate) complete_on_close: bool,
    /// Whether the channel's tasks may use the LIFO slot (the schedule's
    /// rule: `Levels::uses_slot`).
    pub(crate) uses_slot: bool,
    /// The channel's level.
    pub(crate) level: usize,
    /// What a level's options add, if any (one test on the push path for
    /// a pool without them).
    pub(crate) options: Option<Box<ChannelOptions>>,
}

/// What a level's options (reservations, a starvation bound) add to each
/// of its channels.
pub(crate) struct ChannelOptions {
    /// The reserved sleep domains that serve the channel's level, nearest
    /// first (see `sleep`'s "Domains"; empty if no reservation covers it).
    pub(crate) wakes: Box<[usize]>,
    /// If the channel's level has a starvation bound: its wait clock, and
    /// the status bits of the levels above it (see `wait_clock`).
    pub(crate) clock: Option<(Arc<WaitClock>, BitSet)>,
}

impl ChannelOptions {
    /// The options of a channel, if it has any.
    pub(crate) fn of(
        wakes: Box<[usize]>,
        clock: Option<(Arc<WaitClock>, BitSet)>,
    ) -> Option<Box<ChannelOptions>> {
        (!wakes.is_empty() || clock.is_some()).then(|| Box::new(ChannelOptions { wakes, clock }))
    }
}

pub(crate) struct Shared {
    /// Tells this pool's worker threads apart from others'.
    pub(crate) id: usize,
    pub(crate) status: Status,
    pub(crate) sleep: Sleep,
    pub(crate) close: CloseState,
    pub(crate) channels: Box<[ChannelInfo]>,
    /// `[worker][channel]`: steals from each worker's local deques.
    pub(crate) stealers: Box<[Box<[Stealer<RunningTask>]>]>,
    /// `[seat][channel]`: steals from each seat's job deques (see `job`).
    pub(crate) job_stealers: super::job::JobStealers,
    /// Per channel: jobs published from outside the pool (see `job`), made
    /// on first use.
    pub(crate) job_injectors: Box<[OnceLock<Injector<JobRef>>]>,
    /// Per channel: whether a job was ever published there (see
    /// `job::used`).
    pub(crate) job_used: Box<[AtomicBool]>,
    /// Each worker's LIFO slot (see `lifo`).
    pub(crate) lifo: Box<[Slot<SlotTask>]>,
    /// What the idle workers saw of the slots (see `lifo::watch`).
    pub(crate) watch: Watch,
    /// The tasks that have parked, for close's sweep.
    pub(crate) parked: Parked,
    /// The free guest seats.
    pub(crate) seats: Seats,
    /// Per channel: the status bits that ask its running tasks to yield
    /// (see `crate::should_yield`), as (word, mask) pairs.
    pub(crate) yield_masks: Box<[BitSet]>,
    /// Whether the schedule is RoundRobin (else HighestFirst).
    pub(crate) round_robin: bool,
    /// Which worker threads are blocked (see `blocked`).
    pub(crate) blocked: Blocked,
    /// The behavior's deadlock handler (set once the pool exists; it
    /// catches its own panics).
    pub(crate) on_deadlock: OnceLock<DeadlockHandler>,
    /// Whether channel `index` may hold a task (its `may_have_tasks`,
    /// caught, and its jobs; set once the pool exists): the deadlock check
    /// confirms a status bit with it.
    pub(crate) channel_holds: OnceLock<Box<dyn Fn(usize) -> bool + Send + Sync>>,
    /// What the pool did, for `Pool::metrics` (see `meters`).
    pub(crate) meters: super::meters::Meters,
    /// The stall watcher's wake-up (see `pool::stall`).
    pub(crate) bell: Bell,
    /// The futures of `Pool::closing` (see `closing`).
    pub(crate) closing: super::ClosingWakers,
}

/// The stall watcher's wake-up: it waits here, long while every seat is
/// idle; a worker that ends an idle spell with a task rings it then (a
/// relaxed look at `idle`: a ring the look misses costs one late report,
/// at most the watcher's idle wait, and nothing else). Close stops it.
#[derive(Default)]
pub(crate) struct Bell {
    /// The watcher waits for a ring (every seat was idle).
    idle: std::sync::atomic::AtomicBool,
    /// (stopped, rung).
    state: std::sync::Mutex<(bool, bool)>,
    wake: std::sync::Condvar,
}

impl Bell {
    /// A worker ended an idle spell with a task: wakes a watcher that
    /// waits for it.
    #[inline]
    pub(crate) fn ring(&self) {
        if self.idle.load(std::sync::atomic::Ordering::Relaxed) {
            self.ring_now();
        }
    }

    #[cold]
    fn ring_now(&self) {
        lock_std(&self.state).1 = true;
        self.wake.notify_all();
    }

    /// Stops the watcher for good.
    pub(crate) fn stop(&self) {
        lock_std(&self.state).0 = true;
        self.wake.notify_all();
    }

    /// The watcher waits up to `period`, or (`idle`) until rung; `true`
    /// once stopped.
    pub(crate) fn wait(&self, period: std::time::Duration, idle: bool) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let state = lock_std(&self.state);
        self.idle.store(idle, Relaxed);
        // Until stopped, or (waiting idle) rung.
        let until = |&mut (stopped, rung): &mut (bool, bool)| !(stopped || idle && rung);
        let waited = self.wake.wait_timeout_while(state, period, until);
        let (mut state, _) = waited.unwrap_or_else(|p| p.into_inner());
        self.idle.store(false, Relaxed);
        state.1 = false;
        state.0
    }
}

/// What the pool calls with a deadlock report (see `blocked`).
pub(crate) type DeadlockHandler = Box<dyn Fn(&DeadlockReport) + Send + Sync>;

/// A worker thread blocked (see [`Shared::block`]) until this drops.
pub(crate) struct BlockedGuard<'a>(&'a Shared, usize);

impl Drop for BlockedGuard<'_> {
    fn drop(&mut self) {
        self.0.blocked.unblock(self.1);
    }
}

impl Shared {
    /// Close accounting for `task` entering channel `index` (which also
    /// records that dropping it now is the pool's or the channel's doing),
    /// and its count (`new`: a task just made, see `meters`). Returns
    /// whether its own poll re-queued the task (woken during it: a yield).
    #[inline]
    pub(crate) fn account(&self, task: &RunningTask, index: usize, new: bool) -> bool {
        // The seat resolves on a thread's first submit to the pool: cold.
        let seat = || super::context::current_of(self.id).map(|local| local.index);
        let stamp = self.meters.entered(index, new, seat);
        if stamp != 0 {
            task.stamp(stamp);
        }
        let counted = self.channels[index].complete_on_close;
        let entered = task.enter_channel(index);
        match (entered.counted, counted) {
            // Into a complete_on_close channel: counted from now on (also
            // while closing: see `close`, "Why nothing is lost").
            (false, true) => {
                self.close.count();
                Admitted(self).hand_to(task);
            }
            // Out of one: the task gives its count back.
            (true, false) => task.release_count(),
            _ => {}
        }
        entered.requeued
    }

    /// A task was stored in channel `index`: mark its bit (the post fence),
    /// then let the sleep protocol wake a worker if none will find it.
    #[inline]
    pub(crate) fn pushed(&self, index: usize) {
        self.pushed_many(index, 1);
    }

    /// `n` tasks were stored in channel `index`: marks its bit once, then
    /// posts `n` jobs (up to `n` sleepers woken, told where the work is; see
    /// `sleep`).
    #[inline]
    pub(crate) fn pushed_many(&self, index: usize, n: usize) {
        let channel = &self.channels[index];
        self.status.mark(channel.bit);
        let woken = match &channel.options {
            None => self.sleep.new_jobs_at(index, n),
            Some(options) => self.pushed_with(options, index, n),
        };
        if woken == 0 && self.blocked.all(0) {
            self.deadlocked();
        }
    }

    /// `Shared::pushed` for a channel with level options.
    #[cold]
    #[inline(never)]
    fn pushed_with(&self, options: &ChannelOptions, index: usize, n: usize) -> usize {
        if let Some((clock, above)) = &options.clock {
            // Pushed while higher work keeps the level waiting: its wait
            // starts now, if it had not (see `wait_clock`).
            if self.status.any_in_set(above) {
                clock.start();
            }
        }
        // (No reserved domain: the common one, as `pushed_many`.)
        self.sleep.new_jobs_in(&options.wakes, index, n)
    }

    /// Worker thread `index` blocks as `state` until the guard drops (see
    /// `blocked`); if it is the last one to, and a task is queued (see
    /// [`Shared::deadlocked`]), reports the deadlock.
    pub(crate) fn block(&self, index: usize, state: WorkerState) -> BlockedGuard<'_> {
        // `status.any` is the SeqCst load that pairs with a push's (see
        // `blocked`); `deadlocked` then confirms a set bit.
        if self.blocked.block(index, state) && self.status.any() {
            self.deadlocked();
        }
        BlockedGuard(self, index)
    }

    /// Every worker thread is blocked while a task is queued: reports it
    /// once (see `blocked`), unless a guest seat is taken (a thread that
    /// drives the pool or stands in for a worker may run the task).
    #[cold]
    fn deadlocked(&self) {
        if !self.seats.all_free() {
            return;
        }
        // Tasks no unblocked worker serves: those of channels whose reserved
        // domains are all blocked too (without reservations: any), and
        // that may hold a task: its status bit is set, and the pool's
        // `channel_holds` confirms it (a bit may be stale).
        let channels = self.channels.iter().enumerate();
        let queued: Vec<String> = channels
            .filter(|&(index, c)| {
                let wakes = c.options.as_ref().map_or(&[][..], |o| &o.wakes);
                wakes.iter().all(|&d| self.blocked.all(d))
                    && self.status.is_set(c.bit)
                    && self.channel_holds.get().is_none_or(|holds| holds(index))
            })
            .map(|(_, c)| c.name.to_string())
            .collect();
        let Some(report) = self.blocked.claim_report(queued) else {
            return;
        };
        // Logged whatever the behavior's handler does with it.
        log::error!("smartpool: {report}");
        if let Some(handler) = self.on_deadlock.get() {
            handler(&report);
        }
    }

    /// Admits a new task to channel `index` (see `close`'s module doc):
    /// `Err` if the pool is closing or closed (give the task back). For a
    /// `complete_on_close` channel, the admission is a count, which the
    /// task made for it must take ([`Admitted::hand_to`]).
    pub(crate) fn admit(&self, index: usize) -> Result<Option<Admitted<'_>>, Closed> {
        if !self.channels[index].complete_on_close {
            return (!self.close.is_closing()).then_some(None).ok_or(Closed);
        }
        // The count is made either way; refused, it drops at once, which
        // gives it back (and may terminate).
        let open = self.close.admit();
        open.then_some(Some(Admitted(self))).ok_or(Closed)
    }

    /// Whether any worker has a task in its LIFO slot.
    pub(crate) fn any_slot_full(&self) -> bool {
        self.lifo.iter().any(|slot| slot.look().is_full())
    }

    /// Gives one count back to close: what [`Admitted`]'s drop and a task's
    /// `Schedule::release_counted` (its one release) call.
    pub(crate) fn release_counted(&self) {
        if self.close.release() {
            self.sleep.wake_all();
            self.seats.wake_waiting();
        }
    }

    /// Close's deadline passed: every task left is dropped (see `parked`),
    /// and idle workers are woken to drop what is queued.
    pub(crate) fn abandon(&self) {
        self.parked.sweep(true);
        self.sleep.wake_all();
    }

    /// Starts closing, then sweeps the tasks that have parked, dropping
    /// those of channels that are not `complete_on_close` (see `parked`).
    pub(crate) fn begin_close(&self) {
        if self.close.begin() {
            log::debug!(
                "smartpool: pool {} closing: dropping channels' tasks, running complete_on_close ones",
                self.id
            );
            self.sleep.wake_all();
            self.seats.wake_waiting();
        }
        // Close has begun, whether or not it ended at once.
        self.closing.wake_all();
        self.parked.sweep(false);
    }
}

/// An admission refused: the pool is closing or closed.
pub(crate) struct Closed;

/// One task's count towards close, handed out by admission (or by a move
/// into a `complete_on_close` channel): the close accounting's token. The
/// task it was made for takes it ([`Admitted::hand_to`]: its counted flag),
/// and from then on gives it back in one place, as it completes, is
/// cancelled, is freed, or moves to a dropping channel
/// (`task::cell::Entry::release_count`; a stale token, after a move, gives
/// back its own). A count nobody took (a refused
/// admission, a claimed scoped task already gone) gives itself back when
/// dropped. So every count is given back exactly once.
#[must_use = "a count nobody takes is given back at once"]
pub(crate) struct Admitted<'a>(&'a Shared);

impl Admitted<'_> {
    /// `task` takes the count.
    pub(crate) fn hand_to(self, task: &RunningTask) {
        let had = task.take_count();
        debug_assert!(!had, "a task holds one count at most");
        std::mem::forget(self);
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.0.release_counted();
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("id", &self.id)
            .field("close", &self.close)
            .finish_non_exhaustive()
    }
}
