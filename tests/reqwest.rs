//! `rheostat::reqwest::RheostatMiddleware` over loopback: a reqwest client
//! with the middleware calling a real hyper server on a thread of its own
//! (`tests/support/open_loop.rs`, whose answers are data), or an axum one
//! on the test's runtime for a `Retry-After`.
//!
//! ```sh
//! cargo test -p rheostat --features reqwest --test reqwest
//! ```

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/open_loop.rs"]
#[allow(
    dead_code,
    reason = "shared with other tests, which use parts this one does not"
)]
mod open_loop;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use open_loop::{Answer, Server};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Error};
use rheostat::algorithms::{Breaker, BreakerConfig, Fixed};
use rheostat::reqwest::RheostatMiddleware;
use rheostat::retry::RetryConfig;
use rheostat::tower::NotIdempotent;
use rheostat::{Algorithm, CallError, Limiter, RejectReason, Rejection};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn client<A: Algorithm + Sync + 'static>(limiter: &Arc<Limiter<A>>) -> ClientWithMiddleware {
    let inner = reqwest::Client::builder().no_proxy().build().unwrap();
    ClientBuilder::new(inner)
        .with(RheostatMiddleware::new(Arc::clone(limiter)))
        .build()
}

/// A server answering every request with `status` after `delay`.
fn serve(delay: Duration, status: u16) -> Server {
    Server::start(Instant::now(), move |_, _| Answer { delay, status }).unwrap()
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/")
}

/// The refusal an error stands for, if it is one.
fn rejection(error: &Error) -> Option<&Rejection> {
    match error {
        Error::Middleware(error) => error.downcast_ref::<Rejection>(),
        Error::Reqwest(_) => None,
    }
}

