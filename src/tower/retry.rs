//! Retrying through the layer ([`RheostatLayer::retry`]); the rule that
//! says which requests may be sent more than once is in `idempotent.rs`.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::acquire::{start_acquire, StartAcquire};
use super::class::Admit;
use super::classify::Classify;
use super::future::{finite, single_timeout, First, Plan, RetryResponseFuture};
use super::idempotent::{AnyRequest, IdempotentOnly, RetryRule};
use super::layer::RheostatLayer;
use super::service::Rheostat;
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::limiter::Limiter;
use crate::priority::Class;
use crate::retry::{Action, Attempts};

impl<K, A: Algorithm, C: Clock, P> RheostatLayer<K, A, C, P> {
    /// Retry failed requests as the limiter's [retry policy](crate::retry)
    /// says: the same layer, whose service, a [`RheostatRetry`], clones
    /// each request it may retry (so it needs `Req: Clone`, which the plain
    /// layer does not) and sends it again after a retryable failure.
    ///
    /// An `http::Request<B>` is `Clone` only if its body `B` is: a
    /// buffered body such as `http_body_util::Full<Bytes>`, `String`,
    /// `Vec<u8>` or `()` can be retried; a streaming body (hyper's
    /// `Incoming`, a `BoxBody`) cannot be sent twice, so buffer it first
    /// (`http_body_util::BodyExt::collect`, then
    /// `Full::new(collected.to_bytes())`).
    ///
    /// Only [`Idempotent`](super::Idempotent) requests are retried (for
    /// HTTP: `GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS`, `TRACE`, unless
    /// marked `NotIdempotent`); see
    /// [`retry_any_method`](RheostatLayer::retry_any_method) and
    /// [`retry_when`](RheostatLayer::retry_when) to say otherwise. A
    /// limiter without a retry policy ([`Builder::retry`](crate::Builder::retry)
    /// not called) sends every request once, as the plain layer does,
    /// without cloning it: the same as [`Limiter::call`]. Given a class
    /// function ([`classify_request`](RheostatLayer::classify_request),
    /// before or after `retry`), every attempt of a request is admitted as
    /// its class. See the [module documentation](super#retries) for the
    /// bounds a retry keeps to.
    ///
    /// A retry policy with a [`hedge`](crate::retry::RetryConfig::hedge)
    /// hedges the requests the rule allows sending again, as
    /// [`Limiter::call`] does: an attempt still out after the hedge delay
    /// races a second one, sent by a clone of the inner service under a
    /// free slot, and the first answer is the response (see the [module
    /// documentation](super#hedged-requests)). A request that may not be
    /// retried is never hedged.
    ///
    /// # Cancel safety
    ///
    /// Dropping a response future drops every attempt in flight (an
    /// attempt, and the hedges raced beside it) and releases each one's
    /// permit, recorded as the limiter's drop outcome
    /// ([`Outcome::Ignore`](crate::Outcome::Ignore) unless configured
    /// otherwise); dropped during a backoff, it holds nothing; dropped
    /// while waiting in the limiter's queue, it leaves the queue. No
    /// further attempt or hedge is sent.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use rheostat::retry::RetryConfig;
    /// use rheostat::tower::{HttpClassifier, RheostatLayer};
    /// use rheostat::{algorithms::Fixed, Limiter};
    ///
    /// let limiter = Limiter::builder(Fixed::new(32)?).retry(RetryConfig::default()).build()?;
    /// let layer = RheostatLayer::new(Arc::new(limiter))
    ///     .classify(HttpClassifier::new())
    ///     .timeout(Duration::from_secs(2))?
    ///     .retry();
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry(self) -> RheostatLayer<K, A, C, P, Retrying<IdempotentOnly>> {
        self.with_retry(Retrying(IdempotentOnly))
    }
}

/// The retry rule of a [`RheostatLayer`] that [retries](RheostatLayer::retry):
/// which requests may be sent again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Retrying<R>(R);

impl<K, R, A: Algorithm, C: Clock, P> RheostatLayer<K, A, C, P, Retrying<R>> {
    /// Retry every request, whatever its method (or whether it has one):
    /// for a dependency that deduplicates requests, or a request type that
    /// does not implement [`Idempotent`](super::Idempotent).
    pub fn retry_any_method(self) -> RheostatLayer<K, A, C, P, Retrying<AnyRequest>> {
        self.retry_when(AnyRequest)
    }

