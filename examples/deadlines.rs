//! Shortest deadline first: jobs with deadlines, submitted in any order,
//! run earliest deadline first, on a level below an urgent one.
//!
//! Run: `cargo run --example deadlines`

use std::time::{Duration, Instant};

use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Urgent,
    Deadline,
}

struct Saves {
    urgent: VecDequeChannel,
    deadline: ShortestDeadlineFirst,
}

impl PoolBehavior for Saves {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 1, // one worker, so the order is easy to see
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Ch::Urgent,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Ch::Deadline,
                    complete_on_close: true,
                }],
            ],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Urgent => &self.urgent,
            Ch::Deadline => &self.deadline,
        }
    }
}

fn main() {
    let owned = OwnedPool::new(Saves {
        urgent: VecDequeChannel::new(),
        deadline: ShortestDeadlineFirst::new(),
    })
    .expect("valid config");
    let pool = owned.pool.clone();
    let start = Instant::now();

    // Keep the worker busy for a moment so that everything below queues up.
    drop(
        pool.urgent
            .exec(run(|| std::thread::sleep(Duration::from_millis(20)))),
    );

    for (name, due_ms) in [
        ("autosave", 500),
        ("thumbnail", 50),
        ("telemetry", 2000),
        ("prefetch", 50),
    ] {
        let due = start + Duration::from_millis(due_ms);
        drop(pool.deadline.exec(
            run(move || {
                println!(
                    "{:>5} ms  {name:<9} (due at {due_ms} ms)",
                    start.elapsed().as_millis()
                )
            }),
            due,
        ));
    }
    println!(
        "submitted: autosave, thumbnail, telemetry, prefetch; they run earliest deadline first:"
    );
    owned.close().wait();
    println!(
        "(a deadline orders the work, it does not delay it: each ran as soon as a worker was free)"
    );
}
