//! The packed counters of the sleep protocol, in one `AtomicU64`:
//!
//! | bits   | counter                                  |
//! |--------|------------------------------------------|
//! | 0..16  | sleeping workers                         |
//! | 16..32 | inactive workers (idle or sleeping)      |
//! | 32..64 | jobs event counter (JEC)                 |
//!
//! Idle-but-awake workers are `inactive - sleeping`. Keeping the two thread
//! counts this way lets each transition be a single add or subtract.
//!
//! Every change is a read-modify-write (SeqCst), never a plain store: so
//! each change continues the release sequence of the ones before it, and
//! any read of the word synchronizes with every change it reflects. The
//! sleep module relies on it (a worker counts itself watching before it
//! counts itself awake; whoever reads it awake sees it watching).

use crate::sync::{AtomicU64, Ordering};

const SLEEPING_SHIFT: u32 = 0;
const INACTIVE_SHIFT: u32 = 16;
const JEC_SHIFT: u32 = 32;
const THREAD_MASK: u64 = 0xFFFF;
const ONE_SLEEPING: u64 = 1 << SLEEPING_SHIFT;
const ONE_INACTIVE: u64 = 1 << INACTIVE_SHIFT;
const ONE_JEC: u64 = 1 << JEC_SHIFT;

/// Most workers the counters can track.
pub(crate) const MAX_WORKERS: usize = THREAD_MASK as usize;

/// A value of the jobs event counter. Even: some worker got sleepy and no job
/// was posted since. Odd: a job was posted since the last worker got sleepy.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobsEvent(u32);

impl JobsEvent {
    #[inline]
    pub(crate) fn is_sleepy(self) -> bool {
        self.0 % 2 == 0
    }
}

/// A snapshot of the counters.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Counters(u64);

impl Counters {
    #[inline]
    pub(crate) fn sleeping(self) -> usize {
        ((self.0 >> SLEEPING_SHIFT) & THREAD_MASK) as usize
    }

    /// Workers searching for work, not asleep: inactive minus sleeping.
    #[inline]
    pub(crate) fn awake_idle(self) -> usize {
        ((self.0 >> INACTIVE_SHIFT) & THREAD_MASK) as usize - self.sleeping()
    }

    #[inline]
    pub(crate) fn jobs_event(self) -> JobsEvent {
        JobsEvent((self.0 >> JEC_SHIFT) as u32)
    }
}

/// The atomic word.
#[derive(Debug, Default)]
pub(crate) struct AtomicCounters(AtomicU64);

impl AtomicCounters {
    #[inline]
    pub(crate) fn load(&self) -> Counters {
        Counters(self.0.load(Ordering::SeqCst))
    }

    /// A worker ran out of work and starts searching.
    pub(crate) fn add_inactive(&self) {
        self.0.fetch_add(ONE_INACTIVE, Ordering::SeqCst);
    }

    /// A searching worker found work. Returns the counters after the change.
    pub(crate) fn sub_inactive(&self) -> Counters {
        Counters(self.0.fetch_sub(ONE_INACTIVE, Ordering::SeqCst) - ONE_INACTIVE)
    }

    /// A sleeper leaves the count: taken off by its waker (which
    /// decrements, so that posters see the change at once), or by itself
    /// when its final check says search or watch (see `sleep`).
    pub(crate) fn sub_sleeping(&self) {
        self.0.fetch_sub(ONE_SLEEPING, Ordering::SeqCst);
    }

    /// Marks that a job was posted: an even JEC becomes odd. Returns the
    /// counters as they are after the call.
    #[inline]
    pub(crate) fn announce_job(&self) -> Counters {
        self.step_jec_from(true)
    }

    /// A worker gets sleepy: an odd JEC becomes even. Returns the value the
    /// worker must find unchanged when it falls asleep.
    pub(crate) fn get_sleepy(&self) -> JobsEvent {
        self.step_jec_from(false).jobs_event()
    }

    /// Steps the JEC by one if it is even (`sleepy`) or odd (not); returns
    /// the counters as they are after the call.
    #[inline]
    fn step_jec_from(&self, sleepy: bool) -> Counters {
        let step = |c: u64| {
            (Counters(c).jobs_event().is_sleepy() == sleepy).then(|| c.wrapping_add(ONE_JEC))
        };
        match self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, step)
        {
            Ok(old) => Counters(old.wrapping_add(ONE_JEC)),
            Err(now) => Counters(now),
        }
    }

    /// Adds one sleeper if the JEC still equals `sleepy`. `false` means a job
    /// was posted since the worker got sleepy.
    pub(crate) fn try_add_sleeping(&self, sleepy: JobsEvent) -> bool {
        let unchanged = |c: u64| (Counters(c).jobs_event() == sleepy).then_some(c + ONE_SLEEPING);
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, unchanged)
            .is_ok()
    }
}
