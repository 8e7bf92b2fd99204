//! Channels: a crate outside smartpool can implement `Channel`;
//! `MultiChannel` spreads work over shards; any number of channels works.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use common::{Gate, FAILSAFE};
use futures::executor::block_on;
use smartpool::channel::{ChannelLink, LinkSlot, WorkerContext};
use smartpool::prelude::*;

/// A third-party channel: last in, first out, behind a mutex.
#[derive(Default)]
struct Stack {
    tasks: Mutex<Vec<RunningTask>>,
    link: LinkSlot,
}

impl Channel for Stack {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }
    fn push(&self, task: RunningTask, _link: &ChannelLink) {
        self.tasks.lock().unwrap().push(task);
    }
    fn pop(&self, _worker: &WorkerContext<'_>) -> Option<RunningTask> {
        self.tasks.lock().unwrap().pop()
    }
}

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Key {
    Stack,
    Multi,
}

struct Custom {
    stack: Stack,
    multi: MultiChannel<VecDequeChannel>,
}

impl PoolBehavior for Custom {
    type ChannelKey = Key;
    fn config(&self) -> PoolConfig<Key> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Key::Stack,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Key::Multi,
                    complete_on_close: true,
                }],
            ],
        }
    }
    fn channel(&self, key: Key) -> &dyn Channel {
        match key {
            Key::Stack => &self.stack,
            Key::Multi => &self.multi,
        }
    }
}

#[test]
fn a_third_party_channel_serves_in_its_own_order() {
    let owned = OwnedPool::new(Custom {
        stack: Stack::default(),
        multi: MultiChannel::new(4, VecDequeChannel::new),
    })
    .unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let held = Arc::new(Barrier::new(2));
    let (g, h) = (gate.clone(), held.clone());
    let blocker = pool.multi.exec(run(move || {
        h.wait();
        g.wait();
    }));
    held.wait(); // the only worker is held: everything below queues
    let order = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let order = order.clone();
            pool.stack.exec(run(move || order.lock().unwrap().push(i)))
        })
        .collect();
    gate.open();
    block_on(blocker).unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        [4, 3, 2, 1, 0],
        "last in, first out"
    );
    block_on(owned.close());
}

#[test]
fn multi_channel_spreads_submissions_over_its_shards() {
    let owned = OwnedPool::new(Custom {
        stack: Stack::default(),
        multi: MultiChannel::new(4, VecDequeChannel::new),
    })
    .unwrap();
    assert_eq!(owned.pool.multi.shards().len(), 4);
    let count = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..1000)
        .map(|_| {
            let count = count.clone();
            owned
                .pool
                .multi
                .exec(run(move || count.fetch_add(1, Ordering::SeqCst)))
        })
        .collect();
    for h in handles {
        block_on(h).unwrap();
    }
    assert_eq!(count.load(Ordering::SeqCst), 1000);
    block_on(owned.close());
}

/// 200 channels, one per level: bits span four status words.
struct Many {
    channels: Vec<VecDequeChannel>,
}

impl PoolBehavior for Many {
    type ChannelKey = u16;
    fn config(&self) -> PoolConfig<u16> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: (0..200)
                .map(|key| {
                    vec![ChannelParams {
                        key,
                        complete_on_close: true,
                    }]
                })
                .collect(),
        }
    }
    fn channel(&self, key: u16) -> &dyn Channel {
        &self.channels[key as usize]
    }
}

#[test]
fn two_hundred_channels_are_served_highest_first() {
    let owned = OwnedPool::new(Many {
        channels: (0..200).map(|_| VecDequeChannel::new()).collect(),
    })
    .unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let held = Arc::new(Barrier::new(2));
    let (g, h) = (gate.clone(), held.clone());
    let blocker = pool.channels[199].exec(run(move || {
        h.wait();
        g.wait();
    }));
    held.wait();
    let order = Arc::new(Mutex::new(Vec::new()));
    // Submit lowest level first.
    let handles: Vec<_> = (0..200)
        .rev()
        .map(|key| {
            let order = order.clone();
            pool.channels[key].exec(run(move || order.lock().unwrap().push(key)))
        })
        .collect();
    gate.open();
    block_on(blocker).unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    let expected: Vec<usize> = (0..200).collect();
    assert_eq!(*order.lock().unwrap(), expected);
    assert!(gate.wait_for(FAILSAFE));
    block_on(owned.close());
}

/// A channel whose `pop` panics once when armed.
#[derive(Default)]
struct Flaky {
    inner: VecDequeChannel,
    armed: std::sync::atomic::AtomicBool,
}

impl Channel for Flaky {
    fn link_slot(&self) -> &LinkSlot {
        self.inner.link_slot()
    }
    fn push(&self, task: RunningTask, link: &ChannelLink) {
        self.inner.push(task, link)
    }
    fn pop(&self, worker: &WorkerContext<'_>) -> Option<RunningTask> {
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("flaky channel");
        }
        self.inner.pop(worker)
    }
}

struct WithFlaky(Flaky);

impl PoolBehavior for WithFlaky {
    type ChannelKey = Key;
    fn config(&self) -> PoolConfig<Key> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Key::Stack,
                complete_on_close: true,
            }]],
        }
    }
    fn channel(&self, _key: Key) -> &dyn Channel {
        &self.0
    }
}

#[test]
fn a_panicking_channel_does_not_kill_the_worker() {
    let owned = OwnedPool::new(WithFlaky(Flaky::default())).unwrap();
    block_on(owned.pool.0.exec(run(|| ()))).unwrap();
    owned.pool.0.armed.store(true, Ordering::SeqCst);
    // The first pop panics; the worker goes on and serves the rest.
    let handles: Vec<_> = (0..10).map(|i| owned.pool.0.exec(run(move || i))).collect();
    let done = common::CountDown::new(1);
    let d = done.clone();
    std::thread::spawn(move || {
        let sum: i32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
        assert_eq!(sum, 45);
        d.tick();
    });
    assert!(done.wait_for(FAILSAFE), "the single worker died");
    assert!(common::close_within(owned, FAILSAFE));
}
