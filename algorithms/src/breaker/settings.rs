//! The configuration as a running breaker keeps it: every field of a
//! validated [`BreakerConfig`] except the window (which the call window
//! keeps), exactly, in less room. Durations are kept as nanoseconds (a
//! validated one is at most a year), the trip rates as plain numbers, and the
//! half-open rule as configured, scaled by the fleet size when it is read.

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use super::config::{BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use super::policy::later;

/// A validated [`BreakerConfig`] without its window.
#[derive(Clone, Debug)]
pub(super) struct Settings {
    /// The failure rate that trips the breaker, or infinity for "never", so
    /// that the check on every call is a multiply and a compare.
    pub(super) failure_rate: f64,
    /// The slow-call rate that trips the breaker, or infinity for "never".
    pub(super) slow_call_rate: f64,
    /// [`BreakerConfig::slow_call_duration`], in nanoseconds.
    slow_call_duration: u64,
    cooldown: CooldownRule,
    pub(super) cooldown_jitter: f64,
    seed: u64,
    half_open: HalfOpenRule,
    /// [`BreakerConfig::probe_timeout`], in nanoseconds.
    probe_timeout: u64,
    /// [`BreakerConfig::ramp`], in nanoseconds.
    ramp: u64,
    ramp_start: f64,
    ramp_successes: u32,
    pub(super) min_calls: u32,
    pub(super) consecutive_failures: u32,
    pub(super) probe_concurrency: u32,
    fleet_size: u32,
}

/// [`Cooldown`] with its durations in nanoseconds (a validated cooldown is
/// never zero, which lets the enum fit in three words).
#[derive(Clone, Copy, Debug)]
enum CooldownRule {
    Fixed(NonZeroU64),
    Exponential {
        base: NonZeroU64,
        factor: f64,
        cap: NonZeroU64,
    },
    Proportional {
        base: NonZeroU64,
        share: f64,
        cap: NonZeroU64,
    },
}

/// [`HalfOpen`] with its period in nanoseconds, before fleet scaling.
#[derive(Clone, Copy, Debug)]
enum HalfOpenRule {
    Probes {
        probes: u32,
        close_after: u32,
    },
    Fraction {
        fraction: f64,
        period: u64,
        success_rate: f64,
        min_probes: u32,
    },
}

/// The half-open rule after fleet scaling.
#[derive(Clone, Copy, Debug)]
pub(super) enum Judge {
    Probes {
        allowance: u32,
        close_after: u32,
    },
    Fraction {
        probability: f64,
        period: Duration,
        success_rate: f64,
        min_probes: u32,
    },
}

/// A ramp in progress: the admit probability and the evidence gathered for
/// the next doubling.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ramp {
    /// The admit probability, in `(0, 1)`.
    pub(super) level: f64,
    /// When this step began (the level was last set). Only calls admitted
    /// since count as evidence, and the step ends by itself a step's length
    /// later.
    pub(super) since: Instant,
    /// Successes of calls admitted since `since`, since the last failure.
    pub(super) successes: u32,
}

impl Settings {
    /// The settings of `config`, which must have been validated.
    pub(super) fn new(config: &BreakerConfig) -> Self {
        Settings {
            failure_rate: config.failure_rate.unwrap_or(f64::INFINITY),
            slow_call_rate: config.slow_call_rate.unwrap_or(f64::INFINITY),
            slow_call_duration: nanos(config.slow_call_duration),
            cooldown: match config.cooldown {
                Cooldown::Fixed(d) => CooldownRule::Fixed(positive(d)),
                Cooldown::Exponential { base, factor, cap } => CooldownRule::Exponential {
                    base: positive(base),
                    factor,
                    cap: positive(cap),
                },
                Cooldown::Proportional { base, share, cap } => CooldownRule::Proportional {
                    base: positive(base),
                    share,
                    cap: positive(cap),
                },
            },
            cooldown_jitter: config.cooldown_jitter,
            seed: config.seed,
            half_open: match config.half_open {
                HalfOpen::Probes {
                    probes,
                    close_after,
                } => HalfOpenRule::Probes {
                    probes,
                    close_after,
                },
                HalfOpen::Fraction {
                    fraction,
                    period,
                    success_rate,
                    min_probes,
                } => HalfOpenRule::Fraction {
                    fraction,
                    period: nanos(period),
                    success_rate,
                    min_probes,
                },
            },
            probe_timeout: nanos(config.probe_timeout),
            ramp: nanos(config.ramp),
            ramp_start: config.ramp_start,
            ramp_successes: config.ramp_successes,
            min_calls: config.min_calls,
            consecutive_failures: config.consecutive_failures,
            probe_concurrency: config.probe_concurrency,
            fleet_size: config.fleet_size,
        }
    }

