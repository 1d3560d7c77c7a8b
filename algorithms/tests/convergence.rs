//! Vegas and Gradient against a modelled dependency, in virtual time.
//!
//! The dependency (see `model/mod.rs`) has 50 workers and a 20 ms ± 10%
//! service time: a true concurrency capacity of 50, 2500 calls a second.
//! Unless a test says otherwise calls arrive at twice that, Poisson.

mod model;

use std::time::Duration;

use model::{Arrivals, Behaviour, Model, Trace};
use rheostat_algorithms::{Gradient, GradientConfig, Vegas, VegasConfig};

/// The settled limit must lie in this range (Gradient grows a call per
/// round trip and cuts when a window queues: a sawtooth over capacity)...
const SETTLED: (f64, f64) = (35.0, 80.0);
/// ...from no later than this second...
const SETTLE_BY: f64 = 60.0;
/// ...to the end of a run this long (twice as long, to show it stays).
const RUN: f64 = 120.0;
/// The p99 of admitted calls after settling: 3 × the service time.
const P99_CEILING: f64 = 0.060;

fn check_settles(name: &str, trace: &Trace) {
    let settled = trace
        .settled_from(SETTLED.0, SETTLED.1)
        .unwrap_or_else(|| panic!("{name}: ends outside {SETTLED:?}"));
    let p99 = trace.latency_quantile(settled, RUN, 0.99);
    let p50 = trace.latency_quantile(settled, RUN, 0.50);
    let goodput = trace.goodput(settled, RUN);
    println!(
        "{name}: settled in {SETTLED:?} from {settled:.1} s; mean limit {:.1}, limit at {RUN} s {:.1}; \
         p50 {:.1} ms, p99 {:.1} ms; goodput {goodput:.0}/s of 2500/s",
        trace.mean_limit(settled, RUN),
        trace.limit_at(RUN),
        p50 * 1e3,
        p99 * 1e3,
    );
    assert!(settled <= SETTLE_BY, "{name}: settled only at {settled} s");
    assert!(p99 < P99_CEILING, "{name}: p99 {p99} s");
}

#[test]
fn vegas_settles_near_the_true_capacity_with_a_low_p99() {
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let trace = model::run(
        &mut vegas,
        &Model::twice_capacity(),
        RUN,
        Vegas::raw_limit,
        |_, _| {},
    );
    check_settles("vegas", &trace);
}

#[test]
fn gradient_settles_near_the_true_capacity_with_a_low_p99() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let trace = model::run(
        &mut gradient,
        &Model::twice_capacity(),
        RUN,
        Gradient::raw_limit,
        |_, _| {},
    );
    check_settles("gradient", &trace);
}

/// One call a second; at second 60 the dependency degrades.
fn one_call_a_second(degraded: Behaviour) -> Model {
    Model {
        arrivals: Arrivals::Every(1.0),
        behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 20.0 }), (60.0, degraded)],
        ..Model::twice_capacity()
    }
}

fn check_falls(name: &str, trace: &Trace) {
    let before = trace.limit_at(60.0);
    let after = trace.limit_at(120.0);
    println!("{name}: limit {before:.1} before, {after:.1} a minute after");
    assert!(
        after <= before * 0.5,
        "{name}: {before} before, {after} after"
    );
}

#[test]
fn at_one_call_a_second_vegas_still_backs_off_when_latency_rises_tenfold() {
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let model = one_call_a_second(Behaviour::Serve { mean_ms: 200.0 });
    let trace = model::run(&mut vegas, &model, 120.0, Vegas::raw_limit, |_, _| {});
    check_falls("vegas, latency ×10", &trace);
}

#[test]
fn at_one_call_a_second_vegas_still_backs_off_when_calls_fail() {
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let model = one_call_a_second(Behaviour::Fail { after_ms: 500.0 });
    let trace = model::run(&mut vegas, &model, 120.0, Vegas::raw_limit, |_, _| {});
    check_falls("vegas, failing", &trace);
}

#[test]
fn at_one_call_a_second_gradient_still_backs_off_when_latency_rises_tenfold() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let model = one_call_a_second(Behaviour::Serve { mean_ms: 200.0 });
    let trace = model::run(&mut gradient, &model, 120.0, Gradient::raw_limit, |_, _| {});
    check_falls("gradient, latency ×10", &trace);
}

