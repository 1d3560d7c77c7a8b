//! The one answer a policy gives after every event.

use std::time::{Duration, Instant};

use crate::gate::earlier;
use crate::{Gate, Outcome, Sample};

/// What a policy learns from a finished call, so that the runtime can skip
/// the work the policy would ignore.
///
/// Reading the clock is the largest part of the cost of admitting a call: a
/// policy that never looks at latency should not pay for two reads per call.
/// The levels are ordered: a [`Stack`](crate::Stack) needs the most any member needs.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Algorithm, Feedback, Fixed, Throttle, ThrottleConfig};
///
/// assert_eq!(Fixed::new(10)?.publish().hints.feedback, Feedback::Nothing);
/// let throttle = Throttle::new(ThrottleConfig::default())?;
/// assert_eq!(throttle.publish().hints.feedback, Feedback::Outcomes);
/// assert!(Feedback::Nothing < Feedback::Outcomes && Feedback::Outcomes < Feedback::Timed);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feedback {
    /// Nothing: [`Algorithm::on_sample`](crate::Algorithm::on_sample) and [`Algorithm::on_rejected`](crate::Algorithm::on_rejected) do
    /// nothing, the gate never expires by itself and the policy makes no
    /// transitions. The runtime finishes a call by releasing its slot: no
    /// lock, no clock read.
    Nothing,
    /// The outcome and the instant a call finished, not how long it took. The
    /// runtime reads the clock once per call, when it finishes, and a
    /// sample's latency may be zero.
    Outcomes,
    /// The outcome, the instant and the latency of every call (the default).
    Timed,
}

/// The successes a policy lets the runtime hold and tell it later, in a
/// batch, without its lock: a success no slower than `max_latency`,
/// admitted with at most `max_in_flight` calls in flight (itself included),
/// finishing before `until` (`None`: at any time), not a probe and not
/// [stale](Sample::stale).
///
/// A policy publishes one while such a success cannot change what it
/// decides: not what it publishes, and it reports no transition. It may
/// change what the policy accumulates (a latency window's sums, a breaker's
/// count of calls) or nothing at all (a success Netflix's AIMD would not
/// grow on). Each policy in this crate computes its deferral with the same
/// predicate its own rule asks when a success arrives, so the two cannot
/// disagree.
///
/// The runtime then need not take the policy's lock for such a success,
/// nor ask it for its answer: it holds the success and hands it over,
/// oldest first, before any other event the policy hears of. A success it
/// did not time (the policy's [`Feedback`] is `Outcomes`) carries nothing
/// but "one more success", so it is only counted, and the count is told
/// to [`Algorithm::on_successes`](crate::Algorithm::on_successes); a timed
/// one is held with its instant and latency and told to
/// [`Algorithm::on_sample`](crate::Algorithm::on_sample). Threads sharing
/// one limiter hold their successes apart and hand them over in bulk, and
/// samples held by different threads reach the policy sorted by the
/// instant they finished.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Algorithm, Deferral, Gradient, GradientConfig, Outcome, Sample};
///
/// let mut gradient = Gradient::new(GradientConfig::default())?;
/// // An empty window: its first call says when it may close.
/// assert_eq!(gradient.publish().hints.deferral, None);
/// let t0 = Instant::now();
/// gradient.on_sample(t0, &Sample::new(Outcome::Success, Duration::from_millis(5), 1));
/// let min = GradientConfig::default().window.min_duration;
/// assert_eq!(
///     gradient.publish().hints.deferral,
///     Some(Deferral::until(Some(t0 + min), Duration::MAX))
/// );
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
///
/// A breaker with a count window holds successes at any time; one with a
/// time window until its current bucket ends (once it has one):
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow};
/// use rheostat_algorithms::{Algorithm, Deferral, Outcome, Sample};
///
/// let count = BreakerConfig { window: BreakerWindow::Count { calls: 100 }, ..Default::default() };
/// assert_eq!(Breaker::new(count)?.publish().hints.deferral, Some(Deferral::ALL));
///
/// let mut timed = Breaker::new(BreakerConfig::default())?;
/// assert_eq!(timed.publish().hints.deferral, None);
/// let t0 = Instant::now();
/// timed.on_sample(t0, &Sample::new(Outcome::Success, Duration::from_millis(5), 1));
/// let deferral = timed.publish().hints.deferral;
/// assert_eq!(deferral, Some(Deferral::until(Some(t0 + Duration::from_secs(1)), Duration::MAX)));
///
/// // Successes counted there are told at once, as one more success each.
/// timed.on_successes(t0, 9);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
///
/// Netflix's AIMD grows only on a success while at least half of its limit
/// is in use: the others change nothing in it, at any time.
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::{Aimd, AimdConfig, Algorithm, Deferral};
///
/// let aimd = Aimd::new(AimdConfig::netflix())?;
/// assert_eq!(
///     aimd.publish().hints.deferral,
///     Some(Deferral::until(None, AimdConfig::netflix().timeout).with_max_in_flight(9))
/// );
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deferral {
    /// Successes finishing before this instant may be held (`None`: any).
    pub until: Option<Instant>,
    /// The slowest success that may be held.
    pub max_latency: Duration,
    /// The most calls in flight, at its admission, for a success that may
    /// be held.
    pub max_in_flight: u32,
}

