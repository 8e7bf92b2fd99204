//! The time scheduler: timers wake parked tasks through followup; a timer,
//! a yield, then another timer completes (the original lost that second
//! wake-up); nothing completes before its instant; periodic ticks are
//! exact and in order; close waits for a timer-parked complete_on_close
//! task.

mod common;

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use common::{yield_once, Lv, TwoLevels};
use futures::executor::block_on;
use futures::StreamExt;
use smartpool::prelude::*;
use std::future::Future;

/// Wraps a future; counts it in `parked` if its first poll was `Pending`.
struct Probe<F> {
    inner: F,
    first: bool,
    parked: Arc<AtomicUsize>,
}

impl<F: Future + Unpin> Future for Probe<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let result = Pin::new(&mut self.inner).poll(cx);
        if std::mem::take(&mut self.first) && result.is_pending() {
            self.parked.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

#[test]
fn a_timer_then_a_yield_then_a_timer_completes() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let time = TimeScheduler::new();
    let parked = Arc::new(AtomicUsize::new(0));
    let p = parked.clone();
    let h = owned.pool.low.exec(async move {
        let probe = |sleep| Probe {
            inner: sleep,
            first: true,
            parked: p.clone(),
        };
        probe(time.after(Duration::from_millis(2))).await;
        yield_once().await;
        probe(time.after(Duration::from_millis(2))).await;
        "all three"
    });
    assert_eq!(block_on(h).unwrap(), "all three");
    // Every wake of a parked task goes through followup: the yield, and
    // each timer that was still pending when first polled (a slow machine,
    // valgrind say, may reach a timer already due).
    let followups = owned.pool.followups[Lv::Low as usize].load(Ordering::SeqCst);
    assert!(
        followups > parked.load(Ordering::SeqCst),
        "{followups} followups"
    );
    block_on(owned.close());
}

#[test]
fn a_sleep_never_completes_before_its_instant() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let time = TimeScheduler::new();
    let handles: Vec<_> = (0..20u64)
        .map(|i| {
            let t = time.clone();
            owned.pool.high.exec(async move {
                let due = Instant::now() + Duration::from_micros(100 * i);
                let sleep = t.at(due);
                assert_eq!(sleep.deadline(), due);
                sleep.await;
                Instant::now() >= due
            })
        })
        .collect();
    for h in handles {
        assert!(block_on(h).unwrap(), "woke before its instant");
    }
    block_on(owned.close());
}

#[test]
fn an_instant_in_the_past_is_ready_at_once() {
    let time = TimeScheduler::new();
    let mut sleep = time.at(Instant::now() - Duration::from_secs(1));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut sleep).poll(&mut cx).is_ready());
}

#[test]
fn periodic_ticks_are_exact_in_order_and_never_early() {
    let time = TimeScheduler::new();
    let start = Instant::now() + Duration::from_millis(1);
    let interval = Duration::from_millis(2);
    let ticks: Vec<(Instant, Instant)> = block_on(
        time.periodically(start, interval)
            .map(|tick| (tick, Instant::now()))
            .take(5)
            .collect(),
    );
    for (k, &(tick, seen)) in ticks.iter().enumerate() {
        assert_eq!(tick, start + interval * k as u32, "tick {k}");
        assert!(seen >= tick, "tick {k} came early");
    }
}

#[test]
fn run_after_runs_on_its_channel_once_due() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let time = TimeScheduler::new();
    let due = Instant::now() + Duration::from_millis(5);
    let h = time.run_at(&owned.pool.high, due, async move { Instant::now() >= due });
    assert!(block_on(h).unwrap(), "ran before it was due");
    let h = time.run_after(&owned.pool.low, Duration::from_millis(1), async { 7 });
    assert_eq!(block_on(h).unwrap(), 7);
    block_on(owned.close());
}

#[test]
fn close_waits_for_a_timer_parked_complete_on_close_task() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let time = TimeScheduler::new();
    // High is complete_on_close, Low is not.
    let kept = time.run_after(&owned.pool.high, Duration::from_millis(30), async { "ran" });
    let dropped = time.run_after(&owned.pool.low, Duration::from_secs(3600), async {
        "never"
    });
    block_on(owned.close());
    assert!(
        kept.is_finished(),
        "close resolved before the timer task ran"
    );
    assert_eq!(block_on(kept).unwrap(), "ran");
    // The dropping task never runs: cancelled if close found it queued,
    // still parked on its hour-long timer if it had started.
    if dropped.is_finished() {
        assert!(block_on(dropped).unwrap_err().is_cancelled());
    }
}

/// A delay the clock cannot represent is a sleep that never completes
/// (it used to panic on `Instant` overflow); tokio clamps the same way.
#[test]
fn duration_max_sleeps_for_ever_and_ticks_once() {
    let time = TimeScheduler::new();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);

    let mut sleep = time.after(Duration::MAX);
    assert!(sleep.deadline() > Instant::now() + Duration::from_secs(86_400 * 365));
    assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());

    let start = Instant::now();
    let mut ticks = time.periodically(start, Duration::MAX);
    assert_eq!(block_on(ticks.next()), Some(start), "the first tick is due");
    assert!(ticks.poll_next_unpin(&mut cx).is_pending());

    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let never = time.run_after(&owned.pool.low, Duration::MAX, async { 1 });
    assert!(!never.is_finished());
    // The low channel drops on close: the parked task is cancelled when
    // its timer would fire, which is never; close does not wait for it.
    block_on(owned.close());
}
