//! An operator's overrides (`rheostat::overrides`): what each does to the
//! calls, that each ends by itself, and what the policy learns meanwhile.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::algorithms::{BreakerState, Fixed, Stack};
use rheostat::overrides::{Override, MAX_OVERRIDE};
use rheostat::{clock::ManualClock, Limiter, Observer, RejectReason};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker with a fixed 10 s cooldown, on a manual clock.
fn breaker() -> (Limiter<Breaker, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let config = BreakerConfig {
        cooldown: Cooldown::Fixed(secs(10)),
        cooldown_jitter: 0.0,
        ..BreakerConfig::recommended()
    };
    let limiter = Limiter::builder(Breaker::new(config).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    (limiter, clock)
}

/// Ten failures in a row open it.
fn trip(limiter: &Limiter<Breaker, ManualClock>) {
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
}

fn fixed(limit: u32) -> (Limiter<Fixed, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Fixed::new(limit).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    (limiter, clock)
}

#[test]
fn a_forced_open_refuses_every_call_until_it_ends_and_then_the_policy_decides() {
    let (limiter, clock) = fixed(10);
    limiter
        .overrides()
        .set(Override::ForceOpen, secs(60))
        .unwrap();
    for _ in 0..100 {
        let e = limiter.try_acquire().unwrap_err();
        assert_eq!(e.reason(), RejectReason::Open);
    }
    clock.advance(secs(59));
    assert!(limiter.try_acquire().is_err());
    // It ends at its instant, at the first call that looks.
    clock.advance(secs(1));
    let permit = limiter.try_acquire().unwrap();
    assert_eq!(limiter.overrides().in_force(), None);
    permit.success();
    assert_eq!(limiter.gate().limit, 10);
}

#[test]
fn a_forced_open_refuses_a_breakers_probes_too() {
    let (limiter, clock) = breaker();
    trip(&limiter);
    limiter
        .overrides()
        .set(Override::ForceOpen, secs(60))
        .unwrap();
    // The cooldown ends under the override: no probe goes.
    clock.advance(secs(30));
    limiter.wake();
    for _ in 0..10 {
        assert!(limiter.try_acquire().is_err());
    }
    clock.advance(secs(30));
    let probe = limiter.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
}

#[test]
fn a_forced_closed_breaker_admits_while_failing_and_starts_afresh_when_it_ends() {
    let (limiter, clock) = breaker();
    trip(&limiter);
    assert!(limiter.try_acquire().is_err());
    limiter
        .overrides()
        .set(Override::ForceClosed, secs(120))
        .unwrap();
    assert_eq!(limiter.snapshot().state, Some(BreakerState::ForcedClosed));
    // Held closed: failures are recorded, and it does not open.
    for _ in 0..50 {
        limiter.try_acquire().unwrap().overload();
    }
    clock.advance(secs(120));
    limiter.wake();
    assert_eq!(limiter.overrides().in_force(), None);
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // Let go, it judges afresh: ten more failures open it.
    trip(&limiter);
}

#[test]
fn forced_closed_holds_the_breaker_of_a_stack_and_the_limit_beside_it_still_limits() {
    let clock = ManualClock::new();
    let stack = Stack::builder()
        .push(Breaker::new(BreakerConfig::recommended()).unwrap())
        .push(Fixed::new(2).unwrap())
        .build()
        .unwrap();
    let limiter = Limiter::builder(stack).clock(clock).build().unwrap();
    limiter
        .overrides()
        .set(Override::ForceClosed, secs(60))
        .unwrap();
    let held: Vec<_> = (0..2).map(|_| limiter.try_acquire().unwrap()).collect();
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::LimitReached
    );
    drop(held);
}

#[test]
fn forced_closed_is_refused_for_a_policy_without_a_breaker_and_the_override_in_force_stays() {
    let (limiter, _clock) = fixed(10);
    limiter.overrides().set(Override::Cap(3), secs(60)).unwrap();
    let e = limiter
        .overrides()
        .set(Override::ForceClosed, secs(60))
        .unwrap_err();
    assert_eq!(e.field(), "override.kind");
    assert!(e.to_string().contains("fixed"), "{e}");
    assert_eq!(
        limiter.overrides().in_force().map(|o| o.0),
        Some(Override::Cap(3))
    );
    assert_eq!(limiter.gate().limit, 3);
}

#[test]
fn an_override_out_of_range_is_refused_by_name() {
    let (limiter, _clock) = fixed(10);
    for (overriding, lasting, field) in [
        (Override::ForceOpen, Duration::ZERO, "override.lasting"),
        (
            Override::ForceOpen,
            MAX_OVERRIDE + secs(1),
            "override.lasting",
        ),
        (Override::Cap(0), secs(1), "override.cap"),
        (Override::Cap(u32::MAX), secs(1), "override.cap"),
    ] {
        let e = limiter.overrides().set(overriding, lasting).unwrap_err();
        assert_eq!(e.field(), field, "{overriding:?} {lasting:?}");
    }
    assert_eq!(limiter.overrides().in_force(), None);
    limiter
        .overrides()
        .set(Override::ForceOpen, MAX_OVERRIDE)
        .unwrap();
}

#[test]
fn metrics_only_admits_what_an_open_breaker_refuses_and_the_breaker_still_learns() {
    let (limiter, clock) = breaker();
    limiter
        .overrides()
        .set(Override::MetricsOnly, secs(60))
        .unwrap();
    clock.advance(secs(55));
    // The breaker opens on its own judgement, and is not obeyed.
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    // Its gate is back when the override ends: open, 5 s of its 10 s
    // cooldown left, then a probe.
    clock.advance(secs(5));
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
    assert_eq!(limiter.overrides().in_force(), None);
    clock.advance(secs(5));
    assert!(limiter.try_acquire().unwrap().is_probe());
}

