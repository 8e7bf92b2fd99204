//! tokio's IO types on the pool (the `tokio` feature): [`tokio_io`] wraps
//! a future so that each of its polls runs inside a tokio runtime's
//! context, whose reactor and timers run on one thread of their own.
//!
//! tokio's `TcpStream`, `TcpListener`, `UdpSocket` and `time::sleep`
//! register with the runtime of the context they are created or first
//! polled in, and panic ("there is no reactor running") without one.
//!
//! The rule: one reactor. [`tokio_io`] called inside a tokio runtime's
//! context (a `#[tokio::main]` program, say) uses that runtime, as
//! async-compat does. Called anywhere else, it uses a runtime of its own,
//! made at the first such use, once for the process: a multi-thread
//! runtime of one worker, which runs the IO and timer drivers and nothing
//! else (the futures themselves run on smartpool's workers). It lives
//! until the process ends.
//!
//! A caller's *current-thread* runtime drives its IO only while its
//! thread is inside `block_on`; the wrapped future stalls while it is
//! not. Its futures fail once that runtime shuts down, as its own
//! tasks' would.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

/// The future returned by [`tokio_io`]. (The future is boxed: one
/// allocation a wrapped future, and no `unsafe` pin projection.)
#[must_use = "futures do nothing unless polled"]
pub struct TokioIo<F> {
    future: Pin<Box<F>>,
    /// The runtime in context where the future was wrapped, if any.
    runtime: Option<tokio::runtime::Handle>,
}

impl<F> std::fmt::Debug for TokioIo<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioIo").finish_non_exhaustive()
    }
}

/// Runs `future`'s polls inside a tokio runtime's context, so that tokio's
/// IO and timer types work in it on a smartpool worker: the runtime in
/// context here, if there is one, else smartpool's own (see the module
/// doc).
///
/// ```
/// use smartpool::prelude::*;
///
/// let owned = smartpool::Builder::new().threads(1).build()?;
/// let slept = owned.pool.level(0).exec(smartpool::tokio_io(async {
///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
///     "woke"
/// }));
/// assert_eq!(futures::executor::block_on(slept)?, "woke");
/// owned.close().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tokio_io<F: Future>(future: F) -> TokioIo<F> {
    TokioIo {
        future: Box::pin(future),
        runtime: tokio::runtime::Handle::try_current().ok(),
    }
}

/// The runtime whose drivers serve the [`TokioIo`] futures made outside
/// any runtime.
fn own() -> &'static tokio::runtime::Handle {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("smartpool-io")
                .enable_all()
                .build()
                .expect("smartpool: the tokio IO runtime could not start")
        })
        .handle()
}

impl<F: Future> Future for TokioIo<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _context = self.runtime.as_ref().unwrap_or_else(|| own()).enter();
        self.future.as_mut().poll(cx)
    }
}
