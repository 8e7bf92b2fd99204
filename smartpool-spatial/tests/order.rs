//! The spatial order: with the only worker held while tasks queue up, they
//! run nearest to the focus first, in 2-D and 3-D, `f32` and `f64`; and
//! many tasks at random points (some shared) all run exactly once.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use common::{hold, one_worker, release, world, Order};
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool_spatial::SpatialPoint;

/// Queues `tasks` (name, point) behind the held worker with the focus at
/// `focus`, releases the worker, and returns the order they ran in.
fn run_order<P: SpatialPoint>(focus: P, tasks: &[(&str, P)]) -> Vec<String> {
    let owned = one_worker::<P>();
    let (gate, held) = hold(&owned);
    owned.pool.spatial.set_focus(focus);
    let order = Order::new();
    let handles: Vec<_> = tasks
        .iter()
        .map(|&(name, at)| owned.pool.spatial.exec(order.task(name), at))
        .collect();
    assert_eq!(owned.pool.spatial.len(), tasks.len());
    release(&gate, held, handles);
    block_on(owned.close());
    order.get()
}

#[test]
fn nearest_first_in_3d_f32() {
    let order = run_order(
        [0.0f32, 0.0, 0.0],
        &[
            ("far", [10.0, 0.0, 0.0]),
            ("mid", [0.0, 0.0, -4.0]),
            ("near", [0.0, 1.0, 0.0]),
            ("behind", [-6.0, 0.0, 1.0]),
            ("diagonal", [2.0, 2.0, 2.0]),
        ],
    );
    assert_eq!(order, ["near", "diagonal", "mid", "behind", "far"]);
}

#[test]
fn nearest_first_in_3d_f64_around_a_focus_away_from_the_origin() {
    let order = run_order(
        [100.0f64, 100.0, 100.0],
        &[
            ("origin", [0.0, 0.0, 0.0]),
            ("at the focus", [100.0, 100.0, 100.0]),
            ("above", [100.0, 103.0, 100.0]),
            ("corner", [98.0, 98.0, 98.0]),
            ("far side", [250.0, 100.0, 100.0]),
        ],
    );
    assert_eq!(
        order,
        ["at the focus", "above", "corner", "far side", "origin"]
    );
}

#[test]
fn nearest_first_in_2d_f32() {
    let order = run_order(
        [5.0f32, 5.0],
        &[
            ("west", [1.0, 5.0]),
            ("north", [5.0, 7.0]),
            ("east", [8.5, 5.0]),
            ("origin", [0.0, 0.0]),
            ("here", [5.0, 5.5]),
        ],
    );
    assert_eq!(order, ["here", "north", "east", "west", "origin"]);
}

#[test]
fn nearest_first_in_2d_f64_at_large_coordinates() {
    let order = run_order(
        [-1e9f64, 3.5],
        &[
            ("a metre off", [-1e9 + 1.0, 3.5]),
            ("a kilometre off", [-1e9, 1003.5]),
            ("a millimetre off", [-1e9, 3.501]),
            ("the other end", [1e9, 3.5]),
        ],
    );
    assert_eq!(
        order,
        [
            "a millimetre off",
            "a metre off",
            "a kilometre off",
            "the other end"
        ]
    );
}

/// A deterministic stream of pseudo-random numbers in [0, 1).
fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 24) as f32
}

#[test]
fn ten_thousand_tasks_at_random_points_all_run_exactly_once() {
    const N: usize = 10_000;
    let owned = world::<[f32; 3]>(2, true);
    let pool = owned.pool.clone();
    let runs: Arc<Vec<AtomicU32>> = Arc::new((0..N).map(|_| AtomicU32::new(0)).collect());
    let mut seed = 42;
    let mut at = [0.0; 3];
    let handles: Vec<_> = (0..N)
        .map(|i| {
            // Every fifth task shares the previous one's point: equal
            // distances must not lose tasks either.
            if i % 5 != 0 {
                at = [(); 3].map(|_| lcg(&mut seed) * 100.0);
            }
            if i % 100 == 0 {
                // The focus wanders while the workers drain.
                pool.spatial.set_focus(at);
            }
            let runs = runs.clone();
            pool.spatial
                .exec(run(move || runs[i].fetch_add(1, Ordering::SeqCst)), at)
        })
        .collect();
    for h in handles {
        block_on(h).unwrap();
    }
    assert!(runs.iter().all(|r| r.load(Ordering::SeqCst) == 1));
    assert!(pool.spatial.is_empty());
    block_on(owned.close());
}
