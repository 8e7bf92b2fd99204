//! The task cell and the `RunningTask` token.

use std::fmt;
use std::future::Future;
use std::mem::{needs_drop, ManuallyDrop};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures_task::{waker_ref, ArcWake};

use super::join::{Abort, CancelReason, JoinError, JoinHandle, JoinTarget, MoveError};
use super::join_waker::JoinWaker;
use super::state::{Line, Park, Start, State, FIRST_LINE};
use super::{Event, Schedule, SchedulerRef, TaskFuture};
use crate::sync::{AtomicBool, AtomicU32, AtomicU8, Ordering, UnsafeCell};

/// The part of a task that does not depend on its future's type.
pub(crate) struct Header {
    state: State,
    /// The entry of the cell's own token (line 0; see the parent module's
    /// "Moves"): written by that token's holder only.
    own: AtomicU32,
    /// The entry of a moved task's line while it runs or is parked (only
    /// the counted flag of its bits is used): written by the party
    /// responsible for the task only.
    moved: AtomicU32,
    /// Where the task is registered with its pool as one that parks (see
    /// `core::parked`): its slot plus one, or 0 before its first park;
    /// before its first start, the stamp of a sampled new task (with
    /// [`STAMP`] set, which no slot number reaches; see `core::meters`).
    /// Written by the responsible party only; read as the cell is freed.
    registered: AtomicU32,
    scheduler: SchedulerRef,
    /// The joiner's waker, and the byte that guards it (see `join_waker`).
    join_waker: JoinWaker,
    join_state: AtomicU8,
    /// Cleared when the `JoinHandle` is dropped, and clear from birth in a
    /// task made without one (`spawn_detached`): nobody can await the task
    /// any more, so completing it drops the output at once and skips the
    /// waker (a read-modify-write, and a cache line the submitter's thread
    /// last wrote, on every detached task).
    joined: AtomicBool,
}

impl Drop for Header {
    /// A task freed while still counted towards close (parked, then every
    /// waker and its handle dropped without a wake) releases its count, so
    /// that close does not wait for a task that can no longer run. (A future
    /// that keeps its own waker is a reference cycle: never freed, it keeps
    /// close waiting, as a future that is never woken does.)
    fn drop(&mut self) {
        Entry(&self.own).release_count(&self.scheduler);
        Entry(&self.moved).release_count(&self.scheduler);
        let slot = self.registered.load(Ordering::Relaxed);
        // (A stamp a task kept, cancelled before its first start, is no
        // slot.)
        if slot != 0 && slot & STAMP == 0 {
            let key = header_address(self) as usize;
            PoolRef::of(&self.scheduler).with(|pool| pool.parked().unregister(key, slot - 1));
        }
    }
}

impl Header {
    /// Takes out the stamp of a sampled new task (see `core::meters`), or
    /// 0: for the party that claimed the task's first start.
    #[inline]
    fn take_stamp(&self) -> u32 {
        let stamp = self.registered.load(Ordering::Relaxed);
        if stamp & STAMP == 0 {
            return 0;
        }
        self.registered.store(0, Ordering::Relaxed);
        stamp
    }

    /// Whether close drops the task if it parks now (`counted`: it counts
    /// towards close; see `ParkedRegistry::drops`).
    #[inline]
    fn close_drops(&self, counted: bool) -> bool {
        let pool = PoolRef::of(&self.scheduler);
        pool.with(|pool| pool.parked().drops(counted)) == Some(true)
    }

    /// The entry of `line` while the task runs or is parked in it (read
    /// by the party responsible for it).
    #[inline]
    fn line_entry(&self, line: Line) -> Entry<'_> {
        if line == FIRST_LINE {
            Entry(&self.own)
        } else {
            Entry(&self.moved)
        }
    }
}

/// In an entry's bits: the token holds a count towards close (see
/// `core::shared::Admitted`).
const COUNTED: u8 = 0x80;
/// In an entry's bits: the token was made by a poll's end that re-queued
/// the task, woken during its poll (a yield, most often), and left its
/// state word running (the parent module's "Re-queued running"). Set by
/// that poll's end, cleared by every other maker of a token of a running
/// task ([`TaskCell::token`]); a token made with the task or by a move
/// starts unmarked. `State::start`
/// lets only such a token take a running word, and, as the token enters a
/// channel, the mark keeps it out of the LIFO slot (see `lifo`).
const REQUEUED: u8 = 0x40;
/// In an entry's bits: the task had started when the token was made (the
/// hint `State::start` takes). Set for good in the cell's own entry by the
/// first poll that returns `Pending`, in every token a started moved task
/// makes, and from birth in a blocking task's.
const STARTED: u8 = 0x20;
/// In an entry's bits: the task runs from no channel (a blocking task): it
/// has no channel to report (`with_polling_task`), nor a level to lend.
const OFF_CHANNEL: u8 = 0x10;
/// In an entry's bits: why the task is cancelled if the token is dropped
/// now, a [`CancelReason`] as its discriminant (from 1), or [`UNSET`] for
/// "ask the pool" (closing: `PoolClosed`; open: its channel dropped it).
/// Set before a followup gets the token, unset when it enters a channel.
const CANCEL: u8 = 0x0f;

/// No reason recorded: see [`CANCEL`].
const UNSET: u8 = 0;

/// A token's own fields (see the parent module's "Moves"), in one word: the
/// channel it is in or was last taken from (the low [`CHANNEL_BITS`] bits),
/// and its bits ([`COUNTED`], [`REQUEUED`], [`STARTED`], [`OFF_CHANNEL`],
/// [`CANCEL`]) in the high byte. One word rather than a word and a byte
/// keeps the header at 48 bytes (the suite's W10). Only the token's
/// holder writes them (or, for the header's `moved` entry, the party
/// responsible for the task), so a load then a store of the whole word
/// cannot lose a write, and a change is rare: no read-modify-write
/// on every submission or completion. Relaxed: whoever hands the token on
/// publishes them (a queue's, a state transition's synchronisation).
#[derive(Clone, Copy)]
struct Entry<'a>(&'a AtomicU32);

