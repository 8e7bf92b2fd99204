//! [`Registry`]: which handler runs a job of which kind.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::job::{Job, JobError};

/// A handler's future, boxed.
pub(crate) type JobFuture = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send>>;

type Handler = Arc<dyn Fn(Job) -> JobFuture + Send + Sync>;

/// Handlers by job kind.
///
/// ```
/// use smartpool_postgres::{JobError, Registry};
///
/// let registry = Registry::new()
///     .handle("resize", |job| async move {
///         if job.payload().is_empty() {
///             return Err(JobError("nothing to resize".into()));
///         }
///         Ok(())
///     })
///     .handle("email", |_job| async { Ok(()) });
/// assert!(registry.knows("email"));
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<String, Handler>,
}

impl Registry {
    /// No handlers.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Runs jobs of `kind` with `handler` (replacing an earlier one). An
    /// `Err`, or a panic, fails the attempt.
    pub fn handle<F, Fut>(mut self, kind: impl Into<String>, handler: F) -> Registry
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        self.handlers
            .insert(kind.into(), Arc::new(move |job| Box::pin(handler(job))));
        self
    }

    /// Whether a handler runs jobs of `kind`.
    pub fn knows(&self, kind: &str) -> bool {
        self.handlers.contains_key(kind)
    }

    /// The kinds it knows.
    pub(crate) fn kinds(&self) -> Vec<String> {
        self.handlers.keys().cloned().collect()
    }

    /// The future that runs `job`, or `None` if no handler knows its kind.
    pub(crate) fn start(&self, job: Job) -> Option<JobFuture> {
        let handler = self.handlers.get(&job.kind)?;
        Some(handler(job))
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<_> = self.handlers.keys().collect();
        kinds.sort();
        f.debug_struct("Registry").field("kinds", &kinds).finish()
    }
}
