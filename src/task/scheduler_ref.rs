//! A task's way to its pool: [`SchedulerRef`], a counted reference to the
//! pool's `Weak`, one thin pointer in every task's header.
//!
//! One `Target` per pool holds the pool's `Weak<dyn Schedule>` (a `Weak`
//! in each header would be a word more a task, BENCHMARKS.md, W10). It
//! keeps the pool's allocation reserved but not the pool alive. The pool
//! and its channel links hold references to it, and so does every task,
//! from its making to its free.
//!
//! # The count, and the workers' reserves
//!
//! Made and freed one at a time, as an `Arc`'s, the count would be written
//! by every task's maker and every task's freer: a cache line that crosses
//! between cores twice a task when one thread submits and a worker frees
//! (BENCHMARKS.md, "The scheduler link's count"). So the count is the
//! `Arc` protocol with a step of more than one:
//!
//! * `refs` counts every reference: each live `SchedulerRef`, plus each
//!   reference held in a worker's *reserve* (see `context::Reserve`: one a
//!   thread, to one target at a time, a plain number);
//! * a worker of the pool making a task ([`SchedulerRef::for_task`]) takes
//!   a reference from its reserve; with none there, it adds [`BATCH`] to
//!   `refs` at once and keeps all but one. It may add: it holds a
//!   reference (the link it makes the task through), so `refs` ≥ 1;
//! * a reference dropped on a worker of its pool goes into that worker's
//!   reserve; at `2 × BATCH` held, the worker gives `BATCH` back with one
//!   subtraction, which leaves `refs` ≥ `BATCH` (it still holds that many)
//!   and so never frees;
//! * a drop anywhere else subtracts one, and a clone (outside
//!   [`SchedulerRef::for_task`]) always adds one;
//! * a reserve is given back, with one subtraction, whenever its thread's
//!   pool changes (a worker's start and end, a blocking section) and when
//!   the thread ends (`context`);
//! * the subtraction that takes `refs` to 0 frees the target (release, then
//!   an acquire fence, as `Arc`): exactly one does, since no reference is
//!   counted twice and a subtraction gives back only what its thread holds.
//!
//! Invariant: between two steps of a thread, `refs` equals the live
//! `SchedulerRef`s plus the references in reserves (a refill adds before
//! it fills the reserve: a surplus for a moment, never a shortfall), so it
//! is 0 only when neither is left, and nothing reads the target after that. A reserve is only ever filled for the pool whose
//! worker its thread is (the pool address in the context equals the
//! target's), and that address names one pool while it is set: the
//! target's `Weak` keeps the pool's allocation, so no other pool can take
//! the address while a reference exists.

use std::ptr::NonNull;
use std::sync::Weak;

use super::Schedule;
use crate::context::{self, Reserve};
use crate::sync::{fence, AtomicUsize, Ordering};

/// How many references a worker takes into its reserve at once; it gives
/// back as many when it holds twice this.
#[cfg(not(loom))]
const BATCH: usize = 64;
/// Small under loom, so that a model reaches every step.
#[cfg(loom)]
const BATCH: usize = 2;

/// Beyond this, the count aborts the process (as `Arc`'s): references
/// leaked in a loop must not wrap it.
const MAX_REFS: usize = isize::MAX as usize;

/// A counted reference to a pool's [`Target`] (see the module doc).
pub(crate) struct SchedulerRef(NonNull<Target>);

// SAFETY: the target is shared data: an atomic count and a `Weak` to a
// `Send + Sync` object (checked below), which may be used and dropped from
// any thread.
unsafe impl Send for SchedulerRef {}
// SAFETY: as above; `&SchedulerRef` gives only shared access to the target.
unsafe impl Sync for SchedulerRef {}

const _: fn() = || {
    fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Weak<dyn Schedule>>();
};

/// The pool's `Weak` and the count of references to it, each on cache
/// lines of its own: the count changes as tasks are made and freed, the
/// pointer, which every wake and free reads, never.
#[repr(align(128))]
struct Target {
    pool: Weak<dyn Schedule>,
    refs: Lined<AtomicUsize>,
}

/// A value on 128-byte lines of its own.
#[repr(align(128))]
struct Lined<T>(T);

impl SchedulerRef {
    /// The link for the pool behind `pool` (made once a pool).
    pub(crate) fn new(pool: Weak<dyn Schedule>) -> SchedulerRef {
        let target = Box::new(Target {
            pool,
            refs: Lined(AtomicUsize::new(1)),
        });
        SchedulerRef(NonNull::from(Box::leak(target)))
    }

    #[inline]
    fn target(&self) -> &Target {
        // SAFETY: this reference is counted in `refs`, so the target is not
        // freed while it lives (see the module doc).
        unsafe { self.0.as_ref() }
    }

