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
//!   call drawn so that ends past the learned timeout stands for the calls
//!   like it that were cut: as many as the learned timeout cut (calls given
//!   it that failed at or past it) within the last window, at most the
//!   `1 / share - 1` the draw makes it, each cut stood for once, by the
//!   first such call to end after it. If it answered, it is recorded for
//!   itself and for them: the histogram then estimates the dependency's
//!   whole latency distribution, not the part the timeout let through, and
//!   a slowdown raises the timeout after the first such success instead of
//!   after a window. A rare slow answer stands for no more calls than were
//!   cut: one 10 s answer a minute among a hundred calls a second of
//!   50 ms is one success in 6,000 and leaves the timeout near the fast
//!   calls' tail, where recorded `1 / share` times it would hold it at the
//!   ceiling. Any other success past the learned timeout (a probe, a call
//!   whose caller did not apply the timeout it was given) stands for
//!   itself alone. A call that hangs to the ceiling is not a success and
//!   teaches nothing: the timeout does not rise for it.
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
//!   [`Outcome::Ignore`](crate::Outcome::Ignore): the timeout ended it, not the dependency, and an
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
//!   dependency has slowed. The first value also waits until the first
//!   calls have run for three of the slowest answers seen: a flow's first
//!   answers are its fastest, and a value read from them alone would cut
//!   the slower calls still running.
//! - **Nothing shorter than the ceiling.** Where the quantile times the
//!   margin reaches the ceiling, nothing is learned (`learned` is `None`):
//!   the dependency's tail is as long as the caller is willing to wait, so
//!   a call gets its caller's own timeout, the `ordinary` of
//!   [`Permit::timeout`](crate::Permit::timeout), if it names a longer
//!   one, and the ceiling if it names none. A learned value is only ever a
//!   cut shorter than what the caller would give.
//!
//! # What the ceiling is for
//!
//! The ceiling is the longest a call is given where its code names no
//! timeout of its own: the timeout you would have typed, the bound on how
//! long a hung call holds a worker while too little has been seen to learn
//! (and, for the share given it, ever), and the most the learned timeout
//! may be (a caller that names a longer timeout keeps it).
//! It is not a guess at the dependency's latency; it is the most you are
//! willing to wait. A dependency whose healthy answers take longer than it
//! (a batch endpoint answering in 200 s behind a 15 s ceiling) never
//! answers in time: every call is cut at the ceiling, no success is ever
//! seen, nothing is learned, and the timeout cannot rise past it.
//!
//! # When the ceiling cuts every call
//!
//! So the limiter says so, loudly. When calls have kept ending at the
//! ceiling (within 1% of it) without one answering within it for a window
//! ([`window`](LearnedTimeout::window), and at least two ceilings: 60 s at
//! the defaults), counted from the first of them:
//!
//! - the limiter's [snapshot](crate::Limiter::snapshot)
//!   (`ceiling_cutting_since`) says since when;
//! - the [`Observer`](crate::Observer) is told
//!   ([`Observer::ceiling_cutting`](crate::Observer::ceiling_cutting)): the
//!   `metrics` observer sets `rheostat_timeout_ceiling_cutting{limiter}` to
//!   1, the `tracing` observer logs a `WARN` naming the limiter and the
//!   ceiling.
//!
//! It is told once on entering that state and once on leaving it, at the
//! next success within the ceiling (an `INFO`, the gauge back to 0): it
//! enters at most once a window. A shorter span of hung calls (a deploy, a
//! failover) is what the ceiling is for, and says nothing; failures faster
//! than the ceiling (refused connections) neither begin nor end it.
//!
//! When it fires, look at how long the dependency's calls take when they
//! do answer (its own metrics, a call made by hand):
//!
//! - if they answer, slower than the ceiling, the ceiling is too low for
//!   this dependency: raise it (a file's `timeout.ceiling`) above its
//!   slowest healthy answer, or give its slow calls a limiter of their own
//!   with a ceiling that fits them;
//! - if they hang, or the dependency is down, the ceiling is doing its job:
//!   the calls cut free their workers, and the policy (a breaker) is what
//!   sheds them.
//!
//! # Calls not safe to cut early
//!
//! A learned timeout is shorter than the caller's by design. A call that
//! is not safe to cut early — a payment, anything not idempotent, where
//! a call cut may still take effect and a retry would take effect twice —
//! is marked so: [`Admission::cut_early`](crate::Admission::cut_early)`(false)`
//! for one call (through [`Admission::call`](crate::Admission::call) or a
//! permit's [`timeout`](crate::Permit::timeout)), `cut_early = false` in
//! the learned timeout (a file's `timeout` table) for every call of a
//! limiter, and, through the tower layers (the `tower` feature), by the
//! layer's class function (`ClassifyRequest::cut_early`; for HTTP, see
//! `rheostat::tower::NotIdempotent`). It keeps its caller's own timeout, never a
//! learned one shorter (nor, as a probe, a shorter probe timeout), and is
//! never drawn into the share given the ceiling. The learner still sees
//! it: a success recorded once (calls like it are never cut, so it stands
//! for no others), and, past the learned timeout, evidence as a call given
//! the ceiling is; its expiry reaches the policy as a failure, as a typed
//! timeout's does (such calls may be all there are).
//!
//! # Memory
//!
//! Three histograms of one significant digit (a bucket per 1/16 of a
//! power of two, values in microseconds up to the ceiling): 1.3 KiB each
//! for a 15 s ceiling, 2.6 KiB each for a year's, boxed beside the policy.
//! Nothing grows with traffic.

