//! Policies stacked behind one limiter: the meet of their gates, and a
//! rejection that names the member that refused.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::time::Duration;

use rheostat::algorithms::{Fixed, Stack, Throttle, ThrottleConfig};
use rheostat::{clock::ManualClock, Limiter, RejectReason};

fn fixed_and_throttle() -> (Limiter<Stack, ManualClock>, ManualClock) {
    let stack = Stack::builder()
        .push(Fixed::new(10).unwrap())
        .push(Throttle::new(ThrottleConfig::default()).unwrap())
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let limiter = Limiter::builder(stack)
        .clock(clock.clone())
        .seed(3)
        .build()
        .unwrap();
    (limiter, clock)
}

#[test]
fn a_fixed_limit_in_a_stack_caps_in_flight_and_is_named_when_it_refuses() {
    let (limiter, _clock) = fixed_and_throttle();
    let held: Vec<_> = (0..10).map(|_| limiter.try_acquire().unwrap()).collect();
    let refused = limiter.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::LimitReached);
    assert_eq!(refused.policy(), "fixed");
    assert_eq!(limiter.in_flight(), 10);
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn a_throttle_in_a_stack_refuses_by_name_and_in_flight_stays_under_the_fixed_limit() {
    let (limiter, clock) = fixed_and_throttle();
    // The dependency fails every call for a while.
    for _ in 0..200 {
        clock.advance(Duration::from_millis(10));
        if let Ok(p) = limiter.try_acquire() {
            p.overload();
        }
    }
    assert!(
        limiter.gate().admit_probability < 0.5,
        "{:?}",
        limiter.gate()
    );
    let mut held = Vec::new();
    let mut throttled = 0;
    for _ in 0..1_000 {
        match limiter.try_acquire() {
            Ok(p) => {
                held.push(p);
                assert!(limiter.in_flight() <= 10);
            }
            Err(r) if r.reason() == RejectReason::Throttled => {
                assert_eq!(r.policy(), "throttle");
                throttled += 1;
            }
            Err(r) => {
                assert_eq!(r.reason(), RejectReason::LimitReached);
                assert_eq!(r.policy(), "fixed");
            }
        }
    }
    assert!(throttled > 0);
    assert_eq!(held.len(), 10);
}
