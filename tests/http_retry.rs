//! Retrying through the tower layer (`RheostatLayer::retry`): against a
//! real hyper server on
//! loopback that fails its first requests (with and without
//! `Retry-After`), always fails, hangs, or answers a client error; and, in
//! paused time, against in-process services for the exact timings.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/decisions.rs"]
mod decisions;
#[path = "support/server_thread.rs"]
mod server_thread;
use decisions::Decisions;
use rheostat::Admission;
use server_thread::{Runtime, ServerThread};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
use rheostat::algorithms::{Algorithm, Fixed};
use rheostat::retry::{Backoff, Budget, RetryConfig, RetryOutcome};
use rheostat::tower::{ClassifyFn, HttpClassifier, Idempotent, RetryRule, RheostatLayer};
use rheostat::{clock::TokioClock, CallError, DynLimiter, Limiter, Outcome, RejectReason};
use tokio::sync::oneshot;
use tower::{service_fn, Layer, ServiceExt};

// ----- the server -----------------------------------------------------------

/// What the server does with each request, by its number.
#[derive(Clone, Debug)]
struct Script {
    /// Requests answered with `status` (after `hang`) before the rest are
    /// answered 200; `u32::MAX` for all.
    failures: u32,
    status: u16,
    /// The failures' `Retry-After` header, if any.
    retry_after: Option<String>,
    /// How long a failing request takes to be answered.
    hang: Duration,
}

impl Script {
    fn failing(failures: u32, status: u16) -> Self {
        Script {
            failures,
            status,
            retry_after: None,
            hang: Duration::ZERO,
        }
    }

    fn retry_after(mut self, value: &str) -> Self {
        self.retry_after = Some(value.to_owned());
        self
    }

    fn hang(mut self, hang: Duration) -> Self {
        self.hang = hang;
        self
    }
}

/// A hyper server on 127.0.0.1, on a thread and runtime of its own, that
/// counts the requests it receives. Stops when dropped.
struct Server {
    thread: ServerThread,
    hits: Arc<AtomicU32>,
    methods: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(script: Script) -> Server {
        let hits = Arc::new(AtomicU32::new(0));
        let methods = Arc::new(Mutex::new(Vec::new()));
        let (counter, seen) = (Arc::clone(&hits), Arc::clone(&methods));
        let thread = ServerThread::start(Runtime::CurrentThread, move |listener, stopped| {
            serve(listener, script, counter, seen, stopped)
        })
        .unwrap();
        Server {
            thread,
            hits,
            methods,
        }
    }

    /// Requests received so far.
    fn hits(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }

    fn methods(&self) -> Vec<String> {
        self.methods.lock().unwrap().clone()
    }

    fn uri(&self) -> String {
        format!("http://{}/", self.thread.addr())
    }

    fn get(&self) -> Request<Full<Bytes>> {
        Request::get(self.uri()).body(Full::default()).unwrap()
    }

    fn post(&self) -> Request<Full<Bytes>> {
        Request::post(self.uri())
            .body(Full::new(Bytes::from_static(b"{\"amount\":1}")))
            .unwrap()
    }
}

async fn serve(
    listener: std::net::TcpListener,
    script: Script,
    hits: Arc<AtomicU32>,
    methods: Arc<Mutex<Vec<String>>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let script = Arc::new(script);
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let (script, hits, methods) =
            (Arc::clone(&script), Arc::clone(&hits), Arc::clone(&methods));
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<_>| {
                let n = hits.fetch_add(1, Ordering::SeqCst);
                methods.lock().unwrap().push(request.method().to_string());
                answer(Arc::clone(&script), n)
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(script: Arc<Script>, n: u32) -> Result<Response<Full<Bytes>>, Infallible> {
    if n >= script.failures {
        return Ok(Response::new(Full::new(Bytes::from_static(b"ok"))));
    }
    tokio::time::sleep(script.hang).await;
    let mut response = Response::builder().status(script.status);
    if let Some(after) = &script.retry_after {
        response = response.header(hyper::header::RETRY_AFTER, after.as_str());
    }
    Ok(response
        .body(Full::new(Bytes::from_static(b"unavailable")))
        .unwrap())
}

// ----- the client -------------------------------------------------------------

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A hyper client whose requests (`Full` bodies) can be cloned.
fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>()
}

/// A jittered wait of at most 5 ms: retries come at once, in real time.
fn quick() -> RetryConfig {
    RetryConfig {
        backoff: Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
        },
        ..RetryConfig::default()
    }
}

