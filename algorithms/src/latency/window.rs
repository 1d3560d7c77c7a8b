//! Windowed sampling shared by the latency-driven policies.
//!
//! A [`Window`] gathers finished calls until it has seen enough of them for
//! long enough, then closes and hands the policy one [`WindowSummary`]: how
//! many calls, how many of them were drops, the most calls in flight, the
//! latency of the successes aggregated as an average or a percentile, and
//! their spread (the standard deviation), which says how much of the
//! aggregate is noise.
//!
//! A window closes when it has lasted [`WindowConfig::min_duration`] **and**
//! holds [`WindowConfig::min_samples`] calls, or when it has lasted
//! [`WindowConfig::max_duration`] with however few calls it holds. The second
//! rule is what lets a caller doing one call a second still adapt: a window
//! that times out short of samples is summarised and fed to the policy, not
//! thrown away.
//!
//! [`crate::Vegas`] and [`crate::Gradient`] do not act on one window alone:
//! they blend each window into a recent latency by its number of successes
//! (a window that timed out with fewer than `min_samples` counts in
//! proportion), track that latency's standard error from the spread of
//! single latencies, and read a rise as queueing only beyond a number of
//! standard errors (their `noise`). So a window's size trades how soon a
//! policy reacts against how precise each window is, not whether noise is
//! taken for load.
//!
//! Only [`Outcome::Success`] and [`Outcome::Overload`] calls count.
//! [`Outcome::Ignore`] calls are never recorded. The latency of a drop is not
//! aggregated (a timeout says how long the caller waited, not how long the
//! dependency takes), but the drop is counted, with the instant the latest
//! dropped call started.

use std::time::{Duration, Instant};

use super::secs_to_duration;
use crate::rng::SplitMix64;
use crate::{check, ConfigError, Outcome, Sample};

/// How a window turns the latencies of its successes into one figure.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::{Aggregation, Window, WindowConfig};
/// use rheostat_algorithms::{Outcome, Sample};
///
/// let mut p90 = Window::new(WindowConfig {
///     aggregation: Aggregation::Percentile(0.9),
///     ..WindowConfig::default()
/// })?;
/// let t0 = Instant::now();
/// for ms in 1..=10 {
///     p90.record(t0, &Sample::new(Outcome::Success, Duration::from_millis(ms), 1));
/// }
/// let summary = p90.flush(t0).expect("ten calls");
/// assert_eq!(summary.latency, Some(Duration::from_millis(9)));
/// assert_eq!(summary.average, Some(Duration::from_micros(5500)));
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Aggregation {
    /// The arithmetic mean, computed exactly over every success.
    Average,
    /// The given quantile, in `(0, 1]` (`0.99` for p99), estimated from a
    /// bounded reservoir of [`WindowConfig::reservoir`] latencies.
    Percentile(f64),
}

/// The parameters of a [`Window`].
///
/// The defaults close a window after 250 ms and 10 calls, or after 1 s with
/// any number of calls, and aggregate by the average.
///
/// The average, because it is the aggregate whose noise is known: its
/// standard error is the spread over `√n`, which the latency-driven policies
/// use to tell noise from queueing, and queueing adds to it directly. The
/// sizes stay small because those policies now weigh each window by its
/// noise: in front of a log-normal dependency (p99 2 to 3 × the median) in
/// this crate's simulator, windows of 20 or 40 calls instead of 10 changed
/// neither goodput nor the calls kept in flight, and would only slow the
/// reaction to a real change.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::window::{Window, WindowConfig};
///
/// let err = Window::new(WindowConfig {
///     max_duration: Duration::from_millis(100),
///     ..WindowConfig::default()
/// })
/// .unwrap_err();
/// assert_eq!(err.field(), "window.max_duration");
/// assert_eq!(err.allowed(), "at least `window.min_duration` (250ms)");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct WindowConfig {
    /// The shortest a window lasts, above zero.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub min_duration: Duration,
    /// The longest a window lasts: one that has lasted this long closes with
    /// however many calls it holds. At least `min_duration`.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max_duration: Duration,
    /// The calls a window needs before it may close at `min_duration`; at
    /// least 1.
    pub min_samples: u32,
    /// How the latencies of a window's successes become one figure.
    pub aggregation: Aggregation,
    /// How many latencies a window keeps for a percentile, in
    /// `[1, 65536]`. Beyond that a uniform random subset is kept. Unused by
    /// [`Aggregation::Average`].
    pub reservoir: u32,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            min_duration: Duration::from_millis(250),
            max_duration: Duration::from_secs(1),
            min_samples: 10,
            aggregation: Aggregation::Average,
            reservoir: 256,
        }
    }
}

