//! `JoinHandle` and `JoinError`: how a submitter learns what its task came to.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::{RunningTask, SchedulerRef};
use crate::contain::panic_message;

/// Read access to a finished task's output; as an [`Abort`], the same task
/// to control.
pub(super) trait JoinTarget<T>: Abort {
    fn register(&self, cx: &Context<'_>);
    /// Takes the output.
    ///
    /// # Safety
    ///
    /// The caller is the task's one `JoinHandle`, has seen `is_complete()`
    /// return `true`, and calls this once.
    unsafe fn take_output(&self) -> Result<T, JoinError>;
    /// The handle is gone: nobody will await the task.
    fn detach(&self);
    /// The channel the task is queued in, if it is (a hint, for priority
    /// inheritance: see [`JoinHandle`]'s `poll`).
    fn queued_in(&self) -> Option<usize>;
}

/// Controlling a task, whatever its output type: aborting it, moving it.
pub(crate) trait Abort: Send + Sync {
    /// Asks for the task to be dropped (see the module doc's "Abort").
    fn abort(self: Arc<Self>);
    fn is_complete(&self) -> bool;
    /// Whether the task belongs to the pool behind `scheduler`.
    fn belongs_to(&self, scheduler: &SchedulerRef) -> bool;
    /// A move (see the parent module's "Moves"): if the task is queued,
    /// claims it and returns the token of its new line, to be queued in
    /// channel `channel`.
    fn claim_move(self: Arc<Self>, channel: usize) -> Result<RunningTask, MoveError>;
}

enum Handle<T> {
    Task(Arc<dyn JoinTarget<T>>),
    /// The pool refused the task, for this reason.
    Rejected(CancelReason),
    /// The output was returned.
    Done,
}

/// A future that resolves to the output of a submitted task.
///
/// Resolves to `Ok(output)` when the task finished, or to a [`JoinError`] if
/// it panicked or was cancelled (aborted, the pool closed before it could
/// finish, or its behavior's followup dropped it). Dropping the handle
/// detaches the task: it still runs, and its output is dropped (as with
/// tokio's `JoinHandle`; [`JoinHandle::abort`] stops it). A detached
/// future that is parked when the last [`Waker`](std::task::Waker) to it
/// is dropped can never run again: it is dropped then and there (tokio
/// keeps it until the runtime shuts down), so its `Drop` runs at once.
///
/// **Priority inheritance.** A task running on a worker of the pool that
/// awaits the handle while the awaited task is still queued, not started,
/// in a channel of a *lower* level (and was never moved) moves it to the
/// waiter's own channel, once: it then runs as if it had been submitted
/// there, instead of waiting behind the lower level's backlog (see
/// [`JoinHandle::move_to`]). A wait from a level at or below the task's,
/// from outside the pool, a blocking thread or another pool changes
/// nothing, as does one that would move a task out of a
/// `complete_on_close` channel into one that is not, or one while the pool
/// closes. Each task moves once at most, so a cycle of waits ends. A task
/// that has started (parked, or queued again after a wake-up) is not
/// raised; scoped tasks need no raise, since a waiting scope runs its own
/// unstarted tasks first. The move calls the channel's `push` on the
/// waiter's thread, inside the waiter's poll. No other executor does
/// this: tokio, rayon and async-executor leave the awaited task where it
/// is.
///
/// Inheritance is right when the waiter cannot go on without the task:
/// its level's latency then depends on the task. It is wrong when the
/// wait is only where the result is delivered: a connection task at the
/// top level that awaits a batch request's handler, say. Raised, every
/// batch request would run at the connection's level. Such a waiter
/// awaits [`JoinHandle::without_inheritance`].
#[must_use = "dropping a JoinHandle detaches the task; await it to get its output"]
pub struct JoinHandle<T> {
    handle: Handle<T>,
    /// Awaiting this handle raises the task (see "Priority inheritance").
    inherit: bool,
}

impl<T> JoinHandle<T> {
    pub(super) fn new(task: Arc<dyn JoinTarget<T>>) -> JoinHandle<T> {
        JoinHandle {
            handle: Handle::Task(task),
            inherit: true,
        }
    }

