//! The `Limiter`: one gate in front of one dependency.

mod attempt;

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::algorithms::{
    check, Algorithm, Batching, BreakerState, ConfigError, Feedback, Gate, Outcome, Quiet, Refusal,
    Sample, Snapshot, Transition,
};
use crate::clock::{Clock, SystemClock};
use crate::error::{CallError, RejectReason, Rejection};
use crate::gate::{AtomicGate, Packed, ALWAYS};
use crate::observe::Observer;
use crate::permit::{OwnedPermit, Permit, Ticket};
use crate::ready::ActiveProbe;
use crate::shards::{slots_of, Parked, Sharding, Shards, ONE_BATCHED, SLOTS};
use crate::sync::{
    AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Mutex, MutexGuard, Ordering,
    PoisonError,
};
use crate::wait::{QueueOrder, WaitQueue};

/// Most waiters a queue may be configured to hold.
pub const MAX_WAITERS: usize = 1 << 20;

type TransitionHook = Box<dyn Fn(&Transition) + Send + Sync>;

/// Batched successes at which the finishing call hands them over itself.
const BATCH_FLUSH: u64 = 1 << 31;

/// A value that starts a cache line of its own, so that two cores writing
/// it do not also invalidate each other's copy of the read-mostly fields
/// beside it (the gate, above all): on two threads, isolating the in-flight
/// count and the policy took the aggregate rate of `Fixed` from 0.35× to
/// 0.56× of one thread's, and of `Aimd` from 0.49× to 0.76×.
#[repr(align(64))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The in-flight word and, once set up, the shards that park released
/// slots beside it (see `shards.rs`). The shards' handle is read by every
/// admission and release, as the word is: on the same line, it costs no
/// second line.
struct Slots {
    word: AtomicU64,
    shards: OnceLock<Shards>,
}

impl std::ops::Deref for Slots {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.word
    }
}

/// A limiter that chooses its policy at run time.
pub type DynLimiter<C = SystemClock> = Limiter<Box<dyn Algorithm>, C>;

/// One gate in front of one dependency: decides, call by call, whether a call
/// may go, and learns from how each call ends.
///
/// The policy `A` (a [`Fixed`](crate::algorithms::Fixed) bulkhead, an
/// [`Aimd`](crate::algorithms::Aimd) limit, or a `Box<dyn Algorithm>` chosen at
/// run time) publishes a [`Gate`]; the limiter enforces it without taking a
/// lock — an atomic in-flight count against the published limit, and a fast
/// random draw against the admit probability. Only recording a finished call
/// locks the policy, and only if the policy learns from it: the limiter
/// reads the clock and takes the lock no more than the policy's
/// [`Feedback`] asks (a [`Fixed`](crate::algorithms::Fixed) bulkhead needs
/// neither).
///
/// # Examples
///
/// ```
/// use rheostat::{algorithms::Fixed, Limiter};
///
/// let limiter = Limiter::new(Fixed::new(2)?);
/// let a = limiter.try_acquire()?;
/// let b = limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err()); // two in flight: the third is refused
/// a.success();
/// b.overload();
/// assert_eq!(limiter.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Limiter<A = Box<dyn Algorithm>, C = SystemClock> {
    gate: AtomicGate,
    /// Calls in flight (the low 32 bits) and, above them, successes counted
    /// for the policy but not yet handed over: one word, so that a batched
    /// success gives back its slot and counts itself in one atomic step.
    slots: Line<Slots>,
    /// Successes finishing before this many nanoseconds after `epoch` may be
    /// batched: 0 for none, `u64::MAX` for all.
    batch_until: AtomicU64,
    /// The policy's [`Quiet`] successes in one word: the most calls in
    /// flight at admission (the high 32 bits; 0 for none) and the longest
    /// latency in whole microseconds (rounded down, at most `u32::MAX`).
    quiet: AtomicU64,
    /// The policy's [`Feedback`] (as `u8`), raised to `Timed` while an
    /// observer is set.
    feedback: AtomicU8,
    /// Counts the events at which the policy reported transitions; a call
    /// admitted before the latest is stale when it finishes.
    generation: AtomicU32,
    /// Nanoseconds after `epoch` at which the gate must be re-evaluated;
    /// `u64::MAX` for never.
    until: AtomicU64,
    /// Local rejections not yet told to the policy.
    rejected: AtomicU64,
    /// Four 16-bit indices into `members`, one per [`Refusal`].
    culprits: AtomicU64,
    rng: AtomicU64,
    policy: Line<Mutex<A>>,
    clock: C,
    epoch: Instant,
    members: Box<[&'static str]>,
    pub(crate) waiters: WaitQueue,
    /// Notified when the published gate changes while someone waits for
    /// readiness.
    pub(crate) changed: tokio::sync::Notify,
    pub(crate) ready_waiters: AtomicUsize,
    /// Set while an active probe is running.
    pub(crate) probing: AtomicBool,
    options: Options,
    observer: Option<Box<dyn Observer>>,
}

/// How a [`Limiter`] queues, waits and treats unrecorded permits.
#[derive(Debug)]
struct Options {
    name: Cow<'static, str>,
    order: QueueOrder,
    max_waiters: usize,
    on_drop: Outcome,
    sharding: Sharding,
    /// Options most limiters leave unset, out of line: a limiter that sets
    /// none of them does not carry their space.
    rare: Option<Box<Rare>>,
}

#[derive(Default)]
struct Rare {
    max_wait: Option<Duration>,
    active_probe: Option<ActiveProbe>,
    on_transition: Option<TransitionHook>,
}

impl Options {
    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    fn max_wait(&self) -> Option<Duration> {
        self.rare.as_ref().and_then(|r| r.max_wait)
    }

