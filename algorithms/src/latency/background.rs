//! Loss that sending less does not cure: a *background* share of failures,
//! learned by experiment.
//!
//! A concurrency limit cuts for loss because loss from congestion falls when
//! the caller sends less: a queue that overflows, a link that drops above a
//! concurrency, calls that go missing in a dependency past its knee. Not
//! every loss is that. A dependency that fails a share of calls at random
//! (a bad replica behind a balancer, a flaky disk, a bug on one code path),
//! or never answers a share of them, fails the same share at any
//! concurrency; cutting for it only sends less of what still works, and
//! since the share does not fall, the cuts go on until the limit is at its
//! floor. TCP met this with random, non-congestive loss (BBR treats loss as
//! congestion only past a threshold); Envoy splits the signals (its
//! concurrency limit reads latency only).
//!
//! A latency policy cannot tell the two from one window, but it can from
//! what its own cuts do, which is the test its latency rule already makes
//! of a slower dependency (a latency that does not fall when the caller's
//! concurrency halves is the dependency's, not a queue the caller built).
//! For loss the measure is the rate of calls, not the concurrency: failures
//! that come back fast free their slots fast, so a caller at half the
//! concurrency may still send nearly as many calls a second, and a
//! dependency that turns away calls above a rate goes on turning them
//! away. Sending half as many calls a second is the experiment:
//!
//! - a cut for loss beyond what is tolerated begins a **trial**, noting the
//!   loss then, the rate of calls the caller sends, and the limit before
//!   the cut;
//! - once the loss is back within what is tolerated, the cuts cured it: it
//!   was congestion, and the trial ends;
//! - once a window's calls finish at no more than half the rate of the
//!   trial's start (or the limit is at its floor), its
//!   successes are as fast as the baseline allows, and the loss is still
//!   at least [`STILL_LOSING`] of what it was, sending half as much did
//!   not help and nothing queues: the loss is the dependency's. (Slow
//!   successes say the dependency still queues — on work the caller gave
//!   up on, perhaps, which a server without cancellation goes on serving —
//!   and that loss falls once the queue drains: no verdict yet.) Its share
//!   becomes the **background**, and the limit goes back to where the trial
//!   began — the cuts bought nothing. If the loss fell by more, to within
//!   what is tolerated (and the recent share, over more calls, agrees), it
//!   was congestion and the trial ends; if not, part of it was: the trial
//!   starts over from there, still to restore the limit it began at.
//! - from then on a policy tolerates the background plus its
//!   `loss_tolerance` plus the background's noise; the background follows the loss of each window that
//!   stays within that, by [`FOLLOW`] of the difference, so that it tracks
//!   a share that changes and fades once the failures stop. A rise beyond
//!   it is tried afresh.
//!
//! The price: one trial per episode, in which the caller's concurrency
//! halves for a few round trips; for congestion, nothing (the cuts it makes
//! are the cuts it would have made). What it cannot tell: a loss that
//! congestion causes but halving this caller alone does not cure — a
//! dependency overloaded by others. Sending less would not cure that
//! either; what answers failures in proportion is the throttle, and what
//! answers a dependency that is down is the breaker.
//!
//! The same test serves any share a policy cuts on: the drop share of
//! recent calls, and the share of calls in flight that go missing (Little's
//! law, `super::missing`), which hangs that do not depend on load hold
//! steady in the same way.

use std::time::{Duration, Instant};

/// Once the caller sends half as many calls a second as when a trial
/// began, a loss still above this share of the loss then says it is not
/// congestion (the threshold the latency rule uses for a slower
/// dependency).
pub(crate) const STILL_LOSING: f64 = 0.75;

/// How far each window within what is tolerated moves the background toward
/// its loss.
pub(crate) const FOLLOW: f64 = 1.0 / 16.0;

/// How many standard errors of a share measured over about [`SPAN`] calls
/// are tolerated above the background: a share of 40% measured over 50
/// calls wanders by about 7 points either way, and a policy that looks at
/// it after every call sees it wander far more often than once.
pub(crate) const NOISE: f64 = 2.0;

/// How long a trial waits, once the caller sends half as much, before the
/// loss may tell: at least this, and at least twice the slowest drop's
/// latency (a timeout is heard of only when it ends).
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// About how many calls the shares a policy tries are measured over.
pub(crate) const SPAN: f64 = 50.0;

/// Calls lost, of calls: a share counted over one or more windows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Tally {
    /// Calls lost.
    pub(crate) lost: f64,
    /// Calls in all.
    pub(crate) of: f64,
}

