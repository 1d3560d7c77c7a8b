//! The simulator: deterministic, faithful to its model, measured against a
//! bound no policy can beat, strict about its input. The claims over the
//! whole shipped comparison are `#[ignore]`d in debug builds:
//! `cargo test --release --test sim -- --ignored`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::time::Duration;

use rheostat::config::PolicyConfig;
use rheostat_sim::{compare, rows, PolicyReport, Recovery, Row, Scenario, Span};

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
    let a = compare(&sc, &rows::all(), 42, |_| {}).unwrap().0.to_json();
    let b = compare(&sc, &rows::all(), 42, |_| {}).unwrap().0.to_json();
    let c = compare(&sc, &rows::all(), 43, |_| {}).unwrap().0.to_json();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.contains("\"policy\": \"breaker+gradient\""));
    assert!(a.contains("\"bound\""));
}

#[test]
fn no_policy_beats_the_bound_whatever_the_seed() {
    // Policies that use the dependency's queue beat a clairvoyant limit;
    // none may beat the bound.
    let sc = [scenario(SMALL)];
    for seed in 1..=4 {
        let (report, _) = compare(&sc, &rows::all(), seed, |_| {}).unwrap();
        let s = &report.scenarios[0];
        for p in &s.policies {
            assert!(
                p.successes as f64 <= s.bound_of(p).successes,
                "seed {seed}: {} has {} successes, the bound {}\n{}",
                p.policy,
                p.successes,
                s.bound_of(p).successes,
                s.table()
            );
        }
        // The bound is not loose either: the best policy is near it.
        let best = s.policies.iter().map(|p| p.successes).max().unwrap();
        assert!(best as f64 >= 0.85 * s.bound.successes, "{}", s.table());
    }
}

#[test]
fn the_bound_is_the_smaller_of_offered_load_and_capacity() {
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
            pool = 100000
            "#
        ))];
        let (report, _) = compare(&sc, &[rows::bulkhead()], 3, |_| {}).unwrap();
        let s = &report.scenarios[0];
        let error = (s.bound.fluid / 50.0 - expected).abs() / expected;
        assert!(error <= 0.02, "offered {rate}: bound {:?}", s.bound);
        let bulkhead = s.policy("bulkhead").unwrap();
        assert!(bulkhead.goodput_vs_bound.unwrap() >= 0.97, "{}", s.table());
    }
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
    let (report, _) = compare(&sc, &rows::all(), 1, |_| {}).unwrap();
    for p in &report.scenarios[0].policies {
        assert_eq!(
            p.rejected, 0,
            "{} rejected calls under light load",
            p.policy
        );
        assert_eq!(p.timeouts, 0, "{}", p.policy);
        assert_eq!(p.opens, 0, "{}", p.policy);
        assert_eq!(p.recovery, Recovery::NoFault, "{}", p.policy);
        assert_eq!(p.healthy.served, Some(1.0), "{}", p.policy);
    }
}

const OUTAGE: &str = r#"
    name = "outage"
    duration = "6m"
    recovers_at = "2m"
    [dependency]
    workers = 50
    service = { median = "50ms", p99 = "100ms" }
    [[dependency.phase]]
    at = "1m"
    outage = "refuse"
    [[dependency.phase]]
    at = "2m"
    outage = "none"
    [traffic]
    rate = 50
    timeout = "1s"
    deadline = "1s"
"#;

#[test]
fn recovery_is_sustained_goodput_after_the_dependency_can_serve_again() {
    let mut sc = scenario(OUTAGE);
    // A breaker that waits ten minutes before probing cannot recover
    // within this run.
    sc.policies.set_override(
        "breaker-classic",
        PolicyConfig::from_toml("policy = \"breaker\"\ncooldown.fixed = \"10m\"").unwrap(),
    );
    let (report, _) = compare(
        &[sc],
        &[rows::none(), rows::breaker_classic(), rows::breaker()],
        5,
        |_| {},
    )
    .unwrap();
    let s = &report.scenarios[0];
    let none = s.policy("none").unwrap();
    assert!(
        matches!(none.recovery, Recovery::After(t) if t <= 2.0),
        "{}",
        s.table()
    );
    let stuck = s.policy("breaker-classic").unwrap();
    assert_eq!(stuck.recovery, Recovery::Never, "{}", s.table());
    // The recommended breaker opens in the outage and must wait out a
    // cooldown and probe before it is back: not at once.
    let breaker = s.policy("breaker").unwrap();
    assert!(
        matches!(breaker.recovery, Recovery::After(t) if (1.0..120.0).contains(&t)),
        "{}",
        s.table()
    );
    assert!(s.table().contains("never"));
    // The timeline has the opening, with its time.
    let first_open = breaker.transitions.iter().find(|t| t.to == "open").unwrap();
    // At least 20 calls, half of them failed, over its 30 s window.
    assert!(
        (60.0..90.0).contains(&first_open.at_seconds),
        "{first_open:?}"
    );
    assert!(breaker
        .transitions
        .iter()
        .any(|t| t.from == "half_open" && t.to == "closed" && t.at_seconds > 120.0));
    assert!(report.to_json().contains("\"half_open\""));
}