    fn active_probe(&self) -> Option<&ActiveProbe> {
        self.rare.as_ref().and_then(|r| r.active_probe.as_ref())
    }

    fn on_transition(&self) -> Option<&TransitionHook> {
        self.rare.as_ref().and_then(|r| r.on_transition.as_ref())
    }
}

impl fmt::Debug for Rare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rare")
            .field("max_wait", &self.max_wait)
            .field("active_probe", &self.active_probe)
            .field("on_transition", &self.on_transition.is_some())
            .finish()
    }
}

/// Builds a [`Limiter`] with non-default options.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::{Aimd, AimdConfig}, Limiter, Outcome, QueueOrder};
///
/// let limiter = Limiter::builder(Aimd::new(AimdConfig::default())?)
///     .name("payments")
///     .queue(QueueOrder::Lifo, 64)
///     .max_wait(Duration::from_millis(200))
///     .on_drop(Outcome::Ignore)
///     .build()?;
/// assert_eq!(limiter.name(), "payments");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder<A, C = SystemClock> {
    policy: A,
    clock: C,
    options: Options,
    seed: u64,
    observer: Option<Box<dyn Observer>>,
    /// Observers made at [`Builder::build`], with the final name and the
    /// policy's starting breaker state, so that the order of the builder's
    /// calls does not matter (`.metrics().name("x")` labels `x`).
    named: Vec<NamedObserver>,
}

/// Makes an observer from the limiter's name and its policy's breaker state.
pub(crate) type NamedObserver =
    Box<dyn FnOnce(&str, Option<BreakerState>) -> Box<dyn Observer> + Send>;

impl<A: Algorithm> Builder<A, SystemClock> {
    fn new(policy: A) -> Self {
        Builder {
            policy,
            clock: SystemClock,
            options: Options {
                name: Cow::Borrowed("default"),
                order: QueueOrder::Fifo,
                max_waiters: 1024,
                on_drop: Outcome::Ignore,
                sharding: Sharding::OnContention,
                rare: None,
            },
            seed: 0x0005_EED0_F4E0_57A7,
            observer: None,
            named: Vec::new(),
        }
    }
}

impl<A: Algorithm, C: Clock> Builder<A, C> {
    /// Read time from `clock` instead of the system clock.
    pub fn clock<D: Clock>(self, clock: D) -> Builder<A, D> {
        Builder {
            policy: self.policy,
            clock,
            options: self.options,
            seed: self.seed,
            observer: self.observer,
            named: self.named,
        }
    }

    /// A name for logs and metric labels (default `"default"`).
    #[must_use]
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.options.name = name.into();
        self
    }

    /// The order in which waiters are served and how many may wait
    /// (default FIFO, 1024). With 0, [`Limiter::acquire`] never waits.
    #[must_use]
    pub fn queue(mut self, order: QueueOrder, max_waiters: usize) -> Self {
        self.options.order = order;
        self.options.max_waiters = max_waiters;
        self
    }

    /// The longest [`Limiter::acquire`] waits for a slot (default: no limit).
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.options.rare_mut().max_wait = Some(max_wait);
        self
    }

    /// What a permit dropped without a recorded outcome counts as (default
    /// [`Outcome::Ignore`]: a cancelled call is not evidence about the
    /// dependency). Choose [`Outcome::Overload`] if your callers drop permits
    /// only when they give up on a hung call.
    #[must_use]
    pub fn on_drop(mut self, outcome: Outcome) -> Self {
        self.options.on_drop = outcome;
        self
    }

    /// Whether released slots are parked per core (default
    /// [`Sharding::OnContention`]): on many threads, calls then stop all
    /// writing one shared word. See [`Sharding`].
    #[must_use]
    pub fn sharding(mut self, sharding: Sharding) -> Self {
        self.options.sharding = sharding;
        self
    }

    /// While the gate is half-open, run `check` as the probe instead of
    /// gambling user calls: user calls are refused as
    /// [`RejectReason::Open`] until the breaker decides, and `check` is run
    /// (with at most `timeout`) by [`Limiter::wait_ready`] callers or by
    /// [`Limiter::drive`]. Its outcome is recorded as the probe's.
    #[must_use]
    pub fn active_probe<F, Fut>(mut self, timeout: Duration, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        self.options.rare_mut().active_probe = Some(ActiveProbe::new(timeout, check));
        self
    }

    /// Seed for the draw against the admit probability, so a run in virtual
    /// time is reproducible.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Call `hook` on every state transition the policy reports (a breaker
    /// opening, closing, …), outside the policy's lock.
    #[must_use]
    pub fn on_transition(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.options.rare_mut().on_transition = Some(Box::new(hook));
        self
    }

    fn default_build(self) -> Limiter<A, C> {
        match self.build() {
            Ok(limiter) => limiter,
            Err(_) => unreachable!("default limiter options are valid"),
        }
    }

    /// Tell `observer` about every admission, rejection, finished call, gate
    /// change and transition (metrics, logs, traces).
    #[must_use]
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observer = Some(Box::new(observer));
        self
    }

    /// Add an observer made at [`Builder::build`] from the limiter's name
    /// and its policy's starting breaker state, beside any other.
    #[cfg_attr(
        not(any(feature = "metrics", feature = "tracing")),
        allow(dead_code, reason = "used by the optional observers")
    )]
    pub(crate) fn observe_named(mut self, make: NamedObserver) -> Self {
        self.named.push(make);
        self
    }

    /// Build the limiter.
    ///
    /// # Errors
    ///
    /// `limiter.max_waiters` above [`MAX_WAITERS`]; `limiter.max_wait` zero or
    /// above a year.
    pub fn build(mut self) -> Result<Limiter<A, C>, ConfigError> {
        if self.options.max_waiters > MAX_WAITERS {
            return Err(ConfigError::new(
                "limiter.max_waiters",
                self.options.max_waiters,
                format!("a whole number in [0, {MAX_WAITERS}]"),
            ));
        }
        if let Some(wait) = self.options.max_wait() {
            check::duration("limiter.max_wait", wait)?;
        }
        if let Some(probe) = self.options.active_probe() {
            check::duration("limiter.active_probe.timeout", probe.timeout)?;
        }
        let state = self.policy.snapshot().state;
        for make in std::mem::take(&mut self.named) {
            let observer = make(&self.options.name, state);
            self.observer = Some(match self.observer.take() {
                Some(previous) => Box::new((previous, observer)),
                None => observer,
            });
        }
        let epoch = self.clock.now();
        let gate = self.policy.gate();
        let members = self.policy.members().into_boxed_slice();
        let limiter = Limiter {
            gate: AtomicGate::new(&gate),
            slots: Line(Slots {
                word: AtomicU64::new(0),
                shards: match self.options.sharding {
                    Sharding::Always => OnceLock::from(Shards::new(Sharding::Always)),
                    _ => OnceLock::new(),
                },
            }),
            batch_until: AtomicU64::new(0),
            quiet: AtomicU64::new(0),
            feedback: AtomicU8::new(Feedback::Timed as u8),
            generation: AtomicU32::new(0),
            until: AtomicU64::new(u64::MAX),
            rejected: AtomicU64::new(0),
            culprits: AtomicU64::new(0),
            rng: AtomicU64::new(self.seed),
            waiters: WaitQueue::new(self.options.order),
            changed: tokio::sync::Notify::new(),
            ready_waiters: AtomicUsize::new(0),
            probing: AtomicBool::new(false),
            policy: Line(Mutex::new(self.policy)),
            clock: self.clock,
            epoch,
            members,
            options: self.options,
            observer: self.observer,
        };
        {
            let policy = limiter.lock();
            limiter.publish(&policy);
            if let Some(observer) = &limiter.observer {
                observer.gate_changed(&policy.gate().sanitized());
            }
        }
        Ok(limiter)
    }
}

