//! Vegas: a delay-based limit that estimates the dependency's queue from the
//! round-trip time it sees against the round-trip time without load.

use std::time::{Duration, Instant};

use crate::latency::background::{Background, Seen, Verdict};
use crate::latency::congestion;
use crate::latency::outage::{Failing, Outage};
use crate::latency::recent::Recent;
use crate::latency::secs_to_duration;
use crate::latency::window::{Window, WindowConfig, WindowSummary};
use crate::rng::SplitMix64;
use crate::{check, Algorithm, ConfigError, Gate, Hints, Outcome, Published, Sample, Snapshot};

/// The shortest round-trip time the arithmetic uses, in seconds (1 ns): a
/// zero latency is read as this, so ratios stay finite.
const MIN_RTT: f64 = 1e-9;

/// How many recent round-trip times a re-probe waits, after restoring the
/// gate, for the calls of its cohort to finish. With a log-normal latency
/// whose p99 is 3 × its median, 3 × the mean leaves about 0.5% of the cohort
/// unfinished.
const PROBE_SETTLE: f64 = 3.0;

/// The parameters of [`Vegas`].
///
/// The defaults: initial 20, min 1, max 1000; α = 3, β = 6 and threshold = 1
/// times `max(1, ⌊log10 L⌋)`; a drop multiplies the limit by 0.9, once drops
/// are more than 10% of recent calls (`loss_tolerance`); slow start on; the
/// no-load round-trip time re-probed every 15 to 30 windows, at half the
/// limit; 2 standard errors of latency read as noise (`noise`); the
/// [`WindowConfig`] defaults.
///
/// `noise` and `loss_tolerance` are what let Vegas run in front of a real
/// dependency, whose latency is log-normal (p99 2 to 3 × the median) rather
/// than a few percent around its mean. A window of 25 such calls averages
/// within ±7% of the mean only two times in three: without a band, Vegas
/// reads that spread as `L · 7%` queued calls — more than β from a limit of
/// 90 — and shrinks toward the point where the spread stops looking like a
/// queue, about 30 for 25-call windows, whatever the dependency can take. In
/// this crate's simulator a caller needing 42 calls in flight from a
/// healthy dependency was held near 22 and refused half its calls. Two
/// standard errors (one false alarm in 40 windows, and then only from a
/// limit large enough for the excess to count) removed that, while a
/// dependency that lost 40% of its workers still held the caller within 1.3
/// × the calls it could serve at once. A 1% trickle of overload errors at 100 calls a
/// second is one drop a second; `loss_tolerance` keeps it from being read as
/// congestion.
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
/// assert_eq!(err.to_string(), "invalid `vegas.beta`: found 2, expected a number in [alpha, 1000] = [3, 1000]");
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
    /// that the dependency's queue drains and the probe measures its no-load
    /// time. At 1 the probe does not lower the limit, and the baseline it
    /// measures includes whatever queue the caller keeps.
    pub probe_factor: f64,
    /// How many standard errors of the recent latency are read as noise, in
    /// `[0, 10]`: a rise above the baseline counts as queueing only beyond
    /// this many, and the baseline is set from the upper end of the same
    /// band. 0 reads every rise as queueing. See [`Vegas`].
    pub noise: f64,
    /// The share of recent calls (about the last 50) that may be drops
    /// before a drop cuts the limit, in `[0, 1)`: a steady trickle of errors
    /// from a healthy dependency is not congestion. 0 cuts at every drop.
    pub loss_tolerance: f64,
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
            noise: 2.0,
            loss_tolerance: 0.1,
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
        check::closed_by("vegas.beta", self.beta, ("alpha", self.alpha), ("", 1000.0))?;
        check::closed_by(
            "vegas.threshold",
            self.threshold,
            ("", 0.0),
            ("alpha", self.alpha),
        )?;
        check::open_unit("vegas.backoff", self.backoff, 0.0, 1.0)?;
        check::limit("vegas.probe_interval", self.probe_interval, 1)?;
        check::share("vegas.probe_factor", self.probe_factor)?;
        check::closed("vegas.noise", self.noise, 0.0, 10.0)?;
        crate::latency::check_loss_tolerance("vegas.loss_tolerance", self.loss_tolerance)?;
        self.window.validate().map_err(|e| e.within("vegas"))
    }
}

