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
//!   exhausted` (`limiter`), when it runs dry after granting a retry (see
//!   [`crate::retry`]), at most once a minute per limiter: a budget at its
//!   edge runs dry after every retry it grants, and a storm of retries is
//!   no time for a storm of log lines. The first warning after a quiet
//!   minute says how many were held back (`suppressed`).
//!
//! - an [override](crate::overrides) applied at `WARN`: `override applied`
//!   (`limiter`, `kind`, `seconds` it lasts, `cap` for a cap); ended at
//!   `INFO`: `override expired` or `override cleared` (`limiter`, `kind`).
//!
//! - a [learned timeout](crate::timeout)'s ceiling cutting every call at
//!   `WARN`: `no call answers within the timeout's ceiling` (`limiter`,
//!   `ceiling_seconds`), once calls have ended at the ceiling for a window
//!   with none answering within it; at `INFO`, `calls answer within the
//!   timeout's ceiling again` at the next that does. One line on entering
//!   that state, one on leaving it; see [the `timeout`
//!   module](crate::timeout#when-the-ceiling-cuts-every-call) for what to
//!   do.
//!
//! - [hedges](crate::retry::Hedge) standing down at `INFO`: `hedges stand
//!   down: the policy sees congestion` (`limiter`), at the first hedge
//!   withheld for congestion after one was sent; `hedges resume` at the
//!   next one sent. One line each way, not one per hedge.
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::algorithms::{Algorithm, BreakerState, Transition};
use crate::clock::Clock;
use crate::limiter::Builder;
use crate::observe::Observer;
use crate::overrides::Override;
use crate::retry::HedgeOutcome;

/// Logs one limiter's breaker transitions, and when its retry budget runs
/// dry, an override applies or its timeout's ceiling cuts every call; see
/// the [module documentation](self).
#[derive(Clone, Debug)]
pub struct TracingObserver {
    limiter: Cow<'static, str>,
    /// When the budget's warning was last logged, and how many have been
    /// held back since (shared by clones).
    budget_warned: Arc<Mutex<(Option<Instant>, u64)>>,
    /// Whether hedges stand down for congestion (shared by clones).
    hedges_down: Arc<AtomicBool>,
}

/// The least time between two warnings of one limiter's budget running
/// dry, in real time (log lines are read in real time, whatever clock the
/// limiter runs on).
const BUDGET_WARNING_EVERY: Duration = Duration::from_secs(60);

impl TracingObserver {
    /// An observer whose events carry `limiter = <limiter>`.
    pub fn new(limiter: impl Into<Cow<'static, str>>) -> Self {
        TracingObserver {
            limiter: limiter.into(),
            budget_warned: Arc::new(Mutex::new((None, 0))),
            hedges_down: Arc::new(AtomicBool::new(false)),
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

    fn override_applied(&self, overriding: Override, lasting: Duration) {
        let limiter: &str = &self.limiter;
        let kind = overriding.as_str();
        let seconds = lasting.as_secs_f64();
        match overriding {
            Override::Cap(cap) => ::tracing::warn!(limiter, kind, cap, seconds, "override applied"),
            _ => ::tracing::warn!(limiter, kind, seconds, "override applied"),
        }
    }

    fn override_ended(&self, overriding: Override, expired: bool) {
        let limiter: &str = &self.limiter;
        let kind = overriding.as_str();
        if expired {
            ::tracing::info!(limiter, kind, "override expired");
        } else {
            ::tracing::info!(limiter, kind, "override cleared");
        }
    }

    fn ceiling_cutting(&self, ceiling: Duration, cutting: bool) {
        let limiter: &str = &self.limiter;
        let ceiling_seconds = ceiling.as_secs_f64();
        if cutting {
            ::tracing::warn!(
                limiter,
                ceiling_seconds,
                "no call answers within the timeout's ceiling"
            );
        } else {
            ::tracing::info!(
                limiter,
                ceiling_seconds,
                "calls answer within the timeout's ceiling again"
            );
        }
    }

    fn hedge(&self, outcome: HedgeOutcome) {
        let down = match outcome {
            HedgeOutcome::Congested | HedgeOutcome::InOrder => true,
            HedgeOutcome::Sent => false,
            _ => return,
        };
        if self.hedges_down.swap(down, Ordering::Relaxed) == down {
            return;
        }
        let limiter: &str = &self.limiter;
        if down {
            let why = if outcome == HedgeOutcome::InOrder {
                "calls answer in order (the dependency is slow as a whole)"
            } else {
                "the policy sees congestion"
            };
            ::tracing::info!(limiter, why, "hedges stand down");
        } else {
            ::tracing::info!(limiter, "hedges resume");
        }
    }

    fn retry_budget_exhausted(&self) {
        let now = Instant::now();
        let suppressed = {
            let mut warned = self
                .budget_warned
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (last, held_back) = &mut *warned;
            if last.is_some_and(|at| now.saturating_duration_since(at) < BUDGET_WARNING_EVERY) {
                *held_back += 1;
                return;
            }
            *last = Some(now);
            std::mem::take(held_back)
        };
        let limiter: &str = &self.limiter;
        if suppressed == 0 {
            ::tracing::warn!(limiter, "retry budget exhausted");
        } else {
            ::tracing::warn!(limiter, suppressed, "retry budget exhausted");
        }
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
