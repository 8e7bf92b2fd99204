//! The synchronisation primitives smartpool's protocols are written against.
//!
//! Normally these are `std`'s; under `cfg(loom)` they are loom's, so the loom
//! models in `sleep`, `status`, `task`, `core::close` and `scope` explore the real code
//! rather than a copy of it. Only the state that a protocol's correctness
//! argument is about goes through here; plain data structures (the `Arc` that
//! owns a task, crossbeam's deques) stay `std`.

#[cfg(loom)]
use loom as imp;
#[cfg(not(loom))]
use std as imp;

pub(crate) use imp::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};
// `yield_now` gives up the processor between search rounds (loom's lets the
// model run another thread).
pub(crate) use imp::thread::{current as thread_current, park, yield_now, Thread};

// `park_timeout` parks the calling thread for at most its timeout; loom's
// parks until an unpark (its models wait no time).
#[cfg(not(loom))]
pub(crate) use std::thread::park_timeout;
#[cfg(loom)]
pub(crate) fn park_timeout(_timeout: std::time::Duration) {
    loom::thread::park();
}

/// Holds `value` in a cell until dropped, then puts back what the cell
/// held before (also in an unwind).
pub(crate) struct Restore<'a, T: Copy>(&'a std::cell::Cell<T>, T);

impl<'a, T: Copy> Restore<'a, T> {
    /// Sets `cell` to `value` for the guard's life.
    pub(crate) fn set(cell: &'a std::cell::Cell<T>, value: T) -> Restore<'a, T> {
        Restore(cell, cell.replace(value))
    }
}

impl<T: Copy> Drop for Restore<'_, T> {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

/// Locks `mutex`, ignoring poisoning: every critical section in smartpool
/// leaves its data consistent before any user code can panic, so a poisoned
/// lock carries no broken invariant.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`lock`] for a std mutex also under loom: for state that no loom model
/// runs (the blocking threads, the injector of a `WorkQueue`, the heap of
/// a `ShortestDeadlineFirst`).
pub(crate) fn lock_std<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One waker, registered and woken under a lock: `futures`' `AtomicWaker`
/// for the cold paths (a close, a scoped handle), where a lock costs
/// nothing measurable. User code (the clone, the old waker's drop, the
/// wake) runs outside the lock.
#[derive(Debug)]
pub(crate) struct WakerSlot(Mutex<Option<std::task::Waker>>);

impl WakerSlot {
    pub(crate) fn new() -> WakerSlot {
        WakerSlot(Mutex::new(None))
    }

    /// Leaves `waker` to be woken by the next [`WakerSlot::wake`]; it
    /// replaces any waker registered before.
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        let new = Some(waker.clone());
        let old = std::mem::replace(&mut *lock(&self.0), new);
        drop(old);
    }

    /// Empties the slot, waking nobody.
    pub(crate) fn clear(&self) {
        let old = lock(&self.0).take();
        drop(old);
    }

    /// Wakes the registered waker, if any, and empties the slot.
    pub(crate) fn wake(&self) {
        let waker = lock(&self.0).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Unparks a thread: the waker of a thread that parks between polls.
pub(crate) struct Unpark(pub(crate) std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on the calling thread, parking it between
/// polls (`Close::wait`; a pool's own `block_on` also runs its tasks). A
/// flag, not the park token alone, says a wake came: user code the poll
/// runs may park and unpark this thread and eat the token.
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Flag(std::sync::atomic::AtomicBool, std::thread::Thread);
    impl std::task::Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::Release);
            self.1.unpark();
        }
    }
    let flag = std::sync::Arc::new(Flag(false.into(), std::thread::current()));
    let waker = std::task::Waker::from(flag.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        while !flag.0.swap(false, std::sync::atomic::Ordering::Acquire) {
            std::thread::park();
        }
    }
}

/// How far [`later`] reaches at most: 30 years, far past any wait a pool
/// serves, and within what every platform's `Instant` holds.
pub(crate) const FAR: std::time::Duration = std::time::Duration::from_secs(86_400 * 365 * 30);

/// `from + delay`, clamped to `from + FAR`: never an overflow, whatever
/// duration a user passed (a keep-alive, a slice, a timeout of
/// `Duration::MAX` means "for ever" in practice).
pub(crate) fn later(from: std::time::Instant, delay: std::time::Duration) -> std::time::Instant {
    from.checked_add(delay.min(FAR))
        .or_else(|| from.checked_add(std::time::Duration::from_secs(86_400)))
        .unwrap_or(from)
}

/// A cell for data a protocol hands from thread to thread (under loom, its
/// checked twin, which reports two threads using it at once).
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a pointer to the value; the caller's protocol makes
    /// this thread its only user meanwhile.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
