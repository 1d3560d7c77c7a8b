//! [`ClassResponseFuture`]: a request waiting to be admitted as its class,
//! then a [`ResponseFuture`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower_service::Service;

use super::response::ResponseFuture;
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::tower::acquire::Acquire;
use crate::tower::end::{AtResponse, CallEnd};

pin_project! {
    /// The response of a [`Rheostat`](crate::tower::Rheostat) service given a class
    /// function ([`RheostatLayer::classify_request`](crate::tower::RheostatLayer::classify_request)):
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
    pub struct ClassResponseFuture<S, Req, K, A = Box<dyn Algorithm>, C = DefaultClock, M = AtResponse>
    where
        S: Service<Req>,
    {
        #[pin]
        state: ClassState<S, Req, S::Future, K, A, C, M>,
    }
}

pin_project! {
    #[project = ClassStateProj]
    enum ClassState<S, Req, F, K, A, C, M> {
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
            future: ResponseFuture<F, K, A, C, M>,
        },
    }
}

impl<S: Service<Req>, Req, K, A, C, M> ClassResponseFuture<S, Req, K, A, C, M> {
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
    pub(crate) fn admitted(future: ResponseFuture<S::Future, K, A, C, M>) -> Self {
        ClassResponseFuture {
            state: ClassState::Admitted { future },
        }
    }
}

impl<S, Req, K, A, C, M> Future for ClassResponseFuture<S, Req, K, A, C, M>
where
    S: Service<Req>,
    M: CallEnd<S::Response, S::Error, K, A, C>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<M::Response, CallError<S::Error>>;

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

impl<S: Service<Req>, Req, K, A: Algorithm, C: Clock, M> fmt::Debug
    for ClassResponseFuture<S, Req, K, A, C, M>
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
