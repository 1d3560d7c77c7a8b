//! Gradient: a delay-based limit driven by the ratio of a long-window
//! round-trip time to the latest window's.

use std::time::{Duration, Instant};

use crate::window::{Window, WindowConfig, WindowSummary};
use crate::{check, Algorithm, ConfigError, Gate, Sample, Snapshot};

/// The shortest round-trip time the arithmetic uses, in seconds (1 ns): a
/// zero latency is read as this, so ratios stay finite.
const MIN_RTT: f64 = 1e-9;

/// While the long round-trip time is more than twice the short one, each
/// window multiplies it by this (but not below twice the short one).
const LONG_DECAY: f64 = 0.9;

/// The parameters of [`Gradient`].
///
/// The defaults: initial 20, min 1, max 1000; tolerance 1.0; smoothing 0.2;
/// headroom 4; a long window of 600 windows; a drop multiplies the limit by
/// 0.9; the [`WindowConfig`] defaults.
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
    /// the limit shrinks, as a factor in `[1, 10]`: the gradient is
    /// `clamp(tolerance · long / short, 0.5, 1)`.
    ///
    /// The default is 1, not Gradient2's 1.5. Between `long` and
    /// `tolerance · long` the limit holds while the long average, which
    /// follows every window, slowly absorbs the caller's own queueing, so the
    /// limit drifts up by a step each time it catches up. In the modelled
    /// dependency of this crate's tests (50 workers, twice the load they can
    /// take, ±90% service-time jitter) a tolerance of 1.1 let the limit drift
    /// from 56 at one minute to 79 at ten; 1.0 from 52 to 59.
    pub tolerance: f64,
    /// How far each window moves the limit toward its new target, in
    /// `(0, 1]`.
    pub smoothing: f64,
    /// The calls added to the target while a window shows no queueing at all
    /// (short ≤ long), in `[0, 1000]`.
    pub headroom: f64,
    /// The span of the long round-trip time's exponential average, in
    /// windows; at least 1.
    pub long_window: u32,
    /// The factor a window with a drop multiplies the limit by, in `(0, 1)`.
    pub backoff: f64,
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
            headroom: 4.0,
            long_window: 600,
            backoff: 0.9,
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
        self.window.validate().map_err(|e| e.within("gradient"))
    }
}

