//! The help text of every series, given to the recorder when an observer
//! is made.

use ::metrics::Unit;

/// Describe every series [`MetricsObserver`](super::MetricsObserver)
/// records.
pub(super) fn describe() {
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
    ::metrics::describe_gauge!(
        "rheostat_override",
        "1 while an operator's override of this kind is in force, else 0"
    );
    ::metrics::describe_gauge!(
        "rheostat_timeout_seconds",
        Unit::Seconds,
        "The attempt timeout in force: learned from the dependency within its ceiling, or typed"
    );
    ::metrics::describe_gauge!(
        "rheostat_timeout_ceiling_cutting",
        "1 while no call has answered within the learned timeout's ceiling for a window, else 0"
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
    ::metrics::describe_counter!(
        "rheostat_hedges_total",
        "Hedges: sent, won, lost; or why none was sent: congested, budget_exhausted, refused, deadline, exhausted"
    );
    ::metrics::describe_gauge!(
        "rheostat_hedge_delay_seconds",
        Unit::Seconds,
        "How long an attempt runs before a hedge is sent beside it: typed, or learned"
    );
    ::metrics::describe_histogram!(
        "rheostat_call_duration_seconds",
        Unit::Seconds,
        "Latency of finished calls"
    );
}