/// The largest reservoir a window accepts.
const MAX_RESERVOIR: u32 = 1 << 16;

/// The reservoir seed of [`Window::new`].
const DEFAULT_SEED: u64 = 0x2545_f491_4f6c_dd1d;

impl WindowConfig {
    /// Check every field. Field names start with `window.`; a policy that
    /// embeds a window puts its own name in front (`vegas.window.min_samples`).
    ///
    /// # Errors
    ///
    /// The first field outside its range: a zero or over-long duration,
    /// `max_duration` below `min_duration`, `min_samples` 0, a percentile
    /// outside `(0, 1]`, a reservoir outside `[1, 65536]`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::duration("window.min_duration", self.min_duration)?;
        check::duration("window.max_duration", self.max_duration)?;
        if self.max_duration < self.min_duration {
            return Err(ConfigError::new(
                "window.max_duration",
                format_args!("{:?}", self.max_duration),
                format!("at least `window.min_duration` ({:?})", self.min_duration),
            ));
        }
        check::limit("window.min_samples", self.min_samples, 1)?;
        if let Aggregation::Percentile(q) = self.aggregation {
            if !(q > 0.0 && q <= 1.0) {
                return Err(ConfigError::new(
                    "window.aggregation.percentile",
                    format_args!("Percentile({q})"),
                    "a percentile in (0, 1]",
                ));
            }
        }
        if self.reservoir == 0 || self.reservoir > MAX_RESERVOIR {
            return Err(ConfigError::new(
                "window.reservoir",
                self.reservoir,
                format!("a whole number in [1, {MAX_RESERVOIR}]"),
            ));
        }
        Ok(())
    }
}

/// A closed window: what a policy learns from.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::{Window, WindowConfig};
/// use rheostat_algorithms::{Outcome, Sample};
///
/// let mut window = Window::new(WindowConfig::default())?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// window.record(t0, &Sample::new(Outcome::Success, ms(20), 7));
/// window.record(t0 + ms(30), &Sample::new(Outcome::Overload, ms(30), 8));
/// let summary = window.flush(t0 + ms(40)).expect("two calls");
/// assert_eq!((summary.samples, summary.drops, summary.successes()), (2, 1, 1));
/// assert_eq!(summary.max_in_flight, 8);
/// assert_eq!(summary.last_drop_started, Some(t0));
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowSummary {
    /// When the window's first call was recorded.
    pub started: Instant,
    /// When the window closed.
    pub closed: Instant,
    /// The calls recorded: successes and drops.
    pub samples: u32,
    /// How many of them were drops ([`Outcome::Overload`]).
    pub drops: u32,
    /// The most calls in flight at the admission of any recorded call.
    pub max_in_flight: u32,
    /// The calls in flight at the admission of each recorded call, summed
    /// (see [`WindowSummary::mean_in_flight`]).
    pub sum_in_flight: u64,
    /// The aggregated latency of the successes (as configured), `None` if
    /// the window held only drops.
    pub latency: Option<Duration>,
    /// The mean latency of the successes.
    pub average: Option<Duration>,
    /// The fastest success.
    pub min: Option<Duration>,
    /// The slowest success.
    pub max: Option<Duration>,
    /// The sample standard deviation of the successes' latencies, `None`
    /// with fewer than two successes. It says how much of the window's
    /// aggregate is noise: the standard error of the average is
    /// `std_dev / √successes`.
    pub std_dev: Option<Duration>,
    /// When the latest-starting dropped call started, `None` without drops.
    /// A policy compares it with the instant of its last cut so that one
    /// congested moment is one congestion event.
    pub last_drop_started: Option<Instant>,
    /// The slowest drop's latency, `None` without drops: a window of drops
    /// that all failed fast (connection refused, an instant 5xx) is a
    /// dependency that is down, not a queue.
    pub slowest_drop: Option<Duration>,
    /// The drops' latencies, summed: with the successes', the time the
    /// calls that came back spent out (Little's law over the window).
    pub drop_latency: Duration,
    /// The latencies of the [`Outcome::Ignore`] calls, summed: not
    /// evidence, but they came back, and were in flight beside the calls
    /// recorded (Little's law over the window counts them as answered).
    pub ignored_latency: Duration,
}

