//! The breaker behind a real limiter: rejection while open, probes marked on
//! permits, transitions reported, pausing and active probes.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::BreakerState;
use rheostat::limiter::Ready;
use rheostat::{
    clock::Clock, clock::ManualClock, clock::TokioClock, limiter::Readiness, CallError, Limiter,
    Outcome, RejectReason,
};

fn config() -> BreakerConfig {
    BreakerConfig {
        cooldown: Cooldown::Fixed(Duration::from_secs(10)),
        cooldown_jitter: 0.0,
        ..BreakerConfig::recommended()
    }
}

/// Ten failures in a row: the window holds too few calls to judge a rate,
/// and the run opens it.
fn trip<C: Clock>(limiter: &Limiter<Breaker, C>) {
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
}

#[test]
fn an_open_breaker_rejects_at_once_and_says_when_to_retry() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(config()).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    trip(&limiter);
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    clock.advance(Duration::from_secs(4));
    let refused = limiter.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(refused.policy(), "breaker");
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(6)));
    assert_eq!(
        limiter.ready().now(),
        Readiness::Shut {
            retry_after: Some(Duration::from_secs(6))
        }
    );
}

#[test]
fn half_open_admits_capped_probes_marked_on_the_permit_then_closes_and_ramps() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(config()).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    trip(&limiter);
    clock.advance(Duration::from_secs(10));
    assert_eq!(limiter.ready().now(), Readiness::Probing);
    let probes: Vec<_> = (0..5).map(|_| limiter.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    // The allowance is spent: nothing else goes while the probes are out.
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
    for p in probes {
        clock.advance(Duration::from_millis(100));
        p.success();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // Ramping: a fraction of traffic, rising.
    let first = limiter.gate().admit_probability;
    assert!(first < 1.0, "{first}");
    clock.advance(Duration::from_secs(15));
    limiter.wake();
    assert!(limiter.gate().admit_probability > first);
    clock.advance(Duration::from_secs(20));
    limiter.wake();
    assert_eq!(limiter.gate().admit_probability, 1.0);
}

/// What `gate()` reads is what admission enforces: once the cooldown is
/// over, the gate reads half-open with its probe limit before any call has
/// asked (the transition is lazy, made by whoever looks first), so a user
/// checking in-flight against it never sees a probe admitted over a limit
/// of 0.
#[test]
fn the_gate_read_after_the_cooldown_is_the_one_probes_are_held_to() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(config()).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(limiter.gate().max_in_flight(), None, "closed: no limit");
    trip(&limiter);
    assert_eq!(limiter.gate().limit, 0);
    clock.advance(Duration::from_secs(10));
    let gate = limiter.gate();
    assert!(gate.probe, "{gate:?}");
    assert_eq!(gate.max_in_flight(), Some(5), "{gate:?}");
    // Each admission is held to the gate read just before it. (Once the
    // allowance is spent the gate shuts with the probes still out: a gate
    // may fall below the calls in flight, as a cut limit does; it is never
    // exceeded by an admission.)
    let mut held = Vec::new();
    loop {
        let before = limiter.gate();
        let Ok(permit) = limiter.try_acquire() else {
            assert_eq!(before.limit, 0, "refused under {before:?}");
            break;
        };
        assert!(permit.is_probe());
        held.push(permit);
        assert!(limiter.in_flight() <= before.limit, "{before:?}");
    }
    assert_eq!(held.len(), 5);
}

#[test]
fn a_cancelled_probe_gives_its_slot_back() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(config()).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    trip(&limiter);
    clock.advance(Duration::from_secs(10));
    let probes: Vec<_> = (0..5).map(|_| limiter.try_acquire().unwrap()).collect();
    drop(probes);
    // Dropped probes taught nothing and are given back.
    let again = limiter.try_acquire().unwrap();
    assert!(again.is_probe());
}

#[test]
fn transitions_reach_the_hook_with_their_cause() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(config()).unwrap())
        .clock(clock.clone())
        .on_transition({
            let seen = Arc::clone(&seen);
            move |t| seen.lock().unwrap().push(*t)
        })
        .build()
        .unwrap();
    trip(&limiter);
    clock.advance(Duration::from_secs(10));
    let _ = limiter.try_acquire();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[0].from, seen[0].to),
        (BreakerState::Closed, BreakerState::Open)
    );
    assert_eq!(seen[0].failure_rate, 1.0);
    assert_eq!(seen[0].calls, 10);
    assert_eq!(
        (seen[1].from, seen[1].to),
        (BreakerState::Open, BreakerState::HalfOpen)
    );
}

#[tokio::test(start_paused = true)]
async fn wait_ready_pauses_until_the_cooldown_ends() {
    let limiter = Limiter::builder(Breaker::new(config()).unwrap())
        .clock(TokioClock)
        .build()
        .unwrap();
    trip(&limiter);
    let started = tokio::time::Instant::now();
    limiter.ready().wait().await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(11),
        "{waited:?}"
    );
    // Without an active probe, the caller's next call is the probe.
    assert!(limiter.try_acquire().unwrap().is_probe());
}

