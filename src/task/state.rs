//! The task state word and its transitions. See the parent module for the
//! state table and the invariants these transitions keep.

use super::join::MoveError;
use crate::sync::{AtomicUsize, Ordering};

/// Parked: nobody is responsible until a wake claims it.
const IDLE: usize = 0;
/// A worker is polling it.
const RUNNING: usize = 1;
/// Alone: a token exists, the task is queued or about to be run. With `RUNNING`,
/// it was woken during its poll, and the poller will re-queue it (the
/// "woken" state of the module doc). One bit for both, so that ending a
/// poll is one subtraction of `RUNNING`, or one swap to `SCHEDULED` after a
/// self-wake (see `end_poll_pending`).
const SCHEDULED: usize = 2;
/// Finished or cancelled; the future is gone. Final.
const COMPLETE: usize = 4;
/// With `SCHEDULED`: an abort was asked; the responsible party drops the
/// future instead of polling it (see the parent module's "Abort").
const ABORTED: usize = 8;
/// The four bits above: what the task is doing.
const KIND: usize = 15;
/// Set by the first start, never cleared (until `COMPLETE`): the task was
/// polled (or is a blocking task, made started). Only a task that has not
/// started can move: its one token was made as it was spawned or moved,
/// before anyone could claim it again (see the parent module's "Moves").
const STARTED: usize = 16;
/// The bits above are the state; the rest of the word is the task's line
/// (see the parent module's "Moves"), kept as it is in the word: a
/// multiple of [`LINE_ONE`], 0 for a task never moved.
const STATE: usize = KIND | STARTED;
/// One move: the line's step.
const LINE_ONE: usize = 32;

/// A task's line as the word holds it (see the parent module's "Moves"):
/// which of its tokens is live.
pub(crate) type Line = usize;

/// The line of a task never moved: its cell's own token.
pub(crate) const FIRST_LINE: Line = 0;

/// What a wake did.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// `IDLE → SCHEDULED`: the waker is now responsible and must queue it,
    /// with a token of this line.
    Claimed(Line),
    /// A poll is still to come (it was scheduled, or running: then now woken).
    Pending,
    /// The task is complete: nothing to do.
    Complete,
}

/// What an abort did.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Abort {
    /// `IDLE → SCHEDULED+ABORTED`: the aborter is now responsible and must
    /// hand the task to the pool, with a token of this line.
    Claimed(Line),
    /// The flag is set for the party responsible, or was set already, or
    /// the task is complete: nothing to do.
    Done,
}

/// How the token's holder starts a task.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// `SCHEDULED → RUNNING`: poll it.
    Poll,
    /// `SCHEDULED+ABORTED → RUNNING`: drop the future instead.
    Aborted,
    /// The token is stale (see the parent module's "Moves"): another token
    /// took the task over; drop this one, touching nothing but its entry.
    Stale,
}

/// How a poll that returned `Pending` ends.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Park {
    /// `RUNNING → IDLE`: responsibility given up.
    Parked,
    /// `RUNNING+SCHEDULED → SCHEDULED` (or `RUNNING → SCHEDULED` after a
    /// self-wake): woken during the poll; re-queue it.
    Requeue,
    /// Aborted during the poll: `→ SCHEDULED`; the poller, still
    /// responsible, drops the future.
    Aborted,
}

#[derive(Debug)]
pub(crate) struct State(AtomicUsize);

impl State {
    /// A new task: scheduled, its token about to be made.
    pub(crate) fn new_scheduled() -> State {
        State(AtomicUsize::new(SCHEDULED))
    }

    /// A new task that can never move (a blocking task): scheduled, and
    /// marked started already.
    pub(crate) fn new_unmovable() -> State {
        State(AtomicUsize::new(SCHEDULED | STARTED))
    }

