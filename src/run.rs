//! Closures as tasks: `exec(run(|| ..))`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that calls a closure once, on its first poll, and returns its
/// result. Made by [`run`] and [`try_run`].
#[must_use = "a Run does nothing until executed on a pool"]
pub struct Run<F> {
    f: Option<F>,
}

/// Turns a closure into a task: `channel.exec(run(|| work()))` runs `work`
/// on a worker thread, and the handle resolves to its return value.
pub fn run<F, T>(f: F) -> Run<F>
where
    F: FnOnce() -> T,
{
    Run { f: Some(f) }
}

/// Turns a fallible closure into a task whose output is its `Result`, for
/// use with `TryFuture` combinators (`and_then`, `map_err`, `?` in an async
/// block awaiting the handle).
pub fn try_run<F, T, E>(f: F) -> Run<F>
where
    F: FnOnce() -> Result<T, E>,
{
    Run { f: Some(f) }
}

impl<F, T> Future for Run<F>
where
    F: FnOnce() -> T,
{
    type Output = T;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<T> {
        // `Run` is `Unpin` (it never pins `F`), so `get_mut` is fine.
        let f = self
            .get_mut()
            .f
            .take()
            .expect("Run polled after completion");
        Poll::Ready(f())
    }
}

impl<F> Unpin for Run<F> {}

impl<F> fmt::Debug for Run<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("done", &self.f.is_none())
            .finish()
    }
}