/// The bits of an entry's word that hold its channel: a pool has at most
/// [`MAX_CHANNELS`](crate::MAX_CHANNELS) channels.
pub(crate) const CHANNEL_BITS: u32 = 24;
const CHANNEL_MASK: u32 = (1 << CHANNEL_BITS) - 1;

/// An entry's word for `channel` and `bits`.
#[inline]
fn entry_word(channel: usize, bits: u8) -> u32 {
    // `PoolConfig::validate` refuses more channels (`MAX_CHANNELS`).
    debug_assert!(channel <= CHANNEL_MASK as usize, "checked by the config");
    (u32::from(bits) << CHANNEL_BITS) | (channel as u32 & CHANNEL_MASK)
}

/// The channel of an entry's word.
#[inline]
fn channel_of(word: u32) -> usize {
    (word & CHANNEL_MASK) as usize
}

/// The bits of an entry's word.
#[inline]
fn bits_of(word: u32) -> u8 {
    (word >> CHANNEL_BITS) as u8
}

impl Entry<'_> {
    #[inline]
    fn from(self) -> usize {
        channel_of(self.0.load(Ordering::Relaxed))
    }

    #[inline]
    fn bits(self) -> u8 {
        bits_of(self.0.load(Ordering::Relaxed))
    }

    /// Writes `write(word)` over the word, unless that is the word
    /// already; returns the old word.
    #[inline]
    fn rewrite(self, write: impl FnOnce(u32) -> u32) -> u32 {
        let old = self.0.load(Ordering::Relaxed);
        let new = write(old);
        if new != old {
            self.0.store(new, Ordering::Relaxed);
        }
        old
    }

    #[inline]
    fn set_from(self, channel: usize) {
        self.rewrite(|word| entry_word(channel, bits_of(word)));
    }

    /// Sets the bits under `mask` to `value`; returns the old bits.
    #[inline]
    fn update(self, mask: u8, value: u8) -> u8 {
        let new = |word| entry_word(channel_of(word), (bits_of(word) & !mask) | value);
        bits_of(self.rewrite(new))
    }

    /// The channel the token is in or came from, unless it runs from none
    /// (see [`OFF_CHANNEL`]).
    #[inline]
    fn channel(self) -> Option<usize> {
        let word = self.0.load(Ordering::Relaxed);
        (bits_of(word) & OFF_CHANNEL == 0).then_some(channel_of(word))
    }

    /// Whether `bit` ([`COUNTED`], [`REQUEUED`], [`STARTED`]) is set.
    #[inline]
    fn has(self, bit: u8) -> bool {
        self.bits() & bit != 0
    }

    /// Sets whether the token counts towards close; returns the old value.
    #[inline]
    fn swap_counted(self, counted: bool) -> bool {
        self.update(COUNTED, if counted { COUNTED } else { 0 }) & COUNTED != 0
    }

    /// Why the task is being cancelled (see [`CANCEL`]).
    fn cancel_reason(self, scheduler: &SchedulerRef) -> CancelReason {
        CancelReason::from_code(self.bits() & CANCEL).unwrap_or_else(|| match scheduler.upgrade() {
            Some(pool) if !pool.is_closing() => CancelReason::DroppedByChannel,
            _ => CancelReason::PoolClosed,
        })
    }

    /// Takes the token's count towards close out of it, if it holds one:
    /// its pool, to be given the count back by [`give_back`] (possibly
    /// after the cell is gone).
    #[inline]
    fn detach_count(self, scheduler: &SchedulerRef) -> Option<PoolRef> {
        self.swap_counted(false).then(|| PoolRef::of(scheduler))
    }

    /// Gives back the token's count towards close, if it holds one: as
    /// the task is cancelled, is freed while counted, moves to a dropping
    /// channel, or the token is found stale (its completion detaches the
    /// count first, see `TaskCell::finish`).
    fn release_count(self, scheduler: &SchedulerRef) {
        give_back(self.detach_count(scheduler));
    }
}

/// A task's pool, as the calling thread reaches it: directly on one of its
/// workers (the worker keeps the pool alive: upgrading the `Weak` is two
/// read-modify-writes on the one reference count every task of the pool
/// shares), through the `Weak` of the task's [`SchedulerRef`] anywhere
/// else. Made and used on one thread (the raw pointer keeps it from being
/// sent).
enum PoolRef {
    /// Made on a worker of the task's pool.
    OnWorker(*const dyn Schedule),
    /// Made anywhere else: the pool, if it is still there.
    Upgraded(Option<Arc<dyn Schedule>>),
}

impl PoolRef {
    /// The pool of the task whose link this is.
    #[inline]
    fn of(scheduler: &SchedulerRef) -> PoolRef {
        let pool = scheduler.as_ptr();
        if std::ptr::addr_eq(crate::context::pool(), pool) {
            PoolRef::OnWorker(pool)
        } else {
            PoolRef::Upgraded(scheduler.upgrade())
        }
    }

    /// Calls `f` with the pool, if it is still there (a pool that is gone
    /// has nothing left to schedule or wait for: `f` is dropped).
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&dyn Schedule) -> R) -> Option<R> {
        match self {
            // SAFETY: made on this thread while it was a worker of the
            // pool at that address, and no other object could sit there,
            // since the `Weak` in the task's `SchedulerRef` then kept the
            // pool's allocation reserved; used before that worker's run
            // returns (made and used within one call on the worker's
            // stack: a `PoolRef` is never stored or sent), and while the
            // worker's context is set its frame (`pool::worker::run`)
            // owns an `Arc` to the pool (`crate::context`'s invariant):
            // the pool is alive, and a shared reference to it is what
            // every `Arc` holder has.
            PoolRef::OnWorker(pool) => Some(f(unsafe { &**pool })),
            PoolRef::Upgraded(Some(pool)) => Some(f(&**pool)),
            PoolRef::Upgraded(None) => None,
        }
    }
}

/// The one way a task's count towards close goes back to its pool
/// (`Event::Released`), if `Entry::detach_count` detached one.
/// (Inlined, the rare give-back apart: it runs as every task ends.)
#[inline]
fn give_back(count: Option<PoolRef>) {
    if let Some(pool) = count {
        give_back_now(pool);
    }
}

