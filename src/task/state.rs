//! The task state word and its transitions. See the parent module for the
//! state table and the invariants these transitions keep.

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

/// What a wake did.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// `IDLE → SCHEDULED`: the waker is now responsible and must queue it.
    Claimed,
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
    /// hand the task to the pool.
    Claimed,
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

    /// A wake-up, from any thread.
    pub(crate) fn wake(&self) -> Wake {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let (next, outcome) = match current {
                IDLE => (SCHEDULED, Wake::Claimed),
                RUNNING => (RUNNING | SCHEDULED, Wake::Pending),
                COMPLETE => return Wake::Complete,
                // SCHEDULED or RUNNING+SCHEDULED: write it back unchanged to
                // publish our memory to the coming poll (see the module doc).
                same => (same, Wake::Pending),
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
            let (next, outcome) = match current {
                IDLE => (SCHEDULED | ABORTED, Abort::Claimed),
                COMPLETE => return Abort::Done,
                aborted if aborted & ABORTED != 0 => return Abort::Done,
                // SCHEDULED, RUNNING or RUNNING+SCHEDULED: a poll, or the
                // end of one, is still to come, and finds the flag.
                running_or_scheduled => (running_or_scheduled | SCHEDULED | ABORTED, Abort::Done),
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

    /// Whether an abort was asked (for the reason of a token dropped
    /// unrun: only the token's holder reads it, in `SCHEDULED`).
    pub(crate) fn is_aborted(&self) -> bool {
        self.0.load(Ordering::Acquire) & ABORTED != 0
    }

    /// The token's holder starts the task. Acquire pairs with the release
    /// of every wake (and abort) that came while the task was scheduled.
    #[inline]
    pub(crate) fn start_running(&self) -> Start {
        let old = self.0.swap(RUNNING, Ordering::AcqRel);
        debug_assert_eq!(old & !ABORTED, SCHEDULED, "only a scheduled task is run");
        if old & ABORTED == 0 {
            Start::Poll
        } else {
            Start::Aborted
        }
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
    /// a scheduled task, is told to drop the future.
    #[inline]
    pub(crate) fn end_poll_pending(&self, woke_itself: bool) -> Park {
        let old = if woke_itself {
            self.0.swap(SCHEDULED, Ordering::AcqRel)
        } else {
            self.0.fetch_sub(RUNNING, Ordering::AcqRel)
        };
        debug_assert!(old & RUNNING != 0 && old & !(RUNNING | SCHEDULED | ABORTED) == 0);
        if old & ABORTED != 0 {
            Park::Aborted
        } else if woke_itself || old & SCHEDULED != 0 {
            Park::Requeue
        } else {
            Park::Parked
        }
    }

    /// The future finished, panicked, or was dropped unrun. Release pairs
    /// with the joiner's acquire in `is_complete`: the output is visible.
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
        assert_eq!(s.start_running(), Start::Poll);
        assert_eq!(s.end_poll_pending(false), Park::Parked);
        assert_eq!(s.wake(), Wake::Claimed);
        assert_eq!(s.wake(), Wake::Pending, "second wake is a no-op");
        assert_eq!(s.start_running(), Start::Poll);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(
            s.end_poll_pending(false),
            Park::Requeue,
            "woken during poll"
        );
        assert_eq!(s.start_running(), Start::Poll);
        assert_eq!(s.end_poll_pending(true), Park::Requeue, "woke itself");
        assert_eq!(s.start_running(), Start::Poll);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.end_poll_pending(true), Park::Requeue, "both");
        assert_eq!(s.start_running(), Start::Poll);
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
        assert!(s.is_aborted());
        assert_eq!(s.abort(), Abort::Done, "twice");
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.start_running(), Start::Aborted);

        // Parked: the aborter claims it, once.
        let s = State::new_scheduled();
        assert_eq!(s.start_running(), Start::Poll);
        assert_eq!(s.end_poll_pending(false), Park::Parked);
        assert_eq!(s.abort(), Abort::Claimed);
        assert_eq!(s.abort(), Abort::Done);
        assert_eq!(s.wake(), Wake::Pending, "claimed already");
        assert_eq!(s.start_running(), Start::Aborted);

        // Running: the poll's end finds it, after a self-wake or not.
        for woke_itself in [false, true] {
            let s = State::new_scheduled();
            assert_eq!(s.start_running(), Start::Poll);
            assert_eq!(s.abort(), Abort::Done);
            assert_eq!(s.wake(), Wake::Pending);
            assert_eq!(s.end_poll_pending(woke_itself), Park::Aborted);
            s.complete();
            assert_eq!(s.abort(), Abort::Done);
        }
    }
}
