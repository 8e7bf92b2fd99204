//! `SpatialChannel`: the smartpool channel that serves the task nearest to a
//! moving focus first.
//!
//! # Two queues under one lock
//!
//! * `placed`: tasks submitted with a point ([`ExecParam`], or the inherent
//!   [`SpatialChannel::exec`]), in a [`SpatialQueue`].
//! * `resumed`: tasks that came without one ([`Channel::push`]): futures a
//!   followup hands back after a wake-up, and one-argument `exec`s. First in,
//!   first out, served before every placed task.
//!
//! Why first: a woken future has already started (its chunk half-built, its
//! buffers allocated), and finishing started work before starting more
//! keeps memory and latency bounded; that is the README's advice for
//! followups too. Its original point is gone by then ([`RunningTask`] has no
//! room for it), so "near the focus" would be a guess anyway.
//!
//! # Invariant
//!
//! Nothing under the lock runs user code: only the two queues' own
//! operations and one load of the focus. Tasks leave the lock unpolled and
//! undropped ([`RunningTask`]'s drop cancels it, which wakes a join handle's
//! waker: user code), and no point reaches rstar untamed (see `point`), so
//! the index cannot panic half-modified either. (The one exception is a
//! custom point type's `rstar::Point` accessors, `nth` and `generate`, which
//! rstar calls throughout: field reads that must not panic.)

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::{Mutex, MutexGuard};

use smartpool::channel::{ChannelLink, LinkSlot, WorkerContext};
use smartpool::{Channel, ExecParam, JoinHandle, Rejected, RunningTask};

use crate::focus::Focus;
use crate::point::{self, SpatialPoint};
use crate::queue::SpatialQueue;

/// Serves the queued task nearest to a focus point first; moving the focus
/// ([`SpatialChannel::set_focus`]) is one store, from any thread, never the
/// queue's lock, and a pop that happens after it honours it.
///
/// Submit with a point: `pool.spatial.exec(future, [x, y, z])`. Tasks
/// without a point (a future woken and handed back by followup, or one run
/// with the one-argument `Exec::exec`) are served first, in the order they
/// came: a woken future has already started, and finishing started work
/// before starting more keeps memory and latency bounded (its point is not
/// kept: a [`RunningTask`] has no room for it). A steady stream of them (a
/// future that keeps yielding) therefore holds back every placed task.
///
/// `P` is the point type: `[f32; 3]` unless you say otherwise; any
/// [`SpatialPoint`] (2-D or 3-D, `f32` or `f64`). Pops cost O(log n) in the
/// number of queued tasks, amortised over the pops made while the focus
/// stays put: tasks near a focus that stays put are taken out of the index
/// in batches, so that draining outward from it stays cheap; the pop that
/// refills a batch takes longer, under the lock, and so does the first pop
/// after the focus moves (it puts the batch back); a focus that moves on
/// every pop within a region the pops have emptied pays an exact search of
/// that region's edge each time (see [`SpatialQueue`]'s cost notes, measured). Tasks at equal distances run in an
/// unspecified order; none is lost.
///
/// The focus is lock-free for points of 8 bytes (`[f32; 2]`) and points
/// whose size matches a native atomic; other points (`[f32; 3]`,
/// `[f64; 2]`, `[f64; 3]`) are copied under a short global sequence lock
/// (crossbeam's `AtomicCell`), never the queue's lock. See
/// [`SpatialChannel::focus_is_lock_free`].
///
/// One index behind a mutex, like
/// [`ShortestDeadlineFirst`](smartpool::ShortestDeadlineFirst): every worker
/// sees one order. Sharding it with [`MultiChannel`](smartpool::MultiChannel)
/// spreads the lock but gives each shard its own focus and order.
pub struct SpatialChannel<P: SpatialPoint = [f32; 3]> {
    focus: Focus<P>,
    queues: Mutex<Queues<P>>,
    link: LinkSlot,
}

struct Queues<P: SpatialPoint> {
    /// Tasks without a point, first in, first out.
    resumed: VecDeque<RunningTask>,
    /// Tasks with a point, nearest to the focus first.
    placed: SpatialQueue<RunningTask, P>,
}

