//! The attempt machine driven by hand, with instants.

use super::*;
use crate::retry::{Backoff, RetryConfig, Verdict};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn retry(config: RetryConfig, t0: Instant) -> Retry {
    Retry::new(config, 7, t0).unwrap_or_else(|e| panic!("{e}"))
}

/// Attempts of at most 100 ms, a deadline of 250 ms, no backoff.
fn config() -> RetryConfig {
    RetryConfig {
        attempts: 3,
        timeout: Some(ms(100)),
        deadline: Some(ms(250)),
        backoff: Backoff {
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        ..RetryConfig::default()
    }
}

fn overload() -> Ended {
    Ended::Ran(Outcome::Overload.into())
}

fn sent() -> Decided {
    Decided {
        outcome: RetryOutcome::Sent,
        dry: false,
        observed: true,
    }
}

fn stopped(outcome: RetryOutcome) -> Action {
    Action::Answer {
        decided: Some(Decided {
            outcome,
            dry: false,
            observed: true,
        }),
    }
}

#[test]
fn a_call_is_retried_until_its_attempts_are_spent_and_each_retry_is_acquired_anew() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(999));
    for n in 1..=2 {
        assert_eq!(
            attempts.admitted(&retry, || t0, attempts.next_timeout(), false),
            Action::Send { timeout: ms(100) }
        );
        assert!(attempts.may_follow(&retry));
        assert_eq!(
            attempts.ended(&retry, overload(), || t0, || false),
            Action::Sleep {
                wait: Duration::ZERO,
                decided: sent()
            },
            "attempt {n}"
        );
        assert_eq!(attempts.backoff_elapsed(), Action::Acquire);
    }
    assert_eq!(attempts.call().attempts, 3);
    assert!(!attempts.may_follow(&retry));
    assert_eq!(
        attempts.ended(&retry, Ended::TimedOut, || t0, || false),
        stopped(RetryOutcome::Exhausted)
    );
}

#[test]
fn a_success_is_answered_at_once_without_asking_the_time_or_the_gate() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(100));
    let success = Ended::Ran(Outcome::Success.into());
    let action = attempts.ended(
        &retry,
        success,
        || panic!("the time was asked"),
        || panic!("the gate was asked"),
    );
    assert_eq!(action, Action::Answer { decided: None });
}

#[test]
fn without_a_deadline_an_admission_does_not_ask_the_time() {
    let t0 = Instant::now();
    let unbounded = RetryConfig {
        deadline: None,
        ..config()
    };
    let retry = retry(unbounded, t0);
    let mut attempts = Attempts::new(&retry, t0, ms(999));
    assert_eq!(
        attempts.admitted(
            &retry,
            || panic!("the time was asked"),
            attempts.next_timeout(),
            false
        ),
        Action::Send { timeout: ms(100) }
    );
}

#[test]
fn an_attempt_is_cut_to_end_by_the_deadline_and_one_admitted_past_it_is_not_sent() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(100));
    assert_eq!(
        attempts.admitted(&retry, || t0 + ms(200), attempts.next_timeout(), false),
        Action::Send { timeout: ms(50) }
    );
    assert_eq!(
        attempts.admitted(&retry, || t0 + ms(250), attempts.next_timeout(), false),
        Action::Expire
    );
}

#[test]
fn a_probe_gets_its_own_timeout_whole_even_past_the_deadline() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(100));
    assert_eq!(
        attempts.admitted(&retry, || t0 + ms(240), Duration::from_secs(30), true),
        Action::Send {
            timeout: Duration::from_secs(30)
        }
    );
    assert_eq!(
        attempts.admitted(&retry, || t0 + ms(300), ms(100), true),
        Action::Send { timeout: ms(100) }
    );
}

