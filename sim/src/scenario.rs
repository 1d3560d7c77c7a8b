//! Scenarios as data: what the dependency does over time, what the callers
//! send it, and the callers' own worker pools. Reading one from a file,
//! and the checks over what was read, are `load`'s.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::budget::RetryBudget;
use super::overrides::PolicyParams;
use super::sweep::Sweep;
use super::values::{Count, Fraction, Latency, Rate, Span, Stall};
use rheostat::limiter::QueueOrder;
use rheostat::priority::Priority;

/// A scenario: a modelled dependency and the traffic sent to it, over time.
///
/// Written in TOML; see the files in the repository's `scenarios/` folder,
/// which are embedded as [`Scenario::builtin`], and `docs/comparison.md`
/// there for every key.
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
    /// recover is measured from here. Left out: the scenario has no fault
    /// to recover from.
    #[serde(default, with = "humantime_serde")]
    pub recovers_at: Option<Duration>,
    /// The part of the run the summary figures cover (default: all of it).
    #[serde(default)]
    pub measure: Option<Span>,
    /// A healthy stretch of the run whose median success latency each
    /// row's measured median is compared with (`p50 ×ref`). Left out: no
    /// comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_reference: Option<Span>,
    /// The dependency.
    pub dependency: Dependency,
    /// Interactive callers: open-loop arrivals, timeouts, retries, and the
    /// worker pool they share with a healthy endpoint.
    #[serde(default)]
    pub traffic: Option<Traffic>,
    /// Queue consumers: a backlog worked through by a fixed set of
    /// consumers, each item tried a few times before it is dead-lettered.
    #[serde(default)]
    pub bulk: Option<Bulk>,
    /// How the compared policies are set up for this scenario: the
    /// slow-call threshold, and any row's policy replaced by one written as
    /// a configuration file writes it (`[policies.aimd]`).
    #[serde(default)]
    pub policies: PolicyParams,
    /// A family, not one scenario: the kinds and severities of degradation
    /// to run this healthy workload at ([`crate::sweep`]). Left out: one
    /// scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
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
    /// Share of requests that are accepted and never answered: each hangs
    /// until its caller's timeout. A hung request holds no worker of the
    /// dependency (it is lost on the way), only the caller's.
    #[serde(default)]
    pub hang: Fraction,
    /// A share of served requests that stall: each holds its worker for a
    /// time drawn uniformly from a span far beyond the service time (a
    /// garbage-collection pause, a slow disk, a lock held long), then
    /// answers as any other. Left out: none stall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// New share of requests that hang.
    #[serde(default)]
    pub hang: Option<Fraction>,
    /// New stalls (`{ share = 0.0, .. }` for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
    /// Down (`"refuse"`: connections refused at once; `"hang"`: no answer
    /// ever) or back up (`"none"`).
    #[serde(default)]
    pub outage: Option<Outage>,
    /// Start cold: the cache is empty (needs `dependency.cold`).
    #[serde(default)]
    pub cold: bool,
    /// Flap for the length of this phase: fall over for `down`, come back
    /// (for `up`, or for `serve` requests), fall over again, and so on. The
    /// next phase ends the flapping.
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

/// A dependency that recovers, serves a while, and falls over again. Give
/// `serve` (it falls over at the request after that many) or `up` (it falls
/// over after that long), not both.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flap {
    /// Requests served while up.
    #[serde(default)]
    pub serve: Option<Count>,
    /// How long it stays up each time.
    #[serde(default, with = "humantime_serde")]
    pub up: Option<Duration>,
    /// How long it stays down each time.
    #[serde(with = "humantime_serde")]
    pub down: Duration,
}

