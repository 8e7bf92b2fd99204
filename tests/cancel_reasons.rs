//! Every cancellation says why: the pool closed, the channel is attached to
//! no pool (missing from the config), the followup dropped the task, a
//! followup sent it to another pool, or its own channel dropped it.

mod common;

use std::sync::Mutex;

use common::{yield_once, Gate, TwoLevels};
use futures::executor::block_on;
use smartpool::channel::{ChannelLink, LinkSlot, WorkerContext};
use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Listed,
    Discarding,
}

#[derive(Copy, Clone, PartialEq)]
enum Followup {
    Drop,
    ToOtherPool,
}

/// A channel of our own that drops every task pushed to it.
#[derive(Default)]
struct Discard(LinkSlot);

impl Channel for Discard {
    fn link_slot(&self) -> &LinkSlot {
        &self.0
    }
    fn push(&self, task: RunningTask, _: &ChannelLink) {
        drop(task);
    }
    fn pop(&self, _: &WorkerContext<'_>) -> Option<RunningTask> {
        None
    }
}

struct Behavior {
    listed: VecDequeChannel,
    /// In no level of the config: never attached.
    unlisted: VecDequeChannel,
    discarding: Discard,
    followup: Followup,
    other: Mutex<Option<std::sync::Arc<Pool<TwoLevels>>>>,
}

impl Behavior {
    fn new(followup: Followup) -> Behavior {
        Behavior {
            listed: VecDequeChannel::new(),
            unlisted: VecDequeChannel::new(),
            discarding: Discard::default(),
            followup,
            other: Mutex::new(None),
        }
    }
}

impl PoolBehavior for Behavior {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![
                ChannelParams {
                    key: Ch::Listed,
                    complete_on_close: false,
                },
                ChannelParams {
                    key: Ch::Discarding,
                    complete_on_close: false,
                },
            ]],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Listed => &self.listed,
            Ch::Discarding => &self.discarding,
        }
    }
    fn followup(&self, _: Ch, task: RunningTask) {
        match self.followup {
            Followup::Drop => drop(task),
            Followup::ToOtherPool => {
                let other = self.other.lock().unwrap().clone().unwrap();
                other.high.submit(task);
            }
        }
    }
}

fn reason<T: std::fmt::Debug>(handle: JoinHandle<T>) -> (Option<CancelReason>, String) {
    let error = block_on(handle).unwrap_err();
    (error.cancel_reason(), error.to_string())
}

#[test]
fn a_channel_missing_from_the_config_says_so_not_closed() {
    let owned = OwnedPool::new(Behavior::new(Followup::Drop)).unwrap();
    let (why, message) = reason(owned.pool.unlisted.exec(async {}));
    assert_eq!(why, Some(CancelReason::ChannelNotAttached));
    assert!(message.contains("attached to no pool"), "{message}");
    let rejected = owned.pool.unlisted.try_exec(async {}).unwrap_err();
    assert!(rejected.to_string().contains("missing from the config"));
    assert!(!owned.pool.is_closing(), "the pool is open all along");
}

#[test]
fn a_closed_pool_says_closed() {
    let owned = OwnedPool::new(Behavior::new(Followup::Drop)).unwrap();
    let pool = owned.pool.clone();
    block_on(owned.close());
    let (why, message) = reason(pool.listed.exec(async {}));
    assert_eq!(why, Some(CancelReason::PoolClosed));
    assert!(message.contains("pool closed"), "{message}");
}

#[test]
fn a_queued_task_dropped_by_close_says_closed() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let (gate, started) = (Gate::new(), Gate::new());
    let (g, s) = (gate.clone(), started.clone());
    let busy = pool.low.exec(run(move || {
        s.open();
        g.wait();
    }));
    assert!(started.wait_for(common::FAILSAFE));
    let queued = pool.low.exec(async {});
    let closing = std::thread::spawn(move || block_on(owned.close()));
    while !pool.is_closing() {
        std::thread::yield_now();
    }
    gate.open();
    block_on(busy).unwrap();
    assert_eq!(reason(queued).0, Some(CancelReason::PoolClosed));
    closing.join().unwrap();
}

#[test]
fn a_followup_that_drops_the_task_says_so() {
    let owned = OwnedPool::new(Behavior::new(Followup::Drop)).unwrap();
    let (why, message) = reason(owned.pool.listed.exec(yield_once()));
    assert_eq!(why, Some(CancelReason::DroppedByFollowup));
    assert!(message.contains("followup dropped it"), "{message}");
}

#[test]
fn a_followup_into_another_pool_says_so() {
    let other = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let behavior = Behavior::new(Followup::ToOtherPool);
    *behavior.other.lock().unwrap() = Some(other.pool.clone());
    let owned = OwnedPool::new(behavior).unwrap();
    let (why, message) = reason(owned.pool.listed.exec(yield_once()));
    assert_eq!(why, Some(CancelReason::OtherPool));
    assert!(message.contains("another pool"), "{message}");
}

#[test]
fn a_channel_that_drops_a_task_says_so() {
    let owned = OwnedPool::new(Behavior::new(Followup::Drop)).unwrap();
    let (why, message) = reason(owned.pool.discarding.exec(async {}));
    assert_eq!(why, Some(CancelReason::DroppedByChannel));
    assert!(message.contains("channel dropped it"), "{message}");
}

#[test]
fn a_scoped_task_dropped_by_a_followup_says_so() {
    let owned = OwnedPool::new(Behavior::new(Followup::Drop)).unwrap();
    let pool = owned.pool.clone();
    smartpool::scope(|s| {
        let handle = s.exec(&pool.listed, yield_once());
        let error = handle.join().unwrap_err();
        assert_eq!(error.cancel_reason(), Some(CancelReason::DroppedByFollowup));
    });
}
