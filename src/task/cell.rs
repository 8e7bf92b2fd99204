//! The task cell and the `RunningTask` token.

use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures::task::{waker_ref, ArcWake, AtomicWaker};

use super::join::{Abort, CancelReason, JoinError, JoinHandle, JoinTarget};
use super::state::{Abort as AbortOutcome, Park, Start, State, Wake as WakeOutcome};
use super::Schedule;
use crate::sync::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize, Ordering, UnsafeCell};

/// The part of a task that does not depend on its future's type.
pub(crate) struct Header {
    pub(super) state: State,
    /// Index of the channel the task was last taken from. Written by the
    /// responsible party only; the state transitions order the accesses.
    from: AtomicUsize,
    /// Whether the task counts towards close (it sits in, or last came from,
    /// a `complete_on_close` channel). Written by the responsible party only.
    counted: AtomicBool,
    /// Why the task is cancelled if its token is dropped now: a
    /// [`CancelReason`] as its discriminant (from 1), or [`UNSET`] for "ask the pool"
    /// (closing: `PoolClosed`; open: its channel dropped it). Written by the
    /// responsible party only: set before a followup gets the token, unset
    /// when the token enters a channel.
    cancel: AtomicU8,
    /// Set when the task is handed back after a yield, read and cleared
    /// when it enters a channel: a yield does not go into the LIFO slot
    /// (see `lifo`). Written by the responsible party only.
    yielded: AtomicBool,
    /// Where the task is registered with its pool as one that parks (see
    /// `core::parked`): its slot plus one, or 0 before its first park.
    /// Written by the responsible party only; read as the cell is freed.
    registered: AtomicU32,
    scheduler: Weak<dyn Schedule>,
    pub(super) join_waker: AtomicWaker,
    /// Cleared when the `JoinHandle` is dropped: nobody can await the task
    /// any more, so completing it skips the waker (a read-modify-write, and
    /// a cache line the submitter's thread last wrote, on every detached
    /// task).
    pub(super) joined: AtomicBool,
}

impl Drop for Header {
    /// A task freed while still counted towards close (parked, then every
    /// waker and its handle dropped without a wake) releases its count, so
    /// that close does not wait for a task that can no longer run. (A future
    /// that keeps its own waker is a reference cycle: never freed, it keeps
    /// close waiting, as a future that is never woken does.)
    fn drop(&mut self) {
        self.release_count();
        let slot = self.registered.load(Ordering::Relaxed);
        if slot != 0 {
            let key = header_address(self);
            PoolRef::of(&self.scheduler).with(|pool| pool.unregister_parked(key, slot - 1));
        }
    }
}

/// No reason recorded: see [`Header::cancel`].
const UNSET: u8 = 0;

impl Header {
    /// Gives back the task's count towards close, if it holds one (see
    /// `core::shared::Admitted`): as it is cancelled, is freed while
    /// counted, or moves to a dropping channel (its completion detaches the
    /// count first, see `Runnable::run`). Called by the party that last
    /// wrote the counted flag (the responsible party; the poller once the
    /// task is `COMPLETE`, when nobody else writes it), or with exclusive
    /// access (its `Drop`).
    fn release_count(&self) {
        if let Some(count) = self.detach_count() {
            give_back(count);
        }
    }

    /// Takes the task's count towards close out of it, if it holds one:
    /// its pool, to be given the count back by [`give_back`] (possibly
    /// after the cell is gone).
    fn detach_count(&self) -> Option<PoolRef> {
        self.swap_counted(false)
            .then(|| PoolRef::of(&self.scheduler))
    }

    /// Records why the task is cancelled if its token is dropped now (the
    /// responsible party only); `None`: the pool decides.
    fn set_cancel_reason(&self, reason: Option<CancelReason>) {
        let code = reason.map_or(UNSET, |reason| reason as u8);
        // Rarely a change on the way into a channel: skip the store then.
        if self.cancel.load(Ordering::Relaxed) != code {
            self.cancel.store(code, Ordering::Relaxed);
        }
    }

    /// Why the task is being cancelled (see [`Header::cancel`]).
    fn cancel_reason(&self) -> CancelReason {
        match CancelReason::from_code(self.cancel.load(Ordering::Relaxed)) {
            Some(reason) => reason,
            None => match self.scheduler.upgrade() {
                Some(pool) if !pool.is_closing() => CancelReason::DroppedByChannel,
                _ => CancelReason::PoolClosed,
            },
        }
    }

