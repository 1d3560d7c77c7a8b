//! The breaker's state machine.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

mod answer;
mod half_open;
mod manual;
#[cfg(test)]
mod tests;

use super::config::BreakerConfig;
use super::settings::{later, Judge, Ramp};
use super::stats::{CallWindow, Mark, WindowStats};
use crate::rng::SplitMix64;
use crate::{
    Algorithm, BreakerState, ConfigError, Deferral, Feedback, Gate, Hints, Outcome, Published,
    Sample, Snapshot, Transition, MAX_LIMIT,
};

/// The name a breaker reports in snapshots and transitions.
const NAME: &str = "breaker";

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
///   slow-call rate reaches its threshold, the breaker opens; while it holds
///   fewer, [`consecutive_failures`](BreakerConfig::consecutive_failures)
///   failures in a row open it. After a recovery the ramp doubles `p` on
///   every [`ramp_successes`](BreakerConfig::ramp_successes) successes of
///   calls admitted at the current level (with no failure among them), and
///   at the latest once a step has lasted its share of
///   [`ramp`](BreakerConfig::ramp); `until` is the end of that step.
/// - **open** — the gate is shut until the cooldown ends
///   ([`Gate::shut`] with `until` = the end of the cooldown, so a rejection
///   can say how long to wait). The first event at or after that instant
///   (any method taking `now`, or [`Algorithm::handle_timeout`] when
///   [`Published::wake_at`](crate::Published::wake_at) is due) moves it to half-open.
/// - **half-open** — the gate has `probe` set: every admission is asked
///   about through [`Algorithm::on_admit`], which spends the probe allowance
///   (or, with [`HalfOpen::Fraction`](super::HalfOpen::Fraction), the gate
///   admits a share of arrivals). `limit` caps the probes in flight. Probe
///   results are matched to their admission by [`Sample::started`]; a probe
///   that does not report within
///   [`probe_timeout`](BreakerConfig::probe_timeout) is a failure, and
///   `until` is the earliest probe deadline, so the breaker can never stick
///   half-open. Enough successes close it, with a ramp; too many failures
///   open it again, for a cooldown that has grown with the outage (or, if
///   a probe succeeded, back at its base).
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
/// // 20 calls, half of them failed: the breaker opens for 10 s. (Never
/// // more than one failure in a row, so the run rule plays no part.)
/// for i in 0..20 {
///     let outcome = if i % 2 == 0 { Outcome::Overload } else { Outcome::Success };
///     b.on_sample(t0, &Sample::new(outcome, ms(50), 1));
/// }
/// assert_eq!(b.state(), BreakerState::Open);
/// assert_eq!(b.publish().gate.limit, 0);
/// assert_eq!(b.publish().gate.until, Some(t0 + Duration::from_secs(10)));
///
/// // At 10 s it lets probes through; four successes out of five close it.
/// let t1 = t0 + Duration::from_secs(10);
/// b.handle_timeout(t1);
/// assert_eq!(b.state(), BreakerState::HalfOpen);
/// assert!(b.publish().gate.probe);
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
#[derive(Clone)]
pub struct Breaker {
    /// The configuration, validated, as given: the one home of every
    /// setting (the call window is built from its `window`).
    config: BreakerConfig,
    mode: Mode,
    phase: Phase,
    window: CallWindow,
    /// Failures recorded in a row while closed.
    run: u32,
    /// Half-open cycles that failed since the breaker was last closed (or
    /// since a failed cycle in which a probe succeeded).
    failed_cycles: u32,
    /// When the outage began, as the cooldown times it: the trip, or the
    /// last failed cycle in which a probe succeeded. `None` while closed.
    outage_since: Option<Instant>,
    rng: SplitMix64,
    transitions: Queue,
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
    Closed {
        /// Calls that started before this instant are not recorded in the
        /// window (they belong to an earlier state); `None` until the
        /// breaker first changes state.
        since: Option<Instant>,
        /// The ramp back to full traffic, which began at `since`; boxed,
        /// as a breaker is nearly always at full traffic.
        ramp: Option<Box<Ramp>>,
    },
    Open {
        until: Instant,
    },
    /// Boxed, so that a breaker that is not half-open, as nearly all are,
    /// does not hold room for a cycle.
    HalfOpen(Box<Trial>),
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
    /// The end of a [`HalfOpen::Fraction`](super::HalfOpen::Fraction)
    /// period, until it has passed.
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
    /// assert_eq!(b.publish().gate, rheostat_algorithms::Gate::unlimited());
    /// assert!(Breaker::new(BreakerConfig { min_calls: 0, ..Default::default() }).is_err());
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn new(config: BreakerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Breaker {
            window: CallWindow::new(config.window)?,
            rng: SplitMix64::new(config.seed),
            mode: Mode::Auto,
            phase: Phase::Closed {
                since: None,
                ramp: None,
            },
            run: 0,
            failed_cycles: 0,
            outage_since: None,
            transitions: Queue::default(),
            config,
        })
    }

    /// The configuration the breaker was built with.
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
    /// [`HalfOpen::Fraction`](super::HalfOpen::Fraction), which admits a
    /// share of arrivals instead.
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
        match self.config.judge() {
            Judge::Probes { allowance, .. } => Some(allowance),
            Judge::Fraction { .. } => None,
        }
    }

    /// How many probe successes close the breaker after fleet scaling:
    /// `close_after` scaled in proportion to the allowance, never below 1.
    /// `None` with [`HalfOpen::Fraction`](super::HalfOpen::Fraction).
    pub fn probes_to_close(&self) -> Option<u32> {
        match self.config.judge() {
            Judge::Probes { close_after, .. } => Some(close_after),
            Judge::Fraction { .. } => None,
        }
    }

    /// The share of arrivals a
    /// [`HalfOpen::Fraction`](super::HalfOpen::Fraction) breaker admits as
    /// probes after fleet scaling (`fraction / fleet_size`). `None` with
    /// [`HalfOpen::Probes`](super::HalfOpen::Probes).
    pub fn probe_fraction(&self) -> Option<f64> {
        match self.config.judge() {
            Judge::Fraction { probability, .. } => Some(probability),
            Judge::Probes { .. } => None,
        }
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
        self.transitions.push(Transition::new(
            at,
            NAME,
            from,
            to,
            stats.failure_rate(),
            stats.slow_call_rate(),
            stats.calls,
        ));
    }

    /// Close at `now` with `ramp` and an empty window that records only
    /// calls started from `now` on.
    fn enter_closed(&mut self, now: Instant, ramp: Option<Ramp>) {
        self.window.clear();
        self.run = 0;
        self.phase = Phase::Closed {
            since: Some(now),
            ramp: ramp.map(Box::new),
        };
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
            Phase::Closed { ramp, .. } => {
                // A step with no failure moves up once it has lasted its
                // longest, whatever the evidence.
                while let Some(r) = ramp.as_deref() {
                    let deadline = self.config.ramp_deadline(r.since);
                    if now < deadline {
                        break;
                    }
                    Self::ramp_up(ramp, deadline);
                }
            }
        }
    }

    /// Double the ramp's level at `now`, ending the ramp at full traffic.
    fn ramp_up(ramp: &mut Option<Box<Ramp>>, now: Instant) {
        if let Some(r) = ramp {
            r.level *= 2.0;
            r.since = now;
            r.successes = 0;
            if r.level >= 1.0 {
                *ramp = None;
            }
        }
    }

    /// Count a call recorded while ramping as evidence: a success of a call
    /// admitted at the current level counts toward the next doubling; a
    /// failure (or a slow call, where slow calls trip) restarts the count.
    /// The step's clock runs on: the trip rules, not the ramp, decide
    /// whether failures reopen the breaker.
    fn ramp_evidence(&mut self, now: Instant, sample: &Sample, mark: Mark) {
        let bad = mark.failure || (mark.slow && self.config.trips_on_slow_calls());
        let needed = self.config.ramp_successes;
        let Phase::Closed { ramp, .. } = &mut self.phase else {
            return;
        };
        let Some(r) = ramp else {
            return;
        };
        if bad {
            r.successes = 0;
        } else if sample.started(now) >= r.since {
            r.successes = r.successes.saturating_add(1);
            if r.successes >= needed {
                Self::ramp_up(ramp, now);
            }
        }
    }

    fn close(&mut self, now: Instant, stats: WindowStats) {
        let from = self.phase_state();
        self.failed_cycles = 0;
        self.outage_since = None;
        let ramp = if self.mode == Mode::Auto {
            self.config.ramp_begin(now)
        } else {
            None
        };
        self.enter_closed(now, ramp);
        self.emit(now, from, BreakerState::Closed, stats);
    }

    /// Open at `now`; `stats` are the figures that decided it (for a
    /// half-open cycle, its probes).
    fn open(&mut self, now: Instant, stats: WindowStats) {
        let from = self.phase_state();
        if from == BreakerState::HalfOpen {
            if stats.calls > stats.failures {
                // A probe succeeded: the dependency answers again, so the
                // cooldown starts over rather than growing.
                self.failed_cycles = 0;
                self.outage_since = Some(now);
            } else {
                self.failed_cycles = self.failed_cycles.saturating_add(1);
            }
        } else {
            self.failed_cycles = 0;
            self.outage_since = Some(now);
        }
        let cooldown = self.next_cooldown(now);
        self.phase = Phase::Open {
            until: later(now, cooldown),
        };
        self.window.clear();
        self.emit(now, from, BreakerState::Open, stats);
    }

    /// The open period at `now` for the current number of failed cycles
    /// and the outage so far, jittered.
    fn next_cooldown(&mut self, now: Instant) -> Duration {
        let outage = self
            .outage_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let d = self.config.cooldown_after(self.failed_cycles, outage);
        let jitter = self.config.cooldown_jitter;
        if jitter > 0.0 {
            d.mul_f64(1.0 - jitter * self.rng.next_f64())
        } else {
            d
        }
    }

    /// Record a finished call in the window; the figures after it and how
    /// it was counted, if it counted.
    #[inline]
    fn record(&mut self, now: Instant, sample: &Sample) -> Option<(WindowStats, Mark)> {
        if sample.outcome == Outcome::Ignore {
            return None;
        }
        // Only a closed breaker records (forced closed included).
        let since = match self.phase {
            Phase::Closed { since, .. } => since,
            Phase::Open { .. } | Phase::HalfOpen(_) => None,
        };
        // A call from an earlier state: marked by the runtime, or (driven by
        // hand) told by its start.
        if sample.stale || since.is_some_and(|since| sample.started(now) < since) {
            return None;
        }
        let mark = Mark {
            failure: sample.outcome == Outcome::Overload,
            slow: self.is_slow(sample),
        };
        self.run = if mark.failure {
            self.run.saturating_add(1)
        } else {
            0
        };
        Some((self.window.record(now, mark), mark))
    }

    fn is_slow(&self, sample: &Sample) -> bool {
        sample.outcome == Outcome::Success && self.config.is_slow(sample.latency)
    }

    /// The figures to report if the breaker should trip on `stats` and
    /// the current run of failures: the window's, or, for a run that trips
    /// a window too sparse to judge a rate, the run's (that many calls, all
    /// failed).
    #[inline]
    fn trip_on(&self, stats: &WindowStats) -> Option<WindowStats> {
        if stats.calls < u64::from(self.config.min_calls) {
            let n = self.config.consecutive_failures;
            return (n > 0 && self.run >= n).then(|| WindowStats {
                calls: u64::from(self.run),
                failures: u64::from(self.run),
                slow_calls: 0,
            });
        }
        self.rates_trip(stats).then_some(*stats)
    }

    /// Whether the window's rates reach a threshold (its volume aside).
    #[inline]
    fn rates_trip(&self, stats: &WindowStats) -> bool {
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
        failures >= self.config.failure_threshold() * calls
            || slow >= self.config.slow_threshold() * calls
    }
}

