//! hyper services on a smartpool pool: each request runs at the level its
//! route asks for.
//!
//! The rule: connections run at one level (the highest by default), and
//! each request's handler runs as a task of the level a classifier picks
//! (inline, on its connection, when that is the connection's level: one
//! hop through the queues fewer for the urgent routes).
//! The connection awaits the handler without raising it
//! ([`JoinHandle::without_inheritance`]), so a batch request stays at the
//! batch level while `/health` answers from the top.
//!
//! ```no_run
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use hyper::{Request, Response};
//! use smartpool_hyper::Server;
//!
//! let owned = smartpool::Builder::new().levels(2).build()?;
//! let service = hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
//!     Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("hello"))))
//! });
//! let listener = std::net::TcpListener::bind("127.0.0.1:8080")?;
//! let serving = Server::new(owned.pool.clone())
//!     .classify(|req| if req.uri().path() == "/health" { 0 } else { 1 })
//!     .max_in_flight(1, 64)
//!     .serve(listener, service)?;
//! println!("listening on {}", serving.local_addr());
//! owned.close().wait(); // stops accepting, finishes what close keeps
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Why a crate of its own
//!
//! hyper, hyper-util and h2 would double the core crate's build. A user
//! who serves HTTP adds this crate; nobody else pays for it.
//!
//! # Backpressure and shutdown
//!
//! [`Server::max_in_flight`] bounds a level's requests in flight. A
//! request over the bound waits at its connection: an HTTP/1 connection
//! stops reading, so the client sees back-pressure, not an error; HTTP/2
//! streams wait, up to the connection's limit of concurrent streams. A
//! request whose client gives up (a reset stream, a closed connection)
//! has its handler aborted, and its place under the bound comes back.
//!
//! Close ([`smartpool::OwnedPool::close`]) stops the accept loop and asks
//! every connection to shut down gracefully ([`smartpool::Pool::closing`]):
//! HTTP/1 finishes the request in flight, HTTP/2 sends GOAWAY. A request
//! whose handler runs at a `complete_on_close` level gets its response. A
//! handler at another level is dropped by close, and its request gets 503
//! Service Unavailable; so does an HTTP/1 request that arrives as close
//! begins (a new HTTP/2 stream then is reset instead). Make the
//! connection level `complete_on_close`, or close drops the connections
//! too.
//!
//! A graceful HTTP/2 shutdown waits for the peer to answer its ping, and
//! an HTTP/1 request in flight waits for its body. A peer that never
//! answers, or sends slowly, keeps its connection, and so close, waiting:
//! close with [`smartpool::OwnedPool::close_timeout`] where clients are
//! not trusted.
//!
//! The reactor is [`smartpool::tokio_io`]'s: a runtime in context where
//! [`Server::serve`] is called, else smartpool's own. Called inside a
//! current-thread runtime, the server moves only while that thread is in
//! `block_on`: closing the pool from that thread then waits for ever.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::{Either, Full};
use hyper::body::{Body, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use smartpool::prelude::*;
use smartpool::{JoinHandle, Leveled, Pool};
use tokio::sync::Semaphore;

pub use hyper_util::service::TowerToHyperService;

/// What a handler may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a response: the handler's, or the server's own (503, 500).
pub type ServerBody<B> = Either<B, Full<Bytes>>;

/// Picks a request's level.
type Classify = dyn Fn(&Request<Incoming>) -> usize + Send + Sync;

/// A tower service (an axum `Router`) as a hyper service, to serve.
pub fn from_tower<S>(service: S) -> TowerToHyperService<S> {
    TowerToHyperService::new(service)
}

/// A hyper executor that runs what it is given on one level of a pool:
/// the futures of HTTP/2 streams, or a hyper client's connection tasks.
/// Each future is wrapped in [`smartpool::tokio_io`], so tokio's IO types
/// work in it.
#[derive(Clone)]
pub struct LevelExecutor {
    pool: Arc<Pool<Leveled>>,
    level: usize,
}

impl LevelExecutor {
    /// Runs futures at `level` of `pool`; an `Err` if it has no such level.
    pub fn new(pool: Arc<Pool<Leveled>>, level: usize) -> Result<LevelExecutor, ServeError> {
        check_level(&pool, level, "the executor's level")?;
        Ok(LevelExecutor { pool, level })
    }
}

impl<F> hyper::rt::Executor<F> for LevelExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        // Refused as the pool closes: the future is dropped, as a closed
        // tokio runtime drops what is spawned on it.
        let _ = self
            .pool
            .level(self.level)
            .exec_detached(smartpool::tokio_io(future));
    }
}

impl std::fmt::Debug for LevelExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelExecutor")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

