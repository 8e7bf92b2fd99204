//! A level's waiting clock, for its starvation bound (see `schedule`'s
//! "Starvation bounds"): since when the level has had work passed over for
//! higher levels' work.
//!
//! # States
//!
//! `since` is 0 while the level is not waiting, else the moment its wait
//! began, in nanoseconds from the clock's epoch (at least 1). Three parties
//! write it:
//!
//! * a pusher of one of the level's tasks, while a higher level has work:
//!   `start` (0 → now; a clock already running is left alone);
//! * a search that finds the level's bit set while a higher level has work
//!   (`start` too), or finds the level empty or nothing above it (`stop`:
//!   → 0, then it looks at the bits again and starts the clock if a push
//!   came meanwhile: the swap and the pusher's set fence order the two, so
//!   one of them sees the other);
//! * a search that finds the clock past the bound: `claim` (the `since` it
//!   read → now), and only the claimer serves the level first; a search
//!   that takes one of the level's tasks in the normal order: `served`
//!   (a running clock → now). Either way the level's next task waits its
//!   own bound.
//!
//! # Invariant
//!
//! While the level holds a task that higher work keeps waiting, `since` is
//! at most the later of: the moment the first such task was pushed while
//! higher work waited (or, if higher work came after it, the first search
//! after that), and the level's last service. A pusher or a search started
//! it then, and only a service (claim or normal) or a stop (which sees the
//! level empty or nothing above it) moves it later. Races move it by the
//! length of a push or a search. So a claim comes at the first search
//! after the bound has passed: within the bound plus the rest of the task
//! each worker that serves the level is running.

use std::time::Instant;

use crate::sync::{fence, AtomicU64, Ordering};

/// See the module doc.
#[derive(Debug)]
pub(crate) struct WaitClock {
    since: AtomicU64,
    epoch: Instant,
    /// The bound, in nanoseconds.
    max_wait: u64,
}

impl WaitClock {
    pub(crate) fn new(max_wait: std::time::Duration) -> WaitClock {
        WaitClock {
            since: AtomicU64::new(0),
            epoch: Instant::now(),
            max_wait: u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Nanoseconds since the epoch, at least 1 (0 means "not waiting").
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The level's work is being passed over: starts the clock if it is
    /// not running.
    pub(crate) fn start(&self) {
        if self.since.load(Ordering::Relaxed) == 0 {
            self.claim(0);
        }
    }

    /// The level is empty, or nothing above it has work: it is not
    /// waiting. The caller then looks at the bits again (see the module
    /// doc).
    pub(crate) fn stop(&self) {
        if self.since.load(Ordering::Relaxed) != 0 {
            // Then a fence before the caller's second look at the bits:
            // pairs with the set fence of a pusher, whose load of `since`
            // follows it. One of the two sees the other.
            self.since.swap(0, Ordering::SeqCst);
            fence(Ordering::SeqCst);
        }
    }

    /// The level was served in the normal order: a running clock restarts
    /// for its next task.
    pub(crate) fn served(&self) {
        let since = self.since.load(Ordering::Relaxed);
        if since != 0 {
            self.claim(since);
        }
    }

    /// Whether the level has waited its bound: then `Some(since)`, for
    /// [`WaitClock::claim`]. Starts the clock if it is not running.
    pub(crate) fn due(&self) -> Option<u64> {
        let since = self.since.load(Ordering::Relaxed);
        if since == 0 {
            self.start();
            return None;
        }
        (self.now().saturating_sub(since) >= self.max_wait).then_some(since)
    }

    /// Claims the due level (seen waiting since `since`) for this search:
    /// `true` for one search of those that saw it due; the next task's
    /// wait starts now. (`start` and `served` set the clock through it
    /// too, from 0 or from the running clock's `since`.)
    pub(crate) fn claim(&self, since: u64) -> bool {
        (self.since)
            .compare_exchange(since, self.now(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    //! The race of `stop` with a push: a search that saw the level empty
    //! stops the clock while a task is pushed; the clock must be running
    //! afterwards (the pusher's start or the search's second look). With
    //! the second look removed, the model fails.

    use super::*;
    use crate::status::{Bit, Status};
    use loom::sync::Arc;

    #[test]
    fn a_stop_never_hides_a_push() {
        loom::model(|| {
            // Bit 0: a higher level, busy throughout; bit 1: the bounded
            // level, empty at first.
            let status = Arc::new(Status::new(2));
            status.mark(Bit::new(0));
            let clock = Arc::new(WaitClock::new(std::time::Duration::from_secs(1)));
            // Running from an earlier wait.
            clock.start();
            let waiting =
                |status: &Status| status.is_set(Bit::new(1)) && status.is_set(Bit::new(0));
            let pusher = {
                let (status, clock) = (status.clone(), clock.clone());
                loom::thread::spawn(move || {
                    status.mark(Bit::new(1));
                    if status.is_set(Bit::new(0)) {
                        clock.start();
                    }
                })
            };
            // The search saw the level empty before the push.
            clock.stop();
            if waiting(&status) {
                clock.start();
            }
            pusher.join().unwrap();
            assert_ne!(
                clock.since.load(Ordering::SeqCst),
                0,
                "the push's wait is timed"
            );
        });
    }
}
