//! What a comparison reports: per scenario and policy, as a table for people
//! and JSON for machines.

use serde::Serialize;

use super::bound::Bound;
use super::engine::{RetryStats, RunResult};
use super::row::Row;
use super::scenario::Scenario;
use rheostat::retry::{HedgeOutcome, RetryOutcome};

/// A ratio is printed only when its denominator counts at least this many
/// calls; below it, the ratio says nothing.
pub const MIN_DENOMINATOR: f64 = 100.0;

/// Recovered once goodput holds this share of the bound…
const RECOVERED: f64 = 0.9;
/// …in each of these blocks of seconds…
const BLOCK: usize = 10;
/// …over this many seconds in a row.
const SUSTAINED: usize = 30;

/// Every scenario against every policy.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Comparison {
    /// The seed every run used.
    pub seed: u64,
    /// One report per scenario, in order.
    pub scenarios: Vec<ScenarioReport>,
}

/// One scenario against every policy.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ScenarioReport {
    /// The scenario's name.
    pub name: String,
    /// What it models.
    pub about: String,
    /// Seconds of the run the summary figures cover.
    pub measured_seconds: f64,
    /// The length of the run, in seconds.
    pub duration_seconds: f64,
    /// When the dependency could serve again, seconds into the run.
    pub recovers_at_seconds: Option<f64>,
    /// Workers in each caller instance's pool (`traffic.pool`): a policy
    /// whose `pool_peak` reaches it saturated the pool. `None` without
    /// interactive callers.
    pub pool: Option<u32>,
    /// The most goodput the dependency could deliver to the offered load.
    pub bound: BoundReport,
    /// One report per policy, in the order asked for.
    pub policies: Vec<PolicyReport>,
}

/// The bound every goodput is measured against (see the `sim` module).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct BoundReport {
    /// Successes over the measured span: the fluid model's plus the
    /// allowance. Every ratio divides by this.
    pub successes: f64,
    /// The fluid model's successes alone.
    pub fluid: f64,
    /// What a finite run may add by luck: the calls in service when the
    /// span starts, and three standard deviations of the run's randomness.
    pub allowance: f64,
    /// `successes` per second of the span.
    pub goodput: f64,
    /// The fluid model's successes per second, over time, one point per
    /// `step_seconds`.
    pub series: Vec<f64>,
    /// The seconds each point of `series` spans (the policies' series have
    /// steps of their own).
    pub step_seconds: u64,
}

/// How long a policy took to recover.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// The scenario has no fault to recover from.
    NoFault,
    /// Not within the run.
    Never,
    /// Seconds from the dependency's recovery until goodput held 90% of the
    /// bound for 30 s (in each 10 s of them). The bound here serves each
    /// second's own arrivals: no catching up on a backlog.
    After(f64),
}

/// One transition of a breaker, for the timeline.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct TransitionReport {
    /// Seconds into the run.
    pub at_seconds: f64,
    /// The client instance whose limiter changed.
    pub instance: u32,
    /// The state before (`closed`, `open`, `half_open`, …).
    pub from: &'static str,
    /// The state after.
    pub to: &'static str,
}

/// The healthy endpoint that shares the callers' worker pools.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct HealthyReport {
    /// Its requests that arrived in the measured span.
    pub offered: u64,
    /// Those that found no free worker and failed at once.
    pub turned_away: u64,
    /// The share it served: its own bound is everything offered.
    pub served: Option<f64>,
}

