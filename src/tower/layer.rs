//! The layer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use super::classify::ResultClassifier;
use super::service::Rheostat;
use crate::algorithms::{check, Algorithm, ConfigError};
use crate::clock::{Clock, DefaultClock};
use crate::limiter::Limiter;

/// Wraps a service in a [`Rheostat`] that admits each request through one
/// shared [`Limiter`]; see the [module documentation](super).
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
pub struct RheostatLayer<K = ResultClassifier, A = Box<dyn Algorithm>, C = DefaultClock> {
    limiter: Arc<Limiter<A, C>>,
    classifier: K,
    timeout: Option<Duration>,
    wait: bool,
}

impl<A: Algorithm, C: Clock> RheostatLayer<ResultClassifier, A, C> {
    /// Admit requests through `limiter`, failing fast, counting a response
    /// as a success and an error as an overload, with no timeout of its own.
    pub fn new(limiter: Arc<Limiter<A, C>>) -> Self {
        RheostatLayer {
            limiter,
            classifier: ResultClassifier,
            timeout: None,
            wait: false,
        }
    }
}

impl<K, A: Algorithm, C: Clock> RheostatLayer<K, A, C> {
    /// Classify results with `classifier` (an [`HttpClassifier`](super::HttpClassifier),
    /// a closure in a [`ClassifyFn`](super::ClassifyFn), any
    /// [`Classify`](super::Classify)).
    pub fn classify<K2>(self, classifier: K2) -> RheostatLayer<K2, A, C> {
        RheostatLayer {
            limiter: self.limiter,
            classifier,
            timeout: self.timeout,
            wait: self.wait,
        }
    }

    /// Give each call at most `timeout`; one that runs out ends with
    /// [`CallError::TimedOut`](crate::CallError::TimedOut) and is recorded as
    /// an overload. A probe gets the [probe
    /// timeout](crate::Limiter::probe_timeout) instead (a breaker's
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

    /// Wait for a slot in the limiter's queue (as [`Limiter::acquire`],
    /// bounded by its `max_wait` and queue length) instead of failing fast
    /// when the limit is reached. A throttled call or an open breaker is
    /// still refused at once.
    #[must_use]
    pub fn wait(mut self) -> Self {
        self.wait = true;
        self
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }
}

impl<S, K: Clone, A: Algorithm + 'static, C: Clock> Layer<S> for RheostatLayer<K, A, C> {
    type Service = Rheostat<S, K, A, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Rheostat::new(
            inner,
            Arc::clone(&self.limiter),
            self.classifier.clone(),
            self.timeout,
            self.wait,
        )
    }
}

impl<K: Clone, A, C> Clone for RheostatLayer<K, A, C> {
    fn clone(&self) -> Self {
        RheostatLayer {
            limiter: Arc::clone(&self.limiter),
            classifier: self.classifier.clone(),
            timeout: self.timeout,
            wait: self.wait,
        }
    }
}

impl<K: fmt::Debug, A: Algorithm, C: Clock> fmt::Debug for RheostatLayer<K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RheostatLayer")
            .field("limiter", &self.limiter.name())
            .field("classifier", &self.classifier)
            .field("timeout", &self.timeout)
            .field("wait", &self.wait)
            .finish()
    }
}
