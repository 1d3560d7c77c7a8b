//! The server-side layer, `ShedLayer`, over real loopback HTTP: axum (and
//! one plain hyper) servers on 127.0.0.1, called with hyper's client or a
//! bare TCP stream.
//!
//! Asserts: a refused request is answered 503 (or 429) with a `Retry-After`
//! in seconds — the layer's default, or an open breaker's time to its next
//! probe — and never reaches the handler; a 4xx is not counted against the
//! server, a 5xx is; waiting requests are served newest first (and, with
//! priorities, most critical first); a client that goes away mid-request or
//! while waiting gives its slot back; a burst gets no more requests inside
//! the handler than the limit, the rest waiting or shed.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::algorithms::Fixed;
use rheostat::priority::{Class, Priorities, Priority};
use rheostat::tower::{lower_only, ShedLayer};
use rheostat::{limiter::QueueOrder, Limiter};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::layer::layer_fn;
use tower::{Layer, Service, ServiceExt};

// ----- helpers ---------------------------------------------------------------

/// Serves `app` on 127.0.0.1 until the test's runtime ends.
async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// What the client saw of one response.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    retry_after: Option<u64>,
    body: Bytes,
}

/// GETs `path` with `headers`; a `Retry-After` must be whole seconds.
async fn fetch_with(
    client: &HttpClient,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let retry_after = response.headers().get("retry-after").map(|value| {
        let text = value.to_str().unwrap();
        text.parse::<u64>()
            .unwrap_or_else(|_| panic!("Retry-After {text:?} is not whole seconds"))
    });
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        retry_after,
        body,
    }
}

async fn fetch(client: &HttpClient, addr: SocketAddr, path: &str) -> Answer {
    fetch_with(client, addr, path, &[]).await
}

/// Waits, at most 5 s, until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "still not {what} after 5 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A middleware outside the shedding layer that counts the requests whose
/// response future has returned `Pending` once: a request held by the
/// handler, or one waiting in the limiter's queue (its future polled, so
/// its place in the queue taken).
#[derive(Clone)]
struct CountPending<S> {
    inner: S,
    pending: Arc<AtomicUsize>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, Req> Service<Req> for CountPending<S>
where
    S: Service<Req>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let mut future = Box::pin(self.inner.call(request));
        let pending = Arc::clone(&self.pending);
        let mut counted = false;
        Box::pin(std::future::poll_fn(move |cx| {
            let poll = future.as_mut().poll(cx);
            if poll.is_pending() && !counted {
                counted = true;
                pending.fetch_add(1, Ordering::SeqCst);
            }
            poll
        }))
    }
}

fn count_pending<S>(
    pending: &Arc<AtomicUsize>,
) -> impl Layer<S, Service = CountPending<S>> + Clone + Send + Sync + 'static {
    let pending = Arc::clone(pending);
    layer_fn(move |inner| CountPending {
        inner,
        pending: Arc::clone(&pending),
    })
}

/// Counts its drops.
struct DropGuard(Arc<AtomicUsize>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

// ----- refusals --------------------------------------------------------------

/// A server of two routes: `/hold`, which waits for `gate`, and `/fast`;
/// each counts its calls in `calls`.
fn hold_and_fast(calls: &Arc<AtomicUsize>, gate: &Arc<Semaphore>) -> Router {
    let (held_calls, fast_calls, gate) = (Arc::clone(calls), Arc::clone(calls), Arc::clone(gate));
    Router::new()
        .route(
            "/hold",
            get(move || async move {
                held_calls.fetch_add(1, Ordering::SeqCst);
                gate.acquire().await.unwrap().forget();
                "held"
            }),
        )
        .route(
            "/fast",
            get(move || async move {
                fast_calls.fetch_add(1, Ordering::SeqCst);
                "fast"
            }),
        )
}

#[tokio::test(flavor = "current_thread")]
async fn a_refused_request_gets_a_503_with_retry_after_and_never_reaches_the_handler() {
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let app = hold_and_fast(&calls, &gate).layer(ShedLayer::new(Arc::clone(&limiter)).fail_fast());
    let addr = serve(app).await;
    let client = client();

    let held = tokio::spawn({
        let client = client.clone();
        async move { fetch(&client, addr, "/hold").await }
    });
    until("held", || calls.load(Ordering::SeqCst) == 1).await;
    assert_eq!(limiter.in_flight(), 1);

    for _ in 0..3 {
        let refused = fetch(&client, addr, "/fast").await;
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.retry_after, Some(1));
        assert!(refused.body.is_empty());
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "a refusal reached the handler"
    );

    gate.add_permits(1);
    let held = held.await.unwrap();
    assert_eq!(
        (held.status, &held.body[..]),
        (StatusCode::OK, &b"held"[..])
    );
    let served = fetch(&client, addr, "/fast").await;
    assert_eq!((served.status, served.retry_after), (StatusCode::OK, None));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_429_and_its_own_retry_after_when_configured() {
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let layer = ShedLayer::new(Arc::clone(&limiter))
        .fail_fast()
        .too_many_requests()
        .retry_after(Duration::from_millis(2500));
    let addr = serve(hold_and_fast(&calls, &gate).layer(layer)).await;
    let client = client();

    let held = tokio::spawn({
        let client = client.clone();
        async move { fetch(&client, addr, "/hold").await }
    });
    until("held", || calls.load(Ordering::SeqCst) == 1).await;
    let refused = fetch(&client, addr, "/fast").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.retry_after, Some(3), "2.5 s, rounded up");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    gate.add_permits(1);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
}

