//! [`Worker`]: a pool serving levels of the jobs table (the crate doc
//! has the protocol). Its database thread claims, renews leases and
//! writes outcomes; the pool's workers run the handlers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use smartpool::{AbortHandle, Exec, Pool, PoolBehavior};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::db::{self, Connection};
use crate::job::{Job, LeaseSignal};
use crate::registry::Registry;
use crate::Error;

/// How a [`Worker`] serves the table.
///
/// ```
/// use std::time::Duration;
/// use smartpool_postgres::ServeOptions;
///
/// let options = ServeOptions::new([0, 1, 2])
///     .capacity(8)
///     .lease(Duration::from_secs(30))
///     .poll(Duration::from_secs(2))
///     .keep_done(true);
/// # let _ = options;
/// ```
#[derive(Debug, Clone)]
pub struct ServeOptions {
    levels: Vec<i32>,
    capacity: Option<usize>,
    lease: Duration,
    poll: Duration,
    keep_done: bool,
    backoff: Duration,
    max_backoff: Duration,
    only_known_kinds: bool,
    timeout: Option<Duration>,
}

/// The default of [`ServeOptions::timeout`].
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The shortest lease: a renewal every third of it must fit a round trip.
const MIN_LEASE: Duration = Duration::from_millis(300);

/// The longest lease, poll and backoff accepted (a day).
const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);

impl ServeOptions {
    /// Serve the jobs of these levels. Defaults: capacity twice the pool's
    /// worker threads, a lease of 30 s, a look every 2 s, finished jobs
    /// deleted, retries after 1 s doubling up to 5 min, an attempt timed
    /// out after [`DEFAULT_JOB_TIMEOUT`] (30 min).
    pub fn new(levels: impl IntoIterator<Item = i32>) -> ServeOptions {
        ServeOptions {
            levels: levels.into_iter().collect(),
            capacity: None,
            lease: Duration::from_secs(30),
            poll: Duration::from_secs(2),
            keep_done: false,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            only_known_kinds: false,
            timeout: Some(DEFAULT_JOB_TIMEOUT),
        }
    }

    /// Claim only jobs whose kind this worker's registry knows, leaving
    /// the others queued for workers that know them (during a rolling
    /// deploy, say). Off by default: a job whose kind the worker does not
    /// know goes to `dead`, saying so.
    pub fn only_known_kinds(mut self, only: bool) -> ServeOptions {
        self.only_known_kinds = only;
        self
    }

    /// Refuses settings that cannot work.
    fn check(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::Config(why));
        if self.levels.is_empty() {
            return bad("ServeOptions names no level to serve".into());
        }
        if self.lease < MIN_LEASE || self.lease > MAX_PERIOD {
            return bad(format!(
                "a lease of {:?}: it must be from {MIN_LEASE:?} to a day",
                self.lease
            ));
        }
        if self.poll.is_zero() || self.poll > MAX_PERIOD {
            return bad(format!(
                "a poll of {:?}: it must be above zero, at most a day",
                self.poll
            ));
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return bad("a job timeout of zero: no attempt could finish".into());
        }
        if self.backoff > self.max_backoff || self.max_backoff > MAX_PERIOD {
            return bad(format!(
                "a backoff from {:?} to {:?}: the first must not exceed the most, at most a day",
                self.backoff, self.max_backoff
            ));
        }
        Ok(())
    }

    /// The most jobs the pool holds at once (claimed and not finished).
    pub fn capacity(mut self, jobs: usize) -> ServeOptions {
        self.capacity = Some(jobs);
        self
    }

    /// How long a claim holds a job without a renewal (renewed every
    /// third of it while the job runs; from 300 ms to a day). A worker
    /// that dies holds its jobs this long. Every statement of the worker's
    /// session is bounded by a third of it (`statement_timeout`,
    /// `lock_timeout`).
    pub fn lease(mut self, lease: Duration) -> ServeOptions {
        self.lease = lease;
        self
    }

    /// How often the worker looks for jobs without being notified: jobs
    /// that became due, leases that expired.
    pub fn poll(mut self, every: Duration) -> ServeOptions {
        self.poll = every;
        self
    }

    /// Keep finished jobs as `done` rows instead of deleting them.
    pub fn keep_done(mut self, keep: bool) -> ServeOptions {
        self.keep_done = keep;
        self
    }

    /// A failed attempt's job waits `first` before the next, twice as
    /// long after each further failure, at most `max`.
    pub fn backoff(mut self, first: Duration, max: Duration) -> ServeOptions {
        self.backoff = first;
        self.max_backoff = max;
        self
    }

    /// How long an attempt may run: a handler still running after it is
    /// dropped, and the attempt fails ("timed out after …"), to be
    /// retried, then dead like any failure. So a handler that hangs does
    /// not hold its slot for good, and a job that always hangs ends
    /// `dead`. `None`: no bound. Default [`DEFAULT_JOB_TIMEOUT`].
    /// (The lease is renewed while the handler runs, whatever this is.)
    pub fn timeout(mut self, timeout: Option<Duration>) -> ServeOptions {
        self.timeout = timeout;
        self
    }
}

/// How a job's attempt ended, as its task reports it.
#[derive(Debug)]
enum Outcome {
    Done,
    Failed(String),
    /// Never to be retried: no handler, or the last attempt's lease ran out.
    Dead(String),
    /// Dropped before it ended: queued again, the attempt not counted.
    Released,
}

/// A job's task, boxed.
type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Puts a job's task on the channel of its level (returns a handle to
/// abort it); gives it back if the pool refuses it.
type Submit = Box<dyn Fn(i32, Task) -> Result<AbortHandle, Task> + Send + Sync>;

/// A request to close: who waits, and when to abort the jobs still held.
type CloseRequest = (oneshot::Sender<()>, Option<Duration>);

/// A pool serving levels of the jobs table: see the crate doc.
#[derive(Debug)]
pub struct Worker {
    id: String,
    close: Option<mpsc::UnboundedSender<CloseRequest>>,
}

