//! A breaker configuration is checked field by field: every field out of
//! its range is refused by its path, with the value and what is allowed.

use std::time::Duration;

use rheostat_algorithms::breaker::{
    BreakerConfig, BreakerWindow, Cooldown, HalfOpen, MAX_WINDOW_CALLS,
};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn both_presets_are_valid_and_the_default_is_the_recommended_one() {
    assert_eq!(BreakerConfig::default(), BreakerConfig::recommended());
    assert!(BreakerConfig::recommended().validate().is_ok());
    assert!(BreakerConfig::classic().validate().is_ok());
}

#[test]
fn every_invalid_field_is_named() {
    let base = BreakerConfig::recommended();
    let probes = |probes, close_after| HalfOpen::Probes {
        probes,
        close_after,
    };
    let fraction = |fraction, period, success_rate, min_probes| HalfOpen::Fraction {
        fraction,
        period,
        success_rate,
        min_probes,
    };
    let exp = |base, factor, cap| Cooldown::Exponential { base, factor, cap };
    let prop = |base, share, cap| Cooldown::Proportional { base, share, cap };
    let cases: Vec<(BreakerConfig, &str)> = vec![
        (
            BreakerConfig {
                failure_rate: Some(0.0),
                ..base.clone()
            },
            "breaker.failure_rate",
        ),
        (
            BreakerConfig {
                failure_rate: Some(1.5),
                ..base.clone()
            },
            "breaker.failure_rate",
        ),
        (
            BreakerConfig {
                failure_rate: Some(f64::NAN),
                ..base.clone()
            },
            "breaker.failure_rate",
        ),
        (
            BreakerConfig {
                failure_rate: None,
                slow_call_rate: None,
                ..base.clone()
            },
            "breaker.failure_rate",
        ),
        (
            BreakerConfig {
                slow_call_rate: Some(f64::INFINITY),
                ..base.clone()
            },
            "breaker.slow_call_rate",
        ),
        (
            BreakerConfig {
                slow_call_rate: Some(-0.5),
                ..base.clone()
            },
            "breaker.slow_call_rate",
        ),
        (
            BreakerConfig {
                slow_call_duration: Duration::ZERO,
                ..base.clone()
            },
            "breaker.slow_call_duration",
        ),
        (
            BreakerConfig {
                slow_call_duration: Duration::MAX,
                ..base.clone()
            },
            "breaker.slow_call_duration",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Count { calls: 0 },
                min_calls: 1,
                ..base.clone()
            },
            "breaker.window.count.calls",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Count { calls: u32::MAX },
                ..base.clone()
            },
            "breaker.window.count.calls",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Count { calls: 10 },
                min_calls: 20,
                ..base.clone()
            },
            "breaker.min_calls",
        ),
        (
            BreakerConfig {
                min_calls: 0,
                ..base.clone()
            },
            "breaker.min_calls",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Time {
                    length: Duration::ZERO,
                    buckets: 10,
                },
                ..base.clone()
            },
            "breaker.window.time.length",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Time {
                    length: Duration::MAX,
                    buckets: 10,
                },
                ..base.clone()
            },
            "breaker.window.time.length",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Time {
                    length: secs(30),
                    buckets: 0,
                },
                ..base.clone()
            },
            "breaker.window.time.buckets",
        ),
        (
            BreakerConfig {
                window: BreakerWindow::Time {
                    length: Duration::from_millis(100),
                    buckets: 1000,
                },
                ..base.clone()
            },
            "breaker.window.time.buckets",
        ),
        (
            BreakerConfig {
                cooldown: Cooldown::Fixed(Duration::ZERO),
                ..base.clone()
            },
            "breaker.cooldown.fixed",
        ),
        (
            BreakerConfig {
                cooldown: exp(Duration::ZERO, 2.0, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.exponential.base",
        ),
        (
            BreakerConfig {
                cooldown: exp(secs(90), 2.0, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.exponential.base",
        ),
        (
            BreakerConfig {
                cooldown: exp(secs(10), 0.5, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.exponential.factor",
        ),
        (
            BreakerConfig {
                cooldown: exp(secs(10), f64::NAN, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.exponential.factor",
        ),
        (
            BreakerConfig {
                cooldown: exp(secs(10), 2.0, Duration::MAX),
                ..base.clone()
            },
            "breaker.cooldown.exponential.cap",
        ),
        (
            BreakerConfig {
                consecutive_failures: MAX_WINDOW_CALLS + 1,
                ..base.clone()
            },
            "breaker.consecutive_failures",
        ),
        (
            BreakerConfig {
                cooldown: prop(secs(5), 0.0, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.proportional.share",
        ),
        (
            BreakerConfig {
                cooldown: prop(secs(5), 1.5, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.proportional.share",
        ),
        (
            BreakerConfig {
                cooldown: prop(secs(90), 0.1, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.proportional.base",
        ),
        (
            BreakerConfig {
                cooldown: prop(Duration::ZERO, 0.1, secs(60)),
                ..base.clone()
            },
            "breaker.cooldown.proportional.base",
        ),
        (
            BreakerConfig {
                cooldown: prop(secs(5), 0.1, Duration::MAX),
                ..base.clone()
            },
            "breaker.cooldown.proportional.cap",
        ),
        (
            BreakerConfig {
                ramp_successes: 0,
                ..base.clone()
            },
            "breaker.ramp_successes",
        ),
        (
            BreakerConfig {
                cooldown_jitter: 1.0,
                ..base.clone()
            },
            "breaker.cooldown_jitter",
        ),
        (
            BreakerConfig {
                cooldown_jitter: f64::NAN,
                ..base.clone()
            },
            "breaker.cooldown_jitter",
        ),
        (
            BreakerConfig {
                half_open: probes(0, 0),
                ..base.clone()
            },
            "breaker.half_open.probes.probes",
        ),
        (
            BreakerConfig {
                half_open: probes(5, 0),
                ..base.clone()
            },
            "breaker.half_open.probes.close_after",
        ),
        (
            BreakerConfig {
                half_open: probes(4, 5),
                ..base.clone()
            },
            "breaker.half_open.probes.close_after",
        ),
        (
            BreakerConfig {
                half_open: fraction(0.0, secs(30), 0.8, 5),
                ..base.clone()
            },
            "breaker.half_open.fraction.fraction",
        ),
        (
            BreakerConfig {
                half_open: fraction(0.05, Duration::ZERO, 0.8, 5),
                ..base.clone()
            },
            "breaker.half_open.fraction.period",
        ),
        (
            BreakerConfig {
                half_open: fraction(0.05, secs(30), f64::NAN, 5),
                ..base.clone()
            },
            "breaker.half_open.fraction.success_rate",
        ),
        (
            BreakerConfig {
                half_open: fraction(0.05, secs(30), 0.8, 0),
                ..base.clone()
            },
            "breaker.half_open.fraction.min_probes",
        ),
        (
            BreakerConfig {
                probe_concurrency: 0,
                ..base.clone()
            },
            "breaker.probe_concurrency",
        ),
        (
            BreakerConfig {
                probe_timeout: Duration::ZERO,
                ..base.clone()
            },
            "breaker.probe_timeout",
        ),
        (
            BreakerConfig {
                ramp: Duration::MAX,
                ..base.clone()
            },
            "breaker.ramp",
        ),
        (
            BreakerConfig {
                ramp_start: 0.0,
                ..base.clone()
            },
            "breaker.ramp_start",
        ),
        (
            BreakerConfig {
                fleet_size: 0,
                ..base.clone()
            },
            "breaker.fleet_size",
        ),
        (
            BreakerConfig {
                fleet_size: u32::MAX,
                ..base.clone()
            },
            "breaker.fleet_size",
        ),
    ];
    for (config, field) in cases {
        let err = config.validate().expect_err(field);
        assert_eq!(err.field(), field, "{config:?}: {err}");
    }
}

#[test]
fn a_zero_ramp_and_a_single_probe_are_allowed() {
    let c = BreakerConfig {
        ramp: Duration::ZERO,
        half_open: HalfOpen::Probes {
            probes: 1,
            close_after: 1,
        },
        slow_call_rate: Some(1.0),
        failure_rate: None,
        ..BreakerConfig::recommended()
    };
    assert!(c.validate().is_ok());
}
