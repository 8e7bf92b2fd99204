//! A PostgreSQL server for the tests: the one `.ci/postgres` started
//! (`SMARTPOOL_PG_HOST`, a socket directory, and `SMARTPOOL_PG_PORT`), or
//! else a `TempCluster` of this test process's own. Each test gets a fresh
//! database.

#![allow(dead_code)]

use std::sync::OnceLock;

use smartpool_postgres::{Registry, ServeOptions, TempCluster, Worker};

enum Server {
    External { host: String, port: String },
    Temp(TempCluster),
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| match std::env::var("SMARTPOOL_PG_HOST") {
        Ok(host) => Server::External {
            host,
            port: std::env::var("SMARTPOOL_PG_PORT").unwrap_or_else(|_| "5432".into()),
        },
        Err(_) => Server::Temp(TempCluster::start().expect("a temporary PostgreSQL server")),
    })
}

pub fn url_of(db: &str) -> String {
    match server() {
        Server::External { host, port } => {
            format!("host={host} port={port} user=postgres dbname={db}")
        }
        Server::Temp(cluster) => cluster.url_of(db),
    }
}

/// The database name of test `test` in this process.
pub fn db_name(test: &str) -> String {
    format!("t_{}_{}", test, std::process::id())
}

/// Runs `sql` on the server's `postgres` database.
pub fn admin(sql: &str) {
    admin_of("postgres", sql)
}

/// Runs `sql` on database `db`.
pub fn admin_of(db: &str, sql: &str) {
    let admin = url_of(db);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
            .await
            .expect("the test server");
        tokio::spawn(connection);
        client.batch_execute(sql).await.unwrap();
    });
}

/// A new, empty database for the calling test; its connection string.
pub fn fresh_db(test: &str) -> String {
    let name = db_name(test);
    admin(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    admin(&format!("CREATE DATABASE {name}"));
    url_of(&name)
}

/// A gate: closed until opened; `wait` blocks until then.
#[derive(Clone, Default)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
    pub fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }
}

/// Counts down to zero; `wait` blocks until then.
#[derive(Clone)]
pub struct CountDown(std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>);

impl CountDown {
    pub fn new(n: usize) -> CountDown {
        CountDown(std::sync::Arc::new((
            std::sync::Mutex::new(n),
            std::sync::Condvar::new(),
        )))
    }
    pub fn count_down(&self) {
        let mut n = self.0 .0.lock().unwrap();
        *n = n.saturating_sub(1);
        self.0 .1.notify_all();
    }
    pub fn wait(&self) {
        let mut n = self.0 .0.lock().unwrap();
        while *n > 0 {
            n = self.0 .1.wait(n).unwrap();
        }
    }
}

/// In database `db`, locks job `id`'s row in a transaction, opens
/// `locked`, waits for `unlock`, then commits.
pub fn hold_row_lock(db: &str, id: i64, locked: &Gate, unlock: &Gate) {
    let url = url_of(db);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("the test server");
        tokio::spawn(connection);
        client.batch_execute("BEGIN").await.unwrap();
        client
            .query(
                "SELECT id FROM smartpool_jobs WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .await
            .unwrap();
        locked.open();
        let unlock = unlock.clone();
        tokio::task::spawn_blocking(move || unlock.wait())
            .await
            .unwrap();
        client.batch_execute("COMMIT").await.unwrap();
    });
}

/// Looks at `done` every 20 ms until it says so, for 30 s at most (a
/// failsafe: the caller's assertions then say what was not reached). For
/// a state only the database shows, which no latch can signal.
pub fn until(mut done: impl FnMut() -> bool) {
    let failsafe = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() && std::time::Instant::now() < failsafe {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A Builder pool of `levels` levels and `threads` threads, serving the
/// table with `registry`: jobs of level `l` on the pool's level `l`.
pub fn serve(
    url: &str,
    levels: usize,
    threads: usize,
    registry: Registry,
    options: ServeOptions,
) -> (smartpool::OwnedPool<smartpool::Leveled>, Worker) {
    let owned = smartpool::Builder::new()
        .levels(levels)
        .threads(threads)
        .build()
        .unwrap();
    let worker =
        Worker::serve(url, &owned.pool, |level| level as usize, registry, options).unwrap();
    (owned, worker)
}

/// Closes the worker, then its pool.
pub fn close((owned, worker): (smartpool::OwnedPool<smartpool::Leveled>, Worker)) {
    worker.close().wait();
    owned.close().wait();
}
