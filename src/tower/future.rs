//! The response futures.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::classify::Classify;
use super::retry::{Queue, StartQueue};
use super::service::Acquire;
use crate::algorithms::{Algorithm, Outcome};
use crate::clock::{Clock, DefaultClock};
use crate::error::{CallError, RejectReason, Rejection};
use crate::limiter::{Limiter, OwnedPermit, Readiness};
use crate::priority::Class;
use crate::retry::{Call, Decision, Ended, Retry, RetryOutcome, Verdict};

#[cfg(feature = "tower-retry")]
pub use super::policy::RetryBackoff;

pin_project! {
    /// The response of a [`Rheostat`](super::Rheostat) service: the inner
    /// service's response, or why there is none.
    ///
    /// It holds the call's permit until it completes; the outcome is then
    /// recorded as the classifier says (or as an overload if the timeout ran
    /// out). Dropped before it completes, it releases the permit as the
    /// limiter's drop outcome ([`Outcome::Ignore`](crate::Outcome::Ignore)
    /// unless configured otherwise).
    ///
    /// # Panics
    ///
    /// If polled after it completed, or, with a timeout, polled outside a
    /// Tokio runtime with the time driver enabled.
    pub struct ResponseFuture<F, K, A = Box<dyn Algorithm>, C = DefaultClock> {
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
    #[cfg(feature = "config")]
    NoLimiter(crate::keyed::KeyedError),
}

impl<F, K, A: Algorithm, C: Clock> ResponseFuture<F, K, A, C> {
    /// The call admitted under `permit`, given at most the layer's
    /// `timeout`, or, if it is a probe, the limiter's probe timeout (with or
    /// without a timeout of the layer's own).
    pub(crate) fn new(
        future: F,
        permit: OwnedPermit<A, C>,
        classifier: K,
        timeout: Option<Duration>,
    ) -> Self {
        let timeout = if permit.is_probe() {
            permit.limiter().probe_timeout().or(timeout)
        } else {
            timeout
        };
        ResponseFuture {
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
    #[cfg(feature = "config")]
    pub(crate) fn no_limiter(error: crate::keyed::KeyedError, classifier: K) -> Self {
        Self::refused(Refusal::NoLimiter(error), classifier)
    }

    fn refused(refusal: Refusal, classifier: K) -> Self {
        ResponseFuture {
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

impl<F, K, Res, E, A, C> Future for ResponseFuture<F, K, A, C>
where
    F: Future<Output = Result<Res, E>>,
    K: Classify<Res, E>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<Res, CallError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let future = match this.kind.project() {
            KindProj::Called { future } => future,
            KindProj::Refused { refusal } => {
                return Poll::Ready(Err(
                    match refusal.take().expect("polled after completion") {
                        Refusal::Rejected(rejection) => CallError::Rejected(rejection),
                        #[cfg(feature = "config")]
                        Refusal::NoLimiter(error) => CallError::NoLimiter(error),
                    },
                ));
            }
        };
        if let Poll::Ready(result) = future.poll(cx) {
            if let Some(permit) = this.permit.take() {
                let now = permit.limiter().clock().now();
                let latency = permit
                    .started()
                    .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
                permit.record(this.classifier.classify(&result, latency));
            }
            return Poll::Ready(result.map_err(CallError::Failed));
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

impl<F, K, A: Algorithm, C: Clock> fmt::Debug for ResponseFuture<F, K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("permit", &self.permit)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The response of a [`Rheostat`](super::Rheostat) service given a class
    /// function ([`RheostatLayer::classify_request`](super::RheostatLayer::classify_request)):
    /// a [`ResponseFuture`] once the request is admitted as its class.
    ///
    /// Failing fast, the request was admitted (or refused) in `call`.
    /// Waiting, it first waits in the limiter's queue for a slot for the
    /// request's class, holding the request and the inner service readied
    /// for it, then calls that service; the layer's timeout runs from then.
    ///
    /// # Cancel safety
    ///
    /// Dropped while waiting, it leaves the limiter's queue (a slot handed
    /// to it goes to the next waiter), and the request is never sent;
    /// dropped after, as a [`ResponseFuture`].
    ///
    /// # Panics
    ///
    /// As a [`ResponseFuture`]; and, while waiting for a slot under a
    /// limiter with a `max_wait`, if polled outside a Tokio runtime with the
    /// time driver enabled.
    pub struct ClassResponseFuture<S, Req, K, A = Box<dyn Algorithm>, C = DefaultClock>
    where
        S: Service<Req>,
    {
        #[pin]
        state: ClassState<S, Req, S::Future, K, A, C>,
    }
}

pin_project! {
    #[project = ClassStateProj]
    enum ClassState<S, Req, F, K, A, C> {
        /// Waiting for a slot, with the service readied for the request.
        Waiting {
            acquire: Acquire<A, C>,
            service: Option<S>,
            request: Option<Req>,
            classifier: Option<K>,
            timeout: Option<Duration>,
        },
        /// Admitted (or refused).
        Admitted {
            #[pin]
            future: ResponseFuture<F, K, A, C>,
        },
    }
}

impl<S: Service<Req>, Req, K, A, C> ClassResponseFuture<S, Req, K, A, C> {
    /// Waits for `acquire`, then sends `request` with `service`.
    pub(crate) fn waiting(
        acquire: Acquire<A, C>,
        service: S,
        request: Req,
        classifier: K,
        timeout: Option<Duration>,
    ) -> Self {
        ClassResponseFuture {
            state: ClassState::Waiting {
                acquire,
                service: Some(service),
                request: Some(request),
                classifier: Some(classifier),
                timeout,
            },
        }
    }

    /// Admitted or refused already.
    pub(crate) fn admitted(future: ResponseFuture<S::Future, K, A, C>) -> Self {
        ClassResponseFuture {
            state: ClassState::Admitted { future },
        }
    }
}

impl<S, Req, K, A, C> Future for ClassResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
    K: Classify<S::Response, S::Error>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<S::Response, CallError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let future = match state.as_mut().project() {
                ClassStateProj::Admitted { future } => return future.poll(cx),
                ClassStateProj::Waiting {
                    acquire,
                    service,
                    request,
                    classifier,
                    timeout,
                } => {
                    let slot = ready!(acquire.as_mut().poll(cx));
                    let Some(classifier) = classifier.take() else {
                        unreachable!("a waiting request keeps its classifier")
                    };
                    match slot {
                        Ok(permit) => {
                            let (Some(mut service), Some(request)) =
                                (service.take(), request.take())
                            else {
                                unreachable!("a waiting request keeps its service and itself")
                            };
                            ResponseFuture::new(service.call(request), permit, classifier, *timeout)
                        }
                        Err(rejection) => ResponseFuture::rejected(rejection, classifier),
                    }
                }
            };
            state.set(ClassState::Admitted { future });
        }
    }
}

impl<S: Service<Req>, Req, K, A: Algorithm, C: Clock> fmt::Debug
    for ClassResponseFuture<S, Req, K, A, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            ClassState::Waiting { .. } => f
                .debug_struct("ClassResponseFuture")
                .field("state", &"waiting")
                .finish_non_exhaustive(),
            ClassState::Admitted { future } => f
                .debug_struct("ClassResponseFuture")
                .field("state", &"admitted")
                .field("future", future)
                .finish_non_exhaustive(),
        }
    }
}