impl Worker {
    /// Serves `options`' levels of the table at `url` on `pool`: a job of
    /// level `l` runs as a task on the channel `route(l)`, by the handler
    /// `registry` has for its kind. Connects (creating the table if it is
    /// missing) before it returns.
    pub fn serve<B: PoolBehavior>(
        url: &str,
        pool: &Arc<Pool<B>>,
        route: impl Fn(i32) -> B::ChannelKey + Send + Sync + 'static,
        registry: Registry,
        options: ServeOptions,
    ) -> Result<Worker, Error> {
        options.check()?;
        let keys: Vec<B::ChannelKey> = pool
            .config()
            .levels
            .iter()
            .flatten()
            .map(|params| params.key)
            .collect();
        for &level in &options.levels {
            let key = route(level);
            if !keys.contains(&key) {
                return Err(Error::Config(format!(
                    "level {level} routes to channel {key:?}, which is not in the pool's config"
                )));
            }
        }
        // Twice the threads: each worker has its next job at hand while a
        // claim is in flight.
        let capacity = options.capacity.unwrap_or(2 * pool.threads()).max(1);
        // A task dropped unfinished is released (not counted) if the pool
        // dropped it closing, or the worker aborted it at close's
        // deadline; else its future was dropped while nothing would wake
        // it, and the attempt fails (see `Report`).
        let aborting = Arc::new(AtomicBool::new(false));
        let released: Released = {
            let (weak, aborting) = (Arc::downgrade(pool), aborting.clone());
            Arc::new(move || {
                aborting.load(Ordering::SeqCst) || weak.upgrade().is_none_or(|p| p.is_closing())
            })
        };
        let pool = pool.clone();
        let submit: Submit = Box::new(move |level, task| {
            match pool.channel(route(level)).try_exec(task) {
                // Detached: the task reports its outcome.
                Ok(handle) => Ok(handle.abort_handle()),
                Err(rejected) => Err(rejected.into_inner()),
            }
        });
        static WORKERS: AtomicU64 = AtomicU64::new(0);
        let started = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".into());
        let id = format!(
            "{host}-pid{}-{}-{started}",
            std::process::id(),
            WORKERS.fetch_add(1, Ordering::Relaxed)
        );
        let (close, close_rx) = mpsc::unbounded_channel();
        let (ready, connected) = oneshot::channel();
        let (outcomes, outcomes_rx) = mpsc::unbounded_channel();
        let fetcher = Fetcher {
            url: url.to_owned(),
            me: id.clone(),
            capacity,
            options,
            registry: Arc::new(registry),
            submit,
            outcomes,
            held: HashMap::new(),
            pending: VecDeque::new(),
            pool_closed: false,
            aborting,
            released,
            leases: HashMap::new(),
            next_due: None,
            fire_at: Some(Instant::now()),
            unserved: Vec::new(),
        };
        db::spawn(
            "smartpool-postgres-worker".into(),
            fetcher.run(ready, outcomes_rx, close_rx),
        )?;
        futures::executor::block_on(connected).map_err(|_| Error::Stopped)??;
        Ok(Worker {
            id,
            close: Some(close),
        })
    }

    /// This worker's name in the table's `locked_by`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Stops claiming; resolves once every job this worker holds has
    /// finished or been released, and their outcomes are written (while
    /// the server is away, it waits for it). Close the worker before the
    /// pool to let held jobs finish; closing the pool first drops the
    /// jobs of levels that do not complete on close, which releases them.
    pub fn close(mut self) -> WorkerClose {
        self.request_close(None)
    }

    /// As [`Worker::close`], but once `timeout` has passed, aborts the
    /// tasks of the jobs still held: each is dropped at its next
    /// suspension point (a handler blocked in synchronous code finishes
    /// that first) and its job released, queued again with the attempt
    /// not counted.
    pub fn close_timeout(mut self, timeout: Duration) -> WorkerClose {
        self.request_close(Some(timeout))
    }

    fn request_close(&mut self, timeout: Option<Duration>) -> WorkerClose {
        let (tx, rx) = oneshot::channel();
        if let Some(close) = self.close.take() {
            let _ = close.send((tx, timeout));
        }
        WorkerClose(rx)
    }
}

impl Drop for Worker {
    /// Closes without waiting.
    fn drop(&mut self) {
        if let Some(close) = self.close.take() {
            let (tx, _) = oneshot::channel();
            let _ = close.send((tx, None));
        }
    }
}

/// The end of [`Worker::close`]: a future, or [`WorkerClose::wait`].
#[derive(Debug)]
pub struct WorkerClose(oneshot::Receiver<()>);

impl WorkerClose {
    /// Blocks until the worker has closed.
    pub fn wait(self) {
        futures::executor::block_on(self)
    }
}

impl Future for WorkerClose {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // An error means the thread is gone: closed all the same.
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// Reports a job's outcome once: as its task said, or, if the task is
/// dropped first: released if the pool dropped it closing or the worker
/// aborted it at close's deadline (`released`); failed if it unwinds, or
/// if its future was dropped while the pool runs. That last is a handler
/// that returned `Pending` and let go of its waker: nothing could wake it,
/// so the pool freed it. Released, it would be claimed again at once, for
/// ever, its attempt never counted; failed, it is retried with backoff,
/// then dead.
struct Report {
    id: i64,
    outcomes: mpsc::UnboundedSender<(i64, Outcome)>,
    sent: bool,
    released: Released,
}

impl Report {
    fn send(mut self, outcome: Outcome) {
        self.sent = true;
        let _ = self.outcomes.send((self.id, outcome));
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        if !self.sent {
            let outcome = if std::thread::panicking() {
                Outcome::Failed("the job's task panicked".into())
            } else if (self.released)() {
                Outcome::Released
            } else {
                Outcome::Failed(
                    "the handler's future was dropped unfinished: it returned Pending \
                     and nothing kept its waker"
                        .into(),
                )
            };
            let _ = self.outcomes.send((self.id, outcome));
        }
    }
}

/// The task that runs `job` by its handler and reports how it ended.
fn job_task(registry: Arc<Registry>, job: Job, report: Report, timeout: Option<Duration>) -> Task {
    Box::pin(async move {
        let report = report;
        let id = job.id;
        let run = AssertUnwindSafe(async move {
            let handler = match registry.start(job) {
                Some(handler) => handler,
                None => unreachable!("claimed only with a handler"),
            };
            let Some(timeout) = timeout else {
                return handler.await;
            };
            let deadline = futures_timer::Delay::new(timeout);
            match futures::future::select(handler, deadline).await {
                futures::future::Either::Left((outcome, _)) => outcome,
                futures::future::Either::Right(((), _)) => {
                    Err(crate::JobError(format!("timed out after {timeout:?}")))
                }
            }
        });
        let outcome = match run.catch_unwind().await {
            Ok(Ok(())) => Outcome::Done,
            Ok(Err(e)) => Outcome::Failed(e.0),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string payload".into());
                log::warn!("smartpool-postgres: job {id}'s handler panicked: {message}");
                Outcome::Failed(format!("the handler panicked: {message}"))
            }
        };
        report.send(outcome);
    })
}

