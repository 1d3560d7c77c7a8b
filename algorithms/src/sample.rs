//! What a policy learns from: the outcome of one finished call.

use std::time::{Duration, Instant};

/// What a finished call says about the dependency.
///
/// This is the one outcome vocabulary shared by every policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Outcome {
    /// The dependency answered. A success slower than a policy's threshold may
    /// still be treated as a sign of overload (a *slow call*).
    Success,
    /// Evidence that the dependency is unhealthy: a timeout, a 5xx, a
    /// 503/529, a refused connection.
    Overload,
    /// Not evidence either way: a 4xx, a declined card, a cancelled call, an
    /// inner breaker's rejection. The slot is released and nothing is learnt.
    Ignore,
}

/// One finished call, as a policy sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// How long the call took, from admission to its outcome being recorded.
    pub latency: Duration,
    /// How many calls were in flight when this one was admitted, itself
    /// included. A limiter that parks released slots per core (rheostat's
    /// `Sharding`) counts the slots parked on other cores as well: an
    /// over-estimate by at most one per core.
    pub in_flight: u32,
    /// How many calls were in flight when this one finished, itself
    /// included, counted as `in_flight` is; 0 where not known (a sample built by hand, unless set
    /// with [`Sample::with_in_flight_at_finish`]). With `in_flight`, it
    /// tells a policy whether its limit was reached while the call was
    /// out, not only when it was admitted.
    pub in_flight_at_finish: u32,
    /// What the call says about the dependency.
    pub outcome: Outcome,
    /// Whether the call was admitted as a trial call under a probe gate.
    pub probe: bool,
    /// Whether the policy reported a [`Transition`](crate::Transition) after this call was
    /// admitted: the call belongs to an earlier state. The runtime sets it;
    /// a policy driven by hand may leave it `false` and compare instants
    /// with [`Sample::started`] instead.
    pub stale: bool,
}

impl Sample {
    /// A sample of a call that was not a probe.
    pub fn new(outcome: Outcome, latency: Duration, in_flight: u32) -> Self {
        Sample {
            latency,
            in_flight,
            in_flight_at_finish: 0,
            outcome,
            probe: false,
            stale: false,
        }
    }

    /// The same sample, marked as a probe (or not).
    #[must_use]
    pub fn with_probe(mut self, probe: bool) -> Self {
        self.probe = probe;
        self
    }

    /// The same sample, with the calls in flight when it finished.
    #[must_use]
    pub fn with_in_flight_at_finish(mut self, in_flight: u32) -> Self {
        self.in_flight_at_finish = in_flight;
        self
    }

    /// The same sample, marked as admitted before the policy's latest
    /// transition (or not).
    #[must_use]
    pub fn with_stale(mut self, stale: bool) -> Self {
        self.stale = stale;
        self
    }

    /// When the call started, given the instant its outcome was recorded.
    ///
    /// Saturates at `now` if the latency cannot be subtracted.
    pub fn started(&self, now: Instant) -> Instant {
        now.checked_sub(self.latency).unwrap_or(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_start_saturates_rather_than_panicking() {
        let now = Instant::now();
        let s = Sample::new(Outcome::Success, Duration::MAX, 1);
        assert_eq!(s.started(now), now);
    }
}
