//! Gradient: a delay-based limit driven by the ratio of a long-window
//! round-trip time to the latest window's.

use std::time::{Duration, Instant};

use crate::latency::outage::{Failing, Outage};
use crate::latency::recent::Recent;
use crate::latency::secs_to_duration;
use crate::latency::window::{Window, WindowConfig, WindowSummary};
use crate::{check, Algorithm, ConfigError, Gate, Published, Sample, Snapshot};

/// The shortest round-trip time the arithmetic uses, in seconds (1 ns): a
/// zero latency is read as this, so ratios stay finite.
const MIN_RTT: f64 = 1e-9;

/// While the long round-trip time is more than twice the short one, each
/// window multiplies it by this (but not below twice the short one).
const LONG_DECAY: f64 = 0.9;

/// The share of recent calls that must be drops before a drop cuts the limit
/// of a caller using under half of it, if `loss_tolerance` is lower: its own
/// load cannot be what overloads the dependency, so only a dependency failing
/// in earnest lowers a limit it is not using.
const APP_LIMITED_LOSS: f64 = 0.25;

/// The parameters of [`Gradient`].
///
/// The defaults: initial 20, min 1, max 1000; tolerance 1.0; smoothing 0.2;
/// headroom 1 per round trip; a long window of 600 windows, into which slower windows rise
/// at an eighth of the weight (`long_rise`); 2 standard errors of latency
/// read as noise (`noise`); a drop multiplies the limit by 0.9, once drops
/// are more than 10% of recent calls (`loss_tolerance`); the
/// [`WindowConfig`] defaults.
///
/// Why these: in front of a log-normal dependency (p99 2 to 3 × the median)
/// a window of 10 to 25 calls averages within about ±10% of the mean two
/// times in three. Without a noise band every slower-than-average window cut
/// the limit in proportion while only the faster ones added `headroom`, so
/// the limit settled where the two balance, about `5 / error` (50 at a 10%
/// error), whatever the dependency could take: in this crate's simulator a
/// caller needing 42 calls in flight from a healthy dependency was held near
/// 20 and refused 60% of its calls. A 1% trickle of overload errors at 100
/// calls a second is one drop a second, a 10% cut each against 0.8 calls of
/// growth a window; `loss_tolerance` keeps it from being read as
/// congestion. With the band, the noise no longer holds the limit down, so
/// something else must stop it drifting up with a standing queue: that is
/// `long_rise` (see [`Gradient`]).
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Gradient, GradientConfig};
///
/// let config = GradientConfig { min: 5, max: 200, initial: 20, ..GradientConfig::default() };
/// assert!(Gradient::new(config).is_ok());
///
/// let err = Gradient::new(GradientConfig { tolerance: 0.8, ..GradientConfig::default() })
///     .unwrap_err();
/// assert_eq!(err.field(), "gradient.tolerance");
/// assert_eq!(err.to_string(), "invalid `gradient.tolerance`: found 0.8, expected a number in [1, 10]");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct GradientConfig {
    /// The limit to start at, in `[min, max]`.
    pub initial: u32,
    /// The limit never falls below this; at least 1.
    pub min: u32,
    /// The limit never rises above this.
    pub max: u32,
    /// How much slower than the long round-trip time a window may be before
    /// the limit shrinks, as a factor in `[1, 10]`, on top of the noise band:
    /// the gradient is `clamp(tolerance · (long + band) / short, 0.5, 1)`.
    ///
    /// The default is 1, not Gradient2's 1.5. A fixed factor is the wrong
    /// tolerance for noise — too wide for a steady dependency, too narrow for
    /// a noisy one with few calls a window — which is what `noise` measures
    /// instead; and between `long` and `tolerance · long` the limit holds
    /// while the long average slowly absorbs the caller's own queueing, so
    /// the limit drifts up by a step each time it catches up.
    pub tolerance: f64,
    /// How far each window moves the limit toward its new target, in
    /// `(0, 1]`.
    pub smoothing: f64,
    /// The calls added to the limit per round trip while a window shows no
    /// queueing beyond the noise and the limit is in use (at least half of
    /// it), in `[0, 1000]`: 1 grows as Vector's controller and TCP's
    /// congestion avoidance do, a call per round trip.
    pub headroom: f64,
    /// The span of the long round-trip time's exponential average, in
    /// windows; at least 1.
    pub long_window: u32,
    /// The factor a window with a drop multiplies the limit by, in `(0, 1)`.
    pub backoff: f64,
    /// How many standard errors of the recent latency are read as noise, in
    /// `[0, 10]`: the limit shrinks only for the part of a rise beyond this
    /// many. 0 reads every rise as queueing. See [`Gradient`].
    pub noise: f64,
    /// How much a window slower than the long average weighs in it, against
    /// a faster one, in `(0, 1]`: the long average follows a fall at once and
    /// a rise `1 / long_rise` times more slowly, so the caller's own standing
    /// queue is not taken as normal. At 1 the long average is symmetric, and
    /// a limit in front of a standing queue drifts up as it absorbs it: in
    /// the simulator's 22-minute brownout (72 workers left) from 93 to 166,
    /// against 82 to 87 at the default. See [`Gradient`].
    pub long_rise: f64,
    /// The share of recent calls (about the last 50) that may be drops
    /// before a drop cuts the limit, in `[0, 1)`: a steady trickle of errors
    /// from a healthy dependency is not congestion. 0 cuts at every drop.
    pub loss_tolerance: f64,
    /// How samples are gathered into windows.
    pub window: WindowConfig,
}

