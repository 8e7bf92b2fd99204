//! [`Queue::export_metrics`]: the queue's counts into the `metrics`
//! facade (feature `metrics-export`), beside the pool's own
//! ([`smartpool::Pool::export_metrics`]), where one Prometheus exporter
//! shows both.
//!
//! The rule: each call records one look at the table, as gauges of what
//! it holds now; a level whose jobs are all gone reads 0, not its last
//! count.

use std::collections::BTreeSet;

use metrics::gauge;

use crate::{Error, JobState, Queue};

/// The states a level's series cover, with their label.
const STATES: [(JobState, &str); 4] = [
    (JobState::Queued, "queued"),
    (JobState::Running, "running"),
    (JobState::Done, "done"),
    (JobState::Dead, "dead"),
];

impl Queue {
    /// Records the queue's counts in the `metrics` facade's recorder
    /// (install one first, e.g. `metrics-exporter-prometheus`), in two
    /// statements. Call it as the pool's
    /// [`export_metrics`](smartpool::Pool::export_metrics) is called (a
    /// scrape, a timer): both land in the same recorder.
    ///
    /// | series | kind | what |
    /// |---|---|---|
    /// | `smartpool_postgres_jobs` | gauge | per `level` and `state` (queued, running, done, dead): jobs in the table |
    /// | `smartpool_postgres_jobs_unserved` | gauge | per `level`: queued jobs that no live worker serves (see [`Queue::unserved`]) |
    pub fn export_metrics(&self) -> Result<(), Error> {
        let counts = self.counts_by_level()?;
        let unserved = self.unserved()?;
        let mut exported = self.exported.lock().unwrap_or_else(|p| p.into_inner());
        let levels: BTreeSet<i32> = counts.iter().map(|&(level, _, _)| level).collect();
        exported.extend(levels);
        for &level in exported.iter() {
            for (state, name) in STATES {
                let count = counts
                    .iter()
                    .find(|&&(l, s, _)| l == level && s == state)
                    .map_or(0, |&(_, _, n)| n);
                gauge!("smartpool_postgres_jobs", "level" => level.to_string(), "state" => name)
                    .set(count as f64);
            }
            let waiting = unserved
                .iter()
                .find(|&&(l, _)| l == level)
                .map_or(0, |&(_, n)| n);
            gauge!("smartpool_postgres_jobs_unserved", "level" => level.to_string())
                .set(waiting as f64);
        }
        Ok(())
    }
}
