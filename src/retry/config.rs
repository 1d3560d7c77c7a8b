//! [`RetryConfig`]: how many attempts, how far apart, within what deadline,
//! and out of what budget.

use std::time::Duration;

use super::{Hedge, MAX_ATTEMPTS};
use crate::algorithms::{check, ConfigError};

/// How a limiter retries a call that failed.
///
/// The defaults: 3 attempts (the first included), each given the caller's
/// timeout, no total deadline beyond that, a backoff drawn uniformly from
/// `[0, min(1 s, 50 ms × 2^(n-1))]` before the `n`th retry ("full jitter"),
/// a budget of 20% of recent calls plus 10 a second over 10 s (Finagle's and
/// tower's `TpsBudget`'s), and no waiting in the limiter's queue.
///
/// Why these: three attempts is what most clients ship (AWS's standard
/// mode, gRPC's examples), and the budget, not the count, is what keeps
/// retries from multiplying load. Over the last 10 s, retries may number
/// 20% of the calls made plus 10 a second, so a dependency that fails
/// every call sees at most `1.2 × calls + 10 × 10 s` attempts in that
/// window, however many attempts are allowed: 1.2 × at a high rate, more
/// at a low one (at 20 calls a second, `(1.2 × 20 + 10) / 20` = 1.7
/// attempts per call). The floor is each caller's: across a fleet of `n` instances
/// the floors add up to `10 × n` retries a second, as they do in Finagle
/// and in tower's `TpsBudget`; lower `min_per_second` for a large fleet.
/// Full jitter spreads retries from many
/// callers that failed at once; the 1 s cap keeps the third attempt inside
/// a user's patience.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::retry::RetryConfig;
///
/// let config = RetryConfig {
///     timeout: Some(Duration::from_millis(800)),
///     deadline: Some(Duration::from_secs(2)),
///     ..RetryConfig::default()
/// };
/// config.validate()?;
///
/// let err = RetryConfig { attempts: 0, ..RetryConfig::default() }.validate().unwrap_err();
/// assert_eq!(err.to_string(), "invalid `retry.attempts`: found 0, expected a whole number in [1, 10]");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(default, deny_unknown_fields))]
pub struct RetryConfig {
    /// Attempts per call, the first included, in `[1, 10]`; 1 never
    /// retries (the budget still counts the calls).
    pub attempts: u32,
    /// Each attempt's timeout. Left out, an attempt gets the timeout the
    /// caller passes ([`Limiter::call`](crate::Limiter::call)) or the tower
    /// layer's. Either way, an attempt never runs past the deadline.
    #[cfg_attr(
        feature = "config",
        serde(
            default,
            with = "humantime_serde::option",
            skip_serializing_if = "Option::is_none"
        )
    )]
    pub timeout: Option<Duration>,
    /// The most one call may take, every attempt and backoff included,
    /// from its first admission. No retry starts after it, and the last
    /// attempt's timeout shrinks to end by it. Left out, the call is bounded
    /// by its attempts, timeouts and backoffs alone.
    #[cfg_attr(
        feature = "config",
        serde(
            default,
            with = "humantime_serde::option",
            skip_serializing_if = "Option::is_none"
        )
    )]
    pub deadline: Option<Duration>,
    /// The wait before each retry.
    pub backoff: Backoff,
    /// How many retries recent calls have earned.
    pub budget: Budget,
    /// Whether a retry refused because the limit is reached may wait once in
    /// the limiter's queue (bounded by its `max_wait` and by the deadline).
    /// Off, such a retry is not sent. A refusal by an open breaker or by
    /// throttling is never retried.
    pub wait_on_limit: bool,
    /// Hedged requests: a second attempt sent while the first is still out
    /// (see [`Hedge`]); none if left out. In a file, `hedge = "auto"` or a
    /// table, `hedge = { quantile = 0.9 }`, `hedge = { delay = "40ms" }`.
    #[cfg_attr(
        feature = "config",
        serde(
            default,
            with = "super::hedge::file",
            skip_serializing_if = "Option::is_none"
        )
    )]
    pub hedge: Option<Hedge>,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            attempts: 3,
            timeout: None,
            deadline: None,
            backoff: Backoff::default(),
            budget: Budget::default(),
            wait_on_limit: false,
            hedge: None,
        }
    }
}

