//! Recursive divide and conquer with `smartpool::scope`: fibonacci by
//! spawning both halves and waiting for them, millions of tasks in all, on
//! one worker thread and on every core. A waiting scope runs its own
//! not-yet-started tasks first, newest first (rayon's work-first order), so
//! this neither deadlocks on one thread nor nests deeper than the recursion.
//!
//! `cargo run --release --example fork_join [n]` (default n = 30: 2.7
//! million tasks).
//!
//! The peak memory it prints is the known cost of the work-first wait: a
//! task its waiter runs itself leaves its empty shell in the channel until
//! a worker reaches it, which on one thread is after the recursion returns
//! (about 210 bytes a task; BENCHMARKS.md, "Fork-join").

use std::time::Instant;

use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
struct Work;

struct Flat {
    work: VecDequeChannel,
    threads: usize,
}

impl PoolBehavior for Flat {
    type ChannelKey = Work;
    fn config(&self) -> PoolConfig<Work> {
        PoolConfig {
            threads: self.threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Work,
                complete_on_close: true,
            }]],
        }
    }
    fn channel(&self, _: Work) -> &dyn Channel {
        &self.work
    }
    fn followup(&self, _: Work, task: RunningTask) {
        self.work.submit(task);
    }
}

/// Both halves as scoped tasks; the scope returns when both are done.
fn fib(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (mut a, mut b) = (0, 0);
    smartpool::scope(|s| {
        s.exec(&pool.work, run(|| a = fib(pool, n - 1)));
        s.exec(&pool.work, run(|| b = fib(pool, n - 2)));
    });
    a + b
}

/// The process's peak resident memory (Linux), for the record.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(str::to_owned)
        })
        .map_or_else(
            || "unknown".to_owned(),
            |l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "),
        )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = std::env::args().nth(1).map_or(Ok(30), |a| a.parse())?;
    // 2 fib(n + 1) - 2 tasks.
    let tasks = 2.0 * 1.618_034_f64.powi(n as i32 + 1) / 5f64.sqrt();
    println!("fib({n}): about {:.1} million scoped tasks", tasks / 1e6);
    for threads in [
        1,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    ] {
        let owned = OwnedPool::new(Flat {
            work: VecDequeChannel::new(),
            threads,
        })?;
        let pool = owned.pool.clone();
        let start = Instant::now();
        let value = owned.block_on(owned.pool.work.exec(run(move || fib(&pool, n))))?;
        println!(
            "{threads:>2} thread(s): fib({n}) = {value} in {:.2} s (peak RSS so far {})",
            start.elapsed().as_secs_f64(),
            peak_rss()
        );
        owned.close().wait();
    }
    Ok(())
}
