//! The window's unit tests (their helpers serve `recent.rs`'s too).

use super::*;

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn ok(latency: Duration, in_flight: u32) -> Sample {
    Sample::new(Outcome::Success, latency, in_flight)
}

/// A window of the given durations (ms) and minimum count.
pub(crate) fn window(min_duration: u64, max_duration: u64, min_samples: u32) -> Window {
    Window::new(WindowConfig {
        min_duration: ms(min_duration),
        max_duration: ms(max_duration),
        min_samples,
        ..WindowConfig::default()
    })
    .expect("valid config")
}

#[test]
fn a_window_needs_both_its_minimum_duration_and_its_minimum_count() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 3);
    // Enough calls, too soon.
    assert!(w.record(t0, &ok(ms(10), 1)).is_none());
    assert!(w.record(t0 + ms(10), &ok(ms(10), 1)).is_none());
    assert!(w.record(t0 + ms(20), &ok(ms(10), 1)).is_none());
    // Long enough now.
    let s = w.record(t0 + ms(100), &ok(ms(10), 1)).expect("closes");
    assert_eq!(s.samples, 4);
    assert_eq!(s.started, t0);
    assert_eq!(s.closed, t0 + ms(100));
    assert!(w.is_empty());

    // Long enough, too few calls.
    let t1 = t0 + ms(200);
    assert!(w.record(t1, &ok(ms(10), 1)).is_none());
    assert!(w.record(t1 + ms(500), &ok(ms(10), 1)).is_none());
    assert!(w.record(t1 + ms(600), &ok(ms(10), 1)).is_some());
}

#[test]
fn a_window_short_of_calls_still_closes_at_its_maximum_duration() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 10);
    assert!(w.record(t0, &ok(ms(10), 1)).is_none());
    assert_eq!(w.deadline(), Some(t0 + ms(1000)));
    assert!(w.close_if_due(t0 + ms(999)).is_none());
    let s = w.close_if_due(t0 + ms(1000)).expect("times out");
    assert_eq!(s.samples, 1);
    assert_eq!(s.latency, Some(ms(10)));
    assert_eq!(w.deadline(), None);
    assert!(
        w.close_if_due(t0 + ms(5000)).is_none(),
        "empty never closes"
    );

    // At one call a second each call closes the window the previous one
    // opened.
    let t1 = t0 + ms(10_000);
    assert!(w.record(t1, &ok(ms(10), 1)).is_none());
    let s = w.record(t1 + ms(1000), &ok(ms(30), 1)).expect("closes");
    assert_eq!(s.samples, 2);
    assert_eq!(s.latency, Some(ms(20)));
}

#[test]
fn drops_are_counted_but_their_latency_is_not_aggregated() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 1);
    w.record(t0, &ok(ms(10), 4));
    w.record(t0 + ms(50), &Sample::new(Outcome::Overload, ms(50), 9));
    w.record(t0 + ms(60), &Sample::new(Outcome::Overload, ms(10), 2));
    let s = w.record(t0 + ms(100), &ok(ms(30), 3)).expect("closes");
    assert_eq!(s.samples, 4);
    assert_eq!(s.drops, 2);
    assert_eq!(s.successes(), 2);
    assert!(s.did_drop());
    assert_eq!(s.max_in_flight, 9);
    assert_eq!(s.average, Some(ms(20)));
    assert_eq!(s.min, Some(ms(10)));
    assert_eq!(s.max, Some(ms(30)));
    // The later of the two drop starts: t0 + 60 - 10 = t0 + 50.
    assert_eq!(s.last_drop_started, Some(t0 + ms(50)));
}

#[test]
fn a_window_of_drops_alone_has_no_latency() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 1);
    w.record(t0, &Sample::new(Outcome::Overload, ms(10), 1));
    let s = w.flush(t0).expect("one call");
    assert_eq!(s.latency, None);
    assert_eq!(s.average, None);
    assert!(s.did_drop());
}

#[test]
fn ignored_calls_are_never_recorded_but_their_time_out_is_summed() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 1);
    assert!(w
        .record(t0, &Sample::new(Outcome::Ignore, ms(10), 1))
        .is_none());
    assert!(w.is_empty());
    assert_eq!(w.deadline(), None);
    w.record(t0, &ok(ms(10), 1));
    // An ignored call can still close a window that is due.
    let s = w
        .record(t0 + ms(100), &Sample::new(Outcome::Ignore, ms(99), 50))
        .expect("due");
    assert_eq!(s.samples, 1);
    assert_eq!(s.max_in_flight, 1);
    // They came back, and Little's law over the window counts them.
    assert_eq!(s.ignored_latency, ms(109));
    assert_eq!(s.drop_latency, Duration::ZERO);
}