impl<A: Algorithm> Limiter<A, SystemClock> {
    /// A limiter with `policy`, the system clock and default options.
    pub fn new(policy: A) -> Self {
        Limiter::builder(policy).default_build()
    }

    /// Start building a limiter with `policy`.
    pub fn builder(policy: A) -> Builder<A, SystemClock> {
        Builder::new(policy)
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// A limiter with `policy`, reading time from `clock`, with default
    /// options.
    pub fn with_clock(policy: A, clock: C) -> Self {
        Builder::new(policy).clock(clock).default_build()
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// The clock the limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Calls in flight now. With slots parked per core (see [`Sharding`]),
    /// it is read from more than one word: while other threads start and
    /// finish calls, it may count a call that finished, or miss one that
    /// started, while it reads.
    pub fn in_flight(&self) -> u32 {
        let taken = slots_of(self.slots.load(Ordering::SeqCst));
        match self.slots.shards.get() {
            Some(shards) => taken.saturating_sub(shards.parked()),
            None => taken,
        }
    }

    /// The gate being enforced now, read without a lock: what the next
    /// admission will be held to. A gate whose time has come (an open
    /// breaker whose cooldown is over) is re-evaluated first, as an
    /// admission would, so that it reads half-open with its probe limit, not
    /// shut with a limit of 0.
    ///
    /// The limit binds admissions: no call is admitted that would take the
    /// calls in flight above the gate it was admitted under. A gate may
    /// still read below the calls in flight (a limit just cut; a half-open
    /// breaker whose probes are all out shuts until they answer).
    ///
    /// [`Gate::max_in_flight`] is `None` when the gate sets no concurrency
    /// limit (a throttle, a closed breaker alone).
    pub fn gate(&self) -> Gate {
        self.refresh_if_due(self.clock.now());
        let packed = self.gate.load();
        let until = match self.until.load(Ordering::SeqCst) {
            u64::MAX => None,
            n => self.epoch.checked_add(Duration::from_nanos(n)),
        };
        Gate {
            limit: packed.limit(),
            admit_probability: packed.admit_probability(),
            probe: packed.probe(),
            until,
        }
    }

    /// A view of the policy (locks it briefly, first handing it any
    /// successes counted for it without its lock).
    pub fn snapshot(&self) -> Snapshot {
        self.update(|policy| policy.snapshot())
    }

    /// Run `f` on the policy — to change a fixed limit, force a breaker
    /// open, swap a boxed policy — then publish its new gate and wake any
    /// waiter it lets through. Calls already in flight finish normally and are
    /// reported to the policy as it is when they finish.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::{algorithms::Fixed, Limiter};
    ///
    /// let limiter = Limiter::new(Fixed::new(1)?);
    /// limiter.update(|fixed| fixed.set_limit(3))?;
    /// assert_eq!(limiter.gate().limit, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update<R>(&self, f: impl FnOnce(&mut A) -> R) -> R {
        self.update_at(self.clock.now(), f)
    }

    fn update_at<R>(&self, now: Instant, f: impl FnOnce(&mut A) -> R) -> R {
        let (result, transitions) = {
            let mut policy = self.lock();
            self.catch_up(&mut policy, now);
            let result = f(&mut policy);
            let transitions = self.drain(&mut policy);
            self.publish(&policy);
            (result, transitions)
        };
        self.report(transitions);
        self.wake_waiters();
        result
    }

    /// The attempt timeout a call admitted as a probe is given: the
    /// policy's [`Algorithm::probe_timeout`] (a breaker's
    /// [`probe_timeout`](crate::algorithms::breaker::BreakerConfig::probe_timeout),
    /// 30 s by default, after which it counts an unreported probe as
    /// failed); `None` if the policy never probes. [`Limiter::call`], the
    /// tower layer and [`Permit::timeout`] give it to probes in place of the
    /// caller's ordinary timeout, so that a dependency coming back slowly
    /// is not shut out by a probe held to the ordinary short timeout.
    /// Takes the policy's lock briefly.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
    /// use rheostat::{algorithms::Fixed, Limiter};
    ///
    /// let breaker = Limiter::new(Breaker::new(BreakerConfig::default())?);
    /// assert_eq!(breaker.probe_timeout(), Some(Duration::from_secs(30)));
    /// assert_eq!(Limiter::new(Fixed::new(8)?).probe_timeout(), None);
    /// # Ok::<(), rheostat::ConfigError>(())
    /// ```
    pub fn probe_timeout(&self) -> Option<Duration> {
        self.lock().probe_timeout()
    }

    /// The next instant at which the gate changes by itself (an open
    /// breaker's cooldown ending), if any. [`Limiter::try_acquire`] applies
    /// such changes lazily; a driver that wants them applied with no traffic
    /// calls [`Limiter::handle_timeout`] then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.gate().until
    }

