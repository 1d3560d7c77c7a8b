//! Retrying through the layer ([`RheostatLayer::retry`]), and the rule
//! that says which requests may be sent more than once.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::class::{ByRequest, ClassifyRequest, DefaultClass};
use super::classify::Classify;
use super::future::{finite, single_timeout, First, Plan, RetryResponseFuture};
use super::layer::RheostatLayer;
use super::service::{start_acquire, Rheostat, StartAcquire};
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::limiter::Limiter;
use crate::priority::Class;
use crate::retry::{Action, Attempts};

/// Which requests a retrying service ([`RheostatLayer::retry`],
/// and, with the `tower-retry` feature, `RetryPolicy`) may send more than
/// once.
///
/// [`IdempotentOnly`] (the default) allows the requests that say they are
/// [`Idempotent`]; [`AnyRequest`] allows every request. Implement it for a
/// rule of your own (a `POST` carrying an `Idempotency-Key` header, a gRPC
/// method known to be safe).
///
/// # Examples
///
/// ```
/// use rheostat::tower::RetryRule;
///
/// /// Reads may be retried, writes may not.
/// #[derive(Clone, Copy, Debug)]
/// struct ReadsOnly;
///
/// enum Query { Read(String), Write(String) }
///
/// impl RetryRule<Query> for ReadsOnly {
///     fn may_retry(&self, query: &Query) -> bool {
///         matches!(query, Query::Read(_))
///     }
/// }
///
/// assert!(ReadsOnly.may_retry(&Query::Read("balance".into())));
/// assert!(!ReadsOnly.may_retry(&Query::Write("transfer".into())));
/// ```
pub trait RetryRule<Req> {
    /// Whether `request` may be sent again after a failed attempt.
    fn may_retry(&self, request: &Req) -> bool;
}

/// A request that knows whether sending it twice has the effect of sending
/// it once, and so may be retried by the default rule, [`IdempotentOnly`].
///
/// With the `http` feature, implemented for `http::Method` and
/// `http::Request`: `GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS` and
/// `TRACE` are idempotent (RFC 9110, section 9.2.2); `POST`, `PATCH`,
/// `CONNECT` and extension methods are not. Implement it for a request type
/// of your own, or retry every request with
/// [`RheostatRetryLayer::retry_any_method`].
///
/// # Examples
///
/// ```
/// use rheostat::tower::Idempotent;
///
/// assert!(http::Method::PUT.is_idempotent());
/// assert!(!http::Method::POST.is_idempotent());
/// let request = http::Request::delete("http://example.com/carts/7").body(()).unwrap();
/// assert!(request.is_idempotent());
/// ```
pub trait Idempotent {
    /// Whether sending it again is safe.
    fn is_idempotent(&self) -> bool;
}

#[cfg(feature = "http")]
impl Idempotent for http::Method {
    fn is_idempotent(&self) -> bool {
        matches!(
            *self,
            http::Method::GET
                | http::Method::HEAD
                | http::Method::PUT
                | http::Method::DELETE
                | http::Method::OPTIONS
                | http::Method::TRACE
        )
    }
}

#[cfg(feature = "http")]
impl<B> Idempotent for http::Request<B> {
    fn is_idempotent(&self) -> bool {
        self.method().is_idempotent()
    }
}

/// The default [`RetryRule`]: retry a request only if it is
/// [`Idempotent`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdempotentOnly;

impl<Req: Idempotent> RetryRule<Req> for IdempotentOnly {
    fn may_retry(&self, request: &Req) -> bool {
        request.is_idempotent()
    }
}

/// A [`RetryRule`] that retries every request, whatever its method: for
/// requests that carry no method, or whose effects the server
/// deduplicates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnyRequest;

impl<Req> RetryRule<Req> for AnyRequest {
    fn may_retry(&self, _request: &Req) -> bool {
        true
    }
}

impl<K, A: Algorithm, C: Clock, P> RheostatLayer<K, A, C, P> {
    /// Retry failed requests as the limiter's [retry policy](crate::retry)
    /// says: the same layer, whose service clones each request it may
    /// retry (so it needs `Req: Clone`, which the plain layer does not) and
    /// sends it again after a retryable failure.
    ///
    /// Only [`Idempotent`] requests are retried (for HTTP: `GET`, `HEAD`,
    /// `PUT`, `DELETE`, `OPTIONS`, `TRACE`); see
    /// [`RheostatRetryLayer::retry_any_method`] and
    /// [`RheostatRetryLayer::retry_when`] to say otherwise. A limiter
    /// without a retry policy ([`Builder::retry`](crate::Builder::retry)
    /// not called) sends every request once, as the plain layer does,
    /// without cloning it: the same as [`Limiter::call`]. See the [module
    /// documentation](super#retries) for the bounds a retry keeps to.
    ///
    /// # Cancel safety
    ///
    /// Dropping a response future ([`RetryResponseFuture`]) drops the
    /// attempt in flight and releases its permit, recorded as the limiter's
    /// drop outcome ([`Outcome::Ignore`](crate::Outcome::Ignore) unless
    /// configured otherwise); dropped during a backoff, it holds nothing;
    /// dropped while waiting in the limiter's queue, it leaves the queue.
    /// No further attempt is sent.
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
    pub fn retry(self) -> RheostatRetryLayer<K, IdempotentOnly, A, C, P> {
        RheostatRetryLayer {
            layer: self,
            rule: IdempotentOnly,
        }
    }
}