impl Tally {
    fn add(self, other: Tally) -> Tally {
        Tally {
            lost: self.lost + other.lost,
            of: self.of + other.of,
        }
    }

    /// The share, once it counts at least [`OWN_CALLS`] calls.
    fn share(self) -> Option<f64> {
        (self.of >= f64::from(OWN_CALLS) && self.of > 0.0)
            .then(|| (self.lost / self.of).clamp(0.0, 1.0))
            .filter(|s| s.is_finite())
    }
}

/// A trial under way.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Trial {
    /// The rate of calls and the limit when it began.
    rate: f64,
    limit: f64,
    /// The loss of the calls finished since it began (at least
    /// [`OWN_CALLS`] of them), `None` until known: the recent share at the
    /// moment of the cut has only just crossed what is tolerated, and says
    /// little of the level the loss is rising to.
    then: Option<f64>,
    first: Tally,
    /// When a window first finished calls at half the trial's rate, and
    /// the calls finished since it settled.
    halved_at: Option<Instant>,
    since: Tally,
    /// How long the loss of calls sent at half the rate takes to show.
    settle: Duration,
}

/// The background share of one kind of loss, and any trial of it under way.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Background {
    level: f64,
    trial: Option<Trial>,
}

/// What a closed window saw, for [`Background::window`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Seen {
    /// The recent share of loss (over about [`SPAN`] calls): whether the
    /// loss is within what is tolerated, and what the background follows.
    pub(crate) loss: f64,
    /// The window's own calls, lost of all: what a trial counts, since the
    /// recent share still remembers calls sent before the caller sent
    /// less.
    pub(crate) own: Tally,
    /// The calls a second the window finished.
    pub(crate) rate: f64,
    /// Whether the limit is at its floor.
    pub(crate) at_floor: bool,
    /// When the window closed.
    pub(crate) closed: Instant,
    /// Its slowest drop's latency, if it had drops.
    pub(crate) slowest_drop: Option<Duration>,
    /// Whether its successes were no slower than the policy's baseline
    /// allows: only a calm window may find a background (successes that
    /// are slow say the dependency still queues — on work the caller gave
    /// up on, perhaps, which a server without cancellation goes on serving
    /// — and that loss falls once the queue drains).
    pub(crate) calm: bool,
}

/// The most a background may be: a dependency that fails more of the calls
/// sent to it at half the rate than this is down, which an outage's rules
/// (`super::outage`) and a breaker answer, not a background.
pub(crate) const DOWN: f64 = 0.95;

/// The fewest calls a trial counts before their share of loss may tell.
pub(crate) const OWN_CALLS: u32 = 10;

impl Seen {
    /// What a window of `summary` saw, with the recent `loss`, the limit at
    /// its floor or not, and calm or not.
    pub(crate) fn of(
        summary: &crate::window::WindowSummary,
        loss: f64,
        at_floor: bool,
        calm: bool,
    ) -> Seen {
        let own = Tally {
            lost: f64::from(summary.drops),
            of: f64::from(summary.samples),
        };
        Seen {
            loss,
            own,
            rate: summary.rate(),
            at_floor,
            closed: summary.closed,
            slowest_drop: summary.slowest_drop,
            calm,
        }
    }
}

/// What a closed window says of a trial.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Nothing to do.
    None,
    /// The loss is the dependency's: the limit goes back to this.
    Restore(f64),
}

impl Background {
    /// The share of loss tolerated: the background, plus `tolerance`, plus
    /// [`NOISE`] standard errors of the background measured over [`SPAN`]
    /// calls. Without a background, `tolerance` alone.
    pub(crate) fn tolerated(&self, tolerance: f64) -> f64 {
        let p = self.level;
        p + tolerance + NOISE * (p * (1.0 - p) / SPAN).sqrt()
    }

    /// The background share, 0 until a trial found one.
    #[cfg(test)]
    pub(crate) fn level(&self) -> f64 {
        self.level
    }

    /// Whether a trial is under way.
    #[cfg(test)]
    pub(crate) fn trying(&self) -> bool {
        self.trial.is_some()
    }

    /// The limit is about to be cut, from `limit`, for loss beyond what is
    /// tolerated, while the caller sends `rate` calls a second: a trial
    /// begins, if none is under way.
    pub(crate) fn cut(&mut self, rate: f64, limit: f64) {
        if self.trial.is_none() && rate.is_finite() {
            self.trial = Some(Trial {
                rate,
                limit,
                then: None,
                first: Tally::default(),
                halved_at: None,
                since: Tally::default(),
                settle: SETTLE,
            });
        }
    }