#[test]
fn at_one_call_a_second_gradient_still_backs_off_when_calls_fail() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let model = one_call_a_second(Behaviour::Fail { after_ms: 500.0 });
    let trace = model::run(&mut gradient, &model, 120.0, Gradient::raw_limit, |_, _| {});
    check_falls("gradient, failing", &trace);
}

#[test]
fn gradient_backs_off_from_a_dependency_that_times_out_at_a_steady_latency() {
    // Every call fails after exactly 1 s: the latency is flat, so a policy
    // that reads only latency sees no gradient and climbs to max.
    let mut gradient = Gradient::new(GradientConfig {
        initial: 50,
        ..GradientConfig::default()
    })
    .expect("valid");
    let model = Model {
        behaviour: vec![(0.0, Behaviour::Fail { after_ms: 1000.0 })],
        ..Model::twice_capacity()
    };
    let trace = model::run(&mut gradient, &model, 60.0, Gradient::raw_limit, |_, _| {});
    // One cut per flight of calls: about one every 1.25 s here.
    assert!(trace.limit_at(30.0) < 25.0, "{}", trace.limit_at(30.0));
    assert!(trace.limit_at(60.0) < 5.0, "{}", trace.limit_at(60.0));
}

#[test]
fn vegas_follows_a_permanent_doubling_of_the_no_load_latency() {
    const CHANGE: f64 = 60.0;
    let config = VegasConfig::default();
    // The longest gap between re-probes, in seconds: windows close after
    // their minimum duration at this load.
    let probe_period = f64::from(config.probe_interval) * config.window.min_duration.as_secs_f64();
    let mut vegas = Vegas::new(config).expect("valid");
    let model = Model {
        behaviour: vec![
            (0.0, Behaviour::Serve { mean_ms: 20.0 }),
            (CHANGE, Behaviour::Serve { mean_ms: 40.0 }),
        ],
        ..Model::twice_capacity()
    };
    let deadline = CHANGE + 5.0 * probe_period;
    let mut before = None;
    let mut followed = None;
    let trace = model::run(
        &mut vegas,
        &model,
        deadline + 30.0,
        Vegas::raw_limit,
        |t, v: &Vegas| {
            let baseline = v.baseline().unwrap_or_default();
            if t < CHANGE {
                before = Some(baseline);
            } else if followed.is_none() && baseline >= Duration::from_millis(36) {
                followed = Some(t);
            }
        },
    );
    let before = before.expect("ran");
    let followed = followed.expect("the baseline never followed");
    let earlier = trace.mean_limit(CHANGE - 30.0, CHANGE);
    let later = trace.mean_limit(deadline, deadline + 30.0);
    println!(
        "vegas: baseline {before:?} before; ≥ 36 ms {:.1} s after the change \
         (re-probe period ≤ {probe_period} s); limit {earlier:.1} before, {later:.1} after",
        followed - CHANGE
    );
    assert!(
        before >= Duration::from_millis(18) && before <= Duration::from_millis(22),
        "{before:?}"
    );
    assert!(followed <= deadline, "followed at {followed} s");
    assert!(
        (later - earlier).abs() <= 0.3 * earlier,
        "limit {earlier} before, {later} after"
    );
}

/// The p99 of a log-normal service time is this many times its median.
const P99_OVER_MEDIAN: f64 = 2.5;

/// 50 workers whose service time is log-normal, median 400 ms, p99 1 s
/// (mean 436 ms): a true concurrency capacity of 50, about 115 calls a
/// second, offered twice that, Poisson. A 250 ms window holds about 29 calls,
/// whose average is uncertain by ±8%: the noise a delay-based policy must not
/// take for queueing.
fn log_normal_twice_capacity() -> Model {
    Model {
        log_normal: Some(P99_OVER_MEDIAN),
        arrivals: Arrivals::Poisson(230.0),
        behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 400.0 })],
        ..Model::twice_capacity()
    }
}

/// The capacity of [`log_normal_twice_capacity`] in calls a second.
fn log_normal_capacity() -> f64 {
    let sigma = P99_OVER_MEDIAN.ln() / 2.326;
    50.0 / (0.400 * (sigma * sigma / 2.0).exp())
}

/// A log-normal run lasts ten minutes; the limit must settle in
/// `[0.7, 2] ×` the true concurrency of 50 within the first...
const LOG_NORMAL_SETTLED: (f64, f64) = (35.0, 100.0);
const LOG_NORMAL_SETTLE_BY: f64 = 60.0;
const LOG_NORMAL_RUN: f64 = 600.0;

