//! Families drawn at random (`rheostat_sim::families`) and the promise
//! they judge: the recommended configuration does no harm to a healthy
//! dependency of any size, and starves no caller and no dependency in the
//! families CI draws.
//!
//! The claims over simulated runs are `#[ignore]`d in debug builds; CI
//! runs them in release, the properties at 24 cases each:
//! `cargo test --release -p rheostat-sim --test families -- --ignored`.
//! The property's 10,000 cases, run once by hand (in chunks of 1,000 with
//! `PROPTEST_RNG_SEED` 1 to 10, `docs/results.md` says which ran):
//! `PROPTEST_CASES=10000 cargo test --release -p rheostat-sim --test families -- --ignored do_no_harm`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use proptest::prelude::*;
use rheostat_sim::families::{Families, Tally};
use rheostat_sim::sweep::SweepReport;
use rheostat_sim::{compare, rows, Scenario, ScenarioReport};

#[test]
fn families_are_drawn_from_the_documented_ranges_and_always_parse() {
    let drawn = Families::new(2000, 11).draw().unwrap();
    let mut unbounded = 0;
    for f in &drawn {
        let s = &f.scenario;
        let median = s.dependency.service.median.as_secs_f64();
        let spread = s.dependency.service.p99.as_secs_f64() / median;
        let t = s.traffic.as_ref().unwrap();
        assert!((0.000_999..=2.001).contains(&median), "{}", f.toml);
        assert!((1.49..=10.01).contains(&spread), "{}", f.toml);
        assert!((0.999..=20_000.01).contains(&t.rate.0), "{}", f.toml);
        let ratio = t.timeout.as_secs_f64() / median;
        assert!((2.99..=30.01).contains(&ratio), "{}", f.toml);
        assert!((1..=3).contains(&t.attempts.0), "{}", f.toml);
        assert!(t.deadline >= t.timeout, "{}", f.toml);
        unbounded += usize::from(t.pool.0 == u32::MAX);
        // Every kind at every severity of the shipped sweep.
        assert_eq!(s.cells().len(), 24, "{}", f.toml);
        let sweep = s.sweep.as_ref().unwrap();
        assert!(sweep.at < s.duration);
    }
    // One in five unbounded, give or take.
    assert!((300..=500).contains(&unbounded), "{unbounded}");
}

#[test]
fn a_family_is_the_same_workload_for_the_same_seed_and_another_for_another() {
    let a = Families::new(3, 5).draw().unwrap();
    let b = Families::new(3, 5).draw().unwrap();
    let c = Families::new(3, 6).draw().unwrap();
    for i in 0..3 {
        assert_eq!(a[i].toml, b[i].toml);
        assert_ne!(a[i].toml, c[i].toml);
        // A family's file reads back as the same scenario.
        let again = Scenario::from_toml("again", &a[i].toml).unwrap();
        assert_eq!(again, a[i].scenario);
    }
}

#[test]
fn a_long_family_is_shortened_to_its_call_budget_but_no_more_than_a_third() {
    let full = Families::new(40, 3).draw().unwrap();
    let short = Families::new(40, 3).with_calls(10_000.0).draw().unwrap();
    for (f, s) in full.iter().zip(&short) {
        let (fd, sd) = (f.scenario.duration, s.scenario.duration);
        assert!(sd <= fd);
        assert!(
            sd.as_secs_f64() >= fd.as_secs_f64() / 3.0 - 1e-3,
            "{sd:?} {fd:?}"
        );
    }
}

/// A healthy dependency: capacity at least 1.25 times the offered load, at
/// most 1% of calls failing or timing out, any rate, latency and spread in
/// the families' ranges, a caller whose pool never binds.
#[derive(Clone, Copy, Debug)]
struct Healthy {
    median_ms: f64,
    spread: f64,
    rate: f64,
    utilisation: f64,
    errors: f64,
    timeout_factor: f64,
}

fn healthy() -> impl Strategy<Value = Healthy> {
    (
        log_uniform(1.0, 2000.0),
        log_uniform(1.5, 10.0),
        log_uniform(1.0, 20_000.0),
        0.2..0.8f64,
        0.0..0.005f64,
        log_uniform(3.0, 30.0),
    )
        .prop_map(
            |(median_ms, spread, rate, utilisation, errors, timeout_factor)| Healthy {
                median_ms,
                spread,
                rate,
                utilisation,
                errors,
                timeout_factor,
            },
        )
}