#[test]
fn a_ratio_needs_a_denominator_with_enough_calls() {
    let sc = [scenario(
        r#"
        name = "sparse"
        duration = "5m"
        [dependency]
        workers = 10
        service = { median = "50ms", p99 = "100ms" }
        [traffic]
        rate = 0.2
        timeout = "1s"
        deadline = "1s"
        "#,
    )];
    let (report, _) = compare(&sc, &[rows::none()], 1, |_| {}).unwrap();
    let s = &report.scenarios[0];
    let none = s.policy("none").unwrap();
    assert!(none.successes > 0 && s.bound.successes < 100.0);
    assert_eq!(none.goodput_vs_bound, None);
    assert_eq!(none.healthy.served, None);
    let row = s
        .table()
        .lines()
        .find(|l| l.starts_with("none"))
        .unwrap()
        .to_owned();
    assert!(row.split_whitespace().nth(2) == Some("-"), "{row}");
}

/// Seed 000's arithmetic: 120 calls/s with 35% hanging to a 15 s ceiling
/// hold about 630 of the caller's workers; refusing them in 1 ms holds 0.12.
#[test]
fn the_pileup_reproduces_the_briefs_arithmetic() {
    let shipped = Scenario::builtin().unwrap();
    let mut pileup = shipped.into_iter().find(|s| s.name == "pileup").unwrap();
    // Tuned for this test only: a breaker that opens on the 35% and never
    // probes again, so that every call after the first seconds is refused.
    pileup.policies.set_override(
        "breaker",
        PolicyConfig::from_toml(
            "policy = \"breaker\"\nfailure_rate = 0.25\ncooldown.fixed = \"1h\"",
        )
        .unwrap(),
    );
    let (report, _) = compare(std::slice::from_ref(&pileup), &[rows::none()], 1, |_| {}).unwrap();
    let none = report.scenarios[0].policy("none").unwrap();
    assert!(
        (none.in_flight_mean - 630.0).abs() <= 63.0,
        "{}",
        report.scenarios[0].table()
    );
    // Hung calls are known only at their 15 s timeout, so it opens about
    // 40 s into the phase; measured once those it admitted have timed out.
    pileup.measure = Some(Span {
        from: Duration::from_secs(190),
        to: Duration::from_secs(480),
    });
    let (report, _) = compare(&[pileup], &[rows::breaker()], 1, |_| {}).unwrap();
    let breaker = report.scenarios[0].policy("breaker").unwrap();
    assert_eq!(breaker.sent, 0, "{}", report.scenarios[0].table());
    assert!(
        (breaker.in_flight_mean - 0.12).abs() <= 0.012,
        "{}",
        report.scenarios[0].table()
    );
}

const SLOW: &str = r#"
    name = "slow"
    duration = "4m"
    measure = { from = "1m", to = "4m" }
    [dependency]
    workers = 1000
    service = { median = "3s", p99 = "3100ms" }
    [traffic]
    rate = 100
    timeout = "5s"
    deadline = "5s"
    pool = 100
    healthy = { rate = 100, latency = "10ms" }
"#;

#[test]
fn a_slow_dependency_fills_the_callers_pool_and_starves_the_healthy_endpoint() {
    let mut sc = scenario(SLOW);
    sc.policies.set_override(
        "bulkhead",
        PolicyConfig::from_toml("policy = \"fixed\"\nlimit = 20").unwrap(),
    );
    let (report, _) = compare(&[sc], &[rows::none(), rows::bulkhead()], 2, |_| {}).unwrap();
    let s = &report.scenarios[0];
    let none = s.policy("none").unwrap();
    // 100 calls/s held 3 s each need 300 workers: the pool of 100 is full.
    assert_eq!(none.pool_peak, 100, "{}", s.table());
    assert!(none.pool_full > 0);
    assert!(none.healthy.served.unwrap() < 0.5, "{}", s.table());
    // A bulkhead of 20 leaves 80 workers to the healthy endpoint.
    let bulkhead = s.policy("bulkhead").unwrap();
    assert_eq!(bulkhead.healthy.served, Some(1.0), "{}", s.table());
    assert_eq!(bulkhead.pool_full, 0);
    assert!(bulkhead.pool_mean < 30.0);
}