impl Deferral {
    /// Every success, at any time: for a policy that changes nothing on a
    /// success.
    pub const ALL: Deferral = Deferral {
        until: None,
        max_latency: Duration::MAX,
        max_in_flight: u32::MAX,
    };

    /// Every success no slower than `max_latency`, finishing before `until`,
    /// whatever the calls in flight.
    #[must_use]
    pub fn until(until: Option<Instant>, max_latency: Duration) -> Self {
        Deferral {
            until,
            max_latency,
            max_in_flight: u32::MAX,
        }
    }

    /// The same successes, admitted with at most `max_in_flight` calls in
    /// flight.
    #[must_use]
    pub fn with_max_in_flight(mut self, max_in_flight: u32) -> Self {
        self.max_in_flight = max_in_flight;
        self
    }

    /// Whether `sample`, finished at `now`, may be held.
    #[inline]
    pub fn covers(&self, now: Instant, sample: &Sample) -> bool {
        sample.outcome == Outcome::Success
            && !sample.probe
            && !sample.stale
            && sample.latency <= self.max_latency
            && sample.in_flight <= self.max_in_flight
            && self.until.is_none_or(|until| now < until)
    }

    /// The successes both may hold.
    #[must_use]
    pub fn meet(self, other: Deferral) -> Deferral {
        Deferral {
            until: earlier(self.until, other.until),
            max_latency: self.max_latency.min(other.max_latency),
            max_in_flight: self.max_in_flight.min(other.max_in_flight),
        }
    }

    /// Whether every success this one covers, `other` covers too.
    #[must_use]
    pub fn within(&self, other: &Deferral) -> bool {
        self.max_latency <= other.max_latency
            && self.max_in_flight <= other.max_in_flight
            && match (self.until, other.until) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(x), Some(y)) => x <= y,
            }
    }
}

/// What a policy publishes after every event: the one answer the runtime
/// reads, under the policy's lock, and copies where the hot path sees it.
///
/// - [`gate`](Published::gate): the rule every call meets from now on;
/// - [`wake_at`](Published::wake_at): when to call
///   [`Algorithm::handle_timeout`](crate::Algorithm::handle_timeout) even
///   with no traffic (by default the gate's `until`);
/// - [`hints`](Published::hints): what the policy needs to hear about
///   finished calls, so the runtime can skip the rest;
/// - [`refusers`](Published::refusers): which of the policy's
///   [members](crate::Algorithm::members) is responsible when the gate
///   refuses a call, so a rejection can name it without a lock.
///
/// A [`Stack`](crate::Stack) combines its members' answers with
/// [`Published::meet`].
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Feedback, Gate, Hints, Published};
///
/// let t0 = Instant::now();
/// let shut = Published::new(Gate::shut(Some(t0 + Duration::from_secs(5))));
/// // Wake when the gate expires; hear everything, in full, one call at a time.
/// assert_eq!(shut.wake_at, Some(t0 + Duration::from_secs(5)));
/// assert_eq!(shut.hints, Hints::default());
/// assert_eq!(shut.hints.feedback, Feedback::Timed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Published {
    /// The gate to enforce from now on.
    pub gate: Gate,
    /// The next instant at which the policy wants
    /// [`Algorithm::handle_timeout`](crate::Algorithm::handle_timeout)
    /// called, even with no traffic.
    pub wake_at: Option<Instant>,
    /// What the policy needs to hear about finished calls.
    pub hints: Hints,
    /// Which member refuses a call, for each way the gate can refuse one.
    pub refusers: Refusers,
}

