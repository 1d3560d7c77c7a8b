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
                    "window.aggregation",
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
    pub fn deadline(&self) -> Option<Instant> {
        let started = self.started?;
        Some(
            started
                .checked_add(self.config.max_duration)
                .unwrap_or(started),
        )
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
            Outcome::Ignore => return,
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
pub(crate) mod tests {
    use super::*;

    pub(crate) fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    pub(crate) fn ok(latency: Duration, in_flight: u32) -> Sample {
        Sample::new(Outcome::Success, latency, in_flight)
    }

    /// A window of the given durations (ms) and minimum count.
    pub(crate) fn window(min_duration: u64, max_duration: u64, min_samples: u32) -> Window {
        Window::new(WindowConfig {
            min_duration: ms(min_duration),
            max_duration: ms(max_duration),
            min_samples,
            ..WindowConfig::default()
        })
        .expect("valid config")
    }

    #[test]
    fn a_window_needs_both_its_minimum_duration_and_its_minimum_count() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 3);
        // Enough calls, too soon.
        assert!(w.record(t0, &ok(ms(10), 1)).is_none());
        assert!(w.record(t0 + ms(10), &ok(ms(10), 1)).is_none());
        assert!(w.record(t0 + ms(20), &ok(ms(10), 1)).is_none());
        // Long enough now.
        let s = w.record(t0 + ms(100), &ok(ms(10), 1)).expect("closes");
        assert_eq!(s.samples, 4);
        assert_eq!(s.started, t0);
        assert_eq!(s.closed, t0 + ms(100));
        assert!(w.is_empty());

        // Long enough, too few calls.
        let t1 = t0 + ms(200);
        assert!(w.record(t1, &ok(ms(10), 1)).is_none());
        assert!(w.record(t1 + ms(500), &ok(ms(10), 1)).is_none());
        assert!(w.record(t1 + ms(600), &ok(ms(10), 1)).is_some());
    }

    #[test]
    fn a_window_short_of_calls_still_closes_at_its_maximum_duration() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 10);
        assert!(w.record(t0, &ok(ms(10), 1)).is_none());
        assert_eq!(w.deadline(), Some(t0 + ms(1000)));
        assert!(w.close_if_due(t0 + ms(999)).is_none());
        let s = w.close_if_due(t0 + ms(1000)).expect("times out");
        assert_eq!(s.samples, 1);
        assert_eq!(s.latency, Some(ms(10)));
        assert_eq!(w.deadline(), None);
        assert!(
            w.close_if_due(t0 + ms(5000)).is_none(),
            "empty never closes"
        );

        // At one call a second each call closes the window the previous one
        // opened.
        let t1 = t0 + ms(10_000);
        assert!(w.record(t1, &ok(ms(10), 1)).is_none());
        let s = w.record(t1 + ms(1000), &ok(ms(30), 1)).expect("closes");
        assert_eq!(s.samples, 2);
        assert_eq!(s.latency, Some(ms(20)));
    }

    #[test]
    fn drops_are_counted_but_their_latency_is_not_aggregated() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 1);
        w.record(t0, &ok(ms(10), 4));
        w.record(t0 + ms(50), &Sample::new(Outcome::Overload, ms(50), 9));
        w.record(t0 + ms(60), &Sample::new(Outcome::Overload, ms(10), 2));
        let s = w.record(t0 + ms(100), &ok(ms(30), 3)).expect("closes");
        assert_eq!(s.samples, 4);
        assert_eq!(s.drops, 2);
        assert_eq!(s.successes(), 2);
        assert!(s.did_drop());
        assert_eq!(s.max_in_flight, 9);
        assert_eq!(s.average, Some(ms(20)));
        assert_eq!(s.min, Some(ms(10)));
        assert_eq!(s.max, Some(ms(30)));
        // The later of the two drop starts: t0 + 60 - 10 = t0 + 50.
        assert_eq!(s.last_drop_started, Some(t0 + ms(50)));
    }

    #[test]
    fn a_window_of_drops_alone_has_no_latency() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 1);
        w.record(t0, &Sample::new(Outcome::Overload, ms(10), 1));
        let s = w.flush(t0).expect("one call");
        assert_eq!(s.latency, None);
        assert_eq!(s.average, None);
        assert!(s.did_drop());
    }

    #[test]
    fn ignored_calls_are_never_recorded() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 1);
        assert!(w
            .record(t0, &Sample::new(Outcome::Ignore, ms(10), 1))
            .is_none());
        assert!(w.is_empty());
        assert_eq!(w.deadline(), None);
        w.record(t0, &ok(ms(10), 1));
        // An ignored call can still close a window that is due.
        let s = w
            .record(t0 + ms(100), &Sample::new(Outcome::Ignore, ms(99), 50))
            .expect("due");
        assert_eq!(s.samples, 1);
        assert_eq!(s.max_in_flight, 1);
    }

    #[test]
    fn the_percentile_is_the_nearest_rank() {
        let t0 = Instant::now();
        let mut w = Window::new(WindowConfig {
            aggregation: Aggregation::Percentile(0.9),
            min_samples: 1,
            ..WindowConfig::default()
        })
        .expect("valid");
        for i in 1..=10 {
            w.record(t0, &ok(ms(i), 1));
        }
        let s = w.flush(t0).expect("ten calls");
        assert_eq!(s.latency, Some(ms(9)));
        assert_eq!(s.average, Some(Duration::from_micros(5500)));
    }

    #[test]
    fn a_full_reservoir_keeps_a_representative_subset() {
        let t0 = Instant::now();
        let mut w = Window::with_seed(
            WindowConfig {
                aggregation: Aggregation::Percentile(0.5),
                reservoir: 64,
                min_samples: 1,
                ..WindowConfig::default()
            },
            7,
        )
        .expect("valid");
        for i in 0..10_000 {
            w.record(t0, &ok(ms(i % 100), 1));
        }
        let s = w.flush(t0).expect("calls");
        let p50 = s.latency.expect("successes");
        assert!(p50 >= ms(30) && p50 <= ms(70), "{p50:?}");
        assert_eq!(s.samples, 10_000);
    }

    #[test]
    fn the_summary_carries_the_spread_of_the_successes() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 1);
        w.record(t0, &ok(ms(10), 1));
        let s = w.flush(t0).expect("one call");
        assert_eq!(s.std_dev, None, "no spread from one success");
        for latency in [10, 20, 30] {
            w.record(t0, &ok(ms(latency), 1));
        }
        w.record(t0, &Sample::new(Outcome::Overload, ms(900), 1));
        let s = w.flush(t0).expect("calls");
        let sd = s.std_dev.expect("three successes").as_secs_f64();
        assert!((sd - 0.010).abs() < 1e-9, "{sd}");
    }

    #[test]
    fn add_records_without_closing_and_is_due_says_when_it_could() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 2);
        assert!(!w.is_due(t0 + ms(5000)), "an empty window is never due");
        w.add(t0, &ok(ms(10), 1));
        w.add(t0 + ms(100), &ok(ms(10), 1));
        assert!(w.is_due(t0 + ms(100)));
        w.add(t0 + ms(2000), &ok(ms(10), 1));
        assert_eq!(w.len(), 3);
        let s = w.flush(t0 + ms(2000)).expect("calls");
        assert_eq!(s.samples, 3);
    }

    #[test]
    fn huge_and_zero_latencies_do_not_overflow() {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 1);
        w.record(t0, &ok(Duration::MAX, u32::MAX));
        w.record(t0, &ok(Duration::MAX, 1));
        w.record(t0, &ok(Duration::ZERO, 0));
        let s = w.flush(t0).expect("calls");
        assert_eq!(s.min, Some(Duration::ZERO));
        assert_eq!(s.max_in_flight, u32::MAX);
        assert!(s.average.expect("successes") > Duration::from_secs(1 << 33));
    }

    #[test]
    fn time_running_backwards_does_not_panic_or_close() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut w = window(100, 1000, 1);
        w.record(t0, &ok(ms(10), 1));
        assert!(w.record(t0 - ms(5000), &ok(ms(10), 1)).is_none());
    }

    #[test]
    fn every_invalid_field_is_named() {
        let base = WindowConfig::default();
        let cases: Vec<(WindowConfig, &str)> = vec![
            (
                WindowConfig {
                    min_duration: Duration::ZERO,
                    ..base.clone()
                },
                "window.min_duration",
            ),
            (
                WindowConfig {
                    min_duration: Duration::MAX,
                    ..base.clone()
                },
                "window.min_duration",
            ),
            (
                WindowConfig {
                    max_duration: Duration::ZERO,
                    ..base.clone()
                },
                "window.max_duration",
            ),
            (
                WindowConfig {
                    max_duration: ms(100),
                    ..base.clone()
                },
                "window.max_duration",
            ),
            (
                WindowConfig {
                    min_samples: 0,
                    ..base.clone()
                },
                "window.min_samples",
            ),
            (
                WindowConfig {
                    aggregation: Aggregation::Percentile(0.0),
                    ..base.clone()
                },
                "window.aggregation",
            ),
            (
                WindowConfig {
                    aggregation: Aggregation::Percentile(1.5),
                    ..base.clone()
                },
                "window.aggregation",
            ),
            (
                WindowConfig {
                    aggregation: Aggregation::Percentile(f64::NAN),
                    ..base.clone()
                },
                "window.aggregation",
            ),
            (
                WindowConfig {
                    reservoir: 0,
                    ..base.clone()
                },
                "window.reservoir",
            ),
            (
                WindowConfig {
                    reservoir: MAX_RESERVOIR + 1,
                    ..base.clone()
                },
                "window.reservoir",
            ),
        ];
        for (config, field) in cases {
            let err = Window::new(config.clone()).expect_err(field);
            assert_eq!(err.field(), field, "{config:?}: {err}");
        }
    }
}
