//! The retry policy: attempts, deadline, budget, and the limiter's refusals.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/decisions.rs"]
mod decisions;
use decisions::Decisions;
use rheostat::Admission;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
use rheostat::algorithms::Fixed;
use rheostat::retry::{
    Backoff, Budget, Call, Decision, Ended, Retry, RetryConfig, RetryOutcome, Verdict,
};
use rheostat::{clock::TokioClock, CallError, Limiter, Outcome, RejectReason};

fn fast() -> Backoff {
    Backoff {
        base: Duration::from_millis(10),
        cap: Duration::from_millis(40),
    }
}

fn limiter_with(config: RetryConfig) -> (Arc<Decisions>, Limiter<Fixed, TokioClock>) {
    let decisions = Arc::new(Decisions::default());
    let limiter = Limiter::builder(Fixed::new(4).unwrap())
        .clock(TokioClock)
        .retry(config)
        .observer(Arc::clone(&decisions))
        .build()
        .unwrap();
    (decisions, limiter)
}

fn by_status(r: &Result<u32, u16>) -> Outcome {
    match r {
        Ok(_) => Outcome::Success,
        Err(s) if *s >= 500 => Outcome::Overload,
        Err(_) => Outcome::Ignore,
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_call_is_retried_until_it_succeeds_within_its_attempts() {
    let (decisions, limiter) = limiter_with(RetryConfig {
        backoff: fast(),
        ..RetryConfig::default()
    });
    let tries = AtomicU32::new(0);
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async {
            match tries.fetch_add(1, Ordering::Relaxed) {
                0 | 1 => Err(503),
                n => Ok(n),
            }
        })
        .await;
    assert_eq!(answer.unwrap(), 2);
    assert_eq!(decisions.take(), [RetryOutcome::Sent, RetryOutcome::Sent]);

    // Always failing: three attempts, then the last failure is returned.
    let tries = AtomicU32::new(0);
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err::<u32, u16>(503)
        })
        .await;
    assert!(matches!(answer, Err(CallError::Failed(503))));
    assert_eq!(tries.load(Ordering::Relaxed), 3);
    assert_eq!(
        decisions.take(),
        [
            RetryOutcome::Sent,
            RetryOutcome::Sent,
            RetryOutcome::Exhausted
        ]
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_client_error_or_a_verdict_against_retrying_is_not_retried() {
    let (decisions, limiter) = limiter_with(RetryConfig::default());
    let tries = AtomicU32::new(0);
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err::<u32, u16>(404)
        })
        .await;
    assert!(matches!(answer, Err(CallError::Failed(404))));
    assert_eq!(tries.load(Ordering::Relaxed), 1);
    assert_eq!(decisions.take(), [RetryOutcome::NotRetryable]);

    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(
            |_: &Result<u32, u16>| Verdict::from(Outcome::Overload).not_retryable(),
            || async {
                tries.fetch_add(1, Ordering::Relaxed);
                Err::<u32, u16>(501)
            },
        )
        .await;
    assert!(matches!(answer, Err(CallError::Failed(501))));
    assert_eq!(tries.load(Ordering::Relaxed), 2);
    assert_eq!(decisions.take(), [RetryOutcome::NotRetryable]);
}

#[tokio::test(start_paused = true)]
async fn a_failure_that_opens_the_breaker_ends_the_retries() {
    let decisions = Arc::new(Decisions::default());
    let breaker = Breaker::new(BreakerConfig {
        consecutive_failures: 2,
        ..BreakerConfig::default()
    })
    .unwrap();
    let limiter = Limiter::builder(breaker)
        .clock(TokioClock)
        .retry(RetryConfig {
            attempts: 5,
            backoff: fast(),
            ..RetryConfig::default()
        })
        .observer(Arc::clone(&decisions))
        .build()
        .unwrap();
    let tries = AtomicU32::new(0);
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err::<u32, u16>(503)
        })
        .await;
    assert!(matches!(answer, Err(CallError::Failed(503))));
    assert_eq!(
        tries.load(Ordering::Relaxed),
        2,
        "the breaker opened on the second"
    );
    assert_eq!(
        decisions.take(),
        [RetryOutcome::Sent, RetryOutcome::Rejected]
    );

    // Open: refused at once, never retried, the dependency never called.
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Ok(1)
        })
        .await;
    match answer {
        Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::Open),
        other => panic!("{other:?}"),
    }
    assert_eq!(tries.load(Ordering::Relaxed), 2);
    // A call refused, not a retry: no retry decision.
    assert_eq!(decisions.take(), []);
}