#[test]
fn a_full_limit_waits_once_in_the_queue_within_the_deadline_if_allowed() {
    let t0 = Instant::now();
    let waits = retry(
        RetryConfig {
            wait_on_limit: true,
            ..config()
        },
        t0,
    );
    let mut attempts = Attempts::new(&waits, t0, ms(100));
    let full = RejectReason::LimitReached;
    let asked = || panic!("the gate was asked before the wait");
    assert_eq!(
        attempts.refused(&waits, full, || t0 + ms(50), asked),
        Action::Queue {
            within: Some(ms(200))
        }
    );
    // Refused again after the wait: a first attempt refused, decided
    // but not a retry the observer hears of.
    assert_eq!(
        attempts.refused(&waits, full, || t0 + ms(60), || false),
        Action::Answer {
            decided: Some(Decided {
                outcome: RetryOutcome::Rejected,
                dry: false,
                observed: false
            })
        }
    );
    // Without `wait_on_limit`, or refused for another reason, no wait.
    let fails_fast = retry(config(), t0);
    let mut attempts = Attempts::new(&fails_fast, t0, ms(100));
    assert!(matches!(
        attempts.refused(&fails_fast, full, || t0, || false),
        Action::Answer { .. }
    ));
    let mut attempts = Attempts::new(&waits, t0, ms(100));
    assert!(matches!(
        attempts.refused(&waits, RejectReason::Open, || t0, || false),
        Action::Answer { .. }
    ));
}

#[test]
fn a_retry_refused_by_the_limiter_is_a_rejection_the_observer_hears_of() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(100));
    assert!(matches!(
        attempts.ended(&retry, overload(), || t0, || false),
        Action::Sleep { .. }
    ));
    assert_eq!(attempts.backoff_elapsed(), Action::Acquire);
    assert_eq!(
        attempts.refused(&retry, RejectReason::Throttled, || t0, || false),
        stopped(RetryOutcome::Rejected)
    );
}

#[test]
fn a_shut_gate_or_a_verdict_against_retrying_stops_the_call() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(100));
    assert_eq!(
        attempts.ended(&retry, overload(), || t0, || true),
        stopped(RetryOutcome::Rejected)
    );
    let no = Ended::Ran(Verdict::from(Outcome::Overload).not_retryable());
    assert_eq!(
        attempts.ended(&retry, no, || t0, || false),
        stopped(RetryOutcome::NotRetryable)
    );
}

#[test]
fn a_request_that_may_not_be_resent_stops_without_asking_the_budget_or_the_gate() {
    let t0 = Instant::now();
    let retry = retry(
        RetryConfig {
            budget: crate::retry::Budget {
                ratio: 0.0,
                min_per_second: 0.0,
                ..crate::retry::Budget::default()
            },
            ..config()
        },
        t0,
    );
    let mut attempts = Attempts::new(&retry, t0, ms(100)).no_resend();
    assert!(!attempts.may_follow(&retry));
    let asked = || panic!("the gate was asked");
    assert_eq!(
        attempts.ended(&retry, Ended::TimedOut, || t0, asked),
        stopped(RetryOutcome::NotRetryable)
    );
    // The budget, empty, was not asked: it has not run dry.
    let mut other = Attempts::new(&retry, t0, ms(100));
    assert_eq!(
        other.ended(&retry, Ended::TimedOut, || t0, || false),
        Action::Answer {
            decided: Some(Decided {
                outcome: RetryOutcome::BudgetExhausted,
                dry: true,
                observed: true
            })
        }
    );
}

#[test]
fn a_retry_granted_carries_its_timeout_cut_to_the_deadline_to_the_next_attempt() {
    let t0 = Instant::now();
    let retry = retry(config(), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(100));
    assert!(matches!(
        attempts.ended(&retry, Ended::TimedOut, || t0 + ms(180), || false),
        Action::Sleep { .. }
    ));
    assert_eq!(attempts.next_timeout(), ms(70));
    assert_eq!(attempts.backoff_elapsed(), Action::Acquire);
    // Admitted after the backoff with no time left: not sent.
    assert_eq!(
        attempts.admitted(&retry, || t0 + ms(250), attempts.next_timeout(), false),
        Action::Expire
    );
    // A retry with a millisecond or less before the deadline is not sent.
    let mut late = Attempts::new(&retry, t0, ms(100));
    assert_eq!(
        late.ended(&retry, Ended::TimedOut, || t0 + ms(249), || false),
        stopped(RetryOutcome::Deadline)
    );
}

fn hedging(delay: Option<Duration>) -> RetryConfig {
    RetryConfig {
        hedge: Some(crate::retry::Hedge {
            delay,
            ..crate::retry::Hedge::default()
        }),
        ..config()
    }
}

