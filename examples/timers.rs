//! The time scheduler: a periodic heartbeat, delayed tasks on a channel,
//! and a task that sleeps between steps, all on one pool.
//!
//! Run: `cargo run --example timers`

use std::time::{Duration, Instant};

use futures::StreamExt;
use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Main,
}

struct App {
    main: VecDequeChannel,
}

impl PoolBehavior for App {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Ch::Main,
                complete_on_close: true,
            }]],
        }
    }
    fn channel(&self, _key: Ch) -> &dyn Channel {
        &self.main
    }
}

fn main() {
    let owned = OwnedPool::new(App {
        main: VecDequeChannel::new(),
    })
    .expect("valid config");
    let pool = owned.pool.clone();
    let time = TimeScheduler::new();
    let start = Instant::now();
    let ms = move || start.elapsed().as_millis();

    // A heartbeat every 20 ms, five times: a stream consumed by a task.
    let t = time.clone();
    let heartbeat = pool.main.exec(async move {
        let mut beats =
            t.periodically(start + Duration::from_millis(20), Duration::from_millis(20));
        for _ in 0..5 {
            beats.next().await;
            println!("{:>4} ms  heartbeat", ms());
        }
    });

    // Tasks that run once due, submitted out of order.
    let delayed: Vec<_> = [70, 10, 40]
        .into_iter()
        .map(|d| {
            time.run_after(&pool.main, Duration::from_millis(d), async move {
                println!("{:>4} ms  task due at {d} ms", ms())
            })
        })
        .collect();

    // A task that sleeps between its steps, holding no worker meanwhile.
    let t = time.clone();
    let stepper = pool.main.exec(async move {
        for step in 1..=3 {
            t.after(Duration::from_millis(25)).await;
            println!("{:>4} ms  step {step} of 3", ms());
        }
    });

    owned.block_on(async {
        heartbeat.await.unwrap();
        stepper.await.unwrap();
        for d in delayed {
            d.await.unwrap();
        }
    });
    owned.close().wait();
}
