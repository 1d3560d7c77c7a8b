//! A dependency's `timeout` and `max_wait`, written in its block of a
//! configuration file, take effect through the tower layers with no code
//! asking for them; code that asks wins.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use rheostat::config::LimitersConfig;
use rheostat::tower::{KeyedLayer, ResultClassifier, RheostatLayer};
use rheostat::{clock::TokioClock, CallError, RejectReason};
use tower::{service_fn, Layer, Service, ServiceExt};

const FILE: &str = r#"
[default]
timeout = "300ms"
[default.policy]
policy = "fixed"
limit = 4

[limiters.payments]
timeout = "800ms"
max_wait = "200ms"

[limiters.payments.policy]
policy = "fixed"
limit = 1
"#;

fn payments() -> Arc<rheostat::Limiter<Box<dyn rheostat::algorithms::Algorithm>, TokioClock>> {
    let file = LimitersConfig::from_toml(FILE).unwrap();
    Arc::new(
        file.builder("payments")
            .unwrap()
            .clock(TokioClock)
            .build()
            .unwrap(),
    )
}

/// `call`, or a panic if it is still running after a minute (of paused
/// time): a test fails rather than hangs.
async fn within_a_minute<F: std::future::Future>(call: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("still running after a minute")
}

fn hangs() -> impl Service<(), Response = (), Error = Infallible, Future: Send> + Clone {
    service_fn(|_: ()| std::future::pending::<Result<(), Infallible>>())
}

#[tokio::test(start_paused = true)]
async fn a_files_timeout_bounds_each_call_through_the_layer_with_no_code_asking() {
    let limiter = payments();
    let r = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(hangs())
        .oneshot(());
    let r = within_a_minute(r).await;
    assert!(
        matches!(r, Err(CallError::TimedOut(d)) if d == Duration::from_millis(800)),
        "{r:?}"
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_files_max_wait_makes_the_layer_wait_for_a_slot_up_to_it() {
    let limiter = payments();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(|_: ()| async { Ok::<_, Infallible>(7) }));
    // The one slot is held for 100 ms: within the wait, the call is served.
    let held = limiter.try_acquire().unwrap();
    let (r, ()) = tokio::join!(within_a_minute(service.clone().oneshot(())), async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        held.success();
    });
    assert_eq!(r.unwrap(), 7);
    // Held past the 200 ms wait: refused when the wait runs out.
    let _held = limiter.try_acquire().unwrap();
    match within_a_minute(service.oneshot(())).await {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::TimedOut),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_set_in_code_wins_over_the_files() {
    let limiter = payments();
    let r = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .timeout(Duration::from_secs(2))
        .unwrap()
        .layer(hangs())
        .oneshot(());
    let r = within_a_minute(r).await;
    assert!(
        matches!(r, Err(CallError::TimedOut(d)) if d == Duration::from_secs(2)),
        "{r:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_keyed_layer_gives_each_key_its_own_files_timeout() {
    let file = LimitersConfig::from_toml(FILE).unwrap();
    let limiters = Arc::new(
        file.keyed()
            .builder()
            .unwrap()
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    for (key, timeout) in [("payments", 800), ("search", 300)] {
        let r = KeyedLayer::new(Arc::clone(&limiters), move |_: &()| key.to_owned())
            .classify(ResultClassifier)
            .layer(hangs())
            .oneshot(());
        let r = within_a_minute(r).await;
        assert!(
            matches!(r, Err(CallError::TimedOut(d)) if d == Duration::from_millis(timeout)),
            "{key}: {r:?}"
        );
    }
    // Code's own timeout wins here too.
    let r = KeyedLayer::new(Arc::clone(&limiters), |_: &()| "payments".to_owned())
        .classify(ResultClassifier)
        .timeout(Duration::from_secs(2))
        .unwrap()
        .layer(hangs())
        .oneshot(());
    let r = within_a_minute(r).await;
    assert!(
        matches!(r, Err(CallError::TimedOut(d)) if d == Duration::from_secs(2)),
        "{r:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_file_that_sets_wait_false_fails_fast_whatever_its_max_wait() {
    let text = FILE.replace("max_wait = \"200ms\"", "max_wait = \"200ms\"\nwait = false");
    let file = LimitersConfig::from_toml(&text).unwrap();
    assert!(!file.limiters["payments"].wait);
    assert!(LimitersConfig::from_toml(FILE).unwrap().limiters["payments"].wait);
    let limiter = Arc::new(
        file.builder("payments")
            .unwrap()
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    let _held = limiter.try_acquire().unwrap();
    let service = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(|_: ()| async { Ok::<_, Infallible>(7) }));
    let start = tokio::time::Instant::now();
    match within_a_minute(service.clone().oneshot(())).await {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::LimitReached),
        other => panic!("{other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    // Code that asks to wait still waits (up to the file's `max_wait`).
    match within_a_minute(
        RheostatLayer::new(Arc::clone(&limiter))
            .classify(ResultClassifier)
            .wait()
            .layer(service_fn(|_: ()| async { Ok::<_, Infallible>(7) }))
            .oneshot(()),
    )
    .await
    {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::TimedOut),
        other => panic!("{other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}
