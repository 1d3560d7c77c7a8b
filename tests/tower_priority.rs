//! The client layer's classes: each request admitted as the class a
//! function of the request gives it, failing fast and waiting, retrying or
//! not; and nothing held once every call has ended or been dropped.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use http::{Request, Response};
use rheostat::algorithms::Fixed;
use rheostat::priority::{Class, Priorities, Priority};
use rheostat::retry::{Backoff, RetryConfig};
use rheostat::tower::{HttpClassifier, RheostatLayer};
use rheostat::{CallError, Limiter, RejectReason};
use tokio::sync::Semaphore;
use tower::{service_fn, Layer, Service, ServiceExt};

type Lim = Limiter<Fixed>;

/// The class in a request's `x-priority` header.
fn by_header(request: &Request<()>) -> Option<Class> {
    let value = request.headers().get("x-priority")?.to_str().ok()?;
    Priority::parse(value).map(Class::from)
}

fn request(priority: &str) -> Request<()> {
    Request::get("http://example.com/")
        .header("x-priority", priority)
        .body(())
        .unwrap()
}

/// A request that reached the inner service: its `x-priority`, and the
/// calls in flight by class then.
type Entered = (String, Vec<u32>);

/// An inner service that holds each request until released: it records
/// which requests reached it, in order, with the calls in flight by class
/// as each arrived, and answers each with the status it was told.
#[derive(Clone)]
struct Held {
    entered: Arc<Mutex<Vec<Entered>>>,
    release: Arc<Semaphore>,
    limiter: Arc<Lim>,
    statuses: Arc<Mutex<Vec<u16>>>,
}

impl Held {
    fn new(limiter: &Arc<Lim>) -> Self {
        Held {
            entered: Arc::default(),
            release: Arc::new(Semaphore::new(0)),
            limiter: Arc::clone(limiter),
            statuses: Arc::default(),
        }
    }

    fn service(
        &self,
    ) -> impl Service<
        Request<()>,
        Response = Response<()>,
        Error = Infallible,
        Future = impl Send + 'static,
    > + Clone
           + Send
           + 'static {
        let held = self.clone();
        service_fn(move |request: Request<()>| {
            let held = held.clone();
            async move {
                let name = request.headers()["x-priority"].to_str().unwrap().to_owned();
                held.entered
                    .lock()
                    .unwrap()
                    .push((name, held.limiter.classes().unwrap().in_flight()));
                held.release.acquire().await.unwrap().forget();
                let status = held.statuses.lock().unwrap().pop().unwrap_or(200);
                let mut response = Response::new(());
                *response.status_mut() = status.try_into().unwrap();
                Ok(response)
            }
        })
    }

    fn entered(&self) -> Vec<String> {
        self.entered
            .lock()
            .unwrap()
            .iter()
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// Lets spawned tasks run until they wait.
async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

fn limiter(limit: u32, priorities: Priorities) -> Arc<Lim> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .priorities(priorities)
            .max_wait(Duration::from_secs(30))
            .build()
            .unwrap(),
    )
}

fn assert_idle(limiter: &Lim) {
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 0, 0, 0]);
}

#[tokio::test(flavor = "current_thread")]
async fn failing_fast_the_reserve_refuses_sheddable_and_admits_critical() {
    let limiter = limiter(2, Priorities::default());
    let held = Held::new(&limiter);
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .layer(held.service());

    // Two sheddable requests take both slots.
    let mut calls = Vec::new();
    for _ in 0..2 {
        calls.push(tokio::spawn(client.clone().oneshot(request("sheddable"))));
    }
    settle().await;
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 0, 0, 2]);

    // A critical request finds the limit full while sheddable ones hold
    // it: refused, and a slot is kept for critical calls from now on.
    let refused = client.clone().oneshot(request("critical")).await;
    assert!(
        matches!(&refused, Err(CallError::Rejected(r)) if r.reason() == RejectReason::LimitReached),
        "{refused:?}"
    );

    // One sheddable call ends: its slot is kept for a critical call.
    held.release.add_permits(1);
    settle().await;
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 0, 0, 1]);
    let refused = client.clone().oneshot(request("sheddable")).await;
    assert!(
        matches!(&refused, Err(CallError::Rejected(r)) if r.reason() == RejectReason::LimitReached),
        "a sheddable request may not take the reserved slot: {refused:?}"
    );
    calls.push(tokio::spawn(client.clone().oneshot(request("critical"))));
    settle().await;
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 1, 0, 1]);

    held.release.add_permits(2);
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(
        held.entered(),
        ["sheddable", "sheddable", "critical"],
        "refused requests never reach the inner service"
    );
    assert_idle(&limiter);
}

