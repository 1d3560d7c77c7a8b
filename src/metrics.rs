//! Metrics through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! [`MetricsObserver`] is an [`Observer`] that records, for one limiter:
//!
//! | metric | kind | labels | meaning |
//! | --- | --- | --- | --- |
//! | `rheostat_limit` | gauge | `limiter` | the gate's concurrency limit (`+Inf` when there is none) |
//! | `rheostat_in_flight` | gauge | `limiter` | calls in flight |
//! | `rheostat_admit_probability` | gauge | `limiter` | the gate's admit probability, 0 to 1 |
//! | `rheostat_breaker_state` | gauge | `limiter` | the breaker's state (see below); only for policies with a breaker |
//! | `rheostat_calls_total` | counter | `limiter`, `outcome`, (`reason`) | calls by `outcome`: `success`, `overload`, `ignored` (finished calls) and `rejected` (refused by the limiter, with a `reason`) |
//! | `rheostat_transitions_total` | counter | `limiter`, `from`, `to` | breaker state changes |
//! | `rheostat_call_duration_seconds` | histogram | `limiter` | latency of finished calls, in seconds |
//! | `rheostat_admitted_total` | counter | `limiter`, `class` | calls admitted, by [class](crate::priority); only for a limiter with priorities |
//! | `rheostat_retries_total` | counter | `limiter`, `outcome` | what the [retry policy](crate::retry) decided after each failed attempt: `sent`, `budget_exhausted`, `deadline`, `not_retryable`, `rejected`, `exhausted` ([`RetryOutcome::as_str`]); registered by [`Builder::metrics`] for a limiter with a retry policy, and never for one without |
//!
//! `rheostat_breaker_state` is 0 closed, 1 open, 2 half-open, 3 forced open,
//! 4 forced closed, 5 disabled, 6 metrics-only ([`state_value`]). A limiter
//! whose policy has no breaker (a bulkhead, AIMD alone) has no such series,
//! rather than one that reads "closed".
//!
//! A rejection's `reason` is [`RejectReason::as_str`]: `limit_reached`,
//! `throttled` (client-side throttling, or a shedding Vegas or Gradient),
//! `ramping` (a breaker's ramp after it closed), `open`, `queue_full`,
//! `timed_out`. Each is registered when the observer is made, so a rate
//! over it reads 0, not "no data", until the first rejection. On a limiter
//! with [priorities](crate::priority), a rejection of a call of a class is
//! counted in a series that also carries `class` (its name), registered for
//! every class and reason when the limiter is built.
//!
//! `rheostat_limit` is `+Inf` for a gate with no concurrency limit (a
//! throttle, a breaker alone), which Prometheus exposes as `+Inf`.
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
use std::sync::OnceLock;
use std::time::Duration;

use ::metrics::{Counter, Gauge, Histogram, SharedString, Unit};

use crate::algorithms::{Algorithm, BreakerState, Gate, Outcome, Transition, MAX_LIMIT};
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::limiter::Builder;
use crate::observe::Observer;
use crate::priority::Class;
use crate::retry::RetryOutcome;

/// Feeds one limiter's figures to the `metrics` facade; see the [module
/// documentation](self) for the metrics and their labels.
pub struct MetricsObserver {
    limiter: SharedString,
    limit: Gauge,
    in_flight: Gauge,
    admit_probability: Gauge,
    /// Registered at the first breaker state set: never for a policy
    /// without a breaker.
    breaker_state: OnceLock<Gauge>,
    success: Counter,
    overload: Counter,
    ignored: Counter,
    /// By [`REASONS`].
    rejected: [Counter; REASONS.len()],
    duration: Histogram,
    /// By [`RetryOutcome::ALL`]: registered for a limiter with a retry
    /// policy, never for one without.
    retries: OnceLock<[Counter; RetryOutcome::ALL.len()]>,
    /// Per class, most critical first: admissions and rejections by
    /// [`REASONS`]. Registered for a limiter with priorities.
    classes: OnceLock<Box<[ClassCounters]>>,
}

