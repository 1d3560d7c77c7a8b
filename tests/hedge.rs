//! Hedged calls through `Limiter::call`: the first answer wins, the loser
//! teaches nothing, and a hedge is sent only with a free slot, out of the
//! budget, while the policy sees no congestion.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat::algorithms::{Algorithm, Fixed, Gate, Published, Sample};
use rheostat::retry::{Backoff, Budget, Hedge, HedgeOutcome, RetryConfig};
use rheostat::{clock::TokioClock, Limiter, Observer, Outcome};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every hedge outcome, and every outcome the policy was told.
#[derive(Default)]
struct Seen {
    hedges: Mutex<Vec<HedgeOutcome>>,
    finished: Mutex<Vec<Outcome>>,
}

impl Observer for Seen {
    fn hedge(&self, outcome: HedgeOutcome) {
        self.hedges.lock().unwrap().push(outcome);
    }
    fn finished(&self, outcome: Outcome, _: Duration, _: u32) {
        self.finished.lock().unwrap().push(outcome);
    }
}

impl Seen {
    fn hedges(&self) -> Vec<HedgeOutcome> {
        std::mem::take(&mut *self.hedges.lock().unwrap())
    }
    fn outcomes(&self) -> Vec<Outcome> {
        std::mem::take(&mut *self.finished.lock().unwrap())
    }
}

/// A policy whose gate the test sets by hand.
struct Manual(Gate);

impl Algorithm for Manual {
    fn name(&self) -> &'static str {
        "manual"
    }
    fn publish(&self) -> Published {
        Published::new(self.0)
    }
    fn on_sample(&mut self, _: Instant, _: &Sample) {}
}

fn hedged(delay: Duration) -> RetryConfig {
    RetryConfig {
        attempts: 3,
        backoff: Backoff {
            base: ms(1),
            cap: ms(1),
        },
        hedge: Some(Hedge::after(delay)),
        ..RetryConfig::default()
    }
}

fn build<A: Algorithm>(policy: A, retry: RetryConfig) -> (Arc<Seen>, Limiter<A, TokioClock>) {
    let seen = Arc::new(Seen::default());
    let limiter = Limiter::builder(policy)
        .clock(TokioClock)
        .retry(retry)
        .timeout(Duration::from_secs(5))
        .observer(Arc::clone(&seen))
        .build()
        .unwrap();
    (seen, limiter)
}

/// One attempt of the test's dependency.
type Attempt = std::pin::Pin<Box<dyn std::future::Future<Output = Result<u32, ()>> + Send>>;

/// A dependency whose `n`th attempt (from 0) answers after `latencies[n]`
/// with its own number.
fn dependency(latencies: Vec<Duration>) -> (Arc<AtomicU32>, impl FnMut() -> Attempt) {
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let make = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let latency = latencies.get(n as usize).copied().unwrap_or(ms(1));
        Box::pin(async move {
            tokio::time::sleep(latency).await;
            Ok(n)
        }) as Attempt
    };
    (sent, make)
}