#[test]
fn a_refusal_costs_the_caller_its_reject_cost_and_may_be_retried() {
    let text = r#"
        name = "refused"
        duration = "3m"
        measure = { from = "1m", to = "3m" }
        [dependency]
        workers = 100
        service = { median = "50ms", p99 = "100ms" }
        [traffic]
        rate = 100
        timeout = "1s"
        deadline = "5s"
        reject_cost = "20ms"
        attempts = 4
        backoff = "100ms"
        retry_budget = "none"
    "#;
    let with_retries = |mut sc: Scenario, retry: bool| {
        if let Some(t) = sc.traffic.as_mut() {
            t.retry_rejected = retry;
        }
        sc
    };
    let run = |sc: Scenario| {
        let (report, _) = compare(&[sc], &[rows::bulkhead()], 1, |_| {}).unwrap();
        report.scenarios[0].policies[0].clone()
    };
    // A refusing limiter: a fixed limit far below the load.
    let mut sc = scenario(text);
    sc.policies.set_override(
        "bulkhead",
        PolicyConfig::from_toml("policy = \"fixed\"\nlimit = 1").unwrap(),
    );
    let once = run(with_retries(sc.clone(), false));
    let retried = run(with_retries(sc, true));
    // Each refusal holds a worker 20 ms, each admitted call 50 ms:
    // Little's law over the 120 s measured.
    assert!(once.rejected > 9_000, "{once:?}");
    let expected = (once.rejected as f64 * 0.020 + once.sent as f64 * 0.050) / 120.0;
    assert!(
        (once.in_flight_mean - expected).abs() < 0.1 * expected,
        "{} vs {expected}",
        once.in_flight_mean
    );
    assert_eq!(once.tried, once.rejected + once.sent);
    // Retrying refusals: up to 4 attempts each, and the worker is held
    // through the backoffs.
    assert!(
        retried.tried as f64 > 3.5 * once.tried as f64,
        "{retried:?}"
    );
    assert!(retried.in_flight_mean > 10.0 * once.in_flight_mean);
}

#[test]
fn the_retry_budget_slides_and_none_means_none() {
    let text = |budget: &str| {
        format!(
            r#"
            name = "budget"
            duration = "2m"
            [dependency]
            workers = 100
            service = {{ median = "20ms", p99 = "40ms" }}
            overload_errors = 0.9
            [traffic]
            rate = 100
            timeout = "1s"
            deadline = "10s"
            attempts = 4
            retry_budget = {budget}
            "#
        )
    };
    let amplification = |budget: &str| {
        let (report, _) = compare(&[scenario(&text(budget))], &[rows::none()], 1, |_| {}).unwrap();
        report.scenarios[0].policies[0].amplification.unwrap()
    };
    // 90% of attempts fail: with no budget, nearly 4 attempts a request.
    let unlimited = amplification("\"none\"");
    assert!(unlimited > 3.3, "{unlimited}");
    // No reserve and no share: no retries at all.
    let nothing = amplification("{ ratio = 0.0, min_per_second = 0 }");
    assert!((nothing - 1.0).abs() < 1e-9, "{nothing}");
    // 20% of recent first attempts (the reserve of 10 a second is small
    // beside 100 requests a second, but counts): about 1.2 + 0.1.
    let share = amplification("{ ratio = 0.2, min_per_second = 10, ttl = \"10s\" }");
    assert!((1.25..1.35).contains(&share), "{share}");
    assert_eq!(amplification("0.2"), share);
}

#[test]
fn rates_ramp_linearly() {
    let sc = scenario(
        r#"
        name = "ramp"
        duration = "3m"
        [dependency]
        workers = 1000
        service = { median = "10ms", p99 = "20ms" }
        [traffic]
        rate = 0
        timeout = "1s"
        deadline = "1s"
        [[traffic.phase]]
        at = "1m"
        rate = 100
        until = "2m"
        "#,
    );
    let (report, _) = compare(&[sc], &[rows::none()], 1, |_| {}).unwrap();
    let none = &report.scenarios[0].policies[0];
    // Half of 100/s over the ramp's minute, then 100/s for a minute.
    let expected = 3000.0 + 6000.0;
    let offered = none.offered as f64;
    assert!((offered - expected).abs() < 0.03 * expected, "{offered}");
    let g = &none.series.goodput;
    assert!(g[..60].iter().all(|&x| x == 0.0));
    let early: f64 = g[60..75].iter().sum();
    let late: f64 = g[105..120].iter().sum();
    assert!(late > 3.0 * early, "{early} {late}");
}

#[test]
fn a_dependency_flaps_by_time_and_calls_hang() {
    let sc = scenario(
        r#"
        name = "flap"
        duration = "4m"
        measure = { from = "1m", to = "4m" }
        [dependency]
        workers = 100
        service = { median = "20ms", p99 = "40ms" }
        hang = 0.2
        [[dependency.phase]]
        at = "1m"
        flap = { up = "10s", down = "10s" }
        [traffic]
        rate = 100
        timeout = "500ms"
        deadline = "500ms"
        "#,
    );
    let (report, _) = compare(&[sc], &[rows::none()], 1, |_| {}).unwrap();
    let s = &report.scenarios[0];
    let none = s.policy("none").unwrap();
    // Up half the time, and 20% of what reaches it up hangs.
    let share = none.successes as f64 / none.offered as f64;
    assert!((share - 0.4).abs() < 0.03, "{share}");
    let hung = none.timeouts as f64 / (none.offered as f64 / 2.0);
    assert!((hung - 0.2).abs() < 0.03, "{hung}");
    // The bound knows the schedule.
    assert!(
        (s.bound.fluid / none.offered as f64 - 0.4).abs() < 0.02,
        "{:?}",
        s.bound
    );
    let g = &none.series.goodput;
    assert!(g[60..70].iter().all(|&x| x == 0.0), "{:?}", &g[60..80]);
    assert!(g[71..79].iter().all(|&x| x > 60.0), "{:?}", &g[60..80]);
}

