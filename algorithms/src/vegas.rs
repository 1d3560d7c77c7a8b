//! Vegas: a delay-based limit that estimates the dependency's queue from the
//! round-trip time it sees against the round-trip time without load.

use std::time::{Duration, Instant};

use crate::rng::SplitMix64;
use crate::window::{Window, WindowConfig, WindowSummary};
use crate::{check, Algorithm, ConfigError, Gate, Outcome, Sample, Snapshot};

/// The shortest round-trip time the arithmetic uses, in seconds (1 ns): a
/// zero latency is read as this, so ratios stay finite.
const MIN_RTT: f64 = 1e-9;

/// The parameters of [`Vegas`].
///
/// The defaults: initial 20, min 1, max 1000; α = 3, β = 6 and threshold = 1
/// times `max(1, ⌊log10 L⌋)`; a drop multiplies the limit by 0.9; slow start
/// on; the no-load round-trip time re-probed every 15 to 30 windows, at half
/// the limit; the [`WindowConfig`] defaults.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Vegas, VegasConfig};
///
/// // A gentler Vegas: a longer queue before it backs off, probes half as often.
/// let config = VegasConfig { beta: 9.0, probe_interval: 60, ..VegasConfig::default() };
/// assert!(Vegas::new(config).is_ok());
///
/// let err = Vegas::new(VegasConfig { beta: 2.0, ..VegasConfig::default() }).unwrap_err();
/// assert_eq!(err.field(), "vegas.beta");
/// assert_eq!(err.to_string(), "invalid `vegas.beta`: found 2, expected a number in [3, 1000]");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct VegasConfig {
    /// The limit to start at, in `[min, max]`.
    pub initial: u32,
    /// The limit never falls below this; at least 1.
    pub min: u32,
    /// The limit never rises above this.
    pub max: u32,
    /// α, as a multiple of `max(1, ⌊log10 L⌋)`: with fewer calls queued than
    /// α the limit grows by one step. In `(0, 1000)`.
    pub alpha: f64,
    /// β, as a multiple of `max(1, ⌊log10 L⌋)`: with more calls queued than β
    /// the limit shrinks by one step, and at or under the threshold it grows
    /// by β. In `[alpha, 1000]`.
    pub beta: f64,
    /// The threshold, as a multiple of `max(1, ⌊log10 L⌋)`: a queue this
    /// short means the dependency is not queueing at all. In `[0, alpha]`.
    pub threshold: f64,
    /// The factor a window with a drop multiplies the limit by, in `(0, 1)`.
    pub backoff: f64,
    /// Whether to start by doubling the limit every window until the first
    /// sign of queueing or a drop.
    pub slow_start: bool,
    /// The mean spacing of no-load re-probes, in windows: each gap is drawn
    /// uniformly from `[probe_interval / 2, probe_interval]`. At least 1.
    pub probe_interval: u32,
    /// The fraction of the limit admitted during a re-probe, in `(0, 1]`, so
    /// that the dependency's queue drains and the window measures its no-load
    /// time. At 1 the probe does not lower the limit, and the baseline it
    /// measures includes whatever queue the caller keeps.
    pub probe_factor: f64,
    /// The seed of the generator that jitters the re-probes.
    pub seed: u64,
    /// How samples are gathered into windows.
    pub window: WindowConfig,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            initial: 20,
            min: 1,
            max: 1000,
            alpha: 3.0,
            beta: 6.0,
            threshold: 1.0,
            backoff: 0.9,
            slow_start: true,
            probe_interval: 30,
            probe_factor: 0.5,
            seed: 0x7665_6761_735f_7631,
            window: WindowConfig::default(),
        }
    }
}

impl VegasConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field outside its range, named `vegas.<field>` (and
    /// `vegas.window.<field>` for the window).
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::bounds(
            ["vegas.min", "vegas.max", "vegas.initial"],
            self.min,
            self.max,
            self.initial,
        )?;
        check::open_unit("vegas.alpha", self.alpha, 0.0, 1000.0)?;
        check::closed("vegas.beta", self.beta, self.alpha, 1000.0)?;
        check::closed("vegas.threshold", self.threshold, 0.0, self.alpha)?;
        check::open_unit("vegas.backoff", self.backoff, 0.0, 1.0)?;
        check::limit("vegas.probe_interval", self.probe_interval, 1)?;
        if !(self.probe_factor > 0.0 && self.probe_factor <= 1.0) {
            return Err(ConfigError::new(
                "vegas.probe_factor",
                self.probe_factor,
                "a number in (0, 1]",
            ));
        }
        self.window.validate().map_err(|e| e.within("vegas"))
    }
}

