//! A count-down latch whose waiter may be a pool worker that helps while it
//! waits (the protocol is in the parent module's doc).
//!
//! The rule: the party whose count-down reaches 0 sets the latch last, and
//! touches nothing of it after the set. So the latch, and the scope state
//! around it, may be freed as soon as the waiter sees it set: a spawned
//! job holds a plain pointer to its scope, not a counted reference.
//!
//! How ([`OnceLatch`], which a stolen job's latch uses too): the waiter
//! writes its wake target (its thread, and its worker's sleep slot if it
//! is a worker) once, then turns the state `UNSET → WAITING`. The setter
//! (here the last count-down) turns it `UNSET → SET` in one exchange if
//! nobody waits yet (the waiter's own exchange then fails, and it does not
//! wait); else it takes the target (the waiter cannot leave before `SET`),
//! stores `SET`, and wakes the target it holds. `loom_model` checks it.

use super::help::{self, Help};
use crate::sync::{park, thread_current, AtomicU8, AtomicUsize, Ordering, Thread, UnsafeCell};

/// A latch set once, by one party, with one waiter that registers a
/// target to wake (see the module doc). The setter touches nothing of it
/// after the set.
pub(crate) struct OnceLatch<T> {
    /// `UNSET → WAITING` by the waiter, once; `→ SET` by the setter, once.
    state: AtomicU8,
    /// Written by the waiter before `WAITING` (or on finding `SET`, whose
    /// setter never reads it); read by the setter only after it saw
    /// `WAITING`.
    target: UnsafeCell<Option<T>>,
}

// SAFETY: `target` is written only by the waiter and read only by the one
// setter that saw `WAITING`, after the waiter's write (see the fields);
// what is read is handed to the setter's thread: `T: Send`.
unsafe impl<T: Send> Sync for OnceLatch<T> {}

impl<T> OnceLatch<T> {
    pub(crate) fn new() -> OnceLatch<T> {
        OnceLatch {
            state: AtomicU8::new(UNSET),
            target: UnsafeCell::new(None),
        }
    }

    /// Whether the latch is set (acquire: what the setter did before is
    /// visible).
    pub(crate) fn is_set(&self) -> bool {
        self.state.load(Ordering::Acquire) == SET
    }