    /// End a trial under way as the dependency's: the background becomes
    /// `share` (the trial's starting share if unknown). The limit the trial
    /// began at, if one was under way. For a share that another's trial
    /// explains: calls that go missing are the calls that drop later, so
    /// when their drops are found to be the dependency's, so are they.
    pub(crate) fn conclude(&mut self, share: Option<f64>) -> Option<f64> {
        let trial = self.trial.take()?;
        self.level = share
            .filter(|s| s.is_finite())
            .or(trial.then)
            .unwrap_or(0.0)
            .clamp(0.0, 1.0);
        Some(trial.limit)
    }

    /// A window closed: what it saw (see [`Seen`]), the policy's
    /// `tolerance`.
    pub(crate) fn window(&mut self, seen: Seen, tolerance: f64) -> Verdict {
        let Seen {
            loss,
            own,
            rate,
            at_floor,
            closed,
            slowest_drop,
            calm,
        } = seen;
        if !loss.is_finite() {
            return Verdict::None;
        }
        let tolerated = self.tolerated(tolerance);
        let Some(mut t) = self.trial else {
            if self.level > 0.0 && loss <= tolerated {
                self.level = (self.level + FOLLOW * (loss - self.level)).max(0.0);
                if self.level < 1e-3 {
                    self.level = 0.0;
                }
            }
            return Verdict::None;
        };
        if loss <= self.level + tolerance / 2.0 {
            // The cuts cured it: congestion. (Half the tolerance, so that a
            // loss that wanders about the tolerance is tried to the end.)
            self.trial = None;
            return Verdict::None;
        }
        let Some(then) = t.then else {
            // The calls since the cut: the level the loss is at.
            t.first = t.first.add(own);
            t.then = t.first.share();
            self.trial = Some(t);
            return Verdict::None;
        };
        // A drop is heard of only when it ends (a timeout, seconds later),
        // and a dependency that refuses calls above a rate counted over the
        // last second goes on refusing them for that second: the calls sent
        // at half the rate tell only after a while.
        t.settle = t
            .settle
            .max(slowest_drop.map_or(Duration::ZERO, |d| d.saturating_mul(2)));
        if rate * 2.0 > t.rate && !at_floor {
            t.halved_at = None;
            t.since = Tally::default();
            self.trial = Some(t);
            return Verdict::None;
        }
        let halved_at = *t.halved_at.get_or_insert(closed);
        if closed.saturating_duration_since(halved_at) < t.settle || !calm {
            self.trial = Some(t);
            return Verdict::None;
        }
        t.since = t.since.add(own);
        let Some(now) = t.since.share() else {
            self.trial = Some(t);
            return Verdict::None;
        };
        if now >= STILL_LOSING * then && now <= DOWN {
            // As much lost at half the rate: the dependency's.
            self.level = now;
            self.trial = None;
            return Verdict::Restore(t.limit);
        }
        // Fell to within what is tolerated, and the recent share agrees:
        // the cuts cured it. (A few calls since the halving may lose
        // nothing by chance while the recent share, over more calls, still
        // loses as much: a trial ended on that would begin again at the
        // next cut from the limit the cuts left, and ratchet it down.) Fell
        // by more than a quarter: part of it is congestion; watch on from
        // here, to restore the limit the trial began at if it stays.
        self.trial = (now > tolerated || loss > tolerated).then_some(Trial {
            rate,
            then: Some(now),
            halved_at: None,
            since: Tally::default(),
            ..t
        });
        Verdict::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static NOW: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }

    /// The close of the next window: two seconds after the last (longer
    /// than a trial waits once the rate has halved).
    fn next_close() -> Instant {
        NOW.with(|now| {
            let t = now
                .get()
                .map_or_else(Instant::now, |t| t + Duration::from_secs(2));
            now.set(Some(t));
            t
        })
    }

    /// A window whose own share is the recent one, with drops of 100 ms.
    fn seen(loss: f64, rate: f64, at_floor: bool, calm: bool) -> Seen {
        Seen {
            loss,
            own: Tally {
                lost: loss * 20.0,
                of: 20.0,
            },
            rate,
            at_floor,
            closed: next_close(),
            slowest_drop: Some(Duration::from_millis(100)),
            calm,
        }
    }

