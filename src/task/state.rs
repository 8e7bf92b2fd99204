//! The task state word and its transitions. See the parent module for the
//! state table and the invariants these transitions keep.

use super::join::MoveError;
use crate::sync::{AtomicUsize, Ordering};

/// Parked: nobody is responsible until a wake claims it.
const IDLE: usize = 0;
/// A worker is polling it; or that poll, woken during it, ended and
/// re-queued the task, whose token's start has not come yet (the parent
/// module's "Re-queued running").
const RUNNING: usize = 1;
/// Alone: a token exists, the task is queued or about to be run. With
/// `RUNNING`: a wake came from another thread during the poll (the poll's
/// end re-queues the task), or while it was queued running (acquired by
/// the first start that reads it, or by a poll's end, whose CAS fails on
/// it). One bit for both: a wake adds it, whatever the
/// task is doing.
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

/// How the token's holder starts a task.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// `SCHEDULED`, or re-queued running, `→ RUNNING`: poll it.
    Poll,
    /// The same, with `ABORTED`: drop the future instead.
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
    /// Woken during the poll (by itself, or by a wake from elsewhere that
    /// left `RUNNING+SCHEDULED`): the word stays running, and the poller
    /// re-queues the task with a token made `requeued` (see `start`).
    Requeue,
    /// Aborted during the poll (and not woken by itself): the word stays
    /// `RUNNING+SCHEDULED+ABORTED`; the poller, still responsible, drops
    /// the future and completes the task.
    Aborted,
}

pub(crate) struct State(AtomicUsize);

impl State {
    /// A new task: scheduled, its token about to be made. One that can
    /// never move (`unmovable`: a blocking task) is marked started already.
    pub(crate) fn new(unmovable: bool) -> State {
        let started = if unmovable { STARTED } else { 0 };
        State(AtomicUsize::new(SCHEDULED | started))
    }

