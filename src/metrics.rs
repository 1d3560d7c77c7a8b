//! Metrics through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! [`MetricsObserver`] is an [`Observer`] that records, for one limiter,
//! these series, each metric with one set of label names:
//!
//! | metric | kind | labels | meaning |
//! | --- | --- | --- | --- |
//! | `rheostat_limit` | gauge | `limiter` | the gate's concurrency limit (`+Inf` when there is none) |
//! | `rheostat_in_flight` | gauge | `limiter` | calls in flight |
//! | `rheostat_admit_probability` | gauge | `limiter` | the gate's admit probability, 0 to 1 |
//! | `rheostat_breaker_state` | gauge | `limiter` | the breaker's state (see below); only for policies with a breaker |
//! | `rheostat_override` | gauge | `limiter`, `kind` | 1 while an operator's [override](crate::overrides) of that `kind` (`force_open`, `force_closed`, `cap`, `metrics_only`) is in force, else 0; registered at a limiter's first override |
//! | `rheostat_timeout_seconds` | gauge | `limiter` | the attempt timeout in force ([`Timeouts::in_force`](crate::timeout::Timeouts::in_force): a [learned](crate::timeout) one, within its ceiling); only for a limiter with a timeout |
//! | `rheostat_timeout_ceiling_cutting` | gauge | `limiter` | 1 while a learned timeout's ceiling cuts every call (calls have ended at it for a window, none answering within it: see [`crate::timeout`](crate::timeout#when-the-ceiling-cuts-every-call)), else 0; only for a limiter whose timeout is learned |
//! | `rheostat_calls_total` | counter | `limiter`, `outcome` | calls by `outcome`: `success`, `overload`, `ignored` (finished calls) and `rejected` (refused by the limiter) |
//! | `rheostat_rejected_total` | counter | `limiter`, `reason` | the calls refused, by `reason` (see below) |
//! | `rheostat_transitions_total` | counter | `limiter`, `from`, `to` | breaker state changes |
//! | `rheostat_call_duration_seconds` | histogram | `limiter` | latency of finished calls, in seconds |
//! | `rheostat_admitted_total` | counter | `limiter`, `class` | calls admitted, by [class](crate::priority); only for a limiter with priorities |
//! | `rheostat_class_rejected_total` | counter | `limiter`, `class` | calls refused, by class; only for a limiter with priorities |
//! | `rheostat_retries_total` | counter | `limiter`, `outcome` | what the [retry policy](crate::retry) decided after each failed attempt: `sent`, `budget_exhausted`, `deadline`, `not_retryable`, `rejected`, `exhausted` ([`RetryOutcome::as_str`]); registered by [`Builder::metrics`] for a limiter with a retry policy, and never for one without |
//! | `rheostat_hedges_total` | counter | `limiter`, `result` | [hedges](crate::retry::Hedge): `sent`, then `won` or `lost` for each sent; or why none was sent when an attempt had run for the delay: `congested`, `in_order` (counted at each weighing while no call sent later has succeeded), `budget_exhausted`, `refused` (no free slot), `deadline`, `exhausted` ([`HedgeOutcome::as_str`]); only for a limiter that hedges |
//! | `rheostat_hedge_delay_seconds` | gauge | `limiter` | the hedge delay in force ([`Timeouts::hedge`](crate::timeout::Timeouts::hedge): typed, or learned); only for a limiter that hedges, from the first delay learned |
//!
//! `rheostat_breaker_state` is 0 closed, 1 open, 2 half-open, 3 forced open,
//! 4 forced closed, 5 disabled, 6 metrics-only ([`state_value`]). A limiter
//! whose policy has no breaker (a bulkhead, AIMD alone) has no such series,
//! rather than one that reads "closed". Every series follows the policy in
//! force: when a policy is swapped ([`Limiter::update`](crate::Limiter::update),
//! a live file's new `policy` table), the series reads the new breaker's
//! state (closed, for a breaker just built), and once the policy in force
//! has no breaker, `NaN` (the facade cannot remove a series; `NaN` equals
//! no state, so a query for any state, `== 1` for open, finds none).
//!
//! A rejection's `reason` is [`RejectReason::as_str`]: `limit_reached`,
//! `throttled` (client-side throttling, or a shedding Vegas or Gradient),
//! `ramping` (a breaker's ramp after it closed), `open`, `queue_full`,
//! `timed_out`. Each is registered when the observer is made, so a rate
//! over it reads 0, not "no data", until the first rejection. A refused
//! call counts once in `rheostat_calls_total{outcome="rejected"}` and once
//! in `rheostat_rejected_total` by its reason; on a limiter with
//! [priorities](crate::priority), also once in
//! `rheostat_class_rejected_total` by its class (its name). Reason and
//! class are two metrics rather than one series per pair: a limiter with
//! the four default classes has 6 + 4 series of rejections, where a series
//! per reason and class made 30, most of them forever zero.
//!
//! `rheostat_retries_total` counts decisions about retries: a first
//! attempt the limiter refused is a rejected call (above), not a retry; a
//! retry the limiter refused, or a failure after which its breaker opened,
//! is `outcome="rejected"`.
//!
//! `rheostat_limit` is `+Inf` for a gate with no concurrency limit (a
//! throttle, a breaker alone), never [`MAX_LIMIT`]'s 2147483647, which
//! would read as a limit: `metrics-exporter-prometheus` writes it `inf`,
//! which Prometheus reads as `+Inf`, and a query for the limit of limited
//! gates can drop it with `rheostat_limit < +Inf`. The gate's `Debug` (and
//! a snapshot's) reads `limit: unlimited`.
//!
//! # Keyed limiters
//!
//! The `metrics` facade cannot remove a series, so a series labelled with a
//! key outlives the key's limiter when it is evicted, and keys chosen by
//! clients (hosts, routes) would become label values without bound. A
//! [keyed set](crate::keyed)'s factory therefore labels by what it chose,
//! not by the key: the keys it makes alike share one [`SummedMetrics`]
//! ([`Builder::metrics_summed`]), a single set of the series above with
//! `rheostat_in_flight`, the counters and the histogram summed over those
//! keys, and without `rheostat_limit`, `rheostat_admit_probability` and
//! `rheostat_breaker_state`, which mean nothing summed. The series are
//! then bounded by the factory's choices (with the `config` feature,
//! `KeyedConfig::metrics` labels a key configured by name `limiter=<key>`
//! and every key made from the default `limiter="default"`: bounded by the
//! names in the configuration), however many keys come and go. (A factory
//! that gives each key [`Builder::metrics`] labels each key by itself
//! instead, and its series stay after it is evicted.)
//!
//! The histogram's buckets are the recorder's to choose; for
//! `metrics-exporter-prometheus`, buckets around a call's timeout serve
//! (see the README's "From a file to a tower client").
//!
//! Every handle but one is registered once, when the observer is made, with
//! the recorder installed then; a call costs a few atomic updates and no
//! lookups. The exception is `rheostat_transitions_total`, whose
//! `(from, to)` pairs are registered when a transition happens, with the
//! recorder installed then (in practice the global one): transitions are
//! rare (seconds apart at the very least), and registering all 42 pairs up
//! front would publish 42 series per limiter, most of them forever zero.
//!
//! Install a recorder (a Prometheus exporter, say) as the `metrics` crate
//! describes; without one every update is a no-op.
//!
//! # Examples
//!
//! ```
//! use rheostat::{algorithms::Fixed, Limiter};
//!
//! // Labelled `limiter="payments"`, whichever comes first.
//! let limiter = Limiter::builder(Fixed::new(10)?)
//!     .metrics()
//!     .name("payments")
//!     .build()?;
//! limiter.try_acquire()?.success();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ::metrics::{Counter, Gauge, Histogram, SharedString};

