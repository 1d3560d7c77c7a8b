//! Vector's public adaptive request concurrency (ARC) test suite, replayed in
//! virtual time against Vector's own controller and this project's adaptive
//! policies at their shipped defaults.
//!
//! ```sh
//! cargo test --release -p rheostat-sim --test vector -- --nocapture
//! ```
//!
//! # Sources
//!
//! All from the public repository `vectordotdev/vector`, read and re-written
//! here (no code copied):
//!
//! - the scenarios: `tests/data/adaptive-concurrency/*.yaml`, transcribed to
//!   `tests/vector/data/*.toml` (each file cites its source and commit);
//! - the harness: `src/sinks/util/adaptive_concurrency/tests.rs` (the link
//!   model, the 1 s timeout, the statistics and how the ranges are checked),
//!   with `src/test_util/stats.rs` (how the statistics weigh time) and
//!   `src/sinks/util/retries.rs` (the Fibonacci backoff);
//! - the controller: `src/sinks/util/adaptive_concurrency/controller.rs`,
//!   `attempt.rs`, `future.rs`, `service.rs`, `semaphore.rs` and `mod.rs`
//!   (defaults: initial limit 1, maximum 200, decrease ratio 0.9, EWMA
//!   α 0.4, RTT deviation scale 2.5).
//!
//! # What runs
//!
//! - [`scenario`]: the 13 scenarios (parameters and Vector's ranges).
//! - [`link`]: Vector's test link: delay growing with the in-flight count
//!   (`scale`, knee), jitter, deferral or drop over a concurrency or rate
//!   limit, injected failures.
//! - [`controller`]: Vector's controller (also an `Algorithm`), the
//!   reference.
//! - [`harness`]: one discrete-event run on a `rheostat::clock::ManualClock`, with
//!   Tokio's paused-time timer ticks, Vector's 1 s timeout and Fibonacci
//!   retries. Vector's controller is driven as Vector drives it (its
//!   semaphore, a report per attempt); every other row goes through a real
//!   `rheostat::Limiter` (an owned `Admission`'s `try_acquire`, then `success()` /
//!   `overload()`). Every row runs in two modes: (a) one slot per request
//!   held across its retries, each failed attempt reported as it ends
//!   (`record_attempt`, and `start_attempt` as the retry goes out), as
//!   Vector's controller hears of attempts; (b) one slot per attempt.
//! - [`report`]: the rows (Vector's controller; the same controller as an
//!   `Algorithm` through the `Limiter`; `Aimd`, `Vegas`, `Gradient` and
//!   `Breaker` + `Gradient` at their shipped defaults; `Fixed` on the
//!   fixed-concurrency scenarios), the scores, the range checks that count
//!   for each row, and the tables.
//!
//! # What is asserted
//!
//! - The harness is faithful: Vector's controller, in mode (a) as Vector
//!   runs it, passes at least [`FAITHFUL_FLOOR`] of Vector's range checks
//!   over [`FAITHFULNESS_SEEDS`] seeds, each scenario with the reports its
//!   controller had when its ranges were recorded (one scenario,
//!   defers-at-high-rate, predates per-attempt reports: see its data file).
//!   The share as Vector runs today, for every scenario, is printed too.
//! - Vector's controller driven through a real `Limiter` as an `Algorithm`
//!   matches its own semaphore-driven row, one slot per attempt, in every
//!   adaptive scenario over three seeds (within 2% on time and waste): the
//!   `Algorithm` interface tells a policy enough to run Vector's rounds.
//! - The same seed gives the same tables.
//! - Keeping abandoned answers on the link forever, as Vector's harness does,
//!   changes nothing for Vector's controller (see [`link`]).
//!
//! Whether this project's policies beat Vector's is printed, not asserted.
//! The whole file runs in about a second, even unoptimised, so nothing is
//! `#[ignore]`d.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "vector/controller.rs"]
mod controller;
#[path = "vector/harness.rs"]
mod harness;
#[path = "vector/link.rs"]
mod link;
#[path = "vector/report.rs"]
mod report;
#[path = "vector/rng.rs"]
mod rng;
#[path = "vector/scenario.rs"]
mod scenario;
#[path = "vector/stats.rs"]
mod stats;

use harness::Mode;
use report::{Row, ScenarioRuns, Tally, Verdict};

/// The seed of the printed tables.
const SEED: u64 = 1;

/// The share of Vector's range checks its own controller must pass here.
const FAITHFUL_FLOOR: f64 = 0.85;

/// Seeds the faithfulness figure is taken over (1 to this).
const FAITHFULNESS_SEEDS: u64 = 5;

fn tables(seed: u64) -> String {
    let scenarios = scenario::all();
    let mut out = String::new();
    for mode in [Mode::PerRequest, Mode::PerAttempt] {
        let runs: Vec<ScenarioRuns> = scenarios
            .iter()
            .map(|s| ScenarioRuns::run(s, mode, seed))
            .collect();
        out.push_str(&report::table(mode, &runs));
    }
    out
}

