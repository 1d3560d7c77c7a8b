//! A layer that picks the limiter per request, by a key taken from the
//! request (its host, its route, a tenant), from [`KeyedLimiters`].

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_layer::Layer;
use tower_service::Service;

use super::classify::{Classify, Unclassified};
use super::end::{Answer, Finish};
use super::future::ResponseFuture;
use crate::algorithms::{check, Algorithm, ConfigError};
use crate::clock::{Clock, DefaultClock};
use crate::keyed::KeyedLimiters;
use crate::limiter::Admission;

/// Wraps a service in a [`KeyedRheostat`], which admits each request
/// through the limiter of the request's key: `key` maps a request to it
/// (its host, its route), and [`KeyedLimiters`] hands out that key's
/// limiter, made by its factory the first time the key is seen.
///
/// It fails fast (there is no slot to wait for before the request, and so
/// its key, is known): `poll_ready` is the inner service's readiness, and a
/// refused request ends with [`CallError::Rejected`](crate::CallError::Rejected),
/// or with [`CallError::NoLimiter`](crate::CallError::NoLimiter) if no
/// limiter could be had for a new key (the cap on keys is reached by
/// limiters in use). Outcomes, timeouts and probes are as for
/// [`RheostatLayer`](super::RheostatLayer).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::algorithms::{Algorithm, Fixed};
/// use rheostat::keyed::KeyedLimiters;
/// use rheostat::tower::{HttpClassifier, KeyedLayer};
/// use rheostat::Limiter;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// // Eight calls at a time to the payments API, 32 to any other host.
/// let hosts = Arc::new(
///     KeyedLimiters::builder(|host: &String| {
///         let limit = if host == "api.payments.example" { 8 } else { 32 };
///         let policy: Box<dyn Algorithm> = Box::new(Fixed::new(limit)?);
///         Ok(Limiter::builder(policy).name(host.clone()))
///     })
///     .build()?,
/// );
/// let by_host = |request: &http::Request<()>| request.uri().host().unwrap_or("").to_owned();
/// let client = KeyedLayer::new(Arc::clone(&hosts), by_host)
///     .classify(HttpClassifier::new())
///     .timeout(Duration::from_millis(800))?
///     .layer(service_fn(|_: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new("ok"))
///     }));
///
/// let request = http::Request::get("https://api.payments.example/charge").body(())?;
/// client.oneshot(request).await?;
/// assert_eq!(hosts.get("api.payments.example")?.gate().limit, 8);
/// # Ok(())
/// # }
/// ```
pub struct KeyedLayer<F, K, Key = String, C = DefaultClock> {
    limiters: Arc<KeyedLimiters<Key, C>>,
    key: F,
    classifier: K,
    timeout: Option<Duration>,
}

impl<F, Key, C> KeyedLayer<F, Unclassified, Key, C> {
    /// Admit each request through the limiter `limiters` holds for
    /// `key(&request)`, with no timeout of its own, once told how to
    /// classify results: a service made from the layer cannot be called
    /// before [`classify`](Self::classify) is given a classifier
    /// ([`Unclassified`](super::Unclassified) says why).
    pub fn new(limiters: Arc<KeyedLimiters<Key, C>>, key: F) -> Self {
        KeyedLayer {
            limiters,
            key,
            classifier: Unclassified,
            timeout: None,
        }
    }
}

impl<F, K, Key, C> KeyedLayer<F, K, Key, C> {
    /// Classify results with `classifier`, as
    /// [`RheostatLayer::classify`](super::RheostatLayer::classify): for
    /// gRPC, a [`GrpcClassifier`](crate::tower::GrpcClassifier) classifies
    /// each call when its outcome is known, holding its permit in the
    /// response's body until then.
    pub fn classify<K2>(self, classifier: K2) -> KeyedLayer<F, K2, Key, C> {
        KeyedLayer {
            limiters: self.limiters,
            key: self.key,
            classifier,
            timeout: self.timeout,
        }
    }

    /// Give each call at most `timeout`, as
    /// [`RheostatLayer::timeout`](super::RheostatLayer::timeout).
    ///
    /// # Errors
    ///
    /// `tower.timeout` zero or above a year.
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        self.timeout = Some(check::duration("tower.timeout", timeout)?);
        Ok(self)
    }

    /// The limiters.
    pub fn limiters(&self) -> &Arc<KeyedLimiters<Key, C>> {
        &self.limiters
    }
}

impl<S, F: Clone, K: Clone, Key, C> Layer<S> for KeyedLayer<F, K, Key, C> {
    type Service = KeyedRheostat<S, F, K, Key, C>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedRheostat {
            inner,
            limiters: Arc::clone(&self.limiters),
            key: self.key.clone(),
            classifier: self.classifier.clone(),
            timeout: self.timeout,
        }
    }
}

impl<F: Clone, K: Clone, Key, C> Clone for KeyedLayer<F, K, Key, C> {
    fn clone(&self) -> Self {
        KeyedLayer {
            limiters: Arc::clone(&self.limiters),
            key: self.key.clone(),
            classifier: self.classifier.clone(),
            timeout: self.timeout,
        }
    }
}

impl<F, K: fmt::Debug, Key, C> fmt::Debug for KeyedLayer<F, K, Key, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLayer")
            .field("classifier", &self.classifier)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A service that admits each request through the limiter of its key. Made
/// by [`KeyedLayer`].
pub struct KeyedRheostat<S, F, K, Key = String, C = DefaultClock> {
    inner: S,
    limiters: Arc<KeyedLimiters<Key, C>>,
    key: F,
    classifier: K,
    timeout: Option<Duration>,
}

impl<S, F, K, Key, C> KeyedRheostat<S, F, K, Key, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, Req, F, K, Key, C> Service<Req> for KeyedRheostat<S, F, K, Key, C>
where
    S: Service<Req>,
    F: Fn(&Req) -> Key,
    K: Classify<S::Response, S::Error> + Clone,
    K::End: Finish<S::Response, S::Error, K, Box<dyn Algorithm>, C>,
    Key: Eq + Hash + Clone,
    C: Clock + Clone,
{
    type Response = Answer<K, S::Response, S::Error, Box<dyn Algorithm>, C>;
    type Error = crate::CallError<S::Error>;
    type Future = ResponseFuture<S, Req, K, Box<dyn Algorithm>, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(crate::CallError::Failed)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let key = (self.key)(&request);
        let limiter = match self.limiters.get(&key) {
            Ok(limiter) => limiter,
            Err(error) => return ResponseFuture::no_limiter(error, self.classifier.clone()),
        };
        let permit = match Admission::new(Arc::clone(&limiter)).timed().try_acquire() {
            Ok(permit) => permit,
            Err(rejection) => {
                return ResponseFuture::rejected(rejection, self.classifier.clone());
            }
        };
        ResponseFuture::called(
            &mut self.inner,
            request,
            permit,
            self.classifier.clone(),
            self.timeout.or(limiter.timeout_ceiling()),
        )
    }
}

impl<S: Clone, F: Clone, K: Clone, Key, C> Clone for KeyedRheostat<S, F, K, Key, C> {
    fn clone(&self) -> Self {
        KeyedRheostat {
            inner: self.inner.clone(),
            limiters: Arc::clone(&self.limiters),
            key: self.key.clone(),
            classifier: self.classifier.clone(),
            timeout: self.timeout,
        }
    }
}

impl<S: fmt::Debug, F, K: fmt::Debug, Key, C> fmt::Debug for KeyedRheostat<S, F, K, Key, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRheostat")
            .field("inner", &self.inner)
            .field("classifier", &self.classifier)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
