//! Pools in separate processes on one table: two drain a backlog of 10⁴
//! mixed jobs, each job once, urgent jobs enqueued mid-way ahead of the
//! rest; a process killed mid-job (SIGKILL) loses its leases, and another
//! runs its jobs once they expire, never while it still ran them.
//!
//! The test binary runs itself as the child processes: the `child` test
//! does nothing unless `SMARTPOOL_PG_CHILD` names a role.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fresh_db;
use smartpool_postgres::{JobError, JobState, NewJob, Queue, Registry, ServeOptions, Worker};

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Starts this test binary as a child process in `role`.
fn spawn_child(role: &str, url: &str, out: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env("SMARTPOOL_PG_CHILD", role)
        .env("SMARTPOOL_PG_CHILD_URL", url)
        .env("SMARTPOOL_PG_CHILD_OUT", out)
        .spawn()
        .unwrap()
}

/// The child processes' body (a no-op as a test of its own).
#[test]
fn child() {
    let Ok(role) = std::env::var("SMARTPOOL_PG_CHILD") else {
        return;
    };
    let url = std::env::var("SMARTPOOL_PG_CHILD_URL").unwrap();
    let out = PathBuf::from(std::env::var("SMARTPOOL_PG_CHILD_OUT").unwrap());
    match role.as_str() {
        "drain" => drain(&url, &out),
        "hang" => hang(&url, &out),
        other => panic!("unknown role {other}"),
    }
}

/// Serves levels 0 and 1 until no job is queued or running; writes a line
/// `id level start_us` per job it ran.
fn drain(url: &str, out: &Path) {
    let file = Mutex::new(std::io::BufWriter::new(std::fs::File::create(out).unwrap()));
    let log = std::sync::Arc::new(file);
    let l = log.clone();
    let registry = Registry::new().handle("work", move |job| {
        let start = now_us();
        // 50 µs of CPU.
        let until = std::time::Instant::now() + Duration::from_micros(50);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        writeln!(l.lock().unwrap(), "{} {} {start}", job.id(), job.level()).unwrap();
        async { Ok(()) }
    });
    let owned = smartpool::Builder::new()
        .levels(2)
        .threads(2)
        .build()
        .unwrap();
    let worker = Worker::serve(
        url,
        &owned.pool,
        |level| level as usize,
        registry,
        ServeOptions::new([0, 1])
            .keep_done(true)
            .poll(Duration::from_millis(50)),
    )
    .unwrap();
    let queue = Queue::connect(url).unwrap();
    loop {
        let counts = queue.counts().unwrap();
        let open = counts
            .iter()
            .filter(|(s, _)| matches!(s, JobState::Queued | JobState::Running))
            .map(|(_, n)| n)
            .sum::<i64>();
        if open == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.close().wait();
    owned.close().wait();
    log.lock().unwrap().flush().unwrap();
}

/// Serves level 0 with a lease of 1 s; its handler writes `id start_us`
/// and then blocks for good (the parent kills this process).
fn hang(url: &str, out: &Path) {
    let out = out.to_owned();
    let registry = Registry::new().handle(
        "step",
        move |job| -> std::future::Ready<Result<(), JobError>> {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&out)
                .unwrap();
            // One write of the whole line.
            f.write_all(format!("{} {}\n", job.id(), now_us()).as_bytes())
                .unwrap();
            f.sync_all().unwrap();
            block_forever()
        },
    );
    let owned = smartpool::Builder::new().threads(2).build().unwrap();
    let _worker = Worker::serve(
        url,
        &owned.pool,
        |_| 0,
        registry,
        ServeOptions::new([0]).lease(Duration::from_secs(1)),
    )
    .unwrap();
    loop {
        std::thread::park();
    }
}

fn block_forever() -> ! {
    loop {
        std::thread::park();
    }
}

/// The complete lines of `path` (a writer may be mid-line), as numbers.
fn lines(path: &Path) -> Vec<Vec<u64>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
    complete
        .lines()
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect()
}

