//! The breaker's own call window: the last N calls, or the last T seconds in
//! buckets evicted by time. Recording is O(1) amortised.

use std::time::Instant;

use super::config::BreakerWindow;
use crate::buckets::{BucketRing, Slot, Tally};
use crate::{ConfigError, Deferral};

/// What a breaker's window holds at one instant: the figures its trip
/// decision is made on.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Algorithm, Outcome, Sample};
/// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
///
/// let mut b = Breaker::new(BreakerConfig::recommended())?;
/// let t0 = Instant::now();
/// b.on_sample(t0, &Sample::new(Outcome::Success, Duration::from_millis(20), 1));
/// b.on_sample(t0, &Sample::new(Outcome::Overload, Duration::from_millis(20), 1));
/// let stats = b.window_stats(t0);
/// assert_eq!(stats.calls, 2);
/// assert_eq!(stats.failure_rate(), 0.5);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowStats {
    /// Calls in the window (`Ignore` outcomes are never counted).
    pub calls: u64,
    /// Of those, calls that failed (`Overload`).
    pub failures: u64,
    /// Of those, successes slower than the slow-call duration.
    pub slow_calls: u64,
}

impl WindowStats {
    /// Failures over calls, in `[0, 1]`; 0 for an empty window.
    pub fn failure_rate(&self) -> f64 {
        ratio(self.failures, self.calls)
    }

    /// Slow calls over calls, in `[0, 1]`; 0 for an empty window.
    pub fn slow_call_rate(&self) -> f64 {
        ratio(self.slow_calls, self.calls)
    }

    pub(super) fn add(&mut self, mark: Mark) {
        Tally::add(self, &WindowStats::from(mark));
    }
}

impl From<Mark> for WindowStats {
    fn from(mark: Mark) -> Self {
        WindowStats {
            calls: 1,
            failures: u64::from(mark.failure),
            slow_calls: u64::from(mark.slow),
        }
    }
}

impl Tally for WindowStats {
    fn add(&mut self, other: &Self) {
        self.calls = self.calls.saturating_add(other.calls);
        self.failures = self.failures.saturating_add(other.failures);
        self.slow_calls = self.slow_calls.saturating_add(other.slow_calls);
    }

    fn sub(&mut self, other: &Self) {
        self.calls = self.calls.saturating_sub(other.calls);
        self.failures = self.failures.saturating_sub(other.failures);
        self.slow_calls = self.slow_calls.saturating_sub(other.slow_calls);
    }
}

#[allow(
    clippy::cast_precision_loss,
    reason = "rates are reported, not accumulated; counts above 2^53 lose nothing that matters"
)]
fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// How one recorded call is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) failure: bool,
    pub(super) slow: bool,
}

/// One bucket of a time window: `u32` counts, half the size of
/// [`WindowStats`], since a window may hold thousands of buckets and a
/// limiter per key may hold a window each. A bucket that has counted
/// `u32::MAX` calls counts no more calls (that is 4.29 billion calls in one
/// bucket; at the default one-second buckets, out of reach).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Bucket {
    calls: u32,
    failures: u32,
    slow_calls: u32,
}

impl Slot<WindowStats> for Bucket {
    #[inline]
    fn add(&mut self, value: &WindowStats) -> WindowStats {
        let add = |have: u32, more: u64| u32::try_from(u64::from(have) + more).ok();
        match (
            add(self.calls, value.calls),
            add(self.failures, value.failures),
            add(self.slow_calls, value.slow_calls),
        ) {
            (Some(calls), Some(failures), Some(slow_calls)) => {
                *self = Bucket {
                    calls,
                    failures,
                    slow_calls,
                };
                *value
            }
            // Full: the call is not counted at all, so that a bucket's
            // failures never outgrow its calls.
            _ => WindowStats::default(),
        }
    }

    #[inline]
    fn get(&self) -> WindowStats {
        WindowStats {
            calls: u64::from(self.calls),
            failures: u64::from(self.failures),
            slow_calls: u64::from(self.slow_calls),
        }
    }
}

