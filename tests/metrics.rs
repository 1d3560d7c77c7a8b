//! The metrics observer: names, labels and values, read back through
//! metrics-util's debugging recorder.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
use rheostat::algorithms::Fixed;
use rheostat::{clock::ManualClock, Limiter};

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
    for outcome in ["success", "overload", "ignored", "rejected"] {
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
        let l = labels(&[("limiter", "payments"), ("reason", reason)]);
        assert!(
            names.contains(&(MetricKind::Counter, "rheostat_rejected_total", l)),
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
            calls("rejected"),
            counter(
                &seen,
                "rheostat_rejected_total",
                &[("limiter", "search"), ("reason", "limit_reached")]
            )
        ),
        (2, 1, 1, 1, 1)
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
        limiter.wake();
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
        let ramping = [("limiter", "ledger"), ("reason", "ramping")];
        assert_eq!(counter(&seen, "rheostat_rejected_total", &ramping), refused);
        let throttled = [("limiter", "ledger"), ("reason", "throttled")];
        assert_eq!(counter(&seen, "rheostat_rejected_total", &throttled), 0);
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
            "rheostat_rejected_total",
            &[("limiter", "both"), ("reason", "limit_reached")]
        ),
        1
    );
}

#[test]
fn retry_decisions_are_counted_by_outcome_from_the_start() {
    use rheostat::retry::{Backoff, RetryConfig};
    use rheostat::{clock::TokioClock, Outcome};

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
            .admission()
            .timeout(Duration::from_secs(1))
            .call(classify, || async { Err(503) })
            .await;
        let _ = limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(classify, || async { Err(404) })
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
    let held = limiter
        .admission()
        .class(Priority::Critical)
        .try_acquire()
        .unwrap();
    assert!(limiter
        .admission()
        .class(Priority::Sheddable)
        .try_acquire()
        .is_err());
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
            "rheostat_class_rejected_total",
            &[("limiter", "search"), ("class", class)],
        )
    };
    assert_eq!((rejected("critical"), rejected("sheddable")), (0, 1));
    // Also counted by reason, without the class.
    assert_eq!(
        counter(
            &seen,
            "rheostat_rejected_total",
            &[("limiter", "search"), ("reason", "limit_reached")],
        ),
        1
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
            .admission()
            .class(Priority::Critical)
            .try_acquire()
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

/// The values of the `limiter` label across every series of `text`.
fn limiter_labels(text: &str) -> BTreeSet<String> {
    series(text)
        .into_iter()
        .flat_map(|(_, labels)| labels)
        .filter(|(k, _)| k == "limiter")
        .map(|(_, v)| v)
        .collect()
}

/// A Prometheus text exposition as `(name, labels)` per series line, the
/// labels as written.
fn series(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (head, _value) = line.rsplit_once(' ').unwrap();
            let Some((name, rest)) = head.split_once('{') else {
                return (head.to_owned(), Vec::new());
            };
            let labels = rest
                .trim_end_matches('}')
                .split("\",")
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap();
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            (name.to_owned(), labels)
        })
        .collect()
}

#[test]
fn every_metric_has_one_label_set_in_real_prometheus_output() {
    use rheostat::algorithms::breaker::BreakerConfig as Config;
    use rheostat::priority::{Priorities, Priority};

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Breaker::new(Config::recommended()).unwrap())
            .name("search")
            .priorities(Priorities::default())
            .metrics()
            .build()
            .unwrap()
    });
    // A call of every kind: finished, refused without a class, refused
    // with one.
    let held = limiter
        .admission()
        .class(Priority::Critical)
        .try_acquire()
        .unwrap();
    limiter.try_acquire().unwrap().success();
    let _ = limiter.admission().class(Priority::Sheddable).try_acquire();
    held.overload();
    let text = recorder.handle().render();
    let mut sets: BTreeMap<String, std::collections::BTreeSet<Vec<String>>> = BTreeMap::new();
    for (name, labels) in series(&text) {
        let keys = labels.into_iter().map(|(k, _)| k).collect();
        sets.entry(name).or_default().insert(keys);
    }
    assert!(sets.contains_key("rheostat_calls_total"), "{text}");
    for (name, keys) in &sets {
        assert_eq!(keys.len(), 1, "{name} has label sets {keys:?}:\n{text}");
    }
    assert_eq!(
        sets["rheostat_calls_total"],
        [vec!["limiter".to_owned(), "outcome".to_owned()]].into()
    );
    // Rejections by class: one series per class, not one per class and
    // reason.
    let by_class = series(&text)
        .into_iter()
        .filter(|(name, _)| name == "rheostat_class_rejected_total")
        .count();
    assert_eq!(by_class, Priority::ALL.len(), "{text}");
}