#[cold]
fn give_back_now(pool: PoolRef) {
    pool.with(|pool| pool.report(Event::Released));
}

/// The one way a task goes back to its pool (a wake that claimed it, or
/// its own poll ending woken): [`Schedule::schedule`], or a drop if the
/// pool is gone.
fn schedule(task: RunningTask) {
    let pool = PoolRef::of(&task.header().scheduler);
    pool.with(move |pool| pool.schedule(task));
}

/// How the polling marker (`crate::context::begin_poll`) names a task: by
/// its header's address, which [`with_polling_task`] reads back.
#[inline]
fn header_address(header: &Header) -> *const () {
    (header as *const Header).cast()
}

/// Calls `f` with the pool (as its link) and the channel index of the
/// task this thread is polling, if any (innermost, whatever its pool); the
/// index is `None` for a task of no channel (a blocking task).
pub(crate) fn with_polling_task<R>(f: impl FnOnce(&SchedulerRef, Option<usize>) -> R) -> Option<R> {
    let header = crate::context::polling()?;
    // SAFETY: the marker holds the address of the header of the task this
    // thread is polling (`header_address`, set by `Runnable::run` for the
    // span of the poll); the poller holds an `Arc` to the cell until the
    // marker drops and restores the outer poll's task, also on unwind. So
    // the header is alive, and shared access is what every `Arc` holder
    // has.
    let header = unsafe { &*header.cast::<Header>() };
    // The line's entry is written by the responsible party: this thread,
    // polling; and the line does not change while the task runs.
    let from = header.line_entry(header.state.line()).channel();
    Some(f(&header.scheduler, from))
}

/// The future, or what it left behind: its outcome once finished, then
/// nothing once the joiner took it (or the output of a task nobody joins
/// was dropped, or the cell is being freed). Held by the party
/// responsible for it (see [`TaskCell::with_stage`]).
enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Empty,
}

impl<F: Future> Stage<F> {
    /// Drops what the stage holds, in place, catching a panic there (the
    /// future's and the output's destructors are user code), then writes
    /// `outcome` if there is one: the stage holds it after, or is empty,
    /// also if a destructor panicked. The panic is logged once the stage is
    /// written, since the log is user code too. (It takes the outcome, not
    /// a whole stage: a stage is the size of the future, and would be
    /// copied in.)
    fn finish(&mut self, outcome: Option<Result<F::Output, JoinError>>) {
        let what = match *self {
            Stage::Empty => None,
            Stage::Running(_) => Some("future"),
            Stage::Finished(_) => Some("output"),
        };
        // The assignment drops the old value in place; should that panic,
        // the unwinding still writes `Empty`.
        let panic = what.and_then(|what| {
            let dropped = catch_unwind(AssertUnwindSafe(|| *self = Stage::Empty));
            dropped.err().map(|panic| (what, panic))
        });
        if let Some(outcome) = outcome {
            *self = Stage::Finished(outcome);
        }
        if let Some((what, panic)) = panic {
            log_drop_panic(what, panic);
        }
    }

    /// Takes the outcome out, for the joiner; the stage is empty after.
    fn take_outcome(&mut self) -> Result<F::Output, JoinError> {
        // A future is never moved out: it is pinned.
        if let Stage::Finished(_) = self {
            if let Stage::Finished(outcome) = std::mem::replace(self, Stage::Empty) {
                return outcome;
            }
        }
        panic!("a complete task holds its output until joined")
    }
}

/// Logs the panic of a destructor of what a stage held (`what`: the
/// future or the output). Out of line, and one copy for every future type.
#[cold]
fn log_drop_panic(what: &str, panic: Box<dyn std::any::Any + Send>) {
    crate::contain::log_panic(panic, |message| {
        log::error!("smartpool: a task's {what} panicked while being dropped: {message}")
    });
}

/// The heap cell of one task: one allocation holds header and future.
///
/// The cell's `Drop` drops what the stage holds before the fields drop,
/// so a cell freed while still counted drops its future before
/// `Header::drop` releases the count, and close never resolves before that
/// destructor ran.
pub(super) struct TaskCell<F: Future> {
    /// Accessed only through [`TaskCell::with_stage`], by the party
    /// responsible for it (see the module doc).
    stage: UnsafeCell<Stage<F>>,
    header: Header,
}

// SAFETY: the only state not already `Sync` is the stage, and it is touched by one party at a time, in an
// order that the state word's acquire/release transitions (or, from a poll
// that re-queued the task to the next start, the token's hand-over) make
// happen-before one another: the poller (`RUNNING`, with `SCHEDULED` and
// `ABORTED` if woken or aborted since) or the token's holder cancelling
// (`RUNNING`, claimed by the same `start` as a poll: a stale token never
// touches the stage), then the joiner once `COMPLETE`, then whoever frees
// the cell (exclusive, by `Arc`). The future and its output are `Send`, so that
// party may be on any thread (as `Mutex<T>: Sync` needs only `T: Send`).
unsafe impl<F: Future<Output: Send> + Send> Sync for TaskCell<F> {}

impl<F: Future> Drop for TaskCell<F> {
    /// Drops the future or output before the header (which may release the
    /// close count), catching a panic there: the last reference may be a
    /// waker dropped on any thread, which must not see the task's panic
    /// (two in one unwinding would abort the process).
    fn drop(&mut self) {
        // SAFETY: (the `with_stage` contract) `&mut self`: nobody else can
        // reach the stage.
        unsafe {
            self.with_stage(|stage| {
                // An empty stage, or an output with nothing to drop, skips
                // the catch.
                let trivial = matches!(stage, Stage::Finished(Ok(_))) && !needs_drop::<F::Output>();
                if !trivial && !matches!(stage, Stage::Empty) {
                    stage.finish(None);
                }
            })
        }
    }
}

/// What [`RunningTask::enter_channel`] found.
pub(crate) struct Entered {
    /// The task holds a count towards close.
    pub(crate) counted: bool,
    /// The token was made by a poll's re-queue: the task woke itself
    /// during the poll (a yield) or was woken from elsewhere then (see
    /// [`REQUEUED`]).
    pub(crate) requeued: bool,
}

