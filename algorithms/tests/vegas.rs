//! Vegas, rule by rule: growth, queueing, drops, slow start, the baseline
//! and its re-probes, the noise band, app-limited callers.

use std::time::{Duration, Instant};

use rheostat_algorithms::window::WindowConfig;
use rheostat_algorithms::{Algorithm, Outcome, Sample, Vegas, VegasConfig};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ok(latency_ms: u64, in_flight: u32) -> Sample {
    Sample::new(Outcome::Success, ms(latency_ms), in_flight)
}

/// Windows of one call each (closing after 10 ms), no slow start, and
/// re-probes far away unless a test asks for them. Without the noise
/// band and the loss tolerance, so that each rule's arithmetic shows
/// exactly; the tests of those two set them.
fn vegas(initial: u32) -> Vegas {
    Vegas::new(exact(VegasConfig {
        initial,
        min: 1,
        max: 1000,
        slow_start: false,
        probe_interval: 1_000_000,
        window: one_call_windows(),
        ..VegasConfig::default()
    }))
    .expect("valid config")
}

/// `config` with every rise read as queueing and every drop as
/// congestion.
fn exact(config: VegasConfig) -> VegasConfig {
    VegasConfig {
        noise: 0.0,
        loss_tolerance: 0.0,
        ..config
    }
}

fn one_call_windows() -> WindowConfig {
    WindowConfig {
        min_duration: ms(10),
        max_duration: ms(10),
        min_samples: 1,
        ..WindowConfig::default()
    }
}

/// Feed one call per window: the call opens a window at `*t`, a tick 10 ms
/// later closes it.
fn window_of(v: &mut Vegas, t: &mut Instant, sample: &Sample) {
    v.on_sample(*t, sample);
    *t += ms(10);
    v.handle_timeout(*t);
}

/// As [`window_of`], with the call admitted when the previous window
/// closed, so that the window may grow the limit.
fn next_window_of(v: &mut Vegas, t: &mut Instant, sample: &Sample) {
    *t += sample.latency;
    window_of(v, t, sample);
}

#[test]
fn no_queue_grows_the_limit_by_beta() {
    let mut t = Instant::now();
    let mut v = vegas(50);
    window_of(&mut v, &mut t, &ok(20, 50));
    assert_eq!(v.baseline(), Some(ms(20)));
    assert_eq!(v.raw_limit(), 56.0);
    // At 100 the step is 2: β = 12.
    let mut v = vegas(100);
    window_of(&mut v, &mut t, &ok(20, 100));
    assert_eq!(v.raw_limit(), 112.0);
}

#[test]
fn a_short_queue_grows_by_one_step_a_middling_one_holds_a_long_one_shrinks() {
    let mut t = Instant::now();
    let mut v = vegas(50);
    next_window_of(&mut v, &mut t, &ok(20, 50));
    assert_eq!(v.raw_limit(), 56.0);
    // queue = ceil(56 · (1 − 20/21)) = ceil(2.67) = 3: not under α = 3,
    // not over β = 6: hold.
    next_window_of(&mut v, &mut t, &ok(21, 56));
    assert_eq!(v.raw_limit(), 56.0);
    // queue = ceil(56 · (1 − 20/20.5)) = ceil(1.37) = 2: between the
    // threshold (1) and α (3): one step.
    let mut sample = ok(20, 56);
    sample.latency = Duration::from_micros(20_500);
    next_window_of(&mut v, &mut t, &sample);
    assert_eq!(v.raw_limit(), 57.0);
    // queue = ceil(57 · (1 − 20/30)) = 19 > β: one step down.
    next_window_of(&mut v, &mut t, &ok(30, 57));
    assert_eq!(v.raw_limit(), 56.0);
}

#[test]
fn the_limit_grows_at_most_once_a_round_trip() {
    let mut t = Instant::now();
    let mut v = vegas(50);
    window_of(&mut v, &mut t, &ok(20, 50));
    assert_eq!(v.raw_limit(), 56.0);
    // A window of calls admitted before that growth cannot show its
    // effect: no queue, but no growth either...
    window_of(&mut v, &mut t, &ok(20, 50));
    assert_eq!(v.raw_limit(), 56.0);
    // ...while it may still shrink the limit.
    window_of(&mut v, &mut t, &ok(40, 50));
    assert_eq!(v.raw_limit(), 55.0);
    // Calls admitted since show the new limit's effect.
    next_window_of(&mut v, &mut t, &ok(20, 55));
    assert_eq!(v.raw_limit(), 61.0);
}

