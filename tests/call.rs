//! `Limiter::call`: the outcome it records (success, overload on timeout,
//! the classifier's choice), the timeouts it refuses, a full limiter.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::time::Duration;

use rheostat::algorithms::{Fixed, MAX_DURATION};
use rheostat::{CallError, Limiter, Outcome};

#[path = "support/recorder.rs"]
mod recorder;
use recorder::Recorder;

#[tokio::test]
async fn call_records_success_overload_on_timeout_and_the_classifiers_choice() {
    tokio::time::pause();
    let recorder = Recorder::new(10);
    let limiter = Limiter::builder(recorder.clone())
        .clock(rheostat::clock::TokioClock)
        .build()
        .unwrap();
    let classify = |r: &Result<u32, u16>| match r {
        Ok(_) => Outcome::Success,
        Err(s) if *s >= 500 => Outcome::Overload,
        Err(_) => Outcome::Ignore,
    };
    let timeout = Duration::from_millis(800);
    assert_eq!(
        limiter
            .admission()
            .timeout(timeout)
            .call(classify, || async { Ok(7) })
            .await
            .unwrap(),
        7
    );
    assert!(matches!(
        limiter
            .admission()
            .timeout(timeout)
            .call(classify, || async { Err(404) })
            .await,
        Err(CallError::Failed(404))
    ));
    assert!(matches!(
        limiter
            .admission()
            .timeout(timeout)
            .call(classify, || async { Err(503) })
            .await,
        Err(CallError::Failed(503))
    ));
    let hang = limiter
        .admission()
        .timeout(timeout)
        .call(classify, std::future::pending::<Result<u32, u16>>)
        .await;
    assert!(matches!(hang, Err(CallError::TimedOut(t)) if t == timeout));
    assert_eq!(
        recorder.outcomes(),
        vec![
            Outcome::Success,
            Outcome::Ignore,
            Outcome::Overload,
            Outcome::Overload
        ]
    );
    let samples = recorder.samples.lock().unwrap().clone();
    // Tokio's timer rounds up to the next millisecond.
    assert!(
        samples[3].latency >= timeout && samples[3].latency <= timeout + Duration::from_millis(1)
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn call_refuses_a_zero_or_endless_timeout_with_a_typed_error() {
    let limiter = Limiter::new(Fixed::new(1).unwrap());
    let ok = |_: &Result<(), ()>| Outcome::Success;
    for bad in [Duration::ZERO, Duration::MAX] {
        match limiter
            .admission()
            .timeout(bad)
            .call(ok, || async { Ok(()) })
            .await
        {
            Err(CallError::InvalidTimeout(e)) => assert_eq!(e.field(), "timeout"),
            other => panic!("expected InvalidTimeout, got {other:?}"),
        }
    }
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test]
async fn call_on_a_full_limiter_is_rejected_without_running() {
    let limiter = Limiter::new(Fixed::new(1).unwrap());
    let _held = limiter.try_acquire().unwrap();
    let ran = std::sync::atomic::AtomicBool::new(false);
    let r = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(
            |_: &Result<(), ()>| Outcome::Success,
            || async {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            },
        )
        .await;
    assert!(matches!(r, Err(CallError::Rejected(_))));
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_zero_or_enormous_call_timeout_is_refused_and_releases_the_slot() {
    let limiter = Limiter::new(Fixed::new(1).unwrap());
    for timeout in [Duration::ZERO, MAX_DURATION * 2, Duration::MAX] {
        let result = limiter
            .admission()
            .timeout(timeout)
            .call(|_: &Result<(), ()>| Outcome::Success, || async { Ok(()) })
            .await;
        match result {
            Err(CallError::InvalidTimeout(e)) => assert_eq!(e.field(), "timeout"),
            other => panic!("{timeout:?}: {other:?}"),
        }
        assert_eq!(limiter.in_flight(), 0);
        let permit = limiter.try_acquire().unwrap();
        let run = permit
            .run(timeout, |_: &Result<(), ()>| Outcome::Success, async {
                Ok(())
            })
            .await;
        assert!(matches!(run, Err(CallError::InvalidTimeout(_))));
        assert_eq!(limiter.in_flight(), 0);
    }
    // The longest allowed timeout is honoured, not overflowed.
    let answer = limiter
        .admission()
        .timeout(MAX_DURATION)
        .call(
            |_: &Result<u8, ()>| Outcome::Success,
            || async {
                tokio::time::sleep(Duration::from_secs(86_400)).await;
                Ok(7)
            },
        )
        .await;
    assert_eq!(answer.unwrap(), 7);
}
