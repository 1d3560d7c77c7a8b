//! `Aimd` in both of its modes.
//!
//! - The Netflix mode against the expectations of Netflix
//!   concurrency-limits' own `AIMDLimitTest`
//!   (`concurrency-limits-core/src/test/java/com/netflix/concurrency/limits/limit/AIMDLimitTest.java`,
//!   github.com/Netflix/concurrency-limits; the JUnit 5 version, whose
//!   `increaseOnSuccess` starts at 20 and `decreaseOnDrops` at 30), ported
//!   call for call.
//! - The latency mode (the default) against the modelled dependency of
//!   `convergence.rs` (`model/mod.rs`: 50 workers, 20 ms ± 10%, a true
//!   concurrency capacity of 50, offered twice what it can serve), in
//!   virtual time.

mod model;

use std::time::{Duration, Instant};

use model::{Arrivals, Behaviour, Model, Trace};
use rheostat_algorithms::{Aimd, AimdConfig, AimdMode, Algorithm, Outcome, Sample};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Netflix's `AIMDLimit.newBuilder().initialLimit(initial).build()`: its
/// defaults (min 20, max 200, backoff 0.9, timeout 5 s) but for the initial
/// limit. Netflix does not check the initial limit against the minimum;
/// here it must lie in `[min, max]`, so an initial limit under 20 lowers
/// the minimum to it.
fn netflix(initial: u32) -> Aimd {
    let config = AimdConfig::netflix();
    Aimd::new(AimdConfig {
        initial,
        min: config.min.min(initial),
        ..config
    })
    .expect("valid")
}

/// `limiter.onSample(startTime, rtt, inflight, didDrop)`.
fn on_sample(aimd: &mut Aimd, rtt: Duration, inflight: u32, did_drop: bool) {
    let outcome = if did_drop {
        Outcome::Overload
    } else {
        Outcome::Success
    };
    aimd.on_sample(Instant::now(), &Sample::new(outcome, rtt, inflight));
}

// AIMDLimitTest.testDefault
#[test]
fn netflix_default() {
    let limiter = netflix(10);
    assert_eq!(limiter.publish().gate.limit, 10);
}

// AIMDLimitTest.increaseOnSuccess
#[test]
fn netflix_increase_on_success() {
    let mut limiter = netflix(20);
    on_sample(&mut limiter, ms(1), 10, false);
    assert_eq!(limiter.publish().gate.limit, 21);
}

// AIMDLimitTest.decreaseOnDrops
#[test]
fn netflix_decrease_on_drops() {
    let mut limiter = netflix(30);
    on_sample(&mut limiter, Duration::ZERO, 0, true);
    assert_eq!(limiter.publish().gate.limit, 27);
}

/// The rest of `AIMDLimit._update`, beyond what its test checks: a success
/// slower than the timeout is a drop, a success with under half the limit
/// in flight changes nothing, and the limit stays within `[min, max]`.
#[test]
fn netflix_rules_beyond_its_test() {
    let mut limiter = netflix(20);
    on_sample(&mut limiter, Duration::from_secs(5) + ms(1), 20, false);
    // Floored at min = 20.
    assert_eq!(limiter.publish().gate.limit, 20);
    on_sample(&mut limiter, ms(1), 9, false);
    assert_eq!(limiter.raw_limit(), 20.0, "under half the limit in use");
    let mut limiter = netflix(100);
    on_sample(&mut limiter, Duration::from_secs(5) + ms(1), 100, false);
    assert_eq!(limiter.publish().gate.limit, 90);
    // Exactly at the timeout is not slow.
    on_sample(&mut limiter, Duration::from_secs(5), 45, false);
    assert_eq!(limiter.publish().gate.limit, 91);
    let mut limiter = netflix(200);
    on_sample(&mut limiter, ms(1), 200, false);
    assert_eq!(limiter.publish().gate.limit, 200, "capped at max");
    assert_eq!(limiter.config().mode, AimdMode::Netflix);
    assert!(limiter.publish().hints.deferral.is_some());
    assert_eq!(limiter.publish().wake_at, None);
}

// ---------------------------------------------------------------------
// The latency mode against a modelled dependency.