use crate::algorithms::{Algorithm, BreakerState, Gate, Outcome, Transition, MAX_LIMIT};
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::limiter::{Builder, Named};
use crate::observe::Observer;
use crate::overrides::Override;
use crate::priority::Class;
use crate::retry::{HedgeOutcome, RetryOutcome};
use crate::snapshot::Snapshot;
use describe::describe;

mod describe;
mod summed;

pub use summed::SummedMetrics;

/// Feeds one limiter's figures to the `metrics` facade; see the [module
/// documentation](self) for the metrics and their labels.
pub struct MetricsObserver {
    limiter: SharedString,
    /// Shared by the limiters of a [`SummedMetrics`]: in-flight moves by
    /// increments, and there are no per-limiter gauges.
    summed: bool,
    limit: Gauge,
    in_flight: Gauge,
    admit_probability: Gauge,
    /// Registered at the first breaker state set: never for a policy
    /// without a breaker.
    breaker_state: OnceLock<Gauge>,
    /// Registered when the limiter is built with a timeout: never for one
    /// without.
    timeout: OnceLock<Gauge>,
    /// Registered when built with a learned timeout: never for one without.
    cutting: OnceLock<Gauge>,
    /// By [`Override::KINDS`]: registered at the first override, never for
    /// a limiter without one.
    overrides: OnceLock<[Gauge; Override::KINDS.len()]>,
    success: Counter,
    overload: Counter,
    ignored: Counter,
    /// `rheostat_calls_total{outcome="rejected"}`.
    refused: Counter,
    /// `rheostat_rejected_total`, by [`REASONS`].
    rejected: [Counter; REASONS.len()],
    duration: Histogram,
    /// By [`RetryOutcome::ALL`]: registered for a limiter with a retry
    /// policy, never for one without.
    retries: OnceLock<[Counter; RetryOutcome::ALL.len()]>,
    /// By [`HedgeOutcome::ALL`]: registered for a limiter that hedges.
    hedges: OnceLock<[Counter; HedgeOutcome::ALL.len()]>,
    /// Registered at the first hedge delay known.
    hedge_delay: OnceLock<Gauge>,
    /// Per class, most critical first: admissions and rejections.
    /// Registered for a limiter with priorities.
    classes: OnceLock<Box<[ClassCounters]>>,
}

