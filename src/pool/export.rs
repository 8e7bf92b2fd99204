//! [`Pool::export_metrics`]: the pool's counts into the `metrics` facade
//! (feature `metrics-export`), where a Prometheus exporter, or any other
//! recorder, reads them.
//!
//! The rule: each call records one [`Pool::metrics`] snapshot, as
//! absolute values. Counters are set to the pool's totals and gauges to
//! what it holds now, so calls may come at any pace (a scrape, a timer)
//! and two calls never count a task twice.

use metrics_facade::{counter, gauge};

use super::{Activity, Pool};
use crate::behavior::PoolBehavior;

impl<B: PoolBehavior> Pool<B> {
    /// Records the pool's counts in the `metrics` facade's recorder
    /// (install one first, e.g. `metrics-exporter-prometheus`). Every
    /// series has a `pool` label (the pool's number); channel series add
    /// `channel` (the key's `Debug`) and `level`:
    ///
    /// | series | kind | what |
    /// |---|---|---|
    /// | `smartpool_tasks_submitted_total` | counter | per channel: tasks admitted |
    /// | `smartpool_tasks_started_total` | counter | tasks polled the first time |
    /// | `smartpool_tasks_completed_total` | counter | tasks that returned their output |
    /// | `smartpool_tasks_panicked_total` | counter | tasks that panicked |
    /// | `smartpool_tasks_cancelled_total` | counter | tasks dropped unfinished |
    /// | `smartpool_stalls_total` | counter | polls over the stall threshold while work waited |
    /// | `smartpool_tasks_queued` | gauge | tasks in the channel now |
    /// | `smartpool_queue_wait_seconds` | gauge | sampled wait to the first poll, with `quantile` 0.5, 0.99 or 1 (the longest) |
    /// | `smartpool_level_busy_seconds` | gauge | per level: time its tasks ran, summed over workers |
    /// | `smartpool_workers_running` | gauge | per level: workers running one of its tasks now |
    ///
    /// ```
    /// // A recorder must be installed to see anything; without one the
    /// // call records nothing.
    /// let owned = smartpool::Builder::new().threads(1).build()?;
    /// owned.pool.export_metrics();
    /// owned.close().wait();
    /// # Ok::<(), smartpool::ConfigError>(())
    /// ```
    pub fn export_metrics(&self) {
        let snapshot = self.metrics();
        let pool = self.shared.id.to_string();
        for channel in &snapshot.channels {
            let labels = [
                ("pool", pool.clone()),
                ("channel", format!("{:?}", channel.key)),
                ("level", channel.level.to_string()),
            ];
            let counts = [
                ("smartpool_tasks_submitted_total", channel.submitted),
                ("smartpool_tasks_started_total", channel.started),
                ("smartpool_tasks_completed_total", channel.completed),
                ("smartpool_tasks_panicked_total", channel.panicked),
                ("smartpool_tasks_cancelled_total", channel.cancelled),
                ("smartpool_stalls_total", channel.stalls),
            ];
            for (name, value) in counts {
                counter!(name, &labels).absolute(value);
            }
            gauge!("smartpool_tasks_queued", &labels).set(channel.queued as f64);
            let wait = &channel.queue_wait;
            for (quantile, value) in [("0.5", wait.p50), ("0.99", wait.p99), ("1", wait.max)] {
                if let Some(value) = value {
                    let labels = [&labels[..], &[("quantile", quantile.to_string())]].concat();
                    gauge!("smartpool_queue_wait_seconds", &labels).set(value.as_secs_f64());
                }
            }
        }
        for (level, metrics) in snapshot.levels.iter().enumerate() {
            let labels = [("pool", pool.clone()), ("level", level.to_string())];
            gauge!("smartpool_level_busy_seconds", &labels).set(metrics.busy.as_secs_f64());
            let running = snapshot
                .workers
                .iter()
                .filter(|w| w.activity == Activity::Running { level })
                .count();
            gauge!("smartpool_workers_running", &labels).set(running as f64);
        }
    }
}