impl Published {
    /// `gate`, re-evaluated when it expires, with the conservative
    /// [`Hints::default`] and every refusal laid on member 0.
    #[inline]
    pub fn new(gate: Gate) -> Self {
        Published {
            gate,
            wake_at: gate.until,
            hints: Hints::default(),
            refusers: Refusers::default(),
        }
    }

    /// The same answer, re-evaluated at `at` rather than when the gate
    /// expires.
    #[must_use]
    #[inline]
    pub fn with_wake_at(mut self, at: Option<Instant>) -> Self {
        self.wake_at = at;
        self
    }

    /// The same answer with `hints`.
    #[must_use]
    #[inline]
    pub fn with_hints(mut self, hints: Hints) -> Self {
        self.hints = hints;
        self
    }

    /// The same answer with `refusers`.
    #[must_use]
    #[inline]
    pub fn with_refusers(mut self, refusers: Refusers) -> Self {
        self.refusers = refusers;
        self
    }

    /// Two policies' answers as one, `self` the outer: the [meet](Gate::meet)
    /// of the (sanitized) gates, the earlier wake-up, the [meet](Hints::meet)
    /// of the hints, and for each refusal the member whose gate causes it:
    ///
    /// - [`Refusal::Limit`]: the one with the smaller limit;
    /// - [`Refusal::Throttle`]: the one with the lower admit probability;
    /// - [`Refusal::Shut`]: the one whose gate is shut, or else the one with
    ///   the smaller limit;
    /// - [`Refusal::Probe`]: the one whose gate probes.
    ///
    /// Ties go to `self`. Both answers' refusers must index the same list of
    /// members (a stack shifts each member's by where its names start).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{Gate, Published, Refusal, Refusers};
    ///
    /// let outer = Published::new(Gate::limited(10));
    /// let inner = Published::new(Gate { admit_probability: 0.5, ..Gate::limited(4) })
    ///     .with_refusers(Refusers::all(1));
    /// let both = outer.meet(inner);
    /// assert_eq!(both.gate.limit, 4);
    /// assert_eq!(both.refusers.get(Refusal::Limit), 1);
    /// assert_eq!(both.refusers.get(Refusal::Throttle), 1);
    /// ```
    #[must_use]
    pub fn meet(self, other: Published) -> Published {
        let (a, b) = (self.gate.sanitized(), other.gate.sanitized());
        let (x, y) = (self.refusers, other.refusers);
        let limit = if b.limit < a.limit { y } else { x };
        let refusers = Refusers {
            shut: if a.is_shut() {
                x.shut
            } else if b.is_shut() {
                y.shut
            } else {
                limit.shut
            },
            limit: limit.limit,
            throttle: if b.admit_probability < a.admit_probability {
                y.throttle
            } else {
                x.throttle
            },
            probe: if !a.probe && b.probe {
                y.probe
            } else {
                x.probe
            },
        };
        Published {
            gate: a.meet(b).sanitized(),
            wake_at: earlier(self.wake_at, other.wake_at),
            hints: self.hints.meet(other.hints),
            refusers,
        }
    }
}

/// What a policy needs to hear about finished calls, so that the runtime can
/// skip the work the policy would ignore: reading the clock, taking the
/// policy's lock.
///
/// The [default](Hints::default) is conservative: every call, timed, one at
/// a time. A policy that claims less than it uses loses information, so
/// each policy in this crate derives its hints from the same rule that
/// decides what a call changes. [`Hints::IGNORES_CALLS`] is the other end:
/// a policy that learns nothing from calls (a fixed limit).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::{Deferral, Feedback, Hints};
///
/// let throttle = Hints::default().with_feedback(Feedback::Outcomes).with_deferral(Some(Deferral::ALL));
/// let aimd = Hints::default()
///     .with_deferral(Some(Deferral::until(None, Duration::from_secs(1)).with_max_in_flight(4)));
/// // Together they need what either needs.
/// let both = throttle.meet(aimd);
/// assert_eq!(both, aimd);
/// assert!(both.covers(&throttle) && both.covers(&aimd));
/// assert!(Hints::default().covers(&Hints::IGNORES_CALLS));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Hints {
    /// How much of a finished call the policy looks at.
    pub feedback: Feedback,
    /// Which successes the runtime may hold and tell the policy later, in a
    /// batch, without its lock (`None`: none; see [`Deferral`]).
    pub deferral: Option<Deferral>,
}