/// A delay-based limit in the manner of TCP Vegas.
///
/// Every closed window estimates how many calls wait in the dependency's
/// queue, `queue = ⌈L · (1 − rtt_noload / rtt_low)⌉`, with `rtt_low` the
/// lower end of the noise band around the recent latency (see below) and
/// `rtt_noload` the baseline, and moves the limit `L` by steps of
/// `s = max(1, ⌊log10 L⌋)`:
///
/// - a window with a drop multiplies `L` by `backoff`, when drops are more
///   than `loss_tolerance` of recent calls (a quarter of them for a caller
///   using under half its limit), and once per flight: drops of calls that
///   started before the last cut do not cut again; a share of drops that
///   stays when the caller sends half as much, with successes as fast as
///   the baseline, is learnt as the dependency's background and tolerated,
///   and the limit goes back to where the cuts for it began (see
///   [`Aimd`](crate::Aimd));
/// - `queue > β·s`: `L − s`, even when the caller is not using its limit;
/// - a caller using under half its limit (app-limited): hold;
/// - `queue ≤ threshold·s`: `L + β·s`; `queue < α·s`: `L + s`; else hold.
///
/// Unlike the widely used implementation it fixes these faults:
///
/// - **slow start**: from the initial limit it doubles every window until the
///   first sign of queueing (then it sheds the estimated queue) or a drop;
/// - **growth outrunning its own evidence**: a new limit shows in latency
///   only once the calls it admits finish, so the limit grows (or doubles)
///   only from a window most of whose successes were admitted since it last
///   grew: once a round trip, as in TCP Vegas. Windows are shorter than the
///   round trip in front of a slow dependency, and growing on each let the
///   limit run past 3 × the true concurrency after a re-probe, before the
///   queue it built could show;
/// - **noise read as queueing**: the recent latency is the window's
///   aggregate blended with earlier windows by sample count (a window that
///   timed out with fewer than `min_samples` calls counts in proportion), and
///   its standard error follows from the spread of single latencies. Only a
///   rise beyond `noise` standard errors counts: `rtt_low = rtt · (1 −
///   noise · error)`. A dependency whose latency merely spreads is not taken
///   to be queueing, however few calls a window holds;
/// - **a lucky-fast or drifting baseline**: a window lowers the baseline only
///   to the upper end of its own band, `rtt · (1 + noise · error)`: the
///   lowest such bound is near the true no-load mean, where the lowest window
///   average is the luckiest window, several standard errors below it. Every
///   `U(0.5, 1) · probe_interval` windows the baseline is re-measured from
///   scratch: the gate admits only `probe_factor` of the limit until a
///   window's worth of the calls admitted since (the *cohort*) has finished,
///   so the dependency's queue drains; then the gate is restored, and the
///   cohort is summarised once its slower calls have had time to finish too
///   (three recent round-trip times) — its first calls to finish are its
///   fastest, and a probe that stopped at them would read the no-load time a
///   third too low in front of a log-normal dependency. The upper end of the
///   cohort's band is the new baseline. So the baseline follows a dependency
///   that became permanently slower, and cannot creep up with the caller's
///   own queue. Windows that close during a re-probe neither lower the
///   baseline nor grow the limit: while the gate is lowered the queue drains,
///   and afterwards the burst of new calls finishes fastest first;
/// - **a trickle of errors read as congestion**: see `loss_tolerance`;
/// - **low traffic**: windows that time out short of samples still count
///   (see [`crate::window`]), and a caller using under half its limit holds
///   it through isolated drops.
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
/// assert_eq!(vegas.publish().gate.limit, 20);
/// assert_eq!(vegas.baseline(), Some(ms(20)));
/// // Latency doubles at a limit of 20: ten calls are queued. When the window
/// // times out, slow start ends and the estimated queue is shed.
/// vegas.on_sample(t0 + ms(500), &Sample::new(Outcome::Success, ms(40), 20));
/// assert_eq!(vegas.publish().wake_at, Some(t0 + ms(1500)));
/// vegas.handle_timeout(t0 + ms(1500));
/// assert_eq!(vegas.publish().gate.limit, 10);
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
    recent: Recent,
    rng: SplitMix64,
    slow_start: bool,
    windows_until_probe: u32,
    /// The re-probe under way, if any.
    probe: Option<Probe>,
    /// The calls of the re-probe's cohort.
    probe_window: Window,
    last_cut: Option<Instant>,
    outage: Outage,
    /// When the limit last grew.
    grown_at: Option<Instant>,
    /// The successes of the open window admitted since the limit last grew.
    fresh: u32,
    /// The drops that sending less does not cure (`crate::latency::background`).
    background: Background,
}

