//! The synchronisation primitives smartpool's protocols are written against.
//!
//! Normally these are `std`'s; under `cfg(loom)` they are loom's, so the loom
//! models in `sleep`, `status`, `task`, `core::close` and `scope` explore the real code
//! rather than a copy of it. Only the state that a protocol's correctness
//! argument is about goes through here; plain data structures (the `Arc` that
//! owns a task, crossbeam's deques) stay `std`.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

#[cfg(not(loom))]
pub(crate) use std::thread::{current as thread_current, park, Thread};

#[cfg(loom)]
pub(crate) use loom::thread::{current as thread_current, park, Thread};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard,
};

/// Locks `mutex`, ignoring poisoning: every critical section in smartpool
/// leaves its data consistent before any user code can panic, so a poisoned
/// lock carries no broken invariant.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// The cores this process may use; 1 when the platform cannot tell.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Gives up the processor between search rounds (loom's version lets the
/// model run another thread).
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
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

/// Asymmetric barriers: a pair of fences of which one side is cheap.
///
/// Some of our Dekker-style handshakes (store, fence, load on each side)
/// have a hot side, run on every task (a LIFO slot's fill and its owner's
/// take), and a rare side (a worker about to sleep, a thief). On Linux the
/// rare side calls `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which
/// runs a full memory barrier on every CPU that runs one of the process's
/// threads before it returns; the hot side then needs only to keep the
/// compiler from reordering its store and its load. Either every CPU ran the
/// barrier after the hot side's store (the rare side's load sees it), or
/// before its load (which then sees the rare side's store, made before the
/// call): the guarantee of a pair of `fence(SeqCst)`, which is what loom
/// models them as, and what they are where `membarrier` is missing, under
/// miri (which runs no such system call), or where the process could not
/// register for it (then [`barrier::light`] is a real fence too).
///
/// [`barrier::init`] decides once per process, before the first pool's
/// threads start; every thread that uses a pool's protocols reaches it
/// through that pool, so it reads the decision made before the pool was
/// built, and both sides of every pair read the same one.
pub(crate) mod barrier {
    #[cfg(all(not(loom), not(miri), target_os = "linux"))]
    static MEMBARRIER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

    /// `membarrier`'s commands (`linux/membarrier.h`, Linux 4.14).
    #[cfg(all(not(loom), not(miri), target_os = "linux"))]
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    #[cfg(all(not(loom), not(miri), target_os = "linux"))]
    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// Runs `membarrier` command `command`; whether it succeeded.
    #[cfg(all(not(loom), not(miri), target_os = "linux"))]
    fn membarrier(command: libc::c_int) -> bool {
        // SAFETY: `membarrier` takes integers and touches no memory of
        // ours; a kernel without it returns an error.
        unsafe { libc::syscall(libc::SYS_membarrier, command, 0, 0) == 0 }
    }

    /// Registers the process for `membarrier`'s expedited barrier, once (a
    /// kernel that refuses leaves both sides real fences).
    pub(crate) fn init() {
        #[cfg(all(not(loom), not(miri), target_os = "linux"))]
        MEMBARRIER.get_or_init(|| membarrier(REGISTER_PRIVATE_EXPEDITED));
    }

    #[cfg(all(not(loom), not(miri), target_os = "linux"))]
    #[inline]
    fn expedited() -> bool {
        MEMBARRIER.get().copied().unwrap_or(false)
    }

    /// The cheap side of an asymmetric pair (see the module doc).
    #[inline]
    pub(crate) fn light() {
        #[cfg(all(not(loom), not(miri), target_os = "linux"))]
        if expedited() {
            std::sync::atomic::compiler_fence(super::Ordering::SeqCst);
            return;
        }
        super::fence(super::Ordering::SeqCst);
    }

    /// The costly side of an asymmetric pair (see the module doc): a system
    /// call that interrupts every CPU running one of our threads.
    pub(crate) fn heavy() {
        #[cfg(all(not(loom), not(miri), target_os = "linux"))]
        if expedited() {
            std::sync::atomic::compiler_fence(super::Ordering::SeqCst);
            // Registered, the command fails only when the kernel is out of
            // memory for its CPU mask: a fence would not pair with the
            // light sides, so try again until it goes through.
            while !membarrier(PRIVATE_EXPEDITED) {
                std::thread::yield_now();
            }
            std::sync::atomic::compiler_fence(super::Ordering::SeqCst);
            return;
        }
        super::fence(super::Ordering::SeqCst);
    }
}
