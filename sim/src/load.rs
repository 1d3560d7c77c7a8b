//! Reading scenarios: from TOML text or a file, the shipped ones, and the
//! checks run over what was parsed (the scenario's own, its `[sweep]`
//! table's); and the keys `[policies]` takes, which are the shipped rows'
//! names.
//!
//! It sits above the scenario's types and the rows: the rows are built
//! from a scenario, so the scenario's types cannot ask them which
//! `[policies.NAME]` tables there are.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::error::{Checks, ScenarioError};
use super::overrides::PolicyParams;
use super::rows;
use super::scenario::Scenario;
use super::sweep::Sweep;
use rheostat::config::PolicyConfig;

/// The scenarios shipped in `scenarios/`, in the order they are compared.
const BUILTIN: [(&str, &str); 15] = [
    ("brownout.toml", include_str!("../scenarios/brownout.toml")),
    ("pileup.toml", include_str!("../scenarios/pileup.toml")),
    (
        "retry-storm.toml",
        include_str!("../scenarios/retry-storm.toml"),
    ),
    (
        "plain-retry.toml",
        include_str!("../scenarios/plain-retry.toml"),
    ),
    (
        "cold-start.toml",
        include_str!("../scenarios/cold-start.toml"),
    ),
    ("fleet.toml", include_str!("../scenarios/fleet.toml")),
    (
        "low-traffic.toml",
        include_str!("../scenarios/low-traffic.toml"),
    ),
    (
        "transient.toml",
        include_str!("../scenarios/transient.toml"),
    ),
    (
        "client-errors.toml",
        include_str!("../scenarios/client-errors.toml"),
    ),
    (
        "slow-success.toml",
        include_str!("../scenarios/slow-success.toml"),
    ),
    ("flapping.toml", include_str!("../scenarios/flapping.toml")),
    ("bulk.toml", include_str!("../scenarios/bulk.toml")),
    (
        "mixed-criticality.toml",
        include_str!("../scenarios/mixed-criticality.toml"),
    ),
    ("server.toml", include_str!("../scenarios/server.toml")),
    (
        "heavy-tail.toml",
        include_str!("../scenarios/heavy-tail.toml"),
    ),
];

/// The sweeps shipped in `sweeps/`.
const SWEEPS: [(&str, &str); 1] = [(
    "degradation.toml",
    include_str!("../sweeps/degradation.toml"),
)];

/// The longest run a scenario may ask for.
const MAX_DURATION: Duration = Duration::from_secs(7 * 86_400);

impl Scenario {
    /// Read a scenario from TOML text; `origin` names it in errors (a file
    /// path).
    ///
    /// # Errors
    ///
    /// A [`ScenarioError`] naming the key at fault as a path in the file
    /// (`traffic.phase[1].until`), the reason, and the line: an unknown
    /// key, a missing one, a value out of range (a negative rate, a zero
    /// duration, a share outside `[0, 1]`), phases out of order or past the
    /// end of the run, a ramp that ends before it starts, or a policy
    /// override with a bad value.
    pub fn from_toml(origin: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = rheostat::config::parse_toml(text)
            .map_err(|e| ScenarioError::from_config(origin, &e))?;
        let mut checks = Checks::new(origin, text);
        scenario.validate(&mut checks);
        scenario.policies.validate(&mut checks);
        if let Some(sweep) = &scenario.sweep {
            sweep.validate(&scenario, &mut checks);
        }
        checks.finish()?;
        Ok(scenario)
    }

