//! W14: an HTTP server under load, smartpool-hyper against hyper on a
//! tokio runtime, the same service written the natural way.
//!
//! `/batch` burns 1 ms of CPU; `/health` answers at once. Each server has
//! 2 worker threads. 64 keep-alive HTTP/1 connections send `/batch`
//! back to back, saturating every worker, while one more connection
//! probes `/health` every millisecond and records its round trip. On
//! smartpool, `/health` runs at level 0 and `/batch` at level 2; tokio
//! has one level. The servers alternate, rep by rep, in one process; the
//! load generator is a tokio runtime of one thread in the same process.
//! Both protocols: HTTP/1 (64 connections) and HTTP/2 (8 connections of
//! 8 streams each).
//!
//! `cargo bench -p smartpool-bench --bench server`;
//! `SMARTPOOL_BENCH_QUICK=1` for CI's sizes. `SMARTPOOL_BENCH_WORKER_NICE=n`
//! runs both servers' worker threads at nice `n` (an experiment: the
//! reactor and the load generator then preempt them sooner).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

/// The service both servers run.
async fn handle(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.uri().path() == "/batch" {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1) {
            std::hint::spin_loop();
        }
    }
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

/// A server, running until dropped.
trait Served {
    fn addr(&self) -> SocketAddr;
}

struct Smart {
    owned: Option<smartpool::OwnedPool<smartpool::Leveled>>,
    addr: SocketAddr,
}

impl Served for Smart {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Smart {
    fn drop(&mut self) {
        if let Some(owned) = self.owned.take() {
            let _ = owned.close_timeout(Duration::from_secs(5)).wait();
        }
    }
}

/// Puts the calling thread at the nice value `SMARTPOOL_BENCH_WORKER_NICE`
/// asks for, if any (Linux: a nice value is per thread).
fn worker_nice() {
    let Some(nice) = std::env::var("SMARTPOOL_BENCH_WORKER_NICE")
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: setpriority reads its arguments only; `0` is this thread.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    assert_eq!(rc, 0, "setpriority: {}", std::io::Error::last_os_error());
}

fn smartpool_server() -> Smart {
    let owned = smartpool::Builder::new()
        .levels(3)
        .threads(2)
        .on_thread_start(|_| worker_nice())
        .complete_on_close(0, true)
        .build()
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let serving = smartpool_hyper::Server::new(owned.pool.clone())
        .classify(|r| if r.uri().path() == "/health" { 0 } else { 2 })
        .serve(listener, hyper::service::service_fn(handle))
        .unwrap();
    Smart {
        addr: serving.local_addr(),
        owned: Some(owned),
    }
}

struct Tokio {
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
}

impl Served for Tokio {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Tokio {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn tokio_server() -> Tokio {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(worker_nice)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                let _ = builder
                    .serve_connection(
                        hyper_util::rt::TokioIo::new(stream),
                        hyper::service::service_fn(handle),
                    )
                    .await;
            });
        }
    });
    Tokio {
        runtime: Some(runtime),
        addr,
    }
}

/// The protocol a rep speaks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Proto {
    Http1,
    Http2,
}