/// What running a task came to.
#[must_use]
pub(crate) enum RunOutcome {
    /// Finished with its output; its count towards close, if any, is given
    /// back (as for the two below).
    Completed,
    /// Panicked: finished with the panic as its error.
    Panicked,
    /// Found aborted: its future was dropped unpolled, or after this poll.
    Aborted,
    /// Returned `Pending`: parked (whoever wakes it schedules it), or, woken
    /// during the poll, already handed back to the scheduler.
    Pending,
    /// The token was stale (its task moved, see the parent module's
    /// "Moves"): nothing ran; its own count towards close is given back.
    Stale,
}

/// Type-erased access to a task for the worker and the token: the cell
/// itself (its own token, line 0) or a [`Moved`] wrapper (a later line).
trait Runnable: Send + Sync {
    fn header(&self) -> &Header;
    /// This token's own fields.
    fn entry(&self) -> Entry<'_>;
    fn run(self: Arc<Self>) -> Ran;
    fn cancel(&self);
}

/// The high bit of the stamp a sampled new task carries in its header's
/// `registered` word until its first start (see `core::meters`): no slot
/// number has it.
pub(crate) const STAMP: u32 = 1 << 31;

/// What a worker learns from running a token: the outcome, and for the
/// pool's counts (`core::meters`) the channel the token came from, whether
/// this run started the task, and the stamp of a sampled new task (0 if
/// none). Twelve bytes: returned in registers.
pub(crate) struct Ran {
    pub(crate) outcome: RunOutcome,
    pub(crate) first: bool,
    pub(crate) channel: u32,
    pub(crate) stamp: u32,
}

impl Ran {
    #[inline]
    fn new(outcome: RunOutcome, first: bool, channel: u32, stamp: u32) -> Ran {
        Ran {
            outcome,
            first,
            channel,
            stamp,
        }
    }
}

/// The responsibility for a task that is ready to run.
///
/// A channel stores these; the pool takes them out and runs them. One is
/// live per runnable task; a task moved to another channel
/// ([`JoinHandle::move_to`], priority inheritance) leaves a stale one in
/// its old queue, which does nothing when run or dropped. Dropping the
/// live one without running it cancels the task: its future is dropped
/// and its [`JoinHandle`] resolves to a cancellation error. A behavior's
/// `followup` receives one and submits it to a channel.
pub struct RunningTask {
    /// Taken out only by `run` and `drop`, each of which consumes the token
    /// (no `Option`: an `Option<RunningTask>` stays two words, returned in
    /// registers through the channels' `pop`).
    task: ManuallyDrop<Arc<dyn Runnable>>,
}

impl RunningTask {
    fn new(task: Arc<dyn Runnable>) -> RunningTask {
        RunningTask {
            task: ManuallyDrop::new(task),
        }
    }

    fn header(&self) -> &Header {
        self.task.header()
    }

    /// Index of the channel the task is in or was last taken from.
    pub(crate) fn from(&self) -> usize {
        self.task.entry().from()
    }

    /// The token goes to the behavior's followup: returns the index of
    /// the channel the task came from, and records that a drop now is the
    /// followup's.
    #[inline]
    pub(crate) fn to_followup(&self) -> usize {
        let entry = self.task.entry();
        entry.update(CANCEL, CancelReason::DroppedByFollowup as u8);
        entry.from()
    }

    /// Whether the token was made by a poll's end that re-queued its task,
    /// woken during the poll (see [`REQUEUED`]; the pool reads it as the
    /// token enters a channel, `enter_channel`).
    #[inline]
    pub(crate) fn is_requeued(&self) -> bool {
        self.task.entry().has(REQUEUED)
    }

    /// The token enters channel `channel`: records it, and records that a
    /// drop now is the pool's or the channel's (one entry access). Returns
    /// whether the task holds a count towards close, and its re-queue mark
    /// (which stays for its start).
    #[inline]
    pub(crate) fn enter_channel(&self, channel: usize) -> Entered {
        let entry = self.task.entry();
        entry.set_from(channel);
        let old = entry.update(CANCEL, UNSET);
        Entered {
            counted: old & COUNTED != 0,
            requeued: old & REQUEUED != 0,
        }
    }

    /// The task takes a count towards close (`core::shared::Admitted`);
    /// returns whether it held one already.
    pub(crate) fn take_count(&self) -> bool {
        self.task.entry().swap_counted(true)
    }

    /// The task gives its count towards close back, if it holds one (its
    /// one release: see `Entry::release_count`).
    pub(crate) fn release_count(&self) {
        self.task.entry().release_count(&self.header().scheduler);
    }

    /// Records the channel the task was taken from, for its followup.
    #[inline]
    pub(crate) fn set_from(&self, channel: usize) {
        self.task.entry().set_from(channel);
    }

    /// Whether the task belongs to the pool behind `scheduler`.
    #[inline]
    pub(crate) fn belongs_to(&self, scheduler: &SchedulerRef) -> bool {
        Weak::ptr_eq(&self.header().scheduler, scheduler)
    }

    /// Records why the task is cancelled if this token is dropped now;
    /// `None`: the pool decides (see [`CancelReason`]).
    pub(crate) fn set_cancel_reason(&self, reason: Option<CancelReason>) {
        let code = reason.map_or(UNSET, |reason| reason as u8);
        self.task.entry().update(CANCEL, code);
    }

    /// Polls the task once. Catches a panic of the future.
    pub(crate) fn run(self) -> RunOutcome {
        self.run_counted().outcome
    }

    /// [`RunningTask::run`], with what the pool's counts need.
    #[inline]
    pub(crate) fn run_counted(self) -> Ran {
        let mut token = ManuallyDrop::new(self);
        // SAFETY: `token` is never used again, nor dropped: the task is
        // taken out once.
        let task = unsafe { ManuallyDrop::take(&mut token.task) };
        task.run()
    }