    /// Read a scenario from a TOML file.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or see [`Scenario::from_toml`].
    pub fn from_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::io(&path.display().to_string(), &e))?;
        Scenario::from_toml(&path.display().to_string(), &text)
    }

    /// The shipped scenarios.
    ///
    /// # Errors
    ///
    /// Only if a shipped file is broken, which the tests rule out.
    pub fn builtin() -> Result<Vec<Scenario>, ScenarioError> {
        BUILTIN
            .iter()
            .map(|(file, text)| Scenario::from_toml(&format!("scenarios/{file}"), text))
            .collect()
    }

    /// The shipped sweeps: families of cells, each a degradation of one
    /// healthy workload ([`crate::sweep`]).
    ///
    /// # Errors
    ///
    /// Only if a shipped file is broken, which the tests rule out.
    pub fn builtin_sweeps() -> Result<Vec<Scenario>, ScenarioError> {
        SWEEPS
            .iter()
            .map(|(file, text)| Scenario::from_toml(&format!("sweeps/{file}"), text))
            .collect()
    }

    /// Checks that span fields: phases in order and inside the run, a
    /// median under its p99, durations above zero, something to send.
    fn validate(&self, c: &mut Checks<'_>) {
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            c.fail(
                "duration",
                format!(
                    "found {:?}, expected above 0 and at most 7 days",
                    self.duration
                ),
            );
            return;
        }
        let end = self.duration;
        if self.traffic.is_none() && self.bulk.is_none() {
            c.fail("", "a scenario needs `[traffic]` or `[bulk]` (or both)");
        }
        if let Some(at) = self.recovers_at {
            c.within("recovers_at", at, end);
        }
        for (key, span) in [
            ("measure", self.measure),
            ("latency_reference", self.latency_reference),
        ] {
            let Some(span) = span else { continue };
            c.within(&format!("{key}.to"), span.to, end);
            if span.from >= span.to {
                c.fail(
                    &format!("{key}.from"),
                    format!(
                        "found {:?}, expected before `{key}.to` ({:?})",
                        span.from, span.to
                    ),
                );
            }
        }
        let dep = &self.dependency;
        c.latency("dependency.service", &dep.service);
        c.shares("dependency", dep.overload_errors, dep.client_errors);
        if let Some(stall) = &dep.stall {
            c.stall("dependency.stall", stall);
        }
        let mut last = Duration::ZERO;
        for (i, phase) in dep.phase.iter().enumerate() {
            let at = format!("dependency.phase[{i}].at");
            c.within(&at, phase.at, end);
            c.ordered(&at, phase.at, last);
            last = phase.at;
            if let Some(service) = &phase.service {
                c.latency(&format!("dependency.phase[{i}].service"), service);
            }
            if let Some(stall) = &phase.stall {
                c.stall(&format!("dependency.phase[{i}].stall"), stall);
            }
            if phase.cold && dep.cold.is_none() {
                c.fail(
                    &format!("dependency.phase[{i}].cold"),
                    "found true, but there is no `[dependency.cold]` table",
                );
            }
            if let Some(flap) = &phase.flap {
                let path = format!("dependency.phase[{i}].flap");
                c.positive(&format!("{path}.down"), flap.down);
                match (flap.serve, flap.up) {
                    (Some(_), Some(_)) => c.fail(
                        &format!("{path}.up"),
                        "give `serve` (requests) or `up` (a duration), not both",
                    ),
                    (None, None) => c.fail(&path, "needs `serve` (requests) or `up` (a duration)"),
                    (None, Some(up)) => c.positive(&format!("{path}.up"), up),
                    (Some(_), None) => {}
                }
            }
        }
        let mut shares = (dep.overload_errors, dep.client_errors);
        for (i, phase) in dep.phase.iter().enumerate() {
            shares = (
                phase.overload_errors.unwrap_or(shares.0),
                phase.client_errors.unwrap_or(shares.1),
            );
            if phase.overload_errors.is_some() || phase.client_errors.is_some() {
                c.shares(&format!("dependency.phase[{i}]"), shares.0, shares.1);
            }
        }
        if let Some(cold) = &dep.cold {
            if cold.fastest > cold.slowest {
                c.fail(
                    "dependency.cold.fastest",
                    format!(
                        "found {:?}, expected at most `slowest` ({:?})",
                        cold.fastest, cold.slowest
                    ),
                );
            }
            c.positive("dependency.cold.cool_half_life", cold.cool_half_life);
        }
        if let Some(traffic) = &self.traffic {
            c.positive("traffic.timeout", traffic.timeout);
            c.positive("traffic.deadline", traffic.deadline);
            c.positive("traffic.healthy.latency", traffic.healthy.latency);
            traffic.retry_budget.validate("traffic.retry_budget", c);
            if let Some(max_wait) = traffic.wait.and_then(|w| w.max_wait) {
                c.positive("traffic.wait.max_wait", max_wait);
            }
            if !traffic.classes.is_empty() {
                for (i, class) in traffic.classes.iter().enumerate() {
                    if traffic.classes[..i]
                        .iter()
                        .any(|other| other.priority == class.priority)
                    {
                        c.fail(
                            &format!("traffic.classes[{i}].priority"),
                            format!(
                                "found {:?} again, expected each priority once",
                                class.priority.as_str()
                            ),
                        );
                    }
                }
                let sum: f64 = traffic.classes.iter().map(|class| class.share.0).sum();
                if (sum - 1.0).abs() > 1e-9 {
                    c.fail(
                        "traffic.classes",
                        format!("found shares summing to {sum}, expected 1"),
                    );
                }
            }
            let mut last = Duration::ZERO;
            for (i, phase) in traffic.phase.iter().enumerate() {
                let at = format!("traffic.phase[{i}].at");
                c.within(&at, phase.at, end);
                c.ordered(&at, phase.at, last);
                last = phase.at;
                if let Some(until) = phase.until {
                    let path = format!("traffic.phase[{i}].until");
                    if until <= phase.at {
                        c.fail(
                            &path,
                            format!(
                                "found {until:?}, expected after the ramp's start `at` ({:?})",
                                phase.at
                            ),
                        );
                    }
                    c.within(&path, until, end);
                    last = last.max(until);
                }
            }
        }
        if let Some(slow) = self.policies.slow_call {
            c.positive("policies.slow_call", slow);
        }
        if let Some(bulk) = &self.bulk {
            if bulk.backoff.is_empty() {
                c.fail("bulk.backoff", "found [], expected at least one wait");
            }
            c.positive("bulk.timeout", bulk.timeout);
            c.positive("bulk.pause", bulk.pause);
        }
    }
}

