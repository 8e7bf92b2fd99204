//! Pools on many machines drain one prioritized backlog of jobs kept in a
//! PostgreSQL table, by level, then deadline.
//!
//! ```no_run
//! use smartpool_postgres::{NewJob, Queue, Registry, ServeOptions, Worker};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "host=/tmp/pg port=5432 user=postgres dbname=postgres";
//! // From any process, with or without a pool:
//! let queue = Queue::connect(url)?;
//! let id = queue.enqueue(NewJob::new("resize", b"cat.png".to_vec()).level(1))?;
//!
//! // A pool that serves levels 0 and 1 of the table, each on its own level.
//! let owned = smartpool::Builder::new().levels(2).build()?;
//! let registry = Registry::new().handle("resize", |job| async move {
//!     println!("resizing {:?}", job.payload());
//!     Ok(())
//! });
//! let worker = Worker::serve(url, &owned.pool, |level| level as usize, registry,
//!     ServeOptions::new([0, 1]))?;
//! # let _ = id;
//! // ...
//! worker.close().wait(); // stop claiming; finish or release what it holds
//! owned.close().wait();
//! # Ok(()) }
//! ```
//!
//! # The table
//!
//! `smartpool_jobs` (created by [`Queue::connect`] and [`Worker::serve`] if
//! missing): a job has an id, a kind, a payload (bytes), a level (0 the
//! highest), a time to run at, an optional deadline, an attempt count and a
//! bound on attempts, a state (`queued`, `running`, `done`, `dead`), and
//! while it runs a lease: who holds it (`locked_by`) and until when
//! (`locked_until`).
//!
//! # Protocol
//!
//! * **Claim.** A [`Worker`] claims jobs of the levels it serves with one
//!   statement: the first `n` claimable rows in the order `level,
//!   deadline, id` (no deadline sorts last), `FOR UPDATE SKIP LOCKED`, set
//!   to `running` under a lease of this worker, their attempt counted. A
//!   row is claimable if it is `queued` and due (`run_at <= now()`), or
//!   `running` under a lease that has expired. `n` is what the pool can
//!   start now: its capacity (by default twice its worker threads, so
//!   that each worker has its next job at hand while a claim is in
//!   flight) less the jobs it already holds. It never holds more, so an
//!   urgent job enqueued a moment later waits behind at most that many
//!   jobs some pool prefetched, and runs before them (its level).
//! * **Run.** Each claimed job becomes a task on the channel its level
//!   routes to, so it runs by the pool's priorities beside the pool's
//!   local work. The handler registered for its kind runs it; a kind with
//!   no handler goes to `dead` with an error saying so.
//! * **Lease.** While a worker holds a job, it renews the lease every
//!   third of its length. Its database thread does, never a pool worker:
//!   a saturated pool does not let its leases expire.
//! * **Outcome.** The job's task reports how it ended, and the database
//!   thread writes it, always under `locked_by = this worker` and `state =
//!   'running'`: done (the row deleted, or kept as `done` with
//!   [`ServeOptions::keep_done`]); failed (queued again after a backoff
//!   that doubles per attempt, or `dead` with the error after the last
//!   attempt); released (the task was dropped before it finished, as a
//!   closing pool drops a level that does not complete on close: queued
//!   again, the attempt not counted). A write the server refuses (a lock
//!   or statement timeout: every statement of a worker waits at most a
//!   third of the lease) is tried again on its own a few times over about
//!   2 s, then given up with an error in the log, and the job runs again
//!   once its lease expires.
//! * **Notice.** An insert, or an update that leaves a row queued, notifies
//!   `smartpool_jobs` (a trigger); workers `LISTEN`, and also look every
//!   [`ServeOptions::poll`] for jobs that became due or whose lease
//!   expired.
//! * **Close.** [`Worker::close`] stops claiming, waits until every job the
//!   worker holds has finished or been released, and writes their
//!   outcomes; [`Worker::close_timeout`] aborts the jobs still held at its
//!   deadline, which releases them.
//!
//! # What is guaranteed
//!
//! * **At least once.** A job runs until an attempt ends, and its outcome
//!   is written. A worker that dies (its process killed) or loses the
//!   server for longer than a lease loses its leases: another worker claims
//!   those jobs once the leases expire and runs them again. Such an
//!   attempt counts: a job whose last attempt's lease expires goes to
//!   `dead`, saying so (give jobs that must survive restarts more than one
//!   attempt). Outcomes a
//!   worker could not write while the server was away are written when it
//!   is back; an outcome for a lease another worker took over since is
//!   dropped with a warning. Make handlers idempotent.
//! * **Order.** Each claim takes the claimable jobs in the order level,
//!   deadline, id, and a pool runs them by its own priorities. Across
//!   pools there is no global order beyond that: two pools claim
//!   concurrently, and a job claimed by a busy pool may start after a
//!   later one claimed by an idle pool.
//! * **Not guaranteed:** exactly once; that a job runs before its
//!   deadline (the deadline orders, it does not expire anything); that a
//!   job with no handler anywhere waits for one (it goes to `dead`).
//!
//! PostgreSQL 14 or later. The table is created if missing, by a role
//! allowed to; once it exists, connecting creates nothing.
//!
//! # Why a thread of the crate's own
//!
//! The client is tokio-postgres on a current-thread tokio runtime in one
//! thread per [`Queue`] and per [`Worker`]. The pool's workers run the
//! handlers only. On the pool's workers, the lease renewals and outcome
//! writes would queue behind the very CPU work the pool is saturated with
//! (and expire leases under load), and close would have to keep the
//! connection's task alive while it drops the rest.

