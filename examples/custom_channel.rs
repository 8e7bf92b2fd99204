//! A channel of your own: a queue that serves the most valuable task first,
//! each task submitted with its value (`ExecParam`). It sits on the top
//! level of a pool, above a plain FIFO level for everything else.
//!
//! Run: `cargo run --example custom_channel`
//!
//! What to look at: the one worker is held while 8 bids arrive in random
//! order; once it is free it runs them highest bid first, then the FIFO
//! level's housekeeping, in the order it was queued.

use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};

use smartpool::channel::{ChannelLink, LinkSlot, WorkerContext};
use smartpool::prelude::*;

/// The channel: a max-heap of tasks by value, ties in submission order.
#[derive(Default)]
struct MostValuableFirst {
    heap: Mutex<BinaryHeap<Bid>>,
    /// Submissions so far: breaks ties between equal values.
    next: Mutex<u64>,
    /// The pool this channel belongs to, set when the pool starts.
    link: LinkSlot,
}

struct Bid {
    value: u32,
    /// Negated submission number: the earlier bid compares greater.
    order: i64,
    task: RunningTask,
}

impl Ord for Bid {
    fn cmp(&self, other: &Bid) -> std::cmp::Ordering {
        (self.value, self.order).cmp(&(other.value, other.order))
    }
}
impl PartialOrd for Bid {
    fn partial_cmp(&self, other: &Bid) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Bid {
    fn eq(&self, other: &Bid) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Bid {}

impl Channel for MostValuableFirst {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }
    /// A task that comes without a value (a woken future, `exec`): the
    /// lowest value, so it waits for the bids already in.
    fn push(&self, task: RunningTask, link: &ChannelLink) {
        self.push_param(task, 0, link);
    }
    fn pop(&self, _worker: &WorkerContext<'_>) -> Option<RunningTask> {
        self.heap.lock().unwrap().pop().map(|bid| bid.task)
    }
    fn may_have_tasks(&self) -> bool {
        !self.heap.lock().unwrap().is_empty()
    }
}

/// `pool.bids.exec_param(future, value)`.
impl ExecParam for MostValuableFirst {
    type Param = u32;
    fn push_param(&self, task: RunningTask, value: u32, _link: &ChannelLink) {
        let order = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            -(*next as i64)
        };
        self.heap.lock().unwrap().push(Bid { value, order, task });
    }
}

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Bids,
    Housekeeping,
}

struct Auction {
    bids: MostValuableFirst,
    housekeeping: VecDequeChannel,
}

impl PoolBehavior for Auction {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Ch::Bids,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Ch::Housekeeping,
                    complete_on_close: true,
                }],
            ],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Bids => &self.bids,
            Ch::Housekeeping => &self.housekeeping,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let owned = OwnedPool::new(Auction {
        bids: MostValuableFirst::default(),
        housekeeping: VecDequeChannel::new(),
    })?;
    let pool = owned.pool.clone();
    let log = Arc::new(Mutex::new(Vec::new()));

    // Hold the one worker until everything is queued.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    // (Handles dropped: the tasks run detached; close waits for them.)
    drop(pool.housekeeping.exec(run(move || wait.recv().ok())));

    for (i, job) in ["rotate logs", "compact", "refresh cache"]
        .iter()
        .enumerate()
    {
        let log = log.clone();
        drop(pool.housekeeping.exec(run(move || {
            log.lock().unwrap().push(format!("housekeeping {i}: {job}"))
        })));
    }
    for value in [30, 5, 80, 55, 80, 10, 99, 42] {
        let log = log.clone();
        drop(pool.bids.exec_param(
            run(move || log.lock().unwrap().push(format!("bid of {value}"))),
            value,
        ));
    }
    go.send(())?;
    // Both levels complete on close: it returns once every task ran.
    drop(pool);
    owned.close().wait();
    println!("The worker ran, once free:");
    for (n, line) in log.lock().unwrap().iter().enumerate() {
        println!("  {:>2}. {line}", n + 1);
    }
    Ok(())
}
