//! Vector's ARC scenarios: the link's parameters and the ranges Vector's test
//! checks, read from `data/*.toml` (each transcribed from Vector's
//! `tests/data/adaptive-concurrency/*.yaml`, cited at its top).
//!
//! The files use a small subset of TOML (section headers, `key = number`,
//! `key = "string"`, `key = [lo, hi]`), read here by hand so that the test
//! needs no dependency the workspace does not already give it. Anything
//! else in a file is an error.

use std::collections::BTreeMap;

/// What the link does with a request above its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Answer with a retriable error after the unloaded delay.
    Defer,
    /// Never answer: the caller's 1 s timeout fires.
    Drop,
}

/// How one variable of the link (its in-flight count, or the requests
/// started in the last second) slows it down or turns requests away.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LimitParams {
    /// Extra delay, as a fraction of the base delay, per unit above 1.
    pub(crate) scale: f64,
    /// Above this level the extra delay also grows geometrically.
    pub(crate) knee_start: Option<usize>,
    /// The ratio of that geometric growth (default `scale + 1`).
    pub(crate) knee_exp: Option<f64>,
    /// Above this level requests get `action`.
    pub(crate) limit: Option<usize>,
    pub(crate) action: Action,
}

impl Default for LimitParams {
    fn default() -> Self {
        LimitParams {
            scale: 0.0,
            knee_start: None,
            knee_exp: None,
            limit: None,
            action: Action::Defer,
        }
    }
}

impl LimitParams {
    /// Whether this variable shapes the link at all.
    pub(crate) fn is_active(&self) -> bool {
        self.scale != 0.0 || self.knee_start.is_some() || self.limit.is_some()
    }

    /// What happens to a request arriving at `level`, if it is over the limit.
    pub(crate) fn action_at(&self, level: usize) -> Option<Action> {
        match self.limit {
            Some(limit) if level > limit => Some(self.action),
            _ => None,
        }
    }

    /// The extra delay at `level`, as a fraction of the base delay: linear
    /// in `scale` from level 1, plus the knee's geometric term above the knee.
    pub(crate) fn extra(&self, level: usize) -> f64 {
        let knee = match self.knee_start {
            Some(knee) => {
                let ratio = self.knee_exp.unwrap_or(self.scale + 1.0);
                ratio.powf(level.saturating_sub(knee) as f64) - 1.0
            }
            None => 0.0,
        };
        // Fused, as Vector computes it, so that delays land on the same
        // nanosecond (and so the same millisecond tick).
        (level.saturating_sub(1) as f64).mul_add(self.scale, knee)
    }
}

/// Whether the scenario lets the controller adapt or pins its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Concurrency {
    Adaptive,
    Fixed(u32),
}

/// The link and the load of one scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Params {
    pub(crate) requests: usize,
    /// Seconds between generated requests (0: all at once).
    pub(crate) interval: f64,
    /// The unloaded response time, seconds.
    pub(crate) delay: f64,
    /// Mean extra response time, as a fraction of `delay` (exponential).
    pub(crate) jitter: f64,
    pub(crate) concurrency_limit_params: LimitParams,
    pub(crate) rate: LimitParams,
    pub(crate) concurrency: Concurrency,
    /// After `failures_after` attempts, this many attempts fail (retriable).
    pub(crate) failures: usize,
    pub(crate) failures_after: usize,
}

impl Params {
    /// The link never queues nor refuses: its only limit is the caller's
    /// own ramp (or the generator).
    pub(crate) fn link_is_flat(&self) -> bool {
        !self.concurrency_limit_params.is_active() && !self.rate.is_active() && self.failures == 0
    }

    /// The mean response time of an unloaded link.
    pub(crate) fn unloaded_rtt(&self) -> f64 {
        self.delay * (1.0 + self.jitter)
    }
}

/// Which side of Vector's harness a statistic comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    /// Seen by the test link.
    Stats,
    /// Kept by the controller.
    Controller,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stat {
    InFlight,
    Rate,
    ConcurrencyLimit,
    ObservedRtt,
    AveragedRtt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Min,
    Max,
    Mode,
    Mean,
}

/// One of Vector's range checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Check {
    pub(crate) group: Group,
    pub(crate) stat: Stat,
    pub(crate) field: Field,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
}

