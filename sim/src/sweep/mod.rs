//! The degradation sweep: one healthy workload, degraded in each of the
//! ways a dependency degrades, each at several severities, every row run
//! in every cell.
//!
//! A scenario file with a `[sweep]` table is a family, not one scenario:
//! its dependency and traffic are the healthy workload, and each kind and
//! severity the table names makes one cell, a copy of the scenario that
//! degrades at `sweep.at` and stays degraded to the end of the run (the
//! figures cover that span). What a severity `s` means, per kind:
//!
//! | kind | from `sweep.at`, the dependency … |
//! | --- | --- |
//! | `errors` | answers a share `s` of calls with a 5xx, at random, whatever the load |
//! | `capacity-queue` | keeps the workers to serve `1 − s` of the offered load; the rest wait in a queue of 1000 |
//! | `capacity-refuse` | the same workers, no queue: a request above them is refused at once (503) |
//! | `hangs` | never answers a share `s` of calls (each hangs until its caller's timeout); the rest as fast as ever |
//! | `slowdown` | takes `1 / (1 − s)` times as long for every call, with as many more workers: slower, not smaller |
//! | `slowdown-errors` | the slowdown of `s`, and a 5xx for a share `s / 2` of calls |
//!
//! The offered load's need is its rate times the mean service time (of the
//! log-normal the scenario gives): `capacity-*` keep `round((1 − s) ·
//! need)` workers, at least one.

use serde::Serialize;

use super::model::mean_seconds;
use super::report::{PolicyReport, ScenarioReport};
use super::rows;
use super::scenario::{Phase, Scenario};
use super::values::{Count, Fraction, Latency, Span};

mod kinds;

pub use kinds::{Kind, Sweep, SweepKind};

/// One cell of a sweep: its kind, its severity, and the scenario that runs
/// it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Cell {
    /// The family's name.
    pub family: String,
    /// The kind.
    pub kind: Kind,
    /// The severity.
    pub severity: f64,
    /// The scenario, named `family/kind@severity`.
    pub scenario: Scenario,
}

fn scaled(latency: &Latency, factor: f64) -> Latency {
    Latency {
        median: latency.median.mul_f64(factor),
        p99: latency.p99.mul_f64(factor),
    }
}

/// A severity as the cell's name writes it.
fn severity_name(s: f64) -> String {
    let text = format!("{s:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Scenario {
    /// The cells of its sweep, in order (kind by kind, severity by
    /// severity); empty if it has no `[sweep]` table.
    pub fn cells(&self) -> Vec<Cell> {
        let Some(sweep) = &self.sweep else {
            return Vec::new();
        };
        let Some(traffic) = &self.traffic else {
            return Vec::new();
        };
        let dep = &self.dependency;
        let need = traffic.rate.0 * mean_seconds(&dep.service);
        let mut cells = Vec::new();
        for k in &sweep.kinds {
            for &s in &k.severities {
                let mut sc = self.clone();
                sc.sweep = None;
                sc.name = format!("{}/{}@{}", self.name, k.kind, severity_name(s));
                sc.about = format!(
                    "{}: {} {}",
                    self.name,
                    k.kind.severity_label(),
                    severity_name(s)
                );
                sc.measure = Some(Span {
                    from: sweep.at,
                    to: self.duration,
                });
                sc.recovers_at = None;
                let mut p = Phase {
                    at: sweep.at,
                    ..Phase::default()
                };
                let slower = |p: &mut Phase, s: f64| {
                    let factor = 1.0 / (1.0 - s);
                    p.service = Some(scaled(&dep.service, factor));
                    p.workers = Some(Count(
                        ((f64::from(dep.workers.0) * factor).ceil() as u32).max(1),
                    ));
                };
                match k.kind {
                    Kind::Errors => p.overload_errors = Some(Fraction(s)),
                    Kind::CapacityQueue | Kind::CapacityRefuse => {
                        let kept = ((1.0 - s) * need).round().max(1.0);
                        #[allow(
                            clippy::cast_possible_truncation,
                            clippy::cast_sign_loss,
                            reason = "a positive worker count, far below u32::MAX"
                        )]
                        let kept = kept.min(f64::from(u32::MAX)) as u32;
                        p.workers = Some(Count(kept));
                        sc.dependency.queue = if k.kind == Kind::CapacityQueue {
                            1000
                        } else {
                            0
                        };
                    }
                    Kind::Hangs => p.hang = Some(Fraction(s)),
                    Kind::Slowdown => slower(&mut p, s),
                    Kind::SlowdownErrors => {
                        slower(&mut p, s);
                        p.overload_errors = Some(Fraction(s / 2.0));
                    }
                }
                sc.dependency.phase = vec![p];
                cells.push(Cell {
                    family: self.name.clone(),
                    kind: k.kind,
                    severity: s,
                    scenario: sc,
                });
            }
        }
        cells
    }
}