/// The true concurrency capacity of [`Model::twice_capacity`].
const CAPACITY: f64 = 50.0;

fn latency_mode() -> Aimd {
    Aimd::new(AimdConfig::default()).expect("valid")
}

/// How many times the learnt limit fell between two records of `trace` in
/// `[from, to)`.
fn cuts(trace: &Trace, from: f64, to: f64) -> usize {
    trace
        .limits
        .windows(2)
        .filter(|w| w[0].0 >= from && w[1].0 < to && w[1].1 < w[0].1)
        .count()
}

fn max_limit(trace: &Trace, from: f64, to: f64) -> f64 {
    trace
        .limits
        .iter()
        .filter(|(t, _, _)| *t >= from && *t < to)
        .map(|l| l.1)
        .fold(0.0, f64::max)
}

#[test]
fn the_latency_mode_settles_near_the_capacity_without_running_to_max() {
    const RUN: f64 = 120.0;
    let mut aimd = latency_mode();
    let trace = model::run(
        &mut aimd,
        &Model::twice_capacity(),
        RUN,
        Aimd::raw_limit,
        |_, _| {},
    );
    let settled = trace.settled_from(35.0, 75.0).expect("ends in [35, 75]");
    let p99 = trace.latency_quantile(settled, RUN, 0.99);
    let highest = max_limit(&trace, settled, RUN);
    // The model never drops a call: every cut is a rise in latency.
    let cuts = cuts(&trace, 0.0, RUN);
    println!(
        "aimd (latency): settled in [35, 75] from {settled:.1} s; mean limit {:.1}, highest {highest:.1}; \
         p99 {:.1} ms; goodput {:.0}/s of 2500/s; {cuts} cuts, none from a drop",
        trace.mean_limit(settled, RUN),
        p99 * 1e3,
        trace.goodput(settled, RUN),
    );
    assert!(settled <= 30.0, "settled only at {settled} s");
    assert!(highest <= 1.5 * CAPACITY, "rose to {highest}");
    assert!(p99 < 0.060, "p99 {p99} s");
    assert!(cuts >= 5, "{cuts} cuts");

    // Netflix's rule set in the same place grows on every success while
    // half its limit is in use, sees no latency under 5 s, and runs to max.
    let mut netflix = Aimd::new(AimdConfig {
        min: 1,
        ..AimdConfig::netflix()
    })
    .expect("valid");
    let trace = model::run(
        &mut netflix,
        &Model::twice_capacity(),
        30.0,
        Aimd::raw_limit,
        |_, _| {},
    );
    println!(
        "aimd (netflix): limit {:.1} at 30 s; p99 {:.1} ms",
        trace.limit_at(30.0),
        trace.latency_quantile(10.0, 30.0, 0.99) * 1e3
    );
    assert_eq!(trace.limit_at(30.0), 200.0);
}

#[test]
fn the_latency_mode_backs_off_when_latency_rises_without_drops() {
    // At second 60 the dependency's calls take twice as long: at the same
    // limit, twice the latency, and no drop.
    const CHANGE: f64 = 60.0;
    let mut aimd = latency_mode();
    let model = Model {
        behaviour: vec![
            (0.0, Behaviour::Serve { mean_ms: 20.0 }),
            (CHANGE, Behaviour::Serve { mean_ms: 40.0 }),
        ],
        ..Model::twice_capacity()
    };
    let trace = model::run(&mut aimd, &model, 150.0, Aimd::raw_limit, |_, _| {});
    let before = trace.mean_limit(CHANGE - 20.0, CHANGE);
    let low = trace
        .limits
        .iter()
        .filter(|(t, _, _)| *t >= CHANGE && *t < CHANGE + 10.0)
        .map(|l| l.1)
        .fold(f64::INFINITY, f64::min);
    let after = trace.mean_limit(CHANGE + 60.0, 150.0);
    println!(
        "aimd (latency), service ×2: limit {before:.1} before, down to {low:.1}, {after:.1} a minute on; baseline {:?}",
        aimd.baseline()
    );
    assert!(low <= 0.9 * before, "{before} before, {low} after");
    // The dependency still has 50 workers: once the rise is known not to
    // be the caller's queue, the limit returns.
    let settled = trace.settled_from(35.0, 75.0).expect("ends in [35, 75]");
    assert!(
        settled <= CHANGE + 60.0,
        "settled again only at {settled} s"
    );
    assert!(after >= 0.7 * CAPACITY, "{after}");
}