/// A delay-based limit in the manner of Netflix's Gradient2, with its known
/// faults fixed.
///
/// Every closed window compares its aggregated latency (`short`) with an
/// exponential average of past windows (`long`):
///
/// - `gradient = clamp(tolerance · long / short, 0.5, 1)`;
/// - `target = L · gradient`, plus `headroom` only when the window shows no
///   queueing at all (`short ≤ long`);
/// - `L' = L · (1 − smoothing) + target · smoothing`.
///
/// A caller using under half its limit (app-limited) holds it: it learns
/// nothing about more calls, and its windows are few and noisy. It still
/// backs off when a call drops or the latency has at least doubled against
/// the long average (the gradient at its floor).
///
/// The fixes to Gradient2's known faults:
///
/// - **drops count**: a window with a drop multiplies the limit by `backoff`
///   (once per flight: drops of calls that started before the last cut do not
///   cut again), so a dependency that times out at a steady timeout — latency
///   flat, every call failing — drives the limit down, not up to max;
/// - **no headroom creep**: Gradient2 adds the headroom to every window, so
///   while the dependency queues the limit rests at the fixed point
///   `headroom / (1 − gradient)`, above what it can take. Here the headroom
///   is added only while a window shows no queueing at all (`short ≤ long`);
/// - **fast decay**: after load falls away, a long average more than twice the
///   short one is cut by 10% a window (to no less than twice the short), so a
///   new rise is noticed soon;
/// - **low traffic**: windows that time out short of samples still count
///   (see [`crate::window`]).
///
/// What it cannot do: without a no-load baseline it cannot tell a dependency
/// that became slower from its own queue, so a sustained queue is slowly
/// taken as normal (see [`GradientConfig::tolerance`]). [`crate::Vegas`]
/// re-measures its baseline and does not drift.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::WindowConfig;
/// use rheostat_algorithms::{Algorithm, Gradient, GradientConfig, Outcome, Sample};
///
/// let mut gradient = Gradient::new(GradientConfig {
///     initial: 50,
///     window: WindowConfig { min_samples: 1, ..WindowConfig::default() },
///     ..GradientConfig::default()
/// })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// // The first window sets the long average; no queueing: + headroom · 0.2.
/// gradient.on_sample(t0, &Sample::new(Outcome::Success, ms(20), 50));
/// gradient.handle_timeout(t0 + ms(1000));
/// assert_eq!(gradient.raw_limit(), 50.8);
/// // A slower window: the long average becomes 30 ms (the mean of the first
/// // two windows), the gradient 30 / 40 = 0.75, the limit
/// // 50.8 · 0.8 + 50.8 · 0.75 · 0.2 = 48.26.
/// gradient.on_sample(t0 + ms(1000), &Sample::new(Outcome::Success, ms(40), 50));
/// gradient.handle_timeout(t0 + ms(2000));
/// assert_eq!(gradient.long_rtt(), Some(ms(30)));
/// assert!((gradient.raw_limit() - 48.26).abs() < 1e-9);
/// assert_eq!(gradient.gate().limit, 48);
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
    last_cut: Option<Instant>,
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
        Ok(Gradient {
            limit: f64::from(config.initial),
            config,
            long: None,
            short: None,
            long_count: 0,
            window,
            last_cut: None,
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

    /// The latest window's round-trip time.
    pub fn short_rtt(&self) -> Option<Duration> {
        self.short.map(secs_to_duration)
    }

    fn on_window(&mut self, now: Instant, summary: &WindowSummary) {
        let min = f64::from(self.config.min);
        let max = f64::from(self.config.max);
        let new_drop = match (summary.last_drop_started, self.last_cut) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(started), Some(cut)) => started >= cut,
        };
        if new_drop {
            self.last_cut = Some(now);
            self.set_limit(self.limit * self.config.backoff, min, max);
            return;
        }
        let Some(short) = summary.latency else {
            return;
        };
        let short = short.as_secs_f64().max(MIN_RTT);
        self.short = Some(short);

        // A plain mean over the first windows, until the exponential weight
        // is the larger.
        self.long_count = self.long_count.saturating_add(1);
        #[allow(
            clippy::cast_precision_loss,
            reason = "only the first few hundred counts matter, and they are exact"
        )]
        let count = self.long_count as f64;
        let weight = (2.0 / (f64::from(self.config.long_window) + 1.0)).max(1.0 / count);
        let mut long = match self.long {
            None => short,
            Some(long) => long + weight * (short - long),
        };
        if long > 2.0 * short {
            long = (long * LONG_DECAY).max(2.0 * short);
        }
        self.long = Some(long);

        let limit = self.limit;
        let ratio = long / short;
        let gradient = (self.config.tolerance * ratio).clamp(0.5, 1.0);
        let headroom = if ratio >= 1.0 {
            self.config.headroom
        } else {
            0.0
        };
        let target = limit * gradient + headroom;
        let s = self.config.smoothing;
        let mut next = limit * (1.0 - s) + target * s;
        if f64::from(summary.max_in_flight) * 2.0 < limit {
            // An app-limited caller learns nothing about more calls, and the
            // few samples of its windows are noisy: it holds, unless the
            // latency has at least doubled (the gradient at its floor).
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

fn secs_to_duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

impl Algorithm for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    fn gate(&self) -> Gate {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "limit is kept within [min, max], a u32 range"
        )]
        // Truncation is the floor for a positive limit, without a libm call.
        let limit = self.limit as u32;
        Gate::limited(limit.clamp(self.config.min, self.config.max))
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        if let Some(summary) = self.window.record(now, sample) {
            self.on_window(now, &summary);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.window.deadline()
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

    /// Windows of one call each, closing 10 ms after it.
    fn gradient(config: GradientConfig) -> Gradient {
        Gradient::new(GradientConfig {
            window: WindowConfig {
                min_duration: ms(10),
                max_duration: ms(10),
                min_samples: 1,
                ..WindowConfig::default()
            },
            ..config
        })
        .expect("valid config")
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
    fn the_first_window_sets_the_long_average_and_a_calm_one_adds_smoothed_headroom() {
        let mut t = Instant::now();
        let mut g = gradient(GradientConfig {
            initial: 50,
            ..GradientConfig::default()
        });
        window_of(&mut g, &mut t, &ok(20, 50));
        assert_eq!(g.long_rtt(), Some(ms(20)));
        assert_eq!(g.short_rtt(), Some(ms(20)));
        // target = 50 · 1 + 4; 50 · 0.8 + 54 · 0.2 = 50.8
        assert!(close(g.raw_limit(), 50.8));
        assert_eq!(g.gate().limit, 50);
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
        // 19 ms is not slower: + 4 · 0.2.
        window_of(&mut g, &mut t, &ok(19, 100));
        assert!(close(g.raw_limit(), 100.8));
    }

    #[test]
    fn a_drop_backs_off_once_per_flight_and_leaves_the_averages_alone() {
        let mut t = Instant::now();
        let mut g = warmed(&mut t, 20, 100);
        let dropped = Sample::new(Outcome::Overload, ms(5), 100);
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
