//! Families drawn at random: the judge of every default.
//!
//! The shipped sweep (`sweeps/degradation.toml`) is one workload — a
//! dependency of 100 ms a third used, 200 calls a second, a caller pool of
//! 200 — and a rule fitted to it can fail on the next. A *family* is a
//! healthy workload drawn from wide ranges, run through the same kinds and
//! severities of degradation as the shipped sweep ([`Scenario::cells`]).
//! Nothing here is chosen to flatter a policy: the ranges are those of the
//! dependencies the library is for, and each is drawn log-uniformly where
//! it spans orders of magnitude.
//!
//! | what | drawn from |
//! | --- | --- |
//! | the service's median | 1 ms – 2 s, log-uniform |
//! | its p99 ÷ median | 1.5 – 10, log-uniform |
//! | offered load | 1 – 20,000 calls/s, log-uniform |
//! | healthy utilisation (offered ÷ capacity) | 20 – 85%, uniform |
//! | the caller's pool | 1.5 – 20 × its healthy calls in flight, log-uniform, or unbounded (one family in five) |
//! | the caller's timeout | 3 – 30 × the median, log-uniform |
//! | attempts per request | 1 – 3, uniform; a retry backs off one median |
//!
//! The dependency's workers follow from the load and the utilisation
//! (Little's law: the load times the mean service time, over the
//! utilisation). The caller's healthy calls in flight are the calls to the
//! dependency and to the healthy endpoint its pool also serves (as many
//! calls a second, 20 ms each); a pool is never drawn below that mean plus
//! four of its Poisson standard deviations and two, so a healthy caller
//! does not find its pool full by chance alone.
//!
//! How long a family runs: the onset comes after 20 of the caller's
//! timeouts (at least 20 s, at most 2 minutes), and the figures cover 40
//! timeouts after it (at least 60 s, at most 10 minutes), both shortened
//! together, to no less than a third (and no less than 10 s and 20 s),
//! where that would offer more than [`Families::calls`] calls: a busy
//! family's round trips are many in a few seconds. A family prints as a scenario file
//! ([`Family::toml`]), so any cell can be run again alone.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::error::ScenarioError;
use super::model::mean_seconds;
use super::scenario::Scenario;
use super::values::Latency;

/// How families are drawn: how many, from which seed, how long each may
/// run.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Families {
    /// How many families.
    pub count: u32,
    /// The seed they are drawn from: family `i` of seed `s` is the same
    /// workload in every run.
    pub seed: u64,
    /// The most calls a family's run should offer: its onset and span are
    /// shortened (to no less than a third) to stay near this.
    pub calls: f64,
}

impl Families {
    /// `count` families from `seed`, each run offering about 300,000
    /// calls at most.
    pub fn new(count: u32, seed: u64) -> Families {
        Families {
            count,
            seed,
            calls: 3.0e5,
        }
    }

    /// The same, each run offering about `calls` calls at most (short runs,
    /// for tests).
    pub fn with_calls(self, calls: f64) -> Families {
        Families { calls, ..self }
    }

    /// Draw every family.
    ///
    /// # Errors
    ///
    /// Never for the shipped ranges; a [`ScenarioError`] if a drawn family
    /// were not a valid scenario (a test checks thousands).
    pub fn draw(&self) -> Result<Vec<Family>, ScenarioError> {
        let kinds = sweep_kinds()?;
        (0..self.count).map(|i| self.drawn(i, &kinds)).collect()
    }

    /// Family `index`.
    ///
    /// # Errors
    ///
    /// As [`Families::draw`].
    pub fn family(&self, index: u32) -> Result<Family, ScenarioError> {
        self.drawn(index, &sweep_kinds()?)
    }

