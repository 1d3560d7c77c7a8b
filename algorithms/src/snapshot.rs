//! A point-in-time view of a policy, for metrics and logs.

use std::time::{Duration, Instant};

use crate::overrides::Override;
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
    /// The attempt timeout in force, where the limiter holding the policy
    /// has one (a policy's own snapshot has none: the limiter fills it in,
    /// learned or typed).
    pub timeout: Option<Duration>,
    /// The operator's override in force, and when it ends (a policy's own
    /// snapshot has none: the limiter fills it in).
    pub overridden: Option<(Override, Instant)>,
    /// Since when the learned timeout's ceiling has ended every call that
    /// ended, with none answering within it, for a window (a policy's own
    /// snapshot has none: the limiter fills it in).
    pub ceiling_cutting_since: Option<Instant>,
}

impl Snapshot {
    /// A snapshot that reports only a name and a gate.
    pub fn new(policy: &'static str, gate: Gate) -> Self {
        Snapshot {
            policy,
            gate,
            raw_limit: None,
            state: None,
            timeout: None,
            overridden: None,
            ceiling_cutting_since: None,
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

    /// The same snapshot with the attempt timeout in force.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same snapshot with the override in force and when it ends.
    #[must_use]
    pub fn with_override(mut self, overridden: Option<(Override, Instant)>) -> Self {
        self.overridden = overridden;
        self
    }

    /// The same snapshot with since when the learned timeout's ceiling has
    /// cut every call.
    #[must_use]
    pub fn with_ceiling_cutting_since(mut self, since: Option<Instant>) -> Self {
        self.ceiling_cutting_since = since;
        self
    }
}