    /// Retry the requests `rule` allows.
    pub fn retry_when<R2>(self, rule: R2) -> RheostatLayer<K, A, C, P, Retrying<R2>> {
        self.with_retry(Retrying(rule))
    }
}

impl<S, K: Clone, R: Clone, A: Algorithm + 'static, C: Clock, P: Clone> Layer<S>
    for RheostatLayer<K, A, C, P, Retrying<R>>
{
    type Service = RheostatRetry<S, K, R, A, C, P>;

    fn layer(&self, inner: S) -> Self::Service {
        RheostatRetry {
            rheostat: self.rheostat(inner),
            rule: self.retry_rule().0.clone(),
            start_queue: start_acquire::<A, C>,
        }
    }
}

/// A [`Rheostat`] that retries failed requests within the limiter's
/// [retry policy](crate::retry). Made by a [`RheostatLayer`] after
/// [`retry`](RheostatLayer::retry); see the [module
/// documentation](super#retries).
///
/// Readiness is the plain service's: failing fast, the inner service's;
/// waiting ([`RheostatLayer::wait`]), a slot for the first attempt is
/// waited for in `poll_ready`. A retry takes its slot without waiting
/// unless the retry policy's [`wait_on_limit`](crate::retry::RetryConfig::wait_on_limit)
/// allows one wait in the queue, and waits for a clone of the inner
/// service to be ready before it is sent. A hedge never waits for a slot,
/// and waits for the same clone to be ready while the attempt it races
/// runs on; not sent if the attempt answers first (reported
/// [`HedgeOutcome::Refused`](crate::retry::HedgeOutcome::Refused), its
/// slot given back unrecorded).
///
/// Given a class function
/// ([`RheostatLayer::classify_request`]), every attempt is admitted as the
/// request's class, and readiness is the inner service's: waiting, the
/// response future waits for the first attempt's slot, within the retry
/// policy's deadline, which then runs from `call`.
pub struct RheostatRetry<S, K, R = IdempotentOnly, A = Box<dyn Algorithm>, C = DefaultClock, P = ()>
{
    rheostat: Rheostat<S, K, A, C, P>,
    rule: R,
    start_queue: StartAcquire<A, C>,
}

impl<S, K, R, A: Algorithm, C: Clock, P> RheostatRetry<S, K, R, A, C, P> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        self.rheostat.get_ref()
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        self.rheostat.get_mut()
    }

    /// The inner service, unwrapped (a slot reserved by `poll_ready` is
    /// given back).
    pub fn into_inner(self) -> S {
        self.rheostat.into_inner()
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        self.rheostat.limiter()
    }
}

/// Admission is as `P` says, for every attempt: readiness is the plain
/// service's (see [`Rheostat`]). Each call is over when its response comes
/// (a classifier whose [`Classify::End`] is `()`): a call whose outcome
/// comes at the end of its body (gRPC) is not retried through the layer.
impl<S, Req, K, R, A, C, P> Service<Req> for RheostatRetry<S, K, R, A, C, P>
where
    S: Service<Req> + Clone,
    Req: Clone,
    K: Classify<S::Response, S::Error, End = ()> + Clone,
    R: RetryRule<Req>,
    A: Algorithm,
    C: Clock,
    P: Admit<S, Req>,
{
    type Response = S::Response;
    type Error = CallError<S::Error>;
    type Future = RetryResponseFuture<S, Req, K, A, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.rheostat.poll_admission(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let (class, cut_early) = self.rheostat.classify().admit(&request);
        self.start(request, class, cut_early)
    }
}

