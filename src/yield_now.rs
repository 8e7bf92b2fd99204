//! `yield_now`: a task gives its worker up once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Gives the worker up once, as tokio's `task::yield_now`: the first poll
/// wakes the task and returns `Pending`, the next returns `Ready`.
///
/// On a pool, the woken task goes back through its behavior's `followup`
/// like any wake, and enters its channel behind the work already queued
/// there (never the LIFO slot): behind the worker's own queue, and behind
/// the channel's shared queue (work submitted or woken from outside),
/// whose tasks move to the worker's queue ahead of it when that queue is
/// empty (else the shared queue's head runs next). So the tasks queued at
/// its channel before the yield run before it continues, on any number of
/// workers (those queued on other workers run there). A higher level still
/// goes first.
///
/// Where it differs from tokio on purpose: tokio keeps a yielded task in a
/// list private to its worker until that worker finds no other work (or
/// enters `block_in_place`), so an idle worker cannot take it meanwhile,
/// and a long task run in between holds it up. Here the yielded task is in
/// its channel, where idle workers may steal it, as soon as the poll ends;
/// the price is the channel's status fence on every yield.
///
/// Off a pool (any other executor) it is a plain yield to that executor.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[must_use = "yield_now does nothing unless awaited"]
#[derive(Debug)]
pub struct YieldNow {
    /// Whether it yielded: its next poll completes.
    pub(crate) yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
