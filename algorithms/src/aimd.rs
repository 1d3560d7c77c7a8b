//! Additive increase, multiplicative decrease: a loss-based concurrency limit.

use std::time::{Duration, Instant};

use crate::{check, Algorithm, ConfigError, Gate, Outcome, Quiet, Sample, Snapshot, MAX_LIMIT};

/// The parameters of [`Aimd`]. The defaults are the widely used ones
/// (initial 20, min 20, max 200, backoff 0.9, timeout 5 s).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct AimdConfig {
    /// The limit to start at, in `[min, max]`.
    pub initial: u32,
    /// The limit never falls below this; at least 1.
    pub min: u32,
    /// The limit never rises above this.
    pub max: u32,
    /// The factor a drop multiplies the limit by, in `(0, 1)`.
    pub backoff: f64,
    /// A success slower than this counts as a drop (a *slow call*).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub timeout: Duration,
    /// When set (the default), drops from calls that were already in flight
    /// when the limit was last cut do not cut it again: a burst of timeouts
    /// from one congested moment is one congestion event, as in TCP, instead
    /// of `n` compounding backoffs that drive the limit to `min`. Clear it for
    /// the classic one-backoff-per-drop behaviour.
    pub one_backoff_per_flight: bool,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            initial: 20,
            min: 20,
            max: 200,
            backoff: 0.9,
            timeout: Duration::from_secs(5),
            one_backoff_per_flight: true,
        }
    }
}

impl AimdConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field outside its range: `min` 0, `min` above `max`,
    /// `initial` outside `[min, max]`, `backoff` outside `(0, 1)` or NaN,
    /// `timeout` zero or above a year.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::bounds(
            ["aimd.min", "aimd.max", "aimd.initial"],
            self.min,
            self.max,
            self.initial,
        )?;
        check::open_unit("aimd.backoff", self.backoff, 0.0, 1.0)?;
        check::duration("aimd.timeout", self.timeout)?;
        Ok(())
    }
}

/// A loss-based limit: a drop, or a success slower than the timeout,
/// multiplies the limit by `backoff`; any other success adds one, but only
/// while the caller uses at least half the limit (a caller that is not using
/// its limit learns nothing about whether it could use more).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Aimd, AimdConfig, Algorithm, Outcome, Sample};
///
/// let mut aimd = Aimd::new(AimdConfig { initial: 10, min: 1, max: 100, ..Default::default() })?;
/// let t0 = Instant::now();
/// let ok = Sample::new(Outcome::Success, Duration::from_millis(20), 10);
/// aimd.on_sample(t0, &ok);
/// assert_eq!(aimd.gate().limit, 11);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Aimd {
    config: AimdConfig,
    limit: f64,
    last_backoff: Option<Instant>,
}

impl Aimd {
    /// A limiter at `config.initial`.
    ///
    /// # Errors
    ///
    /// See [`AimdConfig::validate`].
    pub fn new(config: AimdConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Aimd {
            limit: f64::from(config.initial),
            config,
            last_backoff: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AimdConfig {
        &self.config
    }

    /// The limit before rounding down.
    pub fn raw_limit(&self) -> f64 {
        self.limit
    }

    fn is_drop(&self, sample: &Sample) -> bool {
        match sample.outcome {
            Outcome::Overload => true,
            Outcome::Success => sample.latency > self.config.timeout,
            Outcome::Ignore => false,
        }
    }
}

impl Algorithm for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
    }

    fn gate(&self) -> Gate {
        Gate::from_raw_limit(self.limit, self.config.min, self.config.max)
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        if sample.outcome == Outcome::Ignore {
            return;
        }
        let min = f64::from(self.config.min);
        let max = f64::from(self.config.max);
        if self.is_drop(sample) {
            if self.config.one_backoff_per_flight {
                if let Some(cut) = self.last_backoff {
                    if sample.started(now) < cut {
                        return;
                    }
                }
            }
            self.limit = (self.limit * self.config.backoff).max(min);
            self.last_backoff = Some(now);
        } else if f64::from(sample.in_flight) * 2.0 >= self.limit {
            self.limit = (self.limit + 1.0).min(max);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.name(), self.gate()).with_raw_limit(self.limit)
    }

