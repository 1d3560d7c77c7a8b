//! What the fuzz targets share: every policy built from arbitrary
//! parameters, arbitrary events, and the checks run after each event.
//!
//! Every configuration field is an `Option`: `None` keeps the default, so
//! the fuzzer reaches valid policies often while still trying NaN,
//! infinities, zero and enormous durations and out-of-range counts (which
//! must be refused with a `ConfigError`, never a panic).

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::window::{Aggregation, WindowConfig};
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, ConfigError, Fixed, Gradient, GradientConfig, Outcome, Sample,
    Stack, Throttle, ThrottleConfig, Vegas, VegasConfig, MAX_LIMIT,
};

/// `min`, `max` and `initial` of an adaptive limit.
#[derive(Arbitrary, Debug, Clone)]
pub struct Bounds {
    min: Option<u32>,
    max: Option<u32>,
    initial: Option<u32>,
}

/// How a latency policy gathers its windows.
#[derive(Arbitrary, Debug, Clone)]
pub struct WindowArgs {
    min_duration: Option<Duration>,
    max_duration: Option<Duration>,
    min_samples: Option<u32>,
    percentile: Option<f64>,
    reservoir: Option<u32>,
}

impl WindowArgs {
    fn config(&self) -> WindowConfig {
        let d = WindowConfig::default();
        WindowConfig {
            min_duration: self.min_duration.unwrap_or(d.min_duration),
            max_duration: self.max_duration.unwrap_or(d.max_duration),
            min_samples: self.min_samples.unwrap_or(d.min_samples),
            aggregation: self
                .percentile
                .map_or(Aggregation::Average, Aggregation::Percentile),
            reservoir: self.reservoir.unwrap_or(d.reservoir),
        }
    }
}

/// A breaker's trip window.
#[derive(Arbitrary, Debug, Clone)]
pub enum WindowChoice {
    /// The last `n` calls.
    Count(u32),
    /// A time window of `length` in `buckets`.
    Time(Duration, u32),
}

/// A breaker's cooldown.
#[derive(Arbitrary, Debug, Clone)]
pub enum CooldownChoice {
    /// Always the same.
    Fixed(Duration),
    /// `base`, `factor`, `cap`.
    Exponential(Duration, f64, Duration),
    /// `base`, `share`, `cap`.
    Proportional(Duration, f64, Duration),
}

/// A breaker's half-open rule.
#[derive(Arbitrary, Debug, Clone)]
pub enum HalfOpenChoice {
    /// `probes`, `close_after`.
    Probes(u32, u32),
    /// `fraction`, `period`, `success_rate`, `min_probes`.
    Fraction(f64, Duration, f64, u32),
}

/// Every parameter of a breaker.
#[derive(Arbitrary, Debug, Clone)]
pub struct BreakerArgs {
    failure_rate: Option<Option<f64>>,
    slow_call_rate: Option<f64>,
    slow_call_duration: Option<Duration>,
    window: Option<WindowChoice>,
    min_calls: Option<u32>,
    consecutive_failures: Option<u32>,
    cooldown: Option<CooldownChoice>,
    cooldown_jitter: Option<f64>,
    seed: u64,
    half_open: Option<HalfOpenChoice>,
    probe_concurrency: Option<u32>,
    probe_timeout: Option<Duration>,
    ramp: Option<Duration>,
    ramp_start: Option<f64>,
    ramp_successes: Option<u32>,
    fleet_size: Option<u32>,
}

