//! The half-open trial: entering it, judging its probes, deciding.

use std::time::Instant;

use super::*;

impl Breaker {
    pub(super) fn enter_half_open(&mut self, now: Instant) {
        let period_end = match self.config.judge() {
            Judge::Fraction { period, .. } => Some(later(now, period)),
            Judge::Probes { .. } => None,
        };
        self.phase = Phase::HalfOpen(Box::new(Trial {
            since: now,
            admitted: 0,
            outstanding: Vec::new(),
            successes: 0,
            failures: 0,
            slow: 0,
            period_end,
        }));
        self.emit(
            now,
            BreakerState::Open,
            BreakerState::HalfOpen,
            WindowStats::default(),
        );
    }

    /// Close or reopen a half-open breaker if its probes have decided.
    pub(super) fn decide(&mut self, now: Instant) {
        let Phase::HalfOpen(trial) = &self.phase else {
            return;
        };
        let verdict = match self.config.judge() {
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

    /// Count a finished call as a probe result, if it is one of this cycle's.
    pub(super) fn judge_probe(&mut self, now: Instant, sample: &Sample) {
        let slow = self.is_slow(sample);
        let failed =
            sample.outcome == Outcome::Overload || (slow && self.config.trips_on_slow_calls());
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
        } else if sample.stale || start < trial.since || sample.outcome == Outcome::Ignore {
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

    pub(super) fn trial_gate(&self, trial: &Trial) -> Gate {
        let timeout = self.config.probe_timeout;
        let deadline = trial
            .outstanding
            .iter()
            .map(|&start| later(start, timeout))
            .min();
        let concurrency = self.config.probe_concurrency;
        match self.config.judge() {
            Judge::Probes { allowance, .. } => {
                if trial.admitted >= allowance {
                    Gate::shut(deadline)
                } else {
                    Gate {
                        limit: concurrency.min(allowance),
                        admit_probability: 1.0,
                        probe: true,
                        until: deadline,
                    }
                }
            }
            Judge::Fraction { probability, .. } => Gate {
                limit: concurrency,
                admit_probability: probability,
                probe: true,
                until: crate::gate::earlier(trial.period_end, deadline),
            },
        }
    }
}
