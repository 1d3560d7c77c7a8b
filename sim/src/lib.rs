//! A deterministic simulator that runs the real [`Limiter`](rheostat::Limiter)
//! against a modelled dependency, in virtual time.
//!
//! A [`Scenario`] describes the dependency — workers, a service-time
//! distribution, a queue, injected overload and client errors, calls that
//! hang, outages that refuse or hang, flapping by request count or by time,
//! a cache that warms only under traffic and cools when idle — and the
//! callers: open-loop Poisson arrivals (steps and linear ramps) over a
//! fleet of instances, each with its own limiter and a finite worker pool
//! shared with a healthy endpoint; per-attempt timeouts inside a deadline;
//! refusals that cost time and may be retried; retries under a sliding
//! window budget (or none), or as the limiter's own retry policy decides
//! (the `breaker+gradient+retry` row); requests of several classes of
//! criticality, which the rows with priorities (`aimd+priorities`,
//! `gradient+priorities`) acquire with; callers that wait in the limiter's
//! queue (FIFO or LIFO) instead of failing at once; and bulk queue
//! consumers that dead-letter an item after its attempts. Every event moves a
//! [`ManualClock`](rheostat::clock::ManualClock); the limiters are the ones users
//! run. The same seed gives the same run, byte for byte.
//!
//! [`compare`] runs scenarios against [`Row`]s — the shipped ones
//! ([`rows::all`]) and any of your own ([`Row::new`]) — and measures
//! each against a **bound**: the most goodput the dependency could deliver
//! to the offered load (the `bound` module's docs say how it is built), so
//! no policy can read above 1.00.
//!
//! It uses `rheostat` through its public API only: what it measures is
//! what a user's service would get.
//!
//! # Examples
//!
//! ```
//! use rheostat_sim::{compare, rows, Scenario};
//!
//! let scenario = Scenario::from_toml("inline", r#"
//!     name = "tiny"
//!     duration = "30s"
//!     [dependency]
//!     workers = 10
//!     service = { median = "50ms", p99 = "100ms" }
//!     [traffic]
//!     rate = 20
//!     timeout = "1s"
//!     deadline = "1s"
//! "#)?;
//! let (report, _stats) = compare(&[scenario], &[rows::aimd()], 7, |_| {})?;
//! let aimd = report.scenarios[0].policy("aimd").unwrap();
//! assert_eq!(aimd.rejected, 0);
//! assert!(aimd.goodput_vs_bound.unwrap() <= 1.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod bound;
mod budget;
mod engine;
mod error;
pub mod families;
mod load;
mod model;
mod overrides;
mod plot;
mod report;
mod row;
pub mod rows;
mod scenario;
pub mod sweep;
mod values;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use budget::RetryBudget;
pub use error::ScenarioError;
pub use overrides::PolicyParams;
pub use plot::{
    goodput_lines, latency_lines, latency_svg, svg, sweep_lines, sweep_svg, Line, LATENCY_ROWS,
    SWEEP_ROWS,
};
pub use report::{
    BoundReport, ClassReport, Comparison, HealthyReport, HedgeReport, Latency, LatencyReference,
    Layout, PolicyReport, Recovery, RetryReport, ScenarioReport, SeriesReport, TransitionReport,
    MIN_DENOMINATOR, NARROW_WIDTH,
};
pub use row::{BuildPolicy, LimiterSetup, Row, SharedProbes};
pub use scenario::{
    Bulk, Cold, Dependency, Flap, Healthy, Outage, Phase, RatePhase, Scenario, Traffic,
    TrafficClass, Wait,
};
pub use values::{Count, Fraction, Rate, Span, Stall};

use engine::RunResult;
use rheostat::algorithms::ConfigError;

/// One finished run, for progress reports.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Progress<'a> {
    /// Runs finished so far, this one included.
    pub done: usize,
    /// Runs in all.
    pub total: usize,
    /// The scenario.
    pub scenario: &'a str,
    /// The row.
    pub policy: &'a str,
    /// Wall-clock time the run took.
    pub took: Duration,
}

/// How much simulating a comparison took.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Stats {
    /// Simulated calls: arrivals and bulk attempts, over every run.
    pub calls: u64,
    /// Wall-clock time, all runs.
    pub wall: Duration,
    /// Time spent inside runs, summed over threads (CPU time, roughly).
    pub busy: Duration,
}

impl Stats {
    /// Simulated calls per second of one core's time.
    pub fn calls_per_core_second(&self) -> f64 {
        self.calls as f64 / self.busy.as_secs_f64().max(1e-9)
    }
}