    /// A handle for a task the pool refused: resolves to a cancellation
    /// for `reason`.
    pub(crate) fn rejected(reason: CancelReason) -> JoinHandle<T> {
        JoinHandle {
            handle: Handle::Rejected(reason),
            inherit: true,
        }
    }

    /// The same handle, whose await never raises the task: the task runs
    /// at the level it was submitted to, whoever waits for it (see
    /// "Priority inheritance" above). [`JoinHandle::move_to`] still moves
    /// it.
    ///
    /// ```
    /// use smartpool::prelude::*;
    ///
    /// let owned = smartpool::Builder::new().levels(2).threads(1).build()?;
    /// let pool = owned.pool.clone();
    /// let answer = owned.pool.level(0).exec(async move {
    ///     // A batch job at level 1: awaited here, it stays at level 1.
    ///     let batch = pool.level(1).exec(async { 42 });
    ///     batch.without_inheritance().await
    /// });
    /// assert_eq!(futures::executor::block_on(answer)??, 42);
    /// owned.close().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn without_inheritance(mut self) -> JoinHandle<T> {
        self.inherit = false;
        self
    }

    /// Whether the task has finished (completed, panicked or cancelled), so
    /// that awaiting the handle returns at once.
    pub fn is_finished(&self) -> bool {
        !matches!(&self.handle, Handle::Task(task) if !task.is_complete())
    }

    /// Aborts the task, as tokio's `JoinHandle::abort`: a queued task is
    /// dropped without being polled; a parked one is handed to the pool,
    /// which drops its future (no wake-up needed); a running one is dropped
    /// right after its current poll returns `Pending` (if that poll returns
    /// `Ready`, the task completes with its output). The handle then
    /// resolves to a [`JoinError`] whose [`JoinError::is_cancelled`] is
    /// true, with [`CancelReason::Aborted`]. Aborting a finished task, or
    /// twice, does nothing. An aborted task of a `complete_on_close`
    /// channel no longer holds close once its future is dropped.
    ///
    /// A parked task is handed to the pool as a wake would hand it: through
    /// the behavior's `followup`, on the calling thread. Its future is
    /// then dropped where the pool drops the task (a worker), or right
    /// away if the followup drops it or the pool is gone. A panic in the
    /// future's `Drop` is caught and logged (tokio reports it as the
    /// handle's panic instead: here the handle still says the task was
    /// aborted).
    pub fn abort(&self) {
        if let Some(task) = self.control() {
            task.abort();
        }
    }

    /// The task, to control (`None` once it returned its output, or if the
    /// pool refused it).
    pub(crate) fn control(&self) -> Option<Arc<dyn Abort>> {
        let Handle::Task(task) = &self.handle else {
            return None;
        };
        Some(task.clone())
    }

    /// A handle that can abort the task without owning its output (tokio's
    /// `JoinHandle::abort_handle`). Cloneable. It holds the task weakly: it
    /// does not keep a finished task's output, nor a task nobody can wake
    /// any more, from being freed.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.control().as_ref().map(Arc::downgrade))
    }
}

/// Aborts a task without owning its output: see [`JoinHandle::abort`].
/// Made by [`JoinHandle::abort_handle`] (or by a `JoinSet`); cloneable.
// `None` for a task the pool refused, or whose output was taken.
#[derive(Clone)]
pub struct AbortHandle(Option<Weak<dyn Abort>>);

impl AbortHandle {
    /// Aborts the task: see [`JoinHandle::abort`]. Does nothing once it
    /// finished, or when called again.
    pub fn abort(&self) {
        if let Some(task) = self.control() {
            task.abort();
        }
    }

    /// Whether the task has finished (completed, panicked or cancelled),
    /// or is gone (freed with its last waker and handle).
    pub fn is_finished(&self) -> bool {
        self.control().is_none_or(|task| task.is_complete())
    }

