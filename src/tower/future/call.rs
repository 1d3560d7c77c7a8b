//! [`Call`]: one call under its permit, or why there is none, as the
//! [`ResponseFuture`](super::ResponseFuture) of a plain or keyed service
//! polls it once the call is admitted.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::{CallError, Rejection};
use crate::limiter::OwnedPermit;
use crate::tower::classify::Classify;
use crate::tower::end::{Answer, Finish};

pin_project! {
    /// One call under its permit, or why there is none: the inner
    /// service's future, its permit held until it completes and then
    /// ended as the classifier's [`Classify::End`] says (or recorded as an overload if
    /// the timeout ran out first).
    pub(crate) struct Call<F, K, A, C> {
        #[pin]
        kind: Kind<F>,
        permit: Option<OwnedPermit<A, C>>,
        classifier: K,
        timeout: Option<Duration>,
        sleep: Option<Pin<Box<Sleep>>>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Called {
            #[pin]
            future: F,
        },
        Refused {
            refusal: Option<Refusal>,
        },
    }
}

/// Why a request was not sent.
#[derive(Debug)]
enum Refusal {
    Rejected(Rejection),
    NoLimiter(crate::keyed::KeyedError),
}

impl<F, K, A: Algorithm, C: Clock> Call<F, K, A, C> {
    /// The call admitted under `permit`, given at most the layer's
    /// `timeout`, or, if it is a probe, the limiter's probe timeout (with or
    /// without a timeout of the layer's own).
    pub(crate) fn new(
        future: F,
        permit: OwnedPermit<A, C>,
        classifier: K,
        timeout: Option<Duration>,
    ) -> Self {
        let timeout = single_timeout(&permit, timeout);
        Call {
            kind: Kind::Called { future },
            permit: Some(permit),
            classifier,
            timeout,
            sleep: None,
        }
    }

    pub(crate) fn rejected(rejection: Rejection, classifier: K) -> Self {
        Self::refused(Refusal::Rejected(rejection), classifier)
    }

    /// No limiter could be had for the request's key.
    pub(crate) fn no_limiter(error: crate::keyed::KeyedError, classifier: K) -> Self {
        Self::refused(Refusal::NoLimiter(error), classifier)
    }

    fn refused(refusal: Refusal, classifier: K) -> Self {
        Call {
            kind: Kind::Refused {
                refusal: Some(refusal),
            },
            permit: None,
            classifier,
            timeout: None,
            sleep: None,
        }
    }
}

impl<F, K, Res, E, A, C> Future for Call<F, K, A, C>
where
    F: Future<Output = Result<Res, E>>,
    K: Classify<Res, E>,
    K::End: Finish<Res, E, K, A, C>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<Answer<K, Res, E, A, C>, CallError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let future = match this.kind.project() {
            KindProj::Called { future } => future,
            KindProj::Refused { refusal } => {
                return Poll::Ready(Err(
                    match refusal.take().expect("polled after completion") {
                        Refusal::Rejected(rejection) => CallError::Rejected(rejection),
                        Refusal::NoLimiter(error) => CallError::NoLimiter(error),
                    },
                ));
            }
        };
        if let Poll::Ready(result) = future.poll(cx) {
            let finished = K::End::finish(
                this.classifier,
                result,
                this.permit.take(),
                *this.timeout,
                this.sleep.take(),
            );
            return Poll::Ready(finished.map_err(CallError::Failed));
        }
        if let Some(after) = *this.timeout {
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
            if sleep.as_mut().poll(cx).is_ready() {
                if let Some(permit) = this.permit.take() {
                    permit.overload();
                }
                return Poll::Ready(Err(CallError::TimedOut(after)));
            }
        }
        Poll::Pending
    }
}

impl<F, K, A: Algorithm, C: Clock> fmt::Debug for Call<F, K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("permit", &self.permit)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// `timeout`, unless it stands for no timeout at all.
pub(crate) fn finite(timeout: Duration) -> Option<Duration> {
    (timeout != Duration::MAX).then_some(timeout)
}

/// The timeout of the one attempt of a call without retries (the plain
/// layer's, or a retrying layer's under a limiter with no retry policy),
/// admitted under `permit`: what the permit gives it within `timeout`
/// ([`Permit::timeout`](crate::Permit::timeout): a probe's own, or a learned
/// one below `timeout`, unless it is not to be cut early), or a probe's own
/// if there is no `timeout` (none, if it is not to be cut early); `None`
/// for none.
pub(crate) fn single_timeout<A: Algorithm, C: Clock>(
    permit: &OwnedPermit<A, C>,
    timeout: Option<Duration>,
) -> Option<Duration> {
    // `Duration::MAX`: no timeout but a probe's.
    finite(permit.timeout(timeout.unwrap_or(Duration::MAX)))
}