#[tokio::test(flavor = "current_thread")]
async fn failing_fast_a_configured_share_is_kept_for_critical_requests() {
    let limiter = limiter(
        4,
        Priorities::default()
            .share(Priority::Critical, 0.5)
            .unwrap(),
    );
    let held = Held::new(&limiter);
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .layer(held.service());

    let mut calls = Vec::new();
    for _ in 0..2 {
        calls.push(tokio::spawn(client.clone().oneshot(request("sheddable"))));
    }
    settle().await;
    let refused = client.clone().oneshot(request("sheddable")).await;
    assert!(matches!(refused, Err(CallError::Rejected(_))));
    // A request without a class is of the default class: critical.
    let mut plain = Request::new(());
    plain
        .headers_mut()
        .insert("x-priority", "none".parse().unwrap());
    calls.push(tokio::spawn(client.clone().oneshot(plain)));
    calls.push(tokio::spawn(client.clone().oneshot(request("critical"))));
    settle().await;
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 2, 0, 2]);

    held.release.add_permits(4);
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_idle(&limiter);
}

#[tokio::test(flavor = "current_thread")]
async fn waiting_the_most_critical_waiter_is_served_first() {
    let limiter = limiter(1, Priorities::default());
    let held = Held::new(&limiter);
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .timeout(Duration::from_secs(30))
        .unwrap()
        .wait()
        .layer(held.service());

    // The only slot is taken (by the most critical class, so that no
    // reserve grows); then waiters arrive, least critical first.
    let mut calls = vec![tokio::spawn(
        client.clone().oneshot(request("critical_plus")),
    )];
    settle().await;
    for priority in ["sheddable", "sheddable_plus", "critical"] {
        calls.push(tokio::spawn(client.clone().oneshot(request(priority))));
        settle().await;
    }
    assert_eq!(
        held.entered(),
        ["critical_plus"],
        "waiters wait for their slot"
    );
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![1, 0, 0, 0]);

    for _ in 0..4 {
        held.release.add_permits(1);
        settle().await;
    }
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(
        held.entered(),
        ["critical_plus", "critical", "sheddable_plus", "sheddable"]
    );
    // Each was admitted as its own class.
    let classes: Vec<Vec<u32>> = held
        .entered
        .lock()
        .unwrap()
        .iter()
        .map(|(_, c)| c.clone())
        .collect();
    assert_eq!(
        classes,
        [
            vec![1, 0, 0, 0],
            vec![0, 1, 0, 0],
            vec![0, 0, 1, 0],
            vec![0, 0, 0, 1]
        ]
    );
    assert_idle(&limiter);
}

#[tokio::test(flavor = "current_thread")]
async fn waiting_poll_ready_reserves_nothing_with_a_class_function() {
    let limiter = limiter(1, Priorities::default());
    let held = Held::new(&limiter);
    let mut client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .wait()
        .layer(held.service());

    // Ready without a slot: the slot is taken for the request's class.
    client.ready().await.unwrap();
    assert_eq!(limiter.in_flight(), 0);
    let call = tokio::spawn(client.call(request("sheddable")));
    settle().await;
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 0, 0, 1]);
    held.release.add_permits(1);
    call.await.unwrap().unwrap();
    assert_idle(&limiter);
}

#[tokio::test(flavor = "current_thread")]
async fn dropped_calls_and_waiters_hold_nothing() {
    let limiter = limiter(1, Priorities::default());
    let held = Held::new(&limiter);
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .wait()
        .layer(held.service());

    let running = tokio::spawn(client.clone().oneshot(request("sheddable")));
    settle().await;
    let waiting = tokio::spawn(client.clone().oneshot(request("critical")));
    settle().await;
    assert_eq!(limiter.classes().unwrap().in_flight(), vec![0, 0, 0, 1]);

    // The waiter leaves the queue; the running call is dropped mid-flight.
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert_idle(&limiter);
    assert_eq!(held.entered(), ["sheddable"]);

    // A slot handed to a waiter that is dropped before it is polled goes
    // back too.
    let first = tokio::spawn(client.clone().oneshot(request("critical")));
    settle().await;
    let mut second = Box::pin(client.clone().oneshot(request("sheddable")));
    let pending =
        std::future::poll_fn(|cx| Poll::Ready(second.as_mut().poll(cx).is_pending())).await;
    assert!(pending);
    held.release.add_permits(1);
    first.await.unwrap().unwrap();
    drop(second);
    assert_idle(&limiter);

    // Failing fast, a refused request holds nothing either.
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .layer(held.service());
    let running = tokio::spawn(client.clone().oneshot(request("critical")));
    settle().await;
    assert!(client.oneshot(request("critical")).await.is_err());
    running.abort();
    let _ = running.await;
    assert_idle(&limiter);
}