/// A client's side of one connection (HTTP/2: a clone is another stream).
#[derive(Clone)]
enum Sender {
    Http1(Arc<tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Empty<Bytes>>>>),
    Http2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

/// A keep-alive client connection.
async fn connect(addr: SocketAddr, proto: Proto) -> Sender {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    match proto {
        Proto::Http1 => {
            let (sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(connection);
            Sender::Http1(Arc::new(tokio::sync::Mutex::new(sender)))
        }
        Proto::Http2 => {
            let executor = hyper_util::rt::TokioExecutor::new();
            let (sender, connection) = hyper::client::conn::http2::handshake(executor, io)
                .await
                .unwrap();
            tokio::spawn(connection);
            Sender::Http2(sender)
        }
    }
}

async fn get(sender: &mut Sender, path: &str) -> bool {
    let request = Request::get(format!("http://bench{path}"))
        .body(Empty::new())
        .unwrap();
    let sent = match sender {
        Sender::Http1(sender) => sender.lock().await.send_request(request).await,
        Sender::Http2(sender) => sender.send_request(request).await,
    };
    match sent {
        Ok(response) => {
            let ok = response.status().is_success();
            ok && response.into_body().collect().await.is_ok()
        }
        Err(_) => false,
    }
}

/// One rep against the server at `addr`: `/batch` completions a second,
/// and the `/health` round trips (µs). HTTP/1: 64 connections; HTTP/2: 8
/// connections of 8 streams each.
fn load(
    client: &tokio::runtime::Runtime,
    addr: SocketAddr,
    proto: Proto,
    duration: Duration,
) -> (f64, Histogram<u64>) {
    client.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let mut batch = Vec::new();
        let mut shared = None;
        for k in 0..64 {
            let (stop, done) = (stop.clone(), done.clone());
            let mut sender = match (proto, &shared) {
                (Proto::Http2, Some(sender)) if k % 8 != 0 => Sender::clone(sender),
                _ => connect(addr, proto).await,
            };
            shared = Some(sender.clone());
            batch.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if get(&mut sender, "/batch").await {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let mut probe = connect(addr, proto).await;
        // Let the backlog build before probing.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (start, counted) = (Instant::now(), done.load(Ordering::Relaxed));
        let mut health = Histogram::<u64>::new(3).unwrap();
        while start.elapsed() < duration {
            let sent = Instant::now();
            assert!(get(&mut probe, "/health").await, "/health failed");
            health.record(sent.elapsed().as_micros() as u64).unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let rate = (done.load(Ordering::Relaxed) - counted) as f64 / start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for task in batch {
            let _ = task.await;
        }
        (rate, health)
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    let (reps, duration) = if quick {
        (1, Duration::from_millis(300))
    } else {
        (3, Duration::from_secs(3))
    };
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    println!("| row | smartpool | tokio | ratio | target |");
    println!("|---|---|---|---|---|");
    for proto in [Proto::Http1, Proto::Http2] {
        rows(&client, proto, reps, duration);
    }
}

/// W14's rows over `proto`: the servers alternate, rep by rep.
fn rows(client: &tokio::runtime::Runtime, proto: Proto, reps: usize, duration: Duration) {
    let names = ["smartpool", "tokio"];
    let mut rates = [Vec::new(), Vec::new()];
    let mut health = [
        Histogram::<u64>::new(3).unwrap(),
        Histogram::<u64>::new(3).unwrap(),
    ];
    for rep in 0..reps {
        for k in 0..2 {
            let which = (k + rep) % 2;
            let server: Box<dyn Served> = match which {
                0 => Box::new(smartpool_server()),
                _ => Box::new(tokio_server()),
            };
            let (rate, h) = load(client, server.addr(), proto, duration);
            drop(server);
            rates[which].push(rate);
            health[which].add(&h).unwrap();
            eprintln!(
                "{proto:?} rep {rep} {}: /batch {rate:.0} req/s, /health p50 {} µs, p99 {} µs",
                names[which],
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99)
            );
        }
    }
    let batch = [median(rates[0].clone()), median(rates[1].clone())];
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let p = if proto == Proto::Http1 {
        "HTTP/1"
    } else {
        "HTTP/2"
    };
    println!(
        "| W14 {p} /health p50 (ms) | {:.2} | {:.2} | {:.3} | |",
        ms(&health[0], 0.5),
        ms(&health[1], 0.5),
        ms(&health[0], 0.5) / ms(&health[1], 0.5)
    );
    println!(
        "| W14 {p} /health p99 (ms) | {:.2} | {:.2} | {:.3} | ≤ 1 ms |",
        ms(&health[0], 0.99),
        ms(&health[1], 0.99),
        ms(&health[0], 0.99) / ms(&health[1], 0.99)
    );
    println!(
        "| W14 {p} /batch (req/s) | {:.0} | {:.0} | {:.2} | ≥ 0.95 × tokio |",
        batch[0],
        batch[1],
        batch[0] / batch[1]
    );
}