impl Check {
    pub(crate) fn name(&self) -> String {
        let group = match self.group {
            Group::Stats => "stats",
            Group::Controller => "controller",
        };
        let stat = match self.stat {
            Stat::InFlight => "in_flight",
            Stat::Rate => "rate",
            Stat::ConcurrencyLimit => "concurrency_limit",
            Stat::ObservedRtt => "observed_rtt",
            Stat::AveragedRtt => "averaged_rtt",
        };
        let field = match self.field {
            Field::Min => "min",
            Field::Max => "max",
            Field::Mode => "mode",
            Field::Mean => "mean",
        };
        format!("{group}.{stat}.{field}")
    }
}

/// One scenario: its name (Vector's file stem), parameters and checks.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) params: Params,
    pub(crate) checks: Vec<Check>,
    /// Whether Vector's controller heard only of whole calls (not of each
    /// attempt) when these ranges were recorded: the `[recorded]` section,
    /// ours, not Vector's.
    pub(crate) recorded_whole_call: bool,
}

const FILES: [(&str, &str); 13] = [
    ("constant-link", include_str!("data/constant-link.toml")),
    (
        "defers-at-high-concurrency",
        include_str!("data/defers-at-high-concurrency.toml"),
    ),
    (
        "defers-at-high-rate",
        include_str!("data/defers-at-high-rate.toml"),
    ),
    (
        "drops-at-high-concurrency",
        include_str!("data/drops-at-high-concurrency.toml"),
    ),
    (
        "fixed-concurrency-jitter",
        include_str!("data/fixed-concurrency-jitter.toml"),
    ),
    (
        "fixed-concurrency-simple",
        include_str!("data/fixed-concurrency-simple.toml"),
    ),
    (
        "jittery-link-small",
        include_str!("data/jittery-link-small.toml"),
    ),
    ("medium-send", include_str!("data/medium-send.toml")),
    (
        "retried-request-rtt",
        include_str!("data/retried-request-rtt.toml"),
    ),
    ("shallow-knee", include_str!("data/shallow-knee.toml")),
    ("slow-link", include_str!("data/slow-link.toml")),
    ("slow-send-1", include_str!("data/slow-send-1.toml")),
    ("slow-send-2", include_str!("data/slow-send-2.toml")),
];

/// Every scenario, in Vector's (alphabetical) order.
pub(crate) fn all() -> Vec<Scenario> {
    FILES
        .iter()
        .map(|&(name, text)| parse(name, text).unwrap_or_else(|e| panic!("{name}.toml: {e}")))
        .collect()
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Number(f64),
    Text(String),
    Pair(f64, f64),
}

fn parse_value(raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if let Some(text) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        return Ok(Value::Text(text.to_string()));
    }
    if let Some(inner) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
        return match parts.as_slice() {
            [lo, hi] => Ok(Value::Pair(number(lo)?, number(hi)?)),
            _ => Err(format!("a range must be [lo, hi], found `{raw}`")),
        };
    }
    number(raw).map(Value::Number)
}

fn number(raw: &str) -> Result<f64, String> {
    raw.parse::<f64>()
        .map_err(|_| format!("not a number: `{raw}`"))
}

/// The file as `section.key → value`.
fn entries(text: &str) -> Result<BTreeMap<String, Value>, String> {
    let mut section = String::new();
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected `key = value`", n + 1))?;
        let path = format!("{section}.{}", key.trim());
        let value = parse_value(value).map_err(|e| format!("line {}: {e}", n + 1))?;
        if out.insert(path.clone(), value).is_some() {
            return Err(format!("line {}: `{path}` given twice", n + 1));
        }
    }
    Ok(out)
}

