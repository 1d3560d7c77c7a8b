//! Building a limiter: its options and the builder.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::board::Board;
use super::deferred::Deferred;
use super::published::Held;
use super::queue::{QueueOrder, WaitQueue};
use super::ready::ActiveProbe;
use super::shards::Sharding;
use super::slots::Slots;
use super::{classes, Limiter, MAX_WAITERS};
use crate::algorithms::{check, Algorithm, BreakerState, ConfigError, Outcome, Transition};
use crate::clock::{Clock, DefaultClock};
use crate::observe::Observer;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex};
use crate::timeout::{LearnedTimeout, Learner, Timeout};

pub(super) type TransitionHook = Box<dyn Fn(&Transition) + Send + Sync>;

/// How a [`Limiter`] queues, waits and treats unrecorded permits.
#[derive(Debug)]
pub(super) struct Options {
    pub(super) name: Cow<'static, str>,
    pub(super) order: QueueOrder,
    pub(super) max_waiters: usize,
    pub(super) on_drop: Outcome,
    pub(super) sharding: Sharding,
    /// Options most limiters leave unset, out of line: a limiter that sets
    /// none of them does not carry their space.
    pub(super) rare: Option<Box<Rare>>,
}

#[derive(Default)]
pub(super) struct Rare {
    pub(super) max_wait: Option<Duration>,
    pub(super) timeout: Option<Timeout>,
    pub(super) wait: bool,
    pub(super) active_probe: Option<ActiveProbe>,
    /// Whether a probe also needs a token granted from outside
    /// ([`Builder::shared_probes`]).
    pub(super) shared_probes: bool,
    pub(super) on_transition: Option<TransitionHook>,
    pub(super) retry: Option<crate::retry::Retry>,
}

impl Options {
    pub(super) fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    pub(super) fn max_wait(&self) -> Option<Duration> {
        self.rare.as_ref().and_then(|r| r.max_wait)
    }

    /// The attempt timeout's ceiling: the typed one, or the learned one's.
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.rare
            .as_ref()
            .and_then(|r| r.timeout.as_ref().map(Timeout::ceiling))
    }

    /// How the attempt timeout is learned, if it is.
    pub(super) fn learned(&self) -> Option<&LearnedTimeout> {
        self.rare
            .as_ref()
            .and_then(|r| r.timeout.as_ref().and_then(Timeout::as_learned))
    }

    pub(super) fn wait(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.wait)
    }

    pub(super) fn active_probe(&self) -> Option<&ActiveProbe> {
        self.rare.as_ref().and_then(|r| r.active_probe.as_ref())
    }

    pub(super) fn shared_probes(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.shared_probes)
    }

    pub(super) fn retry(&self) -> Option<&crate::retry::Retry> {
        self.rare.as_ref().and_then(|r| r.retry.as_ref())
    }

    pub(super) fn on_transition(&self) -> Option<&TransitionHook> {
        self.rare.as_ref().and_then(|r| r.on_transition.as_ref())
    }
}

impl fmt::Debug for Rare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rare")
            .field("max_wait", &self.max_wait)
            .field("timeout", &self.timeout)
            .field("wait", &self.wait)
            .field("active_probe", &self.active_probe)
            .field("shared_probes", &self.shared_probes)
            .field("on_transition", &self.on_transition.is_some())
            .field("retry", &self.retry)
            .finish()
    }
}

/// Builds a [`Limiter`] with non-default options.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::{Aimd, AimdConfig}, Limiter, Outcome, limiter::QueueOrder};
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
pub struct Builder<A, C = DefaultClock> {
    policy: A,
    clock: C,
    options: Options,
    seed: u64,
    observer: Option<Box<dyn Observer>>,
    retry: Option<crate::retry::RetryConfig>,
    priorities: Option<crate::priority::Priorities>,
    /// Observers made at [`Builder::build`], with the final name and the
    /// policy's starting breaker state, so that the order of the builder's
    /// calls does not matter (`.metrics().name("x")` labels `x`).
    named: Vec<NamedObserver>,
}

