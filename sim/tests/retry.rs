//! The `breaker+gradient+retry` row: callers that retry as the limiter's
//! own retry policy decides (`rheostat::retry`), whatever the scenario's
//! `attempts`, `backoff`, `retry_budget` and `retry_rejected` say.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat_sim::{compare, rows, PolicyReport, RetryBudget, Row, Scenario, ScenarioReport};

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml("test", text).unwrap()
}

fn run(sc: Scenario, kinds: &[Row]) -> ScenarioReport {
    let (mut report, _) = compare(&[sc], kinds, 1, |_| {}).unwrap();
    report.scenarios.remove(0)
}

fn row<'a>(s: &'a ScenarioReport, kind: &Row) -> &'a PolicyReport {
    s.policy(kind.name()).unwrap()
}

/// A brownout whose own callers would retry everything, refusals included,
/// five times and without a budget.
const STORM: &str = r#"
    name = "storm"
    duration = "90s"
    [dependency]
    workers = 50
    service = { median = "100ms", p99 = "300ms" }
    queue = 20
    [[dependency.phase]]
    at = "20s"
    workers = 10
    [[dependency.phase]]
    at = "60s"
    workers = 50
    [traffic]
    rate = 200
    timeout = "500ms"
    deadline = "3s"
    attempts = 5
    backoff = "50ms"
    retry_budget = "none"
    retry_rejected = true
"#;

#[test]
fn at_most_three_attempts_a_request_and_no_refusal_retried() {
    let s = run(
        scenario(STORM),
        &[rows::none(), rows::breaker_gradient_retry()],
    );
    let p = row(&s, &rows::breaker_gradient_retry());
    let r = p.retry.as_ref().unwrap();
    // The run exercised both: refusals, and failures that were retried.
    assert!(p.rejected > 100, "{}", s.table());
    assert!(r.sent > 0, "{}", s.table());
    assert!(r.rejected >= p.rejected - 5, "{}", s.table());
    // The limiter's default of 3 attempts, not the scenario's 5.
    assert!(r.most_attempts <= 3, "{}", s.table());
    assert!(r.attempts.len() <= 3, "{:?}", r.attempts);
    assert!(p.tried <= 3 * p.offered, "{}", s.table());
    // A refused attempt ends its request.
    assert_eq!(r.after_refusal, 0, "{}", s.table());
    // The scenario's own callers, without a limiter, do make 5.
    let none = row(&s, &rows::none());
    assert!(none.retry.is_none());
    assert!(
        none.amplification.unwrap() > 1.5 * p.amplification.unwrap(),
        "{}",
        s.table()
    );
}

#[test]
fn the_scenarios_own_retry_settings_do_not_reach_the_row() {
    // Callers of the scenario make one attempt; 10% of answers are 5xx.
    let text = r#"
        name = "one-attempt"
        duration = "2m"
        [dependency]
        workers = 100
        service = { median = "50ms", p99 = "150ms" }
        overload_errors = 0.1
        [traffic]
        rate = 100
        timeout = "1s"
        deadline = "3s"
    "#;
    let s = run(
        scenario(text),
        &[rows::breaker_gradient(), rows::breaker_gradient_retry()],
    );
    let once = row(&s, &rows::breaker_gradient());
    let retried = row(&s, &rows::breaker_gradient_retry());
    assert!(
        (once.successes as f64) < 0.92 * once.offered as f64,
        "{}",
        s.table()
    );
    assert!(
        retried.successes as f64 >= 0.99 * retried.offered as f64,
        "{}",
        s.table()
    );
    // Its callers make up to 3 attempts where the scenario's make 1: it is
    // measured against a bound of its own, which it does not beat.
    let own = retried.own_bound.as_ref().unwrap();
    assert!(own.successes > s.bound.successes);
    assert!(retried.successes as f64 <= own.successes, "{}", s.table());
    assert!(std::ptr::eq(s.bound_of(once), &s.bound));
}

