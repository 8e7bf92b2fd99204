//! Work-first waits: a scope waiting on a worker thread runs its own
//! not-yet-started tasks first, newest first, on its own stack.
//!
//! # The claim
//!
//! When the scope's waiter is a worker of the channel's pool (the only
//! place it can run tasks), [`Scope::exec`](super::Scope::exec) does not
//! hand the erased task to the channel: it puts it in a [`Claim`], submits
//! a [`Shell`] task that holds the claim, and pushes the claim onto the
//! scope's stack of pending claims. The task is then reachable two ways,
//! and whoever takes it out of the claim first (one `Option::take` under the
//! claim's lock) runs it:
//!
//! * a worker that runs the shell, in the channel's order (the waiter's
//!   worker or a thief): the shell takes the task on its first poll and
//!   polls it as its own future from then on;
//! * the waiter, once the scope's body has returned: it pops its newest
//!   claim and, if the pool admits a new task on that channel (as `exec`
//!   would), takes the task and runs it at once, on its own stack, as a
//!   fresh task of that channel (`WorkerLocal::run_now`).
//!
//! The other party finds the claim empty: a shell completes at once, the
//! waiter pops the next claim. A shell dropped unrun (by close, or by a
//! channel) takes the task out and drops it with itself.
//!
//! Invariant: *the erased task is in exactly one place at a time (the
//! claim, a shell, or a fresh task), and the scope's latch counts it until
//! it ends, wherever it is.* Nothing is lost: a task left in a claim is taken
//! by its shell when the shell is run or dropped, and the shell is an
//! ordinary task of the pool, run or dropped as any other (close's
//! guarantee). The waiter takes a task only after the pool admitted a fresh
//! task for it (for a `complete_on_close` channel, counted), so a refusal
//! (a closing pool) leaves the task to its shell; and it gives the count
//! back if the claim was empty. The pending stack never owns a task's fate:
//! only claims, which it may drop at any time.
//!
//! # Why the nesting stays shallow
//!
//! Newest first is depth first: each wait runs its own children before
//! anything else, so recursive divide and conquer on one thread nests one
//! chain of frames per level of the recursion, as a sequential recursion
//! would (rayon's work-first order). Only when its own claims are gone
//! (run, or taken by thieves) does a wait help with the pool's other tasks,
//! which is where nesting can grow (see `latch`).
//!
//! The cost: a claimed task leaves its empty shell in the channel, one small
//! task that runs for nothing when a worker reaches it; on one worker that
//! runs a whole recursion inline, the shells wait until the recursion
//! returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::erase::Erased;
use crate::sync::{lock, Mutex};

/// A scoped task that two parties may run: its shell, or its waiter.
pub(super) struct Claim {
    task: Mutex<Option<Erased>>,
    /// The index of the channel the task was submitted to, in the waiter's
    /// pool.
    pub(super) channel: usize,
}

impl Claim {
    pub(super) fn new(task: Erased, channel: usize) -> Claim {
        Claim {
            task: Mutex::new(Some(task)),
            channel,
        }
    }

    /// Takes the task, if nobody did.
    pub(super) fn take(&self) -> Option<Erased> {
        lock(&self.task).take()
    }

    /// Whether nobody took the task yet.
    pub(super) fn is_held(&self) -> bool {
        lock(&self.task).is_some()
    }
}

/// The task the channel holds for a claimed scoped task: on its first poll
/// (or its drop) it takes the task out of the claim, if still there.
pub(super) struct Shell {
    claim: Arc<Claim>,
    /// What the first poll took out of the claim (`None`: not polled yet).
    task: Option<Option<Erased>>,
}

impl Shell {
    pub(super) fn new(claim: Arc<Claim>) -> Shell {
        Shell { claim, task: None }
    }
}

impl Future for Shell {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // `Shell` is `Unpin`: the task is pinned in its box.
        let this = self.get_mut();
        match this.task.get_or_insert_with(|| this.claim.take()) {
            Some(task) => task.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        if self.task.is_none() {
            // Dropped unrun: the task goes with it (its own drop ends it,
            // which counts the scope down).
            drop(self.claim.take());
        }
    }
}