#[tokio::test(flavor = "current_thread")]
async fn a_4xx_is_no_fault_of_the_server_a_5xx_is_and_an_open_breaker_says_when_to_come_back() {
    let breaker = Breaker::new(BreakerConfig {
        cooldown: Cooldown::Fixed(Duration::from_secs(7)),
        cooldown_jitter: 0.0,
        ..BreakerConfig::recommended()
    })
    .unwrap();
    let limiter = Arc::new(Limiter::new(breaker));
    let calls = Arc::new(AtomicUsize::new(0));
    let (missing, failing) = (Arc::clone(&calls), Arc::clone(&calls));
    let app = Router::new()
        .route(
            "/missing",
            get(move || async move {
                missing.fetch_add(1, Ordering::SeqCst);
                StatusCode::NOT_FOUND
            }),
        )
        .route(
            "/failing",
            get(move || async move {
                failing.fetch_add(1, Ordering::SeqCst);
                StatusCode::INTERNAL_SERVER_ERROR
            }),
        )
        // Waiting (the default): an open breaker is refused at once all
        // the same.
        .layer(ShedLayer::new(Arc::clone(&limiter)).retry_after(Duration::from_secs(60)));
    let addr = serve(app).await;
    let client = client();

    // Ten failures in a row would open the breaker: twelve 404s do not.
    for _ in 0..12 {
        assert_eq!(
            fetch(&client, addr, "/missing").await.status,
            StatusCode::NOT_FOUND
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 12);

    // 500s do, and the refusal carries the breaker's cooldown.
    let mut failures = 0;
    let refused = loop {
        let answer = fetch(&client, addr, "/failing").await;
        if answer.status != StatusCode::INTERNAL_SERVER_ERROR {
            break answer;
        }
        failures += 1;
        assert!(failures <= 40, "the breaker never opened");
    };
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        refused.retry_after,
        Some(7),
        "the breaker's 7 s, not the layer's 60"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 12 + failures);
    let again = fetch(&client, addr, "/missing").await;
    assert_eq!(again.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 12 + failures);
}

