//! Tasks: the heap cell that holds a future, the token that stands for the
//! responsibility to run it, its waker, and its `JoinHandle`.
//!
//! # Ownership
//!
//! A task is one allocation, an `Arc<TaskCell<F>>`, holding a header (state
//! word, channel it came from, close accounting, a thin pointer to its
//! pool's `Weak`, the joiner's waker) and the *stage*: the future while it
//! runs, its output or error once finished, then nothing.
//! Three kinds of party hold an `Arc` to it:
//!
//! * the [`RunningTask`] token, of which at most one is live (a move leaves
//!   stale ones behind, see "Moves"): whoever holds the live one (a
//!   channel's queue, or the worker running it) is *responsible* for the
//!   task; dropping it cancels the task;
//! * wakers, any number, which never touch the stage;
//! * the [`JoinHandle`], which reads the stage only after `COMPLETE`; a
//!   task made without one (`Exec::exec_detached`) is born as if its
//!   handle had been dropped before it ran (`joined` clear).
//!
//! The pool is reached through a `Weak` (one per pool, behind the
//! `SchedulerRef` that its tasks share): a task never keeps its pool alive,
//! and a waker that fires after the pool is gone drops the task instead.
//!
//! # States (see `state`)
//!
//! | state               | responsible party                              |
//! |---------------------|------------------------------------------------|
//! | `IDLE`              | nobody: parked, waiting for a wake-up          |
//! | `SCHEDULED`         | the token's holder (a queue, a followup call)  |
//! | `RUNNING`           | the worker polling it; once that poll, woken   |
//! |                     | during it, re-queued the task: the token's     |
//! |                     | holder (see "Re-queued running" below)         |
//! | `RUNNING+SCHEDULED` | the same: woken meanwhile                      |
//! | `COMPLETE`          | nobody: the future is gone                     |
//!
//! An `ABORTED` flag rides on `SCHEDULED` (alone or with `RUNNING`): an
//! abort was asked, and the party responsible drops the future instead of
//! polling it again (see "Abort" below).
//!
//! Transitions, each one atomic read-modify-write of the word (a self-wake
//! alone writes only a thread-local, and a poll that re-queues its task
//! writes nothing: below):
//!
//! * spawn creates the task `SCHEDULED` with its token;
//! * `SCHEDULED → RUNNING` by the token's holder (the token is consumed;
//!   the first start also sets `STARTED`, see "Moves"); the same start
//!   takes a word left running by a re-queue (below) to plain `RUNNING`;
//! * poll returned `Pending`: one CAS takes `RUNNING → IDLE`
//!   (responsibility given up); if a wake came during the poll the CAS
//!   fails on `RUNNING+SCHEDULED`, the word stays so, and the worker
//!   re-creates the token and hands it to followup ("Re-queued running"):
//!   no recursion, so a future that wakes itself a million times
//!   completes;
//! * wake: `IDLE → SCHEDULED` (the waker now holds responsibility: it makes
//!   the token and hands it to the behavior's followup), `RUNNING →
//!   RUNNING+SCHEDULED`; in any other state a wake changes nothing;
//! * a wake *on the polling thread during the task's own poll* (a yield)
//!   does not touch the word: the thread's context records it (the marker
//!   names the innermost task being polled there, saved and restored
//!   around nested polls), and the poll's end, with `Pending`, re-queues
//!   the task without touching the word either. The wake is sequenced
//!   before the poll's end on one thread, so nothing needs publishing;
//!   wakes from elsewhere during that poll still set `SCHEDULED`, acquired
//!   by the first start that reads it, or by a poll's end, whose CAS fails
//!   on it;
//! * poll returned `Ready` or panicked, or the token was dropped:
//!   `→ COMPLETE`, then the joiner is woken.
//!
//! # Re-queued running
//!
//! A poll that ends woken (by itself, or by a wake from elsewhere that its
//! CAS found) leaves the word `RUNNING(+SCHEDULED)` and hands a token to
//! the followup: the word does not say whether the poll is over. The token
//! does. The poll's end marks the token it makes (the *re-queue mark*, in
//! the token's entry; every other token is made unmarked), and no token of
//! a line exists while a poll in that line runs (the start consumed the
//! last one, and only the poll's end makes the next). So a marked token
//! that finds its line `RUNNING` was made by the poll that ended, and is
//! the live one: its start claims the word as it finds it, like a
//! `SCHEDULED` one; an unmarked token never takes a running word. Until
//! that start the task is queued but reads as running: a wake sets
//! `SCHEDULED` (a poll is still to come, as the invariant below wants), an
//! abort sets its flag for that start to find, a move is refused as for a
//! running task (it has started anyway).
//!
//! What this saves is the read-modify-write of a yield's end: a yield is
//! its next start's CAS and two more locked instructions on x86 (the
//! channel's status fence, its queue's pop). What orders the stage then is
//! the token's hand-over: the poller's last access to the stage is
//! sequenced before it hands the token to the followup, and whoever starts
//! (or drops) the token next received it through the followup and a
//! channel. Every hand-over of an owned value to another thread in safe
//! Rust carries a release and an acquire (a lock, a channel, an atomic
//! pointer's publication), so the next poll happens after the last. The
//! start expects the running word with nothing added; a wake meanwhile
//! costs it a second CAS (so a poll woken from elsewhere costs three
//! read-modify-writes: its end's failed CAS and its next start's two).
//!
//! # Abort
//!
//! An abort (`JoinHandle::abort`, `AbortHandle::abort`, from any thread) is
//! a wake that also sets `ABORTED`, so it needs no state of its own:
//!
//! * `IDLE → SCHEDULED+ABORTED`: the aborter claims the parked task as a
//!   waker would and hands the token to the pool, through the behavior's
//!   followup, on the aborter's thread (as tokio and async-task hand it to
//!   their scheduler): the future is dropped where the token is run or
//!   dropped, by a worker, or there and then if the followup drops it or
//!   the pool is gone;
//! * `SCHEDULED → SCHEDULED+ABORTED`: whoever runs the token finds the flag
//!   as it starts (`start` returns it) and drops the future
//!   unpolled; whoever drops the token cancels it as `Aborted`;
//! * `RUNNING(+SCHEDULED) → RUNNING+SCHEDULED+ABORTED`: the poll in progress
//!   ends; if it returned `Pending` without waking itself, the poller
//!   still holds the task (as after any wake: its CAS fails, and no token
//!   is made) and, seeing the flag, drops the future instead of
//!   re-queueing it; if it woke itself, it re-queues the task without
//!   looking, and the token's start finds the flag; if it returned `Ready`
//!   or panicked, the task completes with its output or its panic (the
//!   abort came too late). The same goes for a task re-queued running
//!   (above): its start finds the flag;
//! * with `ABORTED` already set, or `COMPLETE`: nothing.
//!
//! An aborted task completes with `JoinError::cancelled(Aborted)` and gives
//! back its count towards close, like any cancelled one. Since an abort is
//! a wake, the invariants below hold unchanged: the flag never leaves
//! `SCHEDULED`, so a wake still finds `IDLE` only for a task nobody is
//! responsible for.
//!
//! # Moves (re-prioritising a queued task)
//!
//! A task that is queued can be *moved* to another channel of its pool
//! ([`JoinHandle::move_to`], and priority inheritance, which moves a queued
//! child to the channel of a higher-level task that awaits it). A channel
//! is opaque: the token in the old queue cannot be taken out. So a move
//! leaves it there, *stale*, and queues a second token; the state word
//! tells the two apart.
//!
//! * The word's high bits hold the task's *line*: 0 until its first move,
//!   bumped by each move. Every token carries the line it was made for: the
//!   cell's own token is line 0; a token made in a later line is a small
//!   wrapper (`Moved`) around the cell that records its line.
//! * A move is a claim: one CAS takes `SCHEDULED` (not aborted, not
//!   `STARTED`) in line `g` to `SCHEDULED` in line `g + 1`, and the mover
//!   makes the line's token and submits it. In any other state the move
//!   does nothing and says why (running, parked, finished, aborted,
//!   started); a move that would wrap the line counter is refused.
//! * Only a task that has not started moves. The first start sets
//!   `STARTED` for good (it is in the value the start's CAS writes), and a
//!   blocking task is made with it. So a move always finds the task's one
//!   token made and handed on (it was made with the task), or being made
//!   by the move before, at once after its CAS: that wrapper is then
//!   stale from birth, harmlessly (it writes only its own fields), and
//!   that mover's `Ok` says only that it queued its token. A started
//!   task's `SCHEDULED` may have no token yet (a waker or an aborter about
//!   to make it): a move there would race its maker for the line's fields.
//!   It also keeps the header's `moved` entry to one writer at a time: only
//!   the start that succeeds in a moved line writes it first.
//! * Every transition that *uses* a token is a claim of its line: starting
//!   it (`SCHEDULED(+ABORTED)` in its line, or the word a re-queue left
//!   running in it, `→ RUNNING`) and cancelling it (the same claim, then
//!   the drop). A token whose line is not the word's, or that finds the
//!   word neither `SCHEDULED` nor (for a token the re-queue marked)
//!   `RUNNING`, is stale: its holder drops it and touches nothing of the
//!   task but its own entry.
//! * What *makes* a token (a wake or an abort claiming a parked task,
//!   close's sweep, and a poll ending woken, which writes nothing) keeps
//!   the line (and `STARTED`) and makes the token for it. No other token
//!   of that line exists then (the last one was consumed when the poll
//!   started, or none was made since the task parked), so a line has at
//!   most one token, and tokens of older lines are stale forever.
//! * A token's own fields (its `Entry`: the channel it is in or came from,
//!   whether it counts towards close, its cancel reason, its re-queue mark)
//!   live in the token: the cell's header for line 0, the wrapper for later
//!   lines. A stale token in transit (a LIFO slot flushed into its channel,
//!   a followup submitting it) writes only its own. Its count towards close
//!   is its own too, given back when it is found stale: a stale token in a
//!   `complete_on_close` channel holds close until a worker pops it, as
//!   the workers do while close waits for that channel.
//! * While a moved task runs or is parked, its line's fields sit in the
//!   header's second entry (`moved`), written only by the party the state
//!   word makes responsible: the poller moves the running wrapper's fields
//!   in as its start claim succeeds, and a token maker moves them out into
//!   the new wrapper. So each count towards close is in exactly one place.
//!
//! An unmoved task keeps its cost: starting it is one CAS instead of one
//! swap (the token's entry carries a `STARTED` hint, so that the CAS
//! expects the right word), and everything else is as before.
//!
//! Stale tokens are work the pool's bookkeeping cannot tell from real work
//! until a worker pops one: they keep a channel's status bit set, count as
//! tasks for a custom channel, for `run_until_stalled` and for the deadlock
//! report's confirmation, and may wake a worker for nothing. Each costs
//! one pop, once.
//!
//! # Invariants
//!
//! * At most one live token exists (one of the word's line, see "Moves"),
//!   and only while the word is `SCHEDULED` (with or without `ABORTED`),
//!   or once the poll that re-queued the task made it (the word left
//!   running, see "Re-queued running"); never while a poll in its line
//!   runs. So one thread at a time polls the task, and it is queued at
//!   most once. `SCHEDULED` without a live token: for a moment, while the
//!   party that claimed it (a waker, an aborter, close's sweep, a mover)
//!   makes it. It cannot be moved: only a task not started moves, and a
//!   mover makes its token at once.
//! * Every wake-up is honoured: a wake that finds the task `IDLE` re-queues
//!   it; one that finds it `RUNNING` sets `SCHEDULED`, which makes the
//!   poller re-queue it (or, re-queued already, is acquired by the first
//!   start that reads it, or by a poll's end, whose CAS fails on it);
//!   one that finds it `SCHEDULED` or `RUNNING+SCHEDULED` (a poll is still
//!   to come) writes the state back unchanged, a read-modify-write that
//!   publishes the waker's memory to that coming poll, whose own start
//!   acquires it. Without
//!   that write, a waker's store and the poller's read could miss each other
//!   (store buffering) and the wake-up would be lost.
//! * The stage is touched only by the token holder (poll, cancel) or the
//!   poller that ended a poll aborted, after
//!   `COMPLETE` by the joiner, and by whoever drops the last `Arc` (the cell
//!   is freed with what the stage holds), each handing it on by a state
//!   transition that orders their accesses (or, from a poll that
//!   re-queued the task, by the token's hand-over: "Re-queued running"). So it needs no lock: it is an
//!   `UnsafeCell`, accessed through one `unsafe fn` whose contract is this
//!   rule (a mutex would cost two atomic operations a poll). Under loom
//!   the cell is loom's,
//!   which reports two accesses through it that the transitions do not
//!   order (not the free by the last `Arc`, which loom does not see).
//! * The task is freed when the last `Arc` goes, exactly once, by `Arc`. A
//!   task freed while still counted towards close releases its count then.
//! * User code run on the pool's behalf (poll, the future's and the
//!   output's drop, the joiner's waker) is caught: a panic there never
//!   unwinds through the state machine or the close accounting.