    /// Family `index`, its `[sweep]` table's kinds as `kinds` writes them.
    fn drawn(&self, index: u32, kinds: &str) -> Result<Family, ScenarioError> {
        let mut rng = Pcg64Mcg::seed_from_u64(
            self.seed
                .wrapping_mul(0x9E37_79B9)
                .wrapping_add(u64::from(index)),
        );
        let log_uniform = |rng: &mut Pcg64Mcg, lo: f64, hi: f64| -> f64 {
            (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp()
        };
        let median = log_uniform(&mut rng, 0.001, 2.0);
        let spread = log_uniform(&mut rng, 1.5, 10.0);
        let rate = log_uniform(&mut rng, 1.0, 20_000.0);
        let utilisation = 0.2 + rng.random::<f64>() * 0.65;
        let unbounded = rng.random::<f64>() < 0.2;
        let pool_factor = log_uniform(&mut rng, 1.5, 20.0);
        let timeout_factor = log_uniform(&mut rng, 3.0, 30.0);
        let attempts = rng.random_range(1..=3u32);

        let service = Latency {
            median: Duration::from_secs_f64(median),
            p99: Duration::from_secs_f64(median * spread),
        };
        let mean = mean_seconds(&service);
        let need = rate * mean;
        let workers = (need / utilisation).ceil().max(1.0);
        let healthy_latency = 0.020;
        let in_flight = rate * mean + rate * healthy_latency;
        let pool = if unbounded {
            f64::from(u32::MAX)
        } else {
            (pool_factor * in_flight)
                .max(in_flight + 4.0 * in_flight.sqrt() + 2.0)
                .ceil()
        };
        let timeout = median * timeout_factor;
        let backoff = median;
        let deadline = timeout * f64::from(attempts) + backoff * f64::from(attempts - 1);

        let at = (20.0 * timeout).clamp(20.0, 120.0);
        let span = (40.0 * timeout).clamp(60.0, 600.0);
        let shrink = (self.calls / (rate * (at + span))).clamp(1.0 / 3.0, 1.0);
        let (at, span) = ((at * shrink).max(10.0), (span * shrink).max(20.0));

        let name = format!("family-{}-{index}", self.seed);
        let us = |s: f64| format!("{}us", (s * 1e6).round().max(1.0));
        let pool_text = if unbounded {
            "unbounded".to_string()
        } else {
            format!("{pool:.0}")
        };
        let summary = format!(
            "{:.0} calls/s of {} (p99 {:.1}×), {:.0}% used, pool {pool_text}",
            rate,
            human(median),
            spread,
            utilisation * 100.0,
        );
        let toml = format!(
            r#"name = "{name}"
about = "Drawn at random (seed {seed}, family {index}): {summary}."
duration = "{duration}"

[dependency]
workers = {workers}
service = {{ median = "{median}", p99 = "{p99}" }}

[traffic]
rate = {rate:.3}
timeout = "{timeout}"
deadline = "{deadline}"
attempts = {attempts}
backoff = "{backoff}"
pool = {pool}

[sweep]
at = "{at}"
kinds = [
{kinds}]
"#,
            seed = self.seed,
            duration = us(at + span),
            median = us(median),
            p99 = us(median * spread),
            timeout = us(timeout),
            deadline = us(deadline),
            backoff = us(backoff),
            at = us(at),
        );
        let scenario = Scenario::from_toml(&name, &toml)?;
        Ok(Family {
            index,
            scenario,
            toml,
        })
    }
}

/// A duration in seconds, in the unit that reads best.
fn human(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.1} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// The shipped sweep's kinds and severities, as a `[sweep]` table writes
/// them: every family is degraded as the shipped one is.
fn sweep_kinds() -> Result<String, ScenarioError> {
    let shipped = Scenario::builtin_sweeps()?;
    let mut out = String::new();
    for scenario in &shipped {
        let Some(sweep) = &scenario.sweep else {
            continue;
        };
        for k in &sweep.kinds {
            let severities: Vec<String> = k.severities.iter().map(|s| format!("{s}")).collect();
            out.push_str(&format!(
                "    {{ kind = \"{}\", severities = [{}] }},\n",
                k.kind,
                severities.join(", ")
            ));
        }
    }
    Ok(out)
}

/// One family drawn at random: a healthy workload whose `[sweep]` table
/// degrades it as the shipped sweep does.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Family {
    /// Its index among the families of its seed.
    pub index: u32,
    /// The workload, a sweep: [`Scenario::cells`] gives its cells.
    pub scenario: Scenario,
    /// The scenario file it was read from, to run it again alone.
    pub toml: String,
}

