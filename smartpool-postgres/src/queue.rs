//! [`Queue`]: enqueue jobs and look at them, from any process, with or
//! without a pool, through a database thread of its own.

use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, oneshot};

use crate::db::{self, Connection};
use crate::job::{JobRow, JobState, NewJob};
use crate::Error;

/// What the queue's thread is asked.
enum Request {
    Enqueue(NewJob, oneshot::Sender<Result<i64, Error>>),
    EnqueueMany(Vec<NewJob>, oneshot::Sender<Result<Vec<i64>, Error>>),
    SetLevel(i64, i32, oneshot::Sender<Result<bool, Error>>),
    Job(i64, oneshot::Sender<Result<Option<JobRow>, Error>>),
    Counts(oneshot::Sender<Result<Vec<(JobState, i64)>, Error>>),
    Cancel(i64, oneshot::Sender<Result<Cancelled, Error>>),
    Dead(i64, oneshot::Sender<Result<Vec<JobRow>, Error>>),
    Revive(i64, oneshot::Sender<Result<bool, Error>>),
    Discard(i64, oneshot::Sender<Result<bool, Error>>),
    CountsByLevel(oneshot::Sender<Result<Vec<LevelCount>, Error>>),
    Unserved(oneshot::Sender<Result<Vec<(i32, i64)>, Error>>),
    Schedule(String, NewJob, Duration, oneshot::Sender<Result<(), Error>>),
    Unschedule(String, oneshot::Sender<Result<bool, Error>>),
}

/// `(level, state, count)`: see [`Queue::counts_by_level`].
type LevelCount = (i32, JobState, i64);

/// A job's row, as `job_row` reads it.
const ROW: &str = "id, kind, level, state, attempts, last_error, locked_by, locked_until";

/// What [`Queue::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// The job was queued: it is gone from the table.
    Removed,
    /// The job was running: it is `dead` with the error "cancelled", and
    /// its handler's [`Job::lease_lost`](crate::Job::lease_lost) resolves
    /// at its worker's next renewal (a third of the lease at most). The
    /// handler's outcome is not written.
    Stopping,
    /// No queued or running job has this id (it finished, or never was).
    NotFound,
}

/// Cancels job `$1`: a queued one is deleted, a running one made dead.
const CANCEL: &str = "\
WITH removed AS (
    DELETE FROM smartpool_jobs WHERE id = $1 AND state = 'queued' RETURNING 1 AS what),
stopped AS (
    UPDATE smartpool_jobs SET state = 'dead', finished_at = now(), locked_until = NULL,
        last_error = 'cancelled'
    WHERE id = $1 AND state = 'running' RETURNING 2 AS what)
SELECT what FROM removed UNION ALL SELECT what FROM stopped";

/// A handle to the jobs table: enqueue, move a queued job to another
/// level, look at a job. Each call is answered by the queue's own
/// database thread; the blocking calls wait for it, the `_async` ones
/// return a future to await in a task (a pool's worker waits for nothing).
/// A call made while the server is away fails with [`Error::Db`]; the next
/// one reconnects.
///
/// ```
/// use smartpool_postgres::{JobState, NewJob, Queue, TempCluster};
///
/// let cluster = TempCluster::start()?; // a throwaway server
/// let queue = Queue::connect(&cluster.url())?;
/// let id = queue.enqueue(NewJob::new("resize", b"cat.png".to_vec()).level(2))?;
/// let more = queue.enqueue_many(vec![NewJob::new("email", vec![]); 3])?;
/// assert_eq!(more.len(), 3);
/// assert!(queue.set_level(id, 0)?); // still queued: moved
/// let row = queue.job(id)?.expect("queued");
/// assert_eq!((row.level, row.state, row.attempts), (0, JobState::Queued, 0));
/// assert_eq!(queue.counts()?, vec![(JobState::Queued, 4)]);
/// # Ok::<(), smartpool_postgres::Error>(())
/// ```
#[derive(Debug)]
pub struct Queue {
    requests: mpsc::UnboundedSender<Request>,
    /// The levels `export_metrics` has recorded series for (set to 0 once
    /// their jobs are gone).
    #[cfg(feature = "metrics-export")]
    pub(crate) exported: std::sync::Mutex<std::collections::BTreeSet<i32>>,
}

