//! The manual states an operator puts a breaker in, and back.

use std::time::Instant;

use super::*;

impl Breaker {
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
    /// assert_eq!(b.publish().gate, Gate::shut(None));
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
    /// assert_eq!(b.publish().gate, Gate::unlimited());
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
    /// assert_eq!(b.publish().gate, Gate::unlimited());
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
    /// assert_eq!(b.publish().gate, Gate::unlimited());
    /// let t = std::iter::from_fn(|| b.poll_transition()).last().expect("reported");
    /// assert_eq!((t.from, t.to), (BreakerState::Open, BreakerState::Closed));
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    pub fn reset(&mut self, now: Instant) {
        self.failed_cycles = 0;
        self.outage_since = None;
        self.manual(now, Mode::Auto);
    }

    fn manual(&mut self, now: Instant, mode: Mode) {
        let from = self.state();
        let stats = self.window.stats(now);
        self.mode = mode;
        self.enter_closed(now, None);
        self.emit(now, from, self.state(), stats);
    }
}
