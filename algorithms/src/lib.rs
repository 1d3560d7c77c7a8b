//! Pure admission policies for [rheostat](https://docs.rs/rheostat).
//!
//! Every policy in this crate turns what it has seen into a [`Gate`]: how many
//! calls may be in flight, the chance that a call under that limit is let
//! through, whether an admitted call is a trial (probe) call, and when the gate
//! must be looked at again even with no traffic. A runtime (the `rheostat`
//! crate) enforces the gate on the hot path and feeds every finished call back
//! as a [`Sample`].
//!
//! Nothing here reads a clock, spawns a task or takes a lock: every
//! time-dependent method takes `now`, and time-driven changes are announced
//! with [`Algorithm::poll_timeout`] and applied with
//! [`Algorithm::handle_timeout`]. That makes every policy drivable by hand,
//! with hand-built instants, in tests and in simulation.
//!
//! # Examples
//!
//! ```
//! use std::time::{Duration, Instant};
//! use rheostat_algorithms::{aimd::{Aimd, AimdConfig}, Algorithm, Outcome, Sample};
//!
//! let mut aimd = Aimd::new(AimdConfig { initial: 20, ..AimdConfig::default() })?;
//! let t0 = Instant::now();
//! assert_eq!(aimd.gate().limit, 20);
//!
//! // A dropped call backs the limit off by the backoff ratio (0.9).
//! aimd.on_sample(t0, &Sample::new(Outcome::Overload, Duration::from_millis(30), 20));
//! assert_eq!(aimd.gate().limit, 18);
//! # Ok::<(), rheostat_algorithms::ConfigError>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, Instant};

pub mod aimd;
pub mod breaker;
pub mod buckets;
pub mod fixed;
pub mod gradient;
pub mod latency;
mod rng;
#[cfg(feature = "serde")]
mod serde_rate;
pub mod stack;
pub mod throttle;
pub mod vegas;
pub use latency::window;

pub use aimd::{Aimd, AimdConfig, AimdMode};
pub use breaker::{Breaker, BreakerConfig, BreakerState, Transition};
pub use fixed::Fixed;
pub use gradient::{Gradient, GradientConfig};
pub use stack::{Stack, StackBuilder};
pub use throttle::{Throttle, ThrottleConfig};
pub use vegas::{Vegas, VegasConfig};
pub use window::{Aggregation, Window, WindowConfig, WindowSummary};

/// The largest concurrency limit a gate can carry; a gate at this limit is
/// effectively unbounded.
pub const MAX_LIMIT: u32 = (1 << 31) - 1;

/// The longest duration any policy parameter accepts (one year).
///
/// Longer durations are refused with a [`ConfigError`] rather than risking an
/// overflow in instant arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// What a finished call says about the dependency.
///
/// This is the one outcome vocabulary shared by every policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Outcome {
    /// The dependency answered. A success slower than a policy's threshold may
    /// still be treated as a sign of overload (a *slow call*).
    Success,
    /// Evidence that the dependency is unhealthy: a timeout, a 5xx, a
    /// 503/529, a refused connection.
    Overload,
    /// Not evidence either way: a 4xx, a declined card, a cancelled call, an
    /// inner breaker's rejection. The slot is released and nothing is learnt.
    Ignore,
}

/// One finished call, as a policy sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// How long the call took, from admission to its outcome being recorded.
    pub latency: Duration,
    /// How many calls were in flight when this one was admitted, itself
    /// included. A limiter that parks released slots per core (rheostat's
    /// `Sharding`) counts the slots parked on other cores as well: an
    /// over-estimate by at most one per core.
    pub in_flight: u32,
    /// How many calls were in flight when this one finished, itself
    /// included, counted as `in_flight` is; 0 where not known (a sample built by hand, unless set
    /// with [`Sample::with_in_flight_at_finish`]). With `in_flight`, it
    /// tells a policy whether its limit was reached while the call was
    /// out, not only when it was admitted.
    pub in_flight_at_finish: u32,
    /// What the call says about the dependency.
    pub outcome: Outcome,
    /// Whether the call was admitted as a trial call under a probe gate.
    pub probe: bool,
    /// Whether the policy reported a [`Transition`] after this call was
    /// admitted: the call belongs to an earlier state. The runtime sets it;
    /// a policy driven by hand may leave it `false` and compare instants
    /// with [`Sample::started`] instead.
    pub stale: bool,
}

