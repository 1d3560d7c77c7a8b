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
//! | `rheostat_calls_total` | counter | `limiter`, `outcome` | calls by `outcome`: `success`, `overload`, `ignored` (finished calls) and `rejected` (refused by the limiter) |
//! | `rheostat_rejected_total` | counter | `limiter`, `reason` | the calls refused, by `reason` (see below) |
//! | `rheostat_transitions_total` | counter | `limiter`, `from`, `to` | breaker state changes |
//! | `rheostat_call_duration_seconds` | histogram | `limiter` | latency of finished calls, in seconds |
//! | `rheostat_admitted_total` | counter | `limiter`, `class` | calls admitted, by [class](crate::priority); only for a limiter with priorities |
//! | `rheostat_class_rejected_total` | counter | `limiter`, `class` | calls refused, by class; only for a limiter with priorities |
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
//! clients (hosts, routes) would become label values without bound.
//! [`KeyedBuilder::metrics`](crate::keyed::KeyedBuilder::metrics) therefore
//! labels by configuration, not by key: a key configured by name (a file's
//! `[limiters.NAME]`, [`KeyedBuilder::key`](crate::keyed::KeyedBuilder::key))
//! has the series above with `limiter=<key>`; every key made from the
//! default shares `limiter="default"` (or the label given to
//! [`KeyedBuilder::metrics_labelled`](crate::keyed::KeyedBuilder::metrics_labelled)),
//! with `rheostat_in_flight`, the counters and the histogram summed over
//! those keys, and without `rheostat_limit`, `rheostat_admit_probability`
//! and `rheostat_breaker_state`, which mean nothing summed. The series are
//! then bounded by the names in the configuration, however many keys come
//! and go. (Attaching [`Builder::metrics`] to each key through
//! [`KeyedBuilder::configure`](crate::keyed::KeyedBuilder::configure)
//! labels each key by itself instead, and its series stay after it is
//! evicted.)
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
use crate::limiter::{Builder, Named};
use crate::observe::Observer;
use crate::priority::Class;
use crate::retry::RetryOutcome;

/// Feeds one limiter's figures to the `metrics` facade; see the [module
/// documentation](self) for the metrics and their labels.
pub struct MetricsObserver {
    limiter: SharedString,
    /// Shared by every limiter made from a keyed set's default: in-flight
    /// moves by increments, and there are no per-limiter gauges.
    summed: bool,
    limit: Gauge,
    in_flight: Gauge,
    admit_probability: Gauge,
    /// Registered at the first breaker state set: never for a policy
    /// without a breaker.
    breaker_state: OnceLock<Gauge>,
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

    /// The observer that every limiter a [`KeyedLimiters`] makes from its
    /// default shares, labelled `limiter=<limiter>`: counters, the latency
    /// histogram and in-flight summed over them, and no gauge of a
    /// limiter's own (limit, admit probability, breaker state), which
    /// would mean nothing summed.
    ///
    /// [`KeyedLimiters`]: crate::keyed::KeyedLimiters
    #[cfg_attr(
        not(feature = "config"),
        allow(dead_code, reason = "used by keyed limiters")
    )]
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
    /// its retry decisions, its classes.
    fn register(&self, named: &Named<'_>) {
        if let Some(state) = named.state {
            if !self.summed {
                self.set_breaker_state(state);
            }
        }
        if named.retries {
            self.register_retries();
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
        "rheostat_rejected_total",
        "Calls rejected by the limiter, by reason"
    );
    ::metrics::describe_counter!(
        "rheostat_admitted_total",
        "Calls admitted, by class (a limiter with priorities)"
    );
    ::metrics::describe_counter!(
        "rheostat_class_rejected_total",
        "Calls rejected by the limiter, by class (a limiter with priorities)"
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

impl MetricsObserver {
    /// In-flight after an admission (`+1`) or a finished call (`-1`): the
    /// limiter's count, or a step of the sum over a keyed set's default.
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
}

fn shared_string(s: Cow<'static, str>) -> SharedString {
    match s {
        Cow::Borrowed(s) => SharedString::const_str(s),
        Cow::Owned(s) => SharedString::from(s),
    }
}

// `KeyedBuilder::metrics`, with the `config` feature that keyed limiters
// need.
#[cfg(feature = "config")]
mod keyed {
    use std::borrow::Cow;
    use std::fmt;
    use std::hash::Hash;
    use std::sync::Arc;

    use super::MetricsObserver;
    use crate::clock::Clock;
    use crate::keyed::KeyedBuilder;

    impl<K, C> KeyedBuilder<K, C>
    where
        K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
        C: Clock,
    {
        /// Record the keyed limiters' metrics through the `metrics` facade
        /// with a bounded number of series, whatever keys callers send: a key
        /// with a configuration of its own ([`KeyedBuilder::key`], a file's
        /// `[limiters.NAME]`) is labelled `limiter=<key>`, as
        /// [`Builder::metrics`](crate::Builder::metrics) labels it; every key made from the default
        /// shares the label `limiter="default"` (see
        /// [`KeyedBuilder::metrics_labelled`]), whose counters, latencies and
        /// in-flight are summed over those keys, and which has no gauge of a
        /// limiter's own. See [`crate::metrics`].
        ///
        /// The shared series are registered now, with the recorder installed
        /// now: install it first (those of retries and classes, when the
        /// first key made from the default is built). A configured key's
        /// are registered when its limiter is built.
        ///
        /// # Examples
        ///
        /// ```
        /// use rheostat::config::{LimiterConfig, PolicyConfig};
        /// use rheostat::keyed::KeyedLimiters;
        ///
        /// let hosts = KeyedLimiters::<String>::builder(LimiterConfig::new(PolicyConfig::Fixed { limit: 8 }))
        ///     .key("payments.example".to_owned(), LimiterConfig::new(PolicyConfig::Fixed { limit: 2 }))
        ///     .metrics()
        ///     .build()?;
        /// // Labelled `limiter="payments.example"`.
        /// hosts.get("payments.example")?.try_acquire()?.success();
        /// // Both labelled `limiter="default"`.
        /// hosts.get("a.example")?.try_acquire()?.success();
        /// hosts.get("b.example")?.try_acquire()?.success();
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn metrics(self) -> Self {
            self.metrics_labelled("default")
        }

        /// As [`KeyedBuilder::metrics`], with the keys made from the default
        /// labelled `limiter=<label>` (pick a label that no configured key
        /// has, or their series mix).
        ///
        /// # Examples
        ///
        /// ```
        /// use rheostat::algorithms::AimdConfig;
        /// use rheostat::config::LimiterConfig;
        /// use rheostat::keyed::KeyedLimiters;
        ///
        /// let tenants = KeyedLimiters::<u64>::builder(LimiterConfig::new(AimdConfig::default()))
        ///     .metrics_labelled("tenants")
        ///     .build()?;
        /// tenants.get(&42)?.try_acquire()?.success(); // labelled `limiter="tenants"`
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn metrics_labelled(self, label: impl Into<Cow<'static, str>>) -> Self {
            let shared = Arc::new(MetricsObserver::summed(label.into()));
            self.instrument(Box::new(move |configured, builder| {
                if configured {
                    return builder.metrics();
                }
                let shared = Arc::clone(&shared);
                builder.observe_named(Box::new(move |named| {
                    shared.register(named);
                    Box::new(shared)
                }))
            }))
        }
    }
}