struct ClassCounters {
    admitted: Counter,
    rejected: [Counter; REASONS.len()],
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
        let limiter: SharedString = match limiter.into() {
            Cow::Borrowed(s) => SharedString::const_str(s),
            Cow::Owned(s) => SharedString::from(s),
        };
        describe();
        let calls = |outcome: &'static str| {
            ::metrics::counter!(
                "rheostat_calls_total",
                "limiter" => limiter.clone(),
                "outcome" => outcome
            )
        };
        MetricsObserver {
            limit: ::metrics::gauge!("rheostat_limit", "limiter" => limiter.clone()),
            in_flight: ::metrics::gauge!("rheostat_in_flight", "limiter" => limiter.clone()),
            admit_probability: ::metrics::gauge!(
                "rheostat_admit_probability",
                "limiter" => limiter.clone()
            ),
            breaker_state: OnceLock::new(),
            success: calls("success"),
            overload: calls("overload"),
            ignored: calls("ignored"),
            rejected: REASONS.map(|reason| {
                ::metrics::counter!(
                    "rheostat_calls_total",
                    "limiter" => limiter.clone(),
                    "outcome" => "rejected",
                    "reason" => reason.as_str()
                )
            }),
            duration: ::metrics::histogram!(
                "rheostat_call_duration_seconds",
                "limiter" => limiter.clone()
            ),
            retries: OnceLock::new(),
            classes: OnceLock::new(),
            limiter,
        }
    }

    /// Register the series labelled by class (`rheostat_admitted_total`, and
    /// `rheostat_calls_total` for rejections), one set per class name, most
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
                        rejected: REASONS.map(|reason| {
                            ::metrics::counter!(
                                "rheostat_calls_total",
                                "limiter" => self.limiter.clone(),
                                "outcome" => "rejected",
                                "reason" => reason.as_str(),
                                "class" => class.clone()
                            )
                        }),
                    }
                })
                .collect()
        });
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

fn describe() {
    ::metrics::describe_gauge!(
        "rheostat_limit",
        "How many calls the limiter lets be in flight at once"
    );
    ::metrics::describe_gauge!("rheostat_in_flight", "Calls in flight");
    ::metrics::describe_gauge!(
        "rheostat_admit_probability",
        "The chance that a call under the limit is admitted"
    );
    ::metrics::describe_gauge!(
        "rheostat_breaker_state",
        "0 closed, 1 open, 2 half-open, 3 forced open, 4 forced closed, 5 disabled, 6 metrics-only"
    );
    ::metrics::describe_counter!(
        "rheostat_calls_total",
        "Calls by outcome: success, overload, ignored, rejected"
    );
    ::metrics::describe_counter!(
        "rheostat_admitted_total",
        "Calls admitted, by class (a limiter with priorities)"
    );
    ::metrics::describe_counter!(
        "rheostat_transitions_total",
        "Breaker state changes, by from and to"
    );
    ::metrics::describe_counter!(
        "rheostat_retries_total",
        "Decisions after failed attempts: sent, budget_exhausted, deadline, not_retryable, rejected, exhausted"
    );
    ::metrics::describe_histogram!(
        "rheostat_call_duration_seconds",
        Unit::Seconds,
        "Latency of finished calls"
    );
}

impl Observer for MetricsObserver {
    fn admitted(&self, in_flight: u32, _probe: bool) {
        self.in_flight.set(f64::from(in_flight));
    }

    fn admitted_as(&self, class: Class, in_flight: u32, _probe: bool) {
        if let Some(counters) = self.classes.get().and_then(|c| c.get(class.index())) {
            counters.admitted.increment(1);
        }
        self.in_flight.set(f64::from(in_flight));
    }

    fn rejected(&self, rejection: &Rejection) {
        let reason = rejection.reason();
        // A reason added later than this list counts as the limit's.
        let at = REASONS.iter().position(|r| *r == reason).unwrap_or(0);
        let by_class = rejection
            .class()
            .and_then(|class| self.classes.get().and_then(|c| c.get(class.index())));
        match by_class {
            Some(counters) => counters.rejected[at].increment(1),
            None => self.rejected[at].increment(1),
        }
    }

    fn finished(&self, outcome: Outcome, latency: Duration, in_flight: u32) {
        match outcome {
            Outcome::Success => self.success.increment(1),
            Outcome::Overload => self.overload.increment(1),
            Outcome::Ignore => self.ignored.increment(1),
        }
        self.duration.record(latency.as_secs_f64());
        self.in_flight.set(f64::from(in_flight));
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

    fn transition(&self, transition: &Transition) {
        ::metrics::counter!(
            "rheostat_transitions_total",
            "limiter" => self.limiter.clone(),
            "from" => transition.from.as_str(),
            "to" => transition.to.as_str()
        )
        .increment(1);
        self.set_breaker_state(transition.to);
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
            if let Some(state) = named.state {
                observer.set_breaker_state(state);
            }
            if named.retries {
                observer.register_retries();
            }
            if !named.classes.is_empty() {
                observer.register_classes(&named.classes);
            }
            Box::new(observer)
        }))
    }
}