#[tokio::test(start_paused = true)]
async fn a_full_limit_refuses_unless_the_retry_may_wait_once_in_the_queue() {
    let (decisions, limiter) = limiter_with(RetryConfig::default());
    let limiter = Arc::new(limiter);
    let held: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async { Ok(1) })
        .await;
    assert!(
        matches!(answer, Err(CallError::Rejected(r)) if r.reason() == RejectReason::LimitReached)
    );
    // A first attempt refused is a call refused, not a retry.
    assert_eq!(decisions.take(), []);
    drop(held);

    let waiting = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .clock(TokioClock)
            .retry(RetryConfig {
                wait_on_limit: true,
                deadline: Some(Duration::from_secs(2)),
                ..RetryConfig::default()
            })
            .build()
            .unwrap(),
    );
    let held = Admission::new(Arc::clone(&waiting)).try_acquire().unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.success();
    });
    let t0 = tokio::time::Instant::now();
    let answer = waiting
        .admission()
        .timeout(Duration::from_secs(1))
        .call(by_status, || async { Ok(7) })
        .await;
    assert_eq!(answer.unwrap(), 7);
    assert!(t0.elapsed() >= Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_is_a_floor_on_the_wait_and_the_deadline_stops_what_cannot_fit() {
    let (decisions, limiter) = limiter_with(RetryConfig {
        backoff: fast(),
        deadline: Some(Duration::from_secs(3)),
        ..RetryConfig::default()
    });
    let starts = Mutex::new(Vec::new());
    let answer = limiter
        .admission()
        .timeout(Duration::from_millis(500))
        .call(
            |r: &Result<u32, u16>| match r {
                Ok(_) => Verdict::from(Outcome::Success),
                Err(_) => Verdict::from(Outcome::Overload).retry_after(Duration::from_secs(2)),
            },
            || {
                starts.lock().unwrap().push(tokio::time::Instant::now());
                async { Err::<u32, u16>(503) }
            },
        )
        .await;
    assert!(matches!(answer, Err(CallError::Failed(503))));
    let starts = starts.into_inner().unwrap();
    // The second attempt waits the 2 s asked; a third would start at 4 s,
    // past the 3 s deadline.
    assert_eq!(starts.len(), 2);
    assert!(starts[1] - starts[0] >= Duration::from_secs(2));
    assert_eq!(
        decisions.take(),
        [RetryOutcome::Sent, RetryOutcome::Deadline]
    );
}

#[tokio::test(start_paused = true)]
async fn the_last_attempt_is_cut_to_end_by_the_deadline() {
    let (_, limiter) = limiter_with(RetryConfig {
        backoff: Backoff {
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        timeout: Some(Duration::from_millis(400)),
        deadline: Some(Duration::from_millis(1000)),
        ..RetryConfig::default()
    });
    let t0 = tokio::time::Instant::now();
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(9))
        .call(by_status, std::future::pending::<Result<u32, u16>>)
        .await;
    // 400 ms, 400 ms, then the 200 ms left.
    assert!(matches!(answer, Err(CallError::TimedOut(t)) if t == Duration::from_millis(200)));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took <= Duration::from_millis(1003),
        "{took:?}"
    );
    assert_eq!(limiter.in_flight(), 0);
}

