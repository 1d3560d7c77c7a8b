//! Scenarios as data: what the dependency does over time, and what the
//! callers send it.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

/// A scenario: a modelled dependency and the traffic sent to it, over time.
///
/// Written in TOML; see the files in the repository's `scenarios/` folder,
/// which are embedded as [`Scenario::builtin`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A short name, used on the command line (`--scenario brownout`).
    pub name: String,
    /// One line on what happens and what should show.
    #[serde(default)]
    pub about: String,
    /// How long to simulate.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// When the dependency can serve fully again, if it is hurt: time to
    /// recover is measured from here.
    #[serde(default, with = "humantime_serde")]
    pub recovers_at: Option<Duration>,
    /// The part of the run the summary figures cover (default: all of it).
    #[serde(default)]
    pub measure: Option<Span>,
    /// The dependency.
    pub dependency: Dependency,
    /// Interactive callers: open-loop arrivals, timeouts, retries.
    #[serde(default)]
    pub traffic: Option<Traffic>,
    /// Queue consumers: a backlog worked through by a fixed set of
    /// consumers, each item tried a few times before it is dead-lettered.
    #[serde(default)]
    pub bulk: Option<Bulk>,
    /// How the compared policies are sized for this scenario.
    #[serde(default)]
    pub policies: PolicyParams,
}

/// A stretch of simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    /// Start.
    #[serde(with = "humantime_serde")]
    pub from: Duration,
    /// End.
    #[serde(with = "humantime_serde")]
    pub to: Duration,
}

/// The modelled dependency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    /// Requests it serves at once.
    pub workers: Count,
    /// How long serving one request takes.
    pub service: Latency,
    /// Requests that may wait for a worker; more are refused at once with an
    /// overload error. Default 0.
    #[serde(default)]
    pub queue: u32,
    /// How long a refusal takes to arrive. Default 2 ms.
    #[serde(default = "default_refuse_latency", with = "humantime_serde")]
    pub refuse_latency: Duration,
    /// Share of served requests answered with an overload error (a 5xx).
    #[serde(default)]
    pub overload_errors: Fraction,
    /// Share of served requests answered with a client error (a 4xx, a
    /// declined card): not evidence about the dependency.
    #[serde(default)]
    pub client_errors: Fraction,
    /// A cache that must warm up after a cold start.
    #[serde(default)]
    pub cold: Option<Cold>,
    /// Changes over time, in order.
    #[serde(default)]
    pub phase: Vec<Phase>,
}

fn default_refuse_latency() -> Duration {
    Duration::from_millis(2)
}

/// A latency distribution: log-normal with this median and 99th percentile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// The median.
    #[serde(with = "humantime_serde")]
    pub median: Duration,
    /// The 99th percentile, at least the median.
    #[serde(with = "humantime_serde")]
    pub p99: Duration,
}

/// How a cold dependency warms: answers take `latency` (uniform between the
/// two) when fully cold, blending into the normal service time as it serves
/// requests, and cooling again when left idle.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cold {
    /// Requests it must serve to be fully warm.
    pub warm_after: Count,
    /// The cold answer time, uniform between the two.
    #[serde(with = "humantime_serde")]
    pub slowest: Duration,
    /// See `slowest`.
    #[serde(with = "humantime_serde")]
    pub fastest: Duration,
    /// Idle time in which half the warmth is lost.
    #[serde(with = "humantime_serde")]
    pub cool_half_life: Duration,
}

/// A change to the dependency at a point in time. Fields left out keep
/// their current value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// When.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// New worker count.
    #[serde(default)]
    pub workers: Option<Count>,
    /// New service time.
    #[serde(default)]
    pub service: Option<Latency>,
    /// New share of overload errors.
    #[serde(default)]
    pub overload_errors: Option<Fraction>,
    /// New share of client errors.
    #[serde(default)]
    pub client_errors: Option<Fraction>,
    /// Down (`"refuse"`: connections refused at once; `"hang"`: no answer
    /// ever) or back up (`"none"`).
    #[serde(default)]
    pub outage: Option<Outage>,
    /// Start cold: the cache is empty (needs `dependency.cold`).
    #[serde(default)]
    pub cold: bool,
    /// Flap for the length of this phase: fall over for `down`, come back
    /// and serve `serve` requests, fall over again, and so on. The next
    /// phase ends the flapping.
    #[serde(default)]
    pub flap: Option<Flap>,
}

/// How the dependency is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outage {
    /// Up.
    None,
    /// Every request is refused at once (connection refused, 503).
    Refuse,
    /// Every request is accepted and never answered (a black hole).
    Hang,
}