/// A server's settings that cannot work: a level the pool does not have,
/// a bound of zero, a listener that cannot be made non-blocking.
#[derive(Debug)]
pub enum ServeError {
    /// `what` names a level the pool does not have.
    NoSuchLevel {
        /// Which setting.
        what: &'static str,
        /// The level asked for.
        level: usize,
        /// How many levels the pool has.
        levels: usize,
    },
    /// A bound of zero requests in flight at `level`: none could run.
    ZeroBound {
        /// The level.
        level: usize,
    },
    /// The listener could not be set up.
    Listener(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::NoSuchLevel {
                what,
                level,
                levels,
            } => write!(
                f,
                "{what} is level {level}, but the pool has {levels} (0 is the highest)"
            ),
            ServeError::ZeroBound { level } => {
                write!(f, "level {level} bounds its requests in flight to 0")
            }
            ServeError::Listener(e) => write!(f, "the listener could not be set up: {e}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Listener(e) => Some(e),
            _ => None,
        }
    }
}

fn check_level(pool: &Pool<Leveled>, level: usize, what: &'static str) -> Result<(), ServeError> {
    let levels = pool.levels();
    if level < levels {
        Ok(())
    } else {
        Err(ServeError::NoSuchLevel {
            what,
            level,
            levels,
        })
    }
}

/// How to serve: the pool, the connections' level, the classifier, the
/// bounds. Made by [`Server::new`]; [`Server::serve`] starts it.
pub struct Server {
    pool: Arc<Pool<Leveled>>,
    connections: usize,
    classify: Arc<Classify>,
    bounds: Vec<(usize, usize)>,
}

impl Server {
    /// A server on `pool` (a [`smartpool::Builder`] pool): connections
    /// and every request at level 0 until told otherwise.
    pub fn new(pool: Arc<Pool<Leveled>>) -> Server {
        Server {
            pool,
            connections: 0,
            classify: Arc::new(|_| 0),
            bounds: Vec::new(),
        }
    }

    /// Connections (reading requests, writing responses, HTTP/2 streams)
    /// run at `level`. Make it `complete_on_close`: close then lets them
    /// finish what they started.
    pub fn connection_level(mut self, level: usize) -> Server {
        self.connections = level;
        self
    }

    /// Each request's handler runs at the level `classify` returns (by
    /// route, method, header). A level the pool lacks answers 500. The
    /// service's `call` runs on the connection; the future it returns
    /// (the handler's work) runs at the request's level.
    pub fn classify(
        mut self,
        classify: impl Fn(&Request<Incoming>) -> usize + Send + Sync + 'static,
    ) -> Server {
        self.classify = Arc::new(classify);
        self
    }

    /// At most `n` requests of `level` in flight at once; the others wait
    /// at their connections.
    pub fn max_in_flight(mut self, level: usize, n: usize) -> Server {
        self.bounds.push((level, n));
        self
    }

    /// Serves `service` on `listener`: the accept loop runs at the
    /// connection level, on the tokio reactor of [`smartpool::tokio_io`].
    /// Fails on a level the pool lacks, a bound of zero, or a listener
    /// that cannot be made non-blocking.
    pub fn serve<S: HttpService>(
        self,
        listener: std::net::TcpListener,
        service: S,
    ) -> Result<Serving, ServeError> {
        let pool = self.pool;
        check_level(&pool, self.connections, "the connection level")?;
        let mut limits: Vec<Option<Arc<Semaphore>>> = vec![None; pool.levels()];
        for &(level, n) in &self.bounds {
            check_level(&pool, level, "a bound's level")?;
            if n == 0 {
                return Err(ServeError::ZeroBound { level });
            }
            // A bound beyond what a semaphore counts is no bound.
            limits[level] = (n <= Semaphore::MAX_PERMITS).then(|| Arc::new(Semaphore::new(n)));
        }
        listener
            .set_nonblocking(true)
            .map_err(ServeError::Listener)?;
        let local_addr = listener.local_addr().map_err(ServeError::Listener)?;
        let service = LevelService {
            inner: service,
            pool: pool.clone(),
            classify: self.classify,
            limits: limits.into(),
            connections: self.connections,
        };
        let level = self.connections;
        let accept = pool.level(level).exec(smartpool::tokio_io(accept(
            pool.clone(),
            level,
            listener,
            service,
        )));
        Ok(Serving { local_addr, accept })
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("connections", &self.connections)
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

/// A server started by [`Server::serve`]. Awaiting it waits for the
/// accept loop to stop (once close has begun).
#[must_use = "the server runs anyway; keep this for its address"]
pub struct Serving {
    local_addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Serving {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Future for Serving {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.accept).poll(cx).map(|_| ())
    }
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

/// Accepts until close begins; each connection is a task at `level`.
async fn accept<T: ConnService>(
    pool: Arc<Pool<Leveled>>,
    level: usize,
    listener: std::net::TcpListener,
    service: T,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            log::error!("smartpool-hyper: the listener could not join the reactor: {e}");
            return;
        }
    };
    let mut closing = std::pin::pin!(pool.closing());
    loop {
        let stream = tokio::select! {
            biased;
            _ = closing.as_mut() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, say: pause rather than spin.
                    log::warn!("smartpool-hyper: accept failed: {e}");
                    let pause = tokio::time::sleep(std::time::Duration::from_millis(10));
                    tokio::select! {
                        _ = closing.as_mut() => return,
                        _ = pause => continue,
                    }
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let connection = connection(pool.clone(), level, stream, service.clone());
        // Refused once close began: the stream drops, closing it.
        let _ = pool
            .level(level)
            .exec_detached(smartpool::tokio_io(connection));
    }
}

/// A service [`Server::serve`] takes: a hyper service of requests with
/// hyper's body, whose futures, errors and response bodies cross threads
/// (its handlers run on the pool's workers). Every such service is one;
/// a tower service (an axum `Router`) is one through [`from_tower`].
pub trait HttpService:
    hyper::service::Service<
        Request<Incoming>,
        Response = Response<Self::ResBody>,
        Future: Send + 'static,
        Error: Into<BoxError> + Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
    /// The body of the service's responses.
    type ResBody: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static;
}

impl<S, B> HttpService for S
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type ResBody = B;
}