    /// Stamps a new task, not yet queued, with the time it was submitted
    /// (a stamp of `core::meters`): its first start takes it out.
    pub(crate) fn stamp(&self, stamp: u32) {
        debug_assert!(stamp & STAMP != 0);
        // Ours alone: the task is new, and not yet queued.
        self.header().registered.store(stamp, Ordering::Relaxed);
    }
}

impl Drop for RunningTask {
    fn drop(&mut self) {
        // SAFETY: the token is being dropped: the task is taken out once
        // (`run` does not drop the token).
        let task = unsafe { ManuallyDrop::take(&mut self.task) };
        task.cancel();
    }
}

impl fmt::Debug for RunningTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningTask")
            .field("from", &self.from())
            .finish_non_exhaustive()
    }
}

/// A new task's token and handle.
type Spawned<T> = (RunningTask, JoinHandle<T>);

/// Creates a task for `future`, owned by the pool behind `scheduler`.
pub(crate) fn spawn<F: TaskFuture>(future: F, scheduler: SchedulerRef) -> Spawned<F::Output> {
    with_handle(new_cell(future, scheduler, false, true))
}

/// Creates a task that can never move (see the parent module's "Moves"):
/// a blocking task, which runs on a blocking thread, outside the channels.
pub(crate) fn spawn_unmovable<F: TaskFuture>(
    future: F,
    scheduler: SchedulerRef,
) -> Spawned<F::Output> {
    with_handle(new_cell(future, scheduler, true, true))
}

/// Creates a task for `future` with no handle, owned by the pool behind
/// `scheduler`: born detached (as a task whose handle was dropped before
/// it ran), so the token holds the cell's only reference.
pub(crate) fn spawn_detached<F: TaskFuture>(future: F, scheduler: SchedulerRef) -> RunningTask {
    RunningTask::new(new_cell(future, scheduler, false, false))
}

/// The token and the handle of a new task's cell.
fn with_handle<F: TaskFuture>(cell: Arc<TaskCell<F>>) -> Spawned<F::Output> {
    (RunningTask::new(cell.clone()), JoinHandle::new(cell))
}

/// The cell of a new task; `joined`: a handle will be made for it.
fn new_cell<F: TaskFuture>(
    future: F,
    scheduler: SchedulerRef,
    unmovable: bool,
    joined: bool,
) -> Arc<TaskCell<F>> {
    // A blocking task starts started, and runs from no channel.
    let bits = if unmovable { STARTED | OFF_CHANNEL } else { 0 };
    Arc::new(TaskCell {
        stage: UnsafeCell::new(Stage::Running(future)),
        header: Header {
            state: State::new(unmovable),
            own: AtomicU32::new(entry_word(0, bits)),
            moved: AtomicU32::new(entry_word(0, UNSET)),
            registered: AtomicU32::new(0),
            scheduler,
            join_waker: JoinWaker::new(),
            join_state: AtomicU8::new(0),
            joined: AtomicBool::new(joined),
        },
    })
}

impl<F: Future> TaskCell<F> {
    /// Calls `f` with the stage.
    ///
    /// # Safety
    ///
    /// The caller must be the party responsible for the stage (see the
    /// module doc): the poller, which claimed the token's line in `start`
    /// (the state is `RUNNING`, with `SCHEDULED` and `ABORTED` if woken or
    /// aborted since), the token's holder cancelling it (after the same
    /// claim: `RUNNING`), or the joiner, having seen `COMPLETE`. Then no
    /// other party touches the stage until the caller's next state
    /// transition, or its hand-over of the re-queued task's token, which
    /// follows this call.
    unsafe fn with_stage<R>(&self, f: impl FnOnce(&mut Stage<F>) -> R) -> R {
        // SAFETY: exclusive access, by the caller's contract.
        self.stage.with_mut(|stage| f(unsafe { &mut *stage }))
    }

    /// Marks the task complete and tells its joiner. The joiner's waker is
    /// user code: its panic is caught so that the caller's accounting runs.
    fn complete(&self) {
        self.header.state.complete();
        // A handle dropped after this load is woken for nothing: harmless.
        if !self.header.joined.load(Ordering::Relaxed) {
            return;
        }
        if let Some(joiner) = self.header.join_waker.take(&self.header.join_state) {
            crate::contain::catch(
                || joiner.wake(),
                |message| log::error!("smartpool: a JoinHandle's waker panicked: {message}"),
            );
        }
    }

    /// What a wake does with the task, whether or not it consumes its
    /// waker: `Some(line)` if it claimed the task, whose responsibility it
    /// then holds, `None` if there is nothing for it to do. A wake during
    /// the task's own poll, on the polling thread (a yield, a future that
    /// finds more to do), is recorded in the thread's context, for the
    /// poll's end to re-queue the task: that thread holds the
    /// responsibility, and the poll's end is sequenced after the wake, so
    /// there is nothing to publish. Any other wake goes through the state
    /// word.
    #[inline]
    fn claim_by_wake(&self) -> Option<Line> {
        if crate::context::wake_polling(header_address(&self.header)) {
            return None;
        }
        self.header.state.wake(false)
    }
}

/// A task as its pool's registry of parked tasks holds it (see
/// `core::parked`): weakly, so that the registry keeps no future alive;
/// reached by close's sweep.
pub(crate) trait CloseWake: Send + Sync {
    /// Claims the task if it is parked, and drops it, or hands it back if
    /// it counts towards close and the deadline has not passed (see
    /// `core::parked`).
    fn close_wake(self: Arc<Self>);
}

impl<F: TaskFuture> CloseWake for TaskCell<F> {
    /// Claims the task as a wake would; drops it if it does not count
    /// towards close (with `PoolClosed`), or if it does and close's
    /// deadline passed (with `CloseTimedOut`), here, not through the
    /// behavior's followup, which might keep it; else hands it back to the
    /// pool (a spurious wake).
    fn close_wake(self: Arc<Self>) {
        let Some(line) = self.header.state.wake(false) else {
            return;
        };
        // Claimed: we are responsible, and the line's entry is ours to read.
        let reason = if !self.header.line_entry(line).has(COUNTED) {
            CancelReason::PoolClosed
        } else if self.header.close_drops(true) {
            CancelReason::CloseTimedOut
        } else {
            return schedule(self.token(line, false));
        };
        // Dropped here: cancelled for `reason`.
        self.token(line, false).set_cancel_reason(Some(reason));
    }
}

