//! The parameters of a [`Breaker`](super::Breaker), their defaults, the two
//! presets and their validation.

use std::time::Duration;

use crate::check::{rate, whole};
use crate::{check, ConfigError, MAX_DURATION};

/// The most calls a count window may hold.
pub const MAX_WINDOW_CALLS: u32 = 100_000;

/// The most buckets a time window may be divided into: the bucket ring's
/// own cap, which the window is kept in.
pub const MAX_WINDOW_BUCKETS: u32 = crate::buckets::MAX_BUCKETS;

/// The shortest bucket a time window may use: the bucket ring's.
pub use crate::buckets::MIN_BUCKET_WIDTH;

/// The most probes a half-open cycle may be configured with.
pub const MAX_PROBES: u32 = 10_000;

/// The largest fleet a probe allowance may be scaled down by.
pub const MAX_FLEET_SIZE: u32 = 1_000_000;

/// The largest factor an exponential cooldown may grow by per failed cycle.
pub const MAX_COOLDOWN_FACTOR: f64 = 100.0;

/// Which recent calls the failure and slow-call rates are measured over.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::breaker::{BreakerConfig, BreakerWindow};
///
/// // Hystrix's window: 10 s in ten buckets.
/// let hystrix = BreakerWindow::Time { length: Duration::from_secs(10), buckets: 10 };
/// assert!(BreakerConfig { window: hystrix, ..Default::default() }.validate().is_ok());
/// // A count window smaller than the volume floor could never trip.
/// let tiny = BreakerConfig { window: BreakerWindow::Count { calls: 10 }, ..Default::default() };
/// assert_eq!(tiny.validate().unwrap_err().field(), "breaker.min_calls");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
pub enum BreakerWindow {
    /// The last `calls` recorded calls, however old.
    Count {
        /// How many calls the window holds, in `[1, 100_000]`.
        calls: u32,
    },
    /// The calls recorded in the last `length`, kept in `buckets` buckets of
    /// `length / buckets` each; a bucket is evicted as a whole once it has
    /// aged out, so the window covers between `length − length / buckets`
    /// and `length`. A bucket counts at most `u32::MAX` calls; calls past
    /// that in the same bucket are not counted.
    Time {
        /// How far back the window reaches, above 0 and at most a year.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        length: Duration,
        /// How many buckets it is cut into, in `[1, 1_000]`, each at least
        /// 1 ms wide.
        buckets: u32,
    },
}

