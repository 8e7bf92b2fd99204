//! The calling thread's worker context: the crate's thread-local state.
//!
//! A worker thread *enters* its context when it starts and leaves it when
//! it ends (a guard); any other thread has none. The context holds:
//!
//! * the address of the worker's pool, in a `Cell`: what a task compares
//!   with its own pool's address to know that it is woken on one of its
//!   pool's workers, and may reschedule through that worker (see
//!   `task::cell`), with one thread-local load and no lock;
//! * the worker itself, type-erased, which `core::context` (the layer that
//!   knows what a worker is) downcasts for its pool's hooks (helping in a
//!   wait, blocking), and its address, which `core::context` reads as the
//!   worker on every task's path (its local queues, its LIFO slot state,
//!   its seat's counts) with no borrow and no downcast.
//!
//! It lives below every other module, so that the task layer can read the
//! pool address without knowing the pool, and each layer above reads what
//! it knows of. It also carries, on any thread, the reason of a task
//! cancellation in progress (see `task::cancel_reason`), and the task being
//! polled, innermost first, with whether it woke itself during that poll
//! (see `task::cell`: such a wake is recorded here, not in the task's state
//! word).
//!
//! Invariant: *while the pool address is set, the worker's pool is alive*:
//! the worker enters with the address of a pool it holds an `Arc` to, and
//! leaves (the guard) before it lets that `Arc` go.
//!
//! Under loom the context is std's thread-local, which loom's threads (one
//! OS thread) would share: no loom model runs a worker, so the direct
//! reschedule path is not modelled; a model that does must make this
//! loom's `thread_local!`. The polling marker alone is loom's thread-local
//! under loom, since the task models poll on several loom threads.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

struct Context {
    /// The worker's pool's address, or null.
    pool: Cell<*const ()>,
    /// The worker, for `core::context`.
    worker: RefCell<Option<Rc<dyn Any>>>,
    /// The worker's address as `core::context` gave it (the value inside
    /// `worker`'s `Rc`), or null: for the reads on every task's path,
    /// which need no borrow or downcast (`core::context::with_local`).
    worker_address: Cell<*const ()>,
    /// On any thread: while a cancelled task's future is being dropped,
    /// why (a `CancelReason`'s code, 0 for none), for a future that reports
    /// its own end (a scoped task; see `task::cancel_reason`).
    cancelling: Cell<u8>,
    /// The task being polled on this thread (innermost), or null.
    #[cfg(not(loom))]
    polling: Polling,
    /// Where this thread counts for a pool's metrics (see `core::meters`).
    counts: Counts,
}

/// The block of counts this thread writes for one pool: its seat's, or a
/// block of its own (kept alive here). Forgotten whenever the thread's
/// worker changes, so that it never names a seat the thread left.
struct Counts {
    /// The pool's id, or `usize::MAX` for none.
    pool: Cell<usize>,
    /// The block (its first count), when `pool` names one.
    block: Cell<*const ()>,
    /// Keeps an outside block alive while `block` points into it.
    keep: RefCell<Option<std::sync::Arc<dyn Any + Send + Sync>>>,
}

/// The task being polled on this thread, and whether it woke itself.
struct Polling {
    task: Cell<*const ()>,
    woke_itself: Cell<bool>,
}

impl Polling {
    const fn new() -> Polling {
        Polling {
            task: Cell::new(std::ptr::null()),
            woke_itself: Cell::new(false),
        }
    }
}

thread_local! {
    static CONTEXT: Context = const {
        Context {
            pool: Cell::new(std::ptr::null()),
            worker: RefCell::new(None),
            worker_address: Cell::new(std::ptr::null()),
            cancelling: Cell::new(0),
            #[cfg(not(loom))]
            polling: Polling::new(),
            counts: Counts {
                pool: Cell::new(usize::MAX),
                block: Cell::new(std::ptr::null()),
                keep: RefCell::new(None),
            },
        }
    };
}

// Under loom, loom's threads share one OS thread: the marker must be loom's
// thread-local, so that the models see each thread's own.
#[cfg(loom)]
loom::thread_local! {
    static POLLING: Polling = Polling::new();
}

/// Calls `f` with this thread's polling marker (`None` while the thread's
/// locals are being destroyed).
#[inline]
fn with_polling<R>(f: impl FnOnce(&Polling) -> R) -> Option<R> {
    #[cfg(not(loom))]
    return CONTEXT.try_with(|c| f(&c.polling)).ok();
    #[cfg(loom)]
    return POLLING.try_with(f).ok();
}

