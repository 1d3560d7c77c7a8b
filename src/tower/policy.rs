//! [`RetryPolicy`]: the limiter's retry policy as a `tower::retry::Policy`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use super::classify::{Classify, Unclassified};
use super::idempotent::{AnyRequest, IdempotentOnly, RetryRule};
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::limiter::{Limiter, Readiness};
use crate::retry::{Action, Attempts, Ended};

/// The limiter's [retry policy](crate::retry) as a [`tower::retry::Policy`],
/// for a stack that already uses tower's [`Retry`](tower::retry::Retry)
/// middleware: it spends the limiter's retry budget, and keeps to its
/// attempts, deadline and backoff.
///
/// Put tower's `Retry` *outside* the [`RheostatLayer`](super::RheostatLayer)
/// of the same limiter, so that each attempt is admitted (and recorded) by
/// the limiter, and give both the same classifier: the policy reads the
/// inner layer's [`CallError`]s, and never retries a
/// [`CallError::Rejected`] (an open breaker, throttling, a full limit), nor
/// a failure after which the breaker is open. Every decision after a failed
/// attempt is told to the limiter's [`Observer`](crate::Observer), as
/// [`Limiter::call`] tells it.
///
/// Only [`Idempotent`](super::Idempotent) requests are retried unless
/// [`retry_any_method`](Self::retry_any_method) or
/// [`retry_when`](Self::retry_when) say otherwise; a request the rule
/// excludes is sent once, and not cloned (tower then asks nothing more
/// about it, so the observer does not hear of its failure). With a limiter
/// that has no retry policy, nothing is retried or cloned.
///
/// # Per request
///
/// Tower's `Retry` clones the policy for each request (after asking it to
/// clone the request), and asks the clone about that request's attempts.
/// So the policy counts a call in the budget ([`Retry::begin`](crate::retry::Retry::begin))
/// when it is asked to clone a request it has not been asked to retry:
/// once per request, whether or not the request may be retried. A policy
/// used another way must be cloned afresh for each request.
///
/// # Differences from [`RheostatLayer::retry`](super::RheostatLayer::retry)
///
/// Tower's `Retry` cannot give an attempt a timeout of its own: each
/// attempt gets the inner layer's. So a deadline
/// ([`RetryConfig::deadline`](crate::retry::RetryConfig::deadline)) stops
/// retries that could not start before it but does not cut the last
/// attempt short, and [`RetryConfig::timeout`](crate::retry::RetryConfig::timeout)
/// is not applied. A refusal by the inner layer is never retried, even with
/// [`wait_on_limit`](crate::retry::RetryConfig::wait_on_limit): give the
/// inner layer [`wait`](super::RheostatLayer::wait) to queue for a slot.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::retry::{Backoff, RetryConfig};
/// use rheostat::tower::{HttpClassifier, RetryPolicy, RheostatLayer};
/// use rheostat::{algorithms::Fixed, Limiter};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// let limiter = Arc::new(
///     Limiter::builder(Fixed::new(16)?)
///         .retry(RetryConfig {
///             backoff: Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(5) },
///             ..RetryConfig::default()
///         })
///         .build()?,
/// );
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = Arc::clone(&calls);
/// let client = ServiceBuilder::new()
///     .retry(RetryPolicy::new(Arc::clone(&limiter)).classify(HttpClassifier::new()))
///     .layer(RheostatLayer::new(Arc::clone(&limiter)).classify(HttpClassifier::new()))
///     .service(service_fn(move |_: http::Request<()>| {
///         // 503 once, then 200.
///         let status = if seen.fetch_add(1, Ordering::SeqCst) == 0 { 503 } else { 200 };
///         async move { http::Response::builder().status(status).body(()) }
///     }));
///
/// let response = client.oneshot(http::Request::get("http://example.com/").body(())?).await?;
/// assert_eq!(response.status(), 200);
/// assert_eq!(calls.load(Ordering::SeqCst), 2);
/// # Ok(())
/// # }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "tower-retry")))]
pub struct RetryPolicy<K, R = IdempotentOnly, A = Box<dyn Algorithm>, C = DefaultClock> {
    limiter: Arc<Limiter<A, C>>,
    classifier: K,
    rule: R,
    /// The attempts of the request this copy is about.
    attempts: Option<Attempts>,
    /// Whether the last question was a retry this copy granted: the next
    /// request to clone is that retry's, not a new request.
    resending: bool,
    /// When the attempt in flight was sent, by the limiter's clock.
    sent: Option<Instant>,
}

impl<A: Algorithm, C: Clock> RetryPolicy<Unclassified, IdempotentOnly, A, C> {
    /// Retry through `limiter`'s retry policy the idempotent requests that
    /// failed, once told how to judge results: the policy cannot be used
    /// before [`classify`](Self::classify) is given the inner layer's
    /// classifier ([`Unclassified`](super::Unclassified) says why).
    pub fn new(limiter: Arc<Limiter<A, C>>) -> Self {
        RetryPolicy {
            limiter,
            classifier: Unclassified,
            rule: IdempotentOnly,
            attempts: None,
            resending: false,
            sent: None,
        }
    }
}

impl<K, R, A: Algorithm, C: Clock> RetryPolicy<K, R, A, C> {
    /// Judge results with `classifier`'s [verdict](super::Classify::verdict)
    /// (the inner layer's classifier: an
    /// [`HttpClassifier`](super::HttpClassifier) for HTTP).
    pub fn classify<K2>(self, classifier: K2) -> RetryPolicy<K2, R, A, C> {
        RetryPolicy {
            limiter: self.limiter,
            classifier,
            rule: self.rule,
            attempts: self.attempts,
            resending: self.resending,
            sent: self.sent,
        }
    }