impl WindowSummary {
    /// The mean of the calls in flight at the admission of each recorded
    /// call: for calls arriving at random, about the window's time-average
    /// in-flight count. 0 for an empty window.
    pub fn mean_in_flight(&self) -> f64 {
        if self.samples == 0 {
            return 0.0;
        }
        #[allow(
            clippy::cast_precision_loss,
            reason = "a sum of counts far below 2^53 in any real window"
        )]
        let sum = self.sum_in_flight as f64;
        sum / f64::from(self.samples)
    }

    /// Whether any call in the window was dropped.
    pub fn did_drop(&self) -> bool {
        self.drops > 0
    }

    /// How many successes the window held.
    pub fn successes(&self) -> u32 {
        self.samples.saturating_sub(self.drops)
    }

    /// Calls recorded per second of the window's span (from its first call
    /// to its close, at least a millisecond): about the rate the caller
    /// sends at.
    pub fn rate(&self) -> f64 {
        let span = self
            .closed
            .saturating_duration_since(self.started)
            .as_secs_f64()
            .max(1e-3);
        f64::from(self.samples) / span
    }
}

/// Windowed sampling: records calls, closes a window when it has enough, and
/// summarises it.
///
/// Nothing here reads a clock; every method takes `now`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::{Window, WindowConfig};
/// use rheostat_algorithms::{Outcome, Sample};
///
/// let mut window = Window::new(WindowConfig {
///     min_duration: Duration::from_millis(100),
///     max_duration: Duration::from_secs(1),
///     min_samples: 3,
///     ..WindowConfig::default()
/// })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// assert!(window.record(t0, &Sample::new(Outcome::Success, ms(10), 1)).is_none());
/// assert!(window.record(t0 + ms(50), &Sample::new(Outcome::Success, ms(20), 2)).is_none());
/// // Three calls and 100 ms: the window closes.
/// let summary = window
///     .record(t0 + ms(100), &Sample::new(Outcome::Overload, ms(900), 3))
///     .expect("closed");
/// assert_eq!(summary.samples, 3);
/// assert!(summary.did_drop());
/// assert_eq!(summary.latency, Some(ms(15)));
///
/// // A lone call still closes a window once it has lasted the maximum.
/// window.record(t0 + ms(200), &Sample::new(Outcome::Success, ms(10), 1));
/// assert_eq!(window.deadline(), Some(t0 + ms(1200)));
/// let lone = window.close_if_due(t0 + ms(1200)).expect("timed out");
/// assert_eq!(lone.samples, 1);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Window {
    config: WindowConfig,
    started: Option<Instant>,
    samples: u32,
    drops: u32,
    successes: u64,
    max_in_flight: u32,
    sum_in_flight: u64,
    sum_nanos: u128,
    min_nanos: u64,
    max_nanos: u64,
    /// Welford's running mean and sum of squared deviations, in seconds.
    welford_mean: f64,
    welford_m2: f64,
    last_drop_started: Option<Instant>,
    slowest_drop: Option<Duration>,
    drop_nanos: u128,
    ignored_nanos: u128,
    reservoir: Vec<u64>,
    rng: SplitMix64,
}

impl Window {
    /// An empty window, with a fixed seed for the reservoir.
    ///
    /// # Errors
    ///
    /// See [`WindowConfig::validate`].
    pub fn new(config: WindowConfig) -> Result<Self, ConfigError> {
        Window::with_seed(config, DEFAULT_SEED)
    }