/// A retry with less than a millisecond (the timer's resolution) before
/// the deadline is not sent: its backoff, rounded up to the millisecond,
/// could end past the deadline, and the retry would be counted as sent
/// (its budget spent) with no attempt. Once, one was.
#[tokio::test(start_paused = true)]
async fn a_retry_with_less_than_a_millisecond_before_the_deadline_is_not_sent() {
    let (decisions, limiter) = limiter_with(RetryConfig {
        backoff: Backoff {
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        timeout: Some(Duration::from_millis(50)),
        deadline: Some(Duration::from_micros(50_500)),
        ..RetryConfig::default()
    });
    let sent = AtomicU32::new(0);
    let answer = limiter
        .admission()
        .timeout(Duration::from_secs(9))
        .call(by_status, || {
            sent.fetch_add(1, Ordering::Relaxed);
            std::future::pending::<Result<u32, u16>>()
        })
        .await;
    assert!(matches!(answer, Err(CallError::TimedOut(_))));
    assert_eq!(sent.load(Ordering::Relaxed), 1);
    assert_eq!(decisions.take(), [RetryOutcome::Deadline]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_budget_stops_retries_and_says_so_once_each_time_it_runs_dry() {
    let (decisions, limiter) = limiter_with(RetryConfig {
        backoff: Backoff {
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        budget: Budget {
            ratio: 0.0,
            min_per_second: 0.5,
            ttl: Duration::from_secs(10),
        },
        ..RetryConfig::default()
    });
    let tries = AtomicU32::new(0);
    for _ in 0..4 {
        let _ = limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(by_status, || async {
                tries.fetch_add(1, Ordering::Relaxed);
                Err::<u32, u16>(503)
            })
            .await;
    }
    // A reserve of 5 retries: 4 calls of 3 attempts would want 8.
    assert_eq!(tries.load(Ordering::Relaxed), 4 + 5);
    let seen = decisions.take();
    assert_eq!(seen.iter().filter(|o| **o == RetryOutcome::Sent).count(), 5);
    assert_eq!(
        seen.iter()
            .filter(|o| **o == RetryOutcome::BudgetExhausted)
            .count(),
        2,
        "the third call's second retry and the fourth call's first"
    );
    assert_eq!(decisions.dry.load(Ordering::Relaxed), 1);
    // Ten seconds on, the reserve is back; once it is spent again, dry again.
    tokio::time::advance(Duration::from_secs(11)).await;
    for _ in 0..4 {
        let _ = limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(by_status, || async { Err::<u32, u16>(503) })
            .await;
    }
    assert_eq!(decisions.dry.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_during_its_backoff_or_its_attempt_holds_nothing() {
    let (_, limiter) = limiter_with(RetryConfig {
        backoff: Backoff {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(5),
        },
        ..RetryConfig::default()
    });
    for cut in [Duration::from_millis(50), Duration::from_millis(150)] {
        let call = limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(by_status, || async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err::<u32, u16>(503)
            });
        assert!(tokio::time::timeout(cut, call).await.is_err());
        assert_eq!(limiter.in_flight(), 0, "cut at {cut:?}");
    }
}

#[test]
fn bad_settings_name_the_field() {
    let cases = [
        (
            RetryConfig {
                attempts: 0,
                ..RetryConfig::default()
            },
            "retry.attempts",
        ),
        (
            RetryConfig {
                attempts: 11,
                ..RetryConfig::default()
            },
            "retry.attempts",
        ),
        (
            RetryConfig {
                budget: Budget {
                    ratio: f64::NAN,
                    ..Budget::default()
                },
                ..RetryConfig::default()
            },
            "retry.budget.ratio",
        ),
        (
            RetryConfig {
                budget: Budget {
                    ratio: 1.5,
                    ..Budget::default()
                },
                ..RetryConfig::default()
            },
            "retry.budget.ratio",
        ),
        (
            RetryConfig {
                timeout: Some(Duration::from_secs(2)),
                deadline: Some(Duration::from_secs(1)),
                ..RetryConfig::default()
            },
            "retry.deadline",
        ),
        (
            RetryConfig {
                backoff: Backoff {
                    base: Duration::from_secs(2),
                    cap: Duration::from_secs(1),
                },
                ..RetryConfig::default()
            },
            "retry.backoff.cap",
        ),
        (
            RetryConfig {
                budget: Budget {
                    ttl: Duration::from_millis(10),
                    ..Budget::default()
                },
                ..RetryConfig::default()
            },
            "retry.budget.ttl",
        ),
    ];
    for (config, field) in cases {
        let err = Limiter::builder(Fixed::new(1).unwrap())
            .retry(config.clone())
            .build()
            .unwrap_err();
        assert_eq!(err.field(), field, "{config:?}");
    }
}

// ----- properties ---------------------------------------------------------

/// One step of the budget's life: time passes, a call begins, or a call
/// that began fails and asks for a retry.
#[derive(Clone, Debug)]
enum Step {
    Advance(u64),
    Begin,
    Fail,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (1u64..3_000).prop_map(Step::Advance),
        5 => Just(Step::Begin),
        4 => Just(Step::Fail),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Over any 0.9 × ttl, retries never exceed `ratio` of the calls begun
    /// in the ttl before its end, plus the reserve.
    #[test]
    fn the_budget_is_never_exceeded_over_its_window(
        ratio in 0.0f64..=1.0,
        min_per_second in 0.0f64..3.0,
        ttl_secs in 1u64..=20,
        steps in proptest::collection::vec(step(), 1..400),
    ) {
        let ttl = Duration::from_secs(ttl_secs);
        let config = RetryConfig {
            attempts: 10,
            backoff: Backoff { base: Duration::ZERO, cap: Duration::ZERO },
            budget: Budget { ratio, min_per_second, ttl },
            ..RetryConfig::default()
        };
        let origin = Instant::now();
        let retry = Retry::new(config, 1, origin).unwrap();
        let mut now = origin;
        let (mut begun, mut granted) = (Vec::new(), Vec::new());
        for s in steps {
            match s {
                Step::Advance(ms) => now += Duration::from_millis(ms),
                Step::Begin => {
                    let _ = retry.begin(now, Duration::from_secs(1));
                    begun.push(now);
                }
                Step::Fail => {
                    let call = Call { started: now, attempts: 1, timeout: Duration::from_secs(1) };
                    let d = retry.after(&call, Ended::Ran(Outcome::Overload.into()), now, false);
                    match d {
                        Decision::Retry { .. } => granted.push(now),
                        Decision::Stop(o) => prop_assert_eq!(o, RetryOutcome::BudgetExhausted),
                        _ => unreachable!(),
                    }
                }
            }
        }
        let span = ttl.mul_f64(0.9);
        let reserve = min_per_second * ttl.as_secs_f64();
        for &t in &granted {
            let in_span = granted.iter().filter(|&&g| g <= t && t - g < span).count();
            let calls = begun.iter().filter(|&&b| b <= t && t - b < ttl).count();
            let allowed = ratio * calls as f64 + reserve;
            prop_assert!(
                in_span as f64 <= allowed + 1e-9,
                "{in_span} retries in 0.9 ttl before {:?}, {calls} calls: {allowed} allowed",
                t - origin
            );
        }
    }
}

/// What one attempt of the property below does.
#[derive(Clone, Copy, Debug)]
enum Act {
    Ok,
    ServerError,
    ClientError,
    Slow(u64),
    Hang,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        1 => Just(Act::Ok),
        3 => Just(Act::ServerError),
        1 => Just(Act::ClientError),
        1 => (1u64..300).prop_map(Act::Slow),
        1 => Just(Act::Hang),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Whatever the attempts do: no more attempts than allowed, none after
    /// one the classifier would not retry, none starting past the deadline
    /// and none running past it (by more than the timer's millisecond),
    /// retries within the budget, and no slot held at the end.
    #[test]
    fn attempts_stay_within_their_number_their_deadline_and_their_budget(
        attempts in 1u32..=5,
        timeout_ms in 20u64..300,
        deadline_ms in proptest::option::of(50u64..1_500),
        base_ms in 0u64..80,
        ratio in 0.0f64..=1.0,
        min_per_second in 0.0f64..2.0,
        calls in proptest::collection::vec(proptest::collection::vec(act(), 5), 1..12),
    ) {
        let deadline = deadline_ms.map(Duration::from_millis).map(|d| d.max(Duration::from_millis(timeout_ms)));
        let config = RetryConfig {
            attempts,
            timeout: Some(Duration::from_millis(timeout_ms)),
            deadline,
            backoff: Backoff { base: Duration::from_millis(base_ms), cap: Duration::from_millis(base_ms * 4) },
            budget: Budget { ratio, min_per_second, ttl: Duration::from_secs(3600) },
            ..RetryConfig::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let (decisions, limiter) = limiter_with(config);
            let mut retries = 0usize;
            for script in &calls {
                let log = Mutex::new(Vec::<(tokio::time::Instant, Act)>::new());
                let t0 = tokio::time::Instant::now();
                let next = AtomicU32::new(0);
                let _ = limiter
                    .admission().timeout(Duration::from_secs(60)).call(by_status, || {
                        let act = script[next.fetch_add(1, Ordering::Relaxed) as usize % script.len()];
                        log.lock().unwrap().push((tokio::time::Instant::now(), act));
                        async move {
                            match act {
                                Act::Ok => Ok(1),
                                Act::ServerError => Err(503),
                                Act::ClientError => Err(404),
                                Act::Slow(ms) => {
                                    tokio::time::sleep(Duration::from_millis(ms)).await;
                                    Ok(2)
                                }
                                Act::Hang => std::future::pending().await,
                            }
                        }
                    })
                    .await;
                let ended = tokio::time::Instant::now();
                let log = log.into_inner().unwrap();
                prop_assert!(log.len() as u32 <= attempts, "{} attempts", log.len());
                for (i, (start, act)) in log.iter().enumerate() {
                    if let Some(d) = deadline {
                        prop_assert!(*start - t0 < d, "attempt {i} started at {:?}", *start - t0);
                    }
                    if i + 1 < log.len() {
                        let retryable = matches!(act, Act::ServerError | Act::Hang)
                            || matches!(act, Act::Slow(ms) if *ms >= timeout_ms);
                        prop_assert!(retryable, "retried after {act:?}");
                    }
                }
                if let Some(d) = deadline {
                    prop_assert!(ended - t0 <= d + Duration::from_millis(1), "ended at {:?}", ended - t0);
                }
                retries += log.len().saturating_sub(1);
                prop_assert_eq!(limiter.in_flight(), 0);
            }
            let sent = decisions.take().iter().filter(|o| **o == RetryOutcome::Sent).count();
            prop_assert_eq!(sent, retries);
            let allowed = ratio * calls.len() as f64 + min_per_second * 3600.0;
            prop_assert!(retries as f64 <= allowed + 1e-9);
            Ok(())
        })?;
    }
}