/// How long the breaker stays open before it lets probes through.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::breaker::{BreakerConfig, Cooldown};
///
/// // The seed's fix: capped at 60 s, no doubling.
/// let fixed = BreakerConfig { cooldown: Cooldown::Fixed(Duration::from_secs(60)), ..Default::default() };
/// assert!(fixed.validate().is_ok());
/// let inverted = Cooldown::Exponential {
///     base: Duration::from_secs(90),
///     factor: 2.0,
///     cap: Duration::from_secs(60),
/// };
/// let err = BreakerConfig { cooldown: inverted, ..Default::default() }.validate().unwrap_err();
/// assert_eq!(err.field(), "breaker.cooldown.exponential.base");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
pub enum Cooldown {
    /// Always the same open period.
    Fixed(#[cfg_attr(feature = "serde", serde(with = "humantime_serde"))] Duration),
    /// `base` after a trip from closed, multiplied by `factor` for every
    /// half-open cycle that failed since the breaker was last closed, never
    /// more than `cap`. Closing resets it to `base`, and so does a failed
    /// cycle in which a probe succeeded: the dependency is answering again,
    /// and the next look should come soon.
    Exponential {
        /// The first open period, above 0 and at most `cap`.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        base: Duration,
        /// The growth per failed half-open cycle, in `[1, 100]` (1 is fixed).
        factor: f64,
        /// The longest open period, at most a year.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        cap: Duration,
    },
    /// `share` of how long the dependency has been failing so far, at least
    /// `base` and at most `cap`: the outage is timed from the trip, and
    /// afresh from any half-open cycle in which a probe succeeded. Closing
    /// resets it.
    ///
    /// A dependency that comes back therefore waits at most
    /// `max(base, share × outage)` before it is probed again: `base` for any
    /// outage shorter than `base / share`. Each failed cycle lengthens the
    /// outage by the cooldown it waited, so the cooldown grows by
    /// `(1 + share)` per failed cycle once it is above `base`: exponential
    /// backoff, but paced by how long the dependency has been down rather
    /// than by how many times it was probed.
    Proportional {
        /// The shortest open period, above 0 and at most `cap`.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        base: Duration,
        /// The open period as a share of the outage so far, in `(0, 1]`.
        share: f64,
        /// The longest open period, at most a year.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        cap: Duration,
    },
}

/// How a half-open breaker lets trial calls (probes) through and judges
/// them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::breaker::{BreakerConfig, HalfOpen};
///
/// // The seed's fix: 5% of traffic for 30 s, judged on the success rate.
/// let share = HalfOpen::Fraction {
///     fraction: 0.05,
///     period: Duration::from_secs(30),
///     success_rate: 0.8,
///     min_probes: 5,
/// };
/// let config = BreakerConfig { half_open: share, ramp_start: 0.05, ..Default::default() };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
pub enum HalfOpen {
    /// Admit `probes` trial calls per half-open cycle in total; close as soon
    /// as `close_after` of them have succeeded, open again as soon as that has
    /// become impossible (`probes − close_after + 1` failures). A probe that
    /// is not reported within the probe timeout is a failure. If no call
    /// arrives, the breaker waits, still admitting probes.
    Probes {
        /// The probe allowance per cycle, in `[1, 10_000]`, before fleet
        /// scaling.
        probes: u32,
        /// The successes needed to close, in `[1, probes]` (the *k* of *k of
        /// n*).
        close_after: u32,
    },
    /// For `period`, admit `fraction` of arrivals as trial calls; once the
    /// period is over and at least `min_probes` of them have been judged,
    /// close if at least `success_rate` of the judged probes succeeded and
    /// open again otherwise.
    Fraction {
        /// The share of arrivals admitted as probes, in `(0, 1]`, before
        /// fleet scaling.
        fraction: f64,
        /// How long to sample, above 0 and at most a year.
        #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
        period: Duration,
        /// The share of judged probes that must succeed to close, in
        /// `(0, 1]`.
        success_rate: f64,
        /// The fewest judged probes a decision is made on, in `[1, 10_000]`,
        /// before fleet scaling.
        min_probes: u32,
    },
}

/// The parameters of a [`Breaker`](super::Breaker).
///
/// The [`Default`] is [`BreakerConfig::recommended`]: trip at a 50% failure
/// rate over 30 s once 20 calls are in the window, or on ten failures in a
/// row while fewer are; stay open a tenth of the outage so far, at least
/// 5 s and at most 60 s, jittered down by up to 20%; then five probes, at
/// most five at once, each allowed 30 s, closing on four successes; then a
/// ramp from 10% of traffic, doubling on every three successes, back to all
/// of it within 20 s. The slow-call trip is off by default: set
/// [`slow_call_rate`](Self::slow_call_rate) and
/// [`slow_call_duration`](Self::slow_call_duration) together, from the
/// latency your callers can live with.
///
/// [`BreakerConfig::classic`] is the breaker of the incident in the seed
/// documents, kept to compare against.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::breaker::{BreakerConfig, HalfOpen};
///
/// let config = BreakerConfig {
///     slow_call_rate: Some(0.5),
///     slow_call_duration: Duration::from_secs(5),
///     half_open: HalfOpen::Probes { probes: 10, close_after: 8 },
///     ..BreakerConfig::recommended()
/// };
/// assert!(config.validate().is_ok());
///
/// let bad = BreakerConfig { half_open: HalfOpen::Probes { probes: 3, close_after: 4 }, ..config };
/// assert_eq!(bad.validate().unwrap_err().field(), "breaker.half_open.probes.close_after");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct BreakerConfig {
    /// Trip when at least this share of the window's calls failed
    /// (`Overload`), in `(0, 1]`; `None` never trips on failures. Default
    /// 50%.
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_rate"))]
    pub failure_rate: Option<f64>,
    /// Trip when at least this share of the window's calls were slow
    /// successes, in `(0, 1]`; `None` (the default) never trips on slowness.
    /// At least one of the two rates must be set.
    ///
    /// While it is `None`, the breaker does not need latencies
    /// ([`Feedback::Outcomes`](crate::Feedback::Outcomes)), so a limiter
    /// reads the clock once per call instead of twice; the slow-call rate a
    /// transition reports then counts only the calls that were timed anyway
    /// (all of them if the limiter has an observer, such as its metrics).
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_rate"))]
    pub slow_call_rate: Option<f64>,
    /// A success that took longer than this is a *slow call* (exactly this
    /// long is not). While [`slow_call_rate`](Self::slow_call_rate) is set, a
    /// slow probe is a failed probe. Above 0 and at most a year; default
    /// 10 s.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub slow_call_duration: Duration,
    /// Which calls the rates are measured over. Default: the last 30 s, in
    /// 30 one-second buckets.
    pub window: BreakerWindow,
    /// The fewest calls the window must hold before the breaker may trip on
    /// a rate, in `[1, 2^31 − 1]` (at most the window's size for a count
    /// window). Default 20.
    pub min_calls: u32,
    /// Trip after this many failures (`Overload`) in a row, however long
    /// they took, while the window holds fewer than
    /// [`min_calls`](Self::min_calls) calls; 0 turns it off. In
    /// `[0, 100_000]`; default 10.
    ///
    /// A time window fills up only at a rate of `min_calls / length` (20 in
    /// 30 s: 0.67 calls/s); below that the rates can never be judged, and a
    /// caller sending 0.2 calls/s would never open on a total outage. The
    /// run stands in for the rate there, and only there: where the window
    /// holds enough calls the rate decides, so a run of bad luck never opens
    /// a busy breaker whose failure rate is under the threshold. A run of
    /// ten failures is what a total outage gives at any rate (50 s at
    /// 0.2 calls/s), and what random failures almost never give: `0.05^10 ≈
    /// 1e-13` per call at 5% failures (one run in 3 × 10^5 years at
    /// 1 call/s), `0.3^10 ≈ 6e-6` at 30%.
    pub consecutive_failures: u32,
    /// How long to stay open. Default: a tenth of the outage so far, at
    /// least 5 s and at most 60 s.
    pub cooldown: Cooldown,
    /// Each open period is drawn uniformly from `[(1 − jitter)·d, d]`, where
    /// `d` is the cooldown, so breakers that tripped together do not probe
    /// together. In `[0, 1)`; default 0.2. The cap is never exceeded.
    pub cooldown_jitter: f64,
    /// The seed of the breaker's own random generator (jitter only). Give
    /// each instance of a fleet its own seed.
    pub seed: u64,
    /// How half-open admits and judges probes. Default: five probes, closing
    /// on four successes.
    pub half_open: HalfOpen,
    /// The most probes in flight at once, in `[1, 2^31 − 1]`. Default 5.
    pub probe_concurrency: u32,
    /// How long a probe may take: the attempt timeout the runtime gives a
    /// call admitted as a probe (`Limiter::call`, the tower layer and
    /// `permit.timeout(ordinary)` all use it, through
    /// [`Algorithm::probe_timeout`](crate::Algorithm::probe_timeout)), and
    /// the breaker's own deadline: a probe that has not reported this long
    /// after it was admitted is a failed probe, so half-open can never
    /// stick. Make it longer than a normal call's timeout: a dependency
    /// coming back cold answers slowly at first. Above 0 and at most a year;
    /// default 30 s.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub probe_timeout: Duration,
    /// The longest the ramp after closing lasts. The admit probability
    /// starts at [`ramp_start`](Self::ramp_start) and doubles (up to 1,
    /// which ends the ramp) on evidence: after
    /// [`ramp_successes`](Self::ramp_successes) successes of calls admitted
    /// at the current level, with no failure among them. A step that has
    /// not gathered that evidence moves up anyway once it has lasted
    /// `ramp / n` (`n` the number of doublings from `ramp_start` to 1), so a
    /// caller too sparse to gather evidence is back to full traffic within
    /// `ramp` unless the breaker reopens. A failure (or a slow call, when
    /// slow calls trip) restarts the count of successes: failures hold back
    /// the evidence, not the clock, and enough of them open the breaker
    /// through the trip rules. Zero jumps straight to full traffic. At most
    /// a year; default 20 s.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub ramp: Duration,
    /// The admit probability the ramp starts from, in `(0, 1]`. Default 0.1.
    pub ramp_start: f64,
    /// The successes, of calls admitted at the current level, that double
    /// the ramp's admit probability, in `[1, 100_000]`. Counting only calls
    /// admitted at the current level paces each step by at least one round
    /// trip, so a dependency that answers slowly is ramped slowly. Default 3.
    pub ramp_successes: u32,
    /// How many instances share the dependency, each with its own breaker,
    /// in `[1, 1_000_000]`. The probe allowance becomes
    /// `max(1, ceil(probes / fleet_size))` (the successes needed shrink in
    /// proportion, never below one) and a probe fraction is divided by it, so
    /// the fleet as a whole stakes about what one breaker would. Default 1.
    pub fleet_size: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig::recommended()
    }
}

