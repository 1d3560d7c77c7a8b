//! The tower layer: readiness, rejection, the permit held until the
//! response completes, the classifier's mapping, waiting for a slot.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::algorithms::Fixed;
use rheostat::tower::{ClassifyFn, HttpClassifier, ResultClassifier, Rheostat, RheostatLayer};
use rheostat::{clock::TokioClock, CallError, Limiter, Observer, Outcome, RejectReason};
use tokio::sync::oneshot;
use tower::{service_fn, Layer, Service, ServiceExt};

/// Records every finished call's outcome.
#[derive(Clone, Default)]
struct Outcomes(Arc<Mutex<Vec<Outcome>>>);

impl Observer for Outcomes {
    fn finished(&self, outcome: Outcome, _: Duration, _: u32) {
        self.0.lock().unwrap().push(outcome);
    }
}

impl Outcomes {
    fn take(&self) -> Vec<Outcome> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A service whose readiness is switched by hand and whose calls answer
/// with the status asked for, after the delay asked for.
#[derive(Clone)]
struct Dependency {
    ready: Arc<AtomicBool>,
}

impl Service<(u16, Duration)> for Dependency {
    type Response = http::Response<()>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.ready.load(Ordering::SeqCst) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, (status, delay): (u16, Duration)) -> Self::Future {
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            if status == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "refused",
                ));
            }
            Ok(http::Response::builder().status(status).body(()).unwrap())
        })
    }
}

fn poll_once<S: Service<R>, R>(service: &mut S) -> Poll<Result<(), S::Error>> {
    service.poll_ready(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn readiness_is_the_inner_services_and_admission_is_decided_in_call() {
    let ready = Arc::new(AtomicBool::new(false));
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let mut service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .layer(Dependency {
            ready: Arc::clone(&ready),
        });
    assert!(poll_once(&mut service).is_pending());
    ready.store(true, Ordering::SeqCst);
    // The limit being reached does not make the service unready.
    let _held = limiter.try_acquire().unwrap();
    assert!(matches!(poll_once(&mut service), Poll::Ready(Ok(()))));
    assert_eq!(limiter.in_flight(), 1);
}

#[tokio::test]
async fn a_refused_call_fails_fast_with_the_rejection_and_never_reaches_the_service() {
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let called = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&called);
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(move |_: ()| {
            seen.store(true, Ordering::SeqCst);
            async { Ok::<_, Infallible>(()) }
        }));
    let _held = limiter.try_acquire().unwrap();
    match service.oneshot(()).await {
        Err(CallError::Rejected(rejection)) => {
            assert_eq!(rejection.reason(), RejectReason::LimitReached);
            assert_eq!(rejection.policy(), "fixed");
        }
        other => panic!("{other:?}"),
    }
    assert!(!called.load(Ordering::SeqCst));
}

#[tokio::test]
async fn an_open_breaker_rejection_says_when_to_retry() {
    let config = BreakerConfig {
        cooldown: Cooldown::Fixed(Duration::from_secs(10)),
        cooldown_jitter: 0.0,
        ..BreakerConfig::recommended()
    };
    let limiter = Arc::new(Limiter::new(Breaker::new(config).unwrap()));
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    let service = RheostatLayer::new(limiter)
        .classify(ResultClassifier)
        .layer(service_fn(|_: ()| async { Ok::<_, Infallible>(()) }));
    let Err(CallError::Rejected(rejection)) = service.oneshot(()).await else {
        panic!("admitted through an open breaker")
    };
    assert_eq!(rejection.reason(), RejectReason::Open);
    assert!(rejection
        .retry_after()
        .is_some_and(|d| d <= Duration::from_secs(10)));
}

#[tokio::test(start_paused = true)]
async fn a_probe_is_given_the_breakers_probe_timeout_not_the_layers() {
    let config = BreakerConfig {
        cooldown: Cooldown::Fixed(Duration::from_secs(10)),
        cooldown_jitter: 0.0,
        ramp: Duration::ZERO,
        ..BreakerConfig::recommended()
    };
    let open = || {
        let limiter = Arc::new(
            Limiter::builder(Breaker::new(config.clone()).unwrap())
                .clock(TokioClock)
                .build()
                .unwrap(),
        );
        for _ in 0..10 {
            limiter.try_acquire().unwrap().overload();
        }
        limiter
    };
    let dependency = Dependency {
        ready: Arc::new(AtomicBool::new(true)),
    };
    let limiter = open();
    let mut service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .timeout(Duration::from_millis(800))
        .unwrap()
        .layer(dependency.clone());
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Probes: answered in 2 s, past the layer's 800 ms, well within the
    // breaker's 30 s.
    for _ in 0..4 {
        let r = service
            .ready()
            .await
            .unwrap()
            .call((200, Duration::from_secs(2)))
            .await;
        assert!(r.is_ok(), "{r:?}");
    }
    assert!(limiter.gate().admit_probability == 1.0 && !limiter.gate().probe);
    // Ordinary calls: the layer's 800 ms.
    let r = service
        .ready()
        .await
        .unwrap()
        .call((200, Duration::from_secs(2)))
        .await;
    assert!(
        matches!(r, Err(CallError::TimedOut(d)) if d == Duration::from_millis(800)),
        "{r:?}"
    );

    // Without a timeout of the layer's own, a probe still has one.
    let limiter = open();
    let mut service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .layer(dependency);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let r = service
        .ready()
        .await
        .unwrap()
        .call((200, Duration::from_secs(3600)))
        .await;
    assert!(
        matches!(r, Err(CallError::TimedOut(d)) if d == Duration::from_secs(30)),
        "{r:?}"
    );
}

