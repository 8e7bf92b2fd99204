//! The calling thread's worker context: the one thread-local of the crate.
//!
//! A worker thread *enters* its context when it starts and leaves it when
//! it ends (a guard); any other thread has none. The context holds:
//!
//! * the address of the worker's pool, in a `Cell`: what a task compares
//!   with its own pool's address to know that it is woken on one of its
//!   pool's workers, and may reschedule through that worker (see
//!   `task::cell`), with one thread-local load and no lock;
//! * the worker itself, type-erased, which `core::context` (the layer that
//!   knows what a worker is) downcasts: its local queues, its LIFO slot
//!   state, and its pool's hooks (rescheduling, helping in a wait).
//!
//! It lives below every other module, so that the task layer can read the
//! pool address without knowing the pool, and each layer above reads what
//! it knows of. (It also carries, on any thread, the reason of a task
//! cancellation in progress: see `task::cancelling`.)
//!
//! Invariant: *while the pool address is set, the worker's pool is alive*:
//! the worker enters with the address of a pool it holds an `Arc` to, and
//! leaves (the guard) before it lets that `Arc` go.
//!
//! Under loom the thread-local is std's, which loom's threads (one OS
//! thread) would share: no loom model runs a worker, so the direct
//! reschedule path is not modelled; a model that does must make this
//! loom's `thread_local!`.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

struct Context {
    /// The worker's pool's address, or null.
    pool: Cell<*const ()>,
    /// The worker, for `core::context`.
    worker: RefCell<Option<Rc<dyn Any>>>,
    /// On any thread: while a cancelled task's future is being dropped,
    /// why (a `CancelReason`'s code, 0 for none), for a future that reports
    /// its own end (a scoped task; see `task::cancelling`).
    cancelling: Cell<u8>,
}

thread_local! {
    static CONTEXT: Context = const {
        Context {
            pool: Cell::new(std::ptr::null()),
            worker: RefCell::new(None),
            cancelling: Cell::new(0),
        }
    };
}

/// Makes this thread a worker of the pool at `pool` until the guard drops
/// (or the thread's locals are being destroyed). The caller keeps the pool
/// alive until then (see the module's invariant).
pub(crate) fn enter(pool: *const (), worker: Rc<dyn Any>) -> impl Drop {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let _ = CONTEXT.try_with(|c| {
                c.pool.set(std::ptr::null());
                c.worker.borrow_mut().take()
            });
        }
    }
    CONTEXT.with(|c| {
        c.pool.set(pool);
        *c.worker.borrow_mut() = Some(worker);
    });
    Leave
}

/// The address of the pool whose worker this thread is, or null (not a
/// worker, or its locals are being destroyed).
#[inline]
pub(crate) fn pool() -> *const () {
    CONTEXT
        .try_with(|c| c.pool.get())
        .unwrap_or(std::ptr::null())
}

/// Calls `f` with the calling thread's worker, if it is one of type `W`.
/// The worker is borrowed for the call: `f` must not enter or leave a
/// context (nothing does but a worker's start and end).
#[inline]
pub(crate) fn with_worker<W: 'static, R>(f: impl FnOnce(&W) -> R) -> Option<R> {
    CONTEXT
        .try_with(|c| c.worker.borrow().as_deref()?.downcast_ref::<W>().map(f))
        .ok()
        .flatten()
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