/// The scenario of `dependency`, measured from the first call or, with
/// `after_start`, once a slow start would have had its time (`start_bound`).
fn healthy_scenario(dependency: &Healthy, after_start: bool) -> Scenario {
    let timing = Timing::of(dependency);
    let start = if after_start { timing.settled } else { 0.0 };
    scenario(dependency, &timing, None, (start, timing.duration))
}

/// How long a case of `dependency` runs, and when its start has surely
/// settled, in seconds.
#[derive(Clone, Copy)]
struct Timing {
    duration: f64,
    settled: f64,
}

impl Timing {
    fn of(dependency: &Healthy) -> Timing {
        let (_median, mean, p99, timeout) = dependency.latencies();
        // About 40,000 calls, at least 30 timeouts and 20 s.
        let duration = (40_000.0 / dependency.rate)
            .max(30.0 * timeout)
            .clamp(20.0, 1200.0);
        let settled = start_bound(dependency.rate, mean, p99).min(duration / 2.0);
        Timing { duration, settled }
    }
}

impl Healthy {
    /// The median, the mean (the log-normal's, as the simulator computes
    /// it), the p99 and the callers' timeout, in seconds. Errors and
    /// timeouts together are no more than 1% of calls: the callers'
    /// timeout is no shorter than the 99.5th percentile (2.576 standard
    /// deviations out), the errors no more than 0.5%.
    fn latencies(&self) -> (f64, f64, f64, f64) {
        let median = self.median_ms / 1e3;
        let sigma = self.spread.ln() / 2.326;
        let mean = median * (sigma * sigma / 2.0).exp();
        let timeout = (median * self.timeout_factor).max(median * (2.576 * sigma).exp());
        (median, mean, median * self.spread, timeout)
    }
}

/// What befalls a healthy dependency at `timing.settled`.
#[derive(Clone, Copy)]
enum Onset {
    /// It fails this share of calls at random, its latency unchanged.
    Errors(f64),
    /// Its calls are this many times slower, its workers as many more (its
    /// capacity unchanged), and its callers wait as much longer (from the
    /// start: a caller's timeout is one figure).
    Slower(f64),
}

/// The scenario of `dependency` for `timing.duration`, measured over
/// `(from, to)` seconds, with `onset` from `timing.settled` on. Calls beyond
/// its workers wait in a queue, as at a server: without one, three
/// workers 80% used refuse a quarter of the calls whatever the caller
/// does (Erlang's loss formula), which is not a healthy dependency, and
/// the loss trials that refusal sets off cost a limiter calls no limiter
/// loses (1.6 calls/s of 1 s, seed 935: 0.985 of no limiter without the
/// queue, 1.000 with it).
fn scenario(
    dependency: &Healthy,
    timing: &Timing,
    onset: Option<Onset>,
    (from, to): (f64, f64),
) -> Scenario {
    let (median, mean, p99, mut timeout) = dependency.latencies();
    let workers = (dependency.rate * mean / dependency.utilisation)
        .ceil()
        .max(1.0);
    let us = |s: f64| format!("{}us", (s * 1e6).round().max(1.0));
    let at = format!("[[dependency.phase]]\nat = \"{}\"\n", us(timing.settled));
    let phase = match onset {
        None => String::new(),
        Some(Onset::Errors(share)) => format!("{at}overload_errors = {share}\n"),
        Some(Onset::Slower(slower)) => {
            timeout *= slower;
            format!(
                "{at}workers = {}\nservice = {{ median = \"{}\", p99 = \"{}\" }}\n",
                (workers * slower).ceil(),
                us(median * slower),
                us(p99 * slower)
            )
        }
    };
    Scenario::from_toml(
        "healthy",
        &format!(
            r#"
            name = "healthy"
            duration = "{duration}"
            measure = {{ from = "{from}", to = "{to}" }}
            [dependency]
            workers = {workers}
            queue = 1000
            service = {{ median = "{median}", p99 = "{p99}" }}
            overload_errors = {errors}
            {phase}
            [traffic]
            rate = {rate}
            timeout = "{timeout}"
            deadline = "{timeout}"
            pool = 4294967295
            "#,
            duration = us(timing.duration),
            from = us(from),
            to = us(to),
            median = us(median),
            p99 = us(p99),
            errors = dependency.errors,
            rate = dependency.rate,
            timeout = us(timeout),
        ),
    )
    .unwrap()
}

