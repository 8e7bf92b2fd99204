//! `ShortestDeadlineFirst` and `ExecParam`: the earliest deadline runs
//! first, equal deadlines in submission order; tasks without a deadline (a
//! followup, a one-argument `exec`) are due "now".

mod common;

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use common::Gate;
use futures::executor::block_on;
use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Hold,
    Deadline,
    Sharded,
}

struct Deadlines {
    hold: VecDequeChannel,
    deadline: ShortestDeadlineFirst,
    sharded: MultiChannel<ShortestDeadlineFirst>,
}

impl PoolBehavior for Deadlines {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 1,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Ch::Hold,
                    complete_on_close: true,
                }],
                vec![
                    ChannelParams {
                        key: Ch::Deadline,
                        complete_on_close: true,
                    },
                    ChannelParams {
                        key: Ch::Sharded,
                        complete_on_close: true,
                    },
                ],
            ],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Hold => &self.hold,
            Ch::Deadline => &self.deadline,
            Ch::Sharded => &self.sharded,
        }
    }
}

fn pool() -> OwnedPool<Deadlines> {
    OwnedPool::new(Deadlines {
        hold: VecDequeChannel::new(),
        deadline: ShortestDeadlineFirst::new(),
        sharded: MultiChannel::new(3, ShortestDeadlineFirst::new),
    })
    .unwrap()
}

/// Holds the only worker until the returned gate opens.
fn hold(owned: &OwnedPool<Deadlines>) -> (Gate, JoinHandle<()>) {
    let gate = Gate::new();
    let started = Arc::new(Barrier::new(2));
    let (g, s) = (gate.clone(), started.clone());
    let h = owned.pool.hold.exec(run(move || {
        s.wait();
        g.wait();
    }));
    started.wait();
    (gate, h)
}

#[test]
fn earliest_deadline_first_and_equal_deadlines_in_submission_order() {
    let owned = pool();
    let (gate, held) = hold(&owned);
    let base = Instant::now() + Duration::from_secs(60);
    let order = Arc::new(Mutex::new(Vec::new()));
    let plan = [
        ("50", 50),
        ("10a", 10),
        ("30", 30),
        ("10b", 10),
        ("20", 20),
        ("10c", 10),
    ];
    let handles: Vec<_> = plan
        .iter()
        .map(|&(name, ms)| {
            let order = order.clone();
            owned.pool.deadline.exec(
                run(move || order.lock().unwrap().push(name)),
                base + Duration::from_millis(ms),
            )
        })
        .collect();
    gate.open();
    block_on(held).unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        ["10a", "10b", "10c", "20", "30", "50"]
    );
    block_on(owned.close());
}

#[test]
fn a_task_without_a_deadline_is_due_now() {
    let owned = pool();
    let (gate, held) = hold(&owned);
    let order = Arc::new(Mutex::new(Vec::new()));
    let push = |name: &'static str| {
        let order = order.clone();
        run(move || order.lock().unwrap().push(name))
    };
    let later = owned.pool.deadline.exec(
        push("in an hour"),
        Instant::now() + Duration::from_secs(3600),
    );
    let now = Exec::exec(&owned.pool.deadline, push("now"));
    let past = owned.pool.deadline.exec(
        push("a second ago"),
        Instant::now() - Duration::from_secs(1),
    );
    gate.open();
    for h in [held, later, now, past] {
        block_on(h).unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        ["a second ago", "now", "in an hour"]
    );
    block_on(owned.close());
}

#[test]
fn a_yielding_future_comes_back_through_followup_and_completes() {
    let owned = pool();
    let mut left = 5;
    let h = owned.pool.deadline.exec(
        futures::future::poll_fn(move |cx| {
            if left == 0 {
                return std::task::Poll::Ready("done");
            }
            left -= 1;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }),
        Instant::now(),
    );
    assert_eq!(block_on(h).unwrap(), "done");
    block_on(owned.close());
}

#[test]
fn a_deadline_task_after_close_comes_back() {
    let owned = pool();
    let pool = owned.pool.clone();
    block_on(owned.close());
    let refused = pool
        .deadline
        .try_exec(async { 3 }, Instant::now())
        .unwrap_err();
    assert_eq!(block_on(refused.into_inner()), 3);
    assert!(block_on(pool.deadline.exec(async { 4 }, Instant::now()))
        .unwrap_err()
        .is_cancelled());
}

#[test]
fn sharded_deadline_channels_take_parameters_too() {
    let owned = pool();
    let handles: Vec<_> = (0..300u64)
        .map(|i| {
            owned
                .pool
                .sharded
                .exec_param(run(move || i), Instant::now() + Duration::from_micros(i))
        })
        .collect();
    let sum: u64 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    assert_eq!(sum, (0..300).sum());
    block_on(owned.close());
}