    /// Apply the policy's time-driven changes due by now.
    pub fn handle_timeout(&self) {
        let now = self.clock.now();
        self.refresh(now);
    }

    /// Take a slot now or fail at once with the reason.
    ///
    /// # Errors
    ///
    /// A [`Rejection`] saying why: [`RejectReason::LimitReached`],
    /// [`RejectReason::Throttled`] or [`RejectReason::Open`] (with the time
    /// until the next probe, where known).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::{algorithms::Fixed, Limiter, RejectReason};
    ///
    /// let limiter = Limiter::new(Fixed::new(1)?);
    /// let permit = limiter.try_acquire()?;
    /// let refused = limiter.try_acquire().unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::LimitReached);
    /// drop(permit);
    /// assert!(limiter.try_acquire().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_, A, C>, Rejection> {
        let admitted = if self.feedback() == Feedback::Timed {
            self.admit(self.clock.now(), true, false)
        } else {
            self.admit_untimed()
        };
        self.permit(admitted)
    }

    /// The permit for an admission, or the rejection, counted.
    #[inline]
    fn permit(&self, admitted: Result<Ticket, Rejection>) -> Result<Permit<'_, A, C>, Rejection> {
        match admitted {
            Ok(ticket) => Ok(Permit::new(self, ticket)),
            Err(rejection) => {
                self.count_rejection(&rejection);
                Err(rejection)
            }
        }
    }

    /// [`Limiter::try_acquire`], with a permit that owns a handle to the
    /// limiter, for spawned tasks.
    ///
    /// # Errors
    ///
    /// As [`Limiter::try_acquire`].
    pub fn try_acquire_owned(self: &Arc<Self>) -> Result<OwnedPermit<A, C>, Rejection> {
        self.try_acquire()
            .map(|permit| permit.into_owned(Arc::clone(self)))
    }

    /// Take a slot, waiting in the queue up to the configured maximum wait if
    /// the limit is reached.
    ///
    /// A throttled call and an open gate are refused at once, never queued:
    /// waiting would hold the caller's worker for a dependency that has said
    /// it cannot serve. (A bulk consumer that wants to pause instead uses the
    /// breaker's readiness wait.)
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe. Dropping the future leaves the queue; a slot handed to it
    /// in the meantime goes back to the limiter and to the next waiter.
    ///
    /// # Errors
    ///
    /// [`RejectReason::QueueFull`] at once if the queue is full,
    /// [`RejectReason::TimedOut`] if no slot came free in time, or any
    /// rejection of [`Limiter::try_acquire`] other than the limit.
    ///
    /// # Panics
    ///
    /// If a maximum wait is configured and this is polled outside a Tokio
    /// runtime with the time driver enabled (as `tokio::time::sleep` does).
    pub async fn acquire(&self) -> Result<Permit<'_, A, C>, Rejection> {
        self.wait_for_slot(self.options.max_wait()).await
    }

    /// [`Limiter::acquire`], waiting at most `max_wait` (0: do not wait).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe, as [`Limiter::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Limiter::acquire`].
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, Limiter, RejectReason};
    ///
    /// let limiter = Limiter::new(Fixed::new(1)?);
    /// let held = limiter.acquire().await?;
    /// let waited = limiter.acquire_timeout(Duration::from_millis(10)).await;
    /// assert_eq!(waited.unwrap_err().reason(), RejectReason::TimedOut);
    /// held.success();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_timeout(&self, max_wait: Duration) -> Result<Permit<'_, A, C>, Rejection> {
        self.wait_for_slot(Some(max_wait)).await
    }

    /// [`Limiter::acquire`], with an owned permit for spawned tasks.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe, as [`Limiter::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Limiter::acquire`].
    ///
    /// # Panics
    ///
    /// As [`Limiter::acquire`].
    pub async fn acquire_owned(self: Arc<Self>) -> Result<OwnedPermit<A, C>, Rejection> {
        let ticket = self.wait_for_slot(self.options.max_wait()).await?.detach();
        Ok(OwnedPermit::new(self, ticket))
    }

    /// [`Limiter::acquire_timeout`], with an owned permit for spawned tasks.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe, as [`Limiter::acquire`].
    ///
    /// # Errors
    ///
    /// As [`Limiter::acquire`].
    ///
    /// # Panics
    ///
    /// As [`Limiter::acquire_timeout`].
    pub async fn acquire_timeout_owned(
        self: Arc<Self>,
        max_wait: Duration,
    ) -> Result<OwnedPermit<A, C>, Rejection> {
        let ticket = self.wait_for_slot(Some(max_wait)).await?.detach();
        Ok(OwnedPermit::new(self, ticket))
    }

    /// Run `call` under a permit taken with [`Limiter::try_acquire`], give it
    /// at most `timeout`, and record its outcome as `classify` says. A call
    /// that runs out of time is recorded as [`Outcome::Overload`]. A call
    /// admitted as a probe is given the [probe
    /// timeout](Limiter::probe_timeout) instead (see [`Permit::timeout`]);
    /// to choose a probe's timeout yourself, take the permit with
    /// [`Limiter::try_acquire`] and use [`Permit::run`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the permit, which records the limiter's
    /// drop outcome (by default [`Outcome::Ignore`]).
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] if refused, [`CallError::TimedOut`],
    /// [`CallError::Failed`] with the call's own error, or
    /// [`CallError::InvalidTimeout`] for a zero or over-a-year timeout.
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, CallError, Limiter, Outcome};
    ///
    /// #[derive(Debug)]
    /// enum HttpError { Status(u16) }
    ///
    /// // 5xx is the dependency's fault; 4xx is ours and teaches nothing.
    /// let classify = |r: &Result<&str, HttpError>| match r {
    ///     Ok(_) => Outcome::Success,
    ///     Err(HttpError::Status(s)) if *s >= 500 => Outcome::Overload,
    ///     Err(_) => Outcome::Ignore,
    /// };
    /// let limiter = Limiter::new(Fixed::new(10).unwrap());
    /// let body = limiter
    ///     .call(Duration::from_secs(1), classify, async { Ok("hello") })
    ///     .await
    ///     .unwrap();
    /// assert_eq!(body, "hello");
    ///
    /// let hung = limiter
    ///     .call(Duration::from_millis(5), classify, std::future::pending())
    ///     .await;
    /// assert!(matches!(hung, Err(CallError::TimedOut(_))));
    /// # }
    /// ```
    pub async fn call<F, T, E, K>(
        &self,
        timeout: Duration,
        classify: K,
        call: F,
    ) -> Result<T, CallError<E>>
    where
        F: Future<Output = Result<T, E>>,
        K: FnOnce(&Result<T, E>) -> Outcome,
    {
        let permit = self.try_acquire().map_err(CallError::Rejected)?;
        let timeout = permit.timeout(timeout);
        permit.run(timeout, classify, call).await
    }

    // ----- the hot path -------------------------------------------------

    #[inline]
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    #[inline]
    fn draw(&self) -> u32 {
        // splitmix64 over an atomic counter: lock-free and, for one caller,
        // reproducible from the seed.
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut z = self
            .rng
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        #[allow(clippy::cast_possible_truncation, reason = "take the high half")]
        let high = (z >> 32) as u32;
        high
    }

    /// Admit one call at `now` or say why not. `draw` is false for a waiter
    /// being handed a slot: it was already drawn for when it arrived.
    /// `prober` is true only for the limiter's own active probe.
    #[inline]
    pub(crate) fn admit(
        &self,
        now: Instant,
        draw: bool,
        prober: bool,
    ) -> Result<Ticket, Rejection> {
        self.refresh_if_due(now);
        let gate = self.gate.load();
        if gate.limit() == 0 {
            return Err(self.reject(RejectReason::Open, Refusal::Shut, now));
        }
        if gate.probe() {
            return self.admit_probe(now, draw, prober);
        }
        if draw && gate.admit() != ALWAYS && self.draw() >= gate.admit() {
            return Err(self.reject(RejectReason::Throttled, Refusal::Throttle, now));
        }
        match self.take_slot(gate.limit()) {
            Some(in_flight) => Ok(Ticket::new(Some(now), in_flight, false, self.generation())),
            None => Err(self.reject(RejectReason::LimitReached, Refusal::Limit, now)),
        }
    }

    /// [`Limiter::admit`] without reading the clock, for a policy that does
    /// not time calls. Falls back to the timed path for anything that needs
    /// the time: a gate that expires, a shut gate (its retry-after), a probe.
    #[inline]
    fn admit_untimed(&self) -> Result<Ticket, Rejection> {
        let gate = self.gate.load();
        if gate.limit() == 0 || gate.probe() || self.until.load(Ordering::SeqCst) != u64::MAX {
            return self.admit(self.clock.now(), true, false);
        }
        if gate.admit() != ALWAYS && self.draw() >= gate.admit() {
            return Err(self.rejection(RejectReason::Throttled));
        }
        match self.take_slot(gate.limit()) {
            Some(in_flight) => Ok(Ticket::new(None, in_flight, false, self.generation())),
            None => Err(self.rejection(RejectReason::LimitReached)),
        }
    }

    /// [`Limiter::try_acquire`] with the admission time always read, for
    /// callers that measure latency themselves (the tower layer's
    /// classifier).
    #[cfg_attr(
        not(feature = "tower"),
        allow(dead_code, reason = "used by the tower layer")
    )]
    pub(crate) fn try_acquire_timed(&self) -> Result<Permit<'_, A, C>, Rejection> {
        self.permit(self.admit(self.clock.now(), true, false))
    }

    /// How many times the policy has reported transitions (wrapping).
    #[inline]
    fn generation(&self) -> u32 {
        self.generation.load(Ordering::SeqCst)
    }

    #[inline]
    fn feedback(&self) -> Feedback {
        match self.feedback.load(Ordering::Relaxed) {
            0 => Feedback::Nothing,
            1 => Feedback::Outcomes,
            _ => Feedback::Timed,
        }
    }

    /// Take a slot if fewer than `limit` are taken; returns the slots taken
    /// then, this one included (with parked slots, an over-estimate of the
    /// calls in flight by at most the slots parked on other shards).
    #[inline]
    fn take_slot(&self, limit: u32) -> Option<u32> {
        if let Some(shards) = self.slots.shards.get() {
            if shards.unpark() {
                let taken = slots_of(self.slots.load(Ordering::SeqCst));
                if taken <= limit {
                    return Some(taken);
                }
                // The limit fell below the slots taken: this one goes back.
                self.slots.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let mut current = self.slots.load(Ordering::SeqCst);
        let mut drained = false;
        loop {
            let in_flight = slots_of(current);
            if in_flight >= limit {
                if !drained && self.drain_parked() {
                    // Slots parked on other shards are free: count them
                    // as such and look again, once.
                    drained = true;
                    current = self.slots.load(Ordering::SeqCst);
                    continue;
                }
                return None;
            }
            // Below the limit, at most `MAX_LIMIT`: adding one never carries
            // into the batched successes.
            match self.slots.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Some(in_flight + 1),
                Err(actual) => {
                    if actual != current {
                        self.contended();
                    }
                    current = actual;
                }
            }
        }
    }

    /// Another thread took or gave back a slot between our read and our
    /// write: set the shards up, if the options say so.
    ///
    /// Not under loom: `std`'s `OnceLock` publishes the shards, and loom,
    /// which cannot see that ordering, would report their first use on
    /// another thread as a race. The loom models park with
    /// [`Sharding::Always`], whose shards exist before any thread starts.
    #[cold]
    fn contended(&self) {
        if cfg!(not(rheostat_loom))
            && self.options.sharding == Sharding::OnContention
            && self.slots.shards.get().is_none()
        {
            let _ = self.slots.shards.set(Shards::new(Sharding::OnContention));
        }
    }

    /// Give every parked slot back to the shared count; whether there were
    /// any.
    fn drain_parked(&self) -> bool {
        let Some(shards) = self.slots.shards.get() else {
            return false;
        };
        let parked = shards.drain();
        if parked == 0 {
            return false;
        }
        self.slots.fetch_sub(u64::from(parked), Ordering::SeqCst);
        true
    }

    /// A probe gate: every admission is counted by the policy under its lock.
    #[cold]
    fn admit_probe(&self, now: Instant, draw: bool, prober: bool) -> Result<Ticket, Rejection> {
        if self.options.active_probe().is_some() && !prober {
            // The health check probes; user calls are not gambled.
            return Err(self.reject(RejectReason::Open, Refusal::Probe, now));
        }
        let mut policy = self.lock();
        let gate = self.gate.load();
        if gate.limit() == 0 {
            drop(policy);
            return Err(self.reject(RejectReason::Open, Refusal::Shut, now));
        }
        if draw && gate.admit() != ALWAYS && self.draw() >= gate.admit() {
            drop(policy);
            return Err(self.reject(RejectReason::Throttled, Refusal::Throttle, now));
        }
        let Some(in_flight) = self.take_slot(gate.limit()) else {
            drop(policy);
            return Err(self.reject(RejectReason::LimitReached, Refusal::Limit, now));
        };
        let probe = gate.probe();
        if !policy.on_admit(now) {
            self.slots.fetch_sub(1, Ordering::SeqCst);
            let transitions = self.drain(&mut policy);
            self.publish(&policy);
            drop(policy);
            self.report(transitions);
            return Err(self.reject(RejectReason::Open, Refusal::Probe, now));
        }
        let transitions = self.drain(&mut policy);
        self.publish(&policy);
        drop(policy);
        self.report(transitions);
        Ok(Ticket::new(Some(now), in_flight, probe, self.generation()))
    }

    fn reject(&self, reason: RejectReason, refusal: Refusal, now: Instant) -> Rejection {
        let retry_after = if reason == RejectReason::Open {
            match self.until.load(Ordering::SeqCst) {
                u64::MAX => None,
                until => Some(Duration::from_nanos(until.saturating_sub(self.nanos(now)))),
            }
        } else {
            None
        };
        let policy = self.culprit(refusal);
        Rejection::new(ramping(reason, policy), policy, retry_after)
    }

    /// The policy whose gate refused, by the kind of refusal.
    fn culprit(&self, refusal: Refusal) -> &'static str {
        let shift = match refusal {
            Refusal::Shut => 0,
            Refusal::Limit => 16,
            Refusal::Throttle => 32,
            Refusal::Probe => 48,
        };
        let index = usize::from(((self.culprits.load(Ordering::Relaxed) >> shift) & 0xFFFF) as u16);
        self.members.get(index).copied().unwrap_or("unknown")
    }

    pub(crate) fn count_rejection(&self, rejection: &Rejection) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = &self.observer {
            observer.rejected(rejection);
        }
    }

    #[inline]
    pub(crate) fn observe_admit(&self, ticket: &Ticket) {
        if let Some(observer) = &self.observer {
            observer.admitted(ticket.in_flight(), ticket.probe());
        }
    }

    pub(crate) fn rejection(&self, reason: RejectReason) -> Rejection {
        let refusal = match reason {
            RejectReason::Open => Refusal::Shut,
            RejectReason::Throttled => Refusal::Throttle,
            _ => Refusal::Limit,
        };
        let policy = self.culprit(refusal);
        Rejection::new(ramping(reason, policy), policy, None)
    }

    // ----- the locked side ----------------------------------------------

    fn lock(&self) -> MutexGuard<'_, A> {
        // A policy that panicked mid-update is still the best information we
        // have; a poisoned lock must not take the caller down with it.
        self.policy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Record the end of an admitted call and release its slot. What needs
    /// no clock is done here, inline; the rest in
    /// [`Limiter::finish_timed`].
    #[inline(always)]
    pub(crate) fn finish(&self, ticket: &Ticket, outcome: Outcome) {
        let feedback = self.feedback();
        if feedback == Feedback::Nothing && self.until.load(Ordering::SeqCst) == u64::MAX {
            // The policy learns nothing from it, and no observer is set (an
            // observer raises the feedback to `Timed`).
            self.release_slot();
            return;
        }
        let batchable = outcome == Outcome::Success
            && ticket.start.is_none()
            && !ticket.probe()
            && ticket.generation == self.generation();
        let batch_until = if batchable {
            self.batch_until.load(Ordering::SeqCst)
        } else {
            0
        };
        if batch_until == u64::MAX {
            // Batched whenever it finishes: no need to know when.
            self.finish_batched();
            return;
        }
        self.finish_timed(ticket, outcome, feedback, batch_until);
    }

    /// [`Limiter::finish`] for a call the policy may learn from: read the
    /// clock, then batch it, let it pass as quiet, or hand it over.
    #[inline(never)]
    fn finish_timed(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        feedback: Feedback,
        batch_until: u64,
    ) {
        let now = self.clock.now();
        if batch_until != 0 && self.nanos(now) < batch_until {
            self.finish_batched();
            return;
        }
        let latency = ticket
            .start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
        let quiet = self.quiet.load(Ordering::SeqCst);
        if outcome == Outcome::Success
            && !ticket.probe()
            && u64::from(ticket.in_flight()) <= quiet >> 32
        {
            // Rounded up, against a bound rounded down: never quiet by
            // rounding.
            let micros = latency
                .as_secs()
                .saturating_mul(1_000_000)
                .saturating_add(u64::from(latency.subsec_nanos().div_ceil(1_000)));
            if micros <= quiet & 0xFFFF_FFFF {
                // It would change nothing: the policy is not told.
                self.release_slot();
                if let Some(observer) = &self.observer {
                    observer.finished(outcome, latency, self.in_flight());
                }
                return;
            }
        }
        self.finish_locked(ticket, outcome, latency, feedback, now);
    }

    /// Hand a finished call to the policy, under its lock.
    #[inline(never)]
    fn finish_locked(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        latency: Duration,
        feedback: Feedback,
        now: Instant,
    ) {
        // Admitted untimed, and the policy has come to need latency since (a
        // policy swapped by `update`): not evidence.
        let outcome = if ticket.start.is_none() && feedback == Feedback::Timed {
            Outcome::Ignore
        } else {
            outcome
        };
        let transitions = self.learn(ticket, outcome, latency, now);
        self.release_slot();
        if let Some(observer) = &self.observer {
            observer.finished(outcome, latency, self.in_flight());
        }
        self.report(transitions);
    }

    /// Tell the policy how one call (or one attempt of it) went, under its
    /// lock, and publish what it makes of it.
    fn learn(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) -> Vec<Transition> {
        let sample = Sample::new(outcome, latency, ticket.in_flight())
            // Counted as at admission (slots parked on other cores
            // included): one load, not a walk over the shards.
            .with_in_flight_at_finish(slots_of(self.slots.load(Ordering::Relaxed)))
            .with_probe(ticket.probe())
            .with_stale(ticket.generation != self.generation());
        let mut policy = self.lock();
        self.catch_up(&mut policy, now);
        policy.on_sample(now, &sample);
        let mut due = policy.poll_timeout();
        if due.is_some_and(|t| t <= now) {
            policy.handle_timeout(now);
            due = policy.poll_timeout();
        }
        let transitions = self.drain(&mut policy);
        self.publish_with(&policy, due);
        transitions
    }

    /// Give back the slot of a success the policy lets us count for it
    /// without its lock.
    #[inline]
    fn finish_batched(&self) {
        // Only an untimed call is batched, and no call is untimed while an
        // observer is set: there is no one to tell.
        let batched = if let Some(parked) = self.park(1) {
            self.after_parking(&parked);
            parked.batched
        } else {
            let before = self.slots.fetch_add(ONE_BATCHED - 1, Ordering::SeqCst);
            self.wake_waiters();
            before >> 32
        };
        if batched >= BATCH_FLUSH {
            // Hand the batch over long before the count could overflow.
            self.update(|_| ());
        }
    }

    /// Give back a slot without a sample (a waiter that was handed a slot and
    /// then cancelled, or a probe the policy refused).
    #[inline]
    pub(crate) fn release_slot(&self) {
        if let Some(parked) = self.park(0) {
            self.after_parking(&parked);
            return;
        }
        self.slots.fetch_sub(1, Ordering::SeqCst);
        self.wake_waiters();
    }

    /// Park a released slot, with `successes` batched beside it, on this
    /// thread's shard, if there are shards and room on this one.
    #[inline]
    fn park(&self, successes: u64) -> Option<Parked<'_>> {
        self.slots
            .shards
            .get()?
            .park(self.gate.load().limit(), successes)
    }

    fn after_parking(&self, parked: &Parked<'_>) {
        if !self.waiters.is_empty() {
            // A waiter may have looked for parked slots before this one was
            // parked: it goes back to the shared count, for the waiters to
            // be served from.
            let slots = parked.unpark_all();
            if slots != 0 {
                self.slots.fetch_sub(u64::from(slots), Ordering::SeqCst);
            }
            self.wake_waiters();
        }
    }

    #[inline]
    pub(crate) fn wake_waiters(&self) {
        if self.waiters.is_empty() {
            return;
        }
        self.serve_waiters();
    }

    #[cold]
    fn serve_waiters(&self) {
        let now = self.clock.now();
        self.waiters.serve(|| self.admit(now, false, false));
    }

    #[inline]
    pub(crate) fn refresh_if_due(&self, now: Instant) {
        let until = self.until.load(Ordering::SeqCst);
        // Most gates never expire: skip the clock arithmetic for them.
        if until != u64::MAX && self.nanos(now) >= until {
            self.refresh(now);
        }
    }

    pub(crate) fn active_probe(&self) -> Option<ActiveProbe> {
        self.options.active_probe().cloned()
    }

    /// Take a probe slot for the limiter's own active probe.
    pub(crate) fn try_acquire_probe(&self) -> Result<Permit<'_, A, C>, Rejection> {
        let now = self.clock.now();
        match self.admit(now, false, true) {
            Ok(ticket) if ticket.probe() => Ok(Permit::new(self, ticket)),
            Ok(ticket) => {
                // The gate stopped probing in the meantime: not a probe.
                Permit::new(self, ticket).ignore();
                Err(self.rejection(RejectReason::Open))
            }
            Err(rejection) => Err(rejection),
        }
    }

    /// Re-evaluate a gate whose `until` has passed.
    #[cold]
    fn refresh(&self, now: Instant) {
        let transitions = {
            let mut policy = self.lock();
            self.catch_up(&mut policy, now);
            if policy.poll_timeout().is_some_and(|t| t <= now) {
                policy.handle_timeout(now);
            }
            let transitions = self.drain(&mut policy);
            self.publish(&policy);
            transitions
        };
        self.report(transitions);
        // A waiter may be admissible under the new gate; don't serve waiters
        // from inside an admission (the queue may be locked by our caller).
    }

    /// Before any event reaches the policy: hand over the successes batched
    /// for it, then the rejections counted since it last heard.
    fn catch_up(&self, policy: &mut A, now: Instant) {
        let mut batched = 0;
        if self.slots.load(Ordering::SeqCst) >> 32 != 0 {
            batched = self.slots.fetch_and(SLOTS, Ordering::SeqCst) >> 32;
        }
        if let Some(shards) = self.slots.shards.get() {
            batched += shards.take_batched();
        }
        if batched > 0 {
            policy.on_successes(now, batched);
        }
        if self.rejected.load(Ordering::Relaxed) > 0 {
            let count = self.rejected.swap(0, Ordering::Relaxed);
            if count > 0 {
                policy.on_rejected(now, count);
            }
        }
    }

    fn publish(&self, policy: &A) {
        self.publish_with(policy, policy.poll_timeout());
    }

    fn publish_with(&self, policy: &A, due: Option<Instant>) {
        let feedback = if self.observer.is_some() {
            Feedback::Timed
        } else {
            policy.feedback()
        } as u8;
        if self.feedback.load(Ordering::Relaxed) != feedback {
            self.feedback.store(feedback, Ordering::Relaxed);
        }
        let batch_until = match policy.batching() {
            Batching::Never => 0,
            Batching::Until(t) => self.nanos(t),
            Batching::Always => u64::MAX,
        };
        if self.batch_until.load(Ordering::Relaxed) != batch_until {
            self.batch_until.store(batch_until, Ordering::SeqCst);
        }
        let quiet = match policy.quiet() {
            Some(Quiet {
                max_latency,
                max_in_flight,
            }) => {
                let micros = u32::try_from(max_latency.as_micros()).unwrap_or(u32::MAX);
                (u64::from(max_in_flight) << 32) | u64::from(micros)
            }
            None => 0,
        };
        if self.quiet.load(Ordering::Relaxed) != quiet {
            self.quiet.store(quiet, Ordering::SeqCst);
        }
        let gate = policy.gate();
        if self.gate.store(Packed::new(&gate)) {
            if self.ready_waiters.load(Ordering::SeqCst) > 0 {
                self.changed.notify_waiters();
            }
            if let Some(observer) = &self.observer {
                observer.gate_changed(&gate.sanitized());
            }
        }
        let until = due.map_or(u64::MAX, |t| self.nanos(t));
        if self.until.load(Ordering::Relaxed) != until {
            self.until.store(until, Ordering::SeqCst);
        }
        if self.members.len() > 1 {
            let index = |r| (policy.refused_by(r).min(0xFFFF)) as u64;
            let packed = index(Refusal::Shut)
                | (index(Refusal::Limit) << 16)
                | (index(Refusal::Throttle) << 32)
                | (index(Refusal::Probe) << 48);
            if self.culprits.load(Ordering::Relaxed) != packed {
                self.culprits.store(packed, Ordering::Relaxed);
            }
        }
    }

    /// Take the policy's transitions; count them into the generation, so
    /// that calls admitted before them are marked stale when they finish.
    fn drain(&self, policy: &mut A) -> Vec<Transition> {
        let mut out = Vec::new();
        while let Some(t) = policy.poll_transition() {
            out.push(t);
        }
        if !out.is_empty() {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        out
    }

    fn report(&self, transitions: Vec<Transition>) {
        for t in &transitions {
            if let Some(hook) = self.options.on_transition() {
                hook(t);
            }
            if let Some(observer) = &self.observer {
                observer.transition(t);
            }
        }
    }

    pub(crate) fn on_drop_outcome(&self) -> Outcome {
        self.options.on_drop
    }

    pub(crate) fn max_waiters(&self) -> usize {
        self.options.max_waiters
    }
}

impl<A, C> fmt::Debug for Limiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.options.name)
            .field("in_flight", &slots_of(self.slots.load(Ordering::Relaxed)))
            .field("limit", &self.gate.load().limit())
            .field("admit_probability", &self.gate.load().admit_probability())
            .finish_non_exhaustive()
    }
}

impl<A, C: fmt::Debug> fmt::Debug for Builder<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("clock", &self.clock)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// A fraction refused by a breaker is its ramp after closing, not
/// throttling: the reason says so.
fn ramping(reason: RejectReason, policy: &str) -> RejectReason {
    if reason == RejectReason::Throttled && policy == "breaker" {
        RejectReason::Ramping
    } else {
        reason
    }
}
