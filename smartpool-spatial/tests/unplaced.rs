//! Tasks without a point (a one-argument `exec`, a future handed back by
//! followup after a wake-up) run before every placed task, first in, first
//! out.

mod common;

use std::sync::atomic::Ordering;
use std::task::Poll;

use common::{hold, one_worker, release, Order};
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn tasks_without_a_point_run_first_in_submission_order() {
    let owned = one_worker::<[f32; 3]>();
    let (gate, held) = hold(&owned);
    let order = Order::new();
    let spatial = &owned.pool.spatial;
    let handles = vec![
        spatial.exec(order.task("at the focus"), [0.0; 3]),
        spatial.exec(order.task("far"), [50.0, 0.0, 0.0]),
        Exec::exec(spatial, order.task("plain 1")),
        Exec::exec(spatial, order.task("plain 2")),
        spatial.exec(order.task("near"), [1.0, 0.0, 0.0]),
    ];
    release(&gate, held, handles);
    assert_eq!(
        order.get(),
        ["plain 1", "plain 2", "at the focus", "near", "far"]
    );
    block_on(owned.close());
}

#[test]
fn a_woken_task_resumes_before_the_placed_ones() {
    let owned = one_worker::<[f32; 3]>();
    let pool = owned.pool.clone();
    let (gate, held) = hold(&owned);
    let order = Order::new();
    // Nearest, so it starts first. On its first poll it turns the focus onto
    // "b" and wakes itself: followup hands it back with no point, and it
    // resumes before "b", which sits exactly at the new focus.
    let (o, p) = (order.clone(), pool.clone());
    let mut polls = 0;
    let yielder = pool.spatial.exec(
        futures::future::poll_fn(move |cx| {
            polls += 1;
            if polls == 1 {
                o.push("started");
                p.spatial.set_focus([3.0, 0.0, 0.0]);
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                o.push("resumed");
                Poll::Ready(())
            }
        }),
        [1.0, 0.0, 0.0],
    );
    let a = pool.spatial.exec(order.task("a"), [2.0, 0.0, 0.0]);
    let b = pool.spatial.exec(order.task("b"), [3.0, 0.0, 0.0]);
    gate.open();
    for h in [held, yielder, a, b] {
        block_on(h).unwrap();
    }
    assert_eq!(order.get(), ["started", "resumed", "b", "a"]);
    assert_eq!(pool.followups.load(Ordering::SeqCst), 1);
    drop(pool);
    block_on(owned.close());
}
