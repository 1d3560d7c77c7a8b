//! What a window of nothing but failures means for a concurrency limit.
//!
//! A latency-driven limit reads drops as congestion and cuts. That is right
//! while some calls still succeed: the dependency is answering, and sending
//! less is how it is relieved. It is wrong once nothing succeeds:
//!
//! - **failures that are fast** (connection refused, an instant 5xx, failing
//!   in a fraction of the usual round trip) come from a dependency that is
//!   down, not from a queue the caller built; cutting the limit for them only
//!   leaves it pinned at its floor when the dependency comes back. Such a
//!   window holds the limit.
//! - **failures that are slow** (every call timing out: a black hole, or a
//!   dependency answering from cold caches slower than the caller waits)
//!   cut as drops do, but at first only down to half the limit the episode
//!   began with (the whole of it when the dependency refused calls first:
//!   timeouts then are most likely a cold start), a floor that halves every
//!   10 s calls keep timing out (time spent refused does not count): a
//!   dependency that warms only with traffic keeps getting calls to warm
//!   through a cold start of seconds, and a black hole is left with the
//!   policy's own floor within a minute.
//!
//! Once a window succeeds again the episode is over and the policy regrows
//! multiplicatively until the first sign of queueing, instead of one step at
//! a time from wherever the outage left it.

use std::time::{Duration, Instant};

use crate::window::WindowSummary;

/// A failure faster than this share of the recent round trip is fast.
const FAST: f64 = 0.5;

/// Slow failures cut no lower than this share of the limit the episode
/// began with…
const FLOOR: f64 = 0.5;
/// …a share that halves every this long calls keep timing out.
const FLOOR_HALF_LIFE: Duration = Duration::from_secs(10);

/// An episode of windows that held nothing but failures: when its floor
/// started decaying, the limit it began with, and whether the dependency
/// refused calls in it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Episode {
    /// While it lasts: when it began (or its fast failures last held) and
    /// the limit it began with.
    began: Option<(Instant, f64)>,
    /// Whether a window of it held fast failures only.
    down: bool,
}

impl Episode {
    /// A window of nothing but failures closed at `now`, with the limit at
    /// `limit`; `fast`: every failure in it was fast. The floor decays only
    /// while calls time out: a dependency that refused calls for a minute
    /// and comes back cold is met with the limit it had.
    pub(crate) fn failed(&mut self, now: Instant, limit: f64, fast: bool) {
        let began = self.began.get_or_insert((now, limit));
        if fast {
            began.0 = now;
            self.down = true;
        }
    }

    /// The limit the episode began with, while it lasts.
    pub(crate) fn began_with(&self) -> Option<f64> {
        self.began.map(|(_, limit)| limit)
    }

    /// Something was served: the episode is over. The limit it began
    /// with, if one was going on.
    pub(crate) fn end(&mut self) -> Option<f64> {
        self.down = false;
        self.began.take().map(|(_, began)| began)
    }

    /// Whether a window of this episode held refusals only (fast failures).
    pub(crate) fn refused(&self) -> bool {
        self.down
    }

    /// Whether, at `now`, a dependency that refused calls has begun to
    /// take them again but answers slower than the caller waits, within a
    /// floor's half-life of the first timeout: most likely a cold start.
    pub(crate) fn warming(&self, now: Instant) -> bool {
        self.down
            && self
                .began
                .is_some_and(|(since, _)| now.saturating_duration_since(since) < FLOOR_HALF_LIFE)
    }

    /// The lowest slow failures may cut the limit to `now`, while an
    /// episode lasts: `FLOOR` of the limit it began with — the whole of it
    /// if the dependency refused calls first, since timeouts then are most
    /// likely a cold start — halving every `FLOOR_HALF_LIFE` from when the
    /// calls began timing out.
    pub(crate) fn floor(&self, now: Instant) -> Option<f64> {
        let (since, began) = self.began?;
        let halvings =
            now.saturating_duration_since(since).as_secs_f64() / FLOOR_HALF_LIFE.as_secs_f64();
        let share = if self.down { 1.0 } else { FLOOR };
        Some(began * share * 0.5f64.powf(halvings))
    }
}

/// What a closed window says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Failing {
    /// Something succeeded, or nothing failed: the policy's own rules apply.
    No,
    /// Nothing succeeded and every failure was fast: hold the limit.
    Fast,
    /// Nothing succeeded and some failure was slow: cut, not below `floor`.
    Slow {
        /// The lowest the limit may be cut to in this episode.
        floor: f64,
    },
}

