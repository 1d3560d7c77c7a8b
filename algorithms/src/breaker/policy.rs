//! The breaker's state machine.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::config::{BreakerConfig, Cooldown, HalfOpen};
use super::stats::{CallWindow, Mark, WindowStats};
use crate::rng::SplitMix64;
use crate::{
    Algorithm, BreakerState, ConfigError, Gate, Outcome, Sample, Snapshot, Transition, MAX_LIMIT,
};

/// The name a breaker reports in snapshots and transitions.
const NAME: &str = "breaker";

/// How many steps a ramp publishes on its way back to full traffic.
const RAMP_STEPS: u128 = 10;

/// Transitions kept for [`Algorithm::poll_transition`] when nobody drains
/// them; the oldest are dropped first.
const MAX_QUEUED_TRANSITIONS: usize = 256;

/// A circuit breaker with probe-judged recovery and a ramp: the policy of
/// issue 5, built so that letting a dependency back in is as careful as
/// stepping out of its way.
///
/// It moves between [`BreakerState`]s:
///
/// - **closed** — every call is admitted (gate `(∞, p)`, with `p` ramping up
///   to 1 after a recovery) and every finished call that is not
///   [`Outcome::Ignore`] is recorded in the window. Once the window holds
///   [`min_calls`](BreakerConfig::min_calls) calls and its failure rate or
///   slow-call rate reaches its threshold, the breaker opens.
/// - **open** — the gate is shut until the cooldown ends
///   ([`Gate::shut`] with `until` = the end of the cooldown, so a rejection
///   can say how long to wait). The first event at or after that instant
///   (any method taking `now`, or [`Algorithm::handle_timeout`] when
///   [`Algorithm::poll_timeout`] is due) moves it to half-open.
/// - **half-open** — the gate has `probe` set: every admission is asked
///   about through [`Algorithm::on_admit`], which spends the probe allowance
///   (or, with [`HalfOpen::Fraction`], the gate admits a share of arrivals).
///   `limit` caps the probes in flight. Probe results are matched to their
///   admission by [`Sample::started`]; a probe that does not report within
///   [`probe_timeout`](BreakerConfig::probe_timeout) is a failure, and `until`
///   is the earliest probe deadline, so the breaker can never stick
///   half-open. Enough successes close it, with a ramp; too many failures
///   open it again, for a longer cooldown.
///
/// Results of calls that started before the current state began never
/// decide anything: a late failure from before a trip cannot re-trip the
/// fresh window after recovery, and only probes admitted in this half-open
/// cycle judge it. `Ignore` outcomes never count toward any rate; an ignored
/// probe gives its allowance back.
///
/// Manual control — [`force_open`](Breaker::force_open),
/// [`force_closed`](Breaker::force_closed), [`disable`](Breaker::disable),
/// [`metrics_only`](Breaker::metrics_only) and [`reset`](Breaker::reset) —
/// holds the breaker in a state until [`reset`](Breaker::reset) returns it to
/// automatic operation. Every change of state, automatic or manual, is
/// queued for [`Algorithm::poll_transition`].
///
/// # Examples
///
/// A whole cycle, driven by hand:
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Algorithm, BreakerState, Outcome, Sample};
/// use rheostat_algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
///
/// let mut b = Breaker::new(BreakerConfig {
///     cooldown: Cooldown::Fixed(Duration::from_secs(10)),
///     cooldown_jitter: 0.0,
///     ramp: Duration::ZERO,
///     ..BreakerConfig::recommended()
/// })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
///
/// // 20 calls, half of them failed: the breaker opens for 10 s.
/// for i in 0..20 {
///     let outcome = if i % 2 == 0 { Outcome::Overload } else { Outcome::Success };
///     b.on_sample(t0, &Sample::new(outcome, ms(50), 1));
/// }
/// assert_eq!(b.state(), BreakerState::Open);
/// assert_eq!(b.gate().limit, 0);
/// assert_eq!(b.gate().until, Some(t0 + Duration::from_secs(10)));
///
/// // At 10 s it lets probes through; four successes out of five close it.
/// let t1 = t0 + Duration::from_secs(10);
/// b.handle_timeout(t1);
/// assert_eq!(b.state(), BreakerState::HalfOpen);
/// assert!(b.gate().probe);
/// for _ in 0..4 {
///     assert!(b.on_admit(t1));
/// }
/// let done = t1 + ms(200);
/// for _ in 0..4 {
///     b.on_sample(done, &Sample::new(Outcome::Success, ms(200), 1).with_probe(true));
/// }
/// assert_eq!(b.state(), BreakerState::Closed);
///
/// let states: Vec<_> = std::iter::from_fn(|| b.poll_transition()).map(|t| t.to).collect();
/// assert_eq!(states, [BreakerState::Open, BreakerState::HalfOpen, BreakerState::Closed]);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Breaker {
    config: BreakerConfig,
    judge: Judge,
    mode: Mode,
    phase: Phase,
    window: CallWindow,
    /// Calls that started before this instant are not recorded in the
    /// window (they belong to an earlier state).
    window_since: Option<Instant>,
    /// Half-open cycles that failed since the breaker was last closed.
    failed_cycles: u32,
    rng: SplitMix64,
    transitions: VecDeque<Transition>,
    /// The trip rates as plain numbers (infinity for "never"), so the check
    /// on every call is a multiply and a compare on initialised values.
    trip: (f64, f64),
}

