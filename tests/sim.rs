//! The simulator: deterministic, faithful to its model, strict about its
//! input. The headline claims run the whole comparison and are `#[ignore]`d
//! in debug builds: `cargo test --release --test sim -- --ignored`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::sim::{compare, PolicyKind, Scenario};

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml("test", text).unwrap()
}

const SMALL: &str = r#"
    name = "small"
    duration = "2m"
    recovers_at = "80s"
    [dependency]
    workers = 20
    service = { median = "100ms", p99 = "400ms" }
    queue = 50
    [[dependency.phase]]
    at = "40s"
    workers = 8
    [[dependency.phase]]
    at = "80s"
    workers = 20
    [traffic]
    rate = 150
    timeout = "1s"
    deadline = "2s"
    attempts = 2
"#;

#[test]
fn the_same_seed_gives_byte_identical_json_and_another_seed_another_run() {
    let sc = [scenario(SMALL)];
    let a = compare(&sc, &PolicyKind::ALL, 42, |_| {})
        .unwrap()
        .0
        .to_json();
    let b = compare(&sc, &PolicyKind::ALL, 42, |_| {})
        .unwrap()
        .0
        .to_json();
    let c = compare(&sc, &PolicyKind::ALL, 43, |_| {})
        .unwrap()
        .0
        .to_json();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.contains("\"policy\": \"breaker+gradient\""));
}

#[test]
fn under_constant_capacity_and_light_load_no_policy_rejects_anything() {
    let sc = [scenario(
        r#"
        name = "light"
        duration = "5m"
        [dependency]
        workers = 100
        service = { median = "50ms", p99 = "120ms" }
        [traffic]
        rate = 40
        timeout = "1s"
        deadline = "1s"
        "#,
    )];
    let (report, _) = compare(&sc, &PolicyKind::ALL, 1, |_| {}).unwrap();
    for p in &report.scenarios[0].policies {
        assert_eq!(
            p.rejected, 0,
            "{} rejected calls under light load",
            p.policy
        );
        assert_eq!(p.timeouts, 0, "{}", p.policy);
        assert_eq!(p.opens, 0, "{}", p.policy);
    }
}

#[test]
fn the_oracles_goodput_is_the_smaller_of_offered_load_and_capacity() {
    // Nearly constant 100 ms service: 200 workers serve 2000 calls/s.
    for (rate, expected) in [(500.0, 500.0), (4000.0, 2000.0)] {
        let sc = [scenario(&format!(
            r#"
            name = "capacity"
            duration = "60s"
            measure = {{ from = "10s", to = "60s" }}
            [dependency]
            workers = 200
            service = {{ median = "100ms", p99 = "100001us" }}
            [traffic]
            rate = {rate}
            timeout = "1s"
            deadline = "1s"
            "#
        ))];
        let (report, _) = compare(&sc, &[], 3, |_| {}).unwrap();
        let oracle = report.scenarios[0].policy(PolicyKind::Oracle).unwrap();
        let error = (oracle.goodput - expected).abs() / expected;
        assert!(
            error <= 0.02,
            "offered {rate}: goodput {} vs {expected}",
            oracle.goodput
        );
    }
}

