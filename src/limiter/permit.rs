//! Permits: a slot held by one call, released exactly once.

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::algorithms::{check, Algorithm, Outcome};
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::limiter::Limiter;
use crate::priority::Class;
use crate::timeout::Given;

/// What the limiter knows about one admitted call: 24 bytes without
/// padding, so that a permit moves in whole words (with a class byte of its
/// own, 32 bytes with padding, a classed permit moved through memory in
/// pieces: about 10 ns a call).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    /// `None` if the limiter did not read the clock (its policy does not
    /// time calls).
    pub(crate) start: Option<Instant>,
    /// Calls in flight at admission (the low 31 bits: at most
    /// `MAX_LIMIT`) and whether it is a probe (the top bit).
    flight: u32,
    /// The limiter's transition generation when the call was admitted (the
    /// low 21 bits, see [`GENERATION`]), whether it keeps its caller's own
    /// timeout ([`KEPT`]), whether it gets the ceiling of a learned timeout
    /// ([`UNCUT`]), whether its class counts it ([`COUNTED`]) and its class
    /// (the top 8 bits, [`NO_CLASS`] without one; see [`crate::priority`]).
    tag: u32,
}

/// The probe bit of [`Ticket::flight`].
const PROBE: u32 = 1 << 31;

/// The generation's bits in [`Ticket::tag`]: a ticket is stale when the
/// limiter's generation has moved on, modulo 2^21 (a call would have to
/// stay in flight through 2 million transitions to be taken for fresh).
pub(crate) const GENERATION: u32 = (1 << 21) - 1;

/// The bit of [`Ticket::tag`] set when the call is not to be cut early: it
/// keeps its caller's own timeout, never a learned one shorter
/// ([`Admission::cut_early`](crate::Admission::cut_early)).
const KEPT: u32 = 1 << 21;

/// The bit of [`Ticket::tag`] set when the call is one of the share given
/// the ceiling of a learned timeout ([`crate::timeout`]).
const UNCUT: u32 = 1 << 22;

/// The bit of [`Ticket::tag`] set when the call's class counts it, so that
/// its end gives the count back (the least critical class counts none).
const COUNTED: u32 = 1 << 23;

/// The class byte of a ticket without a class: how `None` is packed into
/// [`Ticket::tag`], never seen outside it ([`Ticket::class`] answers
/// `None`).
const NO_CLASS: u32 = 0xFF;

impl Ticket {
    #[inline]
    pub(crate) fn new(
        start: Option<Instant>,
        in_flight: u32,
        probe: bool,
        generation: u32,
    ) -> Self {
        Ticket {
            start,
            flight: in_flight.min(!PROBE) | if probe { PROBE } else { 0 },
            tag: (generation & GENERATION) | NO_CLASS << 24,
        }
    }

    /// The same ticket, for a call of class `class`, counted by its class
    /// if `counted`.
    #[inline]
    pub(crate) fn with_class(mut self, class: Class, counted: bool) -> Self {
        self.tag = (self.tag & (GENERATION | KEPT | UNCUT))
            | u32::from(class.0) << 24
            | if counted { COUNTED } else { 0 };
        self
    }

    /// The same ticket, given the ceiling of a learned timeout.
    #[inline]
    pub(crate) fn uncut(mut self) -> Self {
        self.tag |= UNCUT;
        self
    }

    /// Whether it is given the ceiling of a learned timeout.
    #[inline]
    pub(crate) fn is_uncut(&self) -> bool {
        self.tag & UNCUT != 0
    }

    /// The same ticket, keeping its caller's own timeout.
    #[inline]
    pub(crate) fn kept(mut self) -> Self {
        self.tag |= KEPT;
        self
    }

    /// Whether it keeps its caller's own timeout.
    #[inline]
    pub(crate) fn is_kept(&self) -> bool {
        self.tag & KEPT != 0
    }

    /// Which timeout the call is given, as the learner is told
    /// ([`crate::timeout`]).
    #[inline]
    pub(crate) fn given(&self) -> Given {
        if self.is_kept() {
            Given::Own
        } else if self.is_uncut() {
            Given::Ceiling
        } else {
            Given::Learned
        }
    }

    /// Its class, if its limiter has classes.
    #[inline]
    pub(crate) fn class(&self) -> Option<Class> {
        #[allow(clippy::cast_possible_truncation, reason = "the top 8 bits")]
        let class = (self.tag >> 24) as u8;
        (u32::from(class) != NO_CLASS).then_some(Class(class))
    }