/// The caller is whole when the healthy endpoint it also serves gets at
/// least this share of its requests, and no request finds its worker pool
/// full.
pub const WHOLE_HEALTHY: f64 = 0.99;

/// A cell holds for a row whose goodput is at least this share of the best
/// row's that keeps the caller whole, and that keeps the caller whole
/// itself.
pub const HOLDS: f64 = 0.9;

/// Whether a row kept its caller whole: the healthy endpoint served at
/// least [`WHOLE_HEALTHY`] of its requests and no request found the pool
/// full.
pub fn keeps_caller_whole(p: &PolicyReport) -> bool {
    p.pool_full == 0 && p.healthy.served.is_none_or(|h| h >= WHOLE_HEALTHY)
}

/// One row in one cell of a sweep.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct CellScore {
    /// The row.
    pub policy: String,
    /// Goodput as a share of the bound.
    pub vs_bound: Option<f64>,
    /// Goodput as a share of the best row's that keeps the caller whole.
    pub vs_best: Option<f64>,
    /// The share of the attempts it tried that it sent.
    pub sent: Option<f64>,
    /// Whether it kept the caller whole.
    pub whole: bool,
    /// Whether it holds the cell: whole, and at least [`HOLDS`] of the best.
    pub holds: bool,
}

/// One cell's scores.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct CellReport {
    /// The kind.
    pub kind: Kind,
    /// The severity.
    pub severity: f64,
    /// The scenario's name.
    pub scenario: String,
    /// The best row that keeps the caller whole (the clairvoyant row, which
    /// no user can run, is not a candidate, nor is a row whose callers
    /// retry otherwise than the scenario's), if any does.
    pub best: Option<String>,
    /// Every row's scores.
    pub rows: Vec<CellScore>,
}

impl CellReport {
    /// Score the rows of a cell's report. The best row is one whose
    /// callers retry as the scenario says: a row whose limiter retries for
    /// its callers (measured against a bound of its own) is scored against
    /// it too, and may score above 1, but does not set the mark for the
    /// others, whose callers were given fewer attempts.
    pub fn new(cell: &Cell, report: &ScenarioReport) -> CellReport {
        let best = report
            .policies
            .iter()
            .filter(|p| p.policy != rows::clairvoyant().name() && p.own_bound.is_none())
            .filter(|p| keeps_caller_whole(p))
            .max_by(|a, b| a.goodput.total_cmp(&b.goodput));
        let rows = report
            .policies
            .iter()
            .map(|p| {
                let whole = keeps_caller_whole(p);
                let vs_best = best.map(|b| {
                    if b.goodput > 0.0 {
                        p.goodput / b.goodput
                    } else {
                        1.0
                    }
                });
                let sent = (p.tried > 0).then(|| p.sent as f64 / p.tried as f64);
                CellScore {
                    policy: p.policy.clone(),
                    vs_bound: p.goodput_vs_bound,
                    vs_best,
                    sent,
                    whole,
                    holds: whole && vs_best.is_some_and(|r| r >= HOLDS),
                }
            })
            .collect();
        CellReport {
            kind: cell.kind,
            severity: cell.severity,
            scenario: report.name.clone(),
            best: best.map(|b| b.policy.clone()),
            rows,
        }
    }

    /// The row called `policy`.
    pub fn row(&self, policy: &str) -> Option<&CellScore> {
        self.rows.iter().find(|r| r.policy == policy)
    }
}

/// A family's cells, scored.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct SweepReport {
    /// The family's name.
    pub name: String,
    /// Its cells, kind by kind.
    pub cells: Vec<CellReport>,
}