/// The worker's database thread.
struct Fetcher {
    url: String,
    me: String,
    capacity: usize,
    options: ServeOptions,
    registry: Arc<Registry>,
    submit: Submit,
    outcomes: mpsc::UnboundedSender<(i64, Outcome)>,
    /// Jobs claimed and not yet reported, by id, with a handle to abort
    /// their task (none for a job reported at its claim).
    held: HashMap<i64, Option<AbortHandle>>,
    /// Outcomes reported and not yet written, each with the writes the
    /// server refused so far.
    pending: VecDeque<(i64, Outcome, u32)>,
    /// The pool refused a job: it is closing; claim no more.
    pool_closed: bool,
    /// Set as close's deadline aborts the jobs held.
    aborting: Arc<AtomicBool>,
    /// The lease signal of each job whose handler runs (see
    /// [`Job::lease_lost`]).
    leases: HashMap<i64, LeaseSignal>,
    /// When the next job of the levels served becomes due, as the last
    /// claim that left room found it: the loop wakes then to claim it,
    /// not at the next poll.
    next_due: Option<Instant>,
    /// When the next periodic run is due (see `fire`); `None` while no
    /// schedule exists. Known from the last firing, and set to now by a
    /// schedule's notification and by a reconnection (which may have
    /// missed one): never a statement per poll.
    fire_at: Option<Instant>,
    /// The levels the last heartbeat found unserved (see `heartbeat`).
    unserved: Vec<i32>,
    /// Whether a task dropped unfinished now is released (see `Report`).
    released: Released,
}

/// Whether a job's task dropped unfinished is released now: the pool is
/// closing, or the worker aborts at close's deadline.
type Released = Arc<dyn Fn() -> bool + Send + Sync>;

/// A write the server refuses this many times is given up (logged): the
/// job's lease then expires and it runs again.
const MAX_REFUSALS: u32 = 5;

/// The first `$2` claimable rows of levels `$1` (not those of `$5`, the
/// ids this worker holds; only kinds `$6` if not null), in the order level,
/// deadline, id; each put under this worker's (`$3`) lease of `$4`
/// seconds, its attempt counted. Returns what each was before the claim.
const CLAIM: &str = "\
WITH picked AS (
    SELECT id, state AS was FROM smartpool_jobs
    WHERE level = ANY($1)
      AND ((state = 'queued' AND run_at <= now())
        OR (state = 'running' AND (locked_until IS NULL OR locked_until < now())))
      AND NOT (id = ANY($5))
      AND ($6::text[] IS NULL OR kind = ANY($6))
    ORDER BY level, deadline, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
UPDATE smartpool_jobs j
SET state = 'running', locked_by = $3,
    locked_until = now() + make_interval(secs => $4), attempts = j.attempts + 1
FROM picked WHERE j.id = picked.id
RETURNING j.id, j.kind, j.payload, j.level, j.deadline, j.attempts, j.max_attempts, picked.was";

/// How the worker's session plans its statements: each once per
/// connection (a generic plan), not at every run: planning the claim and
/// the write of finished jobs cost more than running them
/// (`pg_stat_statements`; BENCHMARKS.md has the figures). The claim must walk the
/// claim index in its order and stop at its limit: a plan that sorts the
/// whole backlog costs tens of ms a claim on a large table, and the
/// planner picks it when the statistics are stale (a table analyzed while
/// nearly empty, as autovacuum leaves a queue, then given a burst). A
/// generic plan also assumes a limit of a tenth of the table, and would
/// join the claimed rows to the table by merging its whole primary key
/// (milliseconds a claim). With sorts, the other scans and the other joins
/// off, the index scan and a nested loop by primary key are the plans it
/// can afford. The worker's other statements go by primary key, or read a
/// small table, which these leave alone. JIT compiles nothing a queue's
/// short statements gain from.
pub(crate) const PLANNING: &str = "\
SET enable_sort = off; SET enable_bitmapscan = off; SET enable_seqscan = off; \
SET enable_mergejoin = off; SET enable_hashjoin = off; SET jit = off; \
SET plan_cache_mode = force_generic_plan";

/// Renews the leases of jobs `$1` that this worker (`$2`) holds, skipping
/// rows someone else has locked (one such row must not hold back the
/// others' renewals).
const RENEW: &str = "\
UPDATE smartpool_jobs SET locked_until = now() + make_interval(secs => $3)
WHERE id IN (
    SELECT id FROM smartpool_jobs
    WHERE id = ANY($1) AND locked_by = $2 AND state = 'running'
    FOR UPDATE SKIP LOCKED)
RETURNING id";

/// In how many seconds the next queued job of levels `$1` becomes due
/// (null if none waits): the due index's first row.
const NEXT_DUE: &str = "\
SELECT EXTRACT(EPOCH FROM min(run_at) - now())::float8 FROM smartpool_jobs
WHERE level = ANY($1) AND state = 'queued' AND run_at > now()";