/// A [`RheostatLayer`] that retries: made by [`RheostatLayer::retry`];
/// wraps a service in a [`RheostatRetry`].
///
/// Its service needs `Req: Clone`. An `http::Request<B>`
/// is `Clone` only if its body `B` is: a buffered body such as
/// `http_body_util::Full<Bytes>`, `String`, `Vec<u8>` or `()` can be retried;
/// a streaming body (hyper's `Incoming`, a `BoxBody`) cannot be sent twice,
/// so buffer it first (`http_body_util::BodyExt::collect`, then
/// `Full::new(collected.to_bytes())`).
///
/// Given a class function ([`RheostatLayer::classify_request`], before or
/// after `retry`), every attempt of a request is admitted as its class.
pub struct RheostatRetryLayer<
    K,
    R = IdempotentOnly,
    A = Box<dyn Algorithm>,
    C = DefaultClock,
    P = DefaultClass,
> {
    layer: RheostatLayer<K, A, C, P>,
    rule: R,
}

impl<K, R, A: Algorithm, C: Clock, P> RheostatRetryLayer<K, R, A, C, P> {
    /// Retry every request, whatever its method (or whether it has one):
    /// for a dependency that deduplicates requests, or a request type that
    /// does not implement [`Idempotent`].
    pub fn retry_any_method(self) -> RheostatRetryLayer<K, AnyRequest, A, C, P> {
        self.retry_when(AnyRequest)
    }

    /// Retry the requests `rule` allows.
    pub fn retry_when<R2>(self, rule: R2) -> RheostatRetryLayer<K, R2, A, C, P> {
        RheostatRetryLayer {
            layer: self.layer,
            rule,
        }
    }

    /// Admit every attempt of each request as the class `classify` gives
    /// the request: [`RheostatLayer::classify_request`], which says how.
    pub fn classify_request<F>(self, classify: F) -> RheostatRetryLayer<K, R, A, C, ByRequest<F>> {
        RheostatRetryLayer {
            layer: self.layer.classify_request(classify),
            rule: self.rule,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        self.layer.limiter()
    }
}

impl<S, K: Clone, R: Clone, A: Algorithm + 'static, C: Clock, P: Clone> Layer<S>
    for RheostatRetryLayer<K, R, A, C, P>
{
    type Service = RheostatRetry<S, K, R, A, C, P>;

    fn layer(&self, inner: S) -> Self::Service {
        RheostatRetry {
            rheostat: self.layer.layer(inner),
            rule: self.rule.clone(),
            start_queue: start_acquire::<A, C>,
        }
    }
}

impl<K: Clone, R: Clone, A, C, P: Clone> Clone for RheostatRetryLayer<K, R, A, C, P> {
    fn clone(&self) -> Self {
        RheostatRetryLayer {
            layer: self.layer.clone(),
            rule: self.rule.clone(),
        }
    }
}

impl<K: fmt::Debug, R: fmt::Debug, A: Algorithm, C: Clock, P: fmt::Debug> fmt::Debug
    for RheostatRetryLayer<K, R, A, C, P>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RheostatRetryLayer")
            .field("layer", &self.layer)
            .field("rule", &self.rule)
            .finish()
    }
}

/// A [`Rheostat`] that retries failed requests within the limiter's
/// [retry policy](crate::retry). Made by [`RheostatLayer::retry`]; see the
/// [module documentation](super#retries).
///
/// Readiness is the plain service's: failing fast, the inner service's;
/// waiting ([`RheostatLayer::wait`]), a slot for the first attempt is
/// waited for in `poll_ready`. A retry takes its slot without waiting
/// unless the retry policy's [`wait_on_limit`](crate::retry::RetryConfig::wait_on_limit)
/// allows one wait in the queue, and waits for a clone of the inner
/// service to be ready before it is sent.
///
/// Given a class function
/// ([`RheostatLayer::classify_request`]), every attempt is admitted as the
/// request's class, and readiness is the inner service's: waiting, the
/// response future waits for the first attempt's slot, within the retry
/// policy's deadline, which then runs from `call`.
pub struct RheostatRetry<
    S,
    K,
    R = IdempotentOnly,
    A = Box<dyn Algorithm>,
    C = DefaultClock,
    P = DefaultClass,