impl<P: SpatialPoint> SpatialChannel<P> {
    /// An empty channel focused on the origin, to be attached to a pool.
    pub fn new() -> SpatialChannel<P> {
        SpatialChannel::with_focus(point::origin())
    }

    /// An empty channel focused on `focus`.
    pub fn with_focus(focus: P) -> SpatialChannel<P> {
        SpatialChannel {
            focus: Focus::new(focus),
            queues: Mutex::new(Queues {
                resumed: VecDeque::new(),
                placed: SpatialQueue::new(),
            }),
            link: LinkSlot::new(),
        }
    }

    /// Moves the focus: from the next pop on, the task nearest to `focus`
    /// runs first (for a pop that happens after this call). One store, never
    /// the queue's lock (a native atomic for points of 8 bytes, a short
    /// global sequence lock for larger ones; see
    /// [`SpatialChannel::focus_is_lock_free`]); rebuilds nothing; from any
    /// thread, a task of this channel included.
    pub fn set_focus(&self, focus: P) {
        self.focus.store(focus);
    }

    /// The current focus, as last set.
    pub fn focus(&self) -> P {
        self.focus.load()
    }

    /// Whether [`set_focus`](SpatialChannel::set_focus) and the focus read of
    /// each pop are lock-free for this point type: true for points of 8
    /// bytes (`[f32; 2]`) and for points whose size and alignment match a
    /// native atomic; otherwise crossbeam's `AtomicCell` copies the point
    /// under a short global sequence lock (a load retries rather than
    /// waits).
    pub const fn focus_is_lock_free() -> bool {
        Focus::<P>::is_lock_free()
    }

    /// Runs `future` on the pool as a task placed at `at`. See
    /// [`ExecParam::exec_param`], which this is: if the pool no longer
    /// accepts tasks, the handle resolves to a cancellation.
    pub fn exec<F>(&self, future: F, at: P) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.exec_param(future, at)
    }

    /// Like [`SpatialChannel::exec`], but gives the future back if the pool
    /// no longer accepts tasks.
    pub fn try_exec<F>(&self, future: F, at: P) -> Result<JoinHandle<F::Output>, Rejected<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_exec_param(future, at)
    }

    /// How many tasks are queued (with a point or without).
    pub fn len(&self) -> usize {
        let queues = self.lock();
        queues.resumed.len() + queues.placed.len()
    }

    /// Whether no task is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Queues<P>> {
        // No user code runs under this lock (see the module doc), so a
        // poisoned one is consistent; the exception is a custom point type
        // whose `rstar::Point` accessors panic in the middle of an insert,
        // which the `SpatialPoint` docs forbid.
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<P: SpatialPoint> Default for SpatialChannel<P> {
    fn default() -> Self {
        SpatialChannel::new()
    }
}

impl<P: SpatialPoint> fmt::Debug for SpatialChannel<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpatialChannel")
            .field("focus", &self.focus())
            .field("queued", &self.len())
            .field("link", &self.link)
            .finish()
    }
}

impl<P: SpatialPoint> Channel for SpatialChannel<P> {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }

    /// A task without a point: served before the placed ones, first in,
    /// first out.
    fn push(&self, task: RunningTask, _link: &ChannelLink) {
        self.lock().resumed.push_back(task);
    }

    fn pop(&self, _worker: &WorkerContext<'_>) -> Option<RunningTask> {
        let mut queues = self.lock();
        if let Some(task) = queues.resumed.pop_front() {
            return Some(task);
        }
        // Loaded under the lock, after this pop synchronised with the pushes
        // it can see: see `focus` on why that honours every earlier move.
        let focus = self.focus.load();
        queues.placed.pop_nearest(focus).map(|(_, task)| task)
    }
}

impl<P: SpatialPoint> ExecParam for SpatialChannel<P> {
    type Param = P;

    fn push_param(&self, task: RunningTask, at: P, _link: &ChannelLink) {
        self.lock().placed.push(at, task);
    }
}