/// One policy through one scenario.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct PolicyReport {
    /// The policy's name.
    pub policy: String,
    /// Successes per second over the measured span.
    pub goodput: f64,
    /// Successes over the bound's; `None` where the bound holds fewer than
    /// [`MIN_DENOMINATOR`] calls.
    pub goodput_vs_bound: Option<f64>,
    /// Requests (or bulk items' first attempts) that arrived.
    pub offered: u64,
    /// Requests answered successfully (bulk: items processed).
    pub successes: u64,
    /// Attempts the limiter refused.
    pub rejected: u64,
    /// Attempts that ran out of time.
    pub timeouts: u64,
    /// Requests that ended without an answer (refused, failed or timed out
    /// on their last attempt).
    pub failed: u64,
    /// Requests answered with a client error.
    pub client_errors: u64,
    /// Requests that found no free worker in the caller's pool.
    pub pool_full: u64,
    /// Attempts made, admitted or refused.
    pub tried: u64,
    /// Attempts that reached the dependency.
    pub sent: u64,
    /// Attempts that reached the dependency per request offered (load
    /// amplification).
    pub amplification: Option<f64>,
    /// Probes that reached the dependency.
    pub probes: u64,
    /// The most probes that reached the dependency in one 10-second span
    /// of the run (spans from its start, as the cycles of
    /// [`SharedProbes`](crate::SharedProbes) are), the fleet's instances
    /// together, before it recovered (the spans that end by the scenario's
    /// `recovers_at`; every span without one): what a dependency that is
    /// down takes a cycle.
    pub probes_in_10s_max: u64,
    /// The caller's requests to the dependency in progress (workers held
    /// for it), time-weighted mean.
    pub in_flight_mean: f64,
    /// The same, most at once.
    pub in_flight_max: u64,
    /// Busy workers in a caller's pool (the dependency's requests and the
    /// healthy endpoint's), time-weighted mean per instance.
    pub pool_mean: f64,
    /// The most busy workers in any one instance's pool.
    pub pool_peak: u32,
    /// The healthy endpoint.
    pub healthy: HealthyReport,
    /// Success latency percentiles, milliseconds.
    pub latency_ms: Option<Latency>,
    /// Time to recover.
    pub recovery: Recovery,
    /// Seconds the gate was shut (a mean over instances).
    pub open_seconds: f64,
    /// Times a breaker opened.
    pub opens: u64,
    /// Times a breaker closed after probing.
    pub closes: u64,
    /// Bulk items that arrived.
    pub items_in: u64,
    /// Bulk items processed.
    pub items_done: u64,
    /// Bulk items that used all their attempts.
    pub dead_lettered: u64,
    /// Every breaker transition of the run, in order.
    pub transitions: Vec<TransitionReport>,
    /// Transitions past the most a run keeps.
    pub transitions_dropped: u64,
    /// Figures over time, for plots.
    pub series: SeriesReport,
    /// The bound for this row's own callers, where they retry otherwise
    /// than the scenario's (the row whose limiter decides its retries makes
    /// up to its retry policy's attempts): `goodput_vs_bound` and
    /// `recovery` are against it. Absent where the scenario's bound applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_bound: Option<BoundReport>,
    /// What the limiter's retry did, for the row whose callers retry
    /// through it. Absent for the other rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryReport>,
    /// Each class of the scenario's traffic, in its order. Absent where the
    /// traffic has no classes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<ClassReport>>,
    /// The median success latency in the scenario's `latency_reference`
    /// span (milliseconds), and the measured median over it. Absent where
    /// the scenario has no reference span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_reference: Option<LatencyReference>,
}

/// One class of requests through one policy, over the measured span.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ClassReport {
    /// Its priority (`critical`, `sheddable`, …).
    pub priority: String,
    /// Its share of the arrivals, as the scenario gives it.
    pub share: f64,
    /// Its requests that arrived.
    pub offered: u64,
    /// Those answered successfully.
    pub successes: u64,
    /// Its attempts the limiter refused.
    pub rejected: u64,
    /// Successes over offered: the share of its own load it was served.
    /// `None` where fewer than [`MIN_DENOMINATOR`] arrived.
    pub served: Option<f64>,
}

/// A row's median latency against its own in a healthy stretch.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct LatencyReference {
    /// The median success latency of requests answered in the reference
    /// span, milliseconds.
    pub p50_ms: Option<f64>,
    /// The measured span's median over the reference median.
    pub p50_ratio: Option<f64>,
}