    /// A trial begun at 40 calls a second from a limit of 50, whose first
    /// window since the cut lost `then`.
    fn trial(then: f64) -> Background {
        let mut b = Background::default();
        b.cut(40.0, 50.0);
        assert_eq!(b.window(seen(then, 40.0, false, true), 0.1), Verdict::None);
        assert!(b.trying());
        b
    }

    #[test]
    fn loss_that_stays_when_the_caller_sends_half_as_much_is_background_and_the_limit_goes_back() {
        assert!((Background::default().tolerated(0.1) - 0.1).abs() < 1e-12);
        let mut b = trial(0.3);
        // A second cut within the trial does not move its start.
        b.cut(30.0, 36.0);
        assert_eq!(
            b.window(seen(0.3, 30.0, false, true), 0.1),
            Verdict::None,
            "not halved"
        );
        // Halved: the calls sent since need a while to tell...
        assert_eq!(b.window(seen(0.28, 20.0, false, true), 0.1), Verdict::None);
        // ...and then they lose as much: the dependency's.
        assert_eq!(
            b.window(seen(0.28, 20.0, false, true), 0.1),
            Verdict::Restore(50.0)
        );
        assert!(!b.trying());
        assert!((b.level() - 0.28).abs() < 1e-12);
        let noise = 2.0 * (0.28f64 * 0.72 / 50.0).sqrt();
        assert!((b.tolerated(0.1) - (0.38 + noise)).abs() < 1e-12);
    }

    #[test]
    fn loss_that_the_cuts_cure_is_congestion() {
        // Down to half the tolerance: cured, whatever the rate.
        let mut b = trial(0.3);
        assert_eq!(b.window(seen(0.05, 30.0, false, true), 0.1), Verdict::None);
        assert!(!b.trying());
        assert_eq!(b.level(), 0.0);
        // A loss that wanders about the tolerance is tried to the end.
        let mut b = trial(0.3);
        b.window(seen(0.08, 30.0, false, true), 0.1);
        assert!(b.trying());
    }

    #[test]
    fn loss_that_falls_by_more_than_a_quarter_at_half_the_rate_is_tried_again_from_there() {
        let mut b = trial(0.6);
        b.window(seen(0.6, 20.0, false, true), 0.1);
        assert_eq!(b.window(seen(0.3, 20.0, false, true), 0.1), Verdict::None);
        assert!(b.trying(), "watched on from 0.3 at 20 calls a second");
        b.window(seen(0.3, 10.0, false, true), 0.1);
        assert_eq!(
            b.window(seen(0.28, 10.0, false, true), 0.1),
            Verdict::Restore(50.0)
        );
        assert!((b.level() - 0.28).abs() < 1e-12);
    }

    #[test]
    fn loss_that_rises_while_the_caller_sends_less_is_not_yet_told() {
        // At half the rate the first windows still lose (a dependency that
        // counts refused calls over the last second goes on refusing them):
        // they are not counted, and the calls after them are cured.
        let mut b = trial(0.2);
        let mut late = seen(0.7, 20.0, false, true);
        late.slowest_drop = Some(Duration::from_secs(3));
        assert_eq!(b.window(late, 0.1), Verdict::None);
        // Twice the slowest drop's latency (6 s) is not over yet.
        assert_eq!(b.window(seen(0.7, 20.0, false, true), 0.1), Verdict::None);
        assert_eq!(b.window(seen(0.7, 20.0, false, true), 0.1), Verdict::None);
        assert!(b.trying());
        assert_eq!(b.window(seen(0.04, 20.0, false, true), 0.1), Verdict::None);
        assert!(!b.trying(), "then cured");
        assert_eq!(b.level(), 0.0);
    }

    #[test]
    fn a_trial_counts_enough_calls_and_only_calm_ones() {
        let mut b = Background::default();
        b.cut(40.0, 50.0);
        let few = |loss: f64, rate: f64, calm: bool| Seen {
            own: Tally {
                lost: loss * 4.0,
                of: 4.0,
            },
            ..seen(loss, rate, false, calm)
        };
        // Three windows of four calls: the level is known once ten are in.
        b.window(few(0.5, 40.0, true), 0.1);
        b.window(few(0.5, 40.0, true), 0.1);
        b.window(few(0.5, 40.0, true), 0.1);
        b.window(few(0.5, 20.0, true), 0.1);
        // Slow successes: the dependency still queues; not counted.
        for _ in 0..5 {
            assert_eq!(b.window(few(0.5, 20.0, false), 0.1), Verdict::None);
        }
        assert_eq!(b.window(few(0.5, 20.0, true), 0.1), Verdict::None);
        assert_eq!(b.window(few(0.5, 20.0, true), 0.1), Verdict::None);
        assert_eq!(b.window(few(0.5, 20.0, true), 0.1), Verdict::Restore(50.0));
    }

