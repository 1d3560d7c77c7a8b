//! Vector's adaptive request concurrency (ARC) controller, re-implemented
//! from its documented algorithm as a reference policy. Read from
//! vectordotdev/vector: `src/sinks/util/adaptive_concurrency/controller.rs`
//! (the decision), `attempt.rs` and `future.rs` (what is reported when),
//! `semaphore.rs` (how a lowered limit takes effect), `mod.rs` (defaults),
//! and `lib/vector-common`'s `EwmaVar` / `Mean` (the averages). None of
//! Vector's code is copied; the rules are:
//!
//! - The limit starts at 1 and moves between 1 and 200, once per *round*.
//!   A request takes a slot while fewer requests hold one than the limit;
//!   taking the last free slot marks the round as having *reached the limit*.
//! - Each round collects the plain mean of the RTTs of the successful
//!   attempts that finished in it, and whether any attempt met *back
//!   pressure* (a retriable error or a timeout).
//! - A round ends at the first slot released at or after its deadline. The
//!   very first release that has an RTT only seeds the long-run average
//!   and sets the deadline one RTT later. At the end of a round:
//!   - +1 if the limit was reached, there was no back pressure, and the
//!     round's mean RTT is at most the long-run mean;
//!   - otherwise ×0.9, floored (at least 1), on back pressure or when the
//!     round's mean RTT is at least the long-run mean plus 2.5 of its
//!     standard deviations;
//!   - then the round's mean RTT joins the long-run mean and variance
//!     (exponentially weighted, α = 0.4), the next deadline is one long-run
//!     RTT away, and the round's tallies start afresh.
//! - As in Vector's test builds, a round's mean RTT is rounded to the
//!   microsecond, so a constant link reads as exactly constant.
//! - With a fixed concurrency the same rounds run (Vector still records
//!   them) but the limit never moves.
//!
//! Vector's sinks put the limiter *outside* the retry loop: a request holds
//! its slot through every retry, each attempt reports its RTT and back
//! pressure as it ends ([`VectorArc::attempt`]), and the release only
//! closes the request ([`VectorArc::finish`] with nothing to add). With the
//! limiter *inside* the retry loop (Vector's distributed-service stack),
//! each attempt takes a slot and its release carries the attempt's result.
//! Through the [`Algorithm`] trait, a finished call is one release with its
//! outcome and latency; a round is counted as having reached the limit if a
//! call in it was admitted, or finished, with the limit's worth of calls in
//! flight.

use std::time::{Duration, Instant};

use rheostat::algorithms::{Algorithm, Gate, Outcome, Published, Sample};

use super::stats::{TimeHistogram, TimeWeighted};

/// Vector's `AdaptiveConcurrencySettings` defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ArcSettings {
    pub(crate) initial: u32,
    pub(crate) max: u32,
    pub(crate) decrease_ratio: f64,
    pub(crate) ewma_alpha: f64,
    pub(crate) rtt_deviation_scale: f64,
}

impl Default for ArcSettings {
    fn default() -> Self {
        ArcSettings {
            initial: 1,
            max: 200,
            decrease_ratio: 0.9,
            ewma_alpha: 0.4,
            rtt_deviation_scale: 2.5,
        }
    }
}

/// An exponentially weighted mean and variance.
#[derive(Clone, Copy, Debug, PartialEq)]
struct MeanVariance {
    mean: f64,
    variance: f64,
}

impl MeanVariance {
    /// The next state after `x`, weighting it by `alpha` (West's update:
    /// the variance decays by `1 − α` after taking the new deviation in).
    fn next(self, x: f64, alpha: f64) -> Self {
        let diff = x - self.mean;
        let step = alpha * diff;
        MeanVariance {
            mean: self.mean + step,
            variance: (1.0 - alpha) * diff.mul_add(step, self.variance),
        }
    }
}

/// A plain running mean.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct RunningMean {
    mean: f64,
    count: u32,
}

impl RunningMean {
    fn add(&mut self, x: f64) {
        self.count += 1;
        self.mean += (x - self.mean) / f64::from(self.count);
    }

    fn get(&self) -> Option<f64> {
        (self.count > 0).then_some(self.mean)
    }
}

/// Vector's ARC controller.
#[derive(Clone, Debug)]
pub(crate) struct VectorArc {
    settings: ArcSettings,
    fixed: bool,
    limit: u32,
    in_flight: u32,
    past: Option<MeanVariance>,
    deadline: Option<Instant>,
    round: RunningMean,
    back_pressure: bool,
    reached_limit: bool,
    /// The limit over time, credited at each round's end (Vector's
    /// `controller.concurrency_limit`).
    pub(crate) limits: TimeHistogram,
    /// Each round's mean RTT, at its end (Vector's `controller.averaged_rtt`).
    pub(crate) averaged_rtt: TimeWeighted,
}

impl VectorArc {
    /// The adaptive controller with Vector's defaults.
    pub(crate) fn adaptive() -> Self {
        Self::with(ArcSettings::default(), None)
    }

    /// The controller pinned at `limit` (`concurrency = N`).
    pub(crate) fn fixed(limit: u32) -> Self {
        Self::with(ArcSettings::default(), Some(limit))
    }