/// What a limiter's retry ([`rheostat::retry::Retry`]) decided after the
/// failed attempts of the row whose callers retry through it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct RetryReport {
    /// Retries sent, in the measured span.
    pub sent: u64,
    /// Retries the budget had no room for.
    pub budget_exhausted: u64,
    /// Retries that could not start before the request's deadline.
    pub deadline: u64,
    /// Failures not worth retrying (client errors).
    pub not_retryable: u64,
    /// Attempts refused by the limiter, or failures after which its gate
    /// was shut: never retried.
    pub rejected: u64,
    /// Requests that had used all their attempts.
    pub exhausted: u64,
    /// Requests that ended in the measured span, by attempts made: the
    /// first entry counts those that made one.
    pub attempts: Vec<u64>,
    /// The most attempts any request made, over the whole run.
    pub most_attempts: u32,
    /// Attempts, over the whole run, made after a refused attempt of the
    /// same request.
    pub after_refusal: u64,
    /// Attempts made per request, over the requests that ended in the
    /// measured span (`attempts` weighed): retries and hedges, sent or
    /// refused, each count one.
    pub attempts_per_request: Option<f64>,
    /// What became of the hedges, for a row whose retry hedges. Absent for
    /// the other rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedges: Option<HedgeReport>,
}

/// What became of the hedges a limiter's retry weighed in the measured
/// span (`rheostat::retry::HedgeOutcome`): sent, and each sent won or lost
/// once its race was decided; or why none was sent.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct HedgeReport {
    /// Hedges sent beside an attempt that had run for the hedge delay.
    pub sent: u64,
    /// Hedges that gave the request its answer.
    pub won: u64,
    /// Hedges cancelled when another attempt answered, or that failed.
    pub lost: u64,
    /// Not sent: the policy saw congestion (its limit last moved down, a
    /// breaker not closed, a throttle refusing).
    pub congested: u64,
    /// Not sent when weighed (each weighing counted): no call sent after
    /// the attempt had succeeded yet, so calls were answering in order.
    pub in_order: u64,
    /// Not sent: the retry budget had no room.
    pub budget_exhausted: u64,
    /// Not sent: no free slot in the limiter (a hedge never waits).
    pub refused: u64,
    /// Not sent: no time left before the request's deadline.
    pub deadline: u64,
    /// Not sent: the request had used all its attempts.
    pub exhausted: u64,
}

fn retry_report(stats: &RetryStats) -> RetryReport {
    let count = |outcome: RetryOutcome| {
        RetryOutcome::ALL
            .iter()
            .position(|&o| o == outcome)
            .map_or(0, |i| stats.decisions[i])
    };
    RetryReport {
        sent: count(RetryOutcome::Sent),
        budget_exhausted: count(RetryOutcome::BudgetExhausted),
        deadline: count(RetryOutcome::Deadline),
        not_retryable: count(RetryOutcome::NotRetryable),
        rejected: count(RetryOutcome::Rejected),
        exhausted: count(RetryOutcome::Exhausted),
        attempts: stats.attempts.clone(),
        most_attempts: stats.most_attempts,
        after_refusal: stats.after_refusal,
        attempts_per_request: {
            let requests: u64 = stats.attempts.iter().sum();
            let made: u64 = (1..).zip(&stats.attempts).map(|(k, n)| k * n).sum();
            (requests > 0).then(|| round(made as f64 / requests as f64))
        },
        hedges: stats.hedging.then(|| {
            let hedged = |outcome: HedgeOutcome| {
                HedgeOutcome::ALL
                    .iter()
                    .position(|&o| o == outcome)
                    .map_or(0, |i| stats.hedges[i])
            };
            HedgeReport {
                sent: hedged(HedgeOutcome::Sent),
                won: hedged(HedgeOutcome::Won),
                lost: hedged(HedgeOutcome::Lost),
                congested: hedged(HedgeOutcome::Congested),
                in_order: hedged(HedgeOutcome::InOrder),
                budget_exhausted: hedged(HedgeOutcome::BudgetExhausted),
                refused: hedged(HedgeOutcome::Refused),
                deadline: hedged(HedgeOutcome::Deadline),
                exhausted: hedged(HedgeOutcome::Exhausted),
            }
        }),
    }
}

/// Success latency percentiles: from a request's arrival to its answer,
/// what its caller sees (retries, backoffs and hedges included).
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Slowest.
    pub max: f64,
}