/// Who is in charge: the state machine, or a hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Auto,
    ForcedOpen,
    ForcedClosed,
    Disabled,
    MetricsOnly,
}

#[derive(Clone, Debug)]
enum Phase {
    Closed { ramp: Option<Ramp> },
    Open { until: Instant },
    HalfOpen(Trial),
}

#[derive(Clone, Copy, Debug)]
struct Ramp {
    since: Instant,
    level: f64,
    next: Instant,
}

/// One half-open cycle.
#[derive(Clone, Debug)]
struct Trial {
    since: Instant,
    /// Probes admitted this cycle, less those given back by an `Ignore`.
    admitted: u32,
    /// When each probe still awaited was admitted.
    outstanding: Vec<Instant>,
    successes: u32,
    failures: u32,
    slow: u32,
    /// The end of a [`HalfOpen::Fraction`] period, until it has passed.
    period_end: Option<Instant>,
}

impl Trial {
    fn stats(&self) -> WindowStats {
        WindowStats {
            calls: u64::from(self.successes) + u64::from(self.failures),
            failures: u64::from(self.failures),
            slow_calls: u64::from(self.slow),
        }
    }
}

/// The half-open rule after fleet scaling.
#[derive(Clone, Copy, Debug)]
enum Judge {
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

impl Judge {
    fn new(config: &BreakerConfig) -> Self {
        let fleet = config.fleet_size.max(1);
        match config.half_open {
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
}

impl Breaker {
    /// A closed breaker.
    ///
    /// # Errors
    ///
    /// See [`BreakerConfig::validate`].
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{Algorithm, BreakerState};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let b = Breaker::new(BreakerConfig::default())?;
    /// assert_eq!(b.state(), BreakerState::Closed);
    /// assert_eq!(b.gate(), rheostat_algorithms::Gate::unlimited());
    /// assert!(Breaker::new(BreakerConfig { min_calls: 0, ..Default::default() }).is_err());
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn new(config: BreakerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let (config_failure_rate, config_slow_rate) = (config.failure_rate, config.slow_call_rate);
        Ok(Breaker {
            judge: Judge::new(&config),
            window: CallWindow::new(config.window)?,
            rng: SplitMix64::new(config.seed),
            config,
            mode: Mode::Auto,
            phase: Phase::Closed { ramp: None },
            window_since: None,
            failed_cycles: 0,
            transitions: VecDeque::new(),
            trip: (
                config_rate(config_failure_rate),
                config_rate(config_slow_rate),
            ),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The state the breaker is in.
    ///
    /// Under [`metrics_only`](Breaker::metrics_only) this is
    /// [`BreakerState::MetricsOnly`], whatever the shadow state machine
    /// would be doing.
    pub fn state(&self) -> BreakerState {
        match self.mode {
            Mode::Auto => self.phase_state(),
            Mode::ForcedOpen => BreakerState::ForcedOpen,
            Mode::ForcedClosed => BreakerState::ForcedClosed,
            Mode::Disabled => BreakerState::Disabled,
            Mode::MetricsOnly => BreakerState::MetricsOnly,
        }
    }

    /// What the window holds at `now`: the calls, failures and slow calls
    /// the next trip decision would be made on. Empty while open or
    /// half-open (the window starts afresh on every trip and recovery) and
    /// while disabled.
    pub fn window_stats(&self, now: Instant) -> WindowStats {
        self.window.stats(now)
    }

    /// How many probes one half-open cycle admits after fleet scaling:
    /// `max(1, ceil(probes / fleet_size))`. `None` with
    /// [`HalfOpen::Fraction`], which admits a share of arrivals instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let one = Breaker::new(BreakerConfig::recommended())?;
    /// assert_eq!(one.probe_allowance(), Some(5));
    /// let fleet = Breaker::new(BreakerConfig { fleet_size: 40, ..BreakerConfig::recommended() })?;
    /// assert_eq!(fleet.probe_allowance(), Some(1));
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn probe_allowance(&self) -> Option<u32> {
        match self.judge {
            Judge::Probes { allowance, .. } => Some(allowance),
            Judge::Fraction { .. } => None,
        }
    }

    /// How many probe successes close the breaker after fleet scaling:
    /// `close_after` scaled in proportion to the allowance, never below 1.
    /// `None` with [`HalfOpen::Fraction`].
    pub fn probes_to_close(&self) -> Option<u32> {
        match self.judge {
            Judge::Probes { close_after, .. } => Some(close_after),
            Judge::Fraction { .. } => None,
        }
    }

    /// The share of arrivals a [`HalfOpen::Fraction`] breaker admits as
    /// probes after fleet scaling (`fraction / fleet_size`). `None` with
    /// [`HalfOpen::Probes`].
    pub fn probe_fraction(&self) -> Option<f64> {
        match self.judge {
            Judge::Fraction { probability, .. } => Some(probability),
            Judge::Probes { .. } => None,
        }
    }

    /// Hold the breaker open: every call is refused, with no retry-after
    /// (`until` is `None`), until [`reset`](Breaker::reset) or another manual
    /// state. Nothing is recorded meanwhile.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use rheostat_algorithms::{Algorithm, BreakerState, Gate};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let mut b = Breaker::new(BreakerConfig::default())?;
    /// let now = Instant::now();
    /// b.force_open(now);
    /// assert_eq!(b.gate(), Gate::shut(None));
    /// assert_eq!(b.poll_transition().map(|t| t.to), Some(BreakerState::ForcedOpen));
    /// b.reset(now);
    /// assert_eq!(b.state(), BreakerState::Closed);
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn force_open(&mut self, now: Instant) {
        self.manual(now, Mode::ForcedOpen);
    }

    /// Hold the breaker closed: every call is admitted and recorded in the
    /// window (so [`window_stats`](Breaker::window_stats) stays meaningful),
    /// but it never opens, until [`reset`](Breaker::reset) or another manual
    /// state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use rheostat_algorithms::{Algorithm, BreakerState, Outcome, Sample};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let mut b = Breaker::new(BreakerConfig::default())?;
    /// let now = Instant::now();
    /// b.force_closed(now);
    /// for _ in 0..50 {
    ///     b.on_sample(now, &Sample::new(Outcome::Overload, Duration::ZERO, 1));
    /// }
    /// assert_eq!(b.state(), BreakerState::ForcedClosed);
    /// assert_eq!(b.window_stats(now).failures, 50);
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn force_closed(&mut self, now: Instant) {
        self.manual(now, Mode::ForcedClosed);
    }

    /// Switch the breaker off: every call is admitted and nothing is
    /// recorded, until [`reset`](Breaker::reset) or another manual state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use rheostat_algorithms::{Algorithm, BreakerState, Gate, Outcome, Sample};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let mut b = Breaker::new(BreakerConfig::default())?;
    /// let now = Instant::now();
    /// b.disable(now);
    /// b.on_sample(now, &Sample::new(Outcome::Overload, Duration::ZERO, 1));
    /// assert_eq!(b.window_stats(now).calls, 0);
    /// assert_eq!(b.gate(), Gate::unlimited());
    /// assert_eq!(b.snapshot().state, Some(BreakerState::Disabled));
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn disable(&mut self, now: Instant) {
        self.manual(now, Mode::Disabled);
    }

    /// Run the breaker as a witness: every call is admitted and recorded,
    /// and the state machine runs in the shadow, queueing the transitions it
    /// would make (closed → open, open → half-open, …) without ever refusing
    /// a call. With no probes to admit, the shadow half-open judges the calls
    /// that started after it began as if they were probes. Lasts until
    /// [`reset`](Breaker::reset) or another manual state.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use rheostat_algorithms::{Algorithm, BreakerState, Gate, Outcome, Sample};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let mut b = Breaker::new(BreakerConfig::default())?;
    /// let now = Instant::now();
    /// b.metrics_only(now);
    /// for _ in 0..20 {
    ///     b.on_sample(now, &Sample::new(Outcome::Overload, Duration::ZERO, 1));
    /// }
    /// assert_eq!(b.gate(), Gate::unlimited());
    /// let seen: Vec<_> = std::iter::from_fn(|| b.poll_transition()).map(|t| (t.from, t.to)).collect();
    /// assert_eq!(seen, [
    ///     (BreakerState::Closed, BreakerState::MetricsOnly),
    ///     (BreakerState::Closed, BreakerState::Open),
    /// ]);
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn metrics_only(&mut self, now: Instant) {
        self.manual(now, Mode::MetricsOnly);
    }

    /// Return to automatic operation, closed, with an empty window, the
    /// cooldown back at its base and no ramp: what an operator's "close it
    /// now" means. Calls that started before the reset are not recorded.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use rheostat_algorithms::{Algorithm, BreakerState, Gate, Outcome, Sample};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let mut b = Breaker::new(BreakerConfig::default())?;
    /// let now = Instant::now();
    /// for _ in 0..20 {
    ///     b.on_sample(now, &Sample::new(Outcome::Overload, Duration::ZERO, 1));
    /// }
    /// assert_eq!(b.state(), BreakerState::Open);
    /// b.reset(now);
    /// assert_eq!(b.gate(), Gate::unlimited());
    /// let t = std::iter::from_fn(|| b.poll_transition()).last().expect("reported");
    /// assert_eq!((t.from, t.to), (BreakerState::Open, BreakerState::Closed));
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn reset(&mut self, now: Instant) {
        self.failed_cycles = 0;
        self.manual(now, Mode::Auto);
    }

    fn manual(&mut self, now: Instant, mode: Mode) {
        let from = self.state();
        let stats = self.window.stats(now);
        self.mode = mode;
        self.phase = Phase::Closed { ramp: None };
        self.fresh_window(now);
        self.emit(now, from, self.state(), stats);
    }

    fn phase_state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed { .. } => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen(_) => BreakerState::HalfOpen,
        }
    }

    /// Whether the state machine runs (for real or in the shadow).
    fn automatic(&self) -> bool {
        matches!(self.mode, Mode::Auto | Mode::MetricsOnly)
    }

    fn emit(&mut self, at: Instant, from: BreakerState, to: BreakerState, stats: WindowStats) {
        if self.transitions.len() >= MAX_QUEUED_TRANSITIONS {
            self.transitions.pop_front();
        }
        self.transitions.push_back(Transition::new(
            at,
            NAME,
            from,
            to,
            stats.failure_rate(),
            stats.slow_call_rate(),
            stats.calls,
        ));
    }

    fn fresh_window(&mut self, now: Instant) {
        self.window.clear();
        self.window_since = Some(now);
    }

    /// Apply everything due at or before `now`.
    #[inline]
    fn advance(&mut self, now: Instant) {
        if !self.automatic() {
            return;
        }
        match &mut self.phase {
            Phase::Open { until } => {
                if now >= *until {
                    self.enter_half_open(now);
                }
            }
            Phase::HalfOpen(trial) => {
                let timeout = self.config.probe_timeout;
                let before = trial.outstanding.len();
                trial
                    .outstanding
                    .retain(|&start| later(start, timeout) > now);
                let expired = before - trial.outstanding.len();
                trial.failures = trial
                    .failures
                    .saturating_add(u32::try_from(expired).unwrap_or(u32::MAX));
                if trial.period_end.is_some_and(|end| now >= end) {
                    trial.period_end = None;
                }
                self.decide(now);
            }
            Phase::Closed { ramp } => {
                if let Some(r) = ramp {
                    *ramp = self.config.ramp_step(*r, now);
                }
            }
        }
    }

    fn enter_half_open(&mut self, now: Instant) {
        let period_end = match self.judge {
            Judge::Fraction { period, .. } => Some(later(now, period)),
            Judge::Probes { .. } => None,
        };
        self.phase = Phase::HalfOpen(Trial {
            since: now,
            admitted: 0,
            outstanding: Vec::new(),
            successes: 0,
            failures: 0,
            slow: 0,
            period_end,
        });
        self.emit(
            now,
            BreakerState::Open,
            BreakerState::HalfOpen,
            WindowStats::default(),
        );
    }

    /// Close or reopen a half-open breaker if its probes have decided.
    fn decide(&mut self, now: Instant) {
        let Phase::HalfOpen(trial) = &self.phase else {
            return;
        };
        let verdict = match self.judge {
            Judge::Probes {
                allowance,
                close_after,
            } => {
                if trial.successes >= close_after {
                    Some(true)
                } else if trial.failures > allowance - close_after {
                    Some(false)
                } else {
                    None
                }
            }
            Judge::Fraction {
                success_rate,
                min_probes,
                ..
            } => {
                let judged = trial.successes.saturating_add(trial.failures);
                if trial.period_end.is_none() && judged >= min_probes {
                    let needed = success_rate * f64::from(judged) - 1e-9;
                    Some(f64::from(trial.successes) >= needed)
                } else {
                    None
                }
            }
        };
        let stats = trial.stats();
        match verdict {
            Some(true) => self.close(now, stats),
            Some(false) => self.open(now, stats),
            None => {}
        }
    }

    fn close(&mut self, now: Instant, stats: WindowStats) {
        let from = self.phase_state();
        self.failed_cycles = 0;
        self.fresh_window(now);
        let ramp = if self.mode == Mode::Auto {
            self.config.ramp_start_at(now)
        } else {
            None
        };
        self.phase = Phase::Closed { ramp };
        self.emit(now, from, BreakerState::Closed, stats);
    }

    fn open(&mut self, now: Instant, stats: WindowStats) {
        let from = self.phase_state();
        if from == BreakerState::HalfOpen {
            self.failed_cycles = self.failed_cycles.saturating_add(1);
        }
        let cooldown = self.next_cooldown();
        self.phase = Phase::Open {
            until: later(now, cooldown),
        };
        self.fresh_window(now);
        self.emit(now, from, BreakerState::Open, stats);
    }

    /// The open period for the current number of failed cycles, jittered.
    fn next_cooldown(&mut self) -> Duration {
        let d = match self.config.cooldown {
            Cooldown::Fixed(d) => d,
            Cooldown::Exponential { base, factor, cap } => {
                let n = i32::try_from(self.failed_cycles).unwrap_or(i32::MAX);
                let secs = base.as_secs_f64() * factor.powi(n);
                if secs.is_finite() && secs < cap.as_secs_f64() {
                    Duration::from_secs_f64(secs).min(cap)
                } else {
                    cap
                }
            }
        };
        let jitter = self.config.cooldown_jitter;
        if jitter > 0.0 {
            d.mul_f64(1.0 - jitter * self.rng.next_f64())
        } else {
            d
        }
    }

    /// Record a finished call in the window; the figures after it, if it
    /// counted.
    #[inline]
    fn record(&mut self, now: Instant, sample: &Sample) -> Option<WindowStats> {
        if sample.outcome == Outcome::Ignore {
            return None;
        }
        if self
            .window_since
            .is_some_and(|since| sample.started(now) < since)
        {
            return None;
        }
        let mark = Mark {
            failure: sample.outcome == Outcome::Overload,
            slow: self.is_slow(sample),
        };
        Some(self.window.record(now, mark))
    }

    fn is_slow(&self, sample: &Sample) -> bool {
        sample.outcome == Outcome::Success && sample.latency > self.config.slow_call_duration
    }

    #[inline]
    fn should_trip(&self, stats: &WindowStats) -> bool {
        if stats.calls < u64::from(self.config.min_calls) {
            return false;
        }
        // `part / calls >= rate` without a division on every call.
        #[allow(
            clippy::cast_precision_loss,
            reason = "counts above 2^53 lose nothing that matters"
        )]
        let (calls, failures, slow) = (
            stats.calls as f64,
            stats.failures as f64,
            stats.slow_calls as f64,
        );
        failures >= self.trip.0 * calls || slow >= self.trip.1 * calls
    }

    /// Count a finished call as a probe result, if it is one of this cycle's.
    fn judge_probe(&mut self, now: Instant, sample: &Sample) {
        let slow = self.is_slow(sample);
        let failed =
            sample.outcome == Outcome::Overload || (slow && self.config.slow_call_rate.is_some());
        let real = self.mode == Mode::Auto;
        let Phase::HalfOpen(trial) = &mut self.phase else {
            return;
        };
        let start = sample.started(now);
        if real {
            if !sample.probe {
                return;
            }
            let Some(i) = trial.outstanding.iter().position(|&s| s == start) else {
                // Not one of this cycle's probes, or already timed out.
                return;
            };
            trial.outstanding.swap_remove(i);
            if sample.outcome == Outcome::Ignore {
                trial.admitted = trial.admitted.saturating_sub(1);
                return;
            }
        } else if start < trial.since || sample.outcome == Outcome::Ignore {
            return;
        }
        if failed {
            trial.failures = trial.failures.saturating_add(1);
        } else {
            trial.successes = trial.successes.saturating_add(1);
        }
        if slow {
            trial.slow = trial.slow.saturating_add(1);
        }
        self.decide(now);
    }

    fn trial_gate(&self, trial: &Trial) -> Gate {
        let timeout = self.config.probe_timeout;
        let deadline = trial
            .outstanding
            .iter()
            .map(|&start| later(start, timeout))
            .min();
        match self.judge {
            Judge::Probes { allowance, .. } => {
                if trial.admitted >= allowance {
                    Gate::shut(deadline)
                } else {
                    Gate {
                        limit: self.config.probe_concurrency.min(allowance),
                        admit_probability: 1.0,
                        probe: true,
                        until: deadline,
                    }
                }
            }
            Judge::Fraction { probability, .. } => Gate {
                limit: self.config.probe_concurrency,
                admit_probability: probability,
                probe: true,
                until: match (trial.period_end, deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            },
        }
    }
}

/// A configured trip rate, or infinity for one that is not set.
fn config_rate(rate: Option<f64>) -> f64 {
    rate.unwrap_or(f64::INFINITY)
}

impl BreakerConfig {
    /// The ramp right after closing at `now`, or `None` for no ramp.
    fn ramp_start_at(&self, now: Instant) -> Option<Ramp> {
        if self.ramp.is_zero() || self.ramp_start >= 1.0 {
            return None;
        }
        let first = Ramp {
            since: now,
            level: self.ramp_start,
            next: now,
        };
        self.ramp_step(first, now)
    }

    /// The ramp at `now`: the level rises linearly with the time since
    /// closing (never falling), and the next step is the next tenth of the
    /// ramp. `None` once the ramp is over.
    fn ramp_step(&self, ramp: Ramp, now: Instant) -> Option<Ramp> {
        let total = self.ramp.as_nanos();
        let elapsed = now.saturating_duration_since(ramp.since).as_nanos();
        if total == 0 || elapsed >= total {
            return None;
        }
        #[allow(
            clippy::cast_precision_loss,
            reason = "both are at most a year in nanoseconds; the level needs no more precision"
        )]
        let share = elapsed as f64 / total as f64;
        let level = (self.ramp_start + (1.0 - self.ramp_start) * share).max(ramp.level);
        let step = elapsed * RAMP_STEPS / total + 1;
        let next_nanos = (step * total).div_ceil(RAMP_STEPS);
        let next = later(
            ramp.since,
            Duration::from_nanos(u64::try_from(next_nanos).unwrap_or(u64::MAX)),
        );
        Some(Ramp {
            since: ramp.since,
            level: level.min(1.0),
            next,
        })
    }
}

impl Algorithm for Breaker {
    fn name(&self) -> &'static str {
        NAME
    }

