//! The calls the learned timeout cut within the last window: all that a
//! success given the ceiling past the learned timeout can stand for
//! ([the module docs](super), "Censoring").

use std::time::{Duration, Instant};

/// Calls given the learned timeout that ended at or past it without an
/// answer, counted in two halves of a window as the learner's histograms
/// are: those of the current half, and those of the one before it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cuts {
    current: u64,
    previous: u64,
    /// When the current half began.
    turned: Instant,
}

impl Cuts {
    /// None yet, at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Cuts {
            current: 0,
            previous: 0,
            turned: now,
        }
    }

    /// A call the learned timeout cut, at `at`.
    pub(super) fn add(&mut self, at: Instant, window: Duration) {
        self.age(at, window);
        self.current = self.current.saturating_add(1);
    }

    /// Take up to `most` of the cuts within the last `window` at `at`,
    /// the oldest first: the calls one success stands for besides itself.
    /// How many were taken; each stands for one success only.
    pub(super) fn take(&mut self, at: Instant, window: Duration, most: u64) -> u64 {
        self.age(at, window);
        let older = self.previous.min(most);
        self.previous -= older;
        let newer = self.current.min(most - older);
        self.current -= newer;
        older + newer
    }

    /// Start a new half if the current one has run its half; forget both
    /// if a whole window has passed (as the histograms turn).
    fn age(&mut self, at: Instant, window: Duration) {
        let since = at.saturating_duration_since(self.turned);
        if since < window / 2 {
            return;
        }
        self.previous = if since < window { self.current } else { 0 };
        self.current = 0;
        self.turned = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_success_takes_at_most_the_cuts_counted_and_each_cut_once() {
        let t0 = Instant::now();
        let mut cuts = Cuts::new(t0);
        assert_eq!(cuts.take(t0, WINDOW, 99), 0);
        for i in 0..150 {
            cuts.add(t0 + Duration::from_millis(i), WINDOW);
        }
        assert_eq!(cuts.take(t0 + secs(1), WINDOW, 99), 99);
        assert_eq!(cuts.take(t0 + secs(1), WINDOW, 99), 51);
        assert_eq!(cuts.take(t0 + secs(1), WINDOW, 99), 0);
    }

    #[test]
    fn cuts_older_than_a_window_stand_for_nothing() {
        let t0 = Instant::now();
        let mut cuts = Cuts::new(t0);
        for _ in 0..10 {
            cuts.add(t0, WINDOW);
        }
        // Half a window on, they are the previous half's, still counted…
        for _ in 0..5 {
            cuts.add(t0 + secs(40), WINDOW);
        }
        assert_eq!(cuts.take(t0 + secs(50), WINDOW, 3), 3);
        // …and a half later, the first ten are forgotten.
        assert_eq!(cuts.take(t0 + secs(75), WINDOW, 99), 5);
        for _ in 0..7 {
            cuts.add(t0 + secs(80), WINDOW);
        }
        // A whole window without a cut forgets every one.
        assert_eq!(cuts.take(t0 + secs(200), WINDOW, 99), 0);
    }
}