/// Drops the worker's reference to a task. If it is the last (the handle was
/// detached and no waker is left), this frees the cell and drops the future
/// or output: user code, whose panic must not unwind into the worker.
fn drop_reference<T: ?Sized>(task: Arc<T>) {
    crate::contain::drop_contained(task, "dropping a finished task");
}

impl<F: TaskFuture> Runnable for TaskCell<F> {
    fn header(&self) -> &Header {
        &self.header
    }

    #[inline]
    fn entry(&self) -> Entry<'_> {
        Entry(&self.header.own)
    }

    fn run(self: Arc<Self>) -> Ran {
        let (header, own) = (&self.header, Entry(&self.header.own));
        let (started, channel) = (own.has(STARTED), own.from() as u32);
        let start = header.state.start(FIRST_LINE, started, own.has(REQUEUED));
        let first = start == Start::Poll && !started;
        let stamp = if first { header.take_stamp() } else { 0 };
        let outcome = match start {
            Start::Poll => self.poll(FIRST_LINE, started),
            Start::Aborted => self.finish_aborted(FIRST_LINE),
            Start::Stale => stale(self),
        };
        Ran::new(outcome, first, channel, stamp)
    }

    fn cancel(&self) {
        self.cancel_token(FIRST_LINE, Entry(&self.header.own));
    }
}

/// A token found stale (see the parent module's "Moves"): lets go of the
/// task, then gives back the token's own count towards close, if it held
/// one. (One copy for every future type: the path is cold.)
#[cold]
fn stale(task: Arc<dyn Runnable>) -> RunOutcome {
    let count = task.entry().detach_count(&task.header().scheduler);
    drop_reference(task);
    give_back(count);
    RunOutcome::Stale
}

/// The token of a moved task's later line (see the parent module's
/// "Moves"): the cell, the line, and the token's own entry.
struct Moved<F: Future> {
    cell: Arc<TaskCell<F>>,
    line: Line,
    entry: AtomicU32,
}

impl<F: TaskFuture> Moved<F> {
    /// The token of `cell` in `line`, with its entry's channel and bits.
    fn token(cell: Arc<TaskCell<F>>, line: Line, from: usize, bits: u8) -> RunningTask {
        RunningTask::new(Arc::new(Moved {
            cell,
            line,
            entry: AtomicU32::new(entry_word(from, bits)),
        }))
    }
}

impl<F: Future> Drop for Moved<F> {
    /// A count left in a wrapper (none is, in the paths that consume one:
    /// it goes with the run, or back with the cancellation) goes back.
    fn drop(&mut self) {
        Entry(&self.entry).release_count(&self.cell.header.scheduler);
    }
}

impl<F: TaskFuture> Runnable for Moved<F> {
    fn header(&self) -> &Header {
        &self.cell.header
    }

    fn entry(&self) -> Entry<'_> {
        Entry(&self.entry)
    }

    fn run(self: Arc<Self>) -> Ran {
        let (header, entry) = (&self.cell.header, self.entry());
        let (started, channel) = (entry.has(STARTED), entry.from() as u32);
        let start = header.state.start(self.line, started, entry.has(REQUEUED));
        if start == Start::Stale {
            return Ran::new(stale(self), false, channel, 0);
        }
        let first = start == Start::Poll && !started;
        let stamp = if first { header.take_stamp() } else { 0 };
        // Claimed: the line's fields go where the poller keeps them.
        let moved = Entry(&header.moved);
        moved.set_from(entry.from());
        let had = moved.swap_counted(entry.swap_counted(false));
        debug_assert!(!had, "a line's count is in one place");
        let (cell, line) = (self.cell.clone(), self.line);
        drop(self);
        let outcome = match start {
            // (The cell's own entry is not this line's: it needs no hint.)
            Start::Poll => cell.poll(line, true),
            _ => cell.finish_aborted(line),
        };
        Ran::new(outcome, first, channel, stamp)
    }

    fn cancel(&self) {
        self.cell.cancel_token(self.line, self.entry());
    }
}