/// How one row fared over many families' cells.
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct RowTally {
    /// The row.
    pub policy: String,
    /// Cells it held, over every family.
    pub held: usize,
    /// Scored cells, over every family (those where some row kept the
    /// caller whole).
    pub scored: usize,
    /// Cells held in each family, in family order.
    pub per_family: Vec<usize>,
    /// Scored cells where it served at least [`crate::sweep::HOLDS`] of the
    /// best row's goodput, whether or not it kept the caller whole.
    pub near_best: usize,
    /// Scored cells where it served under half of the best row's goodput.
    pub under_half: usize,
    /// Its lowest goodput ÷ best over scored cells, and that cell's name.
    pub worst: Option<(f64, String)>,
}

/// Every family's cells, tallied row by row.
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct Tally {
    /// Families.
    pub families: usize,
    /// Cells in all.
    pub cells: usize,
    /// Cells where no row kept the caller whole: reported apart, not
    /// scored, with their names.
    pub unscored: Vec<String>,
    /// One line per row, in the order of the first cell.
    pub rows: Vec<RowTally>,
}

impl Tally {
    /// Tally the scored families.
    pub fn new(sweeps: &[crate::sweep::SweepReport]) -> Tally {
        let policies: Vec<String> = sweeps
            .first()
            .map(|s| s.policies().into_iter().map(str::to_string).collect())
            .unwrap_or_default();
        let mut rows: Vec<RowTally> = policies
            .iter()
            .map(|p| RowTally {
                policy: p.clone(),
                held: 0,
                scored: 0,
                per_family: Vec::new(),
                near_best: 0,
                under_half: 0,
                worst: None,
            })
            .collect();
        let mut unscored = Vec::new();
        let mut cells = 0;
        for sweep in sweeps {
            for row in &mut rows {
                row.per_family.push(0);
            }
            for cell in &sweep.cells {
                cells += 1;
                if cell.best.is_none() {
                    unscored.push(cell.scenario.clone());
                    continue;
                }
                for row in &mut rows {
                    let Some(score) = cell.row(&row.policy) else {
                        continue;
                    };
                    row.scored += 1;
                    if score.holds {
                        row.held += 1;
                        if let Some(last) = row.per_family.last_mut() {
                            *last += 1;
                        }
                    }
                    let ratio = score.vs_best.unwrap_or(0.0);
                    if ratio >= crate::sweep::HOLDS {
                        row.near_best += 1;
                    }
                    if ratio < 0.5 {
                        row.under_half += 1;
                    }
                    if row.worst.as_ref().is_none_or(|(w, _)| ratio < *w) {
                        row.worst = Some((ratio, cell.scenario.clone()));
                    }
                }
            }
        }
        Tally {
            families: sweeps.len(),
            cells,
            unscored,
            rows,
        }
    }

    /// The row called `policy`.
    pub fn row(&self, policy: &str) -> Option<&RowTally> {
        self.rows.iter().find(|r| r.policy == policy)
    }

    /// The table, at most 100 columns wide: a line per row with the cells
    /// it held of those scored, the share, the spread of cells held per
    /// family (lowest, median, highest), the cells under half of the best,
    /// and its worst ratio.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let scored = self.cells - self.unscored.len();
        let _ = writeln!(
            out,
            "{} families, {} cells: {} scored, {} where no row kept the caller whole (not scored)",
            self.families,
            self.cells,
            scored,
            self.unscored.len()
        );
        let _ = writeln!(
            out,
            "{:<22} {:>11} {:>6} {:>15} {:>8} {:>6} {:>7}",
            "row", "cells held", "share", "per family", "≥0.9×best", "<0.5×", "worst"
        );
        for r in &self.rows {
            let mut per = r.per_family.clone();
            per.sort_unstable();
            let spread = match (per.first(), per.get(per.len() / 2), per.last()) {
                (Some(lo), Some(mid), Some(hi)) => format!("{lo} / {mid} / {hi}"),
                _ => "-".to_string(),
            };
            let share = if r.scored > 0 {
                r.held as f64 / r.scored as f64
            } else {
                0.0
            };
            let near = if r.scored > 0 {
                r.near_best as f64 / r.scored as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "{:<22} {:>11} {:>5.1}% {:>15} {:>8.1}% {:>6} {:>7}",
                r.policy,
                format!("{}/{}", r.held, r.scored),
                share * 100.0,
                spread,
                near * 100.0,
                r.under_half,
                r.worst
                    .as_ref()
                    .map_or_else(|| "-".to_string(), |(w, _)| format!("{w:.2}")),
            );
        }
        out
    }
}
