//! Successes held as a count change nothing a breaker or a throttle
//! decides: a limiter whose policy lets successes be held (and, untimed,
//! counted without its lock) admits, refuses and transitions exactly as one
//! whose policy hears of every call on its own.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown};
use rheostat::algorithms::{
    Algorithm, Deferral, Published, Sample, Snapshot, Throttle, ThrottleConfig, Transition,
};
use rheostat::{
    clock::{Clock, ManualClock},
    limiter::Sharding,
    Limiter, Outcome, Permit, RejectReason,
};

/// A policy that hears of every call on its own: it lets no success be
/// held.
struct Unbatched<P>(P);

impl<P: Algorithm> Algorithm for Unbatched<P> {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn publish(&self) -> Published {
        let inner = self.0.publish();
        inner.with_hints(inner.hints.with_deferral(None))
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.0.on_sample(now, sample);
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        self.0.on_admit(now)
    }
    fn on_rejected(&mut self, now: Instant, count: u64) {
        self.0.on_rejected(now, count);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now);
    }
    fn snapshot(&self) -> Snapshot {
        self.0.snapshot()
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        self.0.poll_transition()
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Acquire and record at once.
    Call(Outcome),
    /// Acquire and keep the permit.
    Hold,
    /// Record the oldest permit kept; `true` on a thread of its own (with
    /// slots parked per core, another shard than the test's thread).
    Release(Outcome, bool),
    /// Let time pass, in milliseconds.
    Advance(u64),
    /// Move the breaker by hand: force open, force closed, disable,
    /// metrics only, reset.
    Manual(u8),
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        6 => Just(Outcome::Success),
        3 => Just(Outcome::Overload),
        1 => Just(Outcome::Ignore),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => outcome().prop_map(Op::Call),
        1 => Just(Op::Hold),
        1 => (outcome(), any::<bool>()).prop_map(|(o, t)| Op::Release(o, t)),
        2 => (0u64..3_000).prop_map(Op::Advance),
        1 => (0u8..5).prop_map(Op::Manual),
    ]
}

fn config() -> impl Strategy<Value = BreakerConfig> {
    (
        prop_oneof![
            (10u32..60).prop_map(|calls| BreakerWindow::Count { calls }),
            (1u64..10, 1u32..6).prop_map(|(secs, buckets)| BreakerWindow::Time {
                length: Duration::from_secs(secs),
                buckets,
            }),
        ],
        1u32..10,
        0.2f64..0.8,
        prop_oneof![Just(Duration::ZERO), Just(Duration::from_secs(3))],
        prop_oneof![Just(0u32), 2u32..12],
    )
        .prop_map(|(window, min_calls, rate, ramp, run)| BreakerConfig {
            window,
            min_calls,
            failure_rate: Some(rate),
            consecutive_failures: run,
            cooldown: Cooldown::Fixed(Duration::from_secs(2)),
            ramp,
            ..BreakerConfig::recommended()
        })
}

type Log = Arc<Mutex<Vec<(u64, &'static str, &'static str, u64, u64)>>>;

/// A limiter over `policy` whose transitions are logged as (milliseconds
/// since start, from, to, failure rate in millionths, calls).
fn limiter<A: Algorithm>(
    policy: A,
    clock: &ManualClock,
    log: &Log,
    sharding: Sharding,
) -> Limiter<A, ManualClock> {
    let (log, start) = (Arc::clone(log), clock.now());
    Limiter::builder(policy)
        .clock(clock.clone())
        .sharding(sharding)
        .on_transition(move |t| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a rate in [0, 1], in millionths"
            )]
            let rate = (t.failure_rate * 1e6).round() as u64;
            let at = u64::try_from(t.at.duration_since(start).as_millis()).unwrap();
            log.lock()
                .unwrap()
                .push((at, t.from.as_str(), t.to.as_str(), rate, t.calls));
        })
        .build()
        .unwrap()
}

