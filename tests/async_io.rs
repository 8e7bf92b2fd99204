//! IO on the pool: async-io's reactor runs on a thread of its own, so its
//! types (and the crates built on them: async-net, async-fs) work in pool
//! tasks as they are. A TCP round trip on 127.0.0.1, both ends pool tasks,
//! and async-io's timer.

// async-io is a dev-dependency only outside loom (Cargo.toml).
#![cfg(not(loom))]

mod common;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use common::TwoLevels;
use futures::executor::block_on;
use futures::{AsyncReadExt, AsyncWriteExt};
use smartpool::prelude::*;

#[test]
fn a_tcp_echo_round_trip_runs_on_the_pool() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = &owned.pool;
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let address = listener.get_ref().local_addr().unwrap();
    // The server: accepts three connections, echoes each.
    let server = pool.low.exec(async move {
        for _ in 0..3 {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buffer = [0u8; 64];
            let n = stream.read(&mut buffer).await.unwrap();
            stream.write_all(&buffer[..n]).await.unwrap();
        }
    });
    // Clients on the high level, one after the other.
    for i in 0..3u8 {
        let echoed = block_on(pool.high.exec(async move {
            let mut stream = Async::<TcpStream>::connect(address).await.unwrap();
            stream.write_all(&[i, i + 1, i + 2]).await.unwrap();
            let mut reply = [0u8; 3];
            stream.read_exact(&mut reply).await.unwrap();
            reply
        }))
        .unwrap();
        assert_eq!(echoed, [i, i + 1, i + 2]);
    }
    block_on(server).unwrap();
    // A blocking client from outside the pool sees the same server kind.
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let address = listener.get_ref().local_addr().unwrap();
    let server = pool.high.exec(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        stream.write_all(b"hello").await.unwrap();
    });
    let mut reply = String::new();
    TcpStream::connect(address)
        .unwrap()
        .read_to_string(&mut reply)
        .unwrap();
    assert_eq!(reply, "hello");
    block_on(server).unwrap();
    block_on(owned.close());
}

#[test]
fn async_io_timers_wake_pool_tasks() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let start = Instant::now();
    let waited = block_on(owned.pool.high.exec(async move {
        Timer::after(Duration::from_millis(5)).await;
        start.elapsed()
    }))
    .unwrap();
    assert!(waited >= Duration::from_millis(5), "{waited:?}");
    block_on(owned.close());
}