#[test]
fn two_processes_drain_one_backlog_each_job_once_urgent_first() {
    let url = fresh_db("twoproc");
    let queue = Queue::connect(&url).unwrap();
    const BACKLOG: usize = 10_000;
    const URGENT: usize = 20;
    let background: Vec<i64> = queue
        .enqueue_many(
            (0..BACKLOG)
                .map(|_| NewJob::new("work", vec![]).level(1))
                .collect(),
        )
        .unwrap();
    let dir = std::env::temp_dir().join(format!("smartpool-pg-twoproc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let outs = [dir.join("a"), dir.join("b")];
    let mut children: Vec<Child> = outs.iter().map(|o| spawn_child("drain", &url, o)).collect();
    // Mid-way: once a third of the backlog is done, the urgent jobs.
    loop {
        let done = queue
            .counts()
            .unwrap()
            .iter()
            .find(|(s, _)| *s == JobState::Done)
            .map_or(0, |(_, n)| *n);
        if done as usize >= BACKLOG / 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let enqueued_us = now_us();
    let urgent: Vec<i64> = queue
        .enqueue_many(
            (0..URGENT)
                .map(|_| NewJob::new("work", vec![]).level(0))
                .collect(),
        )
        .unwrap();
    for child in &mut children {
        assert!(child.wait().unwrap().success());
    }
    // Every job ran exactly once.
    let ran: Vec<Vec<u64>> = outs.iter().flat_map(|o| lines(o)).collect();
    let mut runs: HashMap<i64, usize> = HashMap::new();
    for line in &ran {
        *runs.entry(line[0] as i64).or_default() += 1;
    }
    for id in background.iter().chain(&urgent) {
        assert_eq!(runs.get(id), Some(&1), "job {id}");
    }
    assert_eq!(runs.len(), BACKLOG + URGENT);
    for id in [background[0], background[BACKLOG - 1], urgent[0]] {
        let row = queue.job(id).unwrap().unwrap();
        assert_eq!((row.state, row.attempts), (JobState::Done, 1));
    }
    // The urgent jobs started before the background jobs still queued
    // when they came: count the background starts after the last urgent
    // start.
    let start_of = |id: &i64| ran.iter().find(|l| l[0] as i64 == *id).unwrap()[2];
    let last_urgent = urgent.iter().map(start_of).max().unwrap();
    let mut waits: Vec<u64> = urgent
        .iter()
        .map(|id| start_of(id) - enqueued_us.min(start_of(id)))
        .collect();
    waits.sort();
    let after = ran
        .iter()
        .filter(|l| l[1] == 1 && l[2] > last_urgent)
        .count();
    eprintln!(
        "two processes: {} jobs; urgent waits p50 {} µs, max {} µs; {after} background jobs started after the last urgent one",
        BACKLOG + URGENT,
        waits[URGENT / 2],
        waits[URGENT - 1]
    );
    assert!(
        after > BACKLOG / 3,
        "the urgent jobs waited behind the backlog: only {after} background jobs started after them"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_process_jobs_run_elsewhere_after_their_lease_once_at_a_time() {
    let url = fresh_db("killed");
    let queue = Queue::connect(&url).unwrap();
    let ids = queue
        .enqueue_many(vec![
            NewJob::new("step", vec![]),
            NewJob::new("step", vec![]),
        ])
        .unwrap();
    let out = std::env::temp_dir().join(format!("smartpool-pg-killed-{}", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let mut child = spawn_child("hang", &url, &out);
    // Both jobs started in the child.
    while lines(&out).len() < 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL: no close, no outcome
    child.wait().unwrap();
    let killed_us = now_us();
    for &id in &ids {
        assert_eq!(queue.job(id).unwrap().unwrap().state, JobState::Running);
    }
    // This process takes over once the 1 s leases expire.
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let registry = Registry::new().handle("step", move |job| {
        let _ = tx.lock().unwrap().send((job.id(), job.attempt(), now_us()));
        async { Ok(()) }
    });
    let owned = smartpool::Builder::new().threads(2).build().unwrap();
    let worker = Worker::serve(
        &url,
        &owned.pool,
        |_| 0,
        registry,
        ServeOptions::new([0])
            .keep_done(true)
            .poll(Duration::from_millis(50)),
    )
    .unwrap();
    let mut rerun: Vec<(i64, i32, u64)> = (0..2).map(|_| rx.recv().unwrap()).collect();
    worker.close().wait();
    owned.close().wait();
    rerun.sort();
    for (&id, &(rerun_id, attempt, start)) in ids.iter().zip(&rerun) {
        assert_eq!((rerun_id, attempt), (id, 2), "the second attempt");
        assert!(start >= killed_us, "not while the first ran");
        assert_eq!(queue.job(id).unwrap().unwrap().state, JobState::Done);
    }
    assert!(rx.try_recv().is_err(), "once each");
    let _ = std::fs::remove_file(&out);
}
