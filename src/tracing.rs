//! Breaker transitions as [`tracing`](https://docs.rs/tracing) events.
//!
//! [`TracingObserver`] logs each transition a policy reports, with the
//! limiter's name and the figures that caused it (`limiter`, `policy`, `from`,
//! `to`, `failure_rate`, `slow_call_rate`, `calls`):
//!
//! - a breaker opening (or forced open) at `WARN`: `circuit opened`;
//! - a breaker closing (or forced closed) at `INFO`: `circuit closed`;
//! - any other change (half-open, disabled, metrics-only) at `DEBUG`.
//!
//! - a limiter's retry budget running dry at `WARN`: `retry budget
//!   exhausted` (`limiter`), once each time it runs dry after granting a
//!   retry (see [`crate::retry`]).
//!
//! Nothing is logged per call.
//!
//! # Examples
//!
//! ```
//! use rheostat::{algorithms::Breaker, Limiter};
//!
//! let limiter = Limiter::builder(Breaker::new(Default::default())?)
//!     .name("payments")
//!     .tracing()
//!     .build()?;
//! # drop(limiter);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;

use crate::algorithms::{Algorithm, BreakerState, Transition};
use crate::clock::Clock;
use crate::limiter::Builder;
use crate::observe::Observer;

/// Logs one limiter's breaker transitions; see the [module
/// documentation](self).
#[derive(Clone, Debug)]
pub struct TracingObserver {
    limiter: Cow<'static, str>,
}

impl TracingObserver {
    /// An observer whose events carry `limiter = <limiter>`.
    pub fn new(limiter: impl Into<Cow<'static, str>>) -> Self {
        TracingObserver {
            limiter: limiter.into(),
        }
    }
}

impl Observer for TracingObserver {
    fn transition(&self, t: &Transition) {
        let limiter: &str = &self.limiter;
        // One event, at the level and with the message its new state calls for.
        macro_rules! event {
            ($level:ident, $message:literal) => {
                ::tracing::$level!(
                    limiter,
                    policy = t.policy,
                    from = t.from.as_str(),
                    to = t.to.as_str(),
                    failure_rate = t.failure_rate,
                    slow_call_rate = t.slow_call_rate,
                    calls = t.calls,
                    $message
                )
            };
        }
        match t.to {
            BreakerState::Open | BreakerState::ForcedOpen => event!(warn, "circuit opened"),
            BreakerState::Closed | BreakerState::ForcedClosed => event!(info, "circuit closed"),
            _ => event!(debug, "breaker state changed"),
        }
    }

    fn retry_budget_exhausted(&self) {
        let limiter: &str = &self.limiter;
        ::tracing::warn!(limiter, "retry budget exhausted");
    }
}

impl<A: Algorithm, C: Clock> Builder<A, C> {
    /// Log breaker transitions through `tracing`, with the limiter's name
    /// (given before or after this call), beside any other observer. See
    /// [`crate::tracing`].
    #[must_use]
    pub fn tracing(self) -> Self {
        self.observe_named(Box::new(|named| {
            Box::new(TracingObserver::new(named.name.to_owned()))
        }))
    }
}