/// The state of an episode of windows that held nothing but failures.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outage {
    episode: Episode,
    /// Since an episode ended, until the first sign of queueing.
    regrow: bool,
}

impl Outage {
    /// Read a window closed at `now`. `rtt` is the recent latency of
    /// successes in seconds (`None` before the first), `limit` the limit now
    /// and `min` the policy's floor.
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        summary: &WindowSummary,
        rtt: Option<f64>,
        limit: f64,
        min: f64,
    ) -> Failing {
        if summary.successes() > 0 || summary.drops == 0 {
            // Regrow if the episode cut the limit.
            if self.episode.end().is_some_and(|began| limit < began) {
                self.regrow = true;
            }
            return Failing::No;
        }
        let fast = match (summary.slowest_drop, rtt) {
            (Some(slowest), Some(rtt)) => slowest.as_secs_f64() < FAST * rtt,
            _ => false,
        };
        self.episode.failed(now, limit, fast);
        if fast {
            return Failing::Fast;
        }
        Failing::Slow {
            floor: self.episode.floor(now).unwrap_or(min).max(min),
        }
    }

    /// Whether the policy should grow multiplicatively: an episode ended
    /// and no queueing has been seen since.
    pub(crate) fn regrowing(&self) -> bool {
        self.regrow
    }

    /// Grow multiplicatively from now until the first sign of queueing
    /// (the dependency changed under the policy).
    pub(crate) fn regrow(&mut self) {
        self.regrow = true;
    }

    /// The first sign of queueing, or a drop: back to the policy's own pace.
    pub(crate) fn settle(&mut self) {
        self.regrow = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{Window, WindowConfig};
    use crate::{Outcome, Sample};

    fn window_of(outcomes: &[(Outcome, u64)]) -> WindowSummary {
        let t0 = Instant::now();
        let mut w = Window::new(WindowConfig::default()).expect("default window");
        for &(outcome, ms) in outcomes {
            w.add(t0, &Sample::new(outcome, Duration::from_millis(ms), 1));
        }
        w.flush(t0).expect("a window with calls")
    }

    #[test]
    fn fast_failures_hold_slow_ones_cut_to_a_decaying_floor_and_success_ends_the_episode() {
        let t0 = Instant::now();
        let mut o = Outage::default();
        let refused = window_of(&[(Outcome::Overload, 1), (Outcome::Overload, 2)]);
        assert_eq!(o.observe(t0, &refused, Some(0.1), 40.0, 1.0), Failing::Fast);
        let timed_out = window_of(&[(Outcome::Overload, 800)]);
        // Timeouts after refusals: most likely a cold start. The floor is
        // the limit the episode began with.
        assert_eq!(
            o.observe(t0, &timed_out, Some(0.1), 30.0, 1.0),
            Failing::Slow { floor: 40.0 }
        );
        // Ten seconds on, the floor has halved; sixty on, it is the minimum.
        assert_eq!(
            o.observe(
                t0 + Duration::from_secs(10),
                &timed_out,
                Some(0.1),
                30.0,
                1.0
            ),
            Failing::Slow { floor: 20.0 }
        );
        assert_eq!(
            o.observe(
                t0 + Duration::from_secs(60),
                &timed_out,
                Some(0.1),
                30.0,
                1.0
            ),
            Failing::Slow { floor: 1.0 }
        );
        assert!(!o.regrowing());
        let answered = window_of(&[(Outcome::Success, 90), (Outcome::Overload, 800)]);
        assert_eq!(o.observe(t0, &answered, Some(0.1), 20.0, 1.0), Failing::No);
        assert!(o.regrowing());
        o.settle();
        assert!(!o.regrowing());
        // Timeouts with no refusals before them: the floor starts at half.
        // An episode that cut nothing leaves nothing to regrow.
        assert_eq!(
            o.observe(t0, &timed_out, Some(0.1), 20.0, 1.0),
            Failing::Slow { floor: 10.0 }
        );
        assert_eq!(o.observe(t0, &answered, Some(0.1), 20.0, 1.0), Failing::No);
        assert!(!o.regrowing());
        // Without a round trip to compare with, a failure is not known fast.
        let mut fresh = Outage::default();
        assert_eq!(
            fresh.observe(t0, &refused, None, 10.0, 6.0),
            Failing::Slow { floor: 6.0 }
        );
    }
}