#[test]
fn a_dependency_flapping_by_request_count_comes_back_after_every_fall() {
    // Calls of about 1 ms, one every 100 ms: each of the three it serves
    // has finished before the fourth arrives and fells it, so no call it
    // served is running when it falls to notice the time it comes back.
    let sc = scenario(
        r#"
        name = "flap-count"
        duration = "2m"
        measure = { from = "1m", to = "2m" }
        [dependency]
        workers = 10
        service = { median = "1ms", p99 = "2ms" }
        [[dependency.phase]]
        at = "1m"
        flap = { serve = 3, down = "5s" }
        [traffic]
        rate = 10
        timeout = "1s"
        deadline = "1s"
        "#,
    );
    let (report, _) = compare(&[sc], &[rows::none()], 1, |_| {}).unwrap();
    let s = &report.scenarios[0];
    let none = s.policy("none").unwrap();
    // Up again every 5.1 s or so: 3 served a cycle, about 11 cycles in the
    // measured minute (the first 3 before its first fall).
    assert!(
        (30..=40).contains(&none.successes),
        "{} successes",
        none.successes
    );
    assert!(
        none.successes as f64 <= s.bound.fluid + s.bound.allowance,
        "{:?}",
        s.bound
    );
}

#[test]
fn a_scenario_may_replace_any_rows_policy() {
    let mut text = String::from(
        r#"
        name = "override"
        duration = "1m"
        [dependency]
        workers = 100
        service = { median = "100ms", p99 = "101ms" }
        [traffic]
        rate = 200
        timeout = "1s"
        deadline = "1s"
        "#,
    );
    text.push_str("[policies.bulkhead]\npolicy = \"fixed\"\nlimit = 5\n");
    text.push_str(
        "[policies.\"breaker+gradient\"]\npolicy = \"aimd\"\nmax = 7\nmin = 1\ninitial = 7\n",
    );
    let sc = scenario(&text);
    let (report, _) = compare(
        &[sc],
        &[rows::bulkhead(), rows::breaker_gradient()],
        1,
        |_| {},
    )
    .unwrap();
    let s = &report.scenarios[0];
    // A limit of 5 on 100 ms calls passes at most 50 a second.
    assert!(
        s.policy("bulkhead").unwrap().goodput <= 50.5,
        "{}",
        s.table()
    );
    assert!(
        s.policy("breaker+gradient").unwrap().goodput <= 70.5,
        "{}",
        s.table()
    );
}

fn error_of(text: &str) -> rheostat_sim::ScenarioError {
    Scenario::from_toml("bad.toml", text).unwrap_err()
}

const BASE: &str = "name = \"x\"\nduration = \"1m\"\n[dependency]\nworkers = 4\nservice = { median = \"10ms\", p99 = \"20ms\" }\n";
const TRAFFIC: &str = "[traffic]\nrate = 1\ntimeout = \"1s\"\ndeadline = \"1s\"\n";

fn check(text: &str, field: &str, line: usize, says: &str) {
    let e = error_of(text);
    assert_eq!(e.field(), field, "{e}");
    assert_eq!(e.line(), Some(line), "{e}");
    assert!(e.reason().contains(says), "{e}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("bad.toml, line {line}: `{field}`")),
        "{shown}"
    );
}