    /// Sets whether the task counts towards close; returns the old value.
    /// Only the party responsible for the task writes the flag (its caller),
    /// so a load then a store cannot lose a write; and it is rarely a
    /// change: no read-modify-write on every submission or completion.
    fn swap_counted(&self, counted: bool) -> bool {
        let old = self.counted.load(Ordering::Relaxed);
        if old != counted {
            self.counted.store(counted, Ordering::Relaxed);
        }
        old
    }
}

/// A task's pool, as the calling thread reaches it: directly on one of its
/// workers (the worker keeps the pool alive: upgrading the `Weak` is two
/// read-modify-writes on the one reference count every task of the pool
/// shares), through the task's `Weak` anywhere else. Made and used on one
/// thread (the raw pointer keeps it from being sent).
enum PoolRef {
    /// Made on a worker of the task's pool.
    OnWorker(*const dyn Schedule),
    /// Made anywhere else: the pool, if it is still there.
    Upgraded(Option<Arc<dyn Schedule>>),
}

impl PoolRef {
    /// The pool of the task whose `Weak` this is.
    #[inline]
    fn of(scheduler: &Weak<dyn Schedule>) -> PoolRef {
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
            PoolRef::OnWorker(pool) => {
                // SAFETY: made on this thread while it was a worker of the
                // pool at that address, and no other object could sit there,
                // since the task's `Weak` then kept the pool's allocation
                // reserved; used before that worker's run returns (made and
                // used within one call on the worker's stack: a `PoolRef` is
                // never stored or sent), and while the worker's context is
                // set its frame (`pool::worker::run`) owns an `Arc` to the
                // pool (`crate::context`'s invariant): the pool is alive,
                // and a shared reference to it is what every `Arc` holder has.
                Some(f(unsafe { &**pool }))
            }
            PoolRef::Upgraded(Some(pool)) => Some(f(&**pool)),
            PoolRef::Upgraded(None) => None,
        }
    }
}

/// The one way a task's count towards close goes back to its pool
/// ([`Schedule::release_counted`]), detached by `Header::detach_count`.
fn give_back(pool: PoolRef) {
    pool.with(|pool| pool.release_counted());
}

/// The one way a task goes back to its pool (a wake that claimed it, or
/// its own poll ending woken): [`Schedule::schedule`], or a drop if the
/// pool is gone.
fn schedule(task: RunningTask, woken_while_running: bool) {
    let pool = PoolRef::of(&task.header().scheduler);
    pool.with(move |pool| pool.schedule(task, woken_while_running));
}

/// How the polling marker (`crate::context::begin_poll`) names a task: by
/// its header's address, which [`with_polling_task`] reads back.
#[inline]
fn header_address(header: &Header) -> *const () {
    (header as *const Header).cast()
}

/// Calls `f` with the pool (as its `Weak`) and the channel index of the
/// task this thread is polling, if any (innermost, whatever its pool).
pub(crate) fn with_polling_task<R>(f: impl FnOnce(&Weak<dyn Schedule>, usize) -> R) -> Option<R> {
    let header = crate::context::polling()?;
    // SAFETY: the marker holds the address of the header of the task this
    // thread is polling (`header_address`, set by `Runnable::run` for the
    // span of the poll); the poller holds an `Arc` to the cell until the
    // marker drops and restores the outer poll's task, also on unwind. So
    // the header is alive, and shared access is what every `Arc` holder
    // has.
    let header = unsafe { &*header.cast::<Header>() };
    // `from` is written by the responsible party: this thread, polling.
    Some(f(&header.scheduler, header.from.load(Ordering::Relaxed)))
}

/// The future, or what it left behind.
pub(super) enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    /// The joiner took the output.
    Consumed,
}

/// The heap cell of one task: one allocation holds header and future.
///
/// Field order matters: fields drop in declaration order, so a cell freed
/// while still counted drops its future before `Header::drop` releases the
/// count, and close never resolves before that destructor ran.
pub(super) struct TaskCell<F: Future> {
    /// Accessed only through [`TaskCell::with_stage`], by the party the
    /// state word makes responsible for it (see the module doc).
    stage: UnsafeCell<Stage<F>>,
    pub(super) header: Header,
}