    fn with(settings: ArcSettings, fixed: Option<u32>) -> Self {
        VectorArc {
            settings,
            fixed: fixed.is_some(),
            limit: fixed.unwrap_or(settings.initial).max(1),
            in_flight: 0,
            past: None,
            deadline: None,
            round: RunningMean::default(),
            back_pressure: false,
            reached_limit: false,
            limits: TimeHistogram::default(),
            averaged_rtt: TimeWeighted::default(),
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Whether a request may take a slot now: the semaphore's permits are
    /// the limit, and a lowered limit swallows released permits until the
    /// holders are under it.
    pub(crate) fn has_room(&self) -> bool {
        self.in_flight < self.limit
    }

    /// A request takes a slot.
    pub(crate) fn start(&mut self) {
        self.in_flight += 1;
        if self.in_flight >= self.limit {
            self.reached_limit = true;
        }
    }

    /// One attempt ended inside the retry loop: its RTT if the link served
    /// it, and whether it met back pressure.
    pub(crate) fn attempt(&mut self, rtt: Option<Duration>, back_pressure: bool) {
        self.back_pressure |= back_pressure;
        if let Some(rtt) = rtt {
            self.round.add(rtt.as_secs_f64());
        }
    }

    /// A slot is given back at `now`, with the RTT and back pressure of the
    /// attempt it covered (nothing, when attempts were reported one by one).
    pub(crate) fn finish(&mut self, now: Instant, rtt: Option<Duration>, back_pressure: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.released(now, rtt, back_pressure);
    }

    fn released(&mut self, now: Instant, rtt: Option<Duration>, back_pressure: bool) {
        self.attempt(rtt, back_pressure);
        let current = self.round.get().map(|c| (c * 1e6).round() / 1e6);
        let Some(past) = self.past else {
            if let Some(current) = current {
                self.past = Some(MeanVariance {
                    mean: current,
                    variance: 0.0,
                });
                self.deadline = Some(now + Duration::from_secs_f64(current));
            }
            return;
        };
        if self.deadline.is_some_and(|d| now < d) {
            return;
        }
        if let Some(current) = current {
            self.averaged_rtt.add(current, now);
        }
        self.limits.add(self.limit as usize, now);
        if !self.fixed {
            self.decide(past, current);
        }
        let past = match current {
            Some(current) => past.next(current, self.settings.ewma_alpha),
            None => past,
        };
        self.past = Some(past);
        self.deadline = Some(now + Duration::from_secs_f64(past.mean));
        self.round = RunningMean::default();
        self.back_pressure = false;
        self.reached_limit = false;
    }

    fn decide(&mut self, past: MeanVariance, current: Option<f64>) {
        let tolerance = past.variance.sqrt() * self.settings.rtt_deviation_scale;
        let quick = current.is_some_and(|c| c <= past.mean);
        if self.limit < self.settings.max && self.reached_limit && !self.back_pressure && quick {
            self.limit += 1;
        } else if self.limit > 1
            && (self.back_pressure || current.unwrap_or(0.0) >= past.mean + tolerance)
        {
            // Floor, as Vector's conversion to an integer does.
            let lowered = (f64::from(self.limit) * self.settings.decrease_ratio) as u32;
            self.limit = lowered.max(1);
        }
    }
}

impl Algorithm for VectorArc {
    fn name(&self) -> &'static str {
        "vector-arc"
    }

    fn publish(&self) -> Published {
        Published::new(Gate::limited(self.limit))
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        // Vector marks the round when a request takes the last slot; a
        // policy hears of calls only as they finish, so the round counts as
        // having reached the limit if the call was admitted at it or
        // finished with the limit's worth in flight.
        if sample.in_flight >= self.limit || sample.in_flight_at_finish >= self.limit {
            self.reached_limit = true;
        }
        match sample.outcome {
            Outcome::Success => self.released(now, Some(sample.latency), false),
            Outcome::Overload => self.released(now, None, true),
            Outcome::Ignore => self.released(now, None, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_limit_rises_after_a_round_at_the_limit_with_a_steady_rtt() {
        // Vector's own `increases_limit` and `handles_deferral` unit tests,
        // replayed: one request at a time, 1 s each.
        let t0 = Instant::now();
        let mut arc = VectorArc::adaptive();
        arc.start();
        arc.finish(t0 + ms(1000), Some(ms(1000)), false);
        assert_eq!(arc.limit(), 1, "the first RTT only seeds the average");
        arc.start();
        arc.finish(t0 + ms(2000), Some(ms(1000)), false);
        assert_eq!(arc.limit(), 2);
        arc.start();
        arc.finish(t0 + ms(3000), None, true);
        assert_eq!(arc.limit(), 1, "back pressure: ×0.9, floored, at least 1");
    }

    #[test]
    fn the_ewma_matches_west_s_recurrence() {
        let mut s = MeanVariance {
            mean: 2.0,
            variance: 0.0,
        };
        s = s.next(2.0, 0.5);
        s = s.next(1.0, 0.5);
        assert_eq!((s.mean, s.variance), (1.5, 0.25));
        s = s.next(2.0, 0.5);
        assert_eq!((s.mean, s.variance), (1.75, 0.1875));
    }
}