impl<F: TaskFuture> TaskCell<F> {
    /// Polls the task, whose start the caller claimed in `line`.
    /// `started`: its token's hint said it had started (so the cell's own
    /// entry needs no update on the way out). Inlined into the cell's own
    /// `run`, the hot path (and into `Moved::run`, which only the token's
    /// dynamic call reaches: one copy each).
    #[inline(always)]
    fn poll(self: Arc<Self>, line: Line, started: bool) -> RunOutcome {
        // Borrows our `Arc` without a reference count of its own (two
        // atomic operations a poll); a future that keeps the
        // waker clones it, which counts.
        let waker = waker_ref(&self);
        let mut cx = Context::from_waker(&waker);
        let poll = |stage: &mut Stage<F>| {
            let Stage::Running(future) = stage else {
                unreachable!("a scheduled task holds its future");
            };
            // SAFETY: the future lives inside the task's `Arc` allocation,
            // which never moves, and never leaves the stage but by being
            // dropped in place (`Stage::finish` assigns over it). So it
            // stays pinned.
            let future = unsafe { Pin::new_unchecked(future) };
            catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx)))
        };
        // A wake of this task on this thread during the poll is recorded in
        // the thread's context (see `claim_by_wake`): no read-modify-write.
        let marker = crate::context::begin_poll(header_address(&self.header));
        // SAFETY: (the `with_stage` contract) we claimed the start and made
        // the state `RUNNING`; we give the stage up only in the
        // transitions below, or by handing on the re-queued token, after
        // this call.
        let polled = unsafe { self.with_stage(poll) };
        let woke_itself = marker.end();
        let output = match polled {
            Ok(Poll::Pending) => {
                // Still responsible: the registration and the line's entry
                // are ours to touch (see `core::parked`). A poll that woke
                // its own task cannot park it.
                if !woke_itself && self.header.registered.load(Ordering::Relaxed) == 0 {
                    self.register_parked();
                }
                if !started && line == FIRST_LINE {
                    // Its next token is the cell: it starts a started task
                    // (a moved line's tokens are made with the hint).
                    Entry(&self.header.own).update(STARTED, STARTED);
                }
                let counted = self.header.line_entry(line).has(COUNTED);
                match self.header.state.end_poll_pending(woke_itself, line) {
                    // Close is sweeping (for an uncounted task) or past its
                    // deadline (for any): claimed back and dropped (see
                    // `core::parked`: the sweep may have passed it by).
                    // The clone: the poller's reference drops contained.
                    Park::Parked if self.header.close_drops(counted) => {
                        self.clone().close_wake();
                        drop_reference(self);
                    }
                    Park::Parked => drop_reference(self),
                    // Woken during the poll: the poller holds the
                    // responsibility, and hands it back (no recursion). The
                    // word stays running, so the stage passes to the next
                    // start by the token's hand-over (through the followup
                    // and a channel, whose release and acquire order it).
                    Park::Requeue => schedule(self.token(line, true)),
                    // Aborted during the poll: the poller, still
                    // responsible, drops the future.
                    Park::Aborted => return self.finish_aborted(line),
                }
                return RunOutcome::Pending;
            }
            Ok(Poll::Ready(value)) => Ok(value),
            Err(panic) => {
                // The pool logs it with the task's channel, and hands it to
                // the behavior if nobody holds the task's handle.
                PoolRef::of(&self.header.scheduler).with(|pool| {
                    pool.report(Event::Panicked {
                        channel: self.header.line_entry(line).channel(),
                        panic: &*panic,
                        detached: !self.header.joined.load(Ordering::Relaxed),
                    })
                });
                Err(JoinError::panicked(panic))
            }
        };
        let panicked = output.is_err();
        // Nobody can take the output of a task without a handle (`joined`
        // only ever goes from set to clear): drop it here, on the poller,
        // before the count towards close goes back, rather than with the
        // cell's last reference (perhaps a waker, on any thread, later).
        let outcome = if self.header.joined.load(Ordering::Relaxed) {
            Some(output)
        } else {
            // User code: its panic is caught and logged (as dropping a
            // `JoinHandle` does).
            crate::contain::drop_contained(output, "dropping a detached task's output");
            None
        };
        // SAFETY: (the `with_stage` contract) still the poller (`RUNNING`,
        // with `SCHEDULED` and `ABORTED` if woken or aborted since);
        // `complete` below hands the stage to the joiner.
        unsafe { self.with_stage(|stage| stage.finish(outcome)) };
        self.finish(line);
        if panicked {
            RunOutcome::Panicked
        } else {
            RunOutcome::Completed
        }
    }

    /// The holder of a token of `line` (with `entry`, its own fields) drops
    /// it unrun: claims the task as a start would, and cancels it; a stale
    /// token only gives back its own count.
    fn cancel_token(&self, line: Line, entry: Entry<'_>) {
        let scheduler = &self.header.scheduler;
        let (started, requeued) = (entry.has(STARTED), entry.has(REQUEUED));
        let reason = match self.header.state.start(line, started, requeued) {
            Start::Poll => Some(entry.cancel_reason(scheduler)),
            Start::Aborted => Some(CancelReason::Aborted),
            Start::Stale => None,
        };
        // For the pool's counts: the token's channel, whether its task is
        // cancelled, and whether it was dropped in that channel's queue (no
        // cancel reason recorded; a stale token counts as one that left its
        // queue: see `core::meters`, "What `queued` is"). A task that counts
        // towards close, dropped because close's deadline passed (not
        // aborted by its user meanwhile): the report counts it, before its
        // count goes back (which may end the close).
        PoolRef::of(scheduler).with(|pool| {
            if let Some(channel) = entry.channel() {
                let queued = reason.is_none() || entry.bits() & CANCEL == UNSET;
                pool.report(Event::Dropped {
                    channel,
                    cancelled: reason.is_some(),
                    queued,
                });
            }
            if reason == Some(CancelReason::CloseTimedOut) && entry.has(COUNTED) {
                pool.parked().count_abandoned();
            }
        });
        if let Some(reason) = reason {
            // SAFETY: (the `with_stage` contract) the claim above made us
            // the party responsible (`RUNNING`); `complete` hands the stage
            // on.
            unsafe { self.with_stage(|stage| Self::drop_future(stage, reason)) };
            self.complete();
        }
        // (Never panics: `complete` and `Stage::finish` catch user code.)
        entry.release_count(scheduler);
    }

    /// The token for the task in `line`, made by the party responsible
    /// for it (the poller, or a waker, aborter or close's sweep that
    /// claimed it): the cell itself in line 0, else a [`Moved`] wrapper
    /// that takes the line's fields over. `requeued`: made by a poll's end
    /// that re-queues the task and left the word running (the mark, see
    /// [`REQUEUED`]; in a yield loop the cell's own entry keeps it, and
    /// this writes nothing).
    #[inline]
    fn token(self: Arc<Self>, line: Line, requeued: bool) -> RunningTask {
        let mark = if requeued { REQUEUED } else { UNSET };
        if line == FIRST_LINE {
            Entry(&self.header.own).update(REQUEUED, mark);
            RunningTask::new(self)
        } else {
            self.moved_token(line, mark)
        }
    }

    #[cold]
    #[inline(never)]
    fn moved_token(self: Arc<Self>, line: Line, mark: u8) -> RunningTask {
        // The line's fields, its count towards close with them, go into
        // the new wrapper.
        let moved = Entry(&self.header.moved);
        let (from, counted) = (moved.from(), moved.update(COUNTED, 0) & COUNTED);
        Moved::token(self, line, from, STARTED | counted | mark)
    }

    /// Replaces the future by a cancellation for `reason`, with the reason
    /// readable by `task::cancel_reason` while the future drops, for a
    /// future that reports its own end (a scoped task). (`Stage::finish`
    /// catches a panic there: the outer reason is always restored.)
    fn drop_future(stage: &mut Stage<F>, reason: CancelReason) {
        let outer = crate::context::set_cancelling(reason as u8);
        stage.finish(Some(Err(JoinError::cancelled(reason))));
        crate::context::set_cancelling(outer);
    }

    /// Registers the task with its pool as one that parks, before its
    /// first park (see `core::parked`). The caller is the poller.
    #[cold]
    #[inline(never)]
    fn register_parked(self: &Arc<Self>) {
        let (key, task) = (header_address(&self.header) as usize, Arc::downgrade(self));
        let pool = PoolRef::of(&self.header.scheduler);
        if let Some(slot) = pool.with(|pool| pool.parked().register(key, task)) {
            self.header.registered.store(slot + 1, Ordering::Relaxed);
        }
    }

    /// The poller (`RUNNING`, with `SCHEDULED+ABORTED` after an abort
    /// during the poll) drops the aborted future and completes the task.
    #[cold]
    fn finish_aborted(self: Arc<Self>, line: Line) -> RunOutcome {
        // SAFETY: (the `with_stage` contract) the caller is the poller,
        // responsible until `complete` in `finish`.
        unsafe { self.with_stage(|stage| Self::drop_future(stage, CancelReason::Aborted)) };
        self.finish(line);
        RunOutcome::Aborted
    }

    /// The stage holds the outcome: completes the task (run in `line`)
    /// and lets go of it. Out of line: once a task, and kept out of the
    /// poll, whose `Pending` path is the yield's (W3).
    #[inline(never)]
    fn finish(self: Arc<Self>, line: Line) {
        self.complete();
        // The count goes back after the worker lets go of the cell: if that
        // is the last reference, the output's destructor (user code, which
        // may submit more work) runs while the pool still waits for this
        // task, as it did when the worker gave the count back.
        let header = &self.header;
        let count = header.line_entry(line).detach_count(&header.scheduler);
        drop_reference(self);
        give_back(count);
    }
}

