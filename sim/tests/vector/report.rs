//! The rows, the scoring and the tables.
//!
//! Every row runs every scenario in both modes on the same link (same seed).
//! Scores per scenario and row: the virtual time until every request
//! succeeded, the attempts wasted (deferred, dropped, timed out), the RTT
//! inflation (the served attempts' mean RTT over the link's unloaded mean
//! RTT, `delay × (1 + jitter)`), the slots held and the link's in-flight
//! count, and Vector's range checks:
//!
//! - Vector's controller (the reference row) is held to every range of the
//!   scenario: that is how faithful the harness is.
//! - The other rows are held to the ranges that describe the link: what the
//!   link saw (`stats.*`), the slots held (`controller.in_flight`) and the
//!   served RTT (`controller.observed_rtt`). `controller.averaged_rtt` is
//!   Vector's internal per-round average, and `controller.concurrency_limit`
//!   on an adaptive scenario is Vector's own limit, not a property of the
//!   link: neither is counted for them.
//! - On a link that never queues nor refuses (no `scale`, knee, limit or
//!   failures: constant-link, jittery-link-small, medium-send, slow-send-*),
//!   the concurrency and rate ranges only record how far Vector's
//!   +1-per-round-trip ramp got. A row that finished no later than Vector's
//!   controller is not failed on them; such a miss is shown as *forgiven*.

use std::fmt::Write as _;
use std::sync::Arc;

use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, Breaker, BreakerConfig, Fixed, Gradient, GradientConfig, Stack,
    Vegas, VegasConfig,
};
use rheostat::{clock::ManualClock, Limiter};

use super::controller::VectorArc;
use super::harness::{self, Direct, Mode, Run, ThroughLimiter};
use super::scenario::{Check, Concurrency, Field, Group, Scenario, Stat};

/// One policy under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Row {
    /// Vector's controller, driven as Vector drives it (the reference).
    Vector,
    /// The same controller as an `Algorithm`, through a real `Limiter`. An
    /// `Algorithm` hears of a call only when it finishes, so "the limit was
    /// reached this round" is judged from each finished call's in-flight
    /// count at admission, after the fact: when a round's calls finish at
    /// one instant, the round can end on a call admitted below the limit
    /// before the one admitted at it is heard of (see the report).
    VectorLimiter,
    Aimd,
    /// `Aimd::recommended()`: the recommended configuration's policy (its
    /// learned timeout aside: the suite's calls have Vector's 1 s).
    Recommended,
    Vegas,
    Gradient,
    BreakerGradient,
    /// `Fixed` at the scenario's concurrency (fixed scenarios only).
    Fixed,
}

/// The rows of a scenario that lets the limit adapt.
pub(crate) const ADAPTIVE_ROWS: [Row; 7] = [
    Row::Vector,
    Row::VectorLimiter,
    Row::Aimd,
    Row::Recommended,
    Row::Vegas,
    Row::Gradient,
    Row::BreakerGradient,
];

/// The rows of a scenario that pins the concurrency.
pub(crate) const FIXED_ROWS: [Row; 2] = [Row::Vector, Row::Fixed];

impl Row {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Row::Vector => "vector",
            Row::VectorLimiter => "vector@limiter",
            Row::Aimd => "aimd",
            Row::Recommended => "recommended",
            Row::Vegas => "vegas",
            Row::Gradient => "gradient",
            Row::BreakerGradient => "breaker+gradient",
            Row::Fixed => "fixed",
        }
    }

    /// The policy, built only through the public constructors and the
    /// shipped defaults, so the rows follow whatever the defaults become.
    fn policy(self, concurrency: Concurrency) -> Box<dyn Algorithm> {
        let built: Result<Box<dyn Algorithm>, rheostat::ConfigError> = match self {
            Row::Vector | Row::VectorLimiter => Ok(Box::new(match concurrency {
                Concurrency::Adaptive => VectorArc::adaptive(),
                Concurrency::Fixed(n) => VectorArc::fixed(n),
            })),
            Row::Aimd => Aimd::new(AimdConfig::default()).map(|p| Box::new(p) as _),
            Row::Recommended => Ok(Box::new(Aimd::recommended())),
            Row::Vegas => Vegas::new(VegasConfig::default()).map(|p| Box::new(p) as _),
            Row::Gradient => Gradient::new(GradientConfig::default()).map(|p| Box::new(p) as _),
            Row::BreakerGradient => Breaker::new(BreakerConfig::recommended()).and_then(|b| {
                let g = Gradient::new(GradientConfig::default())?;
                Stack::builder()
                    .push(b)
                    .push(g)
                    .build()
                    .map(|p| Box::new(p) as _)
            }),
            Row::Fixed => match concurrency {
                Concurrency::Fixed(n) => Fixed::new(n).map(|p| Box::new(p) as _),
                Concurrency::Adaptive => panic!("the fixed row runs only fixed scenarios"),
            },
        };
        built.unwrap_or_else(|e| panic!("{}: {e}", self.name()))
    }

    /// Run `scenario` with this row (Vector's controller as Vector runs it
    /// today: attempts reported one by one).
    pub(crate) fn run(self, scenario: &Scenario, mode: Mode, seed: u64, leak: bool) -> Run {
        self.run_as(scenario, mode, seed, leak, false)
    }

    /// [`Row::run`], with Vector's controller hearing only of whole calls if
    /// `whole_call` (Vector before per-attempt reports).
    pub(crate) fn run_as(
        self,
        scenario: &Scenario,
        mode: Mode,
        seed: u64,
        leak: bool,
        whole_call: bool,
    ) -> Run {
        let params = scenario.params;
        let clock = ManualClock::new();
        if self == Row::Vector {
            let arc = match params.concurrency {
                Concurrency::Adaptive => VectorArc::adaptive(),
                Concurrency::Fixed(n) => VectorArc::fixed(n),
            };
            let direct = Direct {
                arc,
                mode,
                whole_call,
            };
            return harness::run(params, mode, seed, leak, &clock, direct);
        }
        let limiter = Limiter::builder(self.policy(params.concurrency))
            .clock(clock.clone())
            .seed(seed)
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        let keeper = ThroughLimiter {
            limiter: Arc::new(limiter),
        };
        harness::run(params, mode, seed, leak, &clock, keeper)
    }
}