/// A delay-based limit in the manner of TCP Vegas.
///
/// Every closed window estimates how many calls wait in the dependency's
/// queue, `queue = ⌈L · (1 − rtt_noload / rtt)⌉`, with `rtt` the window's
/// aggregated latency and `rtt_noload` the baseline, and moves the limit `L`
/// by steps of `s = max(1, ⌊log10 L⌋)`:
///
/// - a window with a drop multiplies `L` by `backoff` (once per flight: drops
///   of calls that started before the last cut do not cut again);
/// - `queue > β·s`: `L − s`, even when the caller is not using its limit;
/// - a caller using under half its limit (app-limited): hold;
/// - `queue ≤ threshold·s`: `L + β·s`; `queue < α·s`: `L + s`; else hold.
///
/// Unlike the widely used implementation it fixes three faults:
///
/// - **slow start**: from the initial limit it doubles every window until the
///   first sign of queueing (then it sheds the estimated queue) or a drop;
/// - **a lucky-fast or drifting baseline**: the baseline is the lowest window
///   *aggregate* seen (never one fast call among many), and every
///   `U(0.5, 1) · probe_interval` windows it is re-measured from scratch by a
///   probe window during which the gate admits only `probe_factor` of the
///   limit, so the dependency's queue drains and the probe sees its no-load
///   time. Calls that started before the probe do not count toward it. So the
///   baseline follows a dependency that became permanently slower, and cannot
///   creep up with the caller's own queue;
/// - **low traffic**: windows that time out short of samples still count
///   (see [`crate::window`]).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::WindowConfig;
/// use rheostat_algorithms::{Algorithm, Outcome, Sample, Vegas, VegasConfig};
///
/// let mut vegas = Vegas::new(VegasConfig {
///     initial: 10,
///     window: WindowConfig { min_samples: 1, ..WindowConfig::default() },
///     ..VegasConfig::default()
/// })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// // The first window measures the baseline; slow start doubles the limit.
/// vegas.on_sample(t0, &Sample::new(Outcome::Success, ms(20), 10));
/// vegas.on_sample(t0 + ms(250), &Sample::new(Outcome::Success, ms(20), 10));
/// assert_eq!(vegas.gate().limit, 20);
/// assert_eq!(vegas.baseline(), Some(ms(20)));
/// // Latency doubles at a limit of 20: ten calls are queued. When the window
/// // times out, slow start ends and the estimated queue is shed.
/// vegas.on_sample(t0 + ms(500), &Sample::new(Outcome::Success, ms(40), 20));
/// assert_eq!(vegas.poll_timeout(), Some(t0 + ms(1500)));
/// vegas.handle_timeout(t0 + ms(1500));
/// assert_eq!(vegas.gate().limit, 10);
/// assert!(!vegas.in_slow_start());
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Vegas {
    config: VegasConfig,
    limit: f64,
    /// The no-load round-trip time, in seconds.
    baseline: Option<f64>,
    window: Window,
    rng: SplitMix64,
    slow_start: bool,
    windows_until_probe: u32,
    /// When the current re-probe began.
    probing: Option<Instant>,
    last_cut: Option<Instant>,
}

