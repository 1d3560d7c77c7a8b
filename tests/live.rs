//! A live configuration file (`rheostat::config::LiveLimiters`): edits
//! applied to running limiters, bad edits and a deleted file refused with
//! the last good configuration kept, and overrides in the file.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rheostat::config::LiveLimiters;
use rheostat::overrides::Override;
use rheostat::RejectReason;

/// A fresh directory for one test's file.
fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rheostat-live-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn fixed(name: &str, limit: u32) -> String {
    format!("[limiters.{name}.policy]\npolicy = \"fixed\"\nlimit = {limit}\n")
}

/// An RFC 3339 instant `secs` from now.
fn in_secs(secs: u64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(secs)).to_string()
}

#[test]
fn a_policy_edit_reaches_the_running_limiter_and_keeps_its_calls_in_flight() {
    let path = dir("edit").join("limits.toml");
    write(&path, &fixed("payments", 8));
    let live = LiveLimiters::load(&path).unwrap();
    assert_eq!(live.version(), 1);
    let payments = live.get("payments").unwrap();
    let held: Vec<_> = (0..4).map(|_| payments.try_acquire().unwrap()).collect();
    write(&path, &fixed("payments", 2));
    assert!(live.reload().unwrap());
    assert_eq!((payments.gate().limit, payments.in_flight()), (2, 4));
    assert_eq!(
        payments.try_acquire().unwrap_err().reason(),
        RejectReason::LimitReached
    );
    drop(held);
    assert_eq!(payments.in_flight(), 0);
    // The same file again changes nothing.
    assert!(!live.reload().unwrap());
    assert_eq!(live.version(), 2);
    // A new policy altogether is swapped in the same way.
    write(&path, "[limiters.payments.policy]\npolicy = \"breaker\"\n");
    assert!(live.reload().unwrap());
    assert_eq!(payments.snapshot().policy, "breaker");
}

#[test]
fn a_bad_edit_is_refused_with_its_field_and_line_and_the_last_good_file_stays() {
    let path = dir("bad").join("limits.toml");
    write(&path, &fixed("payments", 8));
    let live = LiveLimiters::load(&path).unwrap();
    let payments = live.get("payments").unwrap();
    write(
        &path,
        "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = -1\n",
    );
    let e = live.reload().unwrap_err();
    assert_eq!(
        (e.field(), e.line()),
        ("limiters.payments.policy.limit", Some(3))
    );
    assert_eq!(e.file(), Some(path.as_path()));
    write(&path, "[limiters.payments.policy\npolicy = \"fixed\"\n");
    assert!(live.reload().is_err());
    assert_eq!((payments.gate().limit, live.version()), (8, 1));
    // Fixed, it applies.
    write(&path, &fixed("payments", 5));
    assert!(live.reload().unwrap());
    assert_eq!((payments.gate().limit, live.version()), (5, 2));
}

#[test]
fn a_deleted_file_is_refused_and_a_restored_one_applies() {
    let path = dir("deleted").join("limits.toml");
    write(&path, &fixed("payments", 8));
    let live = LiveLimiters::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let e = live.reload().unwrap_err();
    assert_eq!(e.file(), Some(path.as_path()));
    assert_eq!(live.get("payments").unwrap().gate().limit, 8);
    write(&path, &fixed("payments", 6));
    assert!(live.reload().unwrap());
    assert_eq!(live.get("payments").unwrap().gate().limit, 6);
}

#[test]
fn a_change_to_an_option_fixed_at_build_is_refused_by_name_and_nothing_of_the_file_applies() {
    let path = dir("options").join("limits.toml");
    let with_timeout = |timeout: &str, limit: u32| {
        format!(
            "[limiters.payments]\ntimeout = \"{timeout}\"\n[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = {limit}\n"
        )
    };
    write(&path, &with_timeout("800ms", 8));
    let live = LiveLimiters::load(&path).unwrap();
    write(&path, &with_timeout("1s", 4));
    let e = live.reload().unwrap_err();
    assert_eq!(
        (e.field(), e.line()),
        ("limiters.payments.timeout", Some(2))
    );
    assert!(e.to_string().contains("restart"), "{e}");
    assert_eq!(live.get("payments").unwrap().gate().limit, 8);
}

#[test]
fn a_limiter_added_is_built_and_one_removed_leaves_the_set_but_keeps_working() {
    let path = dir("names").join("limits.toml");
    write(&path, &fixed("payments", 8));
    let live = LiveLimiters::load(&path).unwrap();
    let payments = live.get("payments").unwrap();
    write(&path, &fixed("search", 3));
    assert!(live.reload().unwrap());
    assert_eq!(live.names(), ["search"]);
    assert_eq!(live.get("search").unwrap().gate().limit, 3);
    assert!(live.get("payments").is_none());
    payments.try_acquire().unwrap().success();
}