/// A poll in progress on this thread (see [`begin_poll`]). Dropping it, at
/// [`PollMarker::end`] or in an unwind, restores the marker of the poll it
/// interrupted, so a nested poll never loses the outer one's wake nor
/// leaves its own task's address behind.
#[must_use]
pub(crate) struct PollMarker {
    /// The interrupted poll's task and wake flag; `None` if this thread's
    /// locals were gone at the start (then no wake is recorded here).
    outer: Option<(*const (), bool)>,
}

/// This thread starts polling the task at `task` (nested in whatever poll
/// it is in).
#[inline]
pub(crate) fn begin_poll(task: *const ()) -> PollMarker {
    PollMarker {
        outer: with_polling(|p| (p.task.replace(task), p.woke_itself.replace(false))),
    }
}

impl PollMarker {
    /// The poll returned: whether the task woke itself during it
    /// ([`wake_polling`]).
    #[inline]
    pub(crate) fn end(self) -> bool {
        if self.outer.is_none() {
            return false;
        }
        // The locals outlive a poll that began with them: a failure here
        // cannot happen, and a spurious re-queue would be harmless.
        with_polling(|p| p.woke_itself.get()).unwrap_or(true)
    }
}

impl Drop for PollMarker {
    #[inline]
    fn drop(&mut self) {
        if let Some((task, woke_itself)) = self.outer {
            with_polling(|p| {
                p.task.set(task);
                p.woke_itself.set(woke_itself);
            });
        }
    }
}

/// The task this thread is polling (innermost), as given to
/// [`begin_poll`], or `None`. The poller keeps it alive until the poll's
/// marker drops, which restores the outer poll's task.
#[inline]
pub(crate) fn polling() -> Option<*const ()> {
    with_polling(|p| p.task.get()).filter(|task| !task.is_null())
}

/// A wake of the task at `task`: if this thread is polling it (innermost),
/// records the wake for the poll's end and returns `true`; else `false`
/// (the caller wakes it through its state word).
#[inline]
pub(crate) fn wake_polling(task: *const ()) -> bool {
    with_polling(|p| {
        let mine = std::ptr::addr_eq(p.task.get(), task);
        if mine {
            p.woke_itself.set(true);
        }
        mine
    })
    .unwrap_or(false)
}

/// Makes this thread a worker of the pool at `pool` until the guard drops
/// (or the thread's locals are being destroyed). The caller keeps the pool
/// alive until then (see the module's invariant). Entries nest: a thread
/// that drives a second pool while it is a worker of a first (a guest
/// seat, see `core::seats`) is the second's worker until the guard drops,
/// which makes it the first's again.
/// The context also keeps the address of the `W` inside `worker` (see
/// [`pool_and_worker_address`]): `W` is what a reader of that address
/// may take it for (`core::context` enters `WorkerLocal`s only).
pub(crate) fn enter<W: Any>(pool: *const (), worker: Rc<W>) -> Entered {
    let address = Rc::as_ptr(&worker).cast::<()>();
    let outer = CONTEXT.with(|c| swap(c, (pool, Some(worker as Rc<dyn Any>), address)));
    Entered { outer: Some(outer) }
}

/// Puts `entry` in the context and returns what it held. The worker
/// first: should its replace panic, the address still names the worker
/// the context holds.
fn swap(c: &Context, (pool, worker, address): Saved) -> Saved {
    let worker = c.worker.replace(worker);
    c.counts.pool.set(usize::MAX);
    (
        c.pool.replace(pool),
        worker,
        c.worker_address.replace(address),
    )
}

/// No pool, no worker.
const NONE: Saved = (std::ptr::null(), None, std::ptr::null());

/// A thread's entry into a worker context (see [`enter`]): dropping it
/// restores what the thread was before.
#[must_use]
pub(crate) struct Entered {
    outer: Option<Saved>,
}

/// What an entry replaced: the pool address, the worker, its address.
type Saved = (*const (), Option<Rc<dyn Any>>, *const ());

impl Drop for Entered {
    fn drop(&mut self) {
        let outer = self.outer.take().unwrap_or(NONE);
        // The worker we replace drops after the borrow: its drop may run
        // user code (never, today: a worker's hooks hold a pool reference).
        let _left = CONTEXT.try_with(|c| swap(c, outer));
    }
}

