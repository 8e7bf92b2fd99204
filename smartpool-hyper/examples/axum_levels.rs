//! An axum app on a smartpool pool: `/health` at level 0, `/api` at
//! level 1, `/batch` at level 2. While 32 connections keep `/batch` (1 ms
//! of CPU each) busy on every worker, one connection probes `/health` and
//! another `/api`, and the example prints their round trips.
//!
//! `cargo run --release -p smartpool-hyper --example axum_levels`
//!
//! Look at: `/health` and `/api` answer in a fraction of a millisecond at
//! the median while `/batch` keeps every worker busy (the p99 of a few ms
//! is the load generator sharing this machine's cores). On one FIFO level
//! they would wait behind the batch requests queued before them: tokio
//! takes about 33 ms at the median under the same load
//! (`cargo bench -p smartpool-bench --bench server` prints both).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use smartpool_hyper::{from_tower, Server};

/// `/batch`: a millisecond of CPU, written the natural way (no yields).
async fn batch() -> &'static str {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1) {
        std::hint::spin_loop();
    }
    "batch done"
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Level 0 and 1 finish what they started when the pool closes; the
    // batch level is dropped (its requests get 503).
    let owned = smartpool::Builder::new()
        .levels(3)
        .complete_on_close(0, true)
        .complete_on_close(1, true)
        .build()?;
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/api", get(|| async { "api" }))
        .route("/batch", get(batch));
    let serving = Server::new(owned.pool.clone())
        .classify(|request| match request.uri().path() {
            "/health" => 0,
            "/api" => 1,
            _ => 2,
        })
        .max_in_flight(2, 256)
        .serve(std::net::TcpListener::bind("127.0.0.1:0")?, from_tower(app))?;
    let addr = serving.local_addr();
    println!(
        "serving on {addr} with {} workers: /health at level 0, /api at 1, /batch at 2",
        owned.pool.threads()
    );

    let (health, api, batches) = load(addr, Duration::from_secs(2));
    println!("while 32 connections keep /batch busy for 2 s:");
    for (path, mut times) in [("/health", health), ("/api", api)] {
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        println!(
            "  {path:8} {} round trips: p50 {:>7.3} ms, p99 {:>7.3} ms",
            times.len(),
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3
        );
    }
    println!(
        "  /batch   {batches} answered ({:.0} a second)",
        batches as f64 / 2.0
    );
    println!("(on one shared FIFO level, /health would queue behind /batch: tens of ms)");

    owned.close().wait();
    println!("closed: the accept loop stopped, connections shut down gracefully");
    Ok(())
}

/// Drives the load from a tokio runtime of one thread: the round trips of
/// `/health` and `/api` (one connection each, a request every
/// millisecond), and how many `/batch` requests were answered.
fn load(addr: SocketAddr, duration: Duration) -> (Vec<Duration>, Vec<Duration>, u64) {
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a client runtime");
    client.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        for _ in 0..32 {
            let mut sender = connect(addr).await;
            let (stop, answered) = (stop.clone(), answered.clone());
            workers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if get_path(&mut sender, "/batch").await {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let probe = |path: &'static str| async move {
            let mut sender = connect(addr).await;
            let (start, mut times) = (Instant::now(), Vec::new());
            while start.elapsed() < duration {
                let sent = Instant::now();
                assert!(get_path(&mut sender, path).await, "{path} failed");
                times.push(sent.elapsed());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            times
        };
        let (health, api) = tokio::join!(probe("/health"), probe("/api"));
        stop.store(true, Ordering::Relaxed);
        for worker in workers {
            let _ = worker.await;
        }
        (health, api, answered.load(Ordering::Relaxed))
    })
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn connect(addr: SocketAddr) -> Sender {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("handshake");
    tokio::spawn(connection);
    sender
}

async fn get_path(sender: &mut Sender, path: &str) -> bool {
    let request = hyper::Request::get(path)
        .body(Empty::new())
        .expect("a request");
    match sender.send_request(request).await {
        Ok(response) => {
            response.status().is_success() && response.into_body().collect().await.is_ok()
        }
        Err(_) => false,
    }
}