impl Default for GradientConfig {
    fn default() -> Self {
        GradientConfig {
            initial: 20,
            min: 1,
            max: 1000,
            tolerance: 1.0,
            smoothing: 0.2,
            headroom: 1.0,
            long_window: 600,
            backoff: 0.9,
            noise: 2.0,
            long_rise: 0.125,
            loss_tolerance: 0.1,
            window: WindowConfig::default(),
        }
    }
}

impl GradientConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field outside its range, named `gradient.<field>` (and
    /// `gradient.window.<field>` for the window).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::bounds(
            ["gradient.min", "gradient.max", "gradient.initial"],
            self.min,
            self.max,
            self.initial,
        )?;
        check::closed("gradient.tolerance", self.tolerance, 1.0, 10.0)?;
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(ConfigError::new(
                "gradient.smoothing",
                self.smoothing,
                "a number in (0, 1]",
            ));
        }
        check::closed("gradient.headroom", self.headroom, 0.0, 1000.0)?;
        check::limit("gradient.long_window", self.long_window, 1)?;
        check::open_unit("gradient.backoff", self.backoff, 0.0, 1.0)?;
        check::closed("gradient.noise", self.noise, 0.0, 10.0)?;
        if !(self.long_rise > 0.0 && self.long_rise <= 1.0) {
            return Err(ConfigError::new(
                "gradient.long_rise",
                self.long_rise,
                "a number in (0, 1]",
            ));
        }
        crate::latency::check_loss_tolerance("gradient.loss_tolerance", self.loss_tolerance)?;
        self.window.validate().map_err(|e| e.within("gradient"))
    }
}