/// Figures over time, one point per `step_seconds`.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct SeriesReport {
    /// Seconds per point.
    pub step_seconds: u64,
    /// Attempts admitted over attempts tried (1 where none were tried).
    pub admitted_fraction: Vec<f64>,
    /// The caller's requests to the dependency in progress.
    pub in_flight: Vec<f64>,
    /// Successes per second.
    pub goodput: Vec<f64>,
    /// Busy workers in a caller's pool (mean per instance).
    pub pool: Vec<f64>,
    /// The healthy endpoint's share served (1 where none arrived).
    pub healthy_served: Vec<f64>,
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The most points a series keeps.
const POINTS: usize = 600;

pub(crate) fn bound_report(scenario: &Scenario, bound: &Bound) -> BoundReport {
    let (from, to) = scenario.measured();
    let (fluid, allowance) = bound.over(from, to);
    let per_second = bound.per_second();
    let step = per_second.len().div_ceil(POINTS).max(1);
    BoundReport {
        successes: round(fluid + allowance),
        fluid: round(fluid),
        allowance: round(allowance),
        goodput: round((fluid + allowance) / (to - from).max(1e-9)),
        series: per_second
            .chunks(step)
            .map(|c| round(c.iter().sum::<f64>() / c.len() as f64))
            .collect(),
        step_seconds: step as u64,
    }
}

pub(crate) fn policy_report(
    scenario: &Scenario,
    row: &Row,
    r: &RunResult,
    bound: &Bound,
    bound_report: &BoundReport,
) -> PolicyReport {
    let (from, to) = scenario.measured();
    let span = (to - from).max(1e-9);
    let latency = (!r.latency.is_empty()).then(|| Latency {
        p50: round(r.latency.value_at_quantile(0.5) as f64 / 1_000.0),
        p90: round(r.latency.value_at_quantile(0.9) as f64 / 1_000.0),
        p99: round(r.latency.value_at_quantile(0.99) as f64 / 1_000.0),
        p999: round(r.latency.value_at_quantile(0.999) as f64 / 1_000.0),
        max: round(r.latency.max() as f64 / 1_000.0),
    });
    let recovery = match scenario.recovers_at {
        None => Recovery::NoFault,
        Some(at) => recovery(
            &r.per_second.successes,
            &bound.steady_per_second(),
            at.as_secs() as usize,
        )
        .map_or(Recovery::Never, |s| Recovery::After(s as f64)),
    };
    let instances = f64::from(scenario.instances().max(1));
    let ratio = |num: f64, den: f64| (den >= MIN_DENOMINATOR).then(|| round(num / den));
    PolicyReport {
        policy: row.name().to_string(),
        goodput: round(r.successes as f64 / span),
        goodput_vs_bound: ratio(r.successes as f64, bound_report.successes),
        offered: r.offered,
        successes: r.successes,
        rejected: r.rejected,
        timeouts: r.timeouts,
        failed: r.failed,
        client_errors: r.client_errors,
        pool_full: r.pool_full,
        tried: r.tried,
        sent: r.sent,
        amplification: (r.offered > 0).then(|| round(r.sent as f64 / r.offered as f64)),
        probes: r.probes,
        probes_in_10s_max: most_in_10s(match scenario.recovers_at {
            Some(at) => {
                &r.probes_per_second[..(at.as_secs() as usize).min(r.probes_per_second.len())]
            }
            None => &r.probes_per_second,
        }),
        in_flight_mean: round(r.in_flight_area / span),
        in_flight_max: r.in_flight_max,
        pool_mean: round(r.pool_area / span / instances),
        pool_peak: r.pool_peak,
        healthy: HealthyReport {
            offered: r.healthy_offered,
            turned_away: r.healthy_turned_away,
            served: ratio(
                (r.healthy_offered - r.healthy_turned_away) as f64,
                r.healthy_offered as f64,
            ),
        },
        latency_ms: latency,
        recovery,
        open_seconds: round(r.open_ticks as f64 / 10.0 / instances),
        opens: r.opens,
        closes: r.closes,
        items_in: r.items_in,
        items_done: r.items_done,
        dead_lettered: r.dead_lettered,
        transitions: r
            .transitions
            .iter()
            .map(|&(at, instance, from, to)| TransitionReport {
                at_seconds: round(at),
                instance,
                from: from.as_str(),
                to: to.as_str(),
            })
            .collect(),
        transitions_dropped: r.transitions_dropped,
        series: series(r),
        own_bound: None,
        retry: r.retry.as_ref().map(retry_report),
        classes: scenario
            .traffic
            .as_ref()
            .filter(|t| !t.classes.is_empty())
            .map(|t| {
                t.classes
                    .iter()
                    .zip(&r.classes)
                    .map(|(class, stats)| ClassReport {
                        priority: class.priority.as_str().to_string(),
                        share: class.share.0,
                        offered: stats.offered,
                        successes: stats.successes,
                        rejected: stats.rejected,
                        served: ratio(stats.successes as f64, stats.offered as f64),
                    })
                    .collect()
            }),
        latency_reference: r.reference_latency.as_ref().map(|h| {
            let p50 = (!h.is_empty()).then(|| h.value_at_quantile(0.5) as f64 / 1_000.0);
            LatencyReference {
                p50_ms: p50.map(round),
                p50_ratio: p50
                    .zip(latency)
                    .filter(|(reference, _)| *reference > 0.0)
                    .map(|(reference, l)| round(l.p50 / reference)),
            }
        }),
    }
}

