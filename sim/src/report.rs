//! What a comparison reports: per scenario and policy, as a table for people
//! and JSON for machines.

use std::fmt::Write as _;

use serde::Serialize;

use super::bound::Bound;
use super::engine::{RetryStats, RunResult};
use super::row::Row;
use super::scenario::Scenario;
use rheostat::retry::RetryOutcome;

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
    }
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
        p99: round(r.latency.value_at_quantile(0.99) as f64 / 1_000.0),
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

    /// The scenario as a table, one row per policy, in the
    /// [`Layout::Narrow`] layout: at most [`NARROW_WIDTH`] characters a
    /// line.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_sim::{compare, rows, Scenario, NARROW_WIDTH};
    ///
    /// let scenario = Scenario::from_toml("inline", r#"
    ///     name = "tiny"
    ///     duration = "30s"
    ///     [dependency]
    ///     workers = 10
    ///     service = { median = "50ms", p99 = "100ms" }
    ///     [traffic]
    ///     rate = 20
    ///     timeout = "1s"
    ///     deadline = "1s"
    /// "#)?;
    /// let (report, _stats) = compare(&[scenario], &rows::all(), 7, |_| {})?;
    /// let table = report.scenarios[0].table();
    /// assert!(table.lines().all(|line| line.chars().count() <= NARROW_WIDTH));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table(&self) -> String {
        self.table_in(Layout::Narrow)
    }

    /// The scenario as a table, one row per policy, in `layout`.
    ///
    /// Every column is as wide as its header or its widest cell; headers
    /// are words, on two lines (`workers` over `held`). Above the table,
    /// the scenario, its bound and its callers' pool; under it, per row,
    /// what a column cannot hold: a row's own bound, its share served of
    /// each class, its latency against the healthy reference span, what
    /// its retry policy decided. The prose is wrapped at the table's width
    /// ([`NARROW_WIDTH`] at least).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_sim::{compare, rows, Layout, Scenario};
    ///
    /// let scenario = Scenario::from_toml("inline", r#"
    ///     name = "tiny"
    ///     duration = "30s"
    ///     [dependency]
    ///     workers = 10
    ///     service = { median = "50ms", p99 = "100ms" }
    ///     [traffic]
    ///     rate = 20
    ///     timeout = "1s"
    ///     deadline = "1s"
    /// "#)?;
    /// let (report, _stats) = compare(&[scenario], &[rows::aimd()], 7, |_| {})?;
    /// let wide = report.scenarios[0].table_in(Layout::Wide);
    /// assert!(wide.contains("dead"), "the wide table has every column");
    /// assert!(!report.scenarios[0].table().contains("dead"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table_in(&self, layout: Layout) -> String {
        let cells: Vec<Vec<String>> = self
            .policies
            .iter()
            .map(|p| COLUMNS.iter().map(|c| (c.cell)(p)).collect())
            .collect();
        let name_width = self
            .policies
            .iter()
            .map(|p| p.policy.chars().count())
            .chain(["policy".len()])
            .max()
            .unwrap_or(0);
        // (index into COLUMNS, width)
        let mut shown: Vec<(usize, usize)> = COLUMNS
            .iter()
            .enumerate()
            .filter(|(_, c)| layout == Layout::Wide || c.narrow)
            .map(|(i, c)| {
                let widest = cells.iter().map(|row| row[i].chars().count()).max();
                let head = c.head.iter().map(|h| h.chars().count()).max();
                (i, widest.max(head).unwrap_or(0))
            })
            .collect();
        let line_width = |shown: &[(usize, usize)]| {
            name_width + shown.iter().map(|(_, w)| GAP.len() + w).sum::<usize>()
        };
        // Numbers past any shipped scenario's could still overflow: the
        // last columns make room, and the table says which.
        let mut left_out: Vec<String> = Vec::new();
        while layout == Layout::Narrow && line_width(&shown) > NARROW_WIDTH && shown.len() > 1 {
            if let Some((i, _)) = shown.pop() {
                left_out.insert(0, COLUMNS[i].head.join(" ").trim().to_string());
            }
        }
        let width = line_width(&shown).max(NARROW_WIDTH);

        let mut out = String::new();
        wrap_into(
            &mut out,
            &format!("{} — {}", self.name, self.about),
            width,
            0,
        );
        let b = &self.bound;
        wrap_into(
            &mut out,
            &format!(
                "bound: {:.1}/s ({:.0} successes: {:.0} fluid + {:.0} allowance)",
                b.goodput, b.successes, b.fluid, b.allowance
            ),
            width,
            2,
        );
        if let Some(pool) = self.pool {
            let mut line = format!("caller pool: {pool} workers per instance");
            if layout == Layout::Wide {
                let _ = write!(line, " (saturated where the pool peak reaches {pool})");
            }
            wrap_into(&mut out, &line, width, 2);
        }
        for line in 0..2 {
            let mut row = format!("{:<name_width$}", if line == 1 { "policy" } else { "" });
            for &(i, w) in &shown {
                let _ = write!(row, "{GAP}{:>w$}", COLUMNS[i].head[line]);
            }
            let _ = writeln!(out, "{}", row.trim_end());
        }
        for (p, row) in self.policies.iter().zip(&cells) {
            let mut line = format!("{:<name_width$}", p.policy);
            for &(i, w) in &shown {
                let _ = write!(line, "{GAP}{:>w$}", row[i]);
            }
            let _ = writeln!(out, "{line}");
        }
        if !left_out.is_empty() {
            wrap_into(
                &mut out,
                &format!(
                    "left out to fit {NARROW_WIDTH} characters: {} (the wide layout has them)",
                    left_out.join(", ")
                ),
                width,
                2,
            );
        }
        for p in &self.policies {
            let note = |out: &mut String, text: String| {
                wrap_into(out, &format!("{}: {text}", p.policy), width, 2);
            };
            if let Some(own) = &p.own_bound {
                note(
                    &mut out,
                    format!(
                        "measured against its own callers' bound, {:.1}/s {}",
                        own.goodput,
                        unbroken(&format!(
                            "({:.0} successes: {:.0} fluid + {:.0} allowance)",
                            own.successes, own.fluid, own.allowance
                        ))
                    ),
                );
            }
            if let Some(classes) = &p.classes {
                let each: Vec<String> = classes
                    .iter()
                    .map(|c| {
                        unbroken(&format!(
                            "{} {} of {} ({} rejected)",
                            c.priority,
                            c.served.map_or_else(dash, percent),
                            c.offered,
                            c.rejected
                        ))
                    })
                    .collect();
                note(&mut out, format!("served {}", each.join(", ")));
            }
            if let Some(r) = &p.latency_reference {
                note(
                    &mut out,
                    format!(
                        "p50 {} ms against {} ms in the healthy reference span: ×{}",
                        p.latency_ms.map_or_else(dash, |l| format!("{:.0}", l.p50)),
                        r.p50_ms.map_or_else(dash, |x| format!("{x:.0}")),
                        r.p50_ratio.map_or_else(dash, |x| format!("{x:.2}"))
                    ),
                );
            }
            if let Some(r) = &p.retry {
                let attempts: Vec<String> = r.attempts.iter().map(u64::to_string).collect();
                note(
                    &mut out,
                    format!(
                        "retries {}, {}, {}, {}, {}, {}; {}, {}",
                        unbroken(&format!("{} sent", r.sent)),
                        unbroken(&format!("{} over budget", r.budget_exhausted)),
                        unbroken(&format!("{} past deadline", r.deadline)),
                        unbroken(&format!("{} rejected", r.rejected)),
                        unbroken(&format!("{} exhausted", r.exhausted)),
                        unbroken(&format!("{} not retryable", r.not_retryable)),
                        unbroken(&format!("requests by attempts [{}]", attempts.join(", "))),
                        unbroken(&format!("at most {}", r.most_attempts))
                    ),
                );
            }
        }
        out
    }
}