struct ClassCounters {
    admitted: Counter,
    rejected: Counter,
}

/// Every rejection reason, in the order of [`MetricsObserver::rejected`].
const REASONS: [RejectReason; 6] = [
    RejectReason::LimitReached,
    RejectReason::Throttled,
    RejectReason::Ramping,
    RejectReason::Open,
    RejectReason::QueueFull,
    RejectReason::TimedOut,
];

impl MetricsObserver {
    /// An observer whose metrics carry `limiter=<limiter>`, with every
    /// handle registered now, with the recorder installed now.
    pub fn new(limiter: impl Into<Cow<'static, str>>) -> Self {
        Self::with(shared_string(limiter.into()), false)
    }

    /// The observer that the limiters of a [`SummedMetrics`] share,
    /// labelled `limiter=<limiter>`: counters, the latency histogram and
    /// in-flight summed over them, and no gauge of a limiter's own (limit,
    /// admit probability, breaker state), which would mean nothing summed.
    fn summed(limiter: Cow<'static, str>) -> Self {
        Self::with(shared_string(limiter), true)
    }

    fn with(limiter: SharedString, summed: bool) -> Self {
        describe();
        let calls = |outcome: &'static str| {
            ::metrics::counter!(
                "rheostat_calls_total",
                "limiter" => limiter.clone(),
                "outcome" => outcome
            )
        };
        let own = |name: &'static str| {
            if summed {
                Gauge::noop()
            } else {
                ::metrics::gauge!(name, "limiter" => limiter.clone())
            }
        };
        MetricsObserver {
            summed,
            limit: own("rheostat_limit"),
            in_flight: ::metrics::gauge!("rheostat_in_flight", "limiter" => limiter.clone()),
            admit_probability: own("rheostat_admit_probability"),
            breaker_state: OnceLock::new(),
            timeout: OnceLock::new(),
            cutting: OnceLock::new(),
            overrides: OnceLock::new(),
            success: calls("success"),
            overload: calls("overload"),
            ignored: calls("ignored"),
            refused: calls("rejected"),
            rejected: REASONS.map(|reason| {
                ::metrics::counter!(
                    "rheostat_rejected_total",
                    "limiter" => limiter.clone(),
                    "reason" => reason.as_str()
                )
            }),
            duration: ::metrics::histogram!(
                "rheostat_call_duration_seconds",
                "limiter" => limiter.clone()
            ),
            retries: OnceLock::new(),
            hedges: OnceLock::new(),
            hedge_delay: OnceLock::new(),
            classes: OnceLock::new(),
            limiter,
        }
    }

    /// Register the series labelled by class (`rheostat_admitted_total` and
    /// `rheostat_class_rejected_total`), one of each per class name, most
    /// critical first, with the recorder installed now
    /// ([`Builder::metrics`] does it for a limiter with priorities).
    pub fn register_classes(&self, names: &[String]) {
        let _ = self.classes.get_or_init(|| {
            names
                .iter()
                .map(|name| {
                    let class = SharedString::from(name.clone());
                    ClassCounters {
                        admitted: ::metrics::counter!(
                            "rheostat_admitted_total",
                            "limiter" => self.limiter.clone(),
                            "class" => class.clone()
                        ),
                        rejected: ::metrics::counter!(
                            "rheostat_class_rejected_total",
                            "limiter" => self.limiter.clone(),
                            "class" => class
                        ),
                    }
                })
                .collect()
        });
    }

    /// Register what a limiter about to be built has: its breaker's state,
    /// its retry decisions, its classes, a learned timeout's ceiling (at 0).
    fn register(&self, named: &Named<'_>) {
        if named.learns_timeout {
            self.ceiling_cutting(Duration::ZERO, false);
        }
        if let Some(state) = named.state {
            if !self.summed {
                self.set_breaker_state(state);
            }
        }
        if named.retries {
            self.register_retries();
        }
        if let Some(typed) = named.hedges {
            let _ = self.hedges();
            if let Some(delay) = typed {
                self.hedge_delay_changed(delay);
            }
        }
        if !named.classes.is_empty() {
            self.register_classes(&named.classes);
        }
    }

    /// Register `rheostat_retries_total`, one series per outcome, with the
    /// recorder installed now ([`Builder::metrics`] does it for a limiter
    /// with a retry policy; otherwise the first retry decision does).
    pub fn register_retries(&self) {
        let _ = self.retries();
    }

    fn retries(&self) -> &[Counter; RetryOutcome::ALL.len()] {
        self.retries.get_or_init(|| {
            RetryOutcome::ALL.map(|o| {
                ::metrics::counter!(
                    "rheostat_retries_total",
                    "limiter" => self.limiter.clone(),
                    "outcome" => o.as_str()
                )
            })
        })
    }

    fn hedges(&self) -> &[Counter; HedgeOutcome::ALL.len()] {
        self.hedges.get_or_init(|| {
            HedgeOutcome::ALL.map(|o| {
                ::metrics::counter!(
                    "rheostat_hedges_total",
                    "limiter" => self.limiter.clone(),
                    "result" => o.as_str()
                )
            })
        })
    }

    /// Set `rheostat_breaker_state` (the observer sets it on every
    /// transition; this is for the state a limiter starts in).
    pub fn set_breaker_state(&self, state: BreakerState) {
        self.breaker_state
            .get_or_init(
                || ::metrics::gauge!("rheostat_breaker_state", "limiter" => self.limiter.clone()),
            )
            .set(state_value(state));
    }
}