#[test]
fn many_failures_do_not_multiply_the_load() {
    // 30% of answers fail: the scenario's own callers, 3 attempts and no
    // budget, send about 1 + 0.3 + 0.09 attempts a request. The row's
    // budget grants at most 20% of requests plus 10 a second, and its
    // limiter refuses more, unretried.
    let text = r#"
        name = "failing"
        duration = "2m"
        [dependency]
        workers = 200
        service = { median = "20ms", p99 = "60ms" }
        overload_errors = 0.3
        [traffic]
        rate = 200
        timeout = "1s"
        deadline = "5s"
        attempts = 3
        retry_budget = "none"
    "#;
    let s = run(
        scenario(text),
        &[rows::none(), rows::breaker_gradient_retry()],
    );
    let p = row(&s, &rows::breaker_gradient_retry());
    let r = p.retry.as_ref().unwrap();
    assert!(r.sent > 0, "{}", s.table());
    // 1 + 0.2 + 10/200, and a little for the first ten seconds' reserve.
    let amp = p.amplification.unwrap();
    assert!(amp <= 1.27, "{amp}\n{}", s.table());
    assert!(r.sent as f64 <= 0.2 * p.offered as f64 + 10.0 * 130.0);
    let none = row(&s, &rows::none()).amplification.unwrap();
    assert!(none >= 1.35, "{none}\n{}", s.table());
}

#[test]
fn where_nothing_fails_it_is_the_breaker_gradient_row() {
    let text = r#"
        name = "quiet"
        duration = "2m"
        [dependency]
        workers = 100
        service = { median = "50ms", p99 = "120ms" }
        [traffic]
        rate = 80
        timeout = "1s"
        deadline = "2s"
        attempts = 3
    "#;
    let s = run(
        scenario(text),
        &[rows::breaker_gradient(), rows::breaker_gradient_retry()],
    );
    let plain = row(&s, &rows::breaker_gradient());
    let retry = row(&s, &rows::breaker_gradient_retry());
    // The same arrivals, the same limiter, nothing to retry: the same run.
    assert_eq!(plain.successes, retry.successes);
    assert_eq!(plain.sent, retry.sent);
    assert_eq!(plain.rejected, retry.rejected);
    assert_eq!(plain.pool_peak, retry.pool_peak);
    assert_eq!(plain.goodput_vs_bound, retry.goodput_vs_bound);
    // The scenario's callers make 3 attempts too: one bound for both.
    assert!(retry.own_bound.is_none());
    let r = retry.retry.as_ref().unwrap();
    assert_eq!(r.sent + r.budget_exhausted + r.deadline + r.rejected, 0);
    assert_eq!(r.attempts, vec![retry.successes]);
    assert!(plain.retry.is_none());
    // The row's longer name does not shift the table's columns.
    let table = s.table();
    let widths: Vec<usize> = table
        .lines()
        .skip_while(|l| !l.starts_with("policy"))
        .take(3)
        .map(|l| l.chars().count())
        .collect();
    assert_eq!(widths, vec![widths[0]; 3], "{table}");
}

#[test]
fn the_transient_scenario_retries_three_times_within_a_budget() {
    let transient = Scenario::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "transient")
        .unwrap();
    assert_eq!(transient.dependency.overload_errors.0, 0.05);
    assert!(transient.dependency.phase.is_empty());
    let traffic = transient.traffic.as_ref().unwrap();
    assert_eq!(traffic.attempts.0, 3);
    assert_eq!(traffic.retry_budget, RetryBudget::default());
    assert!(traffic.timeout < traffic.deadline);
}

/// The shipped transient scenario: 5% random failures, and the limiter's
/// retry answers at least 99.5% of requests without filling the pool.
#[test]
fn with_five_percent_transient_failures_nearly_every_request_succeeds() {
    let transient = Scenario::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "transient")
        .unwrap();
    let s = run(transient, &[rows::breaker_gradient_retry()]);
    let p = row(&s, &rows::breaker_gradient_retry());
    assert!(
        p.successes as f64 >= 0.995 * p.offered as f64,
        "{}",
        s.table()
    );
    assert!(p.amplification.unwrap() <= 1.1, "{}", s.table());
    assert!(p.pool_peak < s.pool.unwrap(), "{}", s.table());
}
