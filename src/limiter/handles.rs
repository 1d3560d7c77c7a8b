//! Three handles on a limiter, each for one kind of user, so that the
//! limiter's own methods stay those of a call: [`Overrides`] (an operator,
//! a fleet: what is changed from outside the policy), [`Ready`] (a bulk
//! consumer: pausing until the gate admits again) and [`Classes`] (a
//! limiter with [priorities](crate::priority)). Each forwards to the
//! limiter's lock and published gate; none keeps state of its own.

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, Instant};

use super::{Limiter, Readiness};
use crate::algorithms::{Algorithm, ConfigError};
use crate::clock::Clock;
use crate::overrides::Override;
use crate::priority::{Class, Priorities};

/// What is changed from outside a limiter's policy: an [`Override`] (an
/// operator's, or a fleet's through [`crate::overrides`]) and the probe
/// tokens a fleet's shared allowance grants. From [`Limiter::overrides`].
///
/// Each change goes through the limiter's lock, as
/// [`Limiter::update`] does, and is published at once.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{algorithms::Fixed, overrides::Override, Limiter};
///
/// let limiter = Limiter::new(Fixed::new(50)?);
/// limiter.overrides().set(Override::Cap(5), Duration::from_secs(60))?;
/// assert_eq!(limiter.gate().limit, 5);
/// assert_eq!(limiter.snapshot().overridden.map(|(o, _)| o), Some(Override::Cap(5)));
/// limiter.overrides().clear();
/// assert_eq!(limiter.gate().limit, 50);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Overrides<'a, A, C> {
    pub(super) limiter: &'a Limiter<A, C>,
}

impl<A: Algorithm, C: Clock> Overrides<'_, A, C> {
    /// Put `overriding` in force for `lasting`, in place of any override
    /// in force: see [`crate::overrides`] for what each kind does.
    ///
    /// # Errors
    ///
    /// `lasting` zero or above [`MAX_OVERRIDE`](crate::overrides::MAX_OVERRIDE)
    /// (field `override.lasting`); a cap of 0 or above the largest limit
    /// (`override.cap`); `force_closed` for a policy without a breaker
    /// (`override.kind`). The override in force, if any, is left as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, overrides::Override, Limiter};
    ///
    /// let limiter = Limiter::new(Fixed::new(50)?);
    /// limiter.overrides().set(Override::Cap(5), Duration::from_secs(60))?;
    /// // A bulkhead has no breaker to hold closed.
    /// let e = limiter
    ///     .overrides()
    ///     .set(Override::ForceClosed, Duration::from_secs(60))
    ///     .unwrap_err();
    /// assert_eq!(e.field(), "override.kind");
    /// assert_eq!(limiter.gate().limit, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set(&self, overriding: Override, lasting: Duration) -> Result<(), ConfigError> {
        self.limiter.set_override(overriding, lasting)
    }

    /// End the override in force, if any: the policy decides again.
    pub fn clear(&self) {
        let limiter = self.limiter;
        let now = limiter.clock.now();
        limiter.with_held(now, |held| limiter.end_override(held, now, false));
    }

    /// The override in force and when it ends, by the limiter's clock;
    /// `None` without one. An override whose end has passed shows until
    /// the limiter next looks at its policy (any call). The same as
    /// [`Snapshot::overridden`](crate::limiter::Snapshot::overridden),
    /// without handing the policy what is held for it.
    pub fn in_force(&self) -> Option<(Override, Instant)> {
        self.limiter.lock().overriding
    }

    /// Grant `count` probe tokens, replacing any left, usable until `until`
    /// (`None`: until spent): for a limiter built with
    /// [`Builder::shared_probes`](crate::Builder::shared_probes), a probe is
    /// admitted only with one. A fleet's shared allowance, claimed by a task
    /// beside the limiter, reaches it here.
    pub fn grant_probes(&self, count: u32, until: Option<Instant>) {
        let now = self.limiter.clock.now();
        self.limiter
            .with_held(now, |held| held.probe_tokens = (count, until));
    }

    /// The probe tokens left and when they lapse (see
    /// [`grant_probes`](Overrides::grant_probes)).
    pub fn probe_tokens(&self) -> (u32, Option<Instant>) {
        self.limiter.lock().probe_tokens
    }
}

impl<A, C> fmt::Debug for Overrides<'_, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overrides")
            .field("limiter", &self.limiter.options.name)
            .finish()
    }
}