/// The value `rheostat_breaker_state` takes for `state`: 0 closed, 1 open,
/// 2 half-open, 3 forced open, 4 forced closed, 5 disabled, 6 metrics-only.
pub fn state_value(state: BreakerState) -> f64 {
    match state {
        BreakerState::Closed => 0.0,
        BreakerState::Open => 1.0,
        BreakerState::HalfOpen => 2.0,
        BreakerState::ForcedOpen => 3.0,
        BreakerState::ForcedClosed => 4.0,
        BreakerState::Disabled => 5.0,
        BreakerState::MetricsOnly => 6.0,
        _ => -1.0,
    }
}

impl MetricsObserver {
    /// In-flight after an admission (`+1`) or a finished call (`-1`): the
    /// limiter's count, or a step of the sum over a [`SummedMetrics`].
    fn move_in_flight(&self, in_flight: u32, step: f64) {
        if self.summed {
            self.in_flight.increment(step);
        } else {
            self.in_flight.set(f64::from(in_flight));
        }
    }

    fn class(&self, class: Class) -> Option<&ClassCounters> {
        self.classes.get().and_then(|c| c.get(class.index()))
    }
}

impl Observer for MetricsObserver {
    fn admitted(&self, in_flight: u32, _probe: bool) {
        self.move_in_flight(in_flight, 1.0);
    }

    fn admitted_as(&self, class: Class, in_flight: u32, _probe: bool) {
        if let Some(counters) = self.class(class) {
            counters.admitted.increment(1);
        }
        self.move_in_flight(in_flight, 1.0);
    }

    fn rejected(&self, rejection: &Rejection) {
        let reason = rejection.reason();
        // A reason added later than this list counts as the limit's.
        let at = REASONS.iter().position(|r| *r == reason).unwrap_or(0);
        self.refused.increment(1);
        self.rejected[at].increment(1);
        if let Some(counters) = rejection.class().and_then(|class| self.class(class)) {
            counters.rejected.increment(1);
        }
    }

    fn finished(&self, outcome: Outcome, latency: Duration, in_flight: u32) {
        match outcome {
            Outcome::Success => self.success.increment(1),
            Outcome::Overload => self.overload.increment(1),
            Outcome::Ignore => self.ignored.increment(1),
        }
        self.duration.record(latency.as_secs_f64());
        self.move_in_flight(in_flight, -1.0);
    }

    fn gate_changed(&self, gate: &Gate) {
        let limit = if gate.limit >= MAX_LIMIT {
            f64::INFINITY
        } else {
            f64::from(gate.limit)
        };
        self.limit.set(limit);
        self.admit_probability.set(gate.admit_probability);
    }

