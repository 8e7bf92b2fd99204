//! A pool serving the jobs table of a real server: each job runs once and
//! is deleted; claims go by level, then deadline, then id; failures retry
//! then go dead; an unknown kind goes dead; a moved job runs at its new
//! level; closing finishes or releases what a worker holds.

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::{close, fresh_db, serve, until, Gate};
use smartpool::Exec;
use smartpool_postgres::{
    Cancelled, JobError, JobState, NewJob, Queue, Registry, ServeOptions, Worker,
};

/// A registry whose "record" handler sends each job's id down `tx`.
fn recording(tx: mpsc::Sender<i64>) -> Registry {
    let tx = Mutex::new(tx);
    Registry::new().handle("record", move |job| {
        let _ = tx.lock().unwrap().send(job.id());
        async { Ok(()) }
    })
}

#[test]
fn every_job_runs_once_and_is_deleted() {
    let url = fresh_db("once");
    let queue = Queue::connect(&url).unwrap();
    let mut ids: Vec<i64> = (0..60)
        .map(|i| {
            queue
                .enqueue(NewJob::new("record", vec![i as u8]).level(i % 3))
                .unwrap()
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    let served = serve(&url, 3, 2, recording(tx), ServeOptions::new([0, 1, 2]));
    let mut ran: Vec<i64> = (0..60).map(|_| rx.recv().unwrap()).collect();
    close(served);
    ran.sort();
    ids.sort();
    assert_eq!(ran, ids, "each job once");
    assert!(rx.try_recv().is_err(), "none twice");
    assert_eq!(queue.counts().unwrap(), vec![], "finished jobs are deleted");
}

/// One thread, capacity one: the claims alone decide the order, which is
/// level, then deadline (none last), then id.
#[test]
fn claims_go_by_level_then_deadline_then_id() {
    let url = fresh_db("order");
    let queue = Queue::connect(&url).unwrap();
    let now = SystemTime::now();
    let at = |s: u64| now + Duration::from_secs(s);
    let jobs = [
        NewJob::new("record", vec![]).level(1),
        NewJob::new("record", vec![]).level(1).deadline(at(20)),
        NewJob::new("record", vec![]).level(0),
        NewJob::new("record", vec![]).level(1).deadline(at(10)),
        NewJob::new("record", vec![]).level(0).deadline(at(30)),
        NewJob::new("record", vec![]).level(1),
    ];
    let ids: Vec<i64> = jobs
        .into_iter()
        .map(|j| queue.enqueue(j).unwrap())
        .collect();
    let (tx, rx) = mpsc::channel();
    let served = serve(
        &url,
        2,
        1,
        recording(tx),
        ServeOptions::new([0, 1]).capacity(1),
    );
    let ran: Vec<i64> = (0..6).map(|_| rx.recv().unwrap()).collect();
    close(served);
    let expected = vec![ids[4], ids[2], ids[3], ids[1], ids[0], ids[5]];
    assert_eq!(ran, expected);
}

#[test]
fn a_failing_job_is_retried_then_dead_with_its_error() {
    let url = fresh_db("retry");
    let queue = Queue::connect(&url).unwrap();
    let id = queue
        .enqueue(NewJob::new("flaky", vec![]).max_attempts(3))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("flaky", move |job| {
        let _ = tx.lock().unwrap().send(job.attempt());
        async move { Err(JobError(format!("attempt {} failed", job.attempt()))) }
    });
    let served = serve(
        &url,
        1,
        1,
        registry,
        ServeOptions::new([0])
            .backoff(Duration::from_millis(10), Duration::from_millis(40))
            .poll(Duration::from_millis(20)),
    );
    let attempts: Vec<i32> = (0..3).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(attempts, [1, 2, 3]);
    close(served);
    let row = queue.job(id).unwrap().expect("dead jobs stay");
    assert_eq!(row.state, JobState::Dead);
    assert_eq!(row.attempts, 3);
    assert_eq!(row.last_error.as_deref(), Some("attempt 3 failed"));
    assert!(rx.try_recv().is_err(), "no fourth attempt");
}

/// A handler that never finishes: each attempt times out and fails, and
/// the job ends dead with the reason (the production issue's F2; before,
/// it held its slot for good).
#[test]
fn a_hanging_handler_times_out_and_its_job_ends_dead() {
    let url = fresh_db("timeout");
    let queue = Queue::connect(&url).unwrap();
    let id = queue
        .enqueue(NewJob::new("hang", vec![]).max_attempts(2))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("hang", move |job| {
        let _ = tx.lock().unwrap().send(job.attempt());
        async move {
            std::future::pending::<()>().await;
            Ok(())
        }
    });
    let served = serve(
        &url,
        1,
        1,
        registry,
        ServeOptions::new([0])
            .timeout(Some(Duration::from_millis(200)))
            .backoff(Duration::from_millis(10), Duration::from_millis(40))
            .poll(Duration::from_millis(20)),
    );
    let attempts: Vec<i32> = (0..2).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(attempts, [1, 2]);
    // The second attempt's outcome is written once it times out.
    until(|| queue.job(id).unwrap().expect("dead jobs stay").state == JobState::Dead);
    let row = queue.job(id).unwrap().expect("dead jobs stay");
    close(served);
    assert_eq!(row.state, JobState::Dead);
    assert_eq!(row.attempts, 2);
    assert_eq!(row.last_error.as_deref(), Some("timed out after 200ms"));
    assert!(rx.try_recv().is_err(), "no third attempt");
}

/// A handler that returns `Pending` and lets go of its waker: the pool
/// frees the task, which nothing could wake. The attempt fails (it was
/// released, not counted, and claimed again at once, for ever: the
/// production issue's F3), so the job is retried, then dead.
#[test]
fn a_handler_that_drops_its_waker_fails_its_attempt() {
    let url = fresh_db("lost_waker");
    let queue = Queue::connect(&url).unwrap();
    let id = queue
        .enqueue(NewJob::new("lost", vec![]).max_attempts(2))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("lost", move |job| {
        let _ = tx.lock().unwrap().send(job.attempt());
        async move {
            futures::future::poll_fn(|_| std::task::Poll::<()>::Pending).await;
            Ok(())
        }
    });
    let served = serve(
        &url,
        1,
        1,
        registry,
        // No timeout: its timer would keep the task alive (and the
        // attempt would time out instead).
        ServeOptions::new([0])
            .timeout(None)
            .backoff(Duration::from_millis(10), Duration::from_millis(40))
            .poll(Duration::from_millis(20)),
    );
    let attempts: Vec<i32> = (0..2).map(|_| rx.recv().unwrap()).collect();
    assert_eq!(attempts, [1, 2], "each start counts an attempt");
    until(|| queue.job(id).unwrap().expect("dead jobs stay").state == JobState::Dead);
    let row = queue.job(id).unwrap().expect("dead jobs stay");
    close(served);
    assert_eq!(row.state, JobState::Dead);
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or("")
            .contains("nothing kept its waker"),
        "{:?}",
        row.last_error
    );
    assert!(rx.try_recv().is_err(), "no third attempt");
}

/// A job whose row another worker took (as after a partition longer than
/// the lease): the next renewal finds it, and the handler awaiting
/// `lease_lost` is told (the production issue's lesser item: it was never
/// told).
#[test]
fn a_handler_learns_that_its_lease_is_lost() {
    let url = fresh_db("lease_lost");
    let queue = Queue::connect(&url).unwrap();
    let id = queue.enqueue(NewJob::new("long", vec![])).unwrap();
    let (started_tx, started) = mpsc::channel();
    let (lost_tx, lost) = mpsc::channel();
    let (started_tx, lost_tx) = (Mutex::new(started_tx), Mutex::new(lost_tx));
    let registry = Registry::new().handle("long", move |job| {
        let _ = started_tx.lock().unwrap().send(job.id());
        let lost_tx = lost_tx.lock().unwrap().clone();
        async move {
            job.lease_lost().await;
            let _ = lost_tx.send(job.id());
            Ok(())
        }
    });
    let served = serve(
        &url,
        1,
        1,
        registry,
        ServeOptions::new([0])
            .lease(Duration::from_millis(900))
            .poll(Duration::from_millis(20)),
    );
    assert_eq!(started.recv().unwrap(), id);
    // Another worker's claim, as after an expired lease.
    common::admin_of(
        &common::db_name("lease_lost"),
        &format!("UPDATE smartpool_jobs SET locked_by = 'another' WHERE id = {id}"),
    );
    assert_eq!(
        lost.recv_timeout(Duration::from_secs(30)),
        Ok(id),
        "the handler is told at the next renewal"
    );
    close(served);
    let row = queue.job(id).unwrap().expect("the row stays");
    assert_eq!(
        row.state,
        JobState::Running,
        "the outcome is not ours to write"
    );
}

/// Cancelling: a queued job is removed and never runs; a running one is
/// made dead ("cancelled") and its handler told, as on a lost lease.
#[test]
fn a_queued_job_is_removed_and_a_running_one_told() {
    let url = fresh_db("cancel");
    let queue = Queue::connect(&url).unwrap();
    let running = queue.enqueue(NewJob::new("long", vec![])).unwrap();
    let queued = queue
        .enqueue(NewJob::new("long", vec![]).delay(Duration::from_secs(3600)))
        .unwrap();
    let (started_tx, started) = mpsc::channel();
    let (told_tx, told) = mpsc::channel();
    let (started_tx, told_tx) = (Mutex::new(started_tx), Mutex::new(told_tx));
    let registry = Registry::new().handle("long", move |job| {
        let _ = started_tx.lock().unwrap().send(job.id());
        let told_tx = told_tx.lock().unwrap().clone();
        async move {
            job.lease_lost().await;
            let _ = told_tx.send(job.id());
            Ok(())
        }
    });
    let served = serve(
        &url,
        1,
        1,
        registry,
        ServeOptions::new([0])
            .lease(Duration::from_millis(900))
            .poll(Duration::from_millis(20)),
    );
    assert_eq!(started.recv().unwrap(), running);
    assert_eq!(queue.cancel(queued).unwrap(), Cancelled::Removed);
    assert!(queue.job(queued).unwrap().is_none(), "gone from the table");
    assert_eq!(queue.cancel(running).unwrap(), Cancelled::Stopping);
    assert_eq!(told.recv_timeout(Duration::from_secs(30)), Ok(running));
    close(served);
    let row = queue.job(running).unwrap().expect("dead jobs stay");
    assert_eq!(row.state, JobState::Dead);
    assert_eq!(row.last_error.as_deref(), Some("cancelled"));
    assert_eq!(queue.cancel(running).unwrap(), Cancelled::NotFound);
    assert!(started.try_recv().is_err(), "the removed job never ran");
}

/// Operations on dead jobs: listed, retried (queued again, attempts back
/// to 0, and run), discarded; counts per level and state.
#[test]
fn dead_jobs_are_listed_retried_and_discarded() {
    let url = fresh_db("operations");
    let queue = Queue::connect(&url).unwrap();
    let first = queue.enqueue(NewJob::new("unknown", vec![])).unwrap();
    let second = queue
        .enqueue(NewJob::new("unknown", vec![]).level(1))
        .unwrap();
    // No handler knows the kind: both go dead at their claim.
    let served = serve(&url, 2, 1, Registry::new(), ServeOptions::new([0, 1]));
    until(|| queue.dead(10).unwrap().len() >= 2);
    close(served);
    let dead: Vec<i64> = queue.dead(10).unwrap().iter().map(|row| row.id).collect();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(dead.contains(&first) && dead.contains(&second));
    let counts = queue.counts_by_level().unwrap();
    assert_eq!(counts, [(0, JobState::Dead, 1), (1, JobState::Dead, 1)]);

    assert!(queue.discard(second).unwrap());
    assert!(queue.job(second).unwrap().is_none());
    assert!(!queue.discard(second).unwrap(), "gone already");

    assert!(queue.retry(first).unwrap());
    let row = queue.job(first).unwrap().unwrap();
    assert_eq!((row.state, row.attempts), (JobState::Queued, 0));
    assert!(!queue.retry(first).unwrap(), "queued, not dead");
    // Now a handler knows it: it runs and is done.
    let served = serve(
        &url,
        2,
        1,
        Registry::new().handle("unknown", |_| async { Ok(()) }),
        ServeOptions::new([0, 1]),
    );
    until(|| queue.job(first).unwrap().is_none());
    close(served);
    assert!(queue.job(first).unwrap().is_none(), "done, and deleted");
}

/// Unique jobs: while one with a key is queued, enqueuing another returns
/// its id; once it is done, the key is free again. `enqueue_many`
/// refuses unique jobs.
#[test]
fn a_unique_key_keeps_one_job_queued_or_running() {
    let url = fresh_db("unique");
    let queue = Queue::connect(&url).unwrap();
    let first = queue
        .enqueue(NewJob::new("record", vec![]).unique("report-42"))
        .unwrap();
    let again = queue
        .enqueue(NewJob::new("record", vec![]).unique("report-42"))
        .unwrap();
    assert_eq!(again, first, "the queued one stays");
    let other = queue
        .enqueue(NewJob::new("record", vec![]).unique("report-43"))
        .unwrap();
    assert_ne!(other, first);
    assert!(queue
        .enqueue_many(vec![NewJob::new("record", vec![]).unique("x")])
        .is_err());
    let (tx, rx) = mpsc::channel();
    let served = serve(&url, 1, 1, recording(tx), ServeOptions::new([0]));
    let mut ran = vec![rx.recv().unwrap(), rx.recv().unwrap()];
    ran.sort();
    assert_eq!(ran, [first.min(other), first.max(other)]);
    // Done and deleted: the key is free.
    until(|| queue.job(first).unwrap().is_none());
    let later = queue
        .enqueue(NewJob::new("record", vec![]).unique("report-42"))
        .unwrap();
    assert_ne!(later, first);
    assert_eq!(rx.recv().unwrap(), later);
    close(served);
}

/// A failed attempt's retry runs when its backoff ends, not at the next
/// poll (the production issue's F7, for a retry as for a delay).
#[test]
fn a_retry_runs_when_its_backoff_ends_not_at_the_next_poll() {
    let url = fresh_db("retry_due");
    let queue = Queue::connect(&url).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("flaky", move |job| {
        let _ = tx
            .lock()
            .unwrap()
            .send((job.attempt(), std::time::Instant::now()));
        let attempt = job.attempt();
        async move {
            match attempt {
                1 => Err(JobError("the first attempt fails".into())),
                _ => Ok(()),
            }
        }
    });
    let served = serve(
        &url,
        1,
        1,
        registry,
        ServeOptions::new([0])
            .backoff(Duration::from_millis(500), Duration::from_secs(1))
            .poll(Duration::from_secs(60)),
    );
    queue.enqueue(NewJob::new("flaky", vec![])).unwrap();
    let wait = Duration::from_secs(20);
    let (first, failed_at) = rx.recv_timeout(wait).unwrap();
    let (second, retried_at) = rx
        .recv_timeout(wait)
        .expect("retried at its due time, long before the 60 s poll");
    assert_eq!((first, second), (1, 2));
    assert!(
        retried_at - failed_at >= Duration::from_millis(400),
        "not before its backoff ended"
    );
    close(served);
}

/// A unique key whose job is running: enqueuing it again returns the
/// running job's id and adds nothing; once that job is done, the key is
/// free again.
#[test]
fn a_unique_key_of_a_running_job_adds_nothing() {
    let url = fresh_db("unique_running");
    let queue = Queue::connect(&url).unwrap();
    let (started, gate) = (Gate::default(), Gate::default());
    let (s, g) = (started.clone(), gate.clone());
    let runs = Arc::new(Mutex::new(Vec::new()));
    let r = runs.clone();
    let registry = Registry::new().handle("held", move |job| {
        r.lock().unwrap().push(job.id());
        s.open();
        g.wait();
        async { Ok(()) }
    });
    let served = serve(&url, 1, 1, registry, ServeOptions::new([0]));
    let first = queue
        .enqueue(NewJob::new("held", vec![]).unique("nightly"))
        .unwrap();
    started.wait();
    let again = queue
        .enqueue(NewJob::new("held", vec![]).unique("nightly"))
        .unwrap();
    assert_eq!(again, first, "the running one stands for the key");
    let row = queue.job(first).unwrap().expect("running, so still there");
    assert_eq!(row.state, smartpool_postgres::JobState::Running);
    gate.open();
    until(|| queue.job(first).unwrap().is_none());
    let later = queue
        .enqueue(NewJob::new("held", vec![]).unique("nightly"))
        .unwrap();
    assert_ne!(later, first, "done and deleted: the key is free");
    until(|| runs.lock().unwrap().len() == 2);
    assert_eq!(*runs.lock().unwrap(), [first, later]);
    close(served);
}

/// A job delayed past its enqueue runs at its due time, not at the next
/// poll (the production issue's F7: a 1 s delay started at 2.4 s).
#[test]
fn a_delayed_job_runs_when_due_not_at_the_next_poll() {
    let url = fresh_db("due");
    let queue = Queue::connect(&url).unwrap();
    let (tx, rx) = mpsc::channel();
    let served = serve(
        &url,
        1,
        1,
        recording(tx),
        ServeOptions::new([0]).poll(Duration::from_secs(60)),
    );
    let enqueued = std::time::Instant::now();
    let id = queue
        .enqueue(NewJob::new("record", vec![]).delay(Duration::from_millis(500)))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)),
        Ok(id),
        "woken at the due time, long before the 60 s poll"
    );
    assert!(
        enqueued.elapsed() >= Duration::from_millis(400),
        "not before it was due"
    );
    close(served);
}