/// Vector's controller against every range of every scenario, in `mode`;
/// `as_recorded`: each scenario with the reports Vector's controller had when
/// its ranges were recorded (see `data/defers-at-high-rate.toml`), else as
/// Vector runs it today.
fn reference_tally(mode: Mode, seed: u64, as_recorded: bool, misses: &mut Vec<String>) -> Tally {
    let mut tally = Tally::default();
    for s in scenario::all() {
        let whole_call = as_recorded && s.recorded_whole_call;
        let run = Row::Vector.run_as(&s, mode, seed, false, whole_call);
        for check in &s.checks {
            let v = report::verdict(Row::Vector, &s, &run, &run, check);
            if v == Verdict::Fail {
                misses.push(format!(
                    "seed {seed}, {}: {}",
                    s.name,
                    report::miss(&run, check)
                ));
            }
            tally.add(v);
        }
    }
    tally
}

/// Passed and counted over the faithfulness seeds, and the misses.
fn faithfulness(mode: Mode, as_recorded: bool) -> (Tally, Vec<String>) {
    let mut total = Tally::default();
    let mut misses = Vec::new();
    for seed in 1..=FAITHFULNESS_SEEDS {
        total.merge(reference_tally(mode, seed, as_recorded, &mut misses));
    }
    (total, misses)
}

fn share(t: Tally) -> f64 {
    t.passed as f64 / t.counted() as f64
}

#[test]
fn vector_arc_suite() {
    println!("{}", tables(SEED));

    let (recorded, misses) = faithfulness(Mode::PerRequest, true);
    let (today, today_misses) = faithfulness(Mode::PerRequest, false);
    let (inside, _) = faithfulness(Mode::PerAttempt, false);
    println!("### Faithfulness: Vector's controller against Vector's ranges (seeds 1-{FAITHFULNESS_SEEDS})\n");
    println!(
        "- as each scenario's ranges were recorded (mode a): {}/{} = {:.1}%",
        recorded.passed,
        recorded.counted(),
        100.0 * share(recorded)
    );
    for miss in &misses {
        println!("  - missed: {miss}");
    }
    println!(
        "- as Vector runs it today, every scenario (mode a): {}/{} = {:.1}% ({} misses in defers-at-high-rate, whose ranges predate per-attempt reports)",
        today.passed,
        today.counted(),
        100.0 * share(today),
        today_misses.iter().filter(|m| m.contains("defers-at-high-rate")).count(),
    );
    println!(
        "- with the limiter inside the retry loop (mode b, not what the ranges were recorded with): {}/{} = {:.1}%",
        inside.passed,
        inside.counted(),
        100.0 * share(inside)
    );
    assert!(
        share(recorded) >= FAITHFUL_FLOOR,
        "Vector's controller passes only {:.1}% of Vector's ranges here (floor {:.0}%): the harness has drifted from Vector's",
        100.0 * share(recorded),
        100.0 * FAITHFUL_FLOOR,
    );
}

#[test]
fn the_same_seed_gives_the_same_tables() {
    assert_eq!(tables(7), tables(7));
}

#[test]
fn vector_s_abandoned_answers_change_nothing_for_its_controller() {
    for s in scenario::all() {
        for mode in [Mode::PerRequest, Mode::PerAttempt] {
            let ours = Row::Vector.run(&s, mode, SEED, false);
            let vectors = Row::Vector.run(&s, mode, SEED, true);
            assert_eq!(ours, vectors, "{} in mode {mode:?}", s.name);
        }
    }
}

/// Vector's controller, driven through a real `Limiter` as an `Algorithm`,
/// behaves as Vector's own semaphore-driven controller with one slot per
/// attempt: the runtime tells a policy enough (each call's in-flight count
/// at admission and at finish) to run Vector's rounds. Over several seeds.
#[test]
fn vector_s_controller_through_the_limiter_matches_its_own_row() {
    for seed in 1..=3 {
        for s in scenario::all() {
            if s.params.concurrency != scenario::Concurrency::Adaptive {
                continue;
            }
            let own = Row::Vector.run(&s, Mode::PerAttempt, seed, false);
            let through = Row::VectorLimiter.run(&s, Mode::PerAttempt, seed, false);
            let waste = |r: &harness::Run| r.deferred + r.dropped + r.slow;
            assert!(
                (through.seconds - own.seconds).abs() <= 0.02 * own.seconds,
                "seed {seed}, {}: {:.2} s through the limiter, {:.2} s as Vector runs it",
                s.name,
                through.seconds,
                own.seconds
            );
            assert!(
                waste(&through).abs_diff(waste(&own)) <= waste(&own) / 50 + 1,
                "seed {seed}, {}: {} attempts wasted through the limiter, {} as Vector runs it",
                s.name,
                waste(&through),
                waste(&own)
            );
        }
    }
}