impl Sample {
    /// A sample of a call that was not a probe.
    pub fn new(outcome: Outcome, latency: Duration, in_flight: u32) -> Self {
        Sample {
            latency,
            in_flight,
            in_flight_at_finish: 0,
            outcome,
            probe: false,
            stale: false,
        }
    }

    /// The same sample, marked as a probe (or not).
    #[must_use]
    pub fn with_probe(mut self, probe: bool) -> Self {
        self.probe = probe;
        self
    }

    /// The same sample, with the calls in flight when it finished.
    #[must_use]
    pub fn with_in_flight_at_finish(mut self, in_flight: u32) -> Self {
        self.in_flight_at_finish = in_flight;
        self
    }

    /// The same sample, marked as admitted before the policy's latest
    /// transition (or not).
    #[must_use]
    pub fn with_stale(mut self, stale: bool) -> Self {
        self.stale = stale;
        self
    }

    /// When the call started, given the instant its outcome was recorded.
    ///
    /// Saturates at `now` if the latency cannot be subtracted.
    pub fn started(&self, now: Instant) -> Instant {
        now.checked_sub(self.latency).unwrap_or(now)
    }
}

/// What a policy publishes: the rule the runtime enforces on every call.
///
/// - a closed breaker or a fixed limit: `(n, 1.0)`;
/// - an open breaker: `(0, _)` until its cooldown ends;
/// - a half-open breaker: `(probes, 1.0, probe)`;
/// - an adaptive limit moves `limit`; a throttle moves `admit_probability`.
///
/// Two gates combine with [`Gate::meet`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gate {
    /// How many calls may be in flight at once; 0 shuts the gate. At most
    /// [`MAX_LIMIT`], which means no limit ([`Gate::max_in_flight`] reads
    /// it as `None`).
    pub limit: u32,
    /// The chance, in `[0, 1]`, that a call under the limit is let through.
    pub admit_probability: f64,
    /// Whether a call admitted now is a trial call. While set, the runtime
    /// asks the policy about every admission ([`Algorithm::on_admit`]).
    pub probe: bool,
    /// The instant at which the gate must be re-evaluated even with no traffic
    /// (open → half-open). `None` if it never expires by itself.
    pub until: Option<Instant>,
}

impl Gate {
    /// A gate that admits up to `limit` calls in flight, all of them.
    pub fn limited(limit: u32) -> Self {
        Gate {
            limit: limit.min(MAX_LIMIT),
            admit_probability: 1.0,
            probe: false,
            until: None,
        }
    }