/// A delay-based limit in the manner of Netflix's Gradient2, with its known
/// faults fixed.
///
/// Every closed window compares the recent latency (`short`: the window's
/// aggregate, blended with earlier windows by sample count when it holds
/// fewer than `min_samples` successes) with an exponential average of past
/// windows (`long`):
///
/// - `band = noise · error · short`, with `error` the relative standard error
///   of `short`, from the spread of single latencies;
/// - `gradient = clamp(tolerance · (long + band) / short, 0.5, 1)`;
/// - `target = L · gradient`, plus `headroom` only when the window shows no
///   queueing at all (`short ≤ long`);
/// - `L' = L · (1 − smoothing) + target · smoothing`.
///
/// A caller using under half its limit (app-limited) holds it: it learns
/// nothing about more calls, and its windows are few and noisy. It still
/// backs off when a quarter of its recent calls drop or the latency has at
/// least doubled against the long average beyond the noise (the gradient at
/// its floor).
///
/// The fixes to Gradient2's known faults:
///
/// - **noise is not queueing**: only the part of a rise beyond `noise`
///   standard errors shrinks the limit, so a dependency whose latency merely
///   spreads — log-normal, p99 2 to 3 × the median — does not hold the limit
///   down (see [`GradientConfig`]);
/// - **drops count, a trickle does not**: a window with a drop multiplies
///   the limit by `backoff` when drops are more than `loss_tolerance` of
///   recent calls (once per flight: drops of calls that started before the
///   last cut do not cut again), so a dependency that times out at a steady
///   timeout — latency flat, every call failing — drives the limit down, not
///   up to max, while 1% of errors from a healthy one does not;
/// - **no headroom creep**: Gradient2 adds the headroom to every window, so
///   while the dependency queues the limit rests at the fixed point
///   `headroom / (1 − gradient)`, above what it can take. Here the headroom
///   is added only while a window shows no queueing at all (`short ≤ long`);
/// - **no absorbing its own queue**: a window slower than `long` feeds it
///   with `long_rise` (an eighth) of the weight of a faster one, so the long
///   average follows a fall at once and takes a standing queue as normal
///   only slowly: over a 22-minute brownout that took 40% of the workers
///   (72 left) the simulated limit, averaged by the minute, stayed between
///   82 and 87, where a symmetric average let it drift from 93 to 166;
/// - **a slower dependency is told from its own queue**: while the latency
///   stays above `long` beyond the noise, the limit falls; once the calls of
///   a window were admitted at no more than half the concurrency seen since
///   the rise began and are still slower, the rise is the dependency's, not
///   the caller's queue, and `long` takes the new latency (its band's upper
///   end), by at most a doubling for each such halving. A dependency three
///   times slower is taken as normal after two halvings; one a hundred times
///   slower, answering near the caller's timeout, would take seven, more
///   than a small limit has, so the limit stays low, as it should;
/// - **fast decay**: after load falls away, a long average more than twice the
///   short one is cut by 10% a window (to no less than twice the short), so a
///   new rise is noticed soon;
/// - **low traffic**: windows that time out short of samples still count
///   (see [`crate::window`]), blended by their sample count, so a quiet
///   caller reacts to about its last `2 · min_samples` calls, not to one.
///
/// What it cannot do: without a no-load baseline it tells a slower
/// dependency from its own queue only by cutting its limit and watching, so
/// it follows a permanent rise only after halving its concurrency, once per
/// doubling, and otherwise as fast as `long_rise` allows. [`crate::Vegas`]
/// re-measures its baseline and follows such a change within a few
/// re-probes.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::WindowConfig;
/// use rheostat_algorithms::{Algorithm, Gradient, GradientConfig, Outcome, Sample};
///
/// // Without the noise band, so that the arithmetic shows.
/// let mut gradient = Gradient::new(GradientConfig {
///     initial: 50,
///     noise: 0.0,
///     window: WindowConfig { min_samples: 1, ..WindowConfig::default() },
///     ..GradientConfig::default()
/// })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// // The first window sets the long average; no queueing while the limit is
/// // in use: + headroom (1) for the one round trip its one call filled.
/// gradient.on_sample(t0, &Sample::new(Outcome::Success, ms(20), 50));
/// gradient.handle_timeout(t0 + ms(1000));
/// assert_eq!(gradient.raw_limit(), 51.0);
/// // A slower window: the long average becomes 30 ms (the mean of the first
/// // two windows), the gradient 30 / 40 = 0.75, the limit
/// // 51 · 0.8 + 51 · 0.75 · 0.2 = 48.45.
/// gradient.on_sample(t0 + ms(1000), &Sample::new(Outcome::Success, ms(40), 50));
/// gradient.handle_timeout(t0 + ms(2000));
/// assert_eq!(gradient.long_rtt(), Some(ms(30)));
/// assert!((gradient.raw_limit() - 48.45).abs() < 1e-9);
/// assert_eq!(gradient.publish().gate.limit, 48);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Gradient {
    config: GradientConfig,
    limit: f64,
    /// The long average round-trip time, in seconds.
    long: Option<f64>,
    /// The latest window's round-trip time, in seconds.
    short: Option<f64>,
    /// How many windows have fed the long average.
    long_count: u64,
    window: Window,
    recent: Recent,
    /// The most calls in flight in the windows since the latency last rose
    /// beyond the noise, and the latency of the window that saw them;
    /// `None` while it has not risen.
    rise_in_flight: Option<(u32, f64)>,
    last_cut: Option<Instant>,
    outage: Outage,
}