fn check_log_normal(name: &str, trace: &Trace) {
    let (lo, hi) = LOG_NORMAL_SETTLED;
    let settled = trace
        .settled_from(lo, hi)
        .unwrap_or_else(|| panic!("{name}: ends outside [{lo}, {hi}]"));
    let from = settled.max(LOG_NORMAL_SETTLE_BY);
    let goodput = trace.goodput(from, LOG_NORMAL_RUN);
    let capacity = log_normal_capacity();
    let p99 = trace.latency_quantile(from, LOG_NORMAL_RUN, 0.99);
    println!(
        "{name}, log-normal: settled in [{lo}, {hi}] from {settled:.1} s; mean limit {:.1}; \
         goodput {goodput:.1}/s of {capacity:.1}/s; p50 {:.0} ms, p99 {:.0} ms",
        trace.mean_limit(from, LOG_NORMAL_RUN),
        trace.latency_quantile(from, LOG_NORMAL_RUN, 0.5) * 1e3,
        p99 * 1e3,
    );
    assert!(
        settled <= LOG_NORMAL_SETTLE_BY,
        "{name}: settled only at {settled} s"
    );
    assert!(goodput >= 0.9 * capacity, "{name}: goodput {goodput}/s");
    // The service time's own p99 is 1 s: queueing may add to it, within
    // reason.
    assert!(p99 < 1.6, "{name}: p99 {p99} s");
}

#[test]
fn vegas_settles_near_a_log_normal_capacity_without_collapsing() {
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let model = log_normal_twice_capacity();
    let trace = model::run(
        &mut vegas,
        &model,
        LOG_NORMAL_RUN,
        Vegas::raw_limit,
        |_, _| {},
    );
    check_log_normal("vegas", &trace);
}

#[test]
fn gradient_settles_near_a_log_normal_capacity_without_collapsing() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let model = log_normal_twice_capacity();
    let trace = model::run(
        &mut gradient,
        &model,
        LOG_NORMAL_RUN,
        Gradient::raw_limit,
        |_, _| {},
    );
    check_log_normal("gradient", &trace);
}

/// A healthy log-normal dependency with workers to spare (200), 100 calls a
/// second needing about 44 in flight, and 1% of calls failing as overloads
/// at random: one drop a second.
fn healthy_log_normal() -> Model {
    Model {
        workers: 200,
        log_normal: Some(P99_OVER_MEDIAN),
        errors: 0.01,
        arrivals: Arrivals::Poisson(100.0),
        behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 400.0 })],
        ..Model::twice_capacity()
    }
}

fn check_healthy(name: &str, trace: &Trace) {
    // After a minute to climb from the initial limit of 20, almost nothing
    // is refused: noise and a trickle of errors are not congestion.
    let refused = trace.rejection_rate(60.0, LOG_NORMAL_RUN) / 100.0;
    println!(
        "{name}, healthy log-normal: {:.2}% refused after the first minute; mean limit {:.1}",
        refused * 100.0,
        trace.mean_limit(60.0, LOG_NORMAL_RUN)
    );
    assert!(refused < 0.01, "{name}: {:.1}% refused", refused * 100.0);
}

#[test]
fn vegas_does_not_hold_back_a_caller_of_a_healthy_log_normal_dependency() {
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let trace = model::run(
        &mut vegas,
        &healthy_log_normal(),
        LOG_NORMAL_RUN,
        Vegas::raw_limit,
        |_, _| {},
    );
    check_healthy("vegas", &trace);
}

#[test]
fn gradient_does_not_hold_back_a_caller_of_a_healthy_log_normal_dependency() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let trace = model::run(
        &mut gradient,
        &healthy_log_normal(),
        LOG_NORMAL_RUN,
        Gradient::raw_limit,
        |_, _| {},
    );
    check_healthy("gradient", &trace);
}

/// A dependency with room for everything (no queueing at any concurrency
/// the test reaches) and a 100 ms round trip; calls arrive at 2000 a second,
/// so the caller needs 200 in flight, ten times the initial limit.
fn never_queues(behaviour: Vec<(f64, Behaviour)>) -> Model {
    Model {
        workers: 100_000,
        arrivals: Arrivals::Poisson(2000.0),
        behaviour,
        ..Model::twice_capacity()
    }
}

