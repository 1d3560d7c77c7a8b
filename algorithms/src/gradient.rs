//! Gradient: a delay-based limit driven by the ratio of a long-window
//! round-trip time to the latest window's.

use std::time::{Duration, Instant};

use crate::latency::background::{Background, Seen, Verdict};
use crate::latency::congestion;
use crate::latency::outage::{Failing, Outage};
use crate::latency::recent::Recent;
use crate::latency::secs_to_duration;
use crate::latency::window::{Window, WindowConfig, WindowSummary};
use crate::{check, Algorithm, ConfigError, Gate, Hints, Published, Sample, Snapshot};

/// The shortest round-trip time the arithmetic uses, in seconds (1 ns): a
/// zero latency is read as this, so ratios stay finite.
const MIN_RTT: f64 = 1e-9;

/// While the long round-trip time is more than twice the short one, each
/// window multiplies it by this (but not below twice the short one).
const LONG_DECAY: f64 = 0.9;

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
        check::share("gradient.smoothing", self.smoothing)?;
        check::closed("gradient.headroom", self.headroom, 0.0, 1000.0)?;
        check::limit("gradient.long_window", self.long_window, 1)?;
        check::open_unit("gradient.backoff", self.backoff, 0.0, 1.0)?;
        check::closed("gradient.noise", self.noise, 0.0, 10.0)?;
        check::share("gradient.long_rise", self.long_rise)?;
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
///   up to max, while 1% of errors from a healthy one does not; a share of
///   drops that stays when the caller sends half as much, with successes as
///   fast as ever (errors at random, hangs), is learnt as the dependency's
///   background and tolerated, and the limit goes back to where the cuts
///   for it began (see [`Aimd`](crate::Aimd) and `crate::latency::background`);
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
    /// The drops that sending less does not cure (`crate::latency::background`).
    background: Background,
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
            background: Background::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GradientConfig {
        &self.config
    }

    /// Change the configuration in place, keeping what the policy has
    /// learnt: the limit (clamped to the new `[min, max]`), the long and
    /// short averages and the recent history. A new `window` configuration
    /// starts a new window (and recent history) from the next call.
    /// `initial` is not read.
    ///
    /// # Errors
    ///
    /// See [`GradientConfig::validate`]; on an error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{Gradient, GradientConfig};
    ///
    /// let mut gradient = Gradient::new(GradientConfig { initial: 50, ..GradientConfig::default() })?;
    /// gradient.set_config(GradientConfig { max: 40, tolerance: 1.5, ..GradientConfig::default() })?;
    /// assert_eq!(gradient.raw_limit(), 40.0);
    /// assert!(gradient.set_config(GradientConfig { tolerance: 0.5, ..GradientConfig::default() }).is_err());
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn set_config(&mut self, config: GradientConfig) -> Result<(), ConfigError> {
        config.validate()?;
        if config.window != self.config.window {
            self.window = Window::new(config.window.clone())?;
            self.recent = Recent::new(config.window.min_samples);
        }
        let (min, max) = (f64::from(config.min), f64::from(config.max));
        self.config = config;
        self.set_limit(self.limit, min, max);
        Ok(())
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
        let loss = self.recent.loss();
        let tolerance = self.config.loss_tolerance;
        // A window that served nothing counts too: what a trial finds of a
        // dependency that serves nothing is an outage, not a background
        // (`crate::latency::background::DOWN`).
        let verdict = {
            // Successes no slower than the long average allows: nothing
            // queues.
            let calm = self.recent.calm(self.long, self.config.noise);
            self.background
                .window(Seen::of(summary, loss, limit <= min, calm), tolerance)
        };
        if let Verdict::Restore(to) = verdict {
            // The drops are the dependency's: the cuts for them bought
            // nothing.
            self.set_limit(to.max(limit), min, max);
            return;
        }
        let app_limited = congestion::app_limited(summary, limit);
        let congested = congestion::congested(
            summary,
            self.last_cut,
            limit,
            self.background.tolerated(tolerance),
            loss,
        );
        if congested {
            self.background.cut(summary.rate(), limit);
        }
        let rtt = self.recent.latency().or(self.long);
        match self.outage.observe(now, summary, rtt, limit, min) {
            // Down, not queueing: hold.
            Failing::Fast => return,
            Failing::Slow { floor } => {
                if congested {
                    self.last_cut = Some(now);
                    self.set_limit((limit * self.config.backoff).max(floor), min, max);
                }
                return;
            }
            Failing::No => {}
        }
        if congested {
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
        } else if short <= long {
            // A rise ends when the latency is back at the long average, not
            // at the first window whose noise reaches down to it.
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
        self.limit = congestion::clamped(self.limit, next, min, max);
    }
}

impl Gradient {
    #[inline]
    fn gate(&self) -> Gate {
        Gate::from_raw_limit(self.limit, self.config.min, self.config.max)
    }
}

impl Algorithm for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    /// Every call, timed; wakes when the current window is due.
    #[inline]
    fn publish(&self) -> Published {
        // Nothing but a window's close moves the gate: the calls that
        // finish before it may close are held for it.
        Published::new(self.gate())
            .with_wake_at(self.window.deadline())
            .with_hints(Hints::default().with_deferral(self.window.deferral(Duration::MAX)))
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