/// How one range check went for one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    Fail,
    /// Missed a ramp-only range, but finished no later than Vector.
    Forgiven,
    /// Not counted for this row.
    Skipped,
}

/// A statistic's value: a whole number (histogram min/max/mode) or not.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Whole(usize),
    Real(f64),
}

fn value(run: &Run, check: &Check) -> Option<Value> {
    let spread = match (check.group, check.stat) {
        (Group::Stats, Stat::InFlight) => run.link_in_flight,
        (Group::Stats, Stat::Rate) => run.link_rate,
        (Group::Controller, Stat::InFlight) => run.held,
        (Group::Controller, Stat::ConcurrencyLimit) => run.limit,
        (_, Stat::ObservedRtt | Stat::AveragedRtt) => {
            let range = if check.stat == Stat::ObservedRtt {
                run.observed_rtt
            } else {
                run.averaged_rtt
            }?;
            return Some(Value::Real(match check.field {
                Field::Min => range.min,
                Field::Max => range.max,
                Field::Mean | Field::Mode => range.mean,
            }));
        }
        _ => None,
    }?;
    Some(match check.field {
        Field::Min => Value::Whole(spread.min),
        Field::Max => Value::Whole(spread.max),
        Field::Mode => Value::Whole(spread.mode),
        Field::Mean => Value::Real(spread.mean),
    })
}

/// Vector's comparison: whole numbers against the range's bounds truncated
/// to whole numbers, the rest as they are.
fn within(value: Value, check: &Check) -> bool {
    match value {
        Value::Whole(v) => v >= check.lo as usize && v <= check.hi as usize,
        Value::Real(v) => v >= check.lo && v <= check.hi,
    }
}

pub(crate) fn verdict(
    row: Row,
    scenario: &Scenario,
    run: &Run,
    reference: &Run,
    check: &Check,
) -> Verdict {
    let adaptive = scenario.params.concurrency == Concurrency::Adaptive;
    if row != Row::Vector
        && (check.stat == Stat::AveragedRtt || (adaptive && check.stat == Stat::ConcurrencyLimit))
    {
        return Verdict::Skipped;
    }
    if value(run, check).is_some_and(|v| within(v, check)) {
        return Verdict::Pass;
    }
    let ramp_only = row != Row::Vector
        && scenario.params.link_is_flat()
        && matches!(check.stat, Stat::InFlight | Stat::Rate);
    if ramp_only && run.finished && run.seconds <= reference.seconds + 0.001 {
        return Verdict::Forgiven;
    }
    Verdict::Fail
}

/// Tally of verdicts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    pub(crate) forgiven: usize,
}

impl Tally {
    pub(crate) fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Pass => self.passed += 1,
            Verdict::Fail => self.failed += 1,
            Verdict::Forgiven => self.forgiven += 1,
            Verdict::Skipped => {}
        }
    }

    pub(crate) fn merge(&mut self, other: Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.forgiven += other.forgiven;
    }

    /// Passed (or forgiven) out of counted.
    pub(crate) fn counted(&self) -> usize {
        self.passed + self.failed + self.forgiven
    }

    pub(crate) fn ok(&self) -> usize {
        self.passed + self.forgiven
    }
}

/// One scenario's runs in one mode, row by row (the reference first).
#[derive(Clone, Debug)]
pub(crate) struct ScenarioRuns {
    pub(crate) scenario: Scenario,
    pub(crate) rows: Vec<(Row, Run)>,
}

