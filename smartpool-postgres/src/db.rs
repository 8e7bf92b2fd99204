//! The crate's database threads: each runs a current-thread tokio
//! runtime with one connection, whose asynchronous messages (the
//! notifications of `LISTEN`) are forwarded to the thread's main loop.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, NoTls, Row, Statement};

use crate::Error;

/// Starts a thread named `name` that runs `main` to its end.
pub(crate) fn spawn<F>(name: String, main: F) -> Result<std::thread::JoinHandle<()>, Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime");
            runtime.block_on(main);
        })
        .map_err(Error::Thread)
}

/// A connection: its client, and the payloads of the notifications it
/// receives (the stream ends when the connection does).
pub(crate) struct Connection {
    pub(crate) client: Client,
    pub(crate) notes: mpsc::UnboundedReceiver<String>,
    /// The crate's statements prepared on this connection, by the address
    /// of their text (each a `const`).
    prepared: std::sync::Mutex<std::collections::HashMap<usize, Statement>>,
}

impl Connection {
    /// `sql` (a `const` of the crate), prepared once on this connection:
    /// later runs are one round trip, not two (parse, then execute).
    async fn prepared(&self, sql: &'static str) -> Result<Statement, tokio_postgres::Error> {
        let key = sql.as_ptr() as usize;
        let known = self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(statement) = known {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await?;
        self.prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, statement.clone());
        Ok(statement)
    }

    /// Runs `sql`, prepared once (see [`Connection::prepared`]).
    pub(crate) async fn query(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        self.client.query(&statement, params).await
    }

    /// Runs `sql`, prepared once; the rows it changed.
    pub(crate) async fn execute(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.prepared(sql).await?;
        self.client.execute(&statement, params).await
    }
}

/// Connects to `url`, installs the schema if missing, and drives the
/// connection on the current runtime.
pub(crate) async fn connect(url: &str) -> Result<Connection, Error> {
    connect_with(url, None).await
}

/// [`connect`], with TCP's connect and user timeouts at `bound`, if given.
/// The whole of it (the socket, the server's start-up answer, the schema
/// check) is bounded by `bound`, else the string's `connect_timeout`, else
/// [`crate::CONNECT_TIMEOUT`]: a server that accepts and never answers is
/// an error, not a hang.
pub(crate) async fn connect_with(url: &str, bound: Option<Duration>) -> Result<Connection, Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    if let Some(bound) = bound {
        config.connect_timeout(bound);
        config.tcp_user_timeout(bound);
    }
    let limit = bound
        .or(config.get_connect_timeout().copied())
        .unwrap_or(crate::CONNECT_TIMEOUT);
    tokio::time::timeout(limit, connect_configured(config))
        .await
        .map_err(|_| Error::ConnectTimeout(limit))?
}

/// Connects with `config`, installs the schema if missing, and drives the
/// connection on the current runtime.
async fn connect_configured(config: tokio_postgres::Config) -> Result<Connection, Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (tx, notes) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(note)) => {
                    let _ = tx.send(note.payload().to_owned());
                }
                Ok(_) => {}
                Err(e) => {
                    log::warn!("smartpool-postgres: connection lost: {}", Error::Db(e));
                    break;
                }
            }
        }
    });
    crate::schema::install(&client).await?;
    Ok(Connection {
        client,
        notes,
        prepared: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    /// The production issue's F6: a statement is prepared once on its
    /// connection and kept. After three runs the session holds one
    /// prepared statement of its text; preparing at every run (then
    /// closing it, as a client's `query(&str)` does) would leave none.
    #[test]
    fn a_statement_is_prepared_once_and_kept() {
        const SQL: &str = "SELECT count(*) FROM smartpool_jobs WHERE level = $1";
        let cluster = crate::TempCluster::start().expect("a temporary server");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let held = runtime.block_on(async {
            let c = super::connect(&cluster.url()).await.expect("connected");
            for _ in 0..3 {
                c.query(SQL, &[&0i32]).await.unwrap();
            }
            let rows = c
                .client
                .query(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1",
                    &[&SQL],
                )
                .await
                .unwrap();
            rows[0].get::<_, i64>(0)
        });
        assert_eq!(held, 1);
    }
}