impl Vegas {
    /// A limiter at `config.initial`, in slow start if configured.
    ///
    /// # Errors
    ///
    /// See [`VegasConfig::validate`].
    pub fn new(config: VegasConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let window = Window::with_seed(config.window.clone(), config.seed ^ 0x5a5a_5a5a)?;
        let mut rng = SplitMix64::new(config.seed);
        let windows_until_probe = probe_gap(&mut rng, config.probe_interval);
        Ok(Vegas {
            limit: f64::from(config.initial),
            slow_start: config.slow_start,
            config,
            baseline: None,
            window,
            rng,
            windows_until_probe,
            probing: None,
            last_cut: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &VegasConfig {
        &self.config
    }

    /// The learnt limit before rounding down. During a re-probe the gate
    /// admits less than this; the limit itself is unchanged.
    pub fn raw_limit(&self) -> f64 {
        self.limit
    }

    /// The current estimate of the dependency's no-load round-trip time,
    /// `None` before the first window with a success.
    pub fn baseline(&self) -> Option<Duration> {
        self.baseline
            .map(|b| Duration::try_from_secs_f64(b).unwrap_or(Duration::MAX))
    }

    /// Whether the limit is still doubling every window.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// Whether a re-probe of the no-load time is under way.
    pub fn is_probing(&self) -> bool {
        self.probing.is_some()
    }

    /// How many more windows close before the next re-probe begins.
    pub fn windows_until_probe(&self) -> u32 {
        self.windows_until_probe
    }

    fn on_window(&mut self, now: Instant, summary: &WindowSummary) {
        let min = f64::from(self.config.min);
        let max = f64::from(self.config.max);
        let new_drop = match (summary.last_drop_started, self.last_cut) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(started), Some(cut)) => started >= cut,
        };

        if self.probing.take().is_some() {
            // The probe window: whatever it measured is the new baseline.
            if let Some(rtt) = summary.latency {
                self.baseline = Some(rtt.as_secs_f64().max(MIN_RTT));
            }
            self.windows_until_probe = probe_gap(&mut self.rng, self.config.probe_interval);
            if new_drop {
                self.cut(now, min);
            }
            return;
        }

        self.windows_until_probe = self.windows_until_probe.saturating_sub(1);
        if self.windows_until_probe == 0 {
            self.probing = Some(now);
        }

        if new_drop {
            self.cut(now, min);
            return;
        }
        let Some(rtt) = summary.latency else {
            return;
        };
        let rtt = rtt.as_secs_f64().max(MIN_RTT);
        let baseline = self.baseline.map_or(rtt, |b| b.min(rtt));
        self.baseline = Some(baseline);

        let limit = self.limit;
        let queue = (limit * (1.0 - baseline / rtt)).ceil().max(0.0);
        let step = log10_step(limit);
        let app_limited = f64::from(summary.max_in_flight) * 2.0 < limit;

        // An app-limited caller's queue estimate is only a hint (it is
        // computed from the limit, not from the few calls in flight), so slow
        // start waits for real load, and such a caller only ever backs off
        // from a long queue.
        let next = if self.slow_start && !app_limited {
            if queue > self.config.threshold * step {
                self.slow_start = false;
                limit - queue
            } else {
                limit * 2.0
            }
        } else if queue > self.config.beta * step {
            limit - step
        } else if app_limited {
            limit
        } else if queue <= self.config.threshold * step {
            limit + self.config.beta * step
        } else if queue < self.config.alpha * step {
            limit + step
        } else {
            limit
        };
        self.set_limit(next, min, max);
        if self.limit >= max {
            self.slow_start = false;
        }
    }

    fn cut(&mut self, now: Instant, min: f64) {
        self.slow_start = false;
        self.last_cut = Some(now);
        let max = f64::from(self.config.max);
        self.set_limit(self.limit * self.config.backoff, min, max);
    }

    fn set_limit(&mut self, next: f64, min: f64, max: f64) {
        if !next.is_nan() {
            self.limit = next.clamp(min, max);
        }
    }
}

/// `max(1, ⌊log10 limit⌋)`: the step Vegas's thresholds and moves scale by.
fn log10_step(limit: f64) -> f64 {
    limit.log10().floor().max(1.0)
}

/// A gap of `U(0.5, 1) · interval` windows, at least one.
fn probe_gap(rng: &mut SplitMix64, interval: u32) -> u32 {
    let gap = (0.5 + 0.5 * rng.next_f64()) * f64::from(interval);
    to_u32(gap.ceil()).max(1)
}

/// An f64 in `[0, u32::MAX]` rounded down to a u32; NaN becomes 0.
fn to_u32(x: f64) -> u32 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "`as` saturates and maps NaN to 0, which is what is wanted"
    )]
    let n = x as u32;
    n
}

impl Algorithm for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn gate(&self) -> Gate {
        let learnt = if self.probing.is_some() {
            self.limit * self.config.probe_factor
        } else {
            self.limit
        };
        Gate::limited(to_u32(learnt).clamp(self.config.min, self.config.max))
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        if let Some(probe_start) = self.probing {
            // Calls admitted before the probe began may have queued behind
            // the old limit: their latency is not the no-load time.
            if sample.outcome == Outcome::Success && sample.started(now) < probe_start {
                self.handle_timeout(now);
                return;
            }
        }
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ok(latency_ms: u64, in_flight: u32) -> Sample {
        Sample::new(Outcome::Success, ms(latency_ms), in_flight)
    }