/// Interactive callers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    /// Client instances, each with its own limiter and worker pool, sharing
    /// the dependency.
    #[serde(default = "one")]
    pub instances: Count,
    /// Arrivals per second across all instances (Poisson).
    pub rate: Rate,
    /// Per-attempt timeout.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// The caller's overall ceiling for one request, retries included.
    #[serde(with = "humantime_serde")]
    pub deadline: Duration,
    /// Attempts per request, the first included. Default 1. This, and
    /// `backoff`, `retry_budget` and `retry_rejected`, are how the callers
    /// of every row retry but `breaker+gradient+retry`'s, which retry as
    /// the limiter's own retry policy decides.
    #[serde(default = "one")]
    pub attempts: Count,
    /// Wait before a retry.
    #[serde(default, with = "humantime_serde")]
    pub backoff: Duration,
    /// How many retries may be sent: a share of recent first attempts plus
    /// a minimum per second, over a sliding window (`0.2`, or
    /// `{ ratio = 0.2, min_per_second = 10, ttl = "10s" }`), or `"none"`
    /// for no budget at all. Default: tower's and Finagle's, 20% plus 10
    /// per second over 10 s.
    #[serde(default)]
    pub retry_budget: RetryBudget,
    /// How long a refusal by the limiter holds the caller's worker before
    /// the caller moves on (builds its fallback, or backs off and retries).
    /// Default 1 ms.
    #[serde(default = "default_reject_cost", with = "humantime_serde")]
    pub reject_cost: Duration,
    /// Whether callers retry a refusal by the limiter, as they retry a
    /// failure (same attempts, backoff and budget). Default false.
    #[serde(default)]
    pub retry_rejected: bool,
    /// Workers per instance, shared by requests to the dependency and to
    /// the healthy endpoint; a request that finds none free fails at once.
    /// Default 200.
    #[serde(default = "default_pool")]
    pub pool: Count,
    /// The healthy endpoint the pool also serves.
    #[serde(default)]
    pub healthy: Healthy,
    /// Rate changes over time: a step, or a linear ramp (`until`).
    #[serde(default)]
    pub phase: Vec<RatePhase>,
    /// Classes of requests, each a share of the arrivals (the shares sum
    /// to 1): each arrival draws its class. The rows with priorities
    /// acquire with it; the others ignore it. Left out: no classes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<TrafficClass>,
    /// Callers wait in the limiter's queue for a slot (`Limiter::acquire`)
    /// instead of failing at once when the limit is reached. Left out: they
    /// fail at once (`Limiter::try_acquire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
}

/// How callers wait in the limiter's queue.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// The queue's order (`"fifo"` or `"lifo"`): `Builder::queue`.
    pub order: QueueOrder,
    /// How many may wait; more are refused at once. Default 1024, the
    /// limiter's.
    #[serde(default = "default_max_waiters")]
    pub max_waiters: u32,
    /// How long a caller waits before it gives up (a refusal). Default:
    /// until its request's deadline.
    #[serde(default, with = "humantime_serde")]
    pub max_wait: Option<Duration>,
}

fn default_max_waiters() -> u32 {
    1024
}

/// A class of requests: how critical, and its share of the arrivals.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficClass {
    /// How critical (`critical_plus`, `critical`, `sheddable_plus`,
    /// `sheddable`).
    pub priority: Priority,
    /// Its share of the arrivals.
    pub share: Fraction,
}

fn one() -> Count {
    Count(1)
}

fn default_pool() -> Count {
    Count(200)
}

fn default_reject_cost() -> Duration {
    Duration::from_millis(1)
}

/// A second endpoint of the caller's, healthy throughout, served by the
/// same worker pool as the calls to the dependency.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Healthy {
    /// Its arrivals per second across all instances (Poisson). Default: the
    /// same as `traffic.rate`.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// How long each of its requests holds a worker. Default 20 ms.
    #[serde(default = "default_healthy_latency", with = "humantime_serde")]
    pub latency: Duration,
}

impl Default for Healthy {
    fn default() -> Self {
        Healthy {
            rate: None,
            latency: default_healthy_latency(),
        }
    }
}

fn default_healthy_latency() -> Duration {
    Duration::from_millis(20)
}

/// A change of arrival rate: a step at `at`, or, with `until`, a linear
/// ramp from the rate before `at` to `rate` at `until`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePhase {
    /// When.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// The new rate.
    pub rate: Rate,
    /// The end of a ramp.
    #[serde(default, with = "humantime_serde")]
    pub until: Option<Duration>,
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

impl Scenario {
    /// Whether its interactive requests have classes.
    pub(crate) fn has_classes(&self) -> bool {
        self.traffic.as_ref().is_some_and(|t| !t.classes.is_empty())
    }

    /// The number of client instances.
    pub(crate) fn instances(&self) -> u32 {
        self.traffic.as_ref().map_or(1, |t| t.instances.0)
    }

    /// The span the summary figures cover, in seconds.
    pub(crate) fn measured(&self) -> (f64, f64) {
        self.measure
            .map_or((0.0, self.duration.as_secs_f64()), |m| {
                (m.from.as_secs_f64(), m.to.as_secs_f64())
            })
    }
}
