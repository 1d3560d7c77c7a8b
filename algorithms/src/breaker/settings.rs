//! What a validated [`BreakerConfig`] means to a running breaker: the trip
//! thresholds, the cooldown after so many failed cycles, the half-open rule
//! scaled by the fleet size, the ramp's steps. The breaker keeps the
//! configuration it was given, once; these read it.

use std::time::{Duration, Instant};

use super::config::{BreakerConfig, Cooldown, HalfOpen};

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

impl BreakerConfig {
    /// The failure rate that trips the breaker, or infinity for "never", so
    /// that the check on every call is a multiply and a compare.
    #[inline]
    pub(super) fn failure_threshold(&self) -> f64 {
        self.failure_rate.unwrap_or(f64::INFINITY)
    }

    /// The slow-call rate that trips the breaker, or infinity for "never".
    #[inline]
    pub(super) fn slow_threshold(&self) -> f64 {
        self.slow_call_rate.unwrap_or(f64::INFINITY)
    }

    /// Whether a success that took `latency` is a slow call.
    #[inline]
    pub(super) fn is_slow(&self, latency: Duration) -> bool {
        latency > self.slow_call_duration
    }

    /// Whether the breaker trips on slow calls (and so counts a slow probe
    /// as a failed one).
    pub(super) fn trips_on_slow_calls(&self) -> bool {
        self.slow_call_rate.is_some()
    }

    /// The open period after `failed_cycles` failed half-open cycles, with
    /// the dependency failing for `outage` so far, before jitter.
    pub(super) fn cooldown_after(&self, failed_cycles: u32, outage: Duration) -> Duration {
        let bounded = |secs: f64, base: Duration, cap: Duration| {
            if secs.is_finite() && secs < cap.as_secs_f64() {
                Duration::from_secs_f64(secs).clamp(base, cap)
            } else {
                cap
            }
        };
        match self.cooldown {
            Cooldown::Fixed(d) => d,
            Cooldown::Exponential { base, factor, cap } => {
                let n = i32::try_from(failed_cycles).unwrap_or(i32::MAX);
                bounded(base.as_secs_f64() * factor.powi(n), base, cap)
            }
            Cooldown::Proportional { base, share, cap } => {
                bounded(outage.as_secs_f64() * share, base, cap)
            }
        }
    }

    /// The half-open rule after fleet scaling.
    pub(super) fn judge(&self) -> Judge {
        let fleet = self.fleet_size.max(1);
        match self.half_open {
            HalfOpen::Probes {
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
            HalfOpen::Fraction {
                fraction,
                period,
                success_rate,
                min_probes,
            } => Judge::Fraction {
                probability: fraction / f64::from(fleet),
                period,
                success_rate,
                min_probes: min_probes.div_ceil(fleet).max(1),
            },
        }
    }

    /// The ramp right after closing at `now`, or `None` for no ramp.
    pub(super) fn ramp_begin(&self, now: Instant) -> Option<Ramp> {
        if self.ramp.is_zero() || self.ramp_start >= 1.0 {
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
        let doublings = doublings as u32;
        self.ramp / doublings
    }

    /// When the step that began at `since` moves up by itself.
    pub(super) fn ramp_deadline(&self, since: Instant) -> Instant {
        later(since, self.ramp_step())
    }
}

/// `t + d`, or as close to it as an `Instant` can represent.
pub(super) fn later(t: Instant, d: Duration) -> Instant {
    let mut d = d;
    loop {
        if let Some(at) = t.checked_add(d) {
            return at;
        }
        if d.is_zero() {
            return t;
        }
        d /= 2;
    }
}