#[test]
fn an_override_in_the_file_applies_where_its_labels_match_and_ends_when_removed() {
    let path = dir("overrides").join("limits.toml");
    let base = fixed("payments", 8);
    let with_override = format!(
        "{base}\n[[overrides]]\nlimiter = \"payments\"\nkind = \"force_open\"\nuntil = \"{}\"\ninstances = {{ region = \"eu\" }}\nreason = \"partner maintenance\"\n",
        in_secs(600)
    );
    write(&path, &with_override);
    let eu = LiveLimiters::options(&path)
        .label("region", "eu")
        .load()
        .unwrap();
    let us = LiveLimiters::options(&path)
        .label("region", "us")
        .load()
        .unwrap();
    let bare = LiveLimiters::load(&path).unwrap();
    assert_eq!(
        eu.get("payments")
            .unwrap()
            .overrides()
            .in_force()
            .map(|o| o.0),
        Some(Override::ForceOpen)
    );
    assert!(eu.get("payments").unwrap().try_acquire().is_err());
    assert_eq!(us.get("payments").unwrap().overrides().in_force(), None);
    assert_eq!(bare.get("payments").unwrap().overrides().in_force(), None);
    // It ends about when the file says.
    let (_, until) = eu.get("payments").unwrap().overrides().in_force().unwrap();
    let left = until.saturating_duration_since(std::time::Instant::now());
    assert!(
        left > Duration::from_secs(590) && left <= Duration::from_secs(600),
        "{left:?}"
    );
    // Removed from the file, it is cleared.
    write(&path, &base);
    assert!(eu.reload().unwrap());
    assert_eq!(eu.get("payments").unwrap().overrides().in_force(), None);
    eu.get("payments").unwrap().try_acquire().unwrap().success();
}

#[test]
fn an_override_that_has_ended_does_nothing_and_needs_no_edit() {
    let path = dir("ended").join("limits.toml");
    let past = humantime::format_rfc3339_seconds(SystemTime::now() - Duration::from_secs(60));
    write(
        &path,
        &format!(
            "{}\n[[overrides]]\nlimiter = \"payments\"\nkind = \"cap\"\ncap = 1\nuntil = \"{past}\"\n",
            fixed("payments", 8)
        ),
    );
    let live = LiveLimiters::load(&path).unwrap();
    assert_eq!(live.get("payments").unwrap().overrides().in_force(), None);
    assert_eq!(live.get("payments").unwrap().gate().limit, 8);
}

#[test]
fn an_override_the_file_cannot_apply_is_refused_with_its_place_and_line() {
    let path = dir("bad-override").join("limits.toml");
    let override_of = |body: &str| format!("{}\n[[overrides]]\n{body}", fixed("payments", 8));
    let cases = [
        (
            format!(
                "limiter = \"payments\"\nkind = \"force_closed\"\nuntil = \"{}\"\n",
                in_secs(60)
            ),
            "overrides[0].kind",
            Some(7),
        ),
        (
            format!(
                "limiter = \"payments\"\nkind = \"cap\"\nuntil = \"{}\"\n",
                in_secs(60)
            ),
            "overrides[0].cap",
            None,
        ),
        (
            format!(
                "limiter = \"payments\"\nkind = \"force_open\"\ncap = 3\nuntil = \"{}\"\n",
                in_secs(60)
            ),
            "overrides[0].cap",
            Some(8),
        ),
        (
            format!(
                "limiter = \"billing\"\nkind = \"force_open\"\nuntil = \"{}\"\n",
                in_secs(60)
            ),
            "overrides[0].limiter",
            Some(6),
        ),
        (
            format!(
                "limiter = \"payments\"\nkind = \"force_open\"\nuntil = \"{}\"\n",
                in_secs(8 * 24 * 3600)
            ),
            "overrides[0].until",
            Some(8),
        ),
    ];
    for (body, field, line) in cases {
        write(&path, &override_of(&body));
        let e = LiveLimiters::load(&path).unwrap_err();
        assert_eq!(e.field(), field, "{e}");
        if line.is_some() {
            assert_eq!(e.line(), line, "{e}");
        }
    }
}

#[tokio::test]
async fn the_watch_applies_an_edit_within_a_few_periods_and_ends_overrides_on_time() {
    let path = dir("watch").join("limits.toml");
    write(&path, &fixed("payments", 8));
    let live = Arc::new(LiveLimiters::load(&path).unwrap());
    let watch = tokio::spawn(Arc::clone(&live).watch(Duration::from_millis(20)));
    let payments = live.get("payments").unwrap();
    write(&path, &fixed("payments", 2));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while payments.gate().limit != 2 {
        assert!(tokio::time::Instant::now() < deadline, "not applied");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // An override set in code ends on time with no call to end it.
    payments
        .overrides()
        .set(Override::ForceOpen, Duration::from_millis(100))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(payments.overrides().in_force(), None);
    watch.abort();
}

#[test]
fn reloads_are_counted_by_result_beside_the_version_in_force() {
    let path = dir("metrics").join("limits.toml");
    write(&path, &fixed("payments", 8));
    let live = LiveLimiters::load(&path).unwrap();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        write(&path, &fixed("payments", 4));
        live.reload().unwrap();
        write(
            &path,
            "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 0\n",
        );
        live.reload().unwrap_err();
        live.reload().unwrap_err();
    });
    let text = recorder.handle().render();
    assert!(
        text.contains("# HELP rheostat_config_reloads_total "),
        "{text}"
    );
    assert!(text.contains("# HELP rheostat_config_version "), "{text}");
    let file = path.display().to_string();
    let value = |series: &str| -> f64 {
        let series = series.replace("FILE", &file);
        text.lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    assert_eq!(
        value("rheostat_config_reloads_total{file=\"FILE\",result=\"applied\"}"),
        1.0
    );
    assert_eq!(
        value("rheostat_config_reloads_total{file=\"FILE\",result=\"refused\"}"),
        2.0
    );
    assert_eq!(value("rheostat_config_version{file=\"FILE\"}"), 2.0);
}