    /// The gate of an adaptive limit kept as a float: floored, clamped to
    /// `[min, max]` (NaN becomes `min`).
    pub(crate) fn from_raw_limit(raw: f64, min: u32, max: u32) -> Self {
        // `as` saturates and maps NaN to 0; truncation is the floor for a
        // positive limit, without a libm call.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "saturating float-to-int conversion, then clamped"
        )]
        let limit = raw as u32;
        Gate::limited(limit.clamp(min, max))
    }

    /// A gate that admits everything.
    pub fn unlimited() -> Self {
        Gate::limited(MAX_LIMIT)
    }

    /// How many calls may be in flight at once, or `None` if the gate sets
    /// no limit (`limit` is [`MAX_LIMIT`]).
    ///
    /// ```
    /// use rheostat_algorithms::Gate;
    ///
    /// assert_eq!(Gate::limited(8).max_in_flight(), Some(8));
    /// assert_eq!(Gate::unlimited().max_in_flight(), None);
    /// ```
    pub fn max_in_flight(&self) -> Option<u32> {
        (self.limit < MAX_LIMIT).then_some(self.limit)
    }

    /// A gate that admits nothing until `until` (or until told otherwise).
    pub fn shut(until: Option<Instant>) -> Self {
        Gate {
            limit: 0,
            admit_probability: 1.0,
            probe: false,
            until,
        }
    }

    /// Whether the gate admits nothing at all.
    pub fn is_shut(&self) -> bool {
        self.limit == 0 || self.admit_probability <= 0.0
    }

    /// The gate that both `self` and `other` allow: the smaller limit, the
    /// product of the probabilities, a probe if either is, and the earlier
    /// expiry.
    #[must_use]
    pub fn meet(self, other: Gate) -> Gate {
        Gate {
            limit: self.limit.min(other.limit),
            admit_probability: sanitize_probability(self.admit_probability)
                * sanitize_probability(other.admit_probability),
            probe: self.probe || other.probe,
            until: match (self.until, other.until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// The same gate with its limit clamped to [`MAX_LIMIT`] and its
    /// probability clamped to `[0, 1]` (NaN becomes 0, so a broken policy
    /// fails closed).
    #[must_use]
    pub fn sanitized(self) -> Gate {
        Gate {
            limit: self.limit.min(MAX_LIMIT),
            admit_probability: sanitize_probability(self.admit_probability),
            ..self
        }
    }
}

fn sanitize_probability(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

/// A point-in-time view of a policy, for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The policy's name, as in [`Algorithm::name`].
    pub policy: &'static str,
    /// The gate the policy publishes now.
    pub gate: Gate,
    /// The policy's current limit before rounding, where it keeps one.
    pub raw_limit: Option<f64>,
    /// The breaker state, for policies that have one.
    pub state: Option<BreakerState>,
}

impl Snapshot {
    /// A snapshot that reports only a name and a gate.
    pub fn new(policy: &'static str, gate: Gate) -> Self {
        Snapshot {
            policy,
            gate,
            raw_limit: None,
            state: None,
        }
    }

    /// The same snapshot with a breaker state.
    #[must_use]
    pub fn with_state(mut self, state: BreakerState) -> Self {
        self.state = Some(state);
        self
    }

    /// The same snapshot with the unrounded limit.
    #[must_use]
    pub fn with_raw_limit(mut self, raw: f64) -> Self {
        self.raw_limit = Some(raw);
        self
    }
}

/// What a policy learns from a finished call, so that the runtime can skip
/// the work the policy would ignore.
///
/// Reading the clock is the largest part of the cost of admitting a call: a
/// policy that never looks at latency should not pay for two reads per call.
/// The levels are ordered: a [`Stack`] needs the most any member needs.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Algorithm, Feedback, Fixed, Throttle, ThrottleConfig};
///
/// assert_eq!(Fixed::new(10)?.feedback(), Feedback::Nothing);
/// assert_eq!(Throttle::new(ThrottleConfig::default())?.feedback(), Feedback::Outcomes);
/// assert!(Feedback::Nothing < Feedback::Outcomes && Feedback::Outcomes < Feedback::Timed);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feedback {
    /// Nothing: [`Algorithm::on_sample`] and [`Algorithm::on_rejected`] do
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

/// Which successes a policy lets the runtime count for it, without its lock,
/// and hand over later in one batch ([`Algorithm::on_successes`]).
///
/// Only a success that is not a probe, not [stale](Sample::stale) and whose
/// latency was not measured may be batched: to the policy, it is one more
/// success and nothing else. The runtime hands a batch over before every
/// other event it tells the policy about, so a policy sees batched successes
/// before anything that came after them.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow};
/// use rheostat_algorithms::{Algorithm, Batching, Outcome, Sample};
///
/// // A count window takes successes in batches at any time.
/// let count = BreakerConfig { window: BreakerWindow::Count { calls: 100 }, ..Default::default() };
/// assert_eq!(Breaker::new(count)?.batching(), Batching::Always);
///
/// // A time window, until its current bucket ends (once it has one).
/// let mut timed = Breaker::new(BreakerConfig::default())?;
/// assert_eq!(timed.batching(), Batching::Never);
/// let t0 = Instant::now();
/// timed.on_sample(t0, &Sample::new(Outcome::Success, Duration::from_millis(5), 1));
/// assert_eq!(timed.batching(), Batching::Until(t0 + Duration::from_secs(1)));
///
/// // A success batched there counts as one more success.
/// timed.on_successes(t0, 9);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Batching {
    /// Every call is handed over on its own (the default).
    Never,
    /// Successes that finish before this instant may be batched (a time
    /// window counts them in the bucket that ends then).
    Until(Instant),
    /// Successes may be batched whenever they finish (a count window).
    Always,
}

/// Successes that would change nothing in a policy as it is now, so that the
/// runtime need not tell it about them (nor take its lock): a success no
/// slower than `max_latency`, admitted with at most `max_in_flight` calls in
/// flight (itself included), and not a probe.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::{Aimd, AimdConfig, Algorithm, Quiet};
///
/// // Netflix's AIMD grows only on a success while at least half of its limit
/// // is in use.
/// let aimd = Aimd::new(AimdConfig::netflix())?;
/// assert_eq!(
///     aimd.quiet(),
///     Some(Quiet { max_latency: AimdConfig::netflix().timeout, max_in_flight: 9 })
/// );
/// // The latency mode (the default) learns from every call.
/// assert_eq!(Aimd::new(AimdConfig::default())?.quiet(), None);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quiet {
    /// The slowest success that changes nothing.
    pub max_latency: Duration,
    /// The most calls in flight, at its admission, for a success that
    /// changes nothing.
    pub max_in_flight: u32,
}