impl BreakerArgs {
    fn build(&self) -> Result<Breaker, ConfigError> {
        let d = BreakerConfig::recommended();
        Breaker::new(BreakerConfig {
            failure_rate: self.failure_rate.unwrap_or(d.failure_rate),
            slow_call_rate: self.slow_call_rate.or(d.slow_call_rate),
            slow_call_duration: self.slow_call_duration.unwrap_or(d.slow_call_duration),
            window: match self.window {
                None => d.window,
                Some(WindowChoice::Count(calls)) => BreakerWindow::Count { calls },
                Some(WindowChoice::Time(length, buckets)) => {
                    BreakerWindow::Time { length, buckets }
                }
            },
            min_calls: self.min_calls.unwrap_or(d.min_calls),
            consecutive_failures: self
                .consecutive_failures
                .unwrap_or(d.consecutive_failures),
            cooldown: match self.cooldown {
                None => d.cooldown,
                Some(CooldownChoice::Fixed(c)) => Cooldown::Fixed(c),
                Some(CooldownChoice::Exponential(base, factor, cap)) => {
                    Cooldown::Exponential { base, factor, cap }
                }
                Some(CooldownChoice::Proportional(base, share, cap)) => {
                    Cooldown::Proportional { base, share, cap }
                }
            },
            cooldown_jitter: self.cooldown_jitter.unwrap_or(d.cooldown_jitter),
            seed: self.seed,
            half_open: match self.half_open {
                None => d.half_open,
                Some(HalfOpenChoice::Probes(probes, close_after)) => HalfOpen::Probes {
                    probes,
                    close_after,
                },
                Some(HalfOpenChoice::Fraction(fraction, period, success_rate, min_probes)) => {
                    HalfOpen::Fraction {
                        fraction,
                        period,
                        success_rate,
                        min_probes,
                    }
                }
            },
            probe_concurrency: self.probe_concurrency.unwrap_or(d.probe_concurrency),
            probe_timeout: self.probe_timeout.unwrap_or(d.probe_timeout),
            ramp: self.ramp.unwrap_or(d.ramp),
            ramp_start: self.ramp_start.unwrap_or(d.ramp_start),
            ramp_successes: self.ramp_successes.unwrap_or(d.ramp_successes),
            fleet_size: self.fleet_size.unwrap_or(d.fleet_size),
        })
    }
}

/// One policy that is not a stack.
#[derive(Arbitrary, Debug, Clone)]
pub enum Leaf {
    /// A bulkhead.
    Fixed(u32),
    /// Loss-based.
    Aimd {
        /// Limits.
        bounds: Bounds,
        /// Backoff ratio.
        backoff: Option<f64>,
        /// Slow-call timeout.
        timeout: Option<Duration>,
        /// One backoff per flight.
        one_backoff_per_flight: bool,
    },
    /// Queue estimate.
    Vegas {
        /// Limits.
        bounds: Bounds,
        /// α, β, threshold.
        thresholds: (Option<f64>, Option<f64>, Option<f64>),
        /// Backoff ratio.
        backoff: Option<f64>,
        /// Slow start.
        slow_start: bool,
        /// Re-probe spacing and depth.
        probe: (Option<u32>, Option<f64>),
        /// Seed.
        seed: u64,
        /// Noise band and loss tolerance.
        tuning: (Option<f64>, Option<f64>),
        /// Windows.
        window: WindowArgs,
    },
    /// Latency gradient.
    Gradient {
        /// Limits.
        bounds: Bounds,
        /// Tolerance, smoothing, headroom.
        shape: (Option<f64>, Option<f64>, Option<f64>),
        /// Long window.
        long_window: Option<u32>,
        /// Backoff ratio.
        backoff: Option<f64>,
        /// Noise band, long-average rise, loss tolerance.
        tuning: (Option<f64>, Option<f64>, Option<f64>),
        /// Windows.
        window: WindowArgs,
    },
    /// Client-side throttling.
    Throttle {
        /// K.
        k: Option<f64>,
        /// Pad.
        pad: Option<u32>,
        /// Window and buckets.
        window: (Option<Duration>, Option<u32>),
        /// Rejection cap.
        max_reject_probability: Option<f64>,
        /// Volume floor.
        min_requests: Option<u64>,
        /// Count local rejections.
        count_rejected: bool,
    },
    /// A breaker.
    Breaker(BreakerArgs),
}

/// Any policy.
#[derive(Arbitrary, Debug, Clone)]
pub enum PolicyArgs {
    /// One policy.
    Leaf(Box<Leaf>),
    /// Several, as one.
    Stack(Vec<Leaf>),
}

/// A policy, with what the checks need to know about it.
pub enum Built {
    /// A bulkhead (its limit can be changed).
    Fixed(Fixed),
    /// A breaker (it can be moved by hand).
    Breaker(Box<Breaker>),
    /// An adaptive limit within `[min, max]`.
    Bounded(Box<dyn Algorithm>, u32, u32),
    /// Anything else.
    Other(Box<dyn Algorithm>),
    /// A stack, with each member's bounds if it has them.
    Stack(Stack, Vec<Option<(u32, u32)>>),
}

fn bounds(b: &Bounds, d: (u32, u32, u32)) -> (u32, u32, u32) {
    (
        b.min.unwrap_or(d.0),
        b.max.unwrap_or(d.1),
        b.initial.unwrap_or(d.2),
    )
}