// SAFETY: the only state not already `Sync` is the stage, and it is touched
// by one party at a time, in an order the state word's acquire/release
// transitions make happen-before one another: the poller (`RUNNING`, or
// `RUNNING+SCHEDULED` once woken, or `SCHEDULED` after a poll that ended
// aborted) or the token's holder cancelling (`SCHEDULED`), then the joiner
// once `COMPLETE`, then whoever frees the
// cell (exclusive, by `Arc`). The future and its output are `Send`, so that
// party may be on any thread (as `Mutex<T>: Sync` needs only `T: Send`).
unsafe impl<F> Sync for TaskCell<F>
where
    F: Future + Send,
    F::Output: Send,
{
}

impl<F: Future> Drop for TaskCell<F> {
    /// Drops the future or output before the header (which may release the
    /// close count), catching a panic there: the last reference may be a
    /// waker dropped on any thread, which must not see the task's panic
    /// (two in one unwinding would abort the process).
    fn drop(&mut self) {
        self.stage.with_mut(|stage| {
            // SAFETY: `&mut self`: nobody else can reach the stage.
            let stage = unsafe { &mut *stage };
            let nothing_to_drop = match stage {
                Stage::Consumed => true,
                Stage::Finished(Ok(_)) => !std::mem::needs_drop::<F::Output>(),
                _ => false,
            };
            if !nothing_to_drop {
                Self::set_stage(stage, Stage::Consumed);
            }
        });
    }
}

/// What [`RunningTask::enter_channel`] found.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Entered {
    /// The task holds a count towards close.
    pub(crate) counted: bool,
    /// The task comes from a yield (see [`Schedule::schedule`]).
    pub(crate) yielded: bool,
}

/// What running a task came to.
#[must_use]
#[derive(Debug)]
pub(crate) enum RunOutcome {
    /// Finished (or panicked, or aborted); its count towards close, if any, is given
    /// back.
    Completed,
    /// Returned `Pending`: parked (whoever wakes it schedules it), or, woken
    /// during the poll, already handed back to the scheduler.
    Pending,
}

/// Type-erased access to a task for the worker and the token.
trait Runnable: Send + Sync {
    fn header(&self) -> &Header;
    fn run(self: Arc<Self>) -> RunOutcome;
    fn cancel(&self);
}

