//! The metrics observer: names, labels and values, read back through
//! metrics-util's debugging recorder.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::algorithms::Fixed;
use rheostat::{Limiter, ManualClock};

/// `(kind, name, sorted labels)` → value.
type Seen = BTreeMap<(MetricKind, String, Vec<(String, String)>), DebugValue>;

fn read(recorder: &DebuggingRecorder) -> Seen {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _unit, _description, value)| {
            let (kind, key) = key.into_parts();
            let mut labels: Vec<_> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            ((kind, key.name().to_owned(), labels), value)
        })
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    v.sort();
    v
}

fn gauge(seen: &Seen, name: &str, limiter: &str) -> f64 {
    match seen.get(&(
        MetricKind::Gauge,
        name.to_owned(),
        labels(&[("limiter", limiter)]),
    )) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("{name}: {other:?} in {seen:?}"),
    }
}

fn counter(seen: &Seen, name: &str, pairs: &[(&str, &str)]) -> u64 {
    match seen.get(&(MetricKind::Counter, name.to_owned(), labels(pairs))) {
        Some(DebugValue::Counter(v)) => *v,
        other => panic!("{name} {pairs:?}: {other:?} in {seen:?}"),
    }
}

#[test]
fn every_metric_is_registered_at_construction_with_the_limiter_label() {
    let recorder = DebuggingRecorder::new();
    let _limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Fixed::new(4).unwrap())
            .name("payments")
            .metrics()
            .build()
            .unwrap()
    });
    let seen = read(&recorder);
    let names: Vec<_> = seen
        .keys()
        .map(|(k, n, l)| (*k, n.as_str(), l.clone()))
        .collect();
    let limiter = labels(&[("limiter", "payments")]);
    for (kind, name) in [
        (MetricKind::Gauge, "rheostat_limit"),
        (MetricKind::Gauge, "rheostat_in_flight"),
        (MetricKind::Gauge, "rheostat_admit_probability"),
        (MetricKind::Histogram, "rheostat_call_duration_seconds"),
    ] {
        assert!(
            names.contains(&(kind, name, limiter.clone())),
            "{name}: {names:?}"
        );
    }
    for outcome in ["success", "overload", "ignored"] {
        let l = labels(&[("limiter", "payments"), ("outcome", outcome)]);
        assert!(
            names.contains(&(MetricKind::Counter, "rheostat_calls_total", l)),
            "{outcome}: {names:?}"
        );
    }
    // Rejections by reason, each registered (at 0) from the start.
    for reason in [
        "limit_reached",
        "throttled",
        "ramping",
        "open",
        "queue_full",
        "timed_out",
    ] {
        let l = labels(&[
            ("limiter", "payments"),
            ("outcome", "rejected"),
            ("reason", reason),
        ]);
        assert!(
            names.contains(&(MetricKind::Counter, "rheostat_calls_total", l)),
            "{reason}: {names:?}"
        );
    }
    // A bulkhead has no breaker: no state series that would read "closed".
    assert!(
        !names.iter().any(|(_, n, _)| *n == "rheostat_breaker_state"),
        "{names:?}"
    );
    assert_eq!(gauge(&seen, "rheostat_limit", "payments"), 4.0);
    assert_eq!(gauge(&seen, "rheostat_admit_probability", "payments"), 1.0);
}