#[test]
fn a_scenario_file_error_names_the_key_as_a_path_and_the_line() {
    check(
        &format!("{BASE}colour = \"red\"\n{TRAFFIC}"),
        "dependency.colour",
        6,
        "unknown field `colour`",
    );
    check(
        &format!("{BASE}[traffic]\nrate = -5\ntimeout = \"1s\"\ndeadline = \"1s\"\n"),
        "traffic.rate",
        7,
        "-5",
    );
    check(
        &format!("{BASE}[[dependency.phase]]\nworkers = 2\n{TRAFFIC}"),
        "dependency.phase[0].at",
        6,
        "missing field `at`",
    );
    check(
        &format!("{BASE}[[dependency.phase]]\nat = \"30s\"\n[[dependency.phase]]\nat = \"10s\"\n{TRAFFIC}"),
        "dependency.phase[1].at",
        9,
        "phases go in order",
    );
    check(
        &format!("{BASE}[[dependency.phase]]\nat = \"2m\"\n{TRAFFIC}"),
        "dependency.phase[0].at",
        7,
        "after the end of the run",
    );
    check(
        &format!("{}{TRAFFIC}", BASE.replace("\"1m\"", "\"0s\"")),
        "duration",
        2,
        "above 0",
    );
    check(
        &format!("{}{TRAFFIC}", BASE.replace("\"1m\"", "\"soon\"")),
        "duration",
        2,
        "",
    );
    check(
        &format!("{BASE}[traffic]\nrate = 1\ntimeout = \"-1s\"\ndeadline = \"1s\"\n"),
        "traffic.timeout",
        8,
        "",
    );
    check(
        &format!("{BASE}[traffic]\nrate = 1\ntimeout = \"0s\"\ndeadline = \"1s\"\n"),
        "traffic.timeout",
        8,
        "above 0",
    );
    check(
        &format!("{BASE}hang = 1.5\n{TRAFFIC}"),
        "dependency.hang",
        6,
        "[0, 1]",
    );
    check(
        &format!("{BASE}{TRAFFIC}[[traffic.phase]]\nat = \"40s\"\nrate = 5\nuntil = \"20s\"\n"),
        "traffic.phase[0].until",
        13,
        "after the ramp's start",
    );
    check(
        &format!("{BASE}{TRAFFIC}[[traffic.phase]]\nat = \"10s\"\nrate = 5\nuntil = \"30s\"\n[[traffic.phase]]\nat = \"20s\"\nrate = 1\n"),
        "traffic.phase[1].at",
        15,
        "phases go in order",
    );
    check(
        &format!("{BASE}[[dependency.phase]]\nat = \"10s\"\nflap = {{ serve = 3, up = \"5s\", down = \"5s\" }}\n{TRAFFIC}"),
        "dependency.phase[0].flap.up",
        8,
        "not both",
    );
    check(
        &format!("{BASE}{TRAFFIC}retry_budget = \"plenty\"\n"),
        "traffic.retry_budget",
        10,
        "\"none\"",
    );
    check(
        &format!("{BASE}{TRAFFIC}retry_budget = {{ ratio = 0.1, ttl = \"0s\" }}\n"),
        "traffic.retry_budget.ttl",
        10,
        "1 s to 1 h",
    );
    check(
        &format!("{BASE}{TRAFFIC}[policies.aimd]\npolicy = \"aimd\"\nbackoff = 1.5\n"),
        "policies.aimd.backoff",
        12,
        "found 1.5, expected a number in (0, 1)",
    );
    check(
        &format!("{BASE}{TRAFFIC}[policies.breaker]\npolicy = \"breaker\"\nwindow.count = {{ calls = 0 }}\n"),
        "policies.breaker.window.count.calls",
        12,
        "found 0",
    );
    check(
        &format!("{BASE}{TRAFFIC}[policies.aimd]\npolicy = \"aimd\"\nbackof = 0.5\n"),
        "policies.aimd.backof",
        12,
        "unknown field `backof`",
    );
    let e = error_of(&format!(
        "{BASE}{TRAFFIC}[policies.gradiant]\npolicy = \"gradient\"\n"
    ));
    assert!(e.reason().contains("unknown field `gradiant`"), "{e}");
    assert!(e.reason().contains("`breaker+gradient`"), "{e}");
    let e = error_of(&format!(
        "{BASE}{TRAFFIC}[policies.clairvoyant]\npolicy = \"fixed\"\nlimit = 2\n"
    ));
    assert!(e.reason().contains("unknown field `clairvoyant`"), "{e}");
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
            "pileup",
            "retry-storm",
            "plain-retry",
            "cold-start",
            "fleet",
            "low-traffic",
            "transient",
            "client-errors",
            "slow-success",
            "flapping",
            "bulk",
            "mixed-criticality",
            "server",
            "heavy-tail"
        ]
    );
}

/// No policy beats the bound on any shipped scenario, for several seeds.
#[test]
#[ignore = "runs the whole comparison three times; use --release"]
fn no_policy_beats_the_bound_on_any_shipped_scenario() {
    let scenarios = Scenario::builtin().unwrap();
    for seed in 1..=3 {
        let (report, _) = compare(&scenarios, &rows::all(), seed, |_| {}).unwrap();
        for s in &report.scenarios {
            for p in &s.policies {
                assert!(
                    p.successes as f64 <= s.bound_of(p).successes,
                    "seed {seed}, {}: {} has {} successes, the bound {:?}",
                    s.name,
                    p.policy,
                    p.successes,
                    s.bound_of(p)
                );
            }
        }
    }
}

