//! [`Admission`]: what one call asks of its limiter, as data.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use super::permit::Permit;
use super::Limiter;
use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::Rejection;
use crate::priority::Class;

/// One call's request for a slot: which limiter, and what varies from call
/// to call — its [class](crate::priority), how long it may wait, the
/// timeout [`call`](Admission::call) gives its attempts, and whether it may
/// be [cut early](Admission::cut_early). Each is optional; left out, the
/// limiter's own setting applies.
///
/// `L` is how the permit will hold the limiter: `&Limiter` for a permit
/// borrowed from it, `Arc<Limiter>` for one that can move into a spawned
/// task ([`OwnedPermit`](crate::OwnedPermit)). So there are three ways to admit a call — fail
/// fast ([`try_acquire`](Admission::try_acquire)), wait
/// ([`acquire`](Admission::acquire)), run it ([`call`](Admission::call))
/// — whatever the class, the wait or the handle.
/// [`Limiter::try_acquire`] and [`Limiter::call`] are these with nothing
/// set.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::priority::{Priorities, Priority};
/// use rheostat::{algorithms::Fixed, Admission, Limiter, RejectReason};
///
/// let limiter = Arc::new(
///     Limiter::builder(Fixed::new(2)?)
///         .priorities(Priorities::default())
///         .build()?,
/// );
///
/// // Borrowed, of a class, failing fast.
/// let batch = limiter.admission().class(Priority::Sheddable).try_acquire()?;
///
/// // Owned (for a spawned task), waiting at most 10 ms.
/// let owned = Admission::new(Arc::clone(&limiter))
///     .class(Priority::Critical)
///     .max_wait(Duration::from_millis(10))
///     .acquire()
///     .await?;
/// let task = tokio::spawn(async move { owned.success() });
///
/// // Both slots are taken until the task ends: a third call waits for one.
/// let third = limiter.admission().max_wait(Duration::from_millis(50)).acquire();
/// task.await?;
/// third.await?.success();
/// batch.success();
/// # let _ = RejectReason::LimitReached;
/// # Ok(())
/// # }
/// ```
#[must_use = "an admission does nothing until it is tried, awaited or called"]
#[derive(Clone, Copy)]
pub struct Admission<L> {
    limiter: L,
    class: Option<Class>,
    max_wait: Option<Duration>,
    timeout: Option<Duration>,
    /// Whether a learned timeout shorter than the caller's may cut it.
    cut_early: bool,
    /// Read the clock at admission whatever the policy needs (a caller
    /// that measures latency itself: the tower layers' classifier).
    timed: bool,
    /// Whether [`call`](Admission::call) may send the call more than once
    /// (a request that is not idempotent, or whose body cannot be copied,
    /// may not).
    resend: bool,
}