fn classify(r: &Result<u32, ()>) -> Outcome {
    if r.is_ok() {
        Outcome::Success
    } else {
        Outcome::Overload
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_and_the_first_answer_wins_while_the_loser_teaches_nothing() {
    let (seen, limiter) = build(Fixed::new(10).unwrap(), hedged(ms(50)));
    let (sent, make) = dependency(vec![Duration::from_secs(2), ms(10)]);
    let t0 = tokio::time::Instant::now();
    let answer = limiter.call(classify, make).await.unwrap();
    assert_eq!(answer, 1, "the hedge answered first");
    assert_eq!(t0.elapsed(), ms(60));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(seen.hedges(), [HedgeOutcome::Sent, HedgeOutcome::Won]);
    // The hedge's success, then the first attempt cancelled: ignored.
    assert_eq!(seen.outcomes(), [Outcome::Success, Outcome::Ignore]);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_answers_within_the_delay_sends_no_hedge() {
    let (seen, limiter) = build(Fixed::new(10).unwrap(), hedged(ms(50)));
    let (sent, make) = dependency(vec![ms(49)]);
    assert_eq!(limiter.call(classify, make).await.unwrap(), 0);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert!(seen.hedges().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_first_attempt_answering_first_makes_the_hedge_a_loss() {
    let (seen, limiter) = build(Fixed::new(10).unwrap(), hedged(ms(50)));
    let (_, make) = dependency(vec![ms(70), ms(100)]);
    assert_eq!(limiter.call(classify, make).await.unwrap(), 0);
    assert_eq!(seen.hedges(), [HedgeOutcome::Sent, HedgeOutcome::Lost]);
    assert_eq!(seen.outcomes(), [Outcome::Success, Outcome::Ignore]);
}

#[tokio::test(start_paused = true)]
async fn a_hedge_never_waits_for_a_slot() {
    // One slot, taken by the first attempt: the hedge is refused, not
    // queued, and the call is answered by the first attempt.
    let (seen, limiter) = build(Fixed::new(1).unwrap(), hedged(ms(50)));
    let (sent, make) = dependency(vec![ms(500)]);
    let t0 = tokio::time::Instant::now();
    assert_eq!(limiter.call(classify, make).await.unwrap(), 0);
    assert_eq!(t0.elapsed(), ms(500));
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(seen.hedges(), [HedgeOutcome::Refused]);
}

#[tokio::test(start_paused = true)]
async fn a_hedge_spends_the_retry_budget_and_always_leaves_a_retry_in_it() {
    let mut config = hedged(ms(50));
    config.budget = Budget {
        ratio: 0.0,
        min_per_second: 0.2, // two attempts over the 10 s window
        ..Budget::default()
    };
    let (seen, limiter) = build(Fixed::new(10).unwrap(), config);
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    // Attempts 0 and 2 stall, 1 and 4 answer in 10 ms, 3 fails at once.
    let mut make = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 | 2 => tokio::time::sleep(ms(500)).await,
                3 => return Err(()),
                _ => tokio::time::sleep(ms(10)).await,
            }
            Ok(n)
        }
    };
    // Two in the budget: a hedge takes one.
    assert_eq!(limiter.call(classify, &mut make).await.unwrap(), 1);
    assert_eq!(seen.hedges(), [HedgeOutcome::Sent, HedgeOutcome::Won]);
    // One left: kept for a retry, not hedged.
    assert_eq!(limiter.call(classify, &mut make).await.unwrap(), 2);
    assert_eq!(seen.hedges(), [HedgeOutcome::BudgetExhausted]);
    // Which a failure then gets.
    assert_eq!(limiter.call(classify, &mut make).await.unwrap(), 4);
    assert_eq!(sent.load(Ordering::SeqCst), 5);
}

#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_while_the_policy_sees_congestion() {
    for (gate, why) in [
        // The limit last moved down.
        (Gate::limited(5), "falling"),
        // A throttle refusing a share.
        (
            Gate {
                admit_probability: 0.999_999,
                ..Gate::limited(10)
            },
            "throttled",
        ),
        // A breaker half-open: trial calls only.
        (
            Gate {
                probe: true,
                ..Gate::limited(10)
            },
            "probing",
        ),
    ] {
        let (seen, limiter) = build(Manual(Gate::limited(10)), hedged(ms(50)));
        limiter.update(|policy| policy.0 = gate);
        let (sent, make) = dependency(vec![ms(500)]);
        assert_eq!(limiter.call(classify, make).await.unwrap(), 0, "{why}");
        assert_eq!(sent.load(Ordering::SeqCst), 1, "{why}");
        assert_eq!(seen.hedges(), [HedgeOutcome::Congested], "{why}");
        // The limit rising again ends it.
        limiter.update(|policy| policy.0 = Gate::limited(20));
        let (sent, make) = dependency(vec![ms(500), ms(10)]);
        assert_eq!(limiter.call(classify, make).await.unwrap(), 1, "{why}");
        assert_eq!(sent.load(Ordering::SeqCst), 2, "{why}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_sent_once_only_is_never_hedged() {
    let (seen, limiter) = build(Fixed::new(10).unwrap(), hedged(ms(50)));
    let (sent, make) = dependency(vec![ms(500)]);
    assert_eq!(
        limiter
            .admission()
            .send_once()
            .call(classify, make)
            .await
            .unwrap(),
        0
    );
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert!(seen.hedges().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_waits_for_the_hedge_still_out_before_any_retry() {
    let (seen, limiter) = build(Fixed::new(10).unwrap(), hedged(ms(50)));
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    // The first attempt fails at 80 ms; the hedge (sent at 50 ms) answers
    // at 90 ms: no retry is needed.
    let make = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => {
                    tokio::time::sleep(ms(80)).await;
                    Err(())
                }
                _ => {
                    tokio::time::sleep(ms(40)).await;
                    Ok(n)
                }
            }
        }
    };
    let t0 = tokio::time::Instant::now();
    assert_eq!(limiter.call(classify, make).await.unwrap(), 1);
    assert_eq!(t0.elapsed(), ms(90));
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert_eq!(seen.hedges(), [HedgeOutcome::Sent, HedgeOutcome::Won]);
    assert_eq!(seen.outcomes(), [Outcome::Overload, Outcome::Success]);
}

#[test]
fn a_learned_delay_needs_a_learned_timeout() {
    let err = Limiter::builder(Fixed::new(10).unwrap())
        .retry(RetryConfig {
            hedge: Some(Hedge::default()),
            ..RetryConfig::default()
        })
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "retry.hedge");
    let err = RetryConfig {
        hedge: Some(Hedge {
            quantile: 0.2,
            ..Hedge::default()
        }),
        ..RetryConfig::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid `retry.hedge.quantile`: found 0.2, expected a number in [0.5, 0.999]"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the latencies, attempts sent (hedges and retries) stay
    /// within the budget: calls × (1 + ratio) + min_per_second × ttl.
    #[test]
    fn hedges_and_retries_together_never_exceed_the_budget(
        latencies in prop::collection::vec(1u64..400, 1..200),
        failing in prop::collection::vec(any::<bool>(), 1..200),
        gap in 0u64..20,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let calls = latencies.len();
        let sent = rt.block_on(async {
            let mut config = hedged(ms(20));
            config.budget = Budget { ratio: 0.1, min_per_second: 0.5, ttl: Duration::from_secs(10) };
            let (_, limiter) = build(Fixed::new(1000).unwrap(), config);
            let limiter = Arc::new(limiter);
            let sent = Arc::new(AtomicU32::new(0));
            let mut tasks = Vec::new();
            for (i, &latency) in latencies.iter().enumerate() {
                let fails = failing[i % failing.len()];
                let limiter = Arc::clone(&limiter);
                let sent = Arc::clone(&sent);
                tasks.push(tokio::spawn(async move {
                    let make = || {
                        let n = sent.fetch_add(1, Ordering::SeqCst);
                        async move {
                            tokio::time::sleep(ms(latency / (u64::from(n % 3) + 1))).await;
                            if fails { Err(()) } else { Ok(n) }
                        }
                    };
                    let _ = limiter.call(classify, make).await;
                }));
                tokio::time::sleep(ms(gap)).await;
            }
            for task in tasks {
                task.await.unwrap();
            }
            sent.load(Ordering::SeqCst)
        });
        // The whole run lasts under 10 s, one window of the budget.
        let bound = calls as f64 * 1.1 + 0.5 * 10.0;
        prop_assert!(f64::from(sent) <= bound, "{sent} attempts for {calls} calls, bound {bound}");
    }
}

#[test]
fn a_learned_delay_is_the_p95_of_recent_successes_shown_in_the_timeouts_and_the_snapshot() {
    use rheostat::clock::ManualClock;
    use rheostat::Timeout;

    let clock = ManualClock::new();
    let limiter = Limiter::builder(Fixed::new(10).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(Duration::from_secs(15)))
        .retry(RetryConfig {
            hedge: Some(Hedge::default()),
            ..RetryConfig::default()
        })
        .build()
        .unwrap();
    assert_eq!(limiter.timeouts().hedge, None, "nothing learned yet");
    // Latencies of 1 to 100 ms, evenly: the p95 is 95 ms.
    for i in 0..400u64 {
        let permit = limiter.try_acquire().unwrap();
        clock.advance(ms(1 + i % 100));
        permit.success();
    }
    let delay = limiter.timeouts().hedge.unwrap();
    assert!(delay >= ms(94) && delay <= ms(97), "{delay:?}");
    assert_eq!(limiter.snapshot().hedge, Some(delay));
}

#[test]
fn an_attempt_outrun_by_a_hedge_still_counts_its_time_in_what_is_learned() {
    use rheostat::clock::ManualClock;
    use rheostat::Timeout;

    // 1,000 calls of 1 to 10 ms; one in fifty runs 500 ms and is then
    // abandoned, released as ignored or as outrun by a hedge.
    let learned = |outrun: bool| {
        let clock = ManualClock::new();
        let limiter = Limiter::builder(Fixed::new(10).unwrap())
            .clock(clock.clone())
            .timeout(Timeout::learned(Duration::from_secs(15)))
            .retry(RetryConfig {
                hedge: Some(Hedge::default()),
                ..RetryConfig::default()
            })
            .build()
            .unwrap();
        for i in 0..1_000u64 {
            let permit = limiter.try_acquire().unwrap();
            if i % 50 == 49 {
                clock.advance(ms(500));
                if outrun {
                    permit.outrun();
                } else {
                    permit.ignore();
                }
            } else {
                clock.advance(ms(1 + i % 10));
                permit.success();
            }
        }
        let timeouts = limiter.timeouts();
        (timeouts.learned.unwrap(), timeouts.hedge.unwrap())
    };
    let (ignored, ignored_hedge) = learned(false);
    let (outrun, outrun_hedge) = learned(true);
    // Ignored, the slow calls vanish: the timeout is learned from 10 ms
    // answers. Outrun, they count at 500 ms at least.
    assert!(ignored < ms(100), "{ignored:?}");
    assert!(outrun >= ms(500), "{outrun:?}");
    // The p95 is the fast answers' either way: one in fifty is 2%.
    assert!(
        ignored_hedge <= ms(11) && outrun_hedge <= ms(11),
        "{ignored_hedge:?} {outrun_hedge:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_after_a_failure_was_retried_or_a_call_refused_since_the_attempt_went() {
    for setback in ["retried", "refused"] {
        let (seen, limiter) = build(Fixed::new(2).unwrap(), hedged(ms(50)));
        let limiter = Arc::new(limiter);
        // The slow call: its attempt stalls 500 ms.
        let slow = {
            let limiter = Arc::clone(&limiter);
            tokio::spawn(async move {
                let (sent, make) = dependency(vec![ms(500), ms(10)]);
                let answer = limiter.call(classify, make).await.unwrap();
                (answer, sent.load(Ordering::SeqCst))
            })
        };
        tokio::time::sleep(ms(10)).await;
        match setback {
            // Another call fails at once and is retried.
            "retried" => {
                let mut failed = false;
                let make = move || {
                    let first = !std::mem::replace(&mut failed, true);
                    async move {
                        if first {
                            Err(())
                        } else {
                            Ok(7)
                        }
                    }
                };
                assert_eq!(limiter.call(classify, make).await.unwrap(), 7);
            }
            // Two calls take both slots a moment; a third is refused.
            _ => {
                let held = limiter.try_acquire().unwrap();
                assert!(limiter.try_acquire().is_err());
                held.success();
            }
        }
        let (answer, sent) = slow.await.unwrap();
        assert_eq!((answer, sent), (0, 1), "{setback}: no hedge");
        assert_eq!(seen.hedges(), [HedgeOutcome::Congested], "{setback}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_call_is_hedged_only_once_a_call_sent_after_it_has_succeeded() {
    let (seen, limiter) = build(Fixed::new(10).unwrap(), hedged(ms(50)));
    let limiter = Arc::new(limiter);
    let t0 = tokio::time::Instant::now();
    // The slow call: its attempt stalls 500 ms, a hedge would take 10 ms.
    let slow = {
        let limiter = Arc::clone(&limiter);
        tokio::spawn(async move {
            let (sent, make) = dependency(vec![ms(500), ms(10)]);
            let answer = limiter.call(classify, make).await.unwrap();
            (answer, sent.load(Ordering::SeqCst))
        })
    };
    // A call sent 10 ms later is as slow: the calls are answering in order,
    // and at 50 and 100 ms the hedge waits.
    tokio::time::sleep(ms(10)).await;
    let later = limiter.try_acquire().unwrap();
    tokio::time::sleep(ms(110)).await;
    // A failure is no overtaking; at 120 ms a call sent later succeeds.
    limiter.try_acquire().unwrap().overload();
    later.success();
    let (answer, sent) = slow.await.unwrap();
    assert_eq!((answer, sent), (1, 2), "hedged, and the hedge answered");
    assert_eq!(t0.elapsed(), ms(160), "sent at the weighing after 120 ms");
    assert_eq!(
        seen.hedges(),
        [
            HedgeOutcome::InOrder,
            HedgeOutcome::InOrder,
            HedgeOutcome::Sent,
            HedgeOutcome::Won
        ]
    );
}
