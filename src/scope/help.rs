//! How a waiting worker thread reaches its pool: a scope's wait finds the
//! calling thread's worker in the worker context and helps through it.

use std::rc::Rc;

use crate::core::context::{self, WorkerLocal};

/// A worker thread's access to its own pool, for a scope waiting on it.
/// (A trait so that the loom model can wait with a minimal worker.)
pub(crate) trait Help {
    /// Runs the pool's queued tasks until `done()` is true, through the
    /// worker's schedule; when there are none, sleeps through the pool's
    /// sleep protocol with `done()` in the final check before blocking.
    /// Returns `true` once `done()`, or `false` early, for the caller to
    /// park: the pool has terminated (and was drained), or the worker's
    /// stack is too deep in nested waits to help.
    fn help_until(&self, done: &dyn Fn() -> bool) -> bool;

    /// Wakes this worker from any thread if it sleeps in its slot.
    fn waker(&self) -> Box<dyn Fn() + Send + Sync>;
}

impl Help for WorkerLocal {
    fn help_until(&self, done: &dyn Fn() -> bool) -> bool {
        WorkerLocal::help_until(self, done)
    }

    fn waker(&self) -> Box<dyn Fn() + Send + Sync> {
        WorkerLocal::waker(self)
    }
}

/// The calling worker thread's help, if it is a worker.
pub(super) fn current() -> Option<Rc<dyn Help>> {
    // A counted reference: the borrow of the context ends before helping
    // runs tasks, which may open scopes of their own.
    context::current().map(|worker| worker as Rc<dyn Help>)
}
