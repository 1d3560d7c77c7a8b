//! What a comparison reports: per scenario and policy, as a table for people
//! and JSON for machines.

use std::fmt::Write as _;

use serde::Serialize;

use super::engine::RunResult;
use super::policies::PolicyKind;
use super::scenario::Scenario;

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
    /// When the dependency could serve again, seconds into the run.
    pub recovers_at_seconds: Option<f64>,
    /// One report per policy, oracle first.
    pub policies: Vec<PolicyReport>,
}

/// One policy through one scenario.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct PolicyReport {
    /// The policy's name.
    pub policy: String,
    /// Successes per second over the measured span.
    pub goodput: f64,
    /// Goodput over the oracle's, where the oracle served anything.
    pub goodput_vs_oracle: Option<f64>,
    /// Requests (or bulk items' first attempts) that arrived.
    pub offered: u64,
    /// Requests answered successfully (bulk: items processed).
    pub successes: u64,
    /// Requests refused by the limiter at once.
    pub rejected: u64,
    /// Attempts that ran out of time.
    pub timeouts: u64,
    /// Requests that failed after their attempts.
    pub failed: u64,
    /// Requests answered with a client error.
    pub client_errors: u64,
    /// Attempts that reached the dependency.
    pub sent: u64,
    /// Attempts sent per request offered (load amplification).
    pub amplification: Option<f64>,
    /// Probes that reached the dependency.
    pub probes: u64,
    /// The caller's requests in progress, time-weighted mean (workers held).
    pub in_flight_mean: f64,
    /// The caller's requests in progress, most at once.
    pub in_flight_max: u64,
    /// Success latency percentiles, milliseconds.
    pub latency_ms: Option<Latency>,
    /// Seconds from the dependency's recovery until this policy's goodput
    /// was at least 95% of the oracle's (over 10 s); `None` if it never was.
    pub recovery_seconds: Option<f64>,
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
    /// Figures over time, for plots.
    pub series: SeriesReport,
}

/// Success latency percentiles.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
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
    /// The caller's requests in progress.
    pub in_flight: Vec<f64>,
    /// Successes per second.
    pub goodput: Vec<f64>,
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The most points a series keeps.
const POINTS: usize = 600;

pub(crate) fn policy_report(
    scenario: &Scenario,
    kind: PolicyKind,
    r: &RunResult,
    oracle: Option<&RunResult>,
) -> PolicyReport {
    let (from, to) = scenario
        .measure
        .map_or((0.0, scenario.duration.as_secs_f64()), |m| {
            (m.from.as_secs_f64(), m.to.as_secs_f64())
        });
    let span = (to - from).max(1e-9);
    let goodput = r.successes as f64 / span;
    let goodput_vs_oracle =
        oracle.and_then(|o| (o.successes > 0).then(|| r.successes as f64 / o.successes as f64));
    let latency = (!r.latency.is_empty()).then(|| Latency {
        p50: round(r.latency.value_at_quantile(0.5) as f64 / 1_000.0),
        p99: round(r.latency.value_at_quantile(0.99) as f64 / 1_000.0),
        max: round(r.latency.max() as f64 / 1_000.0),
    });
    let recovery_seconds = match (scenario.recovers_at, oracle) {
        (Some(at), Some(o)) => recovery(
            &r.per_second.successes,
            &o.per_second.successes,
            at.as_secs() as usize,
        ),
        _ => None,
    };
    let instances = super::policies::instances(scenario).max(1);
    PolicyReport {
        policy: kind.name().to_string(),
        goodput: round(goodput),
        goodput_vs_oracle: goodput_vs_oracle.map(round),
        offered: r.offered,
        successes: r.successes,
        rejected: r.rejected,
        timeouts: r.timeouts,
        failed: r.failed,
        client_errors: r.client_errors,
        sent: r.sent,
        amplification: (r.offered > 0).then(|| round(r.sent as f64 / r.offered as f64)),
        probes: r.probes,
        in_flight_mean: round(r.in_flight_area / span),
        in_flight_max: r.in_flight_max,
        latency_ms: latency,
        recovery_seconds: recovery_seconds.map(|s| s as f64),
        open_seconds: round(r.open_ticks as f64 / 10.0 / f64::from(instances)),
        opens: r.opens,
        closes: r.closes,
        items_in: r.items_in,
        items_done: r.items_done,
        dead_lettered: r.dead_lettered,
        series: series(r),
    }
}

