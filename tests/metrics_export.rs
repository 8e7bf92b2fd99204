//! `Pool::export_metrics` (feature `metrics-export`): the counts reach
//! the `metrics` facade's recorder as absolute values, labelled by pool,
//! channel and level; exporting twice counts nothing twice.
#![cfg(feature = "metrics-export")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use metrics_facade::{
    Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use smartpool::prelude::*;
use smartpool::Activity;

/// What the recorder saw: each series (name and sorted labels) and its
/// last value.
type Seen = Arc<Mutex<HashMap<String, f64>>>;

struct Capture(Seen);

struct Series {
    name: String,
    seen: Seen,
}

impl Series {
    fn store(&self, value: f64) {
        self.seen.lock().unwrap().insert(self.name.clone(), value);
    }
}

impl metrics_facade::CounterFn for Series {
    fn increment(&self, _: u64) {
        panic!("the export sets counters, it never adds to them");
    }
    fn absolute(&self, value: u64) {
        self.store(value as f64);
    }
}

impl metrics_facade::GaugeFn for Series {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, value: f64) {
        self.store(value);
    }
}

impl Capture {
    fn series(&self, key: &Key) -> Arc<Series> {
        let mut labels: Vec<_> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        Arc::new(Series {
            name: format!("{}{{{}}}", key.name(), labels.join(",")),
            seen: self.0.clone(),
        })
    }
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.series(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.series(key))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[test]
fn the_counts_reach_the_recorder_labelled() {
    let owned = smartpool::Builder::new()
        .levels(2)
        .threads(1)
        .build()
        .unwrap();
    for _ in 0..3 {
        futures::executor::block_on(owned.pool.level(1).exec(run(|| ()))).unwrap();
    }
    // Exact once a snapshot saw every worker idle (see `Pool::metrics`).
    while owned
        .pool
        .metrics()
        .workers
        .iter()
        .any(|w| matches!(w.activity, Activity::Running { .. }))
    {
        std::thread::yield_now();
    }
    let seen = Seen::default();
    let recorder = Capture(seen.clone());
    metrics_facade::with_local_recorder(&recorder, || {
        owned.pool.export_metrics();
        owned.pool.export_metrics();
    });
    let seen = seen.lock().unwrap();
    let value = |name: &str, labels: &str| -> f64 {
        let (series, value) = seen
            .iter()
            .find(|(series, _)| series.starts_with(&format!("{name}{{")) && series.contains(labels))
            .unwrap_or_else(|| panic!("no {name} with {labels} in {seen:?}"));
        assert!(series.contains("pool="), "{series}");
        *value
    };
    let low = "channel=1,level=1";
    assert_eq!(value("smartpool_tasks_submitted_total", low), 3.0);
    assert_eq!(value("smartpool_tasks_completed_total", low), 3.0);
    assert_eq!(
        value("smartpool_tasks_submitted_total", "channel=0,level=0"),
        0.0
    );
    assert_eq!(value("smartpool_tasks_queued", low), 0.0);
    assert!(value("smartpool_level_busy_seconds", "level=1") >= 0.0);
    assert_eq!(value("smartpool_workers_running", "level=1"), 0.0);
    drop(seen);
    owned.close().wait();
}