#[test]
fn a_first_attempt_refused_is_not_a_rejected_retry_and_a_refused_retry_is() {
    use std::sync::Arc;

    use rheostat::retry::{Backoff, RetryConfig};
    use rheostat::{clock::TokioClock, Outcome};

    let recorder = DebuggingRecorder::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Arc::new(
            Limiter::builder(Fixed::new(1).unwrap())
                .name("payments")
                .clock(TokioClock)
                .retry(RetryConfig {
                    backoff: Backoff {
                        base: Duration::from_millis(1),
                        cap: Duration::from_millis(1),
                    },
                    wait_on_limit: false,
                    ..RetryConfig::default()
                })
                .metrics()
                .build()
                .unwrap(),
        )
    });
    // A snapshot of the debugging recorder drains its counters: read each
    // once.
    let retries = |outcomes: [&str; 2]| {
        let seen = read(&recorder);
        outcomes.map(|outcome| {
            counter(
                &seen,
                "rheostat_retries_total",
                &[("limiter", "payments"), ("outcome", outcome)],
            )
        })
    };
    let classify = |r: &Result<(), u16>| match r {
        Ok(()) => Outcome::Success,
        Err(_) => Outcome::Overload,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        // The slot is taken: the first attempt is refused. A call refused,
        // not a retry.
        let held = limiter.try_acquire().unwrap();
        let refused = limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(classify, || async { Err(503) })
            .await;
        assert!(matches!(refused, Err(rheostat::CallError::Rejected(_))));
        drop(held);
        assert_eq!(retries(["sent", "rejected"]), [0, 0]);

        // The first attempt runs and fails; a waiter queued meanwhile is
        // handed its slot, so the retry is refused.
        let waiter = Arc::clone(&limiter);
        let mut first = true;
        let result = limiter
            .admission()
            .timeout(Duration::from_secs(1))
            .call(classify, || {
                if std::mem::take(&mut first) {
                    let waiter = Arc::clone(&waiter);
                    tokio::spawn(async move {
                        let _slot = Admission::new(waiter).acquire().await.unwrap();
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    });
                }
                async {
                    tokio::task::yield_now().await;
                    Err(503)
                }
            })
            .await;
        assert!(matches!(result, Err(rheostat::CallError::Rejected(_))));
    });
    assert_eq!(retries(["sent", "rejected"]), [1, 1]);
}

#[test]
fn a_policy_without_a_limit_reads_unlimited_in_its_snapshot_and_inf_in_its_gauge() {
    use rheostat::algorithms::breaker::BreakerConfig as Config;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Breaker::new(Config::recommended()).unwrap())
            .name("ledger")
            .metrics()
            .build()
            .unwrap()
    });
    let debug = format!("{:?}", limiter.snapshot());
    assert!(debug.contains("limit: unlimited"), "{debug}");
    assert!(!debug.contains("2147483647"), "{debug}");
    let text = recorder.handle().render();
    assert!(
        text.contains("rheostat_limit{limiter=\"ledger\"} inf"),
        "{text}"
    );
    assert!(!text.contains("2147483647"), "{text}");
    // A gate with a limit still shows it.
    let fixed = Limiter::new(Fixed::new(8).unwrap());
    assert!(format!("{:?}", fixed.snapshot()).contains("limit: 8"));
}