/// The learned timeout of the recommended configuration, at seed 1: on
/// `pileup` it serves within 2% of what no limit serves (it runs one trial
/// of sending less once the hangs show) while holding at most a tenth of
/// the workers no limit holds, where the recommendation with the callers'
/// 15 s timeout (`rec. typed`) serves almost nothing; on `cold-start` it
/// recovers no later than with the callers' timeout; and in no shipped
/// scenario does it serve less than 0.95 of what the callers' timeout
/// serves but `slow-success`, where both serve about 1% of the bound
/// (every answer, at 9.9 s, is slower than the policy's own 5 s limit for
/// a success) and the learned row holds fewer workers.
#[test]
#[ignore = "runs the shipped scenarios; use --release"]
fn the_recommended_timeout_learned_serves_the_pileup_with_a_tenth_of_the_workers() {
    let scenarios = Scenario::builtin().unwrap();
    let rows = [rows::none(), rows::recommended(), rows::recommended_typed()];
    let (report, _) = compare(&scenarios, &rows, 1, |_| {}).unwrap();
    let get = |s: &str| report.scenarios.iter().find(|r| r.name == s).unwrap();
    let pileup = get("pileup");
    let none = pileup.policy("none").unwrap();
    let learned = pileup.policy("recommended").unwrap();
    let typed = pileup.policy("rec. typed").unwrap();
    assert!(learned.goodput >= 0.98 * none.goodput, "{}", pileup.table());
    assert!(
        learned.in_flight_mean <= 0.1 * none.in_flight_mean,
        "{}",
        pileup.table()
    );
    assert!(typed.goodput <= 0.05 * none.goodput, "{}", pileup.table());
    let cold = get("cold-start");
    let after = |p: &str| match cold.policy(p).unwrap().recovery {
        Recovery::After(s) => s,
        other => panic!("{p}: {other:?}\n{}", cold.table()),
    };
    assert!(
        after("recommended") <= after("rec. typed"),
        "{}",
        cold.table()
    );
    for r in &report.scenarios {
        let learned = r.policy("recommended").unwrap();
        let typed = r.policy("rec. typed").unwrap();
        if r.name == "slow-success" {
            // Within 5%, as goodput below: since a cut on latency goes as
            // deep as the window proves, the typed timeout's row holds
            // 183.7 workers of 200 and the learned one's 186.7 (it held
            // as many as or fewer before; docs/results.md, "A cut as deep
            // as the window proves").
            assert!(learned.pool_mean <= 1.05 * typed.pool_mean, "{}", r.table());
            continue;
        }
        assert!(learned.goodput >= 0.95 * typed.goodput, "{}", r.table());
    }
}