#[test]
fn a_panicking_handler_fails_its_attempt() {
    let url = fresh_db("panic");
    let queue = Queue::connect(&url).unwrap();
    let id = queue
        .enqueue(NewJob::new("boom", vec![]).max_attempts(1))
        .unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("boom", move |_| {
        let _ = tx.lock().unwrap().send(());
        async { panic!("kaboom") }
    });
    let owned = smartpool::Builder::new().threads(1).build().unwrap();
    let worker = Worker::serve(&url, &owned.pool, |_| 0, registry, ServeOptions::new([0])).unwrap();
    rx.recv().unwrap();
    worker.close().wait();
    // The pool's worker survived: it still runs tasks.
    let alive = owned.pool.level(0).exec(smartpool::run(|| 7));
    assert_eq!(futures::executor::block_on(alive).unwrap(), 7);
    owned.close().wait();
    let row = queue.job(id).unwrap().unwrap();
    assert_eq!(row.state, JobState::Dead);
    assert!(
        row.last_error.as_deref().unwrap().contains("kaboom"),
        "{row:?}"
    );
}

#[test]
fn a_kind_no_handler_knows_goes_dead_with_a_clear_error() {
    let url = fresh_db("unknown");
    let queue = Queue::connect(&url).unwrap();
    let stray = queue.enqueue(NewJob::new("nobody", vec![1])).unwrap();
    let known = queue.enqueue(NewJob::new("record", vec![])).unwrap();
    let (tx, rx) = mpsc::channel();
    let served = serve(&url, 1, 1, recording(tx), ServeOptions::new([0]));
    assert_eq!(rx.recv().unwrap(), known);
    close(served);
    let row = queue.job(stray).unwrap().unwrap();
    assert_eq!(row.state, JobState::Dead);
    let error = row.last_error.unwrap();
    assert!(error.contains("no handler for kind \"nobody\""), "{error}");
}

