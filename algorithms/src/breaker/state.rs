//! The breaker's states and the transitions between them: what a
//! [`Breaker`](super::Breaker) reports, and what the runtime's observers and
//! hooks are told.

use std::fmt;
use std::time::Instant;

/// The state of a circuit breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls flow and outcomes are counted (possibly still ramping back up
    /// after a recovery).
    Closed,
    /// Every call is refused until the cooldown ends.
    Open,
    /// A few trial calls decide whether to close or open again.
    HalfOpen,
    /// Held open by hand until told otherwise.
    ForcedOpen,
    /// Held closed by hand: outcomes are counted, it never opens.
    ForcedClosed,
    /// Records nothing and never opens.
    Disabled,
    /// Records everything and reports transitions it would make, never
    /// refusing a call.
    MetricsOnly,
}

impl BreakerState {
    /// A stable lower-case name (`"half_open"`) for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
            BreakerState::ForcedOpen => "forced_open",
            BreakerState::ForcedClosed => "forced_closed",
            BreakerState::Disabled => "disabled",
            BreakerState::MetricsOnly => "metrics_only",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change of breaker state, with the figures that caused it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Transition {
    /// When it happened.
    pub at: Instant,
    /// The policy that changed (its [`Algorithm::name`](crate::Algorithm::name)).
    pub policy: &'static str,
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// The failure rate, in `[0, 1]`, over the window that decided it.
    pub failure_rate: f64,
    /// The slow-call rate, in `[0, 1]`, over the same window.
    pub slow_call_rate: f64,
    /// How many calls that window held.
    pub calls: u64,
}

impl Transition {
    /// A transition of `policy` from `from` to `to` at `at`, with the rates
    /// and the call count that caused it.
    pub fn new(
        at: Instant,
        policy: &'static str,
        from: BreakerState,
        to: BreakerState,
        failure_rate: f64,
        slow_call_rate: f64,
        calls: u64,
    ) -> Self {
        Transition {
            at,
            policy,
            from,
            to,
            failure_rate,
            slow_call_rate,
            calls,
        }
    }
}