    #[test]
    fn a_few_calls_that_lose_nothing_by_chance_do_not_end_a_trial_the_recent_share_contradicts() {
        let mut b = trial(0.3);
        b.window(seen(0.3, 20.0, false, true), 0.1);
        // Twenty calls since the halving lost one, while the recent share
        // still loses 0.3: not cured; watched on, from the same limit.
        let lucky = Seen {
            own: Tally {
                lost: 1.0,
                of: 20.0,
            },
            ..seen(0.3, 20.0, false, true)
        };
        assert_eq!(b.window(lucky, 0.1), Verdict::None);
        assert!(b.trying());
        b.window(seen(0.3, 10.0, false, true), 0.1);
        assert_eq!(
            b.window(seen(0.3, 10.0, false, true), 0.1),
            Verdict::Restore(50.0),
            "the limit the first cut began at"
        );
        // Both agree: cured.
        let mut b = trial(0.3);
        b.window(seen(0.3, 20.0, false, true), 0.1);
        let cured = Seen {
            own: Tally {
                lost: 1.0,
                of: 20.0,
            },
            ..seen(0.08, 20.0, false, true)
        };
        assert_eq!(b.window(cured, 0.1), Verdict::None);
        assert!(!b.trying());
    }

    #[test]
    fn at_the_floor_the_trial_decides_without_halving() {
        let mut b = trial(0.5);
        b.window(seen(0.5, 40.0, true, true), 0.1);
        assert_eq!(
            b.window(seen(0.5, 40.0, true, true), 0.1),
            Verdict::Restore(50.0)
        );
    }

    #[test]
    fn a_dependency_that_serves_almost_nothing_is_down_not_a_background() {
        let mut b = trial(0.99);
        for _ in 0..10 {
            assert_eq!(b.window(seen(0.99, 10.0, true, true), 0.1), Verdict::None);
        }
        assert!(b.trying());
        assert_eq!(b.level(), 0.0);
    }

    #[test]
    fn the_background_follows_the_loss_within_what_is_tolerated_and_fades() {
        let mut b = Background::default();
        // No background: nothing follows.
        assert_eq!(b.window(seen(0.05, 10.0, false, true), 0.1), Verdict::None);
        assert_eq!(b.level(), 0.0);
        let mut b = trial(0.4);
        b.window(seen(0.4, 20.0, false, true), 0.1);
        assert_eq!(
            b.window(seen(0.4, 20.0, false, true), 0.1),
            Verdict::Restore(50.0)
        );
        assert_eq!(b.window(seen(0.2, 20.0, false, true), 0.1), Verdict::None);
        assert!((b.level() - (0.4 - 0.2 / 16.0)).abs() < 1e-12);
        for _ in 0..400 {
            b.window(seen(0.0, 20.0, false, true), 0.1);
        }
        assert_eq!(b.level(), 0.0, "the failures stopped");
        // A loss above what is tolerated neither follows nor decides
        // without a cut.
        let mut b = Background::default();
        assert_eq!(b.window(seen(0.9, 1.0, true, true), 0.1), Verdict::None);
        assert_eq!(b.level(), 0.0);
    }

    #[test]
    fn a_trial_concluded_for_another_takes_the_share_it_is_given() {
        let mut b = Background::default();
        assert_eq!(b.conclude(Some(0.5)), None, "no trial, nothing to conclude");
        assert_eq!(b.level(), 0.0);
        b.cut(40.0, 40.0);
        assert_eq!(b.conclude(Some(0.8)), Some(40.0));
        assert!((b.level() - 0.8).abs() < 1e-12);
        let mut b = trial(0.9);
        assert_eq!(b.conclude(None), Some(50.0));
        assert!((b.level() - 0.9).abs() < 1e-12);
    }

    #[test]
    fn nan_changes_nothing() {
        let mut b = Background::default();
        b.cut(f64::NAN, 10.0);
        assert!(!b.trying());
        let mut b = trial(0.5);
        assert_eq!(
            b.window(seen(f64::NAN, 1.0, true, true), 0.1),
            Verdict::None
        );
        assert!(b.trying());
    }
}
