//! tokio's IO and timer types in pool tasks, through `smartpool::tokio_io`
//! (the `tokio` feature): a TCP round trip on 127.0.0.1 whose ends are
//! pool tasks, and a tokio sleep. Run by `.ci/run` with the feature on.
#![cfg(feature = "tokio")]

mod common;

use std::time::{Duration, Instant};

use common::TwoLevels;
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool::tokio_io;

/// Writes all of `bytes` with tokio's readiness API (no io-util needed).
async fn write_all(stream: &tokio::net::TcpStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        stream.writable().await.unwrap();
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Reads exactly `buffer.len()` bytes.
async fn read_exact(stream: &tokio::net::TcpStream, buffer: &mut [u8]) {
    let mut filled = 0;
    while filled < buffer.len() {
        stream.readable().await.unwrap();
        match stream.try_read(&mut buffer[filled..]) {
            Ok(0) => panic!("closed early"),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_tokio_tcp_round_trip_runs_on_the_pool() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = &owned.pool;
    let (tx, rx) = futures::channel::oneshot::channel();
    let server = pool.low.exec(tokio_io(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        tx.send(listener.local_addr().unwrap()).unwrap();
        for _ in 0..3 {
            let (stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4];
            read_exact(&stream, &mut request).await;
            write_all(&stream, &request).await;
        }
    }));
    let address = block_on(rx).unwrap();
    for i in 0..3u8 {
        let echoed = block_on(pool.high.exec(tokio_io(async move {
            let stream = tokio::net::TcpStream::connect(address).await.unwrap();
            write_all(&stream, &[i, 1, 2, 3]).await;
            let mut reply = [0u8; 4];
            read_exact(&stream, &mut reply).await;
            (reply, Pool::<TwoLevels>::current().is_some())
        })))
        .unwrap();
        assert_eq!(echoed, ([i, 1, 2, 3], true), "echoed, on a pool worker");
    }
    block_on(server).unwrap();
    block_on(owned.close());
}

#[test]
fn tokio_sleep_wakes_a_pool_task() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let start = Instant::now();
    let slept = block_on(owned.pool.high.exec(tokio_io(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        start.elapsed()
    })))
    .unwrap();
    assert!(slept >= Duration::from_millis(5), "{slept:?}");
    block_on(owned.close());
}

/// The runtime the future's IO registers with, by its worker count.
async fn runtime_workers() -> usize {
    tokio::runtime::Handle::current().metrics().num_workers()
}

/// Wrapped outside any runtime, a future uses smartpool's own, of one
/// worker.
#[test]
fn outside_a_runtime_the_future_uses_smartpools_own() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let workers = block_on(owned.pool.high.exec(tokio_io(runtime_workers()))).unwrap();
    assert_eq!(workers, 1);
    block_on(owned.close());
}

/// Wrapped inside a runtime's context, a future uses that runtime (one
/// reactor, as with async-compat): its sleep and its TCP listener are
/// driven there.
#[test]
fn inside_a_runtime_the_future_uses_that_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .unwrap();
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let wrapped = {
        let _context = runtime.enter();
        tokio_io(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            assert!(listener.local_addr().unwrap().port() > 0);
            runtime_workers().await
        })
    };
    let workers = block_on(owned.pool.high.exec(wrapped)).unwrap();
    assert_eq!(workers, 3, "the caller's runtime, not smartpool's own");
    block_on(owned.close());
}