/// The window a closed breaker records into.
#[derive(Clone, Debug)]
pub(super) enum CallWindow {
    Count(CountRing),
    /// The last `length`, in buckets evicted by time.
    Time(BucketRing<WindowStats, Bucket>),
}

impl CallWindow {
    pub(super) fn new(kind: BreakerWindow) -> Result<Self, ConfigError> {
        Ok(match kind {
            BreakerWindow::Count { calls } => CallWindow::Count(CountRing::new(calls)),
            BreakerWindow::Time { length, buckets } => CallWindow::Time(
                BucketRing::new(length, buckets).map_err(|e| e.within("breaker.window"))?,
            ),
        })
    }

    /// Count one call finished at `now`; the figures after it.
    #[inline]
    pub(super) fn record(&mut self, now: Instant, mark: Mark) -> WindowStats {
        match self {
            CallWindow::Count(ring) => ring.record(mark),
            CallWindow::Time(ring) => {
                ring.record(now, WindowStats::from(mark));
                ring.total()
            }
        }
    }

    /// Until when successes may be held and counted later, in a batch: a
    /// count window at any time, a time window until its current bucket
    /// ends (never before it has seen its first call).
    pub(super) fn deferral(&self) -> Option<Deferral> {
        match self {
            CallWindow::Count(_) => Some(Deferral::ALL),
            CallWindow::Time(ring) => ring
                .next_boundary()
                .map(|t| Deferral::until(Some(t), std::time::Duration::MAX)),
        }
    }

    /// Count `count` successes held under [`CallWindow::deferral`]: in a
    /// time window, in the bucket that was current when they finished,
    /// which is still the current one.
    pub(super) fn record_successes(&mut self, count: u64) {
        match self {
            CallWindow::Count(ring) => {
                // Beyond a full ring, more successes replace successes.
                let capacity = u64::try_from(ring.capacity).unwrap_or(u64::MAX);
                for _ in 0..count.min(capacity) {
                    ring.record(Mark::default());
                }
            }
            CallWindow::Time(ring) => ring.add_to_current(WindowStats {
                calls: count,
                failures: 0,
                slow_calls: 0,
            }),
        }
    }

    /// The figures as of the latest call recorded.
    pub(super) fn totals(&self) -> WindowStats {
        match self {
            CallWindow::Count(ring) => ring.totals,
            CallWindow::Time(ring) => ring.total(),
        }
    }

    /// The figures at `now`, without changing anything.
    pub(super) fn stats(&self, now: Instant) -> WindowStats {
        match self {
            CallWindow::Count(ring) => ring.totals,
            CallWindow::Time(ring) => ring.total_at(now),
        }
    }

    pub(super) fn clear(&mut self) {
        match self {
            CallWindow::Count(ring) => ring.clear(),
            CallWindow::Time(ring) => ring.clear(),
        }
    }
}

/// The last `capacity` calls, one mark each.
#[derive(Clone, Debug)]
pub(super) struct CountRing {
    marks: Vec<Mark>,
    capacity: usize,
    next: usize,
    totals: WindowStats,
}

impl CountRing {
    fn new(capacity: u32) -> Self {
        let capacity = usize::try_from(capacity.max(1)).unwrap_or(usize::MAX);
        CountRing {
            marks: Vec::new(),
            capacity,
            next: 0,
            totals: WindowStats::default(),
        }
    }

    fn record(&mut self, mark: Mark) -> WindowStats {
        if self.marks.len() < self.capacity {
            self.marks.push(mark);
        } else {
            let old = std::mem::replace(&mut self.marks[self.next], mark);
            Tally::sub(&mut self.totals, &WindowStats::from(old));
        }
        self.next = (self.next + 1) % self.capacity;
        self.totals.add(mark);
        self.totals
    }