#[tokio::test(start_paused = true)]
async fn wait_ready_returns_when_forced_open_is_lifted() {
    let limiter = Arc::new(
        Limiter::builder(Breaker::new(config()).unwrap())
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    limiter.update(|b| b.force_open(TokioClock.now()));
    assert_eq!(limiter.ready().now(), Readiness::Shut { retry_after: None });
    let waiter = tokio::spawn({
        let limiter = Arc::clone(&limiter);
        async move { limiter.ready().wait().await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!waiter.is_finished());
    limiter.update(|b| b.reset(TokioClock.now()));
    waiter.await.unwrap();
}

fn with_active_probe(checks: &Arc<AtomicU32>, healthy: bool) -> Arc<Limiter<Breaker, TokioClock>> {
    let checks = Arc::clone(checks);
    Arc::new(
        Limiter::builder(Breaker::new(config()).unwrap())
            .clock(TokioClock)
            .active_probe(Duration::from_secs(5), move || {
                checks.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if healthy {
                        Outcome::Success
                    } else {
                        Outcome::Overload
                    }
                }
            })
            .build()
            .unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn an_active_probe_decides_half_open_and_no_user_call_is_gambled() {
    let checks = Arc::new(AtomicU32::new(0));
    let limiter = with_active_probe(&checks, true);
    trip(&limiter);
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Half-open: a user call is refused, not used as a probe.
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
    // Three consumers pause; the health check probes for them.
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let limiter = Arc::clone(&limiter);
            tokio::spawn(async move { limiter.ready().wait().await })
        })
        .collect();
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    assert_eq!(
        checks.load(Ordering::SeqCst),
        4,
        "four of five successes close it"
    );
}

#[tokio::test(start_paused = true)]
async fn the_driver_runs_the_active_probe_with_no_one_waiting() {
    let checks = Arc::new(AtomicU32::new(0));
    let limiter = with_active_probe(&checks, false);
    let driver = tokio::spawn(Ready::new(Arc::clone(&limiter)).drive());
    trip(&limiter);
    tokio::time::sleep(Duration::from_secs(12)).await;
    // The dependency is still down: the failing check reopened the breaker
    // after two failures, without any user call.
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    assert!(checks.load(Ordering::SeqCst) >= 2);
    driver.abort();
}

fn classify(r: &Result<(), ()>) -> Outcome {
    if r.is_ok() {
        Outcome::Success
    } else {
        Outcome::Overload
    }
}

/// A cold dependency: it answers in 2 s, over the caller's 800 ms.
async fn slow() -> Result<(), ()> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn call_gives_a_probe_the_breakers_probe_timeout() {
    // The breaker's probe timeout is both its own deadline for a probe and
    // the attempt timeout `call` gives one: 5 s here.
    let config = BreakerConfig {
        probe_timeout: Duration::from_secs(5),
        ..config()
    };
    let limiter = Limiter::builder(Breaker::new(config.clone()).unwrap())
        .clock(TokioClock)
        .build()
        .unwrap();
    assert_eq!(limiter.timeouts().probe, Some(Duration::from_secs(5)));
    trip(&limiter);
    tokio::time::sleep(Duration::from_secs(10)).await;
    for _ in 0..4 {
        let r = limiter
            .admission()
            .timeout(Duration::from_millis(800))
            .call(classify, slow)
            .await;
        assert!(r.is_ok(), "{r:?}");
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // Once closed, calls get the caller's own timeout again.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let r = limiter
        .admission()
        .timeout(Duration::from_millis(800))
        .call(classify, slow)
        .await;
    assert!(matches!(r, Err(CallError::TimedOut(_))), "{r:?}");
    // A probe that outlives the probe timeout is cut off there, and failed.
    let limiter = Limiter::builder(Breaker::new(config).unwrap())
        .clock(TokioClock)
        .build()
        .unwrap();
    trip(&limiter);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let hung = limiter
        .admission()
        .timeout(Duration::from_millis(800))
        .call(classify, std::future::pending)
        .await;
    assert!(
        matches!(hung, Err(CallError::TimedOut(d)) if d == Duration::from_secs(5)),
        "{hung:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn by_default_a_probe_is_given_30_s_on_every_path() {
    let limiter = Limiter::builder(Breaker::new(BreakerConfig::default()).unwrap())
        .clock(TokioClock)
        .build()
        .unwrap();
    let ordinary = Duration::from_millis(800);
    assert_eq!(limiter.timeouts().probe, Some(Duration::from_secs(30)));
    // An ordinary call: the caller's timeout.
    let permit = limiter.try_acquire().unwrap();
    assert!(!permit.is_probe());
    assert_eq!(permit.timeout(ordinary), ordinary);
    permit.success();
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    tokio::time::sleep(Duration::from_secs(5)).await;
    // A `try_acquire` user asks the permit.
    let probe = limiter.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(probe.timeout(ordinary), Duration::from_secs(30));
    let timeout = probe.timeout(ordinary);
    let r = probe.run(timeout, classify, slow()).await;
    assert!(r.is_ok(), "{r:?}");
    // `call` does it by itself.
    for _ in 0..3 {
        let r = limiter
            .admission()
            .timeout(ordinary)
            .call(classify, slow)
            .await;
        assert!(r.is_ok(), "{r:?}");
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // A policy that never probes has no probe timeout.
    let fixed = Limiter::new(rheostat::algorithms::Fixed::new(1).unwrap());
    assert_eq!(fixed.timeouts().probe, None);
    assert_eq!(fixed.try_acquire().unwrap().timeout(ordinary), ordinary);
}

#[test]
fn calls_from_before_a_trip_do_not_count_after_the_breaker_closes_again() {
    // Without a slow-call trip the breaker needs no latencies, so these calls
    // are not timed: only the limiter's transition generation can tell that
    // they belong to an earlier state.
    let clock = ManualClock::new();
    let config = BreakerConfig {
        min_calls: 4,
        half_open: HalfOpen::Probes {
            probes: 5,
            close_after: 1,
        },
        probe_concurrency: 5,
        ramp: Duration::ZERO,
        ..config()
    };
    let limiter = Limiter::builder(Breaker::new(config).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    // Four calls hang through the trip (the probe gate still has room for
    // one probe beside them).
    let old: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();
    assert!(old.iter().all(|p| p.started().is_none()));
    let fail_until_open = || {
        for _ in 0..20 {
            match limiter.try_acquire() {
                Ok(permit) => permit.overload(),
                Err(_) => break,
            }
        }
    };
    fail_until_open();
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    clock.advance(Duration::from_secs(10));
    let probe = limiter.try_acquire().unwrap();
    assert!(probe.is_probe() && probe.started().is_some());
    probe.success();
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // Four failures from before the trip: enough to trip it again if they
    // counted.
    for p in old {
        p.overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // New failures do count.
    fail_until_open();
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
}

#[test]
fn a_breaker_without_a_slow_call_trip_reads_the_clock_at_most_once_per_call() {
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicU32>, ManualClock);
    impl Clock for Counting {
        fn now(&self) -> std::time::Instant {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.now()
        }
    }
    let reads = |config: BreakerConfig| {
        let clock = Counting::default();
        let limiter = Limiter::builder(Breaker::new(config).unwrap())
            .clock(clock.clone())
            .build()
            .unwrap();
        let before = clock.0.load(Ordering::SeqCst);
        for _ in 0..10 {
            limiter.try_acquire().unwrap().success();
        }
        clock.0.load(Ordering::SeqCst) - before
    };
    assert_eq!(reads(config()), 10);
    // A count window batches successes whenever they finish: no clock read.
    let count = BreakerConfig {
        window: BreakerWindow::Count { calls: 100 },
        ..config()
    };
    assert_eq!(reads(count), 0);
    let slow = BreakerConfig {
        slow_call_rate: Some(0.5),
        ..config()
    };
    assert_eq!(reads(slow), 20);
}

#[test]
fn the_probe_timeout_is_the_breakers_through_a_stack_and_a_configuration_file() {
    use rheostat::algorithms::{Breaker, BreakerConfig, Fixed, Stack};
    use rheostat::config::LimitersConfig;

    let breaker = |secs| {
        Breaker::new(BreakerConfig {
            probe_timeout: Duration::from_secs(secs),
            ..BreakerConfig::default()
        })
        .unwrap()
    };
    // In a stack, the shortest: past it, some member counts the probe failed.
    let stack = Stack::builder()
        .push(breaker(20))
        .push(Fixed::new(8).unwrap())
        .push(breaker(7))
        .build()
        .unwrap();
    let limiter = Limiter::new(stack);
    assert_eq!(limiter.timeouts().probe, Some(Duration::from_secs(7)));

    let file = LimitersConfig::from_toml(
        r#"
        [limiters.search.policy]
        policy = "breaker"
        probe_timeout = "12s"

        [limiters.legacy.policy]
        policy = "fixed"
        limit = 4
        "#,
    )
    .unwrap();
    let search = file.build("search").unwrap();
    assert_eq!(search.timeouts().probe, Some(Duration::from_secs(12)));
    assert_eq!(file.build("legacy").unwrap().timeouts().probe, None);
    // The limiter's own key is gone, and refused with the way to the new one.
    let err = LimitersConfig::from_toml(
        "[limiters.search]\nprobe_timeout = \"12s\"\n[limiters.search.policy]\npolicy = \"breaker\"\n",
    )
    .unwrap_err();
    assert_eq!(err.field(), "limiters.search.probe_timeout");
    assert_eq!(err.line(), Some(2));
    assert!(err.reason().contains("breaker's `probe_timeout`"), "{err}");
}
