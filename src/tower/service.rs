//! The service.

use std::fmt;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::acquire::{start_acquire, Acquire, StartAcquire};
use super::class::Admit;
use super::classify::Classify;
use super::end::{Answer, Finish};
use super::future::ResponseFuture;
use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::{CallError, Rejection};
use crate::limiter::{Admission, Limiter, OwnedPermit};
use crate::priority::Class;

/// A service that admits each request through a [`Limiter`], holds the
/// permit until the response future completes, and records the classified
/// outcome. Made by [`RheostatLayer`](super::RheostatLayer); see the [module
/// documentation](super) for readiness.
///
/// `P` is how requests are admitted: for a layer without a class function
/// (`()`), every request of the limiter's default class, a waiting slot
/// reserved in `poll_ready`; after
/// [`RheostatLayer::classify_request`](super::RheostatLayer::classify_request),
/// each request as its class (waiting, in the response future, so the
/// inner service must be `Clone`).
///
/// When a call is over is the classifier's [`Classify::End`]: when the
/// inner service's response comes, or, with a
/// [`GrpcClassifier`](super::GrpcClassifier), when the response's body
/// ends (the service then answers an `http::Response` whose body holds
/// the permit).
pub struct Rheostat<S, K, A = Box<dyn Algorithm>, C = crate::clock::DefaultClock, P = ()> {
    inner: S,
    limiter: Arc<Limiter<A, C>>,
    classifier: K,
    timeout: Option<Duration>,
    wait: bool,
    classify: P,
    start_acquire: StartAcquire<A, C>,
    /// Waiting for a slot (wait mode only).
    acquiring: Option<Acquire<A, C>>,
    /// The slot (or refusal) `poll_ready` got for the next `call`.
    reserved: Option<Result<OwnedPermit<A, C>, Rejection>>,
}

impl<S, K, A: Algorithm + 'static, C: Clock, P> Rheostat<S, K, A, C, P> {
    pub(crate) fn new(
        inner: S,
        limiter: Arc<Limiter<A, C>>,
        classifier: K,
        timeout: Option<Duration>,
        wait: bool,
        classify: P,
    ) -> Self {
        Rheostat {
            inner,
            limiter,
            classifier,
            timeout,
            wait,
            classify,
            start_acquire: start_acquire::<A, C>,
            acquiring: None,
            reserved: None,
        }
    }
}

impl<S, K, A: Algorithm, C: Clock, P> Rheostat<S, K, A, C, P> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped (a slot reserved by `poll_ready` is
    /// given back).
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }

    /// The classifier.
    pub(crate) fn classifier(&self) -> &K {
        &self.classifier
    }

    /// The layer's timeout.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The class function.
    pub(crate) fn classify(&self) -> &P {
        &self.classify
    }

    /// Starts waiting for a slot for a call of `class`, that may be
    /// `cut_early` or not.
    pub(crate) fn start_acquire(&self, class: Option<Class>, cut_early: bool) -> Acquire<A, C> {
        (self.start_acquire)(Arc::clone(&self.limiter), None, class, cut_early)
    }

    /// The slot for the next call: the one `poll_ready` reserved (or its
    /// refusal: only without a class function, whose every request may be
    /// cut early), or, failing fast or called without `poll_ready`, one
    /// taken now for a call of `class` (the default class if `None`) that
    /// may be `cut_early` or not.
    pub(crate) fn take_slot(
        &mut self,
        class: Option<Class>,
        cut_early: bool,
    ) -> Result<OwnedPermit<A, C>, Rejection> {
        match self.reserved.take() {
            Some(slot) => slot,
            None => Admission::new(Arc::clone(&self.limiter))
                .class(class)
                .cut_early(cut_early)
                .timed()
                .try_acquire(),
        }
    }
}

impl<S, K, A: Algorithm, C: Clock, P> Rheostat<S, K, A, C, P> {
    /// Readiness for a request admitted as `P` says: waiting, a slot for
    /// the next call reserved first if `P` reserves one (a refusal is the
    /// next call's answer, and the inner service is not asked), then the
    /// inner service's readiness.
    pub(crate) fn poll_admission<Req>(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), CallError<S::Error>>>
    where
        S: Service<Req>,
        P: Admit<S, Req>,
    {
        if self.wait && P::RESERVES && self.reserved.is_none() {
            let (limiter, start) = (&self.limiter, self.start_acquire);
            let acquiring = self
                .acquiring
                .get_or_insert_with(|| start(Arc::clone(limiter), None, None, true));
            let slot = ready!(acquiring.as_mut().poll(cx));
            self.acquiring = None;
            self.reserved = Some(slot);
        }
        if let Some(Err(_)) = self.reserved {
            // The refusal is the next call's answer; the inner service is
            // not called, so its readiness does not matter.
            return Poll::Ready(Ok(()));
        }
        self.inner.poll_ready(cx).map_err(CallError::Failed)
    }

    /// The inner service readied by `poll_ready`, for a response future to
    /// call later, if `P` admits requests there (a clone takes its place);
    /// `None` if the service does not wait, or `P` reserves its slots in
    /// `poll_ready`.
    pub(crate) fn hand_over<Req>(&mut self) -> Option<S>
    where
        P: Admit<S, Req>,
    {
        if self.wait {
            P::hand_over(&mut self.inner)
        } else {
            None
        }
    }
}

/// Admission is as `P` says: without a class function, every request of
/// the limiter's default class, a waiting slot reserved in `poll_ready`;
/// with one, for the request's class, so it is decided per request — in
/// `call` failing fast, in the response future waiting — and `poll_ready`
/// is the inner service's readiness.
impl<S, Req, K, A, C, P> Service<Req> for Rheostat<S, K, A, C, P>
where
    S: Service<Req>,
    K: Classify<S::Response, S::Error> + Clone,
    K::End: Finish<S::Response, S::Error, K, A, C>,
    A: Algorithm,
    C: Clock,
    P: Admit<S, Req>,
{
    type Response = Answer<K, S::Response, S::Error, A, C>;
    type Error = CallError<S::Error>;
    type Future = ResponseFuture<S, Req, K, A, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_admission(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let (class, cut_early) = self.classify.admit(&request);
        let classifier = self.classifier.clone();
        if let Some(service) = self.hand_over() {
            let acquire = self.start_acquire(class, cut_early);
            return ResponseFuture::waiting(acquire, service, request, classifier, self.timeout);
        }
        match self.take_slot(class, cut_early) {
            Ok(permit) => {
                ResponseFuture::called(&mut self.inner, request, permit, classifier, self.timeout)
            }
            Err(rejection) => ResponseFuture::rejected(rejection, classifier),
        }
    }
}

impl<S: Clone, K: Clone, A: Algorithm, C: Clock, P: Clone> Clone for Rheostat<S, K, A, C, P> {
    /// A clone shares the limiter but not a slot reserved by `poll_ready`.
    fn clone(&self) -> Self {
        Rheostat {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            classifier: self.classifier.clone(),
            timeout: self.timeout,
            wait: self.wait,
            classify: self.classify.clone(),
            start_acquire: self.start_acquire,
            acquiring: None,
            reserved: None,
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug, A: Algorithm, C: Clock, P: fmt::Debug> fmt::Debug
    for Rheostat<S, K, A, C, P>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rheostat")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter.name())
            .field("classifier", &self.classifier)
            .field("timeout", &self.timeout)
            .field("wait", &self.wait)
            .field("classify", &self.classify)
            .field("reserved", &self.reserved.is_some())
            .finish_non_exhaustive()
    }
}
