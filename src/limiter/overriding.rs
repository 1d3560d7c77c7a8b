//! An operator's override ([`crate::overrides`]): set, cleared, and ended
//! when its time runs out, under the policy's lock.
use std::time::{Duration, Instant};

use super::published::Held;
use super::Limiter;
use crate::algorithms::MAX_LIMIT;
use crate::algorithms::{Algorithm, ConfigError};
use crate::clock::Clock;
use crate::overrides::{Override, MAX_OVERRIDE};

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Override the policy's decision with `overriding` for `lasting`
    /// (see [`crate::overrides`]), replacing any override in force. The
    /// policy goes on learning from every call it is sent, and decides
    /// again when the override ends.
    ///
    /// # Errors
    ///
    /// `lasting` zero or above [`MAX_OVERRIDE`] (field `override.lasting`);
    /// [`Override::Cap`] of 0 (`override.cap`: refusing everything is
    /// [`Override::ForceOpen`]) or above [`MAX_LIMIT`]; and
    /// [`Override::ForceClosed`] on a policy without a breaker
    /// (`override.kind`). The override in force, if any, is kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::{algorithms::{Breaker, Fixed}, overrides::Override, Limiter};
    ///
    /// let limiter = Limiter::new(Fixed::new(50)?);
    /// limiter.set_override(Override::Cap(5), Duration::from_secs(60))?;
    /// assert_eq!(limiter.gate().limit, 5);
    /// // A bulkhead has no breaker to hold closed.
    /// let e = limiter.set_override(Override::ForceClosed, Duration::from_secs(60)).unwrap_err();
    /// assert_eq!(e.field(), "override.kind");
    /// assert_eq!(limiter.gate().limit, 5);
    /// limiter.clear_override();
    /// assert_eq!(limiter.gate().limit, 50);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_override(&self, overriding: Override, lasting: Duration) -> Result<(), ConfigError> {
        if lasting.is_zero() || lasting > MAX_OVERRIDE {
            return Err(ConfigError::new(
                "override.lasting",
                format_args!("{lasting:?}"),
                "a duration above 0 and at most 7 days",
            ));
        }
        if let Override::Cap(limit) = overriding {
            if limit == 0 || limit > MAX_LIMIT {
                return Err(ConfigError::new(
                    "override.cap",
                    limit,
                    format!(
                        "a whole number in [1, {MAX_LIMIT}] (refusing every call is `force_open`)"
                    ),
                ));
            }
        }
        let now = self.clock.now();
        let until = now.checked_add(lasting).unwrap_or(now);
        self.with_held(now, |held| {
            self.start_override(held, now, overriding, until, lasting)
        })
    }

    /// End the override in force, if any: the policy decides again.
    pub fn clear_override(&self) {
        let now = self.clock.now();
        self.with_held(now, |held| self.end_override(held, now, false));
    }

    /// The override in force and when it ends, by the limiter's clock;
    /// `None` without one. An override whose end has passed shows until
    /// the limiter next looks at its policy (any call, or
    /// [`wake`](Limiter::wake)).
    pub fn override_in_force(&self) -> Option<(Override, Instant)> {
        self.lock().overriding
    }

    fn start_override(
        &self,
        held: &mut Held<A>,
        now: Instant,
        overriding: Override,
        until: Instant,
        lasting: Duration,
    ) -> Result<(), ConfigError> {
        let was_held = matches!(held.overriding, Some((Override::ForceClosed, _)));
        if overriding == Override::ForceClosed && !was_held && !held.policy.hold_closed(now, true) {
            return Err(ConfigError::new(
                "override.kind",
                "force_closed",
                format!(
                    "an override a policy without a breaker can take (this one's is `{}`): \
                     force_open, cap or metrics_only",
                    held.policy.name()
                ),
            ));
        }
        if let Some((previous, _)) = held.overriding {
            if previous == Override::ForceClosed && overriding != Override::ForceClosed {
                held.policy.hold_closed(now, false);
            }
            if let Some(observer) = &self.observer {
                observer.override_ended(previous, false);
            }
        }
        held.overriding = Some((overriding, until));
        if let Some(observer) = &self.observer {
            observer.override_applied(overriding, lasting);
        }
        Ok(())
    }

    /// End the override in force (`expired`: its time ran out), letting go
    /// of a breaker it held closed.
    pub(super) fn end_override(&self, held: &mut Held<A>, now: Instant, expired: bool) {
        if let Some((overriding, _)) = held.overriding.take() {
            if overriding == Override::ForceClosed {
                held.policy.hold_closed(now, false);
            }
            if let Some(observer) = &self.observer {
                observer.override_ended(overriding, expired);
            }
        }
    }
}