/// An admission policy: learns from finished calls, publishes a [`Gate`].
///
/// Methods take `&mut self` and `now`; none of them may block, sleep or read a
/// clock. The runtime serialises calls to them. Optional events have empty
/// default bodies.
pub trait Algorithm: Send {
    /// A short, stable name for logs and metrics (`"aimd"`).
    fn name(&self) -> &'static str;

    /// The gate to enforce from now on. Called after every event.
    fn gate(&self) -> Gate;

    /// Learn from one finished call.
    fn on_sample(&mut self, now: Instant, sample: &Sample);

    /// Asked for each admission while the published gate has `probe` set.
    /// Return `false` to refuse the call (for example, the probe allowance is
    /// spent). A refused call is not sent.
    fn on_admit(&mut self, now: Instant) -> bool {
        let _ = now;
        true
    }

    /// Told how many calls the runtime refused locally since the last time
    /// it said (throttles count them as requests).
    fn on_rejected(&mut self, now: Instant, count: u64) {
        let _ = (now, count);
    }

    /// What the policy learns from finished calls now (default
    /// [`Feedback::Timed`]). The runtime reads this after every event and
    /// skips what the policy would ignore; a policy must never claim less
    /// than it uses. A call admitted while the policy needed less, and
    /// finished after it came to need latency, is delivered as
    /// [`Outcome::Ignore`]: its latency was not measured.
    fn feedback(&self) -> Feedback {
        Feedback::Timed
    }

    /// Which successes would change nothing in the policy as it is now
    /// (default `None`: any might). The runtime does not tell the policy
    /// about them. Read after every event, like the gate; a success that
    /// finishes while another thread changes the policy may be judged by
    /// the thresholds from just before, as if it had finished first.
    fn quiet(&self) -> Option<Quiet> {
        None
    }

    /// Which successes the runtime may count for the policy and hand over
    /// later, in one batch (default [`Batching::Never`]). Read after every
    /// event, like the gate.
    fn batching(&self) -> Batching {
        Batching::Never
    }

    /// Learn from `count` successes batched under [`Algorithm::batching`]:
    /// as many calls of [`Outcome::Success`] that were not probes, not
    /// stale, and not timed, all finished before the [`Batching::Until`]
    /// instant published when they finished. Called at `now`, before any
    /// other event. A success that finished just as the policy changed (or
    /// was swapped for another by the runtime's `update`) may arrive here
    /// after the policy stopped batching; the default ignores batches.
    fn on_successes(&mut self, now: Instant, count: u64) {
        let _ = (now, count);
    }

    /// The next instant at which the policy wants [`Algorithm::handle_timeout`]
    /// called, even with no traffic. Defaults to the gate's `until`.
    fn poll_timeout(&self) -> Option<Instant> {
        self.gate().until
    }

    /// Apply time-driven changes due at or before `now`.
    fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }

    /// A view of the policy for metrics and logs.
    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.name(), self.gate())
    }

    /// The next state transition the policy has made since it was last
    /// asked, oldest first. Breakers report here; the runtime drains this
    /// after every event and hands each transition to its observers.
    fn poll_transition(&mut self) -> Option<Transition> {
        None
    }

    /// How long a call admitted as a probe may take (default `None`: the
    /// policy never probes). A breaker counts a probe that has not reported
    /// by then as failed, so the runtime gives a probe this as its attempt
    /// timeout in place of the caller's ordinary one: `Limiter::call`, the
    /// tower layer and `permit.timeout(ordinary)` all do. Read when a probe
    /// is admitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat_algorithms::{Algorithm, Fixed};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let breaker = Breaker::new(BreakerConfig::recommended())?;
    /// assert_eq!(breaker.probe_timeout(), Some(Duration::from_secs(30)));
    /// assert_eq!(Fixed::new(8)?.probe_timeout(), None);
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    fn probe_timeout(&self) -> Option<Duration> {
        None
    }

    /// The names of the policies this one is made of, in order. A single
    /// policy is made of itself; a stack lists its members. The runtime reads
    /// this once, when the limiter is built, so it must not change.
    fn members(&self) -> Vec<&'static str> {
        vec![self.name()]
    }

    /// Which of [`Algorithm::members`] (an index) is responsible for the
    /// current gate refusing a call for `refusal`. Called after every event,
    /// so a rejection can name the member that refused without a lock.
    fn refused_by(&self, refusal: Refusal) -> usize {
        let _ = refusal;
        0
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
    /// The policy refused a probe in [`Algorithm::on_admit`].
    Probe,
}