impl BreakerConfig {
    /// The breaker this crate recommends, and the [`Default`].
    ///
    /// | | default |
    /// | --- | --- |
    /// | trip | 50% failures over the last 30 s (30 buckets), once 20 calls are in it; below 20 calls, 10 failures in a row |
    /// | cooldown | a tenth of the outage so far, 5–60 s, jittered down by up to 20%; starts over when a probe succeeds |
    /// | half-open | 5 probes, at most 5 at once, 4 successes close it |
    /// | probe timeout | 30 s: a probe's attempt timeout, and its deadline |
    /// | ramp | from 10%, doubling on every 3 successes of calls admitted at the level; at full traffic within 20 s |
    ///
    /// Several probes judged together, so that one slow or unlucky trial
    /// call cannot keep the dependency shut out, each given 30 s, so that a
    /// dependency coming back cold is not refused for answering slowly. A
    /// dependency that comes back is probed within 5 s after an outage under
    /// 50 s and within a tenth of a longer one, never more than a minute,
    /// and is back at full traffic a few round trips after it closes: of a
    /// dependency up a minute and down a minute, 83–95% of the calls in its
    /// up minutes are served (from 5 to 100 calls/s). A caller sending one
    /// call every 5 s still opens within a minute of a total outage, and 5%
    /// of calls failing at random never opens it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat_algorithms::breaker::{BreakerConfig, Cooldown, HalfOpen};
    ///
    /// let c = BreakerConfig::recommended();
    /// assert_eq!(c.half_open, HalfOpen::Probes { probes: 5, close_after: 4 });
    /// assert_eq!(c.probe_timeout, Duration::from_secs(30));
    /// assert_eq!(c.consecutive_failures, 10);
    /// assert!(matches!(c.cooldown, Cooldown::Proportional { cap, .. } if cap == Duration::from_secs(60)));
    /// assert_eq!((c.ramp_start, c.ramp_successes), (0.1, 3));
    /// assert_eq!(c, BreakerConfig::default());
    /// ```
    pub fn recommended() -> Self {
        BreakerConfig {
            failure_rate: Some(0.5),
            slow_call_rate: None,
            slow_call_duration: Duration::from_secs(10),
            window: BreakerWindow::Time {
                length: Duration::from_secs(30),
                buckets: 30,
            },
            min_calls: 20,
            consecutive_failures: 10,
            cooldown: Cooldown::Proportional {
                base: Duration::from_secs(5),
                share: 0.1,
                cap: Duration::from_secs(60),
            },
            cooldown_jitter: 0.2,
            seed: 0x5EED_B4EA_CE40_0001,
            half_open: HalfOpen::Probes {
                probes: 5,
                close_after: 4,
            },
            probe_concurrency: 5,
            probe_timeout: Duration::from_secs(30),
            ramp: Duration::from_secs(20),
            ramp_start: 0.1,
            ramp_successes: 3,
            fleet_size: 1,
        }
    }

