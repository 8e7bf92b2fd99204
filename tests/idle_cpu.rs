//! An idle pool sleeps: its own test binary, so that only this pool's
//! threads run in the process while it is measured.

mod common;

use std::time::Duration;

use common::TwoLevels;
use futures::executor::block_on;
use smartpool::prelude::*;

/// CPU time of every thread of this process, in nanoseconds, from
/// `/proc/self/task/*/schedstat` (first field: time on CPU).
fn process_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn an_idle_two_thread_pool_uses_almost_no_cpu() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    // Some work first, so that the workers went through wake and sleep.
    for _ in 0..100 {
        block_on(owned.pool.low.exec(run(|| ()))).unwrap();
    }
    // Let the spinning rounds end.
    std::thread::sleep(Duration::from_millis(100));
    let before = process_cpu_ns();
    std::thread::sleep(Duration::from_secs(2));
    let used = process_cpu_ns() - before;
    assert!(
        used < 50_000_000,
        "idle pool used {} ms of CPU in 2 s",
        used / 1_000_000
    );
    block_on(owned.close());
}
