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