#[test]
fn an_app_limited_caller_holds_but_still_backs_off_from_a_long_queue() {
    let mut t = Instant::now();
    let mut v = vegas(50);
    window_of(&mut v, &mut t, &ok(20, 24));
    assert_eq!(v.raw_limit(), 50.0, "no growth while using under half");
    window_of(&mut v, &mut t, &ok(40, 1));
    assert_eq!(v.raw_limit(), 49.0, "queue 25 > β: shrink");
}

#[test]
fn a_drop_backs_off_once_per_flight() {
    let t0 = Instant::now();
    let mut t = t0;
    let mut v = vegas(100);
    window_of(&mut v, &mut t, &ok(20, 100));
    assert_eq!(v.raw_limit(), 112.0);
    // Slower than half the round trip: a timeout, not a fast failure
    // from a dependency that is down (those hold the limit).
    let dropped = Sample::new(Outcome::Overload, ms(12), 112);
    window_of(&mut v, &mut t, &dropped);
    assert!((v.raw_limit() - 100.8).abs() < 1e-9);
    // A drop of a call that started before that cut does not cut again.
    let old = Sample::new(Outcome::Overload, ms(500), 100);
    window_of(&mut v, &mut t, &old);
    assert!((v.raw_limit() - 100.8).abs() < 1e-9);
    // One that started after it does.
    t += ms(20);
    window_of(&mut v, &mut t, &dropped);
    assert!((v.raw_limit() - 90.72).abs() < 1e-9);
}

#[test]
fn slow_start_doubles_until_the_first_sign_of_queueing() {
    let mut t = Instant::now();
    let mut v = Vegas::new(exact(VegasConfig {
        initial: 5,
        probe_interval: 1_000_000,
        window: one_call_windows(),
        ..VegasConfig::default()
    }))
    .expect("valid");
    assert!(v.in_slow_start());
    for expected in [10.0, 20.0, 40.0, 80.0] {
        let in_flight = v.publish().gate.limit;
        next_window_of(&mut v, &mut t, &ok(20, in_flight));
        assert_eq!(v.raw_limit(), expected);
    }
    // Capacity was 50: at 80 the latency is 32 ms, queue = 80 · 0.375 = 30.
    next_window_of(&mut v, &mut t, &ok(32, 80));
    assert!(!v.in_slow_start());
    assert_eq!(v.raw_limit(), 50.0);
    // Back to the normal rules: no queue, + β.
    next_window_of(&mut v, &mut t, &ok(20, 50));
    assert_eq!(v.raw_limit(), 56.0);
}

#[test]
fn slow_start_holds_while_app_limited_and_ends_at_a_drop() {
    let mut t = Instant::now();
    let mut v = Vegas::new(exact(VegasConfig {
        initial: 10,
        probe_interval: 1_000_000,
        window: one_call_windows(),
        ..VegasConfig::default()
    }))
    .expect("valid");
    window_of(&mut v, &mut t, &ok(20, 4));
    assert_eq!(v.raw_limit(), 10.0);
    window_of(&mut v, &mut t, &ok(20, 10));
    assert_eq!(v.raw_limit(), 20.0);
    window_of(&mut v, &mut t, &Sample::new(Outcome::Overload, ms(12), 20));
    assert!(!v.in_slow_start());
    assert_eq!(v.raw_limit(), 18.0);
}

#[test]
fn the_baseline_is_the_lowest_window_aggregate_not_the_luckiest_call() {
    let mut t = Instant::now();
    let mut v = Vegas::new(exact(VegasConfig {
        initial: 50,
        slow_start: false,
        probe_interval: 1_000_000,
        window: WindowConfig {
            min_duration: ms(10),
            max_duration: ms(10),
            min_samples: 1,
            ..WindowConfig::default()
        },
        ..VegasConfig::default()
    }))
    .expect("valid");
    // One lucky 1 ms call among nine at 21 ms: the window averages 19 ms.
    v.on_sample(t, &ok(1, 50));
    for _ in 0..9 {
        v.on_sample(t, &ok(21, 50));
    }
    t += ms(10);
    v.handle_timeout(t);
    assert_eq!(v.baseline(), Some(ms(19)));
}