    /// Windows of one call each (closing after 10 ms), no slow start, and
    /// re-probes far away unless a test asks for them.
    fn vegas(initial: u32) -> Vegas {
        Vegas::new(VegasConfig {
            initial,
            min: 1,
            max: 1000,
            slow_start: false,
            probe_interval: 1_000_000,
            window: one_call_windows(),
            ..VegasConfig::default()
        })
        .expect("valid config")
    }

    fn one_call_windows() -> WindowConfig {
        WindowConfig {
            min_duration: ms(10),
            max_duration: ms(10),
            min_samples: 1,
            ..WindowConfig::default()
        }
    }

    /// Feed one call per window: the call opens a window at `*t`, a tick 10 ms
    /// later closes it.
    fn window_of(v: &mut Vegas, t: &mut Instant, sample: &Sample) {
        v.on_sample(*t, sample);
        *t += ms(10);
        v.handle_timeout(*t);
    }

    #[test]
    fn the_step_is_log10_floored_to_at_least_one() {
        assert_eq!(log10_step(1.0), 1.0);
        assert_eq!(log10_step(99.0), 1.0);
        assert_eq!(log10_step(100.0), 2.0);
        assert_eq!(log10_step(999.0), 2.0);
        assert_eq!(log10_step(1000.0), 3.0);
        assert_eq!(log10_step(0.0), 1.0);
    }

    #[test]
    fn no_queue_grows_the_limit_by_beta() {
        let mut t = Instant::now();
        let mut v = vegas(50);
        window_of(&mut v, &mut t, &ok(20, 50));
        assert_eq!(v.baseline(), Some(ms(20)));
        assert_eq!(v.raw_limit(), 56.0);
        // At 100 the step is 2: β = 12.
        let mut v = vegas(100);
        window_of(&mut v, &mut t, &ok(20, 100));
        assert_eq!(v.raw_limit(), 112.0);
    }

    #[test]
    fn a_short_queue_grows_by_one_step_a_middling_one_holds_a_long_one_shrinks() {
        let mut t = Instant::now();
        let mut v = vegas(50);
        window_of(&mut v, &mut t, &ok(20, 50));
        assert_eq!(v.raw_limit(), 56.0);
        // queue = ceil(56 · (1 − 20/21)) = ceil(2.67) = 3: not under α = 3,
        // not over β = 6: hold.
        window_of(&mut v, &mut t, &ok(21, 56));
        assert_eq!(v.raw_limit(), 56.0);
        // queue = ceil(56 · (1 − 20/20.5)) = ceil(1.37) = 2: between the
        // threshold (1) and α (3): one step.
        let mut sample = ok(20, 56);
        sample.latency = Duration::from_micros(20_500);
        window_of(&mut v, &mut t, &sample);
        assert_eq!(v.raw_limit(), 57.0);
        // queue = ceil(57 · (1 − 20/30)) = 19 > β: one step down.
        window_of(&mut v, &mut t, &ok(30, 57));
        assert_eq!(v.raw_limit(), 56.0);
    }

    #[test]
    fn an_app_limited_caller_holds_but_still_backs_off_from_a_long_queue() {
        let mut t = Instant::now();
        let mut v = vegas(50);
        window_of(&mut v, &mut t, &ok(20, 24));
        assert_eq!(v.raw_limit(), 50.0, "no growth while using under half");
        window_of(&mut v, &mut t, &ok(40, 1));
        assert_eq!(v.raw_limit(), 49.0, "queue 25 > β: shrink");
    }

    #[test]
    fn a_drop_backs_off_once_per_flight() {
        let t0 = Instant::now();
        let mut t = t0;
        let mut v = vegas(100);
        window_of(&mut v, &mut t, &ok(20, 100));
        assert_eq!(v.raw_limit(), 112.0);
        let dropped = Sample::new(Outcome::Overload, ms(5), 112);
        window_of(&mut v, &mut t, &dropped);
        assert!((v.raw_limit() - 100.8).abs() < 1e-9);
        // A drop of a call that started before that cut does not cut again.
        let old = Sample::new(Outcome::Overload, ms(500), 100);
        window_of(&mut v, &mut t, &old);
        assert!((v.raw_limit() - 100.8).abs() < 1e-9);
        // One that started after it does.
        window_of(&mut v, &mut t, &dropped);
        assert!((v.raw_limit() - 90.72).abs() < 1e-9);
    }