/// A limiter on Tokio's clock, the one its timers keep.
fn limiter_with<A: Algorithm>(
    policy: A,
    config: RetryConfig,
) -> (Arc<Decisions>, Arc<Limiter<A, TokioClock>>) {
    let decisions = Arc::new(Decisions::default());
    let limiter = Limiter::builder(policy)
        .clock(TokioClock)
        .retry(config)
        .observer(Arc::clone(&decisions))
        .build()
        .unwrap();
    (decisions, Arc::new(limiter))
}

fn fixed() -> Fixed {
    Fixed::new(64).unwrap()
}

fn status<E: std::fmt::Debug>(result: Result<Response<hyper::body::Incoming>, E>) -> u16 {
    result.unwrap().status().as_u16()
}

use RetryOutcome::{BudgetExhausted, Deadline, Exhausted, NotRetryable, Rejected, Sent};

// ----- the retrying layer, over the network -------------------------------------

#[tokio::test]
async fn a_get_that_fails_with_503_is_retried_until_the_server_answers() {
    let server = Server::start(Script::failing(2, 503));
    let (decisions, limiter) = limiter_with(fixed(), quick());
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .timeout(Duration::from_secs(5))
        .unwrap()
        .retry()
        .layer(client());

    assert_eq!(status(service.clone().oneshot(server.get()).await), 200);
    assert_eq!(server.hits(), 3);
    assert_eq!(decisions.take(), [Sent, Sent]);
    assert_eq!(limiter.in_flight(), 0);

    // Served at once: nothing to decide.
    assert_eq!(status(service.oneshot(server.get()).await), 200);
    assert_eq!(server.hits(), 4);
    assert_eq!(decisions.take(), []);
}

#[tokio::test]
async fn the_last_attempts_503_is_returned_once_the_attempts_are_spent() {
    let server = Server::start(Script::failing(u32::MAX, 503));
    let (decisions, limiter) = limiter_with(fixed(), quick());
    let service = RheostatLayer::new(limiter)
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    assert_eq!(status(service.oneshot(server.get()).await), 503);
    assert_eq!(server.hits(), 3);
    assert_eq!(decisions.take(), [Sent, Sent, Exhausted]);
}

#[tokio::test]
async fn a_retry_after_is_waited_for_and_garbage_in_it_ignored() {
    // Garbage, and a date long past: retried at once, as with no header.
    for value in ["soon", "-1", "1.5", "", "Wed, 21 Oct 2015 07:28:00 GMT"] {
        let server = Server::start(Script::failing(1, 503).retry_after(value));
        let (decisions, limiter) = limiter_with(fixed(), quick());
        let service = RheostatLayer::new(limiter)
            .classify(HttpClassifier::new())
            .retry()
            .layer(client());
        assert_eq!(
            status(service.oneshot(server.get()).await),
            200,
            "{value:?}"
        );
        assert_eq!(server.hits(), 2, "{value:?}");
        assert_eq!(decisions.take(), [Sent], "{value:?}");
    }

    // One second asked: the retry waits it, though the backoff is 5 ms at
    // most.
    let server = Server::start(Script::failing(1, 503).retry_after("1"));
    let (decisions, limiter) = limiter_with(fixed(), quick());
    let service = RheostatLayer::new(limiter)
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    let t0 = Instant::now();
    assert_eq!(status(service.oneshot(server.get()).await), 200);
    assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(server.hits(), 2);
    assert_eq!(decisions.take(), [Sent]);

    // An hour asked: more than the classifier waits for, so not retried.
    let server = Server::start(Script::failing(1, 503).retry_after("3600"));
    let (decisions, limiter) = limiter_with(fixed(), quick());
    let service = RheostatLayer::new(limiter)
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    let response = service.oneshot(server.get()).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[hyper::header::RETRY_AFTER], "3600");
    assert_eq!(server.hits(), 1);
    assert_eq!(decisions.take(), [NotRetryable]);
}

