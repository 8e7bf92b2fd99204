//! The part of a pool that channels, tasks and workers share, independent of
//! the behavior's type.

use std::fmt;

use crossbeam_deque::Stealer;

use super::close::CloseState;
use crate::lifo::{slot::Slot, watch::Watch, SlotTask};
use crate::sleep::Sleep;
use crate::status::{Bit, Status};
use crate::task::RunningTask;

/// What the pool knows of each channel.
#[derive(Debug)]
pub(crate) struct ChannelInfo {
    /// The channel's key, as `Debug` prints it: for logs.
    pub(crate) name: Box<str>,
    pub(crate) bit: Bit,
    pub(crate) complete_on_close: bool,
    /// Whether the channel's tasks may use the LIFO slot (the schedule's
    /// rule: `Levels::uses_slot`).
    pub(crate) uses_slot: bool,
}

pub(crate) struct Shared {
    /// Tells this pool's worker threads apart from others'.
    pub(crate) id: usize,
    pub(crate) status: Status,
    pub(crate) sleep: Sleep,
    pub(crate) close: CloseState,
    pub(crate) channels: Box<[ChannelInfo]>,
    /// `[worker][channel]`: steals from each worker's local deques.
    pub(crate) stealers: Box<[Box<[Stealer<RunningTask>]>]>,
    /// Each worker's LIFO slot (see `lifo`).
    pub(crate) lifo: Box<[Slot<SlotTask>]>,
    /// What the idle workers saw of the slots (see `lifo::watch`).
    pub(crate) watch: Watch,
}

impl Shared {
    /// Close accounting for `task` entering channel `index` (which also
    /// records that dropping it now is the pool's or the channel's doing).
    /// Returns whether the task comes from a yield.
    pub(crate) fn account(&self, task: &RunningTask, index: usize) -> bool {
        let counted = self.channels[index].complete_on_close;
        let entered = task.enter_channel(counted);
        match (entered.was_counted, counted) {
            (false, true) => self.close.count(),
            (true, false) => self.release_counted(),
            _ => {}
        }
        entered.yielded
    }

    /// A task was stored in channel `index`: mark its bit (the post fence),
    /// then let the sleep protocol wake a worker if none will find it.
    pub(crate) fn pushed(&self, index: usize) {
        self.status.mark(self.channels[index].bit);
        self.sleep.new_jobs(1);
    }

    /// Admits a new task to channel `index` (see `close`'s module doc):
    /// `true` if the pool takes it. A task of a `complete_on_close` channel
    /// is counted here already; the caller marks it counted.
    pub(crate) fn admit(&self, index: usize) -> bool {
        if !self.channels[index].complete_on_close {
            return self.close.is_open();
        }
        if self.close.admit() {
            return true;
        }
        self.release_counted();
        false
    }

    /// Whether a worker other than `me` has a task in its LIFO slot.
    pub(crate) fn others_slot_full(&self, me: usize) -> bool {
        self.lifo
            .iter()
            .enumerate()
            .any(|(worker, slot)| worker != me && slot.look().is_full())
    }

    pub(crate) fn release_counted(&self) {
        if self.close.release() {
            self.sleep.wake_all();
        }
    }

    pub(crate) fn begin_close(&self) {
        if self.close.begin() {
            self.sleep.wake_all();
        }
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("id", &self.id)
            .field("close", &self.close)
            .finish_non_exhaustive()
    }
}