/// Moving a queued job to another level is one call, honoured by the
/// next claim.
#[test]
fn a_moved_job_is_claimed_at_its_new_level() {
    let url = fresh_db("moved");
    let queue = Queue::connect(&url).unwrap();
    let first = queue
        .enqueue(NewJob::new("record", vec![]).level(1))
        .unwrap();
    let second = queue
        .enqueue(NewJob::new("record", vec![]).level(1))
        .unwrap();
    assert!(queue.set_level(second, 0).unwrap());
    assert_eq!(queue.job(second).unwrap().unwrap().level, 0);
    assert!(!queue.set_level(123_456, 0).unwrap(), "no such job");
    let (tx, rx) = mpsc::channel();
    let served = serve(
        &url,
        2,
        1,
        recording(tx),
        ServeOptions::new([0, 1]).capacity(1),
    );
    assert_eq!([rx.recv().unwrap(), rx.recv().unwrap()], [second, first]);
    close(served);
}

/// Closing the pool first drops the queued jobs of its lowest level (it
/// does not complete on close): they are released, queued again with
/// their attempt not counted. The job that was running finishes.
#[test]
fn jobs_a_closing_pool_drops_are_released() {
    let url = fresh_db("release");
    let queue = Queue::connect(&url).unwrap();
    let ids: Vec<i64> = (0..3)
        .map(|_| queue.enqueue(NewJob::new("slow", vec![]).level(1)).unwrap())
        .collect();
    let (started, gate) = (Gate::default(), Gate::default());
    let (s, g) = (started.clone(), gate.clone());
    let ran = Arc::new(Mutex::new(Vec::new()));
    let r = ran.clone();
    let registry = Registry::new().handle("slow", move |job| {
        r.lock().unwrap().push(job.id());
        s.open();
        g.wait();
        async { Ok(()) }
    });
    let owned = smartpool::Builder::new()
        .levels(2)
        .threads(1)
        .build()
        .unwrap();
    let worker = Worker::serve(
        &url,
        &owned.pool,
        |level| level as usize,
        registry,
        ServeOptions::new([1]).capacity(3),
    )
    .unwrap();
    started.wait(); // one runs, two wait in the pool
    let pool = owned.pool.clone();
    let closing = std::thread::spawn(move || owned.close().wait());
    while !pool.is_closing() {
        std::thread::yield_now();
    }
    gate.open();
    closing.join().unwrap();
    worker.close().wait();
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 1);
    for id in ids {
        match queue.job(id).unwrap() {
            None => assert_eq!(id, ran[0], "the one that ran is deleted"),
            Some(row) => {
                assert_eq!(row.state, JobState::Queued, "{row:?}");
                assert_eq!(row.attempts, 0, "a release does not count: {row:?}");
            }
        }
    }
}