impl Queue {
    /// Connects to the server at `url` (a tokio-postgres connection
    /// string, e.g. `host=/tmp port=5432 user=postgres dbname=jobs`) and
    /// creates the table if it is missing.
    pub fn connect(url: &str) -> Result<Queue, Error> {
        let (requests, rx) = mpsc::unbounded_channel();
        let (ready, connected) = oneshot::channel();
        let url = url.to_owned();
        db::spawn("smartpool-postgres-queue".into(), serve(url, rx, ready))?;
        futures::executor::block_on(connected).map_err(|_| Error::Stopped)??;
        Ok(Queue {
            requests,
            #[cfg(feature = "metrics-export")]
            exported: Default::default(),
        })
    }

    /// Enqueues `job`; returns its id.
    pub fn enqueue(&self, job: NewJob) -> Result<i64, Error> {
        futures::executor::block_on(self.enqueue_async(job))
    }

    /// Enqueues `job`; resolves to its id.
    pub fn enqueue_async(
        &self,
        job: NewJob,
    ) -> impl std::future::Future<Output = Result<i64, Error>> + Send + 'static {
        self.ask(|tx| Request::Enqueue(job, tx))
    }

    /// Enqueues every job of `jobs` in one statement; returns their ids,
    /// in order.
    pub fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<i64>, Error> {
        futures::executor::block_on(self.ask(|tx| Request::EnqueueMany(jobs, tx)))
    }

    /// Moves job `id` to `level` if it is still queued (it takes effect on
    /// the next claim); returns whether it was.
    pub fn set_level(&self, id: i64, level: i32) -> Result<bool, Error> {
        futures::executor::block_on(self.ask(|tx| Request::SetLevel(id, level, tx)))
    }

    /// Job `id`'s row, if it is still in the table.
    pub fn job(&self, id: i64) -> Result<Option<JobRow>, Error> {
        futures::executor::block_on(self.ask(|tx| Request::Job(id, tx)))
    }

    /// How many jobs are in each state.
    pub fn counts(&self) -> Result<Vec<(JobState, i64)>, Error> {
        futures::executor::block_on(self.ask(Request::Counts))
    }

    /// Cancels job `id`: a queued job is removed; a running one is made
    /// `dead` ("cancelled") and its handler told (see [`Cancelled`]).
    pub fn cancel(&self, id: i64) -> Result<Cancelled, Error> {
        futures::executor::block_on(self.ask(|tx| Request::Cancel(id, tx)))
    }

    /// The dead jobs, the latest to die first, at most `limit`.
    pub fn dead(&self, limit: i64) -> Result<Vec<JobRow>, Error> {
        futures::executor::block_on(self.ask(|tx| Request::Dead(limit, tx)))
    }

    /// Queues dead job `id` again, due now, with its attempts back to 0
    /// (its last error stays until the next attempt); returns whether it
    /// was dead.
    pub fn retry(&self, id: i64) -> Result<bool, Error> {
        futures::executor::block_on(self.ask(|tx| Request::Revive(id, tx)))
    }

    /// Deletes dead job `id`; returns whether it was dead.
    pub fn discard(&self, id: i64) -> Result<bool, Error> {
        futures::executor::block_on(self.ask(|tx| Request::Discard(id, tx)))
    }

    /// How many jobs are in each state, per level: `(level, state,
    /// count)`, by level then state.
    pub fn counts_by_level(&self) -> Result<Vec<(i32, JobState, i64)>, Error> {
        futures::executor::block_on(self.ask(Request::CountsByLevel))
    }

    /// The levels where queued jobs wait and no live worker serves, with
    /// how many jobs wait there: `(level, jobs)`, by level. A worker is
    /// live from its start until it closes, or for a lease after it last
    /// said so (every third of its lease); each live worker also warns in
    /// its log when this list changes and is not empty.
    pub fn unserved(&self) -> Result<Vec<(i32, i64)>, Error> {
        futures::executor::block_on(self.ask(Request::Unserved))
    }

    /// Schedules `job` every `every`, under `name`, once across all
    /// processes: the first run is due now, each next one `every` after
    /// the last was due. A worker (of any level) that claims, or wakes at
    /// the next due time, enqueues the due runs in the same statement that
    /// moves the schedule on, so two workers never enqueue the same run.
    /// A run whose job is still queued or running is skipped (the job
    /// carries the unique key `periodic:` + `name`). Runs missed while no
    /// worker was up fire once, then the schedule goes on from then.
    ///
    /// Scheduling a name again replaces its job and interval and keeps
    /// its next due time: every process may schedule at start. The job's
    /// kind, payload, level and attempts are used; its run time, deadline
    /// and unique key are not. An interval of zero, or past what the
    /// database counts, is [`Error::Config`].
    pub fn schedule_every(&self, name: &str, job: NewJob, every: Duration) -> Result<(), Error> {
        let name = name.to_owned();
        futures::executor::block_on(self.ask(|tx| Request::Schedule(name, job, every, tx)))
    }

    /// Removes schedule `name`; returns whether it existed. Jobs it
    /// already enqueued stay.
    pub fn unschedule(&self, name: &str) -> Result<bool, Error> {
        let name = name.to_owned();
        futures::executor::block_on(self.ask(|tx| Request::Unschedule(name, tx)))
    }

    fn ask<T: Send + 'static>(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<T, Error>>) -> Request,
    ) -> impl std::future::Future<Output = Result<T, Error>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let sent = self.requests.send(request(tx)).is_ok();
        async move {
            if !sent {
                return Err(Error::Stopped);
            }
            rx.await.map_err(|_| Error::Stopped)?
        }
    }
}

