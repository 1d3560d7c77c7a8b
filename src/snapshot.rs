//! What a limiter shows of itself: its policy's view, and what the limiter
//! keeps beside the policy.

use std::time::{Duration, Instant};

use crate::algorithms::{self, BreakerState, Gate};
use crate::overrides::Override;

/// A point-in-time view of a limiter, for metrics and logs
/// ([`Limiter::snapshot`](crate::Limiter::snapshot)).
///
/// The first four fields are the policy's own
/// ([`algorithms::Snapshot`]); the rest are what the limiter keeps beside
/// the policy and the policy never sees: the attempt timeout, an
/// operator's override, the learned timeout's warning and the hedge delay.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::Fixed, overrides::Override, Limiter};
///
/// let limiter = Limiter::new(Fixed::new(8)?);
/// limiter.overrides().set(Override::Cap(2), Duration::from_secs(60))?;
/// let snapshot = limiter.snapshot();
/// assert_eq!((snapshot.policy, snapshot.gate.limit), ("fixed", 8));
/// assert_eq!(limiter.gate().limit, 2);
/// assert_eq!(snapshot.overridden.map(|(o, _)| o), Some(Override::Cap(2)));
/// assert_eq!(snapshot.timeout, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The policy's name, as in [`Algorithm::name`](crate::Algorithm::name).
    pub policy: &'static str,
    /// The gate the policy publishes now. Under an override, the gate in
    /// force is [`Limiter::gate`](crate::Limiter::gate)'s.
    pub gate: Gate,
    /// The policy's current limit before rounding, where it keeps one.
    pub raw_limit: Option<f64>,
    /// The breaker state, for policies that have one.
    pub state: Option<BreakerState>,
    /// The attempt timeout in force, learned or typed, if the limiter has
    /// one ([`Timeouts::in_force`](crate::timeout::Timeouts::in_force)).
    pub timeout: Option<Duration>,
    /// The operator's override in force, and when it ends
    /// ([`crate::overrides`]).
    pub overridden: Option<(Override, Instant)>,
    /// Since when the learned timeout's ceiling has ended every call that
    /// ended, with none answering within it, for a window
    /// ([`crate::timeout`]).
    pub ceiling_cutting_since: Option<Instant>,
    /// How long an attempt runs before a [hedge](crate::retry::Hedge) is
    /// sent beside it, typed or learned, if the limiter hedges
    /// ([`Timeouts::hedge`](crate::timeout::Timeouts::hedge)).
    pub hedge: Option<Duration>,
}

impl Snapshot {
    /// The policy's view, with nothing kept beside it yet.
    pub(crate) fn of_policy(policy: algorithms::Snapshot) -> Self {
        Snapshot {
            policy: policy.policy,
            gate: policy.gate,
            raw_limit: policy.raw_limit,
            state: policy.state,
            timeout: None,
            overridden: None,
            ceiling_cutting_since: None,
            hedge: None,
        }
    }
}
