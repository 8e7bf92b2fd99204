//! A real server on 127.0.0.1: requests run at their route's level, over
//! HTTP/1 and HTTP/2; a level's bound holds; close answers what close
//! keeps and 503s the rest. Each test ends in a bounded number of
//! requests, with latches, not sleeps.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use smartpool::{Leveled, OwnedPool, Pool};
use smartpool_hyper::{HttpService, ServeError, Server, Serving};

/// The longest any step of a test waits.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// A pool of two levels: 0 completes on close, 1 does not.
fn pool() -> OwnedPool<Leveled> {
    smartpool::Builder::new()
        .levels(2)
        .threads(2)
        .complete_on_close(0, true)
        .complete_on_close(1, false)
        .build()
        .unwrap()
}

/// The level of the task running this handler.
fn level_here() -> usize {
    Pool::<Leveled>::current()
        .and_then(|pool| pool.current_key())
        .expect("a handler runs as a pool task")
}

/// Routes: `/health` at level 0, the rest at level 1.
fn by_route(request: &Request<Incoming>) -> usize {
    usize::from(request.uri().path() != "/health")
}

/// A GET over HTTP/1.1 on a fresh connection: the status and the body.
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    // A regression fails here instead of hanging the run.
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let status = reply[9..12].parse().unwrap();
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// Serves `service` on a fresh port of 127.0.0.1, with the routes' levels
/// (`by_route`) and what `settings` adds: the server and its address.
fn serve(
    owned: &OwnedPool<Leveled>,
    settings: impl FnOnce(Server) -> Server,
    service: impl HttpService,
) -> (Serving, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = settings(Server::new(owned.pool.clone()).classify(by_route));
    let serving = server.serve(listener, service).unwrap();
    let addr = serving.local_addr();
    (serving, addr)
}

/// Answers with the level its handler ran at.
async fn report_level(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from(
        level_here().to_string(),
    ))))
}

#[test]
fn each_request_runs_at_its_routes_level_over_http1() {
    let owned = pool();
    let (serving, addr) = serve(
        &owned,
        |server| server,
        hyper::service::service_fn(report_level),
    );
    assert_eq!(get(addr, "/health"), (200, "0".into()));
    assert_eq!(get(addr, "/batch"), (200, "1".into()));
    owned.close().wait();
    futures::executor::block_on(serving);
}

#[test]
fn each_request_runs_at_its_routes_level_over_http2() {
    let owned = pool();
    let (serving, addr) = serve(
        &owned,
        |server| server,
        hyper::service::service_fn(report_level),
    );
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let levels = client.block_on(async move {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
        let connection = tokio::spawn(connection);
        let mut levels = Vec::new();
        for path in ["/health", "/batch"] {
            let request = Request::get(format!("http://{addr}{path}"))
                .body(Empty::<Bytes>::new())
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.version(), hyper::Version::HTTP_2);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            levels.push(String::from_utf8(body.to_vec()).unwrap());
        }
        // Hang up: the server's connection ends before close.
        drop(sender);
        connection.await.unwrap().unwrap();
        levels
    });
    assert_eq!(levels, ["0", "1"]);
    owned.close().wait();
    futures::executor::block_on(serving);
}

/// Level 1 allows one request in flight: four concurrent requests never
/// run two handlers at once, and all four are answered.
#[test]
fn a_levels_bound_holds() {
    let owned = pool();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (running.clone(), most.clone());
    let service = hyper::service::service_fn(move |_: Request<Incoming>| {
        let (running, most) = (r.clone(), m.clone());
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("done"))))
        }
    });
    let (serving, addr) = serve(&owned, |server| server.max_in_flight(1, 1), service);
    let clients: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || get(addr, "/batch")))
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap(), (200, "done".into()));
    }
    assert_eq!(most.load(Ordering::SeqCst), 1);
    owned.close().wait();
    futures::executor::block_on(serving);
}