/// Worker `$1`, serving levels `$2`, is alive for a lease (`$3` seconds)
/// more: what `Queue::unserved` and the log's warning read.
const HEARTBEAT: &str = "\
INSERT INTO smartpool_workers (id, levels, alive_until)
VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (id) DO UPDATE SET levels = EXCLUDED.levels, alive_until = EXCLUDED.alive_until";

/// Worker `$1` has closed.
const GONE: &str = "DELETE FROM smartpool_workers WHERE id = $1";

/// Levels with queued jobs that no live worker serves, and how many jobs
/// wait there.
pub(crate) const UNSERVED: &str = "\
SELECT j.level, count(*) FROM smartpool_jobs j
WHERE j.state = 'queued' AND NOT EXISTS (
    SELECT 1 FROM smartpool_workers w WHERE j.level = ANY(w.levels) AND w.alive_until > now())
GROUP BY j.level ORDER BY j.level";

/// In how many seconds the next periodic run becomes due (null if there
/// is no schedule).
const NEXT_FIRE: &str = "\
SELECT EXTRACT(EPOCH FROM min(next_run_at) - now())::float8 FROM smartpool_periodic";

/// Enqueues the periodic runs that are due and moves their schedules on,
/// in one statement: a schedule another worker is firing is skipped
/// (`SKIP LOCKED`), so each run is enqueued once. A run whose job is
/// still queued or running is dropped (its unique key). A schedule that
/// fell behind fires once and goes on from now.
const FIRE: &str = "\
WITH due AS (
    SELECT name FROM smartpool_periodic WHERE next_run_at <= now()
    FOR UPDATE SKIP LOCKED),
fired AS (
    UPDATE smartpool_periodic p SET next_run_at = CASE
        WHEN p.next_run_at + p.every > now() THEN p.next_run_at + p.every
        ELSE now() + p.every END
    FROM due WHERE p.name = due.name
    RETURNING p.name, p.kind, p.payload, p.level, p.max_attempts)
INSERT INTO smartpool_jobs (kind, payload, level, max_attempts, unique_key)
SELECT kind, payload, level, max_attempts, 'periodic:' || name FROM fired
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('queued', 'running')
DO NOTHING";

/// Of jobs `$1`, those this worker (`$2`) no longer holds: another's, or
/// not running. (A row a renewal skipped, locked for a moment by another
/// statement, is still ours.)
const LOST: &str = "\
SELECT id FROM smartpool_jobs
WHERE id = ANY($1) AND (locked_by IS DISTINCT FROM $2 OR state <> 'running')";

/// Every job of `$1` done, in one statement; returns those written.
const DONE_DELETE: &str = "\
DELETE FROM smartpool_jobs WHERE id = ANY($1) AND locked_by = $2 AND state = 'running'
RETURNING id";

/// As [`DONE_DELETE`], keeping the rows as `done`.
const DONE_KEEP: &str = "\
UPDATE smartpool_jobs SET state = 'done', locked_until = NULL, finished_at = now()
WHERE id = ANY($1) AND locked_by = $2 AND state = 'running'
RETURNING id";

/// The backoff doubles per attempt from `$4` seconds, at most `$5` (the
/// exponent capped so that the power cannot overflow).
const FAILED: &str = "\
UPDATE smartpool_jobs SET
    state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
    run_at = CASE WHEN attempts >= max_attempts THEN run_at
             ELSE now() + make_interval(secs =>
                 least($4 * power(2, least(greatest(attempts - 1, 0), 40)), $5)) END,
    finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
    locked_until = NULL, last_error = $3
WHERE id = $1 AND locked_by = $2 AND state = 'running'";

const DEAD: &str = "\
UPDATE smartpool_jobs SET state = 'dead', finished_at = now(), locked_until = NULL, last_error = $3
WHERE id = $1 AND locked_by = $2 AND state = 'running'";

const RELEASED: &str = "\
UPDATE smartpool_jobs SET state = 'queued', attempts = attempts - 1, locked_until = NULL
WHERE id = $1 AND locked_by = $2 AND state = 'running'";

/// The connection is gone (or must be dropped): keep what was to be
/// written, reconnect after a pause.
struct Disconnected;