impl ScenarioRuns {
    pub(crate) fn run(scenario: &Scenario, mode: Mode, seed: u64) -> Self {
        let rows: &[Row] = match scenario.params.concurrency {
            Concurrency::Adaptive => &ADAPTIVE_ROWS,
            Concurrency::Fixed(_) => &FIXED_ROWS,
        };
        ScenarioRuns {
            scenario: scenario.clone(),
            rows: rows
                .iter()
                .map(|&row| (row, row.run(scenario, mode, seed, false)))
                .collect(),
        }
    }

    pub(crate) fn reference(&self) -> &Run {
        match self.rows.first() {
            Some((Row::Vector, run)) => run,
            _ => panic!("the reference row runs first"),
        }
    }

    pub(crate) fn tally(&self, row: Row, run: &Run) -> Tally {
        let mut tally = Tally::default();
        for check in &self.scenario.checks {
            tally.add(verdict(row, &self.scenario, run, self.reference(), check));
        }
        tally
    }
}

/// A check `run` missed, with the value it had.
pub(crate) fn miss(run: &Run, check: &Check) -> String {
    let got = match value(run, check) {
        Some(Value::Whole(v)) => v.to_string(),
        Some(Value::Real(v)) => format!("{v:.4}"),
        None => "none".to_string(),
    };
    format!(
        "{} = {got}, not in [{}, {}]",
        check.name(),
        check.lo,
        check.hi
    )
}

fn ratio(x: f64, reference: f64) -> String {
    if reference > 0.0 {
        format!("{:.2}", x / reference)
    } else {
        "-".to_string()
    }
}

fn spread_cell(s: Option<super::stats::Spread>) -> String {
    match s {
        Some(s) => format!("{:.1} / {}", s.mean, s.max),
        None => "-".to_string(),
    }
}

/// Whether `x` is no more than 10% above `reference` (better counts).
fn within_10pct(x: f64, reference: f64) -> bool {
    x <= reference * 1.1 + 1e-9
}

/// The table of one mode, and a summary line per row.
pub(crate) fn table(mode: Mode, all: &[ScenarioRuns]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n### Mode {}\n", mode.title());
    let _ = writeln!(
        out,
        "| scenario | row | done (s) | × vector | wasted: defer / drop / slow | RTT × unloaded | slots held mean / max | link in-flight mean / max | limit mean | Vector ranges ok |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for runs in all {
        let reference = runs.reference();
        for (row, run) in &runs.rows {
            let tally = runs.tally(*row, run);
            let done = if run.finished {
                format!("{:.2}", run.seconds)
            } else {
                "DNF".to_string()
            };
            let ranges = if tally.forgiven > 0 {
                format!(
                    "{}/{} ({} forgiven)",
                    tally.ok(),
                    tally.counted(),
                    tally.forgiven
                )
            } else {
                format!("{}/{}", tally.ok(), tally.counted())
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} = {} / {} / {} | {:.2} | {} | {} | {} | {} |",
                runs.scenario.name,
                row.name(),
                done,
                if run.finished && reference.finished {
                    ratio(run.seconds, reference.seconds)
                } else {
                    "-".to_string()
                },
                run.wasted(),
                run.deferred,
                run.dropped,
                run.slow,
                run.rtt_mean / runs.scenario.params.unloaded_rtt(),
                spread_cell(run.held),
                spread_cell(run.link_in_flight),
                run.limit
                    .map_or("-".to_string(), |s| format!("{:.1}", s.mean)),
                ranges,
            );
        }
    }
    let _ = writeln!(out);
    for row in [
        Row::Vector,
        Row::VectorLimiter,
        Row::Aimd,
        Row::Recommended,
        Row::Vegas,
        Row::Gradient,
        Row::BreakerGradient,
        Row::Fixed,
    ] {
        let mut scenarios = 0;
        let mut time_ok = 0;
        let mut waste_ok = 0;
        let mut tally = Tally::default();
        for runs in all {
            let reference = runs.reference();
            for (r, run) in &runs.rows {
                if *r != row {
                    continue;
                }
                scenarios += 1;
                if run.finished && within_10pct(run.seconds, reference.seconds) {
                    time_ok += 1;
                }
                if within_10pct(run.wasted() as f64, reference.wasted() as f64) {
                    waste_ok += 1;
                }
                tally.merge(runs.tally(row, run));
            }
        }
        if scenarios == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "- {}: time within 10% of vector's (or less) in {time_ok}/{scenarios} scenarios, waste within 10% (or less) in {waste_ok}/{scenarios}; Vector ranges ok {}/{} ({} forgiven)",
            row.name(),
            tally.ok(),
            tally.counted(),
            tally.forgiven,
        );
    }
    out
}
