//! async-task's cancel tests, ported to smartpool's abort.
//!
//! Origin: smol-rs/async-task at commit
//! f98b30bb047426104c23b81e1c2fa083b177a567, `tests/cancel.rs`. Each test
//! restates the original against smartpool's API (nothing is copied): a
//! one-level pool (`common::Flat`) stands for async-task's `Runnable` and
//! schedule function, and `JoinHandle::abort` then awaiting the handle
//! stands for `Task::cancel().await` (`Ok(output)` for its `Some`,
//! `Err(Aborted)` for its `None`). Counters of polls, future drops and
//! output drops are the originals'; their sleeps are latches here.
//!
//! Differs on purpose: in `cancel_during_run`, a poll in progress that
//! returns `Ready` after the abort keeps its output, as tokio's does
//! (`Ok`); async-task drops the output and returns `None`.
//!
//! Not ported: the schedule function's drop counter (`DROP_S`): a pool's
//! scheduling is not a per-task value that is dropped.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};

use common::{close_within, Flat, Gate, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

/// Counts its polls, its drops and its output's drops; each poll may wait
/// at a barrier and a gate (the originals' sleep) before returning `Ready`.
#[derive(Clone, Default, Debug)]
struct Counters {
    polls: Arc<AtomicUsize>,
    future_drops: Arc<AtomicUsize>,
    output_drops: Arc<AtomicUsize>,
}

impl Counters {
    fn get(&self) -> (usize, usize, usize) {
        (
            self.polls.load(Ordering::SeqCst),
            self.future_drops.load(Ordering::SeqCst),
            self.output_drops.load(Ordering::SeqCst),
        )
    }
}

struct Fut {
    counters: Counters,
    /// Met at the start of the poll, then waited on, if set.
    hold: Option<(Arc<Barrier>, Gate)>,
}

#[derive(Debug)]
struct Out(#[allow(dead_code)] Counters);

impl Future for Fut {
    type Output = Out;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Out> {
        self.counters.polls.fetch_add(1, Ordering::SeqCst);
        if let Some((polling, release)) = &self.hold {
            polling.wait();
            release.wait();
        }
        Poll::Ready(Out(self.counters.clone()))
    }
}

impl Drop for Fut {
    fn drop(&mut self) {
        self.counters.future_drops.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.0.output_drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// `run_and_cancel`: the task ran to completion; the abort then does
/// nothing, and awaiting gives the output, dropped once.
#[test]
fn run_and_cancel() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let counters = Counters::default();
    let handle = owned.pool.work.exec(Fut {
        counters: counters.clone(),
        hold: None,
    });
    while !handle.is_finished() {
        std::thread::yield_now();
    }
    assert_eq!(counters.get(), (1, 1, 0));
    handle.abort();
    assert!(block_on(handle).is_ok(), "async-task: Some(output)");
    assert_eq!(counters.get(), (1, 1, 1));
    assert!(close_within(owned, FAILSAFE));
}

/// `cancel_and_run`: aborted before it runs; it is never polled, its future
/// is dropped once, and there is no output.
#[test]
fn cancel_and_run() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let (gate, held) = common::hold_worker(&owned.pool.work);
    let counters = Counters::default();
    let handle = owned.pool.work.exec(Fut {
        counters: counters.clone(),
        hold: None,
    });
    handle.abort();
    gate.open();
    let error = block_on(handle).unwrap_err();
    assert_eq!(
        error.cancel_reason(),
        Some(CancelReason::Aborted),
        "async-task: None"
    );
    assert_eq!(counters.get(), (0, 1, 0));
    block_on(held).unwrap();
    assert!(close_within(owned, FAILSAFE));
}

/// `cancel_during_run`: aborted while its one poll runs; the poll returns
/// `Ready`, so the output is kept (see the module doc), and the future is
/// dropped once.
#[test]
fn cancel_during_run() {
    let owned = OwnedPool::new(Flat::new(1)).unwrap();
    let counters = Counters::default();
    let (polling, release) = (Arc::new(Barrier::new(2)), Gate::new());
    let handle = owned.pool.work.exec(Fut {
        counters: counters.clone(),
        hold: Some((polling.clone(), release.clone())),
    });
    polling.wait();
    handle.abort();
    release.open();
    let output = block_on(handle).expect("tokio's rule: a Ready poll keeps its output");
    assert_eq!(counters.get(), (1, 1, 0));
    drop(output);
    assert_eq!(counters.get(), (1, 1, 1));
    assert!(close_within(owned, FAILSAFE));
}