/// A dependency that recovers, serves a few requests, and falls over again.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flap {
    /// Requests served while up.
    pub serve: Count,
    /// How long it stays down each time.
    #[serde(with = "humantime_serde")]
    pub down: Duration,
}

/// Interactive callers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    /// Client instances, each with its own limiter, sharing the dependency.
    #[serde(default = "one")]
    pub instances: Count,
    /// Arrivals per second across all instances (Poisson).
    pub rate: Rate,
    /// Per-attempt timeout.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// The timeout a caller gives a call admitted as a probe (default: the
    /// per-attempt timeout).
    #[serde(default, with = "humantime_serde")]
    pub probe_timeout: Option<Duration>,
    /// The caller's overall ceiling for one request, retries included.
    #[serde(with = "humantime_serde")]
    pub deadline: Duration,
    /// Attempts per request, the first included. Default 1.
    #[serde(default = "one")]
    pub attempts: Count,
    /// Wait before a retry.
    #[serde(default, with = "humantime_serde")]
    pub backoff: Duration,
    /// Retries may be at most this share of first attempts. Default 0.1.
    #[serde(default = "default_retry_budget")]
    pub retry_budget: Fraction,
    /// Rate changes over time.
    #[serde(default)]
    pub phase: Vec<RatePhase>,
}

fn one() -> Count {
    Count(1)
}

fn default_retry_budget() -> Fraction {
    Fraction(0.1)
}

/// A change of arrival rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePhase {
    /// When.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// The new rate.
    pub rate: Rate,
}

/// Queue consumers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bulk {
    /// Consumers working at once.
    pub consumers: Count,
    /// Items arriving per second.
    pub rate: Rate,
    /// Items waiting at the start. Default 0.
    #[serde(default)]
    pub backlog: u32,
    /// Attempts per item before it is dead-lettered.
    pub attempts: Count,
    /// Wait after each failed attempt (the last is repeated if there are
    /// more attempts than waits).
    #[serde(with = "duration_list")]
    pub backoff: Vec<Duration>,
    /// Per-attempt timeout.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// How often a paused consumer looks again when the limiter does not
    /// say how long to wait.
    #[serde(with = "humantime_serde")]
    pub pause: Duration,
    /// While a breaker is half-open, probe with a throwaway request instead
    /// of a real item. Default true.
    #[serde(default = "yes")]
    pub active_probe: bool,
}

fn yes() -> bool {
    true
}

/// A list of durations written as humans write them.
mod duration_list {
    use std::time::Duration;

    use humantime_serde::Serde;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|d| Serde::from(*d)))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        let v: Vec<Serde<Duration>> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(Serde::into_inner).collect())
    }
}

/// How the compared policies are sized for a scenario.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyParams {
    /// The static bulkhead's size per instance (default: the dependency's
    /// workers divided among the instances).
    #[serde(default)]
    pub bulkhead: Option<Count>,
    /// A success slower than this is a slow call (AIMD's drop threshold, the
    /// breakers' slow-call threshold). Default: 4× the median service time.
    #[serde(default, with = "humantime_serde")]
    pub slow_call: Option<Duration>,
}

/// A whole number of at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Count(pub u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        if n == 0 {
            return Err(de::Error::custom("must be at least 1"));
        }
        Ok(Count(n))
    }
}

/// A rate per second: finite, at least 0.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize)]
pub struct Rate(pub f64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = f64::deserialize(d)?;
        if !r.is_finite() || r < 0.0 {
            return Err(de::Error::custom(format_args!(
                "found {r}, expected a rate per second of at least 0"
            )));
        }
        Ok(Rate(r))
    }
}

/// A share in `[0, 1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize)]
pub struct Fraction(pub f64);

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = f64::deserialize(d)?;
        if !(0.0..=1.0).contains(&f) {
            return Err(de::Error::custom(format_args!(
                "found {f}, expected a share in [0, 1]"
            )));
        }
        Ok(Fraction(f))
    }
}

/// A scenario file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    message: String,
}