    #[inline]
    fn gate(&self) -> Gate {
        match self.mode {
            Mode::Disabled | Mode::MetricsOnly | Mode::ForcedClosed => Gate::unlimited(),
            Mode::ForcedOpen => Gate::shut(None),
            Mode::Auto => match &self.phase {
                Phase::Closed { ramp: None } => Gate::unlimited(),
                Phase::Closed { ramp: Some(r) } => Gate {
                    limit: MAX_LIMIT,
                    admit_probability: r.level,
                    probe: false,
                    until: Some(r.next),
                },
                Phase::Open { until } => Gate::shut(Some(*until)),
                Phase::HalfOpen(trial) => self.trial_gate(trial),
            },
        }
    }

    #[inline]
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.advance(now);
        match self.mode {
            Mode::Disabled | Mode::ForcedOpen => return,
            Mode::ForcedClosed => {
                self.record(now, sample);
                return;
            }
            Mode::Auto | Mode::MetricsOnly => {}
        }
        match self.phase {
            Phase::Closed { .. } => {
                if let Some(stats) = self.record(now, sample) {
                    if self.should_trip(&stats) {
                        self.open(now, stats);
                    }
                }
            }
            Phase::Open { .. } => {}
            Phase::HalfOpen(_) => self.judge_probe(now, sample),
        }
    }

    fn on_admit(&mut self, now: Instant) -> bool {
        self.advance(now);
        if self.mode != Mode::Auto {
            return !self.gate().is_shut();
        }
        let concurrency = self.config.probe_concurrency;
        match &mut self.phase {
            Phase::Closed { .. } => true,
            Phase::Open { .. } => false,
            Phase::HalfOpen(trial) => {
                let room = match self.judge {
                    Judge::Probes { allowance, .. } => {
                        trial.admitted < allowance
                            && trial.outstanding.len() < concurrency.min(allowance) as usize
                    }
                    Judge::Fraction { .. } => trial.outstanding.len() < concurrency as usize,
                };
                if room {
                    trial.admitted = trial.admitted.saturating_add(1);
                    trial.outstanding.push(now);
                }
                room
            }
        }
    }

    #[inline]
    fn poll_timeout(&self) -> Option<Instant> {
        match self.mode {
            // The common case, a closed breaker at full traffic, has no timer.
            Mode::Auto if matches!(self.phase, Phase::Closed { ramp: None }) => None,
            Mode::Auto => self.gate().until,
            Mode::MetricsOnly => match &self.phase {
                Phase::Open { until } => Some(*until),
                Phase::HalfOpen(trial) => trial.period_end,
                Phase::Closed { .. } => None,
            },
            Mode::ForcedOpen | Mode::ForcedClosed | Mode::Disabled => None,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::new(NAME, self.gate()).with_state(self.state())
    }

    #[inline]
    fn poll_transition(&mut self) -> Option<Transition> {
        self.transitions.pop_front()
    }
}

/// `t + d`, or as close to it as an `Instant` can represent.
fn later(t: Instant, d: Duration) -> Instant {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_saturates_instead_of_overflowing() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert!(later(now, Duration::MAX) > now);
    }

    #[test]
    fn the_exponential_cooldown_saturates_at_the_cap_for_any_cycle_count() {
        let mut b = Breaker::new(BreakerConfig {
            cooldown_jitter: 0.0,
            ..BreakerConfig::recommended()
        })
        .expect("valid");
        b.failed_cycles = u32::MAX;
        assert_eq!(b.next_cooldown(), Duration::from_secs(60));
        b.failed_cycles = 1;
        assert_eq!(b.next_cooldown(), Duration::from_secs(20));
    }
}