    /// The task, to control (`None` once it is gone).
    pub(crate) fn control(&self) -> Option<Arc<dyn Abort>> {
        self.0.as_ref()?.upgrade()
    }
}

// Like tokio's: aborting from a `catch_unwind` closure is fine.
impl std::panic::UnwindSafe for AbortHandle {}
impl std::panic::RefUnwindSafe for AbortHandle {}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let output = match &self.handle {
            Handle::Task(task) => {
                if !task.is_complete() {
                    if let Some(channel) = task.queued_in().filter(|_| self.inherit) {
                        // Awaited while queued: priority inheritance.
                        super::cell::inherit(task.clone(), channel);
                    }
                    task.register(cx);
                    // Register, then check again: the completer sets COMPLETE
                    // before it wakes the registered waker.
                    if !task.is_complete() {
                        return Poll::Pending;
                    }
                }
                // SAFETY: `is_complete()` returned true just above, and the
                // handle becomes `Done` below: this is the one take.
                unsafe { task.take_output() }
            }
            Handle::Rejected(reason) => Err(JoinError::cancelled(*reason)),
            Handle::Done => panic!("JoinHandle polled after it returned"),
        };
        self.handle = Handle::Done;
        Poll::Ready(output)
    }
}

impl<T> Drop for JoinHandle<T> {
    /// Detaches the task. If it already finished and the pool let go of it,
    /// this drops its output here: user code, whose panic is caught and
    /// logged (as tokio does), so dropping a handle never panics.
    fn drop(&mut self) {
        if let Handle::Task(task) = std::mem::replace(&mut self.handle, Handle::Done) {
            task.detach();
            crate::contain::drop_contained(task, "dropping a finished task's output");
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a task gave no output.
pub struct JoinError(Box<Repr>);

/// Why a task was cancelled: see [`JoinError::cancel_reason`].
#[non_exhaustive]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CancelReason {
    /// The pool is closing or closed: it refused the task, or dropped it
    /// queued (a channel that is not `complete_on_close`), or the task was
    /// woken after the pool terminated.
    PoolClosed = 1,
    /// The channel it was submitted to is attached to no pool: it is
    /// missing from the behavior's config (or the pool failed to start).
    ChannelNotAttached = 2,
    /// The behavior's `followup` dropped the woken task instead of
    /// submitting it (or panicked).
    DroppedByFollowup = 3,
    /// A followup submitted the task to a channel of another pool.
    OtherPool = 4,
    /// Its channel dropped it (a channel of your own discarding a task)
    /// while the pool was open.
    DroppedByChannel = 5,
    /// [`JoinHandle::abort`] or [`AbortHandle::abort`] was called.
    Aborted = 6,
    /// The deadline of [`OwnedPool::close_timeout`](crate::OwnedPool::close_timeout)
    /// passed before the task finished.
    CloseTimedOut = 7,
    /// No thread could be started to run it: a
    /// [`spawn_blocking`](crate::Pool::spawn_blocking) closure when the
    /// system refused a new thread and none of the pool's blocking threads
    /// was running.
    SpawnFailed = 8,
}

impl CancelReason {
    /// The reason whose discriminant is `code`, if any (0 is none).
    pub(crate) fn from_code(code: u8) -> Option<CancelReason> {
        Some(match code {
            1 => CancelReason::PoolClosed,
            2 => CancelReason::ChannelNotAttached,
            3 => CancelReason::DroppedByFollowup,
            4 => CancelReason::OtherPool,
            5 => CancelReason::DroppedByChannel,
            6 => CancelReason::Aborted,
            7 => CancelReason::CloseTimedOut,
            8 => CancelReason::SpawnFailed,
            _ => return None,
        })
    }

    fn describe(self) -> &'static str {
        match self {
            CancelReason::PoolClosed => "the pool closed before it finished",
            CancelReason::ChannelNotAttached => {
                "its channel is attached to no pool (is the channel missing from the config?)"
            }
            CancelReason::DroppedByFollowup => {
                "the behavior's followup dropped it instead of submitting it"
            }
            CancelReason::OtherPool => "a followup submitted it to a channel of another pool",
            CancelReason::DroppedByChannel => "its channel dropped it while the pool was open",
            CancelReason::Aborted => "aborted",
            CancelReason::CloseTimedOut => "the pool's close deadline passed before it finished",
            CancelReason::SpawnFailed => "no thread could be started to run it",
        }
    }
}

/// What a [`JoinError`] holds, boxed: the error is one word, so that
/// `Result<T, JoinError>` of a small `T` is one word too, and so is a
/// small task's stage. A cancellation allocates this box; a task that
/// finishes allocates none.
enum Repr {
    Cancelled(CancelReason),
    /// The mutex makes the error `Sync`, as error types are expected to be.
    Panicked(std::sync::Mutex<Box<dyn Any + Send + 'static>>),
}

impl JoinError {
    pub(crate) fn cancelled(reason: CancelReason) -> JoinError {
        JoinError(Box::new(Repr::Cancelled(reason)))
    }

