//! A panicking task is caught: the worker lives on, the handle carries the
//! panic.

mod common;

use common::TwoLevels;
use futures::executor::block_on;
use smartpool::prelude::*;
use std::future::Future;

#[test]
fn one_thread_survives_a_thousand_panics() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let handles: Vec<_> = (0..common::scaled(1_000))
        .map(|i| {
            owned
                .pool
                .low
                .exec(run(move || -> u32 { panic!("boom {i}") }))
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let err = block_on(h).unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.to_string(), format!("task panicked: boom {i}"));
    }
    assert_eq!(
        block_on(owned.pool.low.exec(run(|| "alive"))).unwrap(),
        "alive"
    );
    block_on(owned.close());
}

#[test]
fn the_panic_payload_can_be_resumed() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let err = block_on(owned.pool.high.exec(async { std::panic::panic_any(17u8) })).unwrap_err();
    let payload = err.try_into_panic().unwrap();
    assert_eq!(payload.downcast_ref::<u8>(), Some(&17));
    block_on(owned.close());
}

/// Ready at once; panics when dropped, after its output was taken.
struct ReadyThenPanicOnDrop;

impl std::future::Future for ReadyThenPanicOnDrop {
    type Output = u32;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<u32> {
        std::task::Poll::Ready(3)
    }
}

impl Drop for ReadyThenPanicOnDrop {
    fn drop(&mut self) {
        panic!("panic in drop");
    }
}

#[test]
fn a_future_panicking_in_drop_keeps_its_output_and_the_worker() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let h = owned.pool.low.exec(ReadyThenPanicOnDrop);
    assert_eq!(block_on(h).unwrap(), 3);
    assert_eq!(block_on(owned.pool.low.exec(run(|| 4))).unwrap(), 4);
    block_on(owned.close());
}

/// An output whose destructor panics.
struct PanicOnDropOutput;

impl Drop for PanicOnDropOutput {
    fn drop(&mut self) {
        panic!("output dropped");
    }
}

#[test]
fn a_detached_output_panicking_in_drop_does_not_break_close() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    // Detached: the worker holds the last reference and frees the output.
    drop(owned.pool.high.exec(run(|| PanicOnDropOutput)));
    assert_eq!(block_on(owned.pool.high.exec(run(|| 5))).unwrap(), 5);
    assert!(common::close_within(owned, common::FAILSAFE), "close hung");
}

/// The handle holds the last reference: dropping it drops the output on
/// the caller's thread, whose panic it catches, as tokio's handle does.
#[test]
fn dropping_the_last_handle_of_an_output_panicking_in_drop_does_not_panic() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let handle = owned.pool.high.exec(run(|| PanicOnDropOutput));
    // One worker: once a later task ran, the first finished and its worker
    // let go of it.
    assert_eq!(block_on(owned.pool.high.exec(run(|| 5))).unwrap(), 5);
    assert!(handle.is_finished());
    drop(handle);
    assert!(common::close_within(owned, common::FAILSAFE), "close hung");
}

struct PanickingWaker;

impl futures::task::ArcWake for PanickingWaker {
    fn wake_by_ref(_: &std::sync::Arc<Self>) {
        panic!("joiner's waker");
    }
}

#[test]
fn a_panicking_join_waker_does_not_break_the_worker_or_close() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let gate = common::Gate::new();
    let g = gate.clone();
    let mut handle = owned.pool.high.exec(run(move || g.wait()));
    let waker = futures::task::waker(std::sync::Arc::new(PanickingWaker));
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut handle).poll(&mut cx).is_pending());
    gate.open(); // completes on the worker, which wakes the panicking waker
    assert_eq!(block_on(owned.pool.high.exec(run(|| 6))).unwrap(), 6);
    assert!(handle.is_finished());
    assert!(common::close_within(owned, common::FAILSAFE), "close hung");
}