#[tokio::test]
async fn the_permit_is_held_until_the_response_future_completes() {
    let outcomes = Outcomes::default();
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(4).unwrap())
            .observer(outcomes.clone())
            .build()
            .unwrap(),
    );
    let answers: Arc<Mutex<Option<oneshot::Receiver<()>>>> = Arc::default();
    let (send, receive) = oneshot::channel();
    *answers.lock().unwrap() = Some(receive);
    let slot = Arc::clone(&answers);
    let mut service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(move |_: ()| {
            let answer = slot.lock().unwrap().take().unwrap();
            async move {
                answer.await.unwrap();
                Ok::<_, Infallible>("done")
            }
        }));
    service.ready().await.unwrap();
    let mut response = std::pin::pin!(service.call(()));
    assert_eq!(limiter.in_flight(), 1);
    assert!(response
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    assert_eq!(limiter.in_flight(), 1);
    send.send(()).unwrap();
    assert_eq!(response.await.unwrap(), "done");
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(outcomes.take(), [Outcome::Success]);
}

#[tokio::test]
async fn a_dropped_response_future_gives_the_slot_back() {
    let outcomes = Outcomes::default();
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .observer(outcomes.clone())
            .build()
            .unwrap(),
    );
    let mut service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(|_: ()| {
            std::future::pending::<Result<(), Infallible>>()
        }));
    service.ready().await.unwrap();
    let response = service.call(());
    assert_eq!(limiter.in_flight(), 1);
    drop(response);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(outcomes.take(), [Outcome::Ignore]);
}

/// Why a layer has no default classifier: the one that counts every
/// response a success counts an HTTP 503 as one.
#[tokio::test]
async fn a_503_through_the_layer_is_an_overload_given_http_classifier_and_a_success_given_result_classifier(
) {
    let outcomes = Outcomes::default();
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(4).unwrap())
            .observer(outcomes.clone())
            .build()
            .unwrap(),
    );
    let unavailable = || {
        service_fn(|_: http::Request<()>| async { http::Response::builder().status(503).body(()) })
    };
    let http = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new())
        .layer(unavailable());
    let response = http.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(outcomes.take(), [Outcome::Overload]);

    let result_only = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(unavailable());
    result_only.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(outcomes.take(), [Outcome::Success]);
}

#[tokio::test(start_paused = true)]
async fn the_http_classifier_maps_5xx_4xx_429_slow_errors_and_timeouts() {
    let outcomes = Outcomes::default();
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(100).unwrap())
            .clock(TokioClock)
            .observer(outcomes.clone())
            .build()
            .unwrap(),
    );
    let ms = Duration::from_millis;
    let layer = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new().slow_after(ms(500)).unwrap())
        .timeout(ms(2000))
        .unwrap();
    let service = layer.layer(Dependency {
        ready: Arc::new(AtomicBool::new(true)),
    });
    for (status, delay, expected) in [
        (200, ms(10), Outcome::Success),
        (204, ms(10), Outcome::Success),
        (302, ms(10), Outcome::Success),
        (500, ms(10), Outcome::Overload),
        (503, ms(10), Outcome::Overload),
        (529, ms(10), Outcome::Overload),
        (400, ms(10), Outcome::Ignore),
        (404, ms(10), Outcome::Ignore),
        (429, ms(10), Outcome::Overload),
        (200, ms(900), Outcome::Overload), // slow
        (0, ms(10), Outcome::Overload),    // connection refused
    ] {
        let result = service.clone().oneshot((status, delay)).await;
        assert_eq!(result.is_ok(), status != 0, "{status}");
        assert_eq!(outcomes.take(), [expected], "{status} after {delay:?}");
    }
    // Hung past the layer's timeout.
    let hung = service.clone().oneshot((200, ms(60_000))).await;
    assert!(matches!(hung, Err(CallError::TimedOut(d)) if d == ms(2000)));
    assert_eq!(outcomes.take(), [Outcome::Overload]);
    assert_eq!(limiter.in_flight(), 0);

    // 429 as a quota, not a sign of overload.
    let quota = RheostatLayer::new(Arc::clone(&limiter))
        .classify(HttpClassifier::new().too_many_requests(Outcome::Ignore))
        .layer(Dependency {
            ready: Arc::new(AtomicBool::new(true)),
        });
    quota.oneshot((429, ms(1))).await.unwrap();
    assert_eq!(outcomes.take(), [Outcome::Ignore]);
}