    #[inline]
    fn address(&self) -> *const () {
        self.0.as_ptr().cast_const().cast()
    }

    /// The pool's address, whether or not it is still alive.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const dyn Schedule {
        self.target().pool.as_ptr()
    }

    /// The pool, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<std::sync::Arc<dyn Schedule>> {
        self.target().pool.upgrade()
    }

    /// Whether both lead to the same pool.
    #[inline]
    pub(crate) fn same_pool(&self, other: &SchedulerRef) -> bool {
        Weak::ptr_eq(&self.target().pool, &other.target().pool)
    }

    /// A reference for a new task: from the calling thread's reserve if it
    /// is a worker of this pool (see the module doc), else a clone.
    #[inline]
    pub(crate) fn for_task(&self) -> SchedulerRef {
        let on_worker = context::with_reserve(|pool, reserve| {
            std::ptr::addr_eq(pool, self.as_ptr()).then(|| self.take_from(reserve))
        });
        on_worker.flatten().unwrap_or_else(|| self.clone())
    }

    /// Takes a reference to this target out of `reserve`, which belongs to
    /// a worker of this pool (refilling it by [`BATCH`] if empty).
    pub(super) fn take_from(&self, reserve: &Reserve) -> SchedulerRef {
        let held = if reserve.target.get() == self.address() {
            reserve.held.get()
        } else {
            // Held for another target: cannot be (a reserve is given back
            // when its thread's pool changes), but give them back if so.
            reserve.flush();
            0
        };
        if held > 0 {
            reserve.held.set(held - 1);
        } else {
            add(self.target(), BATCH);
            reserve.target.set(self.address());
            reserve.release.set(release_raw);
            reserve.held.set(BATCH - 1);
        }
        SchedulerRef(self.0)
    }

    /// Gives this reference to `reserve`, which belongs to a worker of this
    /// pool (giving [`BATCH`] back to the count at `2 × BATCH` held).
    pub(super) fn give_to(self, reserve: &Reserve) {
        let this = std::mem::ManuallyDrop::new(self);
        if reserve.target.get() != this.address() {
            reserve.flush();
            reserve.target.set(this.address());
            reserve.release.set(release_raw);
        }
        let held = reserve.held.get() + 1;
        if held >= 2 * BATCH {
            reserve.held.set(held - BATCH);
            // SAFETY: `BATCH` of the references the reserve held, which
            // stay counted no longer; at least `BATCH` remain held, so the
            // count stays above 0 (see the module doc).
            unsafe { release_raw(this.address(), BATCH) };
        } else {
            reserve.held.set(held);
        }
    }
}

/// Adds `n` to `target`'s count, which the caller's reference keeps above 0.
#[inline]
fn add(target: &Target, n: usize) {
    // Relaxed, as `Arc::clone`: a new reference is made from one the
    // caller holds, which orders whatever it is sent along with.
    if target.refs.0.fetch_add(n, Ordering::Relaxed) > MAX_REFS {
        std::process::abort();
    }
}

/// Gives back `n` references to the target at `address`, freeing it if
/// they were the last.
///
/// # Safety
///
/// `address` is a live target's, and the caller holds `n` references to it
/// that it gives up.
unsafe fn release_raw(address: *const (), n: usize) {
    let target = address.cast::<Target>();
    // SAFETY: the caller's references keep the target alive up to here.
    let refs = unsafe { &(*target).refs.0 };
    if refs.fetch_sub(n, Ordering::Release) != n {
        return;
    }
    // Every other holder's last use of the target happened before its
    // subtraction, which this acquires (as `Arc`'s drop).
    fence(Ordering::Acquire);
    // SAFETY: the count reached 0: no reference is left (see the module
    // doc); the target came from `Box::leak` in `new`.
    #[allow(unused_mut)]
    let mut target = unsafe { Box::from_raw(target.cast_mut()) };
    // Under loom, the free is a write that every earlier change of the
    // count must happen before. (Reads of the target are not checked: the
    // task models' cells, which carry references between threads, are std
    // `Arc`s, whose ordering loom does not see.)
    #[cfg(loom)]
    target.refs.0.with_mut(|_| ());
    drop(target);
}

impl Clone for SchedulerRef {
    fn clone(&self) -> SchedulerRef {
        add(self.target(), 1);
        SchedulerRef(self.0)
    }
}

impl Drop for SchedulerRef {
    #[inline]
    fn drop(&mut self) {
        let kept = context::with_reserve(|pool, reserve| {
            std::ptr::addr_eq(pool, self.as_ptr()) && {
                // The reserve takes the reference over.
                SchedulerRef(self.0).give_to(reserve);
                true
            }
        });
        if kept != Some(true) {
            // SAFETY: this reference, given up.
            unsafe { release_raw(self.address(), 1) };
        }
    }
}