#[test]
fn a_replaced_forced_closed_lets_the_breaker_go() {
    let (limiter, _clock) = breaker();
    limiter
        .overrides()
        .set(Override::ForceClosed, secs(60))
        .unwrap();
    limiter.overrides().set(Override::Cap(1), secs(60)).unwrap();
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    limiter.overrides().clear();
    assert_eq!(limiter.overrides().in_force(), None);
    trip(&limiter);
}

/// What an observer heard of overrides.
#[derive(Default)]
struct Heard(Mutex<Vec<String>>);

impl Observer for Heard {
    fn override_applied(&self, overriding: Override, lasting: Duration) {
        self.0
            .lock()
            .unwrap()
            .push(format!("applied {overriding} {}s", lasting.as_secs()));
    }
    fn override_ended(&self, overriding: Override, expired: bool) {
        let how = if expired { "expired" } else { "cleared" };
        self.0.lock().unwrap().push(format!("{how} {overriding}"));
    }
}

#[test]
fn the_observer_hears_each_override_applied_replaced_cleared_and_expired_once() {
    let clock = ManualClock::new();
    let heard = Arc::new(Heard::default());
    let limiter = Limiter::builder(Fixed::new(4).unwrap())
        .clock(clock.clone())
        .observer(Arc::clone(&heard))
        .build()
        .unwrap();
    limiter
        .overrides()
        .set(Override::ForceOpen, secs(10))
        .unwrap();
    limiter.overrides().set(Override::Cap(2), secs(10)).unwrap();
    limiter.overrides().clear();
    limiter.overrides().clear();
    limiter
        .overrides()
        .set(Override::MetricsOnly, secs(10))
        .unwrap();
    let snapshot = limiter.snapshot();
    assert_eq!(
        snapshot.overridden.map(|o| o.0),
        Some(Override::MetricsOnly)
    );
    clock.advance(secs(10));
    limiter.wake();
    limiter.wake();
    assert_eq!(limiter.snapshot().overridden, None);
    assert_eq!(
        *heard.0.lock().unwrap(),
        [
            "applied force_open 10s",
            "cleared force_open",
            "applied cap 2 10s",
            "cleared cap 2",
            "applied metrics_only 10s",
            "expired metrics_only",
        ]
    );
}

/// One step of a random run.
#[derive(Clone, Debug)]
enum Step {
    Set(u8, u32, u64),
    Clear,
    Acquire,
    Release(usize),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..4, 0u32..12, 0u64..120).prop_map(|(k, n, s)| Step::Set(k, n, s)),
        Just(Step::Clear),
        Just(Step::Acquire),
        Just(Step::Acquire),
        (0usize..16).prop_map(Step::Release),
        (0u64..30).prop_map(Step::Advance),
    ]
}

fn kind(k: u8, n: u32) -> Override {
    match k {
        0 => Override::ForceOpen,
        1 => Override::ForceClosed,
        2 => Override::Cap(n),
        _ => Override::MetricsOnly,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// However overrides are set, cleared, replaced and left to expire
    /// among calls: no call is admitted while a forced open lasts, none
    /// beyond a cap or the policy's limit while a cap lasts, every call
    /// the limit allows while metrics-only lasts, and an override never
    /// outlives its end past the next call; nothing leaks.
    #[test]
    fn overrides_hold_while_they_last_and_end_when_they_should(
        steps in proptest::collection::vec(step(), 1..120),
    ) {
        const LIMIT: u32 = 6;
        let (limiter, clock) = fixed(LIMIT);
        let mut held = Vec::new();
        let mut elapsed = 0u64;
        // The override the steps set, and its end in elapsed seconds.
        let mut expected: Option<(Override, u64)> = None;
        for step in steps {
            match step {
                Step::Set(k, n, s) => {
                    let overriding = kind(k, n);
                    let result = limiter.overrides().set(overriding, secs(s));
                    let valid = s > 0 && overriding != Override::ForceClosed
                        && overriding != Override::Cap(0);
                    prop_assert_eq!(result.is_ok(), valid, "{:?} {}", overriding, s);
                    if valid {
                        expected = Some((overriding, elapsed + s));
                    }
                }
                Step::Clear => {
                    limiter.overrides().clear();
                    expected = None;
                }
                Step::Acquire => {
                    let in_flight = u32::try_from(held.len()).unwrap();
                    let now_in_force = expected.filter(|&(_, end)| elapsed < end).map(|o| o.0);
                    let allowed = match now_in_force {
                        Some(Override::ForceOpen) => 0,
                        Some(Override::Cap(n)) => n.min(LIMIT),
                        Some(Override::MetricsOnly) => u32::MAX,
                        _ => LIMIT,
                    };
                    match limiter.try_acquire() {
                        Ok(permit) => {
                            prop_assert!(in_flight < allowed, "{} in flight under {:?}", in_flight, now_in_force);
                            held.push(permit);
                        }
                        Err(_) => prop_assert!(in_flight >= allowed, "refused at {} under {:?}", in_flight, now_in_force),
                    }
                    if now_in_force.is_none() {
                        prop_assert_eq!(limiter.overrides().in_force(), None);
                        expected = None;
                    }
                }
                Step::Release(i) => {
                    if !held.is_empty() {
                        let permit = held.swap_remove(i % held.len());
                        permit.success();
                    }
                }
                Step::Advance(s) => {
                    clock.advance(secs(s));
                    elapsed += s;
                }
            }
        }
        drop(held);
        prop_assert_eq!(limiter.in_flight(), 0);
    }
}