impl Leaf {
    fn build(&self) -> Result<Built, ConfigError> {
        Ok(match self {
            Leaf::Fixed(limit) => Built::Fixed(Fixed::new(*limit)?),
            Leaf::Aimd {
                bounds: b,
                backoff,
                timeout,
                one_backoff_per_flight,
            } => {
                let d = AimdConfig::default();
                let (min, max, initial) = bounds(b, (d.min, d.max, d.initial));
                let aimd = Aimd::new(AimdConfig {
                    min,
                    max,
                    initial,
                    backoff: backoff.unwrap_or(d.backoff),
                    timeout: timeout.unwrap_or(d.timeout),
                    one_backoff_per_flight: *one_backoff_per_flight,
                    ..d
                })?;
                Built::Bounded(Box::new(aimd), min, max)
            }
            Leaf::Vegas {
                bounds: b,
                thresholds: (alpha, beta, threshold),
                backoff,
                slow_start,
                probe: (interval, factor),
                seed,
                tuning: (noise, loss_tolerance),
                window,
            } => {
                let d = VegasConfig::default();
                let (min, max, initial) = bounds(b, (d.min, d.max, d.initial));
                let vegas = Vegas::new(VegasConfig {
                    min,
                    max,
                    initial,
                    alpha: alpha.unwrap_or(d.alpha),
                    beta: beta.unwrap_or(d.beta),
                    threshold: threshold.unwrap_or(d.threshold),
                    backoff: backoff.unwrap_or(d.backoff),
                    slow_start: *slow_start,
                    probe_interval: interval.unwrap_or(d.probe_interval),
                    probe_factor: factor.unwrap_or(d.probe_factor),
                    seed: *seed,
                    noise: noise.unwrap_or(d.noise),
                    loss_tolerance: loss_tolerance.unwrap_or(d.loss_tolerance),
                    window: window.config(),
                })?;
                Built::Bounded(Box::new(vegas), min, max)
            }
            Leaf::Gradient {
                bounds: b,
                shape: (tolerance, smoothing, headroom),
                long_window,
                backoff,
                tuning: (noise, long_rise, loss_tolerance),
                window,
            } => {
                let d = GradientConfig::default();
                let (min, max, initial) = bounds(b, (d.min, d.max, d.initial));
                let gradient = Gradient::new(GradientConfig {
                    min,
                    max,
                    initial,
                    tolerance: tolerance.unwrap_or(d.tolerance),
                    smoothing: smoothing.unwrap_or(d.smoothing),
                    headroom: headroom.unwrap_or(d.headroom),
                    long_window: long_window.unwrap_or(d.long_window),
                    backoff: backoff.unwrap_or(d.backoff),
                    noise: noise.unwrap_or(d.noise),
                    long_rise: long_rise.unwrap_or(d.long_rise),
                    loss_tolerance: loss_tolerance.unwrap_or(d.loss_tolerance),
                    window: window.config(),
                })?;
                Built::Bounded(Box::new(gradient), min, max)
            }
            Leaf::Throttle {
                k,
                pad,
                window: (window, buckets),
                max_reject_probability,
                min_requests,
                count_rejected,
            } => {
                let d = ThrottleConfig::default();
                Built::Other(Box::new(Throttle::new(ThrottleConfig {
                    k: k.unwrap_or(d.k),
                    pad: pad.unwrap_or(d.pad),
                    window: window.unwrap_or(d.window),
                    buckets: buckets.unwrap_or(d.buckets),
                    max_reject_probability: max_reject_probability
                        .unwrap_or(d.max_reject_probability),
                    min_requests: min_requests.unwrap_or(d.min_requests),
                    count_rejected: *count_rejected,
                })?))
            }
            Leaf::Breaker(args) => Built::Breaker(Box::new(args.build()?)),
        })
    }
}

impl PolicyArgs {
    /// Build the policy, or the configuration error it must be refused with.
    ///
    /// # Errors
    ///
    /// The policy's own [`ConfigError`].
    pub fn build(&self) -> Result<Built, ConfigError> {
        match self {
            PolicyArgs::Leaf(leaf) => leaf.build(),
            PolicyArgs::Stack(leaves) => {
                let mut builder = Stack::builder();
                let mut bounds = Vec::new();
                for leaf in leaves.iter().take(4) {
                    let (policy, b) = leaf.build()?.into_boxed();
                    builder = builder.push_boxed(policy);
                    bounds.push(b);
                }
                Ok(Built::Stack(builder.build()?, bounds))
            }
        }
    }
}

