//! Probes a fleet shares (`Builder::shared_probes`): a probe needs a token
//! granted from outside as well as the breaker's own allowance.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown, HalfOpen};
use rheostat::clock::{Clock as _, ManualClock};
use rheostat::{Limiter, RejectReason};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker allowing 3 probes, opened, its 10 s cooldown over.
fn half_open(shared: bool) -> (Limiter<Breaker, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let config = BreakerConfig {
        cooldown: Cooldown::Fixed(secs(10)),
        cooldown_jitter: 0.0,
        half_open: HalfOpen::Probes {
            probes: 3,
            close_after: 3,
        },
        ..BreakerConfig::recommended()
    };
    let builder = Limiter::builder(Breaker::new(config).unwrap()).clock(clock.clone());
    let builder = if shared {
        builder.shared_probes()
    } else {
        builder
    };
    let limiter = builder.build().unwrap();
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    clock.advance(secs(10));
    (limiter, clock)
}

#[test]
fn without_a_token_no_probe_goes_and_each_token_lets_one() {
    let (limiter, clock) = half_open(true);
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
    limiter
        .overrides()
        .grant_probes(2, Some(clock.now() + secs(5)));
    let probes: Vec<_> = (0..2).map(|_| limiter.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(rheostat::Permit::is_probe));
    // The breaker would allow a third; the fleet's tokens are spent.
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::Open
    );
    assert_eq!(limiter.overrides().probe_tokens().0, 0);
    drop(probes);
}

#[test]
fn a_token_lapses_at_its_end_and_the_breakers_own_allowance_still_bounds() {
    let (limiter, clock) = half_open(true);
    limiter
        .overrides()
        .grant_probes(10, Some(clock.now() + secs(5)));
    let probes: Vec<_> = (0..3).map(|_| limiter.try_acquire().unwrap()).collect();
    // Three tokens spent; the breaker allows no fourth.
    assert!(limiter.try_acquire().is_err());
    assert_eq!(limiter.overrides().probe_tokens().0, 7);
    drop(probes);
    let (limiter, clock) = half_open(true);
    limiter
        .overrides()
        .grant_probes(1, Some(clock.now() + secs(1)));
    clock.advance(secs(1));
    assert!(limiter.try_acquire().is_err());
}

#[test]
fn a_limiter_that_does_not_share_its_probes_needs_no_token() {
    let (limiter, _clock) = half_open(false);
    let probes: Vec<_> = (0..3).map(|_| limiter.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(rheostat::Permit::is_probe));
    assert!(limiter.try_acquire().is_err());
}
