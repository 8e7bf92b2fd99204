//! `ScopedJoinHandle`: the output of a scoped task, and the slot it comes
//! through.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::claim::Claim;
use super::latch::CountLatch;
use super::ScopeState;
use crate::core::context::Allowed;
use crate::sync::{lock, Mutex, Ordering, WakerSlot};
use crate::task::JoinError;

/// Where a scoped task leaves its result. Its own (not the task cell's):
/// the output may borrow from the scope, so it must never be left in a
/// cell that a stray waker could keep alive past the scope.
pub(super) struct Slot<T> {
    result: Mutex<Option<Result<T, JoinError>>>,
    /// Opens once `result` is filled: what a blocking `join` waits on.
    filled: CountLatch,
    /// An awaiting joiner.
    waker: WakerSlot,
}

impl<T> Slot<T> {
    pub(super) fn new() -> Slot<T> {
        Slot {
            result: Mutex::new(None),
            filled: CountLatch::new(1),
            waker: WakerSlot::new(),
        }
    }

    /// Stores the task's result (once) and tells the joiner. The joiner's
    /// waker is user code: its panic is caught and logged.
    pub(super) fn fill(&self, result: Result<T, JoinError>) {
        *lock(&self.result) = Some(result);
        self.filled.count_down();
        crate::contain::catch(
            || self.waker.wake(),
            |message| log::error!("smartpool: a ScopedJoinHandle's waker panicked: {message}"),
        );
    }

    fn take(&self) -> Result<T, JoinError> {
        lock(&self.result)
            .take()
            .expect("ScopedJoinHandle polled after it returned")
    }
}

/// The output of a task submitted with [`Scope::exec`](crate::Scope::exec):
/// await it (from another task, or with any executor's `block_on`), or
/// [`join`](ScopedJoinHandle::join) it.
///
/// It cannot leave its scope. Dropping it detaches the task, which still
/// runs before the scope returns (so, unlike a `JoinHandle`, it is fine to
/// ignore).
pub struct ScopedJoinHandle<'scope, T> {
    slot: Arc<Slot<T>>,
    /// The task's claim and its pool's id, if the scope's waiter may run
    /// it (see `claim`): `join` on a worker of that pool runs it then.
    claim: Option<(Arc<Claim>, usize, &'scope ScopeState)>,
    scope: PhantomData<&'scope ()>,
}

impl<'scope, T> ScopedJoinHandle<'scope, T> {
    pub(super) fn new(slot: Arc<Slot<T>>) -> ScopedJoinHandle<'scope, T> {
        ScopedJoinHandle {
            slot,
            claim: None,
            scope: PhantomData,
        }
    }

    /// The handle of a claimed task of the pool `pool`, in `scope`.
    pub(super) fn claimed(
        mut self,
        claim: Arc<Claim>,
        pool: usize,
        scope: &'scope ScopeState,
    ) -> Self {
        self.claim = Some((claim, pool, scope));
        self
    }

    /// Whether the task has ended (completed, panicked or cancelled), so
    /// that joining returns at once.
    pub fn is_finished(&self) -> bool {
        self.slot.filled.is_open()
    }

    /// Blocks until the task ends and returns its output, or a
    /// [`JoinError`] if it panicked or was cancelled.
    ///
    /// When the task went to the pool of the worker that opened the scope,
    /// and `join` runs on a worker of that pool:
    /// * a task that no worker started runs here first (as `join`'s second
    ///   half does), so joining from inside a task completes on a 1-thread
    ///   pool, recursively too;
    /// * while another worker polls the task and none of the scope's
    ///   tasks is parked, the wait is isolated, as [`join`](crate::join)'s
    ///   is: it runs the scope's tasks that no worker started, newest
    ///   first, and work of a level above the task's channel, never
    ///   another task of its level (rayon #957); after a second in a row
    ///   with nothing to run, anything;
    /// * while the task or another of the scope's is parked (or queued
    ///   after a wake), the wait runs the pool's queued work, as
    ///   [`scope`](crate::scope)'s does, since that task may need this
    ///   worker to run it.
    ///
    /// Elsewhere, a worker runs its pool's queued work while it waits, and
    /// any other thread blocks.
    pub fn join(self) -> Result<T, JoinError> {
        if let Some((claim, pool, scope)) = &self.claim {
            if let Some(local) = crate::core::context::current_of(*pool) {
                // Work first: a recursion of joins nests as deep as itself,
                // not as deep as the queue.
                local.run_now(claim.channel, &mut || claim.take());
                self.slot.filled.wait_isolated(
                    || scope.idle.load(Ordering::Relaxed) == 0,
                    |patient| {
                        if scope.run_claim(&local) {
                            return true;
                        }
                        local.help_once(claim.channel, Allowed::NoJob.while_patient(patient))
                    },
                );
            }
        }
        self.slot.filled.wait();
        self.slot.take()
    }
}

impl<T> Future for ScopedJoinHandle<'_, T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.slot.filled.is_open() {
            self.slot.waker.register(cx.waker());
            // Register, then look again: `fill` opens the latch before it
            // wakes the registered waker.
            if !self.slot.filled.is_open() {
                return Poll::Pending;
            }
        }
        Poll::Ready(self.slot.take())
    }
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}