/// The value of the series `name{limiter="<limiter>"}` in a Prometheus
/// text exposition, if there is one.
fn value(text: &str, name: &str, limiter: &str) -> Option<f64> {
    let head = format!("{name}{{limiter=\"{limiter}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&head))
        .map(|v| v.parse().unwrap())
}

#[test]
fn the_timeout_gauge_is_the_typed_timeout_or_the_learned_one_and_absent_without_a_timeout() {
    use rheostat::Timeout;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    let (typed, learned, untimed) = metrics::with_local_recorder(&recorder, || {
        let build = |name: &'static str, timeout: Option<Timeout>| {
            let builder = Limiter::builder(Fixed::new(8).unwrap())
                .name(name)
                .clock(clock.clone())
                .metrics();
            match timeout {
                Some(timeout) => builder.timeout(timeout),
                None => builder,
            }
            .build()
            .unwrap()
        };
        (
            build("typed", Some(Duration::from_millis(800).into())),
            build(
                "learned",
                Some(Timeout::learned(Duration::from_secs(15)).into()),
            ),
            build("untimed", None),
        )
    });
    let gauge = |limiter: &str| {
        value(
            &recorder.handle().render(),
            "rheostat_timeout_seconds",
            limiter,
        )
    };
    assert_eq!(gauge("typed"), Some(0.8));
    // Until it has learned, the ceiling is in force.
    assert_eq!(gauge("learned"), Some(15.0));
    assert_eq!(gauge("untimed"), None);

    // 200 answers of 40 ms each through every limiter.
    for _ in 0..200 {
        let permits = [&typed, &learned, &untimed].map(|l| l.try_acquire().unwrap());
        clock.advance(Duration::from_millis(40));
        for permit in permits {
            permit.success();
        }
    }
    let in_force = learned.timeouts().in_force.unwrap();
    // About twice the p99.9, within the histogram's sixteenth.
    assert!(
        in_force >= Duration::from_millis(80) && in_force <= Duration::from_millis(86),
        "{in_force:?}"
    );
    assert_eq!(gauge("learned"), Some(in_force.as_secs_f64()));
    assert_eq!(gauge("typed"), Some(0.8));
    assert_eq!(gauge("untimed"), None);

    let text = recorder.handle().render();
    assert!(text.contains("# HELP rheostat_timeout_seconds "), "{text}");
    // One label set, the limiter's, and a series for each limiter with a
    // timeout only.
    let timeouts: std::collections::BTreeSet<_> = series(&text)
        .into_iter()
        .filter(|(name, _)| name == "rheostat_timeout_seconds")
        .map(|(_, labels)| labels)
        .collect();
    assert_eq!(
        timeouts,
        [
            vec![("limiter".to_owned(), "learned".to_owned())],
            vec![("limiter".to_owned(), "typed".to_owned())],
        ]
        .into(),
        "{text}"
    );
}

#[test]
fn the_ceiling_gauge_is_0_for_a_learned_timeout_1_while_its_ceiling_cuts_every_call_and_absent_otherwise(
) {
    use rheostat::Timeout;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    let ceiling = Duration::from_secs(15);
    let (learned, typed) = metrics::with_local_recorder(&recorder, || {
        let build = |name: &'static str, timeout: Timeout| {
            Limiter::builder(Fixed::new(8).unwrap())
                .name(name)
                .clock(clock.clone())
                .timeout(timeout)
                .metrics()
                .build()
                .unwrap()
        };
        (
            build("learned", Timeout::learned(ceiling).into()),
            build("typed", ceiling.into()),
        )
    });
    let gauge = |limiter: &str| {
        value(
            &recorder.handle().render(),
            "rheostat_timeout_ceiling_cutting",
            limiter,
        )
    };
    // Registered at 0 for the learned timeout, so that an alert on it
    // reads 0, not "no data"; never for a typed one.
    assert_eq!(gauge("learned"), Some(0.0));
    assert_eq!(gauge("typed"), None);
    let cut = |limiter: &Limiter<Fixed, ManualClock>| {
        let permit = limiter.try_acquire().unwrap();
        clock.advance(ceiling);
        permit.overload();
    };
    // Five calls cut at the ceiling: the last a window after the first.
    for _ in 0..4 {
        cut(&learned);
        assert_eq!(gauge("learned"), Some(0.0));
    }
    cut(&learned);
    assert_eq!(gauge("learned"), Some(1.0));
    for _ in 0..10 {
        cut(&typed);
    }
    assert_eq!(gauge("typed"), None);
    // An answer within the ceiling: back to 0.
    let permit = learned.try_acquire().unwrap();
    clock.advance(Duration::from_millis(300));
    permit.success();
    assert_eq!(gauge("learned"), Some(0.0));
    let text = recorder.handle().render();
    assert!(
        text.contains("# HELP rheostat_timeout_ceiling_cutting "),
        "{text}"
    );
}

