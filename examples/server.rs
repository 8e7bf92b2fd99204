//! A TCP server on 127.0.0.1 whose request handling shares the pool with
//! CPU batch jobs, on async-io (whose reactor has a thread of its own).
//!
//! Run: `cargo run --release --example server`
//!
//! For two seconds, a client thread sends requests one after another over
//! one connection and times each round trip, while batch jobs of 2 ms keep
//! 50 queued on the pool. What to look at: the round-trip percentiles and
//! the requests served, with the request handling on a level above the
//! batch, and with both on one shared level. (Only loopback, one client,
//! bounded in time.)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::Async;
use futures::{AsyncReadExt, AsyncWriteExt};
use smartpool::prelude::*;
use smartpool::{Leveled, Pool};

const RUN_FOR: Duration = Duration::from_secs(2);
const BATCH_JOB: Duration = Duration::from_millis(2);
const BATCH_QUEUED: usize = 50;

fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A batch job that queues its successor until `stop`: the batch level
/// keeps about `BATCH_QUEUED` jobs waiting.
fn batch_job(pool: Arc<Pool<Leveled>>, level: usize, stop: Arc<AtomicBool>) {
    spin(BATCH_JOB);
    if !stop.load(Ordering::Relaxed) {
        let next = pool.clone();
        drop(
            pool.level(level)
                .exec(run(move || batch_job(next, level, stop))),
        );
    }
}

/// Serves requests on `level`: each is 8 bytes, answered with a checksum
/// after 20 µs of work.
async fn serve(listener: Async<TcpListener>) {
    let Ok((mut stream, _)) = listener.accept().await else {
        return;
    };
    let mut request = [0u8; 8];
    while stream.read_exact(&mut request).await.is_ok() {
        spin(Duration::from_micros(20));
        let sum = request.iter().map(|&b| u64::from(b)).sum::<u64>();
        if stream.write_all(&sum.to_le_bytes()).await.is_err() {
            return;
        }
    }
}

/// One run: the server's level, the batch's level; returns the sorted
/// round trips.
fn run_server(levels: usize, server_level: usize, batch_level: usize) -> Vec<Duration> {
    let owned = smartpool::Builder::new()
        .levels(levels)
        .threads(2)
        .build()
        .expect("a valid pool");
    let pool = owned.pool.clone();
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..BATCH_QUEUED {
        let (p, s) = (pool.clone(), stop.clone());
        drop(
            pool.level(batch_level)
                .exec(run(move || batch_job(p, batch_level, s))),
        );
    }
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("a loopback port");
    let address = listener.get_ref().local_addr().expect("its address");
    let server = pool.level(server_level).exec(serve(listener));

    // The client: a plain thread, outside the pool.
    let mut stream = TcpStream::connect(address).expect("connected");
    let mut times = Vec::new();
    let start = Instant::now();
    let mut reply = [0u8; 8];
    while start.elapsed() < RUN_FOR {
        let sent = Instant::now();
        stream.write_all(&[1, 2, 3, 4, 5, 6, 7, 8]).expect("sent");
        stream.read_exact(&mut reply).expect("answered");
        times.push(sent.elapsed());
        assert_eq!(u64::from_le_bytes(reply), 36);
    }
    drop(stream);
    stop.store(true, Ordering::Relaxed);
    owned.block_on(server).expect("the server task");
    drop(pool);
    owned.close().wait();
    times.sort();
    times
}

fn report(name: &str, times: &[Duration]) {
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "{name:<36} {:>6} requests  p50 {:>9.2?}  p99 {:>9.2?}  max {:>9.2?}",
        times.len(),
        at(0.5),
        at(0.99),
        times[times.len() - 1]
    );
}

fn main() {
    println!(
        "{RUN_FOR:?} of round trips, one client, while {BATCH_QUEUED} batch jobs of {BATCH_JOB:?} stay queued, 2 workers:"
    );
    report("requests on a level above the batch", &run_server(2, 0, 1));
    report("requests and batch on one level", &run_server(1, 0, 0));
    println!(
        "On one level, a request that arrives while batch jobs are queued ahead of it waits for\n\
         them (see the max, and the requests served); on its own level it waits at most for the\n\
         batch job each worker is in ({BATCH_JOB:?})."
    );
}
