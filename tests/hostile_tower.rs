//! Hostile parties against the tower layers: a client trickling its
//! request's body in (a slowloris) against the server's `ShedLayer`, and a
//! response body whose frames are always ready against the client layer's
//! timeout.
//!
//! Asserts: an admitted request holds its slot no longer than the request
//! timeout, then is answered 408 (`DEADLINE_EXCEEDED` for gRPC) and its slot
//! released as the drop outcome, and a file's `server` table sets that
//! timeout and refuses a bad one by name; over loopback, 25 slowloris
//! connections against a limit of 10 leave at least 90% of the legitimate
//! requests served; a body always ready ends with `CallError::TimedOut` at
//! the layer's timeout, its slot released as an overload, drained in a loop
//! that never yields and served by hyper over HTTP/1 and HTTP/2.
//!
//! Printed (`--nocapture`): the share served under the attack, and what
//! checking the deadline before each frame costs a body.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/server_thread.rs"]
mod server_thread;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::Fixed;
use rheostat::config::LimitersConfig;
use rheostat::tower::{GrpcClassifier, RheostatLayer, ShedLayer};
use rheostat::{CallError, Limiter, Observer, Outcome};
use server_thread::{Runtime, ServerThread};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tower::{service_fn, Layer, Service, ServiceExt};

// ----- helpers ---------------------------------------------------------------

/// Every outcome the limiter recorded, with its latency.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(Outcome, Duration)>>>);

impl Observer for Seen {
    fn finished(&self, outcome: Outcome, latency: Duration, _in_flight: u32) {
        self.0.lock().unwrap().push((outcome, latency));
    }
}

impl Seen {
    fn outcomes(&self) -> Vec<Outcome> {
        self.0.lock().unwrap().iter().map(|(o, _)| *o).collect()
    }
    fn latencies(&self) -> Vec<Duration> {
        self.0.lock().unwrap().iter().map(|(_, l)| *l).collect()
    }
}

/// A limiter of `limit` whose outcomes `seen` records.
fn recorded(limit: u32, seen: &Seen) -> Arc<Limiter<Fixed>> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .observer(seen.clone())
            .build()
            .unwrap(),
    )
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Waits, at most 5 s, until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "still not {what} after 5 s");
        tokio::time::sleep(ms(2)).await;
    }
}

// ----- the server's request timeout -----------------------------------------

/// What `server` answers `request`, within a minute (of paused time).
async fn answered<S>(server: S, request: Request<()>) -> Response<String>
where
    S: Service<Request<()>, Response = Response<String>, Error = Infallible>,
{
    let answer = tokio::time::timeout(Duration::from_secs(60), server.oneshot(request)).await;
    answer.expect("no answer within a minute").unwrap()
}