> {
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

impl<S, Req, K, R, A, C> Service<Req> for RheostatRetry<S, K, R, A, C, DefaultClass>
where
    S: Service<Req> + Clone,
    Req: Clone,
    K: Classify<S::Response, S::Error> + Clone,
    R: RetryRule<Req>,
    A: Algorithm,
    C: Clock,
{
    type Response = S::Response;
    type Error = CallError<S::Error>;
    type Future = RetryResponseFuture<S, Req, K, A, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::<Req>::poll_ready(&mut self.rheostat, cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        self.start(request, None, false)
    }
}

/// With a class function: every attempt admitted as the request's class;
/// readiness is the inner service's.
impl<S, Req, K, R, A, C, F> Service<Req> for RheostatRetry<S, K, R, A, C, ByRequest<F>>
where
    S: Service<Req> + Clone,
    Req: Clone,
    K: Classify<S::Response, S::Error> + Clone,
    R: RetryRule<Req>,
    A: Algorithm,
    C: Clock,
    F: ClassifyRequest<Req>,
{
    type Response = S::Response;
    type Error = CallError<S::Error>;
    type Future = RetryResponseFuture<S, Req, K, A, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.rheostat
            .get_mut()
            .poll_ready(cx)
            .map_err(CallError::Failed)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let class = self.rheostat.classify().get_ref().class(&request);
        let wait = self.rheostat.waits();
        self.start(request, class, wait)
    }
}

impl<S, K, R, A: Algorithm, C: Clock, P> RheostatRetry<S, K, R, A, C, P> {
    /// Starts a call of `request`, every attempt admitted as `class`; the
    /// first waiting in the limiter's queue in the response future if
    /// `wait` (a layer that waits, given a class function), otherwise
    /// admitted here.
    fn start<Req>(
        &mut self,
        request: Req,
        class: Option<Class>,
        wait: bool,
    ) -> RetryResponseFuture<S, Req, K, A, C>
    where
        S: Service<Req> + Clone,
        Req: Clone,
        K: Clone,
        R: RetryRule<Req>,
    {
        let limiter = Arc::clone(self.rheostat.limiter());
        let layer_timeout = self.rheostat.timeout();
        let mut plan = Plan {
            limiter: Arc::clone(&limiter),
            class,
            classifier: self.rheostat.classifier().clone(),
            start_queue: self.start_queue,
            attempts: None,
            timeout: layer_timeout,
            service: None,
            request: None,
        };
        let Some(retry) = limiter.retry() else {
            // No retry policy: one attempt, as the plain service makes.
            if wait {
                plan.service = Some(self.rheostat.take_ready());
                plan.request = Some(request);
                let acquire = (self.start_queue)(Arc::clone(&limiter), None, class);
                return RetryResponseFuture::new(plan, First::Waiting(acquire));
            }
            let first = match self.rheostat.take_slot(class) {
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
        if wait {
            // The first attempt waits for its slot in the response future,
            // within the deadline, and is sent by the service readied for
            // it.
            plan.service = Some(self.rheostat.take_ready());
            plan.request = Some(request);
            let left = retry.left(attempts.call(), limiter.clock().now());
            let acquire = (self.start_queue)(Arc::clone(&limiter), left, class);
            plan.attempts = Some(attempts);
            return RetryResponseFuture::new(plan, First::Waiting(acquire));
        }
        let again = attempts.may_follow(retry);
        let slot = self.rheostat.take_slot(class);
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

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::{AnyRequest, Idempotent, IdempotentOnly, RetryRule};

    fn request(method: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("http://example.com/")
            .body(())
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    #[test]
    fn only_the_idempotent_methods_are_retried_by_default() {
        for method in ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"] {
            assert!(request(method).is_idempotent(), "{method}");
            assert!(IdempotentOnly.may_retry(&request(method)), "{method}");
        }
        for method in ["POST", "PATCH", "CONNECT", "PURGE", "LOCK", "get"] {
            assert!(!request(method).is_idempotent(), "{method}");
            assert!(!IdempotentOnly.may_retry(&request(method)), "{method}");
        }
    }

    #[test]
    fn any_request_retries_every_method_and_any_type() {
        for method in ["GET", "POST", "PATCH", "CONNECT", "PURGE"] {
            assert!(AnyRequest.may_retry(&request(method)), "{method}");
        }
        assert!(AnyRequest.may_retry(&"a request that is no HTTP request"));
    }

    #[test]
    fn the_method_decides_whatever_the_body() {
        let post = http::Request::post("http://example.com/")
            .body(String::from("{}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!post.is_idempotent());
        let put = http::Request::put("http://example.com/")
            .body(vec![1u8, 2, 3])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(put.is_idempotent());
    }
}