/// The headline claims of the comparison, on the shipped scenarios.
#[test]
#[ignore = "runs the whole comparison; use --release"]
fn headline_claims_hold() {
    let scenarios = Scenario::builtin().unwrap();
    let (report, _) = compare(&scenarios, &rows::all(), 1, |_| {}).unwrap();
    // The simulator's speed is a figure of the comparison's report (the
    // README states it from one run), not a timed test.
    let get = |s: &str| report.scenarios.iter().find(|r| r.name == s).unwrap();
    let healthy = |s: &str, k: &Row| get(s).policy(k.name()).unwrap().healthy.served.unwrap();

    let brownout = get("brownout");
    let clairvoyant = brownout.policy("clairvoyant").unwrap();
    // Some adaptive policy keeps goodput near the bound while holding
    // about as few of the caller's workers as the clairvoyant limit does.
    let adaptive_and_lean: Vec<&str> = brownout
        .policies
        .iter()
        .filter(|p| rows::named(&p.policy).unwrap().is_adaptive())
        .filter(|p| p.goodput_vs_bound.unwrap() >= 0.9)
        .filter(|p| p.in_flight_mean <= 2.0 * clairvoyant.in_flight_mean)
        .map(|p| p.policy.as_str())
        .collect();
    assert!(!adaptive_and_lean.is_empty(), "{}", brownout.table());

    // Without a limiter the caller's pool saturates and the healthy
    // endpoint loses requests; a breaker in front of an adaptive limit,
    // and the delay-based limits alone, keep it whole.
    for name in ["brownout", "slow-success"] {
        let s = get(name);
        let none = s.policy("none").unwrap();
        assert_eq!(none.pool_peak, 200, "{}", s.table());
        assert!(none.healthy.served.unwrap() < 0.9, "{}", s.table());
        for k in [rows::breaker_gradient(), rows::gradient(), rows::vegas()] {
            assert!(healthy(name, &k) >= 0.99, "{name} {k}\n{}", s.table());
        }
    }
    assert!(healthy("slow-success", &rows::none()) < 0.5);

    let cold = get("cold-start");
    let classic = cold.policy("breaker-classic").unwrap();
    let recommended = cold.policy("breaker").unwrap();
    let Recovery::After(recovered) = recommended.recovery else {
        panic!("{}", cold.table())
    };
    match classic.recovery {
        Recovery::Never => {}
        Recovery::After(s) => assert!(s >= 10.0 * recovered, "{}", cold.table()),
        Recovery::NoFault => panic!("cold-start has a fault"),
    }
    assert!(classic.open_seconds >= 16.0 * 60.0);

    let fleet = get("fleet");
    let scaled = fleet.policy("breaker").unwrap().probes;
    let unscaled = fleet.policy("breaker-unscaled").unwrap().probes;
    // Each instance keeps one probe per cycle, so that it can recover on its
    // own; the unscaled breaker stakes five per cycle and closes on its
    // fourth success. Over the outage the ratio is 1/5; with the closing
    // cycle it is (c + 1) / (5c + 4) for c failed cycles, a hair above.
    assert!(
        scaled as f64 <= 0.21 * unscaled as f64,
        "{scaled} vs {unscaled}"
    );
    // Shared through the store, the fleet stakes what one breaker would
    // each cycle while the dependency is down, and, the evidence of its
    // recovery shared too, recovers no later than with scaled probes.
    let shared = fleet.policy("breaker-shared").unwrap();
    let allowance = rheostat::limiter::ProbeAllowance::default();
    assert!(
        shared.probes_in_10s_max <= u64::from(allowance.fleet),
        "{}",
        fleet.table()
    );
    assert!(shared.probes_in_10s_max > 0 && shared.probes < scaled);
    let after = |p: &PolicyReport| match p.recovery {
        Recovery::After(s) => s,
        _ => panic!("{}", fleet.table()),
    };
    assert!(
        after(shared) <= after(fleet.policy("breaker").unwrap()),
        "{}",
        fleet.table()
    );

    for p in &get("low-traffic").policies {
        assert_eq!(p.opens, 0, "{}", p.policy);
    }
    for p in &get("client-errors").policies {
        assert_eq!(p.opens, 0, "{}", p.policy);
    }
    let bulk = get("bulk");
    assert_eq!(bulk.policy("breaker").unwrap().dead_lettered, 0);
    assert!(bulk.policy("none").unwrap().dead_lettered > 0);

    let flapping = get("flapping");
    assert_eq!(flapping.policy("breaker").unwrap().closes, 0);
    assert!(flapping.policy("breaker-classic").unwrap().closes > 0);

    let slow = get("slow-success");
    let breaker = slow.policy("breaker").unwrap();
    assert!(breaker.opens > 0);
    assert!(breaker.in_flight_mean * 10.0 < slow.policy("none").unwrap().in_flight_mean);

    // A retry storm: without a limiter every request makes more than three
    // attempts and goodput collapses; a limiter that refuses cuts the load
    // reaching the dependency below one attempt a request.
    let storm = get("retry-storm");
    let none = storm.policy("none").unwrap();
    assert!(none.amplification.unwrap() >= 3.0, "{}", storm.table());
    assert!(none.goodput_vs_bound.unwrap() <= 0.05, "{}", storm.table());
    for k in [rows::bulkhead(), rows::gradient(), rows::vegas()] {
        let p = storm.policy(k.name()).unwrap();
        assert!(p.amplification.unwrap() < 1.0, "{k}\n{}", storm.table());
        assert!(p.goodput_vs_bound.unwrap() >= 0.9, "{k}\n{}", storm.table());
    }

    // A plain retry (3 attempts, no budget) multiplies the load a brownout
    // receives; the limiter's own retry keeps it within 1.1 of the
    // requests offered, there and in every scenario, and its callers make
    // at most 3 attempts, never retry a refusal, and never fill their pool.
    let plain = get("plain-retry");
    let none = plain.policy("none").unwrap();
    assert!(none.amplification.unwrap() >= 2.5, "{}", plain.table());
    for s in &report.scenarios {
        let Some(p) = s.policy("breaker+gradient+retry") else {
            continue;
        };
        if let Some(amp) = p.amplification {
            assert!(amp <= 1.1, "{}\n{}", s.name, s.table());
        }
        if let Some(r) = &p.retry {
            assert!(r.most_attempts <= 3, "{}\n{}", s.name, s.table());
            assert_eq!(r.after_refusal, 0, "{}\n{}", s.name, s.table());
        }
        if let Some(pool) = s.pool {
            assert!(p.pool_peak < pool, "{}\n{}", s.name, s.table());
        }
    }
    // 5% transient failures: the limiter's retry answers at least 99.5% of
    // requests.
    let transient = get("transient");
    let p = transient.policy("breaker+gradient+retry").unwrap();
    assert!(
        p.successes as f64 >= 0.995 * p.offered as f64,
        "{}",
        transient.table()
    );

    // A brownout of mixed criticality (30% critical, 70% sheddable): the
    // rows without priorities lose both classes alike; with priorities at
    // the library's defaults, critical keeps at least 98% of its load
    // (98.9% and 99.1% on seed 1) and sheddable takes the loss, at 0.95
    // of the bound or more.
    let mixed = get("mixed-criticality");
    let mixed_scenario = scenarios.iter().find(|s| s.name == mixed.name).unwrap();
    let served = |p: &rheostat_sim::PolicyReport| {
        let c = p.classes.as_ref().unwrap();
        assert_eq!(
            (c[0].priority.as_str(), c[1].priority.as_str()),
            ("critical", "sheddable")
        );
        (c[0].served.unwrap(), c[1].served.unwrap())
    };
    for p in &mixed.policies {
        let kind = rows::named(&p.policy).unwrap();
        let (critical, sheddable) = served(p);
        if kind.limiter(mixed_scenario).priorities.is_some() {
            assert!(critical >= 0.98, "{kind}\n{}", mixed.table());
            assert!(sheddable <= critical - 0.2, "{kind}\n{}", mixed.table());
            let without = served(mixed.policy(kind.base()).unwrap()).0;
            assert!(critical >= without + 0.15, "{kind}\n{}", mixed.table());
        } else {
            assert!(
                (critical - sheddable).abs() <= 0.02,
                "{kind}\n{}",
                mixed.table()
            );
        }
    }
    for kind in [rows::gradient_priorities(), rows::aimd_priorities()] {
        let p = mixed.policy(kind.name()).unwrap();
        assert!(
            p.goodput_vs_bound.unwrap() >= 0.95,
            "{kind}\n{}",
            mixed.table()
        );
    }

    // A server whose own capacity halves, its callers waiting LIFO in the
    // limiter's queue: the latency policies keep goodput at 0.9 of the
    // bound or more and the median of the requests answered within 2.5
    // times the healthy median (Aimd 2.12 on seed 1: its limit keeps twice
    // what is in use, and a caller using under half of it backs off only
    // for a doubled latency; Vegas 1.63, Gradient 1.37); without a limiter
    // the server serves requests whose clients have given up.
    let server = get("server");
    for k in [
        rows::aimd(),
        rows::vegas(),
        rows::gradient(),
        rows::breaker_gradient(),
    ] {
        let p = server.policy(k.name()).unwrap();
        assert!(
            p.goodput_vs_bound.unwrap() >= 0.9,
            "{k}\n{}",
            server.table()
        );
        let ratio = p.latency_reference.unwrap().p50_ratio.unwrap();
        assert!(ratio <= 2.5, "{k}\n{}", server.table());
    }
    let none = server.policy("none").unwrap();
    assert!(none.goodput_vs_bound.unwrap() <= 0.1, "{}", server.table());
    assert!(none.latency_reference.unwrap().p50_ratio.unwrap() >= 5.0);
}