use std::time::Duration;

use crate::algorithms::{check, ConfigError};

mod cuts;
mod learner;

pub(crate) use learner::{Given, Learner};

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
/// assert_eq!(typed.timeouts().ceiling, Some(Duration::from_millis(800)));
/// assert_eq!(learned.timeouts().ceiling, Some(Duration::from_secs(15)));
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
/// use rheostat::{algorithms::Fixed, Limiter, clock::ManualClock, Timeout};
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder(Fixed::new(10)?)
///     .clock(clock.clone())
///     .timeout(Timeout::learned(Duration::from_secs(15)).floor(Duration::from_millis(5)))
///     .build()?;
/// // Until it has seen 100 successes, an attempt gets the ceiling.
/// assert_eq!(limiter.timeouts().learned, None);
/// for _ in 0..200 {
///     let permit = limiter.try_acquire()?;
///     clock.advance(Duration::from_millis(40));
///     permit.success();
/// }
/// // Then about twice the p99.9 of what it saw: 40 ms calls, an 80 ms timeout
/// // (within the histogram's 1/16).
/// let learned = limiter.timeouts().learned.unwrap();
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
    /// Whether a call may be cut early, by the learned timeout (true). With
    /// `false`, no call is: each keeps its caller's own timeout (the
    /// ceiling, unless the code gives one), as with a typed timeout, for a
    /// dependency no call to which is safe to cut early (a payments route,
    /// anything not idempotent); the timeout is still learned, and shown
    /// ([`Timeouts::learned`]), and a ceiling that cuts every call is still
    /// reported. One call is marked
    /// so by [`Admission::cut_early`](crate::Admission::cut_early).
    pub cut_early: bool,
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
    /// 100 successes before it applies, calls cut early.
    pub fn new(ceiling: Duration) -> Self {
        LearnedTimeout {
            ceiling,
            quantile: 0.999,
            margin: 2.0,
            floor: Duration::from_millis(10),
            share: 0.01,
            window: Duration::from_secs(60),
            min_samples: 100,
            cut_early: true,
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

    /// With calls cut early or not (see [`cut_early`](Self::cut_early)).
    #[must_use]
    pub fn cut_early(mut self, cut_early: bool) -> Self {
        self.cut_early = cut_early;
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

/// A limiter's attempt timeouts, read together by
/// [`Limiter::timeouts`](crate::Limiter::timeouts).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::Fixed, Limiter};
///
/// let limiter = Limiter::builder(Fixed::new(10)?)
///     .timeout(Duration::from_millis(800))
///     .build()?;
/// let timeouts = limiter.timeouts();
/// assert_eq!(timeouts.ceiling, Some(Duration::from_millis(800)));
/// assert_eq!(timeouts.in_force, timeouts.ceiling); // typed: nothing is learned
/// assert_eq!(timeouts.learned, None);
/// assert_eq!(timeouts.probe, None); // a bulkhead never probes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// The timeout a call through the limiter is given when the code gives
    /// none ([`Builder::timeout`](crate::Builder::timeout); a file's
    /// `timeout`): the typed one, or the learned one's ceiling. The tower
    /// layers use it unless built with their own. `None` if not set.
    pub ceiling: Option<Duration>,
    /// The attempt timeout learned from the dependency
    /// ([`Builder::timeout`](crate::Builder::timeout) with a
    /// [`Timeout::learned`]), before any caller's ceiling: `None` if the
    /// timeout is not learned, until enough successes have been seen
    /// ([`LearnedTimeout::min_samples`]), and while what it would learn
    /// reaches the ceiling.
    /// [`Permit::timeout`](crate::Permit::timeout) gives it to a call that
    /// may be cut early (where [`LearnedTimeout::cut_early`] is `false`, it
    /// is learned and shown here, and given to none).
    pub learned: Option<Duration>,
    /// The timeout a call is given now when the code gives none: the
    /// learned one within its [`ceiling`](Self::ceiling), else the ceiling
    /// (always the ceiling where the learned timeout cuts no call early,
    /// [`LearnedTimeout::cut_early`]). What the metrics show as
    /// `rheostat_timeout_seconds`.
    pub in_force: Option<Duration>,
    /// The attempt timeout a call admitted as a probe is given: the
    /// policy's [`Algorithm::probe_timeout`](crate::Algorithm::probe_timeout)
    /// (a breaker's
    /// [`probe_timeout`](crate::algorithms::breaker::BreakerConfig::probe_timeout),
    /// 30 s by default, after which it counts an unreported probe as
    /// failed); `None` if the policy never probes.
    /// [`Limiter::call`](crate::Limiter::call), the tower layer and
    /// [`Permit::timeout`](crate::Permit::timeout) give it to probes in
    /// place of the caller's ordinary timeout, so that a dependency coming
    /// back slowly is not shut out by a probe held to the ordinary short
    /// timeout.
    pub probe: Option<Duration>,
    /// How long an attempt runs before a [hedge](crate::retry::Hedge) is
    /// sent beside it: the typed delay, or the one learned (the hedge's
    /// quantile of the same window as the learned timeout); `None` if the
    /// limiter does not hedge, or until a delay is learned. What the
    /// metrics show as `rheostat_hedge_delay_seconds`.
    pub hedge: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