/// A handler that never answers.
fn never(
) -> impl Service<Request<()>, Response = Response<String>, Error = Infallible, Future = impl Send> + Clone
{
    service_fn(|_: Request<()>| std::future::pending::<Result<Response<String>, Infallible>>())
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_never_answers_gives_its_slot_back_at_the_request_timeout() {
    let seen = Seen::default();
    let limiter = recorded(1, &seen);
    let server = ShedLayer::new(Arc::clone(&limiter))
        .request_timeout(Duration::from_secs(2))
        .unwrap()
        .layer(never());

    let start = tokio::time::Instant::now();
    let call = tokio::spawn(answered(server.clone(), Request::new(())));
    tokio::time::sleep(ms(1999)).await;
    assert_eq!(limiter.in_flight(), 1, "held until the timeout");
    let response = call.await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(response.body(), "");
    assert_eq!(limiter.in_flight(), 0);
    // A trickling client says nothing about the server: the drop outcome.
    assert_eq!(seen.outcomes(), [Outcome::Ignore]);

    // A gRPC call is answered as gRPC expects.
    let grpc = Request::builder()
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let response = answered(server, grpc).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "4");
    assert_eq!(limiter.in_flight(), 0);

    // Failing fast, the default timeout: 15 s.
    let start = tokio::time::Instant::now();
    let server = ShedLayer::new(Arc::clone(&limiter))
        .fail_fast()
        .layer(never());
    let response = answered(server, Request::new(())).await;
    assert_eq!(start.elapsed(), Duration::from_secs(15));
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_files_server_table_sets_the_request_timeout_and_refuses_a_bad_one_by_name() {
    let file = LimitersConfig::from_toml(
        r#"
        [limiters.api.policy]
        policy = "fixed"
        limit = 4
        [limiters.api.server]
        request_timeout = "3s"
        "#,
    )
    .unwrap();
    let limiter = Arc::new(file.build("api").unwrap());
    let table = file.limiters["api"].server.as_ref().unwrap();
    assert_eq!(table.request_timeout, Some(Duration::from_secs(3)));
    let server = table.apply(ShedLayer::new(limiter)).unwrap().layer(never());
    let start = tokio::time::Instant::now();
    let response = answered(server, Request::new(())).await;
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(start.elapsed(), Duration::from_secs(3));

    for value in ["0s", "400days"] {
        let text = format!(
            "[limiters.api.policy]\npolicy = \"fixed\"\nlimit = 4\n\
             [limiters.api.server]\nrequest_timeout = \"{value}\"\n"
        );
        let error = LimitersConfig::from_toml(&text).unwrap_err().to_string();
        assert!(error.starts_with("line 5: "), "{error}");
        assert!(error.contains("server.request_timeout"), "{error}");
        assert!(error.contains(&format!("found \"{value}\"")), "{error}");
        assert!(error.contains("at most 365 days"), "{error}");
    }
    let layer = ShedLayer::new(Arc::new(Limiter::new(Fixed::new(1).unwrap())));
    let error = layer.request_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(error.field(), "shed.request_timeout");
}

/// The test's request timeout: the slowloris test scales the default 15 s
/// down with the attack's other times.
const TRICKLE_TIMEOUT: Duration = Duration::from_millis(500);

/// One slowloris connection after another: `POST` with a `Content-Length`
/// of a million bytes, then a byte every `every`, on a new connection once
/// a byte cannot be written (the server closed the last one), as the
/// slowloris tool does. Never reads.
async fn slowloris(addr: SocketAddr, every: Duration) {
    loop {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            tokio::time::sleep(every).await;
            continue;
        };
        let head = "POST / HTTP/1.1\r\nhost: victim\r\ncontent-length: 1000000\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        loop {
            tokio::time::sleep(every).await;
            if stream.write_all(b"x").await.is_err() {
                break;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_body_loses_its_slot_at_the_request_timeout() {
    const LIMIT: u32 = 10;
    const ATTACKERS: u32 = 25;
    let seen = Seen::default();
    let limiter = Arc::new(
        ShedLayer::server_limiter(Fixed::new(LIMIT).unwrap())
            .observer(seen.clone())
            .build()
            .unwrap(),
    );
    let shed = ShedLayer::new(Arc::clone(&limiter))
        .request_timeout(TRICKLE_TIMEOUT)
        .unwrap();
    // The handler reads the whole body before it answers.
    let app = Router::new()
        .route(
            "/",
            post(|body: Bytes| async move { format!("{}", body.len()) }),
        )
        .layer(shed);
    let server = ServerThread::start(
        Runtime::CurrentThread,
        move |listener, stopped| async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        },
    )
    .unwrap();
    let addr = server.addr();

    // 25 connections, a byte every 2 to 3 s each, all starting at once.
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|i| tokio::spawn(slowloris(addr, ms(2000 + 40 * u64::from(i)))))
        .collect();
    until("every slot held by the attack", || {
        limiter.in_flight() == LIMIT
    })
    .await;

    // 40 legitimate requests a second for 8 s, each sent whether or not
    // the ones before it were answered.
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let (served, sent) = (Arc::new(AtomicUsize::new(0)), 320_usize);
    let mut legit = Vec::new();
    let mut every = tokio::time::interval(ms(25));
    for _ in 0..sent {
        every.tick().await;
        let (client, served) = (client.clone(), Arc::clone(&served));
        legit.push(tokio::spawn(async move {
            let request = Request::post(format!("http://{addr}/"))
                .body(Full::new(Bytes::from_static(b"hello")))
                .unwrap();
            let answer = tokio::time::timeout(Duration::from_secs(5), client.request(request));
            if let Ok(Ok(response)) = answer.await {
                if response.status() == StatusCode::OK {
                    served.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for request in legit {
        request.await.unwrap();
    }
    for attacker in &attackers {
        attacker.abort();
    }
    let served = served.load(Ordering::Relaxed);
    let cut = seen
        .outcomes()
        .iter()
        .filter(|outcome| **outcome == Outcome::Ignore)
        .count();
    println!(
        "{ATTACKERS} slowloris connections against a limit of {LIMIT}, request timeout \
         {TRICKLE_TIMEOUT:?}: {served} of {sent} legitimate requests served ({:.1}%), \
         {cut} trickling requests cut",
        100.0 * served as f64 / sent as f64
    );
    assert!(
        served * 10 >= sent * 9,
        "{served} of {sent} legitimate requests served under the attack"
    );
    assert!(cut >= LIMIT as usize, "the first wave was cut: {cut}");
    // What the attack still held gives its slot back within the timeout.
    until("every slot given back", || limiter.in_flight() == 0).await;
    drop(server);
}

// ----- a response body always ready -----------------------------------------

/// A body whose next frame (4 KiB) is always ready, counting the frames it
/// gave.
struct Forever(Arc<AtomicU64>);

/// The data of each of its frames.
static FRAME: [u8; 4096] = [0; 4096];

impl Body for Forever {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&FRAME)))))
    }
}

/// The client layer, with `timeout` if any, over a gRPC handler that
/// streams a body always ready: the call's outcome waits for its status,
/// which never comes, so the body holds the permit.
fn streaming(
    limiter: &Arc<Limiter<Fixed>>,
    timeout: Option<Duration>,
    frames: &Arc<AtomicU64>,
) -> impl Service<
    Request<Incoming>,
    Response = Response<impl Body<Data = Bytes, Error = CallError<Infallible>> + Send>,
    Error = CallError<Infallible>,
    Future = impl Send,
> + Clone
       + Send {
    let frames = Arc::clone(frames);
    let handler = service_fn(move |_: Request<Incoming>| {
        let frames = Arc::clone(&frames);
        async move {
            let mut response = Response::new(Forever(frames));
            response
                .headers_mut()
                .insert("content-type", "application/grpc".parse().unwrap());
            Ok::<_, Infallible>(response)
        }
    });
    let layer = RheostatLayer::new(Arc::clone(limiter)).classify(GrpcClassifier::new());
    match timeout {
        Some(after) => layer.timeout(after).unwrap().layer(handler),
        None => layer.layer(handler),
    }
}

/// Drains `body` in a loop that never yields (each frame is ready), for
/// at most `frames` frames and about `at_most`: how many it read, and the
/// error it ended with.
async fn drain<B: Body + Unpin>(
    body: &mut B,
    frames: u64,
    at_most: Duration,
) -> (u64, Option<B::Error>) {
    let start = Instant::now();
    let mut read = 0;
    while read < frames && (read % 4096 != 0 || start.elapsed() < at_most) {
        match body.frame().await {
            Some(Ok(_)) => read += 1,
            Some(Err(error)) => return (read, Some(error)),
            None => break,
        }
    }
    (read, None)
}

#[tokio::test(flavor = "current_thread")]
async fn an_always_ready_body_drained_without_yielding_ends_at_the_timeout() {
    let seen = Seen::default();
    let limiter = recorded(1, &seen);
    let frames = Arc::new(AtomicU64::new(0));
    let handler = service_fn(|_: Request<()>| {
        let frames = Arc::clone(&frames);
        async move {
            let mut response = Response::new(Forever(frames));
            response
                .headers_mut()
                .insert("content-type", "application/grpc".parse().unwrap());
            Ok::<_, Infallible>(response)
        }
    });
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(GrpcClassifier::new())
        .timeout(ms(200))
        .unwrap()
        .layer(handler);

    let start = Instant::now();
    let mut body = client.oneshot(Request::new(())).await.unwrap().into_body();
    assert!(body.holds_permit());
    // Without the deadline checked before the inner body is polled, this
    // reads on for as long as it is let.
    let (read, error) = drain(&mut body, u64::MAX, Duration::from_secs(5)).await;
    let elapsed = start.elapsed();
    assert!(
        matches!(error, Some(CallError::TimedOut(after)) if after == ms(200)),
        "{read} frames in {elapsed:?}, then {error:?}"
    );
    assert!(elapsed >= ms(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert!(!body.holds_permit());
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(seen.outcomes(), [Outcome::Overload]);
    assert!(body.frame().await.is_none(), "ended");
}

/// Serves the client layer over `streaming` on loopback, HTTP/2 if `h2`,
/// reads the body of one request to its end, and checks that it ended with
/// an error at the layer's 200 ms timeout, its slot released as an
/// overload.
async fn always_ready_over_http(h2: bool) {
    let seen = Seen::default();
    let limiter = recorded(1, &seen);
    let frames = Arc::new(AtomicU64::new(0));
    let service = streaming(&limiter, Some(ms(200)), &frames);
    let server = ServerThread::start(
        Runtime::CurrentThread,
        move |listener, mut stopped| async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let stream = tokio::select! {
                    _ = &mut stopped => return,
                    accepted = listener.accept() => accepted.unwrap().0,
                };
                let service = service.clone();
                let service = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    async move { service.oneshot(request).await }
                });
                let io = TokioIo::new(stream);
                tokio::spawn(async move {
                    if h2 {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(io, service)
                            .await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .await;
                    }
                });
            }
        },
    )
    .unwrap();

    let io = TokioIo::new(TcpStream::connect(server.addr()).await.unwrap());
    let request = Request::post("/")
        .header("host", "server")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let start = Instant::now();
    let response = if h2 {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(connection);
        sender.send_request(request).await.unwrap()
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(connection);
        sender.send_request(request).await.unwrap()
    };
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut bytes = 0_usize;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match body.frame().await {
                Some(Ok(frame)) => bytes += frame.data_ref().map_or(0, Bytes::len),
                Some(Err(error)) => return Some(error),
                None => return None,
            }
        }
    })
    .await;
    let elapsed = start.elapsed();
    let produced = frames.load(Ordering::Relaxed);
    println!(
        "HTTP/{}: {produced} frames produced, {bytes} bytes read, the body ended after \
         {elapsed:?}, the slot released after {:?}",
        if h2 { 2 } else { 1 },
        seen.latencies().first()
    );
    let Ok(ended) = ended else {
        panic!("the body still streams 10 s past its 200 ms timeout ({produced} frames)");
    };
    assert!(ended.is_some(), "the body ended with an error, not cleanly");
    assert!(elapsed >= ms(200), "{elapsed:?}");
    // The server let go at the deadline; the client may take longer to
    // read what the sockets' buffers still held.
    until("the slot given back", || limiter.in_flight() == 0).await;
    assert_eq!(seen.outcomes(), [Outcome::Overload]);
    let held = seen.latencies()[0];
    assert!(
        held >= ms(200) && held < Duration::from_secs(2),
        "held {held:?}"
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_ready_body_served_over_http1_ends_at_the_timeout_and_frees_its_slot() {
    always_ready_over_http(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_ready_body_served_over_http2_ends_at_the_timeout_and_frees_its_slot() {
    always_ready_over_http(true).await;
}

/// What checking the deadline before each frame costs: the same body
/// drained through the layer without a timeout and with one that does not
/// run out, the fastest of five rounds each. Printed, not asserted (a
/// debug build, on a shared machine).
#[tokio::test(flavor = "current_thread")]
async fn checking_the_deadline_before_each_frame_costs_little() {
    const FRAMES: u64 = 1_000_000;
    let mut fastest = [f64::INFINITY; 2];
    for _ in 0..5 {
        for (i, timeout) in [None, Some(Duration::from_secs(3600))]
            .into_iter()
            .enumerate()
        {
            let limiter = recorded(1, &Seen::default());
            let frames = Arc::new(AtomicU64::new(0));
            let handler = service_fn(|_: Request<()>| {
                let frames = Arc::clone(&frames);
                async move { Ok::<_, Infallible>(Response::new(Forever(frames))) }
            });
            let layer = RheostatLayer::new(limiter).classify(GrpcClassifier::new());
            let layer = match timeout {
                Some(after) => layer.timeout(after).unwrap(),
                None => layer,
            };
            let mut body = layer
                .layer(handler)
                .oneshot(Request::new(()))
                .await
                .unwrap()
                .into_body();
            assert!(body.holds_permit());
            let start = Instant::now();
            let (read, error) = drain(&mut body, FRAMES, Duration::MAX).await;
            assert_eq!((read, error.is_none()), (FRAMES, true));
            let per_frame = start.elapsed().as_nanos() as f64 / FRAMES as f64;
            fastest[i] = fastest[i].min(per_frame);
        }
    }
    let clock = {
        let start = Instant::now();
        for _ in 0..FRAMES {
            std::hint::black_box(tokio::time::Instant::now());
        }
        start.elapsed().as_nanos() as f64 / FRAMES as f64
    };
    println!(
        "a frame through the layer's body: {:.1} ns without a timeout, {:.1} ns with one \
         ({:+.1} ns); one read of tokio's clock: {clock:.1} ns",
        fastest[0],
        fastest[1],
        fastest[1] - fastest[0]
    );
}
