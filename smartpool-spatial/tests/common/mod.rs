//! Fixtures shared by the integration tests: a one-worker pool with a
//! spatial channel under a "hold" level, a gate to keep the worker busy while
//! submissions queue up, a run-order recorder and a drop counter.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};

use smartpool::prelude::*;
use smartpool_spatial::{SpatialChannel, SpatialPoint};

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
pub enum Ch {
    Hold,
    Spatial,
}

/// A hold channel (complete_on_close) above one spatial channel.
pub struct World<P: SpatialPoint> {
    pub hold: VecDequeChannel,
    pub spatial: SpatialChannel<P>,
    threads: usize,
    complete_on_close: bool,
    /// Followup calls.
    pub followups: AtomicUsize,
}

impl<P: SpatialPoint> PoolBehavior for World<P> {
    type ChannelKey = Ch;

    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: self.threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Ch::Hold,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Ch::Spatial,
                    complete_on_close: self.complete_on_close,
                }],
            ],
        }
    }

    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Hold => &self.hold,
            Ch::Spatial => &self.spatial,
        }
    }

    fn followup(&self, from: Ch, task: RunningTask) {
        self.followups.fetch_add(1, Ordering::SeqCst);
        self.channel(from).submit(task);
    }
}

/// A pool of `threads` workers whose spatial channel is complete_on_close
/// or not.
pub fn world<P: SpatialPoint>(threads: usize, complete_on_close: bool) -> OwnedPool<World<P>> {
    OwnedPool::new(World {
        hold: VecDequeChannel::new(),
        spatial: SpatialChannel::new(),
        threads,
        complete_on_close,
        followups: AtomicUsize::new(0),
    })
    .unwrap()
}

/// A one-worker pool, the spatial channel complete_on_close.
pub fn one_worker<P: SpatialPoint>() -> OwnedPool<World<P>> {
    world(1, true)
}

/// A one-shot latch: `wait` blocks until `open`.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    pub fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }
}

/// Occupies the pool's only worker until the returned gate opens; returns
/// once the worker is inside the holding task.
pub fn hold<P: SpatialPoint>(owned: &OwnedPool<World<P>>) -> (Gate, JoinHandle<()>) {
    let gate = Gate::new();
    let started = Arc::new(Barrier::new(2));
    let (g, s) = (gate.clone(), started.clone());
    let held = owned.pool.hold.exec(run(move || {
        s.wait();
        g.wait();
    }));
    started.wait();
    (gate, held)
}

/// Opens the gate that holds the worker, then waits for the holding task
/// and every handle: all queued tasks have run.
pub fn release<T>(gate: &Gate, held: JoinHandle<()>, handles: Vec<JoinHandle<T>>) {
    gate.open();
    futures::executor::block_on(held).unwrap();
    for h in handles {
        futures::executor::block_on(h).unwrap();
    }
}

/// Records the order in which tasks ran.
#[derive(Clone, Default)]
pub struct Order(Arc<Mutex<Vec<String>>>);

impl Order {
    pub fn new() -> Order {
        Order::default()
    }

    pub fn push(&self, name: impl Into<String>) {
        self.0.lock().unwrap().push(name.into());
    }

    /// A closure task that records `name` when it runs.
    pub fn task(&self, name: impl Into<String>) -> smartpool::Run<impl FnOnce() + Send + 'static> {
        let (order, name) = (self.clone(), name.into());
        run(move || order.push(name))
    }

    pub fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Counts drops of the tokens it hands out.
#[derive(Clone, Default)]
pub struct DropCounter(Arc<AtomicUsize>);

pub struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl DropCounter {
    pub fn new() -> DropCounter {
        DropCounter::default()
    }

    pub fn token(&self) -> Counted {
        Counted(self.0.clone())
    }

    pub fn drops(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}