/// Makes this thread no worker until the guard drops, which restores what
/// it was (a worker inside a blocking section, see `pool::blocking`, whose
/// closure must not push onto the queues it handed over).
pub(crate) fn leave_for_now() -> Entered {
    let outer = CONTEXT.try_with(|c| swap(c, NONE)).ok();
    Entered { outer }
}

/// Whether this thread's context is there (not being destroyed with the
/// thread's other locals).
pub(crate) fn available() -> bool {
    CONTEXT.try_with(|_| ()).is_ok()
}

/// The address of the pool whose worker this thread is, or null (not a
/// worker, or its locals are being destroyed).
#[inline]
pub(crate) fn pool() -> *const () {
    pool_and_worker_address().0
}

/// Calls `f` with the block of counts this thread writes for the pool
/// `pool_id` (see `core::meters`); `None` while the thread's locals are
/// being destroyed. One read of the context when it is the pool this
/// thread last counted for; else `resolve` names the block (the thread's
/// seat's, or one of its own, which the context then keeps alive).
#[inline(always)]
pub(crate) fn with_counts<R>(
    pool_id: usize,
    resolve: impl FnOnce() -> (*const (), Option<std::sync::Arc<dyn Any + Send + Sync>>),
    f: impl FnOnce(*const ()) -> R,
) -> Option<R> {
    CONTEXT
        .try_with(|c| {
            let block = if c.counts.pool.get() == pool_id {
                c.counts.block.get()
            } else {
                resolve_counts(&c.counts, pool_id, resolve)
            };
            f(block)
        })
        .ok()
}

#[cold]
#[inline(never)]
fn resolve_counts(
    counts: &Counts,
    pool_id: usize,
    resolve: impl FnOnce() -> (*const (), Option<std::sync::Arc<dyn Any + Send + Sync>>),
) -> *const () {
    let (block, keep) = resolve();
    // The old block is let go of after the cache names the new one.
    let old = counts.keep.replace(keep);
    counts.block.set(block);
    counts.pool.set(pool_id);
    drop(old);
    block
}

/// The pool address and the worker's address (of the `W` given to
/// [`enter`]) of this thread, or nulls: one read of the thread-local. The
/// worker is alive while its address is set (the context holds its `Rc`),
/// and only this thread can reach it.
#[inline]
pub(crate) fn pool_and_worker_address() -> (*const (), *const ()) {
    CONTEXT
        .try_with(|c| (c.pool.get(), c.worker_address.get()))
        .unwrap_or((std::ptr::null(), std::ptr::null()))
}

/// Sets the code of the cancellation in progress on this thread, returning
/// the one it replaces (0: none).
pub(crate) fn set_cancelling(code: u8) -> u8 {
    CONTEXT
        .try_with(|c| c.cancelling.replace(code))
        .unwrap_or(0)
}

/// The code of the cancellation in progress on this thread (0: none).
pub(crate) fn cancelling() -> u8 {
    CONTEXT.try_with(|c| c.cancelling.get()).unwrap_or(0)
}

/// The calling thread's worker, if it is one of type `W`: a counted
/// reference, for a caller that runs tasks meanwhile (a wait that helps).
pub(crate) fn worker<W: 'static>() -> Option<Rc<W>> {
    CONTEXT
        .try_with(|c| c.worker.borrow().clone()?.downcast::<W>().ok())
        .ok()
        .flatten()
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;

    /// A nested poll records its own task's wakes; the outer poll's wake
    /// survives it, also when the nested poll unwinds.
    #[test]
    fn nested_polls_keep_their_own_wakes() {
        let (a, b) = (
            std::ptr::without_provenance::<()>(1),
            std::ptr::without_provenance::<()>(2),
        );
        let outer = begin_poll(a);
        assert!(wake_polling(a));
        let inner = begin_poll(b);
        assert!(!wake_polling(a), "a is not the innermost poll");
        assert!(!inner.end(), "b did not wake itself");
        assert!(outer.end(), "a's wake survived b's poll");

        let outer = begin_poll(a);
        let unwound = std::panic::catch_unwind(|| {
            let _inner = begin_poll(b);
            assert!(wake_polling(b));
            panic!("the nested poll unwinds");
        });
        assert!(unwound.is_err());
        assert!(wake_polling(a), "a is the innermost poll again");
        assert!(outer.end());
        assert!(!wake_polling(a), "no poll in progress");
    }
}