    /// A success within the timeout changes nothing while fewer than half
    /// of the limit's calls were in flight when it was admitted, or once the
    /// limit is at its maximum.
    fn quiet(&self) -> Option<Quiet> {
        let max_in_flight = if self.limit >= f64::from(self.config.max) {
            MAX_LIMIT
        } else {
            // The largest n with 2n < limit: ceil(limit / 2) − 1.
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "the limit is finite and in [min, max]; the cast saturates"
            )]
            let half = (self.limit / 2.0).ceil() as u32;
            half.saturating_sub(1)
        };
        Some(Quiet {
            max_latency: self.config.timeout,
            max_in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn aimd(initial: u32, min: u32, max: u32) -> Aimd {
        Aimd::new(AimdConfig {
            initial,
            min,
            max,
            one_backoff_per_flight: false,
            ..AimdConfig::default()
        })
        .expect("valid config")
    }

    fn ok(in_flight: u32) -> Sample {
        Sample::new(Outcome::Success, ms(10), in_flight)
    }

    fn drop_(in_flight: u32) -> Sample {
        Sample::new(Outcome::Overload, ms(10), in_flight)
    }

    #[test]
    fn each_success_adds_one_while_the_caller_uses_half_the_limit() {
        let t0 = Instant::now();
        let mut a = aimd(10, 1, 100);
        a.on_sample(t0, &ok(5));
        assert_eq!(a.raw_limit(), 11.0);
        a.on_sample(t0, &ok(6));
        assert_eq!(a.raw_limit(), 12.0);
        assert_eq!(a.gate().limit, 12);
    }

    #[test]
    fn an_app_limited_caller_holds_the_limit() {
        let t0 = Instant::now();
        let mut a = aimd(10, 1, 100);
        a.on_sample(t0, &ok(4));
        assert_eq!(a.raw_limit(), 10.0);
    }

    #[test]
    fn a_drop_multiplies_by_the_backoff_ratio() {
        let t0 = Instant::now();
        let mut a = aimd(20, 1, 200);
        a.on_sample(t0, &drop_(20));
        assert_eq!(a.raw_limit(), 18.0);
        a.on_sample(t0, &drop_(18));
        assert!((a.raw_limit() - 16.2).abs() < 1e-9);
        assert_eq!(a.gate().limit, 16);
    }

    #[test]
    fn a_slow_success_counts_as_a_drop() {
        let t0 = Instant::now();
        let mut a = aimd(20, 1, 200);
        a.on_sample(
            t0,
            &Sample::new(Outcome::Success, Duration::from_secs(5) + ms(1), 20),
        );
        assert_eq!(a.raw_limit(), 18.0);
        // Exactly at the timeout is not slow.
        a.on_sample(
            t0,
            &Sample::new(Outcome::Success, Duration::from_secs(5), 18),
        );
        assert_eq!(a.raw_limit(), 19.0);
    }

    #[test]
    fn the_limit_clamps_at_min_and_max() {
        let t0 = Instant::now();
        let mut a = aimd(3, 3, 4);
        a.on_sample(t0, &drop_(3));
        assert_eq!(a.raw_limit(), 3.0);
        a.on_sample(t0, &ok(3));
        a.on_sample(t0, &ok(4));
        a.on_sample(t0, &ok(4));
        assert_eq!(a.raw_limit(), 4.0);
        assert_eq!(a.gate().limit, 4);
    }

    #[test]
    fn ignored_calls_teach_nothing() {
        let t0 = Instant::now();
        let mut a = aimd(10, 1, 100);
        a.on_sample(
            t0,
            &Sample::new(Outcome::Ignore, Duration::from_secs(60), 10),
        );
        assert_eq!(a.raw_limit(), 10.0);
    }

    #[test]
    fn a_burst_of_drops_from_one_flight_backs_off_once() {
        let t0 = Instant::now();
        let mut a = Aimd::new(AimdConfig {
            initial: 100,
            min: 1,
            max: 200,
            ..AimdConfig::default()
        })
        .expect("valid");
        // Ten calls started at t0 all time out at t0 + 1 s.
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..10 {
            a.on_sample(
                t1,
                &Sample::new(Outcome::Overload, Duration::from_secs(1), 100),
            );
        }
        assert_eq!(a.raw_limit(), 90.0);
        // A call started after the cut that drops again cuts again.
        let t2 = t1 + Duration::from_secs(1);
        a.on_sample(t2, &Sample::new(Outcome::Overload, ms(500), 90));
        assert_eq!(a.raw_limit(), 81.0);
    }

    #[test]
    fn every_invalid_field_is_named() {
        let base = AimdConfig::default();
        let cases: Vec<(AimdConfig, &str)> = vec![
            (
                AimdConfig {
                    min: 0,
                    initial: 0,
                    ..base.clone()
                },
                "aimd.min",
            ),
            (
                AimdConfig {
                    min: 50,
                    max: 40,
                    initial: 45,
                    ..base.clone()
                },
                "aimd.min",
            ),
            (
                AimdConfig {
                    initial: 500,
                    ..base.clone()
                },
                "aimd.initial",
            ),
            (
                AimdConfig {
                    initial: 5,
                    ..base.clone()
                },
                "aimd.initial",
            ),
            (
                AimdConfig {
                    backoff: 1.0,
                    ..base.clone()
                },
                "aimd.backoff",
            ),
            (
                AimdConfig {
                    backoff: 0.0,
                    ..base.clone()
                },
                "aimd.backoff",
            ),
            (
                AimdConfig {
                    backoff: f64::NAN,
                    ..base.clone()
                },
                "aimd.backoff",
            ),
            (
                AimdConfig {
                    timeout: Duration::ZERO,
                    ..base.clone()
                },
                "aimd.timeout",
            ),
            (
                AimdConfig {
                    timeout: Duration::MAX,
                    ..base.clone()
                },
                "aimd.timeout",
            ),
            (
                AimdConfig {
                    max: u32::MAX,
                    ..base.clone()
                },
                "aimd.max",
            ),
        ];
        for (config, field) in cases {
            let err = Aimd::new(config.clone()).expect_err(field);
            assert_eq!(err.field(), field, "{config:?}: {err}");
        }
    }
}