/// What a retrying call needs beyond its first attempt.
pub(crate) struct Plan<S, Req, K, A, C> {
    pub(crate) limiter: Arc<Limiter<A, C>>,
    /// The class every attempt is admitted as (`None`: the default class).
    pub(crate) class: Option<Class>,
    pub(crate) classifier: K,
    pub(crate) start_queue: StartQueue<A, C>,
    /// The call's account, `None` if the limiter has no retry policy (one
    /// attempt, nothing observed).
    pub(crate) call: Option<Call>,
    /// The next attempt's timeout before a probe's or the deadline's; `None`
    /// for none.
    pub(crate) next: Option<Duration>,
    /// Whether the rule allows sending the request again.
    pub(crate) retryable: bool,
    /// A clone of the inner service, for the attempts after the first.
    pub(crate) service: Option<S>,
    /// The request, kept for the attempts still to be sent.
    pub(crate) request: Option<Req>,
}

/// How the first attempt began.
pub(crate) enum First<F, A, C> {
    /// Sent under `permit`, given at most `timeout`.
    Called {
        future: F,
        permit: OwnedPermit<A, C>,
        timeout: Option<Duration>,
    },
    /// Refused at admission.
    Refused(Rejection),
    /// Admitted with no time left before the deadline: not sent.
    Expired,
    /// Waiting in the limiter's queue for its slot (a layer that waits,
    /// given a class function), to be sent with the plan's service.
    Waiting(Queue<A, C>),
}