/// The most characters a line of a [`Layout::Narrow`] table takes.
pub const NARROW_WIDTH: usize = 100;

/// Which columns a scenario's table shows ([`ScenarioReport::table_in`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// At most [`NARROW_WIDTH`] characters a line, for a terminal: the
    /// columns the docs discuss — goodput per second, its share of the
    /// bound, the healthy endpoint's share served, the caller's workers
    /// held by requests to the dependency (mean), attempts sent per
    /// request offered, attempts timed out, p99 latency, time to recover
    /// and breaker openings. Should numbers be too wide for the line, the
    /// last of these make room, and a line under the table names them.
    Narrow,
    /// Every column; lines as long as they need.
    Wide,
}

/// Between two columns: two spaces, so that headers of two words
/// (`sent per` over `request`) do not read on into the next.
const GAP: &str = "  ";

/// One column of a scenario's table.
struct Column {
    /// The header, in words, on two lines.
    head: [&'static str; 2],
    /// Whether [`Layout::Narrow`] shows it.
    narrow: bool,
    /// A row's cell.
    cell: fn(&PolicyReport) -> String,
}

/// Every column, in order (docs/comparison.md explains each).
const COLUMNS: [Column; 21] = [
    Column {
        head: ["goodput", "per s"],
        narrow: true,
        cell: |p| format!("{:.1}", p.goodput),
    },
    Column {
        head: ["of the", "bound"],
        narrow: true,
        cell: |p| p.goodput_vs_bound.map_or_else(dash, |r| format!("{r:.2}")),
    },
    Column {
        head: ["healthy", "served"],
        narrow: true,
        cell: |p| p.healthy.served.map_or_else(dash, percent),
    },
    Column {
        head: ["workers", "held"],
        narrow: true,
        cell: |p| format!("{:.1}", p.in_flight_mean),
    },
    Column {
        head: ["most", "held"],
        narrow: false,
        cell: |p| p.in_flight_max.to_string(),
    },
    Column {
        head: ["pool", "mean"],
        narrow: false,
        cell: |p| format!("{:.1}", p.pool_mean),
    },
    Column {
        head: ["pool", "peak"],
        narrow: false,
        cell: |p| p.pool_peak.to_string(),
    },
    Column {
        head: ["no", "worker"],
        narrow: false,
        cell: |p| p.pool_full.to_string(),
    },
    Column {
        head: ["sent per", "request"],
        narrow: true,
        cell: |p| p.amplification.map_or_else(dash, |a| format!("{a:.2}")),
    },
    Column {
        head: ["attempts", "sent"],
        narrow: false,
        cell: |p| p.sent.to_string(),
    },
    Column {
        head: ["timed", "out"],
        narrow: true,
        cell: |p| p.timeouts.to_string(),
    },
    Column {
        head: ["", "rejected"],
        narrow: false,
        cell: |p| p.rejected.to_string(),
    },
    Column {
        head: ["", "failed"],
        narrow: false,
        cell: |p| p.failed.to_string(),
    },
    Column {
        head: ["", "probes"],
        narrow: false,
        cell: |p| p.probes.to_string(),
    },
    Column {
        head: ["p50", "ms"],
        narrow: false,
        cell: |p| p.latency_ms.map_or_else(dash, |l| format!("{:.0}", l.p50)),
    },
    Column {
        head: ["p99", "ms"],
        narrow: true,
        cell: |p| p.latency_ms.map_or_else(dash, |l| format!("{:.0}", l.p99)),
    },
    Column {
        head: ["", "recovery"],
        narrow: true,
        cell: |p| match p.recovery {
            Recovery::NoFault => dash(),
            Recovery::Never => "never".to_string(),
            Recovery::After(s) => format!("{s:.0}s"),
        },
    },
    Column {
        head: ["open", "seconds"],
        narrow: false,
        cell: |p| format!("{:.0}", p.open_seconds),
    },
    Column {
        head: ["", "opens"],
        narrow: true,
        cell: |p| p.opens.to_string(),
    },
    Column {
        head: ["", "closes"],
        narrow: false,
        cell: |p| p.closes.to_string(),
    },
    Column {
        head: ["dead", "lettered"],
        narrow: false,
        cell: |p| p.dead_lettered.to_string(),
    },
];

/// The cell of a figure that is not there.
fn dash() -> String {
    "-".to_string()
}

/// A share as a percentage.
fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// Marks the spaces of `text` as ones [`wrap_into`] breaks a line at only
/// if the whole does not fit on one.
fn unbroken(text: &str) -> String {
    text.replace(' ', "\u{a0}")
}

/// Appends `text` to `out` broken at spaces into lines of at most `width`
/// characters, the lines after the first indented by `indent` spaces.
/// A number stays with the word after it (`800 ms`), and an
/// [`unbroken`] phrase stays whole, unless longer than a line; a word
/// longer than a line is cut.
fn wrap_into(out: &mut String, text: &str, width: usize, indent: usize) {
    let indent = indent.min(width / 2);
    let mut pieces: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let word = word.replace('\u{a0}', " ");
        match pieces.last_mut() {
            Some(last) if last.ends_with(|c: char| c.is_ascii_digit()) => {
                last.push(' ');
                last.push_str(&word);
            }
            _ => pieces.push(word),
        }
    }
    let pieces = pieces.iter().flat_map(|p| {
        let whole = p.chars().count() <= width - indent;
        let words: Vec<&str> = if whole {
            vec![p.as_str()]
        } else {
            p.split(' ').filter(|w| !w.is_empty()).collect()
        };
        words
    });
    let mut line = String::new();
    let mut len = 0;
    let mut empty = true;
    for piece in pieces {
        let mut rest = piece;
        while !rest.is_empty() {
            let n = rest.chars().count();
            if !empty && len + 1 + n <= width {
                line.push(' ');
                line.push_str(rest);
                len += 1 + n;
                break;
            }
            if !empty {
                out.push_str(&line);
                out.push('\n');
                line = " ".repeat(indent);
                len = indent;
            }
            let take = n.min((width - len).max(1));
            let cut = rest.char_indices().nth(take).map_or(rest.len(), |(i, _)| i);
            line.push_str(&rest[..cut]);
            len += take;
            empty = false;
            rest = &rest[cut..];
        }
    }
    if !empty {
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "a test fails loudly on the first surprise"
    )]

    use super::*;
    use crate::compare;

    /// Every word a column header may use.
    const HEADER_WORDS: [&str; 35] = [
        "policy", "goodput", "per", "s", "of", "the", "bound", "healthy", "served", "workers",
        "held", "most", "pool", "mean", "peak", "no", "worker", "sent", "request", "attempts",
        "timed", "out", "rejected", "failed", "probes", "p50", "p99", "ms", "recovery", "open",
        "seconds", "opens", "closes", "dead", "lettered",
    ];

    /// A short run with every kind of line a table has: a pool, a fault
    /// to recover from, classes, a latency reference span, and the row
    /// that retries through its limiter.
    fn report() -> ScenarioReport {
        let scenario = Scenario::from_toml(
            "test",
            r#"
            name = "every-line"
            about = "A dependency that loses half its workers for a minute, under callers of two classes that retry once; its healthy first half-minute is the latency reference. Long enough to wrap."
            duration = "3m"
            recovers_at = "90s"
            measure = { from = "30s", to = "3m" }
            latency_reference = { from = "0s", to = "30s" }
            [dependency]
            workers = 10
            service = { median = "50ms", p99 = "200ms" }
            queue = 50
            [[dependency.phase]]
            at = "30s"
            workers = 5
            [[dependency.phase]]
            at = "90s"
            workers = 10
            [traffic]
            rate = 150
            timeout = "500ms"
            deadline = "1s"
            attempts = 2
            classes = [
                { priority = "critical", share = 0.3 },
                { priority = "sheddable", share = 0.7 },
            ]
            "#,
        )
        .unwrap();
        let (mut report, _) = compare(&[scenario], &crate::rows::all(), 1, |_| {}).unwrap();
        report.scenarios.remove(0)
    }

    /// The two header lines and the rows of `table`, checked: headers in
    /// words of [`HEADER_WORDS`], every row as long as the header (no name
    /// or cell overflows its column, none pushes the others right).
    fn header_and_rows<'a>(table: &'a str, report: &ScenarioReport) -> Vec<&'a str> {
        let lines: Vec<&str> = table.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("policy"))
            .unwrap_or_else(|| panic!("no header line starting `policy` in\n{table}"));
        assert!(at >= 1, "{table}");
        for word in lines[at]
            .split_whitespace()
            .chain(lines[at - 1].split_whitespace())
        {
            assert!(
                HEADER_WORDS.contains(&word),
                "header `{word}` is not a word of the list:\n{table}"
            );
        }
        let rows = &lines[at + 1..at + 1 + report.policies.len()];
        let width = lines[at].chars().count();
        for (row, p) in rows.iter().zip(&report.policies) {
            assert!(
                row.starts_with(&format!("{}{GAP}", p.policy)),
                "`{}` runs into its next column:\n{table}",
                p.policy
            );
            assert_eq!(
                row.chars().count(),
                width,
                "`{row}` is out of line:\n{table}"
            );
        }
        lines[at - 1..at + 1 + report.policies.len()].to_vec()
    }

    fn assert_fits(table: &str) {
        for line in table.lines() {
            assert!(
                line.chars().count() <= NARROW_WIDTH,
                "{} characters: `{line}`\n{table}",
                line.chars().count()
            );
        }
    }

    #[test]
    fn a_scenario_table_fits_100_columns_with_its_columns_named_in_words() {
        let report = report();
        let table = report.table();
        assert_fits(&table);
        let head = header_and_rows(&table, &report);
        for word in [
            "goodput", "bound", "healthy", "workers", "timed", "recovery", "opens",
        ] {
            assert!(
                head[1].contains(word) || head[0].contains(word),
                "no `{word}`:\n{table}"
            );
        }
        assert!(table.contains("served critical"), "{table}");
        assert!(table.contains("healthy reference span"), "{table}");
        assert!(table.contains("breaker+gradient+retry: retries"), "{table}");
    }

    #[test]
    fn the_wide_table_has_every_column_named_in_words() {
        let report = report();
        let table = report.table_in(Layout::Wide);
        let head = header_and_rows(&table, &report);
        for column in &COLUMNS {
            let [top, bottom] = column.head;
            assert!(
                head[0].contains(top) && head[1].contains(bottom),
                "no `{top} {bottom}` column:\n{table}"
            );
        }
        // Its prose wraps at the table's width.
        let width = head[1].chars().count();
        assert!(width > NARROW_WIDTH, "{table}");
        assert!(table.lines().all(|l| l.chars().count() <= width), "{table}");
    }

    #[test]
    fn numbers_too_wide_for_100_columns_push_out_the_last_columns_and_say_so() {
        let mut report = report();
        for p in &mut report.policies {
            p.goodput = 1e12;
            p.in_flight_mean = 1e9;
            p.timeouts = u64::MAX;
        }
        let table = report.table();
        assert_fits(&table);
        let head = header_and_rows(&table, &report);
        assert!(
            head[1].contains("goodput") || head[0].contains("goodput"),
            "{table}"
        );
        assert!(!head[1].contains("recovery"), "{table}");
        assert!(
            table.contains("left out to fit 100 characters: timed out, p99 ms, recovery, opens"),
            "{table}"
        );
    }

    #[test]
    fn prose_wraps_at_spaces_keeping_a_number_with_its_unit() {
        let mut out = String::new();
        wrap_into(&mut out, "callers time out at 800 ms and retry", 23, 2);
        assert_eq!(out, "callers time out at\n  800 ms and retry\n");
        let mut out = String::new();
        wrap_into(&mut out, &format!("xyz {}", unbroken("a b c d")), 10, 2);
        assert_eq!(out, "xyz\n  a b c d\n", "a phrase stays whole");
        let mut out = String::new();
        wrap_into(&mut out, &format!("x: {}", unbroken("a b c d e f")), 8, 2);
        assert_eq!(
            out, "x: a b c\n  d e f\n",
            "a phrase longer than a line breaks"
        );
        let mut out = String::new();
        wrap_into(&mut out, "abcdefghij", 4, 0);
        assert_eq!(out, "abcd\nefgh\nij\n");
    }
}