    /// The configuration these settings came from, with `window` as its
    /// window: equal, field for field, to the one given to
    /// [`new`](Self::new).
    pub(super) fn config(&self, window: BreakerWindow) -> BreakerConfig {
        BreakerConfig {
            failure_rate: Some(self.failure_rate).filter(|r| r.is_finite()),
            slow_call_rate: Some(self.slow_call_rate).filter(|r| r.is_finite()),
            slow_call_duration: Duration::from_nanos(self.slow_call_duration),
            window,
            min_calls: self.min_calls,
            consecutive_failures: self.consecutive_failures,
            cooldown: match self.cooldown {
                CooldownRule::Fixed(d) => Cooldown::Fixed(from_nanos(d)),
                CooldownRule::Exponential { base, factor, cap } => Cooldown::Exponential {
                    base: from_nanos(base),
                    factor,
                    cap: from_nanos(cap),
                },
                CooldownRule::Proportional { base, share, cap } => Cooldown::Proportional {
                    base: from_nanos(base),
                    share,
                    cap: from_nanos(cap),
                },
            },
            cooldown_jitter: self.cooldown_jitter,
            seed: self.seed,
            half_open: match self.half_open {
                HalfOpenRule::Probes {
                    probes,
                    close_after,
                } => HalfOpen::Probes {
                    probes,
                    close_after,
                },
                HalfOpenRule::Fraction {
                    fraction,
                    period,
                    success_rate,
                    min_probes,
                } => HalfOpen::Fraction {
                    fraction,
                    period: Duration::from_nanos(period),
                    success_rate,
                    min_probes,
                },
            },
            probe_concurrency: self.probe_concurrency,
            probe_timeout: self.probe_timeout(),
            ramp: Duration::from_nanos(self.ramp),
            ramp_start: self.ramp_start,
            ramp_successes: self.ramp_successes,
            fleet_size: self.fleet_size,
        }
    }

    /// Whether a success that took `latency` is a slow call.
    #[inline]
    pub(super) fn is_slow(&self, latency: Duration) -> bool {
        latency > Duration::from_nanos(self.slow_call_duration)
    }

    /// Whether the breaker trips on slow calls (and so counts a slow probe
    /// as a failed one).
    pub(super) fn trips_on_slow_calls(&self) -> bool {
        self.slow_call_rate.is_finite()
    }

    pub(super) fn probe_timeout(&self) -> Duration {
        Duration::from_nanos(self.probe_timeout)
    }

    /// The open period after `failed_cycles` failed half-open cycles, with
    /// the dependency failing for `outage` so far, before jitter.
    pub(super) fn cooldown(&self, failed_cycles: u32, outage: Duration) -> Duration {
        let bounded = |secs: f64, base: NonZeroU64, cap: NonZeroU64| {
            let cap = from_nanos(cap);
            if secs.is_finite() && secs < cap.as_secs_f64() {
                Duration::from_secs_f64(secs).clamp(from_nanos(base), cap)
            } else {
                cap
            }
        };
        match self.cooldown {
            CooldownRule::Fixed(d) => from_nanos(d),
            CooldownRule::Exponential { base, factor, cap } => {
                let n = i32::try_from(failed_cycles).unwrap_or(i32::MAX);
                bounded(from_nanos(base).as_secs_f64() * factor.powi(n), base, cap)
            }
            CooldownRule::Proportional { base, share, cap } => {
                bounded(outage.as_secs_f64() * share, base, cap)
            }
        }
    }

