//! `Queue::export_metrics` (feature `metrics-export`): the queue's counts
//! reach the `metrics` facade's recorder beside the pool's, per level and
//! state; a level whose jobs are gone reads 0.
#![cfg(feature = "metrics-export")]

mod common;

use common::fresh_db;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use smartpool_postgres::{NewJob, Queue};

/// The gauge `name` with labels `labels` (sorted by key) in `snapshotter`'s
/// last look, if recorded.
fn gauge(snapshotter: &Snapshotter, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let mut have: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
            have.sort();
            match value {
                DebugValue::Gauge(v) if key.name() == name && have == labels => Some(v.0),
                _ => None,
            }
        })
}

#[test]
fn the_queue_counts_reach_the_recorder_beside_the_pools() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let url = fresh_db("export");
    let queue = Queue::connect(&url).unwrap();
    for level in [0, 0, 2] {
        queue
            .enqueue(NewJob::new("none", vec![]).level(level))
            .unwrap();
    }
    queue.export_metrics().unwrap();
    let jobs = |level, state| {
        gauge(
            &snapshotter,
            "smartpool_postgres_jobs",
            &[("level", level), ("state", state)],
        )
    };
    assert_eq!(jobs("0", "queued"), Some(2.0));
    assert_eq!(jobs("2", "queued"), Some(1.0));
    assert_eq!(jobs("2", "dead"), Some(0.0));
    // No worker runs: every queued job waits unserved.
    let unserved = |level| {
        gauge(
            &snapshotter,
            "smartpool_postgres_jobs_unserved",
            &[("level", level)],
        )
    };
    assert_eq!(unserved("0"), Some(2.0));
    // Gone from the table: 0, not the last count.
    common::admin_of(
        &common::db_name("export"),
        "DELETE FROM smartpool_jobs WHERE level = 2",
    );
    queue.export_metrics().unwrap();
    assert_eq!(jobs("2", "queued"), Some(0.0));
    assert_eq!(unserved("2"), Some(0.0));
    // The pool's series land in the same recorder.
    let owned = smartpool::Builder::new().threads(1).build().unwrap();
    owned.pool.export_metrics();
    let pool_series = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .any(|(key, _, _, _)| key.key().name() == "smartpool_tasks_queued");
    assert!(pool_series, "the pool's counts beside the queue's");
    owned.close().wait();
}