    /// The breaker of the incident in the seed documents, to compare against:
    /// it opens when half of the last 20 calls failed, stays open 30 s, then
    /// bets recovery on one trial call that is an ordinary user request with
    /// the ordinary 800 ms timeout; a success closes it at once to full
    /// traffic (no ramp), a failure reopens it for twice as long, up to
    /// 30 minutes, with no jitter.
    ///
    /// Against a dependency that comes back cold (answering in 1.5–3 s until
    /// it has served enough requests to warm up), every trial call times out
    /// and the open periods grow to 30 minutes, each sending one request
    /// into a service that can only warm up by receiving requests: a
    /// four-minute outage becomes hours. [`BreakerConfig::recommended`]
    /// differs in exactly the parts that decide recovery: five probes judged
    /// four of five, a 30 s probe timeout (which the runtime gives a probe as
    /// its attempt timeout), a cooldown that grows with the outage and is
    /// capped at 60 s, with jitter, a ramp instead of a jump, and a time
    /// window instead of a 20-call one (with a run of failures for sparse
    /// traffic). Its run rule is off, as the incident's breaker had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat_algorithms::breaker::{BreakerConfig, HalfOpen};
    ///
    /// let c = BreakerConfig::classic();
    /// assert_eq!(c.half_open, HalfOpen::Probes { probes: 1, close_after: 1 });
    /// assert_eq!(c.probe_timeout, Duration::from_millis(800));
    /// assert_eq!(c.ramp, Duration::ZERO);
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn classic() -> Self {
        BreakerConfig {
            failure_rate: Some(0.5),
            slow_call_rate: None,
            slow_call_duration: Duration::from_secs(10),
            window: BreakerWindow::Count { calls: 20 },
            min_calls: 20,
            consecutive_failures: 0,
            cooldown: Cooldown::Exponential {
                base: Duration::from_secs(30),
                factor: 2.0,
                cap: Duration::from_secs(30 * 60),
            },
            cooldown_jitter: 0.0,
            seed: 0,
            half_open: HalfOpen::Probes {
                probes: 1,
                close_after: 1,
            },
            probe_concurrency: 1,
            probe_timeout: Duration::from_millis(800),
            ramp: Duration::ZERO,
            ramp_start: 1.0,
            ramp_successes: 1,
            fleet_size: 1,
        }
    }

    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field outside its range, named `breaker.` and its path as
    /// serde writes it, choice included (`breaker.min_calls`,
    /// `breaker.window.count.calls`, `breaker.cooldown.exponential.cap`,
    /// `breaker.half_open.probes.close_after`): a rate
    /// outside `(0, 1]` or NaN, neither rate set, a duration that is zero
    /// (where zero makes no sense) or above a year, a window or bucket count
    /// out of range, a bucket under 1 ms, `min_calls` 0 or above a count
    /// window's size, `consecutive_failures` above 100,000, a cooldown base
    /// above its cap, a factor outside `[1, 100]` or a share outside
    /// `(0, 1]`, a jitter outside `[0, 1)`, zero probes, `close_after` above
    /// `probes`, a probe concurrency of 0, a `ramp_start` outside `(0, 1]`,
    /// `ramp_successes` outside `[1, 100_000]`, a fleet size of 0 or above a
    /// million.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::breaker::BreakerConfig;
    ///
    /// let c = BreakerConfig { failure_rate: Some(f64::NAN), ..Default::default() };
    /// let err = c.validate().unwrap_err();
    /// assert_eq!(err.field(), "breaker.failure_rate");
    /// assert_eq!(err.allowed(), "a rate in (0, 1]");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(r) = self.failure_rate {
            rate("breaker.failure_rate", r)?;
        }
        if let Some(r) = self.slow_call_rate {
            rate("breaker.slow_call_rate", r)?;
        }
        if self.failure_rate.is_none() && self.slow_call_rate.is_none() {
            return Err(ConfigError::new(
                "breaker.failure_rate",
                "none",
                "a rate in (0, 1] when `breaker.slow_call_rate` is not set either",
            ));
        }
        check::duration("breaker.slow_call_duration", self.slow_call_duration)?;
        match self.window {
            BreakerWindow::Count { calls } => {
                whole("breaker.window.count.calls", calls, 1, MAX_WINDOW_CALLS)?;
                check::limit("breaker.min_calls", self.min_calls, 1)?;
                check::ordered(
                    "breaker.min_calls",
                    self.min_calls,
                    "breaker.window.count.calls",
                    calls,
                )?;
            }
            BreakerWindow::Time { length, buckets } => {
                check::duration("breaker.window.time.length", length)?;
                whole(
                    "breaker.window.time.buckets",
                    buckets,
                    1,
                    MAX_WINDOW_BUCKETS,
                )?;
                if length / buckets < MIN_BUCKET_WIDTH {
                    return Err(ConfigError::new(
                        "breaker.window.time.buckets",
                        buckets,
                        "few enough buckets that each is at least 1 ms wide",
                    ));
                }
                check::limit("breaker.min_calls", self.min_calls, 1)?;
            }
        }
        whole(
            "breaker.consecutive_failures",
            self.consecutive_failures,
            0,
            MAX_WINDOW_CALLS,
        )?;
        match self.cooldown {
            Cooldown::Fixed(d) => {
                check::duration("breaker.cooldown.fixed", d)?;
            }
            Cooldown::Exponential { base, factor, cap } => {
                check::duration("breaker.cooldown.exponential.base", base)?;
                check::closed(
                    "breaker.cooldown.exponential.factor",
                    factor,
                    1.0,
                    MAX_COOLDOWN_FACTOR,
                )?;
                check::duration("breaker.cooldown.exponential.cap", cap)?;
                if base > cap {
                    return Err(ConfigError::new(
                        "breaker.cooldown.exponential.base",
                        format_args!("{base:?}"),
                        format!("at most `breaker.cooldown.exponential.cap` ({cap:?})"),
                    ));
                }
            }
            Cooldown::Proportional { base, share, cap } => {
                check::duration("breaker.cooldown.proportional.base", base)?;
                rate("breaker.cooldown.proportional.share", share)?;
                check::duration("breaker.cooldown.proportional.cap", cap)?;
                if base > cap {
                    return Err(ConfigError::new(
                        "breaker.cooldown.proportional.base",
                        format_args!("{base:?}"),
                        format!("at most `breaker.cooldown.proportional.cap` ({cap:?})"),
                    ));
                }
            }
        }
        let j = self.cooldown_jitter;
        if !(j.is_finite() && (0.0..1.0).contains(&j)) {
            return Err(ConfigError::new(
                "breaker.cooldown_jitter",
                j,
                "a number in [0, 1)",
            ));
        }
        match self.half_open {
            HalfOpen::Probes {
                probes,
                close_after,
            } => {
                whole("breaker.half_open.probes.probes", probes, 1, MAX_PROBES)?;
                whole(
                    "breaker.half_open.probes.close_after",
                    close_after,
                    1,
                    MAX_PROBES,
                )?;
                check::ordered(
                    "breaker.half_open.probes.close_after",
                    close_after,
                    "breaker.half_open.probes.probes",
                    probes,
                )?;
            }
            HalfOpen::Fraction {
                fraction,
                period,
                success_rate,
                min_probes,
            } => {
                rate("breaker.half_open.fraction.fraction", fraction)?;
                check::duration("breaker.half_open.fraction.period", period)?;
                rate("breaker.half_open.fraction.success_rate", success_rate)?;
                whole(
                    "breaker.half_open.fraction.min_probes",
                    min_probes,
                    1,
                    MAX_PROBES,
                )?;
            }
        }
        check::limit("breaker.probe_concurrency", self.probe_concurrency, 1)?;
        check::duration("breaker.probe_timeout", self.probe_timeout)?;
        if self.ramp > MAX_DURATION {
            return Err(ConfigError::new(
                "breaker.ramp",
                format_args!("{:?}", self.ramp),
                "a duration of at most 365 days (0 for no ramp)",
            ));
        }
        rate("breaker.ramp_start", self.ramp_start)?;
        whole(
            "breaker.ramp_successes",
            self.ramp_successes,
            1,
            MAX_WINDOW_CALLS,
        )?;
        whole("breaker.fleet_size", self.fleet_size, 1, MAX_FLEET_SIZE)?;
        Ok(())
    }
}