use std::future::Future;
use std::sync::{Arc, Weak};

mod cell;
mod join;
mod join_waker;
mod state;

pub use cell::RunningTask;
pub use join::{AbortHandle, CancelReason, JoinError, JoinHandle, MoveError};

pub(crate) use join::Abort as Control;

pub(crate) use cell::{
    spawn, spawn_detached, spawn_unmovable, with_polling_task, CloseWake, RunOutcome, CHANNEL_BITS,
    STAMP,
};

/// A task's way to its pool, one thin pointer in every task's header: an
/// `Arc` of the pool's `Weak<dyn Schedule>`, made once a pool (a `Weak` in
/// each header would be a word more a task). The `Weak` keeps the pool's
/// allocation reserved, not the pool alive: a task's pointer to its pool
/// (`as_ptr`) stays unique while the task exists, and `Weak::ptr_eq` tells
/// whether two tasks share a pool. The address is `Weak::as_ptr`'s, reached
/// as `scheduler.as_ptr()`: `Arc::as_ptr(&scheduler)` would be the `Arc`'s.
pub(crate) type SchedulerRef = Arc<Weak<dyn Schedule>>;

/// A future a task can hold: it and its output go to other threads.
pub(crate) trait TaskFuture: Future<Output: Send + 'static> + Send + 'static {}

