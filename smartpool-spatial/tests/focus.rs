//! Moving the focus: `set_focus` from a task of the channel, or from another
//! thread between two pops, reorders the tasks still queued; the next pop
//! honours it.

mod common;

use std::sync::{Arc, Barrier};

use common::{hold, one_worker, release, Gate, Order};
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool_spatial::SpatialChannel;

#[test]
fn a_task_moving_the_focus_reorders_the_rest() {
    let owned = one_worker::<[f32; 2]>();
    let pool = owned.pool.clone();
    let (gate, held) = hold(&owned);
    let order = Order::new();
    // Ten tasks on a line; the one at the origin runs first and turns the
    // focus to the far end.
    let mut handles = Vec::new();
    for x in 1..10 {
        handles.push(
            pool.spatial
                .exec(order.task(x.to_string()), [x as f32, 0.0]),
        );
    }
    let (o, p) = (order.clone(), pool.clone());
    handles.push(pool.spatial.exec(
        run(move || {
            o.push("0");
            p.spatial.set_focus([9.5, 0.0]);
        }),
        [0.0, 0.0],
    ));
    release(&gate, held, handles);
    assert_eq!(
        order.get(),
        ["0", "9", "8", "7", "6", "5", "4", "3", "2", "1"]
    );
    drop(pool);
    block_on(owned.close());
}

/// A task that says it started, then waits for its gate.
fn pausing(order: &Order, name: &str, started: &Arc<Barrier>, gate: &Gate) -> impl FnOnce() {
    let (order, name, started, gate) = (
        order.clone(),
        name.to_owned(),
        started.clone(),
        gate.clone(),
    );
    move || {
        order.push(name);
        started.wait();
        gate.wait();
    }
}

#[test]
fn moving_the_focus_from_outside_between_two_pops() {
    // [f64; 3] takes the atomic crate's fallback for the focus.
    assert!(!SpatialChannel::<[f64; 3]>::focus_is_lock_free());
    let owned = one_worker::<[f64; 3]>();
    let (gate, held) = hold(&owned);
    let order = Order::new();
    let (first, sixth) = (Gate::new(), Gate::new());
    let started = Arc::new(Barrier::new(2));
    let mut handles = Vec::new();
    for x in 1..10 {
        let at = [x as f64, 0.0, 0.0];
        handles.push(if x == 6 {
            owned
                .pool
                .spatial
                .exec(run(pausing(&order, "6", &started, &sixth)), at)
        } else {
            owned.pool.spatial.exec(order.task(x.to_string()), at)
        });
    }
    handles.push(
        owned
            .pool
            .spatial
            .exec(run(pausing(&order, "0", &started, &first)), [0.0; 3]),
    );
    gate.open();
    block_on(held).unwrap();

    // The worker is inside "0": turn to the far end, then let it go on.
    started.wait();
    owned.pool.spatial.set_focus([9.5, 0.0, 0.0]);
    first.open();
    // Inside "6" (after 9, 8, 7): turn back to 3.2.
    started.wait();
    owned.pool.spatial.set_focus([3.2, 0.0, 0.0]);
    sixth.open();

    for h in handles {
        block_on(h).unwrap();
    }
    assert_eq!(
        order.get(),
        ["0", "9", "8", "7", "6", "3", "4", "2", "5", "1"]
    );
    block_on(owned.close());
}

#[test]
fn the_focus_reads_back_and_small_points_are_lock_free() {
    let ch = SpatialChannel::<[f32; 2]>::with_focus([1.0, 2.0]);
    assert_eq!(ch.focus(), [1.0, 2.0]);
    ch.set_focus([-3.0, 4.5]);
    assert_eq!(ch.focus(), [-3.0, 4.5]);
    assert!(SpatialChannel::<[f32; 2]>::focus_is_lock_free());
    assert_eq!(SpatialChannel::<[f32; 3]>::new().focus(), [0.0; 3]);
    assert!(ch.is_empty());
}
