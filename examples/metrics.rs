//! `pool.metrics()` while a mixed load runs: a background backlog of
//! 40,000 tasks of 20 µs drains, urgent tasks arrive eight every
//! millisecond, a few tasks panic, some are aborted. The table is printed
//! every 200 ms, then once the pool is quiet. Read in it how long each
//! level's tasks waited in their queue (sampled, one task in 64), how busy
//! each level kept the workers, and what each worker is doing.
//!
//! Run: `cargo run --release --example metrics`

use std::time::{Duration, Instant};

use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Level {
    Urgent,
    Background,
}

struct App {
    urgent: VecDequeChannel,
    background: VecDequeChannel,
}

impl PoolBehavior for App {
    type ChannelKey = Level;

    fn config(&self) -> PoolConfig<Level> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Level::Urgent,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Level::Background,
                    complete_on_close: false,
                }],
            ],
        }
    }

    fn channel(&self, key: Level) -> &dyn Channel {
        match key {
            Level::Urgent => &self.urgent,
            Level::Background => &self.background,
        }
    }
}

fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn main() {
    // (The panicking tasks below are counted; keep their messages short.)
    std::panic::set_hook(Box::new(|_| {}));
    let owned = OwnedPool::new(App {
        urgent: VecDequeChannel::new(),
        background: VecDequeChannel::new(),
    })
    .expect("valid config");
    let pool = owned.pool.clone();
    for i in 0..40_000u32 {
        let task = pool.background.exec(run(move || {
            spin(Duration::from_micros(20));
            assert!(i % 5_000 != 7, "background task {i} fails");
        }));
        if i % 1_000 == 3 {
            task.abort();
        }
    }
    let start = Instant::now();
    let mut next_print = start;
    let mut urgent = Vec::new();
    while pool.metrics().channels[1].queued > 0 {
        std::thread::sleep(Duration::from_millis(1));
        for _ in 0..8 {
            urgent.push(pool.urgent.exec(run(|| spin(Duration::from_micros(5)))));
        }
        if Instant::now() >= next_print {
            println!(
                "after {:>4} ms:\n{}",
                start.elapsed().as_millis(),
                pool.metrics()
            );
            next_print += Duration::from_millis(200);
        }
    }
    for task in urgent {
        owned.block_on(task).expect("urgent task");
    }
    // Exact once every worker is idle (see `Pool::metrics`).
    while pool
        .metrics()
        .workers
        .iter()
        .any(|w| matches!(w.activity, smartpool::Activity::Running { .. }))
    {
        std::thread::yield_now();
    }
    println!(
        "quiet, after {} ms:\n{}",
        start.elapsed().as_millis(),
        pool.metrics()
    );
    drop(pool);
    owned.close().wait();
}
