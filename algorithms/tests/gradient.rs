//! Gradient, rule by rule: the long and short averages, the noise band,
//! drops, app-limited windows, a slower dependency told from a queue.

use std::time::{Duration, Instant};

use rheostat_algorithms::window::WindowConfig;
use rheostat_algorithms::{Algorithm, Gradient, GradientConfig, Outcome, Sample};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ok(latency_ms: u64, in_flight: u32) -> Sample {
    Sample::new(Outcome::Success, ms(latency_ms), in_flight)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Windows of one call each, closing 10 ms after it. Without the noise
/// band, the loss tolerance and the slower rise of the long average, so
/// that each rule's arithmetic shows exactly; the tests of those three
/// set them.
fn gradient(config: GradientConfig) -> Gradient {
    Gradient::new(GradientConfig {
        noise: 0.0,
        loss_tolerance: 0.0,
        long_rise: 1.0,
        ..one_call_windows(config)
    })
    .expect("valid config")
}

fn one_call_windows(config: GradientConfig) -> GradientConfig {
    GradientConfig {
        window: WindowConfig {
            min_duration: ms(10),
            max_duration: ms(10),
            min_samples: 1,
            ..WindowConfig::default()
        },
        ..config
    }
}

fn window_of(g: &mut Gradient, t: &mut Instant, sample: &Sample) {
    g.on_sample(*t, sample);
    *t += ms(10);
    g.handle_timeout(*t);
}

/// A limiter whose long average has settled on `long_ms`, at `limit`,
/// with no headroom so that warming up does not move the limit.
fn warmed(t: &mut Instant, long_ms: u64, limit: u32) -> Gradient {
    let mut g = gradient(GradientConfig {
        initial: limit,
        headroom: 0.0,
        ..GradientConfig::default()
    });
    for _ in 0..1000 {
        window_of(&mut g, t, &ok(long_ms, limit));
    }
    assert_eq!(g.long_rtt(), Some(ms(long_ms)));
    assert!(close(g.raw_limit(), f64::from(limit)));
    g
}

#[test]
fn the_first_window_sets_the_long_average_and_a_calm_one_in_use_grows_a_call_per_round_trip() {
    let mut t = Instant::now();
    let mut g = gradient(GradientConfig {
        initial: 50,
        ..GradientConfig::default()
    });
    window_of(&mut g, &mut t, &ok(20, 50));
    assert_eq!(g.long_rtt(), Some(ms(20)));
    assert_eq!(g.short_rtt(), Some(ms(20)));
    // A window shorter than a round trip still counts one: + 1.
    assert!(close(g.raw_limit(), 51.0));
    // A window of ten round trips (200 ms of 20 ms calls, enough of
    // them to fill each at half the limit): + 10.
    for _ in 0..300 {
        g.on_sample(t, &ok(20, 51));
    }
    t += ms(200);
    g.on_sample(t, &ok(20, 51));
    g.handle_timeout(t);
    assert!(close(g.raw_limit(), 61.0), "{}", g.raw_limit());
    // Not in use (under half the limit): no growth.
    window_of(&mut g, &mut t, &ok(20, 20));
    assert!(close(g.raw_limit(), 61.0), "{}", g.raw_limit());
}

#[test]
fn the_long_average_is_a_plain_mean_until_the_exponential_weight_takes_over() {
    let mut t = Instant::now();
    let mut g = gradient(GradientConfig {
        initial: 50,
        long_window: 3,
        ..GradientConfig::default()
    });
    window_of(&mut g, &mut t, &ok(20, 50));
    window_of(&mut g, &mut t, &ok(40, 50));
    // Mean of 20 and 40 (weight 1/2, the larger of 1/2 and 2/4).
    assert_eq!(g.long_rtt(), Some(ms(30)));
    window_of(&mut g, &mut t, &ok(30, 50));
    // 1/3 < 2/4: exponential from here, 30 + (30 − 30) / 2.
    assert_eq!(g.long_rtt(), Some(ms(30)));
    window_of(&mut g, &mut t, &ok(50, 50));
    assert_eq!(g.long_rtt(), Some(ms(40)));
}

#[test]
fn a_slower_window_shrinks_the_limit_by_the_smoothed_gradient() {
    let mut t = Instant::now();
    let mut g = warmed(&mut t, 20, 100);
    window_of(&mut g, &mut t, &ok(25, 100));
    // long = 20 + (2/601) · 5; gradient = long / 25; no headroom.
    let long = 0.020 + 2.0 / 601.0 * 0.005;
    let gradient = long / 0.025;
    assert!(close(g.raw_limit(), 100.0 * 0.8 + 100.0 * gradient * 0.2));
    assert!(g.raw_limit() < 97.0);
}

#[test]
fn the_gradient_never_cuts_by_more_than_half() {
    let mut t = Instant::now();
    let mut g = warmed(&mut t, 20, 100);
    window_of(&mut g, &mut t, &ok(10_000, 100));
    // gradient clamped at 0.5: 100 · 0.8 + 50 · 0.2
    assert!(close(g.raw_limit(), 90.0));
}

#[test]
fn within_the_tolerance_the_limit_holds_and_only_a_calm_window_adds_headroom() {
    let mut t = Instant::now();
    let mut g = warmed(&mut t, 20, 100);
    g.set_config(GradientConfig {
        tolerance: 1.5,
        headroom: 4.0,
        ..g.config().clone()
    })
    .expect("valid");
    // 25 ms is slower than the long average but within 1.5 ×: hold.
    window_of(&mut g, &mut t, &ok(25, 100));
    assert!(close(g.raw_limit(), 100.0));
    // 19 ms is not slower: + 4 for the round trip.
    window_of(&mut g, &mut t, &ok(19, 100));
    assert!(close(g.raw_limit(), 104.0));
}

#[test]
fn a_drop_backs_off_once_per_flight_and_leaves_the_averages_alone() {
    let mut t = Instant::now();
    let mut g = warmed(&mut t, 20, 100);
    // Slower than half the round trip: not a fast failure.
    let dropped = Sample::new(Outcome::Overload, ms(15), 100);
    window_of(&mut g, &mut t, &dropped);
    assert!(close(g.raw_limit(), 90.0));
    assert_eq!(g.long_rtt(), Some(ms(20)));
    // Started before that cut: no second cut.
    window_of(
        &mut g,
        &mut t,
        &Sample::new(Outcome::Overload, ms(500), 100),
    );
    assert!(close(g.raw_limit(), 90.0));
    t += ms(20);
    window_of(&mut g, &mut t, &dropped);
    assert!(close(g.raw_limit(), 81.0));
}

#[test]
fn an_app_limited_caller_holds_unless_latency_has_doubled() {
    let mut t = Instant::now();
    let mut g = warmed(&mut t, 20, 100);
    g.set_config(GradientConfig {
        headroom: 4.0,
        ..g.config().clone()
    })
    .expect("valid");
    window_of(&mut g, &mut t, &ok(15, 10));
    assert!(close(g.raw_limit(), 100.0), "no growth while app-limited");
    window_of(&mut g, &mut t, &ok(30, 10));
    assert!(close(g.raw_limit(), 100.0), "no cut on a modest rise");
    window_of(&mut g, &mut t, &ok(200, 1));
    assert!(close(g.raw_limit(), 90.0), "a cut when latency is 10 ×");
}

#[test]
fn after_load_falls_away_the_long_average_decays_fast() {
    let mut t = Instant::now();
    let mut g = warmed(&mut t, 100, 100);
    window_of(&mut g, &mut t, &ok(20, 100));
    let long = g.long_rtt().expect("set");
    // An exponential step alone would leave it near 99.7 ms.
    assert!(long < ms(90), "{long:?}");
    for _ in 0..15 {
        window_of(&mut g, &mut t, &ok(20, 100));
    }
    let long = g.long_rtt().expect("set");
    assert!(long <= ms(40) && long > ms(39), "{long:?}");
}

/// Ten calls averaging `mean_ms`, half of them `spread_ms` faster and
/// half slower, in one window, at `in_flight`.
fn spread_window(g: &mut Gradient, t: &mut Instant, mean_ms: u64, spread_ms: u64, in_flight: u32) {
    for i in 0..10 {
        let latency = if i % 2 == 0 {
            mean_ms - spread_ms
        } else {
            mean_ms + spread_ms
        };
        g.on_sample(*t, &ok(latency, in_flight));
    }
    *t += ms(10);
    g.handle_timeout(*t);
}

/// The defaults on windows of ten calls, warmed on 60 and 140 ms around
/// 100 (two standard errors of a window: 27%) at a limit of 100.
fn noisy(t: &mut Instant) -> Gradient {
    let mut g = Gradient::new(one_call_windows(GradientConfig {
        initial: 100,
        headroom: 0.0,
        ..GradientConfig::default()
    }))
    .expect("valid");
    for _ in 0..700 {
        spread_window(&mut g, t, 100, 40, 100);
    }
    assert!(close(g.raw_limit(), 100.0));
    g.set_config(GradientConfig {
        headroom: 1.0,
        ..g.config().clone()
    })
    .expect("valid");
    g
}

#[test]
fn a_rise_within_the_noise_does_not_shrink_the_limit() {
    let mut t = Instant::now();
    let mut g = noisy(&mut t);
    spread_window(&mut g, &mut t, 120, 40, 100);
    // Within the band it is not queueing: a call more for the round trip.
    assert!(close(g.raw_limit(), 101.0), "{}", g.raw_limit());
    // Twice as slow is beyond it: the limit shrinks by the part of the
    // rise beyond the band, less than the 10% the whole rise would cut.
    spread_window(&mut g, &mut t, 200, 40, 100);
    assert!(
        g.raw_limit() > 91.0 && g.raw_limit() < 100.0,
        "{}",
        g.raw_limit()
    );
}

#[test]
fn a_slower_window_moves_the_long_average_an_eighth_as_far_as_a_faster_one() {
    let mut t = Instant::now();
    let mut g = noisy(&mut t);
    let long = g.long_rtt().expect("set").as_secs_f64();
    spread_window(&mut g, &mut t, 200, 40, 100);
    let risen = g.long_rtt().expect("set").as_secs_f64();
    assert!(((risen - long) - 2.0 / 601.0 * 0.125 * (0.200 - long)).abs() < 1e-9);
    spread_window(&mut g, &mut t, 50, 40, 100);
    let fallen = g.long_rtt().expect("set").as_secs_f64();
    assert!(((risen - fallen) - 2.0 / 601.0 * (risen - 0.050)).abs() < 1e-9);
}

#[test]
fn a_rise_that_outlasts_halving_the_calls_in_flight_is_the_new_normal() {
    let mut t = Instant::now();
    let mut g = noisy(&mut t);
    // 50% slower, beyond the noise: the limit falls, window after window,
    // and the long average hardly moves.
    spread_window(&mut g, &mut t, 150, 40, 100);
    assert!(g.raw_limit() < 100.0);
    assert!(g.long_rtt().expect("set") < ms(101));
    // Calls admitted at 50 in flight are still as slow: the dependency is
    // slower, not queueing behind this caller.
    spread_window(&mut g, &mut t, 150, 40, 50);
    let long = g.long_rtt().expect("set");
    assert!(long > ms(150) && long < ms(200), "{long:?}");
    // It serves as much as before, each call 50% longer: the limit the
    // same goodput takes is higher, and it regrows, doubling.
    assert!(g.raw_limit() > 150.0, "regrowing: {}", g.raw_limit());

    // Three times slower is taken as normal a doubling at a time: one
    // halving is not enough...
    let mut g = noisy(&mut t);
    spread_window(&mut g, &mut t, 300, 40, 100);
    spread_window(&mut g, &mut t, 300, 40, 50);
    let long = g.long_rtt().expect("set");
    assert!(long > ms(199) && long <= ms(201), "{long:?}");
    spread_window(&mut g, &mut t, 300, 40, 50);
    assert!(g.long_rtt().expect("set") < ms(201));
    // ...a second one is.
    spread_window(&mut g, &mut t, 300, 40, 25);
    let long = g.long_rtt().expect("set");
    assert!(long > ms(300) && long < ms(400), "{long:?}");
}

#[test]
fn a_trickle_of_drops_is_tolerated_and_a_flood_is_not() {
    let mut t = Instant::now();
    let mut g = Gradient::new(one_call_windows(GradientConfig {
        initial: 100,
        headroom: 0.0,
        ..GradientConfig::default()
    }))
    .expect("valid");
    let dropped = Sample::new(Outcome::Overload, ms(50), 100);
    // One call in twenty dropped, in a caller using its limit.
    for _ in 0..20 {
        window_of(&mut g, &mut t, &dropped);
        for _ in 0..19 {
            window_of(&mut g, &mut t, &ok(20, 100));
        }
    }
    assert!(close(g.raw_limit(), 100.0), "{}", g.raw_limit());
    // Every call: the share of recent drops passes 10% within a few.
    for _ in 0..5 {
        window_of(&mut g, &mut t, &dropped);
    }
    assert!(g.raw_limit() < 100.0, "{}", g.raw_limit());
}

#[test]
fn zero_and_huge_latencies_keep_the_limit_finite_and_in_range() {
    let mut t = Instant::now();
    let mut g = gradient(GradientConfig {
        initial: 50,
        ..GradientConfig::default()
    });
    for latency in [Duration::ZERO, Duration::MAX, Duration::ZERO, ms(1)] {
        for in_flight in [0, u32::MAX] {
            window_of(
                &mut g,
                &mut t,
                &Sample::new(Outcome::Success, latency, in_flight),
            );
            assert!(g.raw_limit().is_finite());
            assert!((1.0..=1000.0).contains(&g.raw_limit()));
        }
    }
}

#[test]
fn every_invalid_field_is_named() {
    let base = GradientConfig::default();
    let cases: Vec<(GradientConfig, &str)> = vec![
        (
            GradientConfig {
                min: 0,
                initial: 0,
                ..base.clone()
            },
            "gradient.min",
        ),
        (
            GradientConfig {
                max: u32::MAX,
                ..base.clone()
            },
            "gradient.max",
        ),
        (
            GradientConfig {
                min: 50,
                max: 40,
                initial: 45,
                ..base.clone()
            },
            "gradient.min",
        ),
        (
            GradientConfig {
                initial: 2000,
                ..base.clone()
            },
            "gradient.initial",
        ),
        (
            GradientConfig {
                initial: 1,
                min: 2,
                ..base.clone()
            },
            "gradient.initial",
        ),
        (
            GradientConfig {
                tolerance: 0.9,
                ..base.clone()
            },
            "gradient.tolerance",
        ),
        (
            GradientConfig {
                tolerance: f64::NAN,
                ..base.clone()
            },
            "gradient.tolerance",
        ),
        (
            GradientConfig {
                smoothing: 0.0,
                ..base.clone()
            },
            "gradient.smoothing",
        ),
        (
            GradientConfig {
                smoothing: 1.5,
                ..base.clone()
            },
            "gradient.smoothing",
        ),
        (
            GradientConfig {
                smoothing: f64::NAN,
                ..base.clone()
            },
            "gradient.smoothing",
        ),
        (
            GradientConfig {
                headroom: -1.0,
                ..base.clone()
            },
            "gradient.headroom",
        ),
        (
            GradientConfig {
                headroom: f64::INFINITY,
                ..base.clone()
            },
            "gradient.headroom",
        ),
        (
            GradientConfig {
                long_window: 0,
                ..base.clone()
            },
            "gradient.long_window",
        ),
        (
            GradientConfig {
                backoff: 1.0,
                ..base.clone()
            },
            "gradient.backoff",
        ),
        (
            GradientConfig {
                backoff: -0.5,
                ..base.clone()
            },
            "gradient.backoff",
        ),
        (
            GradientConfig {
                noise: -1.0,
                ..base.clone()
            },
            "gradient.noise",
        ),
        (
            GradientConfig {
                noise: f64::INFINITY,
                ..base.clone()
            },
            "gradient.noise",
        ),
        (
            GradientConfig {
                long_rise: 0.0,
                ..base.clone()
            },
            "gradient.long_rise",
        ),
        (
            GradientConfig {
                long_rise: 1.5,
                ..base.clone()
            },
            "gradient.long_rise",
        ),
        (
            GradientConfig {
                long_rise: f64::NAN,
                ..base.clone()
            },
            "gradient.long_rise",
        ),
        (
            GradientConfig {
                loss_tolerance: 1.0,
                ..base.clone()
            },
            "gradient.loss_tolerance",
        ),
        (
            GradientConfig {
                loss_tolerance: f64::NAN,
                ..base.clone()
            },
            "gradient.loss_tolerance",
        ),
        (
            GradientConfig {
                window: WindowConfig {
                    max_duration: Duration::ZERO,
                    ..WindowConfig::default()
                },
                ..base.clone()
            },
            "gradient.window.max_duration",
        ),
    ];
    for (config, field) in cases {
        let err = Gradient::new(config.clone()).expect_err(field);
        assert_eq!(err.field(), field, "{config:?}: {err}");
    }
}
