//! [`ResponseFuture`]: a request admitted (waiting in the limiter's queue
//! first, if it must), then one [`Call`] under its permit.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower_service::Service;

use super::call::Call;
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::{CallError, Rejection};
use crate::limiter::OwnedPermit;
use crate::tower::acquire::Acquire;
use crate::tower::classify::Classify;
use crate::tower::end::{Answer, Finish};

pin_project! {
    /// The response of a [`Rheostat`](crate::tower::Rheostat) or
    /// [`KeyedRheostat`](crate::tower::KeyedRheostat) service: the inner
    /// service's response, or why there is none.
    ///
    /// It holds the call's permit until it completes; the outcome is then
    /// recorded as the classifier says (or as an overload if the timeout ran
    /// out). With a classifier that reads the outcome at the end of the
    /// body ([`GrpcClassifier`](crate::tower::GrpcClassifier)), a response
    /// whose headers do not say the outcome takes the permit on in its
    /// body, a [`ResponseBody`](super::ResponseBody), with what is left of
    /// the timeout.
    ///
    /// A request admitted as its class by a layer that waits
    /// ([`RheostatLayer::classify_request`](crate::tower::RheostatLayer::classify_request)
    /// and [`wait`](crate::tower::RheostatLayer::wait)) first waits in the
    /// limiter's queue for a slot for its class, holding the request and the
    /// inner service readied for it, then calls that service; the layer's
    /// timeout runs from then. Otherwise the request was admitted (or
    /// refused) in `call`.
    ///
    /// # Cancel safety
    ///
    /// Dropped while waiting, it leaves the limiter's queue (a slot handed
    /// to it goes to the next waiter), and the request is never sent.
    /// Dropped after, it drops the inner call and releases the permit as
    /// the limiter's drop outcome ([`Outcome::Ignore`](crate::Outcome::Ignore)
    /// unless configured otherwise).
    ///
    /// # Panics
    ///
    /// If polled after it completed, or, with a timeout or while waiting for
    /// a slot under a limiter with a `max_wait`, polled outside a Tokio
    /// runtime with the time driver enabled.
    pub struct ResponseFuture<S, Req, K, A = Box<dyn Algorithm>, C = DefaultClock>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req, S::Future, K, A, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req, F, K, A, C> {
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
            call: Call<F, K, A, C>,
        },
    }
}

impl<S: Service<Req>, Req, K, A: Algorithm, C: Clock> ResponseFuture<S, Req, K, A, C> {
    /// Waits for `acquire`, then sends `request` with `service`.
    pub(crate) fn waiting(
        acquire: Acquire<A, C>,
        service: S,
        request: Req,
        classifier: K,
        timeout: Option<Duration>,
    ) -> Self {
        ResponseFuture {
            state: State::Waiting {
                acquire,
                service: Some(service),
                request: Some(request),
                classifier: Some(classifier),
                timeout,
            },
        }
    }

    /// `request` sent with `service` under `permit` (see [`Call::new`]).
    pub(crate) fn called(
        service: &mut S,
        request: Req,
        permit: OwnedPermit<A, C>,
        classifier: K,
        timeout: Option<Duration>,
    ) -> Self {
        Self::admitted(Call::new(
            service.call(request),
            permit,
            classifier,
            timeout,
        ))
    }

    /// Refused by the limiter.
    pub(crate) fn rejected(rejection: Rejection, classifier: K) -> Self {
        Self::admitted(Call::rejected(rejection, classifier))
    }

    /// No limiter could be had for the request's key.
    pub(crate) fn no_limiter(error: crate::keyed::KeyedError, classifier: K) -> Self {
        Self::admitted(Call::no_limiter(error, classifier))
    }

    fn admitted(call: Call<S::Future, K, A, C>) -> Self {
        ResponseFuture {
            state: State::Admitted { call },
        }
    }
}

impl<S, Req, K, A, C> Future for ResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
    K: Classify<S::Response, S::Error>,
    K::End: Finish<S::Response, S::Error, K, A, C>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<Answer<K, S::Response, S::Error, A, C>, CallError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let call = match state.as_mut().project() {
                StateProj::Admitted { call } => return call.poll(cx),
                StateProj::Waiting {
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
                            Call::new(service.call(request), permit, classifier, *timeout)
                        }
                        Err(rejection) => Call::rejected(rejection, classifier),
                    }
                }
            };
            state.set(State::Admitted { call });
        }
    }
}

impl<S: Service<Req>, Req, K, A: Algorithm, C: Clock> fmt::Debug
    for ResponseFuture<S, Req, K, A, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::Waiting { .. } => f
                .debug_struct("ResponseFuture")
                .field("state", &"waiting")
                .finish_non_exhaustive(),
            State::Admitted { call } => f
                .debug_struct("ResponseFuture")
                .field("state", &"admitted")
                .field("call", call)
                .finish_non_exhaustive(),
        }
    }
}
