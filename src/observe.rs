//! Hooks for metrics, logs and traces.

use std::time::Duration;

use crate::algorithms::{Gate, Outcome, Transition};
use crate::error::Rejection;
use crate::overrides::Override;
use crate::priority::Class;
use crate::retry::{HedgeOutcome, RetryOutcome};
use crate::snapshot::Snapshot;

/// Told what a [`Limiter`](crate::Limiter) does, call by call.
///
/// Every method has an empty default body, and a limiter without an observer
/// pays one predictable branch per call. Methods are called on the caller's
/// thread, outside the policy's lock; keep them cheap (update a counter, not
/// a log line per call) and register any metric handles when the observer is
/// made, not per call.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use rheostat::{algorithms::Fixed, Limiter, Observer, Rejection};
///
/// #[derive(Default)]
/// struct Shed(AtomicU64);
///
/// impl Observer for Shed {
///     fn rejected(&self, _: &Rejection) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let shed = Arc::new(Shed::default());
/// let limiter = Limiter::builder(Fixed::new(1)?).observer(Arc::clone(&shed)).build()?;
/// let _held = limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err());
/// assert_eq!(shed.0.load(Ordering::Relaxed), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Observer: Send + Sync + 'static {
    /// A call was admitted; `in_flight` counts it.
    fn admitted(&self, in_flight: u32, probe: bool) {
        let _ = (in_flight, probe);
    }

    /// A call of `class` was admitted, on a limiter with
    /// [priorities](crate::priority); `in_flight` counts it. By default,
    /// [`Observer::admitted`].
    fn admitted_as(&self, class: Class, in_flight: u32, probe: bool) {
        let _ = class;
        self.admitted(in_flight, probe);
    }

    /// A call was refused before it reached the dependency (its class, on
    /// a limiter with priorities, is [`Rejection::class`]).
    fn rejected(&self, rejection: &Rejection) {
        let _ = rejection;
    }

    /// An admitted call finished as `outcome` after `latency`; `in_flight`
    /// no longer counts it.
    fn finished(&self, outcome: Outcome, latency: Duration, in_flight: u32) {
        let _ = (outcome, latency, in_flight);
    }

    /// The published gate changed (and once when the limiter is built).
    fn gate_changed(&self, gate: &Gate) {
        let _ = gate;
    }

    /// The policy changed state (a breaker opened, closed, …).
    fn transition(&self, transition: &Transition) {
        let _ = transition;
    }

    /// The policy was changed from outside, through
    /// [`Limiter::update`](crate::Limiter::update): swapped for one made
    /// of other members (a live file's new `policy` table), or its breaker
    /// state changed (or gone) without a transition to say so. `snapshot`
    /// is the policy in force, as [`Limiter::snapshot`](crate::Limiter::snapshot)
    /// shows it; whatever was kept of the old one's state (a breaker's
    /// state, told by [`Observer::transition`]) is to be set from it. Told
    /// after the transitions the change reported, if any.
    fn policy_changed(&self, snapshot: &Snapshot) {
        let _ = snapshot;
    }

    /// The attempt timeout in force moved to `timeout`
    /// ([`Timeouts::in_force`](crate::timeout::Timeouts::in_force)):
    /// told, on a limiter whose timeout is [learned](crate::timeout), when
    /// the learned value changes (and once when the limiter is built, on
    /// any limiter with a timeout).
    fn timeout_changed(&self, timeout: Duration) {
        let _ = timeout;
    }

    /// The learned timeout's `ceiling` began (`cutting`) or ceased to cut
    /// every call: on a limiter whose timeout is [learned](crate::timeout),
    /// calls have ended at the ceiling for a window with none answering
    /// within it, or one has answered within it since
    /// ([`Snapshot::ceiling_cutting_since`]).
    /// Told once on entering that state and once on leaving it; see the
    /// [`timeout` module](crate::timeout#when-the-ceiling-cuts-every-call)
    /// for what to do.
    fn ceiling_cutting(&self, ceiling: Duration, cutting: bool) {
        let _ = (ceiling, cutting);
    }

    /// What the [retry policy](crate::retry) decided after a failed
    /// attempt. Not told after a first attempt the limiter refused: that
    /// call was never sent, nothing was retried, and
    /// [`Observer::rejected`] told of it.
    fn retry(&self, outcome: RetryOutcome) {
        let _ = outcome;
    }

    /// The retry budget has just run dry: the first retry it refused after
    /// one it granted (or since the limiter was built).
    fn retry_budget_exhausted(&self) {}

    /// A [hedge](crate::retry::Hedge) was sent, won or lost, or why none
    /// was sent when an attempt had run for the hedge delay.
    fn hedge(&self, outcome: HedgeOutcome) {
        let _ = outcome;
    }

    /// The learned hedge delay changed (a [hedge](crate::retry::Hedge)
    /// with a learned delay); told under the policy's lock, as
    /// [`Observer::timeout_changed`] is.
    fn hedge_delay_changed(&self, delay: Duration) {
        let _ = delay;
    }

    /// An operator's [override](crate::overrides) took effect, for
    /// `lasting`.
    fn override_applied(&self, overriding: Override, lasting: Duration) {
        let _ = (overriding, lasting);
    }

    /// The override ended: `expired` if its time ran out, else it was
    /// cleared or replaced.
    fn override_ended(&self, overriding: Override, expired: bool) {
        let _ = (overriding, expired);
    }
}