#[test]
fn a_re_probe_lowers_the_gate_and_re_measures_the_baseline_from_its_cohort() {
    let t0 = Instant::now();
    let mut t = t0;
    let mut v = Vegas::new(exact(VegasConfig {
        initial: 60,
        slow_start: false,
        probe_interval: 2,
        window: one_call_windows(),
        ..VegasConfig::default()
    }))
    .expect("valid");
    // The first gap is one or two windows.
    let gap = v.windows_until_probe();
    assert!((1..=2).contains(&gap), "{gap}");
    window_of(&mut v, &mut t, &ok(20, 60));
    if !v.is_probing() {
        window_of(&mut v, &mut t, &ok(20, 60));
    }
    assert!(v.is_probing());
    let learnt = v.raw_limit();
    assert_eq!(f64::from(v.publish().gate.limit), (learnt * 0.5).floor());
    // The dependency is now twice as slow. A call admitted before the
    // probe began goes to the ordinary window, not the probe...
    let probe_start = t;
    v.on_sample(t + ms(5), &ok(20, 60));
    assert!(v.is_probing());
    // ...one admitted after it belongs to the cohort. Once the cohort's
    // window is due, the gate is restored...
    v.on_sample(probe_start + ms(40), &ok(30, 30));
    assert!(v.is_probing());
    let restored = probe_start + ms(50);
    assert_eq!(v.publish().wake_at, Some(restored));
    v.handle_timeout(restored);
    assert!(!v.is_probing());
    assert_eq!(f64::from(v.publish().gate.limit), learnt.floor());
    // ...and the cohort is summarised a few round-trip times later, with
    // its slower calls. A call admitted after the gate was restored is
    // not in it, and, finishing in the burst that follows, does not
    // lower the baseline either.
    v.on_sample(restored + ms(20), &ok(50, 30));
    v.on_sample(restored + ms(21), &ok(1, 60));
    let mut settled = restored;
    while let Some(deadline) = v.publish().wake_at {
        settled = deadline;
        v.handle_timeout(deadline);
    }
    assert!(settled > restored + ms(50), "{settled:?}");
    assert_eq!(v.baseline(), Some(ms(40)));
    assert_eq!(v.raw_limit(), learnt, "a probe does not move the limit");
    let gap = v.windows_until_probe();
    assert!((1..=2).contains(&gap), "{gap}");
}

#[test]
fn windows_that_close_during_a_re_probe_do_not_grow_the_limit() {
    let mut t = Instant::now();
    let mut v = Vegas::new(exact(VegasConfig {
        initial: 60,
        slow_start: false,
        probe_interval: 1,
        window: one_call_windows(),
        ..VegasConfig::default()
    }))
    .expect("valid");
    window_of(&mut v, &mut t, &ok(20, 60));
    assert!(v.is_probing());
    let learnt = v.raw_limit();
    // The queue drains while the gate is lowered: no queue, but no
    // growth either.
    let old = Sample::new(Outcome::Success, ms(20), 60);
    v.on_sample(t, &old);
    t += ms(10);
    v.handle_timeout(t);
    assert_eq!(v.raw_limit(), learnt);
    // A long queue still shrinks it.
    let slow = Sample::new(Outcome::Success, ms(400), 60);
    v.on_sample(t, &slow);
    t += ms(10);
    v.handle_timeout(t);
    assert!(v.raw_limit() < learnt);
}

