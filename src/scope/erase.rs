//! The scoped task: a user's future wrapped so that it ends exactly once,
//! and only then counts its scope down; then boxed and its lifetime erased
//! for the pool's `'static` task machinery.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::handle::{ScopedJoinHandle, Slot};
use super::ScopeState;
use crate::contain::panic_message;
use crate::sync::Ordering;
use crate::task::{CancelReason, JoinError};

/// A scoped task, as the pool sees it.
pub(crate) type Erased = crate::core::context::LocalTask;

/// Owns the user's future and its slot until the task ends. Every field is
/// `None` after `finish`.
pub(super) struct ScopedTask<F: Future> {
    /// Boxed so that it stays pinned without a pin projection.
    future: Option<Pin<Box<F>>>,
    slot: Option<Arc<Slot<F::Output>>>,
    scope: Option<Arc<ScopeState>>,
    /// Whether the scope's `idle` counts the task now (see
    /// `ScopeState::idle`): a task of the waiter's pool while it is
    /// parked; any other until it ends.
    counted: bool,
    /// Whether the task goes to the waiter's pool (in a claim).
    near: bool,
}

impl<F> ScopedTask<F>
where
    F: Future + Send,
    F::Output: Send,
{
    /// Wraps `future` for `scope`, which must already count it (see
    /// `Scope::exec`), and erases its lifetime. `near`: it goes to the
    /// waiter's pool, in a claim; else `idle` counts it until it ends.
    pub(super) fn erase<'scope>(
        future: F,
        scope: Arc<ScopeState>,
        near: bool,
    ) -> (Erased, ScopedJoinHandle<'scope, F::Output>)
    where
        F: 'scope,
        F::Output: 'scope,
    {
        let slot = Arc::new(Slot::new());
        if !near {
            scope.idle.fetch_add(1, Ordering::Relaxed);
        }
        let task = ScopedTask {
            future: Some(Box::pin(future)),
            slot: Some(slot.clone()),
            scope: Some(scope),
            counted: !near,
            near,
        };
        let task: Pin<Box<dyn Future<Output = ()> + Send + 'scope>> = Box::pin(task);
        // SAFETY: only the trait object's lifetime bound changes (same fat
        // pointer, same vtable). The object borrows from `'scope` through
        // `future` and `slot` only, and nothing reaches them after the
        // scope ends:
        // 1. `scope()` neither returns nor unwinds before its latch opens
        //    (`ScopeState::run_own` catches what it runs and leaks, never
        //    drops, a payload that escapes its catch; `CountLatch::wait`
        //    catches panics, and aborts rather than unwind);
        // 2. the latch counts this task from before it exists until
        //    `finish` counts it down, and `finish` runs exactly once (its
        //    `scope` field is taken), on `Ready`, on a panic, or in `Drop`,
        //    and counts down only after dropping the future and its
        //    reference to the slot (so the output too, unless the handle,
        //    itself bound to `'scope`, holds it), even if it unwinds: the
        //    count-down is a guard dropped after those;
        // 3. after that every field is `None`: polling returns `Ready(())`
        //    and dropping does nothing, whenever the pool does either. A task
        //    that never ends (leaked, or never woken) keeps the scope waiting
        //    forever instead.
        let task: Erased = unsafe {
            std::mem::transmute::<Pin<Box<dyn Future<Output = ()> + Send + 'scope>>, Erased>(task)
        };
        (task, ScopedJoinHandle::new(slot))
    }
}

impl<F: Future> ScopedTask<F> {
    /// Ends the task, once, as `end` says: its output or its panic, or
    /// `None` if its pool dropped it unfinished. Drops the future, fills
    /// the slot and lets go of it, then counts the scope down. Catches the
    /// user code it runs (drops, the joiner's waker) and hands any panic
    /// to the scope.
    fn finish(&mut self, end: Option<std::thread::Result<F::Output>>) {
        let Some(scope) = self.scope.take() else {
            return;
        };
        if std::mem::take(&mut self.counted) {
            scope.idle.fetch_sub(1, Ordering::Relaxed);
        }
        // Counts down when dropped, so also if something here unwinds
        // after all (a panicking logger): declared before every local that
        // holds borrowed data, it drops after them.
        let scope = CountDownOnDrop(scope);
        let end = end; // a local now: dropped before `scope`, unlike a parameter
        scope.0.run_caught(|| drop(self.future.take()));
        let result = match end {
            Some(Ok(output)) => Ok(output),
            Some(Err(panic)) => {
                // The payload goes to the scope, which resumes it; the
                // handle gets its message.
                let message = format!("scoped task panicked: {}", panic_message(&*panic));
                scope.0.record_panic(panic);
                Err(JoinError::panicked(Box::new(message)))
            }
            // Dropped by the pool as it cancelled the task around it (which
            // says why), or dropped with its cell (the pool went away).
            None => Err(JoinError::cancelled(
                crate::task::cancel_reason().unwrap_or(CancelReason::PoolClosed),
            )),
        };
        if let Some(slot) = self.slot.take() {
            slot.fill(result);
            // The last reference if the handle is gone: drops the output.
            scope.0.run_caught(|| drop(slot));
        }
    }
}

/// The scope's count for one task, given back on drop.
struct CountDownOnDrop(Arc<ScopeState>);

impl Drop for CountDownOnDrop {
    fn drop(&mut self) {
        self.0.latch.count_down();
    }
}

impl<F> Future for ScopedTask<F>
where
    F: Future + Send,
    F::Output: Send,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // `ScopedTask` is `Unpin`: the user's future is pinned in its box.
        let this = self.get_mut();
        let (Some(future), Some(scope)) = (this.future.as_mut(), this.scope.as_deref()) else {
            return Poll::Ready(());
        };
        if this.near && std::mem::take(&mut this.counted) {
            scope.idle.fetch_sub(1, Ordering::Relaxed);
        }
        let end = match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => {
                // Counted before the poll returns: a waiter that saw the
                // task running sees it parked before anyone can need it.
                if this.near {
                    this.counted = true;
                    scope.idle.fetch_add(1, Ordering::Relaxed);
                }
                return Poll::Pending;
            }
            Ok(Poll::Ready(output)) => Ok(output),
            Err(panic) => Err(panic),
        };
        this.finish(Some(end));
        Poll::Ready(())
    }
}

impl<F: Future> Drop for ScopedTask<F> {
    fn drop(&mut self) {
        self.finish(None);
    }
}
