//! The layer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::class::ByRequest;
use super::classify::Unclassified;
use super::service::Rheostat;
use crate::algorithms::{check, Algorithm, ConfigError};
use crate::clock::{Clock, DefaultClock};
use crate::limiter::Limiter;

/// Wraps a service in a [`Rheostat`] that admits each request through one
/// shared [`Limiter`]; see the [module documentation](super).
///
/// It must be told how to classify results ([`classify`](Self::classify)):
/// until then its classifier is [`Unclassified`](super::Unclassified), and
/// a service made from it cannot be called. After [`retry`](Self::retry),
/// it wraps a service in a [`RheostatRetry`](super::RheostatRetry)
/// instead, which retries failed requests.
///
/// `P` and `R` record what the layer was given: each is `()` until
/// [`classify_request`](Self::classify_request) gives it a class function
/// and [`retry`](Self::retry) a retry rule, then a wrapper of the layer's
/// own (`ByRequest`, `Retrying`), not exported: no code needs to write
/// either (`RheostatLayer<HttpClassifier>` is a layer given neither).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::{algorithms::Fixed, tower::{HttpClassifier, RheostatLayer}, Limiter};
///
/// let limiter = Arc::new(Limiter::new(Fixed::new(32)?));
/// let layer = RheostatLayer::new(limiter)
///     .classify(HttpClassifier::new())
///     .timeout(Duration::from_secs(2))?
///     .wait();
/// # drop(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RheostatLayer<K, A = Box<dyn Algorithm>, C = DefaultClock, P = (), R = ()> {
    limiter: Arc<Limiter<A, C>>,
    classifier: K,
    timeout: Option<Duration>,
    wait: bool,
    classify: P,
    /// `()`, or, after [`retry`](Self::retry), which requests may be sent
    /// again.
    retry: R,
}

impl<A: Algorithm, C: Clock> RheostatLayer<Unclassified, A, C> {
    /// Admit requests through `limiter`, failing fast, with no timeout of
    /// its own, once told how to classify results: a service made from the
    /// layer cannot be called before [`classify`](Self::classify) is given
    /// a classifier ([`Unclassified`](super::Unclassified) says why).
    pub fn new(limiter: Arc<Limiter<A, C>>) -> Self {
        RheostatLayer {
            limiter,
            classifier: Unclassified,
            timeout: None,
            wait: false,
            classify: (),
            retry: (),
        }
    }
}

impl<K, A: Algorithm, C: Clock, P, R> RheostatLayer<K, A, C, P, R> {
    /// Classify results with `classifier` (an [`HttpClassifier`](super::HttpClassifier)
    /// for HTTP, a [`GrpcClassifier`](super::GrpcClassifier) for gRPC, a
    /// [`ResultClassifier`](super::ResultClassifier) if every response is a
    /// success and every error an overload, a closure in a
    /// [`ClassifyFn`](super::ClassifyFn), any [`Classify`](super::Classify)).
    ///
    /// The classifier also says when a call is over
    /// ([`Classify::End`](super::Classify::End)): for every classifier but
    /// a [`GrpcClassifier`](super::GrpcClassifier), when the response comes.
    /// A gRPC call's status comes in the trailers after the body unless the
    /// server failed at once, so a `GrpcClassifier` classifies each call
    /// when its outcome is known — at the response's headers if they say
    /// it, otherwise when the response's body ends. The call's permit is
    /// then held past the response future: the service answers an
    /// `http::Response` whose body (an `http_body::Body` wrapping the inner
    /// one) holds the permit until it ends, and records the outcome
    /// with the latency to then. The layer's [timeout](Self::timeout) runs
    /// on into the body. A body dropped before it ends releases the permit
    /// as the limiter's drop outcome, as a dropped response future does.
    ///
    /// A streaming call holds its slot for as long as its stream lasts:
    /// see [gRPC](super#grpc) for what to do about long streams. The
    /// layer does not [retry](Self::retry) such calls.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use bytes::Bytes;
    /// use http_body_util::{BodyExt, Full};
    /// use rheostat::{algorithms::Fixed, tower::{GrpcClassifier, RheostatLayer}, Limiter};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let limiter = Arc::new(Limiter::new(Fixed::new(8)?));
    /// let client = RheostatLayer::new(Arc::clone(&limiter))
    ///     .classify(GrpcClassifier::new())
    ///     .layer(service_fn(|_: http::Request<()>| async {
    ///         // A gRPC answer whose status comes in the trailers.
    ///         let mut trailers = http::HeaderMap::new();
    ///         trailers.insert("grpc-status", http::HeaderValue::from_static("14"));
    ///         let body = Full::new(Bytes::from_static(b"\0\0\0\0\0")).with_trailers(async { Some(Ok(trailers)) });
    ///         Ok::<_, std::convert::Infallible>(http::Response::new(body))
    ///     }));
    ///
    /// let response = client.oneshot(http::Request::new(())).await?;
    /// assert_eq!(limiter.in_flight(), 1, "the body holds the permit");
    /// let trailers = response.into_body().collect().await?.trailers().cloned();
    /// assert_eq!(trailers.unwrap()["grpc-status"], "14");
    /// assert_eq!(limiter.in_flight(), 0, "released at the status");
    /// # Ok(())
    /// # }
    /// ```
    pub fn classify<K2>(self, classifier: K2) -> RheostatLayer<K2, A, C, P, R> {
        RheostatLayer {
            limiter: self.limiter,
            classifier,
            timeout: self.timeout,
            wait: self.wait,
            classify: self.classify,
            retry: self.retry,
        }
    }

