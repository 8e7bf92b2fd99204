//! Recursive divide and conquer with `smartpool::join`: fibonacci by
//! splitting in two halves, over a million joins in all, on one worker
//! thread and on every core.
//!
//! On a worker, `join` publishes its second half as a job on the worker's
//! own stack, runs the first half, then takes the second back and runs it
//! unless an idle worker stole it (rayon's design). So a join allocates
//! nothing, and the peak memory stays that of the threads' stacks.
//!
//! `cargo run --release --example fork_join [n]` (default n = 30: 1.3
//! million joins).

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

/// Both halves by `join`, which returns when both are done.
fn fib(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = smartpool::join(&pool.work, || fib(pool, n - 1), || fib(pool, n - 2));
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
    // fib(n + 1) - 1 joins.
    let joins = 1.618_034_f64.powi(n as i32 + 1) / 5f64.sqrt();
    println!("fib({n}): about {:.1} million joins", joins / 1e6);
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
