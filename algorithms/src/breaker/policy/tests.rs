//! The breaker's own arithmetic: instants that saturate, cooldowns, the
//! configuration it keeps, the transition queue.

use super::*;
use crate::breaker::HalfOpen;

#[test]
fn later_saturates_instead_of_overflowing() {
    let now = Instant::now();
    assert_eq!(
        later(now, Duration::from_secs(1)),
        now + Duration::from_secs(1)
    );
    assert!(later(now, Duration::MAX) > now);
}

#[test]
fn the_exponential_cooldown_saturates_at_the_cap_for_any_cycle_count() {
    use crate::breaker::Cooldown;
    let mut b = Breaker::new(BreakerConfig {
        cooldown_jitter: 0.0,
        cooldown: Cooldown::Exponential {
            base: Duration::from_secs(10),
            factor: 2.0,
            cap: Duration::from_secs(60),
        },
        ..BreakerConfig::recommended()
    })
    .expect("valid");
    let now = Instant::now();
    b.failed_cycles = u32::MAX;
    assert_eq!(b.next_cooldown(now), Duration::from_secs(60));
    b.failed_cycles = 1;
    assert_eq!(b.next_cooldown(now), Duration::from_secs(20));
}

#[test]
fn the_proportional_cooldown_is_a_share_of_the_outage_within_its_bounds() {
    let mut b = Breaker::new(BreakerConfig {
        cooldown_jitter: 0.0,
        ..BreakerConfig::recommended()
    })
    .expect("valid");
    let t0 = Instant::now();
    let secs = Duration::from_secs;
    b.outage_since = Some(t0);
    for (outage, cooldown) in [(0, 5), (30, 5), (50, 5), (100, 10), (250, 25), (600, 60)] {
        assert_eq!(
            b.next_cooldown(t0 + secs(outage)),
            secs(cooldown),
            "{outage}"
        );
    }
    assert_eq!(b.next_cooldown(t0 + secs(1_000_000_000)), secs(60));
    b.outage_since = None;
    assert_eq!(b.next_cooldown(t0 + secs(1000)), secs(5));
}

#[test]
fn the_configuration_comes_back_equal_to_the_one_given() {
    use crate::breaker::{BreakerWindow, Cooldown};
    let configs = [
        BreakerConfig::recommended(),
        BreakerConfig::classic(),
        BreakerConfig {
            window: BreakerWindow::Time {
                length: Duration::new(29, 999_999_999),
                buckets: 7,
            },
            slow_call_rate: Some(0.25),
            cooldown: Cooldown::Fixed(Duration::from_millis(1_500)),
            half_open: HalfOpen::Fraction {
                fraction: 0.3,
                period: Duration::from_millis(2_500),
                success_rate: 0.9,
                min_probes: 3,
            },
            fleet_size: 7,
            ..BreakerConfig::recommended()
        },
    ];
    for config in configs {
        let b = Breaker::new(config.clone()).expect("valid");
        assert_eq!(b.config(), &config);
        assert_eq!(b.clone().config(), &config);
    }
}

#[test]
fn a_drained_transition_queue_holds_no_memory() {
    let mut b = Breaker::new(BreakerConfig::default()).expect("valid");
    let now = Instant::now();
    b.force_open(now);
    b.reset(now);
    assert!(b.transitions.0.is_some());
    assert!(b.poll_transition().is_some());
    assert!(b.poll_transition().is_some());
    assert!(b.transitions.0.is_none());
    assert!(b.poll_transition().is_none());
}