    #[test]
    fn slow_start_doubles_until_the_first_sign_of_queueing() {
        let mut t = Instant::now();
        let mut v = Vegas::new(VegasConfig {
            initial: 5,
            probe_interval: 1_000_000,
            window: one_call_windows(),
            ..VegasConfig::default()
        })
        .expect("valid");
        assert!(v.in_slow_start());
        for expected in [10.0, 20.0, 40.0, 80.0] {
            let in_flight = to_u32(v.raw_limit());
            window_of(&mut v, &mut t, &ok(20, in_flight));
            assert_eq!(v.raw_limit(), expected);
        }
        // Capacity was 50: at 80 the latency is 32 ms, queue = 80 · 0.375 = 30.
        window_of(&mut v, &mut t, &ok(32, 80));
        assert!(!v.in_slow_start());
        assert_eq!(v.raw_limit(), 50.0);
        // Back to the normal rules: no queue, + β.
        window_of(&mut v, &mut t, &ok(20, 50));
        assert_eq!(v.raw_limit(), 56.0);
    }

    #[test]
    fn slow_start_holds_while_app_limited_and_ends_at_a_drop() {
        let mut t = Instant::now();
        let mut v = Vegas::new(VegasConfig {
            initial: 10,
            probe_interval: 1_000_000,
            window: one_call_windows(),
            ..VegasConfig::default()
        })
        .expect("valid");
        window_of(&mut v, &mut t, &ok(20, 4));
        assert_eq!(v.raw_limit(), 10.0);
        window_of(&mut v, &mut t, &ok(20, 10));
        assert_eq!(v.raw_limit(), 20.0);
        window_of(&mut v, &mut t, &Sample::new(Outcome::Overload, ms(5), 20));
        assert!(!v.in_slow_start());
        assert_eq!(v.raw_limit(), 18.0);
    }

    #[test]
    fn the_baseline_is_the_lowest_window_aggregate_not_the_luckiest_call() {
        let mut t = Instant::now();
        let mut v = Vegas::new(VegasConfig {
            initial: 50,
            slow_start: false,
            probe_interval: 1_000_000,
            window: WindowConfig {
                min_duration: ms(10),
                max_duration: ms(10),
                min_samples: 1,
                ..WindowConfig::default()
            },
            ..VegasConfig::default()
        })
        .expect("valid");
        // One lucky 1 ms call among nine at 21 ms: the window averages 19 ms.
        v.on_sample(t, &ok(1, 50));
        for _ in 0..9 {
            v.on_sample(t, &ok(21, 50));
        }
        t += ms(10);
        v.handle_timeout(t);
        assert_eq!(v.baseline(), Some(ms(19)));
    }

    #[test]
    fn a_re_probe_lowers_the_gate_and_re_measures_the_baseline_from_new_calls() {
        let t0 = Instant::now();
        let mut t = t0;
        let mut v = Vegas::new(VegasConfig {
            initial: 60,
            slow_start: false,
            probe_interval: 2,
            window: one_call_windows(),
            ..VegasConfig::default()
        })
        .expect("valid");
        // The first gap is one or two windows.
        let gap = v.windows_until_probe();
        assert!((1..=2).contains(&gap), "{gap}");
        window_of(&mut v, &mut t, &ok(20, 60));
        if !v.is_probing() {
            window_of(&mut v, &mut t, &ok(20, 60));
        }
        assert!(v.is_probing());
        let learnt = v.raw_limit();
        assert_eq!(v.gate().limit, to_u32((learnt * 0.5).floor()));
        // The dependency is now twice as slow. A call admitted before the
        // probe began is not counted...
        let probe_start = t;
        v.on_sample(t + ms(5), &ok(500, 60));
        assert!(v.is_probing());
        // ...one admitted after it is, and sets the baseline outright.
        v.on_sample(probe_start + ms(50), &ok(40, 30));
        v.handle_timeout(probe_start + ms(60));
        assert!(!v.is_probing());
        assert_eq!(v.baseline(), Some(ms(40)));
        assert_eq!(v.raw_limit(), learnt, "a probe does not move the limit");
        assert_eq!(v.gate().limit, to_u32(learnt));
        let gap = v.windows_until_probe();
        assert!((1..=2).contains(&gap), "{gap}");
    }