#[tokio::test]
async fn waiting_holds_a_slot_from_poll_ready_and_a_refusal_comes_from_call() {
    let limiter = Arc::new(Limiter::new(Fixed::new(1).unwrap()));
    let mut service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .wait()
        .layer(service_fn(|_: ()| async { Ok::<_, Infallible>(7) }));
    let held = limiter.try_acquire().unwrap();
    assert!(poll_once(&mut service).is_pending());
    held.success();
    // The freed slot was handed to the waiting service.
    assert!(matches!(poll_once(&mut service), Poll::Ready(Ok(()))));
    assert_eq!(limiter.in_flight(), 1);
    assert_eq!(service.call(()).await.unwrap(), 7);
    assert_eq!(limiter.in_flight(), 0);

    // A wait that cannot succeed is not a readiness error.
    let short = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .max_wait(Duration::from_millis(5))
            .build()
            .unwrap(),
    );
    let _held = short.try_acquire().unwrap();
    let mut service = RheostatLayer::new(Arc::clone(&short))
        .classify(ResultClassifier)
        .wait()
        .layer(service_fn(|_: ()| async { Ok::<_, Infallible>(7) }));
    service.ready().await.unwrap();
    match service.call(()).await {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::TimedOut),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_service_and_its_future_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    type Inner = tower::util::BoxCloneSyncService<(), (), Infallible>;
    send_sync::<Rheostat<Inner, HttpClassifier>>();
    send_sync::<RheostatLayer<HttpClassifier>>();
    fn send<T: Send>() {}
    send::<<Rheostat<Inner, ResultClassifier> as Service<()>>::Future>();
}

#[tokio::test(start_paused = true)]
async fn the_classifier_is_told_the_latency_even_when_the_policy_ignores_it() {
    // A fixed limit learns nothing from a finished call, so the limiter does
    // not time calls for it; the layer's classifier still needs the latency.
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(4).unwrap())
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let layer = RheostatLayer::new(Arc::clone(&limiter)).classify(ClassifyFn(
        move |_: &Result<http::Response<()>, std::io::Error>, latency: Duration| {
            record.lock().unwrap().push(latency);
            Outcome::Success
        },
    ));
    let mut service = layer.layer(Dependency {
        ready: Arc::new(AtomicBool::new(true)),
    });
    let ms = Duration::from_millis;
    // Through poll_ready (a slot reserved), then straight to call.
    service.clone().oneshot((200, ms(30))).await.unwrap();
    service.call((200, ms(70))).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [ms(30), ms(70)]);
    assert_eq!(limiter.in_flight(), 0);
}

/// The keyed layer: each host gets its own limiter (from the file, or the
/// default), named after it; a new host with no room left is refused with
/// `NoLimiter`, never sent.
#[tokio::test]
async fn the_keyed_layer_admits_each_request_through_its_host_s_limiter() {
    use rheostat::config::LimitersConfig;
    use rheostat::keyed::KeyedError;
    use rheostat::tower::KeyedLayer;

    let file = LimitersConfig::from_toml(
        r#"
        [default.policy]
        policy = "fixed"
        limit = 1
        [limiters."b.example".policy]
        policy = "fixed"
        limit = 2
        "#,
    )
    .unwrap();
    let hosts = Arc::new(file.keyed().builder().unwrap().max_keys(2).build().unwrap());
    // Each call waits until released, so permits stay held.
    let (release, released) = tokio::sync::watch::channel(false);
    let inner = service_fn(move |_: http::Request<()>| {
        let mut released = released.clone();
        async move {
            let _ = released.wait_for(|r| *r).await;
            Ok::<_, Infallible>(http::Response::new(()))
        }
    });
    let by_host = |r: &http::Request<()>| r.uri().host().unwrap_or("").to_owned();
    let service = KeyedLayer::new(Arc::clone(&hosts), by_host)
        .classify(HttpClassifier::new())
        .layer(inner);
    let send = |host: &str| {
        let request = http::Request::get(format!("http://{host}/"))
            .body(())
            .unwrap();
        tokio::spawn(service.clone().oneshot(request))
    };
    let a1 = send("a.example");
    let b1 = send("b.example");
    let b2 = send("b.example");
    tokio::task::yield_now().await;
    // a.example's limit (the default, 1) is taken; b.example has 2.
    let a2 = send("a.example").await.unwrap();
    match a2 {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::LimitReached),
        other => panic!("{other:?}"),
    }
    assert_eq!(hosts.get("a.example").unwrap().in_flight(), 1);
    assert_eq!(hosts.get("b.example").unwrap().in_flight(), 2);
    assert_eq!(hosts.get("b.example").unwrap().name(), "b.example");
    // Two keys, both in use: a third host has no limiter.
    match send("c.example").await.unwrap() {
        Err(CallError::NoLimiter(KeyedError::Full { max_keys: 2 })) => {}
        other => panic!("{other:?}"),
    }
    release.send(true).unwrap();
    for call in [a1, b1, b2] {
        assert!(call.await.unwrap().is_ok());
    }
    assert_eq!(hosts.get("a.example").unwrap().in_flight(), 0);
    assert_eq!(hosts.get("b.example").unwrap().in_flight(), 0);
}