impl Algorithm for Breaker {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The gate; outcomes or timed calls as the state needs; successes
    /// held (or only counted) while none could trip it; woken when a timer
    /// is due.
    #[inline]
    fn publish(&self) -> Published {
        Published::new(self.gate())
            .with_wake_at(self.wake_at())
            .with_hints(
                Hints::default()
                    .with_feedback(self.feedback())
                    .with_deferral(self.deferral()),
            )
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
                if let Some((stats, mark)) = self.record(now, sample) {
                    if let Some(cause) = self.trip_on(&stats) {
                        self.open(now, cause);
                    } else {
                        self.ramp_evidence(now, sample, mark);
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
        let judge = self.config.judge();
        match &mut self.phase {
            Phase::Closed { .. } => true,
            Phase::Open { .. } => false,
            Phase::HalfOpen(trial) => {
                let room = match judge {
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

    fn on_successes(&mut self, _now: Instant, count: u64) {
        // Published only while closed and recording, and no number of
        // successes can trip it then (see `deferral`).
        if matches!(self.phase, Phase::Closed { .. })
            && matches!(self.mode, Mode::Auto | Mode::ForcedClosed)
        {
            self.window.record_successes(count);
            if count > 0 {
                self.run = 0;
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// [`BreakerConfig::probe_timeout`], whatever the state: the attempt
    /// timeout a probe should be given, and the breaker's own deadline for it.
    fn probe_timeout(&self) -> Option<Duration> {
        Some(self.config.probe_timeout)
    }

    fn hold_closed(&mut self, now: Instant, hold: bool) -> bool {
        if hold {
            self.force_closed(now);
        } else {
            self.reset(now);
        }
        true
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::new(NAME, self.gate()).with_state(self.state())
    }

    #[inline]
    fn poll_transition(&mut self) -> Option<Transition> {
        self.transitions.pop()
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("config", &self.config)
            .field("mode", &self.mode)
            .field("phase", &self.phase)
            .field("window", &self.window)
            .field("run", &self.run)
            .field("failed_cycles", &self.failed_cycles)
            .field("outage_since", &self.outage_since)
            .field("transitions", &self.transitions)
            .finish_non_exhaustive()
    }
}

/// The transitions waiting for [`Algorithm::poll_transition`], oldest
/// first. Nothing is allocated while none wait, which is nearly always.
#[derive(Clone, Debug, Default)]
#[allow(
    clippy::box_collection,
    reason = "boxed, an empty queue takes one word instead of four"
)]
struct Queue(Option<Box<VecDeque<Transition>>>);

impl Queue {
    /// Add `transition`, dropping the oldest if [`MAX_QUEUED_TRANSITIONS`]
    /// are waiting.
    fn push(&mut self, transition: Transition) {
        let queue = self.0.get_or_insert_with(Box::default);
        if queue.len() >= MAX_QUEUED_TRANSITIONS {
            queue.pop_front();
        }
        queue.push_back(transition);
    }

    /// Take the oldest transition, freeing the queue once it is empty.
    #[inline]
    fn pop(&mut self) -> Option<Transition> {
        let queue = self.0.as_mut()?;
        let oldest = queue.pop_front();
        if queue.is_empty() {
            self.0 = None;
        }
        oldest
    }
}
