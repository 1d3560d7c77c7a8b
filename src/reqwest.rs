//! [`RheostatMiddleware`]: a [`reqwest_middleware`] middleware that admits
//! each request through a [`Limiter`] (the `reqwest` feature).

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ::reqwest::{Request, Response};
use http::Extensions;
use reqwest_middleware::{Error, Middleware, Next, Result};

use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::limiter::{Admission, Limiter};
use crate::tower::{HttpClassifier, Idempotent, NotIdempotent};

/// Admits each request of a [`reqwest_middleware::ClientWithMiddleware`]
/// through a [`Limiter`], as [`Limiter::call`] admits a call: a request
/// that finds the limit reached waits for a slot if the limiter
/// [waits](crate::Builder::wait) (at most its
/// [`max_wait`](crate::Builder::max_wait)), else is refused at once; each
/// attempt is given the limiter's attempt timeout in force (its
/// [`Builder::timeout`](crate::Builder::timeout), a
/// [learned](crate::timeout) one below it), or the request's own
/// [`timeout`](reqwest::RequestBuilder::timeout) as the ceiling; the
/// response is classified as [`HttpClassifier`] classifies it (5xx and 429
/// are overloads, an error from the client too) and its outcome recorded.
/// The permit is released when the response's headers come.
///
/// With a [retry policy](crate::Builder::retry) on the limiter, a request
/// whose method is [idempotent](Idempotent), that carries no
/// [`NotIdempotent`] extension
/// ([`with_extension`](reqwest_middleware::RequestBuilder::with_extension))
/// and whose body can be copied (not a stream) is retried as the
/// classifier's verdict allows, no sooner than the server's `Retry-After`;
/// another request is sent once. A request that is not idempotent is never
/// cut early by a learned timeout: it keeps the ceiling (see
/// [`Admission::cut_early`]).
///
/// # Errors
///
/// Those the rest of the chain returns, as they are; and, made here as a
/// [`reqwest_middleware::Error::Middleware`]: a refusal, which downcasts
/// to a [`Rejection`](crate::Rejection); an attempt that ran out of time,
/// to a `CallError<Infallible>` ([`CallError::TimedOut`]); a request
/// timeout of zero or over a year, to a [`ConfigError`](crate::ConfigError).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::reqwest::RheostatMiddleware;
/// use rheostat::{algorithms::Fixed, Limiter, Rejection};
/// use reqwest_middleware::ClientBuilder;
///
/// let payments = Arc::new(
///     Limiter::builder(Fixed::new(1)?)
///         .timeout(Duration::from_secs(2))
///         .build()?,
/// );
/// let client = ClientBuilder::new(reqwest::Client::new())
///     .with(RheostatMiddleware::new(Arc::clone(&payments)))
///     .build();
///
/// // The one slot is taken: the next request is refused without being sent.
/// let held = payments.try_acquire()?;
/// let refused = client.get("http://127.0.0.1:9/charge").send().await.unwrap_err();
/// let rejection = match &refused {
///     reqwest_middleware::Error::Middleware(e) => e.downcast_ref::<Rejection>(),
///     reqwest_middleware::Error::Reqwest(_) => None,
/// };
/// assert!(rejection.is_some(), "{refused}");
/// held.success();
/// # Ok(())
/// # }
/// ```
pub struct RheostatMiddleware<A = Box<dyn Algorithm>, C = DefaultClock> {
    limiter: Arc<Limiter<A, C>>,
    classifier: HttpClassifier,
}

impl<A, C> RheostatMiddleware<A, C> {
    /// A middleware admitting requests through `limiter`, classifying
    /// responses with [`HttpClassifier::new`].
    pub fn new(limiter: Arc<Limiter<A, C>>) -> Self {
        RheostatMiddleware {
            limiter,
            classifier: HttpClassifier::new(),
        }
    }

    /// Classify responses with `classifier` (a 429 that is not an
    /// overload, a slow call, a longer `Retry-After`).
    #[must_use]
    pub fn classify(mut self, classifier: HttpClassifier) -> Self {
        self.classifier = classifier;
        self
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }
}

impl<A, C> Clone for RheostatMiddleware<A, C> {
    fn clone(&self) -> Self {
        RheostatMiddleware {
            limiter: Arc::clone(&self.limiter),
            classifier: self.classifier,
        }
    }
}

impl<A: Algorithm, C: Clock> fmt::Debug for RheostatMiddleware<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RheostatMiddleware")
            .field("limiter", &self.limiter.name())
            .field("classifier", &self.classifier)
            .finish()
    }
}

/// A response and how long its attempt took.
type Answered = (Response, Duration);

#[async_trait::async_trait]
impl<A, C> Middleware for RheostatMiddleware<A, C>
where
    A: Algorithm + Send + Sync + 'static,
    C: Clock + Send + Sync + 'static,
{
    /// Admits, sends and records `request`, as the [type](RheostatMiddleware) says.
    ///
    /// # Cancel safety
    ///
    /// As [`Limiter::call`]: dropped while waiting for a slot, the request
    /// leaves the queue; dropped in flight, its permit records the
    /// limiter's drop outcome.
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let limiter: &Limiter<A, C> = &self.limiter;
        let idempotent = Idempotent::is_idempotent(request.method())
            && extensions.get::<NotIdempotent>().is_none();
        let copyable = request.body().is_none_or(|body| body.as_bytes().is_some());
        let mut admission = Admission::new(limiter).cut_early(idempotent);
        if let Some(timeout) = request.timeout() {
            admission = admission.timeout(*timeout);
        }
        if !(idempotent && copyable) {
            admission = admission.send_once();
        }
        // Each attempt sends a copy, or the request itself if it is sent
        // once; the extensions go to one attempt at a time.
        let mut request = Some(request);
        let extensions = tokio::sync::Mutex::new(extensions);
        let (extensions, classifier) = (&extensions, self.classifier);
        let make = || {
            let sent = if idempotent && copyable {
                request.as_ref().and_then(Request::try_clone)
            } else {
                request.take()
            };
            let next = next.clone();
            async move {
                let Some(sent) = sent else {
                    // Not reached: a request sent once is made once.
                    return Err(Error::middleware(std::io::Error::other(
                        "a request whose body cannot be copied is sent once",
                    )));
                };
                let started = limiter.clock().now();
                let response = next.run(sent, &mut **extensions.lock().await).await?;
                Ok((
                    response,
                    limiter.clock().now().saturating_duration_since(started),
                ))
            }
        };
        let classify = |result: &Result<Answered>| {
            let head = result.as_ref().ok().map(|(r, _)| (r.status(), r.headers()));
            let latency = result
                .as_ref()
                .map_or(Duration::ZERO, |(_, latency)| *latency);
            classifier.head_verdict(head, latency)
        };
        match admission.call(classify, make).await {
            Ok((response, _)) => Ok(response),
            Err(CallError::Failed(error)) => Err(error),
            Err(CallError::Rejected(rejection)) => Err(Error::middleware(rejection)),
            Err(CallError::TimedOut(after)) => {
                Err(Error::middleware(CallError::<Infallible>::TimedOut(after)))
            }
            Err(CallError::InvalidTimeout(error)) => Err(Error::middleware(error)),
            Err(CallError::NoLimiter(error)) => Err(Error::middleware(error)),
        }
    }
}