fn admitted<A: Algorithm>(
    result: Result<Permit<&'_ Limiter<A, ManualClock>>, rheostat::Rejection>,
) -> Result<Permit<&'_ Limiter<A, ManualClock>>, RejectReason> {
    result.map_err(|r| r.reason())
}

fn manual(breaker: &mut Breaker, what: u8, now: Instant) {
    match what {
        0 => breaker.force_open(now),
        1 => breaker.force_closed(now),
        2 => breaker.disable(now),
        3 => breaker.metrics_only(now),
        _ => breaker.reset(now),
    }
}

/// Drive `batched`, whose policy batches, and `single`, whose policy is
/// told every call, through the same `ops`: both must admit and refuse
/// alike and hold as many calls in flight. `manual` carries out
/// [`Op::Manual`]; `check` compares them further after every operation.
fn drive<A: Algorithm, B: Algorithm>(
    batched: &Limiter<A, ManualClock>,
    single: &Limiter<B, ManualClock>,
    (clock_a, clock_b): (&ManualClock, &ManualClock),
    ops: &[Op],
    mut manual: impl FnMut(u8) -> Result<(), TestCaseError>,
    mut check: impl FnMut(usize) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let (mut held_a, mut held_b) = (Vec::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Call(outcome) => {
                let (a, b) = (
                    admitted(batched.try_acquire()),
                    admitted(single.try_acquire()),
                );
                prop_assert_eq!(a.as_ref().err(), b.as_ref().err(), "op {}", i);
                if let (Ok(a), Ok(b)) = (a, b) {
                    prop_assert_eq!(a.is_probe(), b.is_probe(), "op {}", i);
                    a.record(outcome);
                    b.record(outcome);
                }
            }
            Op::Hold => {
                let (a, b) = (
                    admitted(batched.try_acquire()),
                    admitted(single.try_acquire()),
                );
                prop_assert_eq!(a.as_ref().err(), b.as_ref().err(), "op {}", i);
                if let (Ok(a), Ok(b)) = (a, b) {
                    held_a.push(a);
                    held_b.push(b);
                }
            }
            Op::Release(outcome, elsewhere) => {
                if !held_a.is_empty() {
                    let a = held_a.remove(0);
                    if elsewhere {
                        std::thread::scope(|s| s.spawn(|| a.record(outcome)).join().unwrap());
                    } else {
                        a.record(outcome);
                    }
                    held_b.remove(0).record(outcome);
                }
            }
            Op::Advance(ms) => {
                clock_a.advance(Duration::from_millis(ms));
                clock_b.advance(Duration::from_millis(ms));
            }
            Op::Manual(what) => manual(what)?,
        }
        prop_assert_eq!(batched.in_flight(), single.in_flight(), "op {}", i);
        check(i)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn batching_changes_no_admission_and_no_transition(
        config in config(),
        ops in prop::collection::vec(op(), 1..400),
        parking in any::<bool>(),
    ) {
        let (clock_a, clock_b) = (ManualClock::new(), ManualClock::new());
        let (log_a, log_b) = (Log::default(), Log::default());
        // With parking, successes are batched on the shards as well.
        let sharding = if parking { Sharding::Always } else { Sharding::Off };
        let batched = limiter(Breaker::new(config.clone()).unwrap(), &clock_a, &log_a, sharding);
        let single = limiter(
            Unbatched(Breaker::new(config).unwrap()),
            &clock_b,
            &log_b,
            Sharding::Off,
        );
        let clocks = (&clock_a, &clock_b);
        drive(&batched, &single, clocks, &ops, |what| {
            let (now_a, now_b) = (clock_a.now(), clock_b.now());
            batched.update(|b| manual(b, what, now_a));
            single.update(|u| manual(&mut u.0, what, now_b));
            Ok(())
        }, |i| {
            prop_assert_eq!(batched.gate().limit, single.gate().limit, "op {}", i);
            Ok(())
        })?;
        prop_assert_eq!(batched.snapshot().state, single.snapshot().state);
        prop_assert_eq!(&*log_a.lock().unwrap(), &*log_b.lock().unwrap());
    }
}

