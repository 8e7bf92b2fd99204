//! The connection between a channel and the pool it belongs to.

use std::fmt;
use std::sync::{Arc, OnceLock};

use super::Shared;

use crate::task::{RunningTask, SchedulerRef};

/// What a channel knows of its pool: handed to
/// [`Channel::attach`](crate::Channel::attach) once, used by the pool's
/// submit path and by [`WorkQueue`](crate::channel::WorkQueue).
#[derive(Clone)]
pub struct ChannelLink {
    pub(crate) shared: Arc<Shared>,
    pub(crate) scheduler: SchedulerRef,
    pub(crate) index: usize,
}

impl ChannelLink {
    /// The channel's position in the pool's configuration (levels flattened,
    /// highest level first).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The id of the pool the channel belongs to.
    pub(crate) fn pool_id(&self) -> usize {
        self.shared.id
    }

    /// Whether the pool still accepts new tasks (it has not begun to close).
    pub fn is_open(&self) -> bool {
        !self.shared.close.is_closing()
    }

    /// Tells the pool that tasks became visible in this channel without a
    /// push through `exec` or `submit` (an internal move between queues): it
    /// marks the channel's status bit and may wake a worker.
    pub fn announce(&self) {
        self.shared.pushed(self.index);
    }

    /// Pushes `task` onto the calling worker's local queue for this channel,
    /// if the caller is a worker thread of this pool; gives it back if not,
    /// or if the worker is moving its LIFO slot's task out (which must go
    /// where the other workers look, behind work queued from outside).
    #[inline]
    pub fn push_local(&self, task: RunningTask) -> Result<(), RunningTask> {
        crate::core::context::push_local(&self.shared, self.index, task, |_| {})
    }
}

impl fmt::Debug for ChannelLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelLink")
            .field("pool", &self.shared.id)
            .field("index", &self.index)
            .finish()
    }
}

/// The error of attaching a channel that already belongs to a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyAttached;

impl fmt::Display for AlreadyAttached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the channel is already attached to a pool")
    }
}

impl std::error::Error for AlreadyAttached {}

/// Storage for a channel's [`ChannelLink`]: set once, read lock-free.
#[derive(Debug, Default)]
pub struct LinkSlot(OnceLock<ChannelLink>);

impl LinkSlot {
    /// An empty slot.
    pub fn new() -> LinkSlot {
        LinkSlot(OnceLock::new())
    }

    /// Stores the link; fails if one is stored already.
    pub fn set(&self, link: ChannelLink) -> Result<(), AlreadyAttached> {
        self.0.set(link).map_err(|_| AlreadyAttached)
    }

    /// The stored link.
    pub fn get(&self) -> Option<&ChannelLink> {
        self.0.get()
    }
}
