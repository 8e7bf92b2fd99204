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
//!   → 0);
//! * a search that finds the clock past the bound: `claim` (the `since` it
//!   read → now), and only the claimer serves the level first; the next
//!   task of the level then waits its own bound.
//!
//! # Invariant
//!
//! While the level holds a task that higher work keeps waiting, `since` is
//! at most the moment the first such task was pushed (or the level was
//! last served first): a pusher or a search started it then, and only a
//! claim (which serves the level) or a stop (which sees the level empty or
//! nothing above it) moves it later. Races only move it by the length of a
//! push or a search. So a claim comes at the first search after the bound
//! has passed: within the bound plus the rest of the task each worker that
//! serves the level is running.

use std::time::Instant;

use crate::sync::{AtomicU64, Ordering};

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
            let _ =
                self.since
                    .compare_exchange(0, self.now(), Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// The level is empty, or nothing above it has work: it is not waiting.
    pub(crate) fn stop(&self) {
        if self.since.load(Ordering::Relaxed) != 0 {
            self.since.store(0, Ordering::Relaxed);
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
    /// wait starts now.
    pub(crate) fn claim(&self, since: u64) -> bool {
        self.since
            .compare_exchange(since, self.now(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}