impl ScenarioError {
    fn new(message: impl Into<String>) -> Self {
        ScenarioError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// The scenarios shipped in `scenarios/`, in the order they are compared.
const BUILTIN: [(&str, &str); 8] = [
    (
        "brownout.toml",
        include_str!("../../scenarios/brownout.toml"),
    ),
    (
        "cold-start.toml",
        include_str!("../../scenarios/cold-start.toml"),
    ),
    ("fleet.toml", include_str!("../../scenarios/fleet.toml")),
    (
        "low-traffic.toml",
        include_str!("../../scenarios/low-traffic.toml"),
    ),
    (
        "client-errors.toml",
        include_str!("../../scenarios/client-errors.toml"),
    ),
    (
        "slow-success.toml",
        include_str!("../../scenarios/slow-success.toml"),
    ),
    (
        "flapping.toml",
        include_str!("../../scenarios/flapping.toml"),
    ),
    ("bulk.toml", include_str!("../../scenarios/bulk.toml")),
];

impl Scenario {
    /// Read a scenario from TOML text; `origin` names it in errors (a file
    /// path).
    ///
    /// # Errors
    ///
    /// A [`ScenarioError`] naming the line and the field at fault: an
    /// unknown field, a missing one, a value out of range (a negative rate),
    /// phases out of order or past the end of the run.
    pub fn from_toml(origin: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| {
            let place = e
                .span()
                .map(|span| {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!(", line {line}")
                })
                .unwrap_or_default();
            ScenarioError::new(format!("{origin}{place}: {}", e.message()))
        })?;
        scenario
            .validate()
            .map_err(|e| ScenarioError::new(format!("{origin}: {e}")))?;
        Ok(scenario)
    }

    /// Read a scenario from a TOML file.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or see [`Scenario::from_toml`].
    pub fn from_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::new(format!("{}: {e}", path.display())))?;
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

    /// Checks that span fields: phases in order and inside the run, a
    /// median under its p99, something to send.
    fn validate(&self) -> Result<(), String> {
        let within = |what: &str, at: Duration| {
            if at > self.duration {
                Err(format!(
                    "`{what}` is {at:?}, after the end of the run ({:?})",
                    self.duration
                ))
            } else {
                Ok(())
            }
        };
        if self.duration.is_zero() || self.duration > Duration::from_secs(7 * 86_400) {
            return Err("`duration` must be above 0 and at most 7 days".into());
        }
        if self.traffic.is_none() && self.bulk.is_none() {
            return Err("a scenario needs `[traffic]` or `[bulk]` (or both)".into());
        }
        if let Some(at) = self.recovers_at {
            within("recovers_at", at)?;
        }
        if let Some(span) = self.measure {
            within("measure.to", span.to)?;
            if span.from >= span.to {
                return Err("`measure.from` must come before `measure.to`".into());
            }
        }
        check_latency("dependency.service", &self.dependency.service)?;
        let mut last = Duration::ZERO;
        for (i, phase) in self.dependency.phase.iter().enumerate() {
            within(&format!("dependency.phase[{i}].at"), phase.at)?;
            if phase.at < last {
                return Err(format!(
                    "`dependency.phase[{i}].at` ({:?}) comes before the phase above it",
                    phase.at
                ));
            }
            last = phase.at;
            if let Some(service) = &phase.service {
                check_latency(&format!("dependency.phase[{i}].service"), service)?;
            }
            if phase.cold && self.dependency.cold.is_none() {
                return Err(format!(
                    "`dependency.phase[{i}].cold` needs a `[dependency.cold]` table"
                ));
            }
        }
        if let Some(cold) = &self.dependency.cold {
            if cold.fastest > cold.slowest {
                return Err("`dependency.cold.fastest` is above `slowest`".into());
            }
            if cold.cool_half_life.is_zero() {
                return Err("`dependency.cold.cool_half_life` must be above 0".into());
            }
        }
        if let Some(traffic) = &self.traffic {
            for (name, d) in [
                ("traffic.timeout", traffic.timeout),
                ("traffic.deadline", traffic.deadline),
            ] {
                if d.is_zero() {
                    return Err(format!("`{name}` must be above 0"));
                }
            }
            let mut last = Duration::ZERO;
            for (i, phase) in traffic.phase.iter().enumerate() {
                within(&format!("traffic.phase[{i}].at"), phase.at)?;
                if phase.at < last {
                    return Err(format!("`traffic.phase[{i}].at` is out of order"));
                }
                last = phase.at;
            }
        }
        if let Some(bulk) = &self.bulk {
            if bulk.backoff.is_empty() {
                return Err("`bulk.backoff` needs at least one wait".into());
            }
            if bulk.timeout.is_zero() || bulk.pause.is_zero() {
                return Err("`bulk.timeout` and `bulk.pause` must be above 0".into());
            }
        }
        Ok(())
    }
}

fn check_latency(field: &str, latency: &Latency) -> Result<(), String> {
    if latency.median.is_zero() {
        return Err(format!("`{field}.median` must be above 0"));
    }
    if latency.p99 < latency.median {
        return Err(format!("`{field}.p99` is below its median"));
    }
    Ok(())
}