/// Ten calls averaging `mean_ms`, half of them `spread_ms` faster and
/// half slower, in one window, all admitted when the previous window
/// closed; `drops` of them are overloads instead.
fn spread_window(v: &mut Vegas, t: &mut Instant, mean_ms: u64, spread_ms: u64, drops: u32) {
    let in_flight = v.publish().gate.limit;
    *t += ms(mean_ms + spread_ms);
    for i in 0..10_u32 {
        let latency = if i % 2 == 0 {
            mean_ms - spread_ms
        } else {
            mean_ms + spread_ms
        };
        let outcome = if i < drops {
            Outcome::Overload
        } else {
            Outcome::Success
        };
        v.on_sample(*t, &Sample::new(outcome, ms(latency), in_flight));
    }
    *t += ms(10);
    v.handle_timeout(*t);
}

fn noisy(config: VegasConfig) -> Vegas {
    Vegas::new(VegasConfig {
        initial: 50,
        slow_start: false,
        probe_interval: 1_000_000,
        window: one_call_windows(),
        ..config
    })
    .expect("valid")
}

#[test]
fn a_rise_within_the_noise_is_not_queueing_and_one_beyond_it_is() {
    // Latencies 60 and 140 ms around a mean of 100: the average of ten
    // is uncertain by 13%, so two standard errors are 27%.
    let mut t = Instant::now();
    let mut v = noisy(VegasConfig::default());
    spread_window(&mut v, &mut t, 100, 40, 0);
    // The baseline is the upper end of the first window's band.
    let baseline = v.baseline().expect("set").as_secs_f64();
    assert!((0.125..0.128).contains(&baseline), "{baseline}");
    assert_eq!(v.raw_limit(), 56.0);
    // 20% slower is within the noise: no queue, the limit grows.
    spread_window(&mut v, &mut t, 120, 40, 0);
    assert_eq!(v.raw_limit(), 62.0);
    // Three times slower is not.
    spread_window(&mut v, &mut t, 300, 40, 0);
    assert_eq!(v.raw_limit(), 61.0);

    // Read without the band, the same 20% is a queue of 10.
    let mut v = noisy(exact(VegasConfig::default()));
    spread_window(&mut v, &mut t, 100, 40, 0);
    assert_eq!(v.baseline(), Some(ms(100)));
    spread_window(&mut v, &mut t, 120, 40, 0);
    assert_eq!(v.raw_limit(), 55.0);
}

#[test]
fn a_trickle_of_drops_is_tolerated_and_a_flood_is_not() {
    let mut t = Instant::now();
    let mut v = noisy(VegasConfig::default());
    // One call in ten dropped, for good: at the tolerance, not above.
    for _ in 0..20 {
        spread_window(&mut v, &mut t, 100, 0, 1);
    }
    assert!(v.raw_limit() > 50.0, "{}", v.raw_limit());
    // Half of them: the share of recent drops passes 10% at once.
    let before = v.raw_limit();
    spread_window(&mut v, &mut t, 100, 0, 5);
    assert!((v.raw_limit() - before * 0.9).abs() < 1e-9);
}

#[test]
fn an_app_limited_caller_cuts_only_when_a_quarter_of_its_calls_drop() {
    let mut t = Instant::now();
    let mut v = noisy(VegasConfig::default());
    let dropped = Sample::new(Outcome::Overload, ms(60), 2);
    let fine = ok(20, 2);
    // One call in five dropped, by a caller using 2 of its 50.
    for _ in 0..20 {
        for sample in [&dropped, &fine, &fine, &fine, &fine] {
            window_of(&mut v, &mut t, sample);
        }
    }
    assert_eq!(v.raw_limit(), 50.0);
    // Every call dropped: the share soon passes a quarter and the limit
    // is cut.
    for _ in 0..10 {
        window_of(&mut v, &mut t, &dropped);
    }
    assert!(v.raw_limit() < 50.0, "{}", v.raw_limit());
}

#[test]
fn zero_and_huge_latencies_keep_the_limit_finite_and_in_range() {
    let mut t = Instant::now();
    let mut v = vegas(50);
    for latency in [Duration::ZERO, Duration::MAX, Duration::ZERO, ms(1)] {
        window_of(
            &mut v,
            &mut t,
            &Sample::new(Outcome::Success, latency, u32::MAX),
        );
        assert!(v.raw_limit().is_finite());
        assert!((1.0..=1000.0).contains(&v.raw_limit()));
    }
    window_of(
        &mut v,
        &mut t,
        &Sample::new(Outcome::Success, Duration::MAX, 0),
    );
    assert!(v.raw_limit().is_finite());
}