/// The responsibility for a task that is ready to run.
///
/// A channel stores these; the pool takes them out and runs them. Exactly
/// one exists per runnable task. Dropping it without running it cancels the
/// task: its future is dropped and its [`JoinHandle`] resolves to a
/// cancellation error. A behavior's `followup` receives one and submits it to
/// a channel.
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

    /// Index of the channel the task was last taken from.
    pub(crate) fn from(&self) -> usize {
        self.header().from.load(Ordering::Relaxed)
    }

    /// The token goes to the behavior's followup: returns the index of
    /// the channel the task came from, and records that a drop now is the
    /// followup's (one header access for both).
    pub(crate) fn to_followup(&self) -> usize {
        let header = self.header();
        header.set_cancel_reason(Some(CancelReason::DroppedByFollowup));
        header.from.load(Ordering::Relaxed)
    }

    /// The token enters a channel: records that a drop now is the pool's
    /// or the channel's, and clears the yield mark (one header access for
    /// both). Returns whether the task holds a count towards close, and
    /// whether it comes from a yield.
    pub(crate) fn enter_channel(&self) -> Entered {
        let header = self.header();
        header.set_cancel_reason(None);
        let yielded = header.yielded.load(Ordering::Relaxed);
        if yielded {
            header.yielded.store(false, Ordering::Relaxed);
        }
        Entered {
            counted: header.counted.load(Ordering::Relaxed),
            yielded,
        }
    }

    /// The task takes a count towards close (`core::shared::Admitted`);
    /// returns whether it held one already.
    pub(crate) fn take_count(&self) -> bool {
        self.header().swap_counted(true)
    }

    /// The task gives its count towards close back, if it holds one (its
    /// one release: see `Header::release_count`).
    pub(crate) fn release_count(&self) {
        self.header().release_count();
    }

    /// Marks the task as coming from a yield, until it enters a channel.
    pub(crate) fn mark_yielded(&self) {
        self.header().yielded.store(true, Ordering::Relaxed);
    }

    /// Records the channel the task was taken from, for its followup.
    pub(crate) fn set_from(&self, channel: usize) {
        self.header().from.store(channel, Ordering::Relaxed);
    }

    /// Whether the task belongs to the pool behind `scheduler`.
    pub(crate) fn belongs_to(&self, scheduler: &Weak<dyn Schedule>) -> bool {
        Weak::ptr_eq(&self.header().scheduler, scheduler)
    }

    /// Records why the task is cancelled if this token is dropped now;
    /// `None`: the pool decides (see [`CancelReason`]).
    pub(crate) fn set_cancel_reason(&self, reason: Option<CancelReason>) {
        self.header().set_cancel_reason(reason);
    }

    /// Polls the task once. Catches a panic of the future.
    pub(crate) fn run(self) -> RunOutcome {
        let mut token = ManuallyDrop::new(self);
        // SAFETY: `token` is never used again, nor dropped: the task is
        // taken out once.
        let task = unsafe { ManuallyDrop::take(&mut token.task) };
        task.run()
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

/// Creates a task for `future`, owned by the pool behind `scheduler`.
pub(crate) fn spawn<F>(
    future: F,
    scheduler: Weak<dyn Schedule>,
) -> (RunningTask, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let cell = Arc::new(TaskCell {
        stage: UnsafeCell::new(Stage::Running(future)),
        header: Header {
            state: State::new_scheduled(),
            from: AtomicUsize::new(0),
            counted: AtomicBool::new(false),
            cancel: AtomicU8::new(UNSET),
            yielded: AtomicBool::new(false),
            registered: AtomicU32::new(0),
            scheduler,
            join_waker: AtomicWaker::new(),
            joined: AtomicBool::new(true),
        },
    });
    let join = JoinHandle::new(cell.clone() as Arc<dyn JoinTarget<F::Output>>);
    (RunningTask::new(cell), join)
}

impl<F: Future> TaskCell<F> {
    /// Calls `f` with the stage.
    ///
    /// # Safety
    ///
    /// The caller must be the party responsible for the stage (see the
    /// module doc): the poller, which consumed the token in `start_running`
    /// (the state is `RUNNING`, or `RUNNING+SCHEDULED` if woken since, or
    /// `SCHEDULED` after a poll that ended aborted), the token's holder
    /// cancelling it (`SCHEDULED`), or the joiner, having
    /// seen `COMPLETE`. Then no other party touches the stage until the
    /// caller's next state transition, which follows this call.
    pub(super) unsafe fn with_stage<R>(&self, f: impl FnOnce(&mut Stage<F>) -> R) -> R {
        // SAFETY: exclusive access, by the caller's contract.
        self.stage.with_mut(|stage| f(unsafe { &mut *stage }))
    }

    /// Replaces the stage, catching a panic from dropping the old one.
    fn set_stage(stage: &mut Stage<F>, new: Stage<F>) {
        // Assignment drops the old value in place (the pinned future is never
        // moved); if that drop panics, the new value is still written.
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| *stage = new)) {
            log::error!(
                "smartpool: a task's future panicked while being dropped: {}",
                super::join::panic_message(&*panic)
            );
        }
    }

    /// Marks the task complete and tells its joiner. The joiner's waker is
    /// user code: its panic is caught so that the caller's accounting runs.
    fn complete(&self) {
        self.header.state.complete();
        // A handle dropped after this load is woken for nothing: harmless.
        if !self.header.joined.load(Ordering::Relaxed) {
            return;
        }
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.header.join_waker.wake())) {
            log::error!(
                "smartpool: a JoinHandle's waker panicked: {}",
                super::join::panic_message(&*panic)
            );
        }
    }
}

/// A task that has parked, as its pool's registry of parked tasks holds
/// it (see `core::parked`): weakly, so that the registry keeps no future
/// alive, and under a key (its header's address) that its unregistration
/// names it by.
pub(crate) struct ParkedTask {
    key: *const (),
    task: Weak<dyn CloseWake>,
}

// SAFETY: `key` is only compared, never dereferenced; the `Weak` is `Send`
// and `Sync` (its target is).
unsafe impl Send for ParkedTask {}
// SAFETY: as above: no method reads through `key`.
unsafe impl Sync for ParkedTask {}

/// A registered task, reached by close's sweep.
trait CloseWake: Send + Sync {
    fn close_wake(self: Arc<Self>);
}

impl ParkedTask {
    /// The key of the task (its header's address).
    pub(crate) fn key(&self) -> *const () {
        self.key
    }

    /// Which of `shards` the task at `key` registers in.
    pub(crate) fn shard(key: *const (), shards: usize) -> usize {
        // Cells are at least 64 bytes apart in practice: skip those bits.
        (key as usize >> 6) % shards
    }

    /// The task, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<LiveTask> {
        self.task.upgrade().map(LiveTask)
    }
}

/// A registered task held for a moment by close's sweep.
pub(crate) struct LiveTask(Arc<dyn CloseWake>);

