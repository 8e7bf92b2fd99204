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

/// How a poll that returned `Pending` ends.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Park {
    /// `RUNNING → IDLE`: responsibility given up.
    Parked,
    /// `RUNNING+SCHEDULED → SCHEDULED` (or `RUNNING → SCHEDULED` after a
    /// self-wake): woken during the poll; re-queue it.
    Requeue,
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

    /// The token's holder starts polling. Acquire pairs with the release of
    /// every wake that came while the task was scheduled.
    pub(crate) fn start_running(&self) {
        let old = self.0.swap(RUNNING, Ordering::AcqRel);
        debug_assert_eq!(old, SCHEDULED, "only a scheduled task is run");
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
    pub(crate) fn end_poll_pending(&self, woke_itself: bool) -> Park {
        if woke_itself {
            let old = self.0.swap(SCHEDULED, Ordering::AcqRel);
            debug_assert!(old == RUNNING || old == RUNNING | SCHEDULED);
            return Park::Requeue;
        }
        let old = self.0.fetch_sub(RUNNING, Ordering::AcqRel);
        debug_assert!(old == RUNNING || old == RUNNING | SCHEDULED);
        if old & SCHEDULED == 0 {
            Park::Parked
        } else {
            Park::Requeue
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
        s.start_running();
        assert_eq!(s.end_poll_pending(false), Park::Parked);
        assert_eq!(s.wake(), Wake::Claimed);
        assert_eq!(s.wake(), Wake::Pending, "second wake is a no-op");
        s.start_running();
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(
            s.end_poll_pending(false),
            Park::Requeue,
            "woken during poll"
        );
        s.start_running();
        assert_eq!(s.end_poll_pending(true), Park::Requeue, "woke itself");
        s.start_running();
        assert_eq!(s.wake(), Wake::Pending);
        assert_eq!(s.end_poll_pending(true), Park::Requeue, "both");
        s.start_running();
        s.complete();
        assert!(s.is_complete());
        assert_eq!(s.wake(), Wake::Complete);
    }
}