/// A keyed set built from a factory closure, with no configuration, keeps
/// the promise too: keys sharing one `SummedMetrics` feed its series,
/// labelled as it is, and no key becomes a label value.
#[test]
fn keys_sharing_summed_metrics_feed_one_set_of_series_labelled_by_it() {
    use rheostat::algorithms::Algorithm;
    use rheostat::keyed::KeyedLimiters;
    use rheostat::metrics::SummedMetrics;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let tenants = metrics::with_local_recorder(&recorder, || {
        let series = SummedMetrics::new("tenants");
        KeyedLimiters::builder(move |tenant: &u64| {
            let policy: Box<dyn Algorithm> = Box::new(Fixed::new(8)?);
            Ok(Limiter::builder(policy)
                .name(format!("tenant-{tenant}"))
                .metrics_summed(&series))
        })
        .build()
        .unwrap()
    });
    let held = Admission::new(tenants.get(&0).unwrap())
        .try_acquire()
        .unwrap();
    for tenant in 1..=50 {
        tenants
            .get(&tenant)
            .unwrap()
            .try_acquire()
            .unwrap()
            .success();
    }
    let text = recorder.handle().render();
    let labels = limiter_labels(&text);
    assert_eq!(labels, ["tenants".to_owned()].into(), "{text}");
    assert!(!text.contains("tenant-"), "{text}");
    assert!(
        text.contains("rheostat_calls_total{limiter=\"tenants\",outcome=\"success\"} 50"),
        "{text}"
    );
    assert!(
        text.contains("rheostat_in_flight{limiter=\"tenants\"} 1"),
        "{text}"
    );
    assert!(!text.contains("rheostat_limit{"), "{text}");
    held.success();
}

/// Keyed limiters: series by configured name, never by key.
#[cfg(feature = "config")]
mod keyed {
    use std::time::Duration;

    use rheostat::clock::ManualClock;
    use rheostat::config::LimitersConfig;
    use rheostat::keyed::KeyedLimiters;

    use super::{limiter_labels, series};

    const FILE: &str = r#"
        [default.policy]
        policy = "fixed"
        limit = 4
        [limiters.payments.policy]
        policy = "fixed"
        limit = 2
    "#;

    fn hosts(clock: &ManualClock) -> KeyedLimiters<String, ManualClock> {
        LimitersConfig::from_toml(FILE)
            .unwrap()
            .keyed()
            .metrics()
            .builder()
            .unwrap()
            .max_keys(1_000)
            .idle_timeout(Duration::from_secs(1))
            .clock(clock.clone())
            .build()
            .unwrap()
    }

    #[test]
    fn keys_evicted_round_after_round_leave_the_number_of_series_unchanged() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let clock = ManualClock::new();
        let counts: Vec<usize> = metrics::with_local_recorder(&recorder, || {
            let hosts = hosts(&clock);
            (0..10)
                .map(|round| {
                    for i in 0..200 {
                        let limiter = hosts.get(&format!("h{round}-{i}.example")).unwrap();
                        let permit = limiter.try_acquire().unwrap();
                        if i % 2 == 0 {
                            permit.success();
                        } else {
                            permit.overload();
                        }
                    }
                    hosts
                        .get("payments")
                        .unwrap()
                        .try_acquire()
                        .unwrap()
                        .success();
                    clock.advance(Duration::from_secs(2));
                    assert_eq!(hosts.evict_idle(), 201);
                    series(&recorder.handle().render()).len()
                })
                .collect()
        });
        assert!(counts.iter().all(|&n| n == counts[0]), "{counts:?}");
        let text = recorder.handle().render();
        let labels = limiter_labels(&text);
        assert_eq!(
            labels,
            ["default", "payments"].map(str::to_owned).into(),
            "{text}"
        );
        assert!(text.contains("rheostat_calls_total{limiter=\"default\",outcome=\"success\"} 1000"));
        assert!(
            text.contains("rheostat_calls_total{limiter=\"default\",outcome=\"overload\"} 1000")
        );
    }

    #[test]
    fn a_key_chosen_by_a_client_never_becomes_a_label_value() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let clock = ManualClock::new();
        let hosts = metrics::with_local_recorder(&recorder, || hosts(&clock));
        let a = hosts.get("attacker-chosen.example").unwrap();
        let b = hosts.get("another-attacker.example").unwrap();
        let (pa, pb) = (a.try_acquire().unwrap(), b.try_acquire().unwrap());
        let payments = metrics::with_local_recorder(&recorder, || hosts.get("payments").unwrap());
        let text = recorder.handle().render();
        assert!(!text.contains("attacker"), "{text}");
        // In flight, summed over the keys made from the default.
        assert!(
            text.contains("rheostat_in_flight{limiter=\"default\"} 2"),
            "{text}"
        );
        // No limit of its own: a sum of limits is no limit.
        assert!(
            !text.contains("rheostat_limit{limiter=\"default\"}"),
            "{text}"
        );
        // A configured key has its series, under its name.
        assert!(
            text.contains("rheostat_limit{limiter=\"payments\"} 2"),
            "{text}"
        );
        pa.success();
        pb.success();
        drop(payments);
        let text = recorder.handle().render();
        assert!(
            text.contains("rheostat_in_flight{limiter=\"default\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("rheostat_calls_total{limiter=\"default\",outcome=\"success\"} 2"),
            "{text}"
        );
    }
}

