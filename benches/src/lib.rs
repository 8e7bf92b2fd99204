//! The benchmark suite's machinery: the peers behind one interface
//! ([`peers`]), the workloads ([`workloads`]), and small tools shared by
//! both (completion latch, CPU time, busy work).

pub mod peers;
pub mod workloads;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Counts tasks down; `wait` returns when all are done. Every peer's tasks
/// pay the same one shared decrement.
#[derive(Clone)]
pub struct Latch(Arc<(AtomicUsize, Mutex<bool>, Condvar)>);

impl Latch {
    pub fn new(count: usize) -> Latch {
        Latch(Arc::new((
            AtomicUsize::new(count),
            Mutex::new(count == 0),
            Condvar::new(),
        )))
    }

    pub fn done(&self) {
        if self.0 .0.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.0 .1.lock().unwrap() = true;
            self.0 .2.notify_all();
        }
    }

    pub fn wait(&self) {
        let mut done = self.0 .1.lock().unwrap();
        while !*done {
            done = self.0 .2.wait(done).unwrap();
        }
    }
}

/// The ids of this process's threads now.
pub fn thread_ids() -> Vec<u64> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|t| t.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// CPU time so far of the given threads of this process, from their
/// `schedstat` (nanosecond resolution); exited threads count as zero.
pub fn threads_cpu(ids: &[u64]) -> Duration {
    let ns: u64 = ids
        .iter()
        .filter_map(|id| std::fs::read_to_string(format!("/proc/self/task/{id}/schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

/// CPU time of every thread of this process so far.
pub fn process_cpu() -> Duration {
    threads_cpu(&thread_ids())
}

/// Busy CPU work for `d`.
pub fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Yields once: wakes itself and returns `Pending`, so the task goes back
/// through its executor's queue. Used for executors without a yield of
/// their own.
pub struct YieldNow(bool);

impl YieldNow {
    pub fn new() -> YieldNow {
        YieldNow(false)
    }
}

impl Default for YieldNow {
    fn default() -> YieldNow {
        YieldNow::new()
    }
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The median of `v` (its upper middle for an even length).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A histogram of waits in ns, up to 10 s.
pub fn wait_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("bounds")
}

/// The share of time this machine takes away from a running thread in
/// pauses of at least `gap`, measured by one spinning thread per core for
/// `length`.
///
/// A spinning thread reads the clock in a loop. A jump of `gap` or more
/// is time the thread did not run: an interrupt, or the hypervisor.
/// A measured wait lands in such a pause about this often, whatever the
/// executor does. If the share passes 1%, a p99 under `gap` is out of
/// reach on this machine.
pub fn machine_gaps(gap: Duration, length: Duration) -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lost: Duration = (0..cores)
        .map(|_| {
            std::thread::spawn(move || {
                let start = Instant::now();
                let (mut last, mut lost) = (start, Duration::ZERO);
                while last - start < length {
                    let now = Instant::now();
                    if now - last >= gap {
                        lost += now - last;
                    }
                    last = now;
                }
                lost
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().expect("gap probe"))
        .sum();
    lost.as_secs_f64() / (length.as_secs_f64() * cores as f64)
}