/// The timeout of an attempt admitted under `permit`: a probe's timeout
/// for a probe (or `next` if the limiter has none), whole, even past the
/// call's deadline (as [`Limiter::call`] gives it); otherwise `next`, cut
/// to the `left` of the call's deadline. `None` for none.
pub(crate) fn attempt_timeout<A: Algorithm, C: Clock>(
    permit: Option<&OwnedPermit<A, C>>,
    next: Option<Duration>,
    left: Option<Duration>,
) -> Option<Duration> {
    if let Some(permit) = permit.filter(|p| p.is_probe()) {
        return permit.limiter().probe_timeout().or(next);
    }
    match (next, left) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What is left of `call`'s deadline, if `retry` gives it one.
pub(crate) fn deadline_left<A: Algorithm, C: Clock>(
    limiter: &Limiter<A, C>,
    retry: &Retry,
    call: &Call,
) -> Option<Duration> {
    retry.left(call, limiter.clock().now())
}

/// `timeout`, unless it stands for no timeout at all.
pub(crate) fn finite(timeout: Duration) -> Option<Duration> {
    (timeout != Duration::MAX).then_some(timeout)
}

pin_project! {
    /// The response of a [`RheostatRetry`](super::RheostatRetry) service:
    /// the last attempt's response, or why there is none.
    ///
    /// Each attempt holds its own permit until it completes, recorded as
    /// the classifier says (or as an overload if its timeout ran out);
    /// between attempts (the backoff) no permit is held. A response the
    /// classifier counts as a failure (a 503) is returned as it is once no
    /// retry follows.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the attempt in flight and releases its permit as
    /// the limiter's drop outcome ([`Outcome::Ignore`](crate::Outcome::Ignore)
    /// unless configured otherwise); dropped during a backoff, nothing is
    /// held; dropped while waiting in the limiter's queue, it leaves the
    /// queue (a slot handed to it goes to the next waiter). No retry is
    /// made after it is dropped.
    ///
    /// # Panics
    ///
    /// If polled after it completed, or polled outside a Tokio runtime with
    /// the time driver enabled.
    pub struct RetryResponseFuture<S, Req, K, A = Box<dyn Algorithm>, C = DefaultClock>
    where
        S: Service<Req>,
    {
        #[pin]
        state: Attempt<S::Future, A, C>,
        permit: Option<OwnedPermit<A, C>>,
        timeout: Option<Duration>,
        sleep: Option<Pin<Box<Sleep>>>,
        service: Option<S>,
        request: Option<Req>,
        retryable: bool,
        call: Option<Call>,
        next: Option<Duration>,
        waited: bool,
        limiter: Arc<Limiter<A, C>>,
        class: Option<Class>,
        classifier: K,
        start_queue: StartQueue<A, C>,
    }
}

pin_project! {
    #[project = AttemptProj]
    enum Attempt<F, A, C> {
        /// An attempt in flight.
        Called {
            #[pin]
            future: F,
        },
        /// An attempt refused at admission.
        Refused {
            rejection: Rejection,
        },
        /// Waiting once in the limiter's queue.
        Queued {
            acquire: Queue<A, C>,
        },
        /// Waiting in the limiter's queue for the first attempt's slot, as
        /// a plain service waits in `poll_ready`.
        Waiting {
            acquire: Queue<A, C>,
        },
        /// Admitted: waiting for the inner service to be ready.
        Admitted,
        /// Waiting before the next attempt.
        Backoff {
            sleep: Option<Pin<Box<Sleep>>>,
        },
        /// Admitted with no time left before the deadline.
        Expired,
        /// Finished.
        Done,
    }
}

impl<S, Req, K, A, C> RetryResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
{
    pub(crate) fn new(plan: Plan<S, Req, K, A, C>, first: First<S::Future, A, C>) -> Self {
        let (state, permit, timeout) = match first {
            First::Called {
                future,
                permit,
                timeout,
            } => (Attempt::Called { future }, Some(permit), timeout),
            First::Refused(rejection) => (Attempt::Refused { rejection }, None, None),
            First::Expired => (Attempt::Expired, None, None),
            First::Waiting(acquire) => (Attempt::Waiting { acquire }, None, None),
        };
        RetryResponseFuture {
            state,
            permit,
            timeout,
            sleep: None,
            service: plan.service,
            request: plan.request,
            retryable: plan.retryable,
            call: plan.call,
            next: plan.next,
            waited: false,
            limiter: plan.limiter,
            class: plan.class,
            classifier: plan.classifier,
            start_queue: plan.start_queue,
        }
    }
}

impl<S, Req, K, A, C> Future for RetryResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
    Req: Clone,
    K: Classify<S::Response, S::Error>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<S::Response, CallError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            // Each arm either moves on (`continue`), returns, or hands over
            // a failed attempt: how it ended, and what the call returns if
            // no retry follows.
            let (ended, result) = match this.state.as_mut().project() {
                AttemptProj::Called { future } => match future.poll(cx) {
                    Poll::Ready(result) => {
                        *this.sleep = None;
                        let latency = this
                            .permit
                            .as_ref()
                            .and_then(|permit| permit.started())
                            .map_or(Duration::ZERO, |start| {
                                this.limiter.clock().now().saturating_duration_since(start)
                            });
                        let verdict = if this.call.is_some() {
                            this.classifier.verdict(&result, latency)
                        } else {
                            Verdict::new(this.classifier.classify(&result, latency))
                        };
                        if let Some(permit) = this.permit.take() {
                            permit.record(verdict.outcome);
                        }
                        if verdict.outcome == Outcome::Success || this.call.is_none() {
                            this.state.set(Attempt::Done);
                            return Poll::Ready(result.map_err(CallError::Failed));
                        }
                        (Ended::Ran(verdict), result.map_err(CallError::Failed))
                    }
                    Poll::Pending => {
                        let Some(after) = *this.timeout else {
                            return Poll::Pending;
                        };
                        let sleep = this
                            .sleep
                            .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
                        ready!(sleep.as_mut().poll(cx));
                        *this.sleep = None;
                        if let Some(permit) = this.permit.take() {
                            permit.overload();
                        }
                        if this.call.is_none() {
                            this.state.set(Attempt::Done);
                            return Poll::Ready(Err(CallError::TimedOut(after)));
                        }
                        (Ended::TimedOut, Err(CallError::TimedOut(after)))
                    }
                },
                AttemptProj::Refused { rejection } => {
                    let rejection = *rejection;
                    let (Some(call), Some(retry)) = (this.call.as_ref(), this.limiter.retry())
                    else {
                        this.state.set(Attempt::Done);
                        return Poll::Ready(Err(CallError::Rejected(rejection)));
                    };
                    // As `Limiter::call`: a refusal because the limit is
                    // reached may wait once in the queue, if the retry
                    // policy allows it.
                    if rejection.reason() == RejectReason::LimitReached
                        && retry.config().wait_on_limit
                        && !*this.waited
                        && this.service.is_some()
                    {
                        *this.waited = true;
                        let left = deadline_left(this.limiter, retry, call);
                        let acquire =
                            (this.start_queue)(Arc::clone(this.limiter), left, *this.class);
                        this.state.set(Attempt::Queued { acquire });
                        continue;
                    }
                    (
                        Ended::Refused(rejection.reason()),
                        Err(CallError::Rejected(rejection)),
                    )
                }
                AttemptProj::Queued { acquire } => match ready!(acquire.as_mut().poll(cx)) {
                    Ok(permit) => {
                        *this.permit = Some(permit);
                        this.state.set(Attempt::Admitted);
                        continue;
                    }
                    Err(rejection) => (
                        Ended::Refused(rejection.reason()),
                        Err(CallError::Rejected(rejection)),
                    ),
                },
                AttemptProj::Waiting { acquire } => {
                    // As a refusal in a plain service's `poll_ready`: the
                    // first attempt's answer, refused at admission.
                    let next = match ready!(acquire.as_mut().poll(cx)) {
                        Ok(permit) => {
                            *this.permit = Some(permit);
                            Attempt::Admitted
                        }
                        Err(rejection) => Attempt::Refused { rejection },
                    };
                    this.state.set(next);
                    continue;
                }
                AttemptProj::Admitted => {
                    let Some(service) = this.service.as_mut() else {
                        unreachable!(
                            "an attempt not sent by `call` is made only with a service to send it"
                        )
                    };
                    if let Err(error) = ready!(service.poll_ready(cx)) {
                        if let Some(permit) = this.permit.take() {
                            permit.ignore();
                        }
                        this.state.set(Attempt::Done);
                        return Poll::Ready(Err(CallError::Failed(error)));
                    }
                    let (left, last) = match (this.call.as_ref(), this.limiter.retry()) {
                        (Some(call), Some(retry)) => (
                            deadline_left(this.limiter, retry, call),
                            call.attempts >= retry.config().attempts,
                        ),
                        _ => (None, true),
                    };
                    let timeout = attempt_timeout(this.permit.as_ref(), *this.next, left);
                    if timeout == Some(Duration::ZERO) {
                        if let Some(permit) = this.permit.take() {
                            permit.ignore();
                        }
                        this.state.set(Attempt::Done);
                        return Poll::Ready(Err(CallError::TimedOut(Duration::ZERO)));
                    }
                    // The request is cloned while another attempt may
                    // follow, and moved into the last.
                    let request = if last || !*this.retryable {
                        this.request.take()
                    } else {
                        this.request.clone()
                    };
                    let Some(request) = request else {
                        unreachable!("a request is kept until its last attempt is sent")
                    };
                    *this.timeout = timeout;
                    *this.sleep = None;
                    let future = service.call(request);
                    this.state.set(Attempt::Called { future });
                    continue;
                }
                AttemptProj::Backoff { sleep } => {
                    if let Some(sleep) = sleep {
                        ready!(sleep.as_mut().poll(cx));
                    }
                    if let Some(call) = this.call.as_mut() {
                        call.attempts += 1;
                    }
                    let next = match this.limiter.try_acquire_timed_as(*this.class) {
                        Ok(permit) => {
                            *this.permit = Some(permit.into_owned(Arc::clone(this.limiter)));
                            Attempt::Admitted
                        }
                        Err(rejection) => Attempt::Refused { rejection },
                    };
                    this.state.set(next);
                    continue;
                }
                AttemptProj::Expired => {
                    this.state.set(Attempt::Done);
                    return Poll::Ready(Err(CallError::TimedOut(Duration::ZERO)));
                }
                AttemptProj::Done => panic!("polled after completion"),
            };

            // A failed attempt: decide what follows, and tell the observer.
            let (Some(call), Some(retry)) = (this.call.as_ref(), this.limiter.retry()) else {
                this.state.set(Attempt::Done);
                return Poll::Ready(result);
            };
            let wants_retry = match ended {
                Ended::Ran(verdict) => verdict.may_retry(),
                Ended::TimedOut => true,
                Ended::Refused(_) => false,
            };
            let (decision, dry) = if wants_retry && !*this.retryable {
                // The rule forbids sending it again: no retry is withdrawn
                // from the budget.
                (Decision::Stop(RetryOutcome::NotRetryable), false)
            } else {
                let shut = matches!(this.limiter.readiness(), Readiness::Shut { .. });
                retry.decide(call, ended, this.limiter.clock().now(), shut)
            };
            this.limiter.observe_retry(call, ended, decision, dry);
            match decision {
                Decision::Stop(_) => {
                    this.state.set(Attempt::Done);
                    return Poll::Ready(result);
                }
                Decision::Retry { wait, timeout } => {
                    drop(result);
                    *this.next = finite(timeout);
                    let sleep = (!wait.is_zero()).then(|| Box::pin(tokio::time::sleep(wait)));
                    this.state.set(Attempt::Backoff { sleep });
                }
            }
        }
    }
}

impl<S, Req, K, A: Algorithm, C: Clock> fmt::Debug for RetryResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryResponseFuture")
            .field("permit", &self.permit)
            .field("timeout", &self.timeout)
            .field("call", &self.call)
            .field("retryable", &self.retryable)
            .finish_non_exhaustive()
    }
}