mod bad_input {
    use proptest::prelude::*;
    use rheostat_sim::{compare, rows, Scenario};

    fn duration() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("0s".to_string()),
            1 => Just("-1s".to_string()),
            1 => Just("1ns".to_string()),
            1 => Just("soon".to_string()),
            1 => Just("400d".to_string()),
            30 => (1u64..40_000).prop_map(|ms| format!("{ms}ms")),
        ]
    }

    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just("nan".to_string()),
            1 => Just("inf".to_string()),
            1 => Just("-inf".to_string()),
            1 => Just("-0.5".to_string()),
            1 => Just("0".to_string()),
            1 => Just("\"x\"".to_string()),
            10 => (0.0f64..1.0).prop_map(|f| format!("{f}")),
            10 => (1u64..300).prop_map(|n| n.to_string()),
        ]
    }

    fn share() -> impl Strategy<Value = String> {
        prop_oneof![4 => (0.0f64..1.0).prop_map(|f| format!("{f}")), 1 => number()]
    }

    fn count() -> impl Strategy<Value = String> {
        prop_oneof![4 => (1u64..300).prop_map(|n| n.to_string()), 1 => number()]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the values, reading a scenario returns a scenario or an
        /// error naming a key, and a scenario that reads runs: never a
        /// panic.
        #[test]
        fn any_values_give_a_scenario_or_an_error_never_a_panic(
            run in duration(), at in duration(), until in duration(), timeout in duration(),
            down in duration(), rate in count(), hang in share(), workers in count(),
            budget in prop_oneof![Just("\"none\"".to_string()), number(),
                Just("{ ratio = 0.5, ttl = \"0s\" }".to_string())],
            serve in count(), pool in count(),
        ) {
            let text = format!(r#"
                name = "p"
                duration = "{run}"
                recovers_at = "{at}"
                [dependency]
                workers = {workers}
                service = {{ median = "5ms", p99 = "{timeout}" }}
                hang = {hang}
                [[dependency.phase]]
                at = "{at}"
                flap = {{ serve = {serve}, down = "{down}" }}
                [traffic]
                rate = {rate}
                timeout = "{timeout}"
                deadline = "{timeout}"
                retry_budget = {budget}
                pool = {pool}
                [[traffic.phase]]
                at = "{at}"
                rate = {rate}
                until = "{until}"
            "#);
            match Scenario::from_toml("p.toml", &text) {
                Err(e) => prop_assert!(!e.to_string().is_empty()),
                Ok(mut sc) => {
                    // Keep the run short enough for a debug build.
                    if sc.duration.as_secs() <= 30 {
                        if let Some(t) = sc.traffic.as_mut() {
                            t.rate.0 = t.rate.0.min(200.0);
                            for p in &mut t.phase { p.rate.0 = p.rate.0.min(200.0); }
                        }
                        let r = compare(&[sc], &[rows::none(), rows::breaker()], 1, |_| {});
                        prop_assert!(r.is_ok());
                    }
                }
            }
        }
    }
}