/// Exponential backoff with full jitter: before the `n`th retry, a wait
/// drawn uniformly from `[0, min(cap, base × 2^(n-1))]`.
///
/// A `Retry-After` the server sends is a floor on the wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(default, deny_unknown_fields))]
pub struct Backoff {
    /// The ceiling of the first retry's wait; 0 retries at once.
    #[cfg_attr(feature = "config", serde(with = "humantime_serde"))]
    pub base: Duration,
    /// The largest ceiling, at least `base`.
    #[cfg_attr(feature = "config", serde(with = "humantime_serde"))]
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(50),
            cap: Duration::from_secs(1),
        }
    }
}

impl Backoff {
    /// The ceiling of the wait before retry `n` (1 for the first retry).
    pub fn ceiling(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(63);
        self.base
            .checked_mul(1u32.checked_shl(doublings).unwrap_or(u32::MAX))
            .unwrap_or(self.cap)
            .min(self.cap)
    }
}

/// A retry budget in the manner of Finagle's `RetryBudget` (tower's
/// `TpsBudget`): over the last `ttl`, retries may number `ratio` of the
/// calls made plus `min_per_second × ttl`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(default, deny_unknown_fields))]
pub struct Budget {
    /// Retries allowed per call made, in `[0, 1]`.
    pub ratio: f64,
    /// Retries allowed per second whatever the traffic, in `[0, 100000]`.
    pub min_per_second: f64,
    /// How long a call or a retry counts, in `[1 s, 1 h]`.
    #[cfg_attr(feature = "config", serde(with = "humantime_serde"))]
    pub ttl: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            ratio: 0.2,
            min_per_second: 10.0,
            ttl: Duration::from_secs(10),
        }
    }
}

impl RetryConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first field out of range
    /// (`retry.attempts`, `retry.budget.ratio`, …).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::whole("retry.attempts", self.attempts, 1, MAX_ATTEMPTS)?;
        if let Some(timeout) = self.timeout {
            check::duration("retry.timeout", timeout)?;
        }
        if let Some(deadline) = self.deadline {
            check::duration("retry.deadline", deadline)?;
            if let Some(timeout) = self.timeout {
                if deadline < timeout {
                    return Err(ConfigError::new(
                        "retry.deadline",
                        format_args!("{deadline:?}"),
                        format!("at least one attempt's timeout (`retry.timeout` = {timeout:?})"),
                    ));
                }
            }
        }
        let Backoff { base, cap } = self.backoff;
        if base > crate::algorithms::MAX_DURATION {
            return Err(ConfigError::new(
                "retry.backoff.base",
                format_args!("{base:?}"),
                "a duration of at most 365 days",
            ));
        }
        if cap < base || cap > crate::algorithms::MAX_DURATION {
            return Err(ConfigError::new(
                "retry.backoff.cap",
                format_args!("{cap:?}"),
                format!("a duration in [base, 365 days] = [{base:?}, 365 days]"),
            ));
        }
        check::closed("retry.budget.ratio", self.budget.ratio, 0.0, 1.0)?;
        check::closed(
            "retry.budget.min_per_second",
            self.budget.min_per_second,
            0.0,
            100_000.0,
        )?;
        let ttl = self.budget.ttl;
        if ttl < Duration::from_secs(1) || ttl > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "retry.budget.ttl",
                format_args!("{ttl:?}"),
                "a duration in [1s, 1h]",
            ));
        }
        if let Some(hedge) = &self.hedge {
            hedge.validate()?;
        }
        Ok(())
    }
}
