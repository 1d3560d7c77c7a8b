//! Attempt timeouts: typed, or learned from the dependency's latencies.
//!
//! A timeout is what lets a limiter see a hang at all, and the number a
//! user types is usually a round one: 15 s for a dependency whose slowest
//! call in a thousand answers in 200 ms holds a caller's worker 75 times
//! longer than needed for every call that never answers. A
//! [`LearnedTimeout`] keeps the timeout at a high quantile of the
//! dependency's recent successful latencies times a margin, between a floor
//! and the timeout the user would have typed (the ceiling, never exceeded).
//!
//! # How it learns
//!
//! - **What it sees.** Every call's latency reaches the learner as it
//!   reaches the policy (the limiter times every call of a limiter that
//!   learns its timeout). Only successes count: a failure, a timeout or an
//!   ignored call says nothing of how long an answer takes, and leaves the
//!   learner as it was (so an outage, with no success, keeps the last
//!   value: its calls are cut early, which frees the caller's workers).
//! - **A window that forgets.** Two histograms (`hdrhistogram`), the
//!   current and the previous, each half a [`window`](LearnedTimeout::window):
//!   when the current one has run for half a window it becomes the
//!   previous and a cleared one starts. The quantile is read over both, so
//!   it covers between half a window and a whole one of recent calls.
//! - **Censoring.** A timeout hides everything slower than itself: a
//!   learner that saw only the calls its own timeout let finish could never
//!   rise, and a dependency that slowed down as a whole (a deploy, a cold
//!   start) would have every call cut. So a [`share`](LearnedTimeout::share)
//!   of calls (1% by default), drawn at random at admission, and every
//!   breaker probe (which has its own `probe_timeout`) get the ceiling. A
//!   success slower than the learned timeout could only be seen by such a
//!   call, so it stands for the `1 / share` calls like it that were cut, and
//!   is recorded that many times: the histogram then estimates the
//!   dependency's whole latency distribution, not the part the timeout let
//!   through, and a slowdown raises the timeout after the first such
//!   success instead of after a window. A call that hangs to the ceiling is
//!   not a success and teaches nothing: the timeout does not rise for it.
//!   The share is bounded in slots as well as in calls: at most `share`
//!   of the limit's slots (at least one) are held by such calls at once. A
//!   call given the ceiling that hangs holds its slot for the whole
//!   ceiling, and while an adaptive limit is low, a few of them could
//!   otherwise hold every slot it has.
//! - **What an expiry says.** A call cut by the learned timeout is either a
//!   hang or an answer the timeout did not wait for; the calls given the
//!   ceiling tell which. Until one of them has failed past the learned
//!   timeout (hung to the ceiling, or failed slowly) within the last
//!   window, an expiry of the learned timeout reaches the policy as
//!   [`Outcome::Ignore`]: the timeout ended it, not the dependency, and an
//!   adaptive limit must not read a slowdown the timeout has not caught up
//!   with as loss. Once one has, expiries are drops, as a typed timeout's
//!   are, so a dependency that hangs is seen as one; the evidence stands
//!   while the expiries it explains keep coming, and lapses a window after
//!   the last (a call given the ceiling that answers past the timeout
//!   clears it at once). The call given the ceiling that failed is itself
//!   told as ignored: the expiries beside it carry the loss, and a drop of
//!   the ceiling's length would have the policy wait out the ceiling, as
//!   if every call were given it. The limit's count of calls that went
//!   missing counts an ignored call as answered.
//! - **Too little to go on.** Until the window first holds
//!   [`min_samples`](LearnedTimeout::min_samples) successes (100 by
//!   default), the ceiling applies: the largest of a hundred latencies is
//!   about their p99, and fewer say too little of the tail for the margin
//!   to cover. Once a value is learned, a window with too few successes
//!   (an outage, a limit cut low) keeps it: too little new evidence is no
//!   reason to forget, and the calls given the ceiling raise it if the
//!   dependency has slowed.
//!
//! # Memory
//!
//! Three histograms of one significant digit (a bucket per 1/16 of a
//! power of two, values in microseconds up to the ceiling): 1.3 KiB each
//! for a 15 s ceiling, 2.6 KiB each for a year's, boxed beside the policy.
//! Nothing grows with traffic.

use std::fmt;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::algorithms::{check, ConfigError, Outcome};

/// How often, at most, the learned value is read again from the histograms:
/// this many times a window (once a second at the default window), and
/// whenever the window turns or a success slower than the timeout comes in.
const READS_PER_WINDOW: u32 = 60;