#[tokio::test]
async fn a_post_is_retried_only_with_the_opt_in() {
    let server = Server::start(Script::failing(1, 503));
    let (decisions, limiter) = limiter_with(fixed(), quick());
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry();
    let service = layer.clone().layer(client());
    assert_eq!(status(service.oneshot(server.post()).await), 503);
    assert_eq!(server.hits(), 1);
    assert_eq!(decisions.take(), [NotRetryable]);

    let server = Server::start(Script::failing(1, 503));
    let service = layer.retry_any_method().layer(client());
    assert_eq!(status(service.oneshot(server.post()).await), 200);
    assert_eq!(server.hits(), 2);
    assert_eq!(server.methods(), ["POST", "POST"]);
    assert_eq!(decisions.take(), [Sent]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn a_client_error_is_never_retried_429_included() {
    for (code, retry_after) in [(404, None), (429, Some("0")), (429, None)] {
        let mut script = Script::failing(1, code);
        if let Some(value) = retry_after {
            script = script.retry_after(value);
        }
        let server = Server::start(script);
        let (decisions, limiter) = limiter_with(fixed(), quick());
        let service = RheostatLayer::new(limiter)
            .classify(HttpClassifier::new())
            .retry()
            .layer(client());
        assert_eq!(status(service.oneshot(server.get()).await), code);
        assert_eq!(server.hits(), 1, "{code}");
        assert_eq!(decisions.take(), [NotRetryable], "{code}");
    }
}

/// Retries spent at once, out of a budget of 20% of calls plus a reserve of
/// 5 (0.5 a second over 10 s, a window longer than the test).
fn budgeted() -> RetryConfig {
    RetryConfig {
        backoff: Backoff {
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        budget: Budget {
            ratio: 0.2,
            min_per_second: 0.5,
            ttl: Duration::from_secs(10),
        },
        ..RetryConfig::default()
    }
}

const REQUESTS: u32 = 60;

/// At most `REQUESTS × (1 + ratio) + reserve` requests reach the server.
fn assert_within_budget(hits: u32, decisions: &Decisions) {
    let bound = f64::from(REQUESTS) * 1.2 + 5.0;
    assert!(f64::from(hits) <= bound, "{hits} hits, bound {bound}");
    assert!(hits > REQUESTS, "some retries were sent: {hits}");
    let seen = decisions.take();
    let sent = seen.iter().filter(|o| **o == Sent).count();
    assert_eq!(sent as u32, hits - REQUESTS);
    assert!(seen.contains(&BudgetExhausted), "{seen:?}");
    assert!(decisions.dry.load(Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn the_budget_bounds_what_a_server_that_always_fails_receives() {
    let server = Server::start(Script::failing(u32::MAX, 503));
    let (decisions, limiter) = limiter_with(fixed(), budgeted());
    let service = RheostatLayer::new(limiter)
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    for _ in 0..REQUESTS {
        assert_eq!(status(service.clone().oneshot(server.get()).await), 503);
    }
    // Without the budget: 3 × 60 = 180.
    assert_within_budget(server.hits(), &decisions);
}

fn breaker() -> Breaker {
    Breaker::new(BreakerConfig {
        consecutive_failures: 2,
        ..BreakerConfig::default()
    })
    .unwrap()
}

fn five_attempts() -> RetryConfig {
    RetryConfig {
        attempts: 5,
        ..quick()
    }
}

#[tokio::test]
async fn an_open_breaker_is_not_retried_through() {
    let server = Server::start(Script::failing(u32::MAX, 503));
    let (decisions, limiter) = limiter_with(breaker(), five_attempts());
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    // The second failure opens the breaker: no third attempt.
    assert_eq!(status(service.clone().oneshot(server.get()).await), 503);
    assert_eq!(server.hits(), 2);
    assert_eq!(decisions.take(), [Sent, Rejected]);

    // Open: refused, and the refusal is not retried.
    match service.oneshot(server.get()).await {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::Open),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.hits(), 2);
    // A call refused, not a retry: no retry decision.
    assert_eq!(decisions.take(), []);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn the_deadline_cuts_the_last_attempt_short_and_stops_the_retries() {
    // Every request hangs for 5 s. Attempts get 200 ms each, but the call
    // only 350 ms: the second attempt gets what is left, and no third
    // starts.
    let server = Server::start(Script::failing(u32::MAX, 503).hang(Duration::from_secs(5)));
    let (decisions, limiter) = limiter_with(
        fixed(),
        RetryConfig {
            timeout: Some(Duration::from_millis(200)),
            deadline: Some(Duration::from_millis(350)),
            ..quick()
        },
    );
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .timeout(Duration::from_secs(2))
        .unwrap()
        .retry()
        .layer(client());
    match service.oneshot(server.get()).await {
        Err(CallError::TimedOut(after)) => {
            assert!(after < Duration::from_millis(200), "{after:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.hits(), 2);
    assert_eq!(decisions.take(), [Sent, Deadline]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn dropping_the_response_future_releases_its_permit() {
    // Dropped during an attempt.
    let server = Server::start(Script::failing(u32::MAX, 503).hang(Duration::from_secs(5)));
    let (_, limiter) = limiter_with(fixed(), quick());
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    let call = service.clone().oneshot(server.get());
    assert!(tokio::time::timeout(Duration::from_millis(100), call)
        .await
        .is_err());
    assert_eq!(limiter.in_flight(), 0);

    // Dropped during a 5 s backoff: nothing held, nothing sent after.
    let server = Server::start(Script::failing(u32::MAX, 503));
    let (decisions, limiter) = limiter_with(
        fixed(),
        RetryConfig {
            backoff: Backoff {
                base: Duration::from_secs(5),
                cap: Duration::from_secs(5),
            },
            ..RetryConfig::default()
        },
    );
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .retry()
        .layer(client());
    let t0 = Instant::now();
    let mut call = Box::pin(service.oneshot(server.get()));
    // Wait for the first attempt's failure, then for the backoff to begin.
    loop {
        tokio::select! {
            result = &mut call => panic!("a 5 s backoff ended early: {result:?}"),
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
        if decisions.seen.lock().unwrap().contains(&Sent) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(4), "no first attempt");
    }
    assert_eq!(limiter.in_flight(), 0, "no permit held in the backoff");
    drop(call);
    assert_eq!(server.hits(), 1);
    assert_eq!(limiter.in_flight(), 0);
}

// ----- in paused time, without a network ----------------------------------------

/// A limiter on Tokio's clock, so that paused time is its time.
fn paused_limiter(
    limit: u32,
    config: RetryConfig,
) -> (Arc<Decisions>, Arc<Limiter<Fixed, TokioClock>>) {
    let decisions = Arc::new(Decisions::default());
    let limiter = Limiter::builder(Fixed::new(limit).unwrap())
        .clock(TokioClock)
        .retry(config)
        .observer(Arc::clone(&decisions))
        .build()
        .unwrap();
    (decisions, Arc::new(limiter))
}

/// 5xx an overload, 4xx ignored, the rest a success.
type ByStatus = fn(&Result<u16, Infallible>, Duration) -> Outcome;

fn by_status() -> ClassifyFn<ByStatus> {
    ClassifyFn(|r, _| match r {
        Ok(s) if *s >= 500 => Outcome::Overload,
        Ok(s) if *s >= 400 => Outcome::Ignore,
        _ => Outcome::Success,
    })
}

/// A request that is no HTTP request, idempotent or not as it says.
#[derive(Clone, Debug)]
struct Query {
    read: bool,
}

impl Idempotent for Query {
    fn is_idempotent(&self) -> bool {
        self.read
    }
}

#[tokio::test(start_paused = true)]
async fn each_attempts_timeout_shrinks_to_end_by_the_deadline() {
    let (decisions, limiter) = paused_limiter(
        4,
        RetryConfig {
            backoff: Backoff {
                base: Duration::ZERO,
                cap: Duration::ZERO,
            },
            deadline: Some(Duration::from_millis(1000)),
            ..RetryConfig::default()
        },
    );
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .timeout(Duration::from_millis(400))
        .unwrap()
        .retry()
        .layer(service_fn(move |_: Query| {
            counter.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<u16, Infallible>>()
        }));
    let t0 = tokio::time::Instant::now();
    let answer = service.oneshot(Query { read: true }).await;
    // 400 ms, 400 ms, then the 200 ms left.
    assert!(
        matches!(answer, Err(CallError::TimedOut(t)) if t == Duration::from_millis(200)),
        "{answer:?}"
    );
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took <= Duration::from_millis(1003),
        "{took:?}"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 3);
    assert_eq!(decisions.take(), [Sent, Sent, Exhausted]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_limit_refuses_unless_the_retry_may_wait_once_in_the_queue() {
    let served = |sent: Arc<AtomicU32>| {
        service_fn(move |_: Query| {
            sent.fetch_add(1, Ordering::SeqCst);
            async { Ok::<u16, Infallible>(200) }
        })
    };
    let (decisions, limiter) = paused_limiter(1, RetryConfig::default());
    let sent = Arc::new(AtomicU32::new(0));
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .retry()
        .layer(served(Arc::clone(&sent)));
    let held = limiter.try_acquire().unwrap();
    match service.oneshot(Query { read: true }).await {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::LimitReached),
        other => panic!("{other:?}"),
    }
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    // A first attempt refused is a call refused, not a retry.
    assert_eq!(decisions.take(), []);
    held.success();

    // Allowed to wait once: it waits for the slot and is sent, even a
    // request that may not be retried (nothing had been sent).
    let (decisions, limiter) = paused_limiter(
        1,
        RetryConfig {
            wait_on_limit: true,
            deadline: Some(Duration::from_secs(2)),
            ..RetryConfig::default()
        },
    );
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .retry()
        .layer(served(Arc::clone(&sent)));
    let held = Admission::new(Arc::clone(&limiter)).try_acquire().unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.success();
    });
    let t0 = tokio::time::Instant::now();
    assert_eq!(service.oneshot(Query { read: false }).await.unwrap(), 200);
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(decisions.take(), []);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn requests_of_any_type_follow_their_rule_and_a_limiter_without_retries_sends_once() {
    let failing = |sent: Arc<AtomicU32>| {
        service_fn(move |_: Query| {
            sent.fetch_add(1, Ordering::SeqCst);
            async { Ok::<u16, Infallible>(503) }
        })
    };
    let (decisions, limiter) = paused_limiter(4, RetryConfig::default());
    let sent = Arc::new(AtomicU32::new(0));
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .retry();

    // `Idempotent` says a read may be retried, a write not.
    let service = layer.clone().layer(failing(Arc::clone(&sent)));
    assert_eq!(
        service.clone().oneshot(Query { read: true }).await.unwrap(),
        503
    );
    assert_eq!(sent.swap(0, Ordering::SeqCst), 3);
    assert_eq!(decisions.take(), [Sent, Sent, Exhausted]);
    assert_eq!(service.oneshot(Query { read: false }).await.unwrap(), 503);
    assert_eq!(sent.swap(0, Ordering::SeqCst), 1);
    assert_eq!(decisions.take(), [NotRetryable]);

    // A rule of one's own decides instead.
    #[derive(Clone, Copy, Debug)]
    struct Writes;
    impl RetryRule<Query> for Writes {
        fn may_retry(&self, query: &Query) -> bool {
            !query.read
        }
    }
    let service = layer.retry_when(Writes).layer(failing(Arc::clone(&sent)));
    assert_eq!(
        service
            .clone()
            .oneshot(Query { read: false })
            .await
            .unwrap(),
        503
    );
    assert_eq!(sent.swap(0, Ordering::SeqCst), 3);
    assert_eq!(service.oneshot(Query { read: true }).await.unwrap(), 503);
    assert_eq!(sent.swap(0, Ordering::SeqCst), 1);
    decisions.take();

    // No retry policy on the limiter: one attempt, nothing decided.
    let plain = Arc::new(
        Limiter::builder(Fixed::new(4).unwrap())
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    let service = RheostatLayer::new(Arc::clone(&plain))
        .classify(by_status())
        .retry()
        .layer(failing(Arc::clone(&sent)));
    assert_eq!(service.oneshot(Query { read: true }).await.unwrap(), 503);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(plain.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_retried_and_the_waits_grow_within_the_backoff() {
    let (decisions, limiter) = paused_limiter(
        4,
        RetryConfig {
            attempts: 4,
            backoff: Backoff {
                base: Duration::from_millis(100),
                cap: Duration::from_millis(150),
            },
            ..RetryConfig::default()
        },
    );
    let starts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&starts);
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(by_status())
        .timeout(Duration::from_millis(50))
        .unwrap()
        .retry()
        .layer(service_fn(move |_: Query| {
            let mut starts = seen.lock().unwrap();
            starts.push(tokio::time::Instant::now());
            let hang = starts.len() < 4;
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                Ok::<u16, Infallible>(200)
            }
        }));
    assert_eq!(service.oneshot(Query { read: true }).await.unwrap(), 200);
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 4);
    // Each retry starts after the 50 ms timeout and a wait of at most the
    // backoff's ceiling (100, 150, 150 ms).
    for (i, ceiling) in [100, 150, 150].into_iter().enumerate() {
        let gap = starts[i + 1] - starts[i];
        assert!(gap >= Duration::from_millis(50), "{i}: {gap:?}");
        assert!(gap <= Duration::from_millis(52 + ceiling), "{i}: {gap:?}");
    }
    assert_eq!(decisions.take(), [Sent, Sent, Sent]);
    assert_eq!(limiter.in_flight(), 0);
}

// ----- spawning -------------------------------------------------------------------

/// A limiter chosen at run time, as every limiter from a configuration
/// file is.
fn dyn_limiter() -> (Arc<Decisions>, Arc<DynLimiter<TokioClock>>) {
    let policy: Box<dyn Algorithm> = Box::new(fixed());
    limiter_with(policy, quick())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrying_futures_over_a_dyn_limiter_can_be_spawned_in_an_async_block() {
    // If either future stops being provably `Send` inside an `async`
    // block, this does not compile.
    let server = Server::start(Script::failing(1, 503));
    let (decisions, limiter) = dyn_limiter();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .timeout(Duration::from_secs(5))
        .unwrap()
        .wait()
        .retry()
        .layer(client());
    let request = server.get();
    let task = tokio::spawn(async move { service.oneshot(request).await.map(|r| r.status()) });
    assert_eq!(task.await.unwrap().unwrap(), StatusCode::OK);
    assert_eq!(server.hits(), 2);
    assert_eq!(decisions.take(), [Sent]);
    assert_eq!(limiter.in_flight(), 0);
}