impl Gradient {
    /// A limiter at `config.initial`.
    ///
    /// # Errors
    ///
    /// See [`GradientConfig::validate`].
    pub fn new(config: GradientConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let window = Window::new(config.window.clone())?;
        let recent = Recent::new(config.window.min_samples);
        Ok(Gradient {
            recent,
            limit: f64::from(config.initial),
            config,
            long: None,
            short: None,
            long_count: 0,
            window,
            rise_in_flight: None,
            last_cut: None,
            outage: Outage::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GradientConfig {
        &self.config
    }

    /// The limit before rounding down.
    pub fn raw_limit(&self) -> f64 {
        self.limit
    }

    /// The long-window round-trip time, `None` before the first window with
    /// a success.
    pub fn long_rtt(&self) -> Option<Duration> {
        self.long.map(secs_to_duration)
    }

    /// The recent round-trip time: the latest window's, blended with earlier
    /// ones when it holds fewer than `min_samples` successes.
    pub fn short_rtt(&self) -> Option<Duration> {
        self.short.map(secs_to_duration)
    }

    fn on_window(&mut self, now: Instant, summary: &WindowSummary) {
        let min = f64::from(self.config.min);
        let max = f64::from(self.config.max);
        self.recent.update(summary);
        let limit = self.limit;
        let app_limited = f64::from(summary.max_in_flight) * 2.0 < limit;
        let new_drop = match (summary.last_drop_started, self.last_cut) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(started), Some(cut)) => started >= cut,
        };
        let tolerated = if app_limited {
            self.config.loss_tolerance.max(APP_LIMITED_LOSS)
        } else {
            self.config.loss_tolerance
        };
        let rtt = self.recent.latency().or(self.long);
        match self.outage.observe(now, summary, rtt, limit, min) {
            // Down, not queueing: hold.
            Failing::Fast => return,
            Failing::Slow { floor } => {
                if new_drop && self.recent.loss() > tolerated {
                    self.last_cut = Some(now);
                    self.set_limit((limit * self.config.backoff).max(floor), min, max);
                }
                return;
            }
            Failing::No => {}
        }
        if new_drop && self.recent.loss() > tolerated {
            self.last_cut = Some(now);
            self.outage.settle();
            self.set_limit(limit * self.config.backoff, min, max);
            return;
        }
        if summary.latency.is_none() {
            return;
        }
        let Some(short) = self.recent.latency() else {
            return;
        };
        let short = short.max(MIN_RTT);
        self.short = Some(short);

        // A plain mean over the first windows, until the exponential weight
        // is the larger; from then on a slower window weighs `long_rise` as
        // much as a faster one.
        self.long_count = self.long_count.saturating_add(1);
        #[allow(
            clippy::cast_precision_loss,
            reason = "only the first few hundred counts matter, and they are exact"
        )]
        let count = self.long_count as f64;
        let exponential = 2.0 / (f64::from(self.config.long_window) + 1.0);
        let weight = exponential.max(1.0 / count);
        let margin = self.config.noise * self.recent.relative_error() * short;
        let mut long = match self.long {
            None => short,
            Some(long) if short > long && weight <= exponential => {
                long + weight * self.config.long_rise * (short - long)
            }
            Some(long) => long + weight * (short - long),
        };
        if long > 2.0 * short {
            long = (long * LONG_DECAY).max(2.0 * short);
        }
        if short > long + margin {
            // Slower beyond the noise. If the calls of this window were
            // admitted at no more than half the concurrency seen since the
            // rise began and are as slow as they were then, the caller's own
            // queue is not the cause (a queue the caller built shortens when
            // it halves what it sends): the dependency is slower, and the
            // long average takes the new latency, by at most a doubling for
            // each such halving. If they are faster, it was a queue: watch
            // on from here.
            let in_flight = summary.max_in_flight;
            let (peak, at_peak) = match self.rise_in_flight {
                Some((peak, at_peak)) if peak >= in_flight => (peak, at_peak),
                _ => (in_flight, short),
            };
            if u64::from(in_flight) * 2 > u64::from(peak) {
                self.rise_in_flight = Some((peak, at_peak));
            } else if short + margin >= at_peak {
                long = (short + margin).min(2.0 * long);
                self.rise_in_flight = None;
                // The dependency is slower, with no sign that it has less
                // capacity: the concurrency it takes grows in proportion.
                self.outage.regrow();
            } else {
                self.rise_in_flight = Some((in_flight, short));
            }
        } else {
            self.rise_in_flight = None;
        }
        self.long = Some(long);

        let ratio = (long + margin) / short;
        let gradient = (self.config.tolerance * ratio).clamp(0.5, 1.0);
        let target = limit * gradient;
        // Round trips the window spanned, no more than its calls could fill
        // at half the limit each: the limit moves per round trip, so a
        // window of many moves as far as that many windows of one would.
        let span = summary.closed.saturating_duration_since(summary.started);
        let round_trips = (span.as_secs_f64() / short)
            .min(2.0 * f64::from(summary.samples) / limit.max(1.0))
            .max(1.0);
        let s = 1.0 - (1.0 - self.config.smoothing).powf(round_trips);
        let mut next = limit * (1.0 - s) + target * s;
        if short > long + margin {
            self.outage.settle();
        } else if !app_limited {
            // No queueing beyond the noise while the limit is in use:
            // twice the limit a window while regrowing after an outage or a
            // slowdown (until the first sign of queueing), `headroom` more
            // calls per round trip otherwise.
            if self.outage.regrowing() {
                next = next.max(limit * 2.0);
            } else {
                next = next.max(limit + self.config.headroom * round_trips);
            }
        }
        if app_limited {
            // An app-limited caller learns nothing about more calls: it
            // holds, unless the latency has at least doubled beyond the
            // noise (the gradient at its floor).
            next = if gradient <= 0.5 {
                next.min(limit)
            } else {
                limit
            };
        }
        self.set_limit(next, min, max);
    }

    fn set_limit(&mut self, next: f64, min: f64, max: f64) {
        if !next.is_nan() {
            self.limit = next.clamp(min, max);
        }
    }
}