    /// Its class, if its class counts it (so that its end gives the count
    /// back).
    #[inline]
    pub(crate) fn counted_class(&self) -> Option<Class> {
        if self.tag & COUNTED == 0 {
            return None;
        }
        self.class()
    }

    /// The limiter's generation (modulo 2^21) when it was admitted.
    #[inline]
    pub(crate) fn generation(&self) -> u32 {
        self.tag & GENERATION
    }

    /// Calls in flight when it was admitted, itself included.
    #[inline]
    pub(crate) fn in_flight(&self) -> u32 {
        self.flight & !PROBE
    }

    /// Whether it was admitted as a probe.
    #[inline]
    pub(crate) fn probe(&self) -> bool {
        self.flight & PROBE != 0
    }

    /// The same call's next attempt, sent at `now` (if it is timed): no
    /// longer a probe, whatever the first attempt was.
    #[inline]
    pub(crate) fn next_attempt(&mut self, now: Instant) {
        self.start = self.start.map(|_| now);
        self.flight &= !PROBE;
    }
}

/// A slot held by one call, released exactly once.
///
/// `L` is how the permit holds its [`Limiter`]: `&Limiter` for a permit
/// borrowed from it ([`Limiter::try_acquire`]), `Arc<Limiter>` for one that
/// can move into a spawned task ([`OwnedPermit`], from an
/// [`Admission`](crate::Admission) of an `Arc`).
///
/// Record how the call ended with [`success`](Permit::success),
/// [`overload`](Permit::overload) or [`ignore`](Permit::ignore), which consume
/// the permit and release the slot. A permit dropped without a record (a
/// cancelled future, a panic) releases the slot and is reported as the
/// limiter's drop outcome, [`Outcome::Ignore`] unless configured otherwise.
#[must_use = "a permit releases its slot when dropped; record the call's outcome"]
pub struct Permit<L: Handle> {
    limiter: L,
    ticket: Option<Ticket>,
}

/// A permit owning a handle to its [`Limiter`], so it can move into a
/// spawned task.
pub type OwnedPermit<A = Box<dyn Algorithm>, C = DefaultClock> = Permit<Arc<Limiter<A, C>>>;

/// What a [`Permit`] holds its [`Limiter`] by: `&Limiter`, `Arc<Limiter>`,
/// or any other type that derefs to a limiter. It is implemented for every
/// such type and can be implemented for no other: it is how a permit
/// dropped without a record gives its slot back.
pub trait Handle: sealed::Sealed + Sized {
    /// Give back the slot of `permit`, dropped without a record.
    #[doc(hidden)]
    fn release_unrecorded(permit: &mut Permit<Self>);
}

mod sealed {
    use super::*;

    /// Only a pointer to a limiter is a [`Handle`](super::Handle).
    #[allow(
        unreachable_pub,
        reason = "the seal of a public trait, named nowhere else"
    )]
    pub trait Sealed {}

    impl<L, A, C> Sealed for L where L: Deref<Target = Limiter<A, C>> {}
}

/// Whatever the limiter's policy and clock: the bounds that releasing a
/// slot needs are met where the limiter was built, which chose how
/// (`Limiter::release_unrecorded`), so that neither the permit type nor
/// the types that hold one (the tower layers' futures) carry them.
impl<L, A, C> Handle for L
where
    L: Deref<Target = Limiter<A, C>>,
{
    #[inline]
    fn release_unrecorded(permit: &mut Permit<Self>) {
        if let Some(ticket) = permit.ticket.take() {
            let limiter: &Limiter<A, C> = &permit.limiter;
            (limiter.release)(limiter, &ticket);
        }
    }
}