/// Makes an observer from what the limiter is when built.
pub(crate) type NamedObserver = Box<dyn FnOnce(&Named<'_>) -> Box<dyn Observer> + Send>;

/// What an observer made at [`Builder::build`] is told of its limiter.
#[cfg_attr(
    not(any(feature = "metrics", feature = "tracing")),
    allow(dead_code, reason = "read by the optional observers")
)]
pub(crate) struct Named<'a> {
    /// The limiter's name.
    pub(crate) name: &'a str,
    /// Its policy's starting breaker state, if it has a breaker.
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "read by the metrics observer")
    )]
    pub(crate) state: Option<BreakerState>,
    /// Whether it has a retry policy.
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "read by the metrics observer")
    )]
    pub(crate) retries: bool,
    /// Whether it hedges, and its hedge delay, if typed.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code, reason = "read by metrics"))]
    pub(crate) hedges: Option<Option<Duration>>,
    /// Its classes' names, most critical first (empty without priorities).
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "read by the metrics observer")
    )]
    pub(crate) classes: Vec<String>,
    /// Whether its timeout is learned (and so whether its ceiling may come
    /// to cut every call).
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "read by the metrics observer")
    )]
    pub(crate) learns_timeout: bool,
}

impl<A: Algorithm> Builder<A, DefaultClock> {
    pub(super) fn new(policy: A) -> Self {
        Builder {
            policy,
            clock: DefaultClock::default(),
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
            retry: None,
            priorities: None,
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
            retry: self.retry,
            priorities: self.priorities,
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
    /// (default FIFO, 1024). With 0, [`Admission::acquire`](super::Admission::acquire) never waits.
    #[must_use]
    pub fn queue(mut self, order: QueueOrder, max_waiters: usize) -> Self {
        self.options.order = order;
        self.options.max_waiters = max_waiters;
        self
    }

    /// The longest [`Admission::acquire`](super::Admission::acquire) waits for a slot (default: no
    /// limit), and [`Limiter::call`] and the tower layers too when the
    /// limiter [waits](Builder::wait).
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.options.rare_mut().max_wait = Some(max_wait);
        self
    }

    /// Whether callers wait for a slot (up to [`Builder::max_wait`]) rather
    /// than fail fast when the limit is reached (default false):
    /// [`Limiter::call`] then waits, and the tower layer (`RheostatLayer`)
    /// as if built with its `wait()`.
    /// A configuration file's limiter sets it by its `max_wait` (or its
    /// `wait`), so that the file holds how a dependency's callers wait. See
    /// [`Limiter::call`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, clock::TokioClock, CallError, Limiter, Outcome};
    /// use rheostat::RejectReason;
    ///
    /// let waiting = Limiter::builder(Fixed::new(1)?)
    ///     .clock(TokioClock)
    ///     .max_wait(Duration::from_millis(200))
    ///     .wait(true)
    ///     .build()?;
    /// let held = waiting.try_acquire()?;
    /// // The limit is reached: the call waits 200 ms for a slot, then is refused.
    /// let started = tokio::time::Instant::now();
    /// let ok = |_: &Result<(), ()>| Outcome::Success;
    /// let refused = waiting.call(ok, || async { Ok(()) }).await;
    /// assert!(matches!(refused, Err(CallError::Rejected(r)) if r.reason() == RejectReason::TimedOut));
    /// assert_eq!(started.elapsed(), Duration::from_millis(200));
    /// held.success();
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn wait(mut self, wait: bool) -> Self {
        // `false` is the default: a limiter that sets no rare option keeps
        // none out of line (a keyed set builds one per key).
        if wait || self.options.rare.is_some() {
            self.options.rare_mut().wait = wait;
        }
        self
    }

    /// The timeout each call through this limiter is given unless the
    /// code gives one (default: none), so that a configuration file holds a
    /// dependency's attempt timeout beside its policy: a [`Duration`], or a
    /// timeout [learned](crate::timeout) from the dependency
    /// ([`Timeout::learned`]). [`Limiter::call`] and the tower layers
    /// (`RheostatLayer`, `KeyedLayer`) use it when not given their own
    /// `timeout(…)`, which wins as the ceiling (a learned timeout is still
    /// learned below it). A retry's
    /// [`RetryConfig::timeout`](crate::retry::RetryConfig::timeout), where
    /// set, wins over both for a retried call. A probe is given its
    /// breaker's `probe_timeout` instead. See [`Limiter::timeouts`]
    /// and [`Permit::timeout`](crate::Permit::timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, Limiter, Timeout};
    ///
    /// let typed = Limiter::builder(Fixed::new(8)?)
    ///     .timeout(Duration::from_millis(800))
    ///     .build()?;
    /// assert_eq!(typed.timeouts().ceiling, Some(Duration::from_millis(800)));
    ///
    /// let learned = Limiter::builder(Fixed::new(8)?)
    ///     .timeout(Timeout::learned(Duration::from_millis(800)))
    ///     .build()?;
    /// assert_eq!(learned.timeouts().ceiling, Some(Duration::from_millis(800)));
    /// assert_eq!(learned.timeouts().learned, None); // nothing seen yet
    /// # Ok::<(), rheostat::ConfigError>(())
    /// ```
    #[must_use]
    pub fn timeout(mut self, timeout: impl Into<Timeout>) -> Self {
        self.options.rare_mut().timeout = Some(timeout.into());
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
    /// [`RejectReason::Open`](crate::RejectReason::Open) until the breaker
    /// decides, and `check` is run (with at most `timeout`) by
    /// [`Ready::wait`](super::Ready::wait) callers or by
    /// [`Ready::drive`](super::Ready::drive). Its outcome is
    /// recorded as the probe's.
    #[must_use]
    pub fn active_probe<F, Fut>(mut self, timeout: Duration, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        self.options.rare_mut().active_probe = Some(ActiveProbe::new(timeout, check));
        self
    }

    /// A probe also needs a token granted from outside
    /// ([`Overrides::grant_probes`](super::Overrides::grant_probes)): the allowance a fleet's instances share,
    /// claimed by a task beside the limiter, so that the fleet stakes what
    /// one breaker would. The breaker's own allowance and its judgement of
    /// its probes stay as they are; without a token, a probe is refused as
    /// [`RejectReason::Open`](crate::RejectReason::Open), as when the breaker's allowance is spent.
    #[must_use]
    pub fn shared_probes(mut self) -> Self {
        self.options.rare_mut().shared_probes = true;
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

    /// Retry failed calls made through [`Limiter::call`] and the tower
    /// layer, as `config` says (see [`crate::retry`]). The jitter is drawn
    /// from the limiter's [seed](Builder::seed).
    #[must_use]
    pub fn retry(mut self, config: crate::retry::RetryConfig) -> Self {
        self.retry = Some(config);
        self
    }

    /// Sort calls into ordered classes, most critical first, so that
    /// throttling falls on the least critical first (see
    /// [`crate::priority`]). Without this, classes given at acquisition are
    /// ignored and nothing costs more.
    #[must_use]
    pub fn priorities(mut self, priorities: crate::priority::Priorities) -> Self {
        self.priorities = Some(priorities);
        self
    }

    pub(super) fn default_build(self) -> Limiter<A, C> {
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
    /// `limiter.max_waiters` above [`MAX_WAITERS`]; `limiter.max_wait` or
    /// `limiter.timeout` zero or above a year, or a learned timeout's field
    /// out of range (`limiter.timeout.quantile`, as
    /// [`LearnedTimeout::validate`](crate::timeout::LearnedTimeout::validate)); a
    /// retry field out of range (as
    /// [`RetryConfig::validate`](crate::retry::RetryConfig::validate)).
    pub fn build(mut self) -> Result<Limiter<A, C>, ConfigError> {
        if let Some(config) = &self.retry {
            config.validate()?;
            if let Some(hedge) = &config.hedge {
                hedge.check_source(self.options.learned().is_some())?;
            }
        }
        if let Some(priorities) = &self.priorities {
            priorities.validate()?;
        }
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
        if let Some(timeout) = self.options.rare.as_ref().and_then(|r| r.timeout) {
            timeout.validate().map_err(|e| e.within("limiter"))?;
        }
        if let Some(probe) = self.options.active_probe() {
            check::duration("limiter.active_probe.timeout", probe.timeout)?;
        }
        let state = self.policy.snapshot().state;
        let named = Named {
            name: &self.options.name,
            state,
            retries: self.retry.is_some(),
            hedges: self.retry.as_ref().and_then(|r| r.hedge).map(|h| h.delay),
            classes: self
                .priorities
                .as_ref()
                .map(|p| p.classes.iter().map(|c| c.name.clone()).collect())
                .unwrap_or_default(),
            learns_timeout: self.options.learned().is_some(),
        };
        for make in std::mem::take(&mut self.named) {
            let observer = make(&named);
            self.observer = Some(match self.observer.take() {
                Some(previous) => Box::new((previous, observer)),
                None => observer,
            });
        }
        let epoch = self.clock.now();
        let hedge_quantile = self
            .retry
            .as_ref()
            .and_then(|r| r.hedge)
            .filter(|h| h.delay.is_none())
            .map(|h| h.quantile);
        let hedging = self.retry.as_ref().is_some_and(|r| r.hedge.is_some());
        if let Some(config) = self.retry.take() {
            self.options.rare_mut().retry =
                Some(crate::retry::Retry::new(config, self.seed, epoch)?);
        }
        let published = self.policy.publish();
        let gate = published.gate;
        let limiter = Limiter {
            board: Board::new(
                &gate,
                epoch,
                self.observer.is_some() || self.options.learned().is_some(),
                hedging,
            ),
            slots: CachePadded::new(Slots::new(self.options.sharding)),
            deferred: Deferred::new(self.options.sharding == Sharding::Always),
            rejected: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            rng: AtomicU64::new(self.seed),
            waiters: WaitQueue::new(self.options.order, self.priorities.is_some()),
            changed: tokio::sync::Notify::new(),
            ready_waiters: AtomicUsize::new(0),
            probing: AtomicBool::new(false),
            policy: CachePadded::new(Mutex::new(Held::new(
                self.policy,
                self.options
                    .learned()
                    .map(|learned| Box::new(Learner::new(*learned, epoch, hedge_quantile))),
            ))),
            clock: self.clock,
            options: self.options,
            observer: self.observer,
            classes: self
                .priorities
                .take()
                .map(|p| Box::new(classes::Classes::new(p))),
            release: Limiter::release_unrecorded,
        };
        {
            let mut policy = limiter.lock();
            let published = policy.publish();
            limiter.store(&published, &mut policy.last);
            if let Some(observer) = &limiter.observer {
                observer.gate_changed(&published.gate.sanitized());
                if let Some(timeout) = limiter.timeout_in_force() {
                    observer.timeout_changed(timeout);
                }
            }
        }
        Ok(limiter)
    }
}

impl Limiter<crate::algorithms::Aimd, DefaultClock> {
    /// A limiter with the recommended configuration for the interactive
    /// path to a dependency the caller does not control:
    /// [`AimdConfig::recommended`](crate::algorithms::AimdConfig::recommended),
    /// and an attempt timeout [learned](crate::timeout) from the
    /// dependency, never above [`DEFAULT_CEILING`](crate::timeout::DEFAULT_CEILING)
    /// (15 s; a caller's own timeout, given to
    /// [`Permit::timeout`](crate::Permit::timeout), caps it further), with
    /// the system clock and default options. In a configuration file,
    /// `policy = "recommended"` and `timeout = "auto"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::Limiter;
    ///
    /// let payments = Limiter::recommended();
    /// let permit = payments.try_acquire()?;
    /// // Until it has learned, an attempt gets the caller's timeout.
    /// assert_eq!(permit.timeout(Duration::from_secs(2)), Duration::from_secs(2));
    /// permit.success();
    /// assert_eq!(payments.timeouts().in_force, Some(Duration::from_secs(15)));
    /// # Ok::<(), rheostat::Rejection>(())
    /// ```
    pub fn recommended() -> Self {
        Limiter::builder(crate::algorithms::Aimd::recommended())
            .timeout(crate::timeout::LearnedTimeout::default())
            .default_build()
    }
}

impl<A: Algorithm> Limiter<A, DefaultClock> {
    /// A limiter with `policy`, the system clock and default options.
    pub fn new(policy: A) -> Self {
        Limiter::builder(policy).default_build()
    }

    /// Start building a limiter with `policy`.
    pub fn builder(policy: A) -> Builder<A, DefaultClock> {
        Builder::new(policy)
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