/// The queue's thread: answers requests until every `Queue` handle is
/// gone, reconnecting when a request finds the connection closed.
async fn serve(
    url: String,
    mut requests: mpsc::UnboundedReceiver<Request>,
    ready: oneshot::Sender<Result<(), Error>>,
) {
    let mut connection = match db::connect(&url).await {
        Ok(c) => Some(c),
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    while let Some(request) = requests.recv().await {
        if connection.as_ref().is_none_or(|c| c.client.is_closed()) {
            connection = match db::connect(&url).await {
                Ok(c) => Some(c),
                Err(e) => {
                    fail(request, e);
                    continue;
                }
            };
        }
        if let Some(connection) = &connection {
            answer(connection, request).await;
        }
    }
}

/// Answers `request` on `connection`.
async fn answer(connection: &Connection, request: Request) {
    let client = &connection.client;
    match request {
        Request::Enqueue(job, tx) => {
            let _ = tx.send(enqueue(client, &job).await);
        }
        Request::EnqueueMany(jobs, tx) => {
            if jobs.iter().any(|job| job.unique.is_some()) {
                let _ = tx.send(Err(Error::Config(
                    "enqueue_many refuses unique jobs: enqueue them one at a time".into(),
                )));
                return;
            }
            let kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
            let payloads: Vec<&[u8]> = jobs.iter().map(|j| j.payload.as_slice()).collect();
            let levels: Vec<i32> = jobs.iter().map(|j| j.level).collect();
            let run_ats: Vec<Option<SystemTime>> = jobs.iter().map(|j| j.run_at).collect();
            let deadlines: Vec<Option<SystemTime>> = jobs.iter().map(|j| j.deadline).collect();
            let attempts: Vec<i32> = jobs.iter().map(|j| j.max_attempts).collect();
            let ids = client
                .query(
                    "INSERT INTO smartpool_jobs (kind, payload, level, run_at, deadline, max_attempts) \
                     SELECT k, p, l, COALESCE(r, now()), d, m FROM unnest($1::text[], $2::bytea[], $3::int[], \
                     $4::timestamptz[], \
                     $5::timestamptz[], $6::int[]) WITH ORDINALITY AS j(k, p, l, r, d, m, n) \
                     ORDER BY n RETURNING id",
                    &[&kinds, &payloads, &levels, &run_ats, &deadlines, &attempts],
                )
                .await
                .map(|rows| rows.iter().map(|row| row.get::<_, i64>(0)).collect())
                .map_err(Error::from);
            let _ = tx.send(ids);
        }
        Request::SetLevel(id, level, tx) => {
            let moved = client
                .execute(
                    "UPDATE smartpool_jobs SET level = $2 WHERE id = $1 AND state = 'queued'",
                    &[&id, &level],
                )
                .await
                .map(|n| n == 1)
                .map_err(Error::from);
            let _ = tx.send(moved);
        }
        Request::Job(id, tx) => {
            let row = client
                .query_opt(
                    &format!("SELECT {ROW} FROM smartpool_jobs WHERE id = $1"),
                    &[&id],
                )
                .await
                .map_err(Error::from)
                .and_then(|row| row.map(|row| job_row(&row)).transpose());
            let _ = tx.send(row);
        }
        Request::Counts(tx) => {
            let counts = client
                .query(
                    "SELECT state, count(*) FROM smartpool_jobs GROUP BY state ORDER BY state",
                    &[],
                )
                .await
                .map_err(Error::from)
                .and_then(|rows| {
                    rows.iter()
                        .map(|row| Ok((state(row.get(0))?, row.get::<_, i64>(1))))
                        .collect()
                });
            let _ = tx.send(counts);
        }
        Request::Cancel(id, tx) => {
            let cancelled = client
                .query_opt(CANCEL, &[&id])
                .await
                .map(|row| match row.map(|row| row.get::<_, i32>(0)) {
                    Some(1) => Cancelled::Removed,
                    Some(_) => Cancelled::Stopping,
                    None => Cancelled::NotFound,
                })
                .map_err(Error::from);
            let _ = tx.send(cancelled);
        }
        Request::Dead(limit, tx) => {
            let rows = client
                .query(
                    &format!(
                        "SELECT {ROW} FROM smartpool_jobs WHERE state = 'dead' \
                         ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT $1"
                    ),
                    &[&limit],
                )
                .await
                .map_err(Error::from)
                .and_then(|rows| rows.iter().map(job_row).collect());
            let _ = tx.send(rows);
        }
        Request::Revive(id, tx) => {
            let revived = client
                .execute(
                    "UPDATE smartpool_jobs SET state = 'queued', attempts = 0, run_at = now(), \
                     finished_at = NULL, locked_by = NULL, locked_until = NULL \
                     WHERE id = $1 AND state = 'dead'",
                    &[&id],
                )
                .await
                .map(|n| n == 1)
                .map_err(Error::from);
            let _ = tx.send(revived);
        }
        Request::Discard(id, tx) => {
            let discarded = client
                .execute(
                    "DELETE FROM smartpool_jobs WHERE id = $1 AND state = 'dead'",
                    &[&id],
                )
                .await
                .map(|n| n == 1)
                .map_err(Error::from);
            let _ = tx.send(discarded);
        }
        Request::CountsByLevel(tx) => {
            let counts = client
                .query(
                    "SELECT level, state, count(*) FROM smartpool_jobs \
                     GROUP BY level, state ORDER BY level, state",
                    &[],
                )
                .await
                .map_err(Error::from)
                .and_then(|rows| {
                    rows.iter()
                        .map(|row| Ok((row.get(0), state(row.get(1))?, row.get::<_, i64>(2))))
                        .collect()
                });
            let _ = tx.send(counts);
        }
        Request::Schedule(name, job, every, tx) => {
            let _ = tx.send(schedule(client, &name, &job, every).await);
        }
        Request::Unserved(tx) => {
            let unserved = client
                .query(crate::worker::UNSERVED, &[])
                .await
                .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
                .map_err(Error::from);
            let _ = tx.send(unserved);
        }
        Request::Unschedule(name, tx) => {
            let removed = client
                .execute("DELETE FROM smartpool_periodic WHERE name = $1", &[&name])
                .await
                .map(|n| n == 1)
                .map_err(Error::from);
            let _ = tx.send(removed);
        }
    }
}

/// Inserts or replaces schedule `name` (see [`Queue::schedule_every`]).
async fn schedule(
    client: &tokio_postgres::Client,
    name: &str,
    job: &NewJob,
    every: Duration,
) -> Result<(), Error> {
    // Whole microseconds, the database's resolution; at most 100 years.
    let micros = i64::try_from(every.as_micros())
        .ok()
        .filter(|&m| m > 0 && m <= 100 * 365 * 86_400 * 1_000_000)
        .ok_or_else(|| {
            Error::Config(format!(
                "a schedule's interval must be from 1 µs to 100 years, not {every:?}"
            ))
        })?;
    client
        .execute(
            "INSERT INTO smartpool_periodic \
             (name, kind, payload, level, max_attempts, every, next_run_at) \
             VALUES ($1, $2, $3, $4, $5, make_interval(secs => $6::float8 / 1e6), now()) \
             ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind, payload = EXCLUDED.payload, \
             level = EXCLUDED.level, max_attempts = EXCLUDED.max_attempts, every = EXCLUDED.every",
            &[
                &name,
                &job.kind,
                &job.payload,
                &job.level,
                &job.max_attempts,
                &(micros as f64),
            ],
        )
        .await?;
    // Workers learn of it now, not at the next due time they knew of.
    client
        .execute(
            "SELECT pg_notify($1, $2)",
            &[&crate::schema::CHANNEL, &crate::schema::PERIODIC_NOTE],
        )
        .await?;
    Ok(())
}

/// Inserts `job`; returns its id. A unique job whose key a queued or
/// running job holds is not inserted: that job's id comes back. (Should
/// that job end between the insert and the look, the insert is tried
/// again.)
pub(crate) async fn enqueue<C: tokio_postgres::GenericClient>(
    client: &C,
    job: &NewJob,
) -> Result<i64, Error> {
    loop {
        // Due now by the server's clock, unless delayed.
        let inserted = client
            .query_opt(
                "INSERT INTO smartpool_jobs \
                 (kind, payload, level, run_at, deadline, max_attempts, unique_key) \
                 VALUES ($1, $2, $3, COALESCE($4, now()), $5, $6, $7) \
                 ON CONFLICT (unique_key) \
                     WHERE unique_key IS NOT NULL AND state IN ('queued', 'running') \
                 DO NOTHING RETURNING id",
                &[
                    &job.kind,
                    &job.payload,
                    &job.level,
                    &job.run_at,
                    &job.deadline,
                    &job.max_attempts,
                    &job.unique,
                ],
            )
            .await?;
        if let Some(row) = inserted {
            return Ok(row.get(0));
        }
        let holder = client
            .query_opt(
                "SELECT id FROM smartpool_jobs \
                 WHERE unique_key = $1 AND state IN ('queued', 'running')",
                &[&job.unique],
            )
            .await?;
        if let Some(row) = holder {
            return Ok(row.get(0));
        }
    }
}

fn state(s: &str) -> Result<JobState, Error> {
    JobState::parse(s).ok_or_else(|| Error::Config(format!("a row in an unknown state: {s:?}")))
}

fn job_row(row: &tokio_postgres::Row) -> Result<JobRow, Error> {
    Ok(JobRow {
        id: row.get(0),
        kind: row.get(1),
        level: row.get(2),
        state: state(row.get(3))?,
        attempts: row.get(4),
        last_error: row.get(5),
        locked_by: row.get(6),
        locked_until: row.get(7),
    })
}

/// Answers `request` with `error` (the server could not be reached).
fn fail(request: Request, error: Error) {
    match request {
        Request::Enqueue(_, tx) => drop(tx.send(Err(error))),
        Request::EnqueueMany(_, tx) => drop(tx.send(Err(error))),
        Request::SetLevel(_, _, tx) => drop(tx.send(Err(error))),
        Request::Job(_, tx) => drop(tx.send(Err(error))),
        Request::Counts(tx) => drop(tx.send(Err(error))),
        Request::Cancel(_, tx) => drop(tx.send(Err(error))),
        Request::Dead(_, tx) => drop(tx.send(Err(error))),
        Request::Revive(_, tx) => drop(tx.send(Err(error))),
        Request::Discard(_, tx) => drop(tx.send(Err(error))),
        Request::CountsByLevel(tx) => drop(tx.send(Err(error))),
        Request::Schedule(_, _, _, tx) => drop(tx.send(Err(error))),
        Request::Unschedule(_, tx) => drop(tx.send(Err(error))),
        Request::Unserved(tx) => drop(tx.send(Err(error))),
    }
}