    /// Give each call at most `timeout`; one that runs out ends with
    /// [`CallError::TimedOut`](crate::CallError::TimedOut) and is recorded as
    /// an overload. A probe gets the [probe
    /// timeout](crate::timeout::Timeouts::probe) instead (a breaker's
    /// `probe_timeout`, 30 s by default), with or without this. Prefer this
    /// to an inner `tower::timeout` layer: the hang is seen by the limiter
    /// as what it is, and the inner error type is kept (and an inner timeout
    /// would cut a probe short).
    ///
    /// # Errors
    ///
    /// `tower.timeout` zero or above a year.
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        self.timeout = Some(check::duration("tower.timeout", timeout)?);
        Ok(self)
    }

    /// Wait for a slot in the limiter's queue (as [`Admission::acquire`](crate::Admission::acquire),
    /// bounded by its `max_wait` and queue length) instead of failing fast
    /// when the limit is reached. A throttled call or an open breaker is
    /// still refused at once.
    #[must_use]
    pub fn wait(mut self) -> Self {
        self.wait = true;
        self
    }

    /// Admit each request as the class `classify` gives it (see
    /// [`crate::priority`] and the [module documentation](super#classes)),
    /// for a limiter built with [`priorities`](crate::Builder::priorities):
    /// under load the less critical requests are refused first, and the
    /// queue serves the most critical waiter first. A request it gives no
    /// class (`None`) is of the limiter's default class; a limiter without
    /// priorities ignores classes.
    ///
    /// Failing fast, the request is admitted as its class in `call`, as
    /// without a class function. Waiting ([`wait`](Self::wait)), the slot
    /// can no longer be reserved in `poll_ready`, before the request is
    /// known: `poll_ready` is the inner service's readiness, and the
    /// response future waits for a slot for the request's class, then calls
    /// the inner service readied for it (a clone takes its place in the
    /// service, as tower advises), so the inner service must be `Clone`
    /// (hyper's and tonic's clients, a `service_fn` of a `Clone` closure,
    /// tower's `Buffer` and `BoxCloneService` are). The layer's
    /// [timeout](Self::timeout) runs from admission, after the wait, which
    /// the limiter's `max_wait` bounds. [Retrying](Self::retry), every
    /// attempt is admitted as the request's class.
    ///
    /// The class function also says whether a request may be [cut
    /// early](super::ClassifyRequest::cut_early) by a timeout its limiter
    /// learned: a closure says it may; [`IdempotentOnly`](super::IdempotentOnly)
    /// keeps the layer's timeout whole for a request that is not
    /// idempotent (see the [module documentation](super#calls-not-safe-to-cut-early)).
    ///
    /// A closure needs its argument's type written out
    /// (`|request: &http::Request<Body>|`): the layer learns the request
    /// type only when its service is called.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use rheostat::algorithms::Fixed;
    /// use rheostat::priority::{Class, Priorities, Priority};
    /// use rheostat::tower::{HttpClassifier, RheostatLayer};
    /// use rheostat::{CallError, Limiter, RejectReason};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let limiter = Arc::new(
    ///     Limiter::builder(Fixed::new(4)?)
    ///         .priorities(Priorities::default().share(Priority::Critical, 0.5)?)
    ///         .build()?,
    /// );
    /// let client = RheostatLayer::new(Arc::clone(&limiter))
    ///     .classify(HttpClassifier::new())
    ///     .classify_request(|request: &http::Request<()>| {
    ///         let value = request.headers().get("x-priority")?.to_str().ok()?;
    ///         Priority::parse(value).map(Class::from)
    ///     })
    ///     .layer(service_fn(|_: http::Request<()>| async {
    ///         Ok::<_, std::io::Error>(http::Response::new(()))
    ///     }));
    ///
    /// // Two sheddable calls hold two slots; the two left are kept for
    /// // critical ones.
    /// let shed = || limiter.admission().class(Priority::Sheddable).try_acquire();
    /// let busy = (shed()?, shed()?);
    /// let prefetch = http::Request::get("/").header("x-priority", "sheddable").body(())?;
    /// match client.clone().oneshot(prefetch).await {
    ///     Err(CallError::Rejected(r)) => assert_eq!(r.reason(), RejectReason::LimitReached),
    ///     other => panic!("{other:?}"),
    /// }
    /// let checkout = http::Request::get("/").header("x-priority", "critical").body(())?;
    /// assert!(client.oneshot(checkout).await.is_ok());
    /// # drop(busy);
    /// # Ok(())
    /// # }
    /// ```
    pub fn classify_request<F>(self, classify: F) -> RheostatLayer<K, A, C, ByRequest<F>, R> {
        RheostatLayer {
            limiter: self.limiter,
            classifier: self.classifier,
            timeout: self.timeout,
            wait: self.wait,
            classify: ByRequest(classify),
            retry: self.retry,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }

    /// The same layer, retrying as `retry` says.
    pub(crate) fn with_retry<R2>(self, retry: R2) -> RheostatLayer<K, A, C, P, R2> {
        RheostatLayer {
            limiter: self.limiter,
            classifier: self.classifier,
            timeout: self.timeout,
            wait: self.wait,
            classify: self.classify,
            retry,
        }
    }

    /// Which requests may be sent again.
    pub(crate) fn retry_rule(&self) -> &R {
        &self.retry
    }

    /// The plain service over `inner`, which a retrying one wraps.
    pub(crate) fn rheostat<S>(&self, inner: S) -> Rheostat<S, K, A, C, P>
    where
        K: Clone,
        A: 'static,
        P: Clone,
    {
        Rheostat::new(
            inner,
            Arc::clone(&self.limiter),
            self.classifier.clone(),
            self.timeout.or(self.limiter.timeout_ceiling()),
            self.wait || self.limiter.waits(),
            self.classify.clone(),
        )
    }
}

impl<S, K: Clone, A: Algorithm + 'static, C: Clock, P: Clone> Layer<S>
    for RheostatLayer<K, A, C, P>
{
    type Service = Rheostat<S, K, A, C, P>;

    fn layer(&self, inner: S) -> Self::Service {
        self.rheostat(inner)
    }
}

impl<K: Clone, A, C, P: Clone, R: Clone> Clone for RheostatLayer<K, A, C, P, R> {
    fn clone(&self) -> Self {
        RheostatLayer {
            limiter: Arc::clone(&self.limiter),
            classifier: self.classifier.clone(),
            timeout: self.timeout,
            wait: self.wait,
            classify: self.classify.clone(),
            retry: self.retry.clone(),
        }
    }
}

impl<K: fmt::Debug, A: Algorithm, C: Clock, P: fmt::Debug, R: fmt::Debug> fmt::Debug
    for RheostatLayer<K, A, C, P, R>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RheostatLayer")
            .field("limiter", &self.limiter.name())
            .field("classifier", &self.classifier)
            .field("timeout", &self.timeout)
            .field("wait", &self.wait)
            .field("classify", &self.classify)
            .field("retry", &self.retry)
            .finish()
    }
}
