//! A live file as a trial met it.
//!
//! A policy swapped while the limiter runs, from every kind to every other
//! (through `Limiter::update` and through a live file): every snapshot
//! field, every gauge and the reason of every refusal after the swap are
//! those of a limiter built with the new policy; nothing of the old one
//! (an open breaker's state, the breaker blamed for a throttle's refusal)
//! stays.
//!
//! The reload counter counts changes applied, not polls: a file polled and
//! never edited, or edited without changing a setting, counts none.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use rheostat::config::{LiveLimiters, PolicyConfig};
use rheostat::{
    clock::{Clock, ManualClock},
    DynLimiter, Limiter, RejectReason, Rejection,
};

/// Every kind of policy a file offers, as its policy table writes it.
const KINDS: [(&str, &str); 8] = [
    ("fixed", "policy = \"fixed\"\nlimit = 4\n"),
    ("aimd", "policy = \"aimd\"\n"),
    ("vegas", "policy = \"vegas\"\n"),
    ("gradient", "policy = \"gradient\"\n"),
    ("throttle", "policy = \"throttle\"\n"),
    ("breaker", "policy = \"breaker\"\n"),
    (
        "stack",
        "policy = \"stack\"\n[[members]]\npolicy = \"breaker\"\n[[members]]\npolicy = \"aimd\"\n",
    ),
    ("recommended", "policy = \"recommended\"\n"),
];

/// Every ordered pair of two kinds: `(from, to)`.
fn pairs() -> impl Iterator<Item = (usize, usize)> {
    (0..KINDS.len()).flat_map(|a| {
        (0..KINDS.len())
            .filter(move |b| *b != a)
            .map(move |b| (a, b))
    })
}

fn policy(kind: usize) -> PolicyConfig {
    PolicyConfig::from_toml(KINDS[kind].1).unwrap()
}

/// The kind's policy table as the limiter `name`'s in a file.
fn table(name: &str, kind: usize) -> String {
    KINDS[kind]
        .1
        .replace(
            "[[members]]",
            &format!("[[limiters.{name}.policy.members]]"),
        )
        .replacen(
            "policy = ",
            &format!("[limiters.{name}.policy]\npolicy = "),
            1,
        )
}

/// Call until refused: every other call admitted is held, the rest fail
/// (a limit fills, a breaker opens, a throttle sheds). The held calls are
/// dropped unrecorded.
fn refuse<C: Clock>(limiter: &DynLimiter<C>) -> Rejection {
    let mut held = Vec::new();
    for i in 0..10_000 {
        match limiter.try_acquire() {
            Ok(permit) if i % 2 == 0 => held.push(permit),
            Ok(permit) => permit.overload(),
            Err(rejection) => return rejection,
        }
    }
    panic!("{} never refused a call", limiter.name())
}

/// `(kind, name, limiter label)` → value.
type Seen = BTreeMap<(MetricKind, String, String), DebugValue>;

fn read(recorder: &DebuggingRecorder) -> Seen {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _unit, _description, value)| {
            let (kind, key) = key.into_parts();
            let mut limiter = None;
            let mut reason = None;
            for label in key.labels() {
                match label.key() {
                    "limiter" => limiter = Some(label.value().to_owned()),
                    "reason" => reason = Some(label.value().to_owned()),
                    _ => return None,
                }
            }
            let name = match reason {
                Some(reason) => format!("{}{{reason={reason}}}", key.name()),
                None => key.name().to_owned(),
            };
            Some(((kind, name, limiter?), value))
        })
        .collect()
}

/// A gauge's value, `None` where there is no such series.
fn gauge(seen: &Seen, name: &str, limiter: &str) -> Option<f64> {
    match seen.get(&(MetricKind::Gauge, name.to_owned(), limiter.to_owned())) {
        Some(DebugValue::Gauge(v)) => Some(v.into_inner()),
        None => None,
        other => panic!("{name}: {other:?}"),
    }
}