/// Whether a limiter's gate admits calls, and waiting until it does: for a
/// queue consumer that should pause through an outage rather than fail
/// (and dead-letter) every item, and for the task that runs an [active
/// probe](crate::Builder::active_probe) with no traffic. From
/// [`Limiter::ready`] (borrowing the limiter) or [`Ready::new`] with an
/// `Arc<Limiter>` (for a spawned task).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::clock::{Clock, TokioClock};
/// use rheostat::limiter::{Readiness, Ready};
/// use rheostat::{algorithms::{Breaker, BreakerConfig}, Limiter, Outcome};
///
/// let limiter = Arc::new(
///     Limiter::builder(Breaker::new(BreakerConfig::default())?)
///         .clock(TokioClock)
///         // While half-open, check health with a throwaway call, not a real item.
///         .active_probe(Duration::from_secs(5), || async { Outcome::Success })
///         .build()?,
/// );
/// // With no traffic, a task runs the probe when the breaker is half-open.
/// let driver = tokio::spawn(Ready::new(Arc::clone(&limiter)).drive());
/// limiter.update(|b| b.force_open(TokioClock.now()));
/// assert!(matches!(limiter.ready().now(), Readiness::Shut { .. }));
/// // ... a consumer pauses here until the breaker is reset:
/// limiter.update(|b| b.reset(TokioClock.now()));
/// limiter.ready().wait().await;
/// assert_eq!(limiter.ready().now(), Readiness::Ready);
/// driver.abort();
/// # Ok(())
/// # }
/// ```
#[must_use = "a readiness handle does nothing until it is asked or awaited"]
#[derive(Clone, Copy)]
pub struct Ready<L> {
    limiter: L,
}

impl<L, A, C> Ready<L>
where
    L: Deref<Target = Limiter<A, C>>,
    A: Algorithm,
    C: Clock,
{
    /// Readiness of `limiter` (a `&Limiter` or an `Arc<Limiter>`).
    pub fn new(limiter: L) -> Self {
        Ready { limiter }
    }

    /// Whether the gate admits calls now. Applies any time-driven change
    /// that is due (an open breaker's cooldown ending) first.
    pub fn now(&self) -> Readiness {
        self.limiter.readiness()
    }

    /// Wait until the gate admits calls again, without spending a probe per
    /// waiter.
    ///
    /// Returns at once if the gate admits calls. While it is shut, sleeps
    /// until it is re-evaluated or changed. While a breaker is half-open:
    /// with an [active probe](crate::Builder::active_probe), one waiter runs
    /// the health check as the probe and all keep waiting for the verdict;
    /// without one, returns, and the caller's next call is a probe.
    ///
    /// Time is Tokio's: this is for the system or Tokio clock, not a manual
    /// one.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe. A probe cancelled mid-flight is released as
    /// [`Outcome::Ignore`](crate::Outcome::Ignore), which gives the probe
    /// back to the breaker.
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    pub async fn wait(&self) {
        self.limiter.wait_ready().await;
    }

    /// Keep the limiter's time-driven work going with no traffic: apply
    /// cooldowns as they end and, while half-open, run the active probe.
    /// Spawn it once per limiter that has an active probe and no
    /// [`wait`](Ready::wait) caller to run it. Never returns.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: abort the task to stop it.
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    pub async fn drive(self) {
        self.limiter.drive().await;
    }
}

impl<L, A, C> fmt::Debug for Ready<L>
where
    L: Deref<Target = Limiter<A, C>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready")
            .field("limiter", &self.limiter.options.name)
            .finish()
    }
}

/// The classes of calls of a limiter built with
/// [priorities](crate::Builder::priorities): each by name, and the calls
/// each holds. From [`Limiter::classes`].
///
/// # Examples
///
/// ```
/// use rheostat::{algorithms::Fixed, priority::Priorities, Limiter};
///
/// let limiter = Limiter::builder(Fixed::new(10)?)
///     .priorities(Priorities::partitions([("checkout", 0.0), ("browse", 0.0)])?)
///     .build()?;
/// let classes = limiter.classes().expect("built with priorities");
/// let browse = classes.get("browse").expect("a class of the limiter");
/// let permit = limiter.admission().class(browse).try_acquire()?;
/// let checkout = limiter.admission().class(classes.get("checkout")).try_acquire()?;
/// // The least critical class holds what the others do not.
/// assert_eq!(classes.in_flight(), vec![1, 1]);
/// # drop((permit, checkout));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Classes<'a, A, C> {
    limiter: &'a Limiter<A, C>,
    classes: &'a super::classes::Classes,
}

impl<'a, A: Algorithm, C: Clock> Classes<'a, A, C> {
    /// The classes of `limiter`, if it has any.
    pub(super) fn of(limiter: &'a Limiter<A, C>) -> Option<Self> {
        let classes = limiter.classes.as_deref()?;
        Some(Classes { limiter, classes })
    }

    /// The class named `name`, if the limiter has one.
    pub fn get(&self, name: &str) -> Option<Class> {
        self.classes.config().class(name)
    }

    /// The priorities the limiter was built with.
    pub fn priorities(&self) -> &'a Priorities {
        self.classes.config()
    }

    /// Calls in flight by class, most critical first. The least critical
    /// class is not counted (see [`crate::priority`]): it holds the calls in
    /// flight that the others do not, so a call being admitted at this
    /// instant may show there for a moment before it shows in its own class.
    pub fn in_flight(&self) -> Vec<u32> {
        self.classes.held(self.limiter.in_flight())
    }
}

impl<A, C> fmt::Debug for Classes<'_, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classes")
            .field("limiter", &self.limiter.options.name)
            .field("priorities", self.classes.config())
            .finish()
    }
}
