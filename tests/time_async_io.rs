//! `TimeScheduler` on async-io's timer (the `async-io` feature): its
//! timers fire, and no futures-timer thread is started for them. Run by
//! `.ci/run` with the feature on (with `tests/time.rs`, which checks the
//! same timers' behaviour on this backend).
#![cfg(feature = "async-io")]

use std::time::{Duration, Instant};

use futures::executor::block_on;
use futures::StreamExt;
use smartpool::TimeScheduler;

/// The names of this process's threads (Linux).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn timers_fire_on_async_io_alone() {
    let time = TimeScheduler::new();
    let start = Instant::now();
    block_on(time.after(Duration::from_millis(5)));
    assert!(start.elapsed() >= Duration::from_millis(5));
    let ticks: Vec<_> = block_on(
        time.periodically(Instant::now(), Duration::from_millis(2))
            .take(3)
            .collect(),
    );
    assert_eq!(ticks.len(), 3);
    assert!(ticks
        .windows(2)
        .all(|w| w[1] - w[0] == Duration::from_millis(2)));
    let names = thread_names();
    if !names.is_empty() {
        assert!(
            !names.iter().any(|n| n.contains("futures-timer")),
            "a futures-timer thread runs: {names:?}"
        );
    }
}