impl<L, A, C> Permit<L>
where
    L: Deref<Target = Limiter<A, C>>,
    A: Algorithm,
    C: Clock,
{
    /// The permit for a call admitted with `ticket` by `limiter` (told to
    /// its observer, if any): keeping its caller's own timeout unless it
    /// may be `cut_early`, else drawn into the share given the ceiling if
    /// the limiter learns its timeout.
    #[inline]
    pub(crate) fn new(limiter: L, ticket: Ticket, cut_early: bool) -> Self {
        let ticket = limiter.given_timeout(ticket, cut_early);
        limiter.observe_admit(&ticket);
        Permit {
            limiter,
            ticket: Some(ticket),
        }
    }

    /// The limiter this permit came from.
    pub fn limiter(&self) -> &L {
        &self.limiter
    }

    /// The dependency answered: record a success (a policy may still
    /// count it as slow) and release the slot.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// The dependency is unhealthy (a timeout, a 5xx, a refused
    /// connection): record an overload and release the slot.
    pub fn overload(self) {
        self.record(Outcome::Overload);
    }

    /// Not evidence about the dependency (a 4xx, a declined card):
    /// release the slot and teach the policy nothing.
    pub fn ignore(self) {
        self.record(Outcome::Ignore);
    }

    /// The attempt lost a hedge race: another attempt of the same call
    /// answered first, and this one is abandoned. Released as
    /// [`Outcome::Ignore`] (the policy learns nothing of it), while a
    /// [learned](crate::timeout) timeout and hedge delay count the time it
    /// ran, if at least the hedge delay, as a success at least that slow:
    /// the slow answers hedges cut short would otherwise vanish from what
    /// is learned, and the learned values fall below what the dependency
    /// takes.
    pub fn outrun(mut self) {
        if let Some(ticket) = self.ticket.take() {
            if let Some(start) = ticket.start {
                let now = self.limiter.clock().now();
                self.limiter
                    .tell_outrun(now, now.saturating_duration_since(start));
            }
            self.limiter.finish(&ticket, Outcome::Ignore);
        }
    }

    /// Record `outcome` and release the slot.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.limiter.finish(&ticket, outcome);
        }
    }

    /// One attempt of this call ended with `outcome`, and the call
    /// will try again under the same slot (a retry loop inside the
    /// permit): the policy learns from the attempt now, instead of
    /// hearing only how the whole call ended, and the slot stays
    /// held. An attempt is timed from the permit's admission, the
    /// previous [`record_attempt`](Self::record_attempt) or the
    /// latest [`start_attempt`](Self::start_attempt); call
    /// `start_attempt` when the retry goes out, so a backoff between
    /// attempts is not read as latency. The final
    /// [`record`](Self::record) (or [`success`](Self::success), …)
    /// reports the last attempt and releases the slot.
    ///
    /// A probe's first recorded attempt answers for the probe; the
    /// attempts after it are ordinary calls. Metrics observers count
    /// calls, not attempts: they hear only the final record.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::algorithms::{Aimd, AimdConfig, Outcome};
    /// use rheostat::{Limiter, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::builder(Aimd::new(AimdConfig::default())?).clock(clock.clone()).build()?;
    /// let mut permit = limiter.try_acquire()?;
    /// // The first attempt is turned away after 100 ms…
    /// clock.advance(Duration::from_millis(100));
    /// permit.record_attempt(Outcome::Overload);
    /// // …a one-second backoff, and the retry goes out…
    /// clock.advance(Duration::from_secs(1));
    /// permit.start_attempt();
    /// // …and succeeds in 100 ms: one slot held throughout, two
    /// // attempts learnt from, neither timed with the backoff.
    /// clock.advance(Duration::from_millis(100));
    /// permit.success();
    /// assert_eq!(limiter.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_attempt(&mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.as_mut() {
            self.limiter.attempt_ended(ticket, outcome);
        }
    }

    /// Another attempt of this call goes out now: time it from
    /// here. See [`record_attempt`](Self::record_attempt).
    pub fn start_attempt(&mut self) {
        if let Some(ticket) = self.ticket.as_mut() {
            self.limiter.restart(ticket);
        }
    }

    /// Whether this call was admitted as a trial call while a breaker
    /// is half-open. A probe should be given the [probe
    /// timeout](crate::timeout::Timeouts::probe): see
    /// [`timeout`](Self::timeout).
    pub fn is_probe(&self) -> bool {
        self.ticket.is_some_and(|t| t.probe())
    }

    /// The attempt timeout to give this call, `ordinary` being the
    /// timeout you would give it (the ceiling): the limiter's [probe
    /// timeout](crate::timeout::Timeouts::probe) for a probe (a breaker's
    /// `probe_timeout`, 30 s by default); where the limiter
    /// [learns](crate::timeout) its timeout, the learned one if lower
    /// (for all but the share of calls drawn at admission to get the
    /// ceiling, so that slower answers stay in view); `ordinary`
    /// otherwise. It is the same however often it is asked. This is
    /// what [`Limiter::call`] and the tower layers give a call; use it
    /// when you run the call yourself. Reading the probe timeout takes
    /// the policy's lock briefly, and only for a probe.
    ///
    /// A call admitted as not safe to cut early
    /// ([`Admission::cut_early`](crate::Admission::cut_early)`(false)`, or
    /// every call of a limiter whose learned timeout says
    /// [`cut_early`](crate::timeout::LearnedTimeout::cut_early)` = false`) is
    /// never given less than `ordinary`: no learned timeout, and a probe
    /// the longer of its probe timeout and `ordinary`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
    /// use rheostat::{Limiter, clock::ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::new(BreakerConfig::default())?;
    /// let limiter = Limiter::builder(breaker).clock(clock.clone()).build()?;
    /// let ordinary = Duration::from_millis(800);
    /// let permit = limiter.try_acquire()?;
    /// assert_eq!(permit.timeout(ordinary), ordinary);
    /// permit.success();
    ///
    /// // Ten failures in a row open it; after the 5 s cooldown the
    /// // next call is a probe, given the breaker's 30 s.
    /// for _ in 0..10 {
    ///     limiter.try_acquire()?.overload();
    /// }
    /// clock.advance(Duration::from_secs(5));
    /// let probe = limiter.try_acquire()?;
    /// assert!(probe.is_probe());
    /// assert_eq!(probe.timeout(ordinary), Duration::from_secs(30));
    /// probe.success();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A payment, which must not be cut before the caller's 5 s, keeps
    /// them once a much shorter timeout has been learned:
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, Limiter, clock::ManualClock, Timeout};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::builder(Fixed::new(10)?)
    ///     .clock(clock.clone())
    ///     .timeout(Timeout::learned(Duration::from_secs(15)))
    ///     .seed(1)
    ///     .build()?;
    /// for _ in 0..200 {
    ///     let permit = limiter.try_acquire()?;
    ///     clock.advance(Duration::from_millis(40));
    ///     permit.success();
    /// }
    /// let caller = Duration::from_secs(5);
    /// let search = limiter.try_acquire()?;
    /// assert!(search.timeout(caller) < Duration::from_millis(100));
    /// let payment = limiter.admission().cut_early(false).try_acquire()?;
    /// assert_eq!(payment.timeout(caller), caller);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout(&self, ordinary: Duration) -> Duration {
        match self.ticket {
            Some(t) if t.probe() => match self.limiter.probe_timeout() {
                Some(probe) if t.is_kept() || !self.limiter.cuts_early() => probe.max(ordinary),
                Some(probe) => probe,
                None => ordinary,
            },
            Some(t) if !t.is_uncut() && !t.is_kept() => self
                .limiter
                .learned_cut()
                .map_or(ordinary, |learned| learned.min(ordinary)),
            _ => ordinary,
        }
    }

    /// When the call was admitted, by the limiter's clock; `None`
    /// if the limiter did not read the clock for it (its policy
    /// does not time calls and no observer is set).
    pub fn started(&self) -> Option<Instant> {
        self.ticket.and_then(|t| t.start)
    }

    /// Calls in flight when this one was admitted, itself included
    /// (with slots parked per core, those parked on other cores too:
    /// see [`Sharding`](crate::limiter::Sharding)).
    pub fn in_flight_at_start(&self) -> u32 {
        self.ticket.map_or(0, |t| t.in_flight())
    }

    /// Run `call` under this permit, give it at most `timeout`, and
    /// record its outcome as `classify` says; a call that runs out of
    /// time is recorded as [`Outcome::Overload`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the permit, which records the
    /// limiter's drop outcome.
    ///
    /// # Errors
    ///
    /// [`CallError::TimedOut`], [`CallError::Failed`] with the call's
    /// error, or [`CallError::InvalidTimeout`] for a zero or
    /// over-a-year timeout (the permit is then released as ignored).
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    pub async fn run<F, T, E, K>(
        self,
        timeout: Duration,
        classify: K,
        call: F,
    ) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
        K: FnOnce(&Result<T, E>) -> Outcome,
    {
        if let Err(e) = check::duration("timeout", timeout) {
            self.ignore();
            return Err(CallError::InvalidTimeout(e));
        }
        match tokio::time::timeout(timeout, call).await {
            Err(_elapsed) => {
                self.overload();
                Err(CallError::TimedOut(timeout))
            }
            Ok(result) => {
                self.record(classify(&result));
                result.map_err(CallError::Failed)
            }
        }
    }
}

impl<L: Handle> Drop for Permit<L> {
    #[inline]
    fn drop(&mut self) {
        L::release_unrecorded(self);
    }
}

impl<L, A, C> fmt::Debug for Permit<L>
where
    L: Deref<Target = Limiter<A, C>>,
    A: Algorithm,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("limiter", &self.limiter.name())
            .field("probe", &self.is_probe())
            .field("in_flight_at_start", &self.in_flight_at_start())
            .finish()
    }
}