impl<A: Algorithm + ?Sized> Algorithm for Box<A> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn gate(&self) -> Gate {
        (**self).gate()
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        (**self).on_sample(now, sample);
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        (**self).on_admit(now)
    }
    fn on_rejected(&mut self, now: Instant, count: u64) {
        (**self).on_rejected(now, count);
    }
    fn feedback(&self) -> Feedback {
        (**self).feedback()
    }
    fn batching(&self) -> Batching {
        (**self).batching()
    }
    fn quiet(&self) -> Option<Quiet> {
        (**self).quiet()
    }
    fn on_successes(&mut self, now: Instant, count: u64) {
        (**self).on_successes(now, count);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (**self).poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        (**self).handle_timeout(now);
    }
    fn snapshot(&self) -> Snapshot {
        (**self).snapshot()
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        (**self).poll_transition()
    }
    fn probe_timeout(&self) -> Option<Duration> {
        (**self).probe_timeout()
    }
    fn members(&self) -> Vec<&'static str> {
        (**self).members()
    }
    fn refused_by(&self, refusal: Refusal) -> usize {
        (**self).refused_by(refusal)
    }
}

/// A configuration value outside what a policy accepts.
///
/// It names the field, shows the value found and says what is allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: Cow<'static, str>,
    found: String,
    allowed: Cow<'static, str>,
}

impl ConfigError {
    /// An error for `field`, which held `found` where `allowed` was expected.
    pub fn new(
        field: impl Into<Cow<'static, str>>,
        found: impl fmt::Display,
        allowed: impl Into<Cow<'static, str>>,
    ) -> Self {
        ConfigError {
            field: field.into(),
            found: found.to_string(),
            allowed: allowed.into(),
        }
    }

    /// The field at fault, such as `"aimd.backoff"`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The value that was refused, as text.
    pub fn found(&self) -> &str {
        &self.found
    }

    /// What the field accepts, such as `"a number in (0, 1)"`.
    pub fn allowed(&self) -> &str {
        &self.allowed
    }