impl SweepReport {
    /// A family's report from its scored cells.
    pub fn new(name: &str, cells: Vec<CellReport>) -> SweepReport {
        SweepReport {
            name: name.to_string(),
            cells,
        }
    }

    /// Score each cell against its report (`reports` in the order of
    /// `cells`; any beyond them are not cells), one report per family in
    /// the order the families first appear.
    pub fn scored(cells: &[Cell], reports: &[ScenarioReport]) -> Vec<SweepReport> {
        let mut sweeps: Vec<SweepReport> = Vec::new();
        for (cell, r) in cells.iter().zip(reports) {
            let scored = CellReport::new(cell, r);
            match sweeps.iter_mut().find(|s| s.name == cell.family) {
                Some(s) => s.cells.push(scored),
                None => sweeps.push(SweepReport::new(&cell.family, vec![scored])),
            }
        }
        sweeps
    }

    /// The rows, in the order of the first cell.
    pub fn policies(&self) -> Vec<&str> {
        self.cells
            .first()
            .map(|c| c.rows.iter().map(|r| r.policy.as_str()).collect())
            .unwrap_or_default()
    }

    /// How many cells `policy` holds, of how many are scored: a cell
    /// where no row keeps the caller whole has no best row and is not
    /// scored.
    pub fn held(&self, policy: &str) -> (usize, usize) {
        let held = self
            .cells
            .iter()
            .filter(|c| c.row(policy).is_some_and(|r| r.holds))
            .count();
        (held, self.cells.iter().filter(|c| c.best.is_some()).count())
    }

    /// The matrix, at most 100 columns wide: a line per row and cell
    /// column, each cell `goodput ÷ best` with a mark where the row does
    /// not hold it (`!` below 0.9 of the best, `x` where it does not keep
    /// the caller whole), then the same against the bound.
    pub fn matrix(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} — goodput ÷ the best row that keeps the caller whole (healthy endpoint ≥ {:.0}% served,",
            self.name,
            WHOLE_HEALTHY * 100.0
        );
        let _ = writeln!(
            out,
            "pool never full); `!` below {HOLDS} of it, `x` the caller not kept whole; ×bound below"
        );
        for kind in Kind::ALL {
            let cells: Vec<&CellReport> = self.cells.iter().filter(|c| c.kind == kind).collect();
            if cells.is_empty() {
                continue;
            }
            let _ = writeln!(out);
            let mut head = format!("{:<22}", kind.name());
            for c in &cells {
                let _ = write!(head, " {:>6}", severity_name(c.severity));
            }
            let _ = write!(head, " |");
            for c in &cells {
                let _ = write!(head, " {:>5}", severity_name(c.severity));
            }
            let _ = writeln!(out, "{head}");
            for policy in self.policies() {
                let mut line = format!("{policy:<22}");
                for c in &cells {
                    let cell = match c.row(policy) {
                        Some(r) => {
                            let mark = if !r.whole {
                                "x"
                            } else if r.holds {
                                " "
                            } else {
                                "!"
                            };
                            r.vs_best
                                .map_or_else(|| "    - ".to_string(), |v| format!("{v:>5.2}{mark}"))
                        }
                        None => "    - ".to_string(),
                    };
                    let _ = write!(line, " {cell:>6}");
                }
                let _ = write!(line, " |");
                for c in &cells {
                    let b = c
                        .row(policy)
                        .and_then(|r| r.vs_bound)
                        .map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
                    let _ = write!(line, " {b:>5}");
                }
                let _ = writeln!(out, "{line}");
            }
            let mut best = format!("{:<22}", "best (whole)");
            for c in &cells {
                let _ = write!(best, " {:>6}", c.best.as_deref().map_or("-", short));
            }
            let _ = writeln!(out, "{best}");
        }
        let _ = writeln!(out);
        let mut line = String::from("cells held:");
        for policy in self.policies() {
            let (held, of) = self.held(policy);
            let item = format!(" {policy} {held}/{of};");
            if line.chars().count() + item.chars().count() > 100 {
                let _ = writeln!(out, "{line}");
                line = " ".repeat("cells held:".len());
            }
            line.push_str(&item);
        }
        let _ = writeln!(out, "{line}");
        out
    }
}

/// A row's name in six characters, for the matrix's `best` line.
fn short(name: &str) -> &str {
    name.get(..6).unwrap_or(name)
}