fn error_of(text: &str) -> String {
    Scenario::from_toml("bad.toml", text)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_scenario_file_error_names_the_line_and_the_field() {
    let base = "name = \"x\"\nduration = \"1m\"\n[dependency]\nworkers = 4\nservice = { median = \"10ms\", p99 = \"20ms\" }\n";
    let unknown = format!(
        "{base}colour = \"red\"\n[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n"
    );
    let e = error_of(&unknown);
    assert!(
        e.contains("bad.toml, line 6") && e.contains("colour"),
        "{e}"
    );

    let negative = format!("{base}[traffic]\nrate = -5\ntimeout = \"1s\"\ndeadline = \"1s\"\n");
    let e = error_of(&negative);
    assert!(e.contains("line 7") && e.contains("-5"), "{e}");

    let missing_at = format!("{base}[[dependency.phase]]\nworkers = 2\n[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n");
    let e = error_of(&missing_at);
    assert!(e.contains("line 6") && e.contains("`at`"), "{e}");

    let no_phase_order = format!(
        "{base}[[dependency.phase]]\nat = \"30s\"\n[[dependency.phase]]\nat = \"10s\"\n[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n"
    );
    let e = error_of(&no_phase_order);
    assert!(e.contains("dependency.phase[1].at"), "{e}");

    let late = format!("{base}[[dependency.phase]]\nat = \"2m\"\n[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n");
    assert!(error_of(&late).contains("after the end of the run"));

    let bad_duration = base.replace("\"1m\"", "\"soon\"");
    let e = error_of(&format!(
        "{bad_duration}[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n"
    ));
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn the_shipped_scenarios_parse() {
    let names: Vec<String> = Scenario::builtin()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        names,
        [
            "brownout",
            "cold-start",
            "fleet",
            "low-traffic",
            "client-errors",
            "slow-success",
            "flapping",
            "bulk"
        ]
    );
}

/// The headline claims of the comparison, on the shipped scenarios.
#[test]
#[ignore = "runs the whole comparison; use --release"]
fn headline_claims_hold() {
    let scenarios = Scenario::builtin().unwrap();
    let (report, stats) = compare(&scenarios, &PolicyKind::ALL, 1, |_| {}).unwrap();
    let get = |s: &str| report.scenarios.iter().find(|r| r.name == s).unwrap();

    let brownout = get("brownout");
    let oracle = brownout.policy(PolicyKind::Oracle).unwrap();
    // Some adaptive policy keeps goodput near the degraded capacity while
    // holding about as few of the caller's workers as the oracle does.
    let adaptive_and_lean: Vec<&str> = brownout
        .policies
        .iter()
        .filter(|p| PolicyKind::from_name(&p.policy).unwrap().is_adaptive())
        .filter(|p| p.goodput_vs_oracle.unwrap() >= 0.9)
        .filter(|p| p.in_flight_mean <= 2.0 * oracle.in_flight_mean)
        .map(|p| p.policy.as_str())
        .collect();
    assert!(!adaptive_and_lean.is_empty(), "{}", brownout.table());
    let none = brownout.policy(PolicyKind::None).unwrap();
    assert!(none.goodput_vs_oracle.unwrap() <= 0.5);

    let cold = get("cold-start");
    let classic = cold.policy(PolicyKind::BreakerClassic).unwrap();
    let recommended = cold.policy(PolicyKind::Breaker).unwrap();
    let run = 2.0 * 3600.0 - 6.0 * 60.0;
    let classic_recovery = classic.recovery_seconds.unwrap_or(run);
    assert!(classic_recovery >= 10.0 * recommended.recovery_seconds.unwrap());
    assert!(classic.open_seconds >= 16.0 * 60.0);

    let fleet = get("fleet");
    let scaled = fleet.policy(PolicyKind::Breaker).unwrap().probes;
    let unscaled = fleet.policy(PolicyKind::BreakerUnscaled).unwrap().probes;
    // Each instance keeps one probe per cycle, so that it can recover on its
    // own; the unscaled breaker stakes five per cycle and closes on its
    // fourth success. Over the outage the ratio is 1/5; with the closing
    // cycle it is (c + 1) / (5c + 4) for c failed cycles, a hair above.
    assert!(
        scaled as f64 <= 0.21 * unscaled as f64,
        "{scaled} vs {unscaled}"
    );

    for p in &get("low-traffic").policies {
        assert_eq!(p.opens, 0, "{}", p.policy);
    }
    for p in &get("client-errors").policies {
        assert_eq!(p.opens, 0, "{}", p.policy);
    }
    let bulk = get("bulk");
    assert_eq!(bulk.policy(PolicyKind::Breaker).unwrap().dead_lettered, 0);
    assert!(bulk.policy(PolicyKind::None).unwrap().dead_lettered > 0);

    let flapping = get("flapping");
    assert_eq!(flapping.policy(PolicyKind::Breaker).unwrap().closes, 0);
    assert!(flapping.policy(PolicyKind::BreakerClassic).unwrap().closes > 0);

    let slow = get("slow-success");
    let breaker = slow.policy(PolicyKind::Breaker).unwrap();
    assert!(breaker.opens > 0);
    assert!(breaker.in_flight_mean * 10.0 < slow.policy(PolicyKind::None).unwrap().in_flight_mean);

    assert!(
        stats.calls_per_core_second() >= 1e6,
        "{}",
        stats.calls_per_core_second()
    );
}
