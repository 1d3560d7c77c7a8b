//! The statistics Vector's ARC test reads, with the same weighting rules as
//! its `src/test_util/stats.rs` (vectordotdev/vector): written afresh here.
//!
//! - A *time histogram* has one bucket per whole value (an in-flight count,
//!   a limit). Each time a value is added, the time since the previous add
//!   is credited to that value's bucket; the first add only starts the clock.
//!   Its min, max and mode consider only buckets that were credited some time
//!   (so a level held for no time at all does not show); ties for the mode go
//!   to the higher value. The mean weighs every value by its time.
//! - A *level* is a time histogram of a count that goes up and down: each
//!   change first credits the elapsed time to the level as it was.
//! - A *time-weighted sum* (the RTTs) weighs each value by the time since the
//!   previous one; its min and max take every value after the first, even one
//!   that carries no weight.

use std::collections::BTreeMap;
use std::time::Instant;

/// Min, max, mode and mean of a time histogram.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub(crate) min: usize,
    pub(crate) max: usize,
    pub(crate) mode: usize,
    pub(crate) mean: f64,
}

/// Time credited to whole values.
#[derive(Clone, Debug, Default)]
pub(crate) struct TimeHistogram {
    /// Sparse: a limit may be as high as `MAX_LIMIT` (no limit yet).
    seconds: BTreeMap<usize, f64>,
    last: Option<Instant>,
}

impl TimeHistogram {
    /// Credit the time since the previous add to `value`.
    pub(crate) fn add(&mut self, value: usize, now: Instant) {
        if let Some(last) = self.last {
            let held = now.saturating_duration_since(last).as_secs_f64();
            *self.seconds.entry(value).or_insert(0.0) += held;
        }
        self.last = Some(now);
    }

    /// `None` until some time has been credited.
    pub(crate) fn spread(&self) -> Option<Spread> {
        let mut min = None;
        let mut max = 0;
        let mut mode = (0, f64::NEG_INFINITY);
        let mut weighted = 0.0;
        let mut total = 0.0;
        for (&value, &held) in &self.seconds {
            weighted += value as f64 * held;
            total += held;
            if held > 0.0 {
                min.get_or_insert(value);
                max = value;
                if held >= mode.1 {
                    mode = (value, held);
                }
            }
        }
        let min = min?;
        Some(Spread {
            min,
            max,
            mode: mode.0,
            mean: weighted / total,
        })
    }
}

/// A count that goes up and down, timed at each level.
#[derive(Clone, Debug, Default)]
pub(crate) struct Level {
    level: usize,
    time: TimeHistogram,
}

impl Level {
    /// Move the count by `delta` at `now`.
    pub(crate) fn step(&mut self, delta: isize, now: Instant) {
        self.time.add(self.level, now);
        self.level = self.level.saturating_add_signed(delta);
    }

    pub(crate) fn level(&self) -> usize {
        self.level
    }

    pub(crate) fn spread(&self) -> Option<Spread> {
        self.time.spread()
    }
}

/// Min, max and time-weighted mean of a series of values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Range3 {
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
}

/// Values weighted by the time since the previous value.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TimeWeighted {
    weighted: f64,
    weight: f64,
    min: Option<f64>,
    max: Option<f64>,
    last: Option<Instant>,
}

impl TimeWeighted {
    pub(crate) fn add(&mut self, value: f64, now: Instant) {
        if let Some(last) = self.last {
            let weight = now.saturating_duration_since(last).as_secs_f64();
            self.weighted += value * weight;
            self.weight += weight;
            self.min = Some(self.min.map_or(value, |m| m.min(value)));
            self.max = Some(self.max.map_or(value, |m| m.max(value)));
        }
        self.last = Some(now);
    }

    /// `None` while no time has been weighed.
    pub(crate) fn range(&self) -> Option<Range3> {
        if self.weight == 0.0 {
            return None;
        }
        Some(Range3 {
            min: self.min?,
            max: self.max?,
            mean: self.weighted / self.weight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_time_histogram_credits_the_elapsed_time_to_the_value_added() {
        let t0 = Instant::now();
        let s = |ms| t0 + Duration::from_millis(ms);
        let mut h = TimeHistogram::default();
        h.add(5, s(0)); // starts the clock only
        h.add(1, s(100));
        h.add(3, s(400));
        h.add(7, s(400)); // no time: not in min/max/mode
        let spread = h.spread().unwrap();
        assert_eq!((spread.min, spread.max, spread.mode), (1, 3, 3));
        assert!((spread.mean - 2.5).abs() < 1e-9);
    }

    #[test]
    fn a_level_credits_the_level_before_the_change() {
        let t0 = Instant::now();
        let mut l = Level::default();
        l.step(1, t0);
        l.step(1, t0 + Duration::from_secs(1));
        l.step(-2, t0 + Duration::from_secs(3));
        let spread = l.spread().unwrap();
        assert_eq!((spread.min, spread.max, spread.mode), (1, 2, 2));
    }
}