#[test]
fn a_hedge_is_an_attempt_and_a_failure_beside_it_is_not_decided_until_it_ends() {
    let t0 = Instant::now();
    let retry = retry(hedging(Some(ms(20))), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(999));
    assert!(matches!(
        attempts.admitted(&retry, || t0, attempts.next_timeout(), false),
        Action::Send { .. }
    ));
    assert_eq!(attempts.hedge_delay(&retry, None), Some(ms(20)));
    assert_eq!(
        attempts.hedge(&retry, t0 + ms(20), Late::Alone),
        Hedging::Acquire
    );
    assert_eq!(attempts.call().attempts, 2);
    assert!(matches!(
        attempts.hedge_admitted(&retry, || t0 + ms(20), ms(100)),
        Action::Send { .. }
    ));
    // The one hedge allowed is spent.
    assert_eq!(attempts.hedge_delay(&retry, None), None);
    // The first attempt fails: the hedge is still out.
    let asked = || panic!("nothing is decided while an attempt is out");
    assert_eq!(
        attempts.ended(&retry, overload(), asked, asked_gate),
        Action::Await
    );
    // The hedge fails too: now a retry is weighed, the third attempt.
    assert!(matches!(
        attempts.ended(&retry, overload(), || t0 + ms(40), || false),
        Action::Sleep { .. }
    ));
    assert_eq!(attempts.backoff_elapsed(), Action::Acquire);
    assert_eq!(attempts.call().attempts, 3);
    assert!(!attempts.may_follow(&retry));
}

#[test]
fn a_hedge_waits_while_calls_answer_in_order_and_spends_nothing_meanwhile() {
    let t0 = Instant::now();
    let retry = retry(hedging(Some(ms(20))), t0);
    let mut attempts = Attempts::new(&retry, t0, ms(999));
    assert!(matches!(
        attempts.admitted(&retry, || t0, attempts.next_timeout(), false),
        Action::Send { .. }
    ));
    let before = retry.budget_left(t0);
    assert_eq!(
        attempts.hedge(&retry, t0 + ms(20), Late::InOrder),
        Hedging::Later(HedgeOutcome::InOrder)
    );
    assert_eq!(attempts.call().attempts, 1, "no attempt is made yet");
    assert_eq!(retry.budget_left(t0), before, "nothing is withdrawn");
    assert_eq!(
        attempts.hedge_delay(&retry, None),
        Some(ms(20)),
        "weighed again after another delay"
    );
    // Overtaken by then: sent.
    assert_eq!(
        attempts.hedge(&retry, t0 + ms(40), Late::Alone),
        Hedging::Acquire
    );
    assert_eq!(attempts.call().attempts, 2);
}

fn asked_gate() -> bool {
    panic!("the gate was asked while an attempt is out")
}

#[test]
fn no_hedge_for_a_request_sent_once_without_a_delay_known_or_under_congestion() {
    let t0 = Instant::now();
    let learned = retry(hedging(None), t0);
    let attempts = Attempts::new(&learned, t0, ms(999));
    assert_eq!(
        attempts.hedge_delay(&learned, None),
        None,
        "nothing learned"
    );
    assert_eq!(attempts.hedge_delay(&learned, Some(ms(30))), Some(ms(30)));
    let once = Attempts::new(&learned, t0, ms(999)).no_resend();
    assert_eq!(once.hedge_delay(&learned, Some(ms(30))), None);
    let mut congested = Attempts::new(&learned, t0, ms(999));
    assert_eq!(
        congested.hedge(&learned, t0, Late::Congested),
        Hedging::Not(HedgeOutcome::Congested)
    );
    assert_eq!(
        congested.call().attempts,
        1,
        "a hedge not sent is no attempt"
    );
    // Near the deadline (250 ms), none either.
    assert_eq!(
        congested.hedge(&learned, t0 + ms(250), Late::Alone),
        Hedging::Not(HedgeOutcome::Deadline)
    );
    // Without hedging configured, never.
    let plain = retry(config(), t0);
    assert_eq!(
        Attempts::new(&plain, t0, ms(999)).hedge_delay(&plain, Some(ms(5))),
        None
    );
}