    /// The same error with `prefix.` put before the field name, for nested
    /// configuration (`"payments"` + `"aimd.min"` → `"payments.aimd.min"`).
    #[must_use]
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = Cow::Owned(format!("{prefix}.{}", self.field));
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid `{}`: found {}, expected {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

/// Checks shared by every policy's configuration.
pub mod check {
    use super::{ConfigError, MAX_DURATION, MAX_LIMIT};
    use std::time::Duration;

    /// A limit in `[lo, hi]`, where `hi` is at most [`MAX_LIMIT`].
    pub fn limit(field: &'static str, value: u32, lo: u32) -> Result<u32, ConfigError> {
        if value < lo || value > MAX_LIMIT {
            return Err(ConfigError::new(
                field,
                value,
                format!("a whole number in [{lo}, {MAX_LIMIT}]"),
            ));
        }
        Ok(value)
    }

    /// A finite number strictly between `lo` and `hi`.
    pub fn open_unit(
        field: &'static str,
        value: f64,
        lo: f64,
        hi: f64,
    ) -> Result<f64, ConfigError> {
        if value.is_finite() && value > lo && value < hi {
            Ok(value)
        } else {
            Err(ConfigError::new(
                field,
                value,
                format!("a number in ({lo}, {hi})"),
            ))
        }
    }

    /// A finite number in `[lo, hi]`.
    pub fn closed(field: &'static str, value: f64, lo: f64, hi: f64) -> Result<f64, ConfigError> {
        if value.is_finite() && value >= lo && value <= hi {
            Ok(value)
        } else {
            Err(ConfigError::new(
                field,
                value,
                format!("a number in [{lo}, {hi}]"),
            ))
        }
    }

    /// A finite number in `[lo, hi]` where a bound is another field's value:
    /// `(name, value)`, with an empty name for a constant. The range names
    /// the field it comes from (`a number in [alpha, 1000] = [10, 1000]`).
    pub fn closed_by(
        field: &'static str,
        value: f64,
        lo: (&str, f64),
        hi: (&str, f64),
    ) -> Result<f64, ConfigError> {
        if value.is_finite() && value >= lo.1 && value <= hi.1 {
            return Ok(value);
        }
        let name = |(name, bound): (&str, f64)| {
            if name.is_empty() {
                bound.to_string()
            } else {
                name.to_owned()
            }
        };
        Err(ConfigError::new(
            field,
            value,
            format!(
                "a number in [{}, {}] = [{}, {}]",
                name(lo),
                name(hi),
                lo.1,
                hi.1
            ),
        ))
    }

    /// A duration above zero and at most [`MAX_DURATION`].
    pub fn duration(field: &'static str, value: Duration) -> Result<Duration, ConfigError> {
        if value.is_zero() || value > MAX_DURATION {
            return Err(ConfigError::new(
                field,
                format_args!("{value:?}"),
                "a duration above 0 and at most 365 days",
            ));
        }
        Ok(value)
    }

    /// A policy's `min`, `max` and `initial` limits: each in
    /// `[1, MAX_LIMIT]`, `min` at most `max`, `initial` within them. The
    /// fields are named `<policy>.min` and so on.
    pub fn bounds(
        fields: [&'static str; 3],
        min: u32,
        max: u32,
        initial: u32,
    ) -> Result<(), ConfigError> {
        let [min_field, max_field, initial_field] = fields;
        limit(min_field, min, 1)?;
        limit(max_field, max, 1)?;
        ordered(min_field, min, max_field, max)?;
        if initial < min || initial > max {
            return Err(ConfigError::new(
                initial_field,
                initial,
                format!("a whole number in [min, max] = [{min}, {max}]"),
            ));
        }
        Ok(())
    }

    /// `low` must not exceed `high`.
    pub fn ordered(
        low_field: &'static str,
        low: u32,
        high_field: &'static str,
        high: u32,
    ) -> Result<(), ConfigError> {
        if low > high {
            return Err(ConfigError::new(
                low_field,
                low,
                format!("at most `{high_field}` ({high})"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meet_takes_the_smaller_limit_and_the_product_of_probabilities() {
        let t0 = Instant::now();
        let a = Gate {
            limit: 10,
            admit_probability: 0.5,
            probe: false,
            until: Some(t0 + Duration::from_secs(5)),
        };
        let b = Gate {
            limit: 4,
            admit_probability: 0.5,
            probe: true,
            until: Some(t0 + Duration::from_secs(2)),
        };
        let m = a.meet(b);
        assert_eq!(m.limit, 4);
        assert_eq!(m.admit_probability, 0.25);
        assert!(m.probe);
        assert_eq!(m.until, Some(t0 + Duration::from_secs(2)));
        assert_eq!(Gate::unlimited().meet(Gate::limited(3)).until, None);
    }

    #[test]
    fn a_nan_probability_is_sanitized_to_shut() {
        let g = Gate {
            admit_probability: f64::NAN,
            ..Gate::unlimited()
        }
        .sanitized();
        assert_eq!(g.admit_probability, 0.0);
        assert!(g.is_shut());
    }

    #[test]
    fn config_errors_name_the_field_and_the_range() {
        let e = check::open_unit("aimd.backoff", 1.5, 0.0, 1.0).expect_err("1.5 > 1");
        assert_eq!(e.field(), "aimd.backoff");
        assert_eq!(
            e.to_string(),
            "invalid `aimd.backoff`: found 1.5, expected a number in (0, 1)"
        );
        assert_eq!(e.within("payments").field(), "payments.aimd.backoff");
        let e = check::duration("aimd.timeout", Duration::MAX).expect_err("too long");
        assert!(e.allowed().contains("365 days"), "{e}");
        assert!(check::duration("x", Duration::ZERO).is_err());
    }

    #[test]
    fn sample_start_saturates_rather_than_panicking() {
        let now = Instant::now();
        let s = Sample::new(Outcome::Success, Duration::MAX, 1);
        assert_eq!(s.started(now), now);
    }
}