impl<F: TaskFuture> JoinTarget<F::Output> for TaskCell<F> {
    /// The joiner's side of the waker slot (see `join_waker`).
    fn register(&self, cx: &Context<'_>) {
        let header = &self.header;
        header.join_waker.register(&header.join_state, cx.waker());
    }

    fn detach(&self) {
        self.header.joined.store(false, Ordering::Relaxed);
    }

    /// The channel the task is queued in, if it is queued and was never
    /// moved (a hint: its own token's entry, which its holder may be
    /// writing). A moved task's queued token is a wrapper the cell does not
    /// reach: `None`.
    fn queued_in(&self) -> Option<usize> {
        let queued = self.header.state.is_queued_in(FIRST_LINE);
        queued.then(|| Entry(&self.header.own).from())
    }

    unsafe fn take_output(&self) -> Result<F::Output, JoinError> {
        // SAFETY: (the `with_stage` contract) by this fn's contract we are
        // the joiner, and saw `COMPLETE`.
        unsafe { self.with_stage(Stage::take_outcome) }
    }
}

impl<F: TaskFuture> Abort for TaskCell<F> {
    fn abort(self: Arc<Self>) {
        if let Some(line) = self.header.state.wake(true) {
            // Claimed as a wake would: the pool drops the future when it
            // runs the token (or at once, if the pool is gone).
            schedule(self.token(line, false));
        }
    }

    fn is_complete(&self) -> bool {
        self.header.state.is_complete()
    }

    fn belongs_to(&self, scheduler: &SchedulerRef) -> bool {
        Weak::ptr_eq(&self.header.scheduler, scheduler)
    }

    /// The new line's token holds no count towards close (the channel it
    /// enters gives it one) and names `channel` as where it is.
    fn claim_move(self: Arc<Self>, channel: usize) -> Result<RunningTask, MoveError> {
        let line = self.header.state.move_line()?;
        Ok(Moved::token(self, line, channel, UNSET))
    }
}

/// Priority inheritance: `task`, queued in channel `channel`, is awaited by
/// the task this thread polls. If this thread is a worker of `task`'s pool
/// (a blocking thread of it polls tasks of no channel), the pool moves
/// `task` to the waiter's channel when the waiter's level is higher (see
/// [`Schedule::boost`]). The pool's code calls the user's channel: a panic
/// of its `push` drops the moved task (cancelled as dropped by its
/// channel), as for any submission; any other panic there is caught and
/// logged, before the claim, and the task stays where it was.
#[cold]
#[inline(never)]
pub(crate) fn inherit(task: Arc<dyn Abort>, channel: usize) {
    with_polling_task(|scheduler, waiter| {
        // A blocking task lends no level, even when its thread drives the
        // pool as a guest (`Pool::block_on`); nor does a task of another
        // pool.
        let Some(waiter) = waiter.filter(|_| task.belongs_to(scheduler)) else {
            return;
        };
        // Only a worker of the pool lends its task's level.
        let pool @ PoolRef::OnWorker(_) = PoolRef::of(scheduler) else {
            return;
        };
        let boost = || {
            pool.with(|pool| pool.boost(waiter, channel, &mut |to| task.clone().claim_move(to)));
        };
        crate::contain::catch(boost, |message| {
            log::error!(
                "smartpool: a channel panicked while a task inherited a priority: {message}"
            )
        });
    });
}

impl<F: TaskFuture> ArcWake for TaskCell<F> {
    /// A claiming wake makes a new reference the task's token (see
    /// `claim_by_wake`).
    fn wake_by_ref(arc_self: &Arc<Self>) {
        if let Some(line) = arc_self.claim_by_wake() {
            schedule(arc_self.clone().token(line, false));
        }
    }

    /// As [`wake_by_ref`](Self::wake_by_ref), the waker consumed: a wake
    /// that claims the task makes the waker's own reference its token, with
    /// no count up for the token and down for the waker (two
    /// read-modify-writes of the reference count for every wake that claims
    /// the task, as a channel's or a timer's waker does). A wake that
    /// claims nothing lets the reference go.
    fn wake(self: Arc<Self>) {
        if let Some(line) = self.claim_by_wake() {
            schedule(self.token(line, false));
        }
    }
}