impl Gradient {
    fn gate(&self) -> Gate {
        Gate::from_raw_limit(self.limit, self.config.min, self.config.max)
    }
}

impl Algorithm for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    /// Every call, timed; wakes when the current window is due.
    fn publish(&self) -> Published {
        Published::new(self.gate()).with_wake_at(self.window.deadline())
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        if let Some(summary) = self.window.record(now, sample) {
            self.on_window(now, &summary);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(summary) = self.window.close_if_due(now) {
            self.on_window(now, &summary);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.name(), self.gate()).with_raw_limit(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ok(latency_ms: u64, in_flight: u32) -> Sample {
        Sample::new(Outcome::Success, ms(latency_ms), in_flight)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Windows of one call each, closing 10 ms after it. Without the noise
    /// band, the loss tolerance and the slower rise of the long average, so
    /// that each rule's arithmetic shows exactly; the tests of those three
    /// set them.
    fn gradient(config: GradientConfig) -> Gradient {
        Gradient::new(GradientConfig {
            noise: 0.0,
            loss_tolerance: 0.0,
            long_rise: 1.0,
            ..one_call_windows(config)
        })
        .expect("valid config")
    }

    fn one_call_windows(config: GradientConfig) -> GradientConfig {
        GradientConfig {
            window: WindowConfig {
                min_duration: ms(10),
                max_duration: ms(10),
                min_samples: 1,
                ..WindowConfig::default()
            },
            ..config
        }
    }

    fn window_of(g: &mut Gradient, t: &mut Instant, sample: &Sample) {
        g.on_sample(*t, sample);
        *t += ms(10);
        g.handle_timeout(*t);
    }

    /// A limiter whose long average has settled on `long_ms`, at `limit`,
    /// with no headroom so that warming up does not move the limit.
    fn warmed(t: &mut Instant, long_ms: u64, limit: u32) -> Gradient {
        let mut g = gradient(GradientConfig {
            initial: limit,
            headroom: 0.0,
            ..GradientConfig::default()
        });
        for _ in 0..1000 {
            window_of(&mut g, t, &ok(long_ms, limit));
        }
        assert_eq!(g.long_rtt(), Some(ms(long_ms)));
        assert!(close(g.raw_limit(), f64::from(limit)));
        g
    }

    #[test]
    fn the_first_window_sets_the_long_average_and_a_calm_one_in_use_grows_a_call_per_round_trip() {
        let mut t = Instant::now();
        let mut g = gradient(GradientConfig {
            initial: 50,
            ..GradientConfig::default()
        });
        window_of(&mut g, &mut t, &ok(20, 50));
        assert_eq!(g.long_rtt(), Some(ms(20)));
        assert_eq!(g.short_rtt(), Some(ms(20)));
        // A window shorter than a round trip still counts one: + 1.
        assert!(close(g.raw_limit(), 51.0));
        // A window of ten round trips (200 ms of 20 ms calls, enough of
        // them to fill each at half the limit): + 10.
        for _ in 0..300 {
            g.on_sample(t, &ok(20, 51));
        }
        t += ms(200);
        g.on_sample(t, &ok(20, 51));
        g.handle_timeout(t);
        assert!(close(g.raw_limit(), 61.0), "{}", g.raw_limit());
        // Not in use (under half the limit): no growth.
        window_of(&mut g, &mut t, &ok(20, 20));
        assert!(close(g.raw_limit(), 61.0), "{}", g.raw_limit());
    }

    #[test]
    fn the_long_average_is_a_plain_mean_until_the_exponential_weight_takes_over() {
        let mut t = Instant::now();
        let mut g = gradient(GradientConfig {
            initial: 50,
            long_window: 3,
            ..GradientConfig::default()
        });
        window_of(&mut g, &mut t, &ok(20, 50));
        window_of(&mut g, &mut t, &ok(40, 50));
        // Mean of 20 and 40 (weight 1/2, the larger of 1/2 and 2/4).
        assert_eq!(g.long_rtt(), Some(ms(30)));
        window_of(&mut g, &mut t, &ok(30, 50));
        // 1/3 < 2/4: exponential from here, 30 + (30 − 30) / 2.
        assert_eq!(g.long_rtt(), Some(ms(30)));
        window_of(&mut g, &mut t, &ok(50, 50));
        assert_eq!(g.long_rtt(), Some(ms(40)));
    }

    #[test]
    fn a_slower_window_shrinks_the_limit_by_the_smoothed_gradient() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 20, 100);
        window_of(&mut g, &mut t, &ok(25, 100));
        // long = 20 + (2/601) · 5; gradient = long / 25; no headroom.
        let long = 0.020 + 2.0 / 601.0 * 0.005;
        let gradient = long / 0.025;
        assert!(close(g.raw_limit(), 100.0 * 0.8 + 100.0 * gradient * 0.2));
        assert!(g.raw_limit() < 97.0);
    }

    #[test]
    fn the_gradient_never_cuts_by_more_than_half() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 20, 100);
        window_of(&mut g, &mut t, &ok(10_000, 100));
        // gradient clamped at 0.5: 100 · 0.8 + 50 · 0.2
        assert!(close(g.raw_limit(), 90.0));
    }

    #[test]
    fn within_the_tolerance_the_limit_holds_and_only_a_calm_window_adds_headroom() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 20, 100);
        g.config.tolerance = 1.5;
        g.config.headroom = 4.0;
        // 25 ms is slower than the long average but within 1.5 ×: hold.
        window_of(&mut g, &mut t, &ok(25, 100));
        assert!(close(g.raw_limit(), 100.0));
        // 19 ms is not slower: + 4 for the round trip.
        window_of(&mut g, &mut t, &ok(19, 100));
        assert!(close(g.raw_limit(), 104.0));
    }

    #[test]
    fn a_drop_backs_off_once_per_flight_and_leaves_the_averages_alone() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 20, 100);
        // Slower than half the round trip: not a fast failure.
        let dropped = Sample::new(Outcome::Overload, ms(15), 100);
        window_of(&mut g, &mut t, &dropped);
        assert!(close(g.raw_limit(), 90.0));
        assert_eq!(g.long_rtt(), Some(ms(20)));
        // Started before that cut: no second cut.
        window_of(
            &mut g,
            &mut t,
            &Sample::new(Outcome::Overload, ms(500), 100),
        );
        assert!(close(g.raw_limit(), 90.0));
        t += ms(20);
        window_of(&mut g, &mut t, &dropped);
        assert!(close(g.raw_limit(), 81.0));
    }

    #[test]
    fn an_app_limited_caller_holds_unless_latency_has_doubled() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 20, 100);
        g.config.headroom = 4.0;
        window_of(&mut g, &mut t, &ok(15, 10));
        assert!(close(g.raw_limit(), 100.0), "no growth while app-limited");
        window_of(&mut g, &mut t, &ok(30, 10));
        assert!(close(g.raw_limit(), 100.0), "no cut on a modest rise");
        window_of(&mut g, &mut t, &ok(200, 1));
        assert!(close(g.raw_limit(), 90.0), "a cut when latency is 10 ×");
    }

    #[test]
    fn after_load_falls_away_the_long_average_decays_fast() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 100, 100);
        window_of(&mut g, &mut t, &ok(20, 100));
        let long = g.long_rtt().expect("set");
        // An exponential step alone would leave it near 99.7 ms.
        assert!(long < ms(90), "{long:?}");
        for _ in 0..15 {
            window_of(&mut g, &mut t, &ok(20, 100));
        }
        let long = g.long_rtt().expect("set");
        assert!(long <= ms(40) && long > ms(39), "{long:?}");
    }

    /// Ten calls averaging `mean_ms`, half of them `spread_ms` faster and
    /// half slower, in one window, at `in_flight`.
    fn spread_window(
        g: &mut Gradient,
        t: &mut Instant,
        mean_ms: u64,
        spread_ms: u64,
        in_flight: u32,
    ) {
        for i in 0..10 {
            let latency = if i % 2 == 0 {
                mean_ms - spread_ms
            } else {
                mean_ms + spread_ms
            };
            g.on_sample(*t, &ok(latency, in_flight));
        }
        *t += ms(10);
        g.handle_timeout(*t);
    }

    /// The defaults on windows of ten calls, warmed on 60 and 140 ms around
    /// 100 (two standard errors of a window: 27%) at a limit of 100.
    fn noisy(t: &mut Instant) -> Gradient {
        let mut g = Gradient::new(one_call_windows(GradientConfig {
            initial: 100,
            headroom: 0.0,
            ..GradientConfig::default()
        }))
        .expect("valid");
        for _ in 0..700 {
            spread_window(&mut g, t, 100, 40, 100);
        }
        assert!(close(g.raw_limit(), 100.0));
        g.config.headroom = 1.0;
        g
    }

    #[test]
    fn a_rise_within_the_noise_does_not_shrink_the_limit() {
        let mut t = Instant::now();
        let mut g = noisy(&mut t);
        spread_window(&mut g, &mut t, 120, 40, 100);
        // Within the band it is not queueing: a call more for the round trip.
        assert!(close(g.raw_limit(), 101.0), "{}", g.raw_limit());
        // Twice as slow is beyond it: the limit shrinks by the part of the
        // rise beyond the band, less than the 10% the whole rise would cut.
        spread_window(&mut g, &mut t, 200, 40, 100);
        assert!(
            g.raw_limit() > 91.0 && g.raw_limit() < 100.0,
            "{}",
            g.raw_limit()
        );
    }

    #[test]
    fn a_slower_window_moves_the_long_average_an_eighth_as_far_as_a_faster_one() {
        let mut t = Instant::now();
        let mut g = noisy(&mut t);
        let long = g.long_rtt().expect("set").as_secs_f64();
        spread_window(&mut g, &mut t, 200, 40, 100);
        let risen = g.long_rtt().expect("set").as_secs_f64();
        assert!(((risen - long) - 2.0 / 601.0 * 0.125 * (0.200 - long)).abs() < 1e-9);
        spread_window(&mut g, &mut t, 50, 40, 100);
        let fallen = g.long_rtt().expect("set").as_secs_f64();
        assert!(((risen - fallen) - 2.0 / 601.0 * (risen - 0.050)).abs() < 1e-9);
    }

    #[test]
    fn a_rise_that_outlasts_halving_the_calls_in_flight_is_the_new_normal() {
        let mut t = Instant::now();
        let mut g = noisy(&mut t);
        // 50% slower, beyond the noise: the limit falls, window after window,
        // and the long average hardly moves.
        spread_window(&mut g, &mut t, 150, 40, 100);
        assert!(g.raw_limit() < 100.0);
        assert!(g.long_rtt().expect("set") < ms(101));
        // Calls admitted at 50 in flight are still as slow: the dependency is
        // slower, not queueing behind this caller.
        spread_window(&mut g, &mut t, 150, 40, 50);
        let long = g.long_rtt().expect("set");
        assert!(long > ms(150) && long < ms(200), "{long:?}");
        // It serves as much as before, each call 50% longer: the limit the
        // same goodput takes is higher, and it regrows, doubling.
        assert!(g.raw_limit() > 150.0, "regrowing: {}", g.raw_limit());

        // Three times slower is taken as normal a doubling at a time: one
        // halving is not enough...
        let mut g = noisy(&mut t);
        spread_window(&mut g, &mut t, 300, 40, 100);
        spread_window(&mut g, &mut t, 300, 40, 50);
        let long = g.long_rtt().expect("set");
        assert!(long > ms(199) && long <= ms(201), "{long:?}");
        spread_window(&mut g, &mut t, 300, 40, 50);
        assert!(g.long_rtt().expect("set") < ms(201));
        // ...a second one is.
        spread_window(&mut g, &mut t, 300, 40, 25);
        let long = g.long_rtt().expect("set");
        assert!(long > ms(300) && long < ms(400), "{long:?}");
    }

    #[test]
    fn a_trickle_of_drops_is_tolerated_and_a_flood_is_not() {
        let mut t = Instant::now();
        let mut g = Gradient::new(one_call_windows(GradientConfig {
            initial: 100,
            headroom: 0.0,
            ..GradientConfig::default()
        }))
        .expect("valid");
        let dropped = Sample::new(Outcome::Overload, ms(50), 100);
        // One call in twenty dropped, in a caller using its limit.
        for _ in 0..20 {
            window_of(&mut g, &mut t, &dropped);
            for _ in 0..19 {
                window_of(&mut g, &mut t, &ok(20, 100));
            }
        }
        assert!(close(g.raw_limit(), 100.0), "{}", g.raw_limit());
        // Every call: the share of recent drops passes 10% within a few.
        for _ in 0..5 {
            window_of(&mut g, &mut t, &dropped);
        }
        assert!(g.raw_limit() < 100.0, "{}", g.raw_limit());
    }

    #[test]
    fn zero_and_huge_latencies_keep_the_limit_finite_and_in_range() {
        let mut t = Instant::now();
        let mut g = gradient(GradientConfig {
            initial: 50,
            ..GradientConfig::default()
        });
        for latency in [Duration::ZERO, Duration::MAX, Duration::ZERO, ms(1)] {
            for in_flight in [0, u32::MAX] {
                window_of(
                    &mut g,
                    &mut t,
                    &Sample::new(Outcome::Success, latency, in_flight),
                );
                assert!(g.raw_limit().is_finite());
                assert!((1.0..=1000.0).contains(&g.raw_limit()));
            }
        }
    }

    #[test]
    fn every_invalid_field_is_named() {
        let base = GradientConfig::default();
        let cases: Vec<(GradientConfig, &str)> = vec![
            (
                GradientConfig {
                    min: 0,
                    initial: 0,
                    ..base.clone()
                },
                "gradient.min",
            ),
            (
                GradientConfig {
                    max: u32::MAX,
                    ..base.clone()
                },
                "gradient.max",
            ),
            (
                GradientConfig {
                    min: 50,
                    max: 40,
                    initial: 45,
                    ..base.clone()
                },
                "gradient.min",
            ),
            (
                GradientConfig {
                    initial: 2000,
                    ..base.clone()
                },
                "gradient.initial",
            ),
            (
                GradientConfig {
                    initial: 1,
                    min: 2,
                    ..base.clone()
                },
                "gradient.initial",
            ),
            (
                GradientConfig {
                    tolerance: 0.9,
                    ..base.clone()
                },
                "gradient.tolerance",
            ),
            (
                GradientConfig {
                    tolerance: f64::NAN,
                    ..base.clone()
                },
                "gradient.tolerance",
            ),
            (
                GradientConfig {
                    smoothing: 0.0,
                    ..base.clone()
                },
                "gradient.smoothing",
            ),
            (
                GradientConfig {
                    smoothing: 1.5,
                    ..base.clone()
                },
                "gradient.smoothing",
            ),
            (
                GradientConfig {
                    smoothing: f64::NAN,
                    ..base.clone()
                },
                "gradient.smoothing",
            ),
            (
                GradientConfig {
                    headroom: -1.0,
                    ..base.clone()
                },
                "gradient.headroom",
            ),
            (
                GradientConfig {
                    headroom: f64::INFINITY,
                    ..base.clone()
                },
                "gradient.headroom",
            ),
            (
                GradientConfig {
                    long_window: 0,
                    ..base.clone()
                },
                "gradient.long_window",
            ),
            (
                GradientConfig {
                    backoff: 1.0,
                    ..base.clone()
                },
                "gradient.backoff",
            ),
            (
                GradientConfig {
                    backoff: -0.5,
                    ..base.clone()
                },
                "gradient.backoff",
            ),
            (
                GradientConfig {
                    noise: -1.0,
                    ..base.clone()
                },
                "gradient.noise",
            ),
            (
                GradientConfig {
                    noise: f64::INFINITY,
                    ..base.clone()
                },
                "gradient.noise",
            ),
            (
                GradientConfig {
                    long_rise: 0.0,
                    ..base.clone()
                },
                "gradient.long_rise",
            ),
            (
                GradientConfig {
                    long_rise: 1.5,
                    ..base.clone()
                },
                "gradient.long_rise",
            ),
            (
                GradientConfig {
                    long_rise: f64::NAN,
                    ..base.clone()
                },
                "gradient.long_rise",
            ),
            (
                GradientConfig {
                    loss_tolerance: 1.0,
                    ..base.clone()
                },
                "gradient.loss_tolerance",
            ),
            (
                GradientConfig {
                    loss_tolerance: f64::NAN,
                    ..base.clone()
                },
                "gradient.loss_tolerance",
            ),
            (
                GradientConfig {
                    window: WindowConfig {
                        max_duration: Duration::ZERO,
                        ..WindowConfig::default()
                    },
                    ..base.clone()
                },
                "gradient.window.max_duration",
            ),
        ];
        for (config, field) in cases {
            let err = Gradient::new(config.clone()).expect_err(field);
            assert_eq!(err.field(), field, "{config:?}: {err}");
        }
    }
}