#[test]
fn the_latency_mode_regrows_within_seconds_after_an_outage_of_instant_failures() {
    const DOWN: f64 = 30.0;
    const UP: f64 = 40.0;
    let mut aimd = latency_mode();
    let model = Model {
        behaviour: vec![
            (0.0, Behaviour::Serve { mean_ms: 20.0 }),
            // Refused in 10 µs.
            (DOWN, Behaviour::Fail { after_ms: 0.01 }),
            (UP, Behaviour::Serve { mean_ms: 20.0 }),
        ],
        ..Model::twice_capacity()
    };
    let mut regrowing = false;
    let trace = model::run(&mut aimd, &model, 90.0, Aimd::raw_limit, |_, a: &Aimd| {
        regrowing |= a.is_regrowing();
    });
    let before = trace.mean_limit(DOWN - 10.0, DOWN);
    let during = trace.limit_at(UP);
    let back = trace
        .limits
        .iter()
        .find(|(t, l, _)| *t >= UP && *l >= 0.7 * CAPACITY)
        .map(|l| l.0 - UP);
    let after = trace.mean_limit(UP + 10.0, 90.0);
    println!(
        "aimd (latency), outage: limit {before:.1} before, {during:.1} at its end, \
         back to 35 after {back:?} s, {after:.1} from 10 s on; p99 then {:.1} ms",
        trace.latency_quantile(UP + 10.0, 90.0, 0.99) * 1e3
    );
    assert!(regrowing);
    // Cut once a round trip until a window has held nothing but fast
    // failures, held from then on.
    assert!(during > 1.0, "{during}");
    let back = back.expect("never regrew");
    assert!(back <= 5.0, "regrew only after {back} s");
    // Doubling finds the first sign of queueing one doubling past the
    // limit it regrew from at most, and steps back; the outage did not
    // raise that limit.
    assert!(during <= 1.1 * before, "{during} {before}");
    let max = max_limit(&trace, UP, 90.0);
    assert!(max <= 2.0 * during * 1.001, "{max} {during}");
    assert!((35.0..=75.0).contains(&after), "{after}");
}

/// 50 workers whose service time is log-normal, median 400 ms, p99 1 s
/// (mean 436 ms): a true concurrency capacity of 50, about 115 calls a
/// second, offered twice that. A 250 ms window holds about 29 calls, whose
/// average is uncertain by ±8%: noise the latency mode must not take for
/// queueing, nor let hide a queue.
#[test]
fn the_latency_mode_settles_near_a_log_normal_capacity() {
    const RUN: f64 = 600.0;
    let model = Model {
        log_normal: Some(2.5),
        arrivals: Arrivals::Poisson(230.0),
        behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 400.0 })],
        ..Model::twice_capacity()
    };
    let sigma = 2.5_f64.ln() / 2.326;
    let capacity = 50.0 / (0.400 * (sigma * sigma / 2.0).exp());
    let mut aimd = latency_mode();
    let trace = model::run(&mut aimd, &model, RUN, Aimd::raw_limit, |_, _| {});
    let settled = trace.settled_from(35.0, 100.0).expect("ends in [35, 100]");
    let from = settled.max(60.0);
    let goodput = trace.goodput(from, RUN);
    let p50 = trace.latency_quantile(from, RUN, 0.5);
    let p99 = trace.latency_quantile(from, RUN, 0.99);
    println!(
        "aimd (latency), log-normal: settled in [35, 100] from {settled:.1} s; mean limit {:.1}; \
         goodput {goodput:.1}/s of {capacity:.1}/s; p50 {:.0} ms, p99 {:.0} ms",
        trace.mean_limit(from, RUN),
        p50 * 1e3,
        p99 * 1e3,
    );
    assert!(settled <= 60.0, "settled only at {settled} s");
    assert!(goodput >= 0.9 * capacity, "goodput {goodput}/s");
    // The service time's own median is 400 ms: a standing queue may add to
    // it, within reason.
    assert!(p50 < 0.520, "p50 {p50} s");
    assert!(p99 < 1.6, "p99 {p99} s");
}