impl LiveTask {
    /// Claims the task if it is parked, and drops it, or hands it back if
    /// it counts towards close and the deadline has not passed (see
    /// `core::parked`).
    pub(crate) fn close_wake(self) {
        self.0.close_wake();
    }
}

impl<F> CloseWake for TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn close_wake(self: Arc<Self>) {
        TaskCell::close_wake(&self);
    }
}

/// Drops the worker's reference to a task. If it is the last (the handle was
/// detached and no waker is left), this frees the cell and drops the future
/// or output: user code, whose panic must not unwind into the worker.
fn drop_reference<T>(task: Arc<T>) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(task))) {
        log::error!(
            "smartpool: dropping a finished task panicked: {}",
            super::join::panic_message(&*panic)
        );
    }
}

impl<F> Runnable for TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn header(&self) -> &Header {
        &self.header
    }

    fn run(self: Arc<Self>) -> RunOutcome {
        if self.header.state.start_running() == Start::Aborted {
            return self.finish_aborted();
        }
        // Borrows our `Arc` without a reference count of its own (two
        // atomic operations a poll, measured); a future that keeps the
        // waker clones it, which counts.
        let waker = waker_ref(&self);
        let mut cx = Context::from_waker(&waker);
        let poll = |stage: &mut Stage<F>| {
            let Stage::Running(future) = stage else {
                unreachable!("a scheduled task holds its future");
            };
            // SAFETY: the future lives inside the task's `Arc` allocation,
            // which never moves, and is never moved out of the stage: it
            // leaves only by being dropped in place by `set_stage` or with
            // the cell. So it stays pinned.
            let future = unsafe { Pin::new_unchecked(future) };
            catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx)))
        };
        // A wake of this task on this thread during the poll is recorded in
        // the thread's context (see `wake_by_ref`): no read-modify-write.
        let marker = crate::context::begin_poll(header_address(&self.header));
        // SAFETY: (the `with_stage` contract) we consumed the token and made
        // the state `RUNNING` above; we give the stage up only in the
        // transitions below, after this call.
        let polled = unsafe { self.with_stage(poll) };
        let woke_itself = marker.end();
        let output = match polled {
            Ok(Poll::Pending) => {
                // Still responsible: the registration and the counted flag
                // are ours to touch (see `core::parked`). A poll that woke
                // its own task cannot park it.
                if !woke_itself && self.header.registered.load(Ordering::Relaxed) == 0 {
                    self.register_parked();
                }
                let counted = self.header.counted.load(Ordering::Relaxed);
                match self.header.state.end_poll_pending(woke_itself) {
                    Park::Parked => {
                        self.drop_if_closing(counted);
                        drop_reference(self)
                    }
                    // Woken during the poll: the poller holds the
                    // responsibility, and hands it back (no recursion).
                    Park::Requeue => schedule(RunningTask::new(self), true),
                    // Aborted during the poll: the poller, still
                    // responsible, drops the future.
                    Park::Aborted => return self.finish_aborted(),
                }
                return RunOutcome::Pending;
            }
            Ok(Poll::Ready(value)) => Ok(value),
            Err(panic) => {
                let error = JoinError::panicked(panic);
                log::error!("smartpool: {error}");
                Err(error)
            }
        };
        // SAFETY: (the `with_stage` contract) still the poller (`RUNNING` or
        // `RUNNING+SCHEDULED`); `complete` below hands the stage to the
        // joiner.
        unsafe { self.with_stage(|stage| Self::set_stage(stage, Stage::Finished(output))) };
        self.finish()
    }

    fn cancel(&self) {
        let reason = if self.header.state.is_aborted() {
            CancelReason::Aborted
        } else {
            self.header.cancel_reason()
        };
        // A task that counts towards close, dropped because close's
        // deadline passed (not aborted by its user meanwhile): the report
        // counts it, before its count goes back (which may end the close).
        if reason == CancelReason::CloseTimedOut && self.header.counted.load(Ordering::Relaxed) {
            PoolRef::of(&self.header.scheduler).with(|pool| pool.dropped_at_deadline());
        }
        // SAFETY: (the `with_stage` contract) called by the token's holder as it drops
        // the token, in `SCHEDULED`; `complete` hands the stage on.
        unsafe { self.with_stage(|stage| Self::drop_future(stage, reason)) };
        self.complete();
        // (Never panics: `complete` and `set_stage` catch user code.)
        self.header.release_count();
    }
}