impl<F: Future<Output: Send + 'static> + Send + 'static> TaskFuture for F {}

/// What a task needs from its pool. Implemented by the pool; the task holds
/// it through a `Weak` (in its [`SchedulerRef`]), which a wake on one of
/// the pool's own workers does not need to upgrade (see `cell::PoolRef`).
pub(crate) trait Schedule: std::any::Any + Send + Sync {
    /// The one way back to the scheduler: a task is runnable again, and
    /// `task` is the responsibility for it. Whether it was woken during its
    /// own poll (a yield, or a wake that raced the poll), which the pool
    /// queues behind other work, the token says: its re-queue mark, which
    /// `RunningTask::enter_channel` reports as it enters a channel (tokio's
    /// `schedule_task(task, is_yield)`, async-task's
    /// `ScheduleInfo::woken_while_running`); otherwise a parked task was
    /// woken.
    fn schedule(&self, task: RunningTask);
    /// What a task tells its pool besides: see [`Event`].
    fn report(&self, event: Event<'_>);
    /// The pool's registry of parked tasks, for close's sweep.
    fn parked(&self) -> &dyn ParkedRegistry;
    /// Whether the pool has begun to close (to say why a task was dropped).
    fn is_closing(&self) -> bool;
    /// Priority inheritance: a task polled from channel `waiter` awaits one
    /// queued in channel `queued`. If `waiter`'s level is higher, the pool
    /// admits a move to `waiter` and calls `claim` with that channel's
    /// index; a token it returns is queued there (see "Moves").
    fn boost(
        &self,
        waiter: usize,
        queued: usize,
        claim: &mut dyn FnMut(usize) -> Result<RunningTask, MoveError>,
    );
}

/// What a task reports to its pool ([`Schedule::report`]).
pub(crate) enum Event<'a> {
    /// The task gives back its count towards close: it completed, was
    /// cancelled or freed, or moved to a dropping channel.
    Released,
    /// The task, polled from channel `channel` (`None`: a blocking task),
    /// panicked with `panic`; `detached`: its `JoinHandle` was dropped, so
    /// nobody will see the error. Reported on the polling thread, before
    /// the task completes.
    Panicked {
        channel: Option<usize>,
        panic: &'a (dyn std::any::Any + Send),
        detached: bool,
    },
    /// A token of channel `channel` was dropped unrun, for the pool's
    /// counts: `cancelled`, its task is cancelled (else the token was
    /// stale); `queued`, it was dropped in the channel's queue.
    Dropped {
        channel: usize,
        cancelled: bool,
        queued: bool,
    },
}

/// Where a pool keeps its parked tasks (weakly), so that close can sweep
/// them (see `core::parked`).
pub(crate) trait ParkedRegistry {
    /// The task is about to park for the first time: kept (weakly) under
    /// `key`, its header's address, and its slot returned, for
    /// [`ParkedRegistry::unregister`].
    fn register(&self, key: usize, task: Weak<dyn CloseWake>) -> u32;
    /// The task registered under `key` in `slot` is being freed.
    fn unregister(&self, key: usize, slot: u32);
    /// Whether a task that parks now must be dropped: close's sweep has
    /// begun (for a task not `counted` towards close), or close's deadline
    /// passed (for any).
    fn drops(&self, counted: bool) -> bool;
    /// A counted task was dropped because close's deadline passed (called
    /// by its cancellation, once, before its count goes back).
    fn count_abandoned(&self);
}

/// While a cancelled task's future is being dropped on this thread: why.
pub(crate) fn cancel_reason() -> Option<CancelReason> {
    CancelReason::from_code(crate::context::cancelling())
}

#[cfg(all(test, loom))]
mod loom_model;
#[cfg(all(test, not(loom)))]
mod test;