/// The recommended configuration (it starts open), with a slow-call
/// timeout of 5 s standing in for the timeout its `Limiter` learns: the
/// model's calls have no timeout of their own, and the recommendation has
/// no slow-call rule.
fn open_start() -> AimdConfig {
    AimdConfig {
        timeout: Duration::from_secs(5),
        ..AimdConfig::recommended()
    }
}

/// The open start (`AimdConfig::open_start`) in front of a dependency
/// offered twice what it serves from the first call: with no limit, a
/// queue builds, as without a limiter, until calls pass the 5 s timeout.
/// Those drops begin the start again from `initial`, counting only calls
/// admitted after; it then settles near the capacity, and the queue the
/// open start built does not pass for the dependency's latency.
#[test]
fn the_open_start_begins_again_slowly_when_the_first_calls_pass_the_timeout() {
    const RUN: f64 = 120.0;
    let mut aimd = Aimd::new(open_start()).expect("valid");
    let trace = model::run(
        &mut aimd,
        &Model::twice_capacity(),
        RUN,
        Aimd::raw_limit,
        |_, _| {},
    );
    let first_refusal = trace.rejected_at.first().copied().unwrap_or(RUN);
    let settled = trace.settled_from(35.0, 80.0).expect("ends in [35, 80]");
    let p99 = trace.latency_quantile(settled, RUN, 0.99);
    println!(
        "open start, twice capacity: first refusal at {first_refusal:.1} s; settled in [35, 80] \
         from {settled:.1} s; mean limit {:.1}; p99 {:.1} ms",
        trace.mean_limit(settled, RUN),
        p99 * 1e3,
    );
    assert!(settled <= 40.0, "settled only at {settled} s");
    assert!(p99 < 0.060, "p99 {p99} s");
}

/// The open start in front of a healthy dependency: 100 calls a second of
/// a log-normal 400 ms (p99 2.5 times that), about 44 in flight, workers
/// to spare. From the first call to the last, nothing is refused.
#[test]
fn the_open_start_refuses_a_healthy_dependency_nothing() {
    const RUN: f64 = 300.0;
    let model = Model {
        workers: 200,
        log_normal: Some(2.5),
        arrivals: Arrivals::Poisson(100.0),
        behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 400.0 })],
        ..Model::twice_capacity()
    };
    let mut aimd = Aimd::new(open_start()).expect("valid");
    let trace = model::run(&mut aimd, &model, RUN, Aimd::raw_limit, |_, _| {});
    println!(
        "open start, healthy log-normal: {} refused; limit {:.1} at 10 s, mean {:.1}",
        trace.rejected,
        trace.limit_at(10.0),
        trace.mean_limit(10.0, RUN)
    );
    assert_eq!(trace.rejected, 0);
}

/// A healthy log-normal dependency with workers to spare (200), 100 calls a
/// second needing about 44 in flight, and 1% of calls failing as overloads
/// at random (one drop a second): after a minute to climb from 20, almost
/// nothing is refused. Noise and a trickle of errors are not congestion.
#[test]
fn the_latency_mode_does_not_hold_back_a_caller_of_a_healthy_noisy_dependency() {
    const RUN: f64 = 600.0;
    for errors in [0.0, 0.01] {
        let model = Model {
            workers: 200,
            log_normal: Some(2.5),
            errors,
            arrivals: Arrivals::Poisson(100.0),
            behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 400.0 })],
            ..Model::twice_capacity()
        };
        let mut aimd = latency_mode();
        let trace = model::run(&mut aimd, &model, RUN, Aimd::raw_limit, |_, _| {});
        let refused = trace.rejection_rate(60.0, RUN) / 100.0;
        println!(
            "aimd (latency), healthy log-normal, {:.0}% errors: {:.2}% refused after the first minute; \
             mean limit {:.1}",
            errors * 100.0,
            refused * 100.0,
            trace.mean_limit(60.0, RUN)
        );
        assert!(refused < 0.01, "{:.1}% refused", refused * 100.0);
    }
}