#[tokio::test(flavor = "current_thread")]
async fn a_hyper_server_with_a_full_body_is_shed_the_same() {
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let shed = ShedLayer::new(Arc::clone(&limiter))
        .fail_fast()
        .layer(tower::service_fn(move |_: Request<Incoming>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("served")))) }
        }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let shed = shed.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request| shed.clone().oneshot(request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    let client = client();

    let busy = limiter.try_acquire().unwrap();
    let refused = fetch(&client, addr, "/").await;
    assert_eq!(
        (refused.status, refused.retry_after),
        (StatusCode::SERVICE_UNAVAILABLE, Some(1))
    );
    assert!(refused.body.is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    drop(busy);
    let served = fetch(&client, addr, "/").await;
    assert_eq!(
        (served.status, &served.body[..]),
        (StatusCode::OK, &b"served"[..])
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

// ----- waiting ---------------------------------------------------------------

/// The order in which requests 1, 2 and 3 (of the priorities given, if
/// any), queued in that order behind request 0, reach the handler once 0 is
/// done, under a limit of one.
async fn serving_order(limiter: Limiter<Fixed>, priorities: [Option<Priority>; 3]) -> Vec<u32> {
    let limiter = Arc::new(limiter);
    let order = Arc::new(Mutex::new(Vec::new()));
    let gate = Arc::new(Semaphore::new(0));
    let pending = Arc::new(AtomicUsize::new(0));
    let (seen, held) = (Arc::clone(&order), Arc::clone(&gate));
    let app = Router::new()
        .route(
            "/",
            get(move |headers: HeaderMap| async move {
                let id: u32 = headers["x-id"].to_str().unwrap().parse().unwrap();
                seen.lock().unwrap().push(id);
                if id == 0 {
                    held.acquire().await.unwrap().forget();
                }
                "ok"
            }),
        )
        .layer(
            ShedLayer::new(Arc::clone(&limiter)).classify_request(|request: &Request<Body>| {
                let value = request.headers().get("x-priority")?.to_str().ok()?;
                Priority::parse(value).map(Class::from)
            }),
        )
        .layer(count_pending(&pending));
    let addr = serve(app).await;
    let client = client();

    let mut answers = Vec::new();
    for (id, priority) in [None].into_iter().chain(priorities).enumerate() {
        let client = client.clone();
        answers.push(tokio::spawn(async move {
            let id = id.to_string();
            let mut headers = vec![("x-id", id.as_str())];
            if let Some(priority) = priority {
                headers.push(("x-priority", priority.as_str()));
            }
            fetch_with(&client, addr, "/", &headers).await.status
        }));
        // Held by the handler (0) or waiting in the queue (the others).
        until("pending", || pending.load(Ordering::SeqCst) == id + 1).await;
    }
    assert_eq!(*order.lock().unwrap(), [0], "only 0 is in the handler");
    assert_eq!(limiter.in_flight(), 1);

    gate.add_permits(1);
    for answer in answers {
        assert_eq!(answer.await.unwrap(), StatusCode::OK);
    }
    assert_eq!(limiter.in_flight(), 0);
    let order = order.lock().unwrap().clone();
    order
}

#[tokio::test(flavor = "current_thread")]
async fn waiting_requests_are_served_newest_first() {
    let lifo = ShedLayer::server_limiter(Fixed::new(1).unwrap())
        .max_wait(Duration::from_secs(10))
        .build()
        .unwrap();
    assert_eq!(serving_order(lifo, [None; 3]).await, [0, 3, 2, 1]);

    // The same server with a FIFO queue: the order is the queue's.
    let fifo = ShedLayer::server_limiter(Fixed::new(1).unwrap())
        .queue(QueueOrder::Fifo, 16)
        .max_wait(Duration::from_secs(10))
        .build()
        .unwrap();
    assert_eq!(serving_order(fifo, [None; 3]).await, [0, 1, 2, 3]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_priority_header_puts_critical_requests_first_in_the_queue() {
    let limiter = ShedLayer::server_limiter(Fixed::new(1).unwrap())
        .max_wait(Duration::from_secs(10))
        .priorities(Priorities::default())
        .build()
        .unwrap();
    let classes = [
        Some(Priority::Sheddable),
        Some(Priority::Critical),
        Some(Priority::Sheddable),
    ];
    // The critical one first, then the sheddable ones, newest first.
    assert_eq!(serving_order(limiter, classes).await, [0, 2, 3, 1]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_request_waits_no_longer_than_max_wait() {
    let limiter = Arc::new(
        ShedLayer::server_limiter(Fixed::new(1).unwrap())
            .max_wait(Duration::from_millis(20))
            .build()
            .unwrap(),
    );
    let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let addr =
        serve(hold_and_fast(&calls, &gate).layer(ShedLayer::new(Arc::clone(&limiter)))).await;
    let client = client();

    let held = tokio::spawn({
        let client = client.clone();
        async move { fetch(&client, addr, "/hold").await }
    });
    until("held", || calls.load(Ordering::SeqCst) == 1).await;
    let refused = fetch(&client, addr, "/fast").await;
    assert_eq!(
        (refused.status, refused.retry_after),
        (StatusCode::SERVICE_UNAVAILABLE, Some(1))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    gate.add_permits(1);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
}

// ----- cancellation ----------------------------------------------------------

#[tokio::test(flavor = "current_thread")]
async fn a_client_that_goes_away_gives_its_slot_back_in_the_handler_or_in_the_queue() {
    let limiter = Arc::new(
        ShedLayer::server_limiter(Fixed::new(1).unwrap())
            .max_wait(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let (entered, dropped, pending) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (inside, gone) = (Arc::clone(&entered), Arc::clone(&dropped));
    let app = Router::new()
        .route(
            "/hang",
            get(move || async move {
                let _guard = DropGuard(gone);
                inside.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                "never"
            }),
        )
        .route("/", get(|| async { "ok" }))
        .layer(ShedLayer::new(Arc::clone(&limiter)))
        .layer(count_pending(&pending));
    let addr = serve(app).await;

    let request = b"GET /hang HTTP/1.1\r\nhost: localhost\r\n\r\n";
    let mut first = TcpStream::connect(addr).await.unwrap();
    first.write_all(request).await.unwrap();
    until("in the handler", || entered.load(Ordering::SeqCst) == 1).await;
    assert_eq!(limiter.in_flight(), 1);
    let mut second = TcpStream::connect(addr).await.unwrap();
    second.write_all(request).await.unwrap();
    until("waiting", || pending.load(Ordering::SeqCst) == 2).await;

    // The waiting client goes away: it leaves the queue…
    drop(second);
    // …so when the one in the handler goes away too, its slot is not handed
    // to a request nobody waits for.
    drop(first);
    until("handler dropped", || dropped.load(Ordering::SeqCst) == 1).await;
    until("slot released", || limiter.in_flight() == 0).await;
    assert_eq!(entered.load(Ordering::SeqCst), 1);

    let served = fetch(&client(), addr, "/").await;
    assert_eq!(served.status, StatusCode::OK);
    assert_eq!(entered.load(Ordering::SeqCst), 1);
    assert_eq!(limiter.in_flight(), 0);
}

// ----- bursts ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_gets_no_more_than_the_limit_inside_the_handler_the_rest_wait_or_are_shed() {
    const LIMIT: usize = 4;
    const WAITERS: usize = 4;
    const BURST: usize = 40;
    let limiter = Arc::new(
        ShedLayer::server_limiter(Fixed::new(LIMIT as u32).unwrap())
            .queue(QueueOrder::Lifo, WAITERS)
            .max_wait(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let (inside, most, gate) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Semaphore::new(0)),
    );
    let (now, peak, held) = (Arc::clone(&inside), Arc::clone(&most), Arc::clone(&gate));
    let app = Router::new()
        .route(
            "/",
            get(move || async move {
                let here = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(here, Ordering::SeqCst);
                held.acquire().await.unwrap().forget();
                now.fetch_sub(1, Ordering::SeqCst);
                "ok"
            }),
        )
        .layer(ShedLayer::new(Arc::clone(&limiter)));
    let addr = serve(app).await;
    let client = client();

    let shed = Arc::new(AtomicUsize::new(0));
    let answers: Vec<_> = (0..BURST)
        .map(|_| {
            let (client, shed) = (client.clone(), Arc::clone(&shed));
            tokio::spawn(async move {
                let answer = fetch(&client, addr, "/").await;
                if answer.status == StatusCode::SERVICE_UNAVAILABLE {
                    assert_eq!(answer.retry_after, Some(1));
                    shed.fetch_add(1, Ordering::SeqCst);
                }
                answer.status
            })
        })
        .collect();
    // The limit inside, the queue full, the rest refused at once. (A call
    // admitted reaches its handler a moment after its permit is taken: wait
    // for it; `most` below catches one too many at any moment.)
    until("shed", || {
        shed.load(Ordering::SeqCst) == BURST - LIMIT - WAITERS
    })
    .await;
    until("the limit inside", || {
        inside.load(Ordering::SeqCst) == LIMIT
    })
    .await;
    assert_eq!(limiter.in_flight(), LIMIT as u32);

    gate.add_permits(BURST);
    let mut served = 0;
    for answer in answers {
        if answer.await.unwrap() == StatusCode::OK {
            served += 1;
        }
    }
    assert_eq!(served, LIMIT + WAITERS, "every waiter served in the end");
    assert_eq!(shed.load(Ordering::SeqCst), BURST - LIMIT - WAITERS);
    assert_eq!(most.load(Ordering::SeqCst), LIMIT);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_fast_a_burst_is_cut_to_the_limit() {
    const LIMIT: usize = 3;
    const BURST: usize = 30;
    let limiter = Arc::new(Limiter::new(Fixed::new(LIMIT as u32).unwrap()));
    let (inside, most, gate) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Semaphore::new(0)),
    );
    let (now, peak, held) = (Arc::clone(&inside), Arc::clone(&most), Arc::clone(&gate));
    let app = Router::new()
        .route(
            "/",
            get(move || async move {
                let here = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(here, Ordering::SeqCst);
                held.acquire().await.unwrap().forget();
                now.fetch_sub(1, Ordering::SeqCst);
                "ok"
            }),
        )
        .layer(ShedLayer::new(Arc::clone(&limiter)).fail_fast());
    let addr = serve(app).await;
    let client = client();

    let shed = Arc::new(AtomicUsize::new(0));
    let answers: Vec<_> = (0..BURST)
        .map(|_| {
            let (client, shed) = (client.clone(), Arc::clone(&shed));
            tokio::spawn(async move {
                let status = fetch(&client, addr, "/").await.status;
                if status == StatusCode::SERVICE_UNAVAILABLE {
                    shed.fetch_add(1, Ordering::SeqCst);
                }
                status
            })
        })
        .collect();
    until("shed", || shed.load(Ordering::SeqCst) == BURST - LIMIT).await;
    gate.add_permits(BURST);
    let mut served = 0;
    for answer in answers {
        if answer.await.unwrap() == StatusCode::OK {
            served += 1;
        }
    }
    assert_eq!((served, most.load(Ordering::SeqCst)), (LIMIT, LIMIT));
    assert_eq!(limiter.in_flight(), 0);
}

// ----- classes: what a caller writes is not what it is owed ------------------

/// A limit of 4 with half of it kept for `critical` requests: two requests
/// of the least critical class fill what is not kept.
fn half_kept_for_critical() -> Arc<Limiter<Fixed>> {
    let priorities = Priorities::default()
        .share(Priority::Critical, 0.5)
        .unwrap();
    Arc::new(
        Limiter::builder(Fixed::new(4).unwrap())
            .priorities(priorities)
            .build()
            .unwrap(),
    )
}

/// The class a plain `x-priority` header asks for.
fn asked(request: &Request<Body>) -> Option<Class> {
    Priority::parse(request.headers().get("x-priority")?).map(Class::from)
}

/// GETs `/hold` at `addr` with `headers`: the request still in the handler
/// (its answer to come once `gate` opens), or, refused, `None`.
async fn hold(
    client: &HttpClient,
    addr: SocketAddr,
    headers: &[(&'static str, &str)],
    calls: &Arc<AtomicUsize>,
) -> Option<tokio::task::JoinHandle<Answer>> {
    let before = calls.load(Ordering::SeqCst);
    let headers: Vec<(&'static str, String)> = headers
        .iter()
        .map(|(name, value)| (*name, (*value).to_owned()))
        .collect();
    let client = client.clone();
    let task = tokio::spawn(async move {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        fetch_with(&client, addr, "/hold", &headers).await
    });
    until("held or answered", || {
        calls.load(Ordering::SeqCst) > before || task.is_finished()
    })
    .await;
    if calls.load(Ordering::SeqCst) > before {
        return Some(task);
    }
    let refused = task.await.unwrap();
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    None
}

#[tokio::test(flavor = "current_thread")]
async fn an_unclassified_request_is_the_least_critical_and_cannot_crowd_out_a_critical_one() {
    let limiter = half_kept_for_critical();
    let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    // One server reads `x-priority`; the other has no class function.
    let by_header = serve(
        hold_and_fast(&calls, &gate).layer(
            ShedLayer::new(Arc::clone(&limiter))
                .fail_fast()
                .classify_request(asked),
        ),
    )
    .await;
    let no_classes =
        serve(hold_and_fast(&calls, &gate).layer(ShedLayer::new(Arc::clone(&limiter)).fail_fast()))
            .await;
    let client = client();

    let mut held = Vec::new();
    let mut refused = 0;
    for (addr, headers) in [
        (by_header, &[][..]),
        (no_classes, &[("x-priority", "critical")][..]),
        (by_header, &[("x-priority", "urgent")][..]),
        (by_header, &[("x-priority", "critical plus")][..]),
        (no_classes, &[][..]),
    ] {
        match hold(&client, addr, headers, &calls).await {
            Some(task) => held.push(task),
            None => refused += 1,
        }
    }
    // Each unclassified request was sheddable: two took the slots not kept
    // for critical requests, and the rest were refused.
    assert_eq!((held.len(), refused), (2, 3));
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 2]);

    let critical = fetch_with(&client, by_header, "/fast", &[("x-priority", "critical")]).await;
    assert_eq!(
        critical.status,
        StatusCode::OK,
        "crowded out by the unclassified"
    );

    gate.add_permits(held.len());
    for task in held {
        assert_eq!(task.await.unwrap().status, StatusCode::OK);
    }
    assert_eq!(limiter.in_flight(), 0);
}

/// Who is calling, as authentication in front of the shedding found it.
#[derive(Clone, Copy)]
struct Caller {
    class: Class,
}

/// Stands for authentication: a token names the caller's class.
fn authenticate(mut request: Request<Body>) -> Request<Body> {
    let class = match request.headers().get("authorization").map(|v| v.as_bytes()) {
        Some(b"interactive") => Some(Priority::Critical),
        Some(b"batch") => Some(Priority::Sheddable),
        _ => None,
    };
    if let Some(priority) = class {
        request.extensions_mut().insert(Caller {
            class: priority.into(),
        });
    }
    request
}

#[tokio::test(flavor = "current_thread")]
async fn a_caller_asking_for_critical_plus_is_admitted_no_higher_than_its_trusted_class() {
    let limiter = half_kept_for_critical();
    let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let trusted = |request: &Request<Body>| {
        request
            .extensions()
            .get::<Caller>()
            .map(|caller| caller.class)
    };
    let shed = ShedLayer::new(Arc::clone(&limiter))
        .fail_fast()
        .classify_request(lower_only(trusted, asked));
    let addr = serve(
        hold_and_fast(&calls, &gate)
            .layer(shed)
            .layer(tower::util::MapRequestLayer::new(authenticate)),
    )
    .await;
    let client = client();
    let batch = [("authorization", "batch"), ("x-priority", "critical-plus")];

    // A batch caller's requests are sheddable, whatever they ask for.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(hold(&client, addr, &batch, &calls).await.unwrap());
    }
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 2]);
    assert!(hold(&client, addr, &batch, &calls).await.is_none());
    // So is a caller nobody vouched for.
    let anonymous = [("x-priority", "CRITICAL-PLUS")];
    assert!(hold(&client, addr, &anonymous, &calls).await.is_none());

    // An interactive caller is critical, and may ask to be less.
    let interactive = [("authorization", "interactive")];
    held.push(hold(&client, addr, &interactive, &calls).await.unwrap());
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 1, 0, 2]);
    let lowered = [
        ("authorization", "interactive"),
        ("x-priority", "sheddable"),
    ];
    assert!(hold(&client, addr, &lowered, &calls).await.is_none());

    gate.add_permits(held.len());
    for task in held {
        assert_eq!(task.await.unwrap().status, StatusCode::OK);
    }
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_400_kb_priority_header_is_refused_without_error_and_counts_as_unclassified() {
    let limiter = half_kept_for_critical();
    let (calls, gate) = (Arc::new(AtomicUsize::new(0)), Arc::new(Semaphore::new(0)));
    let addr = serve(
        hold_and_fast(&calls, &gate).layer(
            ShedLayer::new(Arc::clone(&limiter))
                .fail_fast()
                .classify_request(asked),
        ),
    )
    .await;
    let client = client();

    let huge = format!("critical-plus{}", "x".repeat(400 * 1024));
    let held = hold(&client, addr, &[("x-priority", &huge)], &calls)
        .await
        .expect("served, as the least critical class");
    assert_eq!(limiter.classes().unwrap().in_flight(), [0, 0, 0, 1]);

    gate.add_permits(1);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
    assert_eq!(limiter.in_flight(), 0);
}