    fn clear(&mut self) {
        self.marks.clear();
        self.next = 0;
        self.totals = WindowStats::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const FAIL: Mark = Mark {
        failure: true,
        slow: false,
    };
    const OK: Mark = Mark {
        failure: false,
        slow: false,
    };
    const SLOW: Mark = Mark {
        failure: false,
        slow: true,
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_count_window_forgets_the_oldest_call_first() {
        let t0 = Instant::now();
        let mut w = CallWindow::new(BreakerWindow::Count { calls: 3 }).expect("valid");
        w.record(t0, FAIL);
        w.record(t0, FAIL);
        let s = w.record(t0, OK);
        assert_eq!((s.calls, s.failures), (3, 2));
        let s = w.record(t0, SLOW);
        assert_eq!((s.calls, s.failures, s.slow_calls), (3, 1, 1));
        let s = w.record(t0 + secs(3600), OK);
        assert_eq!((s.calls, s.failures, s.slow_calls), (3, 0, 1));
        w.clear();
        assert_eq!(w.stats(t0), WindowStats::default());
    }

    #[test]
    fn a_time_window_evicts_whole_buckets_as_they_age_out() {
        let t0 = Instant::now();
        let mut w = CallWindow::new(BreakerWindow::Time {
            length: secs(10),
            buckets: 10,
        })
        .expect("valid");
        w.record(t0, FAIL);
        w.record(t0 + secs(5), OK);
        assert_eq!(w.stats(t0 + secs(9)).calls, 2);
        // At 10 s the first bucket has aged out; the read does not change it.
        let s = w.stats(t0 + secs(10));
        assert_eq!((s.calls, s.failures), (1, 0));
        assert_eq!(w.stats(t0 + secs(9)).calls, 2);
        let s = w.record(t0 + secs(10), FAIL);
        assert_eq!((s.calls, s.failures), (2, 1));
        assert_eq!(w.stats(t0 + secs(15)).calls, 1);
        // A long silence empties it.
        let s = w.record(t0 + secs(1000), SLOW);
        assert_eq!((s.calls, s.failures, s.slow_calls), (1, 0, 1));
        assert_eq!(w.stats(t0 + secs(1000) + secs(10)).calls, 0);
    }

    #[test]
    fn a_time_window_counts_a_call_from_the_past_in_its_newest_bucket() {
        let t0 = Instant::now() + secs(100);
        let mut w = CallWindow::new(BreakerWindow::Time {
            length: secs(10),
            buckets: 5,
        })
        .expect("valid");
        w.record(t0, OK);
        let s = w.record(t0 - secs(50), FAIL);
        assert_eq!((s.calls, s.failures), (2, 1));
    }

    #[test]
    fn a_full_time_bucket_counts_no_more_calls_and_the_total_stays_its_sum() {
        let mut bucket = Bucket {
            calls: u32::MAX - 1,
            failures: 7,
            slow_calls: 0,
        };
        let one = WindowStats::from(FAIL);
        assert_eq!(bucket.add(&one), one);
        assert_eq!(bucket.get().calls, u64::from(u32::MAX));
        assert_eq!(bucket.add(&one), WindowStats::default());
        assert_eq!(bucket.get().failures, 8);

        let t0 = Instant::now();
        let mut w = CallWindow::new(BreakerWindow::Time {
            length: secs(10),
            buckets: 10,
        })
        .expect("valid");
        for _ in 0..3 {
            w.record(t0, SLOW);
        }
        let s = w.record(t0 + secs(1), FAIL);
        assert_eq!((s.calls, s.failures, s.slow_calls), (4, 1, 3));
        let s = w.record(t0 + secs(10), OK);
        assert_eq!((s.calls, s.failures, s.slow_calls), (2, 1, 0));
    }

    #[test]
    fn empty_windows_report_zero_rates() {
        let s = WindowStats::default();
        assert_eq!(s.failure_rate(), 0.0);
        assert_eq!(s.slow_call_rate(), 0.0);
    }
}
