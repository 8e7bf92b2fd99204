//! The jobs table, its claim index and its notify trigger, and the table
//! of periodic schedules and of live workers, created once per
//! database by whoever connects first (under an advisory lock, so that
//! processes starting together do not race on `CREATE`).

use tokio_postgres::Client;

/// The channel `LISTEN`ed to for new and re-queued jobs.
pub(crate) const CHANNEL: &str = "smartpool_jobs";

/// The notification's payload when a periodic schedule is made or changed
/// (a job's is its level): workers fire at once, not at the next due time
/// they knew of.
pub(crate) const PERIODIC_NOTE: &str = "periodic";

/// Every statement that makes the schema; each is idempotent.
const SCHEMA: &str = r#"
SELECT pg_advisory_xact_lock(7311931);
CREATE TABLE IF NOT EXISTS smartpool_jobs (
    id            BIGSERIAL PRIMARY KEY,
    kind          TEXT NOT NULL,
    payload       BYTEA NOT NULL DEFAULT '',
    level         INT NOT NULL DEFAULT 0,
    run_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    deadline      TIMESTAMPTZ,
    attempts      INT NOT NULL DEFAULT 0,
    max_attempts  INT NOT NULL DEFAULT 5,
    state         TEXT NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued', 'running', 'done', 'dead')),
    locked_by     TEXT,
    locked_until  TIMESTAMPTZ,
    last_error    TEXT,
    enqueued_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at   TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS smartpool_jobs_claim
    ON smartpool_jobs (level, deadline, id) WHERE state IN ('queued', 'running');
ALTER TABLE smartpool_jobs ADD COLUMN IF NOT EXISTS unique_key TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS smartpool_jobs_unique ON smartpool_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS smartpool_jobs_due ON smartpool_jobs (run_at)
    WHERE state = 'queued';
CREATE TABLE IF NOT EXISTS smartpool_periodic (
    name          TEXT PRIMARY KEY,
    kind          TEXT NOT NULL,
    payload       BYTEA NOT NULL DEFAULT '',
    level         INT NOT NULL DEFAULT 0,
    max_attempts  INT NOT NULL DEFAULT 5,
    every         INTERVAL NOT NULL CHECK (every > INTERVAL '0'),
    next_run_at   TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS smartpool_workers (
    id           TEXT PRIMARY KEY,
    levels       INT[] NOT NULL,
    alive_until  TIMESTAMPTZ NOT NULL
);
CREATE OR REPLACE FUNCTION smartpool_jobs_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('smartpool_jobs', NEW.level::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER smartpool_jobs_notify
    AFTER INSERT OR UPDATE OF level, state, run_at ON smartpool_jobs
    FOR EACH ROW WHEN (NEW.state = 'queued')
    EXECUTE FUNCTION smartpool_jobs_notify();
"#;

/// Whether the table and its trigger are there (then nothing is created:
/// `CREATE INDEX IF NOT EXISTS` and `CREATE OR REPLACE TRIGGER` would
/// lock the table against writes, and need its owner).
const PRESENT: &str = "\
SELECT to_regclass('smartpool_jobs') IS NOT NULL
   AND EXISTS (SELECT 1 FROM pg_trigger
               WHERE tgrelid = to_regclass('smartpool_jobs')
                 AND tgname = 'smartpool_jobs_notify')
   AND to_regclass('smartpool_jobs_unique') IS NOT NULL
   AND to_regclass('smartpool_jobs_due') IS NOT NULL
   AND to_regclass('smartpool_periodic') IS NOT NULL
   AND to_regclass('smartpool_workers') IS NOT NULL";

/// Creates what is missing of the schema (PostgreSQL 14 or later, for
/// `CREATE OR REPLACE TRIGGER`).
pub(crate) async fn install(client: &Client) -> Result<(), tokio_postgres::Error> {
    if client.query_one(PRESENT, &[]).await?.get::<_, bool>(0) {
        return Ok(());
    }
    client
        .batch_execute(&format!("BEGIN; {SCHEMA} COMMIT;"))
        .await
}