    pub(crate) fn panicked(payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError(Box::new(Repr::Panicked(std::sync::Mutex::new(payload))))
    }

    /// The task was dropped before it finished, or never accepted:
    /// [`JoinError::cancel_reason`] says why.
    pub fn is_cancelled(&self) -> bool {
        matches!(*self.0, Repr::Cancelled(_))
    }

    /// Why the task was cancelled, or `None` if it panicked.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        match *self.0 {
            Repr::Cancelled(reason) => Some(reason),
            Repr::Panicked(_) => None,
        }
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(*self.0, Repr::Panicked(_))
    }

    /// The panic's payload, to resume it with `std::panic::resume_unwind`.
    /// Returns the error back if the task did not panic.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match *self.0 {
            Repr::Panicked(payload) => Ok(payload.into_inner().unwrap_or_else(|p| p.into_inner())),
            Repr::Cancelled(_) => Err(self),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Repr::Cancelled(reason) => write!(f, "task cancelled: {}", reason.describe()),
            Repr::Panicked(payload) => {
                // The message is copied out first: `f` runs unlocked.
                let payload = payload.lock().unwrap_or_else(|p| p.into_inner());
                let message = panic_message(&**payload).to_owned();
                drop(payload);
                write!(f, "task panicked: {message}")
            }
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinError({self})")
    }
}

impl std::error::Error for JoinError {}

/// Why a move ([`JoinHandle::move_to`], [`AbortHandle::move_to`]) did
/// nothing. The task stays where it was, as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MoveError {
    /// The task is being polled (it is in no queue), or its last poll,
    /// woken during it, re-queued it and it has not started since (it has
    /// started: see `Started`).
    Running,
    /// The task waits for a wake-up: it is in no queue.
    Parked,
    /// The task finished, was cancelled, or its output was taken.
    Finished,
    /// An abort was asked: the task is dropped wherever it is.
    Aborted,
    /// The task was polled already (it is queued again after a wake-up
    /// while it was parked, or about to be), or is a blocking task: only a
    /// task that has not started moves.
    Started,
    /// The task moved more times than its state word counts (2^59 on a
    /// 64-bit target).
    TooManyMoves,
    /// The channel is not attached to a pool.
    NotAttached,
    /// The channel belongs to another pool than the task.
    OtherPool,
    /// The pool is closing: it admits no task on the channel.
    Closed,
}

impl fmt::Display for MoveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MoveError::Running => "the task is running (or re-queued by its last poll)",
            MoveError::Parked => "the task is parked, waiting for a wake-up",
            MoveError::Finished => "the task has finished",
            MoveError::Aborted => "the task was aborted",
            MoveError::Started => "the task has started (only a task not yet started moves)",
            MoveError::TooManyMoves => "the task was moved too many times",
            MoveError::NotAttached => "the channel is not attached to a pool",
            MoveError::OtherPool => "the channel belongs to another pool",
            MoveError::Closed => "the pool is closing",
        })
    }
}

impl std::error::Error for MoveError {}