#[tokio::test(flavor = "current_thread")]
async fn waiting_a_refusal_is_the_response() {
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .priorities(Priorities::default())
            .max_wait(Duration::from_millis(20))
            .build()
            .unwrap(),
    );
    let held = Held::new(&limiter);
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .classify_request(by_header)
        .wait()
        .layer(held.service());
    let running = tokio::spawn(client.clone().oneshot(request("critical")));
    settle().await;
    let refused = client.clone().oneshot(request("sheddable")).await;
    assert!(
        matches!(refused, Err(CallError::Rejected(_))),
        "{refused:?}"
    );
    held.release.add_permits(1);
    running.await.unwrap().unwrap();
    assert_eq!(held.entered(), ["critical"]);
    assert_idle(&limiter);
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_class_function_calls_are_of_the_default_class() {
    let limiter = limiter(2, Priorities::default());
    let held = Held::new(&limiter);
    for wait in [false, true] {
        let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(HttpClassifier::new());
        let layer = if wait { layer.wait() } else { layer };
        let client = layer.layer(held.service());
        let call = tokio::spawn(client.oneshot(request("sheddable")));
        settle().await;
        assert_eq!(
            limiter.classes().unwrap().in_flight(),
            vec![0, 1, 0, 0],
            "wait: {wait}"
        );
        held.release.add_permits(1);
        call.await.unwrap().unwrap();
        assert_idle(&limiter);
    }
}

fn retrying(limit: u32) -> Arc<Lim> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .priorities(Priorities::default())
            .max_wait(Duration::from_secs(30))
            .retry(RetryConfig {
                attempts: 3,
                backoff: Backoff {
                    base: Duration::from_millis(1),
                    cap: Duration::from_millis(2),
                },
                ..RetryConfig::default()
            })
            .build()
            .unwrap(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn retrying_every_attempt_is_admitted_as_the_request_class() {
    for wait in [false, true] {
        let limiter = retrying(4);
        let held = Held::new(&limiter);
        // Unavailable twice, then served (popped from the end).
        *held.statuses.lock().unwrap() = vec![200, 503, 503];
        held.release.add_permits(3);
        let layer = RheostatLayer::new(Arc::clone(&limiter))
            .classify(HttpClassifier::new())
            .classify_request(by_header);
        let layer = if wait { layer.wait() } else { layer };
        let client = layer.retry().layer(held.service());

        let response = client.oneshot(request("sheddable_plus")).await.unwrap();
        assert_eq!(response.status(), 200, "wait: {wait}");
        let entered = held.entered.lock().unwrap().clone();
        assert_eq!(entered.len(), 3, "wait: {wait}");
        for (_, classes) in entered {
            assert_eq!(classes, vec![0, 0, 1, 0], "wait: {wait}");
        }
        assert_idle(&limiter);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn retrying_the_class_applies_however_the_layers_are_ordered() {
    let limiter = retrying(2);
    let held = Held::new(&limiter);
    let client = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .wait()
        .retry()
        .classify_request(by_header)
        .layer(held.service());

    // The only slots are taken (by the most critical class, so that no
    // reserve grows); waiters arrive, least critical first.
    let mut calls = Vec::new();
    for priority in ["critical_plus", "critical_plus", "sheddable", "critical"] {
        calls.push(tokio::spawn(client.clone().oneshot(request(priority))));
        settle().await;
    }
    assert_eq!(held.entered(), ["critical_plus", "critical_plus"]);
    held.release.add_permits(1);
    settle().await;
    held.release.add_permits(1);
    settle().await;
    held.release.add_permits(2);
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(
        held.entered(),
        ["critical_plus", "critical_plus", "critical", "sheddable"]
    );
    assert_idle(&limiter);

    // Dropped while waiting for its first slot, a retrying call holds
    // nothing and sends nothing.
    let running = tokio::spawn(client.clone().oneshot(request("critical")));
    let running2 = tokio::spawn(client.clone().oneshot(request("critical")));
    settle().await;
    let waiting = tokio::spawn(client.clone().oneshot(request("sheddable")));
    settle().await;
    waiting.abort();
    let _ = waiting.await;
    running.abort();
    running2.abort();
    let _ = running.await;
    let _ = running2.await;
    assert_idle(&limiter);
    assert_eq!(held.entered().len(), 6);
}