/// Seconds from `from` until a 10 s window of `successes` first holds at
/// least 95% of the oracle's in the same window.
fn recovery(successes: &[u32], oracle: &[u32], from: usize) -> Option<usize> {
    const WINDOW: usize = 10;
    let n = successes.len().min(oracle.len());
    (from..n.saturating_sub(WINDOW)).find_map(|s| {
        let ours: u64 = successes[s..s + WINDOW].iter().map(|&x| u64::from(x)).sum();
        let best: u64 = oracle[s..s + WINDOW].iter().map(|&x| u64::from(x)).sum();
        (best > 0 && ours as f64 >= 0.95 * best as f64).then_some(s - from)
    })
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
    };
    for start in (0..len).step_by(step) {
        let end = (start + step).min(len);
        let sum = |v: &[u32]| v[start..end].iter().map(|&x| u64::from(x)).sum::<u64>();
        let tried = sum(&s.tried);
        out.admitted_fraction.push(if tried == 0 {
            1.0
        } else {
            round(sum(&s.admitted) as f64 / tried as f64)
        });
        out.in_flight
            .push(round(sum(&s.in_flight) as f64 / (end - start) as f64));
        out.goodput
            .push(round(sum(&s.successes) as f64 / (end - start) as f64));
    }
    out
}

impl ScenarioReport {
    /// The report of `policy`, if it ran.
    pub fn policy(&self, policy: PolicyKind) -> Option<&PolicyReport> {
        self.policies.iter().find(|p| p.policy == policy.name())
    }

    /// The scenario as a table, one row per policy.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{} — {}", self.name, self.about);
        let _ = writeln!(
            out,
            "{:<17} {:>8} {:>6} {:>8} {:>8} {:>7} {:>8} {:>6} {:>7} {:>6} {:>7} {:>7} {:>8} {:>7} {:>5} {:>6} {:>5}",
            "policy", "goodput", "×orcl", "rejected", "timeouts", "failed", "sent", "probes", "ifl μ", "ifl ^",
            "p50 ms", "p99 ms", "recover", "open s", "opens", "closes", "dead"
        );
        for p in &self.policies {
            let ratio = p
                .goodput_vs_oracle
                .map_or("-".to_string(), |r| format!("{r:.2}"));
            let (p50, p99) = p
                .latency_ms
                .map_or(("-".to_string(), "-".to_string()), |l| {
                    (format!("{:.0}", l.p50), format!("{:.0}", l.p99))
                });
            let recover = match (self.recovers_at_seconds, p.recovery_seconds) {
                (None, _) => "-".to_string(),
                (Some(_), Some(s)) => format!("{s:.0}s"),
                (Some(_), None) => "never".to_string(),
            };
            let _ = writeln!(
                out,
                "{:<17} {:>8.1} {:>6} {:>8} {:>8} {:>7} {:>8} {:>6} {:>7.1} {:>6} {:>7} {:>7} {:>8} {:>7.0} {:>5} {:>6} {:>5}",
                p.policy,
                p.goodput,
                ratio,
                p.rejected,
                p.timeouts,
                p.failed,
                p.sent,
                p.probes,
                p.in_flight_mean,
                p.in_flight_max,
                p50,
                p99,
                recover,
                p.open_seconds,
                p.opens,
                p.closes,
                p.dead_lettered
            );
        }
        out
    }
}
