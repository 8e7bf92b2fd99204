//! Connecting: a server that accepts and never answers is an error within
//! the bound, not a hang (the production issue's F4); an error shows the
//! server's own message, not tokio-postgres's bare "db error" (F5).

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use smartpool_postgres::{Error, Queue, Registry, ServeOptions, Worker};

/// A TCP port that accepts connections and never says a word; the
/// accepted sockets stay open for the test's length.
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

#[test]
fn a_queue_connecting_to_a_silent_server_fails_within_connect_timeout() {
    let port = silent_server();
    let url = format!("host=127.0.0.1 port={port} user=postgres dbname=x connect_timeout=1");
    let start = Instant::now();
    let error = Queue::connect(&url).expect_err("no server answered");
    assert!(
        matches!(error, Error::ConnectTimeout(bound) if bound == Duration::from_secs(1)),
        "{error}"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(error.to_string().contains("connect_timeout"), "{error}");
}

#[test]
fn a_worker_connecting_to_a_silent_server_fails_within_a_third_of_its_lease() {
    let port = silent_server();
    let url = format!("host=127.0.0.1 port={port} user=postgres dbname=x");
    let owned = smartpool::Builder::new()
        .levels(1)
        .threads(1)
        .build()
        .unwrap();
    let options = ServeOptions::new([0]).lease(Duration::from_secs(3));
    let served = Worker::serve(&url, &owned.pool, |_| 0, Registry::new(), options);
    let error = served.expect_err("no server answered");
    assert!(
        matches!(error, Error::ConnectTimeout(bound) if bound == Duration::from_secs(1)),
        "{error}"
    );
    owned.close().wait();
}

#[test]
fn a_missing_database_is_named_in_the_error() {
    let url = common::url_of("smartpool_no_such_database");
    let error = Queue::connect(&url).expect_err("the database does not exist");
    let text = error.to_string();
    assert!(
        text.contains("does not exist") && text.contains("smartpool_no_such_database"),
        "{text}"
    );
}

/// The schema check looks for the notify trigger on the jobs table, not
/// anywhere: a trigger of that name on another schema's table does not
/// hide a dropped one, and connecting puts it back (the production
/// issue's lesser item).
#[test]
fn a_dropped_trigger_is_put_back_despite_a_namesake_elsewhere() {
    let url = common::fresh_db("trigger");
    let db = common::db_name("trigger");
    drop(Queue::connect(&url).unwrap());
    common::admin_of(
        &db,
        "DROP TRIGGER smartpool_jobs_notify ON smartpool_jobs;
         CREATE SCHEMA other;
         CREATE TABLE other.t (x int);
         CREATE TRIGGER smartpool_jobs_notify AFTER INSERT ON other.t
             FOR EACH ROW EXECUTE FUNCTION smartpool_jobs_notify();",
    );
    drop(Queue::connect(&url).unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let count = runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_trigger \
                 WHERE tgrelid = 'public.smartpool_jobs'::regclass \
                   AND tgname = 'smartpool_jobs_notify'",
                &[],
            )
            .await
            .unwrap();
        row.get::<_, i64>(0)
    });
    assert_eq!(count, 1, "the trigger is back on the jobs table");
}

/// Enqueuing inside the caller's transaction: the job exists if and only
/// if the transaction commits (item 1 of the production issue).
#[test]
fn a_job_enqueued_in_a_transaction_exists_only_if_it_commits() {
    use smartpool_postgres::{enqueue_in, JobState, NewJob};
    let url = common::fresh_db("transactional");
    let queue = Queue::connect(&url).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (rolled_back, committed) = runtime.block_on(async {
        let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let tx = client.transaction().await.unwrap();
        let rolled_back = enqueue_in(&tx, NewJob::new("k", vec![])).await.unwrap();
        tx.rollback().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let committed = enqueue_in(&tx, NewJob::new("k", vec![])).await.unwrap();
        tx.commit().await.unwrap();
        (rolled_back, committed)
    });
    assert!(
        queue.job(rolled_back).unwrap().is_none(),
        "rolled back: no job"
    );
    let row = queue.job(committed).unwrap().expect("committed: the job");
    assert_eq!(row.state, JobState::Queued);
}