#[test]
fn the_override_gauge_shows_the_kind_in_force_and_none_before_the_first_override() {
    use rheostat::overrides::Override;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let clock = ManualClock::new();
    let kinds = |text: &str| -> BTreeMap<String, f64> {
        text.lines()
            .filter_map(|line| line.strip_prefix("rheostat_override{"))
            .filter(|line| line.contains("limiter=\"payments\""))
            .map(|line| {
                let kind = line
                    .split("kind=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let value = line.rsplit(' ').next().unwrap().parse().unwrap();
                (kind.to_string(), value)
            })
            .collect()
    };
    metrics::with_local_recorder(&recorder, || {
        let limiter = Limiter::builder(Fixed::new(8).unwrap())
            .name("payments")
            .clock(clock.clone())
            .metrics()
            .build()
            .unwrap();
        assert!(kinds(&recorder.handle().render()).is_empty());
        limiter
            .overrides()
            .set(Override::Cap(2), Duration::from_secs(60))
            .unwrap();
        let text = recorder.handle().render();
        assert!(text.contains("# HELP rheostat_override "), "{text}");
        let on: BTreeMap<String, f64> = [
            ("cap", 1.0),
            ("force_closed", 0.0),
            ("force_open", 0.0),
            ("metrics_only", 0.0),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        assert_eq!(kinds(&text), on);
        limiter
            .overrides()
            .set(Override::ForceOpen, Duration::from_secs(60))
            .unwrap();
        let text = recorder.handle().render();
        assert_eq!(kinds(&text)["force_open"], 1.0);
        assert_eq!(kinds(&text)["cap"], 0.0);
        // It expires, and every kind reads 0.
        clock.advance(Duration::from_secs(60));
        limiter.wake();
        let text = recorder.handle().render();
        assert!(kinds(&text).values().all(|&v| v == 0.0), "{text}");
    });
}

#[test]
fn hedges_are_counted_by_result_and_the_delay_in_force_is_shown() {
    use rheostat::retry::{Hedge, RetryConfig};
    use rheostat::{clock::TokioClock, Outcome};

    let recorder = DebuggingRecorder::new();
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder(Fixed::new(4).unwrap())
            .name("search")
            .clock(TokioClock)
            .retry(RetryConfig {
                hedge: Some(Hedge::after(Duration::from_millis(50))),
                ..RetryConfig::default()
            })
            .metrics()
            .build()
            .unwrap()
    });
    let seen = read(&recorder);
    let results = [
        "sent",
        "won",
        "lost",
        "congested",
        "budget_exhausted",
        "refused",
        "deadline",
        "exhausted",
    ];
    for result in results {
        let pairs = [("limiter", "search"), ("result", result)];
        assert_eq!(counter(&seen, "rheostat_hedges_total", &pairs), 0);
    }
    assert_eq!(gauge(&seen, "rheostat_hedge_delay_seconds", "search"), 0.05);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let classify = |r: &Result<u64, ()>| {
            if r.is_ok() {
                Outcome::Success
            } else {
                Outcome::Overload
            }
        };
        // The first attempt stalls; the hedge, sent at 50 ms, answers.
        let mut n = 0;
        let answer = limiter
            .admission()
            .timeout(Duration::from_secs(5))
            .call(classify, || {
                n += 1;
                let stall = if n == 1 { 2_000 } else { 5 };
                async move {
                    tokio::time::sleep(Duration::from_millis(stall)).await;
                    Ok(stall)
                }
            })
            .await;
        assert_eq!(answer.unwrap(), 5);
    });
    let seen = read(&recorder);
    let count = |result| {
        counter(
            &seen,
            "rheostat_hedges_total",
            &[("limiter", "search"), ("result", result)],
        )
    };
    assert_eq!((count("sent"), count("won"), count("lost")), (1, 1, 0));
    // The first attempt, cancelled, was not an overload.
    let calls = |outcome| {
        counter(
            &seen,
            "rheostat_calls_total",
            &[("limiter", "search"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        (calls("success"), calls("ignored"), calls("overload")),
        (1, 1, 0)
    );
}