/// Seconds from `from` until goodput first holds 90% of the bound in each
/// 10-second block of the next 30 seconds.
fn recovery(successes: &[u32], bound: &[f64], from: usize) -> Option<usize> {
    let n = successes.len().min(bound.len());
    let holds = |s: usize| {
        (0..SUSTAINED / BLOCK).all(|b| {
            let a = s + b * BLOCK;
            let ours: f64 = successes[a..a + BLOCK].iter().map(|&x| f64::from(x)).sum();
            let best: f64 = bound[a..a + BLOCK].iter().sum();
            ours >= RECOVERED * best
        })
    };
    (from..n.saturating_sub(SUSTAINED))
        .find(|&s| holds(s))
        .map(|s| s - from)
}

/// The most of `per_second` in one 10-second span from its start.
fn most_in_10s(per_second: &[u32]) -> u64 {
    let sum = |w: &[u32]| w.iter().map(|&n| u64::from(n)).sum();
    per_second.chunks(10).map(sum).max().unwrap_or(0)
}

fn series(r: &RunResult) -> SeriesReport {
    let s = &r.per_second;
    let len = s.successes.len();
    let step = len.div_ceil(POINTS).max(1);
    let mut out = SeriesReport {
        step_seconds: step as u64,
        admitted_fraction: Vec::new(),
        in_flight: Vec::new(),
        goodput: Vec::new(),
        pool: Vec::new(),
        healthy_served: Vec::new(),
    };
    for start in (0..len).step_by(step) {
        let end = (start + step).min(len);
        let width = (end - start) as f64;
        let sum = |v: &[u32]| v[start..end].iter().map(|&x| u64::from(x)).sum::<u64>();
        let share = |num: u64, den: u64| {
            if den == 0 {
                1.0
            } else {
                round(num as f64 / den as f64)
            }
        };
        out.admitted_fraction
            .push(share(sum(&s.admitted), sum(&s.tried)));
        out.in_flight.push(round(sum(&s.in_flight) as f64 / width));
        out.goodput.push(round(sum(&s.successes) as f64 / width));
        let pool: f64 = s.pool[start..end].iter().map(|&x| f64::from(x)).sum();
        out.pool.push(round(pool / width));
        let offered = sum(&s.healthy_offered);
        out.healthy_served
            .push(share(offered - sum(&s.healthy_turned_away), offered));
    }
    out
}

impl ScenarioReport {
    /// The report of the row called `name`, if it ran.
    pub fn policy(&self, name: &str) -> Option<&PolicyReport> {
        self.policies.iter().find(|p| p.policy == name)
    }

    /// The bound `policy`'s row is measured against: its own, if its
    /// callers retry otherwise than the scenario's, else the scenario's.
    pub fn bound_of<'a>(&'a self, policy: &'a PolicyReport) -> &'a BoundReport {
        policy.own_bound.as_ref().unwrap_or(&self.bound)
    }
}

mod table;

pub use table::{Layout, NARROW_WIDTH};
