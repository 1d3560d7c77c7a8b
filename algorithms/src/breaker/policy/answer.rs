//! What a breaker publishes: its gate, the feedback it needs, the
//! successes it lets be held, when to wake it.

use std::time::Instant;

use super::*;

impl Breaker {
    #[inline]
    pub(super) fn gate(&self) -> Gate {
        match self.mode {
            Mode::Disabled | Mode::MetricsOnly | Mode::ForcedClosed => Gate::unlimited(),
            Mode::ForcedOpen => Gate::shut(None),
            Mode::Auto => match &self.phase {
                Phase::Closed { ramp: None, .. } => Gate::unlimited(),
                Phase::Closed { ramp: Some(r), .. } => Gate {
                    limit: MAX_LIMIT,
                    admit_probability: r.level,
                    probe: false,
                    until: Some(self.config.ramp_deadline(r.since)),
                },
                Phase::Open { until } => Gate::shut(Some(*until)),
                Phase::HalfOpen(trial) => self.trial_gate(trial),
            },
        }
    }

    /// Without a slow-call trip, a running breaker at full traffic needs
    /// outcomes, not latencies: the probes it matches by their start are
    /// timed anyway (the runtime times every call admitted under a probe
    /// gate), and calls from an earlier state are told by
    /// [`Sample::stale`]. While ramping it needs latencies, to tell the
    /// calls admitted at the current level by their start; the shadow state
    /// machine of [`BreakerState::MetricsOnly`] needs them too. A disabled or
    /// forced-open breaker learns nothing.
    pub(super) fn feedback(&self) -> Feedback {
        match self.mode {
            Mode::Disabled | Mode::ForcedOpen => Feedback::Nothing,
            Mode::MetricsOnly => Feedback::Timed,
            // A ramp counts only successes of calls admitted at its current
            // level, told by their start.
            Mode::Auto if matches!(self.phase, Phase::Closed { ramp: Some(_), .. }) => {
                Feedback::Timed
            }
            Mode::Auto | Mode::ForcedClosed if self.config.trips_on_slow_calls() => Feedback::Timed,
            Mode::Auto | Mode::ForcedClosed => Feedback::Outcomes,
        }
    }

    /// A closed breaker at full traffic, without a slow-call trip, lets
    /// successes be held while no number of them could trip it: more
    /// successes only lower the failure rate, except by bringing the window
    /// up to its volume floor, so it holds none while its own trip rule
    /// (`trip_on`, which `on_sample` asks) would trip on the failures
    /// already counted with the window at the floor. A success never trips
    /// on a run of failures either: it ends the run, and the runtime hands
    /// held successes over before any later call, so a failure after it
    /// starts a new run. A time window holds them until its current bucket
    /// ends.
    pub(super) fn deferral(&self) -> Option<Deferral> {
        let closed = matches!(self.phase, Phase::Closed { ramp: None, .. });
        match self.mode {
            Mode::ForcedClosed if !self.config.trips_on_slow_calls() => self.window.deferral(),
            Mode::Auto if closed && !self.config.trips_on_slow_calls() => {
                let stats = self.window.totals();
                let at_floor = WindowStats {
                    calls: stats.calls.max(u64::from(self.config.min_calls)),
                    ..stats
                };
                if self.trip_on(&at_floor).is_some() {
                    None
                } else {
                    self.window.deferral()
                }
            }
            _ => None,
        }
    }

    /// When a cooldown, a probe period or a ramp step is due.
    pub(super) fn wake_at(&self) -> Option<Instant> {
        match self.mode {
            // The common case, a closed breaker at full traffic, has no timer.
            Mode::Auto if matches!(self.phase, Phase::Closed { ramp: None, .. }) => None,
            Mode::Auto => self.gate().until,
            Mode::MetricsOnly => match &self.phase {
                Phase::Open { until } => Some(*until),
                Phase::HalfOpen(trial) => trial.period_end,
                Phase::Closed { .. } => None,
            },
            Mode::ForcedOpen | Mode::ForcedClosed | Mode::Disabled => None,
        }
    }
}