#[test]
fn the_percentile_is_the_nearest_rank() {
    let t0 = Instant::now();
    let mut w = Window::new(WindowConfig {
        aggregation: Aggregation::Percentile(0.9),
        min_samples: 1,
        ..WindowConfig::default()
    })
    .expect("valid");
    for i in 1..=10 {
        w.record(t0, &ok(ms(i), 1));
    }
    let s = w.flush(t0).expect("ten calls");
    assert_eq!(s.latency, Some(ms(9)));
    assert_eq!(s.average, Some(Duration::from_micros(5500)));
}

#[test]
fn a_full_reservoir_keeps_a_representative_subset() {
    let t0 = Instant::now();
    let mut w = Window::with_seed(
        WindowConfig {
            aggregation: Aggregation::Percentile(0.5),
            reservoir: 64,
            min_samples: 1,
            ..WindowConfig::default()
        },
        7,
    )
    .expect("valid");
    for i in 0..10_000 {
        w.record(t0, &ok(ms(i % 100), 1));
    }
    let s = w.flush(t0).expect("calls");
    let p50 = s.latency.expect("successes");
    assert!(p50 >= ms(30) && p50 <= ms(70), "{p50:?}");
    assert_eq!(s.samples, 10_000);
}

#[test]
fn the_summary_carries_the_spread_of_the_successes() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 1);
    w.record(t0, &ok(ms(10), 1));
    let s = w.flush(t0).expect("one call");
    assert_eq!(s.std_dev, None, "no spread from one success");
    for latency in [10, 20, 30] {
        w.record(t0, &ok(ms(latency), 1));
    }
    w.record(t0, &Sample::new(Outcome::Overload, ms(900), 1));
    let s = w.flush(t0).expect("calls");
    let sd = s.std_dev.expect("three successes").as_secs_f64();
    assert!((sd - 0.010).abs() < 1e-9, "{sd}");
}

#[test]
fn add_records_without_closing_and_is_due_says_when_it_could() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 2);
    assert!(!w.is_due(t0 + ms(5000)), "an empty window is never due");
    w.add(t0, &ok(ms(10), 1));
    w.add(t0 + ms(100), &ok(ms(10), 1));
    assert!(w.is_due(t0 + ms(100)));
    w.add(t0 + ms(2000), &ok(ms(10), 1));
    assert_eq!(w.len(), 3);
    let s = w.flush(t0 + ms(2000)).expect("calls");
    assert_eq!(s.samples, 3);
}

#[test]
fn huge_and_zero_latencies_do_not_overflow() {
    let t0 = Instant::now();
    let mut w = window(100, 1000, 1);
    w.record(t0, &ok(Duration::MAX, u32::MAX));
    w.record(t0, &ok(Duration::MAX, 1));
    w.record(t0, &ok(Duration::ZERO, 0));
    let s = w.flush(t0).expect("calls");
    assert_eq!(s.min, Some(Duration::ZERO));
    assert_eq!(s.max_in_flight, u32::MAX);
    assert!(s.average.expect("successes") > Duration::from_secs(1 << 33));
}

#[test]
fn time_running_backwards_does_not_panic_or_close() {
    let t0 = Instant::now() + Duration::from_secs(10);
    let mut w = window(100, 1000, 1);
    w.record(t0, &ok(ms(10), 1));
    assert!(w.record(t0 - ms(5000), &ok(ms(10), 1)).is_none());
}

#[test]
fn every_invalid_field_is_named() {
    let base = WindowConfig::default();
    let cases: Vec<(WindowConfig, &str)> = vec![
        (
            WindowConfig {
                min_duration: Duration::ZERO,
                ..base.clone()
            },
            "window.min_duration",
        ),
        (
            WindowConfig {
                min_duration: Duration::MAX,
                ..base.clone()
            },
            "window.min_duration",
        ),
        (
            WindowConfig {
                max_duration: Duration::ZERO,
                ..base.clone()
            },
            "window.max_duration",
        ),
        (
            WindowConfig {
                max_duration: ms(100),
                ..base.clone()
            },
            "window.max_duration",
        ),
        (
            WindowConfig {
                min_samples: 0,
                ..base.clone()
            },
            "window.min_samples",
        ),
        (
            WindowConfig {
                aggregation: Aggregation::Percentile(0.0),
                ..base.clone()
            },
            "window.aggregation.percentile",
        ),
        (
            WindowConfig {
                aggregation: Aggregation::Percentile(1.5),
                ..base.clone()
            },
            "window.aggregation.percentile",
        ),
        (
            WindowConfig {
                aggregation: Aggregation::Percentile(f64::NAN),
                ..base.clone()
            },
            "window.aggregation.percentile",
        ),
        (
            WindowConfig {
                reservoir: 0,
                ..base.clone()
            },
            "window.reservoir",
        ),
        (
            WindowConfig {
                reservoir: MAX_RESERVOIR + 1,
                ..base.clone()
            },
            "window.reservoir",
        ),
    ];
    for (config, field) in cases {
        let err = Window::new(config.clone()).expect_err(field);
        assert_eq!(err.field(), field, "{config:?}: {err}");
    }
}