/// The timeout each attempt through a limiter is given unless the code
/// says otherwise ([`Builder::timeout`](crate::Builder::timeout)): typed, or
/// learned from the dependency.
///
/// A [`Duration`] converts into a typed one.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::Fixed, Limiter, Timeout};
///
/// // Typed: every attempt gets 800 ms.
/// let typed = Limiter::builder(Fixed::new(10)?)
///     .timeout(Duration::from_millis(800))
///     .build()?;
/// // Learned: the p99.9 of recent successes times 2, never above 15 s.
/// let learned = Limiter::builder(Fixed::new(10)?)
///     .timeout(Timeout::learned(Duration::from_secs(15)))
///     .build()?;
/// assert_eq!(typed.attempt_timeout(), Some(Duration::from_millis(800)));
/// assert_eq!(learned.attempt_timeout(), Some(Duration::from_secs(15)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timeout {
    /// The same timeout for every attempt.
    Typed(Duration),
    /// Learned from the dependency's latencies, never above its ceiling.
    Learned(LearnedTimeout),
}

impl Timeout {
    /// A timeout learned from the dependency, never above `ceiling` (the
    /// timeout you would have typed), with the other settings at their
    /// defaults.
    pub fn learned(ceiling: Duration) -> LearnedTimeout {
        LearnedTimeout::new(ceiling)
    }

    /// The longest an attempt is given: the typed timeout, or the learned
    /// one's ceiling.
    pub fn ceiling(&self) -> Duration {
        match self {
            Timeout::Typed(timeout) => *timeout,
            Timeout::Learned(learned) => learned.ceiling,
        }
    }

    /// The learned timeout's settings, if it is learned.
    pub fn as_learned(&self) -> Option<&LearnedTimeout> {
        match self {
            Timeout::Typed(_) => None,
            Timeout::Learned(learned) => Some(learned),
        }
    }

    /// Check it, naming the field `timeout` (`timeout.quantile` and so on
    /// for a learned one's).
    ///
    /// # Errors
    ///
    /// A typed timeout zero or above a year, or a learned one's field out
    /// of range ([`LearnedTimeout::validate`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Timeout::Typed(timeout) => check::duration("timeout", *timeout).map(drop),
            Timeout::Learned(learned) => learned.validate(),
        }
    }
}

impl From<Duration> for Timeout {
    fn from(timeout: Duration) -> Self {
        Timeout::Typed(timeout)
    }
}

impl From<LearnedTimeout> for Timeout {
    fn from(learned: LearnedTimeout) -> Self {
        Timeout::Learned(learned)
    }
}

/// How a timeout is learned: the [`quantile`](Self::quantile) of recent
/// successful latencies times a [`margin`](Self::margin), between a
/// [`floor`](Self::floor) and a [`ceiling`](Self::ceiling), with a
/// [`share`](Self::share) of calls given the ceiling so that the tail stays
/// in view. See the [module docs](crate::timeout) for why each is there.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::Fixed, Limiter, ManualClock, Timeout};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder(Fixed::new(10)?)
///     .clock(clock.clone())
///     .timeout(Timeout::learned(Duration::from_secs(15)).floor(Duration::from_millis(5)))
///     .build()?;
/// // Until it has seen 100 successes, an attempt gets the ceiling.
/// assert_eq!(limiter.learned_timeout(), None);
/// for _ in 0..200 {
///     let permit = limiter.try_acquire()?;
///     clock.advance(Duration::from_millis(40));
///     permit.success();
/// }
/// // Then about twice the p99.9 of what it saw: 40 ms calls, an 80 ms timeout
/// // (within the histogram's 1/16).
/// let learned = limiter.learned_timeout().unwrap();
/// assert!(learned >= Duration::from_millis(80) && learned <= Duration::from_millis(86));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct LearnedTimeout {
    /// Never exceeded: the timeout you would have typed. A call of the
    /// [`share`](Self::share), and every call while too little has been
    /// seen, gets it.
    pub ceiling: Duration,
    /// The quantile of recent successful latencies the timeout is set from
    /// (0.999: the slowest success in a thousand), in (0, 1).
    pub quantile: f64,
    /// What the quantile is multiplied by (2), in [1, 100]: room for a
    /// success a little slower than any seen.
    pub margin: f64,
    /// The least the timeout may be (10 ms), at most the ceiling: below it,
    /// the timer's millisecond and a scheduler's pause are a fair part of
    /// the timeout, and calls would be cut for the caller's own hiccups.
    pub floor: Duration,
    /// The share of calls given the ceiling so that slower answers stay in
    /// view (0.01), in (0, 0.5]; at most this share of the limit's slots
    /// (at least one) are held by such calls at once. Each such call that
    /// hangs holds a worker until the ceiling, as every call would with the
    /// typed timeout.
    pub share: f64,
    /// How much history the quantile reads (60 s): between half of it and
    /// all of it. A dependency that has changed is known by its new
    /// latencies within a window.
    pub window: Duration,
    /// The successes the window must hold before the learned timeout
    /// applies (100), in [1, 1000000]; until then, the ceiling does. A
    /// dependency never called `min_samples` times in a window always gets
    /// the ceiling; once one is learned, a window with fewer keeps it.
    pub min_samples: u32,
}

