//! The default clock, `QuantaClock`: it never goes backwards, keeps pace
//! with the OS clock, and an open breaker read through it never admits a
//! call before its cooldown ends.

#![cfg(feature = "quanta")]
#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::time::{Duration, Instant};

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::algorithms::BreakerState;
use rheostat::{
    clock::{Clock, DefaultClock, QuantaClock},
    Limiter, RejectReason,
};

#[test]
fn the_default_clock_is_the_quanta_clock() {
    let limiter = Limiter::new(rheostat::algorithms::Fixed::new(1).unwrap());
    let _: &Limiter<_, QuantaClock> = &limiter;
    let _: DefaultClock = QuantaClock::new();
}

#[test]
fn quanta_time_never_goes_backwards_on_any_thread() {
    let clock = QuantaClock::new();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut last = clock.now();
                for _ in 0..200_000 {
                    let now = clock.now();
                    assert!(now >= last, "{now:?} < {last:?}");
                    last = now;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Both clocks time the same stretch, however long the machine makes it:
/// their readings agree to within a few percent.
#[test]
fn quanta_time_keeps_pace_with_the_os_clock() {
    let clock = QuantaClock::new();
    let (q0, s0) = (clock.now(), Instant::now());
    std::thread::sleep(Duration::from_millis(50));
    let (q1, s1) = (clock.now(), Instant::now());
    let quanta = (q1 - q0).as_secs_f64();
    let system = (s1 - s0).as_secs_f64();
    assert!(
        (quanta / system - 1.0).abs() < 0.05,
        "quanta {quanta} s, system {system} s"
    );
}

/// The breaker opens for 30 ms; every call is refused as `Open` until the
/// clock says the cooldown is over, and a call is admitted only once it is.
#[test]
fn an_open_breaker_never_admits_before_its_cooldown_ends() {
    let cooldown = Duration::from_millis(30);
    let clock = QuantaClock::new();
    let limiter = Limiter::builder(
        Breaker::new(BreakerConfig {
            cooldown: Cooldown::Fixed(cooldown),
            cooldown_jitter: 0.0,
            ..BreakerConfig::recommended()
        })
        .unwrap(),
    )
    .clock(clock)
    .build()
    .unwrap();
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
    let reopens = limiter
        .gate()
        .until
        .expect("an open breaker says when it reopens");
    let mut refused = 0u64;
    loop {
        match limiter.try_acquire() {
            Err(rejection) => {
                assert_eq!(rejection.reason(), RejectReason::Open);
                refused += 1;
            }
            Ok(permit) => {
                // Read after the admission, on the limiter's own clock: if
                // even this is before the cooldown's end, the admission was
                // early.
                assert!(clock.now() >= reopens);
                assert!(
                    permit.is_probe(),
                    "the first call after a cooldown is a probe"
                );
                permit.success();
                break;
            }
        }
    }
    assert!(refused > 0);
}
