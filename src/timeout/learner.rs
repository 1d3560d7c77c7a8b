//! The learner of a [`LearnedTimeout`]: the window's histograms and the
//! value read from them, and what an expiry of the learned timeout tells
//! the policy ([the module docs](super) give the rules).

use std::fmt;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::cuts::Cuts;
use super::LearnedTimeout;
use crate::algorithms::Outcome;

/// How often, at most, the learned value is read again from the histograms:
/// this many times a window (once a second at the default window), and
/// whenever the window turns or a success slower than the timeout comes in.
const READS_PER_WINDOW: u32 = 60;

/// How many of the slowest answers seen the first calls must have run for
/// before the first value is read (as the limit's first baseline waits).
const SETTLE: u32 = 3;

/// The learner: the window's histograms and the value read from them. Kept
/// beside the policy, under its lock, and told every finished call the
/// policy is told.
pub(crate) struct Learner {
    config: LearnedTimeout,
    /// The most times a success given the ceiling, slower than the learned
    /// timeout, is recorded: `1 / share`, rounded.
    weight: u32,
    /// The calls the learned timeout cut within the last window, not yet
    /// stood for by such a success.
    cuts: Cuts,
    current: Histogram<u32>,
    previous: Histogram<u32>,
    /// Where the two are added to read the quantile (kept for its
    /// allocation).
    both: Histogram<u32>,
    /// Successes recorded in `current` and `previous`, each as many times
    /// as it was recorded (a success slower than the timeout stands for
    /// the calls like it that were cut).
    seen: (u64, u64),
    /// When `current` began.
    turned: Instant,
    /// When the value was last read.
    read: Instant,
    value: Option<Duration>,
    /// Until when a call given the ceiling that outlived the learned
    /// timeout and then did not answer says that the calls the timeout cuts
    /// would not have answered either ([`Learner::judge`]).
    hangs_until: Option<Instant>,
    /// The first call since the last answer within the ceiling that ended
    /// at the ceiling without an answer ([`Learner::watch`]).
    cut_since: Option<Instant>,
    /// Whether calls have ended so for [`Learner::quiet`]: the ceiling cuts
    /// every call, and the observer has been told.
    cutting: bool,
    /// Until the first value is read: when the earliest success started,
    /// and the slowest success so far.
    first: Option<(Instant, Duration)>,
    /// Whether a value has been read.
    learned: bool,
    /// The quantile a learned hedge delay is read at, if the limiter
    /// hedges with a learned delay.
    hedge_quantile: Option<f64>,
    /// The hedge delay learned: that quantile of the same window, read
    /// with the value and under the same conditions.
    hedge: Option<Duration>,
}

/// Which timeout a call was given, as the learner is told: the learned one
/// (if one is learned: what a call that may be cut early is given), the
/// ceiling (one of the share drawn for it), or its caller's own, never a
/// learned one shorter (a call not to be cut early).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Given {
    Learned,
    Ceiling,
    Own,
}