    /// A wake-up, from any thread; with `abort`, an abort: a wake that
    /// also sets `ABORTED` (see the parent module's "Abort"). Returns the
    /// line of a parked task it claimed (`IDLE → SCHEDULED(+ABORTED)`): the
    /// caller is now responsible, and hands the task to the pool with a
    /// token of that line. `None` otherwise: a complete task, or one
    /// aborted already, is left as it is; in any other state a start, or
    /// the end of the poll in progress, is still to come (a poll that woke
    /// itself leaves an abort to the start of its re-queued token). A wake
    /// there adds `SCHEDULED`, or writes the word back unchanged when it
    /// has it, to publish our memory to the coming poll (see the module
    /// doc).
    #[inline]
    pub(crate) fn wake(&self, abort: bool) -> Option<Line> {
        let flags = SCHEDULED | if abort { ABORTED } else { 0 };
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            if current & KIND == COMPLETE || (abort && current & ABORTED != 0) {
                return None;
            }
            match self.0.compare_exchange_weak(
                current,
                current | flags,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return (current & KIND == IDLE).then_some(current & !STATE),
                Err(actual) => current = actual,
            }
        }
    }

    /// The holder of a token of `line` starts the task (or claims it to
    /// cancel it): the word, in that line, `SCHEDULED(+ABORTED)` (queued)
    /// `→ RUNNING+STARTED`; and, for a token `requeued` (made by a poll's
    /// end that re-queued the task and left the word running: see
    /// `end_poll_pending`), the word `RUNNING(+SCHEDULED)(+ABORTED)` in that
    /// line likewise. In any other word the token is stale. `started` (the
    /// task had started when the token was made) and `requeued` are carried
    /// by the token; they make the fast path of a queued token one CAS,
    /// expecting the word with no wake or abort since: a wake meanwhile
    /// costs a second. Acquire pairs with the release of every wake (and
    /// abort, and move) whose write the start reads.
    #[inline]
    pub(crate) fn start(&self, line: Line, started: bool, requeued: bool) -> Start {
        debug_assert!(started || !requeued, "a re-queued task had started");
        let mut expected = if requeued {
            line | STARTED | RUNNING
        } else {
            line | SCHEDULED | if started { STARTED } else { 0 }
        };
        loop {
            match self.0.compare_exchange(
                expected,
                line | STARTED | RUNNING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if expected & ABORTED == 0 => return Start::Poll,
                Ok(_) => return Start::Aborted,
                // A wake or an abort came first, or a hint was wrong: this
                // token's line is the task's all the same; claim it as it is.
                Err(actual) if claimable(actual, line, requeued) => expected = actual,
                // Another line, or neither scheduled nor left running:
                // another token took over.
                Err(_) => return Start::Stale,
            }
        }
    }

    /// A move: `SCHEDULED` (not started) in line `g → SCHEDULED` in line
    /// `g + 1`, from any thread. The mover is then responsible, for a
    /// token of the new line, which it makes and returns.
    pub(crate) fn move_line(&self) -> Result<Line, MoveError> {
        // The next line of a word that can move, or why it cannot.
        let next = |word: usize| match word & KIND {
            COMPLETE => Err(MoveError::Finished),
            kind if kind & ABORTED != 0 => Err(MoveError::Aborted),
            kind if kind & RUNNING != 0 => Err(MoveError::Running),
            IDLE => Err(MoveError::Parked),
            _ if word & STARTED != 0 => Err(MoveError::Started),
            _ => (word & !STATE)
                .checked_add(LINE_ONE)
                .ok_or(MoveError::TooManyMoves),
        };
        let moved = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                next(word).ok().map(|line| line | SCHEDULED)
            });
        // The word the update ended on says how: moved from it, or refused.
        moved.map_or_else(next, next)
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

    /// The poll returned `Pending`. `woke_itself`: the task woke itself
    /// during the poll, on the polling thread, which recorded that in its
    /// context instead of in the word (see `task::cell`): the word stays
    /// `RUNNING(+SCHEDULED)(+ABORTED)`, not written at all, and the poller
    /// re-queues the task with a token that finds it so (`start`). Wakes
    /// and aborts from elsewhere meanwhile leave their marks, acquired by
    /// the first start that reads them, or by a poll's end, whose CAS
    /// fails on them.
    ///
    /// Otherwise one CAS: `RUNNING → IDLE` gives responsibility up (release
    /// publishes the poll to the waker that will claim the parked task).
    /// It fails only if a wake or an abort came during the poll (only they
    /// write concurrently, and only add `SCHEDULED`, `ABORTED`, or write the
    /// word back unchanged): then the word stays as it is, and the poller,
    /// still responsible, re-queues the task (left running, as after a
    /// self-wake) or, aborted, drops the future and completes it.
    ///
    /// `line`: the task's line, which does not change while it runs (a
    /// move needs it queued and not started).
    #[inline]
    pub(crate) fn end_poll_pending(&self, woke_itself: bool, line: Line) -> Park {
        if woke_itself {
            return Park::Requeue;
        }
        match self.0.compare_exchange(
            line | STARTED | RUNNING,
            line | STARTED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => Park::Parked,
            Err(actual) => {
                debug_assert_eq!(actual & !(SCHEDULED | ABORTED), line | STARTED | RUNNING);
                if actual & ABORTED != 0 {
                    Park::Aborted
                } else {
                    Park::Requeue
                }
            }
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

/// Whether a token of `line` finds the task its own in `word`: scheduled
/// in that line, or, for a token made by a poll's re-queue (`requeued`),
/// left running in it. No token of a line exists while a poll in that
/// line runs (see the parent module's invariants), and only the poll's
/// end marks a token `requeued`: an unmarked token never takes a running
/// word. `COMPLETE` is neither.
#[inline]
fn claimable(word: usize, line: Line, requeued: bool) -> bool {
    let running = word & RUNNING != 0;
    word & !STATE == line
        && if running {
            requeued
        } else {
            word & SCHEDULED != 0
        }
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;

    #[test]
    fn transitions() {
        let s = State::new(false);
        assert_eq!(s.wake(false), None, "already scheduled");
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Poll);
        assert_eq!(s.end_poll_pending(false, FIRST_LINE), Park::Parked);
        assert_eq!(s.wake(false), Some(FIRST_LINE));
        assert_eq!(s.wake(false), None, "second wake is a no-op");
        assert_eq!(s.start(FIRST_LINE, true, false), Start::Poll);
        assert_eq!(s.wake(false), None);
        assert_eq!(s.wake(false), None);
        assert_eq!(
            s.end_poll_pending(false, FIRST_LINE),
            Park::Requeue,
            "woken during poll"
        );
        assert_eq!(s.wake(false), None, "re-queued: left running");
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Poll);
        assert_eq!(
            s.end_poll_pending(true, FIRST_LINE),
            Park::Requeue,
            "woke itself"
        );
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Poll);
        assert_eq!(s.wake(false), None);
        assert_eq!(s.end_poll_pending(true, FIRST_LINE), Park::Requeue, "both");
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Poll);
        assert_eq!(s.end_poll_pending(true, FIRST_LINE), Park::Requeue);
        assert_eq!(
            s.start(FIRST_LINE, true, false),
            Start::Stale,
            "an unmarked token never takes a running word"
        );
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Poll);
        assert_eq!(s.end_poll_pending(false, FIRST_LINE), Park::Parked);
        assert_eq!(s.wake(false), Some(FIRST_LINE));
        assert_eq!(
            s.start(FIRST_LINE, true, true),
            Start::Poll,
            "a mark on a scheduled word (never made: the code clears it)"
        );
        s.complete();
        assert!(s.is_complete());
        assert_eq!(s.wake(false), None);
        assert_eq!(s.wake(true), None, "complete: nothing to abort");
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Stale);
    }

    #[test]
    fn abort_transitions() {
        // Queued: the holder finds the flag as it starts.
        let s = State::new(false);
        assert_eq!(s.wake(true), None);
        assert_eq!(s.wake(true), None, "twice");
        assert_eq!(s.wake(false), None);
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Aborted);

        // Parked: the aborter claims it, once.
        let s = State::new(false);
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Poll);
        assert_eq!(s.end_poll_pending(false, FIRST_LINE), Park::Parked);
        assert_eq!(s.wake(true), Some(FIRST_LINE));
        assert_eq!(s.wake(true), None);
        assert_eq!(s.wake(false), None, "claimed already");
        assert_eq!(s.start(FIRST_LINE, true, false), Start::Aborted);

        // Running: the poll's end finds it.
        let s = State::new(false);
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Poll);
        assert_eq!(s.wake(true), None);
        assert_eq!(s.wake(false), None);
        assert_eq!(s.end_poll_pending(false, FIRST_LINE), Park::Aborted);
        assert_eq!(s.move_line(), Err(MoveError::Aborted), "not movable");
        s.complete();
        assert_eq!(s.wake(true), None);

        // Running, and woken by itself: the poll's end does not look; the
        // re-queued token's start finds it.
        let s = State::new(false);
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Poll);
        assert_eq!(s.wake(true), None);
        assert_eq!(s.end_poll_pending(true, FIRST_LINE), Park::Requeue);
        assert_eq!(s.wake(true), None, "twice");
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Aborted);
        s.complete();

        // Re-queued by a self-wake, then aborted in the queue.
        let s = State::new(false);
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Poll);
        assert_eq!(s.end_poll_pending(true, FIRST_LINE), Park::Requeue);
        assert_eq!(s.wake(true), None);
        assert_eq!(s.start(FIRST_LINE, true, true), Start::Aborted);
    }

    #[test]
    fn move_transitions() {
        let s = State::new(false);
        let line = s.move_line().expect("queued: moved");
        assert_ne!(line, FIRST_LINE);
        assert_eq!(
            s.start(FIRST_LINE, false, false),
            Start::Stale,
            "the old token"
        );
        let newer = s.move_line().expect("moved again");
        assert_eq!(
            s.start(line, false, false),
            Start::Stale,
            "the first move's token"
        );
        assert_eq!(s.wake(false), None, "queued: a wake keeps the line");
        assert!(s.is_queued_in(newer));
        assert_eq!(
            s.start(newer, true, false),
            Start::Poll,
            "a wrong hint: two CASes"
        );
        assert_eq!(s.move_line(), Err(MoveError::Running));
        assert!(!s.is_queued_in(newer));
        assert_eq!(s.end_poll_pending(true, newer), Park::Requeue);
        assert_eq!(
            s.move_line(),
            Err(MoveError::Running),
            "re-queued by its own poll: still marked running"
        );
        assert!(!s.is_queued_in(newer), "started: not a boost's to move");
        assert_eq!(s.start(line, true, true), Start::Stale, "an older line");
        assert_eq!(
            s.start(newer, true, true),
            Start::Poll,
            "the line's next token"
        );
        assert_eq!(s.end_poll_pending(false, newer), Park::Parked);
        assert_eq!(s.move_line(), Err(MoveError::Parked));
        assert_eq!(s.start(newer, true, true), Start::Stale, "parked: no token");
        assert_eq!(s.wake(false), Some(newer));
        assert_eq!(s.move_line(), Err(MoveError::Started));
        assert_eq!(s.wake(true), None);
        assert_eq!(s.move_line(), Err(MoveError::Aborted));
        assert_eq!(s.start(line, true, false), Start::Stale);
        assert_eq!(s.start(newer, true, false), Start::Aborted);
        s.complete();
        assert_eq!(s.move_line(), Err(MoveError::Finished));
        assert_eq!(
            s.start(newer, true, false),
            Start::Stale,
            "complete: every token is stale"
        );
        assert!(s.is_complete());

        // A blocking task never moves.
        let s = State::new(true);
        assert_eq!(s.move_line(), Err(MoveError::Started));
        assert_eq!(s.start(FIRST_LINE, false, false), Start::Poll);

        // The counter does not wrap.
        let s = State(AtomicUsize::new((usize::MAX & !STATE) | SCHEDULED));
        assert_eq!(s.move_line(), Err(MoveError::TooManyMoves));
    }
}