fn rejected(seen: &Seen, reason: RejectReason, limiter: &str) -> u64 {
    let name = format!("rheostat_rejected_total{{reason={}}}", reason.as_str());
    match seen.get(&(MetricKind::Counter, name.clone(), limiter.to_owned())) {
        Some(DebugValue::Counter(v)) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

const REASONS: [RejectReason; 6] = [
    RejectReason::LimitReached,
    RejectReason::Throttled,
    RejectReason::Ramping,
    RejectReason::Open,
    RejectReason::QueueFull,
    RejectReason::TimedOut,
];

/// What a swapped limiter shows (`seen`, its recorder read once: a read
/// resets the debugging recorder's values) is what a `fresh` one built with
/// the new policy shows (`expected`): the snapshot and the gauges, the
/// breaker's state reading `NaN` where the old policy had a breaker and the
/// new one has none.
fn shows_as_fresh<C: Clock, D: Clock>(
    what: &str,
    (swapped, seen): (&DynLimiter<C>, &Seen),
    (fresh, expected): (&DynLimiter<D>, &Seen),
) {
    assert_eq!(swapped.snapshot(), fresh.snapshot(), "{what}: snapshot");
    let (name, fresh_name) = (swapped.name(), fresh.name());
    for series in ["rheostat_limit", "rheostat_admit_probability"] {
        assert_eq!(
            gauge(seen, series, name),
            gauge(expected, series, fresh_name),
            "{what}: {series}"
        );
    }
    let state = gauge(seen, "rheostat_breaker_state", name);
    match gauge(expected, "rheostat_breaker_state", fresh_name) {
        Some(fresh) => assert_eq!(state, Some(fresh), "{what}: breaker state"),
        None => assert!(
            state.is_none_or(f64::is_nan),
            "{what}: a breaker state {state:?} without a breaker"
        ),
    }
}

/// Both limiters refuse a call driven alike for the same reason, blaming
/// the same policy: the swapped one's refusal, after the fresh one's.
fn refuses_as_fresh<C: Clock, D: Clock>(
    what: &str,
    swapped: &DynLimiter<C>,
    fresh: &DynLimiter<D>,
) -> RejectReason {
    let (refused, expected) = (refuse(swapped), refuse(fresh));
    assert_eq!(
        (refused.reason(), refused.policy()),
        (expected.reason(), expected.policy()),
        "{what}: refusal"
    );
    refused.reason()
}

/// The one refusal since the recorder was last read (`moved`: counters
/// read since) is counted under its `reason` and no other.
fn counted_once(what: &str, moved: &Seen, limiter: &str, reason: RejectReason) {
    for r in REASONS {
        assert_eq!(
            rejected(moved, r, limiter),
            u64::from(r == reason),
            "{what}: rheostat_rejected_total{{reason={}}}",
            r.as_str()
        );
    }
}

#[test]
fn a_policy_swapped_by_update_shows_only_the_new_policy_for_every_pair_of_kinds() {
    for (a, b) in pairs() {
        let what = format!("{} -> {}", KINDS[a].0, KINDS[b].0);
        let (recorder, new) = (DebuggingRecorder::new(), DebuggingRecorder::new());
        let build = |kind: usize, name: &str| {
            Limiter::builder(policy(kind).build().unwrap())
                .clock(ManualClock::new())
                .name(name.to_owned())
                .metrics()
                .build()
                .unwrap()
        };
        let swapped = metrics::with_local_recorder(&recorder, || {
            let swapped = build(a, "swapped");
            let _ = refuse(&swapped);
            let next = policy(b).build().unwrap();
            swapped.update(move |running| *running = next);
            swapped
        });
        let fresh = metrics::with_local_recorder(&new, || build(b, "fresh"));
        let seen = read(&recorder);
        shows_as_fresh(&what, (&swapped, &seen), (&fresh, &read(&new)));
        let reason = refuses_as_fresh(&what, &swapped, &fresh);
        counted_once(&what, &read(&recorder), "swapped", reason);
    }
}

/// A fresh directory for one test's files.
fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rheostat-swap-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file with one limiter per pair, named `<from>_to_<to>`, each with the
/// policy `pick` chooses of the pair.
fn file(path: &Path, pick: impl Fn((usize, usize)) -> usize) {
    let text: String = pairs()
        .map(|pair| {
            table(
                &format!("{}_to_{}", KINDS[pair.0].0, KINDS[pair.1].0),
                pick(pair),
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(path, text).unwrap();
}

fn live(path: &Path) -> LiveLimiters {
    LiveLimiters::options(path)
        .each(|builder| builder.metrics())
        .load()
        .unwrap()
}

#[test]
fn a_policy_swapped_in_a_live_file_shows_only_the_new_policy_for_every_pair_of_kinds() {
    let dir = dir("pairs");
    let (path, fresh_path) = (dir.join("limits.toml"), dir.join("fresh.toml"));
    file(&path, |(a, _)| a);
    file(&fresh_path, |(_, b)| b);
    let (recorder, new) = (DebuggingRecorder::new(), DebuggingRecorder::new());
    let fresh = metrics::with_local_recorder(&new, || live(&fresh_path));
    metrics::with_local_recorder(&recorder, || {
        let swapped = live(&path);
        for name in swapped.names() {
            let _ = refuse(&swapped.get(&name).unwrap());
        }
        file(&path, |(_, b)| b);
        assert!(swapped.reload().unwrap());
        let (seen, expected) = (read(&recorder), read(&new));
        let names = swapped.names();
        assert_eq!(names.len(), 56);
        for name in &names {
            let (swapped, fresh) = (swapped.get(name).unwrap(), fresh.get(name).unwrap());
            shows_as_fresh(name, (&swapped, &seen), (&fresh, &expected));
        }
        let reasons: Vec<_> = names
            .iter()
            .map(|name| {
                refuses_as_fresh(name, &swapped.get(name).unwrap(), &fresh.get(name).unwrap())
            })
            .collect();
        let moved = read(&recorder);
        for (name, reason) in names.iter().zip(reasons) {
            counted_once(name, &moved, name, reason);
        }
    });
}

#[test]
fn an_open_breaker_swapped_for_a_throttle_in_a_live_file_leaves_no_open_state_and_its_refusals_are_throttled(
) {
    let path = dir("trial").join("limits.toml");
    std::fs::write(&path, table("payments", 5)).unwrap();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let (refusal, text) = metrics::with_local_recorder(&recorder, || {
        let live = live(&path);
        let payments = live.get("payments").unwrap();
        assert_eq!(refuse(&payments).reason(), RejectReason::Open);
        std::fs::write(&path, table("payments", 4)).unwrap();
        assert!(live.reload().unwrap());
        let refusal = refuse(&payments);
        (refusal, recorder.handle().render())
    });
    assert_eq!(
        (refusal.reason(), refusal.policy()),
        (RejectReason::Throttled, "throttle")
    );
    let line = |series: &str| {
        text.lines()
            .find(|line| line.starts_with(series))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .to_owned()
    };
    assert_eq!(
        line("rheostat_breaker_state{limiter=\"payments\"}"),
        "rheostat_breaker_state{limiter=\"payments\"} NaN"
    );
    assert_eq!(
        line("rheostat_rejected_total{limiter=\"payments\",reason=\"throttled\"}"),
        "rheostat_rejected_total{limiter=\"payments\",reason=\"throttled\"} 1"
    );
    assert_eq!(
        line("rheostat_rejected_total{limiter=\"payments\",reason=\"ramping\"}"),
        "rheostat_rejected_total{limiter=\"payments\",reason=\"ramping\"} 0"
    );
}

/// The reload counter by result, and the version gauge, in real
/// Prometheus output: `(applied, unchanged, refused, version)`, a result
/// not counted yet as 0.
fn reloads(text: &str, path: &Path) -> (f64, f64, f64, f64) {
    let file = path.display().to_string();
    let value = |series: String| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    };
    let count = |result: &str| {
        value(format!(
            "rheostat_config_reloads_total{{file=\"{file}\",result=\"{result}\"}}"
        ))
    };
    (
        count("applied"),
        count("unchanged"),
        count("refused"),
        value(format!("rheostat_config_version{{file=\"{file}\"}}")),
    )
}

#[test]
fn a_file_polled_150_times_without_an_edit_counts_no_reload_applied() {
    let path = dir("polled").join("limits.toml");
    std::fs::write(&path, table("payments", 0)).unwrap();
    let live = LiveLimiters::load(&path).unwrap();
    // Quiet for 2 s, as a file is between edits: each poll reads its
    // stamp only.
    thread::sleep(Duration::from_millis(2_100));
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        for _ in 0..150 {
            assert!(!live.reload().unwrap());
        }
    });
    let text = recorder.handle().render();
    assert_eq!(reloads(&text, &path), (0.0, 150.0, 0.0, 1.0), "{text}");
}

#[test]
fn an_edit_that_changes_no_setting_counts_unchanged_and_only_a_change_counts_applied() {
    let path = dir("same").join("limits.toml");
    let text = table("payments", 0);
    std::fs::write(&path, &text).unwrap();
    let live = LiveLimiters::load(&path).unwrap();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        // New bytes, parsed, saying what is in force: a comment, spacing,
        // a limit written as it was.
        std::fs::write(&path, format!("# the payment provider\n{text}")).unwrap();
        assert!(!live.reload().unwrap());
        std::fs::write(&path, text.replace(" = ", "   =   ")).unwrap();
        assert!(!live.reload().unwrap());
        // A change: applied, a new version.
        std::fs::write(&path, table("payments", 1)).unwrap();
        assert!(live.reload().unwrap());
        assert!(!live.reload().unwrap());
    });
    let text = recorder.handle().render();
    // Applied: the one change, the versions after the first.
    assert_eq!(reloads(&text, &path), (1.0, 3.0, 0.0, 2.0), "{text}");
    assert_eq!(live.version(), 2);
}