    /// Retry every request, whatever its method.
    pub fn retry_any_method(self) -> RetryPolicy<K, AnyRequest, A, C> {
        self.retry_when(AnyRequest)
    }

    /// Retry the requests `rule` allows.
    pub fn retry_when<R2>(self, rule: R2) -> RetryPolicy<K, R2, A, C> {
        RetryPolicy {
            limiter: self.limiter,
            classifier: self.classifier,
            rule,
            attempts: self.attempts,
            resending: self.resending,
            sent: self.sent,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }
}

impl<Req, Res, E, K, R, A, C> tower::retry::Policy<Req, Res, CallError<E>>
    for RetryPolicy<K, R, A, C>
where
    Req: Clone,
    K: Classify<Res, E, End = ()>,
    R: RetryRule<Req>,
    A: Algorithm,
    C: Clock,
{
    type Future = RetryBackoff;

    fn retry(
        &mut self,
        _request: &mut Req,
        result: &mut Result<Res, CallError<E>>,
    ) -> Option<Self::Future> {
        let retry = self.limiter.retry()?;
        let attempts = self.attempts.as_mut()?;
        let ended = match result {
            Err(CallError::TimedOut(_)) => Ended::TimedOut,
            Err(CallError::Rejected(rejection)) => Ended::Refused(rejection.reason()),
            _ => {
                let latency = self.sent.map_or(Duration::ZERO, |sent| {
                    self.limiter.clock().now().saturating_duration_since(sent)
                });
                // Any other error is no failure of this limiter's attempt
                // (a bad timeout, no limiter for a key): nothing to retry.
                Ended::Ran(with_inner(result, |inner| {
                    self.classifier.verdict(inner, latency)
                })?)
            }
        };
        let limiter = &self.limiter;
        let shut = || matches!(limiter.readiness(), Readiness::Shut { .. });
        match attempts.ended(retry, ended, || limiter.clock().now(), shut) {
            // Tower's `Retry` gives the attempt the inner layer's timeout.
            Action::Sleep { wait, decided } => {
                limiter.observe_retry(decided);
                self.resending = true;
                Some(RetryBackoff::new(wait))
            }
            Action::Answer {
                decided: Some(decided),
            } => {
                limiter.observe_retry(decided);
                None
            }
            // A success; the machine answers nothing else to an end.
            _ => None,
        }
    }

    fn clone_request(&mut self, request: &Req) -> Option<Req> {
        let retry = self.limiter.retry()?;
        let now = self.limiter.clock().now();
        if std::mem::take(&mut self.resending) {
            // The retry granted, sent now that its backoff is over.
            if let Some(attempts) = self.attempts.as_mut() {
                // `Action::Acquire`: the inner layer takes its slot.
                let _acquire = attempts.backoff_elapsed();
            }
        } else {
            // A new request: it counts in the budget once.
            self.attempts = Some(Attempts::new(retry, now, Duration::MAX));
        }
        self.sent = Some(now);
        self.rule.may_retry(request).then(|| request.clone())
    }
}

/// `f` of `result` as the inner service's own `Result`, which it is for a
/// response or a [`CallError::Failed`] (`None` for any other error); the
/// result is left as it was.
fn with_inner<Res, E, T>(
    result: &mut Result<Res, CallError<E>>,
    f: impl FnOnce(&Result<Res, E>) -> T,
) -> Option<T> {
    let inner = match std::mem::replace(result, Err(CallError::TimedOut(Duration::ZERO))) {
        Ok(response) => Ok(response),
        Err(CallError::Failed(error)) => Err(error),
        Err(other) => {
            *result = Err(other);
            return None;
        }
    };
    let out = f(&inner);
    *result = inner.map_err(CallError::Failed);
    Some(out)
}

impl<K: Clone, R: Clone, A, C> Clone for RetryPolicy<K, R, A, C> {
    /// A copy for one request, which tower's `Retry` makes after asking
    /// this policy to clone the request: it carries that request's account.
    fn clone(&self) -> Self {
        RetryPolicy {
            limiter: Arc::clone(&self.limiter),
            classifier: self.classifier.clone(),
            rule: self.rule.clone(),
            attempts: self.attempts,
            resending: self.resending,
            sent: self.sent,
        }
    }
}

impl<K: fmt::Debug, R: fmt::Debug, A: Algorithm, C: Clock> fmt::Debug for RetryPolicy<K, R, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("limiter", &self.limiter.name())
            .field("classifier", &self.classifier)
            .field("rule", &self.rule)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

/// The wait before a retry that [`RetryPolicy`] grants: the limiter's
/// jittered backoff, at least the server's `Retry-After`.
///
/// # Panics
///
/// If polled outside a Tokio runtime with the time driver enabled.
#[cfg_attr(docsrs, doc(cfg(feature = "tower-retry")))]
pub struct RetryBackoff {
    sleep: Option<Pin<Box<Sleep>>>,
}

impl RetryBackoff {
    fn new(wait: Duration) -> Self {
        RetryBackoff {
            sleep: (!wait.is_zero()).then(|| Box::pin(tokio::time::sleep(wait))),
        }
    }
}

impl Future for RetryBackoff {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

impl fmt::Debug for RetryBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBackoff")
            .field("deadline", &self.sleep.as_ref().map(|s| s.deadline()))
            .finish()
    }
}