#[test]
fn the_gate_asks_to_be_woken_when_the_window_times_out() {
    let t0 = Instant::now();
    let mut v = vegas(50);
    assert_eq!(v.publish().wake_at, None);
    v.on_sample(t0, &ok(20, 50));
    assert_eq!(v.publish().wake_at, Some(t0 + ms(10)));
    v.handle_timeout(t0 + ms(10));
    assert_eq!(v.publish().wake_at, None);
    assert_eq!(v.snapshot().raw_limit, Some(56.0));
}

#[test]
fn every_invalid_field_is_named() {
    let base = VegasConfig::default();
    let cases: Vec<(VegasConfig, &str)> = vec![
        (
            VegasConfig {
                min: 0,
                initial: 0,
                ..base.clone()
            },
            "vegas.min",
        ),
        (
            VegasConfig {
                max: u32::MAX,
                ..base.clone()
            },
            "vegas.max",
        ),
        (
            VegasConfig {
                min: 50,
                max: 40,
                initial: 45,
                ..base.clone()
            },
            "vegas.min",
        ),
        (
            VegasConfig {
                initial: 2000,
                ..base.clone()
            },
            "vegas.initial",
        ),
        (
            VegasConfig {
                initial: 1,
                min: 2,
                ..base.clone()
            },
            "vegas.initial",
        ),
        (
            VegasConfig {
                alpha: 0.0,
                ..base.clone()
            },
            "vegas.alpha",
        ),
        (
            VegasConfig {
                alpha: f64::NAN,
                ..base.clone()
            },
            "vegas.alpha",
        ),
        (
            VegasConfig {
                beta: 2.0,
                ..base.clone()
            },
            "vegas.beta",
        ),
        (
            VegasConfig {
                beta: f64::INFINITY,
                ..base.clone()
            },
            "vegas.beta",
        ),
        (
            VegasConfig {
                threshold: -1.0,
                ..base.clone()
            },
            "vegas.threshold",
        ),
        (
            VegasConfig {
                threshold: 4.0,
                ..base.clone()
            },
            "vegas.threshold",
        ),
        (
            VegasConfig {
                backoff: 1.0,
                ..base.clone()
            },
            "vegas.backoff",
        ),
        (
            VegasConfig {
                backoff: 0.0,
                ..base.clone()
            },
            "vegas.backoff",
        ),
        (
            VegasConfig {
                probe_interval: 0,
                ..base.clone()
            },
            "vegas.probe_interval",
        ),
        (
            VegasConfig {
                probe_factor: 0.0,
                ..base.clone()
            },
            "vegas.probe_factor",
        ),
        (
            VegasConfig {
                probe_factor: 1.5,
                ..base.clone()
            },
            "vegas.probe_factor",
        ),
        (
            VegasConfig {
                probe_factor: f64::NAN,
                ..base.clone()
            },
            "vegas.probe_factor",
        ),
        (
            VegasConfig {
                noise: -1.0,
                ..base.clone()
            },
            "vegas.noise",
        ),
        (
            VegasConfig {
                noise: f64::NAN,
                ..base.clone()
            },
            "vegas.noise",
        ),
        (
            VegasConfig {
                noise: 11.0,
                ..base.clone()
            },
            "vegas.noise",
        ),
        (
            VegasConfig {
                loss_tolerance: 1.0,
                ..base.clone()
            },
            "vegas.loss_tolerance",
        ),
        (
            VegasConfig {
                loss_tolerance: -0.1,
                ..base.clone()
            },
            "vegas.loss_tolerance",
        ),
        (
            VegasConfig {
                loss_tolerance: f64::NAN,
                ..base.clone()
            },
            "vegas.loss_tolerance",
        ),
        (
            VegasConfig {
                window: WindowConfig {
                    min_samples: 0,
                    ..WindowConfig::default()
                },
                ..base.clone()
            },
            "vegas.window.min_samples",
        ),
    ];
    for (config, field) in cases {
        let err = Vegas::new(config.clone()).expect_err(field);
        assert_eq!(err.field(), field, "{config:?}: {err}");
    }
}