impl<L, A, C> Admission<L>
where
    L: Deref<Target = Limiter<A, C>>,
    A: Algorithm,
    C: Clock,
{
    /// An admission to `limiter` (a `&Limiter` or an `Arc<Limiter>`),
    /// with the limiter's settings.
    #[inline]
    pub fn new(limiter: L) -> Self {
        Admission {
            limiter,
            class: None,
            max_wait: None,
            timeout: None,
            cut_early: true,
            timed: false,
            resend: true,
        }
    }

    /// Admit the call as `class` (a [`Class`], a
    /// [`Priority`](crate::priority::Priority), or `None` for the
    /// limiter's default class). A limiter without
    /// [priorities](crate::Builder::priorities) ignores it; a class past the last
    /// is the last.
    #[inline]
    pub fn class(mut self, class: impl Into<Option<Class>>) -> Self {
        self.class = class.into();
        self
    }

    /// Wait at most `max_wait` for a slot in [`acquire`](Admission::acquire) or
    /// [`call`](Admission::call) (0: do not wait), in place of the limiter's
    /// [`Builder::max_wait`](crate::Builder::max_wait). Set, it makes `call`
    /// wait for a slot even if the limiter does not
    /// [wait](crate::Builder::wait).
    #[inline]
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// Give each attempt of [`call`](Admission::call) at most `timeout`, in
    /// place of the limiter's [`Builder::timeout`](crate::Builder::timeout).
    #[inline]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether the call may be cut early (by default, yes): `false` for a
    /// call that is not safe to cut before its caller's own timeout (a
    /// payment, anything not idempotent), which then keeps that timeout —
    /// the one given to [`Permit::timeout`], or to
    /// [`call`](Admission::call) — and is never given a
    /// [learned](crate::timeout) one shorter, nor, as a probe, a probe
    /// timeout shorter. To the limit, its expiry is then a failure, as a
    /// typed timeout's is. A limiter whose timeout is not learned gives
    /// every call its caller's timeout already, but for probes.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, Limiter, Outcome, Timeout};
    ///
    /// let payments = Limiter::builder(Fixed::new(10)?)
    ///     .timeout(Timeout::learned(Duration::from_secs(15)))
    ///     .build()?;
    /// let charged = payments
    ///     .admission()
    ///     .timeout(Duration::from_secs(5))
    ///     .cut_early(false)
    ///     .call(|_: &Result<(), ()>| Outcome::Success, || async { Ok(()) })
    ///     .await;
    /// assert!(charged.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn cut_early(mut self, cut_early: bool) -> Self {
        self.cut_early = cut_early;
        self
    }

    /// Read the clock at admission even if the policy does not time calls.
    #[cfg_attr(
        not(feature = "tower"),
        allow(dead_code, reason = "used by the tower layers")
    )]
    #[inline]
    pub(crate) fn timed(mut self) -> Self {
        self.timed = true;
        self
    }

    /// May be sent once only (it is not idempotent: a payment, a `POST`):
    /// [`call`](Admission::call) makes no retry after its first attempt is
    /// sent, and sends no [hedge](crate::retry::Hedge) beside it.
    #[inline]
    pub fn send_once(mut self) -> Self {
        self.resend = false;
        self
    }

    /// The same admission, to the limiter borrowed.
    pub(crate) fn borrowed(&self) -> Admission<&Limiter<A, C>> {
        Admission {
            limiter: &self.limiter,
            class: self.class,
            max_wait: self.max_wait,
            timeout: self.timeout,
            cut_early: self.cut_early,
            timed: self.timed,
            resend: self.resend,
        }
    }

    /// Whether [`call`](Admission::call) may send the call more than once.
    pub(crate) fn may_resend(&self) -> bool {
        self.resend
    }

    /// Whether a call that finds the limit reached waits for a slot rather
    /// than fail fast: if the limiter [waits](Limiter::waits) (as the tower
    /// layers then do), or if this admission set its own
    /// [`max_wait`](Admission::max_wait).
    pub(crate) fn waits(&self) -> bool {
        self.max_wait.is_some() || self.limiter.waits()
    }

    /// The limiter.
    pub fn limiter(&self) -> &L {
        &self.limiter
    }

    /// The attempt timeout: the one set here, else the limiter's.
    pub(crate) fn attempt_timeout(&self) -> Option<Duration> {
        self.timeout.or_else(|| self.limiter.timeout_ceiling())
    }

    /// The longest wait for a slot: the one set here, else the limiter's
    /// (`None`: no limit); no longer than `left` either, if given.
    pub(crate) fn wait_within(&self, left: Option<Duration>) -> Option<Duration> {
        match (
            self.max_wait.or_else(|| self.limiter.options.max_wait()),
            left,
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Take a slot now or fail at once with the reason.
    ///
    /// # Errors
    ///
    /// A [`Rejection`] saying why:
    /// [`RejectReason::LimitReached`](crate::RejectReason::LimitReached) (also
    /// when the slots left are kept for more critical classes),
    /// [`RejectReason::Throttled`](crate::RejectReason::Throttled) or
    /// [`RejectReason::Open`](crate::RejectReason::Open) (with the time until
    /// the next probe, where known).
    #[inline]
    pub fn try_acquire(self) -> Result<Permit<L>, Rejection> {
        Limiter::permit_now(self.limiter, self.class, self.timed, self.cut_early)
    }

    /// Take a slot, waiting in the queue if the limit is reached: at most
    /// the [`max_wait`](Admission::max_wait) set here, else the limiter's
    /// [`Builder::max_wait`](crate::Builder::max_wait) (by default, no limit). With classes, the
    /// queue serves the most critical waiter first.
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
    /// [`RejectReason::QueueFull`](crate::RejectReason::QueueFull) at once if
    /// the queue is full,
    /// [`RejectReason::TimedOut`](crate::RejectReason::TimedOut) if no slot
    /// came free in time, or any rejection of
    /// [`try_acquire`](Admission::try_acquire) other than the limit.
    ///
    /// # Panics
    ///
    /// If a maximum wait applies and this is polled outside a Tokio
    /// runtime with the time driver enabled (as `tokio::time::sleep` does).
    pub async fn acquire(self) -> Result<Permit<L>, Rejection> {
        self.acquire_within(None).await
    }

    /// A slot for a call that finds the limit reached: waited for
    /// ([`Admission::acquire_within`], no longer than `left` either) if the
    /// admission [waits](Admission::waits), else refused at once
    /// ([`Admission::try_acquire`]). The rule [`call`](Admission::call)
    /// admits its first attempt by, as the tower layers admit theirs.
    pub(crate) async fn admit(self, left: Option<Duration>) -> Result<Permit<L>, Rejection> {
        if self.waits() {
            self.acquire_within(left).await
        } else {
            self.try_acquire()
        }
    }

    /// [`Admission::acquire`], waiting no longer than `left` either.
    pub(crate) async fn acquire_within(
        self,
        left: Option<Duration>,
    ) -> Result<Permit<L>, Rejection> {
        let wait = self.wait_within(left);
        let ticket = self.limiter.wait_for_slot(wait, self.class).await?;
        Ok(Permit::new(self.limiter, ticket, self.cut_early))
    }
}

impl<L, A, C> fmt::Debug for Admission<L>
where
    L: Deref<Target = Limiter<A, C>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("limiter", &self.limiter.options.name)
            .field("class", &self.class)
            .field("max_wait", &self.max_wait)
            .field("timeout", &self.timeout)
            .field("cut_early", &self.cut_early)
            .finish_non_exhaustive()
    }
}