    fn timeout_changed(&self, timeout: Duration) {
        if self.summed {
            // One limiter's timeout means nothing summed.
            return;
        }
        self.timeout
            .get_or_init(
                || ::metrics::gauge!("rheostat_timeout_seconds", "limiter" => self.limiter.clone()),
            )
            .set(timeout.as_secs_f64());
    }

    fn ceiling_cutting(&self, _ceiling: Duration, cutting: bool) {
        // One limiter's state means nothing summed.
        if !self.summed {
            let name = "rheostat_timeout_ceiling_cutting";
            let gauge = || ::metrics::gauge!(name, "limiter" => self.limiter.clone());
            self.cutting
                .get_or_init(gauge)
                .set(f64::from(u8::from(cutting)));
        }
    }

    fn override_applied(&self, overriding: Override, _lasting: Duration) {
        if self.summed {
            // One key's override means nothing summed.
            return;
        }
        let gauges = self.overrides.get_or_init(|| {
            Override::KINDS.map(|kind| {
                ::metrics::gauge!("rheostat_override", "limiter" => self.limiter.clone(), "kind" => kind)
            })
        });
        for (gauge, kind) in gauges.iter().zip(Override::KINDS) {
            gauge.set(if kind == overriding.as_str() {
                1.0
            } else {
                0.0
            });
        }
    }

    fn override_ended(&self, overriding: Override, _expired: bool) {
        if let Some(gauges) = self.overrides.get() {
            for (gauge, kind) in gauges.iter().zip(Override::KINDS) {
                if kind == overriding.as_str() {
                    gauge.set(0.0);
                }
            }
        }
    }

    fn policy_changed(&self, snapshot: &Snapshot) {
        if self.summed {
            return;
        }
        match snapshot.state {
            Some(state) => self.set_breaker_state(state),
            None => {
                if let Some(gauge) = self.breaker_state.get() {
                    gauge.set(f64::NAN);
                }
            }
        }
    }

    fn transition(&self, transition: &Transition) {
        ::metrics::counter!(
            "rheostat_transitions_total",
            "limiter" => self.limiter.clone(),
            "from" => transition.from.as_str(),
            "to" => transition.to.as_str()
        )
        .increment(1);
        if !self.summed {
            self.set_breaker_state(transition.to);
        }
    }

    fn hedge(&self, outcome: HedgeOutcome) {
        let counters = self.hedges();
        let at = HedgeOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(0);
        counters[at].increment(1);
    }

    fn hedge_delay_changed(&self, delay: Duration) {
        if self.summed {
            // One limiter's delay means nothing summed.
            return;
        }
        self.hedge_delay
            .get_or_init(|| {
                ::metrics::gauge!("rheostat_hedge_delay_seconds", "limiter" => self.limiter.clone())
            })
            .set(delay.as_secs_f64());
    }

    fn retry(&self, outcome: RetryOutcome) {
        let counters = self.retries();
        let at = RetryOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(0);
        counters[at].increment(1);
    }
}

impl fmt::Debug for MetricsObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsObserver")
            .field("limiter", &self.limiter)
            .field("summed", &self.summed)
            .finish_non_exhaustive()
    }
}

impl<A: Algorithm, C: Clock> Builder<A, C> {
    /// Record the limiter's metrics through the `metrics` facade, labelled
    /// `limiter=<name>` with the limiter's name (given before or after this
    /// call), beside any other observer. See [`crate::metrics`].
    ///
    /// The handles are registered by [`Builder::build`], with the recorder
    /// installed then: install it first.
    #[must_use]
    pub fn metrics(self) -> Self {
        self.observe_named(Box::new(|named| {
            let observer = MetricsObserver::new(named.name.to_owned());
            observer.register(named);
            Box::new(observer)
        }))
    }

    /// Feed `shared`'s series, labelled with its label whatever this
    /// limiter's name, beside any other observer: with the other limiters
    /// given it, summed (see [`SummedMetrics`]).
    ///
    /// What this limiter adds to them (its retry decisions, its classes) is
    /// registered by [`Builder::build`], with the recorder installed then.
    #[must_use]
    pub fn metrics_summed(self, shared: &SummedMetrics) -> Self {
        let shared = Arc::clone(&shared.0);
        self.observe_named(Box::new(move |named| {
            shared.register(named);
            Box::new(shared)
        }))
    }
}

fn shared_string(s: Cow<'static, str>) -> SharedString {
    match s {
        Cow::Borrowed(s) => SharedString::const_str(s),
        Cow::Owned(s) => SharedString::from(s),
    }
}
