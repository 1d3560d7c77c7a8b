//! A point-in-time view of a policy, for metrics and logs.

use crate::{BreakerState, Gate};

/// A point-in-time view of a policy, for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The policy's name, as in [`Algorithm::name`](crate::Algorithm::name).
    pub policy: &'static str,
    /// The gate the policy publishes now.
    pub gate: Gate,
    /// The policy's current limit before rounding, where it keeps one.
    pub raw_limit: Option<f64>,
    /// The breaker state, for policies that have one.
    pub state: Option<BreakerState>,
}

impl Snapshot {
    /// A snapshot that reports only a name and a gate.
    pub fn new(policy: &'static str, gate: Gate) -> Self {
        Snapshot {
            policy,
            gate,
            raw_limit: None,
            state: None,
        }
    }

    /// The same snapshot with a breaker state.
    #[must_use]
    pub fn with_state(mut self, state: BreakerState) -> Self {
        self.state = Some(state);
        self
    }

    /// The same snapshot with the unrounded limit.
    #[must_use]
    pub fn with_raw_limit(mut self, raw: f64) -> Self {
        self.raw_limit = Some(raw);
        self
    }
}
