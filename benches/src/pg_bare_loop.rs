//! P3's bare loop, shared by `--bench postgres` and `benches/apalis` (a
//! workspace of its own, which includes this file by path): what a user
//! would write without smartpool-postgres, and the table's settling
//! before each rep.

use std::time::Instant;

use smartpool_postgres::tokio_postgres;

/// Runs `sql` on the database at `url`, on a runtime of its own.
pub fn execute(url: &str, sql: &str) {
    runtime().block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client.batch_execute(sql).await.unwrap();
    });
}

/// Drains the `jobs` queued jobs of levels 0 and 1 with two connections
/// that each claim one job (`FOR UPDATE SKIP LOCKED`), then delete it;
/// jobs per second.
pub fn drain(url: &str, jobs: usize) -> f64 {
    runtime().block_on(async {
        let mut clients = Vec::new();
        for _ in 0..2 {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            clients.push(client);
        }
        let start = Instant::now();
        let loops = clients.iter().map(|client| async move {
            let claim = client
                .prepare(
                    "UPDATE smartpool_jobs SET state = 'running', attempts = attempts + 1 \
                     WHERE id = (SELECT id FROM smartpool_jobs \
                         WHERE level = ANY($1) AND state = 'queued' AND run_at <= now() \
                         ORDER BY level, deadline, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
                     RETURNING id",
                )
                .await
                .unwrap();
            let done = client
                .prepare("DELETE FROM smartpool_jobs WHERE id = $1")
                .await
                .unwrap();
            let levels = vec![0i32, 1];
            while let Some(row) = client.query_opt(&claim, &[&levels]).await.unwrap() {
                let id: i64 = row.get(0);
                client.execute(&done, &[&id]).await.unwrap();
            }
        });
        futures::future::join_all(loops).await;
        jobs as f64 / start.elapsed().as_secs_f64()
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