    #[test]
    fn re_probe_gaps_are_jittered_between_half_and_all_of_the_interval() {
        let mut rng = SplitMix64::new(1);
        let gaps: Vec<u32> = (0..200).map(|_| probe_gap(&mut rng, 30)).collect();
        assert!(gaps.iter().all(|g| (15..=30).contains(g)), "{gaps:?}");
        assert!(gaps.iter().any(|&g| g < 20) && gaps.iter().any(|&g| g > 25));
        assert_eq!(probe_gap(&mut rng, 1), 1);
    }

    #[test]
    fn zero_and_huge_latencies_keep_the_limit_finite_and_in_range() {
        let mut t = Instant::now();
        let mut v = vegas(50);
        for latency in [Duration::ZERO, Duration::MAX, Duration::ZERO, ms(1)] {
            window_of(
                &mut v,
                &mut t,
                &Sample::new(Outcome::Success, latency, u32::MAX),
            );
            assert!(v.raw_limit().is_finite());
            assert!((1.0..=1000.0).contains(&v.raw_limit()));
        }
        window_of(
            &mut v,
            &mut t,
            &Sample::new(Outcome::Success, Duration::MAX, 0),
        );
        assert!(v.raw_limit().is_finite());
    }

    #[test]
    fn the_gate_asks_to_be_woken_when_the_window_times_out() {
        let t0 = Instant::now();
        let mut v = vegas(50);
        assert_eq!(v.poll_timeout(), None);
        v.on_sample(t0, &ok(20, 50));
        assert_eq!(v.poll_timeout(), Some(t0 + ms(10)));
        v.handle_timeout(t0 + ms(10));
        assert_eq!(v.poll_timeout(), None);
        assert_eq!(v.snapshot().raw_limit, Some(56.0));
    }

    #[test]
    fn every_invalid_field_is_named() {
        let base = VegasConfig::default();
        let cases: Vec<(VegasConfig, &str)> = vec![
            (
                VegasConfig {
                    min: 0,
                    initial: 0,
                    ..base.clone()
                },
                "vegas.min",
            ),
            (
                VegasConfig {
                    max: u32::MAX,
                    ..base.clone()
                },
                "vegas.max",
            ),
            (
                VegasConfig {
                    min: 50,
                    max: 40,
                    initial: 45,
                    ..base.clone()
                },
                "vegas.min",
            ),
            (
                VegasConfig {
                    initial: 2000,
                    ..base.clone()
                },
                "vegas.initial",
            ),
            (
                VegasConfig {
                    initial: 1,
                    min: 2,
                    ..base.clone()
                },
                "vegas.initial",
            ),
            (
                VegasConfig {
                    alpha: 0.0,
                    ..base.clone()
                },
                "vegas.alpha",
            ),
            (
                VegasConfig {
                    alpha: f64::NAN,
                    ..base.clone()
                },
                "vegas.alpha",
            ),
            (
                VegasConfig {
                    beta: 2.0,
                    ..base.clone()
                },
                "vegas.beta",
            ),
            (
                VegasConfig {
                    beta: f64::INFINITY,
                    ..base.clone()
                },
                "vegas.beta",
            ),
            (
                VegasConfig {
                    threshold: -1.0,
                    ..base.clone()
                },
                "vegas.threshold",
            ),
            (
                VegasConfig {
                    threshold: 4.0,
                    ..base.clone()
                },
                "vegas.threshold",
            ),
            (
                VegasConfig {
                    backoff: 1.0,
                    ..base.clone()
                },
                "vegas.backoff",
            ),
            (
                VegasConfig {
                    backoff: 0.0,
                    ..base.clone()
                },
                "vegas.backoff",
            ),
            (
                VegasConfig {
                    probe_interval: 0,
                    ..base.clone()
                },
                "vegas.probe_interval",
            ),
            (
                VegasConfig {
                    probe_factor: 0.0,
                    ..base.clone()
                },
                "vegas.probe_factor",
            ),
            (
                VegasConfig {
                    probe_factor: 1.5,
                    ..base.clone()
                },
                "vegas.probe_factor",
            ),
            (
                VegasConfig {
                    probe_factor: f64::NAN,
                    ..base.clone()
                },
                "vegas.probe_factor",
            ),
            (
                VegasConfig {
                    window: WindowConfig {
                        min_samples: 0,
                        ..WindowConfig::default()
                    },
                    ..base.clone()
                },
                "vegas.window.min_samples",
            ),
        ];
        for (config, field) in cases {
            let err = Vegas::new(config.clone()).expect_err(field);
            assert_eq!(err.field(), field, "{config:?}: {err}");
        }
    }
}