impl Learner {
    /// A learner for `config` (validated), starting at `now`, reading a
    /// hedge delay at `hedge_quantile` too if given.
    pub(crate) fn new(config: LearnedTimeout, now: Instant, hedge_quantile: Option<f64>) -> Self {
        let high = micros(config.ceiling).max(2);
        let histogram = || {
            Histogram::new_with_bounds(1, high, 1).unwrap_or_else(|_| {
                // Unreachable: 1 ≤ low, 2 ≤ high, one significant digit.
                Histogram::new(1).unwrap_or_else(|_| unreachable!("one significant digit is valid"))
            })
        };
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "share is in (0, 0.5]: 1 / share is in [2, 2^32)"
        )]
        let weight = (1.0 / config.share).round().min(f64::from(u32::MAX)) as u32;
        Learner {
            config,
            weight: weight.max(1),
            cuts: Cuts::new(now),
            current: histogram(),
            previous: histogram(),
            both: histogram(),
            seen: (0, 0),
            turned: now,
            read: now,
            value: None,
            hangs_until: None,
            cut_since: None,
            cutting: false,
            first: None,
            learned: false,
            hedge_quantile,
            hedge: None,
        }
    }

    /// The hedge delay learned: `None` until the timeout's first value is
    /// read, and for a limiter that does not hedge with a learned delay.
    pub(crate) fn hedge(&self) -> Option<Duration> {
        self.hedge
    }

    /// The timeout learned, before any caller's ceiling: `None` until the
    /// window holds `min_samples` successes and the first calls have run
    /// for three of the slowest answers, and while what it would learn
    /// reaches the ceiling.
    pub(crate) fn value(&self) -> Option<Duration> {
        self.value
    }

    /// What the policy is told of a call that ended at `at` with `outcome`
    /// after `latency`, `given` which timeout: `outcome`, but for a failure
    /// at or past the learned timeout of a call given it — most likely cut
    /// by it — while no call given longer has shown, within the last
    /// window, that calls this slow do not answer: that one is
    /// [`Outcome::Ignore`], since the timeout ended it, not the dependency.
    /// A call given longer that fails past the learned timeout is that
    /// evidence, and it stands while the expiries it explains keep coming
    /// (until a window passes without one); one that succeeds past it is
    /// evidence of the opposite (the dependency slowed down, and the
    /// timeout rises: [`Learner::tell`]). A call given the ceiling that
    /// fails past the learned timeout is itself told as ignored (the
    /// expiries beside it carry the loss); one that kept its caller's own
    /// timeout is told as it ended, as a typed timeout's would be: it may
    /// be every call there is.
    pub(crate) fn judge(
        &mut self,
        at: Instant,
        outcome: Outcome,
        latency: Duration,
        given: Given,
    ) -> Outcome {
        let Some(value) = self.value else {
            return outcome;
        };
        if latency < value {
            return outcome;
        }
        let given = self.given(given);
        match (outcome, given) {
            (Outcome::Success, Given::Ceiling | Given::Own) => self.hangs_until = None,
            (Outcome::Overload, Given::Ceiling) => {
                // The evidence. The expiries it explains carry the loss to
                // the policy; told as a drop of the ceiling's length, it
                // would also have the policy wait out the ceiling, as if
                // every call were given it.
                self.hangs_until = at.checked_add(self.config.window);
                return Outcome::Ignore;
            }
            (Outcome::Overload, Given::Own) => {
                // Evidence too, told as it ended: a typed timeout's expiry.
                self.hangs_until = at.checked_add(self.config.window);
            }
            (Outcome::Overload, Given::Learned)
                if self.hangs_until.is_some_and(|until| at < until) =>
            {
                // An expiry the evidence explains: it stands while such
                // calls keep coming, and lapses a window after the last.
                self.hangs_until = at.checked_add(self.config.window);
            }
            (Outcome::Overload, Given::Learned) => return Outcome::Ignore,
            _ => {}
        }
        outcome
    }

    /// `given`, as it was: every call keeps its caller's own timeout where
    /// the learned one cuts none early.
    fn given(&self, given: Given) -> Given {
        if self.config.cut_early {
            given
        } else {
            Given::Own
        }
    }

    /// A call ended at `at` with `outcome` after `latency`: whether the
    /// ceiling began (`Some(true)`) or ceased (`Some(false)`) to cut every
    /// call. It begins when calls have ended at the ceiling (within 1% of
    /// it, for the timer's rounding and two clocks' drift) without an
    /// answer within it for [`Learner::quiet`], counted from the first of
    /// them, and ends at the next success within the ceiling: so it begins
    /// at most once a quiet span, and ends only once begun. Calls that fail
    /// faster (a refused connection) neither begin nor end it; a success
    /// slower than the ceiling (a call given longer) would have been cut by
    /// it, and ends nothing.
    pub(crate) fn watch(
        &mut self,
        at: Instant,
        outcome: Outcome,
        latency: Duration,
    ) -> Option<bool> {
        let ceiling = self.config.ceiling;
        if outcome == Outcome::Success {
            if latency > ceiling {
                return None;
            }
            self.cut_since = None;
            return std::mem::take(&mut self.cutting).then_some(false);
        }
        if latency < ceiling - ceiling / 100 {
            return None;
        }
        let since = *self.cut_since.get_or_insert(at);
        if self.cutting || at.saturating_duration_since(since) < self.quiet() {
            return None;
        }
        self.cutting = true;
        Some(true)
    }

    /// How long calls must have ended at the ceiling, none answering within
    /// it, before the ceiling is said to cut every call: the window, and at
    /// least two ceilings. A hang shorter than that (a deploy, a failover)
    /// also ends every call at the ceiling, which is what the ceiling is
    /// for; the window is the learner's own measure of a dependency that
    /// has changed, and over two ceilings the calls cut include a
    /// ceiling's worth sent after the first was cut, not only those in
    /// flight at one moment.
    fn quiet(&self) -> Duration {
        self.config
            .window
            .max(self.config.ceiling.saturating_mul(2))
    }

    /// Since when the ceiling has cut every call ([`Learner::watch`]), if
    /// it has.
    pub(crate) fn cutting_since(&self) -> Option<Instant> {
        self.cut_since.filter(|_| self.cutting)
    }

    /// The ceiling.
    pub(crate) fn ceiling(&self) -> Duration {
        self.config.ceiling
    }

    /// A call ended at `at` with `outcome` after `latency`, `given` which
    /// timeout; whether the learned value changed. Only a success teaches
    /// anything, and only a success moves the window on: a failure, a
    /// timeout or an ignored call leaves the value and the window as they
    /// were (a failure given the learned timeout at or past it is counted
    /// as a call it cut, for a call drawn for the ceiling to stand for).
    pub(crate) fn tell(
        &mut self,
        at: Instant,
        outcome: Outcome,
        latency: Duration,
        given: Given,
    ) -> bool {
        if outcome == Outcome::Ignore {
            return false;
        }
        let given = self.given(given);
        let past = self.value.is_some_and(|value| latency > value);
        // A call drawn for the ceiling that ended past the timeout the
        // others were given stands for the calls like it that were cut: as
        // many as the timeout cut within the window, at most the
        // `1 / share - 1` the draw makes it, each cut stood for once (by the
        // first such call to end after it, answered or not).
        let stood_for = if given == Given::Ceiling && past {
            let most = u64::from(self.weight - 1);
            self.cuts.take(at, self.config.window, most)
        } else {
            0
        };
        if outcome != Outcome::Success {
            if given == Given::Learned && self.value.is_some_and(|value| latency >= value) {
                self.cuts.add(at, self.config.window);
            }
            return false;
        }
        if !self.learned {
            let started = at.checked_sub(latency).unwrap_or(at);
            self.first = Some(self.first.map_or((started, latency), |(first, slowest)| {
                (first.min(started), slowest.max(latency))
            }));
        }
        let turned = self.turn(at);
        // Such a call is recorded for itself and the calls it stands for
        // (at most `weight` times, a u32). Any other success stands for
        // itself alone: a call that kept its caller's own timeout (calls
        // like it are never cut), a probe, or one given the learned timeout
        // that answered past it (its caller did not cut it, or it was given
        // a longer one before this value was learned).
        let count = u32::try_from(stood_for).map_or(self.weight, |others| others + 1);
        self.current
            .saturating_record_n(micros(latency).max(1), count);
        self.seen.0 += u64::from(count);
        let due = turned
            || stood_for > 0
            || !self.learned
            || at.saturating_duration_since(self.read) >= self.config.window / READS_PER_WINDOW;
        if !due {
            return false;
        }
        self.read = at;
        let value = self.read_value(at);
        let hedge = self.read_hedge();
        let changed = value != self.value || hedge != self.hedge;
        self.value = value;
        self.hedge = hedge;
        changed
    }

    /// The hedge delay over the window, read just after the value (with
    /// the histograms it added): `None` before the first value is read or
    /// where it reaches the ceiling (a call that slow is cut, not hedged).
    fn read_hedge(&self) -> Option<Duration> {
        let quantile = self.hedge_quantile?;
        if !self.learned || self.both.is_empty() {
            return self.hedge;
        }
        #[allow(clippy::cast_precision_loss, reason = "microseconds below 2^53")]
        let seconds = self.both.value_at_quantile(quantile) as f64 / 1e6;
        let delay = Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX);
        (delay < self.config.ceiling).then_some(delay)
    }

    /// Start a new half window if the current one has run its half; forget
    /// both if a whole window has passed. Whether it turned.
    fn turn(&mut self, at: Instant) -> bool {
        let since = at.saturating_duration_since(self.turned);
        if since < self.config.window / 2 {
            return false;
        }
        if since >= self.config.window {
            self.previous.reset();
            self.seen.1 = 0;
        } else {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.seen.1 = self.seen.0;
        }
        self.current.reset();
        self.seen.0 = 0;
        self.turned = at;
        true
    }

    /// The quantile over the window at `at` times the margin, no lower
    /// than the floor; `None` if that reaches the ceiling, with too few
    /// successes, or before the first calls have run for three of the
    /// slowest answers seen.
    fn read_value(&mut self, at: Instant) -> Option<Duration> {
        if self.seen.0 + self.seen.1 < u64::from(self.config.min_samples) {
            // Too little new to go on: what was learned stands.
            return self.value;
        }
        if !self.learned {
            // The first answers of a flow are its fastest: a slow call
            // has not had time to come back. The first value waits until
            // every call the window holds could have answered.
            let (first, slowest) = self.first?;
            if at.saturating_duration_since(first) < slowest.saturating_mul(SETTLE) {
                return None;
            }
            self.learned = true;
            self.first = None;
        }
        if self.both.set_to(&self.previous).is_err() || self.both.add(&self.current).is_err() {
            // Unreachable: the three share their bounds.
            return self.value;
        }
        #[allow(clippy::cast_precision_loss, reason = "microseconds below 2^53")]
        let quantile = self.both.value_at_quantile(self.config.quantile) as f64 / 1e6;
        let learned =
            Duration::try_from_secs_f64(quantile * self.config.margin).unwrap_or(Duration::MAX);
        // What reaches the ceiling is not shorter than what the caller
        // would give: nothing is learned that cuts, and a caller that
        // names a longer timeout of its own keeps it.
        (learned < self.config.ceiling).then(|| learned.max(self.config.floor))
    }
}

impl fmt::Debug for Learner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Learner")
            .field("config", &self.config)
            .field("seen", &(self.seen.0 + self.seen.1))
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// `d` in whole microseconds, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