#[tokio::test]
async fn a_healthy_server_is_served_every_request_through_the_middleware() {
    let server = serve(ms(2), 200);
    let limiter = Arc::new(Limiter::builder(Fixed::new(8).unwrap()).build().unwrap());
    let client = client(&limiter);
    // Eight callers at once, as many as the limit, eight requests each.
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (client, url) = (client.clone(), url(server.addr()));
            tokio::spawn(async move {
                for _ in 0..8 {
                    let response = client.get(&url).send().await.unwrap();
                    assert_eq!(response.status(), 200);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    assert_eq!(server.served().len(), 64);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn a_server_answering_503_drives_refusals_and_is_spared_them() {
    let server = serve(Duration::ZERO, 503);
    let limiter = Arc::new(
        Limiter::builder(Breaker::new(BreakerConfig::default()).unwrap())
            .build()
            .unwrap(),
    );
    let client = client(&limiter);
    let (mut answered, mut refused) = (0, 0);
    for _ in 0..40 {
        match client.get(url(server.addr())).send().await {
            // A 503 is a response, given back as it is, and an overload.
            Ok(response) => {
                assert_eq!(response.status(), 503);
                answered += 1;
            }
            Err(error) => {
                let rejection = rejection(&error).unwrap_or_else(|| panic!("{error}"));
                assert_eq!(rejection.reason(), RejectReason::Open);
                refused += 1;
            }
        }
    }
    println!("40 requests to a server answering 503: {answered} answered, {refused} refused");
    // The default breaker opens on 10 failures in a row.
    assert_eq!(answered, 10);
    assert_eq!(refused, 30);
    assert_eq!(server.served().len(), answered);
}

#[tokio::test]
async fn a_slow_server_is_cut_at_the_attempt_timeout() {
    let server = serve(Duration::from_secs(30), 200);
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(8).unwrap())
            .timeout(ms(200))
            .build()
            .unwrap(),
    );
    let started = Instant::now();
    let error = client(&limiter)
        .get(url(server.addr()))
        .send()
        .await
        .unwrap_err();
    let took = started.elapsed();
    let Error::Middleware(error) = &error else {
        panic!("not the middleware's: {error}")
    };
    assert!(
        matches!(
            error.downcast_ref::<CallError<Infallible>>(),
            Some(CallError::TimedOut(after)) if *after == ms(200)
        ),
        "{error}"
    );
    // Cut at 200 ms (bounded loosely: a loaded machine is slow, not 10 s slow).
    assert!(
        took >= ms(200) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn a_refusal_is_an_error_that_downcasts_to_the_rejection() {
    let server = serve(Duration::ZERO, 200);
    let limiter = Arc::new(Limiter::builder(Fixed::new(1).unwrap()).build().unwrap());
    let held = limiter.try_acquire().unwrap();
    let error = client(&limiter)
        .get(url(server.addr()))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_middleware());
    let rejection = rejection(&error).unwrap_or_else(|| panic!("{error}"));
    assert_eq!(rejection.reason(), RejectReason::LimitReached);
    assert!(server.served().is_empty(), "a refused request is not sent");
    held.success();
}

#[tokio::test]
async fn a_request_at_a_full_limiter_that_waits_is_sent_when_a_slot_frees_within_max_wait() {
    let server = serve(Duration::ZERO, 200);
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .max_wait(Duration::from_secs(5))
            .wait(true)
            .build()
            .unwrap(),
    );
    let held = limiter.try_acquire().unwrap();
    let (client, to) = (client(&limiter), url(server.addr()));
    let waiting = tokio::spawn({
        let (client, to) = (client.clone(), to.clone());
        async move { client.get(to).send().await }
    });
    tokio::time::sleep(ms(100)).await;
    assert!(!waiting.is_finished(), "the request waits for the slot");
    held.success();
    assert_eq!(waiting.await.unwrap().unwrap().status(), 200);

    // Past the wait, refused as having waited in vain.
    let short = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .max_wait(ms(100))
            .wait(true)
            .build()
            .unwrap(),
    );
    let _held = short.try_acquire().unwrap();
    let error = self::client(&short).get(to).send().await.unwrap_err();
    let rejection = rejection(&error).unwrap_or_else(|| panic!("{error}"));
    assert_eq!(rejection.reason(), RejectReason::TimedOut);
}

/// An axum server, on the test's runtime, answering its first request 503
/// with `Retry-After: 1`, every later one 200; and how many it was sent.
async fn retry_after_server() -> (SocketAddr, Arc<AtomicU64>) {
    let count = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&count);
    let app = axum::Router::new().fallback(move || {
        let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            let status = if first {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::OK
            };
            (status, [("retry-after", "1")]).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, count)
}

fn retrying() -> Arc<Limiter<Fixed>> {
    Arc::new(
        Limiter::builder(Fixed::new(8).unwrap())
            .retry(RetryConfig::default())
            .build()
            .unwrap(),
    )
}

#[tokio::test]
async fn a_retry_waits_for_the_servers_retry_after() {
    let (server, sent) = retry_after_server().await;
    let limiter = retrying();
    let started = Instant::now();
    let response = client(&limiter).get(url(server)).send().await.unwrap();
    let took = started.elapsed();
    assert_eq!(response.status(), 200);
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    // The retry's own backoff is at most 50 ms: the second second is the
    // server's `Retry-After`.
    assert!(took >= Duration::from_secs(1), "{took:?}");
}

#[tokio::test]
async fn a_request_that_is_not_idempotent_is_sent_once_whatever_the_retry_policy() {
    let client = client(&retrying());
    let (server, sent) = retry_after_server().await;
    let post = client.post(url(server)).body("charge");
    assert_eq!(post.send().await.unwrap().status(), 503);
    assert_eq!(sent.load(Ordering::SeqCst), 1, "a POST is sent once");
    let (server, sent) = retry_after_server().await;
    let put = client
        .put(url(server))
        .with_extension(NotIdempotent)
        .body("refund");
    assert_eq!(put.send().await.unwrap().status(), 503);
    assert_eq!(sent.load(Ordering::SeqCst), 1, "nor a request that says so");
}