impl Fetcher {
    async fn run(
        mut self,
        ready: oneshot::Sender<Result<(), Error>>,
        mut outcomes: mpsc::UnboundedReceiver<(i64, Outcome)>,
        mut close: mpsc::UnboundedReceiver<CloseRequest>,
    ) {
        let mut connection = match self.connect_bounded().await {
            Ok(c) => Some(c),
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let mut closing: Option<Vec<oneshot::Sender<()>>> = None;
        let mut close_open = true;
        // When to abort the tasks still held (a close with a deadline).
        let mut abort_at: Option<Instant> = None;
        // Whether a claim may find jobs: after a notice, a poll, a full
        // claim, or a (re)connection.
        let mut backlog = true;
        // Renew before anything else after a reconnection: leases may be
        // near their end.
        // (And at the start: the heartbeat says the worker is alive.)
        let mut renew_now = true;
        let mut retry = Duration::from_millis(50);
        let mut reconnect_at = Instant::now();
        let mut outcomes_at = Instant::now();
        let renew_every = self.options.lease / 3;
        let mut next_renew = Instant::now() + renew_every;
        let mut next_poll = Instant::now() + self.options.poll;
        loop {
            let now = Instant::now();
            if connection.as_ref().is_none_or(|c| c.client.is_closed()) && now >= reconnect_at {
                match self.connect_bounded().await {
                    Ok(c) => {
                        log::info!("smartpool-postgres: worker {} connected", self.me);
                        connection = Some(c);
                        retry = Duration::from_millis(50);
                        backlog = true;
                        renew_now = true;
                        // A schedule's notification may have been missed.
                        self.fire_at = Some(Instant::now());
                    }
                    Err(e) => {
                        log::warn!(
                            "smartpool-postgres: worker {}: no connection ({e}); again in {retry:?}",
                            self.me
                        );
                        connection = None;
                        reconnect_at = now + retry;
                        retry = (retry * 2).min(Duration::from_secs(2));
                    }
                }
            }
            if let Some(c) = connection.as_ref().filter(|c| !c.client.is_closed()) {
                let claim = closing.is_none() && !self.pool_closed && backlog;
                let step = async {
                    if renew_now {
                        self.renew(c).await?;
                    }
                    let write = !self.pending.is_empty() && Instant::now() >= outcomes_at;
                    let only_done = self.pending.iter().all(|(_, outcome, refusals)| {
                        matches!(outcome, Outcome::Done) && *refusals == 0
                    });
                    let fire = self.fire_at.is_some_and(|at| Instant::now() >= at);
                    if write && claim && only_done && !fire {
                        // The common case of a busy worker: one round trip.
                        let (more, retry_at) = self.write_done_and_claim(c).await?;
                        backlog = more;
                        if let Some(at) = retry_at {
                            outcomes_at = at;
                        }
                    } else {
                        if write {
                            outcomes_at = self.write_outcomes(c).await?;
                        }
                        if claim {
                            backlog = self.claim(c).await?;
                        }
                    }
                    Ok::<(), Disconnected>(())
                };
                // Not cancelled on this side (what it holds would be lost):
                // a server that stopped answering is noticed by the
                // connection's TCP timeout (see `connect`).
                if step.await.is_err() {
                    connection = None;
                    reconnect_at = Instant::now() + retry;
                    retry = (retry * 2).min(Duration::from_secs(2));
                    continue;
                }
                renew_now = false;
            }
            if abort_at.is_some_and(|at| Instant::now() >= at) {
                abort_at = None;
                self.aborting.store(true, Ordering::SeqCst);
                let mut aborted = 0;
                for handle in self.held.values().flatten() {
                    handle.abort();
                    aborted += 1;
                }
                log::info!(
                    "smartpool-postgres: worker {}: close's deadline passed; {aborted} jobs aborted \
                     (released as their tasks drop)",
                    self.me
                );
            }
            if let Some(waiters) = &mut closing {
                if self.held.is_empty() && self.pending.is_empty() {
                    // Best effort: a row left behind expires with its lease.
                    if let Some(c) = connection.as_ref().filter(|c| !c.client.is_closed()) {
                        let _ = c.execute(GONE, &[&self.me]).await;
                    }
                    for waiter in waiters.drain(..) {
                        let _ = waiter.send(());
                    }
                    log::debug!("smartpool-postgres: worker {} closed", self.me);
                    return;
                }
            }
            let connected = connection.as_ref().is_some_and(|c| !c.client.is_closed());
            let mut wake_at = next_renew.min(next_poll);
            if let Some(due) = self.next_due {
                wake_at = wake_at.min(due);
            }
            // A periodic run fires in a claim: only while one can run.
            if connected && closing.is_none() && !self.pool_closed {
                if let Some(at) = self.fire_at {
                    wake_at = wake_at.min(at);
                }
            }
            if !connected {
                wake_at = wake_at.min(reconnect_at);
            }
            // Outcomes wait for a connection: without one, only the
            // reconnection's time wakes the loop.
            if connected && !self.pending.is_empty() {
                wake_at = wake_at.min(outcomes_at);
            }
            if let Some(at) = abort_at {
                wake_at = wake_at.min(at);
            }
            tokio::select! {
                Some(report) = outcomes.recv() => {
                    self.pending.push_back((report.0, report.1, 0));
                    while let Ok(report) = outcomes.try_recv() {
                        self.pending.push_back((report.0, report.1, 0));
                    }
                }
                Some(note) = async {
                    match connection.as_mut() {
                        Some(c) => c.notes.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    backlog = true;
                    let mut periodic = note == crate::schema::PERIODIC_NOTE;
                    if let Some(c) = connection.as_mut() {
                        while let Ok(note) = c.notes.try_recv() {
                            periodic |= note == crate::schema::PERIODIC_NOTE;
                        }
                    }
                    if periodic {
                        self.fire_at = Some(Instant::now());
                    }
                }
                request = close.recv(), if close_open => {
                    match request {
                        Some((waiter, timeout)) => {
                            closing.get_or_insert_with(Vec::new).push(waiter);
                            // A deadline past the clock's range is none.
                            if let Some(at) = timeout.and_then(|t| Instant::now().checked_add(t)) {
                                abort_at = Some(abort_at.map_or(at, |a| a.min(at)));
                            }
                        }
                        None => {
                            close_open = false;
                            closing.get_or_insert_with(Vec::new);
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake_at) => {
                    let now = Instant::now();
                    if now >= next_poll {
                        backlog = true;
                        next_poll = now + self.options.poll;
                    }
                    if self.fire_at.is_some_and(|at| now >= at) {
                        backlog = true;
                    }
                    if self.next_due.is_some_and(|due| now >= due) {
                        backlog = true;
                        self.next_due = None;
                    }
                    if now >= next_renew {
                        next_renew = now + renew_every;
                        renew_now = true;
                    }
                }
            }
        }
    }

    /// [`Fetcher::connect`], given up (as a failure to connect) after a
    /// third of the lease.
    async fn connect_bounded(&self) -> Result<Connection, Error> {
        let bound = self.options.lease / 3;
        match tokio::time::timeout(bound, self.connect()).await {
            Ok(connected) => connected,
            Err(_) => Err(Error::ConnectTimeout(bound)),
        }
    }

    /// Connects, listens, and bounds every statement of the session by a
    /// third of the lease, so that nothing waits long enough on a lock to
    /// let the leases of the jobs held expire. The session plans without
    /// sorts, bitmap or sequential scans ([`PLANNING`]), so that a claim
    /// walks the claim index whatever the table's statistics say. Over TCP, unacknowledged
    /// data also ends the connection after a third of the lease (a server
    /// that stopped answering sends nothing that would end a statement).
    async fn connect(&self) -> Result<Connection, Error> {
        let connection = db::connect_with(&self.url, Some(self.options.lease / 3)).await?;
        let bound = (self.options.lease / 3).as_millis().max(1);
        connection
            .client
            .batch_execute(&format!(
                "LISTEN {}; SET statement_timeout = {bound}; SET lock_timeout = {bound}; {PLANNING}",
                crate::schema::CHANNEL
            ))
            .await?;
        Ok(connection)
    }

    /// Whether a failed statement lost the connection (or the server is
    /// shutting down, or the error is of the connection's class: what
    /// reconnecting may mend); otherwise the server refused it (logged),
    /// as a statement or lock timeout does (57014, 55P03).
    fn lost(&self, c: &Connection, what: &str, e: &tokio_postgres::Error) -> bool {
        let code = e.code().map(|code| code.code());
        let lost = c.client.is_closed()
            || match code {
                None => true,
                Some(code) => code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03"),
            };
        if lost {
            log::warn!(
                "smartpool-postgres: worker {}: {what}: {e}; reconnecting",
                self.me
            );
        } else {
            log::error!("smartpool-postgres: worker {}: {what}: {e}", self.me);
        }
        lost
    }

    /// Writes the outcomes reported so far: those of finished jobs in one
    /// statement, the others one by one. A refused write is retried later
    /// (up to [`MAX_REFUSALS`] times): returns when to write again.
    async fn write_outcomes(&mut self, c: &Connection) -> Result<Instant, Disconnected> {
        let backoff_secs = self.options.backoff.as_secs_f64();
        let max_secs = self.options.max_backoff.as_secs_f64();
        let done = if self.options.keep_done {
            DONE_KEEP
        } else {
            DONE_DELETE
        };
        let mut retry_at = Instant::now();
        // Finished jobs first, together.
        let (finished, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(_, outcome, _)| matches!(outcome, Outcome::Done));
        self.pending = rest;
        if !finished.is_empty() {
            let ids: Vec<i64> = finished.iter().map(|(id, _, _)| *id).collect();
            match c.query(done, &[&ids, &self.me]).await {
                Ok(rows) => self.written_done(ids, &rows),
                Err(e) => {
                    if self.lost(c, "writing outcomes", &e) {
                        for item in finished.into_iter().rev() {
                            self.pending.push_front(item);
                        }
                        return Err(Disconnected);
                    }
                    // One row refused the whole statement: write them one
                    // by one, so that only that row's outcome waits.
                    let mut items: Vec<_> = finished.into_iter().collect();
                    for i in 0..items.len() {
                        let (id, refusals) = (items[i].0, items[i].2);
                        match c.query(done, &[&vec![id], &self.me]).await {
                            Ok(rows) => {
                                if rows.is_empty() {
                                    self.passed_on(id, &Outcome::Done);
                                }
                                self.let_go(id);
                            }
                            Err(e) if self.lost(c, "writing an outcome", &e) => {
                                for item in items.split_off(i).into_iter().rev() {
                                    self.pending.push_front(item);
                                }
                                return Err(Disconnected);
                            }
                            Err(_) => {
                                if let Some((item, at)) = self.refused(id, Outcome::Done, refusals)
                                {
                                    self.pending.push_back(item);
                                    retry_at = at;
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut later = VecDeque::new();
        while let Some((id, outcome, refusals)) = self.pending.pop_front() {
            let me = &self.me;
            let written = match &outcome {
                // Refused in the batch above, once more on its own.
                Outcome::Done => c.execute(done, &[&vec![id], me]).await,
                Outcome::Failed(error) => {
                    c.execute(FAILED, &[&id, me, error, &backoff_secs, &max_secs])
                        .await
                }
                Outcome::Dead(error) => c.execute(DEAD, &[&id, me, error]).await,
                Outcome::Released => c.execute(RELEASED, &[&id, me]).await,
            };
            match written {
                Ok(1) => {}
                Ok(_) => self.passed_on(id, &outcome),
                Err(e) => {
                    if self.lost(c, "writing an outcome", &e) {
                        self.pending.push_front((id, outcome, refusals));
                        self.pending.extend(later);
                        return Err(Disconnected);
                    }
                    if let Some((item, at)) = self.refused(id, outcome, refusals) {
                        later.push_back(item);
                        retry_at = at;
                    }
                    continue;
                }
            }
            self.let_go(id);
        }
        self.pending.extend(later);
        Ok(retry_at)
    }

    /// The finished jobs `ids` are written: the returned `rows` name those
    /// still this worker's; another's lease took the others.
    fn written_done(&mut self, ids: Vec<i64>, rows: &[tokio_postgres::Row]) {
        let written: HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
        for id in ids {
            if !written.contains(&id) {
                self.passed_on(id, &Outcome::Done);
            }
            self.let_go(id);
        }
    }

    /// An outcome whose lease another worker has taken since: dropped.
    fn passed_on(&self, id: i64, outcome: &Outcome) {
        log::warn!(
            "smartpool-postgres: worker {}: job {id}'s lease had passed to another \
             worker; this attempt's outcome ({outcome:?}) is dropped",
            self.me
        );
    }

    /// A write the server refused: the outcome with one refusal more, to
    /// queue again, and when to try it; or, past [`MAX_REFUSALS`], `None`:
    /// given up (logged), the job no longer held.
    fn refused(
        &mut self,
        id: i64,
        outcome: Outcome,
        refusals: u32,
    ) -> Option<((i64, Outcome, u32), Instant)> {
        if refusals + 1 < MAX_REFUSALS {
            let at = Instant::now() + Duration::from_millis(200) * (refusals + 1);
            return Some(((id, outcome, refusals + 1), at));
        }
        log::error!(
            "smartpool-postgres: worker {}: job {id}'s outcome ({outcome:?}) was refused \
             {MAX_REFUSALS} times and is given up: the job runs again once its lease expires",
            self.me
        );
        self.let_go(id);
        None
    }

    /// Claims what the pool can start now and submits it; returns whether
    /// more may be claimable (the claim was full).
    async fn claim(&mut self, c: &Connection) -> Result<bool, Disconnected> {
        if self.fire_at.is_some_and(|at| Instant::now() >= at) {
            self.fire(c).await?;
        }
        let room = self.capacity.saturating_sub(self.held.len());
        if room == 0 {
            return Ok(true);
        }
        let claimed = self.claim_query(c, room).await;
        self.take_claimed(c, room, claimed).await
    }

    /// Writes the finished jobs' outcomes and claims in one round trip:
    /// both statements are sent before either answer is read (the
    /// protocol's pipelining), the write first, so the claim has the room
    /// the finished jobs leave. What the write's answer says is taken as
    /// [`Fetcher::write_outcomes`] takes it; a refused write is handed to
    /// it, which writes the outcomes one by one. Returns whether more may
    /// be claimable, and when to write again if a write was refused.
    async fn write_done_and_claim(
        &mut self,
        c: &Connection,
    ) -> Result<(bool, Option<Instant>), Disconnected> {
        let finished: VecDeque<_> = std::mem::take(&mut self.pending);
        let ids: Vec<i64> = finished.iter().map(|(id, _, _)| *id).collect();
        let room = self
            .capacity
            .saturating_sub(self.held.len().saturating_sub(ids.len()));
        let done = if self.options.keep_done {
            DONE_KEEP
        } else {
            DONE_DELETE
        };
        let (written, claimed) =
            futures::future::join(c.query(done, &[&ids, &self.me]), self.claim_query(c, room))
                .await;
        match written {
            Ok(rows) => self.written_done(ids, &rows),
            Err(e) => {
                self.pending = finished;
                if self.lost(c, "writing outcomes", &e) {
                    return Err(Disconnected);
                }
                let retry_at = self.write_outcomes(c).await?;
                let backlog = self.take_claimed(c, room, claimed).await?;
                return Ok((backlog, Some(retry_at)));
            }
        }
        Ok((self.take_claimed(c, room, claimed).await?, None))
    }

    /// The claim statement for `room` jobs.
    async fn claim_query(
        &self,
        c: &Connection,
        room: usize,
    ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        let lease = self.options.lease.as_secs_f64();
        let held: Vec<i64> = self.held.keys().copied().collect();
        let kinds = self.options.only_known_kinds.then(|| self.registry.kinds());
        c.query(
            CLAIM,
            &[
                &self.options.levels,
                &(room as i64),
                &self.me,
                &lease,
                &held,
                &kinds,
            ],
        )
        .await
    }

    /// Submits the jobs a claim for `room` took; returns whether more may
    /// be claimable (the claim was full).
    async fn take_claimed(
        &mut self,
        c: &Connection,
        room: usize,
        claimed: Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>,
    ) -> Result<bool, Disconnected> {
        let rows = match claimed {
            Ok(rows) => rows,
            Err(e) => {
                return if self.lost(c, "claiming", &e) {
                    Err(Disconnected)
                } else {
                    Ok(false) // until the next poll or notice
                };
            }
        };
        let full = rows.len() == room;
        let mut jobs: Vec<(Job, String)> = rows
            .iter()
            .map(|row| {
                let job = Job {
                    id: row.get(0),
                    kind: row.get(1),
                    payload: row.get(2),
                    level: row.get(3),
                    deadline: row.get(4),
                    attempt: row.get(5),
                    max_attempts: row.get(6),
                    lease: LeaseSignal::default(),
                };
                (job, row.get::<_, String>(7))
            })
            .collect();
        // In claim order: by level, then deadline (none last), then id.
        jobs.sort_by_key(|(j, _)| (j.level, j.deadline.is_none(), j.deadline, j.id));
        for (job, was) in jobs {
            let id = job.id;
            self.held.insert(id, None);
            let report = Report {
                id,
                outcomes: self.outcomes.clone(),
                sent: false,
                released: self.released.clone(),
            };
            if job.attempt > job.max_attempts {
                report.send(Outcome::Dead(if was == "running" {
                    format!(
                        "its last attempt ({} of {}) ended without an outcome: the lease \
                         expired (the worker running it stopped)",
                        job.attempt - 1,
                        job.max_attempts
                    )
                } else {
                    format!(
                        "no attempt left: {} made, at most {}",
                        job.attempt - 1,
                        job.max_attempts
                    )
                }));
                continue;
            }
            if !self.registry.knows(&job.kind) {
                report.send(Outcome::Dead(format!(
                    "no handler for kind {:?} on worker {}",
                    job.kind, self.me
                )));
                continue;
            }
            if self.pool_closed {
                report.send(Outcome::Released);
                continue;
            }
            let level = job.level;
            self.leases.insert(id, job.lease.clone());
            match (self.submit)(
                level,
                job_task(self.registry.clone(), job, report, self.options.timeout),
            ) {
                Ok(handle) => {
                    self.held.insert(id, Some(handle));
                }
                Err(task) => {
                    // The pool is closing: the dropped task releases the job;
                    // claim no more.
                    drop(task);
                    self.pool_closed = true;
                    log::debug!(
                        "smartpool-postgres: worker {}: the pool is closing; its jobs are released",
                        self.me
                    );
                }
            }
        }
        if !full {
            // Room left: when does the next job become due? (A job
            // delayed, or a failure's backoff: the trigger said so when it
            // was queued, but it was not due then.) After the claimed jobs
            // are submitted, so that they do not wait for this look.
            self.next_due = match c.query(NEXT_DUE, &[&self.options.levels]).await {
                Ok(rows) => rows
                    .first()
                    .and_then(|row| row.get::<_, Option<f64>>(0))
                    .map(|secs| {
                        Instant::now() + Duration::from_secs_f64(secs.clamp(0.0, 86_400.0))
                    }),
                Err(e) if self.lost(c, "looking for due jobs", &e) => return Err(Disconnected),
                Err(_) => None,
            };
        }
        Ok(full && !self.pool_closed)
    }

    /// Enqueues the periodic runs that are due (see [`FIRE`]), first in a
    /// claim, so that one may be what the claim takes (the insert also
    /// notifies every worker of its level); then learns when the next is
    /// due. A schedule made or changed meanwhile notifies every worker
    /// (see `schema::PERIODIC_NOTE`), which then fires at once.
    async fn fire(&mut self, c: &Connection) -> Result<(), Disconnected> {
        self.fire_at = None;
        let next = match c.execute(FIRE, &[]).await {
            Ok(_) => c.query(NEXT_FIRE, &[]).await,
            Err(e) => Err(e),
        };
        match next {
            Ok(rows) => {
                // Due already: another worker is firing it (`SKIP LOCKED`);
                // look again shortly, not at once. Far off: look again
                // within a minute all the same (a change by hand that did
                // not notify).
                let secs = rows.first().and_then(|row| row.get::<_, Option<f64>>(0));
                self.fire_at = secs
                    .map(|secs| Instant::now() + Duration::from_secs_f64(secs.clamp(0.01, 60.0)));
                Ok(())
            }
            Err(e) if self.lost(c, "firing periodic schedules", &e) => {
                // Looked at again once connected.
                self.fire_at = Some(Instant::now());
                Err(Disconnected)
            }
            Err(_) => {
                self.fire_at = Some(Instant::now() + self.options.poll.max(Duration::from_secs(1)));
                Ok(())
            }
        }
    }

    /// Says this worker is alive for a lease more (see [`HEARTBEAT`]),
    /// and warns in the log when queued jobs wait at levels that no live
    /// worker serves (once per change of those levels).
    async fn heartbeat(&mut self, c: &Connection) -> Result<(), Disconnected> {
        let lease = self.options.lease.as_secs_f64();
        let unserved = match c
            .execute(HEARTBEAT, &[&self.me, &self.options.levels, &lease])
            .await
        {
            Ok(_) => c.query(UNSERVED, &[]).await,
            Err(e) => Err(e),
        };
        let rows = match unserved {
            Ok(rows) => rows,
            Err(e) if self.lost(c, "saying it is alive", &e) => return Err(Disconnected),
            Err(_) => return Ok(()),
        };
        let levels: Vec<(i32, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let which: Vec<i32> = levels.iter().map(|&(level, _)| level).collect();
        if which != self.unserved {
            if !levels.is_empty() {
                log::warn!(
                    "smartpool-postgres: jobs wait at levels no live worker serves \
                     (level, jobs): {levels:?}"
                );
            }
            self.unserved = which;
        }
        Ok(())
    }

    /// Job `id` is no longer held: its outcome is written, passed on or
    /// given up.
    fn let_go(&mut self, id: i64) {
        self.held.remove(&id);
        self.leases.remove(&id);
    }

    /// Renews the leases of the jobs held.
    async fn renew(&mut self, c: &Connection) -> Result<(), Disconnected> {
        self.heartbeat(c).await?;
        if self.held.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = self.held.keys().copied().collect();
        let lease = self.options.lease.as_secs_f64();
        let renewed = match c.query(RENEW, &[&ids, &self.me, &lease]).await {
            Ok(rows) => rows,
            Err(e) if self.lost(c, "renewing leases", &e) => return Err(Disconnected),
            Err(_) => return Ok(()),
        };
        if renewed.len() == ids.len() {
            return Ok(());
        }
        let renewed: HashSet<i64> = renewed.iter().map(|row| row.get(0)).collect();
        let missing: Vec<i64> = ids.into_iter().filter(|id| !renewed.contains(id)).collect();
        let lost = match c.query(LOST, &[&missing, &self.me]).await {
            Ok(rows) => rows,
            Err(e) if self.lost(c, "checking leases", &e) => return Err(Disconnected),
            Err(_) => return Ok(()),
        };
        for row in lost {
            let id: i64 = row.get(0);
            if let Some(signal) = self.leases.get(&id) {
                log::warn!(
                    "smartpool-postgres: worker {}: the lease of job {id} is lost (another \
                     worker holds it, or it is no longer running); its handler is told",
                    self.me
                );
                signal.lose();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::{CLAIM, PLANNING};

    /// The claim's plan under stale statistics (the table analyzed empty,
    /// then 20,000 jobs) and under fresh ones (analyzed full): the claim
    /// index in order, no sort, and the claimed rows joined by a nested
    /// loop, for the generic plan that `PLANNING` asks for. Without it the
    /// claim sorts the whole backlog under stale statistics (the
    /// production issue's F1), and merges the whole primary key under
    /// fresh ones (a generic plan's limit is a tenth of the table).
    #[test]
    fn the_claim_walks_its_index_under_any_statistics() {
        let cluster = crate::TempCluster::start().expect("a temporary server");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let plans = runtime.block_on(async {
            let connection = crate::db::connect(&cluster.url()).await.expect("connected");
            let client = &connection.client;
            client
                .batch_execute(
                    "ANALYZE smartpool_jobs;
                     INSERT INTO smartpool_jobs (kind, level)
                         SELECT 'k', g % 3 FROM generate_series(1, 20000) g;",
                )
                .await
                .unwrap();
            client.batch_execute(PLANNING).await.unwrap();
            let mut plans = Vec::new();
            for (name, analyze) in [("stale", ""), ("fresh", "ANALYZE smartpool_jobs;")] {
                client
                    .batch_execute(&format!(
                        "{analyze} PREPARE {name}(int[], bigint, text, float8, bigint[], text[]) \
                         AS {CLAIM}"
                    ))
                    .await
                    .unwrap();
                let explain = format!(
                    "EXPLAIN (COSTS OFF) EXECUTE {name}('{{0,1,2}}', 2, 'me', 30, '{{}}', NULL)"
                );
                let rows = client.query(&explain, &[]).await.unwrap();
                let plan: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
                plans.push(plan.join("\n"));
            }
            plans
        });
        for plan in plans {
            assert!(!plan.contains("Sort"), "{plan}");
            assert!(!plan.contains("Merge Join"), "{plan}");
            assert!(!plan.contains("Hash Join"), "{plan}");
            assert!(plan.contains("Nested Loop"), "{plan}");
            assert!(
                plan.contains("Index Scan using smartpool_jobs_claim"),
                "{plan}"
            );
        }
    }
}
