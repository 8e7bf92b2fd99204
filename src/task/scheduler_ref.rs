//! A task's way to its pool: [`SchedulerRef`], one thin pointer in every
//! task's header.
//!
//! It is an `Arc` of the pool's `Weak<dyn Schedule>`, made once a pool.
//! A `Weak` in each header would be a word more a task. The `Weak` keeps
//! the pool's allocation reserved, not the pool alive: a task's pointer to
//! its pool stays unique while the task exists.

use std::sync::{Arc, Weak};

use super::Schedule;

/// A counted reference to a pool's `Weak` (see the module doc).
#[derive(Clone)]
pub(crate) struct SchedulerRef(Arc<Weak<dyn Schedule>>);

impl SchedulerRef {
    /// The link for the pool behind `pool` (made once a pool).
    pub(crate) fn new(pool: Weak<dyn Schedule>) -> SchedulerRef {
        SchedulerRef(Arc::new(pool))
    }

    /// The pool's address, whether or not it is still alive.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *const dyn Schedule {
        self.0.as_ptr()
    }

    /// The pool, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<Arc<dyn Schedule>> {
        self.0.upgrade()
    }

    /// Whether both lead to the same pool.
    #[inline]
    pub(crate) fn same_pool(&self, other: &SchedulerRef) -> bool {
        Weak::ptr_eq(&self.0, &other.0)
    }
}