impl<S, K, R, A: Algorithm, C: Clock, P> RheostatRetry<S, K, R, A, C, P> {
    /// Starts a call of `request`, every attempt admitted as `class`, cut
    /// early or not as `cut_early` says; the first waiting in the
    /// limiter's queue in the response future if the plain service hands
    /// its inner service over for that (a layer that waits, given a class
    /// function), otherwise admitted here.
    fn start<Req>(
        &mut self,
        request: Req,
        class: Option<Class>,
        cut_early: bool,
    ) -> RetryResponseFuture<S, Req, K, A, C>
    where
        S: Service<Req> + Clone,
        Req: Clone,
        K: Clone,
        R: RetryRule<Req>,
        P: Admit<S, Req>,
    {
        let handed = self.rheostat.hand_over::<Req>();
        let limiter = Arc::clone(self.rheostat.limiter());
        let layer_timeout = self.rheostat.timeout();
        let mut plan = Plan {
            limiter: Arc::clone(&limiter),
            class,
            cut_early,
            classifier: self.rheostat.classifier().clone(),
            start_queue: self.start_queue,
            attempts: None,
            timeout: layer_timeout,
            service: None,
            request: None,
        };
        let Some(retry) = limiter.retry() else {
            // No retry policy: one attempt, as the plain service makes.
            if let Some(service) = handed {
                plan.service = Some(service);
                plan.request = Some(request);
                let acquire = (self.start_queue)(Arc::clone(&limiter), None, class, cut_early);
                return RetryResponseFuture::new(plan, First::Waiting(acquire));
            }
            let first = match self.rheostat.take_slot(class, cut_early) {
                Err(rejection) => First::Refused(rejection),
                Ok(permit) => First::Called {
                    timeout: single_timeout(&permit, layer_timeout),
                    future: self.rheostat.get_mut().call(request),
                    permit,
                },
            };
            return RetryResponseFuture::new(plan, first);
        };
        // The call's attempts: counted in the budget once, the deadline
        // running from here.
        let mut attempts = Attempts::new(
            retry,
            limiter.clock().now(),
            layer_timeout.unwrap_or(Duration::MAX),
        );
        if !self.rule.may_retry(&request) {
            attempts = attempts.no_resend();
        }
        if let Some(service) = handed {
            // The first attempt waits for its slot in the response future,
            // within the deadline, and is sent by the service readied for
            // it.
            plan.service = Some(service);
            plan.request = Some(request);
            let left = retry.left(attempts.call(), limiter.clock().now());
            let acquire = (self.start_queue)(Arc::clone(&limiter), left, class, cut_early);
            plan.attempts = Some(attempts);
            return RetryResponseFuture::new(plan, First::Waiting(acquire));
        }
        let again = attempts.may_follow(retry);
        let slot = self.rheostat.take_slot(class, cut_early);
        // A clone of the inner service sends what follows the first
        // attempt: the retries, or the first attempt itself after a wait
        // in the queue.
        if again || slot.is_err() {
            plan.service = Some(self.rheostat.get_ref().clone());
        }
        let first = match slot {
            Err(rejection) => {
                plan.request = Some(request);
                First::Refused(rejection)
            }
            Ok(permit) => {
                let (timeout, probe) = (permit.timeout(attempts.next_timeout()), permit.is_probe());
                match attempts.admitted(retry, || limiter.clock().now(), timeout, probe) {
                    Action::Send { timeout } => {
                        let sent = if again {
                            let sent = request.clone();
                            plan.request = Some(request);
                            sent
                        } else {
                            request
                        };
                        First::Called {
                            future: self.rheostat.get_mut().call(sent),
                            permit,
                            timeout: finite(timeout),
                        }
                    }
                    // `Action::Expire`, the other answer to an admission.
                    _ => {
                        permit.ignore();
                        First::Expired
                    }
                }
            }
        };
        plan.attempts = Some(attempts);
        RetryResponseFuture::new(plan, first)
    }
}

impl<S: Clone, K: Clone, R: Clone, A: Algorithm, C: Clock, P: Clone> Clone
    for RheostatRetry<S, K, R, A, C, P>
{
    /// A clone shares the limiter but not a slot reserved by `poll_ready`.
    fn clone(&self) -> Self {
        RheostatRetry {
            rheostat: self.rheostat.clone(),
            rule: self.rule.clone(),
            start_queue: self.start_queue,
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug, R: fmt::Debug, A: Algorithm, C: Clock, P: fmt::Debug> fmt::Debug
    for RheostatRetry<S, K, R, A, C, P>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RheostatRetry")
            .field("rheostat", &self.rheostat)
            .field("rule", &self.rule)
            .finish_non_exhaustive()
    }
}