#[test]
fn successes_batched_before_failures_count_toward_the_trip() {
    // Five successes, counted without the breaker's lock, then five
    // failures: half of ten calls, the trip rate at the volume floor.
    let config = BreakerConfig {
        window: BreakerWindow::Count { calls: 10 },
        min_calls: 10,
        ..BreakerConfig::recommended()
    };
    let limiter = Limiter::builder(Breaker::new(config).unwrap())
        .clock(ManualClock::new())
        .build()
        .unwrap();
    for _ in 0..5 {
        limiter.try_acquire().unwrap().success();
    }
    for _ in 0..4 {
        limiter.try_acquire().unwrap().overload();
    }
    assert!(limiter.try_acquire().is_ok_and(|p| {
        p.overload();
        true
    }));
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
}

#[test]
fn a_success_that_brings_the_window_to_its_floor_still_trips_it_at_once() {
    // Six failures, then successes: the fourth makes ten calls with 60%
    // failed. Batching stops while that can happen, so the trip is not
    // put off to a later event.
    let config = BreakerConfig {
        window: BreakerWindow::Count { calls: 20 },
        min_calls: 10,
        ..BreakerConfig::recommended()
    };
    let limiter = Limiter::builder(Breaker::new(config).unwrap())
        .clock(ManualClock::new())
        .build()
        .unwrap();
    for _ in 0..6 {
        limiter.try_acquire().unwrap().overload();
    }
    for _ in 0..4 {
        limiter.try_acquire().unwrap().success();
    }
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
}

/// A breaker that counts every call it is told about, one by one or in
/// batches.
struct Counted {
    breaker: Breaker,
    told: Arc<std::sync::atomic::AtomicU64>,
}

impl Algorithm for Counted {
    fn name(&self) -> &'static str {
        "counted"
    }
    fn publish(&self) -> Published {
        self.breaker.publish()
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.breaker.on_sample(now, sample);
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        self.breaker.on_admit(now)
    }
    fn on_successes(&mut self, now: Instant, count: u64) {
        self.told
            .fetch_add(count, std::sync::atomic::Ordering::SeqCst);
        self.breaker.on_successes(now, count);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.breaker.handle_timeout(now);
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        self.breaker.poll_transition()
    }
}

#[test]
fn threads_hammering_a_batching_breaker_lose_no_call() {
    hammer(Sharding::Off);
}

#[test]
fn threads_hammering_a_batching_breaker_with_slots_parked_per_core_lose_no_call() {
    hammer(Sharding::Always);
}

fn hammer(sharding: Sharding) {
    use std::sync::atomic::{AtomicU64, Ordering};
    // The system clock, a count window and short cooldowns: the breaker
    // trips, probes and closes again while four threads batch successes.
    let told = Arc::new(AtomicU64::new(0));
    let breaker = Breaker::new(BreakerConfig {
        window: BreakerWindow::Count { calls: 50 },
        min_calls: 20,
        cooldown: Cooldown::Fixed(Duration::from_millis(2)),
        cooldown_jitter: 0.0,
        probe_timeout: Duration::from_millis(50),
        ramp: Duration::ZERO,
        ..BreakerConfig::recommended()
    })
    .unwrap();
    let transitions = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&transitions);
    let limiter = Limiter::builder(Counted {
        breaker,
        told: Arc::clone(&told),
    })
    .on_transition(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    })
    .sharding(sharding)
    .build()
    .unwrap();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let (limiter, admitted) = (&limiter, &admitted);
            s.spawn(move || {
                for i in 0..50_000u64 {
                    let Ok(permit) = limiter.try_acquire() else {
                        continue;
                    };
                    admitted.fetch_add(1, Ordering::SeqCst);
                    // Now and then a burst of failures trips it.
                    let failing = (i / 1_000 + thread) % 7 == 0;
                    permit.record(if failing {
                        Outcome::Overload
                    } else {
                        Outcome::Success
                    });
                }
            });
        }
    });
    let _ = limiter.snapshot(); // hands over what is still batched
    assert_eq!(limiter.in_flight(), 0);
    assert!(
        transitions.load(Ordering::SeqCst) >= 3,
        "it tripped and closed"
    );
    assert_eq!(
        told.load(Ordering::SeqCst),
        admitted.load(Ordering::SeqCst),
        "every admitted call is told to the policy once, alone or in a batch"
    );
}