impl Default for Hints {
    /// Every call, timed, one at a time: right for any policy.
    #[inline]
    fn default() -> Self {
        Hints {
            feedback: Feedback::Timed,
            deferral: None,
        }
    }
}

impl Hints {
    /// The hints of a policy that learns nothing from calls: no feedback,
    /// every success held.
    pub const IGNORES_CALLS: Hints = Hints {
        feedback: Feedback::Nothing,
        deferral: Some(Deferral::ALL),
    };

    /// The same hints with `feedback`.
    #[must_use]
    #[inline]
    pub fn with_feedback(mut self, feedback: Feedback) -> Self {
        self.feedback = feedback;
        self
    }

    /// The same hints with `deferral`.
    #[must_use]
    #[inline]
    pub fn with_deferral(mut self, deferral: Option<Deferral>) -> Self {
        self.deferral = deferral;
        self
    }

    /// What two policies need together: the more feedback, the successes
    /// both let be held.
    #[must_use]
    pub fn meet(self, other: Hints) -> Hints {
        Hints {
            feedback: self.feedback.max(other.feedback),
            deferral: match (self.deferral, other.deferral) {
                (Some(a), Some(b)) => Some(a.meet(b)),
                _ => None,
            },
        }
    }

    /// Whether these hints ask for at least what `needed` asks for: as much
    /// feedback, no success held here that is not held there.
    #[must_use]
    pub fn covers(&self, needed: &Hints) -> bool {
        let deferral = match (self.deferral, needed.deferral) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a.within(&b),
        };
        self.feedback >= needed.feedback && deferral
    }
}

/// Why a gate refuses a call, as far as a policy is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The gate's limit is 0: nothing may be sent (an open breaker).
    Shut,
    /// In-flight calls have reached the gate's limit.
    Limit,
    /// The random draw against the gate's admit probability failed.
    Throttle,
    /// The policy refused a probe in
    /// [`Algorithm::on_admit`](crate::Algorithm::on_admit).
    Probe,
}

/// For each [`Refusal`], the index (into
/// [`Algorithm::members`](crate::Algorithm::members)) of the member
/// responsible. A single policy is its own member 0, the default.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Refusal, Refusers};
///
/// let refusers = Refusers::all(0).with(Refusal::Throttle, 1);
/// assert_eq!(refusers.get(Refusal::Throttle), 1);
/// assert_eq!(refusers.get(Refusal::Limit), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Refusers {
    shut: u16,
    limit: u16,
    throttle: u16,
    probe: u16,
}

impl Refusers {
    /// Every refusal laid on member `index` (at most 65,535).
    pub fn all(index: usize) -> Self {
        let i = clamp16(index);
        Refusers {
            shut: i,
            limit: i,
            throttle: i,
            probe: i,
        }
    }

    /// The same, with `refusal` laid on member `index` (at most 65,535).
    #[must_use]
    pub fn with(mut self, refusal: Refusal, index: usize) -> Self {
        *self.slot(refusal) = clamp16(index);
        self
    }

    /// The member responsible for `refusal`.
    #[inline]
    pub fn get(&self, refusal: Refusal) -> usize {
        usize::from(match refusal {
            Refusal::Shut => self.shut,
            Refusal::Limit => self.limit,
            Refusal::Throttle => self.throttle,
            Refusal::Probe => self.probe,
        })
    }

    fn slot(&mut self, refusal: Refusal) -> &mut u16 {
        match refusal {
            Refusal::Shut => &mut self.shut,
            Refusal::Limit => &mut self.limit,
            Refusal::Throttle => &mut self.throttle,
            Refusal::Probe => &mut self.probe,
        }
    }

    /// A member's refusers as indices into a list where its own `len`
    /// names start at `start` (a member naming an index past its own is
    /// held to its last).
    pub(crate) fn shifted(self, start: usize, len: usize) -> Self {
        let last = len.saturating_sub(1);
        let at = |i: u16| clamp16(start + usize::from(i).min(last));
        Refusers {
            shut: at(self.shut),
            limit: at(self.limit),
            throttle: at(self.throttle),
            probe: at(self.probe),
        }
    }
}

fn clamp16(index: usize) -> u16 {
    u16::try_from(index).unwrap_or(u16::MAX)
}