/// The server goes away (the database refuses connections, and ours are
/// cut) while two jobs run: the pool keeps serving its own channels, the
/// jobs' outcomes wait, and once the server is back the worker writes them
/// and claims the rest. Each job runs once; none is lost.
#[test]
fn while_the_server_is_away_the_pool_serves_its_own_work_and_nothing_is_lost() {
    let url = fresh_db("outage");
    let name = common::db_name("outage");
    let queue = Queue::connect(&url).unwrap();
    let ids = queue
        .enqueue_many((0..10).map(|_| NewJob::new("gated", vec![])).collect())
        .unwrap();
    let (two_started, gate) = (common::CountDown::new(2), Gate::default());
    let (s, g) = (two_started.clone(), gate.clone());
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("gated", move |job| {
        let _ = tx.lock().unwrap().send(job.id());
        s.count_down();
        g.wait();
        async { Ok(()) }
    });
    let owned = smartpool::Builder::new().threads(2).build().unwrap();
    let worker = Worker::serve(
        &url,
        &owned.pool,
        |_| 0,
        registry,
        ServeOptions::new([0]).capacity(2),
    )
    .unwrap();
    two_started.wait();
    common::admin(&format!(
        "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ));
    gate.open(); // the two jobs end while their outcomes cannot be written
    let local = owned.pool.level(0).exec(smartpool::run(|| "served"));
    assert_eq!(futures::executor::block_on(local).unwrap(), "served");
    assert!(queue.counts().is_err(), "the server is away");
    common::admin(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"));
    let mut ran: Vec<i64> = (0..10).map(|_| rx.recv().unwrap()).collect();
    worker.close().wait();
    owned.close().wait();
    ran.sort();
    assert_eq!(ran, ids, "each job once");
    assert_eq!(queue.counts().unwrap(), vec![], "every outcome written");
}

/// A job that outlives its lease keeps it while it runs: its worker
/// renews it, and another worker serving the same level never takes it.
#[test]
fn a_running_job_keeps_its_lease_past_the_first_expiry() {
    let url = fresh_db("renew");
    let queue = Queue::connect(&url).unwrap();
    let id = queue.enqueue(NewJob::new("long", vec![])).unwrap();
    let (started, gate) = (Gate::default(), Gate::default());
    let (s, g) = (started.clone(), gate.clone());
    let registry = Registry::new().handle("long", move |_| {
        s.open();
        g.wait();
        async { Ok(()) }
    });
    let lease = Duration::from_millis(300);
    let owned = smartpool::Builder::new().threads(1).build().unwrap();
    let holder = Worker::serve(
        &url,
        &owned.pool,
        |_| 0,
        registry,
        ServeOptions::new([0]).lease(lease),
    )
    .unwrap();
    started.wait();
    let first_expiry = queue.job(id).unwrap().unwrap().locked_until.unwrap();
    // A second pool on the same level, looking every 20 ms.
    let other = smartpool::Builder::new().threads(1).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let thief = Worker::serve(
        &url,
        &other.pool,
        |_| 0,
        recording(tx).handle("long", |_| async { Ok(()) }),
        ServeOptions::new([0])
            .lease(lease)
            .poll(Duration::from_millis(20)),
    )
    .unwrap();
    // Past the first lease, and past a second one from it.
    while SystemTime::now() < first_expiry + lease {
        std::thread::sleep(Duration::from_millis(10));
    }
    let row = queue.job(id).unwrap().unwrap();
    assert_eq!(row.state, JobState::Running);
    assert_eq!(row.locked_by.as_deref(), Some(holder.id()));
    assert!(row.locked_until.unwrap() > first_expiry, "renewed");
    assert_eq!(row.attempts, 1, "never claimed again");
    gate.open();
    holder.close().wait();
    thief.close().wait();
    owned.close().wait();
    other.close().wait();
    assert!(rx.try_recv().is_err());
    assert!(queue.job(id).unwrap().is_none(), "done once, by its holder");
}

/// Rows written by hand: one left `running` with no lease at all is
/// claimable (as an expired lease), and one that allows no attempt goes
/// dead with an error that says so.
#[test]
fn malformed_rows_are_run_or_buried_with_a_reason() {
    let url = fresh_db("malformed");
    let name = common::db_name("malformed");
    let queue = Queue::connect(&url).unwrap();
    common::admin_of(
        &name,
        "INSERT INTO smartpool_jobs (kind, state, locked_until) VALUES ('record', 'running', NULL); \
         INSERT INTO smartpool_jobs (kind, max_attempts) VALUES ('record', 0);",
    );
    let (tx, rx) = mpsc::channel();
    // Capacity 2: one claim takes both rows.
    let served = serve(
        &url,
        1,
        1,
        recording(tx),
        ServeOptions::new([0]).capacity(2),
    );
    let ran = rx.recv().unwrap();
    close(served);
    assert!(rx.try_recv().is_err());
    assert!(queue.job(ran).unwrap().is_none(), "the lease-less row ran");
    let counts = queue.counts().unwrap();
    assert_eq!(counts, vec![(JobState::Dead, 1)]);
    let buried = queue
        .job(ran + 1)
        .unwrap()
        .or(queue.job(ran - 1).unwrap())
        .unwrap();
    let error = buried.last_error.unwrap();
    assert!(error.contains("no attempt left"), "{error}");
}

/// A handler that waits for something that never comes holds close
/// forever; `close_timeout` aborts it at the deadline, and its job is
/// released (queued again, the attempt not counted).
#[test]
fn close_timeout_aborts_held_jobs_and_releases_them() {
    let url = fresh_db("abort");
    let queue = Queue::connect(&url).unwrap();
    let id = queue.enqueue(NewJob::new("stuck", vec![])).unwrap();
    let started = Gate::default();
    let s = started.clone();
    let registry = Registry::new().handle("stuck", move |_| {
        s.open();
        async {
            std::future::pending::<()>().await; // never resolves
            Ok(())
        }
    });
    let owned = smartpool::Builder::new().threads(1).build().unwrap();
    let worker = Worker::serve(&url, &owned.pool, |_| 0, registry, ServeOptions::new([0])).unwrap();
    started.wait();
    worker.close_timeout(Duration::from_millis(50)).wait();
    owned.close().wait();
    let row = queue.job(id).unwrap().unwrap();
    assert_eq!((row.state, row.attempts), (JobState::Queued, 0), "{row:?}");
}

/// Another session holds one finished job's row locked: the statement that
/// writes both finished jobs is refused (lock_timeout), then each is
/// written on its own, so the other job's outcome does not wait; the
/// locked one is written once the lock goes. Leases of the other held
/// jobs are renewed meanwhile (the renewal skips the locked row).
#[test]
fn a_row_locked_elsewhere_holds_back_only_its_own_outcome() {
    let url = fresh_db("locked");
    let name = common::db_name("locked");
    let queue = Queue::connect(&url).unwrap();
    let ids = queue
        .enqueue_many(vec![
            NewJob::new("gated", vec![]),
            NewJob::new("gated", vec![]),
        ])
        .unwrap();
    let (two_started, gate) = (common::CountDown::new(2), Gate::default());
    let (s, g) = (two_started.clone(), gate.clone());
    let registry = Registry::new().handle("gated", move |_| {
        s.count_down();
        g.wait();
        async { Ok(()) }
    });
    let owned = smartpool::Builder::new().threads(2).build().unwrap();
    let worker = Worker::serve(
        &url,
        &owned.pool,
        |_| 0,
        registry,
        // Statements wait at most 100 ms for a lock.
        ServeOptions::new([0])
            .capacity(2)
            .lease(Duration::from_millis(300)),
    )
    .unwrap();
    two_started.wait();
    // Another session locks the first job's row and keeps it locked.
    let (locked, unlock) = (Gate::default(), Gate::default());
    let (l, u) = (locked.clone(), unlock.clone());
    let locked_id = ids[0];
    let locker = std::thread::spawn(move || common::hold_row_lock(&name, locked_id, &l, &u));
    locked.wait();
    gate.open();
    // The other job's row goes while the first is still locked.
    while queue.job(ids[1]).unwrap().is_some() {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(queue.job(ids[0]).unwrap().unwrap().state, JobState::Running);
    unlock.open();
    locker.join().unwrap();
    worker.close().wait();
    owned.close().wait();
    assert!(
        queue.job(ids[0]).unwrap().is_none(),
        "written once the lock went"
    );
}

/// A pool task enqueues a follow-up job without blocking its worker
/// (`enqueue_async`), and the job it enqueued runs.
#[test]
fn a_task_enqueues_a_follow_up_job_with_enqueue_async() {
    let url = fresh_db("follow");
    let queue = Arc::new(Queue::connect(&url).unwrap());
    let (tx, rx) = mpsc::channel();
    let served = serve(&url, 1, 1, recording(tx), ServeOptions::new([0]));
    let q = queue.clone();
    let enqueued = served
        .0
        .pool
        .level(0)
        .exec(async move { q.enqueue_async(NewJob::new("record", vec![7])).await });
    let id = futures::executor::block_on(enqueued).unwrap().unwrap();
    assert_eq!(rx.recv().unwrap(), id);
    close(served);
    assert!(queue.job(id).unwrap().is_none(), "ran and deleted");
}

/// One number from `sql` on database `db`.
fn scalar(db: &str, sql: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = common::url_of(db);
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client.query_one(sql, &[]).await.unwrap().get(0)
    })
}

/// A periodic schedule runs once per due time across two workers: the
/// run that is due now is enqueued once, the schedule moves an interval
/// on in the same statement, a run made due again runs again, and
/// `unschedule` removes it. Scheduling the name again from another
/// process keeps its due time.
#[test]
fn a_schedule_fires_once_per_due_time_across_workers() {
    let url = fresh_db("periodic");
    let db = common::db_name("periodic");
    let queue = Queue::connect(&url).unwrap();
    let (tx, rx) = mpsc::channel();
    let options = || {
        ServeOptions::new([0])
            .poll(Duration::from_millis(50))
            .keep_done(true)
    };
    let a = serve(&url, 1, 1, recording(tx.clone()), options());
    let b = serve(&url, 1, 1, recording(tx), options());
    let hourly = || NewJob::new("record", vec![]);
    queue
        .schedule_every("hourly", hourly(), Duration::from_secs(3600))
        .unwrap();
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let runs = "SELECT count(*) FROM smartpool_jobs WHERE unique_key = 'periodic:hourly'";
    let ahead = "SELECT count(*) FROM smartpool_periodic \
                 WHERE name = 'hourly' AND next_run_at > now() + interval '59 minutes'";
    assert_eq!(scalar(&db, ahead), 1, "moved on by an interval");
    assert_eq!(scalar(&db, runs), 1, "enqueued once");
    // Another process schedules it again at its start: the due time stays.
    let other = Queue::connect(&url).unwrap();
    other
        .schedule_every("hourly", hourly(), Duration::from_secs(3600))
        .unwrap();
    assert_eq!(
        scalar(&db, ahead),
        1,
        "a second schedule keeps the due time"
    );
    // Due again once the first run is done (a run due while the last is
    // still running is skipped): one more run.
    let done = "SELECT count(*) FROM smartpool_jobs \
                WHERE unique_key = 'periodic:hourly' AND state = 'done'";
    until(|| scalar(&db, done) == 1);
    // A change by hand tells the workers as `schedule_every` does.
    common::admin_of(
        &db,
        "UPDATE smartpool_periodic SET next_run_at = now(); NOTIFY smartpool_jobs, 'periodic'",
    );
    rx.recv_timeout(Duration::from_secs(20)).unwrap();
    until(|| scalar(&db, ahead) == 1);
    assert_eq!(scalar(&db, runs), 2);
    assert!(queue.unschedule("hourly").unwrap());
    assert!(!queue.unschedule("hourly").unwrap());
    assert!(matches!(
        queue.schedule_every("never", hourly(), Duration::ZERO),
        Err(smartpool_postgres::Error::Config(_))
    ));
    close(a);
    close(b);
}

/// Jobs at a level that no live worker serves are said so
/// (`Queue::unserved`): while only a worker of level 0 runs, a job of
/// level 3 is listed; a worker of level 3 that starts takes it off the
/// list; once that worker closes, it is listed again.
#[test]
fn jobs_at_a_level_no_worker_serves_are_said_so() {
    let url = fresh_db("unserved");
    let queue = Queue::connect(&url).unwrap();
    let (tx, _rx) = mpsc::channel();
    let zero = serve(&url, 1, 1, recording(tx.clone()), ServeOptions::new([0]));
    // Due in an hour: it stays queued whoever serves its level.
    queue
        .enqueue(
            NewJob::new("record", vec![])
                .level(3)
                .delay(Duration::from_secs(3600)),
        )
        .unwrap();
    assert_eq!(queue.unserved().unwrap(), [(3, 1)]);
    let three = serve(&url, 4, 1, recording(tx), ServeOptions::new([3]));
    until(|| queue.unserved().unwrap().is_empty());
    assert_eq!(queue.unserved().unwrap(), []);
    close(three);
    assert_eq!(
        queue.unserved().unwrap(),
        [(3, 1)],
        "a closed worker serves nothing"
    );
    close(zero);
}