/// The ceiling of a timeout learned with nothing said of it (a file's
/// `timeout = "auto"`, [`LearnedTimeout::default`]): 15 s, Envoy's default
/// route timeout, and the ceiling of the brownout the comparison runs.
pub const DEFAULT_CEILING: Duration = Duration::from_secs(15);

impl Default for LearnedTimeout {
    /// A learned timeout with the [`DEFAULT_CEILING`] and the other
    /// defaults of [`LearnedTimeout::new`].
    fn default() -> Self {
        LearnedTimeout::new(DEFAULT_CEILING)
    }
}

impl LearnedTimeout {
    /// A learned timeout never above `ceiling`, with the defaults:
    /// quantile 0.999, margin 2, floor 10 ms, share 0.01, window 60 s,
    /// 100 successes before it applies.
    pub fn new(ceiling: Duration) -> Self {
        LearnedTimeout {
            ceiling,
            quantile: 0.999,
            margin: 2.0,
            floor: Duration::from_millis(10),
            share: 0.01,
            window: Duration::from_secs(60),
            min_samples: 100,
        }
    }

    /// With the quantile `quantile`.
    #[must_use]
    pub fn quantile(mut self, quantile: f64) -> Self {
        self.quantile = quantile;
        self
    }

    /// With the margin `margin`.
    #[must_use]
    pub fn margin(mut self, margin: f64) -> Self {
        self.margin = margin;
        self
    }

    /// With the floor `floor`.
    #[must_use]
    pub fn floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// With the share of calls given the ceiling `share`.
    #[must_use]
    pub fn share(mut self, share: f64) -> Self {
        self.share = share;
        self
    }

    /// With the window `window`.
    #[must_use]
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// With `min_samples` successes before it applies.
    #[must_use]
    pub fn min_samples(mut self, min_samples: u32) -> Self {
        self.min_samples = min_samples;
        self
    }

    /// Check every field, each named as `timeout.<field>`
    /// (`timeout.quantile`), as a configuration file's limiter table
    /// writes it.
    ///
    /// # Errors
    ///
    /// The first field out of its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::duration("timeout.ceiling", self.ceiling)?;
        check::open_unit("timeout.quantile", self.quantile, 0.0, 1.0)?;
        check::closed("timeout.margin", self.margin, 1.0, 100.0)?;
        check::duration("timeout.floor", self.floor)?;
        if self.floor > self.ceiling {
            return Err(ConfigError::new(
                "timeout.floor",
                format_args!("{:?}", self.floor),
                format!("at most `ceiling` ({:?})", self.ceiling),
            ));
        }
        if !(self.share.is_finite() && self.share > 0.0 && self.share <= 0.5) {
            return Err(ConfigError::new(
                "timeout.share",
                self.share,
                "a number in (0, 0.5]",
            ));
        }
        check::duration("timeout.window", self.window)?;
        check::whole("timeout.min_samples", self.min_samples, 1, 1_000_000)?;
        Ok(())
    }

    /// The most calls given the ceiling in flight at once under `limit`:
    /// `share` of its slots, at least one.
    pub(crate) fn uncut_slots(&self, limit: u32) -> u32 {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "share is in (0, 0.5]: the product is in [0, limit]"
        )]
        let slots = (self.share * f64::from(limit)) as u32;
        slots.max(1)
    }

    /// The draw (out of 2^32) below which a call gets the ceiling.
    pub(crate) fn share_threshold(&self) -> u32 {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "share is in (0, 0.5]: the product is in (0, 2^31]"
        )]
        let threshold = (self.share * 4_294_967_296.0) as u32;
        threshold
    }
}