// ----- the throttle ---------------------------------------------------------

fn throttle_config() -> impl Strategy<Value = ThrottleConfig> {
    (
        prop_oneof![Just(1.0), Just(1.5), Just(2.0), 1.0f64..3.0],
        0u32..4,
        1u64..8,
        1u32..6,
        prop_oneof![Just(0.9), 0.1f64..1.0],
        0u64..12,
        any::<bool>(),
    )
        .prop_map(
            |(k, pad, window_s, buckets, cap, min_requests, count_rejected)| ThrottleConfig {
                k,
                pad,
                window: Duration::from_secs(window_s),
                buckets,
                max_reject_probability: cap,
                min_requests,
                count_rejected,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn batching_changes_no_throttle_decision(
        config in throttle_config(),
        ops in prop::collection::vec(op(), 1..400),
        parking in any::<bool>(),
    ) {
        let (clock_a, clock_b) = (ManualClock::new(), ManualClock::new());
        let (start_a, start_b) = (clock_a.now(), clock_b.now());
        let sharding = if parking { Sharding::Always } else { Sharding::Off };
        let build = |clock: &ManualClock, sharding| {
            Limiter::builder(Throttle::new(config.clone()).unwrap())
                .clock(clock.clone())
                .sharding(sharding)
                .build()
                .unwrap()
        };
        let batched = build(&clock_a, sharding);
        let single = Limiter::builder(Unbatched(Throttle::new(config.clone()).unwrap()))
            .clock(clock_b.clone())
            .build()
            .unwrap();
        // A throttle has no manual states: the breaker's manual moves
        // become ignored calls here.
        let ignored = |_| {
            let (a, b) = (admitted(batched.try_acquire()), admitted(single.try_acquire()));
            prop_assert_eq!(a.as_ref().err(), b.as_ref().err());
            if let (Ok(a), Ok(b)) = (a, b) {
                a.ignore();
                b.ignore();
            }
            Ok(())
        };
        drive(&batched, &single, (&clock_a, &clock_b), &ops, ignored, |i| {
            let (gate_a, gate_b) = (batched.gate(), single.gate());
            prop_assert_eq!(
                gate_a.admit_probability.to_bits(),
                gate_b.admit_probability.to_bits(),
                "op {}",
                i
            );
            prop_assert_eq!(
                gate_a.until.map(|t| t - start_a),
                gate_b.until.map(|t| t - start_b),
                "op {}",
                i
            );
            Ok(())
        })?;
        // Everything batched is handed over: the same counts in the end.
        prop_assert_eq!(batched.update(|t| t.counts()), single.update(|t| t.0.counts()));
    }
}

#[test]
fn a_throttle_batches_only_while_no_success_could_make_it_reject() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(
        Throttle::new(ThrottleConfig {
            k: 2.0,
            pad: 0,
            min_requests: 0,
            ..ThrottleConfig::default()
        })
        .unwrap(),
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    // The first success starts the window; the rest are batched.
    for _ in 0..10 {
        limiter.try_acquire().unwrap().success();
    }
    assert_eq!(limiter.update(|t| t.counts()).accepted, 10);
    // 10 requests, 10 accepts, then 9 failures: 19 − 2·10 = −1, still
    // batching; one more failure, and successes are told one by one.
    for _ in 0..9 {
        limiter.try_acquire().unwrap().overload();
    }
    assert!(matches!(
        limiter.update(|t| t.publish().hints.deferral),
        Some(Deferral { until: Some(_), .. })
    ));
    limiter.try_acquire().unwrap().overload();
    assert_eq!(limiter.update(|t| t.publish().hints.deferral), None);
}