#[test]
fn gradient_grows_at_least_a_call_per_round_trip_while_nothing_queues() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let model = never_queues(vec![(0.0, Behaviour::Serve { mean_ms: 100.0 })]);
    let trace = model::run(&mut gradient, &model, 30.0, Gradient::raw_limit, |_, _| {});
    let reached = trace
        .limits
        .iter()
        .find(|&&(_, learnt, _)| learnt >= 200.0)
        .map(|&(t, _, _)| t);
    println!("gradient: limit 200 reached at {reached:?} s");
    // A call per round trip from the first window on would take 18 s; the
    // first window only sets the long average, and a window slower than
    // the long average beyond the noise holds: at least 0.8 a round trip.
    assert!(reached.is_some_and(|t| t <= 22.5), "{reached:?}");
}

/// The dependency answers five times slower from second 30 on, with no loss
/// of capacity: the same goodput now needs five times the calls in flight.
#[test]
fn gradient_takes_a_dependency_that_slows_down_for_good_as_the_new_normal() {
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let model = never_queues(vec![
        (0.0, Behaviour::Serve { mean_ms: 20.0 }),
        (30.0, Behaviour::Serve { mean_ms: 100.0 }),
    ]);
    let trace = model::run(&mut gradient, &model, 150.0, Gradient::raw_limit, |_, _| {});
    let after = trace.goodput(90.0, 150.0);
    println!(
        "gradient, 5× slower for good: limit {:.0} before, {:.0} at 90 s; goodput {after:.0}/s of 2000/s from 90 s",
        trace.limit_at(30.0),
        trace.limit_at(90.0)
    );
    assert!(after >= 0.9 * 2000.0, "{after}");
}

/// The dependency is down for 30 s, refusing every call at once, then
/// answers as before: failures that fast are not queueing, and the limit is
/// where it was when the dependency comes back.
fn refusing_then_back() -> Model {
    Model {
        arrivals: Arrivals::Poisson(2000.0),
        behaviour: vec![
            (0.0, Behaviour::Serve { mean_ms: 20.0 }),
            (30.0, Behaviour::Fail { after_ms: 0.2 }),
            (60.0, Behaviour::Serve { mean_ms: 20.0 }),
        ],
        ..Model::twice_capacity()
    }
}

/// As above, but every call times out after 1 s while it is down: the
/// limit falls, and regrows by doubling once calls succeed again.
fn timing_out_then_back() -> Model {
    Model {
        behaviour: vec![
            (0.0, Behaviour::Serve { mean_ms: 20.0 }),
            (30.0, Behaviour::Fail { after_ms: 1000.0 }),
            (60.0, Behaviour::Serve { mean_ms: 20.0 }),
        ],
        ..refusing_then_back()
    }
}

fn check_outage(name: &str, trace: &Trace, fast: bool) {
    let before = trace.limit_at(30.0);
    let low = trace
        .limits
        .iter()
        .filter(|&&(t, _, _)| (30.0..61.0).contains(&t))
        .map(|&(_, learnt, _)| learnt)
        .fold(f64::INFINITY, f64::min);
    let back = trace.goodput(63.0, 70.0);
    println!(
        "{name}: limit {before:.1} before the outage, lowest {low:.1}; goodput {back:.0}/s of 2000/s from 3 s after it"
    );
    if fast {
        // The windows that straddle the outage's start mix successes and
        // failures, and cut as congestion does: once or twice.
        assert!(low >= 0.75 * before, "{name}: {low} from {before}");
    }
    assert!(back >= 0.95 * 2000.0, "{name}: {back}");
}

#[test]
fn an_outage_of_fast_failures_leaves_the_limits_where_they_were() {
    let model = refusing_then_back();
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let trace = model::run(&mut gradient, &model, 75.0, Gradient::raw_limit, |_, _| {});
    check_outage("gradient, refused", &trace, true);
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let trace = model::run(&mut vegas, &model, 75.0, Vegas::raw_limit, |_, _| {});
    check_outage("vegas, refused", &trace, true);
}

#[test]
fn after_an_outage_of_timeouts_the_limits_regrow_by_doubling() {
    let model = timing_out_then_back();
    let mut gradient = Gradient::new(GradientConfig::default()).expect("valid");
    let trace = model::run(&mut gradient, &model, 75.0, Gradient::raw_limit, |_, _| {});
    check_outage("gradient, timing out", &trace, false);
    let mut vegas = Vegas::new(VegasConfig::default()).expect("valid");
    let trace = model::run(&mut vegas, &model, 75.0, Vegas::raw_limit, |_, _| {});
    check_outage("vegas, timing out", &trace, false);
}