/// When the steady state surely began: the time a slow start from 10
/// would take, by `Aimd`'s rules, to reach twice the calls a dependency of
/// this rate, mean latency and p99 needs in flight (Little's law), one
/// doubling per window (at least 250 ms, and a round trip's calls must
/// have answered), after three p99s for the flow to settle. The
/// recommendation's open start needs less; the bound does not favour it.
fn start_bound(rate: f64, mean: f64, p99: f64) -> f64 {
    let need = (rate * mean).max(1.0);
    let doublings = (2.0 * need / 10.0).log2().ceil().max(0.0);
    3.0 * p99 + doublings * (0.25f64.max(p99) + p99)
}

fn log_uniform(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    (lo.ln()..hi.ln()).prop_map(f64::exp)
}

proptest! {
    // 24 cases unless `PROPTEST_CASES` says otherwise.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    /// Do no harm: for any healthy dependency, the recommended
    /// configuration serves at least 0.99 of what no limiter serves, from
    /// the first call. It holds by the open start: a first limit of 10
    /// refused a busy dependency's first round trips
    /// (`docs/results.md`, "The do-no-harm property").
    #[test]
    #[ignore = "simulates; use --release"]
    fn do_no_harm_the_recommendation_serves_a_healthy_dependency_as_no_limiter_does(
        dependency in healthy(),
        seed in 1..1000u64,
    ) {
        no_harm(&healthy_scenario(&dependency, false), seed)?;
    }

    /// The same in the steady state, measured from `start_bound`: a
    /// baseline read low from a window of few calls once held the limit
    /// down there (`docs/results.md`, "After the start").
    #[test]
    #[ignore = "simulates; use --release"]
    fn do_no_harm_after_the_start_the_recommendation_serves_as_no_limiter_does(
        dependency in healthy(),
        seed in 1..1000u64,
    ) {
        no_harm(&healthy_scenario(&dependency, true), seed)?;
    }

    /// No collapse at onset: a healthy dependency that starts failing a
    /// share of its calls at random, its latency unchanged, has served by
    /// the recommendation at least the share of the calls sent to it that
    /// no limiter has served, less 0.1 (1 − share − 0.1 where it served
    /// all the others), in the first window after the onset and over the
    /// rest of the run. The window is a second, or long enough for 400
    /// calls and ten mean latencies where that is longer: a share of
    /// fewer calls is noise, and a call sent in it answers within it. No
    /// limiter is the measure: the healthy dependency's own errors and
    /// timeouts count against both. Shares up to a half: nearer the loss
    /// tolerance of 0.8, the share of drops among 50 calls passes it by
    /// chance, and the cuts and trials that follow cost more
    /// (`docs/results.md`, "No collapse at onset").
    #[test]
    #[ignore = "simulates; use --release"]
    fn no_collapse_at_onset_errors_at_random_cost_the_recommendation_only_their_share(
        dependency in healthy(),
        share in 0.05..0.5f64,
        seed in 1..1000u64,
    ) {
        let timing = Timing::of(&dependency);
        let (_, mean, ..) = dependency.latencies();
        let onset = timing.settled;
        let window = (400.0 / dependency.rate)
            .max(10.0 * mean)
            .max(1.0)
            .min((timing.duration - onset) / 2.0);
        for span in [(onset, onset + window), (onset + window, timing.duration)] {
            // Each run ends with what it measures.
            let until = Timing { duration: span.1, ..timing };
            let scenario = scenario(&dependency, &until, Some(Onset::Errors(share)), span);
            let r = &none_and_recommended(&scenario, seed);
            let share_served = |name: &str| {
                let p = r.policy(name).unwrap();
                p.successes as f64 / p.offered.max(1) as f64
            };
            let (none, served) = (share_served("none"), share_served("recommended"));
            prop_assert!(
                served >= none - 0.1,
                "{:.1} s to {:.1} s after the onset: served {served:.3}, no limiter {none:.3}, \
                 {share:.2} failing\n{}",
                span.0 - onset,
                span.1 - onset,
                r.table()
            );
        }
    }

    /// Slower, not smaller: a healthy dependency whose calls all become
    /// 1.5 to 10 times slower, its capacity unchanged (as many more
    /// workers), its callers waiting as much longer. Within 20 round trips
    /// of its new latency and 2 s (the series' seconds) of the onset, the
    /// recommendation serves at least 0.99 of what no limiter serves, and
    /// it does so to the end. The 20 round trips are its rules' sum, not a
    /// fit: the limit falls, by 0.9 to a half a round trip, until the calls
    /// in flight halve (at most 7), the baseline then takes the new latency
    /// and the limit doubles back (2), each step read by windows a settling
    /// apart (3 per step, at most 9), and the learned timeout learns the
    /// new latency meanwhile (`docs/results.md`, "Slower, not smaller").
    /// Its counterexamples at seeds 7 and 2026 (same section) hold since a
    /// cut on latency goes as deep as the window proves (`docs/results.md`,
    /// "A cut as deep as the window proves"); the two were not traced
    /// again.
    #[test]
    #[ignore = "simulates; use --release"]
    fn a_slower_dependency_is_served_as_by_no_limiter_within_twenty_of_its_round_trips(
        dependency in healthy(),
        slower in log_uniform(1.5, 10.0),
        seed in 1..1000u64,
    ) {
        let timing = Timing::of(&dependency);
        let (_, mean, ..) = dependency.latencies();
        let onset = timing.settled;
        let bound = 2.0 + 20.0 * mean * slower;
        // The bound, and as long again to show the limit stays.
        let until = Timing { duration: timing.duration.max(onset + 2.0 * bound), ..timing };
        let scenario = scenario(&dependency, &until, Some(Onset::Slower(slower)), (0.0, until.duration));
        let r = &none_and_recommended(&scenario, seed);
        let served = |name: &str| -> f64 {
            let p = r.policy(name).unwrap();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "seconds")]
            let from = ((onset + bound) / p.series.step_seconds as f64).ceil() as usize;
            p.series.goodput.iter().skip(from).sum()
        };
        let (none, rec) = (served("none"), served("recommended"));
        prop_assert!(
            rec >= 0.99 * none,
            "{slower:.2} times slower: from {:.1} s after the onset, served {rec:.0} \
             where no limiter served {none:.0}\n{}",
            bound,
            r.table()
        );
    }
}