/// The observer that observes nothing.
impl Observer for () {}

/// Both observers, `self.0` first: `.observer((metrics, logs))`.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use rheostat::{algorithms::Fixed, Limiter, Observer};
///
/// #[derive(Default)]
/// struct Admitted(AtomicU64);
///
/// impl Observer for Admitted {
///     fn admitted(&self, _: u32, _: bool) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let (a, b) = (Arc::new(Admitted::default()), Arc::new(Admitted::default()));
/// let limiter = Limiter::builder(Fixed::new(1)?)
///     .observer((Arc::clone(&a), Arc::clone(&b)))
///     .build()?;
/// limiter.try_acquire()?.success();
/// assert_eq!((a.0.load(Ordering::Relaxed), b.0.load(Ordering::Relaxed)), (1, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn admitted(&self, in_flight: u32, probe: bool) {
        self.0.admitted(in_flight, probe);
        self.1.admitted(in_flight, probe);
    }
    fn admitted_as(&self, class: Class, in_flight: u32, probe: bool) {
        self.0.admitted_as(class, in_flight, probe);
        self.1.admitted_as(class, in_flight, probe);
    }
    fn rejected(&self, rejection: &Rejection) {
        self.0.rejected(rejection);
        self.1.rejected(rejection);
    }
    fn finished(&self, outcome: Outcome, latency: Duration, in_flight: u32) {
        self.0.finished(outcome, latency, in_flight);
        self.1.finished(outcome, latency, in_flight);
    }
    fn gate_changed(&self, gate: &Gate) {
        self.0.gate_changed(gate);
        self.1.gate_changed(gate);
    }
    fn transition(&self, transition: &Transition) {
        self.0.transition(transition);
        self.1.transition(transition);
    }
    fn policy_changed(&self, snapshot: &Snapshot) {
        self.0.policy_changed(snapshot);
        self.1.policy_changed(snapshot);
    }
    fn timeout_changed(&self, timeout: Duration) {
        self.0.timeout_changed(timeout);
        self.1.timeout_changed(timeout);
    }
    fn ceiling_cutting(&self, ceiling: Duration, cutting: bool) {
        self.0.ceiling_cutting(ceiling, cutting);
        self.1.ceiling_cutting(ceiling, cutting);
    }
    fn retry(&self, outcome: RetryOutcome) {
        self.0.retry(outcome);
        self.1.retry(outcome);
    }
    fn retry_budget_exhausted(&self) {
        self.0.retry_budget_exhausted();
        self.1.retry_budget_exhausted();
    }
    fn hedge(&self, outcome: HedgeOutcome) {
        self.0.hedge(outcome);
        self.1.hedge(outcome);
    }
    fn hedge_delay_changed(&self, delay: Duration) {
        self.0.hedge_delay_changed(delay);
        self.1.hedge_delay_changed(delay);
    }
    fn override_applied(&self, overriding: Override, lasting: Duration) {
        self.0.override_applied(overriding, lasting);
        self.1.override_applied(overriding, lasting);
    }
    fn override_ended(&self, overriding: Override, expired: bool) {
        self.0.override_ended(overriding, expired);
        self.1.override_ended(overriding, expired);
    }
}

/// Observing through a pointer: `Box<O>` and `Arc<O>` tell `O`.
macro_rules! forward {
    ($($pointer:ident)::+) => {
        impl<O: Observer + ?Sized> Observer for $($pointer)::+<O> {
            fn admitted(&self, in_flight: u32, probe: bool) {
                (**self).admitted(in_flight, probe);
            }
            fn admitted_as(&self, class: Class, in_flight: u32, probe: bool) {
                (**self).admitted_as(class, in_flight, probe);
            }
            fn rejected(&self, rejection: &Rejection) {
                (**self).rejected(rejection);
            }
            fn finished(&self, outcome: Outcome, latency: Duration, in_flight: u32) {
                (**self).finished(outcome, latency, in_flight);
            }
            fn gate_changed(&self, gate: &Gate) {
                (**self).gate_changed(gate);
            }
            fn transition(&self, transition: &Transition) {
                (**self).transition(transition);
            }
            fn policy_changed(&self, snapshot: &Snapshot) {
                (**self).policy_changed(snapshot);
            }
            fn timeout_changed(&self, timeout: Duration) {
                (**self).timeout_changed(timeout);
            }
            fn ceiling_cutting(&self, ceiling: Duration, cutting: bool) {
                (**self).ceiling_cutting(ceiling, cutting);
            }
            fn retry(&self, outcome: RetryOutcome) {
                (**self).retry(outcome);
            }
            fn retry_budget_exhausted(&self) {
                (**self).retry_budget_exhausted();
            }
            fn hedge(&self, outcome: HedgeOutcome) {
                (**self).hedge(outcome);
            }
            fn hedge_delay_changed(&self, delay: Duration) {
                (**self).hedge_delay_changed(delay);
            }
            fn override_applied(&self, overriding: Override, lasting: Duration) {
                (**self).override_applied(overriding, lasting);
            }
            fn override_ended(&self, overriding: Override, expired: bool) {
                (**self).override_ended(overriding, expired);
            }
        }
    };
}

forward!(Box);
forward!(std::sync::Arc);
