//! `Limiter::call` waits for a slot by the rule the tower layers follow: if
//! the limiter waits (`Builder::wait`; in a file, a `max_wait`) or the
//! admission sets its own `max_wait`, at most that wait — all under Tokio's
//! paused clock.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::Arc;
use std::time::Duration;

use rheostat::algorithms::Fixed;
use rheostat::config::LimitersConfig;
use rheostat::retry::RetryConfig;
use rheostat::tower::{ResultClassifier, RheostatLayer};
use rheostat::{clock::TokioClock, Algorithm, CallError, Limiter, Outcome, RejectReason};
use tokio::time::Instant;
use tower::{service_fn, Layer, ServiceExt};

const MAX_WAIT: Duration = Duration::from_millis(100);

fn waiting(limit: u32) -> Arc<Limiter<Fixed, TokioClock>> {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .clock(TokioClock)
            .max_wait(MAX_WAIT)
            .wait(true)
            .build()
            .unwrap(),
    )
}

fn success(_: &Result<(), ()>) -> Outcome {
    Outcome::Success
}

/// A call through `limiter` that answers at once, and how long it took.
async fn call<A: Algorithm>(
    limiter: Arc<Limiter<A, TokioClock>>,
) -> (Result<(), CallError<()>>, Duration) {
    let started = Instant::now();
    let result = limiter.call(success, || async { Ok(()) }).await;
    (result, started.elapsed())
}

/// Let every spawned task run until it blocks.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn refusal<T: std::fmt::Debug>(result: Result<T, CallError<()>>) -> RejectReason {
    match result {
        Err(CallError::Rejected(rejection)) => rejection.reason(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_at_a_full_limiter_that_waits_is_admitted_when_a_slot_frees_within_max_wait() {
    let limiter = waiting(1);
    let held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(call(Arc::clone(&limiter)));
    tokio::time::sleep(MAX_WAIT / 2).await;
    assert!(!waiter.is_finished(), "the call waits for the slot");
    held.success();
    let (result, took) = waiter.await.unwrap();
    result.unwrap();
    assert_eq!(took, MAX_WAIT / 2);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_at_a_full_limiter_that_waits_is_refused_once_max_wait_has_passed() {
    let limiter = waiting(1);
    let _held = limiter.try_acquire().unwrap();
    let (result, took) = call(Arc::clone(&limiter)).await;
    assert_eq!(refusal(result), RejectReason::TimedOut);
    assert_eq!(took, MAX_WAIT);
    // It left the queue: the held slot freed goes to no ghost.
    drop(_held);
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_call_with_a_zero_max_wait_is_refused_at_once() {
    let limiter = waiting(1);
    let _held = limiter.try_acquire().unwrap();
    let started = Instant::now();
    let result = limiter
        .admission()
        .max_wait(Duration::ZERO)
        .call(success, || async { Ok(()) })
        .await;
    assert_eq!(refusal(result), RejectReason::LimitReached);
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn an_admission_with_its_own_max_wait_makes_call_wait_at_a_limiter_that_does_not() {
    let limiter = Limiter::builder(Fixed::new(1).unwrap())
        .clock(TokioClock)
        .build()
        .unwrap();
    let _held = limiter.try_acquire().unwrap();
    let started = Instant::now();
    let result = limiter
        .admission()
        .max_wait(MAX_WAIT)
        .call(success, || async { Ok(()) })
        .await;
    assert_eq!(refusal(result), RejectReason::TimedOut);
    assert_eq!(started.elapsed(), MAX_WAIT);
}

#[tokio::test(start_paused = true)]
async fn a_call_at_a_limiter_that_does_not_wait_is_refused_at_once_as_the_layer_refuses() {
    // A `max_wait` alone bounds `acquire`; the limiter does not wait.
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .clock(TokioClock)
            .max_wait(MAX_WAIT)
            .build()
            .unwrap(),
    );
    let _held = limiter.try_acquire().unwrap();
    let (result, took) = call(Arc::clone(&limiter)).await;
    assert_eq!(refusal(result), RejectReason::LimitReached);
    assert_eq!(took, Duration::ZERO);
    let layered = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(|()| async { Ok::<_, ()>(()) }));
    let refused = layered.oneshot(()).await.unwrap_err();
    assert!(matches!(refused, CallError::Rejected(_)), "{refused:?}");
}

#[tokio::test(start_paused = true)]
async fn a_limiter_from_a_file_with_a_max_wait_makes_call_wait_as_the_layer_waits() {
    let file = LimitersConfig::from_toml(
        "[limiters.payments]\nmax_wait = \"100ms\"\n[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 1\n",
    )
    .unwrap();
    let limiter = Arc::new(
        file.builder("payments")
            .unwrap()
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    let held = limiter.try_acquire().unwrap();
    let layered = RheostatLayer::new(Arc::clone(&limiter))
        .classify(ResultClassifier)
        .layer(service_fn(|()| async { Ok::<_, ()>(()) }));
    let through_layer = tokio::spawn(layered.oneshot(()));
    let through_call = tokio::spawn(call(Arc::clone(&limiter)));
    tokio::time::sleep(MAX_WAIT / 2).await;
    assert!(!through_layer.is_finished() && !through_call.is_finished());
    // One slot frees, then another: both waiters are served.
    held.success();
    settle().await;
    let (result, took) = through_call.await.unwrap();
    result.unwrap();
    assert_eq!(took, MAX_WAIT / 2);
    through_layer.await.unwrap().unwrap();
    // Neither waits past the file's `max_wait`.
    let _held = limiter.try_acquire().unwrap();
    let (result, took) = call(Arc::clone(&limiter)).await;
    assert_eq!(refusal(result), RejectReason::TimedOut);
    assert_eq!(took, MAX_WAIT);
}

#[tokio::test(start_paused = true)]
async fn a_retrying_call_waits_for_its_first_slot_as_one_that_does_not_retry() {
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .clock(TokioClock)
            .max_wait(MAX_WAIT)
            .wait(true)
            .retry(RetryConfig::default())
            .build()
            .unwrap(),
    );
    let held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(call(Arc::clone(&limiter)));
    tokio::time::sleep(MAX_WAIT / 2).await;
    assert!(!waiter.is_finished());
    held.success();
    let (result, took) = waiter.await.unwrap();
    result.unwrap();
    assert_eq!(took, MAX_WAIT / 2);
    let _held = limiter.try_acquire().unwrap();
    let (result, took) = call(Arc::clone(&limiter)).await;
    assert_eq!(refusal(result), RejectReason::TimedOut);
    assert_eq!(took, MAX_WAIT);
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_while_waiting_leaves_the_queue_and_strands_no_slot() {
    let limiter = waiting(1);
    let held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(call(Arc::clone(&limiter)));
    settle().await;
    assert!(!waiter.is_finished(), "the call waits for the slot");
    waiter.abort();
    let _ = waiter.await;
    held.success();
    assert_eq!(limiter.in_flight(), 0);
    let (result, took) = call(Arc::clone(&limiter)).await;
    result.unwrap();
    assert_eq!(took, Duration::ZERO);
}