/// The learner: the window's histograms and the value read from them. Kept
/// beside the policy, under its lock, and told every finished call the
/// policy is told.
pub(crate) struct Learner {
    config: LearnedTimeout,
    /// How many times a success slower than the learned timeout is
    /// recorded: `1 / share`, rounded.
    weight: u32,
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
}

impl Learner {
    /// A learner for `config` (validated), starting at `now`.
    pub(crate) fn new(config: LearnedTimeout, now: Instant) -> Self {
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
            current: histogram(),
            previous: histogram(),
            both: histogram(),
            seen: (0, 0),
            turned: now,
            read: now,
            value: None,
            hangs_until: None,
        }
    }

    /// The timeout learned, before any caller's ceiling: `None` until the
    /// window holds `min_samples` successes.
    pub(crate) fn value(&self) -> Option<Duration> {
        self.value
    }

    /// What the policy is told of a call that ended at `at` with `outcome`
    /// after `latency` (`uncut` if it was given the ceiling): `outcome`,
    /// but for a failure at or past the learned timeout of a call that was
    /// not given the ceiling — most likely cut by the timeout — while no
    /// call given the ceiling has shown, within the last window, that calls
    /// this slow do not answer: that one is [`Outcome::Ignore`], since the
    /// timeout ended it, not the dependency. A call given the ceiling that
    /// fails past the learned timeout is that evidence, and it stands
    /// while the expiries it explains keep coming (until a window passes
    /// without one); one that succeeds past it is evidence of the opposite
    /// (the dependency slowed down, and the timeout rises:
    /// [`Learner::tell`]).
    pub(crate) fn judge(
        &mut self,
        at: Instant,
        outcome: Outcome,
        latency: Duration,
        uncut: bool,
    ) -> Outcome {
        let Some(value) = self.value else {
            return outcome;
        };
        if latency < value {
            return outcome;
        }
        match outcome {
            Outcome::Success if uncut => self.hangs_until = None,
            Outcome::Overload if uncut => {
                // The evidence. The expiries it explains carry the loss to
                // the policy; told as a drop of the ceiling's length, it
                // would also have the policy wait out the ceiling, as if
                // every call were given it.
                self.hangs_until = at.checked_add(self.config.window);
                return Outcome::Ignore;
            }
            Outcome::Overload if self.hangs_until.is_some_and(|until| at < until) => {
                // An expiry the evidence explains: it stands while such
                // calls keep coming, and lapses a window after the last.
                self.hangs_until = at.checked_add(self.config.window);
            }
            Outcome::Overload => return Outcome::Ignore,
            _ => {}
        }
        outcome
    }

    /// A call ended at `at` with `outcome` after `latency`; whether the
    /// learned value changed. Only a success teaches anything, and only a
    /// success moves the window on: a failure, a timeout or an ignored
    /// call leaves the learner as it was.
    pub(crate) fn tell(&mut self, at: Instant, outcome: Outcome, latency: Duration) -> bool {
        if outcome != Outcome::Success {
            return false;
        }
        let turned = self.turn(at);
        // Slower than the timeout the others were given: it stands for the
        // calls like it that were cut.
        let slower = self.value.is_some_and(|value| latency > value);
        let count = if slower { self.weight } else { 1 };
        self.current
            .saturating_record_n(micros(latency).max(1), count);
        self.seen.0 += u64::from(count);
        let due = turned
            || slower
            || self.value.is_none()
            || at.saturating_duration_since(self.read) >= self.config.window / READS_PER_WINDOW;
        if !due {
            return false;
        }
        self.read = at;
        let value = self.read_value();
        let changed = value != self.value;
        self.value = value;
        changed
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

    /// The quantile over the window times the margin, within the floor and
    /// the ceiling; `None` with too few successes.
    fn read_value(&mut self) -> Option<Duration> {
        if self.seen.0 + self.seen.1 < u64::from(self.config.min_samples) {
            // Too little new to go on: what was learned stands.
            return self.value;
        }
        if self.both.set_to(&self.previous).is_err() || self.both.add(&self.current).is_err() {
            // Unreachable: the three share their bounds.
            return self.value;
        }
        #[allow(clippy::cast_precision_loss, reason = "microseconds below 2^53")]
        let quantile = self.both.value_at_quantile(self.config.quantile) as f64 / 1e6;
        let learned = Duration::try_from_secs_f64(quantile * self.config.margin)
            .unwrap_or(self.config.ceiling);
        Some(learned.clamp(self.config.floor, self.config.ceiling))
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
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A learner with a 15 s ceiling, fed `n` successes of `latency`, one
    /// every 10 ms from `t0`; the instant after the last.
    fn fed(learner: &mut Learner, t0: Instant, n: u32, latency: Duration) -> Instant {
        let mut at = t0;
        for _ in 0..n {
            at += ms(10);
            learner.tell(at, Outcome::Success, latency);
        }
        at
    }

    #[test]
    fn nothing_is_learned_before_a_hundred_successes_and_then_about_twice_the_p999() {
        let t0 = Instant::now();
        let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0);
        fed(&mut learner, t0, 99, ms(50));
        assert_eq!(learner.value(), None);
        fed(&mut learner, t0 + Duration::from_secs(1), 1, ms(50));
        let value = learner.value().unwrap();
        // Twice 50 ms, rounded up to the histogram's sixteenth.
        assert!(value >= ms(100) && value <= ms(107), "{value:?}");
    }

    #[test]
    fn failures_timeouts_and_ignored_calls_leave_the_learner_as_it_was() {
        let t0 = Instant::now();
        let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0);
        let at = fed(&mut learner, t0, 200, ms(50));
        let before = learner.value();
        let secs = Duration::from_secs;
        let outcomes = [Outcome::Overload, Outcome::Ignore].into_iter().cycle();
        for (i, outcome) in (0..1_000).zip(outcomes) {
            assert!(!learner.tell(at + secs(i), outcome, secs(14)));
        }
        assert_eq!(learner.value(), before);
        assert_eq!(learner.seen, (200, 0));
    }

    #[test]
    fn a_success_slower_than_the_timeout_stands_for_the_calls_cut_and_raises_it_at_once() {
        let t0 = Instant::now();
        let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0);
        let at = fed(&mut learner, t0, 1_000, ms(50));
        let before = learner.value().unwrap();
        // One call of the 1% given the ceiling answers in 2 s: it is
        // recorded 100 times, a tenth of the window, above its p99.9.
        assert!(learner.tell(at + ms(1), Outcome::Success, Duration::from_secs(2)));
        let after = learner.value().unwrap();
        assert!(after >= Duration::from_secs(4), "{before:?} -> {after:?}");
        assert!(after <= Duration::from_secs(15));
    }

    #[test]
    fn the_window_forgets_a_slow_past_within_a_window() {
        let t0 = Instant::now();
        let config = LearnedTimeout::new(Duration::from_secs(15));
        let mut learner = Learner::new(config, t0);
        let at = fed(&mut learner, t0, 500, ms(400));
        assert!(learner.value().unwrap() >= ms(800));
        // The dependency gets faster: within a window of 10 ms answers, the
        // 400 ms ones are forgotten.
        let at = fed(&mut learner, at, 6_000, ms(10));
        assert!(at - t0 <= config.window * 2);
        let value = learner.value().unwrap();
        assert!(value <= ms(22), "{value:?}");
    }

    #[test]
    fn a_whole_window_without_a_success_forgets_its_latencies_but_not_its_value() {
        let t0 = Instant::now();
        let config = LearnedTimeout::new(Duration::from_secs(15));
        let mut learner = Learner::new(config, t0);
        let at = fed(&mut learner, t0, 500, ms(50));
        let learned = learner.value().unwrap();
        // An outage: a window without a success forgets the latencies; too
        // few new ones to go on, so what was learned stands.
        let at = at + config.window;
        learner.tell(at, Outcome::Success, ms(50));
        assert_eq!(learner.seen, (1, 0));
        assert_eq!(learner.value(), Some(learned));
        // A hundred new successes, ten times slower, are the new value.
        fed(&mut learner, at, 100, ms(500));
        assert!(
            learner.value().unwrap() >= ms(1_000),
            "{:?}",
            learner.value()
        );
    }

    /// A learner with a 15 s ceiling that has learned about 100 ms from
    /// 50 ms successes; the instant after the last.
    fn learned_100ms(t0: Instant) -> (Learner, Instant) {
        let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0);
        let at = fed(&mut learner, t0, 200, ms(50));
        (learner, at)
    }

    #[test]
    fn an_expiry_of_the_learned_timeout_is_ignored_until_a_call_given_the_ceiling_hangs() {
        let t0 = Instant::now();
        let (mut learner, at) = learned_100ms(t0);
        let value = learner.value().unwrap();
        // Cut at the learned timeout, with nothing to say those calls would
        // not have answered: the timeout ended it, not the dependency.
        assert_eq!(
            learner.judge(at, Outcome::Overload, value, false),
            Outcome::Ignore
        );
        // A failure faster than the timeout is the dependency's.
        assert_eq!(
            learner.judge(at, Outcome::Overload, ms(20), false),
            Outcome::Overload
        );
        // A call given the ceiling fails past the learned timeout: calls that
        // slow do not answer, and the expiries are drops (the call itself
        // is evidence, told as ignored: the expiries carry the loss).
        let hung = at + ms(15_000);
        assert_eq!(
            learner.judge(hung, Outcome::Overload, ms(15_000), true),
            Outcome::Ignore
        );
        assert_eq!(
            learner.judge(hung, Outcome::Overload, value, false),
            Outcome::Overload
        );
        // The evidence stands while the expiries it explains keep coming…
        let window = LearnedTimeout::default().window;
        let later = hung + window - ms(1);
        assert_eq!(
            learner.judge(later, Outcome::Overload, value, false),
            Outcome::Overload
        );
        let later = later + window - ms(1);
        assert_eq!(
            learner.judge(later, Outcome::Overload, value, false),
            Outcome::Overload
        );
        // …and lapses a window after the last.
        let after = later + window;
        assert_eq!(
            learner.judge(after, Outcome::Overload, value, false),
            Outcome::Ignore
        );
    }

    #[test]
    fn a_call_given_the_ceiling_that_answers_past_the_timeout_clears_the_evidence_of_hangs() {
        let t0 = Instant::now();
        let (mut learner, at) = learned_100ms(t0);
        let value = learner.value().unwrap();
        learner.judge(at, Outcome::Overload, ms(15_000), true);
        assert_eq!(
            learner.judge(at, Outcome::Overload, value, false),
            Outcome::Overload
        );
        // One answers in 2 s: the dependency slowed down, it does not hang.
        let slow = ms(2_000);
        assert_eq!(
            learner.judge(at, Outcome::Success, slow, true),
            Outcome::Success
        );
        assert_eq!(
            learner.judge(at, Outcome::Overload, value, false),
            Outcome::Ignore
        );
        // Successes and ignored calls are told as they are, whatever the
        // evidence; and nothing is judged before a timeout is learned.
        assert_eq!(
            learner.judge(at, Outcome::Ignore, value, false),
            Outcome::Ignore
        );
        let mut fresh = Learner::new(LearnedTimeout::default(), t0);
        assert_eq!(
            fresh.judge(t0, Outcome::Overload, slow, false),
            Outcome::Overload
        );
    }

    #[test]
    fn the_learned_value_stays_between_the_floor_and_the_ceiling() {
        let t0 = Instant::now();
        let config = LearnedTimeout::new(ms(300)).floor(ms(20));
        let mut fast = Learner::new(config, t0);
        fed(&mut fast, t0, 200, Duration::from_micros(100));
        assert_eq!(fast.value(), Some(ms(20)));
        let mut slow = Learner::new(config, t0);
        fed(&mut slow, t0, 200, ms(250));
        assert_eq!(slow.value(), Some(ms(300)));
    }

    #[test]
    fn each_field_out_of_range_is_named_with_its_range() {
        let ok = LearnedTimeout::new(Duration::from_secs(1));
        assert!(ok.validate().is_ok());
        let cases = [
            (ok.quantile(1.0), "timeout.quantile", "(0, 1)"),
            (ok.quantile(f64::NAN), "timeout.quantile", "(0, 1)"),
            (ok.margin(0.5), "timeout.margin", "[1, 100]"),
            (ok.floor(Duration::ZERO), "timeout.floor", "above 0"),
            (ok.floor(ms(2000)), "timeout.floor", "at most `ceiling`"),
            (ok.share(0.0), "timeout.share", "(0, 0.5]"),
            (ok.share(0.6), "timeout.share", "(0, 0.5]"),
            (ok.window(Duration::ZERO), "timeout.window", "above 0"),
            (ok.min_samples(0), "timeout.min_samples", "[1, 1000000]"),
            (LearnedTimeout::new(ms(0)), "timeout.ceiling", "above 0"),
        ];
        for (config, field, range) in cases {
            let error = config.validate().unwrap_err();
            assert_eq!(error.field(), field, "{config:?}");
            assert!(error.to_string().contains(range), "{error}");
        }
    }

    #[test]
    fn a_share_is_drawn_at_its_rate() {
        let config = LearnedTimeout::new(Duration::from_secs(1));
        assert_eq!(config.share_threshold(), 42_949_672);
        assert_eq!(config.share(0.5).share_threshold(), 1 << 31);
    }
}