    /// The waiter's registration, once: writes the target `make` returns,
    /// then turns the latch `WAITING`. A later call does nothing. Returns
    /// `false` if the latch is set (nothing to wait for).
    pub(crate) fn register(&self, make: impl FnOnce() -> T) -> bool {
        match self.state.load(Ordering::Acquire) {
            SET => return false,
            WAITING => return true,
            _ => {}
        }
        let target = make();
        // SAFETY: only the waiter writes; the setter reads the slot only
        // once it sees `WAITING`, which the exchange below publishes after
        // this write (a setter that finds `UNSET` never reads it).
        self.target.with_mut(|slot| unsafe { *slot = Some(target) });
        self.state
            .compare_exchange(UNSET, WAITING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The set. Returns the waiter's target if it waits: the caller wakes
    /// it through what it holds, since the latch may be gone once set.
    ///
    /// # Safety
    ///
    /// `this` is live when the call begins; called once. (A pointer, not
    /// a reference: the latch may be freed before the call returns.)
    pub(crate) unsafe fn set(this: *const OnceLatch<T>) -> Option<T> {
        // SAFETY: live until set, by the contract.
        let state = unsafe { &(*this).state };
        if state
            .compare_exchange(UNSET, SET, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return None;
        }
        // `WAITING` (acquire): the waiter wrote its target and waits for
        // `SET`, so the latch is alive and the slot stable.
        // SAFETY: as just said.
        let target = unsafe { (*this).target.with_mut(|slot| (*slot).take()) };
        state.store(SET, Ordering::Release);
        target
    }
}

const UNSET: u8 = 0;
const WAITING: u8 = 1;
const SET: u8 = 2;

/// Who to wake when the latch opens: the waiting thread, which may park,
/// and, if it is a pool worker, its sleep slot (it may sleep in its pool's
/// sleep protocol). A wake that finds it awake is harmless.
struct WakeTarget {
    thread: Thread,
    worker: Option<Box<dyn Fn() + Send + Sync>>,
}

/// Opens when its count reaches 0: the last count-down sets its latch.
pub(crate) struct CountLatch {
    count: AtomicUsize,
    latch: OnceLatch<WakeTarget>,
}

impl CountLatch {
    pub(crate) fn new(count: usize) -> CountLatch {
        CountLatch {
            count: AtomicUsize::new(count),
            latch: OnceLatch::new(),
        }
    }

    /// One more party to wait for. The caller must itself be a counted
    /// party, or hold the count above 0 some other way: a latch that opened
    /// never closes again.
    pub(crate) fn add(&self) {
        // Relaxed: the caller's own count keeps the latch closed, so no
        // ordering with the waiter is needed here.
        let before = self.count.fetch_add(1, Ordering::Relaxed);
        debug_assert_ne!(before, 0, "a party added after the latch opened");
    }

    /// The calling party is done. Everything it did before happens before a
    /// waiter sees the latch open. (The caller keeps the latch alive: see
    /// [`CountLatch::count_down_last`] for a caller that does not.)
    pub(crate) fn count_down(&self) {
        // SAFETY: alive for the call, by `&self`.
        unsafe { CountLatch::count_down_last(self) }
    }

    /// [`CountLatch::count_down`] through a pointer: the latch may be freed
    /// as soon as this call opened it, before it returns.
    ///
    /// # Safety
    ///
    /// `this` is live when the call begins, and the caller's party is
    /// counted: the latch cannot open before this call's count-down.
    pub(crate) unsafe fn count_down_last(this: *const CountLatch) {
        // SAFETY: live until the count reaches 0, which this call's
        // count-down does at the earliest.
        let count = unsafe { &(*this).count };
        // Release: each count-down's writes travel the release sequence;
        // Acquire for the last: it carries them all to the set below.
        if count.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // SAFETY: the latch is live until set; the set is the last touch.
        if let Some(target) = unsafe { OnceLatch::set(std::ptr::addr_of!((*this).latch)) } {
            if let Some(wake) = target.worker {
                wake();
            }
            target.thread.unpark();
        }
    }

    /// Whether every party is done (acquire: what they did is visible).
    pub(crate) fn is_open(&self) -> bool {
        self.latch.is_set()
    }

    /// The waiter's registration (see [`OnceLatch::register`]): its
    /// thread, and its worker's sleep slot if it helps.
    fn register(&self, help: Option<&dyn Help>) -> bool {
        self.latch.register(|| WakeTarget {
            thread: thread_current(),
            worker: help.map(|help| help.waker()),
        })
    }

    /// The parties not yet done.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Blocks until the latch opens, helping the pool if the caller is one
    /// of its workers: [`CountLatch::wait_isolated`], never isolated.
    pub(crate) fn wait(&self) {
        self.wait_isolated(|| false, |_| false);
    }

    /// The wait of a worker that, while `isolated()`, helps only with
    /// what `round` runs (its own jobs, work of a higher level: see
    /// `stack`, "Isolated waits"), and otherwise helps its pool (runs its
    /// queued tasks, or sleeps in its sleep protocol), until the latch
    /// opens or `isolated()` again. `round` says whether it ran something;
    /// between rounds that ran nothing the worker parks a little (see
    /// `stack::help_until`), and the last count-down unparks it. A thread
    /// that is no worker, or a worker whose pool terminated or whose stack
    /// is deep in nested waits, parks until the latch opens.
    ///
    /// Never unwinds: a panicking channel polled while helping is logged
    /// and the wait goes on (see `stack::help_until`), and anything else
    /// that would unwind aborts the process, because a scope that returned
    /// early would leave tasks holding dangling borrows.
    pub(crate) fn wait_isolated(
        &self,
        isolated: impl Fn() -> bool,
        round: impl FnMut(bool) -> bool,
    ) {
        self.wait_isolated_with(help::current().as_deref(), isolated, round)
    }

    /// [`CountLatch::wait_isolated`] with the calling worker's `help`.
    pub(super) fn wait_isolated_with(
        &self,
        help: Option<&dyn Help>,
        isolated: impl Fn() -> bool,
        mut round: impl FnMut(bool) -> bool,
    ) {
        if self.is_open() {
            return;
        }
        let abort = AbortOnUnwind;
        // Before the state is read again: either the last count-down finds
        // the target (the thread, and the worker's slot for the helping
        // part), or the reads below see the latch open.
        if self.register(help) {
            let helped = super::stack::help_until(
                || self.is_open(),
                |patient| match help {
                    _ if isolated() => Some(round(patient)),
                    Some(help) if help.help_until(&|| self.is_open() || isolated()) => Some(true),
                    // No worker, the pool terminated, or the stack is deep.
                    _ => None,
                },
                "a scope's waiter",
            );
            // Park keeps an unpark that came first: no wake is lost.
            while !helped && !self.is_open() {
                park();
            }
        }
        std::mem::forget(abort);
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