    /// The half-open rule after fleet scaling.
    pub(super) fn judge(&self) -> Judge {
        let fleet = self.fleet_size.max(1);
        match self.half_open {
            HalfOpenRule::Probes {
                probes,
                close_after,
            } => {
                let allowance = probes.div_ceil(fleet).max(1);
                // Keep the k/n proportion: ceil(k · n' / n), within [1, n'].
                let scaled = (u64::from(close_after) * u64::from(allowance))
                    .div_ceil(u64::from(probes.max(1)));
                let close_after = u32::try_from(scaled)
                    .unwrap_or(allowance)
                    .clamp(1, allowance);
                Judge::Probes {
                    allowance,
                    close_after,
                }
            }
            HalfOpenRule::Fraction {
                fraction,
                period,
                success_rate,
                min_probes,
            } => Judge::Fraction {
                probability: fraction / f64::from(fleet),
                period: Duration::from_nanos(period),
                success_rate,
                min_probes: min_probes.div_ceil(fleet).max(1),
            },
        }
    }

    /// The ramp right after closing at `now`, or `None` for no ramp.
    pub(super) fn ramp_begin(&self, now: Instant) -> Option<Ramp> {
        if self.ramp == 0 || self.ramp_start >= 1.0 {
            return None;
        }
        Some(Ramp {
            level: self.ramp_start,
            since: now,
            successes: 0,
        })
    }

    /// The longest one step of the ramp lasts with no failure: the ramp's
    /// length over the number of doublings from its start to 1.
    pub(super) fn ramp_step(&self) -> Duration {
        // ramp_start is in (0, 1): at least one doubling, and at most about
        // a thousand (the smallest positive f64 is 2^-1074).
        let doublings = (-self.ramp_start.log2()).ceil().clamp(1.0, 2048.0);
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "clamped to [1, 2048] just above"
        )]
        let doublings = doublings as u64;
        Duration::from_nanos(self.ramp / doublings)
    }

    /// When the step that began at `since` moves up by itself.
    pub(super) fn ramp_deadline(&self, since: Instant) -> Instant {
        later(since, self.ramp_step())
    }

    /// The successes that double the ramp's level.
    pub(super) fn ramp_successes(&self) -> u32 {
        self.ramp_successes
    }
}

/// A validated duration in nanoseconds (at most a year, so it fits).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A validated duration that is never zero, in nanoseconds.
fn positive(d: Duration) -> NonZeroU64 {
    NonZeroU64::new(nanos(d)).unwrap_or(NonZeroU64::MIN)
}

fn from_nanos(n: NonZeroU64) -> Duration {
    Duration::from_nanos(n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_give_back_the_configuration_they_came_from() {
        let fraction = HalfOpen::Fraction {
            fraction: 0.05,
            period: Duration::from_nanos(30_000_000_007),
            success_rate: 0.8,
            min_probes: 7,
        };
        let configs = [
            BreakerConfig::recommended(),
            BreakerConfig::classic(),
            BreakerConfig {
                failure_rate: None,
                slow_call_rate: Some(0.3),
                slow_call_duration: Duration::new(1, 1),
                cooldown: Cooldown::Fixed(Duration::from_nanos(1)),
                half_open: fraction,
                probe_timeout: crate::MAX_DURATION,
                ramp: Duration::from_nanos(3),
                seed: u64::MAX,
                fleet_size: 999,
                ..BreakerConfig::recommended()
            },
        ];
        for config in configs {
            assert!(config.validate().is_ok());
            let settings = Settings::new(&config);
            assert_eq!(settings.config(config.window), config);
        }
    }
}