#[test]
fn calls_are_counted_by_outcome_and_timed_and_in_flight_follows() {
    let recorder = DebuggingRecorder::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Fixed::new(2).unwrap())
            .name("search")
            .metrics()
            .build()
            .unwrap()
    });
    let a = limiter.try_acquire().unwrap();
    let b = limiter.try_acquire().unwrap();
    assert_eq!(gauge(&read(&recorder), "rheostat_in_flight", "search"), 2.0);
    assert!(limiter.try_acquire().is_err());
    a.success();
    b.overload();
    limiter.try_acquire().unwrap().ignore();
    limiter.try_acquire().unwrap().success();
    let seen = read(&recorder);
    let calls = |outcome| {
        counter(
            &seen,
            "rheostat_calls_total",
            &[("limiter", "search"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        (
            calls("success"),
            calls("overload"),
            calls("ignored"),
            counter(
                &seen,
                "rheostat_calls_total",
                &[
                    ("limiter", "search"),
                    ("outcome", "rejected"),
                    ("reason", "limit_reached")
                ]
            )
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(gauge(&seen, "rheostat_in_flight", "search"), 0.0);
    match seen.get(&(
        MetricKind::Histogram,
        "rheostat_call_duration_seconds".into(),
        labels(&[("limiter", "search")]),
    )) {
        Some(DebugValue::Histogram(samples)) => {
            assert_eq!(samples.len(), 4);
            assert!(samples
                .iter()
                .all(|s| s.into_inner() >= 0.0 && s.into_inner() < 10.0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn breaker_state_limit_and_transitions_follow_the_breaker() {
    let recorder = DebuggingRecorder::new();
    // Transition counters are registered when the transition happens, with
    // the recorder of that moment: keep this one installed throughout.
    metrics::with_local_recorder(&recorder, || {
        let clock = ManualClock::new();
        let config = BreakerConfig {
            cooldown: Cooldown::Fixed(Duration::from_secs(10)),
            cooldown_jitter: 0.0,
            ..BreakerConfig::recommended()
        };
        let limiter = Limiter::builder(Breaker::new(config).unwrap())
            .name("ledger")
            .clock(clock.clone())
            .metrics()
            .build()
            .unwrap();
        let seen = read(&recorder);
        assert_eq!(gauge(&seen, "rheostat_breaker_state", "ledger"), 0.0);
        // No concurrency limit: +Inf, not 2^31 - 1.
        assert_eq!(gauge(&seen, "rheostat_limit", "ledger"), f64::INFINITY);
        for _ in 0..10 {
            limiter.try_acquire().unwrap().overload();
        }
        assert!(limiter.try_acquire().is_err());
        let seen = read(&recorder);
        assert_eq!(gauge(&seen, "rheostat_breaker_state", "ledger"), 1.0);
        assert_eq!(gauge(&seen, "rheostat_limit", "ledger"), 0.0);
        let open = [("limiter", "ledger"), ("from", "closed"), ("to", "open")];
        assert_eq!(counter(&seen, "rheostat_transitions_total", &open), 1);

        clock.advance(Duration::from_secs(10));
        limiter.handle_timeout();
        let seen = read(&recorder);
        assert_eq!(gauge(&seen, "rheostat_breaker_state", "ledger"), 2.0);
        let half = [("limiter", "ledger"), ("from", "open"), ("to", "half_open")];
        assert_eq!(counter(&seen, "rheostat_transitions_total", &half), 1);

        // Probes succeed, the breaker closes and ramps: what it refuses
        // while ramping is counted as `ramping`, not as throttling.
        for _ in 0..10 {
            if let Ok(permit) = limiter.try_acquire() {
                permit.success();
            }
            if limiter.snapshot().state == Some(rheostat::algorithms::BreakerState::Closed) {
                break;
            }
        }
        assert_eq!(
            limiter.snapshot().state,
            Some(rheostat::algorithms::BreakerState::Closed)
        );
        let mut refused = 0;
        for _ in 0..200 {
            match limiter.try_acquire() {
                Ok(permit) => permit.success(),
                Err(rejection) => {
                    assert_eq!(rejection.reason(), rheostat::RejectReason::Ramping);
                    refused += 1;
                }
            }
        }
        assert!(refused > 0, "the ramp refuses some calls");
        let seen = read(&recorder);
        let ramping = [
            ("limiter", "ledger"),
            ("outcome", "rejected"),
            ("reason", "ramping"),
        ];
        assert_eq!(counter(&seen, "rheostat_calls_total", &ramping), refused);
        let throttled = [
            ("limiter", "ledger"),
            ("outcome", "rejected"),
            ("reason", "throttled"),
        ];
        assert_eq!(counter(&seen, "rheostat_calls_total", &throttled), 0);
    });
}

#[test]
fn the_label_is_the_name_whichever_comes_first() {
    let recorder = DebuggingRecorder::new();
    let _limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Fixed::new(3).unwrap())
            .metrics()
            .name("late")
            .build()
            .unwrap()
    });
    let seen = read(&recorder);
    assert_eq!(gauge(&seen, "rheostat_limit", "late"), 3.0);
    assert!(
        !seen
            .keys()
            .any(|(_, _, l)| l.contains(&("limiter".to_owned(), "default".to_owned()))),
        "{seen:?}"
    );
}

#[test]
fn metrics_sit_beside_another_observer() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[derive(Default)]
    struct Count(AtomicU64);
    impl rheostat::Observer for Count {
        fn rejected(&self, _: &rheostat::Rejection) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    let recorder = DebuggingRecorder::new();
    let count = Arc::new(Count::default());
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Fixed::new(1).unwrap())
            .name("both")
            .observer(Arc::clone(&count))
            .metrics()
            .build()
            .unwrap()
    });
    let _held = limiter.try_acquire().unwrap();
    assert!(limiter.try_acquire().is_err());
    assert_eq!(count.0.load(Ordering::Relaxed), 1);
    let seen = read(&recorder);
    assert_eq!(
        counter(
            &seen,
            "rheostat_calls_total",
            &[
                ("limiter", "both"),
                ("outcome", "rejected"),
                ("reason", "limit_reached")
            ]
        ),
        1
    );
}

#[test]
fn retry_decisions_are_counted_by_outcome_from_the_start() {
    use rheostat::retry::{Backoff, RetryConfig};
    use rheostat::{Outcome, TokioClock};

    let recorder = DebuggingRecorder::new();
    let (plain, limiter) = metrics::with_local_recorder(&recorder, || {
        let plain = Limiter::builder(Fixed::new(4).unwrap())
            .name("plain")
            .metrics()
            .build()
            .unwrap();
        let limiter = Limiter::builder(Fixed::new(4).unwrap())
            .name("payments")
            .clock(TokioClock)
            .retry(RetryConfig {
                backoff: Backoff {
                    base: Duration::from_millis(1),
                    cap: Duration::from_millis(1),
                },
                ..RetryConfig::default()
            })
            .metrics()
            .build()
            .unwrap();
        (plain, limiter)
    });
    let seen = read(&recorder);
    for outcome in [
        "sent",
        "budget_exhausted",
        "deadline",
        "not_retryable",
        "rejected",
        "exhausted",
    ] {
        let pairs = [("limiter", "payments"), ("outcome", outcome)];
        assert_eq!(counter(&seen, "rheostat_retries_total", &pairs), 0);
    }
    // A limiter without a retry policy has no such series.
    assert!(!seen
        .keys()
        .any(|(_, name, labels)| name == "rheostat_retries_total"
            && labels.contains(&("limiter".to_owned(), "plain".to_owned()))));
    drop(plain);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let classify = |r: &Result<(), u16>| match r {
            Ok(()) => Outcome::Success,
            Err(s) if *s >= 500 => Outcome::Overload,
            Err(_) => Outcome::Ignore,
        };
        let _ = limiter
            .call(Duration::from_secs(1), classify, || async { Err(503) })
            .await;
        let _ = limiter
            .call(Duration::from_secs(1), classify, || async { Err(404) })
            .await;
    });
    let seen = read(&recorder);
    let count = |outcome| {
        counter(
            &seen,
            "rheostat_retries_total",
            &[("limiter", "payments"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        (count("sent"), count("exhausted"), count("not_retryable")),
        (2, 1, 1)
    );
}

#[test]
fn admissions_and_rejections_carry_the_class_on_a_limiter_with_priorities() {
    use rheostat::priority::{Priorities, Priority};

    let recorder = DebuggingRecorder::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Fixed::new(1).unwrap())
            .name("search")
            .priorities(Priorities::default())
            .metrics()
            .build()
            .unwrap()
    });
    let held = limiter.try_acquire_as(Priority::Critical.into()).unwrap();
    assert!(limiter.try_acquire_as(Priority::Sheddable.into()).is_err());
    held.success();
    let seen = read(&recorder);
    let admitted = |class| {
        counter(
            &seen,
            "rheostat_admitted_total",
            &[("limiter", "search"), ("class", class)],
        )
    };
    assert_eq!((admitted("critical"), admitted("sheddable")), (1, 0));
    let rejected = |class| {
        counter(
            &seen,
            "rheostat_calls_total",
            &[
                ("limiter", "search"),
                ("outcome", "rejected"),
                ("reason", "limit_reached"),
                ("class", class),
            ],
        )
    };
    assert_eq!((rejected("critical"), rejected("sheddable")), (0, 1));
    // Not also counted without the label.
    assert_eq!(
        counter(
            &seen,
            "rheostat_calls_total",
            &[
                ("limiter", "search"),
                ("outcome", "rejected"),
                ("reason", "limit_reached")
            ],
        ),
        0
    );
}

#[test]
fn every_series_in_real_prometheus_output_has_its_help_line() {
    use rheostat::algorithms::breaker::BreakerConfig as Config;
    use rheostat::priority::{Priorities, Priority};
    use rheostat::retry::RetryConfig;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Breaker::new(Config::recommended()).unwrap())
            .name("search")
            .priorities(Priorities::default())
            .retry(RetryConfig::default())
            .metrics()
            .build()
            .unwrap()
    });
    metrics::with_local_recorder(&recorder, || {
        limiter
            .try_acquire_as(Priority::Critical.into())
            .unwrap()
            .success();
    });
    let text = recorder.handle().render();
    let names: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("rheostat_"))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(|n| {
            n.trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count")
        })
        .collect();
    for name in [
        "rheostat_limit",
        "rheostat_in_flight",
        "rheostat_calls_total",
        "rheostat_admitted_total",
        "rheostat_retries_total",
        "rheostat_call_duration_seconds",
        "rheostat_breaker_state",
    ] {
        assert!(names.contains(name), "{name} missing from\n{text}");
    }
    for name in names {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "no HELP for {name}:\n{text}"
        );
    }
}
