//! Metrics through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! [`MetricsObserver`] is an [`Observer`] that records, for one limiter:
//!
//! | metric | kind | labels | meaning |
//! | --- | --- | --- | --- |
//! | `rheostat_limit` | gauge | `limiter` | the gate's concurrency limit (2³¹ − 1 when unbounded) |
//! | `rheostat_in_flight` | gauge | `limiter` | calls in flight |
//! | `rheostat_admit_probability` | gauge | `limiter` | the gate's admit probability, 0 to 1 |
//! | `rheostat_breaker_state` | gauge | `limiter` | the breaker's state (see below); set for policies with a breaker |
//! | `rheostat_calls_total` | counter | `limiter`, `outcome` | calls by `outcome`: `success`, `overload`, `ignored` (finished calls) and `rejected` (refused by the limiter) |
//! | `rheostat_transitions_total` | counter | `limiter`, `from`, `to` | breaker state changes |
//! | `rheostat_call_duration_seconds` | histogram | `limiter` | latency of finished calls, in seconds |
//!
//! `rheostat_breaker_state` is 0 closed, 1 open, 2 half-open, 3 forced open,
//! 4 forced closed, 5 disabled, 6 metrics-only ([`state_value`]).
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
//! // Labelled `limiter="payments"`: name the limiter before `.metrics()`.
//! let limiter = Limiter::builder(Fixed::new(10)?)
//!     .name("payments")
//!     .metrics()
//!     .build()?;
//! limiter.try_acquire()?.success();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use ::metrics::{Counter, Gauge, Histogram, SharedString, Unit};

use crate::algorithms::{Algorithm, BreakerState, Gate, Outcome, Transition};
use crate::clock::Clock;
use crate::error::Rejection;
use crate::limiter::Builder;
use crate::observe::Observer;

/// Feeds one limiter's figures to the `metrics` facade; see the [module
/// documentation](self) for the metrics and their labels.
pub struct MetricsObserver {
    limiter: SharedString,
    limit: Gauge,
    in_flight: Gauge,
    admit_probability: Gauge,
    breaker_state: Gauge,
    success: Counter,
    overload: Counter,
    ignored: Counter,
    rejected: Counter,
    duration: Histogram,
}

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
            breaker_state: ::metrics::gauge!(
                "rheostat_breaker_state",
                "limiter" => limiter.clone()
            ),
            success: calls("success"),
            overload: calls("overload"),
            ignored: calls("ignored"),
            rejected: calls("rejected"),
            duration: ::metrics::histogram!(
                "rheostat_call_duration_seconds",
                "limiter" => limiter.clone()
            ),
            limiter,
        }
    }

    /// Set `rheostat_breaker_state` (the observer sets it on every
    /// transition; this is for the state a limiter starts in).
    pub fn set_breaker_state(&self, state: BreakerState) {
        self.breaker_state.set(state_value(state));
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
        "rheostat_transitions_total",
        "Breaker state changes, by from and to"
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

    fn rejected(&self, _rejection: &Rejection) {
        self.rejected.increment(1);
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
        self.limit.set(f64::from(gate.limit));
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
        self.breaker_state.set(state_value(transition.to));
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
    /// `limiter=<name>` with the name given so far (call
    /// [`name`](Builder::name) first), beside any observer already set. See
    /// [`crate::metrics`].
    ///
    /// The handles are registered now, with the recorder installed now.
    #[must_use]
    pub fn metrics(self) -> Self {
        let observer = MetricsObserver::new(self.name_ref().to_owned());
        if let Some(state) = self.policy_ref().snapshot().state {
            observer.set_breaker_state(state);
        }
        self.also_observe(observer)
    }
}