/// Run every scenario against `rows` (or `none` alone, if empty; a row
/// named twice runs once), each where it applies, on all cores, calling `progress` after each run, and measure each against
/// the scenario's bound. Deterministic for a given `seed`, whatever the
/// number of threads.
///
/// # Errors
///
/// A policy could not be built for a scenario (a [`ConfigError`]).
pub fn compare(
    scenarios: &[Scenario],
    rows: &[Row],
    seed: u64,
    progress: impl Fn(Progress<'_>) + Sync,
) -> Result<(Comparison, Stats), ConfigError> {
    let started = Instant::now();
    let mut chosen: Vec<Row> = Vec::new();
    for row in rows {
        if !chosen.iter().any(|r| r.name() == row.name()) {
            chosen.push(row.clone());
        }
    }
    if chosen.is_empty() {
        chosen.push(rows::none());
    }
    let jobs: Vec<(usize, &Row)> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, sc)| {
            chosen
                .iter()
                .filter(move |row| row.applies_to(sc))
                .map(move |row| (i, row))
        })
        .collect();
    type Slot = Mutex<Option<(Result<RunResult, ConfigError>, Duration)>>;
    let results: Vec<Slot> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(jobs.len()).max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(s, row)) = jobs.get(i) else { break };
                let t = Instant::now();
                let result = engine::run(&scenarios[s], row, seed);
                let took = t.elapsed();
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some((result, took));
                }
                progress(Progress {
                    done: done.fetch_add(1, Ordering::SeqCst) + 1,
                    total: jobs.len(),
                    scenario: &scenarios[s].name,
                    policy: row.name(),
                    took,
                });
            });
        }
    });
    let mut runs: Vec<Vec<(&Row, RunResult)>> = scenarios.iter().map(|_| Vec::new()).collect();
    let mut calls = 0;
    let mut busy = Duration::ZERO;
    for ((s, row), slot) in jobs.iter().zip(results) {
        let Some((result, took)) = slot.into_inner().ok().flatten() else {
            continue;
        };
        let r = result?;
        calls += r.calls;
        busy += took;
        runs[*s].push((*row, r));
    }
    let reports = scenarios
        .iter()
        .zip(runs)
        .map(|(sc, runs)| {
            // Every run saw the same arrivals; any one gives the bound.
            let bound = runs
                .first()
                .map(|(_, r)| bound::bound(sc, &r.arrivals, &r.items))
                .unwrap_or_default();
            let bound_report = report::bound_report(sc, &bound);
            // A row whose limiter decides its retries makes up to its retry
            // policy's attempts: where that is not the scenario's, or where
            // it hedges (another attempt may follow a client error), the
            // row is measured against a bound of its own.
            let own_bound = |row: &Row, r: &RunResult| {
                let retry = row.limiter(sc).retry?;
                let (attempts, hedge) = (retry.attempts, retry.hedge.is_some());
                let traffic = sc.traffic.as_ref()?;
                (attempts != traffic.attempts.0 || hedge).then(|| {
                    let own =
                        bound::bound_with_attempts(sc, &r.arrivals, &r.items, attempts, hedge);
                    let own_report = report::bound_report(sc, &own);
                    (own, own_report)
                })
            };
            ScenarioReport {
                name: sc.name.clone(),
                about: sc.about.clone(),
                measured_seconds: {
                    let (from, to) = sc.measured();
                    to - from
                },
                duration_seconds: sc.duration.as_secs_f64(),
                recovers_at_seconds: sc.recovers_at.map(|d| d.as_secs_f64()),
                pool: sc.traffic.as_ref().map(|t| t.pool.0),
                policies: runs
                    .iter()
                    .map(|(row, r)| match own_bound(row, r) {
                        Some((own, own_report)) => {
                            let mut p = report::policy_report(sc, row, r, &own, &own_report);
                            p.own_bound = Some(own_report);
                            p
                        }
                        None => report::policy_report(sc, row, r, &bound, &bound_report),
                    })
                    .collect(),
                bound: bound_report,
            }
        })
        .collect();
    Ok((
        Comparison {
            seed,
            scenarios: reports,
        },
        Stats {
            calls,
            wall: started.elapsed(),
            busy,
        },
    ))
}

impl Comparison {
    /// The comparison as pretty-printed JSON (the same seed gives the same
    /// bytes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

// The comparison's page, whose snippet is this crate's: a doctest here
// (the page sits in the workspace's docs/, outside the packaged crate, and
// is read only when doctests are built).
#[cfg(doctest)]
#[doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/comparison.md"))]
struct ComparisonDoctests;