/// What a connection needs of its service: a [`LevelService`].
trait ConnService:
    hyper::service::Service<
        Request<Incoming>,
        Response = Response<Self::Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
    type Body: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static;
}

impl<S: HttpService> ConnService for LevelService<S> {
    type Body = ServerBody<S::ResBody>;
}

/// Serves one connection, HTTP/1 or HTTP/2, until it ends or close
/// begins; then shuts it down gracefully.
async fn connection<T: ConnService>(
    pool: Arc<Pool<Leveled>>,
    level: usize,
    stream: tokio::net::TcpStream,
    service: T,
) {
    let executor = LevelExecutor {
        pool: pool.clone(),
        level,
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(executor);
    builder.http1().timer(TokioTimer::new());
    builder.http2().timer(TokioTimer::new());
    let mut connection = std::pin::pin!(builder.serve_connection(TokioIo::new(stream), service));
    let closing = pool.closing();
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = closing => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = ended {
        log::debug!("smartpool-hyper: a connection ended with an error: {e}");
    }
}

/// The service a connection calls: runs the user's handler as a task at
/// the request's level, awaited without raising it.
#[derive(Clone)]
struct LevelService<S> {
    inner: S,
    pool: Arc<Pool<Leveled>>,
    classify: Arc<Classify>,
    limits: Arc<[Option<Arc<Semaphore>>]>,
    /// The connections' level: a handler of that level runs inline.
    connections: usize,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for LevelService<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    B: Send + 'static,
{
    type Response = Response<ServerBody<B>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        // User code (the classifier, the service's `call`): a panic there
        // answers 500 and leaves the connection, and its other HTTP/2
        // streams, alone.
        let called = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let level = (self.classify)(&request);
            (level, self.inner.call(request))
        }));
        let Ok((level, handler)) = called else {
            log::error!("smartpool-hyper: the classifier or the service's call panicked");
            return Box::pin(async { Ok(status(StatusCode::INTERNAL_SERVER_ERROR)) });
        };
        let Some(limit) = self.limits.get(level).cloned() else {
            log::error!(
                "smartpool-hyper: the classifier chose level {level}, but the pool has {}",
                self.limits.len()
            );
            return Box::pin(async { Ok(status(StatusCode::INTERNAL_SERVER_ERROR)) });
        };
        let (pool, inline) = (self.pool.clone(), level == self.connections);
        Box::pin(async move {
            let permit = match limit {
                Some(limit) => limit.acquire_owned().await.ok(),
                None => None,
            };
            if inline {
                // Already at its level: no task to spawn and wake.
                let handled = AssertUnwindSafe(handler).catch_unwind().await;
                drop(permit);
                return Ok(match handled {
                    Ok(handled) => respond(handled),
                    Err(_) => {
                        log::warn!("smartpool-hyper: a handler panicked");
                        status(StatusCode::INTERNAL_SERVER_ERROR)
                    }
                });
            }
            // The permit goes with the task: a request its client gave up
            // on (the connection dropped this future) holds it until the
            // abort below stops the handler.
            let handle = pool.level(level).exec(smartpool::tokio_io(async move {
                // Declared in this order, the handler drops before the
                // permit goes back.
                let _permit = permit;
                let handler = handler;
                handler.await
            }));
            let abort = AbortOnDrop(Some(handle.abort_handle()));
            let outcome = handle.without_inheritance().await;
            std::mem::forget(abort);
            Ok(match outcome {
                Ok(handled) => respond(handled),
                // Dropped by close (its level does not complete on close),
                // or refused once close began.
                Err(e) if e.is_cancelled() => status(StatusCode::SERVICE_UNAVAILABLE),
                Err(e) => {
                    log::warn!("smartpool-hyper: a handler {e}");
                    status(StatusCode::INTERNAL_SERVER_ERROR)
                }
            })
        })
    }
}

/// Aborts the handler's task if dropped: its request was given up on.
struct AbortOnDrop(Option<smartpool::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}

/// The handler's response, or 500 for its error.
fn respond<B, E: Into<BoxError>>(handled: Result<Response<B>, E>) -> Response<ServerBody<B>> {
    match handled {
        Ok(response) => response.map(Either::Left),
        Err(e) => {
            let e: BoxError = e.into();
            log::warn!("smartpool-hyper: a handler failed: {e}");
            status(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }
}

/// An empty response of `code`, from the server itself.
fn status<B>(code: StatusCode) -> Response<ServerBody<B>> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::new())));
    *response.status_mut() = code;
    response
}