fn parse(name: &'static str, text: &str) -> Result<Scenario, String> {
    let mut params = Params {
        requests: 0,
        interval: 0.0,
        delay: 0.0,
        jitter: 0.0,
        concurrency_limit_params: LimitParams::default(),
        rate: LimitParams::default(),
        concurrency: Concurrency::Adaptive,
        failures: 0,
        failures_after: 0,
    };
    let mut checks = Vec::new();
    let mut recorded_whole_call = false;
    for (path, value) in entries(text)? {
        let parts: Vec<&str> = path.split('.').collect();
        let num = || match value {
            Value::Number(x) => Ok(x),
            _ => Err(format!("`{path}` must be a number")),
        };
        let whole = || {
            let x = num()?;
            if x >= 0.0 && x.fract() == 0.0 {
                Ok(x as usize)
            } else {
                Err(format!("`{path}` must be a whole number"))
            }
        };
        match parts.as_slice() {
            ["recorded", "attempts"] => {
                recorded_whole_call = match &value {
                    Value::Text(t) if t == "whole-call" => true,
                    Value::Text(t) if t == "per-attempt" => false,
                    _ => {
                        return Err(format!(
                            "`{path}` must be \"whole-call\" or \"per-attempt\""
                        ))
                    }
                }
            }
            ["params", "requests"] => params.requests = whole()?,
            ["params", "interval"] => params.interval = num()?,
            ["params", "delay"] => params.delay = num()?,
            ["params", "jitter"] => params.jitter = num()?,
            ["params", "failures"] => params.failures = whole()?,
            ["params", "failures_after"] => params.failures_after = whole()?,
            ["params", "concurrency"] => {
                params.concurrency = match &value {
                    Value::Text(t) if t == "adaptive" => Concurrency::Adaptive,
                    Value::Number(_) => Concurrency::Fixed(
                        u32::try_from(whole()?).map_err(|_| format!("`{path}` too large"))?,
                    ),
                    _ => return Err(format!("`{path}` must be \"adaptive\" or a number")),
                }
            }
            ["params", which @ ("concurrency_limit_params" | "rate"), key] => {
                let limits = if *which == "rate" {
                    &mut params.rate
                } else {
                    &mut params.concurrency_limit_params
                };
                match *key {
                    "scale" => limits.scale = num()?,
                    "knee_start" => limits.knee_start = Some(whole()?),
                    "knee_exp" => limits.knee_exp = Some(num()?),
                    "limit" => limits.limit = Some(whole()?),
                    "action" => {
                        limits.action = match &value {
                            Value::Text(t) if t == "defer" => Action::Defer,
                            Value::Text(t) if t == "drop" => Action::Drop,
                            _ => return Err(format!("`{path}` must be \"defer\" or \"drop\"")),
                        }
                    }
                    _ => return Err(format!("unknown key `{path}`")),
                }
            }
            [group @ ("stats" | "controller"), stat, field] => {
                let Value::Pair(lo, hi) = value else {
                    return Err(format!("`{path}` must be a range [lo, hi]"));
                };
                let group = if *group == "stats" {
                    Group::Stats
                } else {
                    Group::Controller
                };
                let stat = match (group, *stat) {
                    (_, "in_flight") => Stat::InFlight,
                    (Group::Stats, "rate") => Stat::Rate,
                    (Group::Controller, "concurrency_limit") => Stat::ConcurrencyLimit,
                    (Group::Controller, "observed_rtt") => Stat::ObservedRtt,
                    (Group::Controller, "averaged_rtt") => Stat::AveragedRtt,
                    _ => return Err(format!("unknown statistic `{path}`")),
                };
                let field = match *field {
                    "min" => Field::Min,
                    "max" => Field::Max,
                    "mode" => Field::Mode,
                    "mean" => Field::Mean,
                    _ => return Err(format!("unknown field `{path}`")),
                };
                if matches!(stat, Stat::ObservedRtt | Stat::AveragedRtt) && field == Field::Mode {
                    return Err(format!("`{path}`: an RTT has no mode"));
                }
                checks.push(Check {
                    group,
                    stat,
                    field,
                    lo,
                    hi,
                });
            }
            _ => return Err(format!("unknown key `{path}`")),
        }
    }
    if params.requests == 0 || params.delay <= 0.0 {
        return Err("`params.requests` and `params.delay` are required".to_string());
    }
    Ok(Scenario {
        name,
        params,
        checks,
        recorded_whole_call,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_file_parses_and_names_its_source() {
        let all = all();
        assert_eq!(all.len(), FILES.len());
        for (name, text) in FILES {
            assert!(
                text.contains(&format!("tests/data/adaptive-concurrency/{name}.yaml")),
                "{name}.toml must cite its source file"
            );
        }
        let knee = all.iter().find(|s| s.name == "shallow-knee").unwrap();
        assert_eq!(knee.params.concurrency_limit_params.knee_start, Some(10));
        assert_eq!(knee.checks.len(), 17);
    }

    #[test]
    fn the_knee_and_the_scale_grow_the_delay_as_vector_s_link_does() {
        let knee = LimitParams {
            knee_start: Some(10),
            knee_exp: Some(1.1),
            ..LimitParams::default()
        };
        assert_eq!(knee.extra(10), 0.0);
        assert!((knee.extra(12) - 0.21).abs() < 1e-12);
        let linear = LimitParams {
            scale: 1.0,
            ..LimitParams::default()
        };
        assert_eq!(linear.extra(1), 0.0);
        assert_eq!(linear.extra(3), 2.0);
    }
}