    /// A wake-up, from any thread.
    #[inline]
    pub(crate) fn wake(&self) -> Wake {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let (next, outcome) = match current & KIND {
                IDLE => (current | SCHEDULED, Wake::Claimed(current & !STATE)),
                RUNNING => (current | SCHEDULED, Wake::Pending),
                COMPLETE => return Wake::Complete,
                // SCHEDULED or RUNNING+SCHEDULED: write it back unchanged to
                // publish our memory to the coming poll (see the module doc).
                _ => (current, Wake::Pending),
            };
            match self
                .0
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return outcome,
                Err(actual) => current = actual,
            }
        }
    }

    /// An abort, from any thread: a wake that also sets `ABORTED` (see the
    /// parent module's "Abort").
    pub(crate) fn abort(&self) -> Abort {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let (next, outcome) = match current & KIND {
                IDLE => (
                    current | SCHEDULED | ABORTED,
                    Abort::Claimed(current & !STATE),
                ),
                COMPLETE => return Abort::Done,
                aborted if aborted & ABORTED != 0 => return Abort::Done,
                // SCHEDULED, RUNNING or RUNNING+SCHEDULED: a poll, or the
                // end of one, is still to come, and finds the flag.
                _ => (current | SCHEDULED | ABORTED, Abort::Done),
            };
            match self
                .0
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return outcome,
                Err(actual) => current = actual,
            }
        }
    }

    /// The holder of a token of `line` starts the task (or claims it to
    /// cancel it): `SCHEDULED(+ABORTED) → RUNNING+STARTED`, in that line,
    /// else the token is stale. `started`: whether the task had started
    /// when the token was made (a hint, carried by the token: it makes the
    /// fast path one CAS; a wrong hint costs a second). Acquire pairs with
    /// the release of every wake (and abort, and move) that came while the
    /// task was scheduled.
    #[inline]
    pub(crate) fn start(&self, line: Line, started: bool) -> Start {
        let mut expected = line | SCHEDULED | if started { STARTED } else { 0 };
        loop {
            match self.0.compare_exchange(
                expected,
                line | STARTED | RUNNING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if expected & ABORTED == 0 => return Start::Poll,
                Ok(_) => return Start::Aborted,
                // An abort came first, or the hint was wrong: this token's
                // line is scheduled all the same; claim it as it is.
                Err(actual) if actual & !(ABORTED | STARTED) == line | SCHEDULED => {
                    expected = actual
                }
                // Another line, or not scheduled: another token took over.
                Err(_) => return Start::Stale,
            }
        }
    }

    /// A move: `SCHEDULED` (not started) in line `g → SCHEDULED` in line
    /// `g + 1`, from any thread. The mover is then responsible, for a
    /// token of the new line, which it makes and returns.
    pub(crate) fn move_line(&self) -> Result<Line, MoveError> {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let line = current & !STATE;
            match current & KIND {
                COMPLETE => return Err(MoveError::Finished),
                kind if kind & RUNNING != 0 => return Err(MoveError::Running),
                IDLE => return Err(MoveError::Parked),
                kind if kind & ABORTED != 0 => return Err(MoveError::Aborted),
                _ if current & STARTED != 0 => return Err(MoveError::Started),
                _ => {}
            }
            let Some(next) = line.checked_add(LINE_ONE) else {
                return Err(MoveError::TooManyMoves);
            };
            match self.0.compare_exchange_weak(
                current,
                next | SCHEDULED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(next),
                Err(actual) => current = actual,
            }
        }
    }

    /// The task's line now (a hint, unless read by the party responsible,
    /// for which it does not change).
    pub(crate) fn line(&self) -> Line {
        self.0.load(Ordering::Acquire) & !STATE
    }

    /// Whether a queue holds the task now, in `line`, not started (a hint).
    pub(crate) fn is_queued_in(&self, line: Line) -> bool {
        self.0.load(Ordering::Relaxed) == line | SCHEDULED
    }

    /// The poll returned `Pending`: one read-modify-write either way, since
    /// only wakers write concurrently and they only add `SCHEDULED` (or
    /// write the word back unchanged). `RUNNING → IDLE` gives responsibility
    /// up; `RUNNING+SCHEDULED → SCHEDULED` keeps it for the re-queue.
    /// Acquire pairs with the release of every wake during the poll (their
    /// writes are earlier in the word's modification order); release
    /// publishes the poll to the waker that will claim the parked task.
    ///
    /// `woke_itself`: the task woke itself during the poll, on the polling
    /// thread, which recorded that in its context instead of in the word
    /// (see `task::cell`): `RUNNING(+SCHEDULED) → SCHEDULED`, one swap,
    /// which also acquires the wakes of other threads during the poll.
    ///
    /// An abort during the poll left `RUNNING+SCHEDULED+ABORTED`: the word
    /// becomes `SCHEDULED` (with the flag, after the subtraction; without,
    /// after the swap) and the poller, still responsible as the holder of
    /// a scheduled task, is told to drop the future. (Started: no move can
    /// claim that token-less `SCHEDULED`.)
    ///
    /// `line`: the task's line, which does not change while it runs (a
    /// move needs it queued): the swap writes it back.
    #[inline]
    pub(crate) fn end_poll_pending(&self, woke_itself: bool, line: Line) -> Park {
        let old = if woke_itself {
            self.0.swap(line | STARTED | SCHEDULED, Ordering::AcqRel)
        } else {
            self.0.fetch_sub(RUNNING, Ordering::AcqRel)
        };
        debug_assert!(
            old & RUNNING != 0 && old & !(RUNNING | SCHEDULED | ABORTED) == line | STARTED
        );
        if old & ABORTED != 0 {
            Park::Aborted
        } else if woke_itself || old & SCHEDULED != 0 {
            Park::Requeue
        } else {
            Park::Parked
        }
    }

    /// The future finished, panicked, or was dropped unrun (its line is
    /// forgotten: every token left is stale). Release pairs with the
    /// joiner's acquire in `is_complete`: the output is visible.
    pub(crate) fn complete(&self) {
        self.0.swap(COMPLETE, Ordering::AcqRel);
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.0.load(Ordering::Acquire) == COMPLETE
    }
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;

    #[test]
    fn transitions() {
        let s = State::new_scheduled();
        assert_eq!(s.wake(), Wake::Pending, "already scheduled");
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        assert_eq!(s.end_poll_pending(false, FIRST_LINE), Park::Parked);
        assert_eq!(s.wake(), Wake::Claimed(FIRST_LINE));
        assert_eq!(s.wake(), Wake::Pending, "second wake is a no-op");
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(
            s.end_poll_pending(false, FIRST_LINE),
            Park::Requeue,
            "woken during poll"
        );
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        assert_eq!(
            s.end_poll_pending(true, FIRST_LINE),
            Park::Requeue,
            "woke itself"
        );
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.end_poll_pending(true, FIRST_LINE), Park::Requeue, "both");
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        s.complete();
        assert!(s.is_complete());
        assert_eq!(s.wake(), Wake::Complete);
        assert_eq!(s.abort(), Abort::Done, "complete: nothing to abort");
    }

    #[test]
    fn abort_transitions() {
        // Queued: the holder finds the flag as it starts.
        let s = State::new_scheduled();
        assert_eq!(s.abort(), Abort::Done);
        assert_eq!(s.abort(), Abort::Done, "twice");
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.start(FIRST_LINE, false), Start::Aborted);

        // Parked: the aborter claims it, once.
        let s = State::new_scheduled();
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        assert_eq!(s.end_poll_pending(false, FIRST_LINE), Park::Parked);
        assert_eq!(s.abort(), Abort::Claimed(FIRST_LINE));
        assert_eq!(s.abort(), Abort::Done);
        assert_eq!(s.wake(), Wake::Pending, "claimed already");
        assert_eq!(s.start(FIRST_LINE, false), Start::Aborted);

        // Running: the poll's end finds it, after a self-wake or not.
        for woke_itself in [false, true] {
            let s = State::new_scheduled();
            assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
            assert_eq!(s.abort(), Abort::Done);
            assert_eq!(s.wake(), Wake::Pending);
            assert_eq!(s.end_poll_pending(woke_itself, FIRST_LINE), Park::Aborted);
            s.complete();
            assert_eq!(s.abort(), Abort::Done);
        }
    }

    #[test]
    fn move_transitions() {
        let s = State::new_scheduled();
        let line = s.move_line().expect("queued: moved");
        assert_ne!(line, FIRST_LINE);
        assert_eq!(s.start(FIRST_LINE, false), Start::Stale, "the old token");
        let newer = s.move_line().expect("moved again");
        assert_eq!(s.start(line, false), Start::Stale, "the first move's token");
        assert_eq!(s.wake(), Wake::Pending, "queued: a wake keeps the line");
        assert!(s.is_queued_in(newer));
        assert_eq!(s.start(newer, true), Start::Poll, "a wrong hint: two CASes");
        assert_eq!(s.move_line(), Err(MoveError::Running));
        assert!(!s.is_queued_in(newer));
        assert_eq!(s.end_poll_pending(true, newer), Park::Requeue);
        assert_eq!(
            s.move_line(),
            Err(MoveError::Started),
            "no token yet, or queued: started"
        );
        assert!(!s.is_queued_in(newer), "started: not a boost's to move");
        assert_eq!(s.start(newer, true), Start::Poll, "the line's next token");
        assert_eq!(s.end_poll_pending(false, newer), Park::Parked);
        assert_eq!(s.move_line(), Err(MoveError::Parked));
        assert_eq!(s.wake(), Wake::Claimed(newer));
        assert_eq!(s.move_line(), Err(MoveError::Started));
        assert_eq!(s.abort(), Abort::Done);
        assert_eq!(s.move_line(), Err(MoveError::Aborted));
        assert_eq!(s.start(line, true), Start::Stale);
        assert_eq!(s.start(newer, true), Start::Aborted);
        s.complete();
        assert_eq!(s.move_line(), Err(MoveError::Finished));
        assert_eq!(
            s.start(newer, true),
            Start::Stale,
            "complete: every token is stale"
        );
        assert!(s.is_complete());

        // An abort at the end of a yielding poll leaves a token-less
        // `SCHEDULED`: not movable.
        let s = State::new_scheduled();
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);
        assert_eq!(s.abort(), Abort::Done);
        assert_eq!(s.end_poll_pending(true, FIRST_LINE), Park::Aborted);
        assert_eq!(s.move_line(), Err(MoveError::Started));

        // A blocking task never moves.
        let s = State::new_unmovable();
        assert_eq!(s.move_line(), Err(MoveError::Started));
        assert_eq!(s.start(FIRST_LINE, false), Start::Poll);

        // The counter does not wrap.
        let s = State(AtomicUsize::new((usize::MAX & !STATE) | SCHEDULED));
        assert_eq!(s.move_line(), Err(MoveError::TooManyMoves));
    }
}