/// A caller that starts with a limit well above its need (100, needing
/// about 44) in front of a healthy noisy dependency: the first windows of
/// calls to finish are the fastest of the flow, and a baseline taken from
/// them would read every later window as queueing and cut the limit below
/// the need. Nothing is refused.
#[test]
fn the_first_calls_to_finish_do_not_set_a_baseline_too_low() {
    let model = Model {
        workers: 100,
        log_normal: Some(2.25),
        errors: 0.01,
        arrivals: Arrivals::Poisson(100.0),
        behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 400.0 })],
        ..Model::twice_capacity()
    };
    let mut aimd = Aimd::new(AimdConfig {
        initial: 100,
        max: 400,
        ..AimdConfig::default()
    })
    .expect("valid");
    let trace = model::run(&mut aimd, &model, 180.0, Aimd::raw_limit, |_, _| {});
    let refused = trace.rejection_rate(0.0, 180.0) / 100.0;
    println!(
        "aimd (latency), starting at 100: {:.2}% refused; limit {:.1} at 10 s, {:.1} at 180 s; baseline {:?}",
        refused * 100.0,
        trace.limit_at(10.0),
        trace.limit_at(180.0),
        aimd.baseline()
    );
    assert!(refused < 0.005, "{:.2}% refused", refused * 100.0);
}

/// Overload with long round trips: 40 calls a second to 50 workers that
/// answer in 1 s (40 in flight, the limit about twice that), until at
/// second 60 they answer in 2 s: 80 calls would have to be in flight, 50
/// can be, and without a limit the queue grows without end. A cut by what
/// each window proves (the baseline over the latency: the share of the
/// calls in flight served without queueing) brings the limit to the 50
/// within five of the new round trips (two cuts, 8.1 s); by ×0.9 a round
/// trip it took ten (six cuts, 20 s), and the queue that built meanwhile
/// passed for the dependency's latency (a mean limit of 127 from 120 s,
/// p99 7.9 s).
#[test]
fn overloaded_with_long_round_trips_the_limit_reaches_what_the_dependency_holds_within_five_of_them(
) {
    const ONSET: f64 = 60.0;
    const ROUND_TRIP: f64 = 2.0;
    for (name, config) in [
        ("defaults", AimdConfig::default()),
        ("recommended", open_start()),
    ] {
        let mut aimd = Aimd::new(config).expect("valid");
        let model = Model {
            workers: 50,
            arrivals: Arrivals::Poisson(40.0),
            behaviour: vec![
                (0.0, Behaviour::Serve { mean_ms: 1000.0 }),
                (ONSET, Behaviour::Serve { mean_ms: 2000.0 }),
            ],
            ..Model::twice_capacity()
        };
        let trace = model::run(&mut aimd, &model, 180.0, Aimd::raw_limit, |_, _| {});
        let before = trace.limit_at(ONSET);
        let reached = trace
            .limits
            .iter()
            .find(|(t, l, _)| *t >= ONSET && *l <= 50.0)
            .map_or(f64::INFINITY, |l| l.0 - ONSET);
        let cut = cuts(&trace, ONSET, ONSET + reached + 0.2);
        let mean = trace.mean_limit(ONSET + 60.0, 180.0);
        let p99 = trace.latency_quantile(ONSET + 60.0, 180.0, 0.99);
        println!(
            "{name}, overloaded at 60 s: limit {before:.1} then, at or below 50 after {reached:.1} s ({cut} cuts); \
             from 120 s mean limit {mean:.1}, p99 {p99:.2} s"
        );
        assert!(before >= 60.0, "{name}: {before} before the overload");
        assert!(
            reached <= 5.0 * ROUND_TRIP,
            "{name}: only after {reached} s"
        );
        assert!(mean <= 1.25 * CAPACITY, "{name}: {mean}");
        assert!(p99 <= 2.0 * ROUND_TRIP, "{name}: p99 {p99} s");
    }
}