    /// An empty window whose reservoir draws from a generator seeded with
    /// `seed`, so a run is reproducible.
    ///
    /// # Errors
    ///
    /// See [`WindowConfig::validate`].
    pub fn with_seed(config: WindowConfig, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let capacity = match config.aggregation {
            Aggregation::Average => 0,
            Aggregation::Percentile(_) => config.reservoir as usize,
        };
        Ok(Window {
            config,
            started: None,
            samples: 0,
            drops: 0,
            successes: 0,
            max_in_flight: 0,
            sum_in_flight: 0,
            sum_nanos: 0,
            min_nanos: u64::MAX,
            max_nanos: 0,
            welford_mean: 0.0,
            welford_m2: 0.0,
            last_drop_started: None,
            slowest_drop: None,
            drop_nanos: 0,
            ignored_nanos: 0,
            reservoir: Vec::with_capacity(capacity),
            rng: SplitMix64::new(seed),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// How many calls the open window holds.
    pub fn len(&self) -> u32 {
        self.samples
    }

    /// Whether the open window holds no calls.
    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// The instant at which the open window times out and must be closed even
    /// if no other call arrives; `None` while it is empty.
    #[inline]
    pub fn deadline(&self) -> Option<Instant> {
        self.after_start(self.config.max_duration)
    }

    /// The earliest instant at which the open window may close: no call
    /// finishing before it closes the window, so a policy that changes only
    /// when its window closes may let such calls be held for it (see
    /// [`Deferral`](crate::Deferral)). `None` while the window is empty:
    /// its first call says when.
    #[inline]
    pub fn earliest_close(&self) -> Option<Instant> {
        self.after_start(self.config.min_duration)
    }

    /// The successes a policy that moves only when this window closes may
    /// let be held for it: those no slower than `max_latency` that finish
    /// before the window may close; `None` while it is empty.
    #[inline]
    pub fn deferral(&self, max_latency: Duration) -> Option<crate::Deferral> {
        self.earliest_close()
            .map(|t| crate::Deferral::until(Some(t), max_latency))
    }

    /// `duration` after the open window's start (its start, if that is
    /// past the end of time); `None` while it is empty.
    #[inline]
    fn after_start(&self, duration: Duration) -> Option<Instant> {
        let started = self.started?;
        Some(started.checked_add(duration).unwrap_or(started))
    }

    /// Record one finished call at `now`, and close the window if that makes
    /// it due. Returns the summary of the window it closed, if it closed one.
    /// [`Outcome::Ignore`] calls are not recorded (but a window that is due
    /// still closes).
    pub fn record(&mut self, now: Instant, sample: &Sample) -> Option<WindowSummary> {
        self.add(now, sample);
        self.close_if_due(now)
    }

    /// Record one finished call at `now` without closing the window, for a
    /// caller that decides itself when to [`flush`](Window::flush) it.
    /// [`Outcome::Ignore`] calls are not recorded.
    pub fn add(&mut self, now: Instant, sample: &Sample) {
        match sample.outcome {
            Outcome::Ignore => {
                self.ignored_nanos = self.ignored_nanos.saturating_add(sample.latency.as_nanos());
                return;
            }
            Outcome::Success => self.add_latency(sample.latency),
            Outcome::Overload => {
                self.drops = self.drops.saturating_add(1);
                let started = sample.started(now);
                self.last_drop_started = Some(
                    self.last_drop_started
                        .map_or(started, |latest| latest.max(started)),
                );
                self.slowest_drop = Some(
                    self.slowest_drop
                        .map_or(sample.latency, |d| d.max(sample.latency)),
                );
                self.drop_nanos = self.drop_nanos.saturating_add(sample.latency.as_nanos());
            }
        }
        self.started.get_or_insert(now);
        self.samples = self.samples.saturating_add(1);
        self.max_in_flight = self.max_in_flight.max(sample.in_flight);
        self.sum_in_flight = self
            .sum_in_flight
            .saturating_add(u64::from(sample.in_flight));
    }

    /// Whether the window is due at `now`: it has lasted the minimum
    /// duration with enough calls, or the maximum duration with at least one.
    pub fn is_due(&self, now: Instant) -> bool {
        let Some(started) = self.started else {
            return false;
        };
        let age = now.saturating_duration_since(started);
        age >= self.config.max_duration
            || (age >= self.config.min_duration && self.samples >= self.config.min_samples)
    }

    /// Close the window if it is due at `now` (see [`Window::is_due`]).
    pub fn close_if_due(&mut self, now: Instant) -> Option<WindowSummary> {
        if self.is_due(now) {
            Some(self.close(now))
        } else {
            None
        }
    }

    /// Close the window now, whatever it holds; `None` if it is empty.
    pub fn flush(&mut self, now: Instant) -> Option<WindowSummary> {
        if self.is_empty() {
            None
        } else {
            Some(self.close(now))
        }
    }

    /// Drop everything the open window holds without summarising it.
    pub fn clear(&mut self) {
        self.started = None;
        self.samples = 0;
        self.drops = 0;
        self.successes = 0;
        self.max_in_flight = 0;
        self.sum_in_flight = 0;
        self.sum_nanos = 0;
        self.min_nanos = u64::MAX;
        self.max_nanos = 0;
        self.welford_mean = 0.0;
        self.welford_m2 = 0.0;
        self.last_drop_started = None;
        self.slowest_drop = None;
        self.drop_nanos = 0;
        self.ignored_nanos = 0;
        self.reservoir.clear();
    }

    fn add_latency(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.successes += 1;
        self.sum_nanos += u128::from(nanos);
        self.min_nanos = self.min_nanos.min(nanos);
        self.max_nanos = self.max_nanos.max(nanos);
        #[allow(
            clippy::cast_precision_loss,
            reason = "a spread needs no more than f64's 53 bits"
        )]
        let (x, n) = (latency.as_secs_f64(), self.successes as f64);
        let delta = x - self.welford_mean;
        self.welford_mean += delta / n;
        self.welford_m2 += delta * (x - self.welford_mean);
        if let Aggregation::Percentile(_) = self.config.aggregation {
            let capacity = self.config.reservoir as usize;
            if self.reservoir.len() < capacity {
                self.reservoir.push(nanos);
            } else {
                // Algorithm R: keep each of the n latencies seen so far with
                // probability capacity / n.
                let slot = self.rng.below(self.successes);
                if let Ok(slot) = usize::try_from(slot) {
                    if slot < capacity {
                        self.reservoir[slot] = nanos;
                    }
                }
            }
        }
    }

    fn close(&mut self, now: Instant) -> WindowSummary {
        let std_dev = if self.successes < 2 {
            None
        } else {
            #[allow(
                clippy::cast_precision_loss,
                reason = "a spread needs no more than f64's 53 bits"
            )]
            let variance = self.welford_m2.max(0.0) / (self.successes - 1) as f64;
            Some(secs_to_duration(variance.sqrt()))
        };
        let (average, min, max, latency) = if self.successes == 0 {
            (None, None, None, None)
        } else {
            // The mean of u64 values fits in a u64.
            let mean =
                u64::try_from(self.sum_nanos / u128::from(self.successes)).unwrap_or(u64::MAX);
            let average = Duration::from_nanos(mean);
            let latency = match self.config.aggregation {
                Aggregation::Average => average,
                Aggregation::Percentile(q) => Duration::from_nanos(self.percentile(q)),
            };
            (
                Some(average),
                Some(Duration::from_nanos(self.min_nanos)),
                Some(Duration::from_nanos(self.max_nanos)),
                Some(latency),
            )
        };
        let summary = WindowSummary {
            started: self.started.unwrap_or(now),
            closed: now,
            samples: self.samples,
            drops: self.drops,
            max_in_flight: self.max_in_flight,
            sum_in_flight: self.sum_in_flight,
            latency,
            average,
            min,
            max,
            std_dev,
            last_drop_started: self.last_drop_started,
            slowest_drop: self.slowest_drop,
            drop_latency: Duration::from_nanos(u64::try_from(self.drop_nanos).unwrap_or(u64::MAX)),
            ignored_latency: Duration::from_nanos(
                u64::try_from(self.ignored_nanos).unwrap_or(u64::MAX),
            ),
        };
        self.clear();
        summary
    }

    /// The nearest-rank `q` quantile of the reservoir (reordering it).
    fn percentile(&mut self, q: f64) -> u64 {
        let n = self.reservoir.len();
        if n == 0 {
            return self.max_nanos;
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "q is in (0, 1] and n at most 65536, so the rank is in [0, n]"
        )]
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        let (_, value, _) = self.reservoir.select_nth_unstable(rank);
        *value
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
pub(crate) mod tests;