/// `scenario` run with no limiter and with the recommendation.
fn none_and_recommended(scenario: &Scenario, seed: u64) -> ScenarioReport {
    let rows = [rows::none(), rows::recommended()];
    let (report, _) = compare(std::slice::from_ref(scenario), &rows, seed, |_| {}).unwrap();
    report.scenarios.into_iter().next().unwrap()
}

/// The recommended row serves at least 0.99 of what no limiter serves.
fn no_harm(scenario: &Scenario, seed: u64) -> Result<(), TestCaseError> {
    let r = &none_and_recommended(scenario, seed);
    let none = r.policy("none").unwrap();
    let rec = r.policy("recommended").unwrap();
    prop_assert!(
        rec.successes as f64 >= 0.99 * none.successes as f64,
        "recommended {} successes, none {} ({} refused)\n{}",
        rec.successes,
        none.successes,
        rec.rejected,
        r.table()
    );
    Ok(())
}

/// The families CI draws: a few, short, in virtual time. In every scored
/// cell the recommendation keeps the caller whole wherever sending
/// everything does, and the tally fits 100 columns.
///
/// What it serves is not asserted here: the goal (0.9 of the best row in
/// 97% of cells, 0.5 in all) is not reached yet, and in these very
/// families one cell (a tenfold slowdown of 66 calls/s of 2 s) is served at
/// 0.09 of the best row. `docs/results.md` has the whole distribution over
/// fifty families, and says why.
#[test]
#[ignore = "simulates; use --release"]
fn the_recommendation_starves_no_caller_in_the_families_ci_draws() {
    let families = Families::new(3, 2026).with_calls(150_000.0).draw().unwrap();
    let rows = rows::for_families();
    let cells: Vec<_> = families.iter().flat_map(|f| f.scenario.cells()).collect();
    let scenarios: Vec<Scenario> = cells.iter().map(|c| c.scenario.clone()).collect();
    let (report, _) = compare(&scenarios, &rows, 1, |_| {}).unwrap();
    let sweeps = SweepReport::scored(&cells, &report.scenarios);
    for (family, sweep) in families.iter().zip(&sweeps) {
        let matrix = sweep.matrix();
        for cell in sweep.cells.iter().filter(|c| c.best.is_some()) {
            let rec = cell.row("recommended").unwrap();
            let none = cell.row("none").unwrap();
            assert!(
                rec.whole || !none.whole,
                "{}: the caller starved\n{matrix}\n{}",
                cell.scenario,
                family.toml
            );
        }
    }
    let table = Tally::new(&sweeps).table();
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
}
