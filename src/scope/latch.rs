//! A count-down latch whose waiter may be a pool worker that helps while it
//! waits (the protocol is in the parent module's doc).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use super::help::{self, Help};
use crate::sync::{lock, park, thread_current, AtomicUsize, Mutex, Ordering, Thread};

/// Who to wake when the latch opens.
enum WakeTarget {
    /// A thread that parks.
    Thread(Thread),
    /// A pool worker that may sleep in its pool's sleep protocol: wakes its
    /// slot. (Never both: a worker re-registers as a thread before it
    /// parks.)
    Worker(Box<dyn Fn() + Send + Sync>),
}

impl WakeTarget {
    fn wake(self) {
        match self {
            WakeTarget::Thread(thread) => thread.unpark(),
            WakeTarget::Worker(wake) => wake(),
        }
    }
}

/// Opens when its count reaches 0.
pub(crate) struct CountLatch {
    count: AtomicUsize,
    /// Registered by the waiter before it first reads `count`; read by the
    /// party whose count-down reaches 0.
    waiter: Mutex<Option<WakeTarget>>,
}

impl CountLatch {
    pub(crate) fn new(count: usize) -> CountLatch {
        CountLatch {
            count: AtomicUsize::new(count),
            waiter: Mutex::new(None),
        }
    }

    /// One more party to wait for. The caller must itself be a counted
    /// party, or hold the count above 0 some other way: a latch that opened
    /// never closes again.
    pub(crate) fn add(&self) {
        // Relaxed: the caller's own count keeps the latch closed, so no
        // ordering with the waiter is needed here.
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The calling party is done. Everything it did before happens before a
    /// waiter sees the latch open.
    pub(crate) fn count_down(&self) {
        // Release: with the release sequence that the later count-downs
        // continue, pairs with the Acquire load of `is_open`.
        if self.count.fetch_sub(1, Ordering::Release) == 1 {
            // The waiter registers under this lock before it reads the
            // count: either we find its target, or its read comes after our
            // decrement. We are the only one to get here (the count reaches
            // 0 once), so take the target and wake it outside the lock.
            let target = lock(&self.waiter).take();
            if let Some(target) = target {
                target.wake();
            }
        }
    }

    /// Whether every party is done.
    pub(crate) fn is_open(&self) -> bool {
        // Acquire: pairs with the Release count-downs.
        self.count.load(Ordering::Acquire) == 0
    }

    /// The parties not yet done.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Blocks until the latch opens, helping the pool if the caller is one
    /// of its workers. Never unwinds: a panicking channel polled while
    /// helping is logged and the wait goes on (pausing, so that a channel
    /// that always panics costs little), and anything else that would
    /// unwind aborts the process, because a scope that returned early would
    /// leave tasks holding dangling borrows.
    pub(crate) fn wait(&self) {
        if self.is_open() {
            return;
        }
        let abort = AbortOnUnwind;
        let help = help::current();
        let mut pause = Duration::from_millis(1);
        while let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.wait_with(help.as_deref()))) {
            log::error!(
                "smartpool: a channel panicked while a worker helped during a wait: {}; \
                 waiting on",
                crate::contain::panic_message(&*panic)
            );
            if self.is_open() {
                break;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
        std::mem::forget(abort);
    }

    /// The wait of a worker that helps only with the scope's own jobs and
    /// with work of a higher level (see `stack`, "Isolated waits"): calls
    /// `round` until the latch opens (see `stack::help_until`); the last
    /// count-down unparks it.
    /// `round` says whether it ran something, or `None` once the scope
    /// cannot be waited on in isolation any more: the wait goes on as
    /// [`CountLatch::wait`]'s. Never unwinds, as `wait`.
    pub(crate) fn wait_isolated(&self, round: impl FnMut() -> Option<bool>) {
        if self.is_open() {
            return;
        }
        let abort = AbortOnUnwind;
        // Before the count is read again: either the last count-down finds
        // the thread, or the read below sees the latch open.
        *lock(&self.waiter) = Some(WakeTarget::Thread(thread_current()));
        let isolated = super::stack::help_until(|| self.is_open(), round, "a scope's waiter");
        std::mem::forget(abort);
        if !isolated {
            self.wait();
        }
    }

    /// The wait itself: register, then help until open; or, not a worker
    /// (or its pool has terminated and has nothing left to run), register
    /// as a thread and park until open.
    pub(super) fn wait_with(&self, help: Option<&dyn Help>) {
        if let Some(help) = help {
            *lock(&self.waiter) = Some(WakeTarget::Worker(help.waker()));
            if help.help_until(&|| self.is_open()) {
                return;
            }
        }
        *lock(&self.waiter) = Some(WakeTarget::Thread(thread_current()));
        // Park keeps an unpark that came first: no wake is lost.
        while !self.is_open() {
            park();
        }
    }
}

impl fmt::Debug for CountLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountLatch")
            .field("count", &self.count())
            .finish_non_exhaustive()
    }
}

/// Aborts the process if dropped: put on the stack where unwinding would
/// break an invariant, and forgotten once past it.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        eprintln!(
            "smartpool: a scope's wait unwound while its tasks may borrow the stack; aborting"
        );
        std::process::abort();
    }
}