/// Close with a request in flight at each level: the one at the
/// `complete_on_close` level is answered, the other gets 503, and close
/// and the accept loop end.
#[test]
fn close_answers_what_it_keeps_and_503s_the_rest() {
    let owned = pool();
    let (started, handlers) = mpsc::channel::<usize>();
    let (open, gate) = futures::channel::oneshot::channel::<()>();
    let gate = Arc::new(Mutex::new(Some(gate)));
    let service = hyper::service::service_fn(move |_: Request<Incoming>| {
        let (started, gate) = (started.clone(), gate.clone());
        async move {
            let level = level_here();
            started.send(level).unwrap();
            if level == 0 {
                let gate = gate.lock().unwrap().take().unwrap();
                gate.await.unwrap();
            } else {
                // Parks until close drops it.
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("kept"))))
        }
    });
    let (serving, addr) = serve(&owned, |server| server, service);
    let kept = std::thread::spawn(move || get(addr, "/health"));
    let dropped = std::thread::spawn(move || get(addr, "/batch"));
    let mut levels = [
        handlers.recv_timeout(LIMIT).unwrap(),
        handlers.recv_timeout(LIMIT).unwrap(),
    ];
    levels.sort();
    assert_eq!(levels, [0, 1]);
    let pool = owned.pool.clone();
    let closer = std::thread::spawn(move || owned.close().wait());
    futures::executor::block_on(pool.closing());
    assert_eq!(dropped.join().unwrap().0, 503);
    open.send(()).unwrap();
    assert_eq!(kept.join().unwrap(), (200, "kept".into()));
    closer.join().unwrap();
    futures::executor::block_on(serving);
}

#[test]
fn settings_out_of_range_are_errors() {
    let owned = pool();
    let service = hyper::service::service_fn(report_level);
    let listener = || TcpListener::bind("127.0.0.1:0").unwrap();
    let server = || Server::new(owned.pool.clone());
    assert!(matches!(
        server().connection_level(2).serve(listener(), service),
        Err(ServeError::NoSuchLevel {
            level: 2,
            levels: 2,
            ..
        })
    ));
    assert!(matches!(
        server().max_in_flight(5, 1).serve(listener(), service),
        Err(ServeError::NoSuchLevel { level: 5, .. })
    ));
    assert!(matches!(
        server().max_in_flight(1, 0).serve(listener(), service),
        Err(ServeError::ZeroBound { level: 1 })
    ));
    owned.close().wait();
}

/// A tower service (what an axum `Router` is), served through
/// `from_tower`: its futures run at their routes' levels too.
#[derive(Clone)]
struct Tower;

impl tower_service::Service<Request<Incoming>> for Tower {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        Box::pin(report_level(request))
    }
}

#[test]
fn a_tower_service_runs_at_its_routes_levels() {
    let owned = pool();
    let (serving, addr) = serve(&owned, |server| server, smartpool_hyper::from_tower(Tower));
    assert_eq!(get(addr, "/health"), (200, "0".into()));
    assert_eq!(get(addr, "/api"), (200, "1".into()));
    owned.close().wait();
    futures::executor::block_on(serving);
}

/// A panic in the service's `call`, in a handler at the connection's
/// level (run inline) or at another level (a task) answers 500; the
/// server goes on.
#[test]
fn a_panicking_handler_answers_500() {
    let owned = pool();
    let service = hyper::service::service_fn(|request: Request<Incoming>| {
        let path = request.uri().path().to_string();
        assert_ne!(path, "/call", "a panic in call");
        async move {
            assert!(!path.starts_with("/boom"), "a panic in the handler");
            report_level(request).await
        }
    });
    let (serving, addr) = serve(
        &owned,
        |server| server.classify(|request| usize::from(request.uri().path() != "/boom-health")),
        service,
    );
    for path in ["/call", "/boom-health", "/boom"] {
        assert_eq!(get(addr, path).0, 500, "{path}");
    }
    assert_eq!(get(addr, "/fine"), (200, "1".into()));
    owned.close().wait();
    futures::executor::block_on(serving);
}

/// A request whose client hangs up has its handler aborted, and its place
/// under the level's bound comes back: the next request runs.
#[test]
fn a_request_given_up_on_frees_its_place() {
    let owned = pool();
    let (started, handlers) = mpsc::channel::<()>();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (started, dropped) = (started.clone(), d.clone());
        async move {
            if request.uri().path() == "/stuck" {
                struct Count(Arc<AtomicUsize>);
                impl Drop for Count {
                    fn drop(&mut self) {
                        self.0.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let _count = Count(dropped);
                started.send(()).unwrap();
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("next"))))
        }
    });
    let (serving, addr) = serve(&owned, |server| server.max_in_flight(1, 1), service);
    let mut stuck = TcpStream::connect(addr).unwrap();
    write!(stuck, "GET /stuck HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    handlers.recv_timeout(LIMIT).unwrap();
    drop(stuck);
    assert_eq!(get(addr, "/next"), (200, "next".into()));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the stuck handler was dropped"
    );
    owned.close().wait();
    futures::executor::block_on(serving);
}