/// A re-probe: the cohort of calls admitted while the gate is lowered,
/// summarised once they have had time to finish.
#[derive(Clone, Copy, Debug)]
struct Probe {
    /// When the gate was lowered: the cohort are the calls admitted from
    /// then...
    started: Instant,
    /// ...until the gate was restored, `None` while it is still lowered.
    admitted_until: Option<Instant>,
    /// When the cohort is summarised, set when the gate is restored.
    settled_at: Option<Instant>,
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
        let probe_window = Window::with_seed(config.window.clone(), config.seed ^ 0xa5a5_a5a5)?;
        let mut rng = SplitMix64::new(config.seed);
        let windows_until_probe = probe_gap(&mut rng, config.probe_interval);
        let recent = Recent::new(config.window.min_samples);
        Ok(Vegas {
            recent,
            limit: f64::from(config.initial),
            slow_start: config.slow_start,
            config,
            baseline: None,
            window,
            rng,
            windows_until_probe,
            probe: None,
            probe_window,
            last_cut: None,
            outage: Outage::default(),
            background: Background::default(),
            grown_at: None,
            fresh: 0,
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

    /// Whether a re-probe is admitting its cohort: the gate is lowered.
    pub fn is_probing(&self) -> bool {
        self.probe.is_some_and(|p| p.admitted_until.is_none())
    }

    /// How many more windows close before the next re-probe begins.
    pub fn windows_until_probe(&self) -> u32 {
        self.windows_until_probe
    }

    /// Whether a window's drop is a congestion event: a drop of a call that
    /// started after the last cut, with drops above the tolerated share of
    /// recent calls.
    fn congested(&self, summary: &WindowSummary) -> bool {
        congestion::congested(
            summary,
            self.last_cut,
            self.limit,
            self.background.tolerated(self.config.loss_tolerance),
            self.recent.loss(),
        )
    }

    /// Move the re-probe on at `now`: restore the gate once the cohort's
    /// window is due, summarise the cohort once it has settled.
    fn advance_probe(&mut self, now: Instant) {
        let Some(mut probe) = self.probe else {
            return;
        };
        match probe.settled_at {
            None => {
                if self.probe_window.is_due(now) {
                    // Its first calls to finish are its fastest: wait for
                    // the rest, a few round-trip times.
                    let settle = self
                        .recent
                        .latency()
                        .map_or(Duration::ZERO, |rtt| secs_to_duration(PROBE_SETTLE * rtt))
                        .max(self.config.window.min_duration);
                    probe.admitted_until = Some(now);
                    probe.settled_at = now
                        .checked_add(settle)
                        .or_else(|| now.checked_add(self.config.window.min_duration));
                    self.probe = Some(probe);
                }
            }
            Some(settled_at) if now >= settled_at => {
                self.probe = None;
                self.windows_until_probe = probe_gap(&mut self.rng, self.config.probe_interval);
                if let Some(summary) = self.probe_window.flush(now) {
                    self.on_probe(now, &summary);
                }
            }
            Some(_) => {}
        }
    }

    /// The cohort of a re-probe has settled: the upper end of its band is
    /// the new baseline. A cohort of one call is as good as the dependency
    /// allows at that traffic; its band is wide, and it errs toward seeing
    /// less queue.
    fn on_probe(&mut self, now: Instant, summary: &WindowSummary) {
        self.recent.update(summary);
        if let Some(rtt) = summary.latency {
            let n = summary.successes();
            let rtt = rtt.as_secs_f64().max(MIN_RTT);
            let upper = rtt * (1.0 + self.config.noise * self.recent.relative_error_of(n));
            self.baseline = Some(upper);
        }
        // A cohort that held nothing but failures met a dependency that is
        // down: the windows around it decide (see `crate::latency::outage`).
        if summary.successes() > 0 && self.congested(summary) {
            self.cut(now, f64::from(self.config.min));
        }
    }

    fn on_window(&mut self, now: Instant, summary: &WindowSummary) {
        let min = f64::from(self.config.min);
        let max = f64::from(self.config.max);
        // A new limit shows in latency only once the calls it admits finish:
        // the limit grows only from a window most of whose successes were
        // admitted since it last grew, once a round trip, as in TCP Vegas.
        let may_grow = u64::from(self.fresh) * 2 >= u64::from(summary.successes());
        self.fresh = 0;
        self.recent.update(summary);
        let limit = self.limit;
        // A window that served nothing counts too: what a trial finds of a
        // dependency that serves nothing is an outage, not a background
        // (`crate::latency::background::DOWN`).
        let verdict = {
            // Successes no slower than the baseline allows: nothing queues.
            let calm = self.recent.calm(self.baseline, self.config.noise);
            self.background.window(
                Seen::of(summary, self.recent.loss(), limit <= min, calm),
                self.config.loss_tolerance,
            )
        };
        if let Verdict::Restore(to) = verdict {
            // The drops are the dependency's: the cuts for them bought
            // nothing.
            self.set_limit(to.max(limit), min, max);
            return;
        }
        let app_limited = congestion::app_limited(summary, limit);
        let congested = self.congested(summary);
        if congested {
            self.background.cut(summary.rate(), limit);
        }
        let z = self.config.noise;
        let probing = self.probe.is_some();

        if !probing {
            self.windows_until_probe = self.windows_until_probe.saturating_sub(1);
            if self.windows_until_probe == 0 {
                self.probe = Some(Probe {
                    started: now,
                    admitted_until: None,
                    settled_at: None,
                });
                self.probe_window.clear();
            }
        }
        match self.outage.observe(
            now,
            summary,
            self.recent.latency().or(self.baseline),
            limit,
            min,
        ) {
            // Down, not queueing: hold.
            Failing::Fast => return,
            Failing::Slow { floor } => {
                if congested {
                    self.cut(now, floor);
                }
                return;
            }
            Failing::No => {}
        }
        if self.outage.regrowing() {
            // Back from an outage: slow start again, until the first sign
            // of queueing.
            self.outage.settle();
            self.slow_start = true;
        }
        if congested {
            self.cut(now, min);
            return;
        }
        if summary.latency.is_none() {
            return;
        }
        let Some(rtt) = self.recent.latency() else {
            return;
        };
        let error = z * self.recent.relative_error();
        let upper = rtt * (1.0 + error);
        let lower = (rtt * (1.0 - error)).max(MIN_RTT);
        // While a re-probe is under way the calls admitted around it come in
        // bursts, whose first to finish are the fastest: such windows do not
        // lower the baseline.
        let baseline = match self.baseline {
            None => upper,
            Some(b) if probing => b,
            Some(b) => b.min(upper),
        };
        self.baseline = Some(baseline);

        let queue = (limit * (1.0 - baseline / lower)).ceil().max(0.0);
        let step = log10_step(limit);
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
        // While the gate is lowered the queue drains, and after it is
        // restored the burst of new calls finishes fastest first: windows
        // that close during a re-probe may shrink the limit, never grow it.
        let next = if probing || !may_grow {
            next.min(limit)
        } else {
            next
        };
        if next > limit {
            self.grown_at = Some(now);
        }
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
        self.limit = congestion::clamped(self.limit, next, min, max);
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

impl Vegas {
    #[inline]
    fn gate(&self) -> Gate {
        let learnt = if self.is_probing() {
            self.limit * self.config.probe_factor
        } else {
            self.limit
        };
        Gate::from_raw_limit(learnt, self.config.min, self.config.max)
    }

    /// When the current window, or the probe's, is due.
    #[inline]
    fn wake_at(&self) -> Option<Instant> {
        let probe = self.probe.and_then(|p| match p.settled_at {
            None => self.probe_window.deadline(),
            Some(at) => Some(at),
        });
        crate::gate::earlier(self.window.deadline(), probe)
    }
}

impl Algorithm for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    /// Every call, timed; wakes when a window is due. Outside a re-probe,
    /// nothing but a window's close moves the gate: the calls that finish
    /// before it may close are held for it.
    #[inline]
    fn publish(&self) -> Published {
        let deferral = match self.probe {
            Some(_) => None,
            None => self.window.deferral(Duration::MAX),
        };
        Published::new(self.gate())
            .with_wake_at(self.wake_at())
            .with_hints(Hints::default().with_deferral(deferral))
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        if let Some(probe) = self.probe {
            let started = sample.started(now);
            let in_cohort =
                started >= probe.started && probe.admitted_until.is_none_or(|end| started < end);
            if in_cohort {
                self.probe_window.add(now, sample);
                self.handle_timeout(now);
                return;
            }
        }
        if sample.outcome == Outcome::Success
            && self
                .grown_at
                .is_none_or(|grown| sample.started(now) >= grown)
        {
            self.fresh = self.fresh.saturating_add(1);
        }
        if let Some(summary) = self.window.record(now, sample) {
            self.on_window(now, &summary);
        }
        self.advance_probe(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.advance_probe(now);
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
    fn re_probe_gaps_are_jittered_between_half_and_all_of_the_interval() {
        let mut rng = SplitMix64::new(1);
        let gaps: Vec<u32> = (0..200).map(|_| probe_gap(&mut rng, 30)).collect();
        assert!(gaps.iter().all(|g| (15..=30).contains(g)), "{gaps:?}");
        assert!(gaps.iter().any(|&g| g < 20) && gaps.iter().any(|&g| g > 25));
        assert_eq!(probe_gap(&mut rng, 1), 1);
    }
}