impl<F> TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// Replaces the future by a cancellation for `reason`, with the reason
    /// readable while the future drops (see `task::cancelling`).
    fn drop_future(stage: &mut Stage<F>, reason: CancelReason) {
        super::cancelling(reason, || {
            Self::set_stage(stage, Stage::Finished(Err(JoinError::cancelled(reason))))
        })
    }

    /// Registers the task with its pool as one that parks, before its
    /// first park (see `core::parked`). The caller is the poller.
    #[cold]
    #[inline(never)]
    fn register_parked(self: &Arc<Self>) {
        let task = ParkedTask {
            key: header_address(&self.header),
            task: Arc::downgrade(self) as Weak<dyn CloseWake>,
        };
        let slot = PoolRef::of(&self.header.scheduler).with(|pool| pool.register_parked(task));
        if let Some(slot) = slot {
            self.header.registered.store(slot + 1, Ordering::Relaxed);
        }
    }

    /// After parking the task (`counted`: whether it counts towards
    /// close): if close is sweeping (for an uncounted task) or past its
    /// deadline (for any), claims it back and drops it (see
    /// `core::parked`: the sweep may have passed it by).
    #[inline]
    fn drop_if_closing(self: &Arc<Self>, counted: bool) {
        let pool = PoolRef::of(&self.header.scheduler);
        if pool.with(|pool| pool.drops_parked(counted)) == Some(true) {
            self.close_wake();
        }
    }

    /// Close reaches a parked task: claims it as a wake would; drops it if
    /// it does not count towards close (with `PoolClosed`), or if it does
    /// and close's deadline passed (with `CloseTimedOut`), here, not through
    /// the behavior's followup, which might keep it; else hands it back to
    /// the pool (a spurious wake).
    fn close_wake(self: &Arc<Self>) {
        if self.header.state.wake() != WakeOutcome::Claimed {
            return;
        }
        let token = RunningTask::new(self.clone());
        // Claimed: we are responsible, and `counted` is ours to read.
        if !self.header.counted.load(Ordering::Relaxed) {
            token.set_cancel_reason(Some(CancelReason::PoolClosed));
            return drop(token);
        }
        let pool = PoolRef::of(&self.header.scheduler);
        let abandoning = pool.with(|pool| pool.drops_parked(true)) == Some(true);
        if abandoning {
            token.set_cancel_reason(Some(CancelReason::CloseTimedOut));
            drop(token);
        } else {
            schedule(token, false);
        }
    }

    /// The poller (`RUNNING`, or `SCHEDULED` after an abort at the end of
    /// a poll) drops the aborted future and completes the task.
    #[cold]
    fn finish_aborted(self: Arc<Self>) -> RunOutcome {
        // SAFETY: (the `with_stage` contract) the caller is the poller,
        // responsible until `complete` in `finish`.
        unsafe { self.with_stage(|stage| Self::drop_future(stage, CancelReason::Aborted)) };
        self.finish()
    }

    /// The stage holds the outcome: completes the task and lets go of it.
    fn finish(self: Arc<Self>) -> RunOutcome {
        self.complete();
        // The count goes back after the worker lets go of the cell: if that
        // is the last reference, the output's destructor (user code, which
        // may submit more work) runs while the pool still waits for this
        // task, as it did when the worker gave the count back.
        let count = self.header.detach_count();
        drop_reference(self);
        if let Some(count) = count {
            give_back(count);
        }
        RunOutcome::Completed
    }
}

impl<F> Abort for TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn abort(self: Arc<Self>) {
        if self.header.state.abort() == AbortOutcome::Claimed {
            // Claimed as a wake would: the pool drops the future when it
            // runs the token (or at once, if the pool is gone).
            schedule(RunningTask::new(self), false);
        }
    }

    fn is_complete(&self) -> bool {
        self.header.state.is_complete()
    }
}

impl<F> ArcWake for TaskCell<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    /// A wake during the task's own poll, on the polling thread (a
    /// yield, a future that finds more to do), is recorded in the thread's
    /// context, for the poll's end to re-queue the task: that thread holds
    /// the responsibility, and the poll's end is sequenced after the wake,
    /// so there is nothing to publish. Any other wake goes through the state
    /// word.
    fn wake_by_ref(arc_self: &Arc<Self>) {
        if crate::context::wake_polling(header_address(&arc_self.header)) {
            return;
        }
        if arc_self.header.state.wake() == WakeOutcome::Claimed {
            schedule(RunningTask::new(arc_self.clone()), false);
        }
    }
}