impl Sweep {
    /// Checks that need the scenario it is in: a healthy workload with
    /// traffic, degraded before the end of the run.
    fn validate(&self, scenario: &Scenario, c: &mut Checks<'_>) {
        if self.at >= scenario.duration {
            c.fail(
                "sweep.at",
                format!(
                    "found {:?}, expected before the end of the run ({:?})",
                    self.at, scenario.duration
                ),
            );
        }
        if scenario.traffic.is_none() {
            c.fail("sweep", "a sweep needs `[traffic]`");
        }
        if !scenario.dependency.phase.is_empty() {
            c.fail(
                "dependency.phase",
                "a sweep's workload is healthy: its cells add the phases",
            );
        }
        if self.kinds.is_empty() {
            c.fail("sweep.kinds", "found [], expected at least one kind");
        }
        for (i, k) in self.kinds.iter().enumerate() {
            let field = format!("sweep.kinds[{i}].severities");
            if k.severities.is_empty() {
                c.fail(&field, "found [], expected at least one severity");
            }
            for (j, &s) in k.severities.iter().enumerate() {
                if !(0.0..1.0).contains(&s) {
                    c.fail(&field, format!("found {s}, expected a severity in [0, 1)"));
                } else if j > 0 && s <= k.severities[j - 1] {
                    c.fail(
                        &field,
                        format!(
                            "found {s} after {}, expected rising severities",
                            k.severities[j - 1]
                        ),
                    );
                }
            }
        }
    }
}

/// The keys `[policies]` takes.
fn expected() -> Vec<String> {
    let mut keys = vec!["slow_call".to_owned()];
    keys.extend(
        rows::all()
            .iter()
            .filter(|row| row.takes_override())
            .map(|row| row.name().to_owned()),
    );
    keys
}

impl<'de> Deserialize<'de> for PolicyParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PolicyParams;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of `slow_call` and policy tables named after rows")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PolicyParams, A::Error> {
                let mut params = PolicyParams::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "slow_call" {
                        let d: humantime_serde::Serde<Duration> = map.next_value()?;
                        params.slow_call = Some(d.into_inner());
                        continue;
                    }
                    match rows::named(&key).filter(|row| row.takes_override()) {
                        Some(_) => {
                            let config: PolicyConfig = map.next_value()?;
                            params.overrides.insert(key, config);
                        }
                        None => {
                            let keys: Vec<String> =
                                expected().iter().map(|k| format!("`{k}`")).collect();
                            return Err(de::Error::custom(format_args!(
                                "unknown field `{key}`, expected one of {}",
                                keys.join(", ")
                            )));
                        }
                    }
                }
                Ok(params)
            }
        }
        d.deserialize_map(V)
    }
}
