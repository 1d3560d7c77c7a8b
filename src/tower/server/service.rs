//! [`Shed`]: a server service behind a limiter.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::future::{is_grpc, ShedFuture, State};
use super::settings::Settings;
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::limiter::{Admission, Limiter};
use crate::tower::acquire::StartAcquire;
use crate::tower::class::ClassifyRequest;

/// A server service behind a [`Limiter`]: made by [`ShedLayer`](super::ShedLayer), whose
/// documentation says what it does with each request.
pub struct Shed<S, A = Box<dyn Algorithm>, C = DefaultClock, P = ()> {
    pub(super) inner: S,
    pub(super) limiter: Arc<Limiter<A, C>>,
    pub(super) settings: Settings,
    pub(super) classify: P,
    pub(super) start_acquire: StartAcquire<A, C>,
}

impl<S, A, C, P> Shed<S, A, C, P> {
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

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }
}

impl<S, B, ResBody, A, C, P> Service<Request<B>> for Shed<S, A, C, P>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    ResBody: Default,
    A: Algorithm,
    C: Clock,
    P: ClassifyRequest<Request<B>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ShedFuture<S, Request<B>, A, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let settings = self.settings;
        let class = self.classify.class(&request).or(settings.unclassified);
        let grpc = is_grpc(request.headers());
        if settings.wait {
            // The service readied for this request goes with it, to be
            // called once a slot is had.
            let clone = self.inner.clone();
            let ready = std::mem::replace(&mut self.inner, clone);
            // A server gives no timeout: nothing to keep whole.
            let acquire = (self.start_acquire)(Arc::clone(&self.limiter), None, class, true);
            return ShedFuture::new(
                State::Waiting {
                    acquire,
                    service: Some(ready),
                    request: Some(request),
                },
                None,
                settings,
                grpc,
            );
        }
        let admitted = Admission::new(Arc::clone(&self.limiter))
            .class(class)
            .try_acquire();
        match admitted {
            Ok(permit) => ShedFuture::new(
                State::Called {
                    future: self.inner.call(request),
                },
                Some(permit),
                settings,
                grpc,
            ),
            Err(rejection) => ShedFuture::new(State::Refused { rejection }, None, settings, grpc),
        }
    }
}

impl<S: Clone, A, C, P: Clone> Clone for Shed<S, A, C, P> {
    fn clone(&self) -> Self {
        Shed {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            settings: self.settings,
            classify: self.classify.clone(),
            start_acquire: self.start_acquire,
        }
    }
}

impl<S: fmt::Debug, A, C, P> fmt::Debug for Shed<S, A, C, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shed")
            .field("inner", &self.inner)
            .field("limiter", &self.limiter)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
