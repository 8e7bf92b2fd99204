//! The smartpool demo: a saturated backlog, and realtime tasks submitted
//! meanwhile. Their wait (submit to start) is measured on a pool with a
//! realtime level above the backlog, then on a pool with one FIFO level, as
//! a pool without priorities would run them.
//!
//! Run: `cargo run --release --example priority_demo`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smartpool::prelude::*;

const BACKLOG_TASKS: usize = 40_000;
const BACKLOG_WORK: Duration = Duration::from_micros(20);
const REALTIME_EVERY: Duration = Duration::from_millis(1);

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Realtime,
    Backlog,
}

struct Demo {
    realtime: VecDequeChannel,
    backlog: VecDequeChannel,
    levels: bool,
}

impl PoolBehavior for Demo {
    type ChannelKey = Ch;

    fn config(&self) -> PoolConfig<Ch> {
        let realtime = ChannelParams {
            key: Ch::Realtime,
            complete_on_close: true,
        };
        let backlog = ChannelParams {
            key: Ch::Backlog,
            complete_on_close: true,
        };
        PoolConfig {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: if self.levels {
                vec![vec![realtime], vec![backlog]]
            } else {
                vec![vec![backlog]]
            },
        }
    }

    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Realtime => &self.realtime,
            Ch::Backlog => &self.backlog,
        }
    }
}

/// Busy CPU work of `d`.
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

struct Outcome {
    waits: Vec<Duration>,
    drained: Duration,
}

fn measure(levels: bool) -> Outcome {
    let owned = OwnedPool::new(Demo {
        realtime: VecDequeChannel::new(),
        backlog: VecDequeChannel::new(),
        levels,
    })
    .expect("valid config");
    let pool = owned.pool.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    for _ in 0..BACKLOG_TASKS {
        let done = done.clone();
        drop(pool.backlog.exec(run(move || {
            spin(BACKLOG_WORK);
            done.fetch_add(1, Ordering::Relaxed);
        })));
    }
    let waits = Arc::new(Mutex::new(Vec::new()));
    // One realtime task per millisecond while the backlog drains.
    while done.load(Ordering::Relaxed) < BACKLOG_TASKS {
        let submitted = Instant::now();
        let waits = waits.clone();
        let task = run(move || waits.lock().unwrap().push(submitted.elapsed()));
        // Without levels, realtime work can only queue behind the backlog.
        drop(if levels {
            pool.realtime.exec(task)
        } else {
            pool.backlog.exec(task)
        });
        std::thread::sleep(REALTIME_EVERY);
    }
    let drained = start.elapsed();
    owned.close().wait();
    let mut waits = std::mem::take(&mut *waits.lock().unwrap());
    waits.sort_unstable();
    Outcome { waits, drained }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

fn row(name: &str, o: &Outcome) {
    println!(
        "{name:<28}{:>10}{:>10}{:>10}{:>9}{:>11.2} s",
        show(percentile(&o.waits, 0.5)),
        show(percentile(&o.waits, 0.99)),
        show(*o.waits.last().unwrap()),
        o.waits.len(),
        o.drained.as_secs_f64(),
    );
}

fn main() {
    println!(
        "smartpool demo: {} worker threads; a backlog of {} tasks of {} µs CPU each;\n\
         one realtime task submitted every {} ms while the backlog drains.\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        BACKLOG_TASKS,
        BACKLOG_WORK.as_micros(),
        REALTIME_EVERY.as_millis(),
    );
    println!(
        "{:<28}{:>30}{:>9}{:>13}",
        "", "realtime wait, submit → start", "", "backlog"
    );
    println!(
        "{:<28}{:>10}{:>10}{:>10}{:>9}{:>13}",
        "pool", "p50", "p99", "max", "samples", "drained in"
    );
    let levels = measure(true);
    row("realtime level over backlog", &levels);
    let fifo = measure(false);
    row("one FIFO level", &fifo);
    println!(
        "\nWith a level of its own, a realtime task typically waits for the backlog task\n\
         in progress to finish; in one FIFO queue it waits behind the whole backlog."
    );
}
