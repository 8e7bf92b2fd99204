//! A channel made of several inner channels.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{AlreadyAttached, Channel, ChannelLink, ExecParam, LinkSlot, WorkerContext};
use crate::task::RunningTask;

/// Several inner channels behind one key: submissions go to them in turn
/// (round-robin), and a worker looks into all of them, starting from a
/// rotating position. Sharding spreads the contention of a busy channel; it
/// also lets a channel type that serialises (a deadline heap behind a lock,
/// say) scale. The inner channels share the outer channel's status bit.
#[derive(Debug)]
pub struct MultiChannel<C> {
    inner: Box<[C]>,
    next_push: AtomicUsize,
    next_pop: AtomicUsize,
    link: LinkSlot,
}

impl<C: Channel> MultiChannel<C> {
    /// `shards` inner channels made by `make` (at least one).
    pub fn new(shards: usize, make: impl FnMut() -> C) -> MultiChannel<C> {
        MultiChannel {
            inner: std::iter::repeat_with(make).take(shards.max(1)).collect(),
            next_push: AtomicUsize::new(0),
            next_pop: AtomicUsize::new(0),
            link: LinkSlot::new(),
        }
    }

    /// The inner channels.
    pub fn shards(&self) -> &[C] {
        &self.inner
    }
}

impl<C: Channel> Channel for MultiChannel<C> {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }

    /// Attaches every shard, then this channel.
    fn attach(&self, link: ChannelLink) -> Result<(), AlreadyAttached> {
        for inner in self.inner.iter() {
            inner.attach(link.clone())?;
        }
        self.link.set(link)
    }

    fn push(&self, task: RunningTask, link: &ChannelLink) {
        let i = self.next_push.fetch_add(1, Ordering::Relaxed) % self.inner.len();
        self.inner[i].push(task, link);
    }

    fn pop(&self, worker: &WorkerContext<'_>) -> Option<RunningTask> {
        let n = self.inner.len();
        let start = self.next_pop.fetch_add(1, Ordering::Relaxed) % n;
        // Each inner pop finds every completed push to its shard; a push that
        // lands in a shard we already passed is covered by its own status-bit
        // mark, which the pool's clear-and-look-again protocol sees.
        (0..n).find_map(|k| self.inner[(start + k) % n].pop(worker))
    }

    fn lifo_slot(&self) -> bool {
        self.inner.iter().all(|inner| inner.lifo_slot())
    }

    fn may_have_tasks(&self) -> bool {
        self.inner.iter().any(|inner| inner.may_have_tasks())
    }
}

/// Parameterised shards make a parameterised channel: each task goes, with
/// its parameter, to the next shard in turn.
impl<C: ExecParam> ExecParam for MultiChannel<C> {
    type Param = C::Param;

    fn push_param(&self, task: RunningTask, param: C::Param, link: &ChannelLink) {
        let i = self.next_push.fetch_add(1, Ordering::Relaxed) % self.inner.len();
        self.inner[i].push_param(task, param, link);
    }
}