mod cluster;
mod db;
#[cfg(feature = "metrics-export")]
mod export;
mod job;
mod queue;
mod registry;
mod schema;
mod worker;

pub use cluster::TempCluster;
pub use job::{Job, JobError, JobRow, JobState, LeaseLost, NewJob};
pub use queue::{Cancelled, Queue};
pub use registry::Registry;
/// The client [`enqueue_in`] takes, at the version this crate uses.
pub use tokio_postgres;
pub use worker::{ServeOptions, Worker, WorkerClose, DEFAULT_JOB_TIMEOUT};

/// Enqueues `job` with the caller's own client or transaction: inside a
/// transaction, the job exists if and only if the transaction commits.
/// Returns its id (for a unique job whose key is held, the holder's: see
/// [`NewJob::unique`]). The table must exist: a [`Queue`] or [`Worker`]
/// connected to the database once creates it.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use smartpool_postgres::{enqueue_in, NewJob};
///
/// let tx = client.transaction().await?;
/// tx.execute("UPDATE orders SET state = 'paid' WHERE id = 7", &[]).await?;
/// enqueue_in(&tx, NewJob::new("send_receipt", b"7".to_vec())).await?;
/// tx.commit().await?; // the job is queued only now, with the payment
/// # Ok(())
/// # }
/// ```
pub async fn enqueue_in<C: tokio_postgres::GenericClient>(
    client: &C,
    job: NewJob,
) -> Result<i64, Error> {
    queue::enqueue(client, &job).await
}

/// An error of this crate: the server could not be reached, refused a
/// statement, or the queue's thread is gone.
#[derive(Debug)]
pub enum Error {
    /// A statement or the connection failed.
    Db(tokio_postgres::Error),
    /// The queue's or worker's database thread has stopped.
    Stopped,
    /// A setting that cannot work (the text says which).
    Config(String),
    /// The database thread could not be started.
    Thread(std::io::Error),
    /// The server did not finish answering a connection within this
    /// bound: `connect_timeout` in the connection string, else
    /// [`CONNECT_TIMEOUT`] (a worker's: a third of its lease).
    ConnectTimeout(std::time::Duration),
}

/// How long connecting may take (the socket, the server's start-up
/// answer, the schema check) when the connection string sets no
/// `connect_timeout`.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // tokio-postgres says "db error"; the server's message is in
            // the source: the whole chain, so that the cause shows.
            Error::Db(e) => {
                write!(f, "smartpool-postgres: {e}")?;
                let mut source = std::error::Error::source(e);
                while let Some(cause) = source {
                    write!(f, ": {cause}")?;
                    source = cause.source();
                }
                Ok(())
            }
            Error::Stopped => f.write_str("smartpool-postgres: the database thread has stopped"),
            Error::Config(why) => write!(f, "smartpool-postgres: {why}"),
            Error::Thread(e) => write!(f, "smartpool-postgres: cannot start its thread: {e}"),
            Error::ConnectTimeout(bound) => write!(
                f,
                "smartpool-postgres: the server did not answer a connection within {bound:?} \
                 (`connect_timeout` in the connection string sets the bound)"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Db(e) => Some(e),
            Error::Thread(e) => Some(e),
            _ => None,
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        Error::Db(e)
    }
}