impl Built {
    /// The policy.
    pub fn get(&self) -> &dyn Algorithm {
        match self {
            Built::Fixed(p) => p,
            Built::Breaker(p) => p.as_ref(),
            Built::Bounded(p, ..) | Built::Other(p) => p.as_ref(),
            Built::Stack(p, _) => p,
        }
    }

    /// The policy, to feed it events.
    pub fn get_mut(&mut self) -> &mut dyn Algorithm {
        match self {
            Built::Fixed(p) => p,
            Built::Breaker(p) => p.as_mut(),
            Built::Bounded(p, ..) | Built::Other(p) => p.as_mut(),
            Built::Stack(p, _) => p,
        }
    }

    /// The policy boxed, with its bounds if it has them.
    pub fn into_boxed(self) -> (Box<dyn Algorithm>, Option<(u32, u32)>) {
        match self {
            Built::Fixed(p) => (Box::new(p), None),
            Built::Breaker(p) => (p, None),
            Built::Bounded(p, min, max) => (p, Some((min, max))),
            Built::Other(p) => (p, None),
            Built::Stack(p, _) => (Box::new(p), None),
        }
    }

    /// Panic if the policy publishes a NaN or out-of-range gate, or an
    /// adaptive limit (published or unrounded) outside its bounds.
    pub fn check(&self) {
        check_gate(self.get());
        match self {
            Built::Bounded(p, min, max) => check_bounds(p.as_ref(), *min, *max),
            Built::Stack(stack, bounds) => {
                for (i, b) in bounds.iter().enumerate() {
                    if let (Some((min, max)), Some(member)) = (b, stack.member(i)) {
                        check_gate(member);
                        check_bounds(member, *min, *max);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The gate itself: a probability in `[0, 1]` (never NaN), a limit within
/// `MAX_LIMIT`.
pub fn check_gate(policy: &dyn Algorithm) {
    let gate = policy.publish().gate;
    let p = gate.admit_probability;
    assert!(
        (0.0..=1.0).contains(&p),
        "{}: admit probability {p}",
        policy.name()
    );
    assert!(
        gate.limit <= MAX_LIMIT,
        "{}: limit {}",
        policy.name(),
        gate.limit
    );
}

fn check_bounds(policy: &dyn Algorithm, min: u32, max: u32) {
    let limit = policy.publish().gate.limit;
    assert!(
        (min..=max).contains(&limit),
        "{}: limit {limit} outside [{min}, {max}]",
        policy.name()
    );
    if let Some(raw) = policy.snapshot().raw_limit {
        assert!(
            raw.is_finite() && raw >= f64::from(min) && raw <= f64::from(max),
            "{}: unrounded limit {raw} outside [{min}, {max}]",
            policy.name()
        );
    }
}

/// What a finished call says.
pub fn outcome(n: u8) -> Outcome {
    match n % 3 {
        0 => Outcome::Success,
        1 => Outcome::Overload,
        _ => Outcome::Ignore,
    }
}

/// A clock the targets move by hand: forward by any step (saturating where
/// an `Instant` cannot go), backwards too.
#[derive(Debug)]
pub struct Time {
    base: Instant,
    /// The current instant.
    pub now: Instant,
}

impl Time {
    /// Standing at an arbitrary instant.
    pub fn new() -> Self {
        let base = Instant::now();
        Time { base, now: base }
    }

    /// Move forward by `by`, or as far as an `Instant` can.
    pub fn forward(&mut self, by: Duration) {
        let mut by = by;
        loop {
            if let Some(t) = self.now.checked_add(by) {
                self.now = t;
                return;
            }
            if by.is_zero() {
                return;
            }
            by /= 2;
        }
    }

    /// Move backwards by `by`, not before where the clock started.
    pub fn back(&mut self, by: Duration) {
        self.now = self.now.checked_sub(by).unwrap_or(self.base).max(self.base);
    }
}

impl Default for Time {
    fn default() -> Self {
        Time::new()
    }
}

/// A sample of `outcome` taking `latency` with `in_flight` calls.
pub fn sample(outcome_code: u8, latency: Duration, in_flight: u32, probe: bool) -> Sample {
    Sample::new(outcome(outcome_code), latency, in_flight).with_probe(probe)
}
